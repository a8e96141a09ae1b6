"""The LLSVM search engine: every (candidate, split) equals an independent fit."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

from gpuksvm.datasets import make_checkerboard
from gpuksvm.estimators.llsvm import LLSVM
from gpuksvm.model_selection.llsvm import search_llsvm

TOL = 1e-3


def _data(n_classes=2, n=600):
    X, y = make_checkerboard(n, random_state=0)
    if n_classes > 2:
        y = (np.floor(X[:, 0] * 1.5).astype(int) + np.floor(X[:, 1] * 1.5).astype(int)) % n_classes
    return X, y


def _check(est, X, y, candidates, sample_weight=None):
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    Xd = X.toarray() if sp.issparse(X) else X
    fits = list(search_llsvm(est, X, y, splits, candidates, sample_weight=sample_weight))
    assert sorted((f.candidate, f.split) for f in fits) == [(c, s) for c in range(len(candidates))
                                                           for s in range(len(splits))]
    for f in fits:
        assert f.error is None and f.fit_time > 0
        train, test = splits[f.split]
        sw = None if sample_weight is None else sample_weight[train]
        ref = clone(est).set_params(**candidates[f.candidate]).fit(X[train], y[train], sample_weight=sw)
        assert f.estimator.get_params() == ref.get_params()
        np.testing.assert_allclose(f.estimator.landmarks_, ref.landmarks_)
        d, dr = f.estimator.decision_function(X[test]), ref.decision_function(X[test])
        np.testing.assert_allclose(d, dr, atol=TOL * max(1.0, np.abs(dr).max()))
        p, pr = f.estimator.predict(X[test]), ref.predict(X[test])
        margin = np.abs(dr) if dr.ndim == 1 else np.abs(np.diff(np.sort(dr, axis=1)[:, -2:], axis=1))[:, 0]
        assert np.all((p == pr) | (margin < 10 * TOL))
        assert np.mean(p == y[test]) > 0.5
    return fits


GRID = [{"gamma": g, "C": c} for g in (5.0, 20.0) for c in (1.0, 10.0)]


def test_binary_grid_equals_independent_fits():
    X, y = _data()
    fits = _check(LLSVM(n_landmarks=60, device="cpu", random_state=0), X, y, GRID)
    assert all(f.shared.startswith("landmarks") for f in fits)


def test_multiclass_grid_equals_independent_fits():
    X, y = _data(n_classes=3)
    _check(LLSVM(n_landmarks=60, device="cpu", random_state=1), X, y, GRID[:3])


def test_sample_weight_and_csr():
    X, y = _data()
    sw = np.random.RandomState(0).uniform(0.2, 2.0, len(y))
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.1, 0.0, X))
    _check(LLSVM(n_landmarks=50, device="cpu", random_state=0), Xs, y, GRID[:2], sample_weight=sw)


def test_supervised_spectrum_and_groups():
    X, y = _data()
    cands = [{"gamma": 5.0, "C": 1.0, "spectrum": "supervised"}, {"gamma": 20.0, "C": 1.0, "spectrum": "supervised"},
             {"gamma": 5.0, "C": 1.0, "n_landmarks": 40}]
    _check(LLSVM(n_landmarks=50, device="cpu", random_state=0, n_labeled=40), X, y, cands)


def test_unshareable_groups_fall_back_and_failures_are_reported():
    X, y = _data()
    est = LLSVM(n_landmarks=40, device="cpu", random_state=0)
    fits = _check(est, X, y, [{"gamma": "scale", "C": 1.0}])
    assert all(f.shared.startswith("none") for f in fits)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    bad = list(search_llsvm(est, X, y, splits, [{"gamma": 5.0, "C": 1.0, "n_landmarks": 0}]))
    assert len(bad) == 2 and all(f.estimator is None and f.error is not None for f in bad)


def test_template_not_modified():
    X, y = _data()
    est = LLSVM(n_landmarks=40, device="cpu", random_state=0)
    before = est.get_params()
    X0 = X.copy()
    list(search_llsvm(est, X, y, [(np.arange(300), np.arange(300, 600))], GRID[:1]))
    assert est.get_params() == before and not hasattr(est, "landmarks_")
    np.testing.assert_array_equal(X, X0)


def test_linear_svm_fit_from_equals_cold_fit():
    from gpuksvm.estimators.linear_svm import LinearSVM
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
