"""Primal Newton for the L2-loss linear SVM over row blocks read one at a time (out of core).

:func:`newton_stream` runs :func:`~gpuksvm.solvers.linear.newton.newton_solve` — the
same stopping rule and exact line search as in memory — over a
:class:`StreamOracle`, which accumulates only dim × dim statistics per problem
in each pass over a :class:`~gpuksvm.data.blocks.BlockSource` (SPEC §1).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla

from gpuksvm.array import backend as bk
from gpuksvm.data.blocks import BlockSource, LinearMapBlockSource, check_block
from gpuksvm.solvers.linear.problem import (
    Design,
    LinearSolution,
    _check_common,
    _pass_blocks,
    _stream_labels,
    ovr_targets,
)
from gpuksvm.solvers.linear.newton import (_cholesky_step, _eps_obj, _frac, _GramOracle, line_derivatives,
                                           newton_solve)
from gpuksvm.solvers.linear.newton_memory import newton_squared_hinge

__all__ = ["StreamOracle", "newton_stream"]

#: The most pieces an out-of-memory error cuts a block into (:meth:`StreamOracle._pass`; past a
#: block's rows, single rows)
_MAX_SPLIT = 2**20


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
    blocks : callable (split) → iterator of (offset, B_b) — one pass, blocks in the same order,
        each cut into ``split`` pieces of consecutive rows before it is brought to the device
    Y, CS : (n, m) host float64 — targets ±1 and costs C·sᵢ of every row, in pass order
    transform : (p, d) array or None
    n_features : int — p, the width of the base rows (needed when ``transform`` is None)
    scale : float or None — the constant column's value
    t_max : float — the bracket [0, t_max] of steps prepared by :meth:`line_start`
    spare_blocks : float — undecided base rows kept per step, in largest blocks
    speculate : bool — whether :meth:`line_start` prepares the next :meth:`evaluate` (one
        more dim × dim accumulator per problem); without it every step reads the data twice
    gram_cols : int or None — form the blocks' Gram products in column blocks of this width
        (a dim × ``gram_cols`` scratch instead of a dim × dim product; twice the flops)

    Memory: dim × dim float64 arrays, held one per problem (the base Gram) and, for a
    moment, one more (a block's Gram product, or the Hessian of :meth:`direction`, formed
    from the base Gram in column blocks and factored in place), and one more per problem
    while :meth:`line_start` speculates; T stays in its own dtype (its products take a block
    of its rows in float64 at a time).  Measured (LLSVM, 5,000 rows, k = 1,000, budget 16 MB):
    the Newton passes' traced peak 69 MB with a Gram change, a Hessian, its factor and T in
    float64 held beside the Gram, 29 MB this way (the fit's VmHWM growth 85 → 37 MB with the
    map's in-place eigendecomposition).
    """

    def __init__(self, blocks: Any, Y: np.ndarray, CS: np.ndarray, *, transform: Any = None,
                 n_features: int | None = None, scale: float | None = 1.0, t_max: float = 2.0,
                 spare_blocks: float = 1.0, speculate: bool = True, gram_cols: int | None = None):
        self.blocks = blocks
        self.Y = np.asarray(Y, dtype=np.float64)
        self.CS = np.asarray(CS, dtype=np.float64)
        n, m = self.Y.shape
        self.n, self.m = n, m
        self.scale = None if not scale else float(scale)
        # T in its own dtype: its products are formed in float64 a block of its rows at a time
        # (a float32 map's values are exact in float64), so no float64 copy of T is held
        self.T = None if transform is None else np.asarray(bk.to_host(transform))
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
        self.speculate = bool(speculate)
        self._spec = None
        self._t = None
        self.t_max, self.spare_blocks = float(t_max), float(spare_blocks)
        self.gram_rows = 0
        self.gram_cols = gram_cols
        self.split = 1          # the pieces each block is cut into (more after an out-of-memory error)

    def _pass(self, body: Any) -> Any:
        """``body()``, a pass over ``blocks(split)`` that starts its statistics afresh; on an
        out-of-memory error it runs again with every block cut into twice as many pieces (each
        piece's device copies and Gram scratch are that much smaller; the sums are the same up to
        float64 rounding), down to single rows.  Then the split stays for the next passes.
        """
        def attempt(part: int) -> Any:
            self.split = _MAX_SPLIT // part
            return body()

        out, _ = bk.smaller_on_out_of_memory(attempt, _MAX_SPLIT // self.split, 1, what="streamed Newton pass",
                                             size_text="every block cut into smaller pieces")
        return out

    def _t_rows(self) -> Any:
        """(rows, T[rows] in float64) in blocks of 128 rows."""
        for a in range(0, int(self.T.shape[0]), 128):
            yield slice(a, a + 128), self.T[a:a + 128].astype(np.float64, copy=False)

    def _t_dot(self, A: np.ndarray) -> np.ndarray:
        """T A in float64 (A: (d, c) float64)."""
        out = np.empty((self.T.shape[0], A.shape[1]))
        for rows, Tr in self._t_rows():
            out[rows] = Tr @ A
        return out

    def _t_tdot(self, A: np.ndarray) -> np.ndarray:
        """Tᵀ A in float64 (A: (p, c) float64)."""
        out = np.zeros((self.T.shape[1], A.shape[1]))
        for rows, Tr in self._t_rows():
            out += Tr.T @ A[rows]
        return out

    def _base_map(self, W: np.ndarray, xp: Any) -> Any:
        """T̃ W on the blocks' device: the base-space weights (p̃, m)."""
        if self.T is None:
            return xp.asarray(W)
        d = self.d
        top = self._t_dot(W[:d])
        if self.scale:
            top = np.concatenate([top, W[d:d + 1]], axis=0)
        return xp.asarray(top)

    def _to_features(self, A: np.ndarray) -> np.ndarray:
        """T̃ᵀ A for base-space vectors A (p̃, m), on the host."""
        if self.T is None:
            return A
        p = self.T.shape[0]
        out = self._t_tdot(A[:p])
        return np.concatenate([out, A[p:p + 1]], axis=0) if self.scale else out

    def _gram_to_features(self, G: Any, block: int = 64) -> np.ndarray:
        """T̃ᵀ G T̃ on the host (float64), formed in column blocks of ``block``: the scratch is
        (p + d) × ``block`` values beside the result, not two more dim × dim products."""
        G = np.asarray(bk.to_host(G), dtype=np.float64)
        if self.T is None:
            return G.copy()
        p, d = self.T.shape
        out = np.empty((self.dim, self.dim))
        Gp = G[:p]                      # whole rows: a contiguous operand, not a copy of G[:p, :p]
        for a in range(0, d, block):
            b = min(a + block, d)
            Tb = np.zeros((G.shape[1], b - a))
            Tb[:p] = self.T[:, a:b]
            out[:d, a:b] = self._t_tdot(Gp @ Tb)
        if self.scale:
            out[:d, d] = out[d, :d] = self._t_tdot(G[:p, p:p + 1])[:, 0]
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
                st["grams"][c] = B.signed_gram(w, xp.asarray(np.flatnonzero(chg)), out=st["grams"][c],
                                               cols=self.gram_cols)
                st["gram_rows"] += int(chg.sum())
                if st["grams"] is self._grams:
                    # added to the Grams themselves: these rows are settled now, so a pass run
                    # again after an out-of-memory error (:meth:`_pass`) does not add them twice
                    self._prev[rows, c] = act_h[:, c]

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
            def one_pass() -> dict:
                st = self._new_stats(todo, first=self._g0 is None)
                st["grams"] = self._grams     # a full pass's changes go straight into the Grams
                V = None
                for off, Bb in self.blocks(self.split):
                    B = Design(Bb, self.scale)
                    if V is None:
                        V = self._base_map(W, B.xp)
                    rows = slice(off, off + B.n)
                    O = B.dot(V)
                    self._block_stats(B, rows, O, todo, st)
                    self.o[rows] = np.asarray(bk.to_host(O))
                return st

            st = self._pass(one_pass)
            self.n_passes += 1
            if st["g"] is None:
                raise ValueError("the block source yielded no data")
        if st.get("g0") is not None:
            g0 = 2.0 * self._to_features(np.asarray(bk.to_host(st["g0"]), dtype=np.float64))
            self._g0 = np.sqrt((g0 * g0).sum(axis=0))
        G = W - 2.0 * self._to_features(np.asarray(bk.to_host(st["g"]), dtype=np.float64))
        for c in todo:                  # the Grams now follow the activity at W
            if st["grams"] is not self._grams and st["grams"][c] is not None:
                if self._grams[c] is None:
                    self._grams[c] = st["grams"][c]
                else:
                    self._grams[c] += st["grams"][c]
                st["grams"][c] = None
            self._prev[:, c] = st["act"][:, c]
        self.gram_rows += st["gram_rows"]
        f = 0.5 * (W * W).sum(axis=0) + st["loss"]
        return f, G

    def _gram(self, c: int) -> np.ndarray:
        """The feature-space Gram T̃ᵀ G_c T̃ (zeros without an active row: H = I)."""
        if self._grams[c] is None:
            return np.zeros((self.dim, self.dim))
        return self._gram_to_features(self._grams[c])

    def direction(self, G: np.ndarray, active: np.ndarray) -> np.ndarray:
        """−H⁻¹∇f per active problem, H = I + 2 T̃ᵀG_cT̃ formed and factored in place (one
        dim × dim array; on a lost positive definiteness :func:`_cholesky_step`'s floor)."""
        P = np.zeros_like(G)
        for c in np.flatnonzero(active):
            H = self._gram(int(c))
            H *= 2.0
            H[np.diag_indices_from(H)] += 1.0
            try:
                # H.T: the same symmetric matrix in the Fortran order LAPACK factors in place
                L = sla.cholesky(H.T, lower=True, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError:
                del H
                P[:, c] = _cholesky_step(self._gram(int(c)), G[:, c])
                continue
            P[:, c] = sla.cho_solve((L, True), -G[:, c], check_finite=False)
            del H, L
        return P

    def line_start(self, W: np.ndarray, P: np.ndarray) -> None:
        """One pass: z = F̃p, and the next :meth:`evaluate` prepared for t ∈ [0, t_max]."""
        todo = np.flatnonzero(np.any(P != 0, axis=0)) if self.speculate else np.zeros(0, dtype=np.int64)

        def one_pass() -> dict:
            sp = {"gA": None, "gB": None, "L": np.zeros((3, self.m)), "grams": [None] * self.m,
                  "gram_rows": 0, "rows": [], "B": [], "nbytes": 0, "full": False, "todo": todo}
            budget = 0
            V = None
            for off, Bb in self.blocks(self.split):
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
                        sp["grams"][c] = B.signed_gram(w, xp.asarray(np.flatnonzero(chg)), out=sp["grams"][c],
                                                         cols=self.gram_cols)
                        sp["gram_rows"] += int(chg.sum())
                keep = np.flatnonzero(undecided[:, todo].any(axis=1))
                if keep.size and self.speculate and not sp["full"]:
                    kept = B.take(xp.asarray(keep))
                    nbytes = kept.n * kept.dim * 8
                    if sp["nbytes"] + nbytes > budget:
                        sp["full"] = True       # too many undecided rows: evaluate will read the data
                        sp["rows"], sp["B"] = [], []
                    else:
                        sp["rows"].append(off + keep)
                        sp["B"].append(kept)
                        sp["nbytes"] += nbytes
            return sp

        sp = self._pass(one_pass)
        self.n_passes += 1
        self._spec = None if sp["gA"] is None or sp["full"] or not self.speculate else sp

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
                    grams[c] = B.signed_gram(w, xp.asarray(np.flatnonzero(chg)), out=grams[c],
                                              cols=self.gram_cols)
                    gram_rows += int(chg.sum())
        self.o = o1
        return {"g": g, "loss": loss, "act": act, "grams": grams, "gram_rows": gram_rows}

    def line_derivs(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return line_derivatives(self.o, self.z, self.Y, self.CS, t)

    def info(self) -> dict:
        return {"method": "cholesky", "gram_rows": int(self.gram_rows)}


def newton_stream(source: Any, C: float, *, labels: np.ndarray | None = None,
                  classes: np.ndarray | None = None, class_weight: np.ndarray | None = None,
                  intercept_scaling: float | None = 1.0, tol: float = 1e-4, max_iter: int = 1000,
                  warm_start: bool = True, device: Any = None, verbose: int = 0,
                  callback: Any = None) -> tuple[LinearSolution, np.ndarray, int]:
    """Primal Newton for the L2-loss over a :class:`~gpuksvm.data.blocks.BlockSource` (out of core).

    The same solver as in memory (:func:`~gpuksvm.solvers.linear.newton.newton_solve`:
    stopping rule, exact line search) over a :class:`StreamOracle`: each Newton
    step is two passes over the blocks, each returning only dim × dim statistics per problem, so
    it converges to the in-memory solution (SBM's passes do not: LLSVM on the
    800K-row noisy checkerboard, SBM 98.43 % in 695 s vs 98.75 % in 45 s in memory).  A
    :class:`~gpuksvm.data.blocks.LinearMapBlockSource` is streamed in its base
    space (LLSVM: K(X_b, Z), with T = M applied to the statistics), and its
    ``sample`` rows give a warm start: the in-memory solution on the sample
    with C scaled by n / n_sample (the same optimum in expectation; the first
    full Hessian then costs |I|·dim² instead of n·dim², and few passes remain).

    Parameters
    ----------
    source : BlockSource
    C, intercept_scaling, tol, max_iter : as in
        :func:`~gpuksvm.solvers.linear.newton_memory.newton_squared_hinge`
    labels, classes, class_weight : as in :func:`~gpuksvm.solvers.linear.sbm.sbm`
    warm_start : bool — use the source's ``sample``, if it has one
    device : where the blocks are processed (statistics in float64 there)
    verbose, callback : see :func:`~gpuksvm.solvers.linear.newton.newton_solve`

    Returns
    -------
    (solution, classes, n_features); ``solution.info["n_passes"]`` counts the
    passes over the data.
    """
    _check_common(C, "squared_hinge", tol, max_iter)
    if not isinstance(source, BlockSource):
        raise TypeError(f"newton_stream needs a gpuksvm.data.blocks.BlockSource, got {type(source).__name__}")
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

    def blocks(split: int = 1):
        for off, Bb in _pass_blocks(base(), labels):
            if mapped and Bb.shape[1] != p:
                raise ValueError(f"a base block has {Bb.shape[1]} columns, expected {p}")
            nb = int(Bb.shape[0])
            step = -(-nb // split)
            for a in range(0, nb, step):
                piece = Bb[a:a + step] if step < nb else Bb
                if mapped:       # base_fn's rows come from checked blocks: only place and dtype
                    yield off + a, bk.to_device(piece, dev, np.float64)
                else:
                    yield off + a, check_block(piece, p, dev, np.float64)

    dim = (int(T.shape[1]) if mapped else p) + (1 if intercept_scaling else 0)
    budget = bk.memory_budget(dev)
    square = dim * dim * 8
    # held: a Gram per problem and a transient (a block's Gram product, or the Hessian); the
    # product is formed in column blocks, and line_start speculates (one more Gram per problem),
    # only where the budget has room for them
    held = (Y.shape[1] + 1) * square
    oracle = StreamOracle(blocks, Y, float(C) * S, transform=T, n_features=p, scale=intercept_scaling,
                          speculate=held + Y.shape[1] * square <= budget,
                          gram_cols=None if held <= budget else 256)
    W0 = None
    sample = getattr(source, "sample", None)
    rows = 0
    if warm_start and sample is not None and sample[0].shape[0] < n:
        rows = _warm_start_rows(int(sample[0].shape[0]), dim,
                                np.dtype(source.dtype if mapped else np.float64).itemsize, Y.shape[1], budget)
    if rows >= dim:         # else no room for a useful warm start within the budget
        # the sample is in random (hash) order: its head is a random sample too
        Xs, ys = sample[0][:rows], sample[1][:rows]
        if mapped:   # F of the sample in the source's dtype, piece by piece (B is float64)
            step = source.max_rows or Xs.shape[0]
            Td = bk.to_device(oracle.T, dev, np.float64)
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
    sol.info["warm_start_rows"] = 0 if W0 is None else int(rows)
    return sol, classes, oracle.d


def _warm_start_rows(n_sample: int, dim: int, itemsize: int, m: int, budget: int) -> int:
    """Rows of the warm-start sample whose in-memory solve fits ``budget`` bytes: their
    features (``itemsize`` each) and a float64 copy of a block of them (the Gram's scratch),
    beside its four dim × dim float64 arrays per problem (Gram, reference Gram, Hessian and
    factor) and T in float64.  The full sample where it fits; else fewer (possibly none)."""
    room = int(budget) - (4 * max(int(m), 1) + 1) * dim * dim * 8
    return int(min(n_sample, max(room, 0) // (dim * (itemsize + 8))))
