"""Tests of the Core Vector Machine (gpuksvm.cvm, gpuksvm.solvers.meb; SPEC §2).

The reference for the MEB dual is an independent dense solve: the simplex QP
min αᵀK̃α, α ≥ 0, Σα = 1 has the same KKT system as the non-negative least
squares problem min_{γ≥0} ‖Lᵀγ − L⁻¹1‖² (K̃ = LLᵀ) up to α = γ/Σγ, which
scipy's Lawson–Hanson NNLS solves exactly.  Kernels for the references come
from scikit-learn's pairwise kernels, not from gpuksvm.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import nnls
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

from gpuksvm import backend as bk
from gpuksvm.cvm import CVM, OneClassCVM
from gpuksvm.datasets import make_checkerboard
from gpuksvm.kernels import Kernel
from gpuksvm.solvers.meb import HostScanner, SimplexMEB


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
    a[model.core_set_] = model.alpha_
    return a


@pytest.fixture(scope="module")
def board():
    X, y = make_checkerboard(240, grid=2, random_state=3)
    return X, y


# --------------------------------------------------------------------------- dual = dense QP
@pytest.mark.parametrize("inner", ["active_set", "smo"])
@pytest.mark.parametrize("C", [10.0, 1000.0])
def test_two_class_dual_equals_dense_qp(board, inner, C):
    X, y = board
    Kt = ktilde(rbf_kernel(X, gamma=4.0), y, C)
    a_ref = simplex_qp_reference(Kt)
    m = CVM(gamma=4.0, C=C, eps=1e-10, sample_size=None, inner_solver=inner, device="cpu",
            random_state=0).fit(X, y)
    assert m.stop_reason_ == "converged" and m.search_ == "exact"
    a = full_alpha(m, len(y))
    assert a.sum() == pytest.approx(1.0, abs=1e-12) and a.min() >= 0.0
    np.testing.assert_allclose(a, a_ref, atol=1e-7)
    # ρ = αᵀK̃α (the optimal value) and b = Σαᵢyᵢ
    assert m.rho_[0] == pytest.approx(a_ref @ Kt @ a_ref, rel=1e-10)
    assert m.intercept_[0] == pytest.approx(a_ref @ y, abs=1e-7)
    # the support vectors are exactly the rows with α > 0 in the reference
    np.testing.assert_array_equal(np.sort(m.support_), np.nonzero(a_ref > 1e-9)[0])


def test_one_class_and_normalized_kernel_duals_equal_dense_qp(board):
    X, y = board
    # one-class, RBF (eq. 7)
    Kt = ktilde(rbf_kernel(X, gamma=4.0), None, 2.0)
    a_ref = simplex_qp_reference(Kt)
    oc = OneClassCVM(gamma=4.0, C=2.0, eps=1e-10, sample_size=None, device="cpu", random_state=0).fit(X)
    np.testing.assert_allclose(full_alpha(oc, len(X)), a_ref, atol=1e-7)
    assert oc.rho_[0] == pytest.approx(a_ref @ Kt @ a_ref, rel=1e-10)
    assert oc.offset_ == pytest.approx(oc.rho_[0] - 3 * np.median(oc.alpha_[oc.alpha_ > 0]) / 2.0,
                                       rel=1e-12)
    # two-class, normalized polynomial kernel κ(x,z)/√(κ(x,x)κ(z,z)) (paper eq. 4, case 3)
    Xs = X * 3.0 - 1.0
    Kt = ktilde(normalized_poly(Xs, Xs), y, 100.0)
    a_ref = simplex_qp_reference(Kt)
    m = CVM(kernel="poly", degree=2, coef0=1.0, gamma=0.5, C=100.0, normalize=True, eps=1e-10,
            sample_size=None, device="cpu", random_state=0).fit(Xs, y)
    np.testing.assert_allclose(full_alpha(m, len(y)), a_ref, atol=1e-7)
    np.testing.assert_allclose(m.decision_function(Xs),
                               normalized_poly(Xs, Xs) @ (a_ref * y) + a_ref @ y, atol=1e-6)


# --------------------------------------------------------------------------- primal/dual recovery
def test_primal_dual_recovery_two_class(board):
    X, y = board
    C = 50.0
    m = CVM(gamma=4.0, C=C, eps=1e-10, sample_size=None, device="cpu", random_state=0).fit(X, y)
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
    np.testing.assert_allclose(margin[sv] + a[sv] / C, rho, atol=1e-9)
    assert (margin[~sv] >= rho - 1e-9).all()
    # zero duality gap: ‖w‖² + b² − 2ρ + CΣξ² (primal, eq. 8) = −αᵀK̃α (dual)
    xi = np.maximum(rho - margin, 0.0)
    np.testing.assert_allclose(xi, a / C, atol=1e-9)
    primal = ay @ K @ ay + ay.sum() ** 2 - 2 * rho + C * (xi ** 2).sum()
    assert primal == pytest.approx(-rho, rel=1e-8)
    # the stored model is that expansion
    np.testing.assert_allclose(m.dual_coef_[0], ay[m.support_], atol=0)
    assert m.intercept_[0] == pytest.approx(ay.sum(), abs=1e-15)
    assert m.radius_ ** 2 == pytest.approx(m.kappa_tilde_ - rho, rel=1e-12)


def test_primal_dual_recovery_one_class():
    X = np.random.default_rng(1).normal(size=(200, 3))
    C = 5.0
    oc = OneClassCVM(gamma=0.3, C=C, eps=1e-10, sample_size=None, device="cpu", random_state=0).fit(X)
    a = full_alpha(oc, len(X))
    K = rbf_kernel(X, gamma=0.3)
    np.testing.assert_allclose(oc.score_samples(X), K @ a, atol=1e-9)
    dec = oc.decision_function(X)
    np.testing.assert_allclose(dec, K @ a - oc.offset_, atol=1e-9)
    rho = oc.rho_[0]
    sv = a > 0
    # wᵀφ(xᵢ) = ρ − αᵢ/C on the support vectors, ≥ ρ elsewhere (one-class eq. 6/7)
    np.testing.assert_allclose((K @ a - rho)[sv], -a[sv] / C, atol=1e-9)
    assert ((K @ a - rho)[~sv] >= -1e-9).all()
    primal = a @ K @ a - 2 * rho + C * ((a / C) ** 2).sum()
    assert primal == pytest.approx(-rho, rel=1e-8)
    # the outlier threshold: ρ − 3·median(α_SV)/C
    assert oc.offset_ == pytest.approx(rho - 3 * np.median(a[sv]) / C, rel=1e-12)
    np.testing.assert_array_equal(oc.predict(X), np.where(dec >= 0, 1, -1))


# --------------------------------------------------------------------------- (1+ε)² bound
@pytest.mark.parametrize("task", ["two_class", "one_class"])
def test_approximation_bound(board, task):
    """R² ≤ p* + κ̃ ≤ (1+ε)²R² (eq. 15), p* = max −αᵀK̃α known from the dense solve."""
    X, y = board
    yy = y if task == "two_class" else None
    C = 20.0
    Kt = ktilde(rbf_kernel(X, gamma=4.0), yy, C)
    a_ref = simplex_qp_reference(Kt)
    kt = Kt[0, 0]
    R2_star = kt - a_ref @ Kt @ a_ref                 # p* + κ̃, the exact MEB radius²
    seen = []
    for eps in (1e-1, 3e-2, 1e-2, 1e-3):
        kw = dict(gamma=4.0, C=C, eps=eps, sample_size=None, eps_schedule="fixed", device="cpu",
                  random_state=0)
        m = CVM(**kw).fit(X, y) if yy is not None else OneClassCVM(**kw).fit(X)
        assert m.stop_reason_ == "converged"
        R2 = m.radius_ ** 2
        assert m.kappa_tilde_ == pytest.approx(kt)
        assert R2 <= R2_star * (1 + 1e-12)
        assert R2_star <= (1 + eps) ** 2 * R2 * (1 + 1e-12)
        seen.append((R2_star - R2) / R2_star)
    # the bound is not vacuous: loose ε stops early with a visibly smaller ball
    assert seen[0] > 1e-4


# --------------------------------------------------------------------------- one-class outliers
def test_one_class_flags_planted_outliers():
    rng = np.random.default_rng(0)
    Xin = rng.normal(size=(300, 2))
    ang = rng.uniform(0, 2 * np.pi, 10)
    Xout = np.c_[6 * np.cos(ang), 6 * np.sin(ang)]
    X = np.vstack([Xin, Xout])
    oc = OneClassCVM(C=1.0, device="cpu", random_state=0).fit(X)
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
    m = CVM(task="one_class", C=1.0, device="cpu", random_state=0).fit(X)
    np.testing.assert_array_equal(m.predict(X), pred)
    np.testing.assert_allclose(m.decision_function(X), dec, atol=1e-12)


# --------------------------------------------------------------------------- sampled vs exact
def test_sampled_and_exact_search_same_accuracy():
    X, y = make_checkerboard(4000, random_state=0)
    Xt, yt = make_checkerboard(5000, random_state=1)
    kw = dict(gamma=30.0, C=1000.0, eps=1e-5, device="cpu", random_state=0)
    ex = CVM(sample_size=None, **kw).fit(X, y)
    sa = CVM(sample_size=59, **kw).fit(X, y)
    assert ex.search_ == "exact" and sa.search_ == "sampled(59)"
    assert ex.stop_reason_ == sa.stop_reason_ == "converged"
    acc_ex, acc_sa = ex.score(Xt, yt), sa.score(Xt, yt)
    assert acc_ex > 0.98 and acc_sa > 0.98
    assert abs(acc_ex - acc_sa) < 0.01
    # the exact search's ball is the tighter (1+ε) approximation: the sampled one
    # can only stop earlier (smaller R) or equal, never produce a bigger ball than the MEB
    assert sa.radius_ <= ex.radius_ * (1 + 1e-5) ** 2


def test_small_problem_uses_exact_search():
    X, y = make_checkerboard(300, grid=2, random_state=0)
    m = CVM(sample_size=59, n_tries=7, device="cpu", random_state=0).fit(X, y)
    assert m.search_ == "exact"           # 300 ≤ 59·7 rows: sampling would not save anything


# --------------------------------------------------------------------------- termination
def test_zoo_problem_terminates_and_is_accurate():
    """The binary problem of tests/_estimator_zoo.py that used to loop forever."""
    X, y = make_checkerboard(300, grid=2, random_state=0)
    m = CVM(gamma=2.0, C=10.0, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == "converged"
    assert m.score(X, y) > 0.95
    assert m.search_ == "exact"
    Kt = ktilde(rbf_kernel(X, gamma=2.0), y, 10.0)
    a_ref = simplex_qp_reference(Kt)
    # a (1+ε)-ball: the exact MEB is only slightly larger than the CVM's ball
    R2_star = Kt[0, 0] - a_ref @ Kt @ a_ref
    assert m.radius_ ** 2 <= R2_star <= (1 + m.eps) ** 2 * m.radius_ ** 2 * (1 + 1e-12)


def test_stop_reasons_recorded(board):
    X, y = board
    m = CVM(gamma=4.0, C=10.0, max_iter=5, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == "max_iter" and m.n_iter_ == 5 and m.core_set_size_ == 7
    m = CVM(gamma=4.0, C=10.0, max_core_size=4, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == "max_core_size" and m.core_set_size_ == 4
    assert m.alpha_.sum() == pytest.approx(1.0)


def test_stalled_inner_solver_cannot_hang(board, monkeypatch):
    """If the inner solver makes no progress, core vectors stay outside the ball: stop, don't loop."""
    X, y = board

    def frozen(self, tol, max_steps=None):
        self.status = "max_steps"
        return 0

    monkeypatch.setattr(SimplexMEB, "solve", frozen)
    monkeypatch.setattr(SimplexMEB, "solve_active_set", frozen)
    m = CVM(gamma=4.0, C=10.0, sample_size=None, device="cpu", random_state=0).fit(X, y)
    assert m.stop_reason_ == "stalled"
    assert m.n_iter_ < len(y)


