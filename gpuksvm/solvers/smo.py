"""Exact C-SVC dual solvers (hinge loss): LIBSVM, own SMO, batched working-set SMO.

The dual of the binary C-SVC (LIBSVM's form, Chang & Lin 2011, eq. 2):

    min_α  ½ αᵀQα − eᵀα   s.t.  yᵀα = 0,  0 ≤ αᵢ ≤ Cᵢ,     Q_ij = yᵢyⱼK_ij,

with Cᵢ = C·wᵢ (sample/class weights).  Every solver here tracks
Fᵢ = −yᵢ∇ᵢ (∇ = Qα − e, so F = y at α = 0); the optimality gap is

    m(α) − M(α),   m = max_{i∈I_up} Fᵢ,   M = min_{i∈I_low} Fᵢ          (FCL05, eq. 6)
    I_up  = {i : αᵢ < Cᵢ, yᵢ = +1  or  αᵢ > 0, yᵢ = −1}
    I_low = {i : αᵢ < Cᵢ, yᵢ = −1  or  αᵢ > 0, yᵢ = +1}

and a pair step (i ∈ I_up, j ∈ I_low) moves αᵢ += yᵢt, αⱼ −= yⱼt with
t = min((Fᵢ − Fⱼ)/η, box), η = K_ii + K_jj − 2K_ij (floored at 1e-12), after
which F_k −= t (K_ik − K_jk) for every k.  The second-order working-set rule
(Fan, Chen & Lin 2005, "WSS 2", eq. 13) picks i = argmax_{I_up} F and
j = argmax_{j∈I_low, Fⱼ<Fᵢ} (Fᵢ − Fⱼ)²/η_ij.

Solvers (``method``)
--------------------
``"libsvm"``
    scikit-learn's LIBSVM (CPU).  Batched problems run in parallel threads
    (LIBSVM releases the GIL).  The host solvers run with one BLAS thread
    (:mod:`gpuksvm.solvers._blas`: spinning BLAS workers otherwise steal the
    cores from LIBSVM and from the parallel problems).
``"smo"``
    Our own two-variable SMO on the host: WSS 2, a kernel-row LRU cache within
    ``cache_bytes``, optional shrinking (LIBSVM's rule, with the gradient
    reconstructed for the shrunk rows before the final check).
``"working_set"``
    The GPU-style batched working-set solver (ThunderSVM, SPEC §6): a working
    set of ``ws ≤ 1024`` rows per problem (sized from the memory budget),
    half of it replaced per round (FIFO), its ``q = ws/2`` new kernel rows
    computed by one :func:`gpuksvm.kernels.kernel_block` call per problem, the
    ws-variable subproblem solved by WSS-2 SMO with local tolerance
    ``max(tol, 0.1·initial local gap)``, then ``F ← F − K_wsᵀ(y∘Δα)`` (one
    batched GEMM for all problems).  :func:`_working_set_loop` is the outer
    loop shared by both devices; only the subproblem solver differs: one CUDA
    thread block per problem (``kernels_cuda/smo.cu``, one launch for all
    problems) on a GPU, :func:`solve_subproblems_host` (its NumPy twin and
    test oracle) on the CPU.
``"auto"``
    ``"working_set"`` on a GPU; ``"libsvm"`` on the CPU (it is the faster CPU
    engine; the result's ``solver`` field says which ran).

The decision function of a solved problem is
``f(x) = Σ_j dual_coef_j κ(x_{support_j}, x) + intercept``; ``f > 0`` → class +1.
"""
from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from .. import _cuda
from .. import backend as bk
from ..kernels import Kernel, kernel_block, kernel_diag
from ._blas import host_busy, one_blas_thread

__all__ = ["SMOResult", "solve", "solve_batched", "solve_smo_host", "solve_working_set",
           "solve_subproblems_host", "dual_objective", "METHODS"]

METHODS = ("auto", "libsvm", "smo", "working_set")
_ETA_FLOOR = 1e-12
_MAX_WS = 1024
_TAU = 1e-12


@dataclass
class SMOResult:
    """Solution of one binary C-SVC dual.

    Attributes
    ----------
    support : ndarray of int64
        Global row indices (into the ``X`` passed to the solver) of the
        support vectors (αᵢ > 0), ascending.
    dual_coef : array
        ``yᵢ αᵢ`` for those rows (on the device the problem was solved on).
    intercept : float
        ``b`` of ``f(x) = Σ dual_coef_j κ(x_j, x) + b``.
    objective : float
        Dual objective ``½ αᵀQα − eᵀα`` (LIBSVM's sign: negative).
    n_iter : int
        Two-variable updates (libsvm, smo, and summed inner steps of the
        working-set solver).
    converged : bool
        The gap reached ``tol`` before ``max_iter``.
    solver : str
        Which engine ran: ``"libsvm"``, ``"smo"``, ``"working_set-cpu"`` or
        ``"working_set-cuda"``.
    n_rounds : int
        Outer rounds of the working-set solver (0 for the other solvers).
    """

    support: np.ndarray
    dual_coef: Any
    intercept: float
    objective: float
    n_iter: int
    converged: bool
    solver: str = "libsvm"
    n_rounds: int = 0


