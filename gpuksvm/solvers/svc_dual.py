"""The binary C-SVC dual and what every SMO engine shares about it.

The dual of the binary C-SVC (LIBSVM's form, Chang & Lin 2011, eq. 2):

    min_α  ½ αᵀQα − eᵀα   s.t.  yᵀα = 0,  0 ≤ αᵢ ≤ Cᵢ,     Q_ij = yᵢyⱼK_ij,

with Cᵢ = C·wᵢ (sample/class weights).  Every solver tracks
Fᵢ = −yᵢ∇ᵢ (∇ = Qα − e, so F = y at α = 0); the optimality gap is

    m(α) − M(α),   m = max_{i∈I_up} Fᵢ,   M = min_{i∈I_low} Fᵢ          (FCL05, eq. 6)
    I_up  = {i : αᵢ < Cᵢ, yᵢ = +1  or  αᵢ > 0, yᵢ = −1}
    I_low = {i : αᵢ < Cᵢ, yᵢ = −1  or  αᵢ > 0, yᵢ = +1}

and a pair step (i ∈ I_up, j ∈ I_low) moves αᵢ += yᵢt, αⱼ −= yⱼt with
t = min((Fᵢ − Fⱼ)/η, box), η = K_ii + K_jj − 2K_ij (floored at 1e-12), after
which F_k −= t (K_ik − K_jk) for every k.  The second-order working-set rule
(Fan, Chen & Lin 2005, "WSS 2", eq. 13) picks i = argmax_{I_up} F and
j = argmax_{j∈I_low, Fⱼ<Fᵢ} (Fᵢ − Fⱼ)²/η_ij.

This module holds what the engines (:mod:`gpuksvm.solvers.smo.host`,
:mod:`gpuksvm.solvers.smo.working_set`) and their dispatcher
(:mod:`gpuksvm.solvers.smo.engines`) share: the result of one problem
(:class:`SMOResult`), a problem's data — its rows, or with
``kernel="precomputed"`` (:data:`PRECOMPUTED`) its Gram block — and kernel
rows, the box Cᵢ, the intercept and the objective from F, the dual objective
of a solution, and the convergence warnings.

The decision function of a solved problem is
``f(x) = Σ_j dual_coef_j κ(x_{support_j}, x) + intercept``; ``f > 0`` → class +1.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from sklearn.exceptions import ConvergenceWarning

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_diag, kernel_matvec

__all__ = ["SMOResult", "PRECOMPUTED", "dual_objective", "warn_unconverged", "svc_max_iter_message",
           "is_precomputed", "problem_data", "kernel_rows", "kernel_diagonal", "box_bounds", "intercept_from_F",
           "objective_from_F", "make_smo_result"]

#: ``kernel=PRECOMPUTED``: ``X`` is the (n, n) Gram matrix K(X, X) of the rows, not their features
PRECOMPUTED = "precomputed"


@dataclass
class SMOResult:
    """Solution of one binary C-SVC dual.

    Attributes
    ----------
    support : ndarray of int64
        Global row indices (into the ``X`` passed to the solver) of the
        support vectors (αᵢ > 0), ascending.
    dual_coef : array
        ``yᵢ αᵢ`` for those rows (on the device the problem was solved on).
    intercept : float
        ``b`` of ``f(x) = Σ dual_coef_j κ(x_j, x) + b``.
    objective : float
        Dual objective ``½ αᵀQα − eᵀα`` (LIBSVM's sign: negative).
    n_iter : int
        Two-variable updates (libsvm, smo, and summed inner steps of the
        working-set solver).
    converged : bool
        The gap reached ``tol`` before ``max_iter``.
    max_iter_reached : bool
        The solver stopped because it reached ``max_iter`` (the working-set
        solver may also stop unconverged when its objective stalls).
    solver : str
        Which engine ran: ``"libsvm"``, ``"smo"``, ``"working_set-cpu"`` or
        ``"working_set-cuda"``.
    n_rounds : int
        Outer rounds of the working-set solver (0 for the other solvers).
    """

    support: np.ndarray
    dual_coef: Any
    intercept: float
    objective: float
    n_iter: int
    converged: bool
    solver: str = "libsvm"
    n_rounds: int = 0
    max_iter_reached: bool = False


def is_precomputed(kernel: Any) -> bool:
    return isinstance(kernel, str) and kernel == PRECOMPUTED


def _host_rows(X: Any, rows: np.ndarray) -> Any:
    """Rows of X as a host array / CSR matrix."""
    X = bk.to_host(X)
    if sp.issparse(X):
        return sp.csr_matrix(X)[rows]
    return np.asarray(X)[rows]


def problem_data(X: Any, S: np.ndarray, kernel: Kernel | str) -> Any:
    """What the host solvers need of problem ``S``: its rows of X (float64 or CSR),
    or with a precomputed kernel its Gram block K[S, S] (float64)."""
    if is_precomputed(kernel):
        G = np.asarray(bk.to_host(X))
        if not (S.size == G.shape[0] and np.array_equal(S, np.arange(S.size))):
            G = G[np.ix_(S, S)]
        return np.ascontiguousarray(G, dtype=np.float64)
    Xs = _host_rows(X, S)
    return Xs if sp.issparse(Xs) else np.ascontiguousarray(Xs, dtype=np.float64)


def kernel_rows(Xs: Any, rows: Any, cols: Any, kernel: Kernel | str, cols_data: Any = None) -> np.ndarray:
    """K between the problem's ``rows`` and ``cols`` (index arrays or slices into ``Xs`` of
    :func:`problem_data`): computed, or looked up in the Gram block.  ``cols_data`` may
    hold ``Xs[cols]`` already gathered."""
    if is_precomputed(kernel):
        return np.asarray(Xs[rows][:, cols], dtype=np.float64)
    return kernel_block(Xs[rows], Xs[cols] if cols_data is None else cols_data, kernel, dtype=np.float64)


def kernel_diagonal(Xs: Any, kernel: Kernel | str) -> np.ndarray:
    if is_precomputed(kernel):
        return np.array(np.diagonal(Xs), dtype=np.float64)
    return np.asarray(kernel_diag(Xs, kernel, dtype=np.float64), dtype=np.float64)


def box_bounds(C: float, w: np.ndarray | None, n: int) -> np.ndarray:
    """Upper bounds Cᵢ = C·wᵢ (0 where wᵢ = 0, also for C = inf)."""
    if w is None:
        return np.full(n, float(C))
    with np.errstate(invalid="ignore"):
        return np.where(w > 0, float(C) * w, 0.0)


def intercept_from_F(F: np.ndarray, alpha: np.ndarray, y: np.ndarray, Cv: np.ndarray) -> float:
    """b = −ρ with LIBSVM's ρ: mean of −Fᵢ over free αᵢ, else the middle of the bounds."""
    up_b = alpha >= Cv * (1 - 1e-12)
    lo_b = alpha <= 0
    free = ~(up_b | lo_b)
    if np.any(free):
        return float(np.mean(F[free]))
    # −Fᵢ = yᵢ∇ᵢ; LIBSVM: ub = min over (α=C, y=−1) ∪ (α=0, y=+1), lb = max over the rest
    yg = -F
    ub_set = (up_b & (y < 0)) | (lo_b & (y > 0))
    lb_set = (up_b & (y > 0)) | (lo_b & (y < 0))
    ub = np.min(yg[ub_set]) if np.any(ub_set) else np.inf
    lb = np.max(yg[lb_set]) if np.any(lb_set) else -np.inf
    return float(-(ub + lb) / 2.0)


