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
    (LIBSVM releases the GIL); the one-vs-one problems of a labelled set
    (:func:`solve_ovo`) are one LIBSVM call, scikit-learn SVC's own.  The
    host solvers run with one BLAS thread (:mod:`gpuksvm.solvers._blas`:
    spinning BLAS workers otherwise steal the cores from LIBSVM and from the
    parallel problems).
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

``kernel="precomputed"``
    Every solver also takes ``X`` = the (n, n) Gram matrix K(X, X) of the
    rows instead of their features (:data:`PRECOMPUTED`): kernel rows are then
    looked up in the Gram block K[S, S] of each problem instead of computed
    (LIBSVM: its own ``kernel="precomputed"``).

``C = inf`` is accepted (hard margin: no upper bound on α; on data that is
not separable the solver only stops at ``max_iter``).

The decision function of a solved problem is
``f(x) = Σ_j dual_coef_j κ(x_{support_j}, x) + intercept``; ``f > 0`` → class +1.
"""
from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC

from .. import _cuda
from .. import backend as bk
from ..kernels import Kernel, kernel_block, kernel_diag
from ..multiclass import problem_rows
from ._blas import host_busy, one_blas_thread

__all__ = ["SMOResult", "solve", "solve_batched", "solve_ovo", "solve_smo_host", "solve_working_set",
           "solve_subproblems_host", "dual_objective", "warn_unconverged", "svc_max_iter_message",
           "METHODS", "PRECOMPUTED"]

METHODS = ("auto", "libsvm", "smo", "working_set")
_ETA_FLOOR = 1e-12
_MAX_WS = 1024
_TAU = 1e-12
#: ``kernel=PRECOMPUTED``: ``X`` is the (n, n) Gram matrix K(X, X) of the rows, not their features
PRECOMPUTED = "precomputed"


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
    max_iter_reached : bool
        The solver stopped because it reached ``max_iter`` (the working-set
        solver may also stop unconverged when its objective stalls).
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
    max_iter_reached: bool = False


# =========================================================================== helpers
def _is_precomputed(kernel: Any) -> bool:
    return isinstance(kernel, str) and kernel == PRECOMPUTED


def _check_inputs(X: Any, y: Any, kernel: Kernel | str) -> tuple[Any, Any]:
    if not (isinstance(kernel, Kernel) or _is_precomputed(kernel)):
        raise TypeError(f"kernel must be a gpuksvm.kernels.Kernel or {PRECOMPUTED!r}, "
                        f"got {type(kernel).__name__}")
    if not (bk.is_sparse(X) or hasattr(X, "shape")):
        X = np.asarray(X, dtype=np.float64)
    if len(X.shape) != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if _is_precomputed(kernel):
        if bk.is_sparse(X):
            raise TypeError("a precomputed Gram matrix must be a dense array")
        if X.shape[0] != X.shape[1]:
            raise ValueError(f"a precomputed Gram matrix must be square, got shape {X.shape}")
    if y is None:
        return X, None
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
        if not v > 0:  # +inf allowed: hard margin
            raise ValueError(f"{name} must be positive (or inf), got {v!r}")
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


def _problem_data(X: Any, S: np.ndarray, kernel: Kernel | str) -> Any:
    """What the host solvers need of problem ``S``: its rows of X (float64 or CSR),
    or with a precomputed kernel its Gram block K[S, S] (float64)."""
    if _is_precomputed(kernel):
        G = np.asarray(bk.to_host(X))
        if not (S.size == G.shape[0] and np.array_equal(S, np.arange(S.size))):
            G = G[np.ix_(S, S)]
        return np.ascontiguousarray(G, dtype=np.float64)
    Xs = _host_rows(X, S)
    return Xs if sp.issparse(Xs) else np.ascontiguousarray(Xs, dtype=np.float64)


def _kernel_rows(Xs: Any, rows: Any, cols: Any, kernel: Kernel | str, cols_data: Any = None) -> np.ndarray:
    """K between the problem's ``rows`` and ``cols`` (index arrays or slices into ``Xs`` of
    :func:`_problem_data`): computed, or looked up in the Gram block.  ``cols_data`` may
    hold ``Xs[cols]`` already gathered."""
    if _is_precomputed(kernel):
        return np.asarray(Xs[rows][:, cols], dtype=np.float64)
    return kernel_block(Xs[rows], Xs[cols] if cols_data is None else cols_data, kernel, dtype=np.float64)


def _kernel_diagonal(Xs: Any, kernel: Kernel | str) -> np.ndarray:
    if _is_precomputed(kernel):
        return np.array(np.diagonal(Xs), dtype=np.float64)
    return np.asarray(kernel_diag(Xs, kernel, dtype=np.float64), dtype=np.float64)


def _box(C: float, w: np.ndarray | None, n: int) -> np.ndarray:
    """Upper bounds Cᵢ = C·wᵢ (0 where wᵢ = 0, also for C = inf)."""
    if w is None:
        return np.full(n, float(C))
    with np.errstate(invalid="ignore"):
        return np.where(w > 0, float(C) * w, 0.0)


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


def dual_objective(X: Any, support: np.ndarray, dual_coef: Any, kernel: Kernel | str) -> float:
    """½ cᵀK_SSc − Σ|c| for dual coefficients c = y∘α on the support rows
    (``kernel="precomputed"``: X is the Gram matrix of the rows)."""
    if sp.issparse(dual_coef):
        dual_coef = dual_coef.toarray()
    c = np.asarray(bk.to_host(dual_coef), dtype=np.float64).ravel()
    if c.size == 0:
        return 0.0
    Ks = _problem_data(X, np.asarray(support, dtype=np.int64), kernel)
    K = Ks if _is_precomputed(kernel) else _kernel_rows(Ks, slice(None), slice(None), kernel)
    return float(0.5 * c @ K @ c - np.abs(c).sum())


def _make_result(S: np.ndarray, alpha: np.ndarray, y: np.ndarray, b: float, obj: float, n_iter: int,
                 converged: bool, solver: str, xp=np, n_rounds: int = 0, dtype=np.float64,
                 max_iter_reached: bool = False) -> SMOResult:
    sv = np.flatnonzero(alpha > 0)
    coef = (y[sv] * alpha[sv]).astype(dtype)
    return SMOResult(support=S[sv].astype(np.int64), dual_coef=xp.asarray(coef), intercept=float(b),
                     objective=float(obj), n_iter=int(n_iter), converged=bool(converged),
                     solver=solver, n_rounds=int(n_rounds), max_iter_reached=bool(max_iter_reached))


# =========================================================================== LIBSVM
class _StatusSVC(SVC):
    """scikit-learn's SVC that leaves its ConvergenceWarning to the caller.

    Whether LIBSVM converged is its ``fit_status_`` (1: stopped at
    ``max_iter``, its only early stop).  SVC itself warns from
    ``_warn_from_fit_status``; silencing that warning with
    ``warnings.catch_warnings`` is not thread-safe (it swaps process-wide
    state: in the parallel batch a finished thread's capture replaced the
    caller's, and warnings raised after the batch, e.g. SVI's
    ExactFallbackWarning, went missing), so the hook is a no-op here and
    :func:`_libsvm_fit` warns itself when asked.
    """

    def _warn_from_fit_status(self) -> None:
        pass


def svc_max_iter_message(max_iter: int | None) -> str:
    """scikit-learn SVC's sentence for a solver stopped by ``max_iter`` (tests match it)."""
    return (f"Solver terminated early (max_iter={-1 if max_iter is None else int(max_iter)}).  "
            "Consider pre-processing your data with StandardScaler or MinMaxScaler.")


