"""A compiled SMO on rows of a precomputed Gram matrix, from α = 0 or any feasible start.

:func:`solve_on_gram` solves the binary C-SVC dual

    min ½ αᵀQα − eᵀα   subject to   0 ≤ αᵢ ≤ Cᵢ,  yᵀα = 0,   Qᵢⱼ = yᵢyⱼK(xᵢ, xⱼ)

over the rows ``R`` of a Gram matrix ``G`` of all rows of a data set (the
problem reads ``G[R[a], R[b]]``: the folds and one-vs-one pairs of a grid
search index one matrix, no submatrix is copied), from α = 0 or any feasible
α and its gradient (the grid-search engine starts each C value of a fold but the
smallest from the previous C's solution, scaled or as it is; why:
:mod:`gpuksvm.solvers.smo.path`).  The algorithm is LIBSVM's (Fan, Chen & Lin, JMLR 2005): the
maximal-violating i over I_up, the second-order choice of j over I_low, the
analytic two-variable step clipped to the box, and the stopping rule
m(α) − M(α) < ``tol``; the per-row bounds Cᵢ = C·wᵢ carry class and sample
weights.  Shrinking (LIBSVM's rule, every 300 steps) is on by default:
measured on one 4,000-row ijcnn1 fold (γ = 1, C = 1,000, 8,950 steps, period
1,000) it took 0.11 s against 0.28 s without (the active rows averaged 852 of 4,000), LIBSVM 0.14 s
on the same precomputed block.  A step reads two rows of ``G`` over the
active rows (the gradient update fused with the choice of the next i).  The
active rows' arrays are kept compacted at the front, in the problem's order,
so a pass reads them in order and a kernel row through one ascending index:
one ijcnn1 fold (4,000 of 5,000 rows, γ ∈ {0.5, 1, 2} × 8 C from 0.1 to
1,000, cold) took 0.84–0.92 s against 1.71 s when the passes went through
a permutation of the active rows and then ``R`` (4.2–7.4 µs a step at
C = 1,000 against 10.7–11.9; load average 1.3–1.4 on the 2-core host).

When a shrinking pass leaves at most ``_H_ROWS`` (800) rows active, their Gram
matrix H is copied out of ``G`` (at most 800² float64 = 5.1 MB for each problem
being solved, one per thread of a grid search, freed when it returns) and the
passes read its rows contiguously: the gradient update, the choice of i and
the choice of j are then loops the compiler vectorizes (the maxima are taken
over integer keys of the floats' bits, the last position of a maximum by a
second vectorized pass: the same choices as the passes through ``R``, ties to
the last row, the same steps and α bit for bit).  Later shrinking passes only
mark rows out of I_up and I_low (the gradient of such a row is still updated
and rebuilt before it is read again) and compact H in place when at most
``_REFILL`` (3/4) of its rows are still active.  One 4,000-row ijcnn1 fold
(γ ∈ {0.5, 1, 2} × 8 C from 0.1 to 1,000, cold, each problem the best of two
in one process, thread time, load average 1.7–1.8 on the 2-core host): 0.69
against 0.76 s, the same steps and α; 8–20 % less at C ≥ 72, where most steps
run on 300–550 active rows, about the same at C ≤ 1.4, where most steps run
before fewer than 800 rows are active.  A step on 800 rows costs 2.6 against
5.0 µs (gradient update and next i 1.0 against 2.2, choice of j 1.6 against
2.9).

Above 800 active rows the passes are the same vectorized functions: a step
gathers row j of ``G`` over the active rows through ``R`` into a contiguous
buffer (row i is gathered once by the choice of j and reused by the step).
Until its first shrinking pass a problem of at least half of ``G``'s rows, in
ascending order (a fold), runs on the wide layout instead: every row of
``G``, the rows outside the problem given C = 0 (in neither I_up nor I_low),
so a kernel row is a row of ``G`` as it is, with no gather (:data:`WIDE_SHARE`).
When the active rows of such a problem are optimal, the gradient of the shrunk
rows is rebuilt by one contiguous pass over a whole row of ``G`` per support
vector when they are at least a third of ``G``'s rows, instead of gathers.  All three take the
same steps and give the same α bit for bit: the 5-fold ijcnn1 grid's 120
problems (5,000 random rows, γ ∈ {0.5, 1, 2} × 8 C, C ascending and seeded as
the search does) took 1.89 against 2.64 s of SMO thread time (457,415 steps,
medians of four alternating runs in one process, quiet 2-core host); each
change alone, against the code before it: the wide layout 2.27 against 2.45 s,
the fused passes (the gradient update with the next i's values, the choice of
j's two loops in one, −M(α) from its key alone) 2.20 against 2.27 s, the
rebuild through whole rows 1.85 against 2.09 s (a rebuild at C = 72 with 377
support vectors and 3,700 shrunk rows: 0.97 against 2.20 ms), the gathered
buffers 1.69 against 1.99 s.  The search
(``GridSearchCV(KernelSVC(), ...)``, 2 threads, with refit): 1.57 against
2.08 s, medians of six (``bench/results/tune_cpu_2026-11-27/ab_smo_layouts.py``,
which repeats the 1.89 against 2.64 s above).

The loop is compiled by numba (``@njit(cache=True, nogil=True)``: compiled
once per installation into numba's cache, and it releases the GIL so problems
run in parallel threads).  numba is optional (the ``fast`` extra):
:data:`AVAILABLE` says whether it imported, and without it callers use
another solver (:func:`solve_on_gram` raises ImportError).

The search engine gives it a float32 Gram matrix (each value computed in
float64 and rounded once; LIBSVM caches its kernel values as float32 too):
the vectorized passes read half the bytes.  The grid's 120 problems above:
1.47 against 1.80 s of SMO thread time, 467,785 steps against 457,415
(``bench/results/tune_cpu_2026-11-27/ab_gram_float32.py``, medians of four);
before the passes were vectorized it took 34,745 steps against 32,584 on one
fold and no less time.

Measured and not used (one 4,000-row ijcnn1 fold, γ = 1, 8 C values from 0.1
to 1,000, thread CPU time, load average 1.5–4 on the 2-core host): a cache of the kernel rows of i and j
over the active rows only, contiguous (LIBSVM's layout; 95 % hits at
C = 1,000), and passes that test one precomputed float per row for I_up and
I_low instead of y, α and C took the same steps in 7.9 against 5.7 µs a
step at C = 1,000, the cache alone 0.30 against 0.29 s for the 8 C (the
passes are not bound by the reads of the Gram rows: the rows of a 5,000-row
problem stay in the host's cache); the choice of j compared by products
instead of one division per row, 0.28 s both; the shrunk rows' gradient
rebuilt by one dot product per row instead of one axpy per support vector,
0.28 against 0.24 s.  Also measured and not used (the same fold, each
problem timed twice in one process against this code, thread time, load
average 3–5): both passes branch-free (the membership tests and running
maxima as selects; the choice of j then divides on every I_low row) 0.47
against 0.43 s for γ = 1's 8 C, the update pass alone branch-free 0.71
against 0.59 s for γ ∈ {0.5, 1}; the gradient update and the choice of the
next i in two loops (the update alone can vectorize) 0.96 against 0.88 s;
the first shrinking pass after 50 or 100 steps instead of 300, 1.02 and
1.00 against 1.01 s for the three γ (up to 20 % more steps at large C); the
shrunk rows' gradient accumulated in a compact array, 0.70 against 0.71 s.
A seeded problem (a C started from the previous C's solution) shrunk after its
first step or its 50th instead of its 300th (the seed is near the optimum, so
the rule might drop rows at once): 495,697 and 467,167 steps against 459,708
and 2.62 and 2.50 s of SMO thread time against 2.48 s for the 5,000-row ijcnn1
grid's 120 problems (medians of three, one thread, quiet 2-core host).
The copy of the active rows' Gram matrix from up to 1,448 rows (16 MiB; 0.96
against 0.91 s at 800 rows for the three γ: a copy out of ``G`` reads most of
each row of ``G``, 5 ms at 1,413 rows); the passes through ``R`` in the
vectorizable form (running maxima over integer keys, membership as −∞
offsets): 2.4 against 2.6 ns a row for the update at 3,000 rows (the gathers
of the kernel row stay scalar; the gathered buffers, above, replaced those passes).
"""
from __future__ import annotations

