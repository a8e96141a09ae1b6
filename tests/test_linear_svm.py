"""Tests of the linear solvers (gpuksvm.solvers.linear.problem, newton, newton_memory, newton_stream, dual_cd,
sbm) and gpuksvm.estimators.linear_svm.LinearSVM against LIBLINEAR.

LIBLINEAR is scikit-learn's ``LinearSVC`` with the same loss, C and intercept
treatment (a constant column of value ``intercept_scaling``, regularized).
Objectives are compared with one formula (:func:`primal_objective`) at both
solutions: a relative gap above 1e-3 in either direction fails.
"""
import pickle
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from gpuksvm.array import backend as bk
from gpuksvm.data.blocks import as_block_source
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.solvers.linear import problem as lin
from gpuksvm.solvers.linear import newton, newton_memory
from gpuksvm.solvers.linear.dual_cd import dual_cd
from gpuksvm.solvers.linear.problem import ovr_targets, primal_objective
from gpuksvm.solvers.linear.newton_memory import newton_squared_hinge
from gpuksvm.solvers.linear.newton_stream import newton_stream
from gpuksvm.solvers.linear.sbm import sbm

GAP = 1e-3


# --------------------------------------------------------------------------- data
def _synthetic(n, d=10, seed=0, noise=0.5, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = np.random.default_rng(1234).normal(size=(d, classes))   # the same model for every seed
    s = X @ W + noise * rng.normal(size=(n, classes))
    y = np.argmax(s, axis=1) if classes > 2 else (s[:, 0] > 0.3).astype(int)
    return X, y


_CACHE = {}


def _real(name, n_train=400, n_test=1500):
    """Random subsamples of a real data set (the bundled/shared SVMlight files)."""
    if name not in _CACHE:
        from gpuksvm.datasets import load_dataset

        try:
            X, y = load_dataset(name)
        except (FileNotFoundError, OSError) as exc:  # pragma: no cover - data not installed
            pytest.skip(f"{name} not available: {exc}")
        rng = np.random.default_rng(1)
        idx = rng.permutation(X.shape[0])[: n_train + n_test]
        _CACHE[name] = (X[idx[:n_train]], y[idx[:n_train]], X[idx[n_train:]], y[idx[n_train:]])
    return _CACHE[name]


def _reference(X, y, *, loss, C, sample_weight=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LinearSVC(C=C, loss=loss, dual=True, tol=1e-7, max_iter=200000, random_state=0,
                         **kw).fit(X, y, sample_weight=sample_weight)


def _objectives(est, ref, X, y, *, sample_weight=None, class_weight=None):
    """Primal objective of both models by the same formula (LIBLINEAR's OvR weighting)."""
    classes = est.classes_
    y_idx = np.searchsorted(classes, y)
    cw = None
    if class_weight is not None:
        from sklearn.utils.class_weight import compute_class_weight

        cw = compute_class_weight(class_weight, classes=classes, y=y, sample_weight=sample_weight)
    Y, S = ovr_targets(y_idx, classes.shape[0], class_weight=cw, sample_weight=sample_weight)
    s = est.intercept_scaling if est.fit_intercept else None
    b_ref = ref.intercept_ if est.fit_intercept else None
    b_est = bk.to_host(est.intercept_) if est.fit_intercept else None
    f_ref = primal_objective(ref.coef_, b_ref, X, Y, est.C, est.loss, S, intercept_scaling=s)
    f_est = primal_objective(bk.to_host(est.coef_), b_est, X, Y, est.C, est.loss, S, intercept_scaling=s)
    return f_est, f_ref


def _assert_matches(est, ref, X, y, Xt, yt, **kw):
    f_est, f_ref = _objectives(est, ref, X, y, **kw)
    gap = np.abs(f_est - f_ref) / f_ref
    assert gap.max() <= GAP, (f_est, f_ref)
    np.testing.assert_allclose(est.objective_, f_est, rtol=1e-6)
    assert abs(est.score(Xt, yt) - ref.score(Xt, yt)) <= 0.005


# --------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("method", ["cholesky", "cg"])
def test_newton_solver_optimality(rng, method):
    X, y = _synthetic(300, d=8)
    Y = np.where(y == 1, 1.0, -1.0)
    sw = rng.uniform(0.2, 2.0, size=300)
    sol = newton_squared_hinge(X, Y, 2.0, sample_weight=sw, intercept_scaling=1.5, tol=1e-10,
                               method=method)
    assert sol.converged and sol.info["method"] == method
    # KKT of the augmented problem: w̃ = 2C Σ sᵢ yᵢ max(0, 1 − yᵢ f̃ᵢ) x̃ᵢ
    Xa = np.c_[X, np.full(300, 1.5)]
    w = np.r_[sol.coef[0], sol.intercept[0] / 1.5]
    r = np.maximum(0, 1 - Y * (Xa @ w))
    np.testing.assert_allclose(w, 2 * 2.0 * Xa.T @ (sw * Y * r), rtol=1e-7, atol=1e-9)
    obj = 0.5 * w @ w + 2.0 * np.sum(sw * r ** 2)
    assert sol.objective[0] == pytest.approx(obj, rel=1e-10)
    assert primal_objective(sol.coef, sol.intercept, X, Y, 2.0, "squared_hinge", sw,
                            intercept_scaling=1.5)[0] == pytest.approx(obj, rel=1e-10)


@pytest.mark.parametrize("class_weight", [None, np.array([1.0, 3.0, 0.5, 1.0, 2.0])])
def test_multiclass_newton_shares_the_gram_and_equals_per_class_solutions(class_weight):
    # issue 15 item 4: one-vs-rest problems are solved in one Newton run whose Hessians
    # share one Gram where the active sets allow (at w = 0 every problem's is the same
    # without class weights: one Gram, one factor) — the same optimum as solving each
    # class alone, for fewer rows multiplied into Grams
    X, y = _synthetic(3000, d=40, classes=5, noise=1.0)
    Y, S = ovr_targets(y, 5, class_weight=class_weight)
    kw = dict(tol=1e-9, warm_start=False)
    joint = newton_squared_hinge(X, Y, 0.5, sample_weight=S, **kw)
    assert joint.info["method"] == "cholesky" and joint.converged
    alone = [newton_squared_hinge(X, Y[:, c], 0.5, sample_weight=S[:, c], method="cholesky", **kw)
             for c in range(5)]
    np.testing.assert_allclose(joint.objective, [a.objective[0] for a in alone], rtol=1e-10)
    np.testing.assert_allclose(joint.coef, np.vstack([a.coef for a in alone]), rtol=1e-6, atol=1e-8)
    # the first step costs one Gram of the n rows (plus class-weight corrections)
    # instead of one per class
    corrections = 0 if class_weight is None else int(np.sum(class_weight[y] != 1.0))
    assert joint.info["gram_rows"] <= sum(a.info["gram_rows"] for a in alone) - 4 * 3000 + corrections
    cw = None if class_weight is None else dict(enumerate(class_weight.tolist()))
    est = LinearSVM(C=0.5, device="cpu", tol=1e-9, class_weight=cw).fit(X, y)
    assert est.solver_ == "newton"
    np.testing.assert_allclose(est.objective_, joint.objective, rtol=1e-9)


def test_newton_warm_start_draws_from_random_state():
    # issue 16: the warm start's random tenth of the rows came from default_rng(0)
    # whatever random_state said; now random_state draws it (same seed: same bits)
    X, y = _synthetic(4000, d=20, noise=1.0)
    Y = np.where(y == 1, 1.0, -1.0)
    a, b, c = (newton_squared_hinge(X, Y, 1.0, tol=1e-3, random_state=rs) for rs in (0, 0, 1))
    np.testing.assert_array_equal(a.coef, b.coef)
    assert not np.array_equal(a.coef, c.coef)
    np.testing.assert_allclose(a.objective, c.objective, rtol=1e-6)
    e0, e1 = (LinearSVM(tol=1e-3, random_state=rs, device="cpu").fit(X, y) for rs in (0, 1))
    assert not np.array_equal(e0.coef_, e1.coef_)
    np.testing.assert_allclose(e0.objective_, e1.objective_, rtol=1e-6)


def test_newton_rebuilds_a_non_pd_hessian_in_float64(monkeypatch):
    # float32 Grams (or their up/downdates) can lose positive definiteness at large
    # n·C (seen at 800K rows × 1000 features): the step then rebuilds the Gram in
    # float64 from the active rows and goes on to the same solution
    from gpuksvm.array import linalg

    X, y = _synthetic(400, d=6)
    Y = np.where(y == 1, 1.0, -1.0)
    ref = newton_squared_hinge(X, Y, 3.0, tol=1e-10, method="cholesky")
    real, calls = linalg.cho_factor, []

    def flaky(A, **kw):
        calls.append(A.copy())
        if len(calls) % 2 == 1:          # every first try of a step fails
            raise np.linalg.LinAlgError("1-th leading minor of the array is not positive definite")
        return real(A, **kw)

    monkeypatch.setattr(linalg, "cho_factor", flaky)
    sol = newton_squared_hinge(X.astype(np.float32), Y.astype(np.float32), 3.0, tol=1e-6,
                               method="cholesky")
    assert len(calls) >= 2 and calls[1].dtype == np.float64
    np.testing.assert_allclose(sol.objective, ref.objective, rtol=1e-5)
    np.testing.assert_allclose(sol.coef, ref.coef, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_dual_cd_kkt_and_warm_start(loss):
    X, y = _synthetic(120, d=30, noise=1.0)
    Y = np.where(y == 1, 1.0, -1.0)
    sol = dual_cd(X, Y, 0.5, loss, tol=1e-7, max_iter=20000, random_state=0)
    assert sol.converged
    a = sol.alpha[:, 0]
    Xa = np.c_[X, np.ones(120)]
    w = np.r_[sol.coef[0], sol.intercept[0]]
    np.testing.assert_allclose(w, Xa.T @ (a * Y), atol=1e-10)      # w = Σ αᵢyᵢx̃ᵢ
    D = 0.0 if loss == "hinge" else 1 / (2 * 0.5)
    G = Y * (Xa @ w) - 1 + D * a
    U = 0.5 if loss == "hinge" else np.inf
    PG = np.where(a <= 0, np.minimum(G, 0), np.where(a >= U, np.maximum(G, 0), G))
    assert np.abs(PG).max() <= 1e-6
    # same random_state → same iterates; a warm start at the optimum stops at once
    again = dual_cd(X, Y, 0.5, loss, tol=1e-7, max_iter=20000, random_state=0)
    np.testing.assert_array_equal(again.alpha, sol.alpha)
    warm = dual_cd(X, Y, 0.5, loss, tol=1e-5, alpha0=sol.alpha, random_state=1)
    assert warm.n_iter == 1
    # the blocked (per-block GEMM) path visits coordinates identically
    blocked = dual_cd(X, Y, 0.5, loss, tol=1e-7, max_iter=20000, random_state=0, block_size=16,
                      gram_rows=0)
    np.testing.assert_allclose(blocked.objective, sol.objective, rtol=1e-9)


def test_primal_objective_formula(rng):
    X = rng.normal(size=(20, 3))
    W = rng.normal(size=(2, 3))
    b = rng.normal(size=2)
    Y = np.where(rng.random((20, 2)) < 0.5, 1.0, -1.0)
    for loss, p in (("hinge", 1), ("squared_hinge", 2)):
        f = primal_objective(W, b, X, Y, 3.0, loss, intercept_scaling=2.0)
        for c in range(2):
            h = np.maximum(0, 1 - Y[:, c] * (X @ W[c] + b[c])) ** p
            ref = 0.5 * W[c] @ W[c] + 0.5 * (b[c] / 2.0) ** 2 + 3.0 * h.sum()
            assert f[c] == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="loss"):
        primal_objective(W, b, X, Y, 1.0, "log")


# --------------------------------------------------------------------------- vs LIBLINEAR
@pytest.mark.parametrize("loss,solver", [("squared_hinge", "newton"), ("squared_hinge", "dual_cd"),
                                         ("hinge", "dual_cd"), ("hinge", "auto")])
def test_synthetic_matches_liblinear(loss, solver):
    X, y = _synthetic(400)
    Xt, yt = _synthetic(1000, seed=1)
    for fit_intercept, scaling in ((True, 1.0), (True, 3.0), (False, 1.0)):
        kw = dict(C=0.7, loss=loss, fit_intercept=fit_intercept, intercept_scaling=scaling)
        est = LinearSVM(solver=solver, tol=1e-6, max_iter=20000, device="cpu", random_state=0, **kw)
        est.fit(X, y)
        _assert_matches(est, _reference(X, y, **kw), X, y, Xt, yt)
        if not fit_intercept:
            assert np.all(est.intercept_ == 0)


@pytest.mark.parametrize("name", ["ijcnn1", "adult"])
@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_real_subsamples_match_liblinear(name, loss):
    X, y, Xt, yt = _real(name)
    ref = _reference(X, y, loss=loss, C=0.5)
    inputs = [X] + ([sp.csr_matrix(X)] if name == "adult" else [])
    for Xin in inputs:
        for solver in ("auto", "dual_cd") if loss == "hinge" else ("auto", "newton", "dual_cd"):
            est = LinearSVM(C=0.5, loss=loss, solver=solver, tol=1e-4, max_iter=20000, device="cpu",
                            random_state=0).fit(Xin, y)
            _assert_matches(est, ref, X, y, Xt, yt)
            assert est.solver_ in ("newton", "newton-cg", "dual_cd", "liblinear")


def _wide_sparse(n, d=600, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.02, format="csr", random_state=seed)
    w = np.random.default_rng(99).normal(size=d)
    return X, np.where(X @ w + 0.1 * rng.normal(size=n) > 0, 1, 0)


def test_auto_solver_names_engine():
    X, y = _synthetic(200)
    assert LinearSVM(device="cpu").fit(X, y).solver_ == "newton"
    assert LinearSVM(device="cpu").fit(sp.csr_matrix(X), y).solver_ == "newton-cg"
    assert LinearSVM(loss="hinge", device="cpu").fit(X, y).solver_ == "liblinear"
    assert LinearSVM(loss="hinge", solver="dual_cd", device="cpu").fit(X, y).solver_ == "dual_cd"
    # wide sparse data go to LIBLINEAR: its DCD when n < d, its primal Newton when n > d
    Xw, yw = _wide_sparse(300)
    assert LinearSVM(device="cpu").fit(Xw, yw).solver_ == "liblinear"
    Xw, yw = _wide_sparse(900)
    assert LinearSVM(device="cpu").fit(Xw, yw).solver_ == "liblinear-primal"
    assert LinearSVM(solver="liblinear", device="cpu").fit(X, y).solver_ == "liblinear-primal"


@pytest.mark.parametrize("n", [300, 900])
def test_wide_sparse_engines_match_liblinear(n):
    """Where auto delegates to LIBLINEAR, our own Newton-CG and DCD still meet the
    independent reference (LIBLINEAR's dual CD at tight tolerance) — and so does the
    delegated engine (its primal TRON when n > d is a different algorithm)."""
    X, y = _wide_sparse(n)
    Xt, yt = _wide_sparse(1500, seed=1)
    ref = _reference(X, y, loss="squared_hinge", C=2.0)
    for solver in ("auto", "newton", "dual_cd"):
        est = LinearSVM(C=2.0, solver=solver, tol=1e-5, max_iter=20000, device="cpu",
                        random_state=0).fit(X, y)
        _assert_matches(est, ref, X, y, Xt, yt)


def test_blas_threads_narrow_or_busy_host(monkeypatch):
    from threadpoolctl import threadpool_info

    from gpuksvm.solvers.linear import problem as lin

    def threads(design):
        with lin._blas_limit(design):
            return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    wide = lin.Design(np.zeros((2, lin.NARROW_DIM)), 1.0)          # + the constant column
    monkeypatch.setattr(lin, "host_busy", lambda: False)
    assert max(threads(lin.Design(np.zeros((2, 3)), 1.0))) == 1
    assert threads(wide) == before
    monkeypatch.setattr(lin, "host_busy", lambda: True)
    assert max(threads(wide)) == 1
    assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == before
    # nested and concurrent users: the caller's setting always comes back
    import threading

    from gpuksvm.array.blas_threads import one_blas_thread

    def user(delay):
        with one_blas_thread():
            with one_blas_thread():
                threading.Event().wait(delay)
            threading.Event().wait(delay)

    workers = [threading.Thread(target=user, args=(0.01 * k,)) for k in (3, 1, 2)]
    with one_blas_thread():
        for w in workers:
            w.start()
        with one_blas_thread():
            assert max(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas") == 1
        assert max(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas") == 1
    for w in workers:
        w.join()
    assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == before


@pytest.mark.parametrize("solver", ["newton", "dual_cd", "liblinear"])
def test_multiclass_one_vs_rest(solver):
    X, y = _synthetic(240, d=6, classes=4, noise=0.8)
    Xt, yt = _synthetic(1000, d=6, classes=4, noise=0.8, seed=1)
    labels = np.array(["a", "b", "c", "d"])
    est = LinearSVM(C=0.5, solver=solver, tol=1e-5, max_iter=20000, device="cpu",
                    random_state=0).fit(X, labels[y])
    ref = _reference(X, labels[y], loss="squared_hinge", C=0.5)
    assert est.coef_.shape == (4, 6) and est.intercept_.shape == (4,)
    assert est.objective_.shape == (4,)
    _assert_matches(est, ref, X, labels[y], Xt, labels[yt])
    assert est.decision_function(Xt).shape == (1000, 4)
    np.testing.assert_array_equal(est.predict(Xt), ref.predict(Xt))


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_class_and_sample_weights_match_liblinear(loss, n_classes):
    X, y = _synthetic(200, d=5, classes=n_classes, noise=1.0)
    Xt, yt = _synthetic(800, d=5, classes=n_classes, noise=1.0, seed=1)
    sw = np.random.default_rng(3).uniform(0.1, 3.0, size=200)
    for cw in ({0: 3.0, 1: 0.5}, "balanced"):
        ref = _reference(X, y, loss=loss, C=1.0, class_weight=cw, sample_weight=sw)
        # (multi-class DCD is covered by test_multiclass_one_vs_rest)
        for solver in ("auto", "dual_cd") if n_classes == 2 else ("auto",):
            est = LinearSVM(C=1.0, loss=loss, solver=solver, class_weight=cw, tol=1e-5,
                            max_iter=20000, device="cpu", random_state=0).fit(X, y, sample_weight=sw)
            _assert_matches(est, ref, X, y, Xt, yt, sample_weight=sw, class_weight=cw)


def test_integer_weights_equal_repeated_rows():
    X, y = _synthetic(120, d=4)
    w = np.random.default_rng(0).integers(0, 3, size=120)
    a = LinearSVM(tol=1e-10, device="cpu").fit(X, y, sample_weight=w)
    b = LinearSVM(tol=1e-10, device="cpu").fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-10)


# --------------------------------------------------------------------------- out of core
def _ooc_data(n=1500, d=20):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def _memmap(tmp_path, X):
    mm = np.memmap(tmp_path / "X.f64", dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    del mm
    return np.memmap(tmp_path / "X.f64", dtype=np.float64, mode="r", shape=X.shape)


@pytest.mark.parametrize("loss,tol_obj", [("squared_hinge", 5e-3), ("hinge", 1e-2)])
def test_sbm_memmap_equals_in_memory(tmp_path, loss, tol_obj):
    X, y = _ooc_data()
    Xmm = _memmap(tmp_path, X)
    kw = dict(C=0.05, loss=loss, device="cpu", random_state=0)
    mem = LinearSVM(tol=1e-7, max_iter=100000, **kw).fit(X, y)        # exact in-memory engine
    ooc = LinearSVM(solver="sbm", n_passes=6, max_iter=50, block_size=150, tol=1e-4, **kw)
    ooc.fit(as_block_source(Xmm, y, block_size=150))
    assert ooc.solver_ == "sbm" and ooc.n_features_in_ == 20 and ooc.n_iter_ == 6
    assert abs(ooc.objective_[0] - mem.objective_[0]) / mem.objective_[0] <= tol_obj
    assert np.mean(ooc.predict(X) == mem.predict(X)) >= 0.99
    np.testing.assert_allclose(ooc.objective_, primal_objective(ooc.coef_, ooc.intercept_, X, y, 0.05, loss),
                               rtol=1e-9)
    # solver="sbm" on an array reads it in blocks of block_size: same iterates
    again = LinearSVM(solver="sbm", n_passes=6, max_iter=50, block_size=150, tol=1e-4, **kw).fit(Xmm, y)
    np.testing.assert_allclose(again.coef_, ooc.coef_)


@pytest.mark.parametrize("classes", [2, 3])
def test_newton_stream_equals_in_memory(tmp_path, classes):
    # issue 15 item 5: out of core, the squared hinge runs the in-memory Newton solver
    # (same line search and stopping rule) over the streamed blocks: the same optimum
    X, y = _synthetic(900, d=12, classes=classes, noise=0.8)
    Xmm = _memmap(tmp_path, X)
    kw = dict(C=0.3, device="cpu", tol=1e-8, class_weight={1: 1.5})
    mem = LinearSVM(**kw).fit(X, y)
    ooc = LinearSVM(block_size=200, **kw).fit(as_block_source(Xmm, y, block_size=200))
    assert ooc.solver_ == "newton-stream" and ooc.converged_ and ooc.n_features_in_ == 12
    # two passes per Newton step, one when the step is the full Newton step (t = 1)
    assert ooc.n_iter_ + 1 <= ooc.n_passes_ <= 2 * ooc.n_iter_ + 1
    np.testing.assert_allclose(ooc.objective_, mem.objective_, rtol=1e-9)
    np.testing.assert_allclose(ooc.coef_, mem.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ooc.objective_, _objectives(ooc, ooc, X, y, class_weight={1: 1.5})[0],
                               rtol=1e-9)
    sol, cls, d = newton_stream(as_block_source(X, y, block_size=300), 0.3, tol=1e-8,
                                class_weight=None)
    assert d == 12 and sol.converged
    with pytest.raises(TypeError, match="BlockSource"):
        newton_stream(X, 1.0)


def test_stream_oracle_one_pass_steps_equal_two_pass_steps():
    # the line-search pass prepares the next evaluation for t in [0, t_max]; with no
    # room for undecided rows (spare_blocks=0: only steps that leave every row decided)
    # or a bracket no step fits (t_max=0: none) steps read the data twice — the
    # iterates are the same
    from gpuksvm.solvers.linear.newton import newton_solve
    from gpuksvm.solvers.linear.newton_stream import StreamOracle

    X, y = _synthetic(1200, d=9, classes=3, noise=1.0)
    Y, S = ovr_targets(y, 3, class_weight=np.array([1.0, 2.0, 0.5]))

    def blocks(split=1):
        for a in range(0, 1200, 250):
            step = -(-X[a:a + 250].shape[0] // split)
            for b in range(a, min(a + 250, 1200), step):
                yield b, X[b:min(b + step, a + 250)]

    # speculate=False (a small memory budget): no speculative Grams, two passes per step;
    # gram_cols: the Gram products in column blocks
    sols = [newton_solve(StreamOracle(blocks, Y, 0.7 * S, n_features=9, **kw), tol=1e-9, max_iter=100)
            for kw in ({}, {"spare_blocks": 0.0}, {"t_max": 0.0}, {"speculate": False, "gram_cols": 4})]
    for sol in sols[1:]:
        np.testing.assert_allclose(sol.objective, sols[0].objective, rtol=1e-11)
        np.testing.assert_allclose(sol.info["W"], sols[0].info["W"], rtol=1e-7, atol=1e-10)
    assert sols[2].info["n_passes"] == 2 * sols[2].n_iter + 1
    assert sols[3].info["n_passes"] == 2 * sols[3].n_iter + 1
    assert sols[0].info["n_passes"] < sols[1].info["n_passes"] <= 2 * sols[1].n_iter + 1
    ref = newton_squared_hinge(X, Y, 0.7, sample_weight=S, tol=1e-9)
    np.testing.assert_allclose(sols[0].objective, ref.objective, rtol=1e-9)


def test_stream_oracle_out_of_memory_cuts_the_blocks():
    # a pass whose block does not fit the device (here: MemoryError while a whole block is
    # yielded) runs again with every block cut into pieces: one MemoryFallbackWarning, the
    # same iterates (the statistics' float64 sums regrouped)
    from gpuksvm.solvers.linear.newton import newton_solve
    from gpuksvm.solvers.linear.newton_stream import StreamOracle

    X, y = _synthetic(1200, d=9, classes=3, noise=1.0)
    Y, S = ovr_targets(y, 3)
    splits = []

    def blocks(split=1):
        splits.append(split)
        for a in range(0, 1200, 250):
            if split == 1 and len(splits) == 3:        # the second pass: a line search's
                raise MemoryError("a block does not fit")
            step = -(-X[a:a + 250].shape[0] // split)
            for b in range(a, min(a + 250, 1200), step):
                yield b, X[b:min(b + step, a + 250)]

    def whole(split=1):
        return ((a, X[a:a + 250]) for a in range(0, 1200, 250))

    want = newton_solve(StreamOracle(whole, Y, 0.7 * S, n_features=9), tol=1e-9, max_iter=100)
    with pytest.warns(bk.MemoryFallbackWarning, match="streamed Newton pass"):
        got = newton_solve(StreamOracle(blocks, Y, 0.7 * S, n_features=9), tol=1e-9, max_iter=100)
    assert splits[:4] == [1, 1, 1, 2] and set(splits[4:]) == {2}
    np.testing.assert_allclose(got.objective, want.objective, rtol=1e-11)
    np.testing.assert_allclose(got.info["W"], want.info["W"], rtol=1e-7, atol=1e-10)


def test_sbm_memory_bound(tmp_path):
    """tracemalloc peak of one SBM pass over a memmap vs the data size and an in-memory fit."""
    X, y = _ooc_data(8000, 60)
    Xmm = _memmap(tmp_path, X)
    LinearSVM(device="cpu", n_passes=1, max_iter=1).fit(as_block_source(Xmm[:800], y[:800], block_size=400))
    tracemalloc.start()
    LinearSVM(C=0.05, device="cpu").fit(np.array(Xmm), y)
    peak_mem = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    for kw in (dict(solver="sbm", n_passes=1, max_iter=2), dict(solver="auto")):
        tracemalloc.start()
        ooc = LinearSVM(C=0.05, device="cpu", random_state=0, **kw)
        ooc.fit(as_block_source(Xmm, y, block_size=200))
        peak_ooc = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # a block, the cache (SBM) or the Gram (Newton) and O(n) per-row numbers: well
        # under the data (X.nbytes = 3.84 MB)
        assert peak_ooc < 0.3 * X.nbytes
        assert peak_ooc < 0.3 * peak_mem
        assert ooc.score(X, y) > 0.9


@pytest.mark.parametrize("classes", [2, 3])
def test_sbm_svmlight_file(tmp_path, classes):
    X, y = _synthetic(450 if classes == 2 else 240, d=8, classes=classes, noise=0.3)
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path))
    kw = dict(C=0.1, device="cpu", random_state=0)
    mem = LinearSVM(tol=1e-8, **kw).fit(X, y)
    ooc = LinearSVM(solver="sbm", n_passes=6, block_size=150, max_iter=50, tol=1e-4, **kw).fit(str(path))
    assert ooc.solver_ == "sbm" and ooc.coef_.shape == (1 if classes == 2 else 3, 8)
    np.testing.assert_array_equal(ooc.classes_, np.arange(classes))
    gap = np.abs(ooc.objective_ - mem.objective_) / mem.objective_
    assert gap.max() <= 5e-3
    assert np.mean(ooc.predict(X) == mem.predict(X)) >= 0.99


def test_sbm_function_and_errors(tmp_path):
    X, y = _ooc_data()
    src = as_block_source(X[:600], y[:600], block_size=100)
    sol, classes, d = sbm(src, 0.05, "hinge", n_passes=2, cache_drop=1.0, tol=1e-3)
    assert d == 20 and sol.info["cache_rows"] == 0 and sol.alpha.shape == (600, 1)
    np.testing.assert_array_equal(classes, [-1, 1])
    with pytest.raises(ValueError, match="cache_drop"):
        sbm(src, 1.0, n_passes=1, cache_drop=0.0)
    with pytest.raises(TypeError, match="BlockSource"):
        sbm(X, 1.0)
    # a source that changes between passes is detected
    state = {"k": 0}

    def shifting():
        state["k"] += 1
        yv = y[:200] if state["k"] < 3 else -y[:200]
        return iter([(X[:200], yv)])

    with pytest.raises(ValueError, match="same rows"):
        LinearSVM(solver="sbm", n_passes=3, device="cpu").fit(as_block_source(shifting, n_features=20))
    state["k"] = 0
    with pytest.raises(ValueError, match="same rows"):
        LinearSVM(device="cpu").fit(as_block_source(shifting, n_features=20))
    with pytest.raises(ValueError, match="sample_weight"):
        LinearSVM(device="cpu").fit(src, sample_weight=np.ones(600))
    with pytest.raises(ValueError, match="y must be None"):
        LinearSVM(device="cpu").fit(src, y[:600])
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:1\n-1 2:oops\n")
    with pytest.raises(ValueError, match=r"bad\.svm, line 2"):
        LinearSVM(device="cpu").fit(str(bad))


# --------------------------------------------------------------------------- behaviour
def test_bad_input_errors():
    X, y = _synthetic(50, d=3)
    with pytest.raises(ValueError, match="NaN"):
        LinearSVM(device="cpu").fit(np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="class"):
        LinearSVM(device="cpu").fit(X, np.ones(50))
    with pytest.raises(ValueError):
        LinearSVM(device="cpu").fit(np.empty((0, 3)), np.empty(0))
    est = LinearSVM(device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2])
    for bad in (dict(C=0.0), dict(C=-1.0), dict(loss="log"), dict(solver="sgd"), dict(tol=0),
                dict(max_iter=0), dict(cache_drop=0.0), dict(intercept_scaling=0.0),
                dict(loss="hinge", solver="newton"), dict(class_weight="even"), dict(n_passes=0)):
        with pytest.raises(ValueError):
            LinearSVM(device="cpu", **bad).fit(X, y)
    with pytest.raises(ValueError, match="class_weight"):
        LinearSVM(device="cpu", class_weight={7: 2.0}).fit(X, y)
    with pytest.raises(ValueError):
        LinearSVM(device="cpu").fit(X, y, sample_weight=-np.ones(50))


def test_no_input_modification_reproducible_and_pickle():
    X, y = _synthetic(200, d=4)
    X0, y0 = X.copy(), y.copy()
    a = LinearSVM(loss="hinge", solver="dual_cd", random_state=3, device="cpu").fit(X, y)
    b = LinearSVM(loss="hinge", solver="dual_cd", random_state=3, device="cpu").fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.decision_function(X), a.decision_function(X))
    assert a.dual_coef_.shape == (200, 1)


def test_probability_platt():
    X, y = _synthetic(300, d=4, classes=3, noise=0.5)
    est = LinearSVM(probability=True, random_state=0, device="cpu").fit(X, y)
    P = est.predict_proba(X[:50])
    assert P.shape == (50, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(est.predict_log_proba(X[:50]), np.log(P))
    assert np.mean(est.classes_[P.argmax(axis=1)] == est.predict(X[:50])) >= 0.9
    assert not hasattr(LinearSVM(device="cpu").fit(X, y), "predict_proba")
    with pytest.raises(ValueError, match="probability"):
        LinearSVM(probability=True, device="cpu").fit(as_block_source(X, y, block_size=100))


def test_nonconvergence_warns():
    X, y = _synthetic(300, d=5, noise=2.0)
    with pytest.warns(ConvergenceWarning):
        LinearSVM(C=100.0, loss="hinge", solver="dual_cd", max_iter=2, device="cpu").fit(X, y)


def _phi(t, wp, pp, o, z, Y, CS):
    """φ(t) of one problem (columns o, z, Y, CS) at the steps t (scalar or 1-D)."""
    t = np.asarray(t, dtype=np.float64)[..., None]
    return wp * t[..., 0] + 0.5 * pp * t[..., 0] ** 2 + (CS * np.maximum(0.0, 1.0 - Y * (o + t * z)) ** 2).sum(-1)


def test_exact_line_step_is_the_minimizer():
    """The breakpoint line search (rows in memory) finds the minimizer of the piecewise-quadratic
    φ(t) on [0, ∞): checked against a fine grid around it and the iterative search, on problems
    with ties, rows that never change, zero directions and inactive problems."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        n, m = int(rng.integers(1, 80)), int(rng.integers(1, 4))
        o = np.round(rng.normal(size=(n, m)), 1 if trial % 3 == 0 else 8)          # ties at trial % 3 == 0
        z = np.round(rng.normal(size=(n, m)), 1 if trial % 3 == 0 else 8) * (rng.random((n, m)) > 0.15)
        Y = np.where(rng.random((n, m)) < 0.5, -1.0, 1.0)
        CS = rng.random((n, m)) * 4
        wp, pp = rng.normal(size=m) - 0.5, rng.random(m) + 1e-3
        if trial % 11 == 0:
            z[:] = 0.0                    # a direction along which no row changes
        if trial % 13 == 0:               # p = 0: then z = F̃p = 0 and wᵀp = pᵀp = 0
            z[:], wp[:], pp[:] = 0.0, 0.0, 0.0
        active = rng.random(m) < 0.85
        t = newton.exact_line_step(wp, pp, o, z, Y, CS, active)
        t_it = newton._line_search(wp, pp, lambda s: newton.line_derivatives(o, z, Y, CS, s), active)
        for c in range(m):
            if not active[c]:
                assert t[c] == 0.0
                continue
            args = (wp[c], pp[c], o[:, c], z[:, c], Y[:, c], CS[:, c])
            best = _phi(np.linspace(0.0, max(4.0, 4 * t[c]), 4001), *args).min()
            assert t[c] >= 0 and _phi(t[c], *args) <= best + 1e-9 * max(1.0, abs(best))
            assert _phi(t[c], *args) <= _phi(t_it[c], *args) + 1e-9 * max(1.0, abs(best))


def test_gpu_takes_cholesky_up_to_a_wider_design(monkeypatch):
    """On a GPU Newton's direction is a Cholesky solve up to GPU_CHOLESKY_MAX_DIM columns (CG's
    launches cost more there), on the CPU up to STREAM_MAX_DIM."""
    F = np.zeros((50_000, 4000), dtype=np.float32)
    assert newton_memory._choose_method(lin.Design(F, 1.0), 1) == "cg"

    class FakeXp:                                  # the method choice only asks "is this NumPy?"
        pass

    gpu_design = lin.Design(F, 1.0)
    gpu_design.xp = FakeXp()
    monkeypatch.setattr(bk, "device_of", lambda x: bk.Device("cpu"))
    assert newton_memory._choose_method(gpu_design, 1) == "cholesky"
    gpu_design.dim = newton_memory.GPU_CHOLESKY_MAX_DIM + 1
    assert newton_memory._choose_method(gpu_design, 1) == "cg"


# --------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("loss,solver", [("squared_hinge", "newton"), ("squared_hinge", "dual_cd"),
                                         pytest.param("hinge", "dual_cd", marks=pytest.mark.slow)])  # ~6,400 epochs
def test_gpu_matches_cpu(gpu, loss, solver):
    # 250 rows (dual CD on the emulator: 4.5 s; 18 s at 500, its epochs are host-bound)
    X, y = _synthetic(250, d=12, classes=3)
    kw = dict(C=1.0, loss=loss, solver=solver, tol=1e-6, max_iter=20000, random_state=0)
    cpu = LinearSVM(device="cpu", **kw).fit(X, y)
    for dtype in ("float64", "float32"):
        g = LinearSVM(device="gpu", dtype=dtype, **kw).fit(gpu.asarray(X), y)
        assert bk.is_gpu_array(g.coef_) and g.fitted_device_.startswith("cuda")
        rtol = 1e-3 if dtype == "float64" else 1e-2
        np.testing.assert_allclose(g.objective_, cpu.objective_, rtol=rtol)
        dec = g.decision_function(gpu.asarray(X))
        assert bk.is_gpu_array(dec)
        assert np.mean(g.predict(X) == cpu.predict(X)) >= 0.99
    back = pickle.loads(pickle.dumps(g))
    np.testing.assert_allclose(back.decision_function(X), bk.to_host(dec), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_newton_cg_and_sbm(gpu):
    X, y = _ooc_data()
    Y = np.where(y > 0, 1.0, -1.0)
    ref = newton_squared_hinge(X, Y, 0.5, tol=1e-8)
    for method in ("cholesky", "cg"):
        sol = newton_squared_hinge(gpu.asarray(X), gpu.asarray(Y), 0.5, tol=1e-8, method=method)
        np.testing.assert_allclose(sol.objective, ref.objective, rtol=1e-6)
    kw = dict(C=0.05, tol=1e-4, random_state=0, n_passes=6, max_iter=50)
    for solver, rtol in (("sbm", 1e-3), ("auto", 1e-9)):
        cpu = LinearSVM(device="cpu", solver=solver, **kw).fit(as_block_source(X, y, block_size=150))
        g = LinearSVM(device="gpu", solver=solver, dtype="float64", **kw).fit(
            as_block_source(X, y, block_size=150))
        np.testing.assert_allclose(g.objective_, cpu.objective_, rtol=rtol)


def test_newton_solves_one_vs_rest_problems_in_groups_within_the_budget():
    # the per-row state of 4 problems on 3,000 rows (NEWTON_ROW_BYTES each) does not fit a
    # 1 MB budget: two problems at a time (the budget's share), the same solutions
    from gpuksvm.solvers.linear.newton_memory import NEWTON_ROW_BYTES

    X, y = _synthetic(3000, d=6, classes=4, noise=1.0)
    Y, S = ovr_targets(y, 4)
    want = newton_squared_hinge(X, Y, 0.5, sample_weight=S, tol=1e-8)
    assert want.info["problems_at_once"] == 4
    budget = 2 * 3000 * NEWTON_ROW_BYTES + 100
    with bk.config_context(cpu_memory_budget=budget), \
            pytest.warns(bk.MemoryFallbackWarning, match="solving 2 at a time"):
        got = newton_squared_hinge(X, Y, 0.5, sample_weight=S, tol=1e-8)
    assert got.info["problems_at_once"] == got.info["problems_planned"] == 2
    np.testing.assert_allclose(got.objective, want.objective, rtol=1e-10)
    np.testing.assert_allclose(got.coef, want.coef, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got.intercept, want.intercept, rtol=1e-6, atol=1e-9)
    assert got.info["W"].shape == want.info["W"].shape
