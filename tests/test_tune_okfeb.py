"""The OK-FEB learners' shared-work search engine against independent fits, (candidate, split) by split."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import KFold, StratifiedKFold

from gpuksvm.array import backend as bk
from gpuksvm.estimators.okfeb import (LEARNER_PARAMS, BudgetTooSmallWarning, OKFEBClassifier, OKFEBRegressor,
                                      fit_okfeb_grid)
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.model_selection import okfeb as engine
from gpuksvm.model_selection.shared import engine_for
from gpuksvm.solvers.okfeb import training

from _tune_data import shared_fits, xor_classes


def _classes(n=500, classes=2, seed=0):
    return xor_classes(n, classes=classes, seed=seed, features=3, noise=0.2)


def _targets(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.normal(size=n)


def _host(a):
    return np.asarray(bk.to_host(a))


def _same_model(got, ref, X, rtol=0.0):
    """The same extractor, learner and capacity check as the model's own fit (``rtol``: on a GPU,
    where the order of a reduction's threads varies between any two runs)."""
    mine, theirs = got.get_params(), ref.get_params()
    if isinstance(theirs["random_state"], np.random.RandomState):     # cloned: equal state, not the same object
        assert type(mine.pop("random_state")) is type(theirs.pop("random_state"))
    assert mine == theirs
    assert got.n_features_in_ == ref.n_features_in_
    close = np.testing.assert_array_equal if rtol == 0 else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol))
    close(_host(got.extractor_.transform(X)), _host(ref.extractor_.transform(X)))
    close(got.coef_, ref.coef_)
    close(got.intercept_, ref.intercept_)
    assert got.capacity_check_.keys() == ref.capacity_check_.keys()
    for key, value in ref.capacity_check_.items():
        if key != "seconds":
            assert got.capacity_check_[key] == (value if rtol == 0 or not isinstance(value, float)
                                                else pytest.approx(value, rel=1e-6, abs=1e-6)), key
    assert got.memory_fallback_ == ref.memory_fallback_
    if rtol == 0:
        np.testing.assert_array_equal(_host(got.predict(X)), _host(ref.predict(X)))


def _check_equivalent(est, X, y, splits, cands, rtol=0.0):
    pairs = shared_fits(engine.search_okfeb, est, X, y, splits, cands, engine.SHARED)
    for f, ref in pairs:
        _same_model(f.estimator, ref, X[splits[f.split][1]], rtol)
    return [f for f, _ in pairs]


def test_the_registry_gives_both_learners_the_engine():
    assert engine_for(OKFEBClassifier()) is engine.search_okfeb
    assert engine_for(OKFEBRegressor()) is engine.search_okfeb


@pytest.mark.filterwarnings("ignore::gpuksvm.estimators.okfeb.BudgetTooSmallWarning")
@pytest.mark.parametrize("solver", ["exact", "online"])
@pytest.mark.parametrize("classes", [2, 3])
def test_classifier_grid_matches_independent_fits(solver, classes):
    X, y = _classes(classes=classes)
    est = OKFEBClassifier(gamma=1.0, rank=8, n_landmarks=24, solver=solver, n_epochs=2, device="cpu",
                          random_state=0)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    cands = [{"alpha": a, "fit_intercept": b} for a in (1e-4, 1e-2) for b in (True, False)]
    _check_equivalent(est, X, y, splits, cands)


@pytest.mark.parametrize("solver", ["exact", "online"])
def test_regressor_grid_matches_independent_fits(solver):
    X, y = _targets()
    est = OKFEBRegressor(gamma=0.5, rank=10, n_landmarks=30, solver=solver, device="cpu", random_state=3)
    splits = list(KFold(3, shuffle=True, random_state=0).split(X))
    cands = [{"alpha": a, "learning_rate": lr, "normalize": nz}
             for a in (1e-4, 1e-1) for lr in (0.05, 0.2) for nz in (True, False)][:5]
    _check_equivalent(est, X, y, splits, cands)


@pytest.mark.filterwarnings("ignore::gpuksvm.estimators.okfeb.BudgetTooSmallWarning")
def test_a_random_state_instance_and_no_shuffle_give_each_model_its_own_fits_draws():
    # with shuffle=False the check draws its sample from the generator the passes left: each
    # learner's check starts from a copy of that state, as its own fit would
    X, y = _classes(n=300)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=1).split(X, y))
    cands = [{"alpha": a} for a in (1e-4, 1e-3, 1e-2)]
    for shuffle in (True, False):
        est = OKFEBClassifier(gamma=1.0, rank=6, n_landmarks=20, shuffle=shuffle, device="cpu",
                              random_state=np.random.RandomState(7))
        _check_equivalent(est, X, y, splits, cands)


