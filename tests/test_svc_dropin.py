"""KernelSVC as a drop-in for scikit-learn's SVC, and the shared surface on SVI and CVM (issue 18).

Every number is compared with scikit-learn's SVC (LIBSVM) fitted on the same data;
GPU twins are marked ``gpu``.  scikit-learn's own SVC tests run against KernelSVC in
test_sklearn_svc_suite.py; these tests pin what that suite does not check.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC
from sklearn.utils.multiclass import _ovr_decision_function

import gpuksvm
from gpuksvm import CVM, SVI, KernelSVC
from gpuksvm.estimators import calibration
from gpuksvm.datasets import make_checkerboard
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.smo.engines import solve_batched, solve_ovo
from gpuksvm.solvers.svc_dual import dual_objective

TOY_X = np.array([[-2, -1], [-1, -1], [-1, -2], [1, 1], [1, 2], [2, 1]], dtype=float)
TOY_Y = np.array([1, 1, 1, 2, 2, 2])
SVC_MAX_ITER = (r"Solver terminated early \(max_iter=1\).  Consider pre-processing your data with "
                r"StandardScaler or MinMaxScaler.")


def _iris():
    X, y = load_iris(return_X_y=True)
    return X, y


def _svc_and_ours(X, y, **kw):
    return SVC(**kw).fit(X, y), KernelSVC(device="cpu", **kw).fit(X, y)


def _same_model(ref, est, tol=1e-12):
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_array_equal(est.n_support_, ref.n_support_)
    dense = (lambda M: M.toarray() if sp.issparse(M) else M)
    np.testing.assert_allclose(dense(est.dual_coef_), dense(ref.dual_coef_), rtol=tol, atol=tol)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=tol, atol=tol)


# --------------------------------------------------------------------------- LIBSVM's solution
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_multiclass_is_svc_solution_also_where_the_dual_is_degenerate(kernel):
    # classes of one row: the pair duals have many solutions; LIBSVM's must be the one
    X = np.array([[0, 0, 0], [1, 1, 1], [2, 0, 0], [0, 0, 2], [3, 3, 3]], dtype=float)
    y = np.array([1, 2, 2, 2, 3])
    T = np.mgrid[-1:3.01:0.5, -1:3.01:0.5, -1:3.01:0.5].reshape(3, -1).T
    ref, est = _svc_and_ours(X, y, kernel=kernel, gamma=1.0, decision_function_shape="ovo")
    _same_model(ref, est)
    np.testing.assert_allclose(est.decision_function(T), ref.decision_function(T), atol=1e-12)
    np.testing.assert_array_equal(est.predict(T), ref.predict(T))
    Xb, yb = make_blobs(80, centers=10, random_state=0)
    ref, est = _svc_and_ours(Xb, yb, kernel=kernel, gamma=1.0)
    _same_model(ref, est, tol=1e-10)
    assert est.solver_ == "libsvm" and est.n_iter_.shape == (45,)
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)


def test_solve_ovo_pairs_are_svc_pairs_for_every_engine():
    X, y = make_blobs(150, centers=3, cluster_std=2.5, random_state=1)
    k = Kernel("rbf", gamma=0.3)
    libsvm = solve_ovo(X, y, k, 2.0, device="cpu", method="libsvm")
    pairs = [(0, 1), (0, 2), (1, 2)]
    for (lo, hi), r in zip(pairs, libsvm):  # +1 for the higher class, rows of both classes
        rows = np.flatnonzero((y == lo) | (y == hi))
        ref = SVC(C=2.0, gamma=0.3).fit(X[rows], np.where(y[rows] == hi, 1, -1))
        np.testing.assert_array_equal(r.support, np.sort(rows[ref.support_]))
        assert r.intercept == pytest.approx(ref.intercept_[0], abs=1e-10)
        assert set(np.unique(y[r.support])) <= {lo, hi}
    for method in ("smo", "working_set"):
        own = solve_ovo(X, y, k, 2.0, device="cpu", method=method)
        for a, b in zip(own, libsvm):
            assert a.converged and abs(a.objective - b.objective) <= 1e-3 * abs(b.objective)
    with pytest.raises(ValueError, match="no row of positive weight"):
        solve_ovo(X, y, k, 1.0, device="cpu", sample_weight=(y != 2).astype(float))


# --------------------------------------------------------------------------- kernels as data
def test_precomputed_kernel_is_svc_and_equals_the_linear_model():
    X, y = _iris()
    K = X @ X.T
    ref, est = _svc_and_ours(K, y, kernel="precomputed")
    _same_model(ref, est)
    lin = KernelSVC(kernel="linear", device="cpu").fit(X, y)
    np.testing.assert_allclose(est.dual_coef_, lin.dual_coef_, atol=1e-10)
    assert est.support_vectors_.shape == (0, 0) and est.n_features_in_ == 150
    Kt = X[::7] @ X.T
    np.testing.assert_allclose(est.decision_function(Kt), ref.decision_function(Kt), atol=1e-10)
    np.testing.assert_array_equal(est.predict(Kt), ref.predict(Kt))
    with pytest.raises(ValueError):
        est.predict(Kt[:, :100])
    with pytest.raises(ValueError, match="square"):
        KernelSVC(kernel="precomputed", device="cpu").fit(X, y)
    with pytest.raises(TypeError, match="Sparse precomputed"):
        KernelSVC(kernel="precomputed", device="cpu").fit(sp.csr_matrix(K), y)
    assert KernelSVC(kernel="precomputed").__sklearn_tags__().input_tags.pairwise


@pytest.mark.parametrize("method", ["smo", "working_set"])
def test_precomputed_gram_gives_every_engine_the_same_problem(method):
    X, y = make_blobs(120, centers=2, cluster_std=3.0, random_state=2)
    y = np.where(y == 1, 1.0, -1.0)
    k = Kernel("rbf", gamma=0.2)
    G = rbf_kernel(X, gamma=0.2)
    S = [np.arange(0, 120, 2), np.arange(1, 120, 2)]
    a = solve_batched(X, y, S, k, 3.0, device="cpu", method=method)
    b = solve_batched(G, y, S, "precomputed", 3.0, device="cpu", method=method)
    for ra, rb in zip(a, b):
        np.testing.assert_array_equal(ra.support, rb.support)
        # kernel values equal to the last bit or two: the same optimum to the solver's tolerance (the
        # working-set solver's steps can part: 1.7e-8 relative on an AMD EPYC, OpenBLAS Haswell kernels)
        assert rb.objective == pytest.approx(ra.objective, rel=1e-7)
        assert rb.objective == pytest.approx(dual_objective(G, rb.support, rb.dual_coef, "precomputed"),
                                             rel=1e-9)


def test_precomputed_probability_uses_the_fold_columns(monkeypatch):
    # a Gram matrix has no row contents to order the folds by: both paths cut them in the
    # given order here, so that equal probabilities mean the fold's columns were taken
    monkeypatch.setattr(calibration, "_fold_order", lambda X, y, rs, pairwise: np.arange(y.shape[0]))
    X, y = _iris()
    G = rbf_kernel(X, gamma=0.5)
    est = KernelSVC(kernel="precomputed", probability=True, random_state=0, device="cpu").fit(G, y)
    rbf = KernelSVC(gamma=0.5, probability=True, random_state=0, device="cpu").fit(X, y)
    np.testing.assert_allclose(est.predict_proba(G[::5]), rbf.predict_proba(X[::5]), atol=1e-8)


def test_callable_kernel_is_svc_and_sees_the_samples_as_given():
    X, y = _iris()

    def linear(A, B):
        return A @ B.T

    ref, est = _svc_and_ours(X, y, kernel=linear)
    _same_model(ref, est)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X), atol=1e-10)
    assert est.X_fit_ is X and not hasattr(est, "n_features_in_")
    words = ["a a", "a", "b", "b b", "a b", "b a b"]
    counts = np.array([[w.count("a"), w.count("b")] for w in words], dtype=float)

    def bag(A, B):
        assert isinstance(A[0], str)
        return np.array([[a.count("a") * b.count("a") + a.count("b") * b.count("b") for b in B] for a in A],
                        dtype=float)

    labels = np.array([0, 0, 1, 1, 0, 1])
    s = KernelSVC(kernel=bag, device="cpu").fit(words, labels)
    lin = KernelSVC(kernel="linear", device="cpu").fit(counts, labels)
    np.testing.assert_allclose(s.decision_function(words[:3]), lin.decision_function(counts[:3]), atol=1e-10)
    with pytest.raises(ValueError, match="shape"):
        KernelSVC(kernel=lambda A, B: A, device="cpu").fit(TOY_X, TOY_Y)


# --------------------------------------------------------------------------- coef_, sparse
@pytest.mark.parametrize("multiclass", [False, True])
def test_coef_is_svc_coef_read_only_and_sparse_after_a_sparse_fit(multiclass):
    X, y = _iris()
    if not multiclass:
        X, y = X[y > 0], y[y > 0]
    ref, est = _svc_and_ours(X, y, kernel="linear", decision_function_shape="ovo")
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-10)
    np.testing.assert_allclose(X @ est.coef_.T + est.intercept_,
                               est.decision_function(X).reshape(len(X), -1), atol=1e-10)
    with pytest.raises(ValueError):
        est.coef_[0, 0] = 1.0
    with pytest.raises(AttributeError):
        est.coef_ = np.zeros(4)
    Xs = sp.csr_matrix(X)
    ref_s, sparse_est = _svc_and_ours(Xs, y, kernel="linear", decision_function_shape="ovo")
    assert sp.issparse(sparse_est.dual_coef_) and sp.issparse(sparse_est.coef_)
    np.testing.assert_allclose(sparse_est.coef_.toarray(), est.coef_, atol=1e-10)
    np.testing.assert_allclose(sparse_est.dual_coef_.toarray(), ref_s.dual_coef_.toarray(), atol=1e-12)
    np.testing.assert_allclose(sparse_est.decision_function(X), est.decision_function(X), atol=1e-10)
    assert not hasattr(KernelSVC(device="cpu").fit(X, y), "coef_")


def test_sparse_input_after_a_dense_fit_is_refused():
    est = KernelSVC(device="cpu").fit(TOY_X, TOY_Y)
    with pytest.raises(ValueError, match="cannot use sparse input in 'KernelSVC' trained on dense"):
        est.predict(sp.csr_matrix(TOY_X))
    sparse_fit = KernelSVC(device="cpu").fit(sp.csr_matrix(TOY_X), TOY_Y)
    np.testing.assert_array_equal(sparse_fit.predict(TOY_X), est.predict(TOY_X))


# --------------------------------------------------------------------------- votes and ties
def test_exact_ties_vote_as_libsvm():
    # symmetric data with small integers: decision values of exactly 0
    X = np.array([[-2, 0], [-1, -1], [0, -2], [0, 2], [1, 1], [2, 0]], dtype=float)
    T = np.array([[-1.0, 1.0], [1.0, -1.0], [0.0, 0.0], [3.0, 3.0]])
    ref, est = _svc_and_ours(X, TOY_Y, kernel="linear", C=1e-2)
    assert np.all(est.decision_function(T)[:3] == 0)
    np.testing.assert_array_equal(est.predict(T), ref.predict(T))  # a 0 votes for classes_[1]
    # four classes, one row each: whole lines of test points with pairwise values of 0
    X4 = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=float)
    G = np.mgrid[-3:3.01:0.25, -3:3.01:0.25].reshape(2, -1).T
    for shape in ("ovr", "ovo"):
        ref, est = _svc_and_ours(X4, [0, 1, 2, 3], kernel="linear", decision_function_shape=shape)
        np.testing.assert_array_equal(est.decision_function(G), ref.decision_function(G))
        np.testing.assert_array_equal(est.predict(G), ref.predict(G))


def test_break_ties():
    X, y = make_blobs(20, random_state=42)
    G = np.mgrid[-12:12:0.5, -12:12:0.5].reshape(2, -1).T
    ref, est = _svc_and_ours(X, y, gamma=1e6)
    np.testing.assert_array_equal(est.predict(G), ref.predict(G))        # LIBSVM's vote
    dec = est.decision_function(G)
    assert not np.array_equal(est.predict(G), np.argmax(dec, axis=1))   # the vote ties
    est.set_params(break_ties=True)
    ref.set_params(break_ties=True)
    np.testing.assert_array_equal(est.predict(G), np.argmax(dec, axis=1))
    np.testing.assert_array_equal(est.predict(G), ref.predict(G))
    with pytest.raises(ValueError, match="break_ties must be False"):
        est.set_params(decision_function_shape="ovo").predict(G)


# --------------------------------------------------------------------------- the model is dual_coef_
def test_dual_coef_and_intercept_are_the_model():
    est = KernelSVC(kernel="linear", device="cpu").fit(TOY_X, TOY_Y)
    x = np.array([[-0.1, -0.1]])
    assert est.predict(x)[0] == 1
    est.dual_coef_ = np.array([[0.0, 1.0]])            # only the SV of class 2 remains
    assert est.decision_function(x)[0] == pytest.approx(-0.2 + est.intercept_[0])
    est.intercept_ = np.array([1.0])
    assert est.predict(x)[0] == 2
    X, y = _iris()
    est = KernelSVC(device="cpu", decision_function_shape="ovo").fit(X, y)
    before = est.decision_function(X[:5])
    est.dual_coef_[0] *= 2.0                            # in place: the same array
    after = est.decision_function(X[:5])
    assert not np.allclose(before[:, :2], after[:, :2]) and np.allclose(before[:, 2], after[:, 2])
    est.n_support_ = est.n_support_ + np.array([1, -1, 0], dtype=np.int32)
    assert not np.allclose(est.decision_function(X[:5]), after)  # the pairs' SV sets moved
    est.n_support_ = est.n_support_ + 1
    with pytest.raises(ValueError, match="altered"):
        est.predict(X)


# --------------------------------------------------------------------------- weights, C, max_iter
@pytest.mark.parametrize("solver", ["libsvm", "smo", "working_set"])
def test_negative_sample_weights_drop_rows(solver):
    X, y = _iris()
    w = np.ones(150)
    w[::4] = -0.5
    w[1::9] = 0.0
    kept = w > 0
    est = KernelSVC(gamma=0.5, solver=solver, device="cpu").fit(X, y, sample_weight=w)
    sub = KernelSVC(gamma=0.5, solver=solver, device="cpu").fit(X[kept], y[kept])
    np.testing.assert_array_equal(est.support_, np.flatnonzero(kept)[sub.support_])
    np.testing.assert_allclose(est.decision_function(X), sub.decision_function(X), atol=1e-8)
    ref = SVC(gamma=0.5).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X),
                               atol=1e-12 if solver == "libsvm" else 5e-2)
    with pytest.raises(ValueError, match="all samples have zero or negative weights"):
        KernelSVC(solver=solver, device="cpu").fit(X, y, sample_weight=-np.ones(150))
    with pytest.raises(ValueError, match="belong to the same class"):
        KernelSVC(solver=solver, device="cpu").fit(X, y, sample_weight=(y == 1) - 0.5)
    with pytest.raises(ValueError, match=r"class\(es\) \[2\]"):
        KernelSVC(solver=solver, device="cpu").fit(X, y, sample_weight=(y != 2).astype(float))


@pytest.mark.parametrize("solver", ["libsvm", "smo", "working_set"])
def test_infinite_C_is_the_hard_margin(solver):
    X, y = make_blobs(60, centers=[[-3, 0], [3, 0]], cluster_std=0.8, random_state=0)
    hard = KernelSVC(C=np.inf, kernel="linear", tol=1e-6, solver=solver, device="cpu").fit(X, y)
    large = SVC(C=1e10, kernel="linear", tol=1e-6).fit(X, y)
    assert hard.converged_.all()
    np.testing.assert_allclose(hard.decision_function(X), large.decision_function(X), atol=1e-3)
    margins = np.where(y == hard.classes_[1], 1, -1) * hard.decision_function(X)
    assert margins.min() == pytest.approx(1.0, abs=1e-3)   # every row on or outside the margin


@pytest.mark.parametrize("solver", ["libsvm", "smo", "working_set"])
def test_max_iter_gives_one_svc_convergence_warning(solver):
    X, y = _iris()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = KernelSVC(max_iter=1, solver=solver, device="cpu").fit(X, y)
    conv = [c for c in caught if issubclass(c.category, ConvergenceWarning)]
    assert len(conv) == 1                               # one, starting with SVC's own sentence
    assert re.search(SVC_MAX_ITER, str(conv[0].message))
    assert not est.converged_.any() and est.converged_.shape == (3,)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert KernelSVC(solver=solver, device="cpu").fit(X, y).converged_.all()


def test_gamma_scale_is_svc_gamma():
    est = KernelSVC(device="cpu").fit([[0.0], [1.0]], [0, 1])
    assert est.kernel_.gamma == pytest.approx(SVC().fit([[0.0], [1.0]], [0, 1])._gamma) == 4.0


def test_overflowing_data_is_refused_with_svc_message():
    X = np.finfo(np.float64).max * np.random.default_rng(0).uniform(size=(10, 2))
    with pytest.raises(ValueError, match="The dual coefficients or intercepts are not finite"):
        KernelSVC(device="cpu").fit(X, np.arange(10) % 2)


# --------------------------------------------------------------------------- fitted attributes
def test_fitted_attributes_are_declared(tmp_path):
    X, y = _iris()
    fits = [KernelSVC(device="cpu").fit(X, y),
            KernelSVC(kernel="linear", probability=True, random_state=0,
                      device="cpu").fit(sp.csr_matrix(X), y),
            KernelSVC(kernel="precomputed", device="cpu").fit(X @ X.T, y),
            KernelSVC(kernel=lambda A, B: A @ B.T, device="cpu").fit(X, y)]
    for est in fits:
        stored = {k for k in vars(est) if k.endswith("_") or k not in est.get_params()}
        assert stored <= set(KernelSVC._FITTED_ATTRIBUTES), stored - set(KernelSVC._FITTED_ATTRIBUTES)
    for est, Xp in zip(fits[:3], (X, sp.csr_matrix(X), X @ X.T)):  # model files keep every new one
        back = gpuksvm.load(gpuksvm.save(est, tmp_path / "m.npz"))
        np.testing.assert_array_equal(back.predict(Xp), est.predict(Xp))
        assert sp.issparse(back.dual_coef_) == sp.issparse(est.dual_coef_)


# --------------------------------------------------------------------------- SVI
def test_svi_has_the_same_surface():
    X, y = make_blobs(400, centers=3, cluster_std=2.0, random_state=0)
    est = SVI(kernel="linear", C=1.0, random_state=0, device="cpu").fit(X, y)
    assert est.break_ties is False
    np.testing.assert_allclose(X @ est.coef_.T + est.intercept_, est._problem_decisions(X)[0], atol=1e-10)
    dec = est.decision_function(X)
    np.testing.assert_array_equal(est.predict(X), np.argmax(np.round(dec), axis=1))
    np.testing.assert_array_equal(est.set_params(break_ties=True).predict(X), np.argmax(dec, axis=1))
    with pytest.raises(ValueError, match="cannot use sparse input"):
        est.predict(sp.csr_matrix(X))
    est.dual_coef_ = est.dual_coef_ * 0.0                # the model: only the intercepts are left
    np.testing.assert_array_equal(est._problem_decisions(X)[0], np.tile(est.intercept_, (400, 1)))
    sparse = SVI(kernel="linear", C=1.0, random_state=0, device="cpu").fit(sp.csr_matrix(X), y)
    assert sp.issparse(sparse.dual_coef_) and sp.issparse(sparse.coef_)
    with pytest.warns(ConvergenceWarning, match=r"Solver terminated early \(max_iter=1\)"):
        stopped = SVI(C=1.0, max_iter=1, random_state=0, device="cpu").fit(X, y)
    assert not stopped.converged_.all()


# --------------------------------------------------------------------------- CVM
def _cvm_pair_values(est, X):
    """f_p(x) = Σ dual_coef_[p, k] κ(sv_k, x) + intercept_[p] of an RBF CVM, by scikit-learn's kernel."""
    K = rbf_kernel(X, est.support_vectors_, gamma=est.kernel_.gamma)
    return K @ est.dual_coef_.T + est.intercept_


