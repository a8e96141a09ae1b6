"""Selective block minimization for linear SVMs on data that do not fit in memory (Chang & Roth 2011).

:func:`sbm`: DCD (:func:`gpuksvm.solvers.linear.dual_cd.dual_cd`'s engine) on
(block ∪ cache); after each block the least informative fraction
``cache_drop`` of those rows (α = 0, largest margin first) is dropped, the
rest stays cached for the next block (the problem and its notation:
:mod:`gpuksvm.solvers.linear.problem`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.data.blocks import BlockSource, check_block
from gpuksvm.solvers.progress import report
from gpuksvm.solvers.linear.dual_cd import _dcd_core, _default_block, _dual_bounds
from gpuksvm.solvers.linear.problem import (
    Design,
    LinearSolution,
    _blas_limit,
    _check_common,
    _losses,
    _pass_blocks,
    _seed,
    _split,
    _stream_labels,
    ovr_targets,
)

__all__ = ["sbm"]


def sbm(source: Any, C: float, loss: str = "squared_hinge", *, n_passes: int = 3,
        cache_drop: float = 0.75, labels: np.ndarray | None = None, classes: np.ndarray | None = None,
        class_weight: np.ndarray | None = None, intercept_scaling: float | None = 1.0,
        tol: float = 1e-4, inner_max_iter: int = 50, shrinking: bool = True,
        random_state: Any = None, device: Any = None, dtype: Any = None,
        verbose: int = 0) -> tuple[LinearSolution, np.ndarray, int]:
    """Selective block minimization (Chang & Roth 2011) over a :class:`~gpuksvm.data.blocks.BlockSource`.

    The dual variables of all n rows are kept (n × m floats, host); the rows
    themselves are never all in memory.  For each block B_j of a pass:
    W_j = B_j ∪ Ω (rows of the block already cached are taken from the cache);
    DCD (:func:`~gpuksvm.solvers.linear.dual_cd.dual_cd`'s engine, warm-started, ≤ ``inner_max_iter`` epochs)
    solves the sub-problem over α_{W_j} with the other α fixed (they stay inside
    w = Σ αᵢyᵢx̃ᵢ); then the fraction ``cache_drop`` of W_j that is least
    informative — α = 0 with the largest margin yᵢfᵢ — is dropped and the rest
    becomes the cache Ω.  Memory: one block plus a cache of at most
    (1 − p)/p blocks (p = ``cache_drop``; a third of a block at the paper's 75%);
    the sub-problem's Gram matrix is stored only when it is no larger than the
    rows themselves (|W| ≤ 2·dim), otherwise DCD works in blocks of GEMMs.
    Stops after ``n_passes`` passes, or earlier when every sub-problem of a pass
    starts within ``tol`` of optimality.  The labels are read once first
    (:meth:`BlockSource.labels`), and the primal objective needs one more pass.

    Parameters
    ----------
    source : BlockSource
    C, loss, intercept_scaling, tol, shrinking, random_state : as in :func:`~gpuksvm.solvers.linear.dual_cd.dual_cd`
    n_passes : int — passes over the data
    cache_drop : float in (0, 1] — fraction p dropped after each block (paper: 0.75)
    labels : all labels in pass order, if already read (else ``source.labels()``)
    classes : sorted class labels (default: those in ``labels``); two classes
        give one problem (classes[1] positive), more give one-vs-rest problems
    class_weight : (n_classes,) multipliers of C (:func:`~gpuksvm.solvers.linear.problem.ovr_targets` rules)
    inner_max_iter : int — DCD epochs per sub-problem
    device, dtype : where and in which precision the blocks are processed

    Returns
    -------
    (solution, classes, n_features)
    """
    _check_common(C, loss, tol, n_passes)
    if not isinstance(source, BlockSource):
        raise TypeError(f"sbm needs a gpuksvm.data.blocks.BlockSource, got {type(source).__name__}")
    if not (0.0 < float(cache_drop) <= 1.0):
        raise ValueError(f"cache_drop must be in (0, 1], got {cache_drop!r}")
    dev = bk.resolve_device("auto" if device is None else device)
    dt = bk.resolve_dtype(dtype, dev)
    xp = bk.get_namespace(dev)
    labels, classes, y_idx = _stream_labels(source, labels, classes)
    n_classes = classes.shape[0]
    n, m = y_idx.shape[0], (1 if n_classes == 2 else n_classes)

    def targets(rows):
        """(Y, S, U, D) of some rows, computed on the fly (O(n) storage is α and the labels only)."""
        Yr, Sr = ovr_targets(y_idx[rows], n_classes, class_weight=class_weight)
        return (Yr, Sr) + _dual_bounds(Sr, C, loss)
    A = np.zeros((n, m))
    rng = np.random.default_rng(_seed(random_state))
    n_features = source.n_features
    W = None
    cache_X, cache_idx = None, np.empty(0, dtype=np.int64)
    converged = False
    p = 0
    inner_epochs = 0

    def blocks():
        nonlocal n_features
        for off, Xb in _pass_blocks(iter(source), labels):
            if n_features is None:
                n_features = int(Xb.shape[1])
            yield off, check_block(Xb, n_features, dev, dt)

    for p in range(1, int(n_passes) + 1):
        worst = 0.0
        for off, Xb in blocks():
            gidx = np.arange(off, off + Xb.shape[0])
            if W is None:
                W = xp.zeros((n_features + (1 if intercept_scaling else 0), m), dtype=dt)
            fresh = ~np.isin(gidx, cache_idx)
            rows = Xb[xp.asarray(np.nonzero(fresh)[0])] if not fresh.all() else Xb
            Xw = bk.vstack_rows(cache_X, rows)
            widx = np.concatenate([cache_idx, gidx[fresh]])
            Aw = A[widx].copy()
            design = Design(Xw, intercept_scaling)
            Yw, _, Uw, Dw = targets(widx)
            with _blas_limit(design):
                info = _dcd_core(design, Yw, Uw, Dw, Aw, W, tol=float(tol),
                                 max_iter=int(inner_max_iter), shrinking=bool(shrinking), rng=rng,
                                 block=_default_block(design), gram_rows=2 * design.dim)
            inner_epochs += info["n_iter"]
            A[widx] = Aw
            worst = max(worst, info["gap0"])
            # cache selection: α > 0 first, then the smallest margins (Chang & Roth 2011 §4)
            n_keep = int(math.floor((1.0 - float(cache_drop)) * widx.shape[0]))
            if n_keep > 0:
                marg = Yw * np.asarray(bk.to_host(design.dot(W)), dtype=np.float64)
                score = np.where((Aw > 0).any(axis=1), -np.inf, marg.min(axis=1))
                keep = np.sort(np.argsort(score, kind="stable")[:n_keep])
                cache_X = Xw[xp.asarray(keep)]
                cache_idx = widx[keep]
            else:
                cache_X, cache_idx = None, np.empty(0, dtype=np.int64)
        report("SBM", f"pass {p}: largest initial sub-problem gap {worst:.3g}", verbose)
        if worst <= tol:
            converged = True
            break
    # the primal objective needs one more pass over the rows
    obj = np.zeros(m)
    coef, intercept = _split(W, Design(xp.zeros((1, n_features), dtype=dt), intercept_scaling))
    for off, Xb in blocks():
        sl = slice(off, off + Xb.shape[0])
        f = Design(Xb, intercept_scaling).dot(W)
        Yb, Sb, _, _ = targets(np.arange(sl.start, sl.stop))
        marg = 1.0 - xp.asarray(Yb, dtype=dt) * f
        obj += np.asarray(bk.to_host((xp.asarray(Sb, dtype=dt) * _losses(marg, loss)).sum(axis=0)),
                          dtype=np.float64) * float(C)
    Wh = np.asarray(bk.to_host(W), dtype=np.float64)
    obj += 0.5 * (Wh * Wh).sum(axis=0)
    sol = LinearSolution(coef, intercept, obj, p, converged, A,
                         {"inner_epochs": inner_epochs, "W": W, "cache_rows": int(cache_idx.shape[0])})
    return sol, classes, int(n_features)
