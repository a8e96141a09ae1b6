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
:func:`newton_squared_hinge`
    Primal Newton for the L2-loss (Keerthi & DeCoste 2005; SPEC §1): active
    set I = {i: yᵢfᵢ < 1}, Hessian H = I + 2C F̃_Iᵀ D F̃_I, one Cholesky
    (:func:`gpuksvm.linalg.cho_factor`) per step, or Hessian-free Newton-CG
    (only F·V and Fᵀ·U products, all problems batched in the same GEMMs);
    exact line search on the piecewise-quadratic 1-D objective.
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
from ..blocks import check_block
from ._blas import NARROW_DIM, host_busy, one_blas_thread

__all__ = ["Design", "LinearSolution", "primal_objective", "ovr_targets", "newton_squared_hinge",
           "dual_cd", "sbm"]

LOSSES = ("squared_hinge", "hinge")

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


def _gram_float64(X: "Design", idx: Any, weights: Any, block_rows: int = 65536) -> Any:
    """F̃_IᵀD F̃_I accumulated in float64 over row blocks (the rows stay in their dtype)."""
    xp = X.xp
    G = xp.zeros((X.dim, X.dim), dtype=np.float64)
    for s in range(0, int(idx.shape[0]), block_rows):
        rows = idx[s:s + block_rows]
        Xb = X.take(rows)
        Fb = Xb.F.astype(np.float64)
        G += Design(Fb, X.scale).weighted_gram(weights[rows].astype(np.float64))
    return G


def _line_search(wp: Any, pp: Any, o: Any, z: Any, Y: Any, CS: Any, active: Any, *,
                 max_iter: int = 30) -> Any:
    """Exact minimizer t of φ(t) = ½‖w + t p‖² + Σᵢ CSᵢ max(0, 1 − yᵢ(oᵢ + t zᵢ))², per column.

    φ is convex and piecewise quadratic: safeguarded 1-D Newton in a bracket
    (Keerthi & DeCoste 2005 solve the same 1-D problem by sorting breakpoints).
    """
    xp = bk.namespace_of(o)
    m = o.shape[1]
    yz = Y * z

    def derivs(t):
        marg = 1.0 - Y * (o + t[None, :] * z)
        act = (marg > 0)
        g = wp + t * pp - 2.0 * (CS * yz * marg * act).sum(axis=0)
        h = pp + 2.0 * (CS * z * z * act).sum(axis=0)
        return g, h

    tiny = float(xp.finfo(o.dtype).tiny)    # 1e-300 underflows to 0 in float32
    t = xp.ones(m, dtype=o.dtype)
    lo = xp.zeros(m, dtype=o.dtype)
    hi = xp.full(m, xp.inf, dtype=o.dtype)
    for _ in range(max_iter):
        g, h = derivs(t)
        done = xp.abs(g) <= 1e-10 * (xp.abs(wp) + pp + tiny) + 0 * t
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


