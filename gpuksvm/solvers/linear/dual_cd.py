"""Dual coordinate descent for the linear SVM, both losses (Hsieh et al. 2008).

:func:`dual_cd`: dual coordinate descent with shrinking (Algorithm 1 and 3;
the problem and its notation: :mod:`gpuksvm.solvers.linear.problem`).  Coordinates
are visited in a random permutation, in blocks: per block one GEMM gives the
block's gradients and its Gram matrix, the exact sequential coordinate updates
run on that small matrix, and one GEMM updates w — the same iterates as
one-at-a-time DCD, with BLAS-3 work.  Its engine (:func:`_dcd_core`) also
solves the sub-problems of :func:`gpuksvm.solvers.linear.sbm.sbm`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.solvers.linear.problem import (
    Design,
    LinearSolution,
    _as_2d,
    _blas_limit,
    _check_common,
    _seed,
    _split,
    _weights,
    primal_objective,
)

__all__ = ["dual_cd"]


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
    >>> from gpuksvm.solvers.linear.dual_cd import dual_cd
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
