"""Multi-class by binary problems: the problem list, the one-vs-one vote and the row blocks
in which predictions from binary decision values are made.

Shared by the estimators that train one binary machine per problem
(:class:`~gpuksvm.KernelSVC`, :class:`~gpuksvm.SVI`, :class:`~gpuksvm.CVM`).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from gpuksvm.array import backend as bk

__all__ = ["binary_problems", "problem_rows", "ovo_votes", "ovr_decision_function", "binary_predict",
           "ovo_predict", "decision_block_rows", "DECISION_BUDGET_SHARE"]

#: share of the memory budget a block of decision values and the vote's work arrays may take: the
#: kernel blocks computing them take half of what is left (kernel_matvec), so the two together
#: stay within the budget.  Measured (KernelSVC, 10 classes, 698 support vectors, 200,000 rows,
#: budget 64 MB, VmHWM growth): predict 34 / 35 / 38 MB and predict_proba 15 / 20 / 29 MB at
#: shares 1/8, 1/4, 1/2 (the whole-matrix path before: 161 and 1,056 MB); times at load 4 on
#: 2 cores, 3.2-8.1 s, did not separate the shares
DECISION_BUDGET_SHARE = 0.25


def binary_problems(n_classes: int, multi_class: str) -> list[tuple[int, int | None]]:
    """(positive class, negative class or None for "the rest") of every binary problem.

    Two classes: the single problem (1, 0) (positive = ``classes_[1]``, as in
    scikit-learn).  ``"ovr"``: (c, None) for every class.  ``"ovo"``: every
    pair (i, j), i < j, in lexicographic order (LIBSVM's order).
    """
    if n_classes == 2:
        return [(1, 0)]
    if multi_class == "ovr":
        return [(c, None) for c in range(n_classes)]
    return list(combinations(range(n_classes), 2))


def problem_rows(yidx: np.ndarray, pos: int, neg: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the binary problem ``pos`` vs ``neg`` (vs the rest when ``neg`` is None)
    among encoded labels ``yidx``, and their ±1 labels (+1 for ``pos``)."""
    if neg is None:
        rows = np.arange(yidx.shape[0], dtype=np.int64)
    else:
        rows = np.flatnonzero((yidx == pos) | (yidx == neg))
    return rows, np.where(yidx[rows] == pos, 1.0, -1.0)


def ovo_votes(pair_decisions: np.ndarray, n_classes: int, *, zero_votes_first: bool = False) -> np.ndarray:
    """(n, n_classes) one-vs-one vote counts: pair (i, j) votes i when its value is > 0, else j.

    That is LIBSVM's rule (``svm_predict_values``: a value of exactly 0 votes
    for j); ``zero_votes_first=True`` gives a 0 to i instead, the rule of
    scikit-learn's one-vs-rest decision function (``_ovr_decision_function``,
    which counts ``dec < 0`` as a vote for j).
    """
    votes = np.zeros((pair_decisions.shape[0], n_classes))
    for p, (i, j) in enumerate(combinations(range(n_classes), 2)):
        first = pair_decisions[:, p] >= 0 if zero_votes_first else pair_decisions[:, p] > 0
        votes[:, i] += first
        votes[:, j] += ~first
    return votes


def ovr_decision_function(pair_decisions: np.ndarray, n_classes: int) -> np.ndarray:
    """One-vs-one decision values → (n, n_classes) scores whose arg-max is the vote winner.

    ``pair_decisions[:, k]`` belongs to pair k = (i, j) of
    :func:`binary_problems` (``"ovo"``) and is positive for class i.  Each
    class gets its number of pairwise votes plus its summed pairwise
    confidences squashed into (−1/3, 1/3) by ``c / (3(|c| + 1))``, so the votes
    decide and the confidences only break ties (the LIBSVM/scikit-learn rule
    of ``decision_function_shape="ovr"``, the same operations in the same
    order, so equal pairwise values give equal scores; a pairwise value of
    exactly 0 votes for i there).
    """
    conf = np.zeros((pair_decisions.shape[0], n_classes))
    for p, (i, j) in enumerate(combinations(range(n_classes), 2)):
        conf[:, i] += pair_decisions[:, p]
        conf[:, j] -= pair_decisions[:, p]
    votes = ovo_votes(pair_decisions, n_classes, zero_votes_first=True)
    return votes + conf / (3.0 * (np.abs(conf) + 1.0))


def binary_predict(decisions: np.ndarray) -> np.ndarray:
    """Class index (0 or 1) of binary decision values (positive → ``classes_[1]``).

    A value of exactly 0 gives ``classes_[1]``, as LIBSVM/scikit-learn's SVC
    (its internal value, −f, votes for the second class when it is not > 0).
    """
    return (np.asarray(decisions) >= 0).astype(np.int64)


def ovo_predict(pair_decisions: np.ndarray, n_classes: int, *, break_ties: bool = False) -> np.ndarray:
    """Class indices from one-vs-one decision values.

    ``break_ties=False``: LIBSVM's vote — the class with most votes, the
    lowest class index among tied classes (:func:`ovo_votes`).
    ``break_ties=True``: the arg-max of :func:`ovr_decision_function`, whose
    confidences separate classes with equal votes (scikit-learn's
    ``SVC(break_ties=True)``).
    """
    if break_ties:
        return np.argmax(ovr_decision_function(pair_decisions, n_classes), axis=1)
    return np.argmax(ovo_votes(pair_decisions, n_classes), axis=1)


def decision_block_rows(n_rows: int, n_problems: int, n_classes: int, *, width: int = 0, work: int = 0,
                        device: str | bk.Device = "cpu", itemsize: int = 8) -> int:
    """Rows per block of a prediction made from the binary decision values of its rows.

    A block holds its (b, ``n_problems``) float64 decision values on the host (and on a GPU
    device their ``itemsize`` copy), the vote's or the one-vs-rest scores' work arrays (at most
    five (b, ``n_classes``) float64 arrays, :func:`ovr_decision_function`), ``width``
    float64 results and ``work`` more float64 work values per row; it takes
    :data:`DECISION_BUDGET_SHARE` of the host budget and of the device's
    (:func:`~gpuksvm.array.backend.memory_budget`).

    Examples
    --------
    >>> from gpuksvm.array.backend import config_context
    >>> with config_context(cpu_memory_budget="4MB"):   # 45 pairs of 10 classes: 1,120 bytes a row
    ...     decision_block_rows(200_000, 45, 10)
    892
    """
    per_row = 8 * (2 * n_problems + 5 * n_classes + width + work)
    rows = bk.plan_rows(n_rows, per_row, bk.CPU, budget=int(bk.memory_budget(bk.CPU) * DECISION_BUDGET_SHARE),
                        what="a block of decision values")
    dev = bk.resolve_device(device)
    if dev.is_gpu:
        rows = min(rows, bk.plan_rows(n_rows, n_problems * itemsize, dev,
                                      budget=int(bk.memory_budget(dev) * DECISION_BUDGET_SHARE),
                                      what="a block of decision values"))
    return rows