import numpy as np

try:
    import numba
except ImportError:  # the optional "fast" extra is not installed: AVAILABLE is False
    numba = None

__all__ = ["AVAILABLE", "MAX_ITER", "solve_on_gram"]

#: whether numba imported (the compiled SMO can run)
AVAILABLE = numba is not None

#: default cap on two-variable steps (LIBSVM's for problems below 10⁷ rows)
MAX_ITER = 10_000_000

#: steps between shrinking passes (LIBSVM's is 1,000).  One 4,000-row ijcnn1 fold, γ = 1, 8 C values
#: from 0.1 to 1,000, each cold: 0.48 s and 33,430 steps at 1,000; 0.38 s and 32,584 at 300; 0.38 s
#: and 35,582 at 100 (same objectives to 10⁻³; the first pass over all rows is what a short period saves)
_PERIOD = 300

#: the largest Gram matrix whose rows the passes index by uint32 (unsigned: numba adds no
#: negative-index wrap-around to a read of a kernel row).  One 4,000-row ijcnn1 fold, γ ∈ {0.5, 1}
#: × 8 C, each problem timed twice against int64 indices in the same process: 0.83 against 0.89 s of
#: thread time (13 of 16 problems faster, the same steps and α; load average 4.4–4.6 on the 2-core
#: host); γ ∈ {0.5, 1, 2}: 0.77 against 0.82 s (load average 4.2)
_U32_ROWS = np.iinfo(np.uint32).max

