"""The CVM's search engine (warm starts along C) against independent fits, (candidate, split) by split."""
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import StratifiedKFold

from gpuksvm.estimators.cvm import CVM, fit_cvm_path
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.model_selection import cvm as engine
from gpuksvm.model_selection.shared import engine_for

from _tune_data import shared_fits, xor_classes

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _grid(gammas=(0.5, 2.0), Cs=(0.3, 3.0, 30.0)):
    return [{"gamma": g, "C": C} for g in gammas for C in Cs]


def _splits(X, y, k=3):
    return list(StratifiedKFold(k, shuffle=True, random_state=0).split(X, y))


def test_the_registry_gives_the_cvm_its_engine():
    assert engine_for(CVM()) is engine.search_cvm


@pytest.mark.parametrize("classes, multi_class", [(2, "ovo"), (3, "ovo"), (3, "ovr")])
def test_each_fit_solves_its_own_problem_to_the_tolerance(classes, multi_class):
    # the smallest C of a fold is its own fit bit for bit; each other C, started from the core sets
    # of the C below it, is a solution to the same relative duality gap: the same problem solved to
    # tol (ρ, the ball's value, within 2·tol of its own fit's), its held-out predictions nearly its own
    X, y = xor_classes(360, classes=classes, seed=3, features=3)
    splits = _splits(X, y)
    est = CVM(device="cpu", random_state=0, multi_class=multi_class)
    cands = _grid()
    pairs = shared_fits(engine.search_cvm, est, X, y, splits, cands, engine.SHARED)
    smallest = min(c["C"] for c in cands)
    agree = []
    for f, ref in pairs:
        got = f.estimator
        assert got.get_params() == ref.get_params()
        assert len(got.problems_) == len(ref.problems_) == (1 if classes == 2 else 3)
        assert (got.duality_gap_ <= got.tol).all() and (ref.duality_gap_ <= ref.tol).all()
        np.testing.assert_allclose(got.rho_, ref.rho_, rtol=2 * est.tol)
        te = splits[f.split][1]
        if cands[f.candidate]["C"] == smallest:
            np.testing.assert_array_equal(got.decision_function(X[te]), ref.decision_function(X[te]))
            np.testing.assert_array_equal(got.n_iter_, ref.n_iter_)
        agree.append(np.mean(got.predict(X[te]) == ref.predict(X[te])))
    assert min(agree) >= 0.95 and np.mean(agree) >= 0.98


@pytest.mark.parametrize("classes, search", [(2, {}), (3, {}), (2, {"sample_size": 10, "n_tries": 2})])
def test_the_warm_start_takes_fewer_iterations(classes, search):
    # every binary problem (each one-vs-one pair) starts from its own core set of the C below; with
    # the sampled search too (sample_size × n_tries below the rows: the default 59 × 7 would scan them
    # all), each model stopping on its gap within tol and its ρ within 2·tol of its own fit's
    X, y = xor_classes(400 if classes == 2 else 450, classes=classes, seed=4, features=3)
    Cs = [0.3, 1.0, 3.0, 10.0, 30.0]
    est = CVM(device="cpu", random_state=0, gamma=1.0, **search)
    path = fit_cvm_path(X, y, Cs=Cs, estimator=est)
    own = [CVM(device="cpu", random_state=0, gamma=1.0, C=C, **search).fit(X, y) for C in Cs]
    assert [m.C for m in path] == Cs
    np.testing.assert_array_equal(path[0].n_iter_, own[0].n_iter_)
    warm, cold = np.sum([m.n_iter_ for m in path[1:]], axis=0), np.sum([m.n_iter_ for m in own[1:]], axis=0)
    assert (warm < 0.5 * cold).all(), (warm, cold)          # per problem
    for m, ref in zip(path, own):
        assert (m.duality_gap_ <= m.tol).all() and (m.stop_reason_ == ref.stop_reason_)
        np.testing.assert_allclose(m.rho_, ref.rho_, rtol=2 * m.tol)
        assert m.search_.startswith("sampled") == bool(search)