def objective_from_F(F: np.ndarray, alpha: np.ndarray, y: np.ndarray) -> float:
    """½αᵀQα − eᵀα = ½ Σ αᵢ(∇ᵢ − 1) with ∇ᵢ = −yᵢFᵢ."""
    return float(0.5 * np.dot(alpha, -y * F - 1.0))


def dual_objective(X: Any, support: np.ndarray, dual_coef: Any, kernel: Kernel | str) -> float:
    """½ cᵀK_SSc − Σ|c| for dual coefficients c = y∘α on the support rows
    (``kernel="precomputed"``: X is the Gram matrix of the rows)."""
    if sp.issparse(dual_coef):
        dual_coef = dual_coef.toarray()
    c = np.asarray(bk.to_host(dual_coef), dtype=np.float64).ravel()
    if c.size == 0:
        return 0.0
    Ks = problem_data(X, np.asarray(support, dtype=np.int64), kernel)
    # K_SS·c in row blocks of the memory budget: K_SS itself is 265 MB at ijcnn1's 5,756 SVs
    Kc = Ks @ c if is_precomputed(kernel) else kernel_matvec(Ks, Ks, c, kernel, dtype=np.float64)
    return float(0.5 * c @ np.asarray(bk.to_host(Kc), dtype=np.float64) - np.abs(c).sum())


def make_smo_result(S: np.ndarray, alpha: np.ndarray, y: np.ndarray, b: float, obj: float, n_iter: int,
                 converged: bool, solver: str, xp=np, n_rounds: int = 0, dtype=np.float64,
                 max_iter_reached: bool = False) -> SMOResult:
    sv = np.flatnonzero(alpha > 0)
    coef = (y[sv] * alpha[sv]).astype(dtype)
    return SMOResult(support=S[sv].astype(np.int64), dual_coef=xp.asarray(coef), intercept=float(b),
                     objective=float(obj), n_iter=int(n_iter), converged=bool(converged),
                     solver=solver, n_rounds=int(n_rounds), max_iter_reached=bool(max_iter_reached))


def svc_max_iter_message(max_iter: int | None) -> str:
    """scikit-learn SVC's sentence for a solver stopped by ``max_iter`` (tests match it)."""
    return (f"Solver terminated early (max_iter={-1 if max_iter is None else int(max_iter)}).  "
            "Consider pre-processing your data with StandardScaler or MinMaxScaler.")


def warn_unconverged(converged: Sequence[bool], max_iter_reached: Sequence[bool], max_iter: int | None,
                     tol: float, owner: str) -> None:
    """One ``ConvergenceWarning`` when some binary problems' solvers did not converge.

    ``converged[p]`` / ``max_iter_reached[p]``: whether problem p's solver
    reached ``tol`` / was stopped by ``max_iter`` (:class:`SMOResult`).  When
    ``max_iter`` stopped one the message starts with scikit-learn SVC's own
    sentence (:func:`svc_max_iter_message`).
    """
    bad = [p for p, ok in enumerate(converged) if not ok]
    if not bad:
        return
    if any(max_iter_reached[p] for p in bad):
        head = svc_max_iter_message(max_iter)
    else:
        head = "Solver stopped making progress before reaching tol."
    warnings.warn(f"{head} ({owner}: {len(bad)} of {len(converged)} binary problem(s) stopped before "
                  f"the optimality gap reached tol={tol:g}; converged_ records which.)",
                  ConvergenceWarning, stacklevel=3)