def newton_squared_hinge(F: Any, Y: Any, C: float, *, sample_weight: Any = None,
                         intercept_scaling: float | None = 1.0, tol: float = 1e-4,
                         max_iter: int = 1000, method: str = "auto", W0: Any = None,
                         cg_max_iter: int = 500, warm_start: bool = True,
                         verbose: int = 0) -> LinearSolution:
    """Primal Newton for the L2-loss (squared hinge) linear SVM, all problems at once.

    Minimizes f(w) = ½‖w‖² + C Σᵢ Sᵢ max(0, 1 − yᵢ w̃ᵀx̃ᵢ)² per column of Y.
    Each step: active set I = {i: yᵢfᵢ < 1}; gradient
    ∇f = w − 2C F̃_Iᵀ(S ∘ y ∘ (1 − y∘f))_I; Newton direction from
    H = I + 2C F̃_Iᵀ diag(S_I) F̃_I (Keerthi & DeCoste 2005, eq. (4)–(6));
    exact line search.  Stops when ‖∇f‖ ≤ tol·‖∇f(w₀)‖ (as LIBLINEAR's TRON).

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
        "cholesky" forms H (dim × dim, float64) and factors it once per step;
        "cg" solves with conjugate gradients using only F·V and Fᵀ·U (all
        problems batched).  "auto": Cholesky for dense F with dim ≤ 2048 and a
        single problem, CG otherwise.
    W0 : (dim, m) warm start, optional
    warm_start : bool
        Without W0, and for n ≥ 10·dim, start from the solution on a random
        tenth of the rows (C scaled by n/n_sub) — same optimum, cheaper first
        Hessian.  Between steps the Gram F̃_IᵀDF̃_I is updated only by the rows
        that enter or leave I.

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
    with _blas_limit(X):
        return _newton(X, F, Y, C, sample_weight=sample_weight, intercept_scaling=intercept_scaling,
                       tol=tol, max_iter=max_iter, method=method, W0=W0, cg_max_iter=cg_max_iter,
                       warm_start=warm_start, verbose=verbose)


def _newton(X: Design, F: Any, Y: Any, C: float, *, sample_weight: Any, intercept_scaling: float | None,
            tol: float, max_iter: int, method: str, W0: Any, cg_max_iter: int, warm_start: bool,
            verbose: int) -> LinearSolution:
    """The body of :func:`newton_squared_hinge` (arguments already checked)."""
    xp = X.xp
    dt = F.dtype if F.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    Y = _as_2d(xp.asarray(Y, dtype=dt))
    n, m = Y.shape
    if n != X.n:
        raise ValueError(f"F has {X.n} rows but Y has {n}")
    CS = float(C) * _weights(sample_weight, n, m, xp, dt)
    if method == "auto":
        method = "cholesky" if (not X.sparse and X.dim <= 2048 and m == 1) else "cg"
    if W0 is None and warm_start and method == "cholesky" and n >= 10 * X.dim and n >= 2000:
        # a Newton solve on a random tenth of the rows (C scaled up to match)
        # gives a start whose active set is near the final one: the first full
        # Hessian then costs |I|·d² instead of n·d²
        sub = np.random.default_rng(0).choice(n, size=max(n // 10, 5 * X.dim), replace=False)
        sub = xp.asarray(np.sort(sub)) if xp is not np else np.sort(sub)
        Fs = F[sub]
        w_sub = _newton(Design(Fs, intercept_scaling), Fs, Y[sub], C * n / sub.shape[0],
                        sample_weight=CS[sub] / C, intercept_scaling=intercept_scaling, tol=1e-2,
                        max_iter=50, method="cholesky", W0=None, cg_max_iter=cg_max_iter,
                        warm_start=False, verbose=0)
        W0 = w_sub.info["W"]
    W = xp.zeros((X.dim, m), dtype=dt) if W0 is None else xp.array(W0, dtype=dt)
    o = X.dot(W) if W0 is not None else xp.zeros((n, m), dtype=dt)
    # float32 objectives cannot resolve relative changes below ~1e-6
    eps_obj = 1e-12 if dt == np.float64 else 1e-6
    # LIBLINEAR's primal stopping rule: ‖∇f‖ ≤ tol · max(min(#pos, #neg), 1)/n · ‖∇f(0)‖
    npos = (Y > 0).sum(axis=0)
    frac = xp.maximum(xp.minimum(npos, n - npos), 1) / n
    g0 = xp.sqrt((X.tdot(2.0 * CS * Y) ** 2).sum(axis=0))   # ‖∇f(0)‖
    active = xp.ones(m, dtype=bool)
    f_prev = None
    it = 0
    total_cg = 0
    converged = False
    grams: list = [None] * m
    prev_act: list = [None] * m
    for it in range(1, int(max_iter) + 1):
        marg = 1.0 - Y * o
        act = marg > 0
        r = CS * Y * marg * act                      # (n, m)
        G = W - 2.0 * X.tdot(r)                      # gradient, (dim, m)
        gn = xp.sqrt((G * G).sum(axis=0))
        fval = 0.5 * (W * W).sum(axis=0) + (CS * marg * marg * act).sum(axis=0)
        active = active & (gn > tol * frac * g0)
        if f_prev is not None:
            active = active & ((f_prev - fval) > eps_obj * xp.abs(fval))
        if not bool(active.any()):
            converged = True
            it -= 1
            break
        f_prev = fval
        if method == "cholesky":
            P = xp.zeros_like(G)
            for c in range(m):
                if not bool(active[c]):
                    continue
                a_c = act[:, c]
                # F̃_IᵀD F̃_I, updated by the rows that entered / left I (Hessian reuse)
                n_chg = None if prev_act[c] is None else int((a_c != prev_act[c]).sum())
                if n_chg is None or 2 * n_chg > int(a_c.sum()):
                    idx = xp.nonzero(a_c)[0]
                    grams[c] = X.take(idx).weighted_gram(CS[idx, c]).astype(np.float64)
                elif n_chg:
                    add = xp.nonzero(a_c & ~prev_act[c])[0]
                    rem = xp.nonzero(~a_c & prev_act[c])[0]
                    if add.shape[0]:
                        grams[c] += X.take(add).weighted_gram(CS[add, c]).astype(np.float64)
                    if rem.shape[0]:
                        grams[c] -= X.take(rem).weighted_gram(CS[rem, c]).astype(np.float64)
                prev_act[c] = a_c
                try:
                    L = linalg.cho_factor(_newton_hessian(grams[c]))
                except np.linalg.LinAlgError:
                    # I + 2 F̃_IᵀD F̃_I is SPD; a float32 Gram (or the drift of its
                    # up/downdates) can lose that at large n·C: rebuild it in float64
                    grams[c] = _gram_float64(X, xp.nonzero(a_c)[0], CS[:, c])
                    L = linalg.cho_factor(_newton_hessian(grams[c]))
                P[:, c] = linalg.cho_solve(L, -G[:, c].astype(np.float64)).astype(dt)
        else:
            rows = xp.nonzero(act.any(axis=1))[0]
            Xa = X.take(rows) if rows.shape[0] < n else X
            Da = 2.0 * CS[rows] * act[rows]

            def matvec(V, Xa=Xa, Da=Da):
                return V + Xa.tdot(Da * Xa.dot(V))

            eta = xp.minimum(0.1, xp.sqrt(gn / g0))
            P, k = _cg(matvec, -G, eta, int(cg_max_iter), active)
            total_cg += k
        Z = X.dot(P)
        t = _line_search((W * P).sum(axis=0), (P * P).sum(axis=0), o, Z, Y, CS, active)
        W = W + t[None, :] * P
        o = o + t[None, :] * Z
        if verbose:
            print(f"newton {it}: f={bk.to_host(fval)} |g|={bk.to_host(gn)} t={bk.to_host(t)}")
    else:
        marg = 1.0 - Y * o
        act = marg > 0
        G = W - 2.0 * X.tdot(CS * Y * marg * act)
        converged = bool((xp.sqrt((G * G).sum(axis=0)) <= tol * frac * g0).all())
    marg = 1.0 - Y * o
    obj = 0.5 * (W.astype(np.float64) ** 2).sum(axis=0) + \
        (CS * _losses(marg, "squared_hinge")).astype(np.float64).sum(axis=0)
    coef, intercept = _split(W, X)
    return LinearSolution(coef, intercept, np.asarray(bk.to_host(obj), dtype=np.float64), it,
                          bool(converged), None, {"method": method, "cg_iter": total_cg,
                                                  "W": W})


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
    from ..blocks import BlockSource

    _check_common(C, loss, tol, n_passes)
    if not isinstance(source, BlockSource):
        raise TypeError(f"sbm needs a gpuksvm.blocks.BlockSource, got {type(source).__name__}")
    if not (0.0 < float(cache_drop) <= 1.0):
        raise ValueError(f"cache_drop must be in (0, 1], got {cache_drop!r}")
    dev = bk.resolve_device("auto" if device is None else device)
    dt = bk.resolve_dtype(dtype, dev)
    xp = bk.get_namespace(dev)
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
    n_classes = classes.shape[0]
    y_idx = y_idx.astype(np.int32 if n_classes < 2**31 else np.int64)
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
        off = 0
        for Xb, yb in source:
            nb = int(Xb.shape[0])
            if nb == 0:
                continue
            if n_features is None:
                n_features = int(Xb.shape[1])
            yb = np.ravel(bk.to_host(yb))
            if yb.shape[0] != nb or off + nb > n or not np.array_equal(yb, labels[off: off + nb]):
                raise ValueError("the block source does not yield the same rows on every pass "
                                 "(labels differ from the first pass)")
            yield off, check_block(Xb, n_features, dev, dt)
            off += nb
        if off != n:
            raise ValueError("the block source does not yield the same rows on every pass")

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