def _cvm_votes(f, n_classes):
    """LIBSVM's one-vs-one vote by hand: pair (i, j) votes i when f > 0; most votes, lowest index."""
    votes = np.zeros((f.shape[0], n_classes))
    pairs = [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]
    for p, (i, j) in enumerate(pairs):
        votes[:, i] += f[:, p] > 0
        votes[:, j] += f[:, p] <= 0
    return np.argmax(votes, axis=1)


@pytest.mark.parametrize("data", ["binary", "multiclass"])
def test_cvm_predictions_are_unchanged_by_the_svc_surface(data):
    """With the default parameters CVM predicts as before the surface: binary f > 0 →
    classes_[1]; one-vs-one, the arg-max of scikit-learn's one-vs-rest decision function
    (votes, ties broken by the summed confidences); one-vs-rest, the arg-max of f/ρ."""
    X, y = make_blobs(300, centers=4, cluster_std=3.0, random_state=0)
    if data == "binary":
        y = y % 2
    G = np.mgrid[-15:15:0.5, -15:15:0.5].reshape(2, -1).T
    est = CVM(C=10.0, device="cpu", random_state=0).fit(X, y)
    f = _cvm_pair_values(est, G)
    if data == "binary":
        np.testing.assert_allclose(est.decision_function(G), f[:, 0], atol=1e-10)
        np.testing.assert_array_equal(est.predict(G), est.classes_[(f[:, 0] > 0).astype(int)])
        return
    ovr = _ovr_decision_function(f < 0, -f, 4)
    np.testing.assert_allclose(est.decision_function(G), ovr, atol=1e-10)
    np.testing.assert_array_equal(est.predict(G), est.classes_[np.argmax(ovr, axis=1)])
    ovr_est = CVM(C=10.0, multi_class="ovr", device="cpu", random_state=0).fit(X, y)
    scaled = _cvm_pair_values(ovr_est, G) / ovr_est.rho_
    np.testing.assert_allclose(ovr_est.decision_function(G), scaled, atol=1e-10)
    np.testing.assert_array_equal(ovr_est.predict(G), ovr_est.classes_[np.argmax(scaled, axis=1)])


