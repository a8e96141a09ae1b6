"""The Core Vector Machine's QP on the core set: min αᵀK̃α on the simplex (SPEC §2).

The MEB dual restricted to the core set S (CVM paper eq. 5/7/9),

    min_α  αᵀK̃_Sα   s.t.  α ≥ 0,  Σα = 1,

re-solved warm-started each time core vectors join S.  Its KKT conditions
with g = K̃α and q = αᵀg are gᵢ = q where αᵢ > 0 and gᵢ ≥ q elsewhere; the
simplex KKT gap is max_{αⱼ>0} gⱼ − min gᵢ.

Two engines, both warm-started from the previous α:

* **SMO** (:meth:`CoreSetQP.smo`): LIBSVM's pair step with second-order
  working-set selection over the whole core set, two K̃ rows and a handful of
  O(|S|) vector operations per step — nothing O(|S|²).
* **active set** (:meth:`CoreSetQP._solve_active_set`) while the core set is
  small enough for a dense K̃_S (|S| ≤ ``DENSE_MAX``) *and* SMO is slow
  there: on the active set P the equality-constrained optimum is
  β = K̃_PP⁻¹1 / 1ᵀK̃_PP⁻¹1, K̃_PP⁻¹ kept by O(|P|²) bordering/downdating.  A
  Newton method: a few steps per new core vector whatever the conditioning.
  Measured on the 634 core vectors of the 4×4 checkerboard at C = 1000
  (cond K̃ ≈ 7·10⁵): 373 steps, 0.12 s, against 163,464 SMO steps, 6.9 s,
  for the same KKT gap.  Large C makes K̃ = yyᵀ∘(K + 1) + I/C ill-conditioned.

Working-set rounds with the engines' subproblem solver
(:func:`gpuksvm.solvers.smo.working_set.solve_subproblems_host`, ThunderSVM-style) were
measured and do not fit this QP: on adult (4,000 rows, C = 1, all rows as core
vectors, KKT gap 10⁻³ρ) global WSS 2 SMO needs 6,509 steps from the initial
pair, rounds of 256 variables 126,000 steps without converging — K̃ is dense
and strongly coupled (the bias term yᵢyⱼ and κ ≈ 0.6 between most rows), so
solving a working set exactly undoes the rest.

The K̃ rows live in :class:`gpuksvm.solvers.cvm.ktilde_cache.KtildeCache`.
Shrinking (Chang & Lin 2011 §5.1, on the simplex): a core vector with αᵢ = 0
and gᵢ above the threshold the caller gives (≥ q: strictly inside the ball)
cannot join a violating pair; :meth:`CoreSetQP.shrink` drops such vectors
from the core set (they are ordinary rows again for the furthest-point search
of :func:`gpuksvm.solvers.cvm.meb.fit_core_set`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.linalg import lapack as _lapack

from gpuksvm.solvers.cvm.ktilde_cache import DENSE_MAX, KtildeCache


__all__ = ["CoreSetQP"]

_SMO_STEPS_PER_VECTOR = 20  # SMO pair steps per core vector before the dense regime turns to the active set
_CAPPED_CALLS = 3          # capped SMO calls in a row before the dense regime turns to the active set
_REFACTOR_EVERY = 200    # bordering/downdating steps between refactorizations of K̃_PP⁻¹ (at least |P|)
_RANK1_ROWS = 64


def _rank1_update(H: np.ndarray, v: np.ndarray, w: np.ndarray, s: int) -> None:
    """H[:s, :s] += v wᵀ in place, in row blocks (no s×s temporary)."""
    for r0 in range(0, s, _RANK1_ROWS):
        r1 = min(r0 + _RANK1_ROWS, s)
        H[r0:r1, :s] += v[r0:r1, None] * w[None, :]


#: Rows per block of the inverse's symmetric copy (:meth:`CoreSetQP._rebuild_inverse`).
_SYM_BLOCK = 256


class CoreSetQP:
    """min αᵀK̃_Sα on the simplex over a growing core set S (module docstring).

    Parameters
    ----------
    kappa_t : float
        The constant diagonal κ̃ = k̃(z, z).
    block : callable ``(pos, c0, c1, dtype) -> K̃ block``
        K̃ between core positions (see :class:`KtildeCache`).
    cache_bytes : int
        Budget of the K̃ rows (row regime).
    dense_max : int
        Largest core set kept as a dense K̃_S (where the active set may run).
    min_slots : int
        K̃ rows the row regime caches at least, whatever the budget.

    Attributes
    ----------
    m : int
    alpha, g : the first ``m`` entries of α and g = K̃α
    n_steps : int
        Active-set steps plus SMO pair steps so far.
    status : str
        Outcome of the last solve: "optimal", "smo_fallback" or "max_steps".

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[2.0, 0.0, 1.0], [0.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    >>> qp = CoreSetQP(2.0, lambda p, c0, c1, dt: K[np.ix_(p, np.arange(c0, c1))], 1 << 20)
    >>> _ = qp.append(3); qp.set_alpha(np.array([1.0, 0.0, 0.0]))
    >>> _ = qp.solve(1e-12); np.round(qp.alpha, 6).tolist(), round(qp.q, 6)
    ([0.5, 0.5, 0.0], 1.0)
    """

    def __init__(self, kappa_t: float, block: Callable[[np.ndarray, int, int], np.ndarray],
                 cache_bytes: int, *, dense_max: int = DENSE_MAX, min_slots: int = 512) -> None:
        self.kappa_t = float(kappa_t)
        self.cache = KtildeCache(block, cache_bytes, dense_max, min_slots)
        self._alpha = np.zeros(64)
        self._g = np.zeros(64)
        self.n_steps = 0
        self.status = "optimal"
        self._H: np.ndarray | None = None       # (K̃_PP)⁻¹ of the active set P
        self._u: np.ndarray | None = None       # (K̃_PP)⁻¹ 1
        self._P: list[int] = []
        self._P_valid = False
        self._updates = 0
        self.active_set = False                 # the dense regime's engine (see solve)
        self._capped = 0                        # consecutive SMO calls that hit their step cap

    # views ---------------------------------------------------------------
    @property
    def m(self) -> int:
        return self.cache.m

    @property
    def alpha(self) -> np.ndarray:
        return self._alpha[: self.m]

    @property
    def g(self) -> np.ndarray:
        return self._g[: self.m]

    @property
    def q(self) -> float:
        """αᵀK̃α: the dual objective (= ρ of the L2-SVM at the optimum)."""
        return float(self.alpha @ self.g)

    @property
    def radius2(self) -> float:
        """R² = κ̃ − αᵀK̃α (eq. 3 with constant diagonal)."""
        return self.kappa_t - self.q

    def kkt_gap(self) -> float:
        """max_{αⱼ>0} gⱼ − min gᵢ (≥ 0; 0 at the optimum)."""
        a, g = self.alpha, self.g
        return float(g[a > 0].max() - g.min()) if self.m else 0.0

    # growth and shrinking --------------------------------------------
    def append(self, k: int) -> np.ndarray:
        """Add ``k`` core vectors with α = 0; returns their positions."""
        m = self.m
        was_dense = self.cache.dense
        if was_dense and m + int(k) > self.cache.dense_max:
            # the row regime starts: the active set's inverse goes before the row buffer comes
            # (beside the dense K̃_S that it copies, it was the peak of the fit)
            self._H = self._u = None
            self._P_valid = False
        new, B = self.cache.append(int(k))
        if self.m > self._alpha.shape[0]:
            cap = max(2 * self._alpha.shape[0], self.m)
            self._alpha = np.concatenate([self._alpha, np.zeros(cap - self._alpha.shape[0])])
            self._g = np.concatenate([self._g, np.zeros(cap - self._g.shape[0])])
        self._alpha[new] = 0.0
        self._g[new] = B @ self._alpha[: self.m]
        if was_dense and not self.cache.dense:
            self._H = self._u = None
            self._P_valid = False
        elif self._H is not None and self.m > self._H.shape[0]:
            cap = self.cache._buf.shape[0]
            H = np.zeros((cap, cap))
            s = self._H.shape[0]
            H[:s, :s] = self._H
            u = np.zeros(cap)
            u[:s] = self._u
            self._H, self._u = H, u
        del m
        return new

    def set_alpha(self, alpha: np.ndarray) -> None:
        """Set α (on the simplex) and recompute g = K̃α from the rows of the support."""
        self._alpha[: self.m] = alpha
        self._P_valid = False
        self.refresh_gradient()

    def refresh_gradient(self) -> None:
        sup = np.flatnonzero(self.alpha > 0.0)
        self._g[: self.m] = self.alpha[sup] @ self.cache.rows(sup) if sup.shape[0] else 0.0

    def shrink(self, threshold: float, min_fraction: float = 0.05) -> np.ndarray | None:
        """Drop the core vectors with αᵢ = 0 and gᵢ > ``threshold`` (≥ q: strictly inside the ball).

        Returns the kept mask, or None when fewer than ``min_fraction``·|S|
        would go (compaction costs a pass over the cache).
        """
        a, g = self.alpha, self.g
        drop = (a <= 0.0) & (g > threshold)
        if drop.sum() < max(1, min_fraction * self.m) or drop.all():
            return None
        keep = ~drop
        cols = np.flatnonzero(keep)
        m_new = cols.shape[0]
        self._alpha[:m_new] = self._alpha[cols]
        self._g[:m_new] = self._g[cols]
        if self._P:
            newpos = np.cumsum(keep) - 1
            self._P = [int(newpos[p]) for p in self._P]      # P ⊆ support: all kept
        self.cache.compact(keep)
        return keep

    # optimality measures ---------------------------------------------
    def duality_gap(self, C: float) -> float:
        """The core set's part of the L2-SVM duality gap (see :func:`gpuksvm.solvers.cvm.meb.fit_core_set`):
        C·Σᵢ max(0, q − mᵢ)² − ‖α‖²/C with the margins mᵢ = gᵢ − αᵢ/C."""
        a, g = self.alpha, self.g
        t = np.maximum(self.q - g + a / C, 0.0)
        return float(C * (t @ t) - (a @ a) / C)

    # solvers ---------------------------------------------------------------
    def solve(self, tol: float, gap_target: tuple[float, float] | None = None,
              max_steps: int | None = None) -> int:
        """Warm-started solve until the KKT gap ≤ ``tol`` (or, SMO, the duality gap ≤
        ``gap_target[0]`` for C = ``gap_target[1]``); returns the steps taken.

        SMO (:meth:`smo`) unless the dense regime has turned to the active set:
        a full dense-regime SMO solve (``max_steps`` None) that needs more than
        ``_SMO_STEPS_PER_VECTOR``·|S| steps, or ``_CAPPED_CALLS`` capped calls
        in a row — an ill-conditioned K̃, large C — hand over to the active set, which then solves every later
        dense-regime call.  Always terminates; :attr:`status` says how it ended.
        """
        if self.m < 2:
            self.status = "optimal"
            return 0
        if self.cache.dense and self.active_set:
            return self._solve_active_set(tol)
        dense_full = self.cache.dense and max_steps is None
        steps = self.smo(tol, _SMO_STEPS_PER_VECTOR * self.m if dense_full else max_steps, gap_target)
        if self.status == "optimal":
            self._capped = 0
            return steps
        self._capped += 1
        if not self.cache.dense or (not dense_full and self._capped < _CAPPED_CALLS):
            return steps
        self.active_set = True
        return steps + self._solve_active_set(tol)

    def smo(self, tol: float, max_steps: int | None = None,
            gap_target: tuple[float, float] | None = None) -> int:
        """Warm-started SMO on the simplex until the KKT gap ≤ ``tol`` (or the duality
        gap ≤ ``gap_target[0]`` for C = ``gap_target[1]``); returns the pair steps.

        Each step is LIBSVM's WSS 2 (Fan, Chen & Lin 2005) on the simplex: i =
        arg-min g; j = arg-max over {αⱼ > 0, gⱼ > gᵢ} of (gⱼ − gᵢ)²/ηᵢⱼ with
        ηᵢⱼ = 2κ̃ − 2K̃ᵢⱼ; αᵢ += δ, αⱼ −= δ, δ = min((gⱼ − gᵢ)/ηᵢⱼ, αⱼ); then
        g += δ(K̃ᵢ − K̃ⱼ).  Two K̃ rows and a handful of O(|S|) vector operations
        per step (module docstring for why not working-set rounds).
        """
        m = self.m
        if m < 2:
            self.status = "optimal"
            return 0
        if max_steps is None:
            max_steps = 50 * m + 1000
        a = self._alpha[:m]
        g = self._g[:m]
        two_kt = 2.0 * self.kappa_t
        viol = np.empty(m)
        eta = np.empty(m)
        steps = 0
        self.status = "max_steps"
        check = 0
        while steps < max_steps:
            i = int(np.argmin(g))
            np.subtract(g, g[i], out=viol)
            viol[a <= 0.0] = -1.0
            j0 = int(np.argmax(viol))
            if viol[j0] <= tol:
                self.status = "optimal"
                break
            if gap_target is not None:
                check -= 1
                if check <= 0:
                    check = 64
                    if self.duality_gap(gap_target[1]) <= gap_target[0]:
                        self.status = "optimal"
                        break
            Ki = self.cache.rows(np.array([i]))[0]
            np.multiply(Ki, -2.0, out=eta)
            eta += two_kt
            np.maximum(eta, 1e-12, out=eta)
            score = np.where(viol > 0.0, viol * viol / eta, -1.0)   # second-order gain
            j = int(np.argmax(score))
            delta = viol[j] / eta[j]
            if delta >= a[j]:
                delta = a[j]
                a[j] = 0.0
            else:
                a[j] -= delta
            a[i] += delta
            Kj = self.cache.rows(np.array([j]))[0]
            g += delta * (Ki - Kj)
            steps += 1
        a /= a.sum()
        self.n_steps += steps
        self._P_valid = False
        return steps

    # active set (dense regime) ---------------------------------------------
    def _rebuild_inverse(self) -> None:
        """(K̃_PP)⁻¹ of the active set P, in three s×s matrices at most beside K̃_S: the old
        inverse goes first, K̃_PP is factorized and inverted in its own memory (LAPACK
        potrf/potri on its Fortran-ordered transpose) and copied into the new inverse symmetric,
        in row blocks (no triangle temporaries)."""
        a = self.alpha
        self._P = [int(i) for i in np.nonzero(a > 0.0)[0]]
        P = np.asarray(self._P, dtype=np.int64)
        cap = self.cache._buf.shape[0]
        self._H = None
        s = P.shape[0]
        # K̃_PP ⪰ I/C is positive definite: inverse from the Cholesky factor (LAPACK potrf/potri).
        # K̃_PP is symmetric, so its transpose (Fortran order) is the same matrix: factorized in place
        F = self.cache.matrix[np.ix_(P, P)].T
        c, info = _lapack.dpotrf(F, lower=1, overwrite_a=1)
        if info == 0:
            F, info = _lapack.dpotri(c, lower=1, overwrite_c=1)      # the lower triangle: (K̃_PP)⁻¹
        del c
        if info != 0:
            F = np.linalg.pinv(self.cache.matrix[np.ix_(P, P)], hermitian=True)
            F = np.tril(F)
        self._H = np.zeros((cap, cap))
        H = self._H[:s, :s]
        for r0 in range(0, s, _SYM_BLOCK):
            r1 = min(r0 + _SYM_BLOCK, s)
            H[r0:r1, :r1] = F[r0:r1, :r1]                  # rows r0:r1 left of the diagonal block's end
            H[r0:r1, r1:] = F[r1:, r0:r1].T                 # right of it: the lower triangle's transpose
            D = H[r0:r1, r0:r1]
            D[...] = np.tril(D) + np.tril(D, -1).T         # the diagonal block from its lower half
        del F
        self._u = np.zeros(cap)
        self._u[:s] = self._H[:s, :s].sum(axis=1)
        self._updates = 0

    def _add_active(self, j: int) -> bool:
        """Border K̃_PP⁻¹ with row/column j; False when the Schur complement is not positive."""
        P = np.asarray(self._P, dtype=np.int64)
        s = P.shape[0]
        H = self._H
        k = self.cache.matrix[P, j]
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

    def _solve_active_set(self, tol: float, max_steps: int | None = None) -> int:
        """Primal active-set method on the simplex, warm-started (dense regime).

        On the active set P the equality-constrained optimum is
        β = K̃_PP⁻¹1 / (1ᵀK̃_PP⁻¹1) (and ρ = 1/(1ᵀK̃_PP⁻¹1)); if β > 0 the most
        violating core vector (min g < ρ − tol) joins P, otherwise α moves
        towards β until the first αᵢ hits 0 and i leaves P.  K̃_PP⁻¹ is kept by
        O(|P|²) bordering / downdating (refactorized every max(200, |P|)
        updates, or when the gradient on P shows it has drifted).

        Termination: at most ``max_steps`` steps (default 4·|S| + 100); an
        index that leaves P in the step after it entered (a rounding-level
        cycle) is barred for the rest of the call; and the result is checked
        against the true KKT gap — above ``tol`` the call finishes with SMO
        (itself capped).
        """
        m = self.m
        if max_steps is None:
            max_steps = 4 * m + 100
        if (self._H is None or not self._P_valid or not self._P
                or self._updates > max(_REFACTOR_EVERY, len(self._P))):
            self._rebuild_inverse()
        self._P_valid = True
        K = self.cache.matrix
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
        if self.kkt_gap() <= tol + 1e-12 * kt:
            self.status = "optimal"
            return steps
        # the active-set result misses the tolerance (cap, barred index, rounding): finish by SMO
        steps += self.smo(tol)
        if self.status == "optimal":
            self.status = "smo_fallback"
        self._P_valid = False
        return steps
