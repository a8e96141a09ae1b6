"""Many C-SVCs on subsets of one data set: the folds × C values of a cross-validated search.

The training sets of the folds of a cross-validation are subsets of the same
rows ``X``, and the C values of a grid change only the box of the dual, so
the kernel values of one kernel serve every (fold, C) problem.  Three engines:

:func:`solve_grids` (CPU), when numba is installed and the n × n float64 Gram
matrix of all rows fits a job's share of the memory budget
(:func:`gram_fits`; 5,000 rows: 200 MB of the default 512 MiB) — the compiled SMO
    The Gram matrix of the kernel is computed once (:class:`KernelRows`, in
    blocks of 256 rows, each value in float64, stored in float32 as LIBSVM's
    kernel cache stores it: the SMO's passes read half the bytes, and the
    search took 1.30 and 1.31 s against 1.66 and 1.49 s with a float64 matrix,
    two runs of eight alternating searches without refit on the 5,000-row ijcnn1
    grid, medians, the same scores) and every binary problem (every one-vs-one pair of
    every fold) is solved on its rows of it by
    :func:`gpuksvm.solvers.smo.gram_smo.solve_on_gram` (LIBSVM's algorithm, no
    submatrix copied).  A fold's C values are solved in ascending order: the
    smallest from α = 0, so that model is the one LIBSVM's iterations reach
    (same working-set rule, same stopping rule), and each other from the
    solution of the C below it (alpha seeding), a solution valid to ``tol``
    like LIBSVM's but reached by other steps.  The seed is that solution as it
    is (still in the larger box, the same gradient) or scaled by the ratio of
    the C values (DeCoste & Wagstaff 2000: in the box, and its gradient exact
    without a kernel row), whichever has the lower dual objective
    (:func:`_seed`): at small C most support vectors sit at the bound and the
    scaled solution is near the next one, at large C most are free and keep
    their values.  Measured on two folds of a random 5,000 ijcnn1 rows (γ ∈
    {0.5, 1, 2}, 8 C from 0.1 to 1,000, thread time, quiet 2-core host): 2.47 s
    every problem from α = 0, 1.98 s always scaled, 2.06 s always as it is,
    1.74 s the lower objective's (C = 1,000, γ = 2: 81 ms from 0, 90 ms scaled,
    31 ms as it is).  The decision values of the seeded models on the held-out
    rows differed from the cold ones' by at most 4.1·10⁻³ (``tol`` is 10⁻³).  A
    seeded task waits for the task of the C below it (given to the threads
    before it), so the models do not depend on the number of threads.  Across
    folds, the previous fold's solution at the same C (restricted to the
    shared rows, the excess class's α scaled down to make yᵀα = 0; Wen et al.,
    AAAI 2017) took 33,623 steps for a fold's path against 34,104 along C
    (scaled seeds), and is not used.  The engine saves LIBSVM's per-fit
    overhead, kernel evaluations and the steps of the seeded C values
    (measured speed-ups in :mod:`gpuksvm.model_selection.kernel_svc`).  Given
    the rows each fold's models are scored on (:attr:`GridProblem.held_out`),
    dense float64, it returns the models with their decision values on them
    (:class:`~gpuksvm.solvers.smo.svc.HeldOutDecisions`), from one kernel
    block per fold.

:func:`solve_grids` (CPU) otherwise — active-set chunking over a shared kernel cache
    Kernel rows K(xⱼ, X) of the rows that enter any problem are computed once
    (:class:`KernelRows`: the Gram matrix, filled row by row as rows are
    used, when n × n fits the memory budget, else a block of rows refilled
    when full).  Each binary
    problem (every one-vs-one pair of every fold, C ascending) is solved by
    LIBSVM on a subset A of its rows, with α = 0 outside A, from the cached
    Gram block K[A, A] (``kernel="precomputed"``; the rows of A themselves
    when |A|² does not fit the budget); then the *whole* problem's stopping
    rule is checked exactly as LIBSVM does — F = y − Kα over all its rows from
    the cached rows of the support vectors, the gap m(α) − M(α) over I_up and
    I_low including the rows outside A — and the rows outside A that violate
    it (the most violating, at most max(|A|/2, 256) a round) join A, until the
    gap is below ``tol``.  The result solves the full problem to ``tol`` (the
    independent fit's tolerance); its intercept is LIBSVM's rule applied to
    the full problem (the mean of F over the free SVs, all inside A; with none
    free, the middle of the bounds over all rows).  A is seeded with the
    support vectors of the previous C of the same fold and pair, the rows that
    solution puts inside its margin, and the nearest rows outside it (alpha
    seeding, DeCoste & Wagstaff 2000); the first C of a fold from the first C
    of the fold solved before it (Wen et al., AAAI 2017); the very first
    problem from an evenly spaced quarter of its rows.  So each LIBSVM call
    sees about the support vectors instead of the whole fold.  The check reads
    the kernel rows of the free SVs and of the rows that join or leave the
    bounded set (:class:`_BoundSum`), and LIBSVM is called through its entry
    point on the cached block (see :func:`_libsvm_subproblem`).  This is the
    engine of data sets whose Gram matrix does not fit (ijcnn1's 50,000 rows:
    20 GB) and of installations without numba.

    Out of its depth where nearly every row is a support vector: A is then
    the whole pair and only the kernel evaluations are saved (LIBSVM takes no
    initial α); where the support vectors outnumber the rows the cache holds
    (the budget's block, the Gram matrix not fitting), a problem is solved by
    one LIBSVM fit on its rows instead (:func:`_solve_binary`, counted in
    :attr:`GridSolution.whole`).  Measured: a 4-class ``make_classification`` set (3,000 rows,
    20 features, γ ∈ {0.02, 0.1} × 6 C values, 5 folds; 88–99 % of a pair's
    rows are SVs) ran 1.9× faster than ``GridSearchCV(SVC, n_jobs=-1)``
    (25.5 s against 48.3 s, load average 8.6), against 4.3× on ijcnn1's first
    5,000 rows (an easy block: 99.8 % CV accuracy) and 1.8× on a random 5,000 of them
    (97.2 %; ``python -m bench tune --scale small``, quiet host).

Both CPU engines run in parallel threads (LIBSVM and the compiled SMO
release the GIL); :attr:`GridSolution.engine` says which ran.  The active-set
engine's task is a (kernel, fold) path; the compiled SMO's a (kernel, fold, C)
problem, C ascending with the folds of one C together (a fold's next C waits for
the C below it, given to the threads before it), and the threads that start on
a kernel compute its Gram matrix together, block by block: a task per problem
balances the threads better than one per fold path, whose two threads had ended
0.77 s apart on the 3-γ ijcnn1 grid (5 folds × 8 C, 2 threads, load average
2.6–3.5 on the 2-core host).

:func:`solve_grid_batched` (GPU) — every pair × fold × C problem in one call
    of the batched working-set solver
    (:func:`gpuksvm.solvers.smo.engines.solve_batched`, per-problem subsets and
    C), which keeps its kernel rows on the device for all problems.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from gpuksvm.array import backend as bk
from gpuksvm.array.blas_threads import host_busy, one_blas_thread
from gpuksvm.array.validation import content_key
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.solvers.multiclass import problem_rows
from gpuksvm.solvers.smo.engines import _n_workers, solve_batched
from gpuksvm.solvers.smo import gram_smo
from gpuksvm.solvers.smo.host import _libsvm_fit, _solve_libsvm
from gpuksvm.solvers.smo.svc import HeldOutDecisions, KernelSVCResult, ovo_model, pair_coef
from gpuksvm.solvers.svc_dual import PRECOMPUTED, SMOResult, intercept_from_F, problem_data

try:   # LIBSVM's entry point in scikit-learn (see _libsvm_subproblem)
    from sklearn.svm import _libsvm as _LIBSVM
except ImportError:  # pragma: no cover - a scikit-learn without it: SVC.fit instead
    _LIBSVM = None

__all__ = ["KernelRows", "GridProblem", "GridJob", "GridSolution", "solve_grid", "solve_grids",
           "solve_grid_batched", "gram_fits", "ENGINE_GRAM", "ENGINE_ACTIVE_SET"]

#: the engines of solve_grids (GridSolution.engine)
ENGINE_GRAM = "smo-gram"
ENGINE_ACTIVE_SET = "libsvm-active-set"

#: rows whose margin y·f under the previous solution is below 1 + this join the seed, at most
#: 1/_SEED_SHARE of the seed's size of them (the closest first).  Measured on the ijcnn1 grid of
#: ijcnn1's first 5,000 rows (5 folds, γ ∈ {0.5, 2} × 8 C): the SVs and margin violators
#: alone took 86 and 101 LIBSVM calls for 40 problems, with this band 70 and 77; without the cap
#: the band holds nearly every row at small C (|A| = 4,000 of 4,000, 0.2–0.4 s a call).  Other
#: settings tried (band 0.3, share 2; at most 64 or 1,024 rows added a round) were within the
#: noise of the shared 2-core host (1.9–2.3 s CPU for the two γ)
_SEED_MARGIN = 0.1
_SEED_SHARE = 4
#: the first problem of a job starts from an evenly spaced quarter of its rows (at least 500):
#: its solution grows A to the SVs in 3–5 rounds of a few hundred to 2,000 rows, where the whole
#: fold (4,000 rows) took 0.2–0.4 s in one call
_COLD_ROWS = 500
_COLD_FRACTION = 4
#: at most max(|A|/2, this) violating rows join A per round, the most violating first
_MIN_ADD = 256
#: kernel rows gathered per product when F is recomputed (bounds the temporary to 256 × n), and
#: computed per block of the Gram matrix
_CHUNK = 256
#: rows per kernel_block call when KernelRows.matrix computes a block (the RBF epilogue's passes
#: stay in the cache: measured in KernelRows.matrix)
_GRAM_BLOCK = 64
#: states of a block of rows in KernelRows.matrix
_TODO, _CLAIMED, _DONE = 0, 1, 2


class KernelRows:
    """Kernel rows K(xⱼ, X) of one kernel over all rows of X, computed once each, within a budget.

    When the n × n Gram matrix fits ``budget`` bytes, its rows are computed
    the first time they are asked for (in blocks of 256) and kept: a search
    reads about half the rows — 2,331–2,464 of 5,000 on the ijcnn1 grid of
    ijcnn1's first 5,000 rows — so half the kernel evaluations are
    never made.  Otherwise a block of at most ``budget // (16 n)`` rows is
    filled on demand and emptied when a request does not fit what is left;
    rows asked for beyond its capacity are computed for the call and not
    kept.  Thread-safe.

    Parameters
    ----------
    X : (n, d) host array or CSR matrix
    kernel : Kernel (γ resolved)
    budget : bytes the cache may hold
    rows : (n, n) C-contiguous array of ``dtype``, optional
        Memory for the whole Gram matrix, overwritten (another kernel's, dropped): used only
        when the Gram matrix fits ``budget``; see :func:`solve_grids`
    dtype : float64, or float32 for the whole Gram matrix of the compiled SMO (its values computed
        in float64 and rounded once: LIBSVM's kernel cache holds float32 too; see
        :func:`solve_grids`)
    """

    def __init__(self, X: Any, kernel: Kernel, budget: int, rows: np.ndarray | None = None,
                 dtype: Any = np.float64) -> None:
        self.X = X
        self.kernel = kernel
        self.n = X.shape[0]
        self.budget = int(budget)
        full = 8 * self.n * self.n <= self.budget
        # without the whole Gram matrix, half the budget holds rows, half the subproblems' blocks
        self.capacity = self.n if full else min(self.n, self.budget // (16 * max(self.n, 1)))
        self.slot = np.full(self.n, -1, dtype=np.int64)
        self.used = 0
        self.computed = 0      # kernel rows evaluated so far (diagnostics, tests)
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        # matrix(): each block of _CHUNK rows to compute, being computed by a thread, or done
        self.block_state = np.full(-(-self.n // _CHUNK), _TODO, dtype=np.int8)
        self.full = full
        # rows per product in weighted_sum: within the cache's share of the budget
        self.step = _CHUNK if full else max(1, min(_CHUNK, self.capacity))
        # full: row i in row i, written on first use (np.empty: pages untouched until then)
        dtype = np.dtype(dtype) if full else np.dtype(np.float64)
        reuse = full and rows is not None and rows.shape == (self.n, self.n) and rows.dtype == dtype \
            and rows.flags.c_contiguous
        self.rows = rows if reuse else np.empty((self.capacity, self.n), dtype=dtype)

    def _kernel(self, idx: np.ndarray) -> np.ndarray:
        return np.asarray(bk.to_host(kernel_block(bk.take_rows(self.X, idx), self.X, self.kernel,
                                                  dtype=np.float64)), dtype=np.float64)

    def _compute(self, idx: np.ndarray) -> np.ndarray:
        self.computed += idx.size
        return self._kernel(idx)

    def _ensure_full(self, idx: np.ndarray) -> None:
        """The rows ``idx`` of the whole Gram matrix, computed if not yet."""
        if (self.slot[idx] >= 0).all():
            return
        with self.lock:
            missing = np.unique(idx[self.slot[idx] < 0])
            for start in range(0, missing.size, _CHUNK):
                part = missing[start:start + _CHUNK]
                self.rows[part] = self._compute(part)
                self.slot[part] = part

    def _ensure(self, idx: np.ndarray) -> bool:
        """Whether the rows ``idx`` are (now) in the block; caller holds the lock."""
        missing = np.unique(idx[self.slot[idx] < 0])
        if missing.size == 0:
            return True
        if missing.size > self.capacity - self.used:
            if np.unique(idx).size > self.capacity:
                return False
            self.slot[:] = -1
            self.used = 0
            missing = np.unique(idx)
        for start in range(0, missing.size, _CHUNK):
            part = missing[start:start + _CHUNK]
            self.rows[self.used:self.used + part.size] = self._compute(part)
            self.slot[part] = np.arange(self.used, self.used + part.size)
            self.used += part.size
        return True

    def matrix(self) -> np.ndarray:
        """The whole n × n Gram matrix (its missing rows computed now); only when it fits the budget.

        Threads that ask at once share the work: each takes the next block of 256 rows nobody
        computes yet, then waits for the blocks others took (the folds of one kernel start on
        both threads of a 2-core host together: the second no longer waits idle for the first's
        whole matrix)."""
        if not self.full:
            raise ValueError("the Gram matrix does not fit this cache's budget")
        block = None     # float32 rows: this thread's float64 block, rounded into them
        while True:
            with self.cond:
                todo = np.flatnonzero(self.block_state == _TODO)
                if todo.size == 0:
                    if (self.block_state == _DONE).all():
                        return self.rows
                    self.cond.wait()
                    continue
                b = int(todo[0])
                part = np.arange(b * _CHUNK, min(self.n, (b + 1) * _CHUNK))
                if (self.slot[part] >= 0).all():
                    self.block_state[b] = _DONE
                    continue
                self.block_state[b] = _CLAIMED
            try:
                # written in place (rows no other thread writes or reads before they are done), in
                # blocks of 64 rows: one γ of a 5,000-row Gram matrix took 0.137 s of thread time
                # against 0.157 s computed by 256 rows and copied (load average 5.4, same values)
                r0, r1 = int(part[0]), int(part[-1]) + 1
                if self.rows.dtype != np.float64 and block is None:
                    block = np.empty((_CHUNK, self.n))
                out = self.rows[r0:r1] if block is None else block[:r1 - r0]
                kernel_block(self.X[r0:r1], self.X, self.kernel, dtype=np.float64, out=out, block_rows=_GRAM_BLOCK,
                             compiled=True)
                if block is not None:
                    self.rows[r0:r1] = out
            except BaseException:
                with self.cond:
                    self.block_state[b] = _TODO
                    self.cond.notify_all()
                raise
            with self.cond:
                self.computed += part.size
                self.slot[part] = part
                self.block_state[b] = _DONE
                self.cond.notify_all()

    def weighted_sum(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """Σⱼ coefⱼ K(x_{idx_j}, X): the (n,) kernel expansion of the rows ``idx``."""
        out = np.zeros(self.n)
        for start in range(0, idx.size, self.step):
            part, c = idx[start:start + self.step], coef[start:start + self.step]
            if self.full:
                self._ensure_full(part)
                out += c @ self.rows[part]
                continue
            with self.lock:
                if self._ensure(part):
                    out += c @ self.rows[self.slot[part]]
                    continue
            out += c @ self._compute(part)
        return out

    def gram(self, idx: np.ndarray) -> np.ndarray | None:
        """The Gram block K[idx, idx] (C-contiguous float64), or None when it does not fit."""
        if self.full:
            self._ensure_full(idx)
            return np.ascontiguousarray(self.rows[np.ix_(idx, idx)])
        if 16 * idx.size * idx.size > self.budget:
            return None
        with self.lock:
            if not self._ensure(idx):
                return None
            return np.ascontiguousarray(self.rows[np.ix_(self.slot[idx], idx)])


@dataclass
class GridProblem:
    """The data of one fold: its training rows and each row's weight.

    Attributes
    ----------
    rows : (n_f,) int64 indices into X of the fold's training rows
    weight : (n_f,) float64 Cᵢ/C of each of those rows (sample × class weight); rows of
        weight ≤ 0 are left out of every problem (their αᵢ are 0), as LIBSVM does
    held_out : (n_t,) int64 indices into X of rows to score the fold's models on (its test
        rows), or None.  The compiled SMO's models carry their decision values on these rows
        (:class:`~gpuksvm.solvers.smo.svc.HeldOutDecisions`; dense float64 X only)
    """

    rows: np.ndarray
    weight: np.ndarray
    held_out: np.ndarray | None = None


@dataclass
class _Binary:
    """A solved binary problem: global SV rows, their yα, the intercept, Σⱼ yⱼαⱼK(xⱼ, x) at every
    row x of X (the next problem's seed), the work done."""

    sv: np.ndarray
    coef: np.ndarray
    intercept: float
    expansion: np.ndarray | None      # None: solved by one LIBSVM fit on its rows (_solve_whole)
    bound: "_BoundSum | None"
    objective: float
    n_iter: int
    rounds: int
    seconds: float


@dataclass
class _BoundSum:
    """S = Σ_{j∈B} yⱼwⱼ K(xⱼ, ·) over the bounded support vectors B (αⱼ = C·wⱼ), over all rows of X.

    The expansion of a solution is C·S plus the free SVs' terms.  At small C
    most SVs are bounded and stay so from one LIBSVM round to the next, from
    one C to the next and from fold to fold, so S is updated by the rows that
    join or leave B (or change yⱼwⱼ) instead of summed again: the kernel rows
    read per check fall from all SVs to the free ones and the changes.
    """

    rows: np.ndarray
    coef: np.ndarray
    total: np.ndarray

    @classmethod
    def empty(cls, n: int) -> "_BoundSum":
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(n))

    def copy(self) -> "_BoundSum":
        return _BoundSum(self.rows, self.coef, self.total.copy())

    def update(self, cache: KernelRows, rows: np.ndarray, coef: np.ndarray) -> None:
        """Make B the global ``rows`` with yⱼwⱼ = ``coef``."""
        union = np.union1d(self.rows, rows)
        old = np.zeros(union.size)
        old[np.searchsorted(union, self.rows)] = self.coef
        new = np.zeros(union.size)
        new[np.searchsorted(union, rows)] = coef
        diff = new - old
        changed = np.flatnonzero(diff)
        if changed.size:
            self.total += cache.weighted_sum(union[changed], diff[changed])
        order = np.argsort(rows, kind="stable")
        self.rows, self.coef = rows[order], coef[order]


