"""OK-FEB's streaming pass: censoring, the per-row updates and the host fast path (SPEC §4).

:class:`SubspaceParams` holds the parameters of every call (the estimator's,
frozen).  The methods of :class:`SubspaceStream` are the online half of
:class:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace` (which inherits them): the
censoring threshold (``censor="auto"``: a moving average ē and a multiplicative
threshold adaptation), the scan that finds the next uncensored row of a chunk,
the chunked pass over a stream (device) and its one-row-at-a-time host twin
(LAPACK/BLAS calls on the r × r factor, no NumPy temporaries).  The state they
update and the equations are described in :mod:`gpuksvm.solvers.okfeb.subspace`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import blas as _sla_blas
from scipy.linalg import lapack as _sla_lapack

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import epilogue_host, kernel_diag
from gpuksvm.array.blas_threads import one_blas_thread

__all__ = ["SubspaceParams", "SubspaceStream", "MODES", "OUTPUTS"]

MODES = ("budget", "batch", "parametric", "nonparametric")
#: what a row is mapped to (see the module notes of gpuksvm.solvers.okfeb.subspace)
OUTPUTS = ("features", "kernel")
_EMA_WEIGHT = 0.01       # weight of a new error in the moving average ē (censor="auto")
_THETA_RATE = 0.02       # η of the multiplicative threshold adaptation (censor="auto")
_MIN_CHUNK, _MAX_CHUNK = 8, 2048

HOST_LAPACK = {np.dtype(np.float32): (_sla_lapack.spotrf, _sla_lapack.spotrs),
           np.dtype(np.float64): (_sla_lapack.dpotrf, _sla_lapack.dpotrs)}
HOST_BLAS = {np.dtype(np.float32): (_sla_blas.sger, _sla_blas.saxpy),
         np.dtype(np.float64): (_sla_blas.dger, _sla_blas.daxpy)}


@dataclass(frozen=True)
class SubspaceParams:
    """The settings of one call into :class:`OnlineSubspace` (the estimator's parameters).

    ``host_step`` selects the in-place per-sample host step where it applies
    (CPU, ``batch_size=1``, nonparametric rule); ``False`` runs the general
    path, which is the reference the tests compare it with.
    """

    rank: int
    budget: int
    reg: float
    step_size: float
    step_decay: float
    censor: Any
    target_censor_rate: float
    forget: float
    mode: str
    batch_size: int
    max_iter: int = 30
    tol: float = 1e-7
    verbose: int = 0
    host_step: bool = True

    @property
    def capacity(self) -> int:
        """Rows the buffers are first allocated for (they grow in the unbudgeted modes)."""
        return (self.budget + self.batch_size) if self.mode == "budget" else 64


class SubspaceStream:
    """The streaming methods of :class:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace` (its base class)."""

    def _add_one_host(self, p: SubspaceParams, x: np.ndarray, k: np.ndarray, q: np.ndarray,
                      u: np.ndarray, kappa: float, idx: int, t: int) -> None:
        """The per-sample nonparametric step (eq. 19, Alg. 3/4) on the host, in place.

        Same arithmetic as :meth:`_add` with s = 1 (which stays the reference and
        the device path), written for a small per-sample cost: the update of the
        old rows is one scaled add and one rank-one update,

            A[:m] ← A[:m] − μ'(λ/t) P + μ'(k − Pq) qᵀ,    P = K_S A,
            a_new = −μₜ((uᵀq − κ) q + (λ/t) u),            u = Aᵀk,

        with BLAS axpy/ger on the preallocated buffers; the Gershgorin bound of
        λ_max(K_t) comes from the running row sums ``ra``.  Then the budget is
        maintained and P = K_S A (the one O(B²r) product), C = AᵀP and the
        Cholesky factor of C + λI are recomputed (:meth:`refresh`).
        """
        m = self.m
        self._grow(m + 1)
        A, K, ra = self.A, self.K, self.ra
        ger, axpy = HOST_BLAS[self.dtype]
        mu = self._step(p, t)
        lam_t = float(p.reg) / t
        P = self.P
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
        self.S[m] = x
        if self.kernel.name == "rbf":
            self.sn[m] = x.dot(x)
        if m:
            K[m, :m] = k
            K[:m, m] = k
        K[m, m] = kappa
        ra[m] = sk
        rec = self.rec
        rec[:m] *= float(p.forget)
        rec[m] = 1.0
        self.sidx[m] = idx
        self.m = m + 1
        if p.mode == "budget" and self.m > p.budget:
            self.maintain_budget(p.budget)
        self.refresh(p)

    def threshold(self, p: SubspaceParams, e: float) -> tuple[float, bool]:
        """ε for the next sample and whether e is censored; advances the censor state."""
        if p.mode != "budget":
            return -math.inf, False
        if p.censor != "auto":
            eps = float(p.censor)
            return eps, e <= eps
        ema = self.ema
        if self.m < p.budget or ema is None:
            eps = 0.0
            self.ema = e if ema is None else (1 - _EMA_WEIGHT) * ema + _EMA_WEIGHT * e
            return eps, e <= eps
        eps = self.theta * ema
        cens = e <= eps
        rho = float(p.target_censor_rate)
        self.theta *= math.exp(_THETA_RATE * ((0.0 if cens else 1.0) - (1.0 - rho)))
        self.ema = (1 - _EMA_WEIGHT) * ema + _EMA_WEIGHT * e
        return eps, cens

    def censor_scan(self, p: SubspaceParams, e: np.ndarray) -> tuple[int, float]:
        """Apply the censoring rule to the errors ``e`` (host, in stream order) up to the first
        non-censored row.

        Returns ``(j, ε)``: j the index of the first row that is not censored (−1 if
        all are) and ε the threshold met by the last row examined.  The censor
        state (count, ē, θ) advances over rows 0..j exactly as :meth:`threshold`
        would row by row: while rows are censored θ shrinks by a fixed factor and
        ē is a linear recursion, so the whole run is evaluated at once.
        """
        L = e.shape[0]
        if p.mode != "budget":
            return (0 if L else -1), -math.inf
        if p.censor != "auto":
            eps = float(p.censor)
            hit = np.flatnonzero(e > eps)
            j = int(hit[0]) if hit.size else -1
            self.n_censored += j if j >= 0 else L
            return j, eps
        if self.ema is None or self.m < p.budget or L <= 32:
            # row by row (short runs: cheaper than the vectorized form below)
            eps = 0.0
            for j, ev in enumerate(e.tolist()):
                eps, cens = self.threshold(p, ev)
                if not cens:
                    return j, eps
                self.n_censored += 1
            return -1, eps
        w, eta, rho = _EMA_WEIGHT, _THETA_RATE, float(p.target_censor_rate)
        f = math.exp(-eta * (1.0 - rho))                  # θ's factor on a censored row
        theta = self.theta * f ** np.arange(L)
        ema0 = self.ema
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
            self.n_censored += L
            self.theta = float(theta[-1]) * f
            self.ema = float(ema_after[-1])
            return -1, float(eps_all[-1])
        j = int(hit[0])
        self.n_censored += j
        self.theta = float(theta[j]) * math.exp(eta * rho)
        self.ema = float(ema_after[j])
        return j, float(eps_all[j])

    def stream(self, X: Any, p: SubspaceParams, output: str | None, bar: Any = None) -> Any:
        """Stream the rows of X (on the state's device) through the online algorithm.

        Returns the prequential outputs (each row's ``output`` under the state it
        met on arrival, before the update it may cause), or None when ``output``
        is None; ``last_errors`` holds the rows' fitting errors.
        """
        # per-sample products are tiny (B × r): a multi-threaded BLAS only adds sync cost
        with one_blas_thread(self.xp is np):
            return self._stream(X, p, output, bar)

    def _stream(self, X: Any, p: SubspaceParams, output: str | None, bar: Any) -> Any:
        xp = self.xp
        n = X.shape[0]
        init_size = min(int(p.rank), int(p.budget)) if p.mode == "budget" else int(p.rank)
        b = int(p.batch_size)
        # the lean in-place per-sample step (host, s = 1, nonparametric rule); _add is the
        # general path (device, mini-batches, parametric rule) and the reference for it
        fast = xp is np and b == 1 and p.mode in ("budget", "nonparametric") and p.host_step
        Qout = xp.empty((n, self.rank), dtype=self.dtype) if output is not None else None
        errs = np.empty(n)
        pos = 0
        while pos < n:
            if self.m < init_size:                        # random full-rank start
                Q, e, Kc = self.features(X[pos:pos + 1], p)
                ev = float(e[0])
                if Qout is not None:
                    Qout[pos] = self._prequential(Q, output)[0]
                errs[pos] = ev
                self.n_seen += 1
                self.err_sum += ev
                self.n_updates += 1
                self.threshold(p, ev)
                self._add(p, X[pos:pos + 1], Kc, Q, None, [self.n_seen - 1], self.n_seen, init=True)
                pos += 1
                continue
            if fast:
                pos = self._stream_host(X, p, pos, Qout, output, errs, bar)
                break
            rate = self.n_censored / max(self.n_seen, 1)
            c = int(min(max(b * 2.0 / max(1.0 - rate, 1e-3), _MIN_CHUNK), _MAX_CHUNK))
            stop = min(pos + c, n)
            Q, e, Kc = self.features(X[pos:stop], p)
            eh = np.asarray(bk.to_host(e), dtype=np.float64)
            chosen: list[int] = []
            used = 0
            while used < eh.shape[0] and len(chosen) < b:
                j, eps = self.censor_scan(p, eh[used:])
                if j < 0:
                    used = eh.shape[0]
                    break
                chosen.append(used + j)
                used += j + 1
            errs[pos:pos + used] = eh[:used]
            self.err_sum += float(eh[:used].sum())
            self.n_seen += used
            self.censor_threshold = eps if p.mode == "budget" else 0.0
            if Qout is not None:
                Qout[pos:pos + used] = self._prequential(Q[:used], output)
            if chosen:
                self.n_updates += len(chosen)
                sel = xp.asarray(chosen) if len(chosen) > 1 else slice(chosen[0], chosen[0] + 1)
                self._add(p, X[pos:stop][sel], Kc[sel], Q[sel], None,
                          [self.n_seen - used + jj for jj in chosen], self.n_seen, init=False)
            pos += used
            if bar is not None:
                bar.update(used)
        self.last_errors = errs
        return Qout

    def _stream_host(self, X: np.ndarray, p: SubspaceParams, pos: int, Qout: Any, output: str | None,
                     errs: np.ndarray, bar: Any) -> int:
        """The per-sample loop of :meth:`_stream` on the host (s = 1, nonparametric rule).

        Same steps in the same order as the general loop — a chunk of upcoming
        rows gets its features and errors from one kernel block and one GEMM
        (eq. 11b, 6b), the rows are walked up to the first non-censored one, and
        that row updates the state (:meth:`_add_one_host`) — with the per-chunk
        work written against NumPy/LAPACK directly.
        """
        n = X.shape[0]
        reg = float(p.reg)
        rbf = self.kernel.name == "rbf"
        kern = self.kernel
        potrs = HOST_LAPACK[self.dtype][1]
        xn_all = np.einsum("ij,ij->i", X, X) if rbf else None
        scan = self.censor_scan
        budget_mode = p.mode == "budget"
        while pos < n:
            m = self.m
            rate = self.n_censored / max(self.n_seen, 1)
            c = int(min(max(2.0 / max(1.0 - rate, 1e-3), _MIN_CHUNK), _MAX_CHUNK))
            stop = min(pos + c, n)
            Xc = X[pos:stop]
            Kc = Xc @ self.S[:m].T                                            # K(X_chunk, S)
            if rbf:
                Kc = epilogue_host(Kc, xn_all[pos:stop], self.sn[:m], kern)
                kd = 1.0
            else:
                Kc = epilogue_host(Kc, None, None, kern)
                kd = kernel_diag(Xc, kern, dtype=self.dtype)
            U = Kc @ self.A[:m]                                               # Aᵀk per row
            Qt, info = potrs(self.L, U.T, lower=1)                            # eq. (11b)
            if info != 0:
                raise self.not_positive_definite(self.C, p)
            Q = Qt.T
            e = np.einsum("ij,ij->i", Q, U)                                    # eq. (6b):
            e += reg * np.einsum("ij,ij->i", Q, Q)                             # e = κ − qᵀu − λ‖q‖²
            np.subtract(kd, e, out=e)
            np.maximum(e, 0.0, out=e)
            chosen, eps = scan(p, e)
            used = chosen + 1 if chosen >= 0 else e.shape[0]
            errs[pos:pos + used] = e[:used]
            self.err_sum += float(e[:used].sum())
            self.n_seen += used
            self.censor_threshold = eps if budget_mode else 0.0
            if Qout is not None:
                Qout[pos:pos + used] = self._prequential(Q[:used], output)
            if chosen >= 0:
                self.n_updates += 1
                kappa = 1.0 if rbf else float(kd[chosen])
                self._add_one_host(p, X[pos + chosen], Kc[chosen], Q[chosen], U[chosen], kappa,
                                   self.n_seen - used + chosen, self.n_seen - used + chosen + 1)
            pos += used
            if bar is not None:
                bar.update(used)
        return pos
