"""The LLSVM shared-work search engine against independent fits, (candidate, split) by split."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

from gpuksvm.array import backend as bk
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.estimators.llsvm import LLSVM
from gpuksvm.model_selection import llsvm as engine
from gpuksvm.model_selection.shared import engine_for


def _data(n=600, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    if classes == 3:
        y[X[:, 2] > 0.9] = 2
    return X, y


def _grid(gammas=(0.5, 2.0), Cs=(0.5, 4.0, 32.0)):
    return [{"gamma": g, "C": C} for g in gammas for C in Cs]


def _host(a):
    return np.asarray(bk.to_host(a))


def _check_equivalent(est, X, y, splits, cands, sample_weight=None, shared=engine.SHARED):
    """Every SplitFit equals the independent fit; returns the fits."""
    fits = list(engine.search_llsvm(est, X, y, splits, cands, sample_weight=sample_weight))
    assert sorted((f.candidate, f.split) for f in fits) == [(c, s) for c in range(len(cands))
                                                          for s in range(len(splits))]
    for f in fits:
        assert f.error is None and f.shared == shared and f.fit_time > 0
        tr, te = splits[f.split]
        kw = {} if sample_weight is None else {"sample_weight": sample_weight[tr]}
        ref = clone(est).set_params(**cands[f.candidate]).fit(bk.take_rows(X, tr), y[tr], **kw)
        got = f.estimator
        assert got.get_params() == ref.get_params()
        np.testing.assert_array_equal(got.classes_, ref.classes_)
        np.testing.assert_allclose(_host(got.landmarks_), _host(ref.landmarks_), rtol=1e-6, atol=1e-8)
        Xte = bk.take_rows(X, te)
        d_got, d_ref = _host(got.decision_function(Xte)), _host(ref.decision_function(Xte))
        # each C starts from the previous C's solution: the same optimum to the Newton tolerance
        scale = max(1.0, float(np.abs(d_ref).max()))
        np.testing.assert_allclose(d_got, d_ref, rtol=1e-3, atol=1e-3 * scale)
        differ = _host(got.predict(Xte)) != _host(ref.predict(Xte))
        near = np.abs(d_ref).min(axis=1) < 1e-2 if d_ref.ndim == 2 else np.abs(d_ref) < 1e-2
        assert not (differ & ~near).any()
    return fits


def test_the_registry_gives_llsvm_its_engine():
    assert engine_for(LLSVM()) is engine.search_llsvm


def test_binary_grid_matches_independent_fits():
    X, y = _data()
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    _check_equivalent(LLSVM(n_landmarks=40, device="cpu", random_state=0), X, y, splits, _grid())


def test_three_classes_with_sample_weight_and_llsvm2():
    X, y = _data(classes=3, seed=1)
    sw = np.random.default_rng(2).uniform(0.2, 3.0, size=y.size)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=1).split(X, y))
    est = LLSVM(n_landmarks=30, device="cpu", random_state=3)
    _check_equivalent(est, X, y, splits, _grid(gammas=(1.0,)), sample_weight=sw)
    _check_equivalent(est.set_params(spectrum="supervised"), X, y, splits, _grid(gammas=(0.5, 1.0), Cs=(1.0, 8.0)))


def test_sparse_input_and_a_grid_that_is_not_a_product():
    X, y = _data(seed=4)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=2).split(X, y))
    cands = [{"gamma": 0.5, "C": 1.0}, {"gamma": 0.5, "C": 8.0}, {"gamma": 2.0, "C": 2.0},
             {"gamma": 2.0, "C": 1.0, "n_landmarks": 20}]
    _check_equivalent(LLSVM(n_landmarks=30, device="cpu", random_state=0), sp.csr_matrix(X), y, splits, cands)


def test_settings_it_cannot_share_fall_back_to_independent_fits():
    X, y = _data(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    fits = list(engine.search_llsvm(est, X, y, splits, [{"gamma": "scale", "C": 1.0}, {"kernel": "linear"}]))
    assert len(fits) == 6
    reasons = {f.candidate: f.shared for f in fits}
    assert reasons[0] == "none: gamma is not a positive number"
    assert reasons[1] == "none: kernel='linear'"
    for f in fits:
        tr, te = splits[f.split]
        ref = clone(est).set_params(**[{"gamma": "scale", "C": 1.0}, {"kernel": "linear"}][f.candidate])
        ref.fit(X[tr], y[tr])
        np.testing.assert_allclose(_host(f.estimator.decision_function(X[te])), _host(ref.decision_function(X[te])))


def test_a_failing_setting_reports_its_own_error():
    X, y = _data(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    fits = list(engine.search_llsvm(est, X, y, splits, [{"gamma": 1.0, "C": 1.0, "n_landmarks": 0}]))
    assert len(fits) == 3 and all(f.estimator is None and isinstance(f.error, ValueError) for f in fits)
    assert all(f.shared.startswith("none: the shared fit failed") for f in fits)


def test_the_template_and_the_callers_arrays_are_unchanged():
    X, y = _data(n=300)
    X0, y0 = X.copy(), y.copy()
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    params = est.get_params()
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    list(engine.search_llsvm(est, X, y, splits, _grid()))
    assert est.get_params() == params and not hasattr(est, "landmarks_")
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("C", [1, 8])
def test_an_integer_C_stays_as_the_candidate_gave_it(C):
    X, y = _data(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    fits = list(engine.search_llsvm(LLSVM(n_landmarks=20, device="cpu", random_state=0), X, y, splits,
                                    [{"gamma": 1.0, "C": C}]))
    assert all(type(f.estimator.C) is int for f in fits)


def test_linear_svm_fit_from_equals_cold_fit():
    """The warm start along C (LinearSVM.fit_from): a cold solve's solution to the tolerance, no more steps."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(3000, 20)).astype(np.float32)
    y = np.sign(X[:, 0] + 0.3 * X[:, 1] + 0.2 * rng.normal(size=3000))
    y3 = np.digitize(X[:, 0] + 0.2 * rng.normal(size=3000), [-0.5, 0.5])
    for labels in (y, y3):
        prev = LinearSVM(C=1.0, solver="newton", device="cpu", dtype="float64").fit(X, labels)
        cold = LinearSVM(C=64.0, solver="newton", device="cpu", dtype="float64").fit(X, labels)
        warm = LinearSVM(C=64.0, solver="newton", device="cpu", dtype="float64").fit_from(prev, X, labels)
        np.testing.assert_allclose(warm.objective_, cold.objective_, rtol=1e-4)
        np.testing.assert_allclose(warm.decision_function(X), cold.decision_function(X), atol=1e-2)
        assert warm.n_iter_ <= cold.n_iter_ + 1