#: the most active rows whose Gram matrix H the passes copy out of G (800² float64 = 5.1 MB).  One
#: 4,000-row ijcnn1 fold, γ ∈ {0.5, 1, 2} × 8 C, thread time: 0.91 s at 800 and at 500 rows, 0.96 s at
#: 1,448 (16 MiB), 1.06 s without H (load average 1.5–1.9 on the 2-core host)
_H_ROWS = 800

#: the share of H's rows still active at or below which a shrinking pass compacts H on them.  The
#: same fold and grid against the passes through R in one process: 0.83 and 0.91 of their time at
#: 3/4 (two runs), 0.86 at 0.9, 0.90 at 0.95, 0.92 at 1/2 (load average 1.3–2.3; within the noise)
_REFILL = 0.75

#: the least share of G's rows a problem must have for its passes to run on the wide layout (every
#: row of G) until the first shrinking pass; float("inf"): never.  A step there costs 2.9 ns a row of G
#: against 6.0 ns a problem row through R (before the gathered layout; one 4,000-row fold of 5,000,
#: γ = 1, C = 72, steps 50–299): with a fold of 4/5 of the rows the wide step is cheaper from about
#: half.  The 5-fold 3-γ ijcnn1 grid's 120 problems: 1.77 against 1.90 s of SMO thread time with the
#: gathered layout (medians of four, the same α and steps)
WIDE_SHARE = 0.5

#: a problem of the wide layout rebuilds the shrunk rows' gradient through whole rows of G when they
#: are at least 1/this of G's rows (a contiguous pass costs about a third of a gathered one a row)
_WIDE_GRADIENT = 3

#: LIBSVM's floor for a non-positive curvature K_ii + K_jj − 2K_ij of the two-variable step
_TAU = 1e-12


def _in_up(y, a, c):  # pragma: no cover - compiled by numba
    return (y > 0 and a < c) or (y < 0 and a > 0)


def _in_low(y, a, c):  # pragma: no cover - compiled by numba
    return (y > 0 and a > 0) or (y < 0 and a < c)


def _shrink(rows, R, D, y, Cv, alpha, grad, na, alpha_all, grad_all):  # pragma: no cover - compiled by numba
    """Drop the bounded rows that cannot take part in a violating pair (an I_up-only row whose −y∇
    is below M(α), an I_low-only row whose −y∇ is above m(α)): their α and ∇ go back to the
    problem's arrays, the kept rows move to the front in their order.  Returns the new count (the
    caller marks the kept rows' membership offsets again)."""
    m = -np.inf
    M = np.inf
    for t in range(na):
        v = -y[t] * grad[t]
        if _in_up(y[t], alpha[t], Cv[t]) and v > m:
            m = v
        if _in_low(y[t], alpha[t], Cv[t]) and v < M:
            M = v
    keep = 0
    for t in range(na):
        up = _in_up(y[t], alpha[t], Cv[t])
        low = _in_low(y[t], alpha[t], Cv[t])
        v = -y[t] * grad[t]
        if (up and not low and v < M) or (low and not up and v > m):
            alpha_all[rows[t]] = alpha[t]
            grad_all[rows[t]] = grad[t]
            continue
        rows[keep], R[keep], D[keep], y[keep] = rows[t], R[t], D[t], y[t]
        Cv[keep], alpha[keep], grad[keep] = Cv[t], alpha[t], grad[t]
        keep += 1
    return keep


def _clip_sum(s, p, q, cp):  # pragma: no cover - compiled by numba
    """(p, q) with p + q = s moved back into the box of p: p ≤ cp when s > cp, else q ≥ 0."""
    if s > cp:
        if p > cp:
            return cp, s - cp
    elif q < 0:
        return s, 0.0
    return p, q


