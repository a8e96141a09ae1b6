"""SVI's shared-work search engine against independent fits, (candidate, split) by split."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import StratifiedKFold

from gpuksvm.estimators.svi import SVI, fit_svi_grid
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.model_selection import svi as engine
from gpuksvm.model_selection.shared import engine_for
from gpuksvm.solvers.svi import algorithm

from _tune_data import shared_fits, xor_classes

pytestmark = pytest.mark.filterwarnings("ignore::gpuksvm.solvers.svi.algorithm.ExactFallbackWarning")


def _data(n=300, classes=2, seed=0):
    return xor_classes(n, classes=classes, seed=seed, features=3)


def _grid(gammas=(0.5, 2.0), Cs=(0.3, 3.0, 30.0)):
    return [{"gamma": g, "C": C} for g in gammas for C in Cs]


def _check_equivalent(est, X, y, splits, cands):
    """Every SplitFit is its candidate's own fit to the solver tolerance; returns the fits."""
    pairs = shared_fits(engine.search_svi, est, X, y, splits, cands, engine.SHARED)
    for f, ref in pairs:
        te = splits[f.split][1]
        got = f.estimator
        assert got.get_params() == ref.get_params()
        assert got.solved_exactly_.all() and ref.solved_exactly_.all()
        assert got.n_features_in_ == ref.n_features_in_ and got.problems_ == ref.problems_
        d_got, d_ref = got.decision_function(X[te]), ref.decision_function(X[te])
        scale = max(1.0, float(np.abs(d_ref).max()))
        tol = est.tol * 10 * scale
        # two solutions within the gap tolerance: their α differ by O(tol)
        np.testing.assert_allclose(d_got, d_ref, atol=tol, rtol=0.05)
        near = np.abs(d_ref).min(axis=1) < tol if d_ref.ndim == 2 else np.abs(d_ref) < tol
        assert not ((got.predict(X[te]) != ref.predict(X[te])) & ~near).any()
        assert abs(got.sub_models_[0]["objective"][0] - ref.sub_models_[0]["objective"][0]) \
            <= 10 * est.tol * (1 + abs(ref.sub_models_[0]["objective"][0]))
    return [f for f, _ in pairs]


def test_the_registry_gives_svi_its_engine():
    assert engine_for(SVI()) is engine.search_svi


def test_binary_grid_matches_independent_fits():
    X, y = _data()
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    _check_equivalent(SVI(device="cpu"), X, y, splits, _grid())


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_three_classes_match_independent_fits(multi_class):
    X, y = _data(n=270, classes=3, seed=9)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    fits = _check_equivalent(SVI(device="cpu", multi_class=multi_class), X, y, splits,
                             _grid(gammas=(0.5, 2.0), Cs=(0.5, 20.0)))
    assert all(len(f.estimator.problems_) == 3 for f in fits)


def test_folds_in_any_order_match_independent_fits():
    # a splitter's training rows need not be ascending: each fold's problems keep its own order
    X, y = _data(n=240, classes=3, seed=10)
    rng = np.random.default_rng(0)
    splits = [(rng.permutation(tr), te) for tr, te in StratifiedKFold(2, shuffle=True, random_state=0).split(X, y)]
    _check_equivalent(SVI(device="cpu"), X, y, splits, _grid(gammas=(1.0,), Cs=(1.0, 10.0)))


def test_sparse_input_and_a_grid_that_is_not_a_product():
    X, y = _data(n=240, seed=3)
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.4, 0.0, X))
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    fits = _check_equivalent(SVI(device="cpu"), Xs, y, splits, [{"gamma": 1.0, "C": 2.0}, {"gamma": 0.3, "C": 20.0},
                                                                  {"gamma": 1.0, "C": 40.0}])
    assert all(sp.issparse(f.estimator.dual_coef_) for f in fits)


def test_one_call_solves_every_fold_and_gamma_along_c(monkeypatch):
    calls = []
    real = algorithm.exact_paths

    def counted(X, labels, kernels, folds, Cs, **kwargs):
        calls.append((len(kernels), len(folds), [len(c) for c in Cs]))
        return real(X, labels, kernels, folds, Cs, **kwargs)

    monkeypatch.setattr(engine, "exact_paths", counted)
    X, y = _data(n=200, seed=2)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    fits = list(engine.search_svi(SVI(device="cpu"), X, y, splits, _grid()))
    assert len(fits) == 18 and calls == [(2, 3, [3, 3])]     # 2 γ × 3 folds × 3 C in one call


