"""The Core Vector Machine fit: its binary (or one-class) problems, each a core-set loop, and the model.

:func:`solve_cvm` is the whole algorithm behind :class:`gpuksvm.estimators.cvm.CVM`
and :class:`~gpuksvm.estimators.cvm.OneClassCVM`: the order of the rows by a
seeded hash of their contents, one minimum-enclosing-ball problem per binary
problem (:func:`gpuksvm.solvers.cvm.meb.fit_core_set`), the one-class outlier
threshold, and the stored expansion (support vectors, coefficients,
intercepts), returned as a :class:`CVMResult`.

The rows are read through one seam, a row source (:class:`CVMRows`): the
furthest-point scanner over its rows, the rows' order keys and the rows of
the support vectors.  :class:`ArrayRows` is the source of an in-memory
(NumPy, CuPy or SciPy sparse) array; :class:`gpuksvm.scaleout.cvm.DaskRows`
the source of a dask array, whose scanner and keys run chunk by chunk on
the workers.  Both give the same model for the same rows and random state.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.cvm.ktilde_cache import DENSE_MAX
from gpuksvm.solvers.cvm.meb import CoreSetResult, fit_core_set
from gpuksvm.solvers.cvm.scan import ScannerBase, make_scanner
from gpuksvm.solvers.multiclass import binary_problems, problem_rows
from gpuksvm.solvers.progress import report
from gpuksvm.solvers.row_order import RowHasher, smallest_keys
from gpuksvm.solvers.smo.memory import CACHE_BUDGET_SHARE, cache_within_budget
from gpuksvm.solvers.svc_dual import svc_max_iter_message

__all__ = ["CVMRows", "ArrayRows", "CVMParams", "CVMResult", "solve_cvm", "check_kernel",
           "outlier_threshold", "OUTLIER_SLACK_FACTOR", "THRESHOLD_KKT"]

#: One-class: an outlier's slack exceeds this × the median support-vector slack.
OUTLIER_SLACK_FACTOR = 3.0
#: One-class: the core-set QP is finished to a KKT gap ≤ this·ρ before the threshold is taken
#: (None: not finished).
THRESHOLD_KKT: float | None = 1e-4


class CVMRows(Protocol):
    """The training rows as :func:`solve_cvm` reads them (the row-source seam).

    ``shape`` is (n_rows, n_features); the other three methods are the only
    ways the algorithm touches the rows.
    """

    shape: tuple[int, ...]

    def scanner(self, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float, dtype: np.dtype,
                device: bk.Device) -> ScannerBase:
        """A furthest-point scanner over every row (:class:`~gpuksvm.solvers.cvm.scan.ScannerBase`)
        for the labels ``y`` (±1, 0 outside the problem; None: one-class)."""

    def row_keys(self, hasher: RowHasher) -> np.ndarray:
        """``hasher.keys`` of every row, (n, 2) uint64, in row order."""

    def take(self, idx: np.ndarray) -> Any:
        """The rows ``idx`` (dense; host or device)."""


class ArrayRows:
    """:class:`CVMRows` of an array in memory (NumPy, CuPy or SciPy sparse, on the compute device)."""

    def __init__(self, X: Any) -> None:
        self.X = X
        self.shape = tuple(int(s) for s in X.shape)

    def scanner(self, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float, dtype: np.dtype,
                device: bk.Device) -> ScannerBase:
        return make_scanner(self.X, y, kernel, xscale, C, dtype, device)

    def row_keys(self, hasher: RowHasher) -> np.ndarray:
        return hasher.keys(self.X)

    def take(self, idx: np.ndarray) -> Any:
        R = self.X[idx]
        return R.toarray() if bk.is_sparse(R) else R


@dataclass(frozen=True)
class CVMParams:
    """The parameters of one CVM fit (the estimator's, validated; see :class:`~gpuksvm.estimators.cvm.CVM`)."""

    C: float = 1.0
    tol: float = 1e-2
    sample_size: int | None = 59
    n_tries: int = 7
    max_iter: int = 100_000
    max_core_size: int = 50_000
    cache_size: float | None = None     # MB for the core-set QP's K̃ rows; None: half the budget
    shrinking: bool = True
    multi_class: str = "ovo"
    verbose: int = 0


@dataclass(frozen=True)
class CVMResult:
    """What :func:`solve_cvm` returns: the model and, per binary problem, its core-set fit.

    ``support`` are the rows with α > 0 in any problem (ascending),
    ``support_vectors`` those rows (on the compute device, in the working
    dtype), ``dual_coef`` (n_problems, n_SV) αᵢyᵢ (α for one-class),
    ``intercept`` (n_problems,) b = Σαᵢyᵢ (one-class: −``threshold``),
    ``sv_scale`` 1/√κ(x, x) of the support vectors for a normalized kernel
    (else None); ``problems`` the binary problems (None for one-class);
    ``core_sets`` each problem's :class:`~gpuksvm.solvers.cvm.meb.CoreSetResult`;
    ``threshold`` the one-class outlier threshold ρ − τ (None otherwise);
    ``times`` the seconds of ``row_order``, ``core_sets`` and ``model``.
    """

    support: np.ndarray
    support_vectors: Any
    dual_coef: np.ndarray
    intercept: np.ndarray
    sv_scale: np.ndarray | None
    problems: list[tuple[int, int | None]] | None
    core_sets: tuple[CoreSetResult, ...]
    threshold: float | None
    kernel: Kernel
    times: dict
    memory_fallback: str | None = None


#: The dense regime of the core-set QP is sized for this many float64 s×s matrices: it holds
#: three at its peak (K̃_S, the active set's inverse, and K̃_PP factorized and inverted in its own
#: memory while the inverse is rebuilt, :meth:`~gpuksvm.solvers.cvm.simplex_qp.CoreSetQP`), which
#: leaves half the budget to the scan's kernel blocks beside it.
_DENSE_COPIES = 6


def qp_memory(params: CVMParams) -> tuple[int, int, bool]:
    """The core-set QP's K̃ row cache (bytes) and largest dense core set within the memory
    budget, and whether the budget cut the cache below ``cache_size``.

    The row cache is ``cache_size`` within half of ``cpu_memory_budget``
    (:func:`gpuksvm.solvers.smo.memory.cache_within_budget`), or with ``cache_size=None``
    that half itself (never "cut"); the dense regime
    (:data:`~gpuksvm.solvers.cvm.ktilde_cache.DENSE_MAX` core vectors) holds
    :data:`_DENSE_COPIES` float64 s×s matrices at its peak, so it ends where
    they would exceed the budget (2,041 core vectors at 200 MB; the default
    512 MiB keeps 3,072).
    """
    budget = bk.memory_budget(bk.CPU)
    if params.cache_size is None:
        cache, capped = int(CACHE_BUDGET_SHARE * budget), False
    else:
        cache, capped = cache_within_budget(int(float(params.cache_size) * 2**20))
    dense_max = int(min(DENSE_MAX, max(64, np.sqrt(budget / (_DENSE_COPIES * 8.0)))))
    return cache, dense_max, capped


def check_kernel(kernel: Kernel, normalize: bool) -> Kernel:
    """``kernel`` if the CVM can use it (PSD; constant κ(x, x), or ``normalize``), else ValueError."""
    if not kernel.is_psd:
        raise ValueError(f"kernel={kernel.name!r} is not positive semi-definite; the CVM needs a "
                         "PSD kernel (use 'rbf', or 'poly'/'linear' with normalize=True)")
    if kernel.constant_diag is None and not normalize:
        raise ValueError(
            f"the CVM needs a kernel with constant κ(x, x) (CVM paper eq. 4); kernel="
            f"{kernel.name!r} has κ(x, x) depending on x. Use kernel='rbf', or pass "
            "normalize=True to use κ(x, z)/sqrt(κ(x, x) κ(z, z)).")
    return kernel


def outlier_threshold(res: CoreSetResult, C: float) -> float:
    """The one-class outlier threshold ρ − τ, τ = 3·median(αⱼ/C) over the support vectors.

    ρ itself would flag every support vector (each has slack ξⱼ = αⱼ/C > 0);
    see :class:`~gpuksvm.estimators.cvm.OneClassCVM` for the rule and its measurements.
    """
    a_sv = res.alpha[res.alpha > 0]
    tau = OUTLIER_SLACK_FACTOR * float(np.median(a_sv)) / C if a_sv.size else 0.0
    return float(res.rho) - tau


def _core_set(rows: CVMRows, y: np.ndarray | None, order: np.ndarray, kernel: Kernel, xscale: Any,
              params: CVMParams, device: bk.Device, dtype: np.dtype,
              rs: np.random.RandomState, start: tuple[np.ndarray, np.ndarray] | None = None) -> CoreSetResult:
    """One MEB problem on the rows ``order`` (in the order its search draws from) with labels
    ``y`` (None = one-class), from the initial pair or a ``start`` (core rows and their α)."""
    C = float(params.C)
    scanner = rows.scanner(y, kernel, xscale, C, dtype, device)
    cache, dense_max, _ = qp_memory(params)
    return fit_core_set(scanner, y, order, C=C, tol=float(params.tol), sample_size=params.sample_size,
                        n_tries=int(params.n_tries), max_iter=int(params.max_iter),
                        max_core_size=int(params.max_core_size), cache_bytes=cache,
                        shrinking=bool(params.shrinking), rs=rs,
                        finish_kkt=THRESHOLD_KKT if y is None else None, dense_max=dense_max, start=start)


def _expansion(rows: CVMRows, results: list[CoreSetResult], signed: bool, xscale: Any,
               device: bk.Device, dtype: np.dtype) -> tuple[np.ndarray, Any, np.ndarray, Any]:
    """support (union of SVs), the support vectors, dual_coef (n_problems × n_SV) and the SVs' scales."""
    sv_sets = [r.core[r.alpha > 0] for r in results]
    support = np.unique(np.concatenate(sv_sets)) if sv_sets else np.empty(0, np.int64)
    D = np.zeros((len(results), support.shape[0]))
    for p, r in enumerate(results):
        keep = r.alpha > 0
        coef = r.alpha[keep] * (r.y[keep] if signed else 1.0)
        D[p, np.searchsorted(support, r.core[keep])] = coef
    SV = bk.get_namespace(device).asarray(rows.take(support), dtype=dtype)
    scale = None if xscale is None else np.asarray(bk.to_host(xscale), np.float64)[support]
    return support, SV, D, scale


def _warn_early_stops(results: list[CoreSetResult], params: CVMParams) -> None:
    """One ConvergenceWarning for the problems that stopped before ``tol`` (SVC's sentence first
    when ``max_iter`` stopped one)."""
    early = [(p, r) for p, r in enumerate(results) if r.stop != "converged"]
    if not early:
        return
    what = "; ".join(f"{'' if len(results) == 1 else f'problem {p}: '}stopped by {r.stop} at a "
                     f"relative duality gap of {r.gap:.3g} with {r.core.shape[0]} core vectors"
                     for p, r in early)
    head = (svc_max_iter_message(int(params.max_iter)) + " "
            if any(r.stop == "max_iter" for _, r in early) else "")
    warnings.warn(f"{head}CVM did not reach tol={params.tol:g}: {what}. The model is an approximate "
                  "L2-SVM (see stop_reason_ and duality_gap_); raise max_iter / max_core_size, "
                  "or, when the core set holds most rows (noisy data keep nearly every row as a "
                  "support vector of an L2-SVM), use KernelSVC or LLSVM.",
                  ConvergenceWarning, stacklevel=4)


def solve_cvm(rows: CVMRows, y: np.ndarray | None, *, n_classes: int = 2, kernel: Kernel, xscale: Any,
              params: CVMParams, device: bk.Device, dtype: Any,
              random_state: np.random.RandomState,
              starts: Sequence[tuple[np.ndarray, np.ndarray] | None] | None = None) -> CVMResult:
    """Fit the CVM: every binary problem's core set (or the one-class problem's) and the model.

    Parameters
    ----------
    rows : CVMRows
        The training rows (:class:`ArrayRows`, or a distributed source).
    y : (n,) int class indices 0..n_classes−1, or None for the one-class task
    n_classes : int
        Number of classes (ignored for one-class).
    kernel : Kernel
        γ resolved, accepted by :func:`check_kernel`.
    xscale : array or None
        1/√κ(x, x) per row for a normalized kernel
        (:func:`gpuksvm.solvers.cvm.scan.kernel_scale`).
    params : CVMParams
    device, dtype : the compute device and the search's working dtype
    random_state : RandomState
        Seeds the rows' content hash (drawn first) and then the draws of every
        problem in turn.
    starts : per binary problem, the core rows and α to start from instead of the initial pair
        (a search's warm start along C: the core set of the C below it,
        :func:`gpuksvm.estimators.cvm.fit_cvm_path`), or None

    Returns
    -------
    CVMResult.  A problem that stops before ``tol`` gives one ConvergenceWarning.
    """
    dtype = np.dtype(dtype)
    t_start = bk.synchronized_clock(device)
    with bk.FallbackCollector() as retried:     # out-of-memory retries: for memory_fallback
        hasher = RowHasher(rows.shape[1], random_state)
        # every draw and tie goes by position in this order: the same rows in any order give one model
        order = smallest_keys(rows.row_keys(hasher), None, y)
        t_order = bk.synchronized_clock(device)
        threshold = None
        problems = None
        if y is None:
            res = _core_set(rows, None, order, kernel, xscale, params, device, dtype, random_state)
            results = [res]
            t_solved = bk.synchronized_clock(device)
            support, SV, D, scale = _expansion(rows, results, False, xscale, device, dtype)
            threshold = outlier_threshold(res, float(params.C))
            intercept = np.array([-threshold])
        else:
            problems = binary_problems(int(n_classes), params.multi_class)
            results = []
            for p, (ci, cj) in enumerate(problems):
                prows, yp = problem_rows(y, ci, cj)
                ypm = np.zeros(y.shape[0])       # ±1 on the problem's rows
                ypm[prows] = yp
                res = _core_set(rows, ypm, order if cj is None else order[ypm[order] != 0], kernel, xscale,
                                params, device, dtype, random_state, None if starts is None else starts[p])
                results.append(res)
                report("CVM", f"problem {p + 1}/{len(problems)}: {res.n_iter} iterations, core set "
                       f"{res.core.shape[0]}, stop={res.stop}, gap={res.gap:.3g}, search={res.search}",
                       params.verbose)
            t_solved = bk.synchronized_clock(device)
            support, SV, D, scale = _expansion(rows, results, True, xscale, device, dtype)
            intercept = np.array([r.b for r in results])
    times = {"row_order": t_order - t_start, "core_sets": t_solved - t_order,
             "model": bk.synchronized_clock(device) - t_solved}
    _warn_early_stops(results, params)
    return CVMResult(support=support, support_vectors=SV, dual_coef=D, intercept=intercept,
                     sv_scale=scale, problems=problems, core_sets=tuple(results), threshold=threshold,
                     kernel=kernel, times=times, memory_fallback=memory_fallback(results, params, retried.cut))


def memory_fallback(results: list[CoreSetResult], params: CVMParams, retried: list | None = None) -> str | None:
    """What the memory budget made smaller in a fit whose core sets are ``results``:
    ``"kernel_cache"`` when a core set outgrew the dense regime (the row cache then
    works) and the budget cut the cache below ``cache_size``; ``"out_of_memory: ..."`` when the
    GPU ran out of memory and a retry cut a block or the core set's spare room (``retried``, the
    ``cut`` of the fit's :class:`~gpuksvm.array.backend.FallbackCollector`); else None."""
    _cache, dense_max, capped = qp_memory(params)
    grown = any(r.core.shape[0] > dense_max for r in results)
    return bk.fallback_text("kernel_cache" if capped and grown else None, retried=retried)
