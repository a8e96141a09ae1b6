"""Linear SVM solvers (device-generic: NumPy/SciPy on the CPU, CuPy on a GPU).

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
:func:`newton_solve`
    THE primal Newton method for the L2-loss (Keerthi & DeCoste 2005; SPEC
    §1): active set I = {i: yᵢfᵢ < 1}, Hessian H = I + 2C F̃_Iᵀ D F̃_I, one
    Cholesky (:func:`gpuksvm.linalg.cho_factor`) per step (or Hessian-free
    Newton-CG in memory), exact line search on the piecewise-quadratic 1-D
    objective, LIBLINEAR's stopping rule.  The rows are reached through a
    :class:`NewtonOracle`, so every fit path shares the solver:
    :func:`newton_squared_hinge` (rows in memory, :class:`DesignOracle`;
    one-vs-rest problems share one Gram where their active sets allow),
    :func:`newton_stream` (blocks streamed from disk, :class:`StreamOracle`,
    dim × dim statistics per pass) and the Dask fit
    (:class:`ReducedOracle` over map-reduce sums, :mod:`gpuksvm.scaleout`).
:func:`dual_cd`
    Dual coordinate descent with shrinking (Hsieh et al. 2008, Algorithm 1 and
    3) for both losses.  Coordinates are visited in a random permutation, in
    blocks: per block one GEMM gives the block's gradients and its Gram matrix,
    the exact sequential coordinate updates run on that small matrix, and one
    GEMM updates w — the same iterates as one-at-a-time DCD, with BLAS-3 work.
:func:`sbm`
    Selective block minimization (Chang & Roth 2011) for data that do not fit
    in memory: DCD on (block ∪ cache); after each block the least informative
    fraction ``cache_drop`` of those rows (α = 0, largest margin first) is
    dropped, the rest stays cached for the next block.

Every solver returns a :class:`LinearSolution`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import backend as bk
from .. import linalg
from ..blocks import BlockSource, LinearMapBlockSource, check_block
from ._blas import NARROW_DIM, host_busy, one_blas_thread

__all__ = ["Design", "LinearSolution", "primal_objective", "ovr_targets", "NewtonOracle",
           "DesignOracle", "StreamOracle", "ReducedOracle", "newton_solve", "newton_squared_hinge",
           "newton_stream", "dual_cd", "sbm"]

LOSSES = ("squared_hinge", "hinge")

#: Widest design (features + constant column) whose dim × dim Grams the Newton
#: solvers keep per problem (Cholesky in memory, every streamed pass out of core).
STREAM_MAX_DIM = 2048
#: ... and on a GPU, in memory: there a Cholesky step (~dim³/3 FLOPs at GEMM speed) is cheap
#: and CG's many small launches are not.  bench/gpu_model.py (H100 model predictions, not
#: measurements): LLSVM on ijcnn1 with k = 4000 fits in 0.98 s with CG (1,478 CG iterations,
#: 68 % of the time launch-bound) and in 0.31 s with Cholesky.
GPU_CHOLESKY_MAX_DIM = 8192

# Designs at most NARROW_DIM wide run their CPU BLAS calls on one thread (each
# call is too small to pay for a second one), and wider ones too while the host
# is busy (see gpuksvm.solvers._blas for the measurements).


def _blas_limit(X: "Design") -> Any:
    """Context manager: one BLAS thread for narrow CPU designs or a busy host, no change otherwise."""
    return one_blas_thread(X.xp is np and (X.dim <= NARROW_DIM or host_busy()))


# --------------------------------------------------------------------------- design
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

    def weighted_gram(self, weights: Any) -> Any:
        """F̃ᵀ diag(weights) F̃, shape (dim, dim), for non-negative ``weights`` (n,)."""
        xp = self.xp
        if self.sparse:
            G = self.F.multiply(weights[:, None]).T @ self.F
            G = xp.asarray(G.toarray())
        else:
            Fw = self.F * xp.sqrt(weights)[:, None]
            G = Fw.T @ Fw                       # SYRK in NumPy (same operand)
        if not self.scale:
            return G
        col = self.scale * (self.F.T @ weights)
        col = xp.asarray(col).reshape(-1)
        out = xp.empty((self.dim, self.dim), dtype=G.dtype)
        out[: self.d, : self.d] = G
        out[: self.d, self.d] = col
        out[self.d, : self.d] = col
        out[self.d, self.d] = self.scale ** 2 * weights.sum()
        return out

    def signed_gram(self, weights: Any, idx: Any = None, *, block_rows: int = 8192,
                    float64: bool = False) -> Any:
        """Σᵢ wᵢ x̃ᵢx̃ᵢᵀ over the rows ``idx`` (all rows if None), weights of any sign; float64.

        The rows are multiplied in blocks of ``block_rows`` in the design's
        dtype (``float64=True``: converted to float64 first) and the blocks'
        Grams are summed in float64: a single float32 product over n rows
        accumulates a round-off of up to n·eps(float32) on the large diagonal
        (7 % at n = 800,000), blocks keep it near ``block_rows``·eps.
        """
        xp = self.xp
        if idx is None:
            idx = xp.arange(self.n)
        out = xp.zeros((self.dim, self.dim), dtype=np.float64)
        for s in range(0, int(idx.shape[0]), block_rows):
            rows = idx[s:s + block_rows]
            w = weights[rows]
            part = self.take(rows)
            if float64 and part.dtype != np.float64:
                part = Design(part.F.astype(np.float64), self.scale)
            wd = w.astype(part.dtype, copy=False)
            pos, neg = w > 0, w < 0
            if bool(pos.all()):
                out += part.weighted_gram(wd).astype(np.float64, copy=False)
                continue
            if bool(pos.any()):
                sel = xp.nonzero(pos)[0]
                out += part.take(sel).weighted_gram(wd[sel]).astype(np.float64, copy=False)
            if bool(neg.any()):
                sel = xp.nonzero(neg)[0]
                out -= part.take(sel).weighted_gram(-wd[sel]).astype(np.float64, copy=False)
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
    S = xp.asarray(bk.to_host(sample_weight) if xp is np else sample_weight, dtype=dtype)
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


# --------------------------------------------------------------------------- Newton
def _newton_hessian(gram: Any) -> Any:
    """H = I + 2 F̃_IᵀD F̃_I from the weighted Gram of the active rows."""
    xp = bk.namespace_of(gram)
    H = 2.0 * gram
    H[xp.arange(H.shape[0]), xp.arange(H.shape[0])] += 1.0
    return H


def _frac(npos: np.ndarray, n: int) -> np.ndarray:
    """LIBLINEAR's class-balance factor max(min(#pos, #neg), 1)/n of each problem."""
    npos = np.asarray(npos, dtype=np.float64)
    return np.maximum(np.minimum(npos, n - npos), 1.0) / max(int(n), 1)


def _eps_obj(dtype: Any) -> float:
    """Relative decrease of f below which a step has stalled (float32 sums resolve ~1e-7)."""
    return 1e-12 if np.dtype(dtype) == np.float64 else 1e-6


class NewtonOracle:
    """The data side of :func:`newton_solve`: everything that touches the rows.

    The primal Newton method for the L2-loss SVM (Keerthi & DeCoste 2005,
    eq. (4)–(6)) needs, per step and binary problem, f(w), ∇f(w) and the
    generalized Hessian H = I + 2 F̃_IᵀD F̃_I (I = {i: yᵢ w̃ᵀx̃ᵢ < 1},
    D = diag(Cᵢ)), and then, along the Newton direction p, the derivatives of
    the 1-D data term L(t) = Σᵢ Cᵢ max(0, 1 − yᵢ(oᵢ + t zᵢ))² (o = F̃w,
    z = F̃p) for the exact line search.  An oracle supplies those from wherever
    the rows live, so one solver loop — one stopping rule, one line search —
    runs on arrays in memory (:class:`DesignOracle`), on blocks streamed from
    disk (:class:`StreamOracle`, only dim × dim statistics per pass) and on
    Dask chunks (:class:`ReducedOracle` over map-reduce sums,
    :func:`gpuksvm.scaleout.llsvm.fit_llsvm`).

    Attributes
    ----------
    dim : int — length of w̃ (features, then the constant column when ``scale``)
    m : int — binary problems, solved together
    scale : float or None — value s of the constant (intercept) column
    frac : (m,) host — LIBLINEAR's max(min(#pos, #neg), 1)/n per problem
    xp, dtype — namespace and dtype of w, gradients and directions
    eps_obj : float — a step that lowers f by less than this (relative) has stalled
    n_passes : int — passes over the rows so far
    """

    dim: int
    m: int
    scale: float | None
    frac: np.ndarray
    xp: Any
    dtype: Any
    eps_obj: float
    n_passes: int = 0

    def evaluate(self, W: Any, active: np.ndarray) -> tuple[np.ndarray, Any]:
        """f(W) (host float64, (m,)) and ∇f(W) (dim, m); prepares H for the ``active`` problems."""
        raise NotImplementedError

    def grad0_norm(self) -> np.ndarray:
        """‖∇f(0)‖ = ‖2 F̃ᵀ(C∘y)‖ per problem (host; called after the first :meth:`evaluate`)."""
        raise NotImplementedError

    def direction(self, G: Any, active: np.ndarray) -> Any:
        """Newton directions −H⁻¹∇f of the ``active`` problems (zero columns elsewhere)."""
        raise NotImplementedError

    def line_start(self, W: Any, P: Any) -> None:
        """Prepare L(t) along P from W."""
        raise NotImplementedError

    def line_derivs(self, t: Any) -> tuple[Any, Any]:
        """L'(t) and L''(t) per problem (t has one entry per problem)."""
        raise NotImplementedError

    def line_accept(self, t: Any) -> None:
        """The step W ← W + t P was taken."""

    def line_minimize(self, wp: Any, pp: Any, active: Any) -> Any:
        """The step t minimizing φ(t) = ½‖w + tp‖² + L(t) per problem (``wp`` = wᵀp, ``pp`` = pᵀp;
        zero where not ``active``): the iterative search :func:`_line_search` on :meth:`line_derivs`."""
        return _line_search(wp, pp, self.line_derivs, active)

    def info(self) -> dict:
        """Solver details for :class:`LinearSolution` ``info``."""
        return {}