def _libsvm_subproblem(cache: KernelRows, R: np.ndarray, y: np.ndarray, w: np.ndarray, C: float,
                       tol: float, cache_bytes: int) -> tuple[np.ndarray, int]:
    """LIBSVM on the rows R (global): αᵢ of each row of R, the iterations.

    With the Gram block in the cache, LIBSVM's own entry point is called
    directly (scikit-learn's ``sklearn.svm._libsvm.fit``, what ``SVC.fit``
    calls after its checks): ``SVC.fit``'s validation of the |A|² block cost
    ≈5 ms a call, a third of the engine's time on ijcnn1 (cProfile, 75 calls
    per γ).  Where that module is missing, and for the rows themselves,
    scikit-learn's SVC runs (:func:`gpuksvm.solvers.smo.host._libsvm_fit`).
    The intercept is recomputed by the caller over the whole problem.
    """
    G = cache.gram(R)
    if G is not None and _LIBSVM is not None:
        _LIBSVM.set_verbosity_wrap(0)   # as SVC.fit(verbose=False) sets it before every call
        out = _LIBSVM.fit(G, (y > 0).astype(np.float64), svm_type=0, sample_weight=np.ascontiguousarray(w),
                          class_weight=np.empty(0), kernel=PRECOMPUTED, C=float(C), nu=0.5, probability=0,
                          degree=3, shrinking=1, tol=float(tol), cache_size=max(cache_bytes / 2**20, 1.0),
                          coef0=0.0, gamma=0.0, epsilon=0.1, max_iter=-1, random_seed=0)
        support, coef, n_iter = out[0], out[3], out[8]
    else:
        data, kern = (G, PRECOMPUTED) if G is not None else (problem_data(cache.X, R, cache.kernel), cache.kernel)
        svc, _ = _libsvm_fit(data, y, kern, C, tol, None, w, cache_bytes, False)
        support, coef, n_iter = svc.support_, svc.dual_coef_, svc.n_iter_
    coef = np.asarray(coef.toarray() if sp.issparse(coef) else coef, dtype=np.float64).ravel()
    alpha = np.zeros(R.size)
    alpha[np.asarray(support, dtype=np.int64)] = np.abs(coef)
    return alpha, int(np.asarray(n_iter).ravel()[0])


