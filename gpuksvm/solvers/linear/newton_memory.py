"""Primal Newton for the L2-loss linear SVM on rows held in memory (CPU or GPU).

:func:`newton_squared_hinge` runs :func:`~gpuksvm.solvers.linear.newton.newton_solve`
over a :class:`DesignOracle`: Newton directions by Cholesky of the Hessian
(one float64 Gram per problem; one-vs-rest problems share one Gram where their
active sets allow) or by Hessian-free conjugate gradients, the line step from
the sorted breakpoints (:func:`~gpuksvm.solvers.linear.newton.exact_line_step`).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.array import linalg
from gpuksvm.array.blas_threads import one_blas_thread
from gpuksvm.solvers.linear.problem import (
    STREAM_MAX_DIM,
    Design,
    LinearSolution,
    _as_2d,
    _blas_limit,
    _check_common,
    _seed,
    _weights,
)
from gpuksvm.solvers.linear.newton import (
    NewtonOracle,
    _cholesky_step,
    _eps_obj,
    _frac,
    _newton_hessian,
    exact_line_step,
    line_derivatives,
    newton_solve,
)

__all__ = ["DesignOracle", "NewtonPath", "newton_squared_hinge", "GPU_CHOLESKY_MAX_DIM", "NEWTON_ROW_BYTES"]

#: Bytes of the in-memory Newton solver's working memory per row and problem solved at once
#: (margins, outputs, targets, costs, the line search's float64 temporaries): one problem on
#: 600 rows grew the emulated GPU pool by 104,448 B (174 B a row) before the line search dropped
#: its temporaries early.  Problems whose n × problems × this exceeds the memory budget are
#: solved a group at a time (:func:`newton_squared_hinge`).
NEWTON_ROW_BYTES = 176

#: Widest design whose Grams the Newton solver keeps on a GPU, in memory (on the CPU:
#: :data:`~gpuksvm.solvers.linear.problem.STREAM_MAX_DIM`): there a Cholesky step (~dim³/3 FLOPs at GEMM speed) is cheap
#: and CG's many small launches are not.  bench/gpu_model.py (H100 model predictions, not
#: measurements): LLSVM on ijcnn1 with k = 4000 fits in 0.98 s with CG (1,478 CG iterations,
#: 68 % of the time launch-bound) and in 0.31 s with Cholesky.
GPU_CHOLESKY_MAX_DIM = 8192


class DesignOracle(NewtonOracle):
    """Newton statistics of rows held in memory (a :class:`~gpuksvm.solvers.linear.problem.Design` on the CPU or a GPU).

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

    def seed_grams(self, grams: list, prev: list, factor: float) -> None:
        """Start from the Grams of another solve on the same rows (a C path's previous C):
        problem c's Gram ``factor · grams[c]`` of the rows ``prev[c]`` (None: none kept).  The
        first step then adds and removes only the rows whose activity differs from ``prev[c]``."""
        for c in range(self.m):
            if grams[c] is not None and prev[c] is not None:
                self._grams[c] = grams[c] * factor
                self._prev[c] = prev[c]

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
            if 2 * rows.shape[0] <= self.n:    # a copy of the active rows: at most half of F
                Xa, Da = self.X.take(rows), 2.0 * self.CS[rows] * act[rows]
            else:                              # inactive rows weigh 0: no copy of F
                Xa, Da = self.X, 2.0 * self.CS * act

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


class NewtonPath:
    """What a C path carries from one in-memory Newton solve to the next on the same rows.

    Pass the same object as ``path`` to :func:`newton_squared_hinge` for every C on one
    design: each solve records its weights and its problems' Hessian Grams F̃_IᵀD F̃_I with
    their active sets; the next solve on the same array F, with the same cost multipliers and
    intercept column, starts from those weights and from the Grams scaled by the ratio of the
    costs, so its first step adds and removes only the rows whose activity changed instead of
    summing every active row.  Measured on the LLSVM features of one ijcnn1 fold (8,000 rows,
    k = 300, γ = 1, C = 1 → 8 → 64, float32): the rows summed into Grams by the solves at C = 8
    and 64 fell from 4,313 and 2,394 (a warm start from the weights alone) to 1,407 and 751, and
    the three solves took 0.121 s instead of 0.138 s (medians of 15, 2-core CPU at load 5.5).
    Anything else (other rows, other weights, problems solved in groups, CG) starts afresh
    (``W0`` or the cold start) and leaves the record replaced.
    """

    def __init__(self) -> None:
        self._F = None
        self._key: tuple | None = None
        self.W: Any = None
        self._state: tuple[float, list, list] | None = None

    @staticmethod
    def _key_of(F: Any, S: Any, scale: float | None, m: int) -> tuple:
        return (tuple(F.shape), None if S is None else np.asarray(bk.to_host(S)), scale, m)

    def _matches(self, F: Any, S: Any, scale: float | None, m: int) -> bool:
        if self._F is not F or self._key is None:
            return False
        shape, S0, scale0, m0 = self._key
        if (shape, scale0, m0) != (tuple(F.shape), scale, m) or (S0 is None) != (S is None):
            return False
        return S0 is None or np.array_equal(S0, np.asarray(bk.to_host(S)))

    def start(self, F: Any, S: Any, scale: float | None, m: int) -> Any:
        """The previous solve's W (dim, m) when it solved the same problems on ``F``, else None."""
        return self.W if self._matches(F, S, scale, m) else None

    def grams(self, F: Any, S: Any, scale: float | None, m: int, C: float) -> tuple[list, list, float] | None:
        """(Grams, their active sets, the factor C / previous C) for the same problems on ``F``."""
        if self._state is None or not self._matches(F, S, scale, m):
            return None
        C0, grams, prev = self._state
        return grams, prev, float(C) / C0

    def record(self, F: Any, S: Any, scale: float | None, m: int, C: float, W: Any,
               oracle: "DesignOracle | None") -> None:
        """Keep this solve's weights and (Cholesky oracle) Grams for the next C."""
        self._F, self._key, self.W = F, self._key_of(F, S, scale, m), W
        self._state = None if oracle is None else (float(C), list(oracle._grams), list(oracle._prev))


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