def warn_unconverged(converged: Sequence[bool], max_iter_reached: Sequence[bool], max_iter: int | None,
                     tol: float, owner: str) -> None:
    """One ``ConvergenceWarning`` when some binary problems' solvers did not converge.

    ``converged[p]`` / ``max_iter_reached[p]``: whether problem p's solver
    reached ``tol`` / was stopped by ``max_iter`` (:class:`SMOResult`).  When
    ``max_iter`` stopped one the message starts with scikit-learn SVC's own
    sentence (:func:`svc_max_iter_message`).
    """
    bad = [p for p, ok in enumerate(converged) if not ok]
    if not bad:
        return
    if any(max_iter_reached[p] for p in bad):
        head = svc_max_iter_message(max_iter)
    else:
        head = "Solver stopped making progress before reaching tol."
    warnings.warn(f"{head} ({owner}: {len(bad)} of {len(converged)} binary problem(s) stopped before "
                  f"the optimality gap reached tol={tol:g}; converged_ records which.)",
                  ConvergenceWarning, stacklevel=3)


def _libsvm_fit(Xs: Any, labels: np.ndarray, kernel: Kernel | str, C: float, tol: float,
                max_iter: int | None, w: np.ndarray | None, cache_bytes: int | None, warn: bool,
                class_weight: dict | None = None) -> tuple[Any, bool]:
    """scikit-learn's SVC (LIBSVM) fitted on host data; returns it and whether it converged
    (``fit_status_``).  ``warn``: a ConvergenceWarning with SVC's message when ``max_iter``
    stopped it (else the caller reports it)."""
    precomputed = _is_precomputed(kernel)
    if not precomputed and kernel.degree != int(kernel.degree):
        raise ValueError(f"LIBSVM needs an integer polynomial degree, got degree={kernel.degree!r}")
    if sp.issparse(Xs) and (Xs.indices.dtype != np.int32 or Xs.indptr.dtype != np.int32):
        Xs = sp.csr_matrix((Xs.data, Xs.indices.astype(np.int32), Xs.indptr.astype(np.int32)),
                           shape=Xs.shape)  # LIBSVM takes 32-bit indices only
    cache_mb = 200.0 if cache_bytes is None else max(float(cache_bytes) / 2**20, 1.0)
    params = ({"kernel": PRECOMPUTED} if precomputed else
              {"kernel": kernel.name, "gamma": kernel.gamma, "degree": int(kernel.degree),
               "coef0": kernel.coef0})
    svc = _StatusSVC(C=C, tol=tol, max_iter=-1 if max_iter is None else max_iter, cache_size=cache_mb,
                     shrinking=True, class_weight=class_weight, **params)
    svc.fit(Xs, labels, sample_weight=w)
    converged = int(svc.fit_status_) == 0
    if warn and not converged:
        warnings.warn(svc_max_iter_message(max_iter), ConvergenceWarning, stacklevel=4)
    return svc, converged