class _GramOracle(NewtonOracle):
    """Oracles that hold one float64 Gram per problem on the host: a Cholesky step each."""

    _g0: Any = None

    def _gram(self, c: int) -> np.ndarray:
        raise NotImplementedError

    def grad0_norm(self) -> np.ndarray:
        return self._g0

    def direction(self, G: np.ndarray, active: np.ndarray) -> np.ndarray:
        P = np.zeros_like(G)
        for c in np.flatnonzero(active):
            P[:, c] = _cholesky_step(self._gram(int(c)), G[:, c])
        return P


def _cholesky_step(gram: Any, g: Any, rebuild: Any = None) -> Any:
    """−(I + 2·gram)⁻¹ g; on a lost positive definiteness, ``rebuild()`` gives a float64 Gram.

    I + 2 F̃_IᵀD F̃_I is SPD; a Gram from float32 rows (or the drift of its
    up/downdates) can lose that at large n·C (seen at 800K rows × 1000 features).
    Without ``rebuild`` (streamed or reduced Grams, whose rows are gone) H's
    eigenvalues are floored at 1, its exact lower bound: a streamed LLSVM Gram
    T̃ᵀGT̃ carries G's round-off times ‖M‖² ≈ 1/λ_min, which made H indefinite
    for rank-deficient kernels at C ≥ 1e6 (degree-2 polynomial on 3 features,
    k = 20: LinAlgError; floored, the solution's objective is 6 % below the
    in-memory Newton's — tests/test_llsvm.py).
    """
    H = _newton_hessian(gram)
    try:
        L = linalg.cho_factor(H)
    except np.linalg.LinAlgError:
        if rebuild is not None:
            L = linalg.cho_factor(_newton_hessian(rebuild()))
            return linalg.cho_solve(L, -g)
        # no rows to rebuild from (a streamed or reduced Gram): H ≥ I exactly, so its
        # eigenvalues below 1 are round-off — floor them there
        xp = bk.namespace_of(H)
        w, V = linalg.eigh(linalg.symmetrize(H))
        return -(V @ ((V.T @ g) / xp.maximum(w, 1.0)))
    return linalg.cho_solve(L, -g)


def _line_search(wp: Any, pp: Any, derivs: Any, active: Any, *, max_iter: int = 30) -> Any:
    """Exact minimizer t of φ(t) = ½‖w + t p‖² + L(t) per problem (L from ``derivs``).

    φ is convex and piecewise quadratic: safeguarded 1-D Newton in a bracket
    (Keerthi & DeCoste 2005 solve the same 1-D problem by sorting breakpoints).
    ``derivs(t)`` returns L'(t), L''(t); one call per iteration (a pass over
    the outputs, or a map-reduce round trip on Dask).
    """
    xp = bk.namespace_of(wp)
    m = wp.shape[0]
    tiny = float(xp.finfo(wp.dtype).tiny)   # 1e-300 underflows to 0 in float32
    t = xp.ones(m, dtype=wp.dtype)
    lo = xp.zeros(m, dtype=wp.dtype)
    hi = xp.full(m, xp.inf, dtype=wp.dtype)
    for _ in range(max_iter):
        d1, d2 = derivs(t)
        g = wp + t * pp + d1
        h = pp + d2
        done = xp.abs(g) <= 1e-10 * (xp.abs(wp) + pp + tiny)
        lo = xp.where(g < 0, t, lo)
        hi = xp.where(g > 0, t, hi)
        flat = h <= tiny                     # zero curvature (inactive column): no Newton step
        tn = t - g / xp.where(flat, 1.0, h)
        bad = flat | (tn <= lo) | (tn >= hi) | ~xp.isfinite(tn)
        mid = xp.where(xp.isfinite(hi), 0.5 * (lo + hi), 2.0 * xp.maximum(t, 1.0))
        tn = xp.where(bad, mid, tn)
        tn = xp.where(done | ~active, t, tn)
        if bool(xp.all(xp.abs(tn - t) <= 1e-12 * xp.maximum(t, 1e-12))):
            t = tn
            break
        t = tn
    return xp.where(active, t, 0)


