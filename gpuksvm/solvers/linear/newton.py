"""The primal Newton method for the L2-loss linear SVM, over any source of rows.

:func:`newton_solve` is THE primal Newton method for the L2-loss (Keerthi &
DeCoste 2005; SPEC §1): active set I = {i: yᵢfᵢ < 1}, Hessian
H = I + 2C F̃_Iᵀ D F̃_I, one Cholesky (:func:`gpuksvm.array.linalg.cho_factor`) per
step (or Hessian-free Newton-CG in memory), exact line search on the
piecewise-quadratic 1-D objective, LIBLINEAR's stopping rule (the problem and
its notation: :mod:`gpuksvm.solvers.linear.problem`).  The rows are reached through a
:class:`NewtonOracle`, so every fit path shares the solver:
:func:`~gpuksvm.solvers.linear.newton_memory.newton_squared_hinge` (rows in memory,
:class:`~gpuksvm.solvers.linear.newton_memory.DesignOracle`; one-vs-rest problems
share one Gram where their active sets allow),
:func:`~gpuksvm.solvers.linear.newton_stream.newton_stream` (blocks streamed from
disk, :class:`~gpuksvm.solvers.linear.newton_stream.StreamOracle`, dim × dim
statistics per pass) and the Dask fit (:class:`ReducedOracle` over map-reduce
sums, :mod:`gpuksvm.scaleout`).  This module holds the oracle interface, the
solver loop, the line steps and the Cholesky step shared by the oracles.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.array import linalg
from gpuksvm.solvers.progress import report
from gpuksvm.solvers.linear.problem import LinearSolution

__all__ = ["NewtonOracle", "ReducedOracle", "newton_solve", "exact_line_step", "line_derivatives"]


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
    runs on arrays in memory (:class:`~gpuksvm.solvers.linear.newton_memory.DesignOracle`),
    on blocks streamed from disk (:class:`~gpuksvm.solvers.linear.newton_stream.StreamOracle`,
    only dim × dim statistics per pass) and on Dask chunks (:class:`ReducedOracle` over map-reduce sums,
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
        """Solver details for :class:`~gpuksvm.solvers.linear.problem.LinearSolution` ``info``."""
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
    ~10 rounds of small kernels and a device→host check each (``bench/gpu_model.py`` predicts
    it at ~80 % of LinearSVM's H100 fit on ijcnn1).  Computed in
    float64 whatever the rows' dtype (the running sums span n rows).  Zero where not ``active``.
    """
    xp = bk.namespace_of(o)
    f64 = np.float64
    # the (n, m) float64 temporaries are dropped as soon as they are used: one problem on 600
    # rows held 15 of them at once (the budget test's emulated pool), now at most 6
    Yd = Y.astype(f64)
    a = 1.0 - Yd * o
    b = Yd * z
    del Yd
    cb = CS.astype(f64) * b
    s1, s2 = cb * a, cb * b
    del cb
    act0 = (a > 0) | ((a == 0) & (b < 0))                    # active just after t = 0
    S1 = xp.where(act0, s1, 0.0).sum(axis=0)
    S2 = xp.where(act0, s2, 0.0).sum(axis=0)
    del act0
    leave = b > 0
    s1[leave] *= -1.0                                         # d = −s where the row leaves, s where it enters
    s2[leave] *= -1.0
    del leave
    d1, d2 = s1, s2
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = a / b
    tau = xp.where((b != 0) & (tau > 0) & xp.isfinite(tau), tau, xp.inf)
    del a, b
    m = tau.shape[1]
    sentinel = xp.full((1, m), xp.inf, dtype=f64)             # φ' beyond every breakpoint
    zero = xp.zeros((1, m), dtype=f64)
    tau = xp.concatenate([tau, sentinel])
    order = xp.argsort(tau, axis=0)
    ts = xp.take_along_axis(tau, order, axis=0)
    del tau
    d1 = xp.take_along_axis(xp.concatenate([d1, zero]), order, axis=0)
    d2 = xp.take_along_axis(xp.concatenate([d2, zero]), order, axis=0)
    del order, s1, s2
    S1b = xp.cumsum(d1, axis=0)                               # sums on the interval before each breakpoint
    S1b += S1
    S1b -= d1
    del d1
    S2b = xp.cumsum(d2, axis=0)
    S2b += S2
    S2b -= d2
    del d2
    wp64, pp64 = wp.astype(f64), pp.astype(f64)
    with np.errstate(invalid="ignore"):
        g = wp64 + ts * pp64 - 2.0 * S1b + 2.0 * ts * S2b      # φ' at each breakpoint
    first = xp.argmax(~(g < 0), axis=0)[None, :]               # first breakpoint with φ' ≥ 0 (the sentinel's is NaN)
    del g
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
        report("Newton", lambda: f"step {it}: f={f} |g|={gn} t={bk.to_host(t)}", verbose, level=2)
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