def _libsvm_result(Xs: Any, S: np.ndarray, sv_local: np.ndarray, coef: np.ndarray, intercept: float,
                   kernel: Kernel | str, n_iter: int, converged: bool) -> SMOResult:
    """An SMOResult from LIBSVM's coefficients of one binary problem on the rows S (Xs = its data)."""
    keep = coef != 0
    sv_local, coef = sv_local[keep], coef[keep]
    order = np.argsort(sv_local, kind="stable")
    sv_local, coef = sv_local[order], coef[order]
    # LIBSVM's only early stop is max_iter (fit_status_ 1)
    return SMOResult(support=S[sv_local], dual_coef=coef, intercept=float(intercept),
                     objective=dual_objective(Xs, sv_local, coef, kernel), n_iter=int(n_iter),
                     converged=converged, solver="libsvm", max_iter_reached=not converged)


def _solve_libsvm(X: Any, ys: np.ndarray, S: np.ndarray, kernel: Kernel | str, C: float, tol: float,
                  max_iter: int | None, w: np.ndarray | None, cache_bytes: int | None,
                  warn: bool = True) -> SMOResult:
    Xs = _problem_data(X, S, kernel)
    svc, converged = _libsvm_fit(Xs, ys, kernel, C, tol, max_iter, None if w is None else w[S],
                                 cache_bytes, warn)
    # scikit-learn's public binary dual_coef_/intercept_ are oriented so f > 0 → +1
    coef = svc.dual_coef_
    coef = np.asarray(coef.toarray() if sp.issparse(coef) else coef, dtype=np.float64).ravel()
    return _libsvm_result(Xs, S, np.asarray(svc.support_, dtype=np.int64), coef, svc.intercept_[0],
                          kernel, np.asarray(svc.n_iter_).ravel()[0], converged)


def _solve_ovo_libsvm(X: Any, yidx: np.ndarray, n_classes: int, kernel: Kernel | str, C: float,
                      tol: float, max_iter: int | None, sample_weight: np.ndarray | None,
                      class_weight: np.ndarray | None, cache_bytes: int | None,
                      warn: bool) -> list[SMOResult]:
    """All one-vs-one pairs in one LIBSVM call (scikit-learn's SVC on the class indices).

    LIBSVM builds the sub-problem of pair (lo, hi) from the rows of lo then
    those of hi, with +1 for lo, and solves the pairs one after the other; its
    one-vs-one layout is unpacked into one result per pair, turned to +1 for
    hi (the convention of :func:`solve_ovo`).
    """
    # LIBSVM drops the rows of sample weight 0 first (and scikit-learn's support_ then counts
    # the remaining rows): drop them here, so that support_ maps back to X's rows
    rows = (np.arange(yidx.shape[0], dtype=np.int64) if sample_weight is None
            else np.flatnonzero(sample_weight > 0))
    Xs = _problem_data(X, rows, kernel)
    cw = None if class_weight is None else {c: float(v) for c, v in enumerate(class_weight)}
    svc, converged = _libsvm_fit(Xs, yidx[rows], kernel, C, tol, max_iter,
                                 None if sample_weight is None else sample_weight[rows], cache_bytes,
                                 warn, class_weight=cw)
    sv = np.asarray(svc.support_, dtype=np.int64)
    dual = svc.dual_coef_
    dual = np.asarray(dual.toarray() if sp.issparse(dual) else dual, dtype=np.float64)
    n_iter = np.asarray(svc.n_iter_).ravel()
    cls = yidx[rows[sv]]
    out = []
    for p, (lo, hi) in enumerate(combinations(range(n_classes), 2)):
        if n_classes == 2:  # the public binary orientation is already +1 for class 1
            coef, b = dual[0], float(svc.intercept_[0])
            of_pair = np.arange(sv.size)
        else:  # LIBSVM's layout: SVs of lo in row hi − 1, SVs of hi in row lo; +1 for lo
            of_pair = np.flatnonzero((cls == lo) | (cls == hi))
            coef = -np.where(cls[of_pair] == lo, dual[hi - 1, of_pair], dual[lo, of_pair])
            b = -float(svc.intercept_[p])
        ok = converged or (max_iter is not None and n_iter[p] < max_iter)
        out.append(_libsvm_result(Xs, rows, sv[of_pair], coef, b, kernel, n_iter[p], bool(ok)))
    return out


