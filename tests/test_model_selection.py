"""gpuksvm.model_selection against scikit-learn's searches over the same estimators."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import FitFailedWarning, NotFittedError
from sklearn.experimental import enable_halving_search_cv  # noqa: F401
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import HalvingGridSearchCV as SkHalvingGridSearchCV
from sklearn.model_selection import GroupKFold, StratifiedKFold
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import gpuksvm
from gpuksvm.array import backend as bk
from gpuksvm.estimators.kernel_svc import KernelSVC
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.model_selection import GridSearchCV, HalvingGridSearchCV, SplitFit, register_engine
from gpuksvm.model_selection.results import fold_scorer
from gpuksvm.model_selection.shared import engine_for, engine_name, run_engine, search_independent
from gpuksvm.model_selection.cvm import search_cvm

from _estimator_zoo import ZOO, estimator_for, zoo_data

pytestmark = pytest.mark.filterwarnings("ignore:The `probability` parameter:FutureWarning")

TOL = 0.002
CV = StratifiedKFold(3, shuffle=True, random_state=0)


def _data(n=150, seed=0):
    return zoo_data("binary", n=n, seed=seed)


def _same_results(ours, theirs, *, scores_tol=0.0):
    """Same keys (ours adds shared_work), same params, scores within scores_tol, same ranks."""
    ra, rb = ours.cv_results_, theirs.cv_results_
    assert set(ra) - {"shared_work"} == set(rb) - {"shared_work"}
    assert ra["params"] == rb["params"]
    for key in rb:
        if key.startswith("param_"):
            assert ra[key].dtype == rb[key].dtype, key
            np.testing.assert_array_equal(ra[key].mask, rb[key].mask)
            assert list(ra[key].compressed()) == list(rb[key].compressed()), key
        elif "_time" not in key and key not in ("params", "shared_work"):
            assert np.asarray(ra[key]).dtype == np.asarray(rb[key]).dtype, key
            np.testing.assert_allclose(ra[key], rb[key], atol=scores_tol, err_msg=key)


# --------------------------------------------------------------------------- every estimator of the zoo
def _zoo_grid(est) -> dict:
    params = est.get_params()
    grid = {}
    if "C" in params:
        grid["C"] = [1.0, 10.0]
    if "gamma" in params:
        grid["gamma"] = [1.0, 2.0]
    if "alpha" in params:           # OK-FEB's learners: the learner's parameter beside the extractor's
        grid["alpha"] = [1e-4, 1e-2]
    return grid


def _mean_score_samples(est, X, y=None):
    return float(np.mean(est.score_samples(X)))


def _neg_fitting_error(est, X, y=None):
    return -float(np.mean(est.fitting_error(X)))


SCORING = {"one_class": _mean_score_samples, "transform": _neg_fitting_error}
CASES = sorted(name for name, (_, _, _, task) in ZOO.items() if task != "blocks")


@pytest.mark.parametrize("name", CASES)
def test_zoo_estimator_matches_sklearns_search(name):
    est, task = estimator_for(name)
    if engine_for(est) is search_cvm:
        # the CVM engine's warm-started fold models solve each problem to the same relative duality
        # gap as their own fits, from other core sets: at the default tol = 1e-2 one held-out row of a
        # 50-row fold near the boundary flips (0.02); at 1e-4 both are at the optimum to the scores' 0.002
        est.set_params(tol=1e-4)
    X, y = zoo_data(task, n=150)
    y = None if task in SCORING else y
    cv = 3 if task in ("regression", "one_class", "transform") else CV
    grid = _zoo_grid(est)
    kwargs = dict(cv=cv, scoring=SCORING.get(task), return_train_score=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = GridSearchCV(est, grid, **kwargs).fit(X, y)
        theirs = SkGridSearchCV(est, grid, **kwargs).fit(X, y)
    engine = engine_for(est)
    assert ours.search_engine_ == engine_name(engine)
    _same_results(ours, theirs, scores_tol=TOL)
    assert ours.best_params_ == theirs.best_params_
    assert ours.best_index_ == theirs.best_index_
    if engine is search_independent:
        assert list(ours.cv_results_["shared_work"]) == ["none"] * len(ours.cv_results_["params"])
    else:   # KernelSVC, LLSVM, OK-FEB's learners, SVI, CVM: an engine of their own, which says what each shared
        assert all(w and not w.startswith("none") for w in ours.cv_results_["shared_work"])
    assert ours.n_splits_ == theirs.n_splits_ and ours.multimetric_ is False


def test_kernel_svc_search_surface_matches_sklearns():
    X, y = _data()
    grid = {"gamma": [1.0, 2.0], "C": [1.0, 10.0]}
    ours = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV).fit(X, y)
    theirs = SkGridSearchCV(KernelSVC(device="cpu"), grid, cv=CV).fit(X, y)
    _same_results(ours, theirs)
    assert ours.best_score_ == theirs.best_score_
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X))
    assert ours.score(X, y) == theirs.score(X, y)
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    assert ours.n_features_in_ == 2 and ours.refit_time_ > 0
    assert ours.scorer_ is not None and ours.best_estimator_.get_params()["C"] == ours.best_params_["C"]


# --------------------------------------------------------------------------- not gpuksvm: scikit-learn's search
@pytest.mark.parametrize("make", [lambda: SVC(), lambda: make_pipeline(StandardScaler(), KernelSVC(device="cpu"))],
                         ids=["sklearn-SVC", "pipeline"])
def test_foreign_estimators_are_searched_by_sklearn(make):
    X, y = _data()
    est = make()
    grid = {"C": [1.0, 10.0]} if isinstance(est, SVC) else {"kernelsvc__C": [1.0, 10.0]}
    ours = GridSearchCV(est, grid, cv=CV, return_train_score=True).fit(X, y)
    theirs = SkGridSearchCV(est, grid, cv=CV, return_train_score=True).fit(X, y)
    assert engine_for(est) is None and not hasattr(ours, "search_engine_")
    assert set(ours.cv_results_) == set(theirs.cv_results_)
    for key in theirs.cv_results_:
        if "_time" not in key and not key.startswith("param"):
            np.testing.assert_array_equal(ours.cv_results_[key], theirs.cv_results_[key])
    assert ours.best_params_ == theirs.best_params_


# --------------------------------------------------------------------------- scoring, refit, errors
@pytest.mark.parametrize("scoring", [["accuracy", "balanced_accuracy"],
                                     {"acc": "accuracy", "auc": "roc_auc"}], ids=["list", "dict"])
def test_multi_metric_matches_sklearn(scoring):
    X, y = _data()
    refit = "balanced_accuracy" if isinstance(scoring, list) else "auc"
    grid = {"C": [0.1, 1.0, 10.0]}
    ours = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, scoring=scoring, refit=refit,
                        return_train_score=True).fit(X, y)
    theirs = SkGridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, scoring=scoring, refit=refit,
                            return_train_score=True).fit(X, y)
    _same_results(ours, theirs)
    assert ours.multimetric_ and ours.best_index_ == theirs.best_index_ and ours.best_score_ == theirs.best_score_
    assert set(ours.scorer_) == set(theirs.scorer_)
    assert ours.score(X, y) == theirs.score(X, y)


def test_callable_scoring_returning_a_dict():
    X, y = _data()

    def both(est, X, y):
        return {"acc": float(np.mean(est.predict(X) == y)), "neg": -float(np.mean(est.predict(X) != y))}

    ours = GridSearchCV(KernelSVC(device="cpu"), {"C": [1.0, 10.0]}, cv=CV, scoring=both, refit="acc").fit(X, y)
    theirs = SkGridSearchCV(KernelSVC(device="cpu"), {"C": [1.0, 10.0]}, cv=CV, scoring=both, refit="acc").fit(X, y)
    _same_results(ours, theirs)
    assert ours.multimetric_ and ours.best_params_ == theirs.best_params_
    with pytest.raises(ValueError, match="refit must be set to a scorer key"):
        GridSearchCV(KernelSVC(device="cpu"), {"C": [1.0]}, cv=CV, scoring=both).fit(X, y)


def test_multi_metric_needs_a_refit_key():
    X, y = _data()
    with pytest.raises(ValueError, match="refit must be set to a scorer key"):
        GridSearchCV(KernelSVC(device="cpu"), {"C": [1.0]}, scoring=["accuracy", "f1"]).fit(X, y)
    search = GridSearchCV(KernelSVC(device="cpu"), {"C": [1.0, 2.0]}, cv=CV, scoring=["accuracy", "f1"],
                          refit=False).fit(X, y)
    assert not hasattr(search, "best_index_") and "rank_test_f1" in search.cv_results_


def test_refit_callable_and_false():
    X, y = _data()
    pick_last = lambda results: len(results["params"]) - 1  # noqa: E731
    grid = {"C": [0.1, 1.0, 10.0]}
    ours = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, refit=pick_last).fit(X, y)
    assert ours.best_index_ == 2 and ours.best_params_ == {"C": 10.0} and not hasattr(ours, "best_score_")
    off = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, refit=False).fit(X, y)
    sk_off = SkGridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, refit=False).fit(X, y)
    assert not hasattr(off, "best_estimator_") and off.best_params_ == sk_off.best_params_
    for search in (off, sk_off):
        with pytest.raises((AttributeError, NotFittedError)):
            search.predict(X)


def test_error_score_matches_sklearn():
    X, y = _data()
    grid = {"C": [-1.0, 1.0]}          # C=-1 is refused by the estimator's parameter check
    with pytest.warns(FitFailedWarning, match="3 fits failed out of a total of 6"):
        ours = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, error_score=-5.0,
                            return_train_score=True).fit(X, y)
    with pytest.warns(FitFailedWarning):
        theirs = SkGridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, error_score=-5.0,
                                return_train_score=True).fit(X, y)
    _same_results(ours, theirs)
    assert ours.cv_results_["mean_test_score"][0] == -5.0 and ours.best_params_ == {"C": 1.0}
    with pytest.raises(Exception, match="C"):
        GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, error_score="raise").fit(X, y)
    with pytest.raises(ValueError, match="All the 3 fits failed"):
        GridSearchCV(KernelSVC(device="cpu"), {"C": [-1.0]}, cv=CV).fit(X, y)


def test_sample_weight_and_groups_as_sklearn():
    X, y = _data()
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    groups = np.arange(len(y)) % 5
    grid = {"C": [1.0, 10.0]}
    ours = GridSearchCV(LinearSVM(device="cpu"), grid, cv=GroupKFold(5)).fit(X, y, sample_weight=w, groups=groups)
    theirs = SkGridSearchCV(LinearSVM(device="cpu"), grid, cv=GroupKFold(5)).fit(X, y, sample_weight=w, groups=groups)
    _same_results(ours, theirs, scores_tol=TOL)
    assert ours.best_params_ == theirs.best_params_


def test_the_callers_arrays_are_unchanged():
    X, y = _data()
    X32 = np.asfortranarray(X.astype(np.float32))
    w = np.ones(len(y))
    copies = X32.copy(), y.copy(), w.copy()
    GridSearchCV(KernelSVC(device="cpu", probability=True, random_state=0), {"C": [1.0, 10.0]}, cv=CV).fit(
        X32, y, sample_weight=w)
    for a, b in zip((X32, y, w), copies):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert X32.flags.f_contiguous and X32.flags.writeable


def test_a_failed_search_keeps_the_previous_one():
    X, y = _data()
    search = GridSearchCV(KernelSVC(device="cpu"), {"C": [1.0, 10.0]}, cv=CV).fit(X, y)
    before = dict(vars(search))
    prediction = search.predict(X)
    search.set_params(param_grid={"C": [-1.0]}, error_score="raise")
    with pytest.raises(Exception):
        search.fit(X, y)
    assert {k: id(v) for k, v in vars(search).items()} == {k: id(v) for k, v in before.items()} | \
        {"param_grid": id(search.param_grid), "error_score": id(search.error_score)}
    np.testing.assert_array_equal(search.predict(X), prediction)
    foreign = GridSearchCV(SVC(), {"C": [1.0]}, cv=CV).fit(X, y)
    best = foreign.best_estimator_
    foreign.set_params(param_grid={"C": [-1.0]}, error_score="raise")
    with pytest.raises(Exception):
        foreign.fit(X, y)
    assert foreign.best_estimator_ is best


# --------------------------------------------------------------------------- probability on the refit model
def test_probability_refit_uses_the_out_of_fold_decision_values():
    X, y = _data()
    search = GridSearchCV(KernelSVC(device="cpu", probability=True, random_state=0), {"C": [1.0, 10.0]},
                          cv=CV).fit(X, y)
    best = search.best_estimator_
    assert best.get_params()["probability"] is True
    folds = []
    for train, test in CV.split(X, y):
        fold = KernelSVC(device="cpu", **search.best_params_).fit(X[train], y[train])
        folds.append((fold, X[test], test))
    expected = clone(best).set_params(probability=False).fit(X, y).calibrate_from_folds(folds, y)
    # the search's fold models come from KernelSVC's shared engine: equal to these independent fits
    # to the solver tolerance, and so are the sigmoids fitted on their decision values
    np.testing.assert_allclose(best.probA_, expected.probA_, rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(best.probB_, expected.probB_, rtol=1e-2, atol=1e-3)
    P = search.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    # a probability scorer: the fold models are fitted with probability=True (as scikit-learn's)
    proba = GridSearchCV(KernelSVC(device="cpu", probability=True, random_state=0), {"C": [1.0, 10.0]},
                         cv=CV, scoring="neg_log_loss").fit(X, y)
    theirs = SkGridSearchCV(KernelSVC(device="cpu", probability=True, random_state=0), {"C": [1.0, 10.0]},
                            cv=CV, scoring="neg_log_loss").fit(X, y)
    _same_results(proba, theirs, scores_tol=1e-12)


def test_multiclass_probability_refit_and_search_match_sklearn():
    X, y = zoo_data("multiclass", n=150)
    grid = {"C": [0.1, 10.0]}
    ours = GridSearchCV(KernelSVC(device="cpu", probability=True, random_state=0), grid, cv=CV).fit(X, y)
    theirs = SkGridSearchCV(KernelSVC(device="cpu", probability=True, random_state=0), grid, cv=CV).fit(X, y)
    _same_results(ours, theirs)
    assert ours.best_params_ == theirs.best_params_
    assert ours.best_estimator_.probA_.shape == (3,)          # one sigmoid per one-vs-one pair
    P = ours.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.mean(ours.classes_[P.argmax(axis=1)] == y) > 0.8


def test_calibrate_from_folds_refuses_other_classes():
    X, y = zoo_data("multiclass", n=150)
    model = KernelSVC(device="cpu").fit(X, y)
    two = KernelSVC(device="cpu").fit(X[y < 2], y[y < 2])
    with pytest.raises(ValueError, match="other classes"):
        model.calibrate_from_folds([(two, X[:5], np.arange(5))], y)
    with pytest.raises(ValueError, match="at least one fold"):
        model.calibrate_from_folds([], y)


# --------------------------------------------------------------------------- the engine plumbing
def _recording_engine(calls, barrier=None):
    def engine(estimator, X, y, splits, candidates, *, sample_weight=None):
        calls.append(sorted(p["C"] for p in candidates))
        if barrier is not None:
            barrier.wait()          # both groups at once, or BrokenBarrierError after the timeout
        for fit in search_independent(estimator, X, y, splits, candidates, sample_weight=sample_weight):
            if candidates[fit.candidate]["C"] == -1.0:
                assert fit.estimator is None
            yield SplitFit(fit.candidate, fit.split, fit.estimator, 7.0, fit.error,
                           shared="test rows" if fit.estimator is not None else "none")
    engine.group_key = lambda estimator, params: params["C"] > 5
    return engine


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_a_registered_engine_is_used_grouped_and_recorded(n_jobs):
    X, y = _data()
    linear_engine = []
    barrier = threading.Barrier(2, timeout=30) if n_jobs == 2 else None
    previous = register_engine(LinearSVM, _recording_engine(linear_engine, barrier))
    try:
        _check_recording_engine(X, y, n_jobs, linear_engine)
    finally:
        register_engine(LinearSVM, previous)
    assert engine_for(LinearSVM()) is search_independent


def _check_recording_engine(X, y, n_jobs, linear_engine):
    grid = {"C": [-1.0, 1.0, 8.0, 10.0]}
    with pytest.warns(FitFailedWarning):
        search = GridSearchCV(LinearSVM(device="cpu"), grid, cv=CV, n_jobs=n_jobs, error_score=0.25).fit(X, y)
    assert sorted(linear_engine) == [[-1.0, 1.0], [8.0, 10.0]]        # two groups, two calls
    res = search.cv_results_
    np.testing.assert_array_equal(res["mean_fit_time"], 7.0)
    assert list(res["shared_work"]) == ["none", "test rows", "test rows", "test rows"]
    assert res["mean_test_score"][0] == 0.25 and search.best_params_["C"] != -1.0
    sk = SkGridSearchCV(LinearSVM(device="cpu"), grid, cv=CV, error_score=0.25)
    with pytest.warns(FitFailedWarning):
        sk.fit(X, y)
    np.testing.assert_allclose(res["mean_test_score"], sk.cv_results_["mean_test_score"], atol=TOL)


def test_an_engine_breaking_the_contract_is_refused():
    X, y = _data()
    splits = list(CV.split(X, y))

    def twice(estimator, X, y, splits, candidates, *, sample_weight=None):
        fit = next(search_independent(estimator, X, y, splits[:1], candidates[:1]))
        yield fit
        yield fit

    with pytest.raises(RuntimeError, match="twice"):
        run_engine(twice, LinearSVM(device="cpu"), X, y, splits[:1], [{"C": 1.0}])
    def first_only(estimator, X, y, splits, candidates, *, sample_weight=None):
        yield next(search_independent(estimator, X, y, splits[:1], candidates[:1]))

    with pytest.raises(RuntimeError, match="no fit"):
        run_engine(first_only, LinearSVM(device="cpu"), X, y, splits, [{"C": 1.0}])


def test_independent_fits_on_threads_give_the_same_search():
    X, y = _data(n=600)
    grid = {"C": [0.5, 1.0, 2.0, 4.0]}
    one = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV).fit(X, y)
    two = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, n_jobs=-1).fit(X, y)
    _same_results(one, two)
    assert one.best_params_ == two.best_params_


def test_model_selection_is_reachable_from_the_package():
    assert gpuksvm.model_selection.GridSearchCV is GridSearchCV


# --------------------------------------------------------------------------- successive halving
@pytest.mark.parametrize("make", [lambda: KernelSVC(device="cpu"), lambda: LinearSVM(device="cpu")],
                         ids=["KernelSVC", "LinearSVM"])
def test_halving_matches_sklearns(make):
    X, y = _data(n=300)
    grid = {"C": [0.1, 1.0, 10.0, 100.0], "tol": [1e-3, 1e-4]}
    kwargs = dict(cv=CV, factor=2, random_state=0)
    ours = HalvingGridSearchCV(make(), grid, **kwargs).fit(X, y)
    theirs = SkHalvingGridSearchCV(make(), grid, **kwargs).fit(X, y)
    _same_results(ours, theirs, scores_tol=TOL)
    for attr in ("n_resources_", "n_candidates_", "n_remaining_candidates_", "max_resources_", "min_resources_",
                 "n_iterations_", "n_possible_iterations_", "n_required_iterations_", "best_index_",
                 "best_params_", "best_score_"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    np.testing.assert_array_equal(ours.cv_results_["iter"], theirs.cv_results_["iter"])
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_halving_with_a_parameter_as_resource_and_aggressive_elimination():
    X, y = _data(n=200)
    grid = {"C": [0.1, 1.0, 10.0, 100.0, 1000.0]}
    kwargs = dict(cv=CV, factor=2, resource="max_iter", max_resources=400, min_resources=50,
                  aggressive_elimination=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = HalvingGridSearchCV(LinearSVM(device="cpu"), grid, **kwargs).fit(X, y)
        theirs = SkHalvingGridSearchCV(LinearSVM(device="cpu"), grid, **kwargs).fit(X, y)
    _same_results(ours, theirs, scores_tol=TOL)
    assert ours.n_resources_ == theirs.n_resources_ and ours.best_params_ == theirs.best_params_


def test_halving_refuses_changing_splits():
    X, y = _data()
    with pytest.raises(ValueError, match="consistent folds"):
        HalvingGridSearchCV(KernelSVC(device="cpu"), {"C": [1.0, 2.0]},
                            cv=StratifiedKFold(3, shuffle=True)).fit(X, y)


# --------------------------------------------------------------------------- folds on Dask workers
def test_folds_run_on_dask_workers():
    distributed = pytest.importorskip("distributed")
    X, y = _data()
    grid = {"gamma": [1.0, 2.0], "C": [1.0, 10.0]}
    theirs = SkGridSearchCV(KernelSVC(device="cpu"), grid, cv=CV).fit(X, y)
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream:
            ours = GridSearchCV(KernelSVC(device="cpu"), grid, cv=CV, client=client).fit(X, y)
        units = [t for t in stream.data if t["key"].startswith("_run_unit")]
        assert len(units) == 1                # KernelSVC's engine: the whole grid in one call
        _same_results(ours, theirs)
        assert ours.best_params_ == theirs.best_params_
        foreign = GridSearchCV(SVC(), {"C": [1.0, 10.0]}, cv=CV, client=client).fit(X, y)
    assert foreign.best_params_ == SkGridSearchCV(SVC(), {"C": [1.0, 10.0]}, cv=CV).fit(X, y).best_params_


# --------------------------------------------------------------------------- device arrays
@pytest.mark.gpu
def test_a_search_on_device_arrays_matches_the_host_search(gpu):
    X, y = _data(n=120)
    grid = {"C": [1.0, 10.0]}
    host = GridSearchCV(LinearSVM(device="cpu"), grid, cv=CV).fit(X, y)
    dev = GridSearchCV(LinearSVM(device="gpu", dtype="float64"), grid, cv=CV).fit(gpu.asarray(X), gpu.asarray(y))
    assert dev.search_engine_ == host.search_engine_
    np.testing.assert_allclose(dev.cv_results_["mean_test_score"], host.cv_results_["mean_test_score"], atol=TOL)
    assert dev.best_params_ == host.best_params_
    assert type(dev.predict(gpu.asarray(X))).__module__.startswith("cupy")


def test_the_fold_models_default_accuracy_is_the_classifiers_score():
    """The fold scorer of a classifier's default score is its ``score``, value for value (labels of
    any dtype, sample weights); any other scoring is scikit-learn's scorer."""
    X, y = make_classification(240, n_features=5, random_state=0)
    labels = np.array(["no", "yes"])[y]
    w = np.random.default_rng(0).uniform(0.1, 2.0, size=y.size)
    est = KernelSVC(device="cpu", C=0.3).fit(X[:160], labels[:160])
    scorer = fold_scorer(None, est, "scikit-learn's")
    assert scorer != "scikit-learn's"
    for kw in ({}, {"sample_weight": w[160:]}):
        assert scorer(est, X[160:], labels[160:], **kw) == est.score(X[160:], labels[160:], **kw)
    assert fold_scorer("accuracy", est, "scikit-learn's") == "scikit-learn's"
    assert fold_scorer(None, LinearRegression(), "scikit-learn's") == "scikit-learn's"


