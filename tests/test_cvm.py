"""Tests of the Core Vector Machine estimators (gpuksvm.estimators.cvm; SPEC §2).

The references are independent: the MEB dual on the simplex min αᵀK̃α,
α ≥ 0, Σα = 1 has the same KKT system as the non-negative least squares
problem min_{γ≥0} ‖Lᵀγ − L⁻¹1‖² (K̃ = LLᵀ) up to α = γ/Σγ, which scipy's
Lawson–Hanson NNLS solves exactly; and the two-class L2-SVM with a linear
kernel is LIBLINEAR's squared-hinge SVM with C/2 and the bias as a feature of
value 1 (scikit-learn's ``LinearSVC``).  Kernels for the references come from
scikit-learn's pairwise kernels, not from gpuksvm.  The solver pieces
(core-set QP, cache, scanners) are tested in ``tests/solvers/test_cvm_solvers.py``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import nnls
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel
from sklearn.svm import LinearSVC

from gpuksvm.array import backend as bk
from gpuksvm.solvers.cvm import algorithm as cvm_module
from gpuksvm.estimators.cvm import CVM, OneClassCVM
from gpuksvm.datasets import make_checkerboard


# --------------------------------------------------------------------------- references
def simplex_qp_reference(Kt: np.ndarray) -> np.ndarray:
    """arg-min of αᵀK̃α over the simplex by NNLS; asserts its own KKT conditions."""
    L = np.linalg.cholesky(Kt)
    gam, _ = nnls(L.T, np.linalg.solve(L, np.ones(Kt.shape[0])), maxiter=50 * Kt.shape[0])
    a = gam / gam.sum()
    g = Kt @ a
    rho = a @ g
    assert g.min() >= rho - 1e-10 and np.abs(g[a > 0] - rho).max() < 1e-10   # KKT of the reference
    return a


def ktilde(K: np.ndarray, y: np.ndarray | None, C: float) -> np.ndarray:
    """K̃ of eq. 10 (two-class) or eq. 7 (one-class, y None)."""
    if y is None:
        return K + np.eye(K.shape[0]) / C
    return np.outer(y, y) * (K + 1.0) + np.eye(K.shape[0]) / C


def normalized_poly(A, B, degree=2, coef0=1.0, gamma=0.5):
    K = polynomial_kernel(A, B, degree=degree, gamma=gamma, coef0=coef0)
    da = polynomial_kernel(A, A, degree=degree, gamma=gamma, coef0=coef0).diagonal()
    db = polynomial_kernel(B, B, degree=degree, gamma=gamma, coef0=coef0).diagonal()
    return K / np.sqrt(np.outer(da, db))


def full_alpha(model, n: int) -> np.ndarray:
    a = np.zeros(n)
    a[model.core_set_[0]] = model.alpha_[0]
    return a


def relative_gap(K: np.ndarray, y: np.ndarray | None, C: float, a: np.ndarray) -> float:
    """The L2-SVM's (P − D)/|D| at α over all rows (module docstring of gpuksvm.estimators.cvm), by hand."""
    yy = np.ones(len(a)) if y is None else y
    ay = a * yy
    f = K @ ay + (ay.sum() if y is not None else 0.0)
    q = a @ ktilde(K, y, C) @ a
    xi = np.maximum(q - yy * f, 0.0)
    return (C * xi @ xi - a @ a / C) / q


@pytest.fixture(scope="module")
def board():
    X, y = make_checkerboard(240, grid=2, random_state=3)
    return X, y