# =========================================================================== own SMO (host)
class _RowCache:
    """LRU cache of kernel rows K(x_i, X_active) within a byte budget."""

    def __init__(self, Xs: Any, kernel: Kernel | str, budget: int) -> None:
        self.Xs = Xs
        self.kernel = kernel
        self.budget = int(budget)
        self.rows: OrderedDict[int, np.ndarray] = OrderedDict()
        self.set_active(np.arange(Xs.shape[0]))

    def set_active(self, active: np.ndarray, keep: np.ndarray | None = None) -> None:
        """Restrict to ``active`` rows; ``keep`` (mask over the old active set) subsets cached rows."""
        self.active = active
        # the active rows gathered once (a precomputed Gram is indexed directly)
        self.Xa = None if _is_precomputed(self.kernel) else self.Xs[active]
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
        r = _kernel_rows(self.Xs, slice(i, i + 1), self.active, self.kernel, cols_data=self.Xa)[0]
        self.rows[i] = r
        while len(self.rows) > self.max_rows:
            self.rows.popitem(last=False)
        return r


def solve_smo_host(X: Any, y: np.ndarray, S: np.ndarray, kernel: Kernel | str, C: float, *,
                   tol: float = 1e-3, max_iter: int | None = None,
                   sample_weight: np.ndarray | None = None, cache_bytes: int | None = None,
                   shrinking: bool = True, warn: bool = True) -> SMOResult:
    """Two-variable SMO with WSS 2 (Fan, Chen & Lin 2005), row cache and shrinking, on the host.

    ``y`` are the labels of the rows ``S`` of ``X``.  Shrinking follows
    LIBSVM's rule (Chang & Lin 2011, §5.1): every min(n, 1000) steps a bound
    variable that cannot enter a violating pair (up-only with F < M, or
    low-only with F > m) leaves the active set; F of the shrunk rows is
    reconstructed, F_l = y_l − Σ_k y_kα_k K_lk, when the gap first falls
    below 10·tol and before the final check.  ``warn=False``: no
    ConvergenceWarning (the caller reports ``converged``).
    """
    Xs = _problem_data(X, S, kernel)
    ys = np.asarray(y, dtype=np.float64)
    n = ys.size
    Cv = _box(C, None if sample_weight is None else sample_weight[S], n)
    alpha = np.zeros(n)
    F = ys.copy()
    diag = _kernel_diagonal(Xs, kernel)
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
                Kb = _kernel_rows(Xs, inactive, sv, kernel)
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
    if not converged and warn:
        warnings.warn(f"SMO stopped after max_iter={max_iter} steps before reaching tol={tol}",
                      ConvergenceWarning, stacklevel=3)
    b = _intercept_from_F(F, alpha, ys, Cv)
    return _make_result(S, alpha, ys, b, _objective_from_F(F, alpha, ys), it, converged, "smo",
                        max_iter_reached=not converged)


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


