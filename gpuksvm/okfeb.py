"""OK-FEB: online kernel feature extraction on a budget (SPEC §4).

Paper: Sheikholeslami, Berberidis, Giannakis, "Large-scale kernel-based feature
extraction via low-rank subspace tracking on a budget" (IEEE TSP 2018).  Its
equations were partly lost in the text conversion; SPEC §4 restates them and is
what is implemented here.

Model: φ(xₙ) ≈ Φ_S A qₙ, a rank-r "virtual" subspace spanned by the lifted stored
vectors S ("online support vectors") mixed by A (|S| × r).  With
C = AᵀK_SA and M = C + λI_r:

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
* kernel features: zₙ = C^{1/2}qₙ, so zᵢᵀzⱼ = qᵢᵀCqⱼ ≈ κ(xᵢ, xⱼ).

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
  general path (device, mini-batches, parametric rule), which the tests check.
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
  of ``fit`` and never forms K: K·A products are kernel mat-vecs in row blocks.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.linalg import blas as _sla_blas
from scipy.linalg import lapack as _sla_lapack
from sklearn.base import (BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import backend as bk
from . import linalg
from .base import DeviceMixin, progress
from .kernels import Kernel, _epilogue_host, kernel_block, kernel_diag, kernel_matvec, make_kernel
from .solvers._blas import one_blas_thread
from .solvers.linear import ovr_targets
from .solvers.online import Pegasos, RegularizedLMS
from .validation import (check_allocation, check_choice, check_param, encode_classes, validate_X,
                         validate_X_y)

__all__ = ["OKFEB", "OKFEBClassifier", "OKFEBRegressor", "windowed_kernel_error", "batch_objective"]

_MODES = ("budget", "batch", "parametric", "nonparametric")
_EMA_WEIGHT = 0.01       # weight of a new error in the moving average ē (censor="auto")
_THETA_RATE = 0.02       # η of the multiplicative threshold adaptation (censor="auto")
_MIN_CHUNK, _MAX_CHUNK = 8, 2048


_LAPACK = {np.dtype(np.float32): (_sla_lapack.spotrf, _sla_lapack.spotrs),
           np.dtype(np.float64): (_sla_lapack.dpotrf, _sla_lapack.dpotrs)}
_BLAS = {np.dtype(np.float32): (_sla_blas.sger, _sla_blas.saxpy),
         np.dtype(np.float64): (_sla_blas.dger, _sla_blas.daxpy)}


def _lapack(dt: Any) -> tuple[Any, Any]:
    """(potrf, potrs) for ``dt`` (host per-sample path: no wrapper overhead)."""
    return _LAPACK[dt]


def _blas(dt: Any) -> tuple[Any, Any]:
    """(ger, axpy) for ``dt``: in-place rank-one update and scaled add."""
    return _BLAS[dt]


def windowed_kernel_error(X: Any, Z: Any, kernel: Kernel, window: int = 500) -> float:
    """Mean over consecutive windows of ‖K_w − Z_wZ_wᵀ‖_F / ‖K_w‖_F (OK-FEB §VII).

    Parameters
    ----------
    X : (n, d) rows, Z : (n, k) features whose inner products approximate κ
        (OK-FEB ``output="kernel"`` features, or a Nyström map).
    kernel : Kernel
    window : int
        Rows per window; a last partial window shorter than half of it is
        dropped (windows partition the first ⌊n/window⌋·window rows otherwise).

    Returns
    -------
    float
    """
    n = X.shape[0]
    if n == 0:
        raise ValueError("windowed_kernel_error needs at least one row")
    window = int(min(window, n))
    errs = []
    for s in range(0, n, window):
        e = min(s + window, n)
        if e - s < max(2, window // 2) and errs:
            break
        K = kernel_block(X[s:e], None, kernel)
        xp = bk.namespace_of(K)
        Zw = Z[s:e]
        D = K - Zw @ Zw.T
        errs.append(float(xp.linalg.norm(D)) / max(float(xp.linalg.norm(K)), 1e-300))
    return float(np.mean(errs))


def batch_objective(kdiag_sum: float, A: Any, KA: Any, Q: Any, reg: float, n: int) -> float:
    """The batch cost (eq. 5): (1/2N)Σ‖φₙ − ΦAqₙ‖² + (λ/2N)(tr AᵀKA + Σ‖qₙ‖²).

    ``KA`` = K·A (n × r) over all rows, ``Q`` (n × r) one feature row per sample.
    """
    xp = bk.namespace_of(A)
    C = A.T @ KA
    fit = kdiag_sum - 2.0 * float(xp.sum(Q * KA)) + float(xp.sum((Q @ C) * Q))
    return (fit + reg * (float(xp.trace(C)) + float(xp.sum(Q * Q)))) / (2.0 * n)


class OKFEB(DeviceMixin, TransformerMixin, BaseEstimator):
    """Online kernel feature extraction on a budget (OK-FEB, SPEC §4).

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear", "sigmoid"}, default="rbf"
    gamma : float or {"scale", "auto", "mean_dist"}, default="scale"
        Kernel scale; a string is resolved on the first batch seen (pass a
        number when streaming one row at a time).
    degree : float, default=3
    coef0 : float, default=1.0
    rank : int, default=50
        r, the number of features.
    budget : int, default=150
        B, the maximum number of stored vectors (mode="budget"; the paper
        recommends 1.5–5 × r).
    reg : float, default=1e-3
        λ > 0 (Frobenius/rank regularization, eq. 3).
    step_size : float, default=0.5
        μ₀ of the SGD step μₜ = μ₀ / t^step_decay.  In the nonparametric rule
        (modes "nonparametric" and "budget") the step is divided by
        max(1, g‖q‖²) for the rows of the existing stored vectors, g the
        Gershgorin bound of λ_max(K_t) — a safeguard against divergence for
        strongly correlated stored vectors (a deviation from the paper's plain
        μₜ that only acts when the plain step is large); new rows take μₜ.
    step_decay : float, default=0.0
        a in μₜ = μ₀/tᵃ: 0 is a constant step (tracking); a ∈ (½, 1] converges.
    censor : float or "auto", default="auto"
        ε: a sample with fitting error eₜ ≤ ε is censored (mode="budget").
    target_censor_rate : float in [0, 1), default=0.8
        ρ aimed at by ``censor="auto"``.
    forget : float in (0, 1], default=1.0
        β of the recency-aware budget maintenance (eq. 26): 1 is the
        minimum-distortion rule (eq. 25), small β tends to FIFO.
    mode : {"budget", "batch", "parametric", "nonparametric"}, default="budget"
        Alg. 4+5, Alg. 1, Alg. 2, Alg. 3.
    batch_size : int, default=1
        Non-censored samples per update (1 = the paper's per-sample rule; see
        the module notes for the mini-batch variant).
    output : {"features", "kernel"}, default="features"
        What ``transform`` returns: q, or z = C^{1/2}q with zᵢᵀzⱼ ≈ κ(xᵢ, xⱼ).
    max_iter : int, default=30
        Alternations of Alg. 1 (mode="batch").
    tol : float, default=1e-7
        Alg. 1 stops when the relative decrease of the cost is below ``tol``.
    device : str, default="auto"
    dtype : float32, float64 or None
    random_state : None, int or RandomState
    verbose : int, default=0

    Attributes
    ----------
    kernel_ : Kernel
    stored_vectors_ : (|S|, d) array, the stored vectors S (on the fit device)
    support_ : (|S|,) int array, stream index (0-based, over all rows seen) of each stored vector
    A_ : (|S|, r) array
    stored_gram_ : (|S|, |S|) array K_S (online modes)
    recency_ : (|S|,) array of recency factors rᵢ
    n_seen_ : int, samples processed
    n_updates_ : int, samples that updated A (not censored)
    ls_error_ : float, running LS fitting error (1/t)Σ e_τ (errors at arrival)
    censor_rate_ : float, fraction of samples censored
    censor_threshold_ : float, the current ε
    budget_use_ : float, |S| / B
    last_errors_ : (n,) host array, fitting errors of the rows of the last fit/partial_fit call
    objective_history_ : list of float, Alg. 1 cost per alternation (mode="batch")
    n_iter_ : int, Alg. 1 alternations run (mode="batch"), else 1 (one pass per call)
    n_features_in_ : int

    Examples
    --------
    >>> from gpuksvm import OKFEB
    >>> from gpuksvm.datasets import make_two_spheres
    >>> X, _ = make_two_spheres(2000, random_state=0)
    >>> fe = OKFEB(gamma=1.0, rank=10, budget=30, device="cpu", random_state=0).fit(X)
    >>> fe.transform(X[:5]).shape
    (5, 10)
    >>> len(fe.support_) <= 30
    True
    """

    def __init__(self, kernel: str = "rbf", gamma: Any = "scale", degree: float = 3,
                 coef0: float = 1.0, rank: int = 50, budget: int = 150, reg: float = 1e-3,
                 step_size: float = 0.5, step_decay: float = 0.0, censor: Any = "auto",
                 target_censor_rate: float = 0.8, forget: float = 1.0, mode: str = "budget",
                 batch_size: int = 1, output: str = "features", max_iter: int = 30,
                 tol: float = 1e-7, device: str = "auto", dtype: Any = None,
                 random_state: Any = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank = rank
        self.budget = budget
        self.reg = reg
        self.step_size = step_size
        self.step_decay = step_decay
        self.censor = censor
        self.target_censor_rate = target_censor_rate
        self.forget = forget
        self.mode = mode
        self.batch_size = batch_size
        self.output = output
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # use the in-place host step for per-sample updates (False: the general _add path)
    _fast_host = True

    # ------------------------------------------------------------------ params
    def _check_params(self) -> None:
        check_choice("mode", self.mode, _MODES)
        check_choice("output", self.output, ("features", "kernel"))
        check_param("rank", self.rank, Integral, low=1)
        check_param("budget", self.budget, Integral, low=1)
        check_param("reg", self.reg, Real, low=0, closed="neither")
        check_param("step_size", self.step_size, Real, low=0, closed="neither")
        check_param("step_decay", self.step_decay, Real, low=0, high=1)
        if isinstance(self.censor, str):
            check_choice("censor", self.censor, ("auto",))
        else:
            check_param("censor", self.censor, Real, low=0)
        check_param("target_censor_rate", self.target_censor_rate, Real, low=0, high=1, closed="left")
        check_param("forget", self.forget, Real, low=0, high=1, closed="right")
        check_param("batch_size", self.batch_size, Integral, low=1)
        check_param("max_iter", self.max_iter, Integral, low=1)
        check_param("tol", self.tol, Real, low=0)
        check_param("verbose", self.verbose, (Integral, bool), low=0)

    # ------------------------------------------------------------------ state
    def _reset(self, X: Any) -> None:
        self._check_params()
        dev = self._device()
        self._set_fitted_device(dev)
        self._dt = bk.resolve_dtype(self.dtype, dev)
        self.kernel_ = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X)
        self._rs = check_random_state(self.random_state)
        d = X.shape[1]
        online = self.mode != "batch"
        cap = (int(self.budget) + int(self.batch_size)) if self.mode == "budget" else 64
        xp, dt = self._xp, self._dt
        check_allocation((cap * (d + 2 * int(self.rank) + (cap if online else 0) + 4)
                          + 3 * int(self.rank) ** 2) * np.dtype(dt).itemsize,
                         f"OK-FEB's buffers for budget={self.budget}, rank={self.rank}, "
                         f"batch_size={self.batch_size} and {d} features")
        self._S = xp.zeros((cap, d), dtype=dt)
        self._sn = xp.zeros(cap, dtype=dt)
        self._A = xp.zeros((cap, self.rank), dtype=dt)
        self._K = xp.zeros((cap, cap), dtype=dt) if online else None
        # Σ_j |K_S,ij| per stored row (Gershgorin safeguard of the step), kept up to date in O(B)
        self._ra = xp.zeros(cap, dtype=dt)
        # buffer for P = K_S A (host per-sample path writes it in place)
        self._Pbuf = xp.zeros((cap, self.rank), dtype=dt) if online else None
        self._rec = np.zeros(cap)
        self._sidx = np.zeros(cap, dtype=np.int64)
        self._m = 0
        self.n_seen_ = 0
        self.n_updates_ = 0
        self._err_sum = 0.0
        self._n_censored = 0
        self._ema = None
        self._theta = 1.0
        self.censor_threshold_ = 0.0 if self.censor == "auto" else float(self.censor)
        self.objective_history_ = []
        self.n_iter_ = 1
        self.last_errors_ = np.zeros(0)
        self._refresh()

    @property
    def _xp(self):
        dev = self._fitted_device()
        return bk.get_namespace(dev) if dev.is_gpu else np      # (hot: called per sample)

    def _grow(self, need: int) -> None:
        cap = self._S.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        xp = self._xp
        m = self._m
        S = xp.zeros((new, self._S.shape[1]), dtype=self._dt)
        S[:m] = self._S[:m]
        sn = xp.zeros(new, dtype=self._dt)
        sn[:m] = self._sn[:m]
        self._sn = sn
        A = xp.zeros((new, self.rank), dtype=self._dt)
        A[:m] = self._A[:m]
        if self._K is not None:
            K = xp.zeros((new, new), dtype=self._dt)
            K[:m, :m] = self._K[:m, :m]
            self._K = K
        ra = xp.zeros(new, dtype=self._dt)
        ra[:m] = self._ra[:m]
        self._ra = ra
        if self._Pbuf is not None:
            self._Pbuf = xp.zeros((new, self.rank), dtype=self._dt)
        rec = np.zeros(new)
        rec[:m] = self._rec[:m]
        sidx = np.zeros(new, dtype=np.int64)
        sidx[:m] = self._sidx[:m]
        self._S, self._A, self._rec, self._sidx = S, A, rec, sidx

    def _refresh(self, KA: Any = None) -> None:
        """Recompute P = K_SA, C = AᵀP and chol(C + λI) after A changed (O(B²r + Br² + r³))."""
        xp, dt, m, r = self._xp, self._dt, self._m, self.rank
        A = self._A[:m]
        if m == 0:
            P = xp.zeros((0, r), dtype=dt)
        elif KA is not None:
            P = KA
        elif xp is np and self._Pbuf is not None:
            P = np.matmul(self._K[:m, :m], A, out=self._Pbuf[:m])
        else:
            P = self._K[:m, :m] @ A
        C = A.T @ P
        if xp is np:
            C += C.T                  # NumPy buffers the overlapping operand
            C *= 0.5
            # LAPACK directly: the per-sample path calls this once per update
            Mreg = C.copy()
            Mreg.flat[::r + 1] += float(self.reg)
            L, info = _lapack(dt)[0](Mreg, lower=1, clean=1, overwrite_a=1)
            if info != 0:
                raise self._not_positive_definite(C)
        else:
            C = (C + C.T) * 0.5
            try:
                L = linalg.cho_factor(C + float(self.reg) * xp.eye(r, dtype=dt))
            except np.linalg.LinAlgError:
                raise self._not_positive_definite(C) from None
        self._P, self._C, self._L = P, C, L
        # lazily derived matrices (W, C^{1/2}); a dict filled in place so that
        # transform leaves the estimator's attributes unchanged
        self._cache = {}

    def _not_positive_definite(self, C: Any) -> ValueError:
        """Why AᵀK_SA + λI lost positive definiteness, and what to change."""
        where = f"after {getattr(self, 'n_seen_', 0)} samples"
        if not bool(bk.to_host(self._xp.isfinite(C).all())):
            return ValueError(f"OK-FEB diverged {where}: the subspace A became inf/NaN. Reduce "
                              f"step_size (now {self.step_size!r}) or use step_decay > 0"
                              + (f"; kernel values of this size ({self.kernel_.name}, degree="
                                 f"{self.kernel_.degree:g}) also overflow: lower the degree or scale X"
                                 if self.kernel_.name == "poly" else ""))
        if not self.kernel_.is_psd:
            return ValueError(f"OK-FEB failed {where}: kernel={self.kernel_.name!r} is not positive "
                              "semi-definite, so AᵀK_SA + λI (eq. 11) lost positive definiteness. Use "
                              "kernel='rbf', 'poly' or 'linear', or a larger reg (λ, now "
                              f"{self.reg!r}) with the sigmoid kernel")
        m = self._m
        kmax = float(bk.to_host(self._xp.abs(self._K[:m, :m]).max())) if m and self._K is not None else 0.0
        return ValueError(f"OK-FEB failed {where}: AᵀK_SA + λI (eq. 11) is not positive definite in "
                          f"{np.dtype(self._dt).name} (kernel values up to {kmax:.3g}); increase reg "
                          f"(λ, now {self.reg!r}), scale X"
                          + (", lower the polynomial degree" if self.kernel_.name == "poly" else "")
                          + (" or use dtype='float64'" if np.dtype(self._dt) == np.float32 else ""))

    def _map(self, output: str):
        """The map of :meth:`transform` in float64, whatever the working dtype: W = A(C + λI)⁻¹
        (|S| × r, so that q = Wᵀk, eq. 11b) for ``output="features"``, W C^{1/2} for "kernel".

        Why float64: when some of the r directions carry almost no kernel energy, C has
        eigenvalues ≈ 0 and cond(C + λI) ≈ λ_max(C)/λ (3·10⁴ at the default λ = 10⁻³ on the
        test models); W then has entries in the hundreds while the features are O(1), and
        float32 rounding of W and K(X, S) is amplified to errors ~3·10⁻⁴ (measured: a GPU
        float32 fit and its CPU copy disagreed by 2.9·10⁻⁴ on features of size 0.9; issue 13).
        Computed in float64 from the same stored state the amplified error is ~10⁻¹¹, and the
        result is rounded to the working dtype once, at the end of :meth:`_transform`.
        """
        key = f"map_{output}"
        if key not in self._cache:
            xp, m, r = self._xp, self._m, self.rank
            if m == 0:
                M = xp.zeros((0, r), dtype=np.float64)
            else:
                C = self._C.astype(np.float64)
                L = linalg.cho_factor(C + float(self.reg) * xp.eye(r, dtype=np.float64))
                M = linalg.cho_solve(L, self._A[:m].T.astype(np.float64)).T
                if output == "kernel":
                    w, U = linalg.eigh(C)
                    M = M @ ((U * xp.sqrt(xp.maximum(w, 0))[None, :]) @ U.T)
            self._cache[key] = M
        return self._cache[key]

    def _croot(self):
        """C^{1/2} (symmetric), for output="kernel" (eigenvalues clipped at 0)."""
        if "root" not in self._cache:
            w, U = linalg.eigh(self._C)
            xp = self._xp
            self._cache["root"] = (U * xp.sqrt(xp.maximum(w, 0))[None, :]) @ U.T
        return self._cache["root"]

    # ------------------------------------------------------------------ attributes
    @property
    def stored_vectors_(self):
        check_is_fitted(self, "n_seen_")
        return self._S[:self._m]

    @property
    def support_(self) -> np.ndarray:
        check_is_fitted(self, "n_seen_")
        return np.array(bk.to_host(self._sidx[:self._m]), dtype=np.int64)

    @property
    def A_(self):
        check_is_fitted(self, "n_seen_")
        return self._A[:self._m]

    @property
    def stored_gram_(self):
        check_is_fitted(self, "n_seen_")
        if self._K is None:
            raise AttributeError("mode='batch' does not store K_S (it is never formed)")
        return self._K[:self._m, :self._m]

    @property
    def recency_(self) -> np.ndarray:
        check_is_fitted(self, "n_seen_")
        return np.array(bk.to_host(self._rec[:self._m]), dtype=np.float64)

    @property
    def ls_error_(self) -> float:
        check_is_fitted(self, "n_seen_")
        return self._err_sum / max(self.n_seen_, 1)

    @property
    def censor_rate_(self) -> float:
        check_is_fitted(self, "n_seen_")
        return self._n_censored / max(self.n_seen_, 1)

    @property
    def budget_use_(self) -> float:
        check_is_fitted(self, "n_seen_")
        return self._m / float(self.budget)

    @property
    def n_stored_(self) -> int:
        check_is_fitted(self, "n_seen_")
        return int(self._m)

    # ------------------------------------------------------------------ features
    def _kblock(self, Xc: Any, lo: int = 0, hi: int | None = None) -> Any:
        """K(Xc, S[lo:hi]); a lean NumPy path for the small per-sample blocks."""
        hi = self._m if hi is None else hi
        if self._xp is not np:
            return kernel_block(Xc, self._S[lo:hi], self.kernel_, dtype=self._dt)
        G = Xc @ self._S[lo:hi].T
        if self.kernel_.name == "rbf":
            return _epilogue_host(G, np.einsum("ij,ij->i", Xc, Xc), self._sn[lo:hi], self.kernel_)
        return _epilogue_host(G, None, None, self.kernel_)

    def _kdiag(self, Xc: Any) -> Any:
        if self.kernel_.name == "rbf":
            return self._xp.ones(Xc.shape[0], dtype=self._dt)
        return kernel_diag(Xc, self.kernel_, dtype=self._dt)

    def _features(self, Xc: Any) -> tuple[Any, Any, Any]:
        """Features q, fitting errors e and K(Xc, S) of rows ``Xc`` under the current state."""
        xp, m = self._xp, self._m
        if m == 0:
            return xp.zeros((Xc.shape[0], self.rank), dtype=self._dt), self._kdiag(Xc), None
        kd = 1.0 if self.kernel_.name == "rbf" else self._kdiag(Xc)
        Kc = self._kblock(Xc)
        U = Kc @ self._A[:m]                                        # Aᵀk per row
        if xp is np:
            Qt, info = _lapack(self._dt)[1](self._L, U.T, lower=1)   # eq. (11b)
            if info != 0:
                raise self._not_positive_definite(self._C)
            Q = Qt.T
        else:
            Q = linalg.cho_solve(self._L, U.T).T                     # eq. (11b)
        # e = κ − 2qᵀu + qᵀCq with u = (C + λI)q, so Cq = u − λq and
        # e = κ − qᵀu − λ‖q‖²                                              (eq. 6b)
        e = kd - xp.einsum("ij,ij->i", Q, U + float(self.reg) * Q)
        return Q, xp.maximum(e, 0), Kc

    # ------------------------------------------------------------------ updates
    def _step(self, t: int) -> float:
        return float(self.step_size) / (t ** float(self.step_decay))

    def _add(self, Xn: Any, Kn: Any, Q: Any, kdn: Any, idx: list[int], t: int, init: bool) -> None:
        """Add rows Xn (s × d) to S and update A (eq. 16 / eq. 19), then maintain the budget.

        ``Kn`` = K(Xn, S) (s × |S|), ``Q`` their features, ``kdn`` their κ(x, x).
        """
        xp, dt = self._xp, self._dt
        s = Xn.shape[0]
        m = self._m
        self._grow(m + s)
        r = self.rank
        A = self._A
        self._S[m:m + s] = Xn
        if self.kernel_.name == "rbf":
            self._sn[m:m + s] = xp.einsum("ij,ij->i", Xn, Xn)
        if s == 1:
            Knn = (self._kdiag(Xn) if kdn is None else kdn).reshape(1, 1)
        else:
            Knn = self._kblock(Xn, m, m + s)
        # running row sums of |K_t|, K_t = [[K_S, K_nSᵀ], [K_nS, K_nn]] (O(|S| s))
        if m:
            aKn = xp.abs(Kn)
            self._ra[:m] += aKn.sum(axis=0)
            self._ra[m:m + s] = aKn.sum(axis=1) + xp.abs(Knn).sum(axis=1)
        else:
            self._ra[m:m + s] = xp.abs(Knn).sum(axis=1)
        if init:
            A[m:m + s] = xp.asarray(self._rs.normal(0.0, 1.0 / math.sqrt(r), size=(s, r)), dtype=dt)
        else:
            mu = self._step(t)
            lam_t = float(self.reg) / t
            if self.mode == "parametric":                              # eq. (16)
                A[:m] -= mu * ((s * lam_t) * A[:m] + (A[:m] @ Q.T) @ Q)
                A[m:m + s] = mu * Q
            else:                                                      # eq. (19), Alg. 3/4
                # the nonparametric step is SGD with the matrix step μK_t (§IV-C); it is
                # stable only for μ·λ_max(K_t)·‖q‖² small, so (NLMS-like safeguard) μ is
                # divided by max(1, g·‖Q‖²_F) with g = max_i Σ_j |K_t,ij| ≥ λ_max(K_t)
                # (applied to the existing rows; the new rows take the plain step μₜ)
                g = max(float(self._ra[:m + s].max()), 1e-12)        # ≥ λ_max(K_t) (Gershgorin)
                mu_old = mu / max(1.0, g * float(xp.sum(Q * Q)))
                # K_tĀ = [P; K_nS A];  K_tG = K_tĀ(QᵀQ + sλ/t I) − K_t[:, new] Q     (O(|S| r s))
                Pn = Kn @ A[:m] if m else xp.zeros((s, r), dtype=dt)
                grad_new = (Pn @ Q.T) @ Q + (s * lam_t) * Pn - Knn @ Q
                if m:
                    A[:m] -= mu_old * ((self._P @ Q.T) @ Q + (s * lam_t) * self._P - Kn.T @ Q)
                A[m:m + s] = -mu * grad_new
        K = self._K
        if m:
            K[m:m + s, :m] = Kn
            K[:m, m:m + s] = Kn.T
        K[m:m + s, m:m + s] = Knn
        self._rec[:m] *= float(self.forget) ** s
        self._rec[m:m + s] = 1.0
        self._sidx[m:m + s] = idx
        self._m = m + s
        if self.mode == "budget" and self._m > self.budget:
            self._maintain_budget()
        self._refresh()

    def _add_one_host(self, x: np.ndarray, k: np.ndarray, q: np.ndarray, u: np.ndarray,
                      kappa: float, idx: int, t: int) -> None:
        """The per-sample nonparametric step (eq. 19, Alg. 3/4) on the host, in place.

        Same arithmetic as :meth:`_add` with s = 1 (which stays the reference and
        the device path), written for a small per-sample cost: the update of the
        old rows is one scaled add and one rank-one update,

            A[:m] ← A[:m] − μ'(λ/t) P + μ'(k − Pq) qᵀ,    P = K_S A,
            a_new = −μₜ((uᵀq − κ) q + (λ/t) u),            u = Aᵀk,

        with BLAS axpy/ger on the preallocated buffers; the Gershgorin bound of
        λ_max(K_t) comes from the running row sums ``_ra``.  Then the budget is
        maintained and P = K_S A (the one O(B²r) product), C = AᵀP and the
        Cholesky factor of C + λI are recomputed (:meth:`_refresh`).
        """
        m = self._m
        self._grow(m + 1)
        A, K, ra = self._A, self._K, self._ra
        ger, axpy = _blas(self._dt)
        mu = self._step(t)
        lam_t = float(self.reg) / t
        P = self._P
        absk = np.abs(k)
        sk = float(absk.sum()) + abs(kappa)
        if m:
            ra[:m] += absk
            g = max(float(ra[:m].max()), sk, 1e-12)
        else:
            g = max(sk, 1e-12)
        mu_old = mu / max(1.0, g * float(q.dot(q)))
        a_new = q * (-mu * (float(u.dot(q)) - kappa))          # −μ (uᵀq − κ) q
        if lam_t:
            a_new -= (mu * lam_t) * u                         # −μ (λ/t) u
        if m:
            w = k - P @ q
            Am = A[:m]
            if lam_t:
                axpy(P.ravel(), Am.ravel(), a=-mu_old * lam_t)
            ger(mu_old, q, w, a=Am.T, overwrite_a=1)
        A[m] = a_new
        self._S[m] = x
        if self.kernel_.name == "rbf":
            self._sn[m] = x.dot(x)
        if m:
            K[m, :m] = k
            K[:m, m] = k
        K[m, m] = kappa
        ra[m] = sk
        rec = self._rec
        rec[:m] *= float(self.forget)
        rec[m] = 1.0
        self._sidx[m] = idx
        self._m = m + 1
        if self.mode == "budget" and self._m > self.budget:
            self._maintain_budget()
        self._refresh()

    def _maintain_budget(self) -> None:
        """Alg. 5, eq. (25)–(26): drop the rows with the smallest rᵢ‖aᵢ‖₂ until |S| = B."""
        m, B = self._m, int(self.budget)
        A = self._A[:m]
        norms = bk.to_host(self._xp.sqrt(self._xp.einsum("ij,ij->i", A, A)))
        score = bk.to_host(self._rec[:m]) * norms
        n_drop = m - B
        if n_drop == 1:
            self._remove(np.array([int(np.argmin(score))]))
        else:
            self._remove(np.argsort(score, kind="stable")[:n_drop])

    def _remove(self, drop: np.ndarray) -> None:
        m = self._m
        xp = self._xp
        if len(drop) == 1:
            i, j = int(drop[0]), m - 1                    # move the last row into slot i: O(B)
            self._ra[:m] -= xp.abs(self._K[:m, i])
            if i != j:
                self._S[i] = self._S[j]
                self._sn[i] = self._sn[j]
                self._A[i] = self._A[j]
                self._K[i, :m] = self._K[j, :m]
                self._K[:m, i] = self._K[:m, j]
                self._K[i, i] = self._K[j, j]
                self._ra[i] = self._ra[j]
                self._rec[i] = self._rec[j]
                self._sidx[i] = self._sidx[j]
            self._m = m - 1
            return
        keep = np.ones(m, dtype=bool)
        keep[drop] = False
        keep = np.flatnonzero(keep)
        kd = xp.asarray(keep)
        nk = len(keep)
        self._ra[:m] -= xp.abs(self._K[:m, :m][:, xp.asarray(drop)]).sum(axis=1)
        self._ra[:nk] = self._ra[kd]
        self._S[:nk] = self._S[kd]
        self._sn[:nk] = self._sn[kd]
        self._A[:nk] = self._A[kd]
        self._K[:nk, :nk] = self._K[:m, :m][kd][:, kd]
        self._rec[:nk] = self._rec[keep]
        self._sidx[:nk] = self._sidx[keep]
        self._m = nk

    def _threshold(self, e: float) -> tuple[float, bool]:
        """ε for the next sample and whether e is censored; advances the censor state."""
        if self.mode != "budget":
            return -math.inf, False
        if self.censor != "auto":
            eps = float(self.censor)
            return eps, e <= eps
        ema = self._ema
        if self._m < self.budget or ema is None:
            eps = 0.0
            self._ema = e if ema is None else (1 - _EMA_WEIGHT) * ema + _EMA_WEIGHT * e
            return eps, e <= eps
        eps = self._theta * ema
        cens = e <= eps
        rho = float(self.target_censor_rate)
        self._theta *= math.exp(_THETA_RATE * ((0.0 if cens else 1.0) - (1.0 - rho)))
        self._ema = (1 - _EMA_WEIGHT) * ema + _EMA_WEIGHT * e
        return eps, cens

    def _censor_scan(self, e: np.ndarray) -> tuple[int, float]:
        """Apply the censoring rule to the errors ``e`` (host, in stream order) up to the first
        non-censored row.

        Returns ``(j, ε)``: j the index of the first row that is not censored (−1 if
        all are) and ε the threshold met by the last row examined.  The censor
        state (count, ē, θ) advances over rows 0..j exactly as :meth:`_threshold`
        would row by row: while rows are censored θ shrinks by a fixed factor and
        ē is a linear recursion, so the whole run is evaluated at once.
        """
        L = e.shape[0]
        if self.mode != "budget":
            return (0 if L else -1), -math.inf
        if self.censor != "auto":
            eps = float(self.censor)
            hit = np.flatnonzero(e > eps)
            j = int(hit[0]) if hit.size else -1
            self._n_censored += j if j >= 0 else L
            return j, eps
        if self._ema is None or self._m < self.budget or L <= 32:
            # row by row (short runs: cheaper than the vectorized form below)
            eps = 0.0
            for j, ev in enumerate(e.tolist()):
                eps, cens = self._threshold(ev)
                if not cens:
                    return j, eps
                self._n_censored += 1
            return -1, eps
        w, eta, rho = _EMA_WEIGHT, _THETA_RATE, float(self.target_censor_rate)
        f = math.exp(-eta * (1.0 - rho))                  # θ's factor on a censored row
        theta = self._theta * f ** np.arange(L)
        ema0 = self._ema
        # ē after row j: a^{j+1}(ē₀ + w Σ_{i≤j} a^{−(i+1)} eᵢ), a = 1 − w  (L ≤ _MAX_CHUNK keeps
        # a^{−L} ≤ 1e9, so the scaled partial sums lose nothing)
        a = 1.0 - w
        apow = a ** np.arange(1, L + 1)
        ema_after = np.cumsum(e / apow)
        ema_after *= w
        ema_after += ema0
        ema_after *= apow
        ema_before = np.empty(L)
        ema_before[0] = ema0
        ema_before[1:] = ema_after[:-1]
        eps_all = theta * ema_before
        hit = np.flatnonzero(e > eps_all)
        if hit.size == 0:
            self._n_censored += L
            self._theta = float(theta[-1]) * f
            self._ema = float(ema_after[-1])
            return -1, float(eps_all[-1])
        j = int(hit[0])
        self._n_censored += j
        self._theta = float(theta[j]) * math.exp(eta * rho)
        self._ema = float(ema_after[j])
        return j, float(eps_all[j])

    def _run(self, X: Any, keep_features: bool) -> Any:
        """Stream the rows of X through the online algorithm; prequential features/errors."""
        # per-sample products are tiny (B × r): a multi-threaded BLAS only adds sync cost
        with one_blas_thread(self._xp is np):
            return self._run_stream(X, keep_features)

    def _run_stream(self, X: Any, keep_features: bool) -> Any:
        xp = self._xp
        n = X.shape[0]
        init_size = min(int(self.rank), int(self.budget)) if self.mode == "budget" else int(self.rank)
        b = int(self.batch_size)
        # the lean in-place per-sample step (host, s = 1, nonparametric rule); _add is the
        # general path (device, mini-batches, parametric rule) and the reference for it
        fast = xp is np and b == 1 and self.mode in ("budget", "nonparametric") and self._fast_host
        Qout = xp.empty((n, self.rank), dtype=self._dt) if keep_features else None
        # prequential z = C^{1/2}q with the C of the state each row met (one eigh per update)
        kernel_out = keep_features and self.output == "kernel"
        errs = np.empty(n)
        pos = 0
        bar = progress(total=n, desc="OK-FEB", verbose=self.verbose) if self.verbose else None
        while pos < n:
            if self._m < init_size:                       # random full-rank start
                Q, e, Kc = self._features(X[pos:pos + 1])
                ev = float(e[0])
                if keep_features:
                    Qout[pos] = Q[0] @ self._croot() if kernel_out else Q[0]
                errs[pos] = ev
                self.n_seen_ += 1
                self._err_sum += ev
                self.n_updates_ += 1
                self._threshold(ev)
                self._add(X[pos:pos + 1], Kc, Q, None, [self.n_seen_ - 1], self.n_seen_, init=True)
                pos += 1
                continue
            if fast:
                pos = self._stream_host(X, pos, Qout, errs, bar)
                break
            rate = self._n_censored / max(self.n_seen_, 1)
            c = int(min(max(b * 2.0 / max(1.0 - rate, 1e-3), _MIN_CHUNK), _MAX_CHUNK))
            stop = min(pos + c, n)
            Q, e, Kc = self._features(X[pos:stop])
            eh = np.asarray(bk.to_host(e), dtype=np.float64)
            chosen: list[int] = []
            used = 0
            while used < eh.shape[0] and len(chosen) < b:
                j, eps = self._censor_scan(eh[used:])
                if j < 0:
                    used = eh.shape[0]
                    break
                chosen.append(used + j)
                used += j + 1
            errs[pos:pos + used] = eh[:used]
            self._err_sum += float(eh[:used].sum())
            self.n_seen_ += used
            self.censor_threshold_ = eps if self.mode == "budget" else 0.0
            if keep_features:
                Qout[pos:pos + used] = Q[:used] @ self._croot() if kernel_out else Q[:used]
            if chosen:
                self.n_updates_ += len(chosen)
                sel = xp.asarray(chosen) if len(chosen) > 1 else slice(chosen[0], chosen[0] + 1)
                self._add(X[pos:stop][sel], Kc[sel], Q[sel], None,
                          [self.n_seen_ - used + jj for jj in chosen], self.n_seen_, init=False)
            pos += used
            if bar is not None:
                bar.update(used)
        if bar is not None:
            bar.close()
        self.last_errors_ = errs
        return Qout

    def _stream_host(self, X: np.ndarray, pos: int, Qout: Any, errs: np.ndarray, bar: Any) -> int:
        """The per-sample loop of :meth:`_run_stream` on the host (s = 1, nonparametric rule).

        Same steps in the same order as the general loop — a chunk of upcoming
        rows gets its features and errors from one kernel block and one GEMM
        (eq. 11b, 6b), the rows are walked up to the first non-censored one, and
        that row updates the state (:meth:`_add_one_host`) — with the per-chunk
        work written against NumPy/LAPACK directly.
        """
        n = X.shape[0]
        reg = float(self.reg)
        rbf = self.kernel_.name == "rbf"
        kern = self.kernel_
        kernel_out = Qout is not None and self.output == "kernel"
        potrs = _lapack(self._dt)[1]
        xn_all = np.einsum("ij,ij->i", X, X) if rbf else None
        scan = self._censor_scan
        budget_mode = self.mode == "budget"
        while pos < n:
            m = self._m
            rate = self._n_censored / max(self.n_seen_, 1)
            c = int(min(max(2.0 / max(1.0 - rate, 1e-3), _MIN_CHUNK), _MAX_CHUNK))
            stop = min(pos + c, n)
            Xc = X[pos:stop]
            Kc = Xc @ self._S[:m].T                                           # K(X_chunk, S)
            if rbf:
                Kc = _epilogue_host(Kc, xn_all[pos:stop], self._sn[:m], kern)
                kd = 1.0
            else:
                Kc = _epilogue_host(Kc, None, None, kern)
                kd = kernel_diag(Xc, kern, dtype=self._dt)
            U = Kc @ self._A[:m]                                              # Aᵀk per row
            Qt, info = potrs(self._L, U.T, lower=1)                           # eq. (11b)
            if info != 0:
                raise self._not_positive_definite(self._C)
            Q = Qt.T
            e = np.einsum("ij,ij->i", Q, U)                                    # eq. (6b):
            e += reg * np.einsum("ij,ij->i", Q, Q)                             # e = κ − qᵀu − λ‖q‖²
            np.subtract(kd, e, out=e)
            np.maximum(e, 0.0, out=e)
            chosen, eps = scan(e)
            used = chosen + 1 if chosen >= 0 else e.shape[0]
            errs[pos:pos + used] = e[:used]
            self._err_sum += float(e[:used].sum())
            self.n_seen_ += used
            self.censor_threshold_ = eps if budget_mode else 0.0
            if Qout is not None:
                Qout[pos:pos + used] = Q[:used] @ self._croot() if kernel_out else Q[:used]
            if chosen >= 0:
                self.n_updates_ += 1
                kappa = 1.0 if rbf else float(kd[chosen])
                self._add_one_host(X[pos + chosen], Kc[chosen], Q[chosen], U[chosen], kappa,
                                   self.n_seen_ - used + chosen, self.n_seen_ - used + chosen + 1)
            pos += used
            if bar is not None:
                bar.update(used)
        return pos

    # ------------------------------------------------------------------ batch (Alg. 1)
    def _fit_batch(self, X: Any) -> None:
        xp, dt, r = self._xp, self._dt, self.rank
        n = X.shape[0]
        lam = float(self.reg)
        self._grow(n)
        self._S[:n] = X
        self._sn[:n] = xp.einsum("ij,ij->i", X, X)
        self._m = n
        A = xp.asarray(self._rs.normal(0.0, 1.0 / math.sqrt(r), size=(n, r)), dtype=dt)
        kd = kernel_diag(X, self.kernel_, dtype=dt)
        ksum = float(xp.sum(kd))
        eye = xp.eye(r, dtype=dt)
        hist = []
        for _ in progress(range(int(self.max_iter)), desc="Alg. 1", verbose=self.verbose):
            KA = kernel_matvec(X, X, A, self.kernel_, dtype=dt)          # K·A, no n×n block
            C = A.T @ KA
            C = (C + C.T) * 0.5
            Q = linalg.solve_spd(C + lam * eye, KA.T).T                  # eq. (7)
            hist.append(batch_objective(ksum, A, KA, Q, lam, n))
            A = linalg.solve_spd(Q.T @ Q + lam * eye, Q.T).T            # eq. (9)
            if len(hist) > 1 and hist[-2] - hist[-1] <= self.tol * abs(hist[-2]):
                break
        self._A[:n] = A
        self.objective_history_ = hist
        self.n_iter_ = len(hist)
        KA = kernel_matvec(X, X, A, self.kernel_, dtype=dt)
        self._refresh(KA=KA)
        # errors of the fitted model on its training rows: κ − qᵀCq − 2λ‖q‖²
        Q = linalg.cho_solve(self._L, KA.T).T
        e = kd - xp.einsum("ij,ij->i", Q @ self._C, Q) - 2.0 * lam * xp.einsum("ij,ij->i", Q, Q)
        self.last_errors_ = np.maximum(bk.to_host(e), 0.0)
        self.n_seen_ = n
        self.n_updates_ = n
        self._err_sum = float(self.last_errors_.sum())
        self._sidx[:n] = np.arange(n)
        self._rec[:n] = 1.0

    # ------------------------------------------------------------------ public API
    def _validate(self, X: Any, reset: bool) -> tuple[Any, str]:
        X, kind = validate_X(self, X, reset=reset)
        return X, kind

    def _to_dev(self, X: Any) -> Any:
        return bk.to_device(_dense(X, self._dt), self._fitted_device(), self._dt)

    def fit(self, X: Any, y: Any = None) -> "OKFEB":
        """Reset, then run one pass of the chosen algorithm over the rows of X."""
        X, _ = self._validate(X, reset=True)
        self._reset(X)
        Xd = self._to_dev(X)
        if self.mode == "batch":
            self._fit_batch(Xd)
        else:
            self._run(Xd, keep_features=False)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> "OKFEB":
        """Process the rows of X as the next part of the stream (online modes)."""
        self.partial_fit_transform(X)
        return self

    def partial_fit_transform(self, X: Any) -> Any:
        """Process rows as the next part of the stream and return their prequential features.

        Each row's features are those extracted on arrival (before the update it
        may cause) — what a learner trained in the same pass sees.  Returns q
        (``output="features"``), or with ``output="kernel"`` the z = C^{1/2}q at
        arrival, C = AᵀK_SA of the state the row met (this costs one r × r
        eigendecomposition per update; features from different states are only
        approximately comparable, since A keeps moving).
        """
        if self.mode == "batch":
            raise ValueError("mode='batch' (Alg. 1) is offline: use fit, or an online mode for partial_fit")
        first = not hasattr(self, "n_seen_")
        X, kind = self._validate(X, reset=first)
        if first:
            self._reset(X)
        Xd = self._to_dev(X)
        Q = self._run(Xd, keep_features=True)
        return bk.as_kind(Q, kind)

    def transform(self, X: Any) -> Any:
        """Features of X under the current model: q (eq. 11) or z = C^{1/2}q.

        Batched over rows: one kernel block against S and one product with
        W = A(AᵀK_SA + λI)⁻¹ per row block, on the fit device.
        """
        check_is_fitted(self, "n_seen_")
        X, kind = self._validate(X, reset=False)
        return bk.as_kind(self._transform(self._to_dev(X)), kind)

    def _transform(self, Xd: Any) -> Any:
        """:meth:`transform` of rows already validated and on the fit device."""
        Q = kernel_matvec(Xd, self._S[:self._m], self._map(self.output), self.kernel_, dtype=np.float64)
        return Q.astype(self._dt, copy=False)

    def fitting_error(self, X: Any) -> np.ndarray:
        """LS fitting error eₙ = ‖φ(xₙ) − ΦAqₙ‖² of rows under the current model (host array)."""
        check_is_fitted(self, "n_seen_")
        X, _ = self._validate(X, reset=False)
        Xd = self._to_dev(X)
        out = np.empty(X.shape[0])
        step = bk.plan_rows(X.shape[0], (self._m + self.rank + X.shape[1]) * 8 * 3, self._fitted_device())

        def run(s: int, e: int) -> None:
            _, err, _ = self._features(Xd[s:e])
            out[s:e] = bk.to_host(err)

        bk.map_row_blocks(run, X.shape[0], step, what="OKFEB.fitting_error")
        return out

    def kernel_approximation_error(self, X: Any, window: int = 500) -> float:
        """Mean over windows of ‖K − ZZᵀ‖_F/‖K‖_F with z = C^{1/2}q of the current model."""
        check_is_fitted(self, "n_seen_")
        X, _ = self._validate(X, reset=False)
        Xd = self._to_dev(X)
        Z = kernel_matvec(Xd, self._S[:self._m], self._map("kernel"), self.kernel_, dtype=np.float64)
        return windowed_kernel_error(Xd, Z, self.kernel_, window)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        check_is_fitted(self, "n_seen_")
        return np.asarray([f"okfeb{i}" for i in range(self.rank)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _dense(X: Any, dt: Any) -> Any:
    """OK-FEB stores and streams dense rows: SciPy/CuPy sparse input is densified (size checked)."""
    if not bk.is_sparse(X):
        return X
    check_allocation(X.shape[0] * X.shape[1] * np.dtype(dt).itemsize,
                     f"densifying the sparse {X.shape[0]} x {X.shape[1]} input for OK-FEB")
    return X.toarray()


# =========================================================================== learners
_FE_PARAMS = ("kernel", "gamma", "degree", "coef0", "rank", "budget", "reg", "step_size",
              "step_decay", "censor", "target_censor_rate", "forget", "mode", "batch_size",
              "device", "dtype", "random_state")


class _OKFEBLearner(DeviceMixin, BaseEstimator):
    """Shared machinery: an OK-FEB extractor and an online linear learner in one pass."""

    def _extractor(self) -> OKFEB:
        params = {k: getattr(self, k) for k in _FE_PARAMS}
        if params["mode"] == "batch":
            raise ValueError("the online learners need an online mode ('budget', 'parametric', "
                             "'nonparametric'), got mode='batch'")
        return OKFEB(output="features", verbose=0, **params)

    def _check_common(self) -> None:
        check_param("n_epochs", self.n_epochs, Integral, low=1)
        check_param("alpha", self.alpha, Real, low=0, closed="neither")

    def _check_learner_size(self, n_outputs: int) -> None:
        """The learner's weights are (rank + 1) × outputs: refuse an absurd rank before allocating."""
        check_param("rank", self.rank, Integral, low=1)
        check_allocation((int(self.rank) + 1) * n_outputs * 8,
                         f"the online learner's weights for rank={self.rank}")

    def _stream(self, X: Any, y_rows: np.ndarray, first: bool) -> None:
        Q = self.extractor_.partial_fit_transform(X)
        self._learner_step(Q, y_rows)
        self.n_features_in_ = self.extractor_.n_features_in_

    def _epochs(self, X: Any, y_rows: np.ndarray) -> None:
        rs = check_random_state(self.random_state)
        n = X.shape[0]
        for ep in range(int(self.n_epochs)):
            order = np.arange(n) if ep == 0 else rs.permutation(n)
            Xe = X if ep == 0 else X[order]
            self._stream(Xe, y_rows[order], first=(ep == 0))

    def _features(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        X, _ = validate_X(self, X, reset=False)     # checked once, here
        fe = self.extractor_
        return bk.to_host(fe._transform(fe._to_dev(X)))

    @property
    def n_seen_(self) -> int:
        check_is_fitted(self, "extractor_")
        return self.extractor_.n_seen_


class OKFEBClassifier(ClassifierMixin, _OKFEBLearner):
    """Pegasos on OK-FEB features, trained in the same pass as the extractor.

    Each row's features are extracted on arrival (before the extractor's update)
    and fed to Pegasos (one-vs-rest for more than two classes).  Parameters are
    those of :class:`OKFEB` plus:

    Parameters
    ----------
    alpha : float, default=1e-4
        Pegasos λ.
    fit_intercept : bool, default=True
        Constant feature (regularized).
    n_epochs : int, default=1
        Passes of ``fit`` over the data (the first in order, later ones
        shuffled); 1 is the online setting.

    Attributes
    ----------
    extractor_ : OKFEB
    classes_ : array of labels
    coef_ : (n_outputs, r) host array, intercept_ : (n_outputs,)
    n_features_in_ : int

    Examples
    --------
    >>> from gpuksvm import OKFEBClassifier
    >>> from gpuksvm.datasets import make_two_spheres
    >>> X, y = make_two_spheres(3000, noise=0.1, random_state=0)
    >>> clf = OKFEBClassifier(gamma=1.0, rank=10, budget=30, device="cpu", random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    def __init__(self, kernel: str = "rbf", gamma: Any = "scale", degree: float = 3,
                 coef0: float = 1.0, rank: int = 50, budget: int = 150, reg: float = 1e-3,
                 step_size: float = 0.5, step_decay: float = 0.0, censor: Any = "auto",
                 target_censor_rate: float = 0.8, forget: float = 1.0, mode: str = "budget",
                 batch_size: int = 1, alpha: float = 1e-4, fit_intercept: bool = True,
                 n_epochs: int = 1, device: str = "auto", dtype: Any = None,
                 random_state: Any = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank = rank
        self.budget = budget
        self.reg = reg
        self.step_size = step_size
        self.step_decay = step_decay
        self.censor = censor
        self.target_censor_rate = target_censor_rate
        self.forget = forget
        self.mode = mode
        self.batch_size = batch_size
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.n_epochs = n_epochs
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _targets(self, y: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(self.classes_, y)
        if np.any(idx >= len(self.classes_)) or np.any(self.classes_[np.minimum(idx, len(self.classes_) - 1)] != y):
            raise ValueError("y contains labels not in classes_ (pass all labels as `classes` "
                             "to the first partial_fit)")
        return ovr_targets(idx, len(self.classes_))[0]

    def _start(self, classes: np.ndarray) -> None:
        self._check_common()
        self.classes_ = np.asarray(classes)
        self.extractor_ = self._extractor()
        n_out = 1 if len(self.classes_) == 2 else len(self.classes_)
        self._check_learner_size(n_out)
        self._learner = Pegasos(int(self.rank), n_out, lam=float(self.alpha),
                                fit_intercept=bool(self.fit_intercept))

    def _learner_step(self, Q: Any, Y: np.ndarray) -> None:
        self._learner.partial_fit(Q, Y)

    def fit(self, X: Any, y: Any) -> "OKFEBClassifier":
        X, y, _ = validate_X_y(self, X, y)
        classes, _ = encode_classes(y)
        self._start(classes)
        self._epochs(X, self._targets(y))
        return self

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> "OKFEBClassifier":
        """Update extractor and Pegasos with the next rows (``classes`` needed on the first call
        unless every label occurs in it)."""
        first = not hasattr(self, "extractor_")
        if first:
            X, y, _ = validate_X_y(self, X, y)
            classes, _ = encode_classes(y if classes is None else np.asarray(classes))
            self._start(classes)
        else:
            X, kind = validate_X(self, X, reset=False)
            y = np.ravel(bk.to_host(y))
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        self._stream(X, self._targets(np.asarray(y)), first)
        return self

    @property
    def coef_(self) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        w = self._learner.coef
        return (w[:-1] if self.fit_intercept else w).T

    @property
    def intercept_(self) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        w = self._learner.coef
        return w[-1] if self.fit_intercept else np.zeros(w.shape[1])

    def decision_function(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        D = self._learner.decision_function(self._features(X))
        return D[:, 0] if D.shape[1] == 1 else D

    def predict(self, X: Any) -> np.ndarray:
        D = self.decision_function(X)
        if D.ndim == 1:
            return self.classes_[(D > 0).astype(np.int64)]
        return self.classes_[np.argmax(D, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # one online pass over a few hundred rows: scikit-learn's fixed accuracy bar does not apply
        tags.classifier_tags.poor_score = True
        return tags


class OKFEBRegressor(RegressorMixin, _OKFEBLearner):
    """Regularized (leaky, normalized) LMS on OK-FEB features, trained in the same pass.

    Parameters are those of :class:`OKFEB` plus:

    Parameters
    ----------
    learning_rate : float, default=0.1
        Normalized LMS step μ (0 < μ < 2).
    alpha : float, default=1e-4
        Leak / ℓ2 regularization of the LMS weights.
    normalized : bool, default=True
    n_epochs : int, default=1

    Attributes
    ----------
    extractor_ : OKFEB
    coef_ : (r,) host array, intercept_ : float
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import OKFEBRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(4000, 2)); y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    >>> reg = OKFEBRegressor(gamma=0.5, rank=20, budget=60, learning_rate=0.2, device="cpu",
    ...                      random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.8
    True
    """

    def __init__(self, kernel: str = "rbf", gamma: Any = "scale", degree: float = 3,
                 coef0: float = 1.0, rank: int = 50, budget: int = 150, reg: float = 1e-3,
                 step_size: float = 0.5, step_decay: float = 0.0, censor: Any = "auto",
                 target_censor_rate: float = 0.8, forget: float = 1.0, mode: str = "budget",
                 batch_size: int = 1, learning_rate: float = 0.1, alpha: float = 1e-4,
                 normalized: bool = True, n_epochs: int = 1, device: str = "auto",
                 dtype: Any = None, random_state: Any = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank = rank
        self.budget = budget
        self.reg = reg
        self.step_size = step_size
        self.step_decay = step_decay
        self.censor = censor
        self.target_censor_rate = target_censor_rate
        self.forget = forget
        self.mode = mode
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.normalized = normalized
        self.n_epochs = n_epochs
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _check_common(self) -> None:
        check_param("n_epochs", self.n_epochs, Integral, low=1)
        check_param("alpha", self.alpha, Real, low=0)
        if self.normalized:   # normalized LMS converges for 0 < μ < 2 only
            check_param("learning_rate", self.learning_rate, Real, low=0, high=2, closed="neither")
        else:
            check_param("learning_rate", self.learning_rate, Real, low=0, closed="neither")

    def _start(self) -> None:
        self._check_common()
        self.extractor_ = self._extractor()
        self._check_learner_size(1)
        self._learner = RegularizedLMS(int(self.rank), step=float(self.learning_rate),
                                       alpha=float(self.alpha), normalized=bool(self.normalized))

    def _learner_step(self, Q: Any, y: np.ndarray) -> None:
        self._learner.partial_fit(Q, y)
        if not np.isfinite(self._learner.w).all():   # a diverged model predicts NaN: refuse it
            raise ValueError(f"OKFEBRegressor diverged: the LMS weights became inf/NaN within "
                             f"{self._learner.t} samples. Reduce learning_rate (now "
                             f"{self.learning_rate!r}"
                             + ("; the normalized LMS needs 0 < learning_rate < 2" if self.normalized
                                else "; or use normalized=True") + ") or scale y")

    def fit(self, X: Any, y: Any) -> "OKFEBRegressor":
        X, y, _ = validate_X_y(self, X, y, y_numeric=True)
        self._start()
        self._epochs(X, np.asarray(y, dtype=np.float64))
        return self

    def partial_fit(self, X: Any, y: Any) -> "OKFEBRegressor":
        first = not hasattr(self, "extractor_")
        if first:
            X, y, _ = validate_X_y(self, X, y, y_numeric=True)
            self._start()
        else:
            X, _ = validate_X(self, X, reset=False)
            y = np.ravel(bk.to_host(y)).astype(np.float64)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
        self._stream(X, np.asarray(y, dtype=np.float64), first)
        return self

    @property
    def coef_(self) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        return self._learner.w[:-1].copy()

    @property
    def intercept_(self) -> float:
        check_is_fitted(self, "extractor_")
        return float(self._learner.w[-1])

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        return self._learner.predict(self._features(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.regressor_tags.poor_score = True
        return tags
