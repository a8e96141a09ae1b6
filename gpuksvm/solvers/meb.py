"""Minimum enclosing ball (MEB) pieces of the Core Vector Machine (SPEC §2).

Two parts, both solver functions without estimator logic:

* :class:`SimplexMEB` — the MEB dual on the core set S,

      max −αᵀK̃_Sα   s.t.  α ≥ 0, Σα = 1          (CVM paper eq. 5/7/9),

  with K̃_S kept *incrementally* (one row/column appended per core vector, in a
  preallocated buffer that doubles when full) and solved by SMO on the simplex:
  pairwise updates αᵢ += δ, αⱼ −= δ keep Σα = 1; the pair is chosen with
  second-order working-set selection (i = arg-min of the gradient g = K̃α over
  all core vectors, j = arg-max over {αⱼ > 0, gⱼ > gᵢ} of (gⱼ−gᵢ)²/ηᵢⱼ with
  ηᵢⱼ = K̃ᵢᵢ + K̃ⱼⱼ − 2K̃ᵢⱼ, the LIBSVM "WSS2" rule adapted to the simplex) and
  warm-started from the previous α.  Every step is a handful of vectorized
  NumPy operations over the core set (no per-element Python loop).  The stop
  rule is the simplex KKT gap max_{αⱼ>0} gⱼ − min gᵢ ≤ tol; since
  αᵀg ≤ max_{αⱼ>0} gⱼ, a gap ≤ tol means no core vector lies more than
  √(R² + 2·tol) from the centre.

* the furthest-point search: for candidate rows ℓ,

      s_ℓ = y_ℓ (r_ℓ Σ_{i∈S} αᵢyᵢrᵢ κ(xᵢ, x_ℓ) + b) + [ℓ∈S] α_ℓ/C,
      ‖c − φ̃(z_ℓ)‖² = κ̃ + αᵀK̃_Sα − 2 s_ℓ                       (eq. 12)

  so the furthest point is arg-min s (eq. 13; r = 1/√κ(x,x) for normalized
  kernels, 1 otherwise; one-class: y ≡ 1, b = 0).  :class:`HostScanner` is the
  NumPy path (row blocks through :func:`gpuksvm.kernels.kernel_block`, never an
  n×|S| matrix beyond one block) and the oracle of :class:`GpuScanner`, which
  runs the fused CUDA kernel ``kernels_cuda/cvm.cu`` (distances and arg-min in
  one launch, per-group minima for the sampled search).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import lapack as _lapack

from .. import _cuda
from .. import backend as bk
from ..kernels import Kernel, kernel_block, kernel_diag

__all__ = ["SimplexMEB", "HostScanner", "GpuScanner", "make_scanner", "candidate_scores",
           "kernel_scale"]

_ETA_FLOOR = 1e-12
_REFACTOR_EVERY = 200   # bordering/downdating steps between refactorizations of K̃_PP⁻¹ (at least |P|)


# --------------------------------------------------------------------------- inner MEB solver
_RANK1_ROWS = 64


def _rank1_update(H: np.ndarray, v: np.ndarray, w: np.ndarray, s: int) -> None:
    """H[:s, :s] += v wᵀ in place, in row blocks (no s×s temporary: one read and one
    write of H instead of the five passes of ``H += np.outer(v, w)``)."""
    for r0 in range(0, s, _RANK1_ROWS):
        r1 = min(r0 + _RANK1_ROWS, s)
        H[r0:r1, :s] += v[r0:r1, None] * w[None, :]


class SimplexMEB:
    """Core-set MEB dual  min αᵀK̃_Sα on the simplex, grown one core vector at a time.

    Parameters
    ----------
    kappa_t : float
        The constant diagonal κ̃ = k̃(z, z) of the transformed kernel.
    capacity : int
        Initial buffer size (doubles when exceeded).

    Attributes
    ----------
    m : int
        Current core-set size.
    K, alpha, g : views of the first ``m`` rows/entries of the buffers
        K̃_S, α and the gradient g = K̃_S α.

    Examples
    --------
    >>> import numpy as np
    >>> meb = SimplexMEB(kappa_t=2.0)
    >>> meb.append(np.empty(0)); meb.append(np.array([0.0]))
    >>> meb.set_alpha(np.array([0.5, 0.5]))
    >>> round(meb.radius2, 6)   # two orthogonal points of norm² 2: R² = 1
    1.0
    """

    def __init__(self, kappa_t: float, capacity: int = 64) -> None:
        self.kappa_t = float(kappa_t)
        cap = max(int(capacity), 2)
        self._K = np.empty((cap, cap))
        self._alpha = np.zeros(cap)
        self._g = np.zeros(cap)
        self.m = 0
        self.n_steps = 0
        self._H = None        # (K̃_PP)⁻¹ of the active set P (active-set solver)
        self._P: list[int] = []
        self._u = None        # (K̃_PP)⁻¹ 1, kept with H
        self._P_valid = False
        self._updates = 0
        self.status = "optimal"   # outcome of the last solve call

    # views ---------------------------------------------------------------
    @property
    def K(self) -> np.ndarray:
        return self._K[: self.m, : self.m]

    @property
    def alpha(self) -> np.ndarray:
        return self._alpha[: self.m]

    @property
    def g(self) -> np.ndarray:
        return self._g[: self.m]

    @property
    def q(self) -> float:
        """αᵀK̃_Sα (= ρ of the L2-SVM at the optimum)."""
        return float(self.alpha @ self.g)

    @property
    def radius2(self) -> float:
        """R² = κ̃ − αᵀK̃_Sα (eq. 3 with constant diagonal)."""
        return self.kappa_t - self.q

    # growth --------------------------------------------------------------
    def _grow(self) -> None:
        cap = self._K.shape[0] * 2
        if self._H is not None:
            H = np.zeros((cap, cap))
            H[: self._H.shape[0], : self._H.shape[0]] = self._H
            self._H = H
            u = np.zeros(cap)
            u[: self._u.shape[0]] = self._u
            self._u = u
        K = np.empty((cap, cap))
        K[: self.m, : self.m] = self.K
        self._K = K
        self._alpha = np.concatenate([self._alpha, np.zeros(cap - self._alpha.shape[0])])
        self._g = np.concatenate([self._g, np.zeros(cap - self._g.shape[0])])

    def append(self, krow: np.ndarray) -> None:
        """Add a core vector with α = 0; ``krow`` holds k̃(zᵢ, z_new) for the current core set."""
        m = self.m
        krow = np.asarray(krow, dtype=np.float64).ravel()
        if krow.shape[0] != m:
            raise ValueError(f"krow has {krow.shape[0]} entries, expected {m}")
        if m + 1 > self._K.shape[0]:
            self._grow()
        self._K[m, :m] = krow
        self._K[:m, m] = krow
        self._K[m, m] = self.kappa_t
        self._alpha[m] = 0.0
        self._g[m] = float(krow @ self._alpha[:m])
        self.m = m + 1

    def set_alpha(self, alpha: np.ndarray) -> None:
        """Set α of the current core set (on the simplex) and refresh the gradient."""
        self._alpha[: self.m] = alpha
        self._P_valid = False
        self.refresh_gradient()

    def refresh_gradient(self) -> None:
        """Recompute g = K̃_S α from scratch (clears accumulated rounding)."""
        np.matmul(self.K, self.alpha, out=self._g[: self.m])

    # SMO on the simplex -------------------------------------------------
    def solve(self, tol: float, max_steps: int | None = None) -> int:
        """Warm-started SMO until the KKT gap ≤ ``tol``; returns the number of steps.

        Always terminates: at most ``max_steps`` pair updates (default
        200·|S| + 1000); :attr:`status` records "optimal" or "max_steps".
        """
        m = self.m
        if m < 2:
            self.status = "optimal"
            return 0
        if max_steps is None:
            max_steps = 200 * m + 1000
        K = self.K
        a = self._alpha[:m]
        g = self._g[:m]
        self.refresh_gradient()
        self._P_valid = False
        eta = np.empty(m)
        viol = np.empty(m)
        two_kt = 2.0 * self.kappa_t
        sup = a > 0.0
        steps = 0
        status = "max_steps"
        while steps < max_steps:
            i = int(np.argmin(g))
            gi = g[i]
            np.subtract(g, gi, out=viol)
            viol[~sup] = -1.0
            if viol.max() <= tol:
                status = "optimal"
                break
            Ki = K[i]
            # η_ij = K̃_ii + K̃_jj − 2K̃_ij with the constant diagonal κ̃
            np.multiply(Ki, -2.0, out=eta)
            eta += two_kt
            np.maximum(eta, _ETA_FLOOR, out=eta)
            score = np.where(viol > 0.0, viol * viol / eta, -1.0)   # second-order gain
            j = int(np.argmax(score))
            delta = viol[j] / eta[j]
            if delta >= a[j]:
                delta = a[j]
                a[j] = 0.0
                sup[j] = False
            else:
                a[j] -= delta
            a[i] += delta
            sup[i] = True
            g += delta * (Ki - K[j])
            steps += 1
        # the incremental gradient drifts by rounding over many steps: end on an exact one
        a /= a.sum()
        self.refresh_gradient()
        self.status = status
        self.n_steps += steps
        return steps

    # active set on the simplex ----------------------------------------
    def _rebuild_inverse(self) -> None:
        a = self.alpha
        self._P = [int(i) for i in np.nonzero(a > 0.0)[0]]
        P = np.asarray(self._P, dtype=np.int64)
        cap = self._K.shape[0]
        self._H = np.zeros((cap, cap))
        s = P.shape[0]
        # K̃_PP ⪰ I/C is positive definite: inverse from the Cholesky factor (LAPACK potrf/potri)
        KPP = self.K[np.ix_(P, P)]
        c, info = _lapack.dpotrf(KPP, lower=1)
        if info == 0:
            Hs, info = _lapack.dpotri(c, lower=1)
        if info == 0:
            Hs = np.tril(Hs)
            Hs += np.tril(Hs, -1).T
        else:
            Hs = np.linalg.pinv(KPP, hermitian=True)
        self._H[:s, :s] = Hs
        self._u = np.zeros(cap)
        self._u[:s] = self._H[:s, :s].sum(axis=1)
        self._updates = 0

    def _add_active(self, j: int) -> bool:
        """Border K̃_PP⁻¹ with row/column j; False when the Schur complement is not positive."""
        P = np.asarray(self._P, dtype=np.int64)
        s = P.shape[0]
        H = self._H
        k = self._K[P, j]
        v = H[:s, :s] @ k
        sigma = self.kappa_t - float(k @ v)          # Schur complement of the bordered K̃_PP
        if not sigma > 1e-14 * self.kappa_t:
            return False
        _rank1_update(H, v, v / sigma, s)
        H[:s, s] = -v / sigma
        H[s, :s] = -v / sigma
        H[s, s] = 1.0 / sigma
        u = self._u
        sv = float(v.sum())
        u[:s] += v * ((sv - 1.0) / sigma)
        u[s] = (1.0 - sv) / sigma
        self._P.append(int(j))
        self._updates += 1
        return True

    def _remove_active(self, p: int) -> None:
        """Drop position ``p`` of P from K̃_PP⁻¹ (and from u = K̃_PP⁻¹1) in O(|P|²).

        With H = [[A, h], [hᵀ, η]] (the leaving index last), the inverse of the
        remaining block is A − hhᵀ/η, and since u = H1 gives A1 = u₁ − h and
        hᵀ1 = u_last − η, the new u₁' = (A − hhᵀ/η)1 = u₁ − h·u_last/η.
        """
        H = self._H
        s = len(self._P)
        last = s - 1
        u = self._u
        if p != last:
            self._P[p], self._P[last] = self._P[last], self._P[p]
            H[[p, last], :s] = H[[last, p], :s]
            H[:s, [p, last]] = H[:s, [last, p]]
            u[[p, last]] = u[[last, p]]
        h = H[:last, last].copy()
        hll = H[last, last]
        _rank1_update(H, h, -h / hll, last)
        u[:last] -= h * (u[last] / hll)
        H[last, :s] = 0.0
        H[:s, last] = 0.0
        u[last] = 0.0
        self._P.pop()
        self._updates += 1

    def solve_active_set(self, tol: float, max_steps: int | None = None) -> int:
        """Primal active-set method on the simplex, warm-started; returns the number of steps.

        On the active set P the equality-constrained optimum is
        β = K̃_PP⁻¹1 / (1ᵀK̃_PP⁻¹1) (and ρ = 1/(1ᵀK̃_PP⁻¹1)); if β > 0 the most
        violating core vector (min g < ρ − tol) joins P, otherwise α moves
        towards β until the first αᵢ hits 0 and i leaves P.  K̃_PP⁻¹ is kept by
        O(|P|²) bordering / downdating (refactorized every max(200, |P|) updates, or when
        the gradient on P shows it has drifted), so a warm-started re-solve
        after one new core vector costs a few O(|S|·|P|) steps instead of the
        hundreds of SMO steps an ill-conditioned K̃ (large C) needs.

        Termination is guaranteed: at most ``max_steps`` steps (default
        4·|S| + 100); an index that leaves P in the very step after it entered
        (no progress: a rounding-level cycle) is barred for the rest of the
        call; and the result is checked against the true KKT gap — when it is
        above ``tol`` the call finishes with :meth:`solve` (SMO, itself capped).
        :attr:`status` records "optimal", "smo_fallback" or "max_steps".
        """
        m = self.m
        if m < 2:
            self.status = "optimal"
            return 0
        if max_steps is None:
            max_steps = 4 * m + 100
        if (self._H is None or not self._P_valid or not self._P
                or self._updates > max(_REFACTOR_EVERY, len(self._P))):
            self._rebuild_inverse()
        self._P_valid = True
        K = self.K
        a = self._alpha[:m]
        kt = self.kappa_t
        steps = 0
        barred: set[int] = set()
        last_added = -1
        rebuilt = False
        g_exact = None        # K̃α of the current α when known
        while steps < max_steps:
            g_exact = None
            P = np.asarray(self._P, dtype=np.int64)
            s = P.shape[0]
            u = self._u[:s]                                    # K̃_PP⁻¹ 1
            usum = float(u.sum())
            if not (np.isfinite(usum) and usum > 0.0):
                if rebuilt:
                    break
                self._rebuild_inverse()
                rebuilt = True
                continue
            beta = u / usum
            if (beta > 0.0).all():
                a[:] = 0.0
                a[P] = beta
                g = K @ a
                rho = float(a @ g)
                gP = g[P]
                g_exact = g.copy()
                if (gP.max() - gP.min() > 0.1 * tol + 1e-13 * kt) and not rebuilt:
                    # the maintained inverse has drifted: refactorize once and retry
                    self._rebuild_inverse()
                    rebuilt = True
                    continue
                g[P] = np.inf
                if barred:
                    g[list(barred)] = np.inf
                j = int(np.argmin(g))
                steps += 1
                if g[j] >= rho - tol:
                    break
                if not self._add_active(j):
                    barred.add(j)
                    continue
                last_added = j
            else:
                aP = a[P]
                neg = np.nonzero(beta <= 0.0)[0]
                ratio = aP[neg] / (aP[neg] - beta[neg])
                k = int(np.argmin(ratio))
                p = int(neg[k])
                t = float(ratio[k])
                if t <= 0.0 and int(P[p]) == last_added:
                    barred.add(last_added)                     # entered and left at once: cycling
                a[P] = aP + t * (beta - aP)
                a[P[p]] = 0.0
                np.maximum(a, 0.0, out=a)
                self._remove_active(p)
                last_added = -1
                steps += 1
        if g_exact is not None:
            self._g[:m] = g_exact          # α = β exactly on the simplex: g is current
        else:
            a /= a.sum()
            self.refresh_gradient()
        self.n_steps += steps
        if self.gap() <= tol + 1e-12 * kt:
            self.status = "optimal"
            return steps
        # the active-set result misses the tolerance (cap, barred index, rounding): finish by SMO
        steps += self.solve(tol)
        if self.status == "optimal":
            self.status = "smo_fallback"
        self._P_valid = False
        return steps

    def gap(self) -> float:
        """The simplex KKT gap max_{αⱼ>0} gⱼ − min g."""
        a, g = self.alpha, self.g
        return float(g[a > 0].max() - g.min()) if self.m else 0.0


# --------------------------------------------------------------------------- kernel helpers
def kernel_scale(X: Any, kernel: Kernel, normalize: bool):
    """r = 1/√κ(x, x) per row for a normalized kernel (None when not needed)."""
    if not normalize or kernel.constant_diag is not None:
        return None
    xp = bk.namespace_of(X)
    dg = kernel_diag(X, kernel)
    if bool((dg <= 0).any()):
        raise ValueError("normalize=True needs κ(x, x) > 0 for every row "
                         f"(kernel={kernel.name!r} gives κ(x, x) <= 0 for some rows, e.g. zero rows)")
    return 1.0 / xp.sqrt(dg)


def candidate_scores(Xc: Any, Z: Any, coef: Any, kernel: Kernel, *, b: float = 0.0,
                     y: Any = None, self_term: Any = None, xscale: Any = None):
    """s for a block of candidate rows ``Xc`` (NumPy or CuPy): the twin of ``cvm.cu``.

    s = y (r · K(Xc, Z) coef + b) + self_term; every optional term may be None.
    """
    Kb = kernel_block(Xc, Z, kernel)
    s = Kb @ coef
    if xscale is not None:
        s *= xscale
    s += b
    if y is not None:
        s *= y
    if self_term is not None:
        s += self_term
    return s


class _ScannerBase:
    """State shared by the host and GPU scanners: data, labels, core rows, self terms."""

    def __init__(self, X: Any, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float,
                 dtype: np.dtype, capacity: int = 64, *, xp: Any = np) -> None:
        self.xp = xp
        self.X = X
        self.kernel = kernel
        self.C = float(C)
        self.dtype = np.dtype(dtype)
        self.n, self.d = X.shape
        xp = self.xp
        self.y = None if y is None else xp.asarray(y, dtype=self.dtype)
        self.y_host = None if y is None else np.asarray(y, dtype=np.float64)
        self.xscale = xscale
        self.xscale_host = None if xscale is None else np.asarray(bk.to_host(xscale), dtype=np.float64)
        self.self_term = xp.zeros(self.n, dtype=self.dtype)
        self.core_idx: list[int] = []
        self._Z = xp.empty((max(capacity, 2), self.d), dtype=self.dtype)

    @property
    def m(self) -> int:
        return len(self.core_idx)

    @property
    def Z(self):
        return self._Z[: self.m]

    def rows(self, idx: Any):
        """Dense rows of X (on the scanner's device)."""
        R = self.X[idx]
        if bk.is_sparse(R):
            R = R.toarray()
        return self.xp.asarray(R, dtype=self.dtype).reshape(-1, self.d)

    def kernel_between(self, idx_a: np.ndarray, idx_b: np.ndarray) -> np.ndarray:
        """Normalized kernel block κₙ(X[a], X[b]) as a host float64 array."""
        K = np.asarray(bk.to_host(kernel_block(self.rows(idx_a), self.rows(idx_b), self.kernel)),
                       dtype=np.float64)
        if self.xscale_host is not None:
            K *= self.xscale_host[idx_a][:, None] * self.xscale_host[idx_b][None, :]
        return K

    def append(self, idx: int) -> np.ndarray:
        """Add row ``idx`` to the core set; returns κₙ(zᵢ, x_idx) for the previous core vectors."""
        m = self.m
        row = self.rows(np.array([idx]))
        if m == 0:
            krow = np.empty(0)
        else:
            krow = np.asarray(bk.to_host(kernel_block(self.Z, row, self.kernel)), dtype=np.float64).ravel()
            if self.xscale_host is not None:
                krow *= self.xscale_host[self.core_idx] * self.xscale_host[idx]
        if m + 1 > self._Z.shape[0]:
            Z = self.xp.empty((2 * self._Z.shape[0], self.d), dtype=self.dtype)
            Z[:m] = self._Z[:m]
            self._Z = Z
        self._Z[m] = row[0]
        self.core_idx.append(int(idx))
        return krow

    def set_alpha(self, alpha: np.ndarray) -> tuple[Any, float]:
        """Update the self terms α_ℓ/C of core rows; return (coef on device, b)."""
        alpha = np.asarray(alpha, dtype=np.float64)
        idx = np.asarray(self.core_idx, dtype=np.int64)
        xp = self.xp
        self.self_term[xp.asarray(idx)] = xp.asarray(alpha / self.C, dtype=self.dtype)
        coef = alpha.copy()
        b = 0.0
        if self.y_host is not None:
            coef *= self.y_host[idx]
            b = float(coef.sum())                 # b = Σ αᵢyᵢ  (eq. 11)
        if self.xscale_host is not None:
            coef *= self.xscale_host[idx]
        return xp.asarray(coef, dtype=self.dtype), b


class HostScanner(_ScannerBase):
    """Blocked furthest-point search in NumPy (CPU path; oracle of :class:`GpuScanner`),
    or in CuPy with ``xp=cupy`` (GPU input the fused kernel does not take)."""

    def _scores(self, idx: np.ndarray | None, s0: int, s1: int, coef, b: float) -> np.ndarray:
        sel = slice(s0, s1) if idx is None else idx[s0:s1]
        return candidate_scores(self.rows(sel), self.Z, coef, self.kernel, b=b,
                                y=None if self.y is None else self.y[sel],
                                self_term=self.self_term[sel],
                                xscale=None if self.xscale is None else self.xscale[sel])

    def group_min(self, groups: np.ndarray, coef, b: float) -> tuple[np.ndarray, np.ndarray]:
        """Per-row-of-``groups`` minimum of s and its row index (sampled search)."""
        flat = groups.ravel()
        s = np.asarray(bk.to_host(self._scores(flat, 0, flat.shape[0], coef, b)), dtype=np.float64)
        s = s.reshape(groups.shape)
        best = s.min(axis=1)
        # ties go to the smallest row index, as in the CUDA kernel
        arg = np.where(s == best[:, None], groups, np.iinfo(np.int64).max).min(axis=1)
        return best, arg.astype(np.int64)

    def exact_min(self, idx: np.ndarray | None, coef, b: float) -> tuple[float, int]:
        """Minimum of s over all rows (or the rows ``idx``) and its row index, in row blocks."""
        n = self.n if idx is None else idx.shape[0]
        rows = bk.plan_rows(n, (self.m + self.d + 4) * self.dtype.itemsize,
                            bk.device_of(self.self_term), max_rows=1 << 16)
        best, besti = np.inf, -1
        for s0 in range(0, n, rows):
            s1 = min(s0 + rows, n)
            s = self._scores(idx, s0, s1, coef, b)
            k = int(self.xp.argmin(s))
            sk = float(s[k])
            if sk < best:
                best, besti = sk, (s0 + k if idx is None else int(idx[s0 + k]))
        return best, besti


class GpuScanner(_ScannerBase):
    """Furthest-point search with the fused CUDA kernel of ``kernels_cuda/cvm.cu``."""

    _BLOCK = 256
    _MAX_D = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, xp=bk.get_namespace("cuda"), **kwargs)
        xp = self.xp
        # every array argument of cvm_furthest in the scanner's dtype, C-contiguous (const T*)
        self.Xc = xp.ascontiguousarray(self.X, dtype=self.dtype)
        self._xscale_dev = None if self.xscale is None else xp.ascontiguousarray(self.xscale, dtype=self.dtype)
        self._kernel_name = f"cvm_furthest_{'f32' if self.dtype == np.float32 else 'f64'}"
        _cuda.get_function("cvm", self._kernel_name)   # compile now: a failure names the source
        self._idx_key = None                           # (host idx, its device copy) of exact_min
        self._counter = xp.zeros(1, dtype=xp.uint32)
        self._out_s = xp.empty(1, dtype=xp.float64)
        self._out_i = xp.empty(1, dtype=xp.int64)
        # core rows per shared-memory tile: at most 32 KiB of Z + coef
        self._tile = int(max(1, min(128, (32 * 1024) // ((self.d + 1) * self.dtype.itemsize))))

    @staticmethod
    def supported(X: Any) -> bool:
        return not bk.is_sparse(X) and X.shape[1] <= GpuScanner._MAX_D

    def _launch(self, cand, n_cand: int, group_size: int, n_groups: int, coef, b: float,
                final: bool):
        xp = self.xp
        part_s = xp.empty(n_groups, dtype=xp.float64)
        part_i = xp.empty(n_groups, dtype=xp.int64)
        k = self.kernel
        shared = self._tile * (self.d + 1) * self.dtype.itemsize
        args = (self.Xc, self.d, cand, n_cand, group_size, self._Z,
                xp.ascontiguousarray(coef, dtype=self.dtype), self.m, self._tile, float(b), self.y,
                self.self_term, self._xscale_dev, k.code, k.gamma, k.coef0, k.degree, part_s, part_i,
                self._counter if final else None, self._out_s, self._out_i)
        _cuda.launch("cvm", self._kernel_name, (n_groups,), (self._BLOCK,), args, shared_mem=shared)
        return part_s, part_i

    def group_min(self, groups: np.ndarray, coef, b: float) -> tuple[np.ndarray, np.ndarray]:
        xp = self.xp
        cand = xp.asarray(groups.ravel(), dtype=xp.int64)
        part_s, part_i = self._launch(cand, cand.shape[0], groups.shape[1], groups.shape[0],
                                      coef, b, final=False)
        return bk.to_host(part_s), bk.to_host(part_i)

    def exact_min(self, idx: np.ndarray | None, coef, b: float) -> tuple[float, int]:
        xp = self.xp
        n = self.n if idx is None else idx.shape[0]
        cand = None
        if idx is not None:
            # the device copy of the last idx is reused while the caller passes the same rows; the
            # key is a host copy of their values (an id() can be reused by a new array, and an
            # array can be changed in place)
            host = np.asarray(idx, dtype=np.int64)
            if self._idx_key is None or not np.array_equal(self._idx_key[0], host):
                self._idx_key = (host.copy(), xp.asarray(host))
            cand = self._idx_key[1]
        n_groups = int(min(max(1, -(-n // self._BLOCK)), 4096))
        group_size = -(-n // n_groups)
        self._launch(cand, n, group_size, n_groups, coef, b, final=True)
        return float(self._out_s.get()[0]), int(self._out_i.get()[0])


def make_scanner(X: Any, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float,
                 dtype: np.dtype, device: bk.Device, capacity: int = 64) -> _ScannerBase:
    """The fused-CUDA scanner on a GPU for dense X, else the NumPy scanner."""
    if device.is_gpu and GpuScanner.supported(X):
        return GpuScanner(X, y, kernel, xscale, C, dtype, capacity)
    if device.is_gpu:
        # sparse or very wide X on a GPU: blocked CuPy path (same code as the host twin)
        return HostScanner(X, y, kernel, xscale, C, dtype, capacity, xp=bk.get_namespace(device))
    return HostScanner(X, y, kernel, xscale, C, dtype, capacity)