def _solve_whole(cache: KernelRows, R: np.ndarray, y: np.ndarray, w: np.ndarray, C: float, tol: float,
                 cache_bytes: int, t0: float, rounds: int) -> _Binary:
    """The C-SVC on the rows R by one LIBSVM fit on the rows themselves (LIBSVM computes its kernel
    rows, in its own cache of ``cache_bytes``): the independent fit, for a problem whose support
    vectors outnumber the rows the shared cache holds (no expansion: the next C starts cold)."""
    weight = np.zeros(cache.n)          # _solve_libsvm reads the weights of its rows from all rows'
    weight[R] = w
    res = _solve_libsvm(cache.X, y, R, cache.kernel, C, tol, None, weight, cache_bytes, warn=False)
    return _Binary(sv=res.support, coef=res.dual_coef, intercept=res.intercept, expansion=None, bound=None,
                   objective=res.objective, n_iter=res.n_iter, rounds=rounds + 1,
                   seconds=time.perf_counter() - t0)


def _solve_binary(cache: KernelRows, R: np.ndarray, y: np.ndarray, w: np.ndarray, C: float,
                  seed: _Binary | None, tol: float, cache_bytes: int) -> _Binary:
    """The C-SVC on the rows R (global, labels y = ±1, Cᵢ = C·wᵢ), by active-set chunking.

    Out of its depth where the support vectors outnumber the rows the cache holds (a block of the
    budget, not the whole Gram matrix): the check of the whole problem then recomputes the kernel
    rows of every free SV over all rows in every round.  On 10,000 adult rows (123 sparse
    features, 3 γ × 4 C, 5 folds, about 3,000 SVs a fold against a cache of 1,677 rows) the
    search took 697 s where scikit-learn's independent fits took 175 s (one γ of it, 4 C: 50 s
    against 38 s for scikit-learn's on 2 processes, the same scores).  Such a problem (its first
    subproblem's SVs, or its seed's, more than the cache's rows) is solved by one LIBSVM fit on its
    rows (:func:`_solve_whole`); the next C of its path starts cold."""
    t0 = time.perf_counter()
    n = R.size
    Cv = C * w
    if seed is not None and seed.expansion is None:     # solved whole: no expansion to seed from
        seed = None
    if seed is not None and not cache.full and seed.sv.size > cache.capacity:
        return _solve_whole(cache, R, y, w, C, tol, cache_bytes, t0, 0)
    if seed is None or seed.sv.size == 0:
        inA = np.zeros(n, dtype=bool)
        inA[np.linspace(0, n - 1, min(n, max(_COLD_ROWS, n // _COLD_FRACTION))).astype(np.int64)] = True
        if not ((y[inA] > 0).any() and (y[inA] < 0).any()):
            inA[:] = True
    else:
        margin = y * (seed.expansion[R] + seed.intercept)
        inA = (margin < 1.0) | np.isin(R, seed.sv)
        # and the rows closest to the margin outside it: most new support vectors come from there
        near = np.flatnonzero(~inA & (margin < 1.0 + _SEED_MARGIN))
        extra = max(int(inA.sum()) // _SEED_SHARE, _MIN_ADD // 8)
        if near.size > extra:
            near = near[np.argsort(margin[near], kind="stable")[:extra]]
        inA[near] = True
        if not ((y[inA] > 0).any() and (y[inA] < 0).any()):
            inA[:] = True
    n_iter = rounds = 0
    bound = _BoundSum.empty(cache.n) if seed is None else seed.bound.copy()
    while True:
        A = np.flatnonzero(inA)
        alphaA, it = _libsvm_subproblem(cache, R[A], y[A], w[A], C, tol, cache_bytes)
        n_iter += it
        rounds += 1
        alpha = np.zeros(n)
        alpha[A] = alphaA
        sv = np.flatnonzero(alpha > 0)
        if not cache.full and sv.size > cache.capacity:
            return _solve_whole(cache, R, y, w, C, tol, cache_bytes, t0, rounds)
        coef = y[sv] * alpha[sv]
        at_c = alpha >= Cv * (1.0 - 1e-12)
        free = sv[~at_c[sv]]
        bound.update(cache, R[at_c & (alpha > 0)], (y * w)[at_c & (alpha > 0)])
        expansion = C * bound.total + cache.weighted_sum(R[free], y[free] * alpha[free])
        f0 = expansion[R]
        F = y - f0
        if inA.all():
            break
        up = ((y > 0) & (alpha < Cv)) | ((y < 0) & (alpha > 0))
        low = ((y < 0) & (alpha < Cv)) | ((y > 0) & (alpha > 0))
        m, M = F[up].max(initial=-np.inf), F[low].min(initial=np.inf)
        if m - M < tol:
            break
        mA = F[up & inA].max(initial=-np.inf)
        MA = F[low & inA].min(initial=np.inf)
        # rows outside A have α = 0: +1 rows are in I_up only, −1 rows in I_low only
        out_up, out_low = ~inA & (y > 0), ~inA & (y < 0)
        # how far each row outside A violates against A's extreme multipliers
        viol = np.where(out_up, F - MA, np.where(out_low, mA - F, -np.inf))
        add = np.flatnonzero(viol >= tol)
        if add.size == 0:   # the gap is made by rows outside A only: the most violating of each side
            add = np.array([np.flatnonzero(side)[pick(F[side])] for side, pick in
                            ((out_up, np.argmax), (out_low, np.argmin)) if side.any()], dtype=np.int64)
        elif add.size > max(A.size // 2, _MIN_ADD):
            add = add[np.argsort(-viol[add], kind="stable")[:max(A.size // 2, _MIN_ADD)]]
        inA[add] = True
    obj = 0.5 * float(coef @ f0[sv]) - float(alpha[sv].sum())
    # LIBSVM's ρ over the whole problem: with no free αᵢ it is the middle of bounds that the rows
    # outside A take part in (with free ones, the mean over them: the subproblem's own, all in A)
    b = intercept_from_F(F, alpha, y, Cv)
    return _Binary(sv=R[sv], coef=coef, intercept=b, expansion=expansion, bound=bound, objective=obj,
                   n_iter=n_iter, rounds=rounds, seconds=time.perf_counter() - t0)


def _pairs(n_classes: int) -> list[tuple[int, int]]:
    return list(combinations(range(n_classes), 2))


def _pair_problem(yidx: np.ndarray, fold: GridProblem, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray,
                                                                                   np.ndarray]:
    """Global rows, ±1 labels (+1 for ``hi``) and weights of pair (lo, hi) in a fold."""
    local, lab = problem_rows(yidx[fold.rows], hi, lo)
    keep = fold.weight[local] > 0
    local = local[keep]
    return fold.rows[local], lab[keep], fold.weight[local]


def _as_result(b: _Binary, fold_pos: np.ndarray) -> SMOResult:
    order = np.argsort(fold_pos[b.sv], kind="stable")
    return SMOResult(support=fold_pos[b.sv][order], dual_coef=b.coef[order], intercept=b.intercept,
                     objective=b.objective, n_iter=b.n_iter, converged=True, solver="libsvm",
                     max_iter_reached=False)


@dataclass
class GridJob:
    """One kernel's folds × C values: what :func:`solve_grids` solves with one kernel cache.

    Attributes
    ----------
    kernel : Kernel (γ resolved), the same for every fold
    folds : the folds' training rows and weights
    Cs : the C values (any order; each fold solves them ascending)
    tol : stopping tolerance of the full problems (LIBSVM's eps)
    cache_bytes : LIBSVM's own kernel cache for each subproblem
    """

    kernel: Kernel
    folds: Sequence[GridProblem]
    Cs: Sequence[float]
    tol: float = 1e-3
    cache_bytes: int = 200 * 2**20


@dataclass
class GridSolution:
    """What :func:`solve_grids` returns for a job.

    Attributes
    ----------
    results : results[f][c] — the model of fold f at ``Cs[c]`` (support indices into the
        fold's rows, as a fit on ``X[folds[f].rows]`` gives); None after an error
    seconds : seconds[f][c] — solver time of that model (its own LIBSVM calls and checks)
    rounds : rounds[f][c] — LIBSVM calls it took, all pairs
    kernel_seconds : time spent computing the job's kernel rows (shared by all its models)
    kernel_rows : kernel rows computed
    error : the exception that stopped the job, if any
    engine : which engine solved it: ``"smo-gram"`` (the compiled SMO on the Gram matrix) or
        ``"libsvm-active-set"``
    capped : capped[f][c] — binary problems of that model the compiled SMO stopped at its step cap
        (:data:`gpuksvm.solvers.smo.gram_smo.MAX_ITER`) before the gap reached ``tol``
    whole : whole[f][c] — binary problems of that model the active-set engine solved by one LIBSVM
        fit on their rows (their support vectors outnumbered the cached kernel rows)
    """

    results: list
    seconds: list
    rounds: list
    capped: list = field(default_factory=list)
    whole: list = field(default_factory=list)
    kernel_seconds: float = 0.0
    kernel_rows: int = 0
    error: BaseException | None = None
    engine: str = ENGINE_ACTIVE_SET


class _SpareGrams:
    """The memory of the Gram matrices of the jobs that ended, for the next job's (same n × n).

    A job started later writes its Gram matrix over a dropped one instead of allocating its own:
    the pages of a fresh 200 MB matrix are mapped by the kernel on first write, which is much of
    the time of its computation.  Measured on the 2-core AMD EPYC host (NumPy asks for huge pages):
    two fresh 5,000 × 5,000 matrices written by a product took 0.09–1.27 s, depending on how
    fragmented the host's memory was, against 0.07 s for the product into written memory.  On two
    threads the 5-fold 3-γ ijcnn1 grid keeps one matrix at a time: the second and third γ write
    over the first's memory."""

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def give(self, rows: np.ndarray) -> None:
        with self._lock:
            self._free.append(rows)

    def take(self) -> np.ndarray | None:
        with self._lock:
            return self._free.pop() if self._free else None


class _JobState:
    """A job being solved: its kernel cache (built by the first task that needs it, dropped after
    the last), the first C's solution of the fold solved first (the others' seed)."""

    def __init__(self, job: GridJob, slots: threading.Semaphore, spare_grams: "_SpareGrams") -> None:
        self.job = job
        k = len(job.Cs)
        self.out = GridSolution(results=[[None] * k for _ in job.folds], seconds=[[0.0] * k for _ in job.folds],
                                rounds=[[0] * k for _ in job.folds], capped=[[0] * k for _ in job.folds],
                                whole=[[0] * k for _ in job.folds])
        self.cache: KernelRows | None = None
        self.first: dict[tuple[int, int], _Binary] | None = None
        # per fold: the rows its models are scored on and their content key (None: not kept)
        self.held: list[tuple[np.ndarray, tuple] | None] = [None] * len(job.folds)
        self.unsolved = [len(job.Cs)] * len(job.folds)     # the compiled SMO's C values to solve, per fold
        # the compiled SMO: seed_of[c] is the C whose solution (of the same fold) C index c starts
        # from, scaled (set by solve_grids); the solutions kept until their one reader has them
        self.seed_of: dict[int, int] = {}
        self._solutions: dict[tuple[int, int], list] = {}
        self.left = len(job.folds)
        # the caches that may live at once (shared by the jobs of one solve_grids call), and
        # whether this job holds one of them
        self.slots = slots
        self.holds_slot = False
        self.spare_grams = spare_grams
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)

    def solved(self, f: int, c: int, solutions: list) -> None:
        """Fold f's (α, ∇) of every binary problem at C index c, kept when a later C starts from it."""
        if c in self.seed_of.values():
            with self.cond:
                self._solutions[f, c] = solutions
                self.cond.notify_all()

    def wait_for_seeds(self, f: int, c: int) -> list | None:
        """The solutions C index c of fold f starts from (None: from α = 0), once they are solved.
        The task that solves them was given to the threads before this one, so it is running or
        done (or its job failed: then None)."""
        if c not in self.seed_of:
            return None
        key = (f, self.seed_of[c])
        with self.cond:
            while key not in self._solutions and self.out.error is None:
                self.cond.wait(timeout=1.0)
            return self._solutions.pop(key, None)


def _fold_path(st: _JobState, f: int, X: Any, yidx: np.ndarray, classes: np.ndarray, budget: int,
               cs: Sequence[int] | None = None) -> None:
    """Fold f of a job: by the compiled SMO at the C values ``cs`` (indices into the job's Cs), else
    by LIBSVM on active sets at every C, ascending, each solve seeded by the previous one."""
    job = st.job
    with st.lock:
        if st.out.error is not None:
            return
        if st.cache is None:
            # a cache of its own once another job's is dropped: the tasks of the jobs before this
            # one were all given to the threads before this task, so they end without it
            st.slots.acquire()
            st.holds_slot = True
            t0 = time.perf_counter()
            st.cache = KernelRows(X, job.kernel, budget, rows=st.spare_grams.take(),
                                  dtype=np.float32 if st.out.engine == ENGINE_GRAM else np.float64)
            st.out.kernel_seconds = time.perf_counter() - t0
        cache = st.cache
    fold = job.folds[f]
    pos = np.full(yidx.shape[0], -1, dtype=np.int64)
    pos[fold.rows] = np.arange(fold.rows.size)
    pairs = _pairs(classes.shape[0])
    problems = [_pair_problem(yidx, fold, lo, hi) for lo, hi in pairs]
    Xf = bk.take_rows(X, fold.rows)
    if st.out.engine == ENGINE_GRAM:
        t0, before = time.perf_counter(), cache.computed
        G = cache.matrix()
        if cache.computed > before:      # this path computed (some of) the Gram matrix
            with st.lock:
                st.out.kernel_seconds += time.perf_counter() - t0
        # every C of the fold in one call: ascending, so a seeded C comes after its seed
        every = [int(c) for c in np.argsort(np.asarray(job.Cs, dtype=np.float64), kind="stable")]
        _fold_path_gram(st, f, G, pos, problems, Xf, yidx, classes, every if cs is None else cs)
        return
    seeds = st.first or {}
    for k, c in enumerate(np.argsort(np.asarray(job.Cs, dtype=np.float64), kind="stable")):
        solved = {p: _solve_binary(cache, R, lab, w, float(job.Cs[c]), seeds.get(p), job.tol, job.cache_bytes)
                  for p, (R, lab, w) in zip(pairs, problems)}
        st.out.results[f][c] = ovo_model([_as_result(solved[p], pos) for p in pairs], Xf, yidx[fold.rows],
                                         classes, job.kernel, bk.CPU, np.float64)
        st.out.seconds[f][c] = sum(b.seconds for b in solved.values())
        st.out.rounds[f][c] = sum(b.rounds for b in solved.values())
        st.out.whole[f][c] = sum(b.expansion is None for b in solved.values())
        if k == 0 and st.first is None:
            st.first = solved      # a later fold's first C starts from here (Wen et al. 2017)
        seeds = solved


def _fold_path_gram(st: _JobState, f: int, G: np.ndarray, pos: np.ndarray, problems: list, Xf: Any,
                    yidx: np.ndarray, classes: np.ndarray, cs: Sequence[int]) -> None:
    """Fold f of a job at the C values ``cs`` by the compiled SMO on the Gram matrix G, from α = 0
    or, for a C of :attr:`_JobState.seed_of`, from the solution of the C below it, scaled to this
    one or as it is (:func:`_seed`; waiting for it; see the module docstring)."""
    job = st.job
    rows = job.folds[f].rows
    cap = gram_smo.MAX_ITER
    held = st.held[f]
    for c in cs:
        C = job.Cs[c]
        seeds = st.wait_for_seeds(f, c)
        t0 = time.perf_counter()
        results, solutions = [], []
        for k, (R, lab, w) in enumerate(problems):
            Cv = float(C) * w
            start = (None, None) if seeds is None else _seed(seeds[k], float(C) / float(job.Cs[st.seed_of[c]]))
            alpha, grad, n_iter = gram_smo.solve_on_gram(G, R, lab, Cv, *start, tol=job.tol, max_iter=cap)
            solutions.append((alpha, grad))
            sv = np.flatnonzero(alpha > 0)
            sv = sv[np.argsort(pos[R[sv]], kind="stable")]
            results.append(SMOResult(
                support=pos[R[sv]], dual_coef=lab[sv] * alpha[sv],
                intercept=intercept_from_F(-lab * grad, alpha, lab, Cv),
                objective=float(0.5 * np.dot(alpha, grad - 1.0)), n_iter=n_iter,
                converged=n_iter < cap, solver="smo", max_iter_reached=n_iter >= cap))
        st.out.results[f][c] = ovo_model(results, Xf, yidx[rows], classes, job.kernel, bk.CPU, np.float64)
        st.solved(f, c, solutions)
        st.out.seconds[f][c] = time.perf_counter() - t0
        st.out.rounds[f][c] = len(problems)
        st.out.capped[f][c] = sum(r.max_iter_reached for r in results)
        with st.lock:
            st.unsolved[f] -= 1
            last = st.unsolved[f] == 0
        if last and held is not None:     # every C of the fold solved: their held-out values
            t0 = time.perf_counter()
            st.out.results[f] = _with_held_out_decisions(held, Xf, job.kernel, st.out.results[f])
            st.out.seconds[f] = [t + (time.perf_counter() - t0) / len(job.Cs) for t in st.out.seconds[f]]


def _seed(solution: tuple[np.ndarray, np.ndarray], ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """The start at C' = ratio·C (ratio ≥ 1) from a solution (α, ∇) at C: of α itself (still in the
    larger box [0, C'wᵢ], yᵀα = 0, its gradient unchanged) and α scaled to ratio·α (DeCoste &
    Wagstaff 2000: in the box, yᵀα' = 0, gradient ratio·(∇ + e) − e), the one of the lower dual
    objective ½αᵀQα − eᵀα, from ∇ alone (no kernel row).  Scaling suits a solution whose support
    vectors sit at the bound (small C), keeping it one whose support vectors are free (large C).
    Measured (two folds of a random 5,000 ijcnn1 rows, γ ∈ {0.5, 1, 2}, 8 C from 0.1 to 1,000,
    each problem from α = 0, scaled and as it is, thread time, quiet 2-core host): 2.47 s from 0,
    1.98 s always scaled, 2.06 s always as it is, 1.74 s the lower objective's, 1.71 s the faster
    of the two each time."""
    alpha, grad = solution
    scaled_alpha, scaled_grad = ratio * alpha, ratio * (grad + 1.0) - 1.0
    # ½αᵀQα − eᵀα = ½αᵀ(∇ − e) for a gradient ∇ = Qα − e
    if np.dot(scaled_alpha, scaled_grad - 1.0) <= np.dot(alpha, grad - 1.0):
        return scaled_alpha, scaled_grad
    return alpha, grad


def _with_held_out_decisions(held: tuple[np.ndarray, tuple], Xf: np.ndarray, kernel: Kernel,
                             models: list[KernelSVCResult]) -> list[KernelSVCResult]:
    """The models of one fold (all its C values; ``Xf``: its training rows, which their support
    indices point to) with their decision values on the rows ``held[0]`` (content key ``held[1]``).

    The kernel values K(x, svₛ) are computed once for all C values, over the union of the models'
    support vectors, by :func:`~gpuksvm.kernels.kernel.kernel_block`, as a prediction computes
    them (a kernel block does not depend on the other rows and columns of the block): 1,000
    held-out rows against about 1,200 SVs of the 5,000-row ijcnn1 grid take about 3 ms, where a
    gather of the same values from the Gram matrix took 15 ms (it reads about whole rows of G).
    Each model's values are then one product with its coefficients placed at its support
    vectors' columns (zeros elsewhere: the same sums but for their rounding)."""
    Xt, key = held
    union = np.unique(np.concatenate([m.support for m in models]))
    block = np.asarray(kernel_block(Xt, bk.take_rows(Xf, union), kernel, dtype=np.float64, compiled=True))
    out = []
    for m in models:
        W = np.zeros((union.size, m.intercept.shape[0]))
        W[np.searchsorted(union, m.support)] = pair_coef(m.dual_coef, m.n_support, m.classes.shape[0])
        values = block @ W
        values += m.intercept[None, :]
        out.append(replace(m, held_out=HeldOutDecisions(key=key, values=values)))
    return out


def gram_fits(n: int, budget: int) -> bool:
    """Whether :func:`solve_grids` solves a job of ``n`` rows by the compiled SMO on its Gram matrix:
    numba imported and n × n float64 within ``budget`` bytes (a job's share: the float32 matrix and
    the float64 blocks it is computed in)."""
    return gram_smo.AVAILABLE and 8 * n * n <= budget


def c_chains(Cs: Sequence[float], n_chains: int) -> tuple[dict[int, int], list[int]]:
    """A fold's C values (indices into ``Cs``) as ``n_chains`` ascending chains of consecutive
    values: (seed_of — each C after the first of its chain → the C below it, whose solution it
    starts from —, the order the tasks are given to the threads: the chains' first Cs, then their
    second ones, ...)."""
    ascending = [int(c) for c in np.argsort(np.asarray(Cs, dtype=np.float64), kind="stable")]
    chains = [list(part) for part in np.array_split(ascending, max(1, min(int(n_chains), len(ascending))))]
    seed_of = {int(c): int(below) for chain in chains for below, c in zip(chain[:-1], chain[1:])}
    order = [int(chain[i]) for i in range(max(len(ch) for ch in chains)) for chain in chains if i < len(chain)]
    return seed_of, order


def solve_grids(X: Any, yidx: np.ndarray, classes: np.ndarray, jobs: Sequence[GridJob], *,
                budget: int | None = None, n_jobs: int | None = None) -> list[GridSolution]:
    """The one-vs-one C-SVC of every fold of every job at every C, sharing kernel rows and
    solutions within a job (CPU).

    The (job, fold) paths — for the compiled SMO the (job, fold, C) problems,
    C ascending — run in ``n_jobs`` threads, job by job: a job's kernel
    rows are computed by the first of its tasks that starts (the Gram matrix:
    by all that start before it is done, block by block) and dropped after
    its last.  At most ``min(n_jobs, len(jobs))`` caches live at once, each
    within an equal share of ``budget``; where the n × n Gram matrix fits the
    whole budget, as many Gram matrices as keep the threads busy (a job gives
    them one task per fold at a time, so ⌈threads / folds⌉) and the budget
    holds, so that more threads never turn the compiled SMO into the
    active-set engine (a job's first task waits for a cache to be dropped, and
    its Gram matrix reuses the dropped one's memory: :class:`_SpareGrams`).
    Two threads on the 5-fold 3-γ ijcnn1 grid (5,000 rows) took 1.88 s with
    one Gram matrix at a time against 2.05 s with two (medians of eight runs
    alternating in one process, 2-core AMD EPYC host).  On a 16-core host the
    3-γ ijcnn1 grid (5,000 rows) had run on active sets, every job's share
    (the default 512 MiB over 3) below its 200 MB Gram matrix, and took
    3.3–4.1 s against scikit-learn's SVC search's 1.5–4.1 s.  Threads that
    the folds of the matrices alive leave idle (more threads than alive
    matrices × folds) get C paths of their own: each fold's C values split into
    ⌈threads / (alive × folds)⌉ ascending chains (:func:`c_chains`), each
    chain's first C from α = 0 — more steps in all, on threads that would
    otherwise wait.  Paths of the
    same job overlap: a fold that starts while no fold of its job has solved
    its first C yet starts cold.

    Parameters
    ----------
    X : (n, d) host array or CSR matrix, all rows (the folds index into it)
    yidx : (n,) class index of every row, into ``classes``
    classes : (K,) class labels; every fold must hold every class with a positive weight
    jobs : the kernels, folds and C values
    budget : bytes for the shared kernel rows of all jobs (default: the CPU memory budget)
    n_jobs : threads, as scikit-learn's ``n_jobs`` (−1: every core); an explicit value is obeyed
        whatever the load.  None: every core, or one when the load average already fills them
        (:func:`gpuksvm.array.blas_threads.host_busy`)

    Returns
    -------
    list of GridSolution, one per job (an error stops its job only)
    """
    yidx = np.asarray(yidx, dtype=np.int64)
    Xh = bk.to_host(X)
    budget = bk.memory_budget(bk.CPU) if budget is None else int(budget)
    n_paths = sum(len(job.folds) for job in jobs)
    # a host whose load already fills its cores runs the paths in one thread: at load 5 on 2
    # cores two threads took 6.2 and 8.4 s for the 3-γ ijcnn1 grid, one thread 5.3 and 5.7 s
    # (the threads' CPU time grew by 15–30 %: they only contend there)
    # the compiled SMO's tasks can run a fold's C values on threads of their own (c_chains)
    n_units = sum(len(job.folds) * len(job.Cs) for job in jobs) if gram_fits(yidx.shape[0], budget) else n_paths
    workers = 1 if n_jobs is None and host_busy() else _n_workers(n_jobs, max(n_units, 1))
    alive = max(min(workers, len(jobs)), 1)             # caches at once
    n_folds = max(max((len(job.folds) for job in jobs), default=1), 1)
    if gram_fits(yidx.shape[0], budget):
        # as many Gram matrices as keep the threads busy and the budget holds: a job gives the
        # threads one task per fold at a time (each C starts from the one below it)
        alive = max(1, min(alive, -(-workers // n_folds), budget // (8 * yidx.shape[0] ** 2)))
    share = budget // alive
    # threads the alive jobs' folds leave idle get C paths of their own: each fold's C values split
    # into that many ascending chains, each chain's first C from α = 0
    n_chains = max(1, -(-workers // (alive * n_folds)))
    slots = threading.BoundedSemaphore(alive)
    spare_grams = _SpareGrams()
    states = [_JobState(j, slots, spare_grams) for j in jobs]
    tasks: list[tuple[_JobState, int, list[int] | None]] = []
    for st in states:
        folds = range(len(st.job.folds))
        if gram_fits(yidx.shape[0], share):
            # one task per (fold, C), C ascending and the folds of one C together: each C after
            # the first starts from the solution of the one below it, whose task is given to the
            # threads before it (every fold's, while there are at least as many folds as threads)
            st.out.engine = ENGINE_GRAM
            st.seed_of, order = c_chains(st.job.Cs, n_chains)
            mine = [(st, f, [c]) for c in order for f in folds]
        else:   # the active-set engine seeds each C of a fold from the previous one: one task per fold
            mine = [(st, f, None) for f in folds]
        st.left = len(mine)
        if st.out.engine == ENGINE_GRAM and isinstance(Xh, np.ndarray) and Xh.dtype == np.float64:
            # the rows the models are scored on, dense float64 (a model of float32 rows predicts
            # in float32), and their content keys
            held = [None if fold.held_out is None else bk.take_rows(Xh, fold.held_out) for fold in st.job.folds]
            st.held = [None if Xt is None else (Xt, content_key(Xt)) for Xt in held]
        tasks.extend(mine)

    def run(task: tuple[_JobState, int, list[int] | None]) -> None:
        st, f, cs = task
        try:
            _fold_path(st, f, Xh, yidx, classes, share, cs)
        except Exception as exc:  # the job's models are refused; the caller decides what follows
            with st.cond:
                st.out.error = exc
                st.cond.notify_all()     # a task waiting for a seed of this job stops waiting
        with st.lock:
            st.left -= 1
            if st.left == 0:
                if st.cache is not None:
                    st.out.kernel_rows = st.cache.computed
                    if st.cache.full:
                        st.spare_grams.give(st.cache.rows)
                    st.cache = None
                if st.holds_slot:
                    st.holds_slot = False
                    st.slots.release()

    with one_blas_thread():
        if workers == 1:
            for t in tasks:
                run(t)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(bk.in_calling_config(run, share=workers), tasks))
    return [st.out for st in states]


def solve_grid(X: Any, yidx: np.ndarray, classes: np.ndarray, kernel: Kernel, folds: Sequence[GridProblem],
               Cs: Sequence[float], *, tol: float = 1e-3, cache_bytes: int = 200 * 2**20,
               budget: int | None = None, n_jobs: int | None = None) -> GridSolution:
    """:func:`solve_grids` of one job (one kernel); raises the job's error."""
    out = solve_grids(X, yidx, classes, [GridJob(kernel, folds, Cs, tol, cache_bytes)], budget=budget,
                      n_jobs=n_jobs)[0]
    if out.error is not None:
        raise out.error
    return out


def solve_grid_batched(X: Any, yidx: np.ndarray, classes: np.ndarray, kernel: Kernel,
                       folds: Sequence[GridProblem], Cs: Sequence[float], *, tol: float = 1e-3,
                       device: Any = "auto", dtype: Any = None) -> list[list[KernelSVCResult]]:
    """Every pair × fold × C problem in one batched working-set call (the GPU engine).

    Folds whose row weights disagree on a shared row (``class_weight="balanced"``
    weighs each fold's classes by its own counts) go to separate calls: the
    batched solver takes one weight per row.  Parameters and result as
    :func:`solve_grid` (``device``, ``dtype``: where and in which dtype to solve).
    """
    yidx = np.asarray(yidx, dtype=np.int64)
    dev = bk.device_for(device, X)
    dt = bk.resolve_dtype(dtype, dev)
    Xd = bk.gpu_ready(X, dev, dt)
    pairs = _pairs(classes.shape[0])
    batches: list[tuple[np.ndarray, list[int]]] = []
    for f, fold in enumerate(folds):
        for w, members in batches:
            known = ~np.isnan(w[fold.rows])
            if np.array_equal(w[fold.rows][known], fold.weight[known]):
                w[fold.rows] = fold.weight
                members.append(f)
                break
        else:
            w = np.full(yidx.shape[0], np.nan)
            w[fold.rows] = fold.weight
            batches.append((w, [f]))
    out: list[list[Any]] = [[None] * len(Cs) for _ in folds]
    for w, members in batches:
        subsets, labels, Cp, keys = [], [], [], []
        for f in members:
            for lo, hi in pairs:
                R, lab, _ = _pair_problem(yidx, folds[f], lo, hi)
                for c, C in enumerate(Cs):
                    subsets.append(R)
                    labels.append(lab)
                    Cp.append(float(C))
                    keys.append((f, c))
        weight = np.nan_to_num(w, nan=0.0)
        res = solve_batched(Xd, labels, subsets, kernel, Cp, tol=tol, device=dev, dtype=dt,
                            sample_weight=None if np.all(weight == 1.0) else weight,
                            method="working_set", warn_convergence=False)
        per: dict[tuple[int, int], list[SMOResult]] = {}
        for key, r in zip(keys, res):
            per.setdefault(key, []).append(r)
        for f in members:
            rows = folds[f].rows
            pos = np.full(yidx.shape[0], -1, dtype=np.int64)
            pos[rows] = np.arange(rows.size)
            Xf = bk.take_rows(Xd, rows)
            for c in range(len(Cs)):
                # results come in pair order for each (fold, C) (keys were appended pair-major)
                rs = []
                for r in per[f, c]:
                    o = np.argsort(pos[r.support], kind="stable")
                    r.support = pos[r.support][o]
                    r.dual_coef = np.asarray(bk.to_host(r.dual_coef), dtype=np.float64).ravel()[o]
                    rs.append(r)
                out[f][c] = ovo_model(rs, Xf, yidx[rows], classes, kernel, dev, dt)
    return out