def test_the_extractor_streams_once_per_fold_and_group(monkeypatch):
    calls = []
    real = training.fit_passes

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "fit_passes", counted)
    X, y = _classes(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    cands = [{"gamma": g, "alpha": a} for g in (0.5, 2.0) for a in (1e-4, 1e-3, 1e-2)]
    est = OKFEBClassifier(rank=6, n_landmarks=20, device="cpu", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetTooSmallWarning)
        fits = list(engine.search_okfeb(est, X, y, splits, cands))
    assert len(fits) == 18 and len(calls) == 2 * 3      # two γ groups × three folds, not 18 fits
    assert {f.shared for f in fits} == {engine.SHARED}


def test_a_grid_over_the_extractor_alone_is_fitted_apart_and_says_so():
    X, y = _classes(n=200)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    est = OKFEBClassifier(rank=5, n_landmarks=15, device="cpu", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetTooSmallWarning)
        fits = list(engine.search_okfeb(est, X, y, splits, [{"gamma": 0.5}, {"gamma": 2.0}]))
    assert len(fits) == 4
    assert {f.shared for f in fits} == {"none: no other candidate differs only in alpha, fit_intercept"}


def test_a_failing_fold_is_fitted_apart_and_each_setting_reports_its_own_error(monkeypatch):
    X, y = _targets(n=200)
    splits = list(KFold(2, shuffle=True, random_state=0).split(X))
    # an LMS step of 1e6 without normalization diverges: the shared fit raises, the fallback fits
    # each setting apart, and only the diverging one reports the error
    cands = [{"normalize": False, "learning_rate": 0.01}, {"normalize": False, "learning_rate": 1e6}]
    est = OKFEBRegressor(rank=5, n_landmarks=15, solver="online", device="cpu", random_state=0)
    fits = list(engine.search_okfeb(est, X, y, splits, cands))
    assert len(fits) == 4
    assert all(f.shared == "none: the shared fit failed (ValueError)" for f in fits)
    assert [f.error is None for f in sorted(fits, key=lambda f: (f.candidate, f.split))] == [True, True, False, False]


def test_fit_okfeb_grid_refuses_extractor_parameters_and_other_estimators():
    X, y = _classes(n=100)
    base = OKFEBClassifier(rank=4, n_landmarks=10, device="cpu", random_state=0)
    with pytest.raises(ValueError, match="change the extractor"):
        fit_okfeb_grid(X, y, estimator=base, settings=[{"alpha": 1e-3, "gamma": 2.0}])
    with pytest.raises(ValueError, match="non-empty"):
        fit_okfeb_grid(X, y, estimator=base, settings=[])
    with pytest.raises(TypeError, match="OKFEBClassifier or OKFEBRegressor expected"):
        fit_okfeb_grid(X, y, estimator=object(), settings=[{"alpha": 1e-3}])
    assert set(LEARNER_PARAMS["classification"]) <= set(base.get_params())


def test_each_model_has_its_own_extractor_and_the_template_is_unchanged():
    X, y = _classes(n=200)
    base = OKFEBClassifier(rank=4, n_landmarks=12, device="cpu", random_state=0)
    before = base.get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetTooSmallWarning)
        a, b = fit_okfeb_grid(X, y, estimator=base, settings=[{"alpha": 1e-4}, {"alpha": 1e-2}])
        b.partial_fit(X[:50], y[:50])           # updating one model's extractor leaves the other's
        ref = clone(base).set_params(alpha=1e-4).fit(X, y)
    assert a.extractor_ is not b.extractor_
    _same_model(a, ref, X)
    assert base.get_params() == before and not hasattr(base, "extractor_")


def test_the_search_matches_sklearns_over_the_same_estimator():
    X, y = _classes(n=400, classes=3)
    grid = {"gamma": [0.5, 1.0], "alpha": [1e-5, 1e-3, 1e-1]}
    est = OKFEBClassifier(rank=8, n_landmarks=24, device="cpu", random_state=0)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetTooSmallWarning)
        ours = GridSearchCV(est, grid, cv=cv, n_jobs=2).fit(X, y)
        theirs = SkGridSearchCV(est, grid, cv=cv).fit(X, y)
    np.testing.assert_array_equal(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"])
    assert ours.best_params_ == theirs.best_params_
    assert set(ours.cv_results_["shared_work"]) == {engine.SHARED}


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore::gpuksvm.estimators.okfeb.BudgetTooSmallWarning")
@pytest.mark.parametrize("solver", ["exact", "online"])
def test_on_the_gpu_each_model_equals_its_own_fit(gpu, solver):
    # each model gets a copy of the device extractor (its own device arrays)
    X, y = _classes(n=240)
    est = OKFEBClassifier(gamma=1.0, rank=6, n_landmarks=18, solver=solver, device="gpu", dtype="float64",
                          random_state=0)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    fits = _check_equivalent(est, X, y, splits, [{"alpha": 1e-4}, {"alpha": 1e-2}], rtol=1e-9)
    a, b = (f.estimator for f in fits if f.split == 0)
    assert a.extractor_.subspace_.device.is_gpu and a.extractor_.subspace_ is not b.extractor_.subspace_