def test_fit_cvm_path_refuses_what_it_cannot_fit():
    X, y = xor_classes(100, seed=5, features=3)
    with pytest.raises(ValueError, match="C"):
        fit_cvm_path(X, y, Cs=[1.0, -2.0], estimator=CVM(device="cpu"))
    with pytest.raises(ValueError, match="non-empty"):
        fit_cvm_path(X, y, Cs=[], estimator=CVM(device="cpu"))
    with pytest.raises(ValueError, match="one_class"):
        fit_cvm_path(X, y, Cs=[1.0], estimator=CVM(device="cpu", task="one_class"))
    for bad in (True, "2"):
        with pytest.raises((ValueError, TypeError), match="C"):
            fit_cvm_path(X, y, Cs=[1.0, bad], estimator=CVM(device="cpu"))


def test_settings_it_cannot_share_are_fitted_apart_and_say_why():
    X, y = xor_classes(200, seed=6, features=3)
    splits = _splits(X, y, 2)
    cases = [(CVM(device="cpu", random_state=0), _grid(Cs=(1.0,)), "no other candidate differs only in C"),
             (CVM(device="cpu", random_state=0, task="one_class"), _grid(gammas=(1.0,), Cs=(1.0, 4.0)),
              "task='one_class'"),
             (CVM(device="cpu", random_state=0), [{"C": 1.0}, {"C": "many"}], "C is not a positive number")]
    for est, cands, why in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits = list(engine.search_cvm(est, X, y, splits, cands))
        assert len(fits) == len(cands) * len(splits)
        assert any(f.shared.startswith("none: " + why) for f in fits), (why, [f.shared for f in fits])
    fits = list(engine.search_cvm(CVM(device="cpu", random_state=0), X, y, splits,
                                  [{"C": 1.0, "device": "bogus"}, {"C": 3.0, "device": "bogus"}]))
    assert {f.shared for f in fits} == {"none: device='bogus' (ValueError)"} and all(f.error is not None for f in fits)
    fits = list(engine.search_cvm(CVM(device="cpu"), X, y, splits, _grid(gammas=(1.0,)), sample_weight=np.ones(200)))
    assert {f.shared for f in fits} == {"none: sample_weight given"} and all(f.error is not None for f in fits)


def test_candidates_equal_in_c_get_a_model_each():
    X, y = xor_classes(150, seed=7, features=3)
    splits = _splits(X, y, 2)
    fits = list(engine.search_cvm(CVM(device="cpu", random_state=0), X, y, splits,
                                  [{"C": 1.0}, {"C": 1}, {"C": 5.0}]))
    by = {(f.candidate, f.split): f.estimator for f in fits}
    assert by[0, 0] is not by[1, 0] and by[1, 0].C == 1 and isinstance(by[1, 0].C, int)
    np.testing.assert_array_equal(by[0, 0].decision_function(X), by[1, 0].decision_function(X))


def test_a_failing_shared_fit_falls_back_to_fits_of_their_own(monkeypatch):
    def broken(*args, **kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(engine, "fit_cvm_path", broken)
    X, y = xor_classes(150, seed=8, features=3)
    fits = list(engine.search_cvm(CVM(device="cpu", random_state=0), X, y, _splits(X, y, 2), _grid(gammas=(1.0,))))
    assert len(fits) == 6 and all(f.error is None for f in fits)
    assert {f.shared for f in fits} == {"none: the shared fit failed (MemoryError)"}


def test_scores_as_scikit_learns_search_over_the_same_estimator():
    X, y = xor_classes(300, seed=9, features=3)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"gamma": [0.5, 2.0], "C": [0.3, 3.0, 30.0]}
    est = CVM(device="cpu", random_state=0)
    ours = GridSearchCV(est, grid, cv=cv).fit(X, y)
    theirs = SkGridSearchCV(est, grid, cv=cv).fit(X, y)
    diff = np.abs(ours.cv_results_["mean_test_score"] - theirs.cv_results_["mean_test_score"])
    assert diff.max() <= 0.02
    assert diff[np.asarray(ours.cv_results_["param_C"], dtype=float) == 0.3].max() == 0   # from the pair: its own fit
    assert set(ours.cv_results_["shared_work"]) == {engine.SHARED}


@pytest.mark.gpu
def test_on_the_gpu_the_fits_are_independent_and_say_why(gpu):
    X, y = xor_classes(120, seed=10, features=3)
    fits = list(engine.search_cvm(CVM(device="gpu", random_state=0), X, y, _splits(X, y, 2), _grid(gammas=(1.0,))))
    assert len(fits) == 6 and all(f.error is None for f in fits)
    assert {f.shared for f in fits} == {"none: device='gpu' (the warm start is measured on the CPU only)"}