# =========================================================================== helpers
def _check_inputs(X: Any, y: Any, kernel: Kernel) -> tuple[Any, Any]:
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a gpuksvm.kernels.Kernel, got {type(kernel).__name__}")
    if not (bk.is_sparse(X) or hasattr(X, "shape")):
        X = np.asarray(X, dtype=np.float64)
    if len(X.shape) != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if isinstance(y, (list, tuple)) and len(y) and np.ndim(y[0]) == 1:
        return X, list(y)  # per-problem labels, checked with the subsets
    yh = np.asarray(bk.to_host(y), dtype=np.float64).ravel()
    if yh.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {yh.shape[0]}")
    if yh.size and not np.all((yh == 1.0) | (yh == -1.0)):
        raise ValueError("y must hold only -1 and +1")
    return X, yh


def _per_problem(value: Any, n_problems: int, name: str) -> list[float]:
    if np.ndim(value) == 0:
        vals = [float(value)] * n_problems
    else:
        vals = [float(v) for v in value]
        if len(vals) != n_problems:
            raise ValueError(f"{name} has {len(vals)} entries for {n_problems} problems")
    for v in vals:
        if not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be positive and finite, got {v!r}")
    return vals


def _check_subsets(subsets: Sequence[Any], n: int, y: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Validated index arrays and the labels of each problem.

    ``y`` is either the (n,) labels of X's rows, shared by all problems, or a
    sequence of per-problem label arrays aligned with ``subsets`` (one-vs-one
    pairs give the same row different signs in different problems).
    """
    per_problem = isinstance(y, (list, tuple))
    if per_problem and len(y) != len(subsets):
        raise ValueError(f"y holds {len(y)} label arrays for {len(subsets)} subsets")
    out, labels = [], []
    for p, S in enumerate(subsets):
        S = np.asarray(bk.to_host(S)).ravel()
        if S.dtype.kind not in "iu":
            raise ValueError(f"subset {p} must hold integer row indices, got dtype {S.dtype}")
        S = S.astype(np.int64)
        if S.size == 0:
            raise ValueError(f"subset {p} is empty")
        if S.min() < 0 or S.max() >= n:
            raise ValueError(f"subset {p} has row indices outside [0, {n})")
        if np.unique(S).size != S.size:
            raise ValueError(f"subset {p} repeats row indices")
        if per_problem:
            ys = np.asarray(bk.to_host(y[p]), dtype=np.float64).ravel()
            if ys.shape != S.shape:
                raise ValueError(f"labels of problem {p} have {ys.size} entries for {S.size} rows")
            if not np.all((ys == 1.0) | (ys == -1.0)):
                raise ValueError("y must hold only -1 and +1")
        else:
            ys = y[S]
        if not (np.any(ys > 0) and np.any(ys < 0)):
            raise ValueError(f"subset {p} holds rows of only one class; both -1 and +1 are needed")
        out.append(S)
        labels.append(ys)
    return out, labels


def _max_iter(max_iter: Any) -> int | None:
    if max_iter is None or (not isinstance(max_iter, bool) and isinstance(max_iter, (int, np.integer))
                            and max_iter < 0):
        return None
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter == 0:
        raise ValueError(f"max_iter must be a positive integer, -1 or None, got {max_iter!r}")
    return int(max_iter)


def _resolve_method(method: str, dev: bk.Device) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "auto":
        return "working_set" if dev.is_gpu else "libsvm"
    return method


def _host_rows(X: Any, rows: np.ndarray) -> Any:
    """Rows of X as a host array / CSR matrix."""
    if bk.is_gpu_array(X):
        X = bk.to_host(X)
    if sp.issparse(X):
        return sp.csr_matrix(X)[rows]
    return np.asarray(X)[rows]


def _intercept_from_F(F: np.ndarray, alpha: np.ndarray, y: np.ndarray, Cv: np.ndarray) -> float:
    """b = −ρ with LIBSVM's ρ: mean of −Fᵢ over free αᵢ, else the middle of the bounds."""
    up_b = alpha >= Cv * (1 - 1e-12)
    lo_b = alpha <= 0
    free = ~(up_b | lo_b)
    if np.any(free):
        return float(np.mean(F[free]))
    # −Fᵢ = yᵢ∇ᵢ; LIBSVM: ub = min over (α=C, y=−1) ∪ (α=0, y=+1), lb = max over the rest
    yg = -F
    ub_set = (up_b & (y < 0)) | (lo_b & (y > 0))
    lb_set = (up_b & (y > 0)) | (lo_b & (y < 0))
    ub = np.min(yg[ub_set]) if np.any(ub_set) else np.inf
    lb = np.max(yg[lb_set]) if np.any(lb_set) else -np.inf
    return float(-(ub + lb) / 2.0)


def _objective_from_F(F: np.ndarray, alpha: np.ndarray, y: np.ndarray) -> float:
    """½αᵀQα − eᵀα = ½ Σ αᵢ(∇ᵢ − 1) with ∇ᵢ = −yᵢFᵢ."""
    return float(0.5 * np.dot(alpha, -y * F - 1.0))


def dual_objective(X: Any, support: np.ndarray, dual_coef: Any, kernel: Kernel) -> float:
    """½ cᵀK_SSc − Σ|c| for dual coefficients c = y∘α on the support rows."""
    if sp.issparse(dual_coef):
        dual_coef = dual_coef.toarray()
    c = np.asarray(bk.to_host(dual_coef), dtype=np.float64).ravel()
    if c.size == 0:
        return 0.0
    Xs = _host_rows(X, np.asarray(support))
    if not sp.issparse(Xs):
        Xs = np.asarray(Xs, dtype=np.float64)
    K = kernel_block(Xs, Xs, kernel, dtype=np.float64)
    return float(0.5 * c @ K @ c - np.abs(c).sum())


def _make_result(S: np.ndarray, alpha: np.ndarray, y: np.ndarray, b: float, obj: float, n_iter: int,
                 converged: bool, solver: str, xp=np, n_rounds: int = 0, dtype=np.float64) -> SMOResult:
    sv = np.flatnonzero(alpha > 0)
    coef = (y[sv] * alpha[sv]).astype(dtype)
    return SMOResult(support=S[sv].astype(np.int64), dual_coef=xp.asarray(coef), intercept=float(b),
                     objective=float(obj), n_iter=int(n_iter), converged=bool(converged),
                     solver=solver, n_rounds=int(n_rounds))


# =========================================================================== LIBSVM
def _solve_libsvm(X: Any, ys: np.ndarray, S: np.ndarray, kernel: Kernel, C: float, tol: float,
                  max_iter: int | None, w: np.ndarray | None, cache_bytes: int | None) -> SMOResult:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import SVC

    if kernel.degree != int(kernel.degree):
        raise ValueError("LIBSVM needs an integer polynomial degree; use method='smo'")
    Xs = _host_rows(X, S)
    if not sp.issparse(Xs):
        Xs = np.ascontiguousarray(Xs, dtype=np.float64)
    elif Xs.indices.dtype != np.int32 or Xs.indptr.dtype != np.int32:
        Xs = sp.csr_matrix((Xs.data, Xs.indices.astype(np.int32), Xs.indptr.astype(np.int32)),
                           shape=Xs.shape)  # LIBSVM takes 32-bit indices only
    cache_mb = 200.0 if cache_bytes is None else max(float(cache_bytes) / 2**20, 1.0)
    svc = SVC(C=C, kernel=kernel.name, gamma=kernel.gamma, degree=int(kernel.degree), coef0=kernel.coef0,
              tol=tol, max_iter=-1 if max_iter is None else max_iter, cache_size=cache_mb,
              shrinking=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        svc.fit(Xs, ys, sample_weight=None if w is None else w[S])
    converged = not any(issubclass(c.category, ConvergenceWarning) for c in caught)
    for c in caught:  # hand the warnings on (recorded only to learn the convergence status)
        warnings.warn_explicit(c.message, c.category, c.filename, c.lineno)
    sv_local = np.asarray(svc.support_, dtype=np.int64)
    # scikit-learn's public binary dual_coef_/intercept_ are oriented so f > 0 → +1
    coef = svc.dual_coef_
    coef = np.asarray(coef.toarray() if sp.issparse(coef) else coef, dtype=np.float64).ravel()
    order = np.argsort(sv_local, kind="stable")
    sv_local, coef = sv_local[order], coef[order]
    obj = dual_objective(Xs, sv_local, coef, kernel)
    n_iter = int(np.asarray(svc.n_iter_).ravel()[0])
    return SMOResult(support=S[sv_local], dual_coef=coef, intercept=float(svc.intercept_[0]),
                     objective=obj, n_iter=n_iter, converged=converged, solver="libsvm")


# =========================================================================== own SMO (host)
class _RowCache:
    """LRU cache of kernel rows K(x_i, X_active) within a byte budget."""

    def __init__(self, Xs: Any, kernel: Kernel, budget: int) -> None:
        self.Xs = Xs
        self.kernel = kernel
        self.budget = int(budget)
        self.rows: OrderedDict[int, np.ndarray] = OrderedDict()
        self.set_active(np.arange(Xs.shape[0]))

    def set_active(self, active: np.ndarray, keep: np.ndarray | None = None) -> None:
        """Restrict to ``active`` rows; ``keep`` (mask over the old active set) subsets cached rows."""
        self.active = active
        self.Xa = self.Xs[active]
        if keep is None:
            self.rows.clear()
        else:
            for k in list(self.rows):
                self.rows[k] = self.rows[k][keep]
        self.max_rows = max(2, self.budget // max(active.size * 8, 1))

    def row(self, i: int) -> np.ndarray:
        r = self.rows.get(i)
        if r is not None:
            self.rows.move_to_end(i)
            return r
        r = kernel_block(self.Xs[i:i + 1], self.Xa, self.kernel, dtype=np.float64)[0]
        self.rows[i] = r
        while len(self.rows) > self.max_rows:
            self.rows.popitem(last=False)
        return r


def solve_smo_host(X: Any, y: np.ndarray, S: np.ndarray, kernel: Kernel, C: float, *, tol: float = 1e-3,
                   max_iter: int | None = None, sample_weight: np.ndarray | None = None,
                   cache_bytes: int | None = None, shrinking: bool = True) -> SMOResult:
    """Two-variable SMO with WSS 2 (Fan, Chen & Lin 2005), row cache and shrinking, on the host.

    ``y`` are the labels of the rows ``S`` of ``X``.  Shrinking follows
    LIBSVM's rule (Chang & Lin 2011, §5.1): every min(n, 1000) steps a bound
    variable that cannot enter a violating pair (up-only with F < M, or
    low-only with F > m) leaves the active set; F of the shrunk rows is
    reconstructed, F_l = y_l − Σ_k y_kα_k K_lk, when the gap first falls
    below 10·tol and before the final check.
    """
    Xs = _host_rows(X, S)
    if not sp.issparse(Xs):
        Xs = np.ascontiguousarray(Xs, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    n = ys.size
    Cv = np.full(n, float(C)) if sample_weight is None else float(C) * sample_weight[S]
    alpha = np.zeros(n)
    F = ys.copy()
    diag = np.asarray(kernel_diag(Xs, kernel, dtype=np.float64), dtype=np.float64)
    cache = _RowCache(Xs, kernel, 200 * 2**20 if cache_bytes is None else int(cache_bytes))
    active = np.arange(n)
    period = min(n, 1000)
    counter = period
    unshrunk_once = False
    it = 0
    converged = False

    def reconstruct() -> None:
        nonlocal active
        inactive = np.setdiff1d(np.arange(n), active, assume_unique=True)
        if inactive.size:
            sv = np.flatnonzero(alpha > 0)
            F[inactive] = ys[inactive]
            if sv.size:
                Kb = kernel_block(Xs[inactive], Xs[sv], kernel, dtype=np.float64)
                F[inactive] -= Kb @ (ys[sv] * alpha[sv])
            active = np.arange(n)
            cache.set_active(active)

    while max_iter is None or it < max_iter:
        ya, aa, Ca, Fa = ys[active], alpha[active], Cv[active], F[active]
        up = ((ya > 0) & (aa < Ca)) | ((ya < 0) & (aa > 0))
        low = ((ya < 0) & (aa < Ca)) | ((ya > 0) & (aa > 0))
        Fu = np.where(up, Fa, -np.inf)
        Fl = np.where(low, Fa, np.inf)
        il = int(np.argmax(Fu))
        m, M = Fu[il], float(Fl.min())
        gap = m - M
        if shrinking:
            if not unshrunk_once and gap <= 10 * tol:
                unshrunk_once = True
                if active.size < n:
                    reconstruct()
                    continue
            counter -= 1
            if counter <= 0:
                counter = period
                keep = ~((up & ~low & (Fa < M)) | (low & ~up & (Fa > m)))
                if not keep.all() and keep.sum() >= 2:
                    active = active[keep]
                    cache.set_active(active, keep)
                    continue
        if not gap >= tol:  # also stops when I_up or I_low is empty
            if active.size < n:
                reconstruct()
                continue
            converged = True
            break
        i = int(active[il])
        Ki = cache.row(i)
        b = m - Fa
        eta = np.maximum(diag[i] + diag[active] - 2.0 * Ki, _TAU)  # η floored (FCL05 §4)
        gain = np.where(low & (Fa < m), b * b / eta, -np.inf)       # WSS 2: −b²/a minimal
        jl = int(np.argmax(gain))
        j = int(active[jl])
        Kj = cache.row(j)
        ub_i = Cv[i] - alpha[i] if ys[i] > 0 else alpha[i]
        ub_j = alpha[j] if ys[j] > 0 else Cv[j] - alpha[j]
        t = min(b[jl] / eta[jl], ub_i, ub_j)
        alpha[i] = (Cv[i] if ys[i] > 0 else 0.0) if t == ub_i else alpha[i] + ys[i] * t
        alpha[j] = (0.0 if ys[j] > 0 else Cv[j]) if t == ub_j else alpha[j] - ys[j] * t
        F[active] = Fa - t * (Ki - Kj)
        it += 1
    if active.size < n:
        reconstruct()
    if not converged:
        warnings.warn(f"SMO stopped after max_iter={max_iter} steps before reaching tol={tol}",
                      _convergence_warning(), stacklevel=3)
    b = _intercept_from_F(F, alpha, ys, Cv)
    return _make_result(S, alpha, ys, b, _objective_from_F(F, alpha, ys), it, converged, "smo")


def _convergence_warning():
    from sklearn.exceptions import ConvergenceWarning

    return ConvergenceWarning


# =========================================================================== working set
_STALL_ROUNDS = 30


def solve_subproblems_host(Kww: np.ndarray, yw: np.ndarray, Cw: np.ndarray, aw: np.ndarray,
                           Fw: np.ndarray, active: np.ndarray, tol: float,
                           max_inner: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy twin of ``kernels_cuda/smo.cu:smo_subproblem`` (and its test oracle).

    For every active problem p, SMO with WSS 2 on the ws variables of its
    working set, everything else fixed: local stopping tolerance
    ``max(tol, 0.1 · initial local gap)``, η floored at 1e-12, at most
    ``max_inner`` steps.  Rows with ``yw = 0`` are padding and never move.

    Parameters
    ----------
    Kww : (P, ws, ws)  kernel among the working-set rows
    yw, Cw, aw, Fw : (P, ws)  labels, upper bounds, α and F of those rows
    active : (P,) bool

    Returns
    -------
    alpha : (P, ws) new α;  n_inner : (P,) int steps;  gap0 : (P,) initial local gap
    """
    P, ws = yw.shape
    alpha = np.array(aw, dtype=Kww.dtype, copy=True)
    n_inner = np.zeros(P, dtype=np.int32)
    gap0 = np.zeros(P, dtype=Kww.dtype)
    for p in range(P):
        if not active[p]:
            continue
        K, y, C, a = Kww[p], yw[p], Cw[p], alpha[p]
        F = np.array(Fw[p], copy=True)
        d = np.diagonal(K)
        it = 0
        eps_local = None
        while True:
            up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
            low = ((y < 0) & (a < C)) | ((y > 0) & (a > 0))
            Fu = np.where(up, F, -np.inf)
            i = int(np.argmax(Fu))
            m = Fu[i]
            M = np.where(low, F, np.inf).min()
            gap = m - M
            if eps_local is None:
                gap0[p] = gap if np.isfinite(gap) else 0
                eps_local = max(tol, 0.1 * gap)
            if not gap >= eps_local or it >= max_inner:
                break
            b = m - F
            eta = np.maximum(K[i, i] + d - 2 * K[i], _ETA_FLOOR)
            gain = np.where(low & (F < m), b * b / eta, -np.inf)
            j = int(np.argmax(gain))
            ub_i = C[i] - a[i] if y[i] > 0 else a[i]
            ub_j = a[j] if y[j] > 0 else C[j] - a[j]
            t = min(b[j] / eta[j], ub_i, ub_j)
            a[i] = (C[i] if y[i] > 0 else 0) if t == ub_i else a[i] + y[i] * t
            a[j] = (0 if y[j] > 0 else C[j]) if t == ub_j else a[j] - y[j] * t
            F -= t * (K[i] - K[j])
            it += 1
        n_inner[p] = it
    return alpha, n_inner, gap0


def _solve_subproblems_cuda(Kww, yw, Cw, aw, Fw, active, tol: float, max_inner: int):
    """One launch: one thread block per problem (kernels_cuda/smo.cu)."""
    xp = bk.namespace_of(Kww)
    P, ws = yw.shape
    dt = Kww.dtype
    # one thread per working-set row, a power-of-two block (the reductions halve it), >= one warp
    threads = max(32, 1 << (int(ws) - 1).bit_length())
    if threads > 1024:
        raise ValueError(f"working set of {ws} rows: the subproblem kernel takes at most 1024")
    alpha = xp.array(aw, dtype=dt, order="C", copy=True)
    n_inner = xp.zeros(P, dtype=xp.int32)
    gap0 = xp.zeros(P, dtype=dt)
    shared = threads * (dt.itemsize + 4)   # (value, index) per thread
    dev = [xp.ascontiguousarray(a, dtype=dt) for a in (Kww, yw, Cw, Fw)]
    _cuda.launch("smo", f"smo_subproblem_{'f32' if dt == np.float32 else 'f64'}", (P,), (threads,),
                 (dev[0], dev[1], dev[2], alpha, dev[3], xp.asarray(active, dtype=xp.int32),
                  ws, tol, max_inner, n_inner, gap0), shared_mem=shared)
    return alpha, n_inner, gap0


def _default_ws(n_max: int, P: int, itemsize: int, dev: bk.Device) -> int:
    """Largest power of two ≤ min(1024, n_max) whose (P, ws, n_max) row buffer fits the budget."""
    ws = 2
    while ws * 2 <= min(_MAX_WS, max(n_max, 2)):
        ws *= 2
    budget = bk.memory_budget(dev)
    while ws > 2 and 2 * P * ws * n_max * itemsize > budget:
        ws //= 2
    return ws


def _candidates(F, up, low, widx_keep, need: int, xp):
    """Device-side sort: the ``need`` most violating I_up and I_low rows of every problem.

    Rows already in the kept half of the working set are excluded.  Returns
    host arrays (P, need): up candidates by decreasing F, low candidates by
    increasing F, and whether each entry is a real candidate.
    """
    P = F.shape[0]
    inws = xp.zeros(F.shape, dtype=bool)
    if widx_keep.shape[1]:
        inws[xp.arange(P)[:, None], xp.asarray(widx_keep)] = True
    su = xp.where(up & ~inws, -F, xp.inf)
    sl = xp.where(low & ~inws, F, xp.inf)
    ou = xp.argsort(su, axis=1)[:, :need]
    ol = xp.argsort(sl, axis=1)[:, :need]
    vu = xp.isfinite(xp.take_along_axis(su, ou, axis=1))
    vl = xp.isfinite(xp.take_along_axis(sl, ol, axis=1))
    return (np.asarray(bk.to_host(ou)), np.asarray(bk.to_host(vu)),
            np.asarray(bk.to_host(ol)), np.asarray(bk.to_host(vl)))


def _merge_new(cu: np.ndarray, cl: np.ndarray, n_p: int, keep: np.ndarray, need: int) -> np.ndarray:
    """ThunderSVM's rule for one problem: take I_up and I_low candidates alternately.

    ``cu``/``cl`` are sorted candidate rows (most violating first), ``keep``
    the rows staying in the working set.  Returns ``need`` new distinct rows,
    filled with other rows when there are too few violators, and −1 for
    slots that stay empty (a problem with fewer rows than the working set).
    """
    chosen: list[int] = []
    seen = set(int(k) for k in keep)
    a = b = 0
    while len(chosen) < need and (a < cu.size or b < cl.size):
        while a < cu.size and int(cu[a]) in seen:
            a += 1
        if a < cu.size:
            seen.add(int(cu[a]))
            chosen.append(int(cu[a]))
            a += 1
        if len(chosen) >= need:
            break
        while b < cl.size and int(cl[b]) in seen:
            b += 1
        if b < cl.size:
            seen.add(int(cl[b]))
            chosen.append(int(cl[b]))
            b += 1
    if len(chosen) < need:
        used = np.zeros(n_p, dtype=bool)
        used[list(seen)] = True
        chosen.extend(np.flatnonzero(~used)[: need - len(chosen)].tolist())
    out = np.full(need, -1, dtype=np.int64)
    out[: len(chosen)] = chosen
    return out


def solve_working_set(X: Any, ys: list[np.ndarray], subs: list[np.ndarray], kernel: Kernel,
                      Cs: list[float], *, tol: float = 1e-3, max_iter: int | None = None,
                      device: Any = "cpu", dtype: Any = None, sample_weight: np.ndarray | None = None,
                      working_set_size: int | None = None, max_inner: int | None = None,
                      subproblem: str = "auto") -> list[SMOResult]:
    """Batched working-set SMO (ThunderSVM style); the outer loop shared by CPU and GPU.

    Per round, for all unfinished problems at once: (1) the most violating
    rows of I_up and I_low replace the older half of each working set (all of
    it in the first round); (2) their kernel rows against the problem's rows
    (one :func:`kernel_block` per problem); (3) the ws-variable subproblems,
    one launch for all problems (``subproblem="cuda"``) or the NumPy twin
    (``"host"``); (4) ``F ← F − K_wsᵀ(y∘Δα)``, one batched GEMM.  A problem
    stops when its gap m − M < tol, when its dual objective has not decreased
    (by more than 1e-12 relative, in float64) for 30 rounds (``converged=False``),
    or after ``max_iter`` rounds.  (The gap itself is no progress measure: it
    typically grows for many rounds after α = 0 while the objective falls.)
    """
    dev = bk.resolve_device(device)
    xp = bk.get_namespace(dev)
    dt = bk.resolve_dtype(dtype, dev)
    if subproblem == "auto":
        subproblem = "cuda" if dev.is_gpu else "host"
    if subproblem == "cuda" and not dev.is_gpu:
        raise ValueError("subproblem='cuda' needs a GPU device")
    if dev.is_gpu and bk.is_sparse(X):
        X = bk.to_host(X).toarray() if not bk.is_gpu_array(X) else X.toarray()
    Xd = bk.to_device(X, dev, dt)
    P = len(subs)
    sizes = np.array([S.size for S in subs])
    n_max = int(sizes.max())
    ws = int(working_set_size) if working_set_size else _default_ws(n_max, P, dt.itemsize, dev)
    if ws < 2 or ws > _MAX_WS or ws % 2:
        raise ValueError(f"working_set_size must be an even number in [2, {_MAX_WS}], got {ws}")
    q = ws // 2
    max_inner = int(max_inner) if max_inner else 10 * ws
    Xp = [Xd[bk.to_device(S, dev)] if dev.is_gpu else Xd[S] for S in subs]
    # padded state (P, n_max + 1); padding rows have y = 0, C = 0 and never move; the last
    # column is a dummy row that empty working-set slots point at (so scatters never collide)
    N1 = n_max + 1
    y_h = np.zeros((P, N1))
    C_h = np.zeros((P, N1))
    for p, S in enumerate(subs):
        y_h[p, : S.size] = ys[p]
        C_h[p, : S.size] = Cs[p] * (1.0 if sample_weight is None else sample_weight[S])
    yv = xp.asarray(y_h, dtype=dt)
    Cvv = xp.asarray(C_h, dtype=dt)
    alpha = xp.zeros((P, N1), dtype=dt)
    F = yv.copy()
    Kws = xp.zeros((P, ws, N1), dtype=dt)
    widx = np.full((P, ws), n_max, dtype=np.int64)  # working-set rows (host); n_max: empty slot
    wvalid = np.zeros((P, ws), dtype=bool)
    done = np.zeros(P, dtype=bool)
    converged = np.zeros(P, dtype=bool)
    best = np.full(P, np.inf)          # lowest dual objective so far
    since_best = np.zeros(P, dtype=np.int64)
    n_inner_tot = np.zeros(P, dtype=np.int64)
    rounds = np.zeros(P, dtype=np.int64)
    ar = xp.arange(P)[:, None]
    r = 0
    while True:
        # global optimality check (FCL05 eq. 6), one reduction per problem
        up = ((yv > 0) & (alpha < Cvv)) | ((yv < 0) & (alpha > 0))
        low = ((yv < 0) & (alpha < Cvv)) | ((yv > 0) & (alpha > 0))
        gap = bk.to_host(xp.where(up, F, -xp.inf).max(axis=1) - xp.where(low, F, xp.inf).min(axis=1))
        gap = np.asarray(gap, dtype=np.float64)
        # ½αᵀQα − eᵀα = ½ Σ αᵢ(−yᵢFᵢ − 1), in float64 whatever the working dtype
        a64 = alpha.astype(xp.float64)
        obj = np.asarray(bk.to_host(0.5 * (a64 * (-yv.astype(xp.float64) * F - 1.0)).sum(axis=1)),
                         dtype=np.float64)
        for p in np.flatnonzero(~done):
            if not gap[p] >= tol:
                done[p] = converged[p] = True
            elif max_iter is not None and rounds[p] >= max_iter:
                done[p] = True
            elif not np.isfinite(best[p]) or obj[p] < best[p] - 1e-12 * abs(best[p]):
                best[p], since_best[p] = obj[p], 0
            else:
                since_best[p] += 1
                if since_best[p] >= _STALL_ROUNDS:
                    done[p] = True
        if done.all():
            break
        # (1) selection: which half is replaced (FIFO), the new rows per problem
        slots = np.arange(ws) if r == 0 else np.arange(q) + q * ((r - 1) % 2)
        keep_slots = np.setdiff1d(np.arange(ws), slots)
        ou, vu, ol, vl = _candidates(F, up, low, widx[:, keep_slots], slots.size, xp)
        for p in np.flatnonzero(~done):
            keep = widx[p, keep_slots][wvalid[p, keep_slots]]
            new = _merge_new(ou[p][vu[p]], ol[p][vl[p]], int(sizes[p]), keep, slots.size)
            widx[p, slots] = np.where(new >= 0, new, n_max)
            wvalid[p, slots] = new >= 0
            # (2) their kernel rows: q × n_p, one GEMM + epilogue
            rows = new[new >= 0]
            if rows.size:
                Kb = kernel_block(Xp[p][bk.to_device(rows, dev) if dev.is_gpu else rows], Xp[p], kernel,
                                  dtype=dt)
                s0 = int(slots[0])
                Kws[p, s0:s0 + rows.size, : int(sizes[p])] = Kb
        # (3) the subproblems of all problems in one call
        act = ~done
        widx_d = xp.asarray(widx)
        yw = yv[ar, widx_d]
        Cw = Cvv[ar, widx_d]
        aw = alpha[ar, widx_d]
        Fw = F[ar, widx_d]
        Kww = xp.take_along_axis(Kws, xp.broadcast_to(widx_d[:, None, :], (P, ws, ws)), axis=2)
        if subproblem == "cuda":
            anew, n_in, _g0 = _solve_subproblems_cuda(Kww, yw, Cw, aw, Fw, act, tol, max_inner)
        else:
            anew, n_in, _g0 = solve_subproblems_host(Kww, yw, Cw, aw, Fw, act, tol, max_inner)
        # (4) F ← F − K_wsᵀ (y ∘ Δα): one batched GEMM for every problem
        delta = anew - aw
        alpha[ar, widx_d] = anew
        F -= xp.matmul((yw * delta)[:, None, :], Kws)[:, 0, :]
        n_inner_tot += np.asarray(bk.to_host(n_in), dtype=np.int64) * act
        rounds += act
        r += 1
    alpha_h = np.asarray(bk.to_host(alpha), dtype=np.float64)
    F_h = np.asarray(bk.to_host(F), dtype=np.float64)
    out = []
    name = "working_set-cuda" if subproblem == "cuda" else "working_set-cpu"
    for p, S in enumerate(subs):
        n_p = S.size
        a, f, yy, c = alpha_h[p, :n_p], F_h[p, :n_p], y_h[p, :n_p], C_h[p, :n_p]
        if not converged[p]:
            warnings.warn(f"working-set SMO on problem {p} stopped at gap {gap[p]:.3g} > tol={tol} "
                          f"after {rounds[p]} rounds", _convergence_warning(), stacklevel=3)
        out.append(_make_result(S, a, yy, _intercept_from_F(f, a, yy, c), _objective_from_F(f, a, yy),
                                int(n_inner_tot[p]), bool(converged[p]), name, xp=xp,
                                n_rounds=int(rounds[p]), dtype=dt))
    return out


# =========================================================================== public API
def solve(X: Any, y: Any, kernel: Kernel, C: float, *, tol: float = 1e-3, max_iter: int | None = None,
          sample_weight: Any = None, device: Any = "auto", dtype: Any = None,
          cache_bytes: int | None = None, method: str = "auto", shrinking: bool = True,
          working_set_size: int | None = None) -> SMOResult:
    """Solve one binary C-SVC dual on all rows of ``X``.

    Parameters
    ----------
    X : (n, d) array (NumPy/CuPy) or SciPy sparse matrix (CPU)
    y : (n,) array of -1/+1
    kernel : Kernel
    C : float > 0
    tol : float
        Stop when the gap m(α) − M(α) < tol (LIBSVM's ``eps``).
    max_iter : int, optional
        Cap on two-variable updates (working set: on outer rounds); None or
        -1: none.
    sample_weight : (n,) array, optional
        Per-row weights: Cᵢ = C·wᵢ.
    device, dtype : see :mod:`gpuksvm.backend`
    cache_bytes : int, optional
        Kernel-row cache of ``method="smo"`` / LIBSVM's cache (default 200 MiB).
    method : {"auto", "libsvm", "smo", "working_set"}
    shrinking : bool
        Shrinking heuristic of ``method="smo"``.
    working_set_size : int, optional
        Working-set size of ``method="working_set"`` (default: ≤ 1024 from memory).

    Returns
    -------
    SMOResult

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.kernels import Kernel
    >>> from gpuksvm.solvers.smo import solve
    >>> X = np.array([[0.0], [1.0], [3.0], [4.0]]); y = np.array([-1, -1, 1, 1])
    >>> r = solve(X, y, Kernel("linear"), C=10.0, device="cpu")
    >>> r.support.tolist(), round(r.intercept, 3)
    ([1, 2], -2.0)
    """
    X, yh = _check_inputs(X, y, kernel)
    if isinstance(yh, list):
        raise ValueError("solve takes one (n,) label array")
    n = X.shape[0]
    return solve_batched(X, yh, [np.arange(n, dtype=np.int64)], kernel, C, tol=tol, max_iter=max_iter,
                         device=device, dtype=dtype, n_jobs=1, sample_weight=sample_weight,
                         method=method, shrinking=shrinking, cache_bytes=cache_bytes,
                         working_set_size=working_set_size)[0]


def solve_batched(X: Any, y: Any, subsets: Sequence[Any], kernel: Kernel, C: float | Sequence[float], *,
                  tol: float = 1e-3, max_iter: int | None = None, device: Any = "auto", dtype: Any = None,
                  n_jobs: int | None = None, sample_weight: Any = None, method: str = "auto",
                  shrinking: bool = True, cache_bytes: int | None = None,
                  working_set_size: int | None = None) -> list[SMOResult]:
    """Solve many independent binary C-SVC duals, one per subset of rows.

    Parameters
    ----------
    X : (n, d) array (NumPy/CuPy) or SciPy sparse matrix (CPU)
    y : (n,) array of -1/+1, or a list of per-problem label arrays
        The labels of every row of X, shared by all problems; or, aligned
        with ``subsets``, the labels of each problem's rows (one-vs-one pairs).
    subsets : list of integer index arrays into X
        Problem p is the C-SVC on rows ``subsets[p]`` (both classes needed).
    kernel : Kernel
    C : float or sequence of floats (one per problem)
    n_jobs : int, optional
        CPU (``libsvm``/``smo``): parallel worker threads over problems;
        None → all available cores.  The working-set solver batches instead.
    sample_weight : (n,) array, optional
        Per-row weights of X: Cᵢ = C_p·wᵢ.
    Other parameters as in :func:`solve`.

    Returns
    -------
    list of SMOResult, one per subset; ``support`` holds indices into X.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.kernels import Kernel
    >>> from gpuksvm.solvers.smo import solve_batched
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = np.sign(X[:, 0])
    >>> res = solve_batched(X, y, [np.arange(100), np.arange(100, 200)], Kernel("rbf", gamma=0.5),
    ...                     1.0, device="cpu")
    >>> len(res), all(r.converged for r in res)
    (2, True)
    """
    X, yh = _check_inputs(X, y, kernel)
    subs, ys = _check_subsets(subsets, X.shape[0], yh)
    Cs = _per_problem(C, len(subs), "C")
    if isinstance(tol, bool) or not (isinstance(tol, (int, float, np.floating)) and np.isfinite(tol)
                                     and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    mi = _max_iter(max_iter)
    w = None
    if sample_weight is not None:
        w = np.asarray(bk.to_host(sample_weight), dtype=np.float64).ravel()
        if w.shape[0] != X.shape[0] or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("sample_weight must be (n,) finite and non-negative")
    dev = bk.device_of(X) if bk.is_gpu_array(X) and device == "auto" else bk.resolve_device(device)
    meth = _resolve_method(method, dev)
    if not subs:
        return []
    if meth == "working_set":
        # the NumPy twin's GEMMs are large, but on a busy host BLAS threads only spin
        with one_blas_thread(not dev.is_gpu and host_busy()):
            return solve_working_set(X, ys, subs, kernel, Cs, tol=float(tol), max_iter=mi, device=dev,
                                     dtype=dtype, sample_weight=w, working_set_size=working_set_size)
    if meth == "smo":
        def one(p: int) -> SMOResult:
            return solve_smo_host(X, ys[p], subs[p], kernel, Cs[p], tol=float(tol), max_iter=mi,
                                  sample_weight=w, cache_bytes=cache_bytes, shrinking=shrinking)
    else:
        def one(p: int) -> SMOResult:
            return _solve_libsvm(X, ys[p], subs[p], kernel, Cs[p], float(tol), mi, w, cache_bytes)

    jobs = _n_workers(n_jobs, len(subs))
    # LIBSVM is single-threaded C and our SMO's BLAS calls are single kernel rows:
    # one BLAS thread each, so that no spinning BLAS worker competes with the
    # solvers (or with the parallel problems) for the cores (gpuksvm.solvers._blas)
    with one_blas_thread():
        if jobs == 1:
            res = [one(p) for p in range(len(subs))]
        else:
            from joblib import Parallel, delayed

            # LIBSVM and NumPy release the GIL: threads avoid copying X to processes
            res = list(Parallel(n_jobs=jobs, prefer="threads")(delayed(one)(p)
                                                              for p in range(len(subs))))
    if dev.is_gpu:  # host engines ran: hand coefficients back on the asked device
        for r in res:
            r.dual_coef = bk.to_device(np.asarray(r.dual_coef), dev, bk.resolve_dtype(dtype, dev))
    return res


def _n_workers(n_jobs: int | None, n_problems: int) -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if n_jobs is None:
        n_jobs = cpus
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)):
        raise ValueError(f"n_jobs must be an integer or None, got {n_jobs!r}")
    n_jobs = int(n_jobs)
    if n_jobs < 0:
        n_jobs = max(cpus + 1 + n_jobs, 1)
    if n_jobs == 0:
        raise ValueError("n_jobs must not be 0")
    return max(1, min(n_jobs, n_problems))