def test_run_engine_runs_no_more_calls_at_once_than_fit_the_budget_alone():
    """An engine's ``unit_bytes``: calls that fit the budget alone but not a thread's share run as
    many at once as fit; calls too big even alone run one at a time (each streams with the whole
    budget); small calls, or none declared, use the threads."""
    seen = []

    def per_split(estimator, X, y, splits, candidates, *, sample_weight=None):
        seen.append(threading.get_ident())
        return search_independent(estimator, X, y, splits, candidates, sample_weight=sample_weight)

    per_split.splits_apart = True
    X, y = make_classification(120, n_features=4, random_state=0)
    splits = list(StratifiedKFold(4, shuffle=True, random_state=0).split(X, y))
    with gpuksvm.config_context(cpu_memory_budget=10_000_000):
        for each, threads in ((6_000_000, {threading.get_ident()}), (20_000_000, {threading.get_ident()}),
                              (4_000_000, None), (0, None)):
            per_split.unit_bytes = lambda est, X, splits, cands, each=each: each
            seen.clear()
            run_engine(per_split, KernelSVC(device="cpu"), X, y, splits, [{"C": 1.0}], n_jobs=2)
            assert len(seen) == 4
            if threads is not None:
                assert set(seen) == threads          # one at a time, here
            else:
                assert threading.get_ident() not in seen   # on the pool's threads


