"""The steps of SVI (Algorithm 1 of the SVI paper) as pure functions.

:mod:`gpuksvm.solvers.svi.algorithm` runs them (single process) and
:mod:`gpuksvm.scaleout` (on a Dask cluster); the measured reasons for the
defaults below are in :mod:`gpuksvm.solvers.svi.algorithm`.

* step 1 — the subsets: :func:`row_order_keys`, :func:`class_orders`,
  :func:`take_blocks`, :func:`draw_subsets`; per binary problem
  :func:`plan_problem` and :func:`problem_subsets`;
* step 3 — the sub-models as one kernel expansion: :func:`stack_submodels`,
  :func:`average_submodels`, :func:`submodel_values`;
* step 4 — :func:`select_margin_rows`;
* step 5 — :func:`closed_form_beta`, :func:`solve_margin_problem`;
* the ensemble check — :func:`check_rows`, :func:`ensemble_check`;
* the model — :func:`stack_margin_models`.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import scipy.linalg as sla
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.array import linalg
from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_matvec
from gpuksvm.solvers.multiclass import problem_rows
from gpuksvm.solvers.row_order import RowHasher

__all__ = ["row_order_keys", "class_orders", "take_blocks",
           "draw_subsets", "plan_problem", "problem_subsets", "check_rows", "select_margin_rows", "closed_form_beta", "margin_solve_dtype", "margin_solve_bytes",
           "max_margin_rows", "SUBMODEL_BLOCK_SHARE", "submodel_block_rows", "submodel_row_bytes",
           "solve_margin_problem", "stack_submodels", "average_submodels", "submodel_values",
           "ensemble_check", "stack_margin_models", "DEFAULT_MARGIN_TOL", "DEFAULT_MAX_MARGIN_SV",
           "DEFAULT_MIN_MARGIN_SV", "DEFAULT_MIN_SUBSET_ROWS", "MAX_SUBMODEL_DISAGREEMENT",
           "MAX_HELD_OUT_LOSS", "CHECK_MAX_ROWS"]

#: Default band half-width τ of the margin rule |y f̄ − 1| ≤ τ (evidence: the
#: estimator's docstring and ``bench/studies/svi_margin_tol.py``).
DEFAULT_MARGIN_TOL = 0.2
#: Default cap on the number of margin SVs per binary problem.
DEFAULT_MAX_MARGIN_SV = 5000
#: Default floor on the number of margin SVs per binary problem.
DEFAULT_MIN_MARGIN_SV = 10
#: Default least number of rows of a sub-SVM (module docstring: below it SVI
#: missed SVC by ≥ 0.5 point on every real data set measured).
DEFAULT_MIN_SUBSET_ROWS = 2000
#: Largest pairwise sign disagreement of the sub-models on rows neither saw
#: that the ensemble check accepts (module docstring).
MAX_SUBMODEL_DISAGREEMENT = 0.04
#: Largest accuracy loss of the closed-form model against the sub-models'
#: leave-subset-out average, on held-out rows, that the check accepts
#: (measured: ≤ +0.02 point where SVI was accurate, ≥ +0.22 on adult).
MAX_HELD_OUT_LOSS = 0.001
#: Rows of a problem the check scores (a stratified sample of them beyond it):
#: 10,000 rows put the standard error of the paired accuracy difference near
#: 0.1–0.2 point for the 1–3 % disagreement measured between the two models.
CHECK_MAX_ROWS = 10_000
#: Largest s for which the closed-form system is solved in float64 whatever the
#: working dtype (an s×s float64 matrix of 8192² entries is 512 MiB).
_FLOAT64_SOLVE_MAX = 8192
#: Rows of kernel values step 5 computes at once beside its s×s system when the memory budget
#: leaves no more (512 × 5,000 float64: 20 MB, a GEMM still large enough for BLAS).
_MARGIN_BLOCK_ROWS = 512


# --------------------------------------------------------------------------- step 1
def row_order_keys(X: Any, random_state: Any) -> np.ndarray:
    """(n, 2) uint64 keys that order the rows independently of the order given.

    The seeded hash of every row's contents
    (:class:`~gpuksvm.solvers.row_order.RowHasher`, its keys drawn from
    ``random_state``): distinct rows tie with probability about 2⁻⁶⁴, equal
    rows are interchangeable.  NumPy, CuPy and SciPy-sparse X; the keys are
    on the host.
    """
    return RowHasher(X.shape[1], random_state).keys(X)


def class_orders(labels: np.ndarray, *, stratify: bool = True, keys: np.ndarray | None = None,
                 random_state: Any = None) -> list[np.ndarray]:
    """Every class's rows (all rows when not ``stratify``) in a random order.

    With ``keys`` (:func:`row_order_keys`) the rows are first sorted by their
    keys, so the order — and every subset taken from it — depends on the rows
    and ``random_state`` only, not on the order the rows came in.
    """
    labels = np.asarray(labels)
    rs = check_random_state(random_state)
    groups = [np.flatnonzero(labels == c) for c in np.unique(labels)] if stratify \
        else [np.arange(labels.shape[0])]
    orders = []
    for rows in groups:
        if keys is not None:
            rows = rows[np.lexsort((keys[rows, 1], keys[rows, 0]))]
        orders.append(rows[rs.permutation(rows.shape[0])].astype(np.int64))
    return orders


def take_blocks(orders: list[np.ndarray], n_subsets: int, rate: float) -> list[np.ndarray]:
    """M disjoint subsets: block m of every order, ``round(rate · len)`` rows each.

    A non-empty order gives every subset at least one row while it has rows
    left (so small classes appear in every subset), at most ``len // M`` when
    it has M rows or more; an order with fewer rows than subsets gives one row
    to each of the first subsets, starting one further for every order.
    Returns M sorted int64 arrays.
    """
    parts: list[list[np.ndarray]] = [[] for _ in range(n_subsets)]
    for g, rows in enumerate(orders):
        m = rows.shape[0]
        if m == 0:
            continue
        if m < n_subsets:
            for j in range(m):
                parts[(g + j) % n_subsets].append(rows[j:j + 1])
            continue
        q = min(max(int(round(rate * m)), 1), m // n_subsets)
        for j in range(n_subsets):
            parts[j].append(rows[j * q:(j + 1) * q])
    return [np.sort(np.concatenate(p)).astype(np.int64) if p else np.zeros(0, np.int64)
            for p in parts]


def draw_subsets(labels: np.ndarray, n_subsets: int, subset_rate: float, *, stratify: bool = True,
                 random_state: Any = None, keys: np.ndarray | None = None) -> list[np.ndarray]:
    """Draw ``n_subsets`` disjoint random subsets of rate ``subset_rate`` (Alg. 1, step 1).

    Parameters
    ----------
    labels : (n,) array
        Class of every row (used when ``stratify``).
    n_subsets : int
        M, the number of subsets.
    subset_rate : float in (0, 1]
        θ; each subset holds about θ·n rows.  ``n_subsets * subset_rate`` must
        not exceed 1 (the subsets are drawn without replacement).
    stratify : bool
        θ·n_c rows of every class c in every subset (see :func:`take_blocks`).
    random_state : int, RandomState or None
    keys : (n, 2) array, optional
        Row-order keys (:func:`row_order_keys`): the draw then does not depend
        on the order of the rows.

    Returns
    -------
    list of M sorted int64 arrays of row indices, pairwise disjoint.
    """
    if n_subsets * subset_rate > 1.0 + 1e-12:
        raise ValueError(f"n_subsets * subset_rate must be <= 1 for disjoint subsets, got "
                         f"{n_subsets} * {subset_rate} = {n_subsets * subset_rate:g}")
    orders = class_orders(labels, stratify=stratify, keys=keys, random_state=random_state)
    return take_blocks(orders, n_subsets, subset_rate)


def plan_problem(n_rows: int, n_subsets: int, subset_rate: float, min_subset_rows: int) -> float | None:
    """The subset rate θ_p of a binary problem of ``n_rows`` rows, or None: solve it exactly.

    θ_p = max(θ, min_subset_rows / n_rows) so that every sub-SVM has at least
    ``min_subset_rows`` rows; a problem with fewer than
    ``n_subsets · min_subset_rows`` rows cannot hold M such disjoint subsets
    and is solved by the exact SVM (module docstring: the measured reason).
    """
    if n_rows < n_subsets * min_subset_rows or n_rows < 2:
        return None
    return max(float(subset_rate), min_subset_rows / n_rows)


def problem_subsets(yidx: np.ndarray, orders: list[np.ndarray], pos: int, neg: int | None, *,
                    n_subsets: int, subset_rate: float, min_subset_rows: int
                    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], dict]:
    """The sub-SVM training sets of one binary problem (SVI steps 1–2).

    ``pos`` vs ``neg`` (one-vs-one) or vs the rest (``neg=None``).  The
    problem's rate comes from :func:`plan_problem`; its subsets are blocks of
    the class orders (:func:`class_orders`, restricted to the problem's rows)
    and are kept when they hold both classes.

    Returns the problem's rows (ascending), their ±1 labels, the kept subsets
    (empty: solve the problem exactly) and a summary for ``sub_models_``.
    """
    rows, yp = problem_rows(yidx, pos, neg)
    in_prob = np.zeros(yidx.shape[0], bool)
    in_prob[rows] = True
    rate = plan_problem(rows.shape[0], n_subsets, subset_rate, min_subset_rows)
    subs, used = [], []
    if rate is not None:
        mine = [o[in_prob[o]] for o in orders]
        ypos = np.zeros(yidx.shape[0], bool)
        ypos[rows[yp > 0]] = True
        for m, S in enumerate(take_blocks([o for o in mine if o.size], n_subsets, rate)):
            if S.size and ypos[S].any() and not ypos[S].all():
                subs.append(S)
                used.append(m)
    info = {"problem": (int(pos), None if neg is None else int(neg)), "n_rows": int(rows.shape[0]),
            "subset_rate": rate, "subsets": used, "subset_sizes": [int(S.size) for S in subs],
            "exact": None if subs else ("too_small" if rate is None else "no_mixed_subset")}
    return rows, yp, subs, info


def check_rows(rows: np.ndarray, orders: list[np.ndarray], max_rows: int = CHECK_MAX_ROWS) -> np.ndarray:
    """The rows of a problem that :func:`ensemble_check` scores: all of them up to
    ``max_rows``, else every k-th row of every class order (a random,
    stratified, order-independent sample).  Sorted."""
    if rows.shape[0] <= max_rows:
        return rows
    in_prob = np.zeros(max(int(o.max()) for o in orders if o.size) + 1, bool)
    in_prob[rows] = True
    stride = -(-rows.shape[0] // max_rows)
    return np.sort(np.concatenate([o[in_prob[o]][::stride] for o in orders]))


# --------------------------------------------------------------------------- step 4
def select_margin_rows(margin: np.ndarray, y: np.ndarray, margin_tol: float, *,
                       min_sv: int = DEFAULT_MIN_MARGIN_SV,
                       max_sv: int | None = DEFAULT_MAX_MARGIN_SV) -> tuple[np.ndarray, dict]:
    """Pick the margin support vectors from the functional margins y·f̄ (eq. 1).

    The rule: row i qualifies when ``|margin_i − 1| ≤ margin_tol``.  Guards, in
    this order:

    * **too many** — if more than ``max_sv`` rows qualify, keep the ``max_sv``
      rows closest to the margin (smallest ``|margin − 1|``);
    * **too few** — if fewer than ``min_sv`` rows qualify, take the ``min_sv``
      closest rows whatever their distance;
    * **both classes** — each class keeps at least ``max(1, min_sv // 2)`` rows
      (or all its rows, if it has fewer): its closest rows are added when
      missing.  A one-class selection would give β = 0 (Πy = 0).

    Parameters
    ----------
    margin : (n,) array of y_i f̄(x_i)
    y : (n,) array in {−1, +1}
    margin_tol : float ≥ 0
    min_sv, max_sv : int (``max_sv=None``: no cap)

    Returns
    -------
    rows : sorted int64 indices into ``margin``
    info : dict with ``n_candidates`` (rows inside the band), ``n_selected`` and
        ``guard`` (``None``, ``"max"``, ``"min"`` or ``"class"``)
    """
    margin = np.asarray(margin, dtype=np.float64)
    y = np.asarray(y)
    dist = np.abs(margin - 1.0)
    order = np.argsort(dist, kind="stable")
    n_cand = int(np.count_nonzero(dist <= margin_tol))
    guard = None
    n_take = n_cand
    if max_sv is not None and n_take > max_sv:
        n_take, guard = int(max_sv), "max"
    if n_take < min_sv:
        n_take, guard = min(int(min_sv), dist.shape[0]), "min"
    chosen = np.zeros(dist.shape[0], dtype=bool)
    chosen[order[:n_take]] = True
    per_class = max(1, int(min_sv) // 2)
    for label in (-1, 1):
        of_class = order[y[order] == label]
        need = min(per_class, of_class.shape[0]) - int(np.count_nonzero(chosen[of_class]))
        if need > 0:
            chosen[of_class[:per_class]] = True
            guard = "class"
    rows = np.flatnonzero(chosen).astype(np.int64)
    return rows, {"n_candidates": n_cand, "n_selected": int(rows.shape[0]), "guard": guard}


# --------------------------------------------------------------------------- step 5
def closed_form_beta(K: Any, y: Any, C: float, *, overwrite_k: bool = False) -> tuple[Any, float]:
    """β and b minimizing eq. (5): ½βᵀKβ + C‖y − Kβ − 1b‖².

    β = (I/(2C) + ΠK)⁻¹ Πy  (eq. 9, Π = I − 11ᵀ/s)
    b = (1/s) 1ᵀ(y − Kβ) = ȳ − mᵀβ  (eq. 7, m the column means of K)

    Any solution of (9) has 1ᵀβ = 0 (1ᵀ of the left side is 1ᵀβ/(2C), of the
    right side 0), so β = Πβ and (9) is the symmetric positive definite system
    (I/(2C) + ΠKΠ) β = Πy (eigenvalues ≥ 1/(2C)).  It is formed in the memory
    of K (ΠKΠ = K − m1ᵀ − 1mᵀ + μ11ᵀ) and factorized there by Cholesky: one
    s×s matrix in all, where forming ΠK beside K and solving it by LU held
    three (845 MB of peak growth on ijcnn1, s = 5,000).  If the factorization
    fails (rounding in float32 at large s), the general system (9) is solved
    by LU on a fresh ΠK.

    Parameters
    ----------
    K : (s, s) symmetric kernel matrix of the margin SVs (NumPy or CuPy)
    y : (s,) labels in {−1, +1} on the same device
    C : float > 0
    overwrite_k : bool
        Use K's memory for the system (K is then destroyed).

    Returns
    -------
    beta : (s,) array on K's device, b : float
    """
    xp = bk.namespace_of(K)
    s = K.shape[0]
    m = K.mean(axis=0)
    ybar = y - y.mean()
    A = K if overwrite_k else K.copy()
    A -= m[None, :]
    A -= m[:, None]
    A += m.mean()
    A[xp.arange(s), xp.arange(s)] += 1.0 / (2.0 * C)
    try:
        beta = _solve_spd_inplace(A, ybar)
    except np.linalg.LinAlgError:
        if overwrite_k:
            raise
        A = K - m[None, :]
        A[xp.arange(s), xp.arange(s)] += 1.0 / (2.0 * C)
        beta = linalg.solve(A, ybar)
    b = float(y.mean() - m @ beta)
    return beta, b


def _solve_spd_inplace(A: Any, b: Any) -> Any:
    """Solve A x = b for symmetric positive definite ``A``, factorized in A's memory on the
    CPU (``A`` is destroyed; its transpose is the Fortran-ordered matrix LAPACK works in)."""
    if bk.namespace_of(A) is not np:
        return linalg.solve_spd(A, b)
    F = A.T if A.flags.c_contiguous else A
    factor = sla.cho_factor(F, lower=True, overwrite_a=True, check_finite=False)
    return sla.cho_solve(factor, b, check_finite=False)


def margin_solve_bytes(s: int, d: int, itemsize: int) -> int:
    """Working bytes of step 5 on s margin rows of d features: the s×s system and the row
    block of kernel values computed into it (:data:`_MARGIN_BLOCK_ROWS` rows)."""
    return s * s * itemsize + min(s, _MARGIN_BLOCK_ROWS) * (s + d) * itemsize


def margin_solve_dtype(s: int, d: int, dtype: Any, budget: int) -> tuple[np.dtype, bool]:
    """The dtype of step 5's s×s system and whether the memory budget chose it.

    float64 up to s = ``_FLOAT64_SOLVE_MAX`` (beyond, with a float64 working
    ``dtype``) when :func:`margin_solve_bytes` fits ``budget``; else float32,
    which halves the matrix (the second value: True when float64 was wanted
    and only the budget ruled it out).
    """
    wanted = s <= _FLOAT64_SOLVE_MAX or np.dtype(dtype) == np.float64
    if wanted and margin_solve_bytes(s, d, 8) <= budget:
        return np.dtype(np.float64), False
    return np.dtype(np.float32), wanted


def max_margin_rows(d: int, budget: int) -> int:
    """The most margin rows whose float32 step 5 (:func:`margin_solve_bytes`) fits ``budget``."""
    lo, hi = 1, int(np.sqrt(max(int(budget), 0) / 4.0)) + 1
    while lo < hi:                                   # the largest s that fits (bisection)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if margin_solve_bytes(mid, d, 4) <= budget else (lo, mid - 1)
    return lo


def solve_margin_problem(Xs: Any, ys: np.ndarray, kernel: Kernel, C: float,
                         dtype: np.dtype) -> tuple[np.ndarray, float]:
    """SVI step 5 on the margin rows ``Xs`` (on their device): β (host float64) and b.

    The s×s system is formed and solved in float64 up to s = ``_FLOAT64_SOLVE_MAX``
    when it fits the memory budget (:func:`margin_solve_dtype`), in one s×s
    matrix (:func:`closed_form_beta`) filled in row blocks of the budget left
    beside it; a failed float32 factorization is retried in float64.
    """
    s, d = int(Xs.shape[0]), int(Xs.shape[1])
    budget = bk.memory_budget(bk.device_of(Xs))
    sdt, _ = margin_solve_dtype(s, d, dtype, budget)
    for dt in ((sdt,) if sdt == np.float64 else (sdt, np.dtype(np.float64))):
        rows = bk.plan_rows(s, (s + d) * dt.itemsize, budget=max(budget - s * s * dt.itemsize, 0),
                            min_rows=min(s, _MARGIN_BLOCK_ROWS))
        K = kernel_block(Xs, None, kernel, dtype=dt, block_rows=rows)
        try:
            beta, b = closed_form_beta(K, bk.to_device(ys, bk.device_of(Xs), dt), float(C), overwrite_k=True)
            break
        except np.linalg.LinAlgError:
            if dt == np.float64:
                raise
        finally:
            del K
    return np.asarray(bk.to_host(beta), dtype=np.float64), float(b)


# --------------------------------------------------------------------------- step 3
def stack_submodels(models: list[tuple[np.ndarray, np.ndarray, float]]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sub-models ``(support rows, dual coefficients, intercept)`` as one expansion:
    the union U of their support rows, the |U| × m coefficient matrix W (column j
    = model j) and the m intercepts, so that ``f_j(x) = Σ_u W[u, j] κ(x_u, x) + b_j``."""
    if not models:
        return np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros(0)
    union = np.unique(np.concatenate([sup for sup, _c, _b in models]))
    W = np.zeros((union.size, len(models)))
    for j, (sup, coef, _b) in enumerate(models):
        np.add.at(W[:, j], np.searchsorted(union, sup), coef)
    return union, W, np.array([b for _s, _c, b in models], dtype=np.float64)


def average_submodels(results: list[list[tuple[np.ndarray, np.ndarray, float]]]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVI step 3's ensemble (eq. 1): ``f̄_p(x) = Σ_u W[u, p] κ(x_u, x) + b̄_p``.

    ``results[p]`` lists the sub-models of problem p.  Returns the union U of
    their support rows, the |U| × n_problems averaged coefficients W and the
    averaged intercepts b̄.
    """
    union, W, b = stack_submodels([m for res in results for m in res])
    A = np.zeros((W.shape[1], len(results)))     # column p averages problem p's models
    j = 0
    for p, res in enumerate(results):
        A[j:j + len(res), p] = 1.0 / len(res)
        j += len(res)
    return union, W @ A, b @ A


#: The share of the memory budget (1/this) one kernel block of :func:`submodel_values` takes.  The
#: fit holds the sub-models' values, the check's rows and the allocator's freed blocks beside it:
#: measured on ijcnn1 (49,990 rows, budget 64 MB, VmHWM growth of the fit), blocks of half the
#: budget (kernel_matvec's own choice) 110-114 MB, of a quarter 62 MB, an eighth 56 MB.
SUBMODEL_BLOCK_SHARE = 4


def submodel_block_rows(n_rows: int, bytes_per_row: int, device: Any) -> int:
    """Rows per block of the sub-models' values: blocks of :data:`SUBMODEL_BLOCK_SHARE`'s part
    of the memory budget, at least one row.

    Parameters
    ----------
    n_rows : int
        Rows to evaluate.
    bytes_per_row : int
        Scratch of one row: its kernel row against the support rows and its converted features
        (:func:`submodel_values`), and what a caller keeps per row beside them.
    device : str or Device
        Whose budget (:func:`gpuksvm.array.backend.memory_budget`).

    Returns
    -------
    int

    Raises
    ------
    MemoryBudgetError
        When the budget is smaller than one row.
    """
    rows = bk.plan_rows(n_rows, bytes_per_row, device, what="the sub-models' values")
    return max(1, min(rows, bk.memory_budget(device) // SUBMODEL_BLOCK_SHARE // max(int(bytes_per_row), 1)))


def submodel_row_bytes(n_sv: int, d: int, dtype: Any) -> int:
    """Scratch bytes of one row of :func:`submodel_values`: its kernel row against ``n_sv``
    support rows and its ``d`` features converted to ``dtype``."""
    return (int(n_sv) + int(d)) * np.dtype(dtype).itemsize


def submodel_values(Xd: Any, rows: np.ndarray | None, Xsv: Any, W: np.ndarray, b: np.ndarray,
                    kernel: Kernel, dtype: Any) -> np.ndarray:
    """Host float64 (len(rows), m) decision values ``K(X[rows], Xsv) W + b`` of m
    stacked sub-models (:func:`stack_submodels`); ``rows=None``: every row.  The kernel blocks
    take a quarter of the memory budget (:func:`submodel_block_rows`)."""
    Xr = Xd if rows is None else Xd[bk.to_device(rows, bk.device_of(Xd))]
    if W.shape[0] == 0:
        return np.tile(b, (Xr.shape[0], 1))
    dev = bk.device_of(Xd)
    rows = submodel_block_rows(Xr.shape[0], submodel_row_bytes(Xsv.shape[0], Xr.shape[1], dtype), dev)
    F = kernel_matvec(Xr, Xsv, bk.to_device(W.astype(dtype), dev), kernel, dtype=dtype, block_rows=rows)
    return np.asarray(bk.to_host(F), dtype=np.float64).reshape(Xr.shape[0], W.shape[1]) + b


# --------------------------------------------------------------------------- the check
def ensemble_check(F: np.ndarray, inside: np.ndarray, y: np.ndarray, f_model: np.ndarray,
                   is_margin: np.ndarray, *, max_disagreement: float = MAX_SUBMODEL_DISAGREEMENT,
                   max_loss: float = MAX_HELD_OUT_LOSS) -> dict:
    """Can the sub-model ensemble stand in for the exact SVM of this problem?

    Parameters
    ----------
    F : (h, M) decision values of the M sub-models on h rows of the problem
    inside : (h, M) bool, row h is in sub-model m's training subset
    y : (h,) ±1 labels
    f_model : (h,) decision values of the closed-form model (steps 4–5)
    is_margin : (h,) bool, the row is one of the model's margin SVs

    Returns
    -------
    dict with ``disagreement`` (mean over sub-model pairs of the fraction of
    rows outside both subsets where their signs differ; None with one
    sub-model), ``accuracy_model`` and ``accuracy_ensemble`` (on the rows that
    are not margin SVs; the ensemble value of a row averages the sub-models
    that did not train on it), ``n_rows``, ``passed`` — D ≤ ``max_disagreement``
    and a loss of at most ``max_loss`` (the measured reasons for the defaults:
    :mod:`gpuksvm.solvers.svi.algorithm`) — and, for a failure, the criteria ``failed``
    (``"disagreement"``, ``"accuracy_loss"``) and their ``reasons`` in words.
    """
    F = np.asarray(F, dtype=np.float64)
    out = ~np.asarray(inside, bool)
    M = F.shape[1]
    sign = F > 0
    pair_rates = []
    for a, b in combinations(range(M), 2):
        both = out[:, a] & out[:, b]
        if both.any():
            pair_rates.append(float(np.mean(sign[both, a] != sign[both, b])))
    D = float(np.mean(pair_rates)) if pair_rates else None
    scored = ~np.asarray(is_margin, bool) & out.any(axis=1)
    n_out = np.maximum(out.sum(axis=1), 1)
    f_loo = np.where(out, F, 0.0).sum(axis=1) / n_out
    acc_model = float(np.mean((f_model[scored] > 0) == (y[scored] > 0))) if scored.any() else None
    acc_ens = float(np.mean((f_loo[scored] > 0) == (y[scored] > 0))) if scored.any() else None
    failed, reasons = [], []
    if D is not None and D > max_disagreement:
        failed.append("disagreement")
        reasons.append(f"sub-models disagree on {100 * D:.1f} % of held-out rows "
                       f"(> {100 * max_disagreement:g} %)")
    if acc_model is not None and acc_model < acc_ens - max_loss:
        failed.append("accuracy_loss")
        reasons.append(f"the margin model is {100 * (acc_ens - acc_model):.2f} points less accurate "
                       f"than the ensemble on held-out rows (> {100 * max_loss:g})")
    passed = not failed
    return {"disagreement": D, "accuracy_model": acc_model, "accuracy_ensemble": acc_ens,
            "n_rows": int(scored.sum()), "passed": passed, "failed": failed, "reasons": reasons}


# --------------------------------------------------------------------------- the model
def stack_margin_models(margin_rows: list[np.ndarray], betas: list[np.ndarray]
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The model over the union of the problems' margin rows: (support rows, coefficients),
    one coefficient row per problem (zeros where a row belongs to another problem)."""
    support = np.unique(np.concatenate(margin_rows)) if margin_rows else np.zeros(0, np.int64)
    coef = np.zeros((len(margin_rows), support.size))
    for p, (glob, beta) in enumerate(zip(margin_rows, betas)):
        coef[p, np.searchsorted(support, glob)] = beta
    return support, coef