def exact_line_step(wp: Any, pp: Any, o: Any, z: Any, Y: Any, CS: Any, active: Any) -> Any:
    """argmin_{t ≥ 0} φ(t) = ½‖w + tp‖² + Σᵢ CSᵢ max(0, 1 − yᵢ(oᵢ + t zᵢ))² per column, from the
    sorted breakpoints (Keerthi & DeCoste 2005, §3), with no host round trip.

    With aᵢ = 1 − yᵢoᵢ and bᵢ = yᵢzᵢ, row i is active while aᵢ − t bᵢ > 0, and between
    breakpoints φ'(t) = wᵀp + t pᵀp − 2 S₁ + 2t S₂ with S₁ = Σ_active CSᵢbᵢaᵢ,
    S₂ = Σ_active CSᵢbᵢ².  A row with bᵢ > 0 leaves the active set at τᵢ = aᵢ/bᵢ, one with
    bᵢ < 0 enters there; φ' is continuous and non-decreasing, so sorting the τᵢ > 0 and
    accumulating (S₁, S₂) gives φ' at every breakpoint, the first interval where it turns
    non-negative, and the root of the linear φ' there.  Everything stays on the device: one sort
    and a few passes per Newton step, where the iterative search (:func:`_line_search`) costs
    ~10 rounds of small kernels and a device→host check each (``bench/gpu_model.py``: on an
    H100 the line search was ~80 % of LinearSVM's predicted fit on ijcnn1).  Computed in
    float64 whatever the rows' dtype (the running sums span n rows).  Zero where not ``active``.
    """
    xp = bk.namespace_of(o)
    f64 = np.float64
    Yd = Y.astype(f64)
    a = 1.0 - Yd * o
    b = Yd * z
    cb = CS.astype(f64) * b
    s1, s2 = cb * a, cb * b
    act0 = (a > 0) | ((a == 0) & (b < 0))                    # active just after t = 0
    S1 = xp.where(act0, s1, 0.0).sum(axis=0)
    S2 = xp.where(act0, s2, 0.0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = a / b
    tau = xp.where((b != 0) & (tau > 0) & xp.isfinite(tau), tau, xp.inf)
    leave = b > 0
    d1 = xp.where(leave, -s1, s1)
    d2 = xp.where(leave, -s2, s2)
    m = tau.shape[1]
    sentinel = xp.full((1, m), xp.inf, dtype=f64)             # φ' beyond every breakpoint
    zero = xp.zeros((1, m), dtype=f64)
    tau = xp.concatenate([tau, sentinel])
    order = xp.argsort(tau, axis=0)
    ts = xp.take_along_axis(tau, order, axis=0)
    d1 = xp.take_along_axis(xp.concatenate([d1, zero]), order, axis=0)
    d2 = xp.take_along_axis(xp.concatenate([d2, zero]), order, axis=0)
    S1b = S1 + xp.cumsum(d1, axis=0) - d1                     # sums on the interval before each breakpoint
    S2b = S2 + xp.cumsum(d2, axis=0) - d2
    wp64, pp64 = wp.astype(f64), pp.astype(f64)
    with np.errstate(invalid="ignore"):
        g = wp64 + ts * pp64 - 2.0 * S1b + 2.0 * ts * S2b      # φ' at each breakpoint
    first = xp.argmax(~(g < 0), axis=0)[None, :]               # first breakpoint with φ' ≥ 0 (the sentinel's is NaN)
    S1j = xp.take_along_axis(S1b, first, axis=0)[0]
    S2j = xp.take_along_axis(S2b, first, axis=0)[0]
    # the root lies in [left, right] = [previous breakpoint (or 0), this one]; where φ' is flat
    # there (no curvature) it is ≥ 0 all along, so the left end is the minimizer
    left = xp.where(first[0] > 0, xp.take_along_axis(ts, xp.maximum(first - 1, 0), axis=0)[0], 0.0)
    right = xp.take_along_axis(ts, first, axis=0)[0]
    den = pp64 + 2.0 * S2j
    t = xp.where(den > 0, (2.0 * S1j - wp64) / xp.where(den > 0, den, 1.0), left)
    t = xp.minimum(xp.maximum(t, left), right)
    return xp.where(active, t, 0.0).astype(wp.dtype)


def line_derivatives(o: Any, z: Any, Y: Any, CS: Any, t: Any) -> tuple[Any, Any]:
    """L'(t), L''(t) of Σ CSᵢ max(0, 1 − yᵢ(oᵢ + t zᵢ))² over the rows given."""
    marg = 1.0 - Y * (o + t[None, :] * z)
    act = marg > 0
    d1 = -2.0 * (CS * Y * z * marg * act).sum(axis=0)
    d2 = 2.0 * (CS * z * z * act).sum(axis=0)
    return d1, d2


def newton_solve(oracle: NewtonOracle, W0: Any = None, *, tol: float = 1e-4, max_iter: int = 1000,
                 verbose: int = 0, callback: Any = None) -> LinearSolution:
    """The primal Newton method for the L2-loss linear SVM over any :class:`NewtonOracle`.

    Per step: f, ∇f and H of every unconverged problem (:meth:`~NewtonOracle.evaluate`),
    the direction p = −H⁻¹∇f (:meth:`~NewtonOracle.direction`), the exact line
    search on φ(t) = f(w + tp) (:meth:`~NewtonOracle.line_minimize`, piecewise quadratic:
    from the sorted breakpoints for rows in memory, :func:`exact_line_step`).

    Stopping rule (every fit path shares it): a problem stops when
    ‖∇f‖ ≤ tol · max(min(#pos, #neg), 1)/n · ‖∇f(0)‖ (LIBLINEAR's primal
    rule), or when a step lowered f by at most ``oracle.eps_obj`` relative
    (the generalized Hessian of the squared hinge can make Newton crawl at the
    resolution of f); ``converged`` is False only when ``max_iter`` steps ran out.

    Parameters
    ----------
    oracle : NewtonOracle
    W0 : (dim, m) start (default 0)
    tol : float > 0
    max_iter : int ≥ 1 — Newton steps
    verbose : int
    callback : callable(dict), optional — after every step, with ``iteration``,
        ``objective``, ``grad_norm`` (host arrays; may raise to abort)

    Returns
    -------
    LinearSolution with ``info["W"]`` (dim, m), ``info["n_passes"]`` and the
    oracle's own details.
    """
    xp = oracle.xp
    m = oracle.m
    W = xp.zeros((oracle.dim, m), dtype=oracle.dtype) if W0 is None else xp.array(W0, dtype=oracle.dtype)
    active = np.ones(m, dtype=bool)
    f_prev = thr = None
    it = 0
    converged = False
    for it in range(1, int(max_iter) + 1):
        f, G = oracle.evaluate(W, active)
        gn = np.asarray(bk.to_host(xp.sqrt((G * G).sum(axis=0))), dtype=np.float64)
        if thr is None:
            thr = float(tol) * oracle.frac * oracle.grad0_norm()
        active &= gn > thr
        if f_prev is not None:
            active &= (f_prev - f) > oracle.eps_obj * np.abs(f)
        if not active.any():
            converged = True
            it -= 1
            break
        f_prev = f
        P = oracle.direction(G, active)
        oracle.line_start(W, P)
        t = oracle.line_minimize((W * P).sum(axis=0), (P * P).sum(axis=0), xp.asarray(active))
        W = W + t[None, :] * P
        oracle.line_accept(t)
        if verbose:
            print(f"newton {it}: f={f} |g|={gn} t={bk.to_host(t)}")
        if callback is not None:
            callback({"iteration": it, "objective": f.copy(), "grad_norm": gn.copy()})
    else:
        f, G = oracle.evaluate(W, np.zeros(m, dtype=bool))
        gn = np.asarray(bk.to_host(xp.sqrt((G * G).sum(axis=0))), dtype=np.float64)
        converged = bool(np.all(gn <= thr))
    d = oracle.dim - (1 if oracle.scale else 0)
    coef = W[:d].T.copy()
    intercept = oracle.scale * W[d].copy() if oracle.scale else xp.zeros(m, dtype=W.dtype)
    info = {"W": W, "n_passes": int(oracle.n_passes), "grad_norm": gn, **oracle.info()}
    return LinearSolution(coef, intercept, np.asarray(f, dtype=np.float64), it, bool(converged), None, info)


class DesignOracle(NewtonOracle):
    """Newton statistics of rows held in memory (a :class:`Design` on the CPU or a GPU).

    Directions by Cholesky of H (``method="cholesky"``) or by Hessian-free
    conjugate gradients (``"cg"``: only F̃V and F̃ᵀU products, all problems in
    the same GEMMs).  With Cholesky, each problem's Gram F̃_IᵀD F̃_I (float64)
    comes from whichever is cheapest in rows touched:

    * directly from its active rows;
    * its previous Gram, updated by the rows that entered or left I;
    * for several problems (one-vs-rest), one Gram shared by all:
      G_ref = F̃ᵀ diag(c_ref) F̃ over every row (c_ref: the cost most problems
      give a row — C·sᵢ in one-vs-rest), corrected by the rows a problem
      leaves out of I or weights differently.  At w = 0 every row is active
      and, without class weights, every problem's Hessian *is* I + 2 G_ref:
      one Gram and one Cholesky factor serve all classes.
    """

    def __init__(self, X: Design, Y: Any, CS: Any, *, method: str, cg_max_iter: int = 500,
                 W0: Any = None):
        self.X = X
        self.xp = X.xp
        self.Y, self.CS = Y, CS
        self.dtype = Y.dtype
        n, m = Y.shape
        self.n, self.m, self.dim, self.scale = n, m, X.dim, X.scale
        self.frac = _frac(bk.to_host((Y > 0).sum(axis=0)), n)
        self.eps_obj = _eps_obj(self.dtype)
        self.method = method
        self.cg_max_iter = int(cg_max_iter)
        self.cg_iter = 0
        self.o = X.dot(W0) if W0 is not None else self.xp.zeros((n, m), dtype=self.dtype)
        self.z = None
        self._grams: list = [None] * m
        self._prev: list = [None] * m
        self._on_ref = np.zeros(m, dtype=bool)
        self._ref_gram = self._ref_factor = self._ref_w = self._ref_diff = None
        self._g0 = None
        self.gram_rows = 0          # rows that entered a Gram (the Hessian's cost), for info

    def evaluate(self, W: Any, active: np.ndarray) -> tuple[np.ndarray, Any]:
        xp, X = self.xp, self.X
        marg = 1.0 - self.Y * self.o
        act = marg > 0
        r = self.CS * self.Y * marg * act
        G = W - 2.0 * X.tdot(r)
        f = 0.5 * (W * W).sum(axis=0, dtype=np.float64) + \
            (self.CS * marg * marg * act).sum(axis=0, dtype=np.float64)
        self.n_passes += 1
        self._act = act
        if active.any():
            if self.method == "cholesky":
                self._prepare_grams(act, active)
            else:
                self._gn = xp.sqrt((G * G).sum(axis=0))
        return np.asarray(bk.to_host(f), dtype=np.float64), G

    def grad0_norm(self) -> np.ndarray:
        if self._g0 is None:
            g0 = self.X.tdot(2.0 * self.CS * self.Y)
            self._g0 = np.asarray(bk.to_host(self.xp.sqrt((g0 * g0).sum(axis=0))), dtype=np.float64)
        return self._g0

    # -- Grams (Cholesky) ------------------------------------------------------------
    def _reference(self) -> None:
        """c_ref (the median cost of each row over the problems) and where a problem differs."""
        xp = self.xp
        if self._ref_w is None:
            self._ref_w = xp.median(self.CS, axis=1).astype(self.CS.dtype)
            self._ref_diff = self.CS != self._ref_w[:, None]

    def _prepare_grams(self, act: Any, active: np.ndarray) -> None:
        xp, X, CS = self.xp, self.X, self.CS
        todo = np.flatnonzero(active)
        n_act = np.asarray(bk.to_host(act.sum(axis=0)))
        costs = {}
        for c in todo:
            opts = {"direct": int(n_act[c])}
            if self._prev[c] is not None:
                opts["update"] = int((act[:, c] != self._prev[c]).sum())
            if self.m > 1:
                self._reference()
                opts["ref"] = int(((~act[:, c]) | self._ref_diff[:, c]).sum())
            costs[c] = opts
        if self.m > 1 and self._ref_gram is None:
            saving = sum(max(0, min(o["direct"], o.get("update", o["direct"])) - o["ref"])
                         for o in costs.values())
            if saving > self.n:          # sharing pays for the n rows of G_ref
                self._ref_gram = X.signed_gram(self._ref_w)
                self._ref_factor = None
                self.gram_rows += self.n
        for c in todo:
            opts = costs[c]
            if self._ref_gram is None:
                opts.pop("ref", None)
            how = min(opts, key=opts.get)
            a = act[:, c]
            self._on_ref[c] = False
            if how == "direct":
                self._grams[c] = X.signed_gram(CS[:, c], xp.nonzero(a)[0])
            elif how == "update":
                chg = xp.nonzero(a != self._prev[c])[0]
                if chg.shape[0]:
                    w = xp.where(a, CS[:, c], -CS[:, c])
                    self._grams[c] = self._grams[c] + X.signed_gram(w, chg)
            else:
                rows = xp.nonzero((~a) | self._ref_diff[:, c])[0]
                if rows.shape[0]:
                    w = xp.where(a, CS[:, c] - self._ref_w, -self._ref_w)
                    self._grams[c] = self._ref_gram + X.signed_gram(w, rows)
                else:
                    self._grams[c] = self._ref_gram
                    self._on_ref[c] = True
            self.gram_rows += opts[how]
            self._prev[c] = a

    def _rebuild(self, c: int) -> Any:
        """Problem c's Gram again, from its active rows converted to float64."""
        self._grams[c] = self.X.signed_gram(self.CS[:, c], self.xp.nonzero(self._act[:, c])[0],
                                            float64=True)
        self._on_ref[c] = False
        return self._grams[c]

    def direction(self, G: Any, active: np.ndarray) -> Any:
        xp = self.xp
        if self.method == "cg":
            act = self._act
            rows = xp.nonzero(act.any(axis=1))[0]
            Xa = self.X.take(rows) if rows.shape[0] < self.n else self.X
            Da = 2.0 * self.CS[rows] * act[rows]

            def matvec(V, Xa=Xa, Da=Da):
                return V + Xa.tdot(Da * Xa.dot(V))

            g0 = xp.asarray(self.grad0_norm(), dtype=self.dtype)
            eta = xp.minimum(0.1, xp.sqrt(self._gn / g0))
            P, k = _cg(matvec, -G, eta, self.cg_max_iter, xp.asarray(active))
            self.cg_iter += k
            return P
        P = xp.zeros_like(G)
        shared = [int(c) for c in np.flatnonzero(active) if self._on_ref[c]]
        if shared:                       # problems whose Hessian is I + 2 G_ref: one factor
            cols = xp.asarray(shared)
            if self._ref_factor is None:
                try:
                    self._ref_factor = linalg.cho_factor(_newton_hessian(self._ref_gram))
                except np.linalg.LinAlgError:
                    self._ref_gram = self.X.signed_gram(self._ref_w, float64=True)
                    self._ref_factor = linalg.cho_factor(_newton_hessian(self._ref_gram))
            P[:, cols] = linalg.cho_solve(self._ref_factor, -G[:, cols].astype(np.float64)).astype(P.dtype)
        for c in np.flatnonzero(active):
            if self._on_ref[c]:
                continue
            P[:, c] = _cholesky_step(self._grams[c], G[:, c].astype(np.float64),
                                     lambda c=c: self._rebuild(c)).astype(P.dtype)
        return P

    # -- line search --------------------------------------------------------------------
    def line_start(self, W: Any, P: Any) -> None:
        self.z = self.X.dot(P)

    def line_derivs(self, t: Any) -> tuple[Any, Any]:
        return line_derivatives(self.o, self.z, self.Y, self.CS, t)

    def line_minimize(self, wp: Any, pp: Any, active: Any) -> Any:
        return exact_line_step(wp, pp, self.o, self.z, self.Y, self.CS, active)

    def line_accept(self, t: Any) -> None:
        self.o = self.o + t[None, :] * self.z

    def info(self) -> dict:
        return {"method": self.method, "cg_iter": self.cg_iter, "gram_rows": int(self.gram_rows)}


class StreamOracle(_GramOracle):
    """Newton statistics over row blocks read one at a time (out of core, SPEC §1).

    The features are F = B T: rows B of a *base* design streamed in blocks
    (any NumPy/SciPy/CuPy rows) and a fixed (p × d) ``transform`` T — LLSVM
    streams the kernel rows K(X_b, Z) and T = M, so no pass ever forms
    F = K M (the n·k² product); LinearSVM streams X itself (T = I).  A
    constant column of value ``scale`` follows F (the intercept).  Per pass
    only dim × dim statistics per problem are accumulated, in float64 on the
    blocks' device:

    * :meth:`evaluate` — one pass: outputs o = F̃w, loss, gradient
      T̃ᵀB̃ᵀr, and the base Gram B̃_IᵀD B̃_I updated by the rows that entered or
      left I since the previous pass (all active rows on the first); the
      Hessian is then I + 2 T̃ᵀ(B̃_IᵀD B̃_I)T̃ (T̃ = T ⊕ 1);
    * :meth:`line_start` — one pass: z = F̃p; the line search then runs on the
      stored o and z (n × m host floats, as SBM stores its n × m duals).  The
      same pass prepares the next :meth:`evaluate` for any step t in
      [0, ``t_max``]: a row's margin 1 − yᵢ(oᵢ + t zᵢ) = αᵢ − t βᵢ is linear
      in t, so rows active (or inactive) at both ends of the bracket are so
      for every t in it — their loss, gradient and Gram changes are sums with
      coefficients polynomial in t, accumulated now — and only the rows that
      change sign inside it are kept (their base rows, up to ``spare_blocks``
      times the largest block: the memory stays a few blocks) to be settled
      once t is known.

    So a Newton step costs one pass, or two when the step leaves the bracket or
    too many rows are undecided.  In float64 throughout: with T = M =
    U Λ^{-1/2} the base statistics are multiplied by ‖M‖² ≈ 1/λ_min, which
    float32 sums could not survive.

    Parameters
    ----------
    blocks : callable () → iterator of (offset, B_b) — one pass, blocks in the same order
    Y, CS : (n, m) host float64 — targets ±1 and costs C·sᵢ of every row, in pass order
    transform : (p, d) array or None
    n_features : int — p, the width of the base rows (needed when ``transform`` is None)
    scale : float or None — the constant column's value
    t_max : float — the bracket [0, t_max] of steps prepared by :meth:`line_start`
    spare_blocks : float — undecided base rows kept per step, in largest blocks
    """

    def __init__(self, blocks: Any, Y: np.ndarray, CS: np.ndarray, *, transform: Any = None,
                 n_features: int | None = None, scale: float | None = 1.0, t_max: float = 2.0,
                 spare_blocks: float = 1.0):
        self.blocks = blocks
        self.Y = np.asarray(Y, dtype=np.float64)
        self.CS = np.asarray(CS, dtype=np.float64)
        n, m = self.Y.shape
        self.n, self.m = n, m
        self.scale = None if not scale else float(scale)
        self.T = None if transform is None else np.asarray(bk.to_host(transform), dtype=np.float64)
        if self.T is None and n_features is None:
            raise ValueError("StreamOracle needs n_features when there is no transform")
        self.d = int(n_features) if self.T is None else int(self.T.shape[1])
        self.xp, self.dtype = np, np.dtype(np.float64)
        self.frac = _frac((self.Y > 0).sum(axis=0), n)
        self.eps_obj = _eps_obj(np.float64)
        self.dim = self.d + (1 if self.scale else 0)
        self.o = np.zeros((n, m))
        self.z = np.zeros((n, m))
        self._prev = np.zeros((n, m), dtype=bool)
        self._grams: list = [None] * m          # base-space Grams (p̃ × p̃), blocks' device
        self._g0 = None
        self._H = [None] * m
        self._spec = None
        self._t = None
        self.t_max, self.spare_blocks = float(t_max), float(spare_blocks)
        self.gram_rows = 0

    def _base_map(self, W: np.ndarray, xp: Any) -> Any:
        """T̃ W on the blocks' device: the base-space weights (p̃, m)."""
        if self.T is None:
            return xp.asarray(W)
        d = self.d
        top = self.T @ W[:d]
        if self.scale:
            top = np.concatenate([top, W[d:d + 1]], axis=0)
        return xp.asarray(top)

    def _to_features(self, A: np.ndarray) -> np.ndarray:
        """T̃ᵀ A for base-space vectors A (p̃, m), on the host."""
        if self.T is None:
            return A
        p = self.T.shape[0]
        out = self.T.T @ A[:p]
        return np.concatenate([out, A[p:p + 1]], axis=0) if self.scale else out

    def _gram_to_features(self, G: Any) -> np.ndarray:
        G = np.asarray(bk.to_host(G), dtype=np.float64)
        if self.T is None:
            return G
        p, d = self.T.shape
        if not self.scale:
            return self.T.T @ G @ self.T
        out = np.empty((d + 1, d + 1))
        out[:d, :d] = self.T.T @ G[:p, :p] @ self.T
        out[:d, d] = out[d, :d] = self.T.T @ G[:p, p]
        out[d, d] = G[p, p]
        return out

    def _block_stats(self, B: Design, rows: slice, O: Any, todo: np.ndarray, st: dict) -> None:
        """Loss, base gradient and Gram changes (against ``_prev``) of one block at outputs O."""
        xp = B.xp
        Yb, Cb = xp.asarray(self.Y[rows]), xp.asarray(self.CS[rows])
        marg = 1.0 - Yb * O
        act = marg > 0
        part = B.tdot(Cb * Yb * marg * act)
        st["g"] = part if st["g"] is None else st["g"] + part
        st["loss"] += np.asarray(bk.to_host((Cb * marg * marg * act).sum(axis=0)), dtype=np.float64)
        if "g0" in st:
            part = B.tdot(Cb * Yb)
            st["g0"] = part if st["g0"] is None else st["g0"] + part
        act_h = np.asarray(bk.to_host(act))
        st["act"][rows] = act_h
        for c in todo:
            chg = act_h[:, c] != self._prev[rows, c]
            if chg.any():
                w = xp.where(act[:, c], Cb[:, c], -Cb[:, c])
                upd = B.signed_gram(w, xp.asarray(np.flatnonzero(chg)))
                st["grams"][c] = upd if st["grams"][c] is None else st["grams"][c] + upd
                st["gram_rows"] += int(chg.sum())

    def _new_stats(self, todo: np.ndarray, first: bool = False) -> dict:
        st = {"g": None, "loss": np.zeros(self.m), "act": np.zeros((self.n, self.m), dtype=bool),
              "grams": [None] * self.m, "gram_rows": 0, "todo": todo}
        if first:
            st["g0"] = None
        return st

    def evaluate(self, W: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        todo = np.flatnonzero(active)
        st = self._settle(todo)
        if st is None:
            st = self._new_stats(todo, first=self._g0 is None)
            V = None
            for off, Bb in self.blocks():
                B = Design(Bb, self.scale)
                if V is None:
                    V = self._base_map(W, B.xp)
                rows = slice(off, off + B.n)
                O = B.dot(V)
                self._block_stats(B, rows, O, todo, st)
                self.o[rows] = np.asarray(bk.to_host(O))
            self.n_passes += 1
            if st["g"] is None:
                raise ValueError("the block source yielded no data")
        if st.get("g0") is not None:
            g0 = 2.0 * self._to_features(np.asarray(bk.to_host(st["g0"]), dtype=np.float64))
            self._g0 = np.sqrt((g0 * g0).sum(axis=0))
        G = W - 2.0 * self._to_features(np.asarray(bk.to_host(st["g"]), dtype=np.float64))
        for c in todo:                  # the Grams now follow the activity at W
            if st["grams"][c] is not None:
                self._grams[c] = st["grams"][c] if self._grams[c] is None else self._grams[c] + st["grams"][c]
            self._prev[:, c] = st["act"][:, c]
            self._H[c] = (np.zeros((self.dim, self.dim)) if self._grams[c] is None     # no active row: H = I
                          else self._gram_to_features(self._grams[c]))
        self.gram_rows += st["gram_rows"]
        f = 0.5 * (W * W).sum(axis=0) + st["loss"]
        return f, G

    def _gram(self, c: int) -> np.ndarray:
        return self._H[c]

    def line_start(self, W: np.ndarray, P: np.ndarray) -> None:
        """One pass: z = F̃p, and the next :meth:`evaluate` prepared for t ∈ [0, t_max]."""
        todo = np.flatnonzero(np.any(P != 0, axis=0))
        sp = {"gA": None, "gB": None, "L": np.zeros((3, self.m)), "grams": [None] * self.m,
              "gram_rows": 0, "rows": [], "B": [], "nbytes": 0, "full": False, "todo": todo}
        budget = 0
        V = None
        for off, Bb in self.blocks():
            B = Design(Bb, self.scale)
            xp = B.xp
            if V is None:
                V = self._base_map(P, xp)
            rows = slice(off, off + B.n)
            budget = max(budget, int(self.spare_blocks * B.n * B.dim * 8))
            z = np.asarray(bk.to_host(B.dot(V)), dtype=np.float64)
            self.z[rows] = z
            Yh, Ch = self.Y[rows], self.CS[rows]
            alpha, beta = 1.0 - Yh * self.o[rows], Yh * z          # margin at t: α − tβ
            hi = alpha - self.t_max * beta
            sure = (alpha > 0) & (hi > 0)
            undecided = (alpha > 0) != (hi > 0)
            a, b = Ch * Yh * alpha * sure, Ch * z * sure          # r(t) = a − t b on the sure rows
            for key, val in (("gA", a), ("gB", b)):
                part = B.tdot(xp.asarray(val))
                sp[key] = part if sp[key] is None else sp[key] + part
            sp["L"] += np.stack([(Ch * alpha * alpha * sure).sum(axis=0), (Ch * alpha * beta * sure).sum(axis=0),
                                 (Ch * beta * beta * sure).sum(axis=0)])
            Cd = xp.asarray(Ch)
            for c in todo:              # Gram changes of the decided rows
                prev = self._prev[rows, c]
                chg = (sure[:, c] & ~prev) | (~(sure[:, c] | undecided[:, c]) & prev)
                if chg.any():
                    w = xp.where(xp.asarray(sure[:, c]), Cd[:, c], -Cd[:, c])
                    upd = B.signed_gram(w, xp.asarray(np.flatnonzero(chg)))
                    sp["grams"][c] = upd if sp["grams"][c] is None else sp["grams"][c] + upd
                    sp["gram_rows"] += int(chg.sum())
            keep = np.flatnonzero(undecided[:, todo].any(axis=1))
            if keep.size and not sp["full"]:
                kept = B.take(xp.asarray(keep))
                nbytes = kept.n * kept.dim * 8
                if sp["nbytes"] + nbytes > budget:
                    sp["full"] = True       # too many undecided rows: evaluate will read the data
                    sp["rows"], sp["B"] = [], []
                else:
                    sp["rows"].append(off + keep)
                    sp["B"].append(kept)
                    sp["nbytes"] += nbytes
        self.n_passes += 1
        self._spec = None if sp["gA"] is None or sp["full"] else sp

    def line_accept(self, t: Any) -> None:
        self._t = np.asarray(bk.to_host(t), dtype=np.float64)

    def _settle(self, todo: np.ndarray) -> dict | None:
        """The statistics at W + tP from :meth:`line_start`'s pass, if t stayed in the bracket."""
        sp, t = self._spec, self._t
        self._spec = self._t = None
        if sp is None or t is None or np.any(t < 0) or np.any(t > self.t_max) \
                or not set(todo.tolist()) <= set(sp["todo"].tolist()):
            return None
        o1 = self.o + t[None, :] * self.z
        alpha, beta = 1.0 - self.Y * self.o, self.Y * self.z
        hi = alpha - self.t_max * beta
        act = ((alpha > 0) & (hi > 0)) | (((alpha > 0) != (hi > 0)) & (alpha - t[None, :] * beta > 0))
        xp = bk.namespace_of(sp["gA"])
        td = xp.asarray(t)
        g = sp["gA"] - sp["gB"] * td[None, :]
        loss = sp["L"][0] - 2.0 * t * sp["L"][1] + t * t * sp["L"][2]
        grams, gram_rows = list(sp["grams"]), sp["gram_rows"]
        for rows, B in zip(sp["rows"], sp["B"]):    # the undecided rows, now decided by t
            Yh, Ch, a_r = self.Y[rows], self.CS[rows], act[rows]
            marg = 1.0 - Yh * o1[rows]
            und = (alpha[rows] > 0) != (hi[rows] > 0)
            g = g + B.tdot(xp.asarray(Ch * Yh * marg * (und & a_r)))
            loss = loss + (Ch * marg * marg * (und & a_r)).sum(axis=0)
            for c in todo:
                chg = und[:, c] & (a_r[:, c] != self._prev[rows, c])
                if chg.any():
                    w = xp.where(xp.asarray(a_r[:, c]), xp.asarray(Ch[:, c]), -xp.asarray(Ch[:, c]))
                    upd = B.signed_gram(w, xp.asarray(np.flatnonzero(chg)))
                    grams[c] = upd if grams[c] is None else grams[c] + upd
                    gram_rows += int(chg.sum())
        self.o = o1
        return {"g": g, "loss": loss, "act": act, "grams": grams, "gram_rows": gram_rows}

    def line_derivs(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return line_derivatives(self.o, self.z, self.Y, self.CS, t)

    def info(self) -> dict:
        return {"method": "cholesky", "gram_rows": int(self.gram_rows)}


class ReducedOracle(_GramOracle):
    """Newton statistics from reductions over row groups (Dask chunks): only sums travel.

    Parameters
    ----------
    stats : callable (W, active) → dict of sums over all rows, W (dim, m) host float64:
        ``"loss"`` (m,) Σ_I cᵢ (w̃ᵀx̃ᵢ − yᵢ)²; ``"grad"`` (dim, m) Σ_I cᵢ (w̃ᵀx̃ᵢ − yᵢ) x̃ᵢ;
        ``"hess"`` (m, dim, dim) Σ_I cᵢ x̃ᵢx̃ᵢᵀ (needed for the ``active`` problems only)
    line_stats : callable (W, P, t) → (L'(t), L''(t)), the line search's sums
    dim, m : int
    npos : (m,) — positive rows of each problem; n : int — rows (LIBLINEAR's stopping rule)
    scale : float or None — the last of the dim columns is the constant column of this value
    dtype : dtype the rows are summed in (float32 sums resolve f to ~1e-7: ``eps_obj``)

    The rows carry the constant column themselves here (x̃ᵢ ends with s).
    """

    def __init__(self, stats: Any, line_stats: Any, *, dim: int, m: int, npos: Any, n: int,
                 scale: float | None = None, dtype: Any = np.float64):
        self._stats, self._line_stats = stats, line_stats
        self.dim, self.m, self.scale = int(dim), int(m), scale
        self.frac = _frac(npos, n)
        self.eps_obj = _eps_obj(dtype)
        self.xp, self.dtype = np, np.dtype(np.float64)
        self._g0 = None
        self._hess = None

    def evaluate(self, W: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        st = self._stats(W, active)
        self.n_passes += 1
        G = W + 2.0 * np.asarray(st["grad"], dtype=np.float64)
        if self._g0 is None:
            if np.any(W):
                g = 2.0 * np.asarray(self._stats(np.zeros_like(W), np.zeros(self.m, bool))["grad"])
                self.n_passes += 1
            else:
                g = G
            self._g0 = np.sqrt((g * g).sum(axis=0))
        self._hess = st.get("hess")
        f = 0.5 * (W * W).sum(axis=0) + np.asarray(st["loss"], dtype=np.float64)
        return f, G

    def _gram(self, c: int) -> np.ndarray:
        return linalg.symmetrize(np.asarray(self._hess[c], dtype=np.float64))

    def line_start(self, W: np.ndarray, P: np.ndarray) -> None:
        self._WP = (W, P)

    def line_derivs(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.n_passes += 1
        d1, d2 = self._line_stats(self._WP[0], self._WP[1], t)
        return np.asarray(d1, dtype=np.float64), np.asarray(d2, dtype=np.float64)


def _cg(matvec, R: Any, tol: Any, max_iter: int, active: Any) -> tuple[Any, int]:
    """Batched conjugate gradients for H_c p_c = r_c (one column per problem)."""
    xp = bk.namespace_of(R)
    P = xp.zeros_like(R)
    Rk = R.copy()
    D = Rk.copy()
    rr = (Rk * Rk).sum(axis=0)
    stop = tol * tol * rr
    live = active & (rr > 0)
    it = 0
    for it in range(1, max_iter + 1):
        if not bool(live.any()):
            break
        HD = matvec(D)
        dHd = (D * HD).sum(axis=0)
        a = xp.where(live, rr / xp.where(dHd > 0, dHd, 1.0), 0)
        P = P + a[None, :] * D
        Rk = Rk - a[None, :] * HD
        rr_new = (Rk * Rk).sum(axis=0)
        live = live & (rr_new > stop)
        beta = xp.where(live, rr_new / xp.where(rr > 0, rr, 1.0), 0)
        D = Rk + beta[None, :] * D
        rr = rr_new
    return P, it


def _choose_method(X: Design, m: int) -> str:
    """Cholesky for dense designs up to 2048 wide (:data:`GPU_CHOLESKY_MAX_DIM` on a GPU) whose m
    float64 Grams fit the memory budget; several problems on few rows (dim² > 150·n) take CG.

    A Cholesky step costs about m·dim³/3, a CG step m·n·dim per iteration
    (tens of them): with few rows CG wins (digits, 1,257 × 1,001, 10 classes:
    Cholesky 2.8 s, CG 0.12 s), with many Cholesky does (60,000 × 1,001,
    10 classes: 10 s vs 45 s).  A single problem keeps Cholesky.
    """
    fits = m * X.dim * X.dim * 8 <= bk.memory_budget(bk.device_of(X.F if not X.sparse else X.F.data))
    few_rows = m > 1 and X.dim * X.dim > 150 * X.n
    widest = STREAM_MAX_DIM if X.xp is np else GPU_CHOLESKY_MAX_DIM
    return "cholesky" if (not X.sparse and X.dim <= widest and fits and not few_rows) else "cg"


def newton_squared_hinge(F: Any, Y: Any, C: float, *, sample_weight: Any = None,
                         intercept_scaling: float | None = 1.0, tol: float = 1e-4,
                         max_iter: int = 1000, method: str = "auto", W0: Any = None,
                         cg_max_iter: int = 500, warm_start: bool = True, random_state: Any = None,
                         verbose: int = 0, callback: Any = None) -> LinearSolution:
    """Primal Newton for the L2-loss (squared hinge) linear SVM on rows in memory, all problems at once.

    Minimizes f(w) = ½‖w‖² + C Σᵢ Sᵢ max(0, 1 − yᵢ w̃ᵀx̃ᵢ)² per column of Y
    with :func:`newton_solve` over a :class:`DesignOracle`: active set
    I = {i: yᵢfᵢ < 1}; gradient ∇f = w − 2C F̃_Iᵀ(S ∘ y ∘ (1 − y∘f))_I; Newton
    direction from H = I + 2C F̃_Iᵀ diag(S_I) F̃_I (Keerthi & DeCoste 2005,
    eq. (4)–(6)); exact line search; LIBLINEAR's relative-gradient stop.

    Parameters
    ----------
    F : (n, d) array or sparse CSR (NumPy/SciPy or CuPy)
    Y : (n,) or (n, m) targets in {−1, +1}
    C : float
    sample_weight : (n,) or (n, m), optional — multipliers of C
    intercept_scaling : float or None
        Append the constant column s (regularized, LIBLINEAR); ``None``: no intercept.
    tol : float — relative gradient-norm tolerance
    max_iter : int — Newton steps
    method : {"auto", "cholesky", "cg"}
        "cholesky" keeps one float64 Gram per problem (dim × dim) and factors
        H once per step; one-vs-rest problems share one Gram where their
        active sets allow (:class:`DesignOracle`).  "cg" solves with conjugate
        gradients using only F·V and Fᵀ·U products (all problems batched).
        "auto": Cholesky for dense F with dim ≤ 2048 whose Grams fit the
        memory budget, CG otherwise and for several problems on few rows
        (:func:`_choose_method`; measured on the 2-core box, 60,000 × 1,001
        float32, 10 one-vs-rest problems: CG 45 s, Cholesky 10 s).
    W0 : (dim, m) warm start, optional
    warm_start : bool
        Without W0, and for n ≥ 10·dim, start from the solution on a random
        tenth of the rows (C scaled by n/n_sub) — same optimum, cheaper first
        Hessian.
    random_state : int, RandomState, Generator or None — draws that tenth
    verbose : int
    callback : callable(dict), optional — see :func:`newton_solve`

    Returns
    -------
    LinearSolution (``info["method"]`` says which direction solver ran).

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.linear import newton_squared_hinge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)); y = np.sign(X[:, 0] + 0.1)
    >>> sol = newton_squared_hinge(X, y, 1.0)
    >>> sol.coef.shape, sol.converged
    ((1, 5), True)
    """
    _check_common(C, "squared_hinge", tol, max_iter)
    if method not in ("auto", "cholesky", "cg"):
        raise ValueError(f"method must be 'auto', 'cholesky' or 'cg', got {method!r}")
    X = Design(F, intercept_scaling)
    xp = X.xp
    dt = F.dtype if F.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    Y = _as_2d(xp.asarray(Y, dtype=dt))
    n, m = Y.shape
    if n != X.n:
        raise ValueError(f"F has {X.n} rows but Y has {n}")
    CS = float(C) * _weights(sample_weight, n, m, xp, dt)
    if method == "auto":
        method = _choose_method(X, m)
    with _blas_limit(X):
        if W0 is None and warm_start and method == "cholesky" and n >= 10 * X.dim and n >= 2000:
            # a Newton solve on a random tenth of the rows (C scaled up to match)
            # gives a start whose active set is near the final one: the first full
            # Hessian then costs |I|·d² instead of n·d²
            rng = np.random.default_rng(_seed(random_state))
            sub = np.sort(rng.choice(n, size=max(n // 10, 5 * X.dim), replace=False))
            sub = xp.asarray(sub) if xp is not np else sub
            Xs = X.take(sub)
            w_sub = newton_solve(DesignOracle(Xs, Y[sub], CS[sub] * (n / sub.shape[0]), method="cholesky"),
                                 tol=1e-2, max_iter=50)
            W0 = w_sub.info["W"]
        oracle = DesignOracle(X, Y, CS, method=method, cg_max_iter=cg_max_iter, W0=W0)
        return newton_solve(oracle, W0, tol=tol, max_iter=max_iter, verbose=verbose, callback=callback)


# --------------------------------------------------------------------------- DCD
def _local_dcd(K: np.ndarray, YB: np.ndarray, g: np.ndarray, A: np.ndarray, U: np.ndarray,
               Dd: np.ndarray, order: np.ndarray | None = None, Qy: np.ndarray | None = None) -> np.ndarray:
    """Sequential coordinate updates (host; Hsieh et al. 2008, Algorithm 1 step 2).

    K (b, b) = F̃_B F̃_Bᵀ; YB, g, A, U, Dd (b, m): labels, gradients
    Gᵢ = yᵢwᵀx̃ᵢ − 1 + Dᵢᵢαᵢ, duals, upper bounds (C or ∞) and D diagonals.
    Coordinates are visited in ``order`` (default 0..b−1); ``g`` and ``A`` are
    updated in place.  ``Qy`` = K ∘ yyᵀ may be passed for one problem (m = 1).
    Returns each visited coordinate's G at its visit, in visiting order.
    """
    b, m = YB.shape
    order = np.arange(b) if order is None else order
    Gseen = np.empty((order.shape[0], m))
    qd = np.diag(K)[:, None] + Dd                       # Q̄ᵢᵢ
    if m == 1:
        y = YB[:, 0]
        if Qy is None:
            Qy = K * y[:, None] * y[None, :]            # yᵢyⱼ x̃ᵢᵀx̃ⱼ
        gv = g[:, 0]
        a = A[:, 0]
        u = U[:, 0].tolist()
        dd = Dd[:, 0].tolist()
        q = qd[:, 0].tolist()
        out = Gseen[:, 0]
        for j, k in enumerate(order.tolist()):
            G = float(gv[k])
            out[j] = G
            ak = float(a[k])
            if ak <= 0.0:
                if G >= 0.0:
                    continue
            elif ak >= u[k]:
                if G <= 0.0:
                    continue
            new = min(max(ak - G / q[k], 0.0), u[k])
            dlt = new - ak
            if dlt != 0.0:
                a[k] = new
                gv += dlt * Qy[k]
                gv[k] += dlt * dd[k]
        return Gseen
    # several problems share only K and the visiting order: sweep each one with the
    # scalar loop above on contiguous copies of its columns (the same iterates as a
    # joint sweep, which spent several times longer in per-visit NumPy calls)
    for c in range(m):
        gc = np.ascontiguousarray(g[:, c:c + 1])
        Ac = np.ascontiguousarray(A[:, c:c + 1])
        Gseen[:, c] = _local_dcd(K, YB[:, c:c + 1], gc, Ac, U[:, c:c + 1], Dd[:, c:c + 1],
                                 order=order)[:, 0]
        g[:, c] = gc[:, 0]
        A[:, c] = Ac[:, 0]
    return Gseen


def _dcd_core(X: Design, Y: np.ndarray, U: np.ndarray, Dd: np.ndarray, A: np.ndarray, W: Any, *,
              tol: float, max_iter: int, shrinking: bool, rng: np.random.Generator,
              block: int, gram_rows: int = 2048) -> dict:
    """DCD with shrinking on (X, Y), updating ``A`` (host) and ``W`` (device) in place.

    Problems of at most ``gram_rows`` rows keep their Gram matrix F̃F̃ᵀ (host)
    and run each epoch as a single block (no per-block GEMMs).
    """
    xp = X.xp
    n, m = Y.shape
    Kfull = Qy = A0 = None
    if n <= gram_rows:
        Kfull = np.asarray(bk.to_host(X.row_gram()), dtype=np.float64)
        Qy = Kfull * Y[:, 0][:, None] * Y[:, 0][None, :] if m == 1 else None
        A0 = A.copy()
        block = max(n, 1)
    active = np.arange(n)
    Mbar = np.full(m, np.inf)
    mbar = np.full(m, -np.inf)
    gap0 = None
    it = 0
    converged = False
    for it in range(1, int(max_iter) + 1):
        perm = rng.permutation(active)
        PGmax = np.full(m, -np.inf)
        PGmin = np.full(m, np.inf)
        keep = np.ones(perm.shape[0], dtype=bool)
        for s in range(0, perm.shape[0], block):
            B = perm[s: s + block]
            Bd = xp.asarray(B) if xp is not np else B
            YB = Y[B]
            A_old = A[B]
            if Kfull is not None:               # whole epoch on the stored Gram matrix
                g = Y * np.asarray(bk.to_host(X.dot(W)), dtype=np.float64) - 1.0 + Dd * A
                Gs = _local_dcd(Kfull, Y, g, A, U, Dd, order=B, Qy=Qy)
                dlt_full = A - A0
                A0[:] = A
                if dlt_full.any():
                    W += X.tdot(xp.asarray(dlt_full * Y, dtype=W.dtype))
            else:
                XB = X.take(Bd)
                K = np.asarray(bk.to_host(XB.row_gram()), dtype=np.float64)
                g = YB * np.asarray(bk.to_host(XB.dot(W)), dtype=np.float64) - 1.0 + Dd[B] * A_old
                A_new = A_old.copy()
                Gs = _local_dcd(K, YB, g, A_new, U[B], Dd[B])
                dlt = A_new - A_old
                A[B] = A_new
                if dlt.any():
                    W += XB.tdot(xp.asarray(dlt * YB, dtype=W.dtype))
            at0 = A_old <= 0
            atU = A_old >= U[B]
            PG = np.where(at0, np.minimum(Gs, 0), np.where(atU, np.maximum(Gs, 0), Gs))
            PGmax = np.maximum(PGmax, PG.max(axis=0))
            PGmin = np.minimum(PGmin, PG.min(axis=0))
            if shrinking:
                shrink = (at0 & (Gs > Mbar[None, :])) | (atU & (Gs < mbar[None, :]))
                keep[s: s + block] = ~shrink.all(axis=1)
        gap = PGmax - PGmin
        if gap0 is None:
            gap0 = float(np.max(np.where(np.isfinite(gap), gap, 0.0)))
        if bool(np.all(gap <= tol)):
            if active.shape[0] == n:
                converged = True
                break
            active = np.arange(n)
            Mbar[:] = np.inf
            mbar[:] = -np.inf
            continue
        if shrinking:
            active = np.sort(perm[keep])
        Mbar = np.where(PGmax <= 0, np.inf, PGmax)
        mbar = np.where(PGmin >= 0, -np.inf, PGmin)
    return {"n_iter": it, "converged": converged, "gap0": 0.0 if gap0 is None else gap0}


def _dual_bounds(S: np.ndarray, C: float, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds U and diagonal D of the dual (Hsieh et al. 2008, eq. (4))."""
    Ci = float(C) * S
    if loss == "hinge":
        return Ci, np.zeros_like(Ci)
    with np.errstate(divide="ignore"):
        Dd = np.where(Ci > 0, 0.5 / np.where(Ci > 0, Ci, 1.0), np.inf)
    U = np.where(Ci > 0, np.inf, 0.0)
    Dd = np.where(Ci > 0, Dd, 0.0)
    return U, Dd


def _default_block(X: Design) -> int:
    return 64 if X.dim <= 256 else 32


def dual_cd(F: Any, y: Any, C: float, loss: str = "squared_hinge", *, sample_weight: Any = None,
            intercept_scaling: float | None = 1.0, tol: float = 1e-4, max_iter: int = 1000,
            shrinking: bool = True, random_state: Any = None, alpha0: Any = None,
            block_size: int | None = None, gram_rows: int = 2048) -> LinearSolution:
    """Dual coordinate descent with shrinking (Hsieh et al. 2008), both losses.

    Dual (eq. (4)): min_α ½αᵀQ̄α − eᵀα, 0 ≤ αᵢ ≤ Uᵢ, Q̄ = Q + D, Qᵢⱼ = yᵢyⱼx̃ᵢᵀx̃ⱼ;
    hinge: Uᵢ = Cᵢ, Dᵢᵢ = 0; squared hinge: Uᵢ = ∞, Dᵢᵢ = 1/(2Cᵢ).  w = Σ αᵢyᵢx̃ᵢ.
    Stops when the projected-gradient spread max PG − min PG ≤ ``tol`` on the
    full set (Algorithm 3's shrinking test; LIBLINEAR's absolute criterion).

    Parameters
    ----------
    F : (n, d) array or sparse CSR (NumPy/SciPy or CuPy)
    y : (n,) or (n, m) targets in {−1, +1} (m problems solved in the same sweeps)
    C : float
    loss : {"squared_hinge", "hinge"}
    sample_weight : (n,) or (n, m), optional — multipliers of C
    intercept_scaling : float or None — constant column (regularized) or no intercept
    tol : float
    max_iter : int — epochs (passes over the active coordinates)
    shrinking : bool
    random_state : int, Generator or None — the coordinate permutations
    alpha0 : (n,) or (n, m) warm start
    block_size : int, optional — coordinates per GEMM block (default 32–64)
    gram_rows : int — problems with at most this many rows keep F̃F̃ᵀ (host) and
        sweep it directly; larger ones work block by block

    Returns
    -------
    LinearSolution with ``alpha`` (n, m).

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.linear import dual_cd
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)); y = np.sign(X[:, 0] + 0.1)
    >>> sol = dual_cd(X, y, 1.0, "hinge", random_state=0)
    >>> sol.coef.shape, sol.alpha.shape
    ((1, 5), (200, 1))
    """
    _check_common(C, loss, tol, max_iter)
    X = Design(F, intercept_scaling)
    xp = X.xp
    dt = F.dtype if F.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    Y = _as_2d(np.asarray(bk.to_host(y), dtype=np.float64))
    n, m = Y.shape
    if n != X.n:
        raise ValueError(f"F has {X.n} rows but y has {n}")
    if not np.all(np.abs(Y) == 1):
        raise ValueError("y must hold only -1 and +1")
    S = _weights(sample_weight, n, m, np, np.float64)
    U, Dd = _dual_bounds(S, C, loss)
    A = np.zeros((n, m)) if alpha0 is None else np.array(_as_2d(np.asarray(bk.to_host(alpha0), np.float64)))
    if A.shape != (n, m):
        raise ValueError(f"alpha0 must have shape {(n, m)}, got {A.shape}")
    A = np.clip(A, 0, U)
    W = X.tdot(xp.asarray(A * Y, dtype=dt)) if alpha0 is not None else xp.zeros((X.dim, m), dtype=dt)
    rng = np.random.default_rng(_seed(random_state))
    with _blas_limit(X):
        info = _dcd_core(X, Y, U, Dd, A, W, tol=float(tol), max_iter=int(max_iter),
                         shrinking=bool(shrinking), rng=rng, block=int(block_size or _default_block(X)),
                         gram_rows=int(gram_rows))
    coef, intercept = _split(W, X)
    obj = primal_objective(coef, intercept if X.scale else None, F, Y, float(C), loss, S,
                           intercept_scaling=X.scale)
    return LinearSolution(coef, intercept, obj, info["n_iter"], info["converged"], A,
                          {"gap0": info["gap0"], "W": W})


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


def newton_stream(source: Any, C: float, *, labels: np.ndarray | None = None,
                  classes: np.ndarray | None = None, class_weight: np.ndarray | None = None,
                  intercept_scaling: float | None = 1.0, tol: float = 1e-4, max_iter: int = 1000,
                  warm_start: bool = True, device: Any = None, verbose: int = 0,
                  callback: Any = None) -> tuple[LinearSolution, np.ndarray, int]:
    """Primal Newton for the L2-loss over a :class:`~gpuksvm.blocks.BlockSource` (out of core).

    The same solver as in memory (:func:`newton_solve`: stopping rule, exact
    line search) over a :class:`StreamOracle`: each Newton step is two passes
    over the blocks, each returning only dim × dim statistics per problem, so
    it converges to the in-memory solution (SBM's passes did not: issue 15,
    800K rows, 98.43 % in 695 s vs 98.75 % in 45 s in memory).  A
    :class:`~gpuksvm.blocks.LinearMapBlockSource` is streamed in its base
    space (LLSVM: K(X_b, Z), with T = M applied to the statistics), and its
    ``sample`` rows give a warm start: the in-memory solution on the sample
    with C scaled by n / n_sample (the same optimum in expectation; the first
    full Hessian then costs |I|·dim² instead of n·dim², and few passes remain).

    Parameters
    ----------
    source : BlockSource
    C, intercept_scaling, tol, max_iter : as in :func:`newton_squared_hinge`
    labels, classes, class_weight : as in :func:`sbm`
    warm_start : bool — use the source's ``sample``, if it has one
    device : where the blocks are processed (statistics in float64 there)
    verbose, callback : see :func:`newton_solve`

    Returns
    -------
    (solution, classes, n_features); ``solution.info["n_passes"]`` counts the
    passes over the data.
    """
    _check_common(C, "squared_hinge", tol, max_iter)
    if not isinstance(source, BlockSource):
        raise TypeError(f"newton_stream needs a gpuksvm.blocks.BlockSource, got {type(source).__name__}")
    dev = bk.resolve_device("auto" if device is None else device)
    labels, classes, y_idx = _stream_labels(source, labels, classes)
    n_classes = classes.shape[0]
    Y, S = ovr_targets(y_idx, n_classes, class_weight=class_weight)
    n = Y.shape[0]
    mapped = isinstance(source, LinearMapBlockSource)
    T = source.transform if mapped else None
    base = source.base if mapped else source.__iter__
    p = int(T.shape[0]) if mapped else source.n_features
    if p is None:
        for Xb, _ in source:
            p = int(Xb.shape[1])
            break

    def blocks():
        for off, Bb in _pass_blocks(base(), labels):
            if mapped:       # base_fn's rows come from checked blocks: only place and dtype
                if Bb.shape[1] != p:
                    raise ValueError(f"a base block has {Bb.shape[1]} columns, expected {p}")
                yield off, bk.to_device(Bb, dev, np.float64)
            else:
                yield off, check_block(Bb, p, dev, np.float64)

    oracle = StreamOracle(blocks, Y, float(C) * S, transform=T, n_features=p, scale=intercept_scaling)
    W0 = None
    sample = getattr(source, "sample", None)
    if warm_start and sample is not None and sample[0].shape[0] < n:
        Xs, ys = sample
        if mapped:   # F of the sample in the source's dtype, piece by piece (B is float64)
            step = source.max_rows or Xs.shape[0]
            Td = bk.to_device(T, dev, np.float64)
            Fs = bk.get_namespace(dev).empty((Xs.shape[0], Td.shape[1]), dtype=source.dtype)
            for a in range(0, Xs.shape[0], step):
                Fs[a:a + step] = check_block(source.base_fn(Xs[a:a + step]), p, dev, np.float64) @ Td
        else:
            Fs = check_block(Xs, p, dev, np.float64)
        Ys, Ss = ovr_targets(np.searchsorted(classes, np.ravel(bk.to_host(ys))), n_classes,
                             class_weight=class_weight)
        xs = bk.namespace_of(Fs)
        start = newton_squared_hinge(Fs, xs.asarray(Ys), float(C) * n / Fs.shape[0],
                                     sample_weight=xs.asarray(Ss), intercept_scaling=intercept_scaling,
                                     tol=1e-3, max_iter=50, warm_start=False)
        W0 = np.asarray(bk.to_host(start.info["W"]), dtype=np.float64)
        del Fs, start                   # the sample's features are not needed in the passes
    sol = newton_solve(oracle, W0, tol=tol, max_iter=max_iter, verbose=verbose, callback=callback)
    sol.info["warm_start_rows"] = 0 if W0 is None else int(sample[0].shape[0])
    return sol, classes, oracle.d


# --------------------------------------------------------------------------- SBM
def _vstack(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if bk.is_sparse(a) or bk.is_sparse(b):
        if bk.is_gpu_array(a):
            import cupyx.scipy.sparse as csp  # only reached with CuPy blocks

            return csp.vstack([a, b]).tocsr()
        return sp.vstack([a, b]).tocsr()
    return bk.namespace_of(a).concatenate([a, b], axis=0)


def sbm(source: Any, C: float, loss: str = "squared_hinge", *, n_passes: int = 3,
        cache_drop: float = 0.75, labels: np.ndarray | None = None, classes: np.ndarray | None = None,
        class_weight: np.ndarray | None = None, intercept_scaling: float | None = 1.0,
        tol: float = 1e-4, inner_max_iter: int = 50, shrinking: bool = True,
        random_state: Any = None, device: Any = None, dtype: Any = None,
        verbose: int = 0) -> tuple[LinearSolution, np.ndarray, int]:
    """Selective block minimization (Chang & Roth 2011) over a :class:`~gpuksvm.blocks.BlockSource`.

    The dual variables of all n rows are kept (n × m floats, host); the rows
    themselves are never all in memory.  For each block B_j of a pass:
    W_j = B_j ∪ Ω (rows of the block already cached are taken from the cache);
    DCD (:func:`dual_cd`'s engine, warm-started, ≤ ``inner_max_iter`` epochs)
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
    C, loss, intercept_scaling, tol, shrinking, random_state : as in :func:`dual_cd`
    n_passes : int — passes over the data
    cache_drop : float in (0, 1] — fraction p dropped after each block (paper: 0.75)
    labels : all labels in pass order, if already read (else ``source.labels()``)
    classes : sorted class labels (default: those in ``labels``); two classes
        give one problem (classes[1] positive), more give one-vs-rest problems
    class_weight : (n_classes,) multipliers of C (:func:`ovr_targets` rules)
    inner_max_iter : int — DCD epochs per sub-problem
    device, dtype : where and in which precision the blocks are processed

    Returns
    -------
    (solution, classes, n_features)
    """
    _check_common(C, loss, tol, n_passes)
    if not isinstance(source, BlockSource):
        raise TypeError(f"sbm needs a gpuksvm.blocks.BlockSource, got {type(source).__name__}")
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
            Xw = _vstack(cache_X, rows)
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
        if verbose:
            print(f"sbm pass {p}: largest initial sub-problem gap {worst:.3g}")
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