def _pair(kij, D, y, Cv, alpha, grad, i, j):  # pragma: no cover - compiled by numba
    """The two-variable step on (i, j) clipped to the box (``kij`` = K(xᵢ, xⱼ)): writes αᵢ, αⱼ and
    returns yᵢΔαᵢ, yⱼΔαⱼ."""
    a = D[i] + D[j] - 2.0 * kij
    if a <= 0:
        a = _TAU
    ci, cj = Cv[i], Cv[j]
    ai, aj = alpha[i], alpha[j]
    if y[i] != y[j]:
        delta = (-grad[i] - grad[j]) / a
        diff = ai - aj
        ai += delta
        aj += delta
        if diff > 0:
            if aj < 0:
                aj = 0.0
                ai = diff
        elif ai < 0:
            ai = 0.0
            aj = -diff
        if diff > ci - cj:
            if ai > ci:
                ai = ci
                aj = ci - diff
        elif aj > cj:
            aj = cj
            ai = cj + diff
    else:
        delta = (grad[i] - grad[j]) / a
        s = ai + aj
        ai -= delta
        aj += delta
        ai, aj = _clip_sum(s, ai, aj, ci)
        aj, ai = _clip_sum(s, aj, ai, cj)
    di = (ai - alpha[i]) * y[i]
    dj = (aj - alpha[j]) * y[j]
    alpha[i] = ai
    alpha[j] = aj
    return di, dj


def _mark(y, Cv, alpha, upoff, lowoff, t):  # pragma: no cover - compiled by numba
    """Row t's membership of I_up and I_low as additive offsets: 0 in the set, −∞ out of it."""
    upoff[t] = 0.0 if _in_up(y[t], alpha[t], Cv[t]) else -np.inf
    lowoff[t] = 0.0 if _in_low(y[t], alpha[t], Cv[t]) else -np.inf


def _max_key(bits, nh):  # pragma: no cover - compiled by numba
    """The largest of the float64 values whose bits are bits[:nh] (no NaN), as an integer key that
    orders like the floats: a running float maximum is a chain of compares the compiler does not
    vectorize without fast-math, an integer one it does (0.13 against 1.4 ns a row, 800 rows)."""
    m = np.int64(-0x7FFFFFFFFFFFFFFF)
    for t in range(nh):
        k = bits[t] ^ ((bits[t] >> 63) & 0x7FFFFFFFFFFFFFFF)
        m = k if k > m else m
    return m


def _last_max(v, nh):  # pragma: no cover - compiled by numba
    """The last position of the largest of v[:nh] (no NaN, no −0.0), −1 when that is −∞: the largest
    key, then the largest position that holds it (both vectorized; 0.34 ns a row, 800 rows)."""
    bits = v.view(np.int64)
    m = _max_key(bits, nh)
    p = -1
    for t in range(nh):
        c = t if bits[t] ^ ((bits[t] >> 63) & 0x7FFFFFFFFFFFFFFF) == m else -1
        p = c if c > p else p
    return p if p >= 0 and v[p] > -np.inf else -1


def _first_i(y, grad, upoff, v, nh):  # pragma: no cover - compiled by numba
    """The maximal violator over I_up among the first ``nh`` rows and its −y∇: −y∇ + offset (−∞
    outside I_up) into ``v``, then the last position of its maximum (ties to the last row, as LIBSVM's
    ``>=`` scan)."""
    for t in range(nh):
        v[t] = -y[t] * grad[t] + upoff[t]
    i = _last_max(v, nh)
    return i, (v[i] if i >= 0 else -np.inf)


def _select_j(Hi, D, y, grad, lowoff, v, w, nh, kii, gmax):  # pragma: no cover - compiled by numba
    """j over I_low with the largest decrease of the objective for the pair (i, j) (the second-order
    rule) and −M(α) = max over I_low of yₜ∇ₜ, among the first ``nh`` rows (``Hi``: row i over them,
    contiguous): y∇ + offset (−∞ outside I_low) into ``v`` and the decrease b²/a (−∞ unless b > 0)
    into ``w`` in one pass, the largest key of ``v`` (``v[nh]`` holds it turned back into a float),
    the last position of the largest ``w``."""
    for t in range(nh):
        vt = y[t] * grad[t] + lowoff[t]
        v[t] = vt
        b = gmax + vt
        a = kii + D[t] - 2.0 * Hi[t]
        a = a if a > 0 else _TAU
        w[t] = (b * b) / a if b > 0 else -np.inf
    # −M(α) is the largest value of v: its key (one pass), turned back into the float
    key = v[nh:nh + 1].view(np.int64)
    key[0] = _max_key(v.view(np.int64), nh)
    key[0] ^= (key[0] >> 63) & 0x7FFFFFFFFFFFFFFF
    return _last_max(w, nh), v[nh]


