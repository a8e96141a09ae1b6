"""Linear SVM: the problem, its data and its solutions, shared by the linear solvers.

The problem (one column of ``Y`` per binary problem, all solved together):

    min_w  ½‖w‖² + Σᵢ Cᵢ ℓ(yᵢ wᵀx̃ᵢ),   ℓ(t) = max(0, 1−t)  ("hinge", L1-loss)
                                        ℓ(t) = max(0, 1−t)² ("squared_hinge", L2-loss)

with x̃ᵢ = [xᵢ, s] when an intercept is fitted: a constant column of value
``s = intercept_scaling`` is appended to F and its weight is *regularized*
like every other weight, exactly as LIBLINEAR does (the intercept is s·w_{d+1}).
The column is never materialized: :class:`Design` applies it implicitly.
Cᵢ = C · sample_weightᵢ (the estimator folds class weights into the weights).

Solvers
-------
:mod:`gpuksvm.solvers.linear.newton`
    THE primal Newton method for the L2-loss (:func:`~gpuksvm.solvers.linear.newton.newton_solve`)
    over a :class:`~gpuksvm.solvers.linear.newton.NewtonOracle`: rows in memory
    (:func:`gpuksvm.solvers.linear.newton_memory.newton_squared_hinge`), blocks
    streamed from disk (:func:`gpuksvm.solvers.linear.newton_stream.newton_stream`)
    and Dask chunks (:mod:`gpuksvm.scaleout`).
:func:`gpuksvm.solvers.linear.dual_cd.dual_cd`
    Dual coordinate descent with shrinking (Hsieh et al. 2008) for both losses.
:func:`gpuksvm.solvers.linear.sbm.sbm`
    Selective block minimization (Chang & Roth 2011) for data that do not fit
    in memory.

Every solver returns a :class:`LinearSolution`.  This module holds what they
share: :class:`Design`, :class:`LinearSolution`, :func:`primal_objective`,
:func:`ovr_targets`, the parameter checks and the block-source helpers of the
out-of-core solvers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.array.blas_threads import NARROW_DIM, host_busy, one_blas_thread

__all__ = ["Design", "LinearSolution", "primal_objective", "ovr_targets", "LOSSES", "STREAM_MAX_DIM"]

LOSSES = ("squared_hinge", "hinge")

#: Widest design (features + constant column) whose dim × dim Grams the Newton
#: solvers keep per problem (Cholesky in memory, every streamed pass out of core).
STREAM_MAX_DIM = 2048

# Designs at most NARROW_DIM wide run their CPU BLAS calls on one thread (each
# call is too small to pay for a second one), and wider ones too while the host
# is busy (see gpuksvm.array.blas_threads for the measurements).


def _blas_limit(X: "Design") -> Any:
    """Context manager: one BLAS thread for narrow CPU designs or a busy host, no change otherwise."""
    return one_blas_thread(X.xp is np and (X.dim <= NARROW_DIM or host_busy()))


# --------------------------------------------------------------------------- design


def _add(out: Any, G: Any, sign: float) -> None:
    """``out += sign · G`` in place."""
    if sign > 0:
        out += G
    else:
        out -= G


class Design:
    """Rows x̃ᵢ = [xᵢ, s] of F with an implicit constant column (``scale=None``: no column).

    F may be a NumPy/CuPy array or a SciPy/CuPy sparse CSR matrix.
    """

    def __init__(self, F: Any, scale: float | None):
        self.F = F
        self.scale = None if not scale else float(scale)
        self.sparse = bk.is_sparse(F)
        self.xp = bk.namespace_of(F)
        self.n, self.d = int(F.shape[0]), int(F.shape[1])
        self.dim = self.d + (1 if self.scale else 0)
        self.dtype = F.dtype

    def take(self, idx: Any) -> "Design":
        return Design(self.F[idx], self.scale)

    def dot(self, W: Any) -> Any:
        """F̃ W for W of shape (dim, m) → (n, m) dense."""
        out = self.F @ W[: self.d]
        out = self.xp.asarray(out.toarray() if bk.is_sparse(out) else out)
        if self.scale:
            out = out + self.scale * W[self.d][None, :]
        return out

    def tdot(self, U: Any) -> Any:
        """F̃ᵀ U for U of shape (n, m) → (dim, m)."""
        top = self.F.T @ U
        top = self.xp.asarray(top.toarray() if bk.is_sparse(top) else top)
        if not self.scale:
            return top
        return self.xp.concatenate([top, self.scale * U.sum(axis=0, keepdims=True)], axis=0)

    def _rows_gram(self, rows: Any, weights: Any, float64: bool, out: Any, sign: float,
                   cols: int | None = None) -> None:
        """``out += sign ·`` F̃ᵀ diag(weights) F̃ over ``rows`` for positive ``weights``, in float64.

        One copy of the rows is made (in float64 when asked) and scaled by √weights in place
        before the product (SYRK in NumPy: the same operand twice); the constant column's
        entries come from the unscaled copy.  The product is added into ``out`` (the caller's
        float64 accumulator) in place: the scratch is the copy and one d × d product (d ×
        ``cols`` products, dense rows: a column block at a time).
        """
        xp = self.xp
        A = self.F[rows]
        if float64 and A.dtype != np.float64:
            A = A.astype(np.float64)
        w = weights.astype(A.dtype, copy=False)
        if self.scale:      # the constant column's entries, ready before anything is added
            col = sign * self.scale * xp.asarray(A.T @ w).reshape(-1).astype(np.float64, copy=False)
            corner = sign * self.scale ** 2 * w.sum()
        if self.sparse:
            G = xp.asarray((A.multiply(w[:, None]).T @ A).toarray())
            _add(out[: self.d, : self.d], G, sign)
        else:
            A *= xp.sqrt(w)[:, None]
            self._add_column_blocks(A, out, sign, self.d if cols is None else max(int(cols), 1))
        del A
        if self.scale:
            out[: self.d, self.d] += col
            out[self.d, : self.d] += col
            out[self.d, self.d] += corner

    def _add_column_blocks(self, A: Any, out: Any, sign: float, step: int) -> None:
        """``out[:d, :d] += sign · AᵀA``, ``step`` columns of the product at a time.  A block that
        runs out of memory is retried narrower (down to one column).  Before the first add the
        error goes to the caller (nothing is in ``out`` yet: it may retry with fewer rows); after
        it, running out of memory at one column is a RuntimeError (``out`` is partly updated)."""
        a = 0
        while a < self.d:
            try:
                G, step = bk.smaller_on_out_of_memory(
                    lambda k: A.T @ A if (a == 0 and k >= self.d) else A.T @ A[:, a:a + k],
                    min(step, self.d - a), 1, what="Gram columns", size_text="{size:,} columns")
            except Exception as exc:  # noqa: BLE001 - only OOM is handled
                if a == 0 or not bk.is_out_of_memory(exc):
                    raise
                raise RuntimeError(f"out of memory adding a Gram's columns {a}: on; the sum is partial") from exc
            _add(out[: self.d, a:a + step], G, sign)
            del G
            a += step

    def signed_gram(self, weights: Any, idx: Any = None, *, block_rows: int = 8192,
                    float64: bool = False, out: Any = None, cols: int | None = None) -> Any:
        """Σᵢ wᵢ x̃ᵢx̃ᵢᵀ over the rows ``idx`` (all rows if None), weights of any sign; float64.

        The rows are multiplied in blocks of ``block_rows`` in the design's
        dtype (``float64=True``: converted to float64 first) and the blocks'
        Grams are summed in float64: a single float32 product over n rows
        accumulates a round-off of up to n·eps(float32) on the large diagonal
        (7 % at n = 800,000), blocks keep it near ``block_rows``·eps.  The
        scratch is one copy of a block's rows of one sign at a time and one d × d product.
        ``out`` (dim × dim float64): added into in place and returned (the streamed Newton
        solvers' accumulators: no second dim × dim array); ``cols``: the products in column
        blocks of this width (no d × d scratch; twice the flops of one SYRK).  A block that runs
        out of device memory is retried with fewer rows (:func:`~gpuksvm.array.backend.map_row_blocks`,
        a ``MemoryFallbackWarning``), from the first row whose product is not yet in ``out``.
        """
        xp = self.xp
        if idx is None:
            idx = xp.arange(self.n)
        if out is None:
            out = xp.zeros((self.dim, self.dim), dtype=np.float64)
        done = {1.0: 0, -1.0: 0}        # the rows idx[:done[sign]] of that sign are in ``out``

        def run(s: int, e: int) -> None:
            for sign in (1.0, -1.0):
                a = max(s, done[sign])
                if a >= e:
                    continue
                rows = idx[a:e]
                w = sign * weights[rows]
                mine = w > 0
                if bool(mine.all()):
                    self._rows_gram(rows, w, float64, out, sign, cols)
                elif bool(mine.any()):
                    sel = xp.nonzero(mine)[0]
                    self._rows_gram(rows[sel], w[sel], float64, out, sign, cols)
                done[sign] = e

        bk.map_row_blocks(run, int(idx.shape[0]), block_rows, what="Gram of row blocks")
        return out

    def row_gram(self) -> Any:
        """F̃ F̃ᵀ, shape (n, n) — only ever called on small blocks of rows."""
        G = self.F @ self.F.T
        G = self.xp.asarray(G.toarray() if bk.is_sparse(G) else G)
        return G + self.scale ** 2 if self.scale else G


@dataclass
class LinearSolution:
    """What every linear solver returns.

    Attributes
    ----------
    coef : (m, d) weights (on the device of F)
    intercept : (m,) intercepts s·w_{d+1} (zeros without an intercept column)
    objective : (m,) primal objective of each binary problem (host float64)
    n_iter : int — Newton steps, DCD epochs, or SBM passes
    converged : bool
    alpha : (n, m) dual variables (DCD/SBM; host float64) or None
    info : dict of solver details
    """

    coef: Any
    intercept: Any
    objective: np.ndarray
    n_iter: int
    converged: bool
    alpha: np.ndarray | None = None
    info: dict = field(default_factory=dict)


def _split(W: Any, design: Design) -> tuple[Any, Any]:
    xp = bk.namespace_of(W)
    coef = W[: design.d].T.copy()
    if design.scale:
        intercept = design.scale * W[design.d].copy()
    else:
        intercept = xp.zeros(W.shape[1], dtype=W.dtype)
    return coef, intercept


def _as_2d(Y: Any) -> Any:
    return Y[:, None] if Y.ndim == 1 else Y


def _weights(sample_weight: Any, n: int, m: int, xp, dtype) -> Any:
    """Per-sample, per-problem cost multipliers (n, m) on the device."""
    if sample_weight is None:
        return xp.ones((n, m), dtype=dtype)
    S = bk.asarray_in(xp, sample_weight, dtype)
    if S.ndim == 1:
        S = xp.broadcast_to(S[:, None], (n, m))
    if S.shape != (n, m):
        raise ValueError(f"sample_weight must have shape ({n},) or ({n}, {m}), got {S.shape}")
    return S


def _losses(margin: Any, loss: str) -> Any:
    """ℓ from 1 − yᵢfᵢ."""
    xp = bk.namespace_of(margin)
    h = xp.maximum(margin, 0)
    return h * h if loss == "squared_hinge" else h


def primal_objective(W: Any, b: Any, F: Any, Y: Any, C: float, loss: str, sample_weight: Any = None,
                     *, intercept_scaling: float | None = 1.0) -> np.ndarray:
    """Primal objective ½‖w‖² + ½(b/s)² + C Σᵢ sᵢ ℓ(yᵢ(wᵀxᵢ + b)) of each binary problem.

    Parameters
    ----------
    W : (m, d) or (d,) weights (``coef_``)
    b : (m,) or scalar intercepts (``intercept_``), or None for no intercept
    F : (n, d) data (dense or sparse, NumPy or CuPy)
    Y : (n, m) or (n,) targets in {−1, +1}
    C : float
    loss : {"squared_hinge", "hinge"}
    sample_weight : (n,) or (n, m), optional — per-sample multipliers of C
    intercept_scaling : float or None
        s; the intercept is regularized as ½(b/s)² (LIBLINEAR); ``None`` leaves
        it unregularized.

    Returns
    -------
    (m,) host float64 array.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    xp = bk.namespace_of(F if not bk.is_sparse(F) else F.data)
    W = xp.asarray(W, dtype=np.float64)
    W = W[None, :] if W.ndim == 1 else W
    m = W.shape[0]
    Y = _as_2d(xp.asarray(Y, dtype=np.float64))
    Fd = F.astype(np.float64) if F.dtype != np.float64 else F
    f = Fd @ W.T
    f = xp.asarray(f.toarray() if bk.is_sparse(f) else f)
    reg = 0.5 * (W * W).sum(axis=1)
    if b is not None:
        b = xp.asarray(b, dtype=np.float64).reshape(-1)
        f = f + b[None, :]
        if intercept_scaling:
            reg = reg + 0.5 * (b / float(intercept_scaling)) ** 2
    S = _weights(sample_weight, f.shape[0], m, xp, np.float64)
    data = C * (S * _losses(1.0 - Y * f, loss)).sum(axis=0)
    return np.asarray(bk.to_host(reg + data), dtype=np.float64)


def ovr_targets(y_idx: np.ndarray, n_classes: int, *, class_weight: np.ndarray | None = None,
                sample_weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """±1 targets and cost multipliers of the one-vs-rest problems (LIBLINEAR's rules).

    Two classes give one problem (class 1 positive), each row weighted by its
    own class weight; ``n_classes > 2`` give one problem per class in which
    only the positive class's weight applies (the rest keep weight 1), as
    LIBLINEAR's one-vs-rest training does.

    Returns
    -------
    Y : (n, m) host float64 in {−1, +1};  S : (n, m) host float64 multipliers of C.
    """
    y_idx = np.asarray(y_idx, dtype=np.int64)
    n = y_idx.shape[0]
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    cw = np.ones(n_classes) if class_weight is None else np.asarray(class_weight, dtype=np.float64)
    if n_classes == 2:
        Y = np.where(y_idx == 1, 1.0, -1.0)[:, None]
        S = (sw * cw[y_idx])[:, None]
        return Y, S
    pos = y_idx[:, None] == np.arange(n_classes)[None, :]
    Y = np.where(pos, 1.0, -1.0)
    S = sw[:, None] * np.where(pos, cw[None, :], 1.0)
    return Y, S


def _check_common(C: float, loss: str, tol: float, max_iter: int) -> None:
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if not (isinstance(C, (int, float, np.floating, np.integer)) and C > 0 and math.isfinite(C)):
        raise ValueError(f"C must be a positive finite number, got {C!r}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")


def _seed(random_state: Any) -> Any:
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return random_state
    return random_state


# --------------------------------------------------------------------------- out of core


def _stream_labels(source: Any, labels: Any, classes: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels of a block source in pass order, the sorted classes and each row's class index."""
    labels = source.labels() if labels is None else np.ravel(np.asarray(labels))
    if classes is None:
        classes = np.unique(labels)
    classes = np.asarray(classes)
    if classes.shape[0] < 2:
        raise ValueError(f"The number of classes has to be greater than one; got {classes.shape[0]} class")
    y_idx = np.searchsorted(classes, labels)
    y_idx = np.clip(y_idx, 0, classes.shape[0] - 1)
    if not np.array_equal(classes[y_idx], labels):
        raise ValueError("the block source yields labels that are not in classes")
    return labels, classes, y_idx.astype(np.int32 if classes.shape[0] < 2**31 else np.int64)


def _pass_blocks(blocks: Any, labels: np.ndarray) -> Any:
    """One pass: (offset, X_block) of every non-empty block, checked to be the first pass's rows."""
    n = labels.shape[0]
    off = 0
    for Xb, yb in blocks:
        nb = int(Xb.shape[0])
        if nb == 0:
            continue
        yb = np.ravel(bk.to_host(yb))
        if yb.shape[0] != nb or off + nb > n or not np.array_equal(yb, labels[off: off + nb]):
            raise ValueError("the block source does not yield the same rows on every pass "
                             "(labels differ from the first pass)")
        yield off, Xb
        off += nb
    if off != n:
        raise ValueError("the block source does not yield the same rows on every pass")
