"""Platt scaling (gpuksvm.estimators.calibration) and KernelSVC.predict_proba against scikit-learn."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import _sigmoid_calibration
from sklearn.datasets import make_blobs
from sklearn.exceptions import NotFittedError
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.svm import SVC, LinearSVC

from gpuksvm.estimators.calibration import ProbabilityMixin, couple_pairwise, fit_platt, platt_predict
from gpuksvm.estimators.kernel_svc import KernelSVC

pytestmark = pytest.mark.filterwarnings("ignore:The `probability` parameter:FutureWarning")


def _two_class(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.6 * rng.normal(size=n) > 0, 1, 0)
    return X, y


# --------------------------------------------------------------------------- fit_platt
def test_fit_platt_recovers_sigmoid():
    rng = np.random.default_rng(0)
    f = rng.normal(scale=2.0, size=20000)
    p = 1.0 / (1.0 + np.exp(-1.5 * f + 0.7))
    y = rng.random(f.size) < p
    A, B = fit_platt(f, y)
    assert A == pytest.approx(-1.5, abs=0.08)
    assert B == pytest.approx(0.7, abs=0.08)


def test_fit_platt_matches_sklearn_sigmoid_calibration():
    rng = np.random.default_rng(1)
    f = rng.normal(size=300)
    y = (rng.random(300) < 1 / (1 + np.exp(-2 * f))).astype(int)
    A, B = fit_platt(f, y)
    a_sk, b_sk = _sigmoid_calibration(f, y)
    assert A == pytest.approx(a_sk, abs=1e-3)
    assert B == pytest.approx(b_sk, abs=1e-3)


def test_fit_platt_separable_and_extreme_values_are_finite():
    f = np.concatenate([np.full(50, -30.0), np.full(50, 40.0)])
    y = np.repeat([0, 1], 50)
    A, B = fit_platt(f, y)
    assert np.isfinite(A) and np.isfinite(B) and A < 0
    p = platt_predict(np.array([-1e4, 0.0, 1e4]), A, B)
    assert np.all(np.isfinite(p)) and p[0] < 0.05 and p[2] > 0.95


def test_fit_platt_bad_input():
    with pytest.raises(ValueError, match="entries"):
        fit_platt(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        fit_platt(np.array([0.0, np.nan]), np.array([0, 1]))
    with pytest.raises(ValueError, match="at least one"):
        fit_platt(np.zeros(0), np.zeros(0))


def test_couple_pairwise_recovers_consistent_probabilities():
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(4), size=50)
    R = p[:, :, None] / (p[:, :, None] + p[:, None, :])
    out = couple_pairwise(R)
    np.testing.assert_allclose(out, p, atol=1e-6)
    # inconsistent pairwise estimates still give a distribution
    noisy = np.clip(R + rng.normal(scale=0.1, size=R.shape), 0, 1)
    noisy = (noisy + 1 - np.swapaxes(noisy, 1, 2)) / 2
    q = couple_pairwise(noisy)
    assert np.all(q >= 0)
    np.testing.assert_allclose(q.sum(axis=1), 1.0)


# --------------------------------------------------------------------------- KernelSVC
def test_binary_probabilities_close_to_svc():
    X, y = _two_class()
    Xte, yte = _two_class(1000, seed=1)
    est = KernelSVC(C=1.0, gamma=0.5, probability=True, random_state=0, device="cpu").fit(X, y)
    ref = SVC(C=1.0, gamma=0.5, probability=True, random_state=0).fit(X, y)
    P, Q = est.predict_proba(Xte), ref.predict_proba(Xte)
    assert P.shape == (1000, 2)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.mean(np.abs(P - Q)) < 0.03
    # calibrated about as well as LIBSVM's Platt scaling
    assert brier_score_loss(yte, P[:, 1]) <= brier_score_loss(yte, Q[:, 1]) + 0.01
    assert log_loss(yte, P) <= log_loss(yte, Q) + 0.03
    assert np.mean(P.argmax(axis=1) == est.predict(Xte)) >= 0.95
    np.testing.assert_allclose(est.predict_log_proba(Xte), np.log(P))


def test_multiclass_ovo_probabilities():
    X, y = make_blobs(900, centers=3, cluster_std=2.5, random_state=0)
    X, y, Xte, yte = X[:300], y[:300], X[300:], y[300:]
    est = KernelSVC(C=1.0, gamma=0.3, probability=True, random_state=0, device="cpu").fit(X, y)
    ref = SVC(C=1.0, gamma=0.3, probability=True, random_state=0).fit(X, y)
    P, Q = est.predict_proba(Xte), ref.predict_proba(Xte)
    assert est.probA_.shape == (3,)
    assert np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.mean(np.abs(P - Q)) < 0.03
    assert log_loss(yte, P) <= log_loss(yte, Q) + 0.05
    assert np.mean(P.argmax(axis=1) == est.predict(Xte)) >= 0.95


def test_probability_reproducible_and_unavailable_when_off():
    X, y = _two_class(200)
    a = KernelSVC(probability=True, random_state=3, device="cpu").fit(X, y).predict_proba(X)
    b = KernelSVC(probability=True, random_state=3, device="cpu").fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    off = KernelSVC(device="cpu").fit(X, y)
    assert not hasattr(off, "predict_proba")
    with pytest.raises(AttributeError, match="predict_proba"):
        off.predict_proba(X)
    with pytest.raises(NotFittedError):
        KernelSVC(probability=True).predict_proba(X)


def test_tiny_class_falls_back_to_in_sample_values():
    X, y = _two_class(60)
    y[:] = 0
    y[0] = 1  # one row of class 1: no 2-fold CV possible
    est = KernelSVC(C=1.0, probability=True, random_state=0, device="cpu").fit(X, y)
    P = est.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


# --------------------------------------------------------------------------- OvR host
class _OvRLinear(ProbabilityMixin, ClassifierMixin, BaseEstimator):
    """Minimal one-vs-rest classifier using the mixin's default hooks."""

    def __init__(self, C=1.0, probability=False, random_state=None):
        self.C = C
        self.probability = probability
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        self.m_ = LinearSVC(C=self.C).fit(X, y, sample_weight=sample_weight)
        self.classes_ = self.m_.classes_
        if self.probability:
            self._fit_probability(X, y, sample_weight)
        return self

    def decision_function(self, X):
        return self.m_.decision_function(X)


def test_ovr_normalized_probabilities():
    X, y = make_blobs(300, centers=4, cluster_std=1.5, random_state=0)
    est = _OvRLinear(probability=True, random_state=0).fit(X, y)
    P = est.predict_proba(X)
    assert est.probA_.shape == (4,)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.mean(P.argmax(axis=1) == est.m_.predict(X)) >= 0.95
    w = np.random.default_rng(0).uniform(0.5, 2, size=300)
    Pw = _OvRLinear(probability=True, random_state=0).fit(X, y, sample_weight=w).predict_proba(X)
    np.testing.assert_allclose(Pw.sum(axis=1), 1.0)