def _step(Hi, Hj, D, y, Cv, alpha, grad, upoff, lowoff, v, nh, i, j):  # pragma: no cover - compiled by numba
    """The two-variable step on (i, j) clipped to the box, the gradient update of the first ``nh``
    rows from two contiguous kernel rows over them (rows marked out of I_up and I_low are updated
    too: their gradient is rebuilt before it is read again) fused with −y∇ + offset of the choice of
    the next i, then that i and its −y∇."""
    di, dj = _pair(Hi[j], D, y, Cv, alpha, grad, i, j)
    _mark(y, Cv, alpha, upoff, lowoff, i)
    _mark(y, Cv, alpha, upoff, lowoff, j)
    for t in range(nh):   # the update and −y∇ + offset of the choice of the next i in one pass
        g = grad[t] + y[t] * (di * Hi[t] + dj * Hj[t])
        grad[t] = g
        v[t] = -y[t] * g + upoff[t]
    i = _last_max(v, nh)
    return i, (v[i] if i >= 0 else -np.inf)


def _shrink_h(rows, y, Cv, alpha, grad, upoff, lowoff, nh, alpha_all, grad_all):  # pragma: no cover
    """:func:`_shrink` on the layout of H: the dropped rows stay in place, out of I_up and I_low
    (offsets −∞); their α and ∇ go back to the problem's arrays.  Returns the rows still active."""
    m = -np.inf
    M = np.inf
    for t in range(nh):
        v = -y[t] * grad[t]
        if upoff[t] == 0.0 and v > m:
            m = v
        if lowoff[t] == 0.0 and v < M:
            M = v
    count = 0
    for t in range(nh):
        up = upoff[t] == 0.0
        low = lowoff[t] == 0.0
        if not (up or low):
            continue
        v = -y[t] * grad[t]
        if (up and not low and v < M) or (low and not up and v > m):
            alpha_all[rows[t]] = alpha[t]
            grad_all[rows[t]] = grad[t]
            upoff[t] = -np.inf
            lowoff[t] = -np.inf
        else:
            count += 1
    return count


def _compact(rows, R, D, y, Cv, alpha, grad, upoff, lowoff, H, nh):  # pragma: no cover - compiled by numba
    """The active rows of the compact layout moved to the front in their order, and H to their
    Gram matrix in place (each entry moves to a lower address: none is overwritten before it is
    read); returns their count."""
    src = np.empty(nh, dtype=np.int64)
    keep = 0
    for t in range(nh):
        if upoff[t] == 0.0 or lowoff[t] == 0.0:
            src[keep] = t
            rows[keep], R[keep], D[keep], y[keep] = rows[t], R[t], D[t], y[t]
            Cv[keep], alpha[keep], grad[keep] = Cv[t], alpha[t], grad[t]
            upoff[keep], lowoff[keep] = upoff[t], lowoff[t]
            keep += 1
    for a in range(keep):
        row = src[a] * nh
        for b in range(keep):
            H[a * keep + b] = H[row + src[b]]
    return keep


def _to_wide(R, D_all, y_all, C_all, alpha_all, grad_all, yW, DW, CW, aW, gW, upW, lowW):  # pragma: no cover
    """The problem's arrays laid out by row of G (the wide layout): row R[p] holds position p; the
    rows of G outside the problem get C = 0 and α = 0, so they are in neither I_up nor I_low."""
    for r in range(yW.shape[0]):
        yW[r], DW[r], CW[r], aW[r], gW[r] = 1.0, 1.0, 0.0, 0.0, 0.0
        upW[r] = -np.inf
        lowW[r] = -np.inf
    for p in range(R.shape[0]):
        r = R[p]
        yW[r], DW[r], CW[r] = y_all[p], D_all[p], C_all[p]
        aW[r], gW[r] = alpha_all[p], grad_all[p]
        _mark(yW, CW, aW, upW, lowW, r)


def _from_wide(R, aW, gW, alpha_all, grad_all):  # pragma: no cover - compiled by numba
    """α and ∇ of the wide layout back to the problem's positions."""
    for p in range(R.shape[0]):
        alpha_all[p] = aW[R[p]]
        grad_all[p] = gW[R[p]]