def test_a_search_bound_by_memory_scores_its_fold_models_in_turn():
    """The fold models are scored on as many threads as the engine's fits ran on for the memory
    budget: LLSVM's folds that do not fit the budget run in turn, and so does their scoring (each
    thread's C heap adds to the peak); with room, both use the n_jobs threads."""
    X, y = make_classification(240, n_features=6, random_state=0)
    seen = []

    def accuracy(est, X_, y_):
        seen.append(threading.get_ident())
        return float(np.mean(est.predict(X_) == y_))

    est = gpuksvm.LLSVM(n_landmarks=20, device="cpu", random_state=0)
    for budget, in_turn in (("2MB", True), (None, False)):
        seen.clear()
        with gpuksvm.config_context(**({"cpu_memory_budget": budget} if budget else {})), warnings.catch_warnings():
            warnings.simplefilter("ignore", bk.MemoryFallbackWarning)
            GridSearchCV(est, {"gamma": [0.1, 1.0], "C": [1.0]}, cv=3, n_jobs=2, scoring=accuracy,
                         refit=False).fit(X, y)
        assert len(seen) == 6
        if in_turn:
            assert set(seen) == {threading.get_ident()}
        else:
            assert threading.get_ident() not in seen


def test_group_candidates_compares_a_random_state_by_its_state():
    """Each clone of a template holds a copy of its RandomState (an equal state, another object):
    the candidates that differ only in the shared parameters stay one group."""
    from gpuksvm.estimators.llsvm import LLSVM
    from gpuksvm.model_selection.shared import group_candidates

    cands = [{"gamma": g, "C": C} for g in (1.0, 2.0) for C in (1.0, 8.0)] + [{"gamma": 1.0, "n_landmarks": 7}]
    groups = group_candidates(LLSVM(random_state=np.random.RandomState(3)), cands, ("gamma", "C"))
    assert sorted(members for _, members in groups) == [[0, 1, 2, 3], [4]]
    other = group_candidates(LLSVM(random_state=np.random.RandomState(4)), cands[:2], ("C",))
    assert [m for _, m in other] == [[0, 1]]
    drawn = np.random.RandomState(3)
    drawn.rand()                      # another state: another group
    apart = group_candidates(LLSVM(), [{"C": 1.0, "random_state": np.random.RandomState(3)},
                                       {"C": 8.0, "random_state": drawn}], ("C",))
    assert [m for _, m in apart] == [[0], [1]]