def _random_ktilde(rng, m, C):
    X = rng.normal(size=(m, 3))
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    return ktilde(rbf_kernel(X, gamma=0.5), y, C)


def _fill(meb: SimplexMEB, Kt: np.ndarray) -> None:
    for i in range(Kt.shape[0]):
        meb.append(Kt[i, :i])


def test_inverse_downdate_matches_direct_inverse():
    rng = np.random.default_rng(0)
    Kt = _random_ktilde(rng, 40, 10.0)
    meb = SimplexMEB(Kt[0, 0], capacity=8)        # forces buffer growth too
    _fill(meb, Kt)
    np.testing.assert_allclose(meb.K, Kt)
    meb.set_alpha(np.full(40, 1 / 40))
    meb._rebuild_inverse()
    for _ in range(15):
        meb._remove_active(int(rng.integers(len(meb._P))))
        if rng.random() < 0.5:
            out = sorted(set(range(40)) - set(meb._P))
            meb._add_active(int(rng.choice(out)))
        P = np.asarray(meb._P)
        s = len(P)
        Hinv = np.linalg.inv(Kt[np.ix_(P, P)])
        np.testing.assert_allclose(meb._H[:s, :s], Hinv, atol=1e-10)
        np.testing.assert_allclose(meb._u[:s], Hinv.sum(axis=1), atol=1e-10)