def _gather(Gr, R, na, out):  # pragma: no cover - compiled by numba
    """out[t] = Gr[R[t]] for the first ``na`` rows: a kernel row over the active rows, contiguous."""
    for t in range(na):
        out[t] = Gr[R[t]]


def _build_h(G, R, H, k):  # pragma: no cover - compiled by numba
    """H[a·k + b] = G[R[a], R[b]] for a, b < k: the Gram matrix of the first k (active) rows."""
    for a in range(k):
        Ga = G[R[a]]
        for b in range(k):
            H[a * k + b] = Ga[R[b]]


def _all_rows(wide, R_all, D_all, y_all, C_all, alpha_all, grad_all, y, Cv, alpha, grad, upoff, lowoff, v,
              yW, DW, CW, aW, gW, upW, lowW):  # pragma: no cover - compiled by numba
    """Every row of the problem active (at the start, and after the shrunk rows' gradient is rebuilt):
    the wide layout from the problem's arrays when ``wide``, else the membership offsets of the
    problem's own layout (``y``, ``Cv``, ``alpha``, ``grad``: the problem's rows in its order); the
    first i and its −y∇."""
    if wide:
        _to_wide(R_all, D_all, y_all, C_all, alpha_all, grad_all, yW, DW, CW, aW, gW, upW, lowW)
        return _first_i(yW, gW, upW, v, yW.shape[0])
    for t in range(y.shape[0]):
        _mark(y, Cv, alpha, upoff, lowoff, t)
    return _first_i(y, grad, upoff, v, y.shape[0])


