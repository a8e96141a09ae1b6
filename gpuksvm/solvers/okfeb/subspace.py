"""OK-FEB's online subspace: the state and the algorithm behind :class:`gpuksvm.OKFEB` (SPEC §4).

Paper: Sheikholeslami, Berberidis, Giannakis, "Large-scale kernel-based feature
extraction via low-rank subspace tracking on a budget" (IEEE TSP 2018).  Its
equations were partly lost in the text conversion; SPEC §4 restates them and is
what is implemented here.

Model: φ(xₙ) ≈ Φ_S A qₙ, a rank-r "virtual" subspace spanned by the lifted stored
vectors S ("online support vectors") mixed by A (|S| × r).  With
C = AᵀK_SA and M = C + λI_r = LLᵀ:

* features (eq. 7/11)        qₙ = M⁻¹ Aᵀ kₙ,   kₙ = κ(X_S, xₙ)
* fitting error (eq. 6b)     eₙ = κₙₙ − 2qₙᵀAᵀkₙ + qₙᵀCqₙ = κₙₙ − qₙᵀCqₙ − 2λ‖qₙ‖²
  (the second form uses Aᵀkₙ = Mqₙ: one GEMM per chunk of rows gives both);
* batch (Alg. 1, eq. 7 and 9)  Q = M⁻¹AᵀK,  A = Qᵀ(QQᵀ + λI)⁻¹, alternated;
* parametric SGD (Alg. 2, eq. 16)  A ← [A((1 − μₜλ/t)I − μₜqₜqₜᵀ); μₜqₜᵀ];
* nonparametric SGD (Alg. 3, eq. 19)  A ← Ā − μₜK_tG,
  G = Ā(qₜqₜᵀ + (λ/t)I) − eₜqₜᵀ (Ā = A with a zero row for xₜ);
* OK-FEB (Alg. 4): censor xₜ (no update) when eₜ ≤ ε, else add it to S and take
  the nonparametric step; budget maintenance (Alg. 5, eq. 25–26): while
  |S| > B drop i* = argminᵢ rᵢ‖aᵢ‖₂, recency rᵢ = 1 for a new vector and × β
  for all others at each inclusion.
* outputs of a row (:meth:`OnlineSubspace.feature_map`): ``"features"`` q;
  ``"kernel"`` z = C^{1/2}q, so zᵢᵀzⱼ = qᵢᵀCqⱼ ≈ κ(xᵢ, xⱼ).

Implementation notes (documented choices)
-----------------------------------------
* **Exact chunking of censored runs.**  While samples are censored nothing
  changes, so the features and errors of a chunk of upcoming rows are one
  kernel block K(X_chunk, S), one GEMM with A and one triangular solve; the
  censoring rule is applied up to the first non-censored row, the state is
  updated, and the rest of the chunk is recomputed.  This gives exactly the
  per-sample algorithm; the chunk length adapts to the observed censoring
  rate.  A run of censored rows is judged at once (while rows are censored θ
  shrinks by a fixed factor and ē is a linear recursion).
  On every update P = K_SA, C = AᵀP and the Cholesky factor of C + λI are
  recomputed (O(B²r + Br² + r³)); nothing O(r³) is done for censored samples.
  The B²r product is inherent in eq. (19): the (λ/t)K_tĀ part of the gradient
  moves A by −μ'(λ/t)P, so the new K_SA needs the product K_S·P.
* **Host per-sample path.**  On the CPU with ``batch_size=1`` the nonparametric
  step runs in place on preallocated buffers (BLAS axpy/ger for the old rows of
  A, running row sums of |K_S| for the Gershgorin safeguard, LAPACK potrf/potrs
  called directly, BLAS held to one thread); it is the same arithmetic as the
  general path (device, mini-batches, parametric rule), which the tests check
  by running both (``SubspaceParams.host_step``).
* **Initialization** (the paper leaves A₀ open): the first min(r, B) samples
  are stored unconditionally, each with a random row N(0, 1/r) in A — a full
  rank start (with a single random row all later rows would stay in its span).
* **t** counts every sample seen (censored or not), in the λ/t terms and in
  the step schedule μₜ = step_size / t^step_decay.
* **censor="auto"**: ε = θ·ē with ē an exponential moving average (weight
  0.01) of recent fitting errors and θ adapted multiplicatively,
  θ ← θ·exp(η(1[e > ε] − (1 − ρ))) with η = 0.02, so the long-run censoring
  rate is ρ = ``target_censor_rate``.  As the paper suggests ("thresholding is
  enforced after the budget is exceeded"), ε = 0 until |S| reaches B.
* **Mini-batches** (``batch_size`` b > 1, a variant of the per-sample rule for
  device throughput): the features of rows are computed with the state frozen
  until b non-censored rows are collected; those b rows enter S together and A
  takes one step with the *sum* of their instantaneous gradients,
  G = Ā(Σqqᵀ + b(λ/t)I) − [0; Q_J] (eq. 16 likewise), then the b lowest-scoring
  rows are removed.  b = 1 is exactly the paper's rule.
* ``mode="parametric"`` / ``"nonparametric"`` are the unbudgeted Algs. 2 / 3:
  every sample is stored (memory O(t²)), meant for short streams and for
  checking against the batch cost.  ``mode="batch"`` (Alg. 1) stores all rows
  and never forms K: K·A products are kernel mat-vecs in row blocks.

The state is one plain object (:class:`OnlineSubspace`, a "record" of the
model-file schema); the parameters of each call come in a frozen
:class:`SubspaceParams`, so the estimator's parameters stay the only source
of settings and nothing is switched through class attributes.
"""
from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.array import linalg
from gpuksvm.kernels.kernel import Kernel, epilogue_host, kernel_block, kernel_diag, kernel_matvec
from gpuksvm.solvers.okfeb.stream import HOST_LAPACK, MODES, OUTPUTS, SubspaceParams, SubspaceStream