def test_settings_it_cannot_share_are_fitted_apart_and_say_why():
    X3, y3 = _data(n=210, classes=3, seed=4)
    X, y = _data(n=240, seed=5)
    split2 = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    y_rare = y3.copy()
    y_rare[np.flatnonzero(y3 == 2)[1:]] = 0         # one row of class 2: the fold that tests it lacks it
    cases = [(SVI(device="cpu"), X3, y_rare, list(StratifiedKFold(2, shuffle=True, random_state=0).split(X3, y3)),
              _grid(gammas=(1.0,), Cs=(1.0, 4.0)), "1 class(es) missing from the fold"),
             (SVI(device="cpu", min_subset_rows=20), X, y, split2, _grid(gammas=(1.0,), Cs=(1.0, 4.0)),
              "120 rows: SVI fits its sub-SVM ensemble"),
             (SVI(device="cpu", probability=True, random_state=0), X, y, split2,
              _grid(gammas=(1.0,), Cs=(1.0, 4.0)), "probability=True"),
             (SVI(device="cpu", max_iter=50), X, y, split2, _grid(gammas=(1.0,), Cs=(1.0, 4.0)), "max_iter=50"),
             (SVI(device="cpu"), X, y, split2, [{"gamma": "scale", "C": 1.0}, {"gamma": "scale", "C": 4.0}],
              "gamma or C is not a positive number")]
    for est, Xc, yc, splits, cands, why in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits = list(engine.search_svi(est, Xc, yc, splits, cands))
        assert len(fits) == len(cands) * len(splits)
        assert all(f.error is None for f in fits), why
        assert any(f.shared.startswith("none: " + why) for f in fits), (why, [f.shared for f in fits])


def test_a_failing_shared_fit_falls_back_to_fits_of_their_own(monkeypatch):
    def broken(*args, **kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(engine, "fit_svi_grid", broken)
    X, y = _data(n=150, seed=6)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    fits = list(engine.search_svi(SVI(device="cpu"), X, y, splits, _grid(gammas=(1.0,))))
    assert len(fits) == 6 and all(f.error is None for f in fits)
    assert {f.shared for f in fits} == {"none: the shared fit failed (MemoryError)"}


def test_fit_svi_grid_refuses_what_it_cannot_share_and_keeps_the_template():
    X, y = _data(n=120)
    base = SVI(device="cpu", probability=True)
    with pytest.raises(ValueError, match="probability=True"):
        fit_svi_grid(X, y, gammas=[1.0], Cs=[1.0], estimator=base)
    with pytest.raises(ValueError, match="non-empty"):
        fit_svi_grid(X, y, gammas=[], Cs=[1.0], estimator=SVI())
    with pytest.raises(ValueError, match="gamma"):
        fit_svi_grid(X, y, gammas=[-1.0], Cs=[1.0], estimator=SVI())
    for bad in (True, "2"):        # as SVI's own C refuses them (not float(True) == 1.0)
        with pytest.raises((ValueError, TypeError), match="C"):
            fit_svi_grid(X, y, gammas=[1.0], Cs=[1.0, bad], estimator=SVI())
    assert base.get_params()["probability"] is True and not hasattr(base, "support_")


def test_the_search_matches_sklearns_over_the_same_estimator():
    X, y = _data(n=360, seed=7)
    grid = {"gamma": [0.5, 2.0], "C": [0.3, 3.0, 30.0]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    ours = GridSearchCV(SVI(device="cpu"), grid, cv=cv, n_jobs=2).fit(X, y)
    theirs = SkGridSearchCV(SVI(device="cpu"), grid, cv=cv).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"],
                               atol=0.002)
    assert ours.best_params_ == theirs.best_params_
    assert set(ours.cv_results_["shared_work"]) == {engine.SHARED}


@pytest.mark.gpu
def test_on_the_gpu_the_fits_are_independent_and_say_why(gpu):
    X, y = _data(n=160, seed=8)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    fits = list(engine.search_svi(SVI(device="gpu"), X, y, splits, _grid(gammas=(1.0,), Cs=(1.0, 4.0))))
    assert len(fits) == 4 and all(f.error is None for f in fits)
    assert {f.shared for f in fits} == {"none: device='gpu' (the batched GPU solver)"}