@pytest.mark.parametrize("max_steps", [1, 3, None])
def test_inner_solvers_reach_reference_or_fall_back(max_steps):
    rng = np.random.default_rng(1)
    Kt = _random_ktilde(rng, 60, 10.0)
    a_ref = simplex_qp_reference(Kt)
    for method in ("solve_active_set", "solve"):
        meb = SimplexMEB(Kt[0, 0])
        _fill(meb, Kt)
        meb.set_alpha(np.r_[0.5, 0.5, np.zeros(58)])
        getattr(meb, method)(1e-10, max_steps=max_steps)
        if method == "solve" and max_steps is not None:
            assert meb.status == "max_steps"
            continue
        assert meb.status in ("optimal", "smo_fallback")
        if max_steps is not None:
            assert meb.status == "smo_fallback"    # capped active set is finished by SMO
        assert meb.gap() <= 1e-10 + 1e-12 * Kt[0, 0]
        np.testing.assert_allclose(meb.alpha, a_ref, atol=1e-6)


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
        assert len(m.core_set_) == 3 and len(m.stop_reason_) == 3
        assert m.dual_coef_.shape == (3, len(m.support_))
    # ovo problems only see their two classes
    m = CVM(C=10.0, device="cpu", random_state=0).fit(X, yl)
    for (i, j), core in zip(m.problems_, m.core_set_):
        assert set(np.unique(yl[core])) <= {m.classes_[i], m.classes_[j]}


