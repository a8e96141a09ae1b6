"""The batched working-set SMO (ThunderSVM, SPEC §6): one outer loop for CPU and GPU.

``method="working_set"``: a working set of ``ws ≤ 1024`` rows per problem
(sized from the memory budget), half of it replaced per round (FIFO), its
``q = ws/2`` new kernel rows computed by one
:func:`gpuksvm.kernels.kernel.kernel_block` call per problem, the ws-variable
subproblem solved by WSS-2 SMO with local tolerance
``max(tol, 0.1·initial local gap)``, then ``F ← F − K_wsᵀ(y∘Δα)`` (one batched
GEMM for all problems).  :func:`solve_working_set` is the outer loop shared by
both devices; only the subproblem solver differs: one CUDA thread block per
problem (``kernels_cuda/smo.cu``, one launch for all problems,
:mod:`gpuksvm.solvers.smo.cuda_launch`) on a GPU, :func:`solve_subproblems_host` (its
NumPy twin and test oracle) on the CPU.  On a GPU that runs out of memory the fit starts again
with the row cache Kws in host memory (one ``MemoryFallbackWarning``): the same rounds, the
device then holding the working sets' Gram and a block of new kernel rows at a time.

The dual, its notation and the shared pieces: :mod:`gpuksvm.solvers.svc_dual`.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from sklearn.exceptions import ConvergenceWarning

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.solvers.smo.cuda_launch import _round_keys_cuda, _solve_subproblems_cuda
from gpuksvm.solvers.svc_dual import (
    SMOResult,
    box_bounds,
    intercept_from_F,
    is_precomputed,
    make_smo_result,
    objective_from_F,
)

__all__ = ["solve_working_set", "solve_subproblems_host", "round_keys_host"]

_ETA_FLOOR = 1e-12
_MAX_WS = 1024
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


def _default_ws(n_max: int, P: int, itemsize: int, dev: bk.Device) -> int:
    """Largest power of two ≤ min(1024, n_max) whose (P, ws, n_max) row buffer fits the budget."""
    ws = 2
    while ws * 2 <= min(_MAX_WS, max(n_max, 2)):
        ws *= 2
    budget = bk.memory_budget(dev)
    while ws > 2 and 2 * P * ws * n_max * itemsize > budget:
        ws //= 2
    return ws


def _problem_rows_kernel(Xp_p: Any, rows_d: Any, kernel: Kernel | str, dt: Any, *, out: Any = None) -> Any:
    """The kernel rows ``rows_d`` of one problem against all its rows (``Xp_p``: its rows, or its
    Gram block with a precomputed kernel), into ``out`` when given."""
    if not is_precomputed(kernel):
        return kernel_block(Xp_p[rows_d], Xp_p, kernel, dtype=dt, out=out)
    if out is None:
        return Xp_p[rows_d]
    out[...] = Xp_p[rows_d]
    return out


def _host_rows(out: np.ndarray, Xp_p: Any, rows_d: Any, kernel: Kernel | str, dt: Any, block: int) -> int:
    """The kernel rows ``rows_d`` of one problem into the host array ``out``, computed on the device
    ``block`` rows at a time (retried smaller on an out-of-memory error,
    :func:`~gpuksvm.array.backend.map_row_blocks`); returns the block size used."""
    def run(s: int, e: int) -> None:
        out[s:e] = bk.to_host(_problem_rows_kernel(Xp_p, rows_d[s:e], kernel, dt))

    return bk.map_row_blocks(run, int(rows_d.shape[0]), block, what="working-set SMO kernel rows")


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
    if xp is np:
        su, sl, stats = round_keys_host(yv, Cvv, alpha, F, np.asarray(widx_keep))
    else:
        su, sl, stats = _round_keys_cuda(yv, Cvv, alpha, F, widx_keep)
    ou = xp.argsort(su, axis=1, kind="stable")[:, :need]     # CuPy sorts stably: ties alike on the CPU
    ol = xp.argsort(sl, axis=1, kind="stable")[:, :need]
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
    X = bk.densified_for(X, dev)
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
    Xp = [Xd[S][:, S] if is_precomputed(kernel) else Xd[S] for S in Sd]
    # padded state (P, n_max + 1); padding rows have y = 0, C = 0 and never move; the last
    # column is a dummy row that empty working-set slots point at (so scatters never collide)
    N1 = n_max + 1
    y_h = np.zeros((P, N1))
    C_h = np.zeros((P, N1))
    for p, S in enumerate(subs):
        y_h[p, : S.size] = ys[p]
        C_h[p, : S.size] = box_bounds(Cs[p], None if sample_weight is None else sample_weight[S], S.size)
    C_box = C_h.astype(dt).astype(np.float64)       # the bounds as the rounds hold them (Cvv below)

    def run_rounds(on_device: int) -> tuple:
        """The round loop from α = 0, the kernel-row cache on the device (1) or in host memory (0)."""
        yv = xp.asarray(y_h, dtype=dt)
        Cvv = xp.asarray(C_h, dtype=dt)
        alpha = xp.zeros((P, N1), dtype=dt)
        F = yv.copy()
        # the kernel rows of every working-set row against its problem's rows (the row cache)
        Kws = (xp if on_device else np).zeros((P, ws, N1), dtype=dt)
        rows_block = [bk.plan_rows(ws, 2 * n_max * dt.itemsize, dev)]    # of the host cache's rows
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
                if on_device:
                    _problem_rows_kernel(Xp[p], rows_d, kernel, dt, out=Kws[p, s0:s0 + int(n_new[p]), : int(sizes[p])])
                else:
                    rows_block[0] = _host_rows(Kws[p, s0:s0 + int(n_new[p]), : int(sizes[p])], Xp[p], rows_d,
                                               kernel, dt, rows_block[0])
            # (3) the subproblems of all problems in one call
            act = ~done
            yw = yv[ar, widx_d]
            Cw = Cvv[ar, widx_d]
            aw = alpha[ar, widx_d]
            Fw = F[ar, widx_d]
            if on_device:
                Kww = xp.take_along_axis(Kws, xp.broadcast_to(widx_d[:, None, :], (P, ws, ws)), axis=2)
            else:
                Kww = xp.asarray(np.take_along_axis(Kws, np.broadcast_to(widx[:, None, :], (P, ws, ws)), axis=2))
            if subproblem == "cuda":
                anew, n_in, _g0 = _solve_subproblems_cuda(Kww, yw, Cw, aw, Fw, act, tol, max_inner)
            else:
                anew, n_in, _g0 = solve_subproblems_host(Kww, yw, Cw, aw, Fw, act, tol, max_inner)
            # (4) F ← F − K_wsᵀ (y ∘ Δα): one batched GEMM for every problem (where the cache is)
            del Kww
            delta = anew - aw
            if on_device:
                F -= xp.matmul((yw * delta)[:, None, :], Kws)[:, 0, :]
            else:
                F -= xp.asarray(np.matmul(np.asarray(bk.to_host(yw * delta))[:, None, :], Kws)[:, 0, :])
            alpha[ar, widx_d] = anew
            n_inner_d += xp.asarray(n_in).astype(xp.int64)       # inactive problems report 0 steps
            rounds += act
            r += 1
        return alpha, F, n_inner_d, rounds, converged, gap

    # on a GPU that runs out of memory the fit starts again with the row cache in host memory (the
    # same rounds: the same kernel rows, working sets, subproblems and updates; the device then
    # holds the working sets' Gram and a block of new kernel rows at a time).  An OOM comes in the
    # first rounds, when Kws, Kww and the kernel rows are first allocated: little work is lost.
    (alpha, F, n_inner_d, rounds, converged, gap), _ = bk.smaller_on_out_of_memory(
        run_rounds, 1, 0 if dev.is_gpu else 1, what="working-set SMO",
        size_text="the kernel-row cache in host memory")
    n_inner_tot = np.asarray(bk.to_host(n_inner_d), dtype=np.int64)
    alpha_h = np.asarray(bk.to_host(alpha), dtype=np.float64)
    F_h = np.asarray(bk.to_host(F), dtype=np.float64)
    out = []
    name = "working_set-cuda" if subproblem == "cuda" else "working_set-cpu"
    for p, S in enumerate(subs):
        n_p = S.size
        # the box the rounds solved in: C in the working dtype (float32(C) can be below C, and an
        # α at that bound is no free α: taken as one, LIBSVM's intercept rule averaged the
        # gradients of hundreds of bounded rows — b = −0.154 instead of −0.922, 2,000 ijcnn1 rows,
        # γ = 0.5, C = 0.3728, float32 — and the CV accuracy of the grid's C values with
        # float32(C) < C was off by up to 3.4 points on the GPU)
        a, f, yy, c = alpha_h[p, :n_p], F_h[p, :n_p], y_h[p, :n_p], C_box[p, :n_p]
        if not converged[p] and warn:
            warnings.warn(f"working-set SMO on problem {p} stopped at gap {gap[p]:.3g} > tol={tol} "
                          f"after {rounds[p]} rounds", ConvergenceWarning, stacklevel=3)
        out.append(make_smo_result(S, a, yy, intercept_from_F(f, a, yy, c), objective_from_F(f, a, yy),
                                int(n_inner_tot[p]), bool(converged[p]), name, xp=xp,
                                n_rounds=int(rounds[p]), dtype=dt,
                                max_iter_reached=max_iter is not None and rounds[p] >= max_iter))
    return out