def round_keys_host(yv: np.ndarray, Cvv: np.ndarray, alpha: np.ndarray, F: np.ndarray,
                    widx_keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy twin of ``kernels_cuda/smo.cu:smo_round_keys`` + ``smo_round_finish`` (and its oracle).

    For every problem (row of the padded (P, n1) state): the sort keys of the
    I_up rows (−F, most violating first) and I_low rows (F), +inf elsewhere and
    at the rows of the kept half of the working set (``widx_keep``, (P, k)),
    and ``stats`` (P, 4) float64: the gap m − M (FCL05 eq. 6, in the working
    dtype), the dual objective ½ Σ αᵢ(−yᵢFᵢ − 1) (float64), and the number of
    finite up and low keys.
    """
    up = ((yv > 0) & (alpha < Cvv)) | ((yv < 0) & (alpha > 0))
    low = ((yv < 0) & (alpha < Cvv)) | ((yv > 0) & (alpha > 0))
    gap = np.where(up, F, -np.inf).max(axis=1) - np.where(low, F, np.inf).min(axis=1)
    obj = 0.5 * (alpha.astype(np.float64) * (-yv.astype(np.float64) * F - 1.0)).sum(axis=1)
    su = np.where(up, -F, np.inf).astype(F.dtype)
    sl = np.where(low, F, np.inf).astype(F.dtype)
    if widx_keep.shape[1]:
        rows = np.arange(F.shape[0])[:, None]
        su[rows, widx_keep] = np.inf
        sl[rows, widx_keep] = np.inf
    stats = np.stack([gap.astype(np.float64), obj, np.isfinite(su).sum(axis=1).astype(np.float64),
                      np.isfinite(sl).sum(axis=1).astype(np.float64)], axis=1)
    return su, sl, stats


_RK_BLOCK = 256              # SMO_RK_BLOCK of smo.cu
_RK_CHUNK = 4 * _RK_BLOCK    # rows per block of smo_round_keys


def _round_keys_cuda(yv, Cvv, alpha, F, widx_keep):
    """:func:`round_keys_host` on the GPU: two launches (``kernels_cuda/smo.cu``), no host round trip."""
    xp = bk.namespace_of(F)
    P, n1 = F.shape
    sfx = "f32" if F.dtype == np.float32 else "f64"
    n_chunks = -(-n1 // _RK_CHUNK)
    su, sl = xp.empty_like(F), xp.empty_like(F)
    part = xp.empty((P, n_chunks, 5), dtype=xp.float64)
    stats = xp.empty((P, 4), dtype=xp.float64)
    keep = xp.ascontiguousarray(widx_keep, dtype=xp.int64) if widx_keep.shape[1] else None
    _cuda.launch("smo", f"smo_round_keys_{sfx}", (n_chunks, P), (_RK_BLOCK,),
                 (yv, Cvv, alpha, F, n1, _RK_CHUNK, su, sl, part))
    _cuda.launch("smo", f"smo_round_finish_{sfx}", (P,), (_RK_BLOCK,),
                 (n1, n_chunks, keep, int(widx_keep.shape[1]), su, sl, part, stats))
    return su, sl, stats


def _round_state(yv, Cvv, alpha, F, widx_keep, need: int, xp) -> tuple[np.ndarray, ...]:
    """Everything a round of the working-set loop decides on, in ONE device→host transfer.

    Per problem (:func:`round_keys_host`, fused on a GPU): the optimality gap
    m − M (FCL05 eq. 6), the dual objective ½ Σ αᵢ(−yᵢFᵢ − 1) (float64) and
    the I_up / I_low sort keys, rows of the kept half of the working set
    (``widx_keep``) excluded; then — device-side sorts — the ``need`` most
    violating I_up rows (by decreasing F) and I_low rows (by increasing F).
    The candidates are computed even in the round that stops (one round trip
    per round, not two).  ``bench/gpu_model.py`` (H100 model): the round's
    ~50 small CuPy launches and 7 synchronizations became 6 launches and one.
    Returns host arrays: gap (P,), objective (P,), up candidates (P, need),
    their validity, low candidates, their validity.
    """
    P = F.shape[0]
    if xp is np:
        su, sl, stats = round_keys_host(yv, Cvv, alpha, F, np.asarray(widx_keep))
    else:
        su, sl, stats = _round_keys_cuda(yv, Cvv, alpha, F, widx_keep)
    ou = xp.argsort(su, axis=1)[:, :need]
    ol = xp.argsort(sl, axis=1)[:, :need]
    packed = xp.concatenate([stats.view(xp.int64), ou.astype(xp.int64, copy=False),
                             ol.astype(xp.int64, copy=False)], axis=1)
    h = np.asarray(bk.to_host(packed))
    st = np.ascontiguousarray(h[:, :4]).view(np.float64)
    k = int(ou.shape[1])                     # need, or n1 when the working set is wider than the rows
    ou_h, ol_h = h[:, 4:4 + k], h[:, 4 + k:]
    ranks = np.arange(k)[None, :]
    return st[:, 0], st[:, 1], ou_h, ranks < st[:, 2:3], ol_h, ranks < st[:, 3:4]


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


def solve_working_set(X: Any, ys: list[np.ndarray], subs: list[np.ndarray], kernel: Kernel | str,
                      Cs: list[float], *, tol: float = 1e-3, max_iter: int | None = None,
                      device: Any = "cpu", dtype: Any = None, sample_weight: np.ndarray | None = None,
                      working_set_size: int | None = None, max_inner: int | None = None,
                      subproblem: str = "auto", warn: bool = True) -> list[SMOResult]:
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
    With ``kernel="precomputed"`` step (2) reads the rows of the problem's
    Gram block instead.  ``warn=False``: no ConvergenceWarning (the caller
    reports ``converged``).
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
    # the problems' rows of X, or with a precomputed kernel their Gram blocks K[S, S]
    Sd = [bk.to_device(S, dev) if dev.is_gpu else S for S in subs]
    Xp = [Xd[S][:, S] if _is_precomputed(kernel) else Xd[S] for S in Sd]
    # padded state (P, n_max + 1); padding rows have y = 0, C = 0 and never move; the last
    # column is a dummy row that empty working-set slots point at (so scatters never collide)
    N1 = n_max + 1
    y_h = np.zeros((P, N1))
    C_h = np.zeros((P, N1))
    for p, S in enumerate(subs):
        y_h[p, : S.size] = ys[p]
        C_h[p, : S.size] = _box(Cs[p], None if sample_weight is None else sample_weight[S], S.size)
    yv = xp.asarray(y_h, dtype=dt)
    Cvv = xp.asarray(C_h, dtype=dt)
    alpha = xp.zeros((P, N1), dtype=dt)
    F = yv.copy()
    Kws = xp.zeros((P, ws, N1), dtype=dt)
    widx = np.full((P, ws), n_max, dtype=np.int64)  # working-set rows (host); n_max: empty slot
    widx_d = xp.asarray(widx)                        # ... and its device copy
    wvalid = np.zeros((P, ws), dtype=bool)
    done = np.zeros(P, dtype=bool)
    converged = np.zeros(P, dtype=bool)
    best = np.full(P, np.inf)          # lowest dual objective so far
    since_best = np.zeros(P, dtype=np.int64)
    n_inner_d = xp.zeros(P, dtype=xp.int64)          # inner steps, summed on the device
    rounds = np.zeros(P, dtype=np.int64)
    ar = xp.arange(P)[:, None]
    r = 0
    while True:
        # (0) one device→host transfer per round: the gap and objective of every problem and the
        # candidate rows for the next working sets (the decisions below need all of them)
        slots = np.arange(ws) if r == 0 else np.arange(q) + q * ((r - 1) % 2)
        keep_slots = np.setdiff1d(np.arange(ws), slots)
        gap, obj, ou, vu, ol, vl = _round_state(yv, Cvv, alpha, F, widx_d[:, keep_slots], slots.size, xp)
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
        # (1) selection (host): which half is replaced (FIFO), the new rows per problem
        n_new = np.zeros(P, dtype=np.int64)
        for p in np.flatnonzero(~done):
            keep = widx[p, keep_slots][wvalid[p, keep_slots]]
            new = _merge_new(ou[p][vu[p]], ol[p][vl[p]], int(sizes[p]), keep, slots.size)
            widx[p, slots] = np.where(new >= 0, new, n_max)
            wvalid[p, slots] = new >= 0
            n_new[p] = int((new >= 0).sum())
        widx_d = xp.asarray(widx)
        # (2) their kernel rows: q × n_p per problem, one GEMM + epilogue (rows read on the device)
        s0 = int(slots[0])
        for p in np.flatnonzero(n_new):
            rows_d = widx_d[p, s0:s0 + int(n_new[p])]
            Kb = (Xp[p][rows_d] if _is_precomputed(kernel)
                  else kernel_block(Xp[p][rows_d], Xp[p], kernel, dtype=dt))
            Kws[p, s0:s0 + int(n_new[p]), : int(sizes[p])] = Kb
        # (3) the subproblems of all problems in one call
        act = ~done
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
        n_inner_d += xp.asarray(n_in).astype(xp.int64)       # inactive problems report 0 steps
        rounds += act
        r += 1
    n_inner_tot = np.asarray(bk.to_host(n_inner_d), dtype=np.int64)
    alpha_h = np.asarray(bk.to_host(alpha), dtype=np.float64)
    F_h = np.asarray(bk.to_host(F), dtype=np.float64)
    out = []
    name = "working_set-cuda" if subproblem == "cuda" else "working_set-cpu"
    for p, S in enumerate(subs):
        n_p = S.size
        a, f, yy, c = alpha_h[p, :n_p], F_h[p, :n_p], y_h[p, :n_p], C_h[p, :n_p]
        if not converged[p] and warn:
            warnings.warn(f"working-set SMO on problem {p} stopped at gap {gap[p]:.3g} > tol={tol} "
                          f"after {rounds[p]} rounds", ConvergenceWarning, stacklevel=3)
        out.append(_make_result(S, a, yy, _intercept_from_F(f, a, yy, c), _objective_from_F(f, a, yy),
                                int(n_inner_tot[p]), bool(converged[p]), name, xp=xp,
                                n_rounds=int(rounds[p]), dtype=dt,
                                max_iter_reached=max_iter is not None and rounds[p] >= max_iter))
    return out


# =========================================================================== public API
def solve(X: Any, y: Any, kernel: Kernel | str, C: float, *, tol: float = 1e-3,
          max_iter: int | None = None, sample_weight: Any = None, device: Any = "auto", dtype: Any = None,
          cache_bytes: int | None = None, method: str = "auto", shrinking: bool = True,
          working_set_size: int | None = None) -> SMOResult:
    """Solve one binary C-SVC dual on all rows of ``X``.

    Parameters
    ----------
    X : (n, d) array (NumPy/CuPy) or SciPy sparse matrix (CPU)
        With ``kernel="precomputed"``: the (n, n) Gram matrix of the rows.
    y : (n,) array of -1/+1
    kernel : Kernel or "precomputed"
    C : float > 0, or inf (hard margin)
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


def solve_batched(X: Any, y: Any, subsets: Sequence[Any], kernel: Kernel | str,
                  C: float | Sequence[float], *, tol: float = 1e-3, max_iter: int | None = None,
                  device: Any = "auto", dtype: Any = None, n_jobs: int | None = None,
                  sample_weight: Any = None, method: str = "auto", shrinking: bool = True,
                  cache_bytes: int | None = None, working_set_size: int | None = None,
                  warn_convergence: bool = True) -> list[SMOResult]:
    """Solve many independent binary C-SVC duals, one per subset of rows.

    Parameters
    ----------
    X : (n, d) array (NumPy/CuPy) or SciPy sparse matrix (CPU)
        With ``kernel="precomputed"``: the (n, n) Gram matrix of the rows.
    y : (n,) array of -1/+1, or a list of per-problem label arrays
        The labels of every row of X, shared by all problems; or, aligned
        with ``subsets``, the labels of each problem's rows (one-vs-one pairs).
    subsets : list of integer index arrays into X
        Problem p is the C-SVC on rows ``subsets[p]`` (both classes needed).
    kernel : Kernel or "precomputed"
    C : float or sequence of floats (one per problem); inf: hard margin
    n_jobs : int, optional
        CPU (``libsvm``/``smo``): parallel worker threads over problems;
        None → all available cores.  The working-set solver batches instead.
    sample_weight : (n,) array, optional
        Per-row weights of X: Cᵢ = C_p·wᵢ.
    warn_convergence : bool
        Whether a problem that stops before reaching ``tol`` issues a
        ``ConvergenceWarning`` here; with False the caller reports it (each
        result's ``converged`` and ``max_iter_reached`` say what happened).
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
    _check_tol(tol)
    mi = _max_iter(max_iter)
    w = _host_weights(sample_weight, X.shape[0], "sample_weight")
    dev = bk.device_of(X) if bk.is_gpu_array(X) and device == "auto" else bk.resolve_device(device)
    meth = _resolve_method(method, dev)
    if not subs:
        return []
    if meth == "working_set":
        # the NumPy twin's GEMMs are large, but on a busy host BLAS threads only spin
        with one_blas_thread(not dev.is_gpu and host_busy()):
            return solve_working_set(X, ys, subs, kernel, Cs, tol=float(tol), max_iter=mi, device=dev,
                                     dtype=dtype, sample_weight=w, working_set_size=working_set_size,
                                     warn=bool(warn_convergence))
    if meth == "smo":
        def one(p: int) -> SMOResult:
            return solve_smo_host(X, ys[p], subs[p], kernel, Cs[p], tol=float(tol), max_iter=mi,
                                  sample_weight=w, cache_bytes=cache_bytes, shrinking=shrinking,
                                  warn=bool(warn_convergence))
    else:
        def one(p: int) -> SMOResult:
            return _solve_libsvm(X, ys[p], subs[p], kernel, Cs[p], float(tol), mi, w, cache_bytes,
                                 bool(warn_convergence))

    jobs = _n_workers(n_jobs, len(subs))
    # LIBSVM is single-threaded C and our SMO's BLAS calls are single kernel rows:
    # one BLAS thread each, so that no spinning BLAS worker competes with the
    # solvers (or with the parallel problems) for the cores (gpuksvm.solvers._blas)
    with one_blas_thread():
        if jobs == 1:
            res = [one(p) for p in range(len(subs))]
        else:
            # LIBSVM and NumPy release the GIL: threads avoid copying X to processes.  A plain
            # thread pool: joblib's result loop polls with 10 ms sleeps (80 of them, 1.07 s, in
            # one probability=True fit of 45 pairs of ~16 rows, measured with cProfile)
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                res = list(pool.map(one, range(len(subs))))
    return _on_device(res, dev, dtype)


def _on_device(res: list[SMOResult], dev: bk.Device, dtype: Any) -> list[SMOResult]:
    if dev.is_gpu:  # host engines ran: hand coefficients back on the asked device
        for r in res:
            r.dual_coef = bk.to_device(np.asarray(r.dual_coef), dev, bk.resolve_dtype(dtype, dev))
    return res


def _check_tol(tol: Any) -> None:
    if isinstance(tol, bool) or not (isinstance(tol, (int, float, np.floating)) and np.isfinite(tol)
                                     and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")


def _host_weights(weights: Any, n: int, name: str) -> np.ndarray | None:
    if weights is None:
        return None
    w = np.asarray(bk.to_host(weights), dtype=np.float64).ravel()
    if w.shape[0] != n or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{name} must be ({n},) finite and non-negative")
    return w


def solve_ovo(X: Any, yidx: Any, kernel: Kernel | str, C: float, *, n_classes: int | None = None,
              tol: float = 1e-3, max_iter: int | None = None, device: Any = "auto", dtype: Any = None,
              n_jobs: int | None = None, sample_weight: Any = None, class_weight: Any = None,
              method: str = "auto", shrinking: bool = True, cache_bytes: int | None = None,
              working_set_size: int | None = None, warn_convergence: bool = True) -> list[SMOResult]:
    """The one-vs-one C-SVC problems of a labelled set (LIBSVM's multi-class scheme).

    Pair (lo, hi), lo < hi, in lexicographic order, is the binary problem on
    the rows of classes lo and hi with +1 for **hi** (for two classes:
    decision > 0 → class 1, scikit-learn's orientation) and
    Cᵢ = C·class_weight[yᵢ]·sample_weightᵢ; rows of weight 0 are left out
    (their αᵢ are 0).  With ``method="libsvm"`` all pairs are one LIBSVM call
    (scikit-learn's SVC on the class indices: it builds the same sub-problems,
    rows of lo first, and solves them in turn), so the results are exactly
    SVC's — and one call instead of K(K−1)/2 saves scikit-learn's per-fit
    overhead (≈3 ms a pair).  The other methods solve the pairs with
    :func:`solve_batched`.

    Parameters
    ----------
    X : (n, d) array or sparse matrix, or the (n, n) Gram matrix (``kernel="precomputed"``)
    yidx : (n,) int array of class indices 0 … K−1
    n_classes : int, optional
        K (default: ``yidx.max() + 1``); every class must keep a row of positive weight.
    sample_weight : (n,) array, optional
    class_weight : (K,) array, optional
    Other parameters as in :func:`solve_batched`.

    Returns
    -------
    list of K(K−1)/2 SMOResult; ``support`` holds indices into X.
    """
    X, _ = _check_inputs(X, None, kernel)
    yidx = np.asarray(bk.to_host(yidx)).ravel()
    if yidx.shape[0] != X.shape[0] or yidx.dtype.kind not in "iu" or (yidx.size and yidx.min() < 0):
        raise ValueError(f"yidx must hold {X.shape[0]} class indices >= 0")
    yidx = yidx.astype(np.int64)
    K = int(yidx.max()) + 1 if n_classes is None else int(n_classes)
    _per_problem(C, 1, "C")
    _check_tol(tol)
    mi = _max_iter(max_iter)
    sw = _host_weights(sample_weight, X.shape[0], "sample_weight")
    cw = _host_weights(class_weight, K, "class_weight")
    w = np.ones(X.shape[0]) if sw is None else sw
    if cw is not None:
        w = w * cw[yidx]
    missing = np.setdiff1d(np.arange(K), yidx[w > 0])
    if missing.size:
        raise ValueError(f"class(es) {missing.tolist()} have no row of positive weight")
    dev = bk.device_of(X) if bk.is_gpu_array(X) and device == "auto" else bk.resolve_device(device)
    if _resolve_method(method, dev) == "libsvm":
        with one_blas_thread():
            res = _solve_ovo_libsvm(X, yidx, K, kernel, float(C), float(tol), mi, sw, cw, cache_bytes,
                                    bool(warn_convergence))
        return _on_device(res, dev, dtype)
    subsets, labels = [], []
    for lo, hi in combinations(range(K), 2):
        S, lab = problem_rows(yidx, hi, lo)
        keep = w[S] > 0
        subsets.append(S[keep])
        labels.append(lab[keep])
    return solve_batched(X, labels, subsets, kernel, C, tol=tol, max_iter=max_iter, device=dev,
                         dtype=dtype, n_jobs=n_jobs, sample_weight=None if np.all(w == 1.0) else w,
                         method=method, shrinking=shrinking, cache_bytes=cache_bytes,
                         working_set_size=working_set_size, warn_convergence=warn_convergence)


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
