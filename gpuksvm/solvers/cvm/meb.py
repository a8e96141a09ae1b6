"""Minimum enclosing ball (MEB) pieces of the Core Vector Machine (SPEC §2).

Two parts, both without estimator logic:

* the furthest-point search, :mod:`gpuksvm.solvers.cvm.scan`: the scores
  s_ℓ = (K̃α)_ℓ of candidate rows (the furthest point is arg-min s, eq. 12–13)
  on the host or in one fused CUDA launch, and the core set's K̃ rows for the QP;

* :func:`fit_core_set`, the core-set loop (§4, Bădoiu–Clarkson) with the
  QP on the core set in :mod:`gpuksvm.solvers.cvm.simplex_qp`.  Each iteration
  draws ``n_tries`` samples of ``sample_size`` rows (the probabilistic
  speed-up, §4.1.2) or scans every row, and uses the scores twice:

  - the stop rule.  With q = αᵀK̃α, the L2-SVM's primal value P at
    (w, b) = (Σαᵢyᵢφ(xᵢ), Σαᵢyᵢ) and ρ = q, and its dual value D = −q,

        P − D = C Σ_ℓ max(0, q − m_ℓ)² − ‖α‖²/C,   m_ℓ = y_ℓ f(x_ℓ) = s_ℓ − [ℓ∈S] α_ℓ/C,

    split into the core set's part (exact, from the QP's gradient) and the
    other rows' part C Σ_{ℓ∉S} max(0, q − s_ℓ)² (estimated by each sample,
    scaled to the n − |S| rows; exact with the full scan).  The fit has
    converged when the core part is ≤ tol·q/2 and every sample's estimate of
    the other part is ≤ tol·q/2: (P − D)/|D| ≤ tol, the relative duality gap of
    the L2-SVM, which also bounds the dual's relative suboptimality.
  - the growth: the violators (s_ℓ < q) of the samples whose estimate exceeds
    its budget join the core set, most violating first, at most 4·sample_size
    per iteration (the paper adds the one furthest point; every violator of
    the KKT conditions is a valid addition, Osuna et al. 1997).  A few SMO
    steps per new core vector re-solve the QP warm; core vectors with α = 0
    strictly inside the ball are dropped again (shrinking).

  Per added core vector the QP computes one K̃ row (|S| kernel values, cached)
  and takes a few O(|S|) steps, the same order as its share of the search —
  no step is O(|S|²) (``history`` counts both).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuksvm.solvers.cvm.scan import (
    GpuScanner,
    HostScanner,
    ScannerBase,
    block_top,
    candidate_scores,
    kernel_scale,
    make_scanner,
    merge_top,
)
from gpuksvm.solvers.cvm.ktilde_cache import DENSE_MAX
from gpuksvm.solvers.cvm.simplex_qp import CoreSetQP

# the search's names are re-exported: callers and tests import them from this module
__all__ = ["CoreSetResult", "fit_core_set", "initial_pair", "HostScanner", "GpuScanner",
           "make_scanner", "candidate_scores", "kernel_scale", "block_top", "merge_top"]


# --------------------------------------------------------------------------- the core-set loop
_INIT_SAMPLE = 256        # rows per class looked at for the initial pair
_SHRINK_FRACTION = 0.1     # shrink the core set when a tenth of it can go (a pass over the cache)
_SMO_STEPS_PER_ADD = 10    # SMO steps per added core vector in its iteration, at most
_MAX_STALLS = 3           # consecutive QP solves that cannot reach the gap target before giving up


@dataclass
class CoreSetResult:
    """Outcome of :func:`fit_core_set` for one MEB problem."""

    core: np.ndarray          # training-row indices of the core vectors
    alpha: np.ndarray         # their α (Σα = 1)
    rho: float                # q = αᵀK̃α, the L2-SVM's ρ
    radius2: float            # R² = κ̃ − q
    b: float                  # Σαᵢyᵢ (0 for one-class)
    y: np.ndarray | None      # labels of the core vectors
    kappa_t: float
    n_iter: int               # search iterations that added core vectors
    n_added: int              # core vectors added (after the initial pair)
    stop: str                 # "converged", "max_iter", "max_core_size" or "stalled"
    search: str               # "exact" or "sampled(<sample_size>)"
    gap: float                # relative duality gap estimate at the stop
    n_smo_steps: int
    history: dict = field(default_factory=dict)


def initial_pair(scanner: "ScannerBase", rows: np.ndarray, y: np.ndarray | None,
                 rs: np.random.RandomState) -> tuple[int, int]:
    """§4.1.1: the closest opposite-class pair of a sample, or (one-class) the Kumar et al. furthest pair.

    The samples are drawn by position in ``rows`` and ties go to the earlier
    row of ``rows``, so the pair depends on the order of ``rows`` only.
    """
    if y is not None:
        pos = rows[y[rows] > 0]
        neg = rows[y[rows] < 0]
        ps = pos if pos.shape[0] <= _INIT_SAMPLE else rs.choice(pos, _INIT_SAMPLE, replace=False)
        ns = neg if neg.shape[0] <= _INIT_SAMPLE else rs.choice(neg, _INIT_SAMPLE, replace=False)
        K = scanner.kernel_between(ps, ns)
        i, j = np.unravel_index(int(np.argmax(K)), K.shape)   # max κ = closest pair
        return int(ps[i]), int(ns[j])
    smp = rows if rows.shape[0] <= 2 * _INIT_SAMPLE else rs.choice(rows, 2 * _INIT_SAMPLE, replace=False)
    z0 = int(smp[rs.randint(smp.shape[0])])
    za = int(smp[int(np.argmin(scanner.kernel_between(np.array([z0]), smp)[0]))])
    kb = scanner.kernel_between(np.array([za]), smp)[0]
    kb[smp == za] = np.inf
    zb = int(smp[int(np.argmin(kb))])
    return za, zb



def _sampled_search(scanner: "ScannerBase", rows: np.ndarray, rs: np.random.RandomState, n_tries: int,
                    sample_size: int, coef: Any, b: float, q: float, scale: float, budget: float,
                    max_add: int) -> tuple[np.ndarray, float, int]:
    """One iteration of the sampled furthest-point search.

    ``n_tries`` fresh samples of ``sample_size`` positions in ``rows`` at once
    (one kernel block; on a GPU one pair of launches).  Each sample estimates the other
    rows' part of the gap, ``scale`` · mean over its rows outside the core set of max(0, q − s)²
    (``scale`` = C·(n − |S|)); the violators (s < q) of the samples above
    ``budget`` are returned, most violating first (equal violations: the
    earlier in ``rows``; at most ``max_add``), with the largest estimate and
    the number of rows scored.  The work is O(n_tries·sample_size), not O(n).
    """
    # positions in ``rows``: the candidates are scored, and their ties broken, in the order of ``rows``
    groups = rs.randint(0, rows.shape[0], size=(n_tries, sample_size))
    cand_pos = np.unique(groups)
    cand_pos = cand_pos[~scanner.in_core[rows[cand_pos]]]
    if not cand_pos.shape[0]:
        return np.empty(0, np.int64), 0.0, 0
    cand = rows[cand_pos]
    s = scanner.scores(cand, coef, b)
    at = np.minimum(np.searchsorted(cand_pos, groups), cand_pos.shape[0] - 1)
    out = cand_pos[at] == groups                         # sampled rows outside the core set
    v = np.where(out, np.maximum(q - s[at], 0.0), 0.0)
    est = scale * (v * v).sum(axis=1) / np.maximum(out.sum(axis=1), 1)
    bad = est > budget
    if not bad.any():
        return np.empty(0, np.int64), float(est.max()), cand.shape[0]
    vc = q - s
    hit = np.zeros(cand.shape[0], dtype=bool)
    hit[at[bad][out[bad]]] = True
    hit &= vc > 0.0
    viol = np.flatnonzero(hit)
    return cand[viol[np.argsort(-vc[viol], kind="stable")][:max_add]], float(est.max()), cand.shape[0]


def fit_core_set(scanner: "ScannerBase", y: np.ndarray | None, rows: np.ndarray | None, *, C: float,
                 tol: float, sample_size: int | None, n_tries: int, max_iter: int, max_core_size: int,
                 cache_bytes: int, shrinking: bool, rs: np.random.RandomState,
                 max_add: int | None = None, finish_kkt: float | None = None,
                 dense_max: int = DENSE_MAX, start: tuple[np.ndarray, np.ndarray] | None = None) -> CoreSetResult:
    """The CVM core-set algorithm on one MEB problem, stopped on the relative duality gap.

    Parameters
    ----------
    scanner : a scanner of :func:`make_scanner` (or a distributed one), holding X
    y : (n,) ±1 labels (0 outside ``rows``), or None for the one-class task
    rows : int array or None
        The rows of the problem, in the order the search draws from (None: all
        rows of the scanner, by index).  Every choice goes by position in
        ``rows``: the initial pair's samples, the sampled search's samples,
        and the ties of the exact scan and of the violators' order.  Rows
        given in an order of their contents
        (:func:`gpuksvm.solvers.row_order.smallest_keys`, as the estimators
        do) therefore make the fit the same for the same rows in any order.
    C, tol, sample_size, n_tries, max_iter, max_core_size
        As in :class:`gpuksvm.estimators.cvm.CVM` (module docstring for the rules).
    cache_bytes : int
        K̃ cache of the core-set QP.
    shrinking : bool
        Drop α = 0 core vectors strictly inside the ball (every 8 iterations,
        when a tenth of the core set can go).
    rs : RandomState
        The initial pair's samples and the search's samples.
    max_add : int, optional
        Core vectors added per iteration at most (default 4·sample_size, or 64
        with the full scan).
    finish_kkt : float, optional
        At the end, solve the core set's QP on to a KKT gap ≤ ``finish_kkt``·ρ
        (the one-class task: its outlier threshold is a median over the
        support vectors, and the gap stop leaves many small-α ones at 0).
    dense_max : int
        Largest core set whose K̃ the QP keeps dense (:class:`KtildeCache`).
    start : (core rows, α), optional
        Start from these core vectors and α (normalized to the simplex) instead of the initial
        pair: a search's warm start along C, from the core set of the C below it.  The loop then
        runs as from the pair (searches, additions, the stop on the duality gap ``tol``), so the
        result is a solution to the same tolerance, reached from another start.  Measured on one
        4,000-row ijcnn1 fold (8 C from 0.1 to 1,000, γ ∈ {0.5, 2}, the sampled search, 2-core
        VM): 2.30 and 2.43 s for the path against 4.41 and 4.19 s from the pair, 0–9 iterations
        at each C after the first against 39–51, held-out accuracies within 0.003.

    Returns
    -------
    CoreSetResult.  Always terminates: each iteration adds core vectors (at
    most ``max_iter`` iterations, ``max_core_size`` vectors) or finishes the
    core QP (at most ``_MAX_STALLS`` tries that cannot reach the target).
    """
    n_all = scanner.n
    rows_arr = np.arange(n_all, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    n_c = rows_arr.shape[0]
    if n_c < 2:
        raise ValueError(f"the CVM needs at least 2 training rows, got n_samples={n_c}")
    two_class = y is not None
    C = float(C)
    kt = 1.0 + 1.0 / C + (1.0 if two_class else 0.0)
    exact = sample_size is None or n_c <= int(sample_size) * int(n_tries)
    cand_idx = None if rows is None else rows_arr
    if max_add is None:
        max_add = 4 * int(sample_size) if sample_size is not None else 64
    qp = CoreSetQP(kt, scanner.core_block, cache_bytes, dense_max=int(dense_max))
    ylab = None if y is None else np.asarray(y, dtype=np.float64)

    def add(idx: np.ndarray) -> np.ndarray:
        scanner.append(idx)
        return qp.append(idx.shape[0])

    def kkt_tol(budget: float) -> float:
        return 0.5 * np.sqrt(budget / (C * max(qp.m, 1)))

    if start is None:
        a0, b0 = initial_pair(scanner, rows_arr, ylab, rs)
        add(np.array([a0, b0]))
        qp.set_alpha(np.array([0.5, 0.5]))
    else:
        add(np.asarray(start[0], dtype=np.int64))
        qp.set_alpha(np.asarray(start[1], dtype=np.float64) / float(np.sum(start[1])))
    hist = {"m": [], "search_kernel": [], "qp_kernel": [], "qp_steps": [], "added": [], "seconds": []}
    t_start = time.perf_counter()
    stop = "max_iter"
    n_iter = n_added = 0
    n_stalls = 0
    gap_rel = np.inf
    search_kernel = 0

    def search(budget: float) -> tuple[np.ndarray, float]:
        """Violators to add (none when the rows outside are within ``budget``) and their gap."""
        nonlocal search_kernel
        q = qp.q
        coef, b = scanner.set_alpha(qp.alpha)
        m = qp.m
        if exact:
            top, top_s, vsum = scanner.exact_scan(cand_idx, coef, b, q, max_add)
            search_kernel += n_c * m
            gap = C * vsum
            return (top[top_s < q] if gap > budget else np.empty(0, np.int64)), gap
        found, gap, n_kernel = _sampled_search(scanner, rows_arr, rs, int(n_tries), int(sample_size),
                                               coef, b, q, C * max(n_c - m, 0), budget, max_add)
        search_kernel += n_kernel * m
        return found, gap

    while True:
        q = qp.q
        budget = 0.5 * float(tol) * q                 # half of the gap for the core set, half for the rest
        m = qp.m
        found, gap_out = search(budget)
        gap_core = qp.duality_gap(C)
        gap_rel = (gap_core + gap_out) / q
        if not found.shape[0]:
            # the rows outside the core set are within their half of the gap: finish the core QP
            if gap_core <= budget:
                stop = "converged"
                break
            n_stalls += 1
            if n_stalls > _MAX_STALLS:
                stop = "stalled"
                break
            qp.solve(kkt_tol(budget) / 10 ** (n_stalls - 1), (0.5 * budget, C))
            continue
        if n_iter >= int(max_iter):
            stop = "max_iter"
            break
        if m + found.shape[0] > int(max_core_size):
            found = found[: int(max_core_size) - m]
            if not found.shape[0]:
                stop = "max_core_size"
                break
        n_stalls = 0
        new = add(found)
        n_added += found.shape[0]
        n_iter += 1
        tol_k = kkt_tol(budget)
        v_new = float(q - qp.g[new].min())
        qp.solve(max(tol_k, 0.5 * v_new), max_steps=_SMO_STEPS_PER_ADD * new.shape[0] + 50)
        if shrinking and n_iter % 8 == 0:
            keep = qp.shrink(qp.q + tol_k, _SHRINK_FRACTION)
            if keep is not None:
                scanner.remove(keep)
        hist["m"].append(qp.m)
        hist["search_kernel"].append(search_kernel)
        hist["qp_kernel"].append(qp.cache.n_computed)
        hist["qp_steps"].append(qp.n_steps)
        hist["added"].append(n_added)
        hist["seconds"].append(time.perf_counter() - t_start)
    if stop in ("max_iter", "max_core_size"):
        # out of budget for the search: still end on the optimum of the core set's QP (the best
        # model on these core vectors), the rows outside it as they are
        budget = 0.5 * float(tol) * qp.q
        qp.solve(kkt_tol(budget), (0.5 * budget, C))
    if finish_kkt is not None:
        qp.solve(float(finish_kkt) * qp.q)
    if stop in ("max_iter", "max_core_size") or finish_kkt is not None:
        # α moved after the last search: measure the rows outside the core set again
        gap_rel = (qp.duality_gap(C) + search(np.inf)[1]) / qp.q
    core = np.asarray(scanner.core_idx, dtype=np.int64)
    alpha = qp.alpha.copy()
    alpha /= alpha.sum()
    ycore = None if ylab is None else ylab[core]
    return CoreSetResult(core=core, alpha=alpha, rho=qp.q, radius2=qp.radius2,
                         b=0.0 if ycore is None else float(alpha @ ycore), y=ycore, kappa_t=kt,
                         n_iter=n_iter, n_added=n_added, stop=stop,
                         search="exact" if exact else f"sampled({int(sample_size)})", gap=float(gap_rel),
                         n_smo_steps=qp.n_steps, history={k: np.asarray(v) for k, v in hist.items()})