def overlapping_classes(n: int, d: int = 5, seed: int = 0):
    """Two Gaussian classes that overlap (not separable), labels ±1."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, d)) + 0.6 * y[:, None] * np.linspace(1.0, 0.2, d)[None, :] + 0.5
    return X, y


# --------------------------------------------------------------------------- dual = dense QP
@pytest.mark.parametrize("C", [10.0, 1000.0])
def test_two_class_dual_equals_dense_qp(board, C):
    X, y = board
    Kt = ktilde(rbf_kernel(X, gamma=4.0), y, C)
    a_ref = simplex_qp_reference(Kt)
    m = CVM(gamma=4.0, C=C, tol=1e-10, sample_size=None, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == ["converged"] and m.search_ == "exact"
    a = full_alpha(m, len(y))
    assert a.sum() == pytest.approx(1.0, abs=1e-12) and a.min() >= 0.0
    np.testing.assert_allclose(a, a_ref, atol=1e-6)
    # ρ = αᵀK̃α (the optimal value) and b = Σαᵢyᵢ
    assert m.rho_[0] == pytest.approx(a_ref @ Kt @ a_ref, rel=1e-9)
    assert m.intercept_[0] == pytest.approx(a_ref @ y, abs=1e-6)
    # the support vectors are exactly the rows with α > 0 in the reference
    np.testing.assert_array_equal(np.sort(m.support_), np.nonzero(a_ref > 1e-7)[0])


def test_one_class_and_normalized_kernel_duals_equal_dense_qp(board):
    X, y = board
    # one-class, RBF (eq. 7)
    Kt = ktilde(rbf_kernel(X, gamma=4.0), None, 2.0)
    a_ref = simplex_qp_reference(Kt)
    oc = OneClassCVM(gamma=4.0, C=2.0, tol=1e-10, sample_size=None, device="cpu", random_state=0).fit(X)
    np.testing.assert_allclose(full_alpha(oc, len(X)), a_ref, atol=1e-6)
    assert oc.rho_[0] == pytest.approx(a_ref @ Kt @ a_ref, rel=1e-9)
    assert oc.offset_ == pytest.approx(oc.rho_[0] - 3 * np.median(oc.alpha_[0][oc.alpha_[0] > 0]) / 2.0,
                                       rel=1e-12)
    # two-class, normalized polynomial kernel κ(x,z)/√(κ(x,x)κ(z,z)) (paper eq. 4, case 3)
    Xs = X * 3.0 - 1.0
    Kt = ktilde(normalized_poly(Xs, Xs), y, 100.0)
    a_ref = simplex_qp_reference(Kt)
    m = CVM(kernel="poly", degree=2, coef0=1.0, gamma=0.5, C=100.0, normalize=True, tol=1e-10,
            sample_size=None, device="cpu", random_state=0).fit(Xs, y)
    np.testing.assert_allclose(full_alpha(m, len(y)), a_ref, atol=1e-6)
    np.testing.assert_allclose(m.decision_function(Xs),
                               normalized_poly(Xs, Xs) @ (a_ref * y) + a_ref @ y, atol=1e-5)


# --------------------------------------------------------------------------- primal/dual recovery
def test_primal_dual_recovery_two_class(board):
    X, y = board
    C = 50.0
    m = CVM(gamma=4.0, C=C, tol=1e-12, sample_size=None, device="cpu", random_state=0).fit(X, y)
    a = full_alpha(m, len(y))
    K = rbf_kernel(X, gamma=4.0)
    ay = a * y
    # f(x) = wᵀφ(x) + b with w = Σαᵢyᵢφ(xᵢ), b = Σαᵢyᵢ (eq. 11)
    f = m.decision_function(X)
    np.testing.assert_allclose(f, K @ ay + ay.sum(), atol=1e-9)
    rho = m.rho_[0]
    margin = y * f
    sv = a > 0
    # support vectors: yᵢf(xᵢ) = ρ − ξᵢ with ξᵢ = αᵢ/C; all rows: yᵢf(xᵢ) ≥ ρ − ξᵢ
    np.testing.assert_allclose(margin[sv] + a[sv] / C, rho, atol=1e-8)
    assert (margin[~sv] >= rho - 1e-8).all()
    # zero duality gap: ‖w‖² + b² − 2ρ + CΣξ² (primal, eq. 8) = −αᵀK̃α (dual)
    xi = np.maximum(rho - margin, 0.0)
    np.testing.assert_allclose(xi, a / C, atol=1e-8)
    primal = ay @ K @ ay + ay.sum() ** 2 - 2 * rho + C * (xi ** 2).sum()
    assert primal == pytest.approx(-rho, rel=1e-7)
    # the stored model is that expansion
    np.testing.assert_allclose(m.dual_coef_[0], ay[m.support_], atol=0)
    assert m.intercept_[0] == pytest.approx(ay.sum(), abs=1e-15)
    assert m.radius_[0] ** 2 == pytest.approx(m.kappa_tilde_ - rho, rel=1e-12)


def test_primal_dual_recovery_one_class():
    X = np.random.default_rng(1).normal(size=(200, 3))
    C = 5.0
    oc = OneClassCVM(gamma=0.3, C=C, tol=1e-12, sample_size=None, device="cpu", random_state=0).fit(X)
    a = full_alpha(oc, len(X))
    K = rbf_kernel(X, gamma=0.3)
    np.testing.assert_allclose(oc.score_samples(X), K @ a, atol=1e-9)
    dec = oc.decision_function(X)
    np.testing.assert_allclose(dec, K @ a - oc.offset_, atol=1e-9)
    rho = oc.rho_[0]
    sv = a > 0
    # wᵀφ(xᵢ) = ρ − αᵢ/C on the support vectors, ≥ ρ elsewhere (one-class eq. 6/7); tol bounds the
    # relative duality gap, not this residual: random_state 0–7 leave 1.9e-9 to 2.1e-8
    np.testing.assert_allclose((K @ a - rho)[sv], -a[sv] / C, atol=5e-8)
    assert ((K @ a - rho)[~sv] >= -1e-8).all()
    primal = a @ K @ a - 2 * rho + C * ((a / C) ** 2).sum()
    assert primal == pytest.approx(-rho, rel=1e-7)
    # the outlier threshold: ρ − 3·median(α_SV)/C
    assert oc.offset_ == pytest.approx(rho - 3 * np.median(a[sv]) / C, rel=1e-12)
    np.testing.assert_array_equal(oc.predict(X), np.where(dec >= 0, 1, -1))


# --------------------------------------------------------------------------- the stop rule
@pytest.mark.parametrize("task", ["two_class", "one_class", "one_class_finished"])
def test_stop_rule_is_the_relative_duality_gap(board, task, monkeypatch):
    """Stopped at tol, the L2-SVM's relative duality gap over all rows is ≤ tol, and so is the
    relative suboptimality of the dual, (αᵀK̃α − p*)/αᵀK̃α, against the dense reference.

    OneClassCVM finishes its core-set QP before taking its outlier threshold
    ("one_class_finished"): ``duality_gap_`` is then the gap of the finished α (it reported the
    gap of the rows outside the core set at the α before the finish); "one_class" checks the
    stop rule itself with that finish switched off."""
    X, y = board
    yy = y if task == "two_class" else None
    if task == "one_class":
        monkeypatch.setattr(cvm_module, "THRESHOLD_KKT", None)
    C = 20.0
    K = rbf_kernel(X, gamma=4.0)
    Kt = ktilde(K, yy, C)
    a_ref = simplex_qp_reference(Kt)
    q_star = a_ref @ Kt @ a_ref
    sub = []
    for tol in (3e-1, 1e-1, 1e-2, 1e-3):
        kw = dict(gamma=4.0, C=C, tol=tol, sample_size=None, device="cpu", random_state=0)
        m = CVM(**kw).fit(X, y) if yy is not None else OneClassCVM(**kw).fit(X)
        assert m.stop_reason_ == ["converged"]
        a = full_alpha(m, len(X))
        q = a @ Kt @ a
        gap = relative_gap(K, yy, C, a)
        assert 0.0 <= gap <= tol and m.duality_gap_[0] == pytest.approx(gap, rel=1e-6, abs=1e-12)
        assert 0.0 <= (q - q_star) / q <= tol
        sub.append((q - q_star) / q)
    if task != "one_class_finished":
        assert sub[0] > 1e-3      # not vacuous: a loose tol stops visibly earlier


@pytest.mark.parametrize("C", [100.0, 1000.0])
def test_large_C_reaches_the_l2svm_optimum(C):
    """At large C the fit is the L2-SVM asked for: LIBLINEAR's squared-hinge SVM (LinearSVC with
    C/2, bias regularized as a feature of value 1) on the explicit normalized-linear feature map
    reaches the same objective within the default tol (the old (1+ε)-ball rule stopped with the
    objective several times the optimum and said "converged")."""
    X, y = overlapping_classes(600)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)        # the feature map of κ(x,z)/√(κ(x,x)κ(z,z))
    m = CVM(kernel="linear", normalize=True, C=C, device="cpu", random_state=0).fit(X, y)
    ref = LinearSVC(loss="squared_hinge", C=C / 2, intercept_scaling=1.0, tol=1e-10,
                    max_iter=10_000, dual=False).fit(Xn, y)         # primal trust-region Newton

    def objective(w, b):     # ½‖w‖² + ½b² + (C/2) Σ max(0, 1 − y(wᵀx̂ + b))²
        xi = np.maximum(0.0, 1.0 - y * (Xn @ w + b))
        return 0.5 * (w @ w + b * b) + 0.5 * C * xi @ xi

    rho = m.rho_[0]
    w = (m.dual_coef_[0] @ Xn[m.support_]) / rho                # f' = f/ρ (module docstring)
    b = m.intercept_[0] / rho
    j_ref = objective(ref.coef_[0], ref.intercept_[0])
    assert m.stop_reason_ == ["converged"]
    assert objective(w, b) <= j_ref * (1 + 1e-2)
    agree = np.mean(np.sign(Xn @ w + b) == np.sign(ref.decision_function(Xn)))
    assert agree > 0.99


# --------------------------------------------------------------------------- early stops say so
def test_early_stops_are_recorded_and_warned():
    X, y = make_checkerboard(2000, random_state=0)
    kw = dict(gamma=30.0, C=1000.0, device="cpu", random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        m = CVM(max_iter=2, **kw).fit(X, y)
    assert m.stop_reason_ == ["max_iter"] and m.n_iter_.tolist() == [2]
    assert m.duality_gap_[0] > m.tol
    with pytest.warns(ConvergenceWarning, match="max_core_size"):
        m = CVM(max_core_size=4, **kw).fit(X, y)
    assert m.stop_reason_ == ["max_core_size"] and m.core_set_size_.tolist() == [4]
    assert m.alpha_[0].sum() == pytest.approx(1.0)
    # a converged fit is silent
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = CVM(**kw).fit(X, y)
    assert m.stop_reason_ == ["converged"] and m.duality_gap_[0] <= m.tol


def test_stalled_qp_cannot_hang(board, monkeypatch):
    """If the core-set QP makes no progress the gap stays above tol: stop, say so, don't loop."""
    from gpuksvm.solvers.cvm import simplex_qp

    def frozen(self, *args, **kwargs):
        self.status = "max_steps"
        return 0

    monkeypatch.setattr(simplex_qp.CoreSetQP, "solve", frozen)
    X, y = board
    with pytest.warns(ConvergenceWarning, match="stalled"):
        m = CVM(gamma=4.0, C=10.0, sample_size=None, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == ["stalled"]


# --------------------------------------------------------------------------- row order
def test_row_order_does_not_change_the_model():
    """Rows sorted by label (as LIBSVM files often are) and shuffled give the same L2-SVM: the same
    core vectors with the same α (the sampled search draws from the rows' content-hash order)."""
    X, y = make_checkerboard(3000, grid=2, random_state=0)
    Xt, yt = make_checkerboard(4000, grid=2, random_state=1)
    kw = dict(gamma=10.0, C=1000.0, device="cpu", random_state=0)
    perm = np.random.default_rng(1).permutation(len(y))
    order = np.argsort(y, kind="stable")
    a = CVM(**kw).fit(X[perm], y[perm])
    b = CVM(**kw).fit(X[order], y[order])
    assert a.search_ == b.search_ == "sampled(59)"
    np.testing.assert_array_equal(perm[a.core_set_[0]], order[b.core_set_[0]])
    np.testing.assert_allclose(a.alpha_[0], b.alpha_[0], rtol=1e-9, atol=1e-15)
    fa, fb = a.decision_function(Xt), b.decision_function(Xt)
    np.testing.assert_allclose(fa, fb, rtol=0, atol=1e-9 * np.abs(fa).max())
    assert a.score(Xt, yt) == b.score(Xt, yt) > 0.97


# --------------------------------------------------------------------------- one-class outliers
def test_one_class_flags_planted_outliers():
    rng = np.random.default_rng(0)
    Xin = rng.normal(size=(300, 2))
    ang = rng.uniform(0, 2 * np.pi, 10)
    Xout = np.c_[6 * np.cos(ang), 6 * np.sin(ang)]
    X = np.vstack([Xin, Xout])
    oc = OneClassCVM(C=1.0, gamma="mean_dist", device="cpu", random_state=0).fit(X)
    pred = oc.predict(X)
    assert set(np.unique(pred)) <= {-1, 1}
    assert (pred[300:] == -1).all()                                  # every planted outlier
    assert (pred[:300] == 1).mean() > 0.95
    dec = oc.decision_function(X)
    assert dec[300:].max() < np.median(dec[:300])
    # fresh points: far ones are outliers, the blob centre is normal, and the
    # scores rank fresh blob points above fresh ring points (AUC = 1)
    t = np.linspace(0, 2 * np.pi, 50, endpoint=False)
    far = np.c_[9 * np.cos(t), 9 * np.sin(t)]
    assert (oc.predict(far) == -1).all()
    assert oc.predict([[0.0, 0.0]])[0] == 1
    fresh = rng.normal(size=(500, 2))
    fresh = fresh[np.linalg.norm(fresh, axis=1) < 3.0]
    assert oc.score_samples(fresh).min() > oc.score_samples(far).max()
    np.testing.assert_allclose(oc.decision_function(X), oc.score_samples(X) - oc.offset_)
    # the same model through CVM(task="one_class")
    m = CVM(task="one_class", C=1.0, gamma="mean_dist", device="cpu", random_state=0).fit(X)
    np.testing.assert_array_equal(m.predict(X), pred)
    np.testing.assert_allclose(m.decision_function(X), dec, atol=1e-12)


# --------------------------------------------------------------------------- sampled vs exact
def test_sampled_and_exact_search_same_accuracy():
    X, y = make_checkerboard(4000, random_state=0)
    Xt, yt = make_checkerboard(5000, random_state=1)
    kw = dict(gamma=30.0, C=1e4, device="cpu", random_state=0)
    ex = CVM(sample_size=None, **kw).fit(X, y)
    sa = CVM(sample_size=59, **kw).fit(X, y)
    assert ex.search_ == "exact" and sa.search_ == "sampled(59)"
    assert ex.stop_reason_ == sa.stop_reason_ == ["converged"]
    acc_ex, acc_sa = ex.score(Xt, yt), sa.score(Xt, yt)
    assert acc_ex > 0.98 and acc_sa > 0.98
    assert abs(acc_ex - acc_sa) < 0.01
    # the exact search's gap is over every row: within tol; the sampled one estimated it
    assert ex.duality_gap_[0] <= ex.tol and sa.duality_gap_[0] <= sa.tol


def test_small_problem_uses_exact_search():
    X, y = make_checkerboard(300, grid=2, random_state=0)
    m = CVM(sample_size=59, n_tries=7, device="cpu", random_state=0).fit(X, y)
    assert m.search_ == "exact"           # 300 ≤ 59·7 rows: sampling would not save anything


def test_zoo_problem_terminates_and_is_accurate():
    """The binary problem of tests/_estimator_zoo.py (it used to loop forever)."""
    X, y = make_checkerboard(300, grid=2, random_state=0)
    m = CVM(gamma=2.0, C=10.0, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == ["converged"]
    assert m.score(X, y) > 0.95
    K = rbf_kernel(X, gamma=2.0)
    assert relative_gap(K, y, 10.0, full_alpha(m, len(y))) <= m.tol


# --------------------------------------------------------------------------- interface
def test_multiclass_ovo_and_ovr():
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    yl = np.repeat(np.array(["a", "b", "c"]), 80)
    X = centers[np.searchsorted(["a", "b", "c"], yl)] + rng.normal(scale=0.6, size=(240, 2))
    for mc in ("ovo", "ovr"):
        m = CVM(C=10.0, multi_class=mc, device="cpu", random_state=0).fit(X, yl)
        assert list(m.classes_) == ["a", "b", "c"]
        assert m.score(X, yl) > 0.95
        D = m.decision_function(X)
        assert D.shape == (240, 3)
        np.testing.assert_array_equal(m.classes_[D.argmax(axis=1)], m.predict(X))
        assert len(m.core_set_) == 3 and len(m.stop_reason_) == 3 and len(m.duality_gap_) == 3
        assert m.dual_coef_.shape == (3, len(m.support_))
    # ovo problems only see their two classes
    m = CVM(C=10.0, device="cpu", random_state=0).fit(X, yl)
    for (i, j), core in zip(m.problems_, m.core_set_):
        assert set(np.unique(yl[core])) <= {m.classes_[i], m.classes_[j]}


@pytest.mark.parametrize("n_classes", [2, 3, 1])
def test_per_problem_attributes_have_one_shape(n_classes):
    """Issue 16: whatever the number of binary problems (one for two classes and for the
    one-class task), numeric per-problem attributes are arrays of shape (n_problems,) and
    per-problem objects lists of n_problems entries, in the order of problems_."""
    X, y = make_checkerboard(400, grid=2, random_state=0)
    if n_classes == 3:
        y = np.where(X[:, 0] > 0.6, 2, y)
    m = (OneClassCVM(device="cpu", random_state=0).fit(X) if n_classes == 1
         else CVM(gamma=4.0, C=10.0, device="cpu", random_state=0).fit(X, y))
    P = 1 if n_classes < 3 else 3
    if n_classes > 1:
        assert len(m.problems_) == P
    for name, kind in (("n_iter_", "i"), ("n_smo_steps_", "i"), ("core_set_size_", "i"),
                       ("radius_", "f"), ("duality_gap_", "f"), ("rho_", "f")):
        v = getattr(m, name)
        assert isinstance(v, np.ndarray) and v.shape == (P,) and v.dtype.kind == kind, name
    for name in ("core_set_", "alpha_", "stop_reason_", "history_"):
        assert isinstance(getattr(m, name), list) and len(getattr(m, name)) == P, name
    for p in range(P):
        assert m.core_set_[p].dtype.kind == "i" and m.alpha_[p].shape == m.core_set_[p].shape
        assert m.core_set_size_[p] == len(m.core_set_[p])
        assert m.alpha_[p].sum() == pytest.approx(1.0)
        assert m.stop_reason_[p] == "converged" and m.duality_gap_[p] <= m.tol
        assert m.history_[p]["m"][-1] >= 2 and m.n_iter_[p] == len(m.history_[p]["m"])


def test_sparse_equals_dense(board):
    X, y = board
    kw = dict(gamma=4.0, C=10.0, tol=1e-8, sample_size=None, device="cpu", random_state=0)
    d = CVM(**kw).fit(X, y)
    s = CVM(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(d.core_set_, s.core_set_)
    np.testing.assert_allclose(d.alpha_, s.alpha_, atol=1e-12)
    np.testing.assert_allclose(d.decision_function(X), s.decision_function(sp.csr_matrix(X)), atol=1e-10)


def test_random_state_reproducible():
    X, y = make_checkerboard(3000, random_state=0)
    kw = dict(gamma=30.0, C=1000.0, sample_size=59, device="cpu")
    a = CVM(random_state=7, **kw).fit(X, y)
    b = CVM(random_state=7, **kw).fit(X, y)
    np.testing.assert_array_equal(a.core_set_, b.core_set_)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)
    c = CVM(random_state=np.random.RandomState(7), **kw).fit(X, y)
    np.testing.assert_array_equal(a.core_set_, c.core_set_)
    d = CVM(random_state=8, **kw).fit(X, y)
    assert not np.array_equal(a.core_set_[0], d.core_set_[0])
    Xb = np.random.default_rng(0).normal(size=(3000, 2))
    oc1 = OneClassCVM(random_state=3, device="cpu").fit(Xb)
    oc2 = OneClassCVM(random_state=3, device="cpu").fit(Xb)
    assert oc1.search_ == "sampled(59)"
    np.testing.assert_array_equal(oc1.core_set_, oc2.core_set_)
    np.testing.assert_array_equal(oc1.alpha_, oc2.alpha_)


def test_bad_inputs_raise_clear_errors(board):
    X, y = board
    Xc, yc = X.copy(), y.copy()
    est = CVM(device="cpu", random_state=0)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(Xn, y)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.fit(Xi, y)
    with pytest.raises(ValueError, match="class"):
        est.fit(X, np.ones(len(y)))
    with pytest.raises(ValueError):
        est.fit(np.empty((0, 2)), np.empty(0))
    with pytest.raises(ValueError, match="inconsistent"):
        est.fit(X, y[:-1])
    with pytest.raises(ValueError, match="n_samples=1"):
        OneClassCVM(device="cpu").fit(X[:1])
    for bad in (dict(C=0.0), dict(C=-1.0), dict(tol=0.0), dict(tol=-1.0), dict(sample_size=0),
                dict(n_tries=0), dict(max_iter=0), dict(max_core_size=1), dict(gamma=-1.0),
                dict(cache_size=0), dict(shrinking="yes"), dict(task="x"),
                dict(multi_class="x"), dict(normalize="yes"), dict(kernel="nope")):
        with pytest.raises(ValueError):
            CVM(device="cpu", **bad).fit(X, y)
    with pytest.raises(ValueError, match="constant"):
        CVM(kernel="poly", device="cpu").fit(X, y)         # κ(x,x) depends on x
    with pytest.raises(ValueError, match="constant"):
        OneClassCVM(kernel="linear", device="cpu").fit(X)
    with pytest.raises(ValueError, match="positive semi-definite"):
        CVM(kernel="sigmoid", normalize=True, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="κ\\(x, x\\) > 0"):
        CVM(kernel="linear", normalize=True, device="cpu").fit(np.vstack([X, [[0.0, 0.0]]]),
                                                               np.r_[y, 1.0])
    m = CVM(gamma=4.0, device="cpu", random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="NaN"):
        m.decision_function(np.full((2, 2), np.nan))
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        CVM().predict(X)
    # the caller's arrays are never modified
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)


def test_deprecated_parameters_warn(board):
    X, y = board
    ref = CVM(gamma=4.0, C=10.0, device="cpu", random_state=0).fit(X, y)
    for old in (dict(eps=1e-5), dict(eps_schedule="fixed"), dict(inner_solver="smo")):
        with pytest.warns(FutureWarning, match=next(iter(old))):
            m = CVM(gamma=4.0, C=10.0, device="cpu", random_state=0, **old).fit(X, y)
        np.testing.assert_array_equal(m.core_set_, ref.core_set_)     # no effect on the fit
    for bad in (dict(eps=0.0), dict(eps_schedule="x"), dict(inner_solver="x")):
        with pytest.raises(ValueError):
            CVM(device="cpu", **bad).fit(X, y)


def test_params_untouched_and_clone(board):
    from sklearn.base import clone

    X, y = board
    est = CVM(C=3.0, sample_size=None, device="cpu", random_state=0)
    p = est.get_params()
    est.fit(X, y)
    assert est.get_params() == p
    assert clone(est).get_params() == p
    # gamma="scale" as KernelSVC/LLSVM: 1/(d·Var(X)); "mean_dist" stays available
    assert est.kernel_.gamma == pytest.approx(1.0 / (X.shape[1] * X.var()))
    md = CVM(gamma="mean_dist", sample_size=None, device="cpu", random_state=0).fit(X, y)
    assert md.kernel_.gamma == pytest.approx(1.0 / (2 * len(X) / (len(X) - 1) * X.var(axis=0).sum()))


# --------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_gpu_fit_equals_cpu_fit(gpu, board):
    X, y = board
    kw = dict(gamma=4.0, C=100.0, tol=1e-10, sample_size=None, dtype=np.float64, random_state=0)
    c = CVM(device="cpu", **kw).fit(X, y)
    g = CVM(device="gpu", **kw).fit(X, y)
    assert g.fitted_device_.startswith("cuda")
    np.testing.assert_allclose(full_alpha(g, len(y)), full_alpha(c, len(y)), atol=1e-7)
    np.testing.assert_allclose(np.asarray(bk.to_host(g.decision_function(X))), c.decision_function(X),
                               atol=1e-6)
    # float32 sampled search on a GPU: same accuracy as the CPU on the checkerboard
    Xb, yb = make_checkerboard(20000, random_state=0)
    Xt, yt = make_checkerboard(5000, random_state=1)
    kw = dict(gamma=30.0, C=1e4, random_state=0)
    acc_c = CVM(device="cpu", **kw).fit(Xb, yb).score(Xt, yt)
    gm = CVM(device="gpu", **kw).fit(gpu.asarray(Xb), gpu.asarray(yb))
    acc_g = float((np.asarray(bk.to_host(gm.predict(gpu.asarray(Xt)))) == yt).mean())
    assert acc_g > 0.98 and abs(acc_g - acc_c) < 0.01


@pytest.mark.gpu
@pytest.mark.parametrize("sample_size", [59, None])
def test_gpu_fit_does_not_depend_on_the_row_order(gpu, sample_size):
    """On a GPU the rows are hashed on the device and the fused kernel scores the samples: the same
    core set and model in any row order.  Against the NumPy twin (float64): the sampled search finds
    the same core set.  The exact search follows the GPU's rounding: NVRTC contracts a·b + c into
    FMAs (not the products g++ fuses in the emulated GPU), and the arg-min over every row meets
    near-ties.  On an H200 it
    found 185 core vectors against the twin's 175 in each row order (compiled with --fmad=false, the
    twin's 175), decision values within 1.05e-4 of the twin's (6.2 % of their largest magnitude,
    1.69e-3), accuracy 0.970 against 0.968; there the model is held to the twin's within about
    that (a tenth of the largest magnitude, half a point of accuracy)."""
    X, y = make_checkerboard(1000, random_state=0)
    Xt, yt = make_checkerboard(500, random_state=1)
    kw = dict(gamma=30.0, C=100.0, sample_size=sample_size, dtype=np.float64, random_state=0)
    ref = CVM(device="cpu", **kw).fit(X, y)
    want = np.sort(ref.core_set_[0])
    dec = ref.decision_function(Xt)
    rng = np.random.default_rng(2)
    first = None
    for idx in (np.arange(len(y)), rng.permutation(len(y)), np.argsort(y, kind="stable")):
        g = CVM(device="gpu", **kw).fit(gpu.asarray(X[idx]), gpu.asarray(y[idx]))
        assert g.search_ == ref.search_
        core = np.sort(idx[g.core_set_[0]])
        first = core if first is None else first
        np.testing.assert_array_equal(core, first)
        got = np.asarray(bk.to_host(g.decision_function(Xt)))
        if sample_size is not None:
            np.testing.assert_array_equal(core, want)
            np.testing.assert_allclose(got, dec, rtol=0, atol=1e-9 * np.abs(dec).max())
        else:
            np.testing.assert_allclose(got, dec, rtol=0, atol=0.1 * np.abs(dec).max())
            acc = np.mean(np.asarray(bk.to_host(g.predict(Xt))) == yt)
            assert abs(acc - ref.score(Xt, yt)) <= 0.005


@pytest.mark.parametrize("kind", ["duplicates", "constant_features", "bool"])
def test_one_class_does_not_flag_every_row_of_redundant_data(kind):
    """Issue 14: on data with many duplicate rows, constant features or bool X every training row
    was an outlier — every L2 support vector has slack αⱼ/C > 0 and such data make nearly every
    row a support vector.  The threshold now sits at 3× the median support-vector slack."""
    rng = np.random.default_rng(0)
    X = {"duplicates": np.repeat(rng.normal(size=(20, 3)), 10, axis=0),
         "constant_features": np.column_stack([rng.normal(size=200), np.ones(200), np.zeros(200)]),
         "bool": rng.random((200, 5)) > 0.5}[kind]
    oc = OneClassCVM(device="cpu", random_state=0).fit(X)
    flagged = (oc.predict(X) == -1).mean()
    assert flagged < 0.15, flagged
    # far away points are still novel
    far = np.full((3, X.shape[1]), 25.0)
    assert (oc.predict(far) == -1).all()


def test_ovo_shape_with_break_ties_is_refused_at_fit():
    # CVM's break_ties defaults to True: "ovo" alone would fit, then fail at every predict
    X, y = make_blobs(90, centers=3, random_state=0)
    with pytest.raises(ValueError, match="break_ties must be False"):
        CVM(decision_function_shape="ovo", device="cpu").fit(X, y)
    est = CVM(decision_function_shape="ovo", break_ties=False, device="cpu").fit(X, y)
    assert est.predict(X).shape == (90,)