def _smo_loop(G, R_all, D_all, y_all, C_all, alpha_all, grad_all, tol, max_iter, shrinking, cap, refill,
              wide):  # pragma: no cover
    """Two-variable steps on (alpha_all, grad_all) in place until the gap is below tol; returns the
    steps taken.  Three layouts of the active rows, each pass reading contiguous kernel rows:

    - wide (``wide``: until the first shrinking pass, and again after each rebuild of the gradient):
      every row of G, the problem's rows at their rows of G and the others out of I_up and I_low
      (:func:`_to_wide`); a kernel row is a row of G as it is;
    - gathered: copies of the active rows' arrays kept at the front, in the problem's order
      (``rows``: their positions in the problem); a step gathers row j of G over them through ``R``
      into ``Gj``, and the choice of j row i into ``Gi`` (reused by the step);
    - H: when a shrinking pass leaves at most ``cap`` rows, their Gram matrix H is copied out of G
      (``nh`` rows) and the passes read its rows; later shrinking passes only mark rows out of I_up
      and I_low until at most ``refill``·nh stay active, then H is compacted on them.

    The passes are the same functions in every layout, so the choices (ties to the last row in the
    problem's order; the wide layout only for ascending ``R``) and α are the same bit for bit."""
    n = R_all.shape[0]
    N = G.shape[0] if wide else 0
    yG, gG = np.empty(N), np.empty(N)   # _gradient_wide's labels and gradient
    rows = np.arange(n)
    R, D, y, Cv = R_all.copy(), D_all.copy(), y_all.copy(), C_all.copy()
    alpha, grad = alpha_all.copy(), grad_all.copy()
    upoff, lowoff = np.empty(n), np.empty(n)
    v, w = np.empty(max(n, N) + 1), np.empty(max(n, N))   # v[nh]: the choice of j's spare slot
    # the wide layout (every row of G, see solve_on_gram): y, D, C, α, ∇ and the membership offsets
    yW, DW, CW, aW, gW, upW, lowW = (np.empty(N), np.empty(N), np.empty(N), np.empty(N), np.empty(N),
                                     np.empty(N), np.empty(N))
    Gi, Gj = np.empty(n), np.empty(n)   # rows i and j over the active rows, gathered through R
    H = np.empty(0)
    na = n
    nh = 0   # rows of H (0: the passes read G through R, or G's rows themselves while in_wide)
    period = min(n, _PERIOD)
    counter = period
    in_wide = wide
    i, gmax = _all_rows(wide, R_all, D_all, y_all, C_all, alpha_all, grad_all, y, Cv, alpha, grad, upoff, lowoff,
                        v, yW, DW, CW, aW, gW, upW, lowW)
    it = 0
    while it < max_iter:
        if shrinking:
            counter -= 1
            if counter == 0:
                counter = period
                if in_wide:   # the first shrinking pass runs on the problem's own layout
                    _from_wide(R_all, aW, gW, alpha_all, grad_all)
                    for t in range(n):
                        alpha[t], grad[t] = alpha_all[t], grad_all[t]
                    in_wide = False
                if nh:
                    na = _shrink_h(rows, y, Cv, alpha, grad, upoff, lowoff, nh, alpha_all, grad_all)
                    if na <= refill * nh:
                        nh = _compact(rows, R, D, y, Cv, alpha, grad, upoff, lowoff, H, nh)
                else:
                    na = _shrink(rows, R, D, y, Cv, alpha, grad, na, alpha_all, grad_all)
                    for t in range(na):
                        _mark(y, Cv, alpha, upoff, lowoff, t)
                    if na <= cap:
                        if H.size < na * na:
                            H = np.empty(na * na)
                        _build_h(G, R, H, na)
                        nh = na
                i, gmax = _first_i(y, grad, upoff, v, nh if nh else na)
        j = -1
        gmax2 = -np.inf
        if i >= 0:
            if in_wide:
                j, gmax2 = _select_j(G[i], DW, yW, gW, lowW, v, w, N, DW[i], gmax)
            elif nh:
                j, gmax2 = _select_j(H[i * nh:(i + 1) * nh], D, y, grad, lowoff, v, w, nh, D[i], gmax)
            else:   # row i gathered once for the choice of j and the step
                _gather(G[R[i]], R, na, Gi)
                j, gmax2 = _select_j(Gi, D, y, grad, lowoff, v, w, na, D[i], gmax)
        if i < 0 or j < 0 or gmax + gmax2 < tol:
            if in_wide or na == n:
                break
            # optimal on the active rows: the gradient of the shrunk rows from the support vectors,
            # then every row active again (the loop stops only when all rows satisfy the rule)
            active = np.zeros(n, dtype=np.bool_)
            for t in range(nh if nh else na):
                if nh == 0 or upoff[t] == 0.0 or lowoff[t] == 0.0:
                    alpha_all[rows[t]] = alpha[t]
                    grad_all[rows[t]] = grad[t]
                    active[rows[t]] = True
            shrunk = np.flatnonzero(~active)
            if wide and _WIDE_GRADIENT * shrunk.size >= G.shape[0]:   # wide: R ascends, no row twice
                _gradient_wide(G, R_all, y_all, alpha_all, grad_all, shrunk, yG, gG)
            else:
                _gradient(G, R_all, y_all, alpha_all, grad_all, shrunk)
            na = n
            nh = 0
            for t in range(n):
                rows[t] = t
                R[t], D[t], y[t], Cv[t] = R_all[t], D_all[t], y_all[t], C_all[t]
                alpha[t], grad[t] = alpha_all[t], grad_all[t]
            counter = period
            in_wide = wide
            i, gmax = _all_rows(wide, R_all, D_all, y_all, C_all, alpha_all, grad_all, y, Cv, alpha, grad, upoff,
                                lowoff, v, yW, DW, CW, aW, gW, upW, lowW)
            continue
        it += 1
        if in_wide:
            i, gmax = _step(G[i], G[j], DW, yW, CW, aW, gW, upW, lowW, v, N, i, j)
        elif nh:
            i, gmax = _step(H[i * nh:(i + 1) * nh], H[j * nh:(j + 1) * nh], D, y, Cv, alpha, grad,
                            upoff, lowoff, v, nh, i, j)
        else:
            _gather(G[R[j]], R, na, Gj)
            i, gmax = _step(Gi, Gj, D, y, Cv, alpha, grad, upoff, lowoff, v, na, i, j)
    if in_wide:
        _from_wide(R_all, aW, gW, alpha_all, grad_all)
        return it
    for t in range(nh if nh else na):
        if nh == 0 or upoff[t] == 0.0 or lowoff[t] == 0.0:
            alpha_all[rows[t]] = alpha[t]
            grad_all[rows[t]] = grad[t]
    return it


def _gradient(G, R, y, alpha, grad, at):  # pragma: no cover - compiled by numba
    """grad[t] = (Qα − e)[t] for the problem positions ``at``, from the rows of G of the nonzero αₛ."""
    for t in at:
        grad[t] = -1.0
    for s in range(R.shape[0]):
        if alpha[s] != 0.0:
            c = alpha[s] * y[s]
            Gs = G[R[s]]
            for t in at:
                grad[t] += y[t] * c * Gs[R[t]]


