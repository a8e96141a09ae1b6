"""Exact C-SVC dual solvers (hinge loss): LIBSVM, own SMO, batched working-set SMO.

:func:`solve`, :func:`solve_batched` and :func:`solve_ovo` check their inputs
and run one of the engines below on one or many binary problems.  The dual, its
notation (F, the gap m − M, WSS 2) and the result type :class:`SMOResult`:
:mod:`gpuksvm.solvers.svc_dual`.

Solvers (``method``)
--------------------
``"libsvm"``
    scikit-learn's LIBSVM (CPU, :mod:`gpuksvm.solvers.smo.host`).  Batched
    problems run in parallel threads (LIBSVM releases the GIL); the
    one-vs-one problems of a labelled set (:func:`solve_ovo`) are one LIBSVM
    call, scikit-learn SVC's own.  The host solvers run with one BLAS thread
    (:mod:`gpuksvm.array.blas_threads`: spinning BLAS workers otherwise steal the
    cores from LIBSVM and from the parallel problems).
``"smo"``
    Our own two-variable SMO on the host
    (:func:`gpuksvm.solvers.smo.host.solve_smo_host`): WSS 2, a kernel-row LRU
    cache within ``cache_bytes``, optional shrinking.
``"working_set"``
    The GPU-style batched working-set solver (ThunderSVM, SPEC §6;
    :func:`gpuksvm.solvers.smo.working_set.solve_working_set`): all problems'
    working sets advance together, their subproblems in one CUDA launch on a
    GPU (:mod:`gpuksvm.solvers.smo.cuda_launch`) or by its NumPy twin on the CPU.
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
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.multiclass import problem_rows
from gpuksvm.array.blas_threads import host_blas_threads, one_blas_thread
from gpuksvm.solvers.smo.host import _solve_libsvm, _solve_ovo_libsvm, solve_smo_host
from gpuksvm.solvers.smo.memory import cache_within_budget
from gpuksvm.solvers.smo.working_set import solve_working_set
from gpuksvm.solvers.svc_dual import PRECOMPUTED, SMOResult, is_precomputed

# SMOResult and PRECOMPUTED live in gpuksvm.solvers.svc_dual; re-exported here as the result
# type and the kernel constant of this module's functions
__all__ = ["solve", "solve_batched", "solve_ovo", "METHODS", "SMOResult", "PRECOMPUTED", "DEFAULT_CACHE_BYTES"]

#: The kernel cache when none is asked for (LIBSVM's 200 MB of scikit-learn's SVC), within
#: the memory budget (:func:`gpuksvm.solvers.smo.memory.cache_within_budget`).
DEFAULT_CACHE_BYTES = 200 * 2**20

METHODS = ("auto", "libsvm", "smo", "working_set")


def _check_inputs(X: Any, y: Any, kernel: Kernel | str) -> tuple[Any, Any]:
    if not (isinstance(kernel, Kernel) or is_precomputed(kernel)):
        raise TypeError(f"kernel must be a gpuksvm.kernels.kernel.Kernel or {PRECOMPUTED!r}, "
                        f"got {type(kernel).__name__}")
    if not (bk.is_sparse(X) or hasattr(X, "shape")):
        X = np.asarray(X, dtype=np.float64)
    if len(X.shape) != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if is_precomputed(kernel):
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
    device, dtype : see :mod:`gpuksvm.array.backend`
    cache_bytes : int, optional
        Kernel-row cache of ``method="smo"`` / LIBSVM's cache (default 200 MiB); the caches
        of the problems solved at once hold at most half of ``cpu_memory_budget`` together.
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
    >>> from gpuksvm.kernels.kernel import Kernel
    >>> from gpuksvm.solvers.smo.engines import solve
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
    >>> from gpuksvm.kernels.kernel import Kernel
    >>> from gpuksvm.solvers.smo.engines import solve_batched
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
    dev = bk.device_for(device, X)
    meth = _resolve_method(method, dev)
    if not subs:
        return []
    if meth == "working_set":
        # the NumPy twin's GEMMs are large, but on a busy host BLAS threads only spin
        with host_blas_threads(dev):
            return solve_working_set(X, ys, subs, kernel, Cs, tol=float(tol), max_iter=mi, device=dev,
                                     dtype=dtype, sample_weight=w, working_set_size=working_set_size,
                                     warn=bool(warn_convergence))
    jobs = _n_workers(n_jobs, len(subs))
    # the caches of the problems solved at once share the memory budget
    cache_bytes, _ = cache_within_budget(DEFAULT_CACHE_BYTES if cache_bytes is None else cache_bytes,
                                         n_parallel=jobs)
    if meth == "smo":
        def one(p: int) -> SMOResult:
            return solve_smo_host(X, ys[p], subs[p], kernel, Cs[p], tol=float(tol), max_iter=mi,
                                  sample_weight=w, cache_bytes=cache_bytes, shrinking=shrinking,
                                  warn=bool(warn_convergence))
    else:
        def one(p: int) -> SMOResult:
            return _solve_libsvm(X, ys[p], subs[p], kernel, Cs[p], float(tol), mi, w, cache_bytes,
                                 bool(warn_convergence))

    # LIBSVM is single-threaded C and our SMO's BLAS calls are single kernel rows:
    # one BLAS thread each, so that no spinning BLAS worker competes with the
    # solvers (or with the parallel problems) for the cores (gpuksvm.array.blas_threads)
    with one_blas_thread():
        if jobs == 1:
            res = [one(p) for p in range(len(subs))]
        else:
            # LIBSVM and NumPy release the GIL: threads avoid copying X to processes.  A plain
            # thread pool: joblib's result loop polls with 10 ms sleeps (80 of them, 1.07 s, in
            # one probability=True fit of 45 pairs of ~16 rows, measured with cProfile)
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                res = list(pool.map(bk.in_calling_config(one, share=jobs), range(len(subs))))
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
    dev = bk.device_for(device, X)
    if _resolve_method(method, dev) == "libsvm":
        cache_bytes, _ = cache_within_budget(DEFAULT_CACHE_BYTES if cache_bytes is None else cache_bytes)
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