def test_cvm_break_ties_and_decision_function_shape():
    X, y = make_blobs(60, centers=3, cluster_std=3.0, random_state=2)
    G = np.mgrid[-15:15:0.25, -15:15:0.25].reshape(2, -1).T
    est = CVM(C=10.0, device="cpu", random_state=0).fit(X, y)
    assert est.break_ties is True and est.decision_function_shape == "ovr"
    f = _cvm_pair_values(est, G)
    tied = est.predict(G)
    est.set_params(break_ties=False)
    libsvm = est.predict(G)
    np.testing.assert_array_equal(libsvm, est.classes_[_cvm_votes(f, 3)])
    assert (libsvm != tied).sum() > 10                   # the vote ties that break_ties decides
    est.set_params(decision_function_shape="ovo")
    np.testing.assert_allclose(est.decision_function(G), f, atol=1e-10)       # (n, 3) pairwise values
    np.testing.assert_array_equal(est.predict(G), libsvm)
    with pytest.raises(ValueError, match="break_ties must be False"):
        est.set_params(break_ties=True).predict(G)
    for bad in (dict(break_ties="yes"), dict(decision_function_shape="x")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            CVM(device="cpu", **bad).fit(X, y)


@pytest.mark.parametrize("multiclass", [False, True])
def test_cvm_coef_is_w_of_the_normalized_linear_kernel(multiclass):
    """coef_ = Σαᵢyᵢ xᵢ/‖xᵢ‖ (eq. 11 in the feature space of κ(x, z)/(‖x‖‖z‖)): the pairwise
    decision values are coef_ · x/‖x‖ + intercept_, not X @ coef_.T + intercept_."""
    X, y = make_blobs(200, centers=3 if multiclass else 2, cluster_std=2.0, random_state=1)
    est = CVM(kernel="linear", normalize=True, C=10.0, device="cpu", random_state=0).fit(X, y)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    n_problems = 3 if multiclass else 1
    assert est.coef_.shape == (n_problems, 2)
    np.testing.assert_allclose(est.coef_, est.dual_coef_ @ (est.support_vectors_ / np.linalg.norm(
        est.support_vectors_, axis=1, keepdims=True)), atol=1e-12)
    f = Xn @ est.coef_.T + est.intercept_
    if multiclass:
        np.testing.assert_allclose(est.set_params(break_ties=False, decision_function_shape="ovo")
                                   .decision_function(X), f, atol=1e-10)
    else:
        np.testing.assert_allclose(est.decision_function(X), f[:, 0], atol=1e-10)
        assert np.abs(X @ est.coef_[0] + est.intercept_[0] - f[:, 0]).max() > 1e-3
    with pytest.raises(ValueError):
        est.coef_[0, 0] = 1.0                             # read-only
    rbf = CVM(device="cpu", random_state=0).fit(X, y)
    with pytest.raises(AttributeError, match="linear kernel"):
        rbf.coef_


@pytest.mark.parametrize("multiclass", [False, True])
def test_cvm_max_iter_gives_one_svc_convergence_warning(multiclass):
    X, y = make_checkerboard(2000, random_state=0)
    if multiclass:
        y = np.where(X[:, 0] > 0.6, 2, y)
    kw = dict(gamma=30.0, C=1000.0, device="cpu", random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = CVM(max_iter=1, **kw).fit(X, y)
    conv = [c for c in caught if issubclass(c.category, ConvergenceWarning)]
    assert len(conv) == 1                               # one, starting with SVC's own sentence
    assert re.match(SVC_MAX_ITER, str(conv[0].message)) and "CVM did not reach tol" in str(conv[0].message)
    assert est.stop_reason_ == ["max_iter"] * (3 if multiclass else 1)
    with pytest.warns(ConvergenceWarning) as record:     # an early stop not by max_iter: CVM's own words
        CVM(max_core_size=4, **kw).fit(X, y)
    assert len(record) == 1 and str(record[0].message).startswith("CVM did not reach tol")


# --------------------------------------------------------------------------- GPU twins
@pytest.mark.gpu
def test_gpu_precomputed_sparse_and_ties_match_cpu(gpu):
    X, y = _iris()
    G = rbf_kernel(X, gamma=0.5)
    cpu = KernelSVC(kernel="precomputed", device="cpu").fit(G, y)
    dev = KernelSVC(kernel="precomputed", device="cuda", dtype=np.float64).fit(G, y)
    assert dev.solver_ == "working_set-cuda"
    assert np.mean(dev.predict(G) == cpu.predict(G)) >= 0.99
    np.testing.assert_allclose(dev.decision_function(G), cpu.decision_function(G), atol=2e-2)
    s = KernelSVC(kernel="linear", device="cuda", dtype=np.float64).fit(sp.csr_matrix(X), y)
    assert sp.issparse(s.dual_coef_) and sp.issparse(s.coef_)
    with pytest.raises(ValueError, match="cannot use sparse input"):
        KernelSVC(device="cuda").fit(X, y).predict(sp.csr_matrix(X))
    Xb, yb = make_blobs(20, random_state=42)
    Gr = np.mgrid[-12:12:0.5, -12:12:0.5].reshape(2, -1).T
    tie = KernelSVC(gamma=1e6, device="cuda", dtype=np.float64, break_ties=True).fit(Xb, yb)
    np.testing.assert_array_equal(tie.predict(Gr), np.argmax(tie.decision_function(Gr), axis=1))
    est = KernelSVC(kernel="linear", device="cuda", dtype=np.float64).fit(TOY_X, TOY_Y)
    est.intercept_ = est.intercept_ + 10.0
    assert np.all(est.predict(TOY_X) == 2)


@pytest.mark.gpu
def test_gpu_callable_kernel_falls_back_to_the_cpu(gpu):
    X, y = _iris()
    with pytest.warns(UserWarning, match="runs on the CPU"):
        est = KernelSVC(kernel=lambda A, B: A @ B.T, device="cuda").fit(X, y)
    assert est.fitted_device_ == "cpu" and est.solver_ == "libsvm"
    ref = SVC(kernel="linear").fit(X, y)
    assert np.mean(est.predict(X) == ref.predict(X)) >= 0.99