def test_sparse_equals_dense(board):
    X, y = board
    kw = dict(gamma=4.0, C=10.0, eps=1e-8, sample_size=None, device="cpu", random_state=0)
    d = CVM(**kw).fit(X, y)
    s = CVM(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(d.core_set_, s.core_set_)
    np.testing.assert_allclose(d.alpha_, s.alpha_, atol=1e-12)
    np.testing.assert_allclose(d.decision_function(X), s.decision_function(sp.csr_matrix(X)), atol=1e-10)


def test_random_state_reproducible():
    X, y = make_checkerboard(3000, random_state=0)
    kw = dict(gamma=30.0, C=1000.0, eps=1e-5, sample_size=59, device="cpu")
    a = CVM(random_state=7, **kw).fit(X, y)
    b = CVM(random_state=7, **kw).fit(X, y)
    np.testing.assert_array_equal(a.core_set_, b.core_set_)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)
    c = CVM(random_state=np.random.RandomState(7), **kw).fit(X, y)
    np.testing.assert_array_equal(a.core_set_, c.core_set_)
    d = CVM(random_state=8, **kw).fit(X, y)
    assert not np.array_equal(a.core_set_, d.core_set_)
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
    for bad in (dict(C=0.0), dict(C=-1.0), dict(eps=0.0), dict(eps=1.5), dict(sample_size=0),
                dict(n_tries=0), dict(max_iter=0), dict(max_core_size=1), dict(gamma=-1.0),
                dict(eps_schedule="x"), dict(inner_solver="x"), dict(task="x"),
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


def test_params_untouched_and_clone(board):
    from sklearn.base import clone

    X, y = board
    est = CVM(gamma="mean_dist", C=3.0, sample_size=None, device="cpu", random_state=0)
    p = est.get_params()
    est.fit(X, y)
    assert est.get_params() == p
    assert clone(est).get_params() == p
    assert est.kernel_.gamma == pytest.approx(1.0 / (2 * len(X) / (len(X) - 1) * X.var(axis=0).sum()))


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(CVM(device="cpu", random_state=0))
    check_estimator(OneClassCVM(device="cpu", random_state=0))


# --------------------------------------------------------------------------- host scanner twin
def test_host_scanner_scores_match_definition(board):
    """s_ℓ = yℓ(Σαᵢyᵢκ(xᵢ,xℓ) + b) + [ℓ∈S]αℓ/C, and ‖c − φ̃(zℓ)‖² = κ̃ + αᵀK̃α − 2sℓ (eq. 12)."""
    X, y = board
    C = 10.0
    kern = Kernel("rbf", gamma=4.0)
    sc = HostScanner(X, y, kern, None, C, np.float64)
    core = [5, 17, 40, 99]
    for i in core:
        sc.append(i)
    alpha = np.array([0.1, 0.4, 0.3, 0.2])
    coef, b = sc.set_alpha(alpha)
    Kt = ktilde(rbf_kernel(X, gamma=4.0), y, C)
    full = np.zeros(len(y))
    full[core] = alpha
    d2 = Kt[0, 0] + full @ Kt @ full - 2 * Kt @ full          # squared distances to the centre
    s_best, i_best = sc.exact_min(None, coef, b)
    assert i_best == int(np.argmax(d2))
    assert Kt[0, 0] + full @ Kt @ full - 2 * s_best == pytest.approx(d2.max(), abs=1e-12)
    groups = np.array([[1, 5, 17, 30], [40, 41, 42, 43]])
    best, arg = sc.group_min(groups, coef, b)
    for g, bs, ar in zip(groups, best, arg):
        assert ar == g[np.argmax(d2[g])]
        assert Kt[0, 0] + full @ Kt @ full - 2 * bs == pytest.approx(d2[g].max(), abs=1e-12)


# --------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("d", [2, 40])
def test_gpu_scanner_matches_host(gpu, d):
    from gpuksvm.solvers.meb import GpuScanner

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, d))
    y = np.where(rng.random(5000) < 0.5, 1.0, -1.0)
    for kern, scale, yy in ((Kernel("rbf", gamma=0.3), False, y), (Kernel("rbf", gamma=0.3), False, None),
                            (Kernel("poly", gamma=0.2, degree=2, coef0=1.0), True, y)):
        Xd = gpu.asarray(X)
        xs_h = None
        xs_d = None
        if scale:
            xs_h = 1.0 / np.sqrt((0.2 * (X * X).sum(1) + 1.0) ** 2)
            xs_d = gpu.asarray(xs_h)
        host = HostScanner(X, yy, kern, xs_h, 10.0, np.float64)
        dev = GpuScanner(Xd, yy, kern, xs_d, 10.0, np.float64)
        core = rng.choice(5000, 300, replace=False)
        for i in core:
            host.append(int(i))
            dev.append(int(i))
        alpha = rng.random(300)
        alpha /= alpha.sum()
        ch, bh = host.set_alpha(alpha)
        cd, bd = dev.set_alpha(alpha)
        assert bh == pytest.approx(bd)
        sh, ih = host.exact_min(None, ch, bh)
        sd, idd = dev.exact_min(None, cd, bd)
        assert sd == pytest.approx(sh, rel=1e-9, abs=1e-12) and idd == ih
        sub = rng.choice(5000, 1234, replace=False)
        assert dev.exact_min(sub, cd, bd)[1] == host.exact_min(sub, ch, bh)[1]
        groups = rng.integers(0, 5000, size=(7, 59))
        gh, ah = host.group_min(groups, ch, bh)
        gd, ad = dev.group_min(groups, cd, bd)
        np.testing.assert_allclose(gd, gh, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(ad, ah)


@pytest.mark.gpu
def test_gpu_scanner_candidate_cache_follows_the_rows(gpu):
    """exact_min reuses its device copy of ``idx`` only while the rows are the same: an array
    changed in place (or a new array that got a freed one's id) is copied again (issue 13)."""
    from gpuksvm.solvers.meb import GpuScanner

    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    kern = Kernel("rbf", gamma=0.5)
    host = HostScanner(X, None, kern, None, 10.0, np.float64)
    dev = GpuScanner(gpu.asarray(X), None, kern, None, 10.0, np.float64)
    for i in rng.choice(600, 20, replace=False):
        host.append(int(i))
        dev.append(int(i))
    alpha = np.full(20, 1 / 20)
    (ch, bh), (cd, bd) = host.set_alpha(alpha), dev.set_alpha(alpha)
    idx = np.arange(0, 300, dtype=np.int64)
    assert dev.exact_min(idx, cd, bd) == pytest.approx(host.exact_min(idx, ch, bh))
    idx += 300                                  # the same array object, other rows
    assert dev.exact_min(idx, cd, bd) == pytest.approx(host.exact_min(idx, ch, bh))


@pytest.mark.gpu
def test_gpu_fit_equals_cpu_fit(gpu, board):
    X, y = board
    kw = dict(gamma=4.0, C=100.0, eps=1e-10, sample_size=None, dtype=np.float64, random_state=0)
    c = CVM(device="cpu", **kw).fit(X, y)
    g = CVM(device="gpu", **kw).fit(X, y)
    assert g.fitted_device_.startswith("cuda")
    np.testing.assert_allclose(full_alpha(g, len(y)), full_alpha(c, len(y)), atol=1e-8)
    np.testing.assert_allclose(np.asarray(bk.to_host(g.decision_function(X))), c.decision_function(X),
                               atol=1e-7)
    # float32 sampled search on a GPU: same accuracy as the CPU on the checkerboard
    Xb, yb = make_checkerboard(20000, random_state=0)
    Xt, yt = make_checkerboard(5000, random_state=1)
    kw = dict(gamma=30.0, C=1000.0, eps=1e-5, random_state=0)
    acc_c = CVM(device="cpu", **kw).fit(Xb, yb).score(Xt, yt)
    gm = CVM(device="gpu", **kw).fit(gpu.asarray(Xb), gpu.asarray(yb))
    acc_g = float((np.asarray(bk.to_host(gm.predict(gpu.asarray(Xt)))) == yt).mean())
    assert acc_g > 0.98 and abs(acc_g - acc_c) < 0.01


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