def _gradient_wide(G, R, y, alpha, grad, at, yW, gW):  # pragma: no cover - compiled by numba
    """:func:`_gradient` through whole rows of G: every row's (Qα − e) in ``gW`` (the wide layout's
    ∇, overwritten; ``yW`` its labels, 1 outside the problem) by one contiguous pass per nonzero αₛ,
    then the positions ``at`` from it.  The same sums in the same order as :func:`_gradient`."""
    for r in range(gW.shape[0]):
        gW[r] = -1.0
        yW[r] = 1.0
    for p in range(R.shape[0]):
        yW[R[p]] = y[p]
    for s in range(R.shape[0]):
        if alpha[s] != 0.0:
            c = alpha[s] * y[s]
            Gs = G[R[s]]
            for r in range(gW.shape[0]):
                gW[r] += yW[r] * c * Gs[r]
    for t in at:
        grad[t] = gW[R[t]]


if numba is not None:
    _jit = numba.njit(cache=True, nogil=True)
    _in_up, _in_low = _jit(_in_up), _jit(_in_low)
    _shrink = _jit(_shrink)
    _clip_sum = _jit(_clip_sum)
    _pair, _max_key, _last_max, _mark = _jit(_pair), _jit(_max_key), _jit(_last_max), _jit(_mark)
    _first_i, _select_j, _step = _jit(_first_i), _jit(_select_j), _jit(_step)
    _shrink_h, _compact, _build_h = _jit(_shrink_h), _jit(_compact), _jit(_build_h)
    _to_wide, _from_wide, _gather = _jit(_to_wide), _jit(_from_wide), _jit(_gather)
    _all_rows = _jit(_all_rows)
    _smo_loop, _gradient, _gradient_wide = _jit(_smo_loop), _jit(_gradient), _jit(_gradient_wide)


def solve_on_gram(G: np.ndarray, R: np.ndarray, y: np.ndarray, Cv: np.ndarray, alpha: np.ndarray | None = None,
                  grad: np.ndarray | None = None, *, tol: float = 1e-3, max_iter: int = MAX_ITER,
                  shrinking: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """Solve the C-SVC dual on rows R of the Gram matrix G from α = 0 or a feasible start.

    Parameters
    ----------
    G : (N, N) float64 or float32 C-contiguous Gram matrix of all rows (read only)
    R : (n,) integer rows of G that make the problem
    y : (n,) labels ±1 (float64)
    Cv : (n,) upper bounds Cᵢ = C·wᵢ (> 0)
    alpha : (n,) feasible start (0 ≤ αᵢ ≤ Cᵢ, yᵀα = 0); default 0.  Not modified.
    grad : (n,) its gradient Qα − e; default: computed from G
    tol : stopping tolerance of m(α) − M(α) (LIBSVM's eps; 1e-3 as the independent fit)
    max_iter : cap on two-variable steps (LIBSVM's is 10⁷ for small problems)
    shrinking : drop rows that cannot violate the rule from the passes, every min(n, 300) steps
        (LIBSVM's rule; its period is 1,000), and check them all again before stopping; once at
        most 800 rows are active the passes read a copy of their Gram matrix (at most 5.1 MB)

    Returns
    -------
    alpha, grad : (n,) the solution and its gradient
    n_iter : steps taken (``max_iter`` means the cap was reached)
    """
    if numba is None:
        raise ImportError("solve_on_gram needs numba (pip install 'gpuksvm[fast]')")
    # unsigned row indices: numba adds no negative-index wrap-around to the passes' reads of G
    R = np.ascontiguousarray(R, dtype=np.uint32 if G.shape[0] <= _U32_ROWS else np.int64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    Cv = np.ascontiguousarray(Cv, dtype=np.float64)
    a = np.zeros(R.size) if alpha is None else np.array(alpha, dtype=np.float64)
    if grad is None:
        g = np.empty(R.size)
        _gradient(G, R, y, a, g, np.arange(R.size))
    else:
        g = np.array(grad, dtype=np.float64)
    D = np.ascontiguousarray(G[R, R], dtype=np.float64)   # the diagonal: one gather, not one per step
    # the wide layout keeps the problem's order (the ties) only when R ascends
    wide = R.size >= WIDE_SHARE * G.shape[0] and bool(np.all(R[1:] > R[:-1]))
    n_iter = _smo_loop(G, R, D, y, Cv, a, g, float(tol), int(max_iter), bool(shrinking), _H_ROWS, _REFILL,
                       wide)
    return a, g, int(n_iter)