def _subsample_start(X: Design, Y: Any, CS: Any, random_state: Any) -> Any:
    """W of a loose Newton solve on a random tenth of the rows (at least 5·dim), C scaled by
    n/n_sub; the copy of those rows is freed before the full solve starts."""
    n = X.n
    rng = np.random.default_rng(_seed(random_state))
    sub = np.sort(rng.choice(n, size=max(n // 10, 5 * X.dim), replace=False))
    sub = X.xp.asarray(sub) if X.xp is not np else sub
    oracle = DesignOracle(X.take(sub), Y[sub], CS[sub] * (n / sub.shape[0]), method="cholesky")
    return newton_solve(oracle, tol=1e-2, max_iter=50).info["W"]


def newton_squared_hinge(F: Any, Y: Any, C: float, *, sample_weight: Any = None,
                         intercept_scaling: float | None = 1.0, tol: float = 1e-4,
                         max_iter: int = 1000, method: str = "auto", W0: Any = None,
                         cg_max_iter: int = 500, warm_start: bool = True, random_state: Any = None,
                         verbose: int = 0, callback: Any = None, path: NewtonPath | None = None) -> LinearSolution:
    """Primal Newton for the L2-loss (squared hinge) linear SVM on rows in memory, all problems at once.

    Minimizes f(w) = ½‖w‖² + C Σᵢ Sᵢ max(0, 1 − yᵢ w̃ᵀx̃ᵢ)² per column of Y
    with :func:`~gpuksvm.solvers.linear.newton.newton_solve` over a :class:`DesignOracle`: active set
    I = {i: yᵢfᵢ < 1}; gradient ∇f = w − 2C F̃_Iᵀ(S ∘ y ∘ (1 − y∘f))_I; Newton
    direction from H = I + 2C F̃_Iᵀ diag(S_I) F̃_I (Keerthi & DeCoste 2005,
    eq. (4)–(6)); exact line search; LIBLINEAR's relative-gradient stop.

    Parameters
    ----------
    F : (n, d) array or sparse CSR (NumPy/SciPy or CuPy)
    Y : (n,) or (n, m) targets in {−1, +1} (host or device: each group of problems' columns
        is brought to F's device when it is solved)
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
        (:func:`_choose_method`; measured on the 2-core development CPU, 60,000 × 1,001
        float32, 10 one-vs-rest problems: CG 45 s, Cholesky 10 s).
    W0 : (dim, m) warm start, optional
    warm_start : bool
        Without W0, and for n ≥ 10·dim, start from the solution on a random
        tenth of the rows (C scaled by n/n_sub) — same optimum, cheaper first
        Hessian.
    random_state : int, RandomState, Generator or None — draws that tenth
    verbose : int
    callback : callable(dict), optional — see :func:`~gpuksvm.solvers.linear.newton.newton_solve`
    path : NewtonPath, optional
        A C path on this F: without W0, start from the previous solve's weights and (Cholesky,
        all problems at once) its Grams scaled to this C; this solve's are recorded there.

    Returns
    -------
    LinearSolution (``info["method"]`` says which direction solver ran; ``info["problems_at_once"]``
    how many problems were solved together: all of them, unless their per-row state —
    :data:`NEWTON_ROW_BYTES` a row and problem — exceeds the memory budget (then
    ``info["problems_planned"]`` is smaller than m), or an out-of-memory error cut the group
    (one ``MemoryFallbackWarning`` either way).  The problems are independent, so a
    group's solutions are those of all at once, up to round-off).

    Notes
    -----
    On the CPU the Cholesky method runs on one BLAS thread whatever the width: its Grams
    are NumPy products and its factors SciPy's LAPACK, two OpenBLAS libraries whose idle
    threads spin-wait and take the cores from each other at every step.  Measured on the
    2-core development CPU (C=1, float32 Gaussian rows), 2 threads vs 1: 8,000 × 300
    0.27 vs 0.05 s, 40,000 × 1,000 1.16 vs 0.89 s, 40,000 × 2,000 25.4 vs 3.6 s,
    100,000 × 300 5.2 vs 0.37 s.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.linear.newton_memory import newton_squared_hinge
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
    Y = _as_2d(Y if hasattr(Y, "ndim") else np.asarray(Y))
    n, m = Y.shape
    if n != X.n:
        raise ValueError(f"F has {X.n} rows but Y has {n}")
    if method == "auto":
        method = _choose_method(X, m)
    device = bk.device_of(F if not X.sparse else F.data)
    budget = bk.memory_budget(device)
    at_once = max(1, min(m, budget // max(n * NEWTON_ROW_BYTES, 1)))
    if at_once < m:
        warnings.warn(f"Newton: the per-row state of {m} problems on {n:,} rows ({m * n * NEWTON_ROW_BYTES:,} "
                      f"bytes) exceeds the memory budget ({budget:,} bytes); solving {at_once} at a time",
                      bk.MemoryFallbackWarning, stacklevel=2)

    key = (F, sample_weight, X.scale, m)
    if W0 is None and path is not None:
        W0 = path.start(*key)

    def solve(k: int) -> LinearSolution:
        parts = []
        # a C path's Grams serve the problems solved all at once only
        whole = path is not None and k >= m and method == "cholesky"
        for a in range(0, m, k):
            cols = slice(a, min(a + k, m))
            Yg = xp.asarray(Y[:, cols], dtype=dt)
            sw = sample_weight
            if sw is not None and getattr(sw, "ndim", 1) == 2:
                sw = sw[:, cols]
            CS = float(C) * _weights(sw, n, Yg.shape[1], xp, dt)
            parts.append(_solve_problems(X, Yg, CS, method=method, W0=None if W0 is None else W0[:, cols],
                                         cg_max_iter=cg_max_iter, warm_start=warm_start, random_state=random_state,
                                         tol=tol, max_iter=max_iter, verbose=verbose, callback=callback,
                                         path=(path, key, float(C)) if whole else None))
            del Yg, CS
        sol = parts[0] if len(parts) == 1 else _joined(parts)
        if path is not None and not whole:
            path.record(*key, float(C), sol.info["W"], None)
        return sol

    sol, used = bk.smaller_on_out_of_memory(solve, at_once, 1, what="Newton's one-vs-rest problems",
                                            size_text="{size} problem(s) at a time")
    sol.info["problems_at_once"] = int(used)
    sol.info["problems_planned"] = int(at_once)         # what the budget allowed, before any retry
    return sol


def _solve_problems(X: Design, Y: Any, CS: Any, *, method: str, W0: Any, cg_max_iter: int, warm_start: bool,
                    random_state: Any, tol: float, max_iter: int, verbose: int, callback: Any,
                    path: tuple[NewtonPath, tuple, float] | None = None) -> LinearSolution:
    """:func:`newton_squared_hinge` on the problems of Y's columns, all at once (``path``: the C
    path, the key of these problems and C: its Grams seed the oracle, and this solve's are kept)."""
    xp = X.xp
    with _blas_limit(X), one_blas_thread(method == "cholesky" and xp is np):
        if W0 is None and warm_start and method == "cholesky" and X.n >= 10 * X.dim and X.n >= 2000:
            # a Newton solve on a random tenth of the rows (C scaled up to match)
            # gives a start whose active set is near the final one: the first full
            # Hessian then costs |I|·d² instead of n·d²
            W0 = _subsample_start(X, Y, CS, random_state)
        oracle = DesignOracle(X, Y, CS, method=method, cg_max_iter=cg_max_iter, W0=W0)
        if path is not None:
            seed = path[0].grams(*path[1], path[2])
            if seed is not None:
                oracle.seed_grams(*seed)
        sol = newton_solve(oracle, W0, tol=tol, max_iter=max_iter, verbose=verbose, callback=callback)
        if path is not None:
            path[0].record(*path[1], path[2], sol.info["W"], oracle)
        return sol


def _joined(parts: list[LinearSolution]) -> LinearSolution:
    """One solution of the problems solved in groups (``parts``, in column order)."""
    xp = bk.namespace_of(parts[0].coef)
    info = dict(parts[-1].info)
    info["W"] = xp.concatenate([p.info["W"] for p in parts], axis=1)
    info["grad_norm"] = np.concatenate([np.asarray(p.info["grad_norm"]) for p in parts])
    for key in ("n_passes", "cg_iter", "gram_rows"):
        if key in info:
            info[key] = int(sum(p.info[key] for p in parts))
    return LinearSolution(xp.concatenate([p.coef for p in parts]), xp.concatenate([p.intercept for p in parts]),
                          np.concatenate([p.objective for p in parts]), max(p.n_iter for p in parts),
                          all(p.converged for p in parts), None, info)
