"""Multi-class by binary problems: the problem list and the one-vs-one vote.

Shared by the estimators that train one binary machine per problem
(:class:`~gpuksvm.KernelSVC`, :class:`~gpuksvm.SVI`, :class:`~gpuksvm.CVM`).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

__all__ = ["binary_problems", "problem_rows", "ovo_votes", "ovr_decision_function"]


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


def ovo_votes(pair_decisions: np.ndarray, n_classes: int) -> np.ndarray:
    """(n, n_classes) one-vs-one vote counts: pair (i, j) votes i when its value is > 0, else j."""
    votes = np.zeros((pair_decisions.shape[0], n_classes))
    for p, (i, j) in enumerate(combinations(range(n_classes), 2)):
        votes[:, i] += pair_decisions[:, p] > 0
        votes[:, j] += pair_decisions[:, p] <= 0
    return votes


def ovr_decision_function(pair_decisions: np.ndarray, n_classes: int) -> np.ndarray:
    """One-vs-one decision values → (n, n_classes) scores whose arg-max is the vote winner.

    ``pair_decisions[:, k]`` belongs to pair k = (i, j) of
    :func:`binary_problems` (``"ovo"``) and is positive for class i.  Each
    class gets its number of pairwise votes plus its summed pairwise
    confidences squashed into (−1/3, 1/3) by ``c / (3(|c| + 1))``, so the votes
    decide and the confidences only break ties (the LIBSVM/scikit-learn rule
    of ``decision_function_shape="ovr"``).
    """
    conf = np.zeros((pair_decisions.shape[0], n_classes))
    for p, (i, j) in enumerate(combinations(range(n_classes), 2)):
        conf[:, i] += pair_decisions[:, p]
        conf[:, j] -= pair_decisions[:, p]
    return ovo_votes(pair_decisions, n_classes) + conf / (3.0 * (np.abs(conf) + 1.0))