__all__ = ["SubspaceParams", "OnlineSubspace", "batch_objective", "MODES", "OUTPUTS"]





class OnlineSubspace(SubspaceStream):
    """The fitted state of OK-FEB: stored vectors S, mixing matrix A and the censoring state.

    Buffers have ``cap`` rows; the first ``m`` are in use.  Every array lives on
    one device (NumPy or CuPy) in one working dtype.

    Attributes
    ----------
    kernel : Kernel (γ resolved)
    dtype : numpy dtype of the buffers
    rng : RandomState (the random rows of the initial A, Alg. 1's start)
    S : (cap, d) stored vectors; sn : (cap,) their squared norms (RBF)
    A : (cap, r); K : (cap, cap) K_S (None in mode="batch"); ra : (cap,) Σⱼ|K_S,ij|
    Pbuf : (cap, r) buffer of P = K_SA (host per-sample path), None in mode="batch"
    rec : (cap,) recency factors rᵢ; sidx : (cap,) stream index of each stored vector
    m : int, stored vectors in use
    n_seen, n_updates, n_censored : int; err_sum : float (Σ fitting errors at arrival)
    ema, theta : the censor="auto" state (ē, θ); censor_threshold : the current ε
    objective_history : list, Alg. 1 cost per alternation; n_iter : int
    last_errors : (n,) host array, errors of the rows of the last call
    P, C, L : K_SA (m × r), AᵀK_SA and the lower Cholesky factor of C + λI
    """

    def __init__(self, kernel: Kernel, n_features: int, params: SubspaceParams, device: bk.Device,
                 dtype: Any, random_state: np.random.RandomState) -> None:
        xp = bk.get_namespace(device) if device.is_gpu else np
        dt = np.dtype(dtype)
        cap, r = params.capacity, int(params.rank)
        online = params.mode != "batch"
        self.kernel = kernel
        self.dtype = dt
        self.rng = random_state
        self.S = xp.zeros((cap, n_features), dtype=dt)
        self.sn = xp.zeros(cap, dtype=dt)
        self.A = xp.zeros((cap, r), dtype=dt)
        self.K = xp.zeros((cap, cap), dtype=dt) if online else None
        # Σ_j |K_S,ij| per stored row (Gershgorin safeguard of the step), kept up to date in O(B)
        self.ra = xp.zeros(cap, dtype=dt)
        # buffer for P = K_S A (the host per-sample path writes it in place)
        self.Pbuf = xp.zeros((cap, r), dtype=dt) if online else None
        self.rec = np.zeros(cap)
        self.sidx = np.zeros(cap, dtype=np.int64)
        self.m = 0
        self.n_seen = 0
        self.n_updates = 0
        self.err_sum = 0.0
        self.n_censored = 0
        self.ema = None
        self.theta = 1.0
        self.censor_threshold = 0.0 if params.censor == "auto" else float(params.censor)
        self.objective_history = []
        self.n_iter = 1
        self.last_errors = np.zeros(0)
        self.refresh(params)

    # ------------------------------------------------------------------ basics
    @property
    def xp(self):
        S = self.S
        return np if type(S) is np.ndarray else bk.namespace_of(S)     # (hot: called per sample)

    @property
    def rank(self) -> int:
        return int(self.A.shape[1])

    @property
    def device(self) -> bk.Device:
        """The device the state's arrays live on."""
        return bk.device_of(self.S)

    #: bookkeeping arrays that stay on the host whatever the device
    _HOST_ARRAYS = ("rec", "sidx", "last_errors")

    def _moved_copy(self, device: bk.Device) -> "OnlineSubspace":
        """A copy with every device array on ``device`` (pickling, ``to_device``)."""
        new = copy.copy(self)
        for k, v in vars(self).items():
            if k not in self._HOST_ARRAYS and bk.is_array(v):
                setattr(new, k, bk.to_device(v, device))
        new._cache = {}
        return new

    def _grow(self, need: int) -> None:
        cap = self.S.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        xp, dt, m, r = self.xp, self.dtype, self.m, self.rank

        def grown(a: Any, shape: tuple) -> Any:
            out = xp.zeros(shape, dtype=dt)
            out[:m] = a[:m]
            return out

        self.S = grown(self.S, (new, self.S.shape[1]))
        self.sn = grown(self.sn, (new,))
        self.A = grown(self.A, (new, r))
        self.ra = grown(self.ra, (new,))
        if self.K is not None:
            K = xp.zeros((new, new), dtype=dt)
            K[:m, :m] = self.K[:m, :m]
            self.K = K
        if self.Pbuf is not None:
            self.Pbuf = xp.zeros((new, r), dtype=dt)
        rec = np.zeros(new)
        rec[:m] = self.rec[:m]
        sidx = np.zeros(new, dtype=np.int64)
        sidx[:m] = self.sidx[:m]
        self.rec, self.sidx = rec, sidx

    def refresh(self, p: SubspaceParams, KA: Any = None) -> None:
        """Recompute P = K_SA, C = AᵀP and chol(C + λI) after A changed (O(B²r + Br² + r³))."""
        xp, dt, m, r = self.xp, self.dtype, self.m, self.rank
        A = self.A[:m]
        if m == 0:
            P = xp.zeros((0, r), dtype=dt)
        elif KA is not None:
            P = KA
        elif xp is np and self.Pbuf is not None:
            P = np.matmul(self.K[:m, :m], A, out=self.Pbuf[:m])
        else:
            P = self.K[:m, :m] @ A
        C = A.T @ P
        if xp is np:
            C += C.T                  # NumPy buffers the overlapping operand
            C *= 0.5
            # LAPACK directly: the per-sample path calls this once per update
            Mreg = C.copy()
            Mreg.flat[::r + 1] += float(p.reg)
            L, info = HOST_LAPACK[dt][0](Mreg, lower=1, clean=1, overwrite_a=1)
            if info != 0:
                raise self.not_positive_definite(C, p)
        else:
            C = (C + C.T) * 0.5
            try:
                L = linalg.cho_factor(C + float(p.reg) * xp.eye(r, dtype=dt))
            except np.linalg.LinAlgError:
                raise self.not_positive_definite(C, p) from None
        self.P, self.C, self.L = P, C, L
        # lazily derived matrices (the float64 maps); a dict filled in place so that
        # transform leaves the attributes unchanged
        self._cache = {}

    def not_positive_definite(self, C: Any, p: SubspaceParams) -> ValueError:
        """Why AᵀK_SA + λI lost positive definiteness, and what to change."""
        where = f"after {self.n_seen} samples"
        kern = self.kernel
        if not bool(bk.to_host(self.xp.isfinite(C).all())):
            return ValueError(f"OK-FEB diverged {where}: the subspace A became inf/NaN. Reduce "
                              f"step_size (now {p.step_size!r}) or use step_decay > 0"
                              + (f"; kernel values of this size ({kern.name}, degree="
                                 f"{kern.degree:g}) also overflow: lower the degree or scale X"
                                 if kern.name == "poly" else ""))
        if not kern.is_psd:
            return ValueError(f"OK-FEB failed {where}: kernel={kern.name!r} is not positive "
                              "semi-definite, so AᵀK_SA + λI (eq. 11) lost positive definiteness. Use "
                              "kernel='rbf', 'poly' or 'linear', or a larger reg (λ, now "
                              f"{p.reg!r}) with the sigmoid kernel")
        m = self.m
        kmax = float(bk.to_host(self.xp.abs(self.K[:m, :m]).max())) if m and self.K is not None else 0.0
        return ValueError(f"OK-FEB failed {where}: AᵀK_SA + λI (eq. 11) is not positive definite in "
                          f"{self.dtype.name} (kernel values up to {kmax:.3g}); increase reg "
                          f"(λ, now {p.reg!r}), scale X"
                          + (", lower the polynomial degree" if kern.name == "poly" else "")
                          + (" or use dtype='float64'" if self.dtype == np.float32 else ""))

    # ------------------------------------------------------------------ maps
    def feature_map(self, output: str, reg: float):
        """The map of :meth:`transform` in float64, whatever the working dtype: W (|S| × r) with
        a row's output Wᵀk — W = A(C + λI)⁻¹ for ``"features"`` (eq. 11b), W C^{1/2} for
        ``"kernel"``.

        Why float64: when some of the r directions carry almost no kernel energy, C has
        eigenvalues ≈ 0 and cond(C + λI) ≈ λ_max(C)/λ (3·10⁴ at the default λ = 10⁻³ on the
        test models); W then has entries in the hundreds while the features are O(1), and
        float32 rounding of W and K(X, S) is amplified to errors ~3·10⁻⁴ (measured: with W
        in float32 a GPU float32 fit and its CPU copy disagree by 2.9·10⁻⁴ on features of
        size 0.9).
        Computed in float64 from the same stored state the amplified error is ~10⁻¹¹, and the
        result is rounded to the working dtype once, at the end of :meth:`transform`.
        """
        key = f"map_{output}"
        cache = self._cache
        if key not in cache:
            xp, m, r = self.xp, self.m, self.rank
            if m == 0:
                W = xp.zeros((0, r), dtype=np.float64)
            else:
                C = self.C.astype(np.float64)
                L = linalg.cho_factor(C + float(reg) * xp.eye(r, dtype=np.float64))
                if output != "kernel":
                    del C                             # only the kernel output's root needs it
                W = xp.empty((m, r), dtype=np.float64)

                def solve(s: int, e: int) -> None:   # rows of W: independent right-hand sides
                    W[s:e] = linalg.cho_solve(L, self.A[s:e].T.astype(np.float64)).T

                # per row of W: the float64 copy of A's row, the solve's result and its copy into W
                bk.map_row_blocks(solve, m, bk.plan_rows(m, 3 * r * 8, self.device),
                                  what="OK-FEB feature map")
                if output == "kernel":
                    w, U = linalg.eigh(C)
                    W = W @ ((U * xp.sqrt(xp.maximum(w, 0))[None, :]) @ U.T)
            cache[key] = W
        return cache[key]

    def _croot(self):
        """C^{1/2} (symmetric, working dtype), for prequential output="kernel" (eigenvalues clipped at 0)."""
        if "root" not in self._cache:
            w, U = linalg.eigh(self.C)
            xp = self.xp
            self._cache["root"] = (U * xp.sqrt(xp.maximum(w, 0))[None, :]) @ U.T
        return self._cache["root"]

    def _prequential(self, Q: Any, output: str) -> Any:
        """Rows' output under the current state from their features q (rows of Q)."""
        return Q @ self._croot() if output == "kernel" else Q

    def transform(self, Xd: Any, output: str, reg: float, *, float64: bool = False) -> Any:
        """Outputs of rows ``Xd`` (on the state's device) under the current model, in the working
        dtype (``float64=True``: as computed, in float64)."""
        Z = kernel_matvec(Xd, self.S[:self.m], self.feature_map(output, reg), self.kernel, dtype=np.float64)
        return Z if float64 else Z.astype(self.dtype, copy=False)

    def relabel_rows(self, stream_rows: np.ndarray) -> None:
        """After a fit that streamed rows in a chosen order: ``sidx`` and ``last_errors`` refer to
        the rows as given.  ``stream_rows[j]`` is the row that came j-th since the state was
        created (epochs concatenated); ``last_errors`` is reordered by the last n of them."""
        m = self.m
        self.sidx[:m] = np.asarray(stream_rows, dtype=np.int64)[self.sidx[:m]]
        n = self.last_errors.shape[0]
        out = np.empty(n)
        out[np.asarray(stream_rows[-n:], dtype=np.int64)] = self.last_errors
        self.last_errors = out

    # ------------------------------------------------------------------ features
    def _kblock(self, Xc: Any, lo: int = 0, hi: int | None = None) -> Any:
        """K(Xc, S[lo:hi]); a lean NumPy path for the small per-sample blocks."""
        hi = self.m if hi is None else hi
        if self.xp is not np:
            return kernel_block(Xc, self.S[lo:hi], self.kernel, dtype=self.dtype)
        G = Xc @ self.S[lo:hi].T
        if self.kernel.name == "rbf":
            return epilogue_host(G, np.einsum("ij,ij->i", Xc, Xc), self.sn[lo:hi], self.kernel)
        return epilogue_host(G, None, None, self.kernel)

    def _kdiag(self, Xc: Any) -> Any:
        if self.kernel.name == "rbf":
            return self.xp.ones(Xc.shape[0], dtype=self.dtype)
        return kernel_diag(Xc, self.kernel, dtype=self.dtype)

    def features(self, Xc: Any, p: SubspaceParams) -> tuple[Any, Any, Any]:
        """Features q, fitting errors e and K(Xc, S) of rows ``Xc`` under the current state."""
        xp, m = self.xp, self.m
        if m == 0:
            return xp.zeros((Xc.shape[0], self.rank), dtype=self.dtype), self._kdiag(Xc), None
        kd = 1.0 if self.kernel.name == "rbf" else self._kdiag(Xc)
        Kc = self._kblock(Xc)
        U = Kc @ self.A[:m]                                         # Aᵀk per row
        if xp is np:
            Qt, info = HOST_LAPACK[self.dtype][1](self.L, U.T, lower=1)  # eq. (11b)
            if info != 0:
                raise self.not_positive_definite(self.C, p)
            Q = Qt.T
        else:
            Q = linalg.cho_solve(self.L, U.T).T                      # eq. (11b)
        # e = κ − 2qᵀu + qᵀCq with u = (C + λI)q, so Cq = u − λq and
        # e = κ − qᵀu − λ‖q‖²                                              (eq. 6b)
        e = kd - xp.einsum("ij,ij->i", Q, U + float(p.reg) * Q)
        return Q, xp.maximum(e, 0), Kc

    # ------------------------------------------------------------------ updates
    @staticmethod
    def _step(p: SubspaceParams, t: int) -> float:
        return float(p.step_size) / (t ** float(p.step_decay))

    def _add(self, p: SubspaceParams, Xn: Any, Kn: Any, Q: Any, kdn: Any, idx: list[int], t: int,
             init: bool) -> None:
        """Add rows Xn (s × d) to S and update A (eq. 16 / eq. 19), then maintain the budget.

        ``Kn`` = K(Xn, S) (s × |S|), ``Q`` their features, ``kdn`` their κ(x, x).
        """
        xp, dt = self.xp, self.dtype
        s = Xn.shape[0]
        m = self.m
        self._grow(m + s)
        r = self.rank
        A = self.A
        self.S[m:m + s] = Xn
        if self.kernel.name == "rbf":
            self.sn[m:m + s] = xp.einsum("ij,ij->i", Xn, Xn)
        if s == 1:
            Knn = (self._kdiag(Xn) if kdn is None else kdn).reshape(1, 1)
        else:
            Knn = self._kblock(Xn, m, m + s)
        # running row sums of |K_t|, K_t = [[K_S, K_nSᵀ], [K_nS, K_nn]] (O(|S| s))
        if m:
            aKn = xp.abs(Kn)
            self.ra[:m] += aKn.sum(axis=0)
            self.ra[m:m + s] = aKn.sum(axis=1) + xp.abs(Knn).sum(axis=1)
        else:
            self.ra[m:m + s] = xp.abs(Knn).sum(axis=1)
        if init:
            A[m:m + s] = xp.asarray(self.rng.normal(0.0, 1.0 / math.sqrt(r), size=(s, r)), dtype=dt)
        else:
            mu = self._step(p, t)
            lam_t = float(p.reg) / t
            if p.mode == "parametric":                                 # eq. (16)
                A[:m] -= mu * ((s * lam_t) * A[:m] + (A[:m] @ Q.T) @ Q)
                A[m:m + s] = mu * Q
            else:                                                      # eq. (19), Alg. 3/4
                # the nonparametric step is SGD with the matrix step μK_t (§IV-C); it is
                # stable only for μ·λ_max(K_t)·‖q‖² small, so (NLMS-like safeguard) μ is
                # divided by max(1, g·‖Q‖²_F) with g = max_i Σ_j |K_t,ij| ≥ λ_max(K_t)
                # (applied to the existing rows; the new rows take the plain step μₜ)
                g = max(float(self.ra[:m + s].max()), 1e-12)         # ≥ λ_max(K_t) (Gershgorin)
                mu_old = mu / max(1.0, g * float(xp.sum(Q * Q)))
                # K_tĀ = [P; K_nS A];  K_tG = K_tĀ(QᵀQ + sλ/t I) − K_t[:, new] Q     (O(|S| r s))
                Pn = Kn @ A[:m] if m else xp.zeros((s, r), dtype=dt)
                grad_new = (Pn @ Q.T) @ Q + (s * lam_t) * Pn - Knn @ Q
                if m:
                    A[:m] -= mu_old * ((self.P @ Q.T) @ Q + (s * lam_t) * self.P - Kn.T @ Q)
                A[m:m + s] = -mu * grad_new
        K = self.K
        if m:
            K[m:m + s, :m] = Kn
            K[:m, m:m + s] = Kn.T
        K[m:m + s, m:m + s] = Knn
        self.rec[:m] *= float(p.forget) ** s
        self.rec[m:m + s] = 1.0
        self.sidx[m:m + s] = idx
        self.m = m + s
        if p.mode == "budget" and self.m > p.budget:
            self.maintain_budget(p.budget)
        self.refresh(p)

    def maintain_budget(self, budget: int) -> None:
        """Alg. 5, eq. (25)–(26): drop the rows with the smallest rᵢ‖aᵢ‖₂ until |S| = B."""
        m, B = self.m, int(budget)
        A = self.A[:m]
        norms = bk.to_host(self.xp.sqrt(self.xp.einsum("ij,ij->i", A, A)))
        score = bk.to_host(self.rec[:m]) * norms
        n_drop = m - B
        if n_drop == 1:
            self._remove(np.array([int(np.argmin(score))]))
        else:
            self._remove(np.argsort(score, kind="stable")[:n_drop])

    def _remove(self, drop: np.ndarray) -> None:
        m = self.m
        xp = self.xp
        if len(drop) == 1:
            i, j = int(drop[0]), m - 1                    # move the last row into slot i: O(B)
            self.ra[:m] -= xp.abs(self.K[:m, i])
            if i != j:
                self.S[i] = self.S[j]
                self.sn[i] = self.sn[j]
                self.A[i] = self.A[j]
                self.K[i, :m] = self.K[j, :m]
                self.K[:m, i] = self.K[:m, j]
                self.K[i, i] = self.K[j, j]
                self.ra[i] = self.ra[j]
                self.rec[i] = self.rec[j]
                self.sidx[i] = self.sidx[j]
            self.m = m - 1
            return
        keep = np.ones(m, dtype=bool)
        keep[drop] = False
        keep = np.flatnonzero(keep)
        kd = xp.asarray(keep)
        nk = len(keep)
        self.ra[:m] -= xp.abs(self.K[:m, :m][:, xp.asarray(drop)]).sum(axis=1)
        self.ra[:nk] = self.ra[kd]
        self.S[:nk] = self.S[kd]
        self.sn[:nk] = self.sn[kd]
        self.A[:nk] = self.A[kd]
        self.K[:nk, :nk] = self.K[:m, :m][kd][:, kd]
        self.rec[:nk] = self.rec[keep]
        self.sidx[:nk] = self.sidx[keep]
        self.m = nk

    # ------------------------------------------------------------------ censoring

    # ------------------------------------------------------------------ the stream

    # ------------------------------------------------------------------ batch (Alg. 1)
    def fit_batch(self, X: Any, p: SubspaceParams, iterations: Any) -> None:
        """Alg. 1 on all rows of X: alternate eq. (7) and eq. (9) (``iterations`` yields one item
        per alternation allowed — a range, or a progress bar over it)."""
        xp, dt, r = self.xp, self.dtype, self.rank
        n = X.shape[0]
        lam = float(p.reg)
        self._grow(n)
        self.S[:n] = X
        self.sn[:n] = xp.einsum("ij,ij->i", X, X)
        self.m = n
        A = xp.asarray(self.rng.normal(0.0, 1.0 / math.sqrt(r), size=(n, r)), dtype=dt)
        kd = kernel_diag(X, self.kernel, dtype=dt)
        ksum = float(xp.sum(kd))
        eye = xp.eye(r, dtype=dt)
        hist = []
        for _ in iterations:
            KA = kernel_matvec(X, X, A, self.kernel, dtype=dt)           # K·A, no n×n block
            C = A.T @ KA
            C = (C + C.T) * 0.5
            Q = linalg.solve_spd(C + lam * eye, KA.T).T                  # eq. (7)
            hist.append(batch_objective(ksum, A, KA, Q, lam, n))
            A = linalg.solve_spd(Q.T @ Q + lam * eye, Q.T).T            # eq. (9)
            if len(hist) > 1 and hist[-2] - hist[-1] <= p.tol * abs(hist[-2]):
                break
        self.A[:n] = A
        self.objective_history = hist
        self.n_iter = len(hist)
        KA = kernel_matvec(X, X, A, self.kernel, dtype=dt)
        self.refresh(p, KA=KA)
        # errors of the fitted model on its training rows: κ − qᵀCq − 2λ‖q‖²
        Q = linalg.cho_solve(self.L, KA.T).T
        e = kd - xp.einsum("ij,ij->i", Q @ self.C, Q) - 2.0 * lam * xp.einsum("ij,ij->i", Q, Q)
        self.last_errors = np.maximum(bk.to_host(e), 0.0)
        self.n_seen = n
        self.n_updates = n
        self.err_sum = float(self.last_errors.sum())
        self.sidx[:n] = np.arange(n)
        self.rec[:n] = 1.0


def batch_objective(kdiag_sum: float, A: Any, KA: Any, Q: Any, reg: float, n: int) -> float:
    """The batch cost (eq. 5): (1/2N)Σ‖φₙ − ΦAqₙ‖² + (λ/2N)(tr AᵀKA + Σ‖qₙ‖²).

    ``KA`` = K·A (n × r) over all rows, ``Q`` (n × r) one feature row per sample.
    """
    xp = bk.namespace_of(A)
    C = A.T @ KA
    fit = kdiag_sum - 2.0 * float(xp.sum(Q * KA)) + float(xp.sum((Q @ C) * Q))
    return (fit + reg * (float(xp.trace(C)) + float(xp.sum(Q * Q)))) / (2.0 * n)
