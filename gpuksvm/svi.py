"""SVI — fast kernel SVM training via support vector identification (SPEC §3).

Mao, Fu, Wu & Hu, "Fast Kernel SVM Training via Support Vector Identification"
(papers/svi-support-vector-identification.txt).  Algorithm 1 of the paper:

1. draw ``n_subsets`` (M) disjoint random subsets of rate ``subset_rate`` (θ);
2. train a kernel SVM (hinge loss, same C and kernel) on each subset — the M
   trainings are one batched call of :func:`gpuksvm.solvers.smo.solve_batched`
   (one GPU launch, or parallel CPU workers);
3. average the M decision values over *all* training rows, eq. (1) — one kernel
   mat-vec (:func:`gpuksvm.kernels.kernel_matvec`) against the union of the
   sub-models' support vectors with a coefficient matrix, never an n×SV matrix;
4. keep the "margin support vectors", the rows with y·f̄(x) ≈ 1, here
   ``|y f̄(x) − 1| ≤ margin_tol`` with the guards of :func:`select_margin_rows`;
5. estimate β and b in closed form from eqs. (5)–(9):
   β = (I/(2C) + ΠK)⁻¹ Πy  (eq. 9),   b = (1/s) 1ᵀ(y − Kβ)  (eq. 7),
   a dense LU solve of size s (float64 whenever s ≤ ``_FLOAT64_SOLVE_MAX``);
6. predict sign(Σ_j β_j κ(x, x_j) + b).

Multi-class problems are split one-vs-one or one-vs-rest; the subsets are drawn
once over all rows (stratified by class) and restricted to each binary problem,
and the ensemble decision values of every binary problem come out of the same
single kernel mat-vec (one coefficient column per problem).
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state

from . import backend as bk
from . import linalg
from ._dask import is_dask_collection
from .base import DeviceMixin
from .calibration import ProbabilityMixin
from .kernels import Kernel, kernel_block, kernel_matvec, make_kernel
from .multiclass import binary_problems, problem_rows
from .solvers._blas import one_blas_thread
from .svc_surface import SVCSurfaceMixin, shape_of, sparse_like, warn_unconverged
from .validation import check_choice, check_param, encode_classes, validate_X_y

__all__ = ["SVI", "draw_subsets", "select_margin_rows", "closed_form_beta",
           "DEFAULT_MARGIN_TOL", "DEFAULT_MAX_MARGIN_SV", "DEFAULT_MIN_MARGIN_SV"]

#: Default band half-width τ of the margin rule |y f̄ − 1| ≤ τ (see the SVI
#: docstring and ``bench/results/svi_margin_tol.json`` for the evidence).
DEFAULT_MARGIN_TOL = 0.2
#: Default cap on the number of margin SVs per binary problem.
DEFAULT_MAX_MARGIN_SV = 5000
#: Default floor on the number of margin SVs per binary problem.
DEFAULT_MIN_MARGIN_SV = 10
#: Largest s for which the closed-form system is solved in float64 whatever the
#: working dtype (an s×s float64 matrix of 8192² entries is 512 MiB).
_FLOAT64_SOLVE_MAX = 8192
#: When no binary problem has more margin SVs than this, the CPU solves of
#: step 5 run with one BLAS thread (see :meth:`SVI._margin_stage`).
_SERIAL_BLAS_MAX_S = 512


# --------------------------------------------------------------------------- step 1
def draw_subsets(labels: np.ndarray, n_subsets: int, subset_rate: float, *, stratify: bool = True,
                 random_state: Any = None) -> list[np.ndarray]:
    """Draw ``n_subsets`` disjoint random subsets of rate ``subset_rate`` (Alg. 1, step 1).

    Parameters
    ----------
    labels : (n,) int array
        Class index of every row (used when ``stratify``).
    n_subsets : int
        M, the number of subsets.
    subset_rate : float in (0, 1]
        θ; each subset holds about θ·n rows.  ``n_subsets * subset_rate`` must
        not exceed 1 (the subsets are drawn without replacement).
    stratify : bool
        Draw θ·n_c rows of every class c into every subset (at least one row
        while the class has rows left), so that small classes appear in every
        subset.  Without it, rows are drawn regardless of class.
    random_state : int, RandomState or None

    Returns
    -------
    list of M sorted int64 arrays of row indices, pairwise disjoint.
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    if n_subsets * subset_rate > 1.0 + 1e-12:
        raise ValueError(f"n_subsets * subset_rate must be <= 1 for disjoint subsets, got "
                         f"{n_subsets} * {subset_rate} = {n_subsets * subset_rate:g}")
    rs = check_random_state(random_state)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_subsets)]
    if stratify:
        groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    else:
        groups = [np.arange(n)]
    for rows in groups:
        rows = rows[rs.permutation(rows.shape[0])]
        m = rows.shape[0]
        q = int(round(subset_rate * m))
        if stratify:
            q = max(q, 1)
        q = min(q, m // n_subsets) if m >= n_subsets else q
        if m < n_subsets and stratify:
            # fewer rows than subsets: one row each for the first m subsets,
            # starting at a random subset so no subset is favoured
            start = int(rs.randint(n_subsets))
            for j in range(m):
                parts[(start + j) % n_subsets].append(rows[j:j + 1])
            continue
        for j in range(n_subsets):
            parts[j].append(rows[j * q:(j + 1) * q])
    return [np.sort(np.concatenate(p)).astype(np.int64) if p else np.zeros(0, np.int64)
            for p in parts]


# --------------------------------------------------------------------------- step 4
def select_margin_rows(margin: np.ndarray, y: np.ndarray, margin_tol: float, *,
                       min_sv: int = DEFAULT_MIN_MARGIN_SV,
                       max_sv: int | None = DEFAULT_MAX_MARGIN_SV) -> tuple[np.ndarray, dict]:
    """Pick the margin support vectors from the functional margins y·f̄ (eq. 1).

    The rule: row i qualifies when ``|margin_i − 1| ≤ margin_tol``.  Guards, in
    this order:

    * **too many** — if more than ``max_sv`` rows qualify, keep the ``max_sv``
      rows closest to the margin (smallest ``|margin − 1|``);
    * **too few** — if fewer than ``min_sv`` rows qualify, take the ``min_sv``
      closest rows whatever their distance;
    * **both classes** — each class keeps at least ``max(1, min_sv // 2)`` rows
      (or all its rows, if it has fewer): its closest rows are added when
      missing.  A one-class selection would give β = 0 (Πy = 0).

    Parameters
    ----------
    margin : (n,) array of y_i f̄(x_i)
    y : (n,) array in {−1, +1}
    margin_tol : float ≥ 0
    min_sv, max_sv : int (``max_sv=None``: no cap)

    Returns
    -------
    rows : sorted int64 indices into ``margin``
    info : dict with ``n_candidates`` (rows inside the band), ``n_selected`` and
        ``guard`` (``None``, ``"max"``, ``"min"`` or ``"class"``)
    """
    margin = np.asarray(margin, dtype=np.float64)
    y = np.asarray(y)
    dist = np.abs(margin - 1.0)
    order = np.argsort(dist, kind="stable")
    n_cand = int(np.count_nonzero(dist <= margin_tol))
    guard = None
    n_take = n_cand
    if max_sv is not None and n_take > max_sv:
        n_take, guard = int(max_sv), "max"
    if n_take < min_sv:
        n_take, guard = min(int(min_sv), dist.shape[0]), "min"
    chosen = np.zeros(dist.shape[0], dtype=bool)
    chosen[order[:n_take]] = True
    per_class = max(1, int(min_sv) // 2)
    for label in (-1, 1):
        of_class = order[y[order] == label]
        need = min(per_class, of_class.shape[0]) - int(np.count_nonzero(chosen[of_class]))
        if need > 0:
            chosen[of_class[:per_class]] = True
            guard = "class"
    rows = np.flatnonzero(chosen).astype(np.int64)
    return rows, {"n_candidates": n_cand, "n_selected": int(rows.shape[0]), "guard": guard}


# --------------------------------------------------------------------------- step 5
def closed_form_beta(K: Any, y: Any, C: float) -> tuple[Any, float]:
    """β and b minimizing eq. (5): ½βᵀKβ + C‖y − Kβ − 1b‖².

    β = (I/(2C) + ΠK)⁻¹ Πy  (eq. 9, Π = I − 11ᵀ/s, so ΠK subtracts the mean row)
    b = (1/s) 1ᵀ(y − Kβ)    (eq. 7, from ∂Q/∂b = 0, eq. 6)

    The system matrix is not symmetric; it is solved by LU
    (:func:`gpuksvm.linalg.solve`), never by an explicit inverse.  Any
    solution of (9) also zeroes the β-gradient of eq. (8), and 1ᵀβ = 0.

    Parameters
    ----------
    K : (s, s) kernel matrix of the margin SVs (NumPy or CuPy)
    y : (s,) labels in {−1, +1} on the same device
    C : float > 0

    Returns
    -------
    beta : (s,) array on K's device, b : float
    """
    xp = bk.namespace_of(K)
    s = K.shape[0]
    A = K - K.mean(axis=0, keepdims=True)          # K̄ = Π K
    A[xp.arange(s), xp.arange(s)] += 1.0 / (2.0 * C)  # I/(2C) + K̄
    ybar = y - y.mean()                            # ȳ = Π y
    beta = linalg.solve(A, ybar)                   # eq. (9)
    b = float((y - K @ beta).mean())               # eq. (7)
    return beta, b


def average_submodels(results: list[list[tuple[np.ndarray, np.ndarray, float]]]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVI step 3's ensemble (eq. 1): ``f̄_p(x) = Σ_u W[u, p] κ(x_u, x) + b̄_p``.

    ``results[p]`` lists the sub-models ``(support rows, dual coefficients,
    intercept)`` of problem p.  Returns the union U of their support rows, the
    |U| × n_problems averaged coefficients W and the averaged intercepts b̄.
    """
    union = np.unique(np.concatenate([r[0] for res in results for r in res]))
    W = np.zeros((union.size, len(results)))
    bbar = np.zeros(len(results))
    for p, res in enumerate(results):
        for sup, coef, b in res:
            np.add.at(W[:, p], np.searchsorted(union, sup), coef)
            bbar[p] += b
        W[:, p] /= len(res)
        bbar[p] /= len(res)
    return union, W, bbar


def solve_margin_problem(Xs: Any, ys: np.ndarray, kernel: Kernel, C: float,
                         dtype: np.dtype) -> tuple[np.ndarray, float]:
    """SVI step 5 on the margin rows ``Xs`` (on their device): β (host float64) and b.

    The s×s system is formed and solved in float64 up to s = ``_FLOAT64_SOLVE_MAX``.
    """
    sdt = np.float64 if Xs.shape[0] <= _FLOAT64_SOLVE_MAX else dtype
    K = kernel_block(Xs, None, kernel, dtype=sdt)
    beta, b = closed_form_beta(K, bk.to_device(ys, bk.device_of(K), sdt), float(C))
    return np.asarray(bk.to_host(beta), dtype=np.float64), float(b)


def stack_margin_models(margin_rows: list[np.ndarray], betas: list[np.ndarray]
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The model over the union of the problems' margin rows: (support rows, coefficients),
    one coefficient row per problem (zeros where a row belongs to another problem)."""
    support = np.unique(np.concatenate(margin_rows))
    coef = np.zeros((len(margin_rows), support.size))
    for p, (glob, beta) in enumerate(zip(margin_rows, betas)):
        coef[p, np.searchsorted(support, glob)] = beta
    return support, coef


def problem_subsets(yidx: np.ndarray, subsets: list[np.ndarray], pos: int,
                    neg: int | None) -> tuple[np.ndarray, list[np.ndarray], dict]:
    """The sub-SVM training sets of one binary problem (SVI step 2).

    ``pos`` vs ``neg`` (one-vs-one) or vs the rest (``neg=None``): each subset
    restricted to the problem's rows, kept when it holds both classes.  When
    none does (tiny classes), one sub-model on the pooled subset rows.
    Returns the ±1 labels of all n rows, the kept row sets, and a summary for
    ``sub_models_``.
    """
    in_prob = np.ones(yidx.shape[0], bool) if neg is None else (yidx == pos) | (yidx == neg)
    yp = np.where(yidx == pos, 1.0, -1.0)
    subs, used = [], []
    for m, S in enumerate(subsets):
        S = S[in_prob[S]]
        if S.size and np.any(yp[S] > 0) and np.any(yp[S] < 0):
            subs.append(S)
            used.append(m)
    pooled = False
    if not subs:
        S = np.sort(np.concatenate(subsets))
        S = S[in_prob[S]]
        if not (np.any(yp[S] > 0) and np.any(yp[S] < 0)):
            raise ValueError("the subsets hold no row of one class of a binary problem; use "
                             "stratify=True or a larger subset_rate")
        subs, used, pooled = [S], [], True
    info = {"problem": (int(pos), None if neg is None else int(neg)), "subsets": used,
            "pooled": pooled, "subset_sizes": [int(S.size) for S in subs]}
    return yp, subs, info


# --------------------------------------------------------------------------- estimator
class SVI(DeviceMixin, SVCSurfaceMixin, ProbabilityMixin, ClassifierMixin, BaseEstimator):
    """Kernel SVM trained by support vector identification (SVI, SPEC §3).

    M sub-SVMs on disjoint θ-subsets vote (averaged decision values) on which
    training rows lie on the margin (y f̄ ≈ 1); a regularized least-squares
    problem on those s rows (eq. 5) gives the final weights β in closed form
    (eq. 9) and the bias b (eq. 7).  The model keeps only the s margin SVs, so
    prediction is cheaper than with the full SVM.

    **Margin rule and its default.**  The paper writes "y f̄ ≈ 1" and leaves the
    tolerance open.  Here a row is a margin SV when ``|y f̄ − 1| ≤ margin_tol``,
    capped at ``max_margin_sv`` rows (the closest ones) and floored at
    ``min_margin_sv`` (see :func:`select_margin_rows`).  τ trades accuracy for
    size: a wider band keeps more rows, which both lengthens the s³ solve and
    covers more of each class's region (far from every margin SV the decision
    function falls back to b).  The default τ = 0.2 comes from
    ``bench/svi_margin_tol.py --scale paper`` (results in
    ``bench/results/svi_margin_tol.json``): for each dataset the sub-SVM
    ensemble (M = 5, θ = 0.1) of three seeds, then steps 4–5 for
    τ ∈ {0.02, …, 1}, next to SVC on the same rows (test accuracy averaged over
    the seeds, #SV mean / largest; 2-core CPU, 2026-11-23):

    ============  ===============  ==================  ==================  ==================
    dataset       SVC              τ = 0.1             τ = 0.2             τ = 0.3
    ============  ===============  ==================  ==================  ==================
    ijcnn1 (50K)  98.62%, 1913 SV  98.19%, 626 / 653   98.35%, 1250/1318   98.44%, 1873/1979
    adult (32K)   85.09%, 11617    84.30%, 2883/2900   84.17%, 5000*       84.17%, 5000*
    two-sine 20K  92.25%, 3667     92.20%, 737 / 761   92.23%, 1455/1507   92.19%, 2184/2239
    digits        99.33%, 518      94.16%, 978 / 991   94.71%, 1114/1119   95.49%, 1162/1164
    digits ×5     99.33%, 2324     97.05%, 5131/5155   97.11%, 5734/5743   97.55%, 5896/5901
    ============  ===============  ==================  ==================  ==================

    (* = capped by ``max_margin_sv``.  ijcnn1 γ = 0.5, C = 512; adult
    γ = 0.05, C = 1; digits ⅔ train, γ = "scale", C = 10, one-vs-one; digits
    ×5 = the same training rows plus their four one-pixel shifts, 5,990 rows,
    about USPS's size; two-sine noise 0.35, γ = 1, C = 10.)  The rule of
    ``choose_default`` in ``bench/svi_margin_tol.py`` — no more SVs than SVC
    for every seed wherever some τ achieves it, then the smallest mean accuracy
    regret — picks τ = 0.2: at τ = 0.3 one ijcnn1 seed keeps more SVs (1,979)
    than SVC.  On ijcnn1 τ = 0.2 gives 98.31–98.40% over the seeds with a third
    fewer SVs than SVC; ``margin_tol=0.3`` buys ≈ 0.1 point for an SVC-sized
    model.

    **Small multi-class problems.**  On digits SVI stays 4–5 points below SVC
    at τ ≤ 0.3 whatever γ or C (γ ∈ {½, 1, 2}×"scale", C ∈ {1, 10, 100}
    checked; only τ ≥ 0.75, which keeps every row, closes the gap).  This
    is the method at this size, not the solve: the same steps 4–5 applied to
    the *exact* SVM's decision values (the "oracle" of the study) give 99.33%
    at every τ ≤ 0.5, so what fails is the identification by sub-SVMs of
    about 24 rows (1,198 rows, 45 pairs, θ = 0.1).  At USPS's size (digits ×5,
    ≈ 120 rows per sub-SVM) the gap shrinks to 1.8–2.3 points, near the
    paper's USPS gap (93.53% vs 94.86%, Table II); the paper's gaps on MNIST
    and LETTER, with far larger sub-SVMs, are 0.2–0.3 points.  On small data
    use a larger ``subset_rate`` (``n_subsets * subset_rate ≤ 1``; digits,
    θ = 0.2: 96.7–97.5% for τ = 0.1–0.3) or ``multi_class="ovr"`` (every
    sub-SVM sees all classes; digits: 1–1.5 points better than one-vs-one).

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear", "sigmoid"} or Kernel, default="rbf"
    gamma : float or {"scale", "auto", "mean_dist"}, default="scale"
    degree : float, default=3
    coef0 : float, default=0.0
    C : float, default=1.0
        Regularization of the sub-SVMs (hinge loss) and of the least-squares
        problem (5).
    n_subsets : int, default=5
        M, the number of disjoint subsets (paper: 5).
    subset_rate : float, default=0.1
        θ, fraction of the rows in each subset (paper: 0.1).
        ``n_subsets * subset_rate`` must be ≤ 1.
    stratify : bool, default=True
        Draw every subset stratified by class (see :func:`draw_subsets`).
    margin_tol : float, default=0.2
        τ of the margin rule |y f̄ − 1| ≤ τ.
    max_margin_sv : int or None, default=5000
        Cap on the margin SVs of each binary problem (closest to the margin
        first).  ``None``: no cap (the s×s solve costs O(s³)).
    min_margin_sv : int, default=10
        Floor on the margin SVs of each binary problem; each class keeps at
        least ``min_margin_sv // 2`` of them (at least 1).
    multi_class : {"ovo", "ovr"}, default="ovo"
        One-vs-one (K(K−1)/2 problems, as the paper's LibSVM baseline) or
        one-vs-rest (K problems) for more than two classes.
    break_ties : bool, default=False
        One-vs-one with more than two classes: ``predict`` returns the
        arg-max of ``decision_function`` (votes, then confidences) instead of
        LIBSVM's vote (most votes, then the lowest class index), as
        scikit-learn's SVC; the default is SVC's.  (Until issue 18 SVI always
        predicted the arg-max.  ``SVI(C=10)`` on digits scaled to [0, 1],
        stratified ⅔/⅓ splits, seeds 0–2: test accuracy 94.99/95.49/94.49%
        with True, 94.82/95.33/94.66% with False; 0.2–0.7% of the test rows
        have a tie of votes.)
    tol : float, default=1e-3
        Stopping tolerance of the sub-SVM solver.
    max_iter : int or None, default=None
        Iteration cap of the sub-SVM solver (None: the solver's default).  A
        sub-SVM stopped by it raises a ``ConvergenceWarning`` (see ``converged_``).
    probability : bool, default=False
        Fit Platt sigmoids on 5-fold out-of-fold decision values
        (:mod:`gpuksvm.calibration`; five more SVI fits) for ``predict_proba``.
    device : str, default="auto"
    dtype : {None, float32, float64}, default=None
        Working dtype (None: float32 on GPU, float64 on CPU).  The s×s solve is
        done in float64 whenever s ≤ 8192.
    random_state : int, RandomState or None, default=None
        Seeds the subset draw; a given seed reproduces the model on a device.
    n_jobs : int or None, default=None
        CPU workers of the sub-SVM solver.
    verbose : int, default=0

    Attributes
    ----------
    classes_ : (n_classes,) array
    n_features_in_ : int
    kernel_ : Kernel
        The kernel with γ resolved.
    support_ : (n_SV,) int64 array
        Training-row indices of the margin SVs kept by the model (the union
        over the binary problems).
    support_vectors_ : (n_SV, d) array (sparse if the input was sparse, on CPU)
    coef_ : (n_problems, d) array, linear kernel only
        Read-only primal weights derived from ``dual_coef_`` (sparse after a
        sparse fit).
    n_support_ : (n_classes,) int array
        Support vectors per class.
    dual_coef_ : (n_problems, n_SV) array or CSR matrix
        β of every binary problem over ``support_vectors_`` (zero where a
        vector is not a margin SV of that problem); α_i = y_i β_i.  A CSR
        matrix (host) after a fit on sparse X.  It is the model: predictions
        are computed from it (and ``intercept_``) at every call.
    intercept_ : (n_problems,) array
        b of every binary problem.
    margin_support_ : list of int64 arrays
        The rows selected by the margin rule for each binary problem (global
        training-row indices); every one satisfies |y f̄ − 1| ≤ margin_tol
        unless a guard of :func:`select_margin_rows` applied.
    problems_ : list of (int, int or None)
        (positive class index, negative class index or None = rest) of each
        binary problem.  Binary: [(1, 0)].
    subsets_ : list of int64 arrays
        The M disjoint subsets drawn.
    sub_models_ : list of dict
        Per binary problem: the sub-SVM summaries (``n_support``,
        ``objective``, ``n_iter``, ``converged``, ``subsets`` used,
        ``pooled``), the margin statistics (``n_candidates``, ``n_selected``,
        ``guard``), the ensemble's training accuracy, and timings.
    probA_, probB_ : (n_problems,) arrays
        Platt sigmoid parameters (``probability=True`` only).
    n_iter_ : (n_problems,) int64 array
        Largest sub-SVM iteration count of each binary problem.
    converged_ : (n_problems,) bool array
        Whether every sub-SVM of each binary problem reached ``tol``.
    fit_time_ : dict
        Seconds spent in each stage (``subsets``, ``sub_svms``, ``ensemble``,
        ``solve``).

    Examples
    --------
    >>> from gpuksvm import SVI
    >>> from gpuksvm.datasets import make_two_sines
    >>> X, y = make_two_sines(1000, random_state=0)
    >>> clf = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu").fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    >>> clf.support_vectors_.shape[0] < 1000
    True
    """

    def __init__(self, kernel: str | Kernel = "rbf", gamma: Any = "scale", degree: float = 3,
                 coef0: float = 0.0, C: float = 1.0, n_subsets: int = 5, subset_rate: float = 0.1,
                 stratify: bool = True, margin_tol: float = DEFAULT_MARGIN_TOL,
                 max_margin_sv: int | None = DEFAULT_MAX_MARGIN_SV,
                 min_margin_sv: int = DEFAULT_MIN_MARGIN_SV, multi_class: str = "ovo",
                 break_ties: bool = False, tol: float = 1e-3, max_iter: int | None = None,
                 probability: bool = False, device: str = "auto", dtype: Any = None, random_state: Any = None,
                 n_jobs: int | None = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.n_subsets = n_subsets
        self.subset_rate = subset_rate
        self.stratify = stratify
        self.margin_tol = margin_tol
        self.max_margin_sv = max_margin_sv
        self.min_margin_sv = min_margin_sv
        self.multi_class = multi_class
        self.break_ties = break_ties
        self.tol = tol
        self.max_iter = max_iter
        self.probability = probability
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    def _check_params(self) -> None:
        check_param("C", self.C, Real, low=0.0, closed="neither")
        check_param("n_subsets", self.n_subsets, Integral, low=1)
        check_param("subset_rate", self.subset_rate, Real, low=0.0, high=1.0, closed="right")
        if self.n_subsets * self.subset_rate > 1.0 + 1e-12:
            raise ValueError(f"n_subsets * subset_rate must be <= 1 (disjoint subsets), got "
                             f"{self.n_subsets} * {self.subset_rate}")
        check_param("margin_tol", self.margin_tol, Real, low=0.0)
        check_param("max_margin_sv", self.max_margin_sv, Integral, low=1, allow_none=True)
        check_param("min_margin_sv", self.min_margin_sv, Integral, low=1)
        if self.max_margin_sv is not None and self.min_margin_sv > self.max_margin_sv:
            raise ValueError(f"min_margin_sv ({self.min_margin_sv}) must not exceed "
                             f"max_margin_sv ({self.max_margin_sv})")
        check_choice("multi_class", self.multi_class, ("ovo", "ovr"))
        check_choice("break_ties", self.break_ties, (True, False))
        check_param("tol", self.tol, Real, low=0.0, closed="neither")
        check_param("max_iter", self.max_iter, Integral, low=1, allow_none=True)
        check_choice("probability", self.probability, (True, False))
        if not isinstance(self.stratify, (bool, np.bool_)):
            raise ValueError(f"stratify must be True or False, got {self.stratify!r}")

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> "SVI":
        """Fit the SVI model (Algorithm 1 of the paper).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)

        Returns
        -------
        self
        """
        if is_dask_collection(X):  # issue 9: sub-SVMs on the workers, X never gathered
            from . import distributed

            return distributed.fit_svi(self, X, y)
        self._check_params()
        state = self._ensemble_stage(X, y)
        self._margin_stage(state, float(self.margin_tol))
        if self.probability:
            self._fit_probability(X, y)
        return self

    def _ensemble_stage(self, X: Any, y: Any) -> dict:
        """Steps 1–3: subsets, sub-SVMs, averaged decision values on all rows.

        Returns the state that :meth:`_margin_stage` turns into a model (kept
        apart so that ``bench/svi_margin_tol.py`` can study τ on one ensemble).
        """
        import time

        from .solvers.smo import solve_batched

        X, y, _kind = validate_X_y(self, X, y)
        classes, yidx = encode_classes(y)
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        kernel = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X)
        sparse_fit = bk.is_sparse(X)
        if dev.is_gpu and bk.is_sparse(X):
            X = X.toarray()  # the GPU paths are dense
        Xd = bk.to_device(X, dev, dt)
        n = Xd.shape[0]
        C = float(self.C)
        times = {}

        t0 = time.perf_counter()
        subsets = draw_subsets(yidx, int(self.n_subsets), float(self.subset_rate),
                               stratify=bool(self.stratify), random_state=self.random_state)
        problems = binary_problems(classes.shape[0], self.multi_class)
        times["subsets"] = time.perf_counter() - t0

        # step 2: the sub-SVMs of every binary problem (problems × subsets) in
        # ONE batched call, each sub-problem with its own ±1 labels
        t0 = time.perf_counter()
        sub_info, all_subs, all_labels, owner = [], [], [], []
        for p, (pos, neg) in enumerate(problems):
            yp, subs, info = problem_subsets(yidx, subsets, pos, neg)
            all_subs += subs
            all_labels += [yp[S] for S in subs]
            owner += [p] * len(subs)
            sub_info.append(info)
        if self.verbose:
            print(f"[SVI] {len(all_subs)} sub-SVMs ({len(problems)} binary problems) in one batch")
        res_all = solve_batched(Xd, all_labels, all_subs, kernel, C, tol=float(self.tol),
                                max_iter=self.max_iter, device=dev, dtype=dt, n_jobs=self.n_jobs,
                                warn_convergence=False)
        warn_unconverged(res_all, self.max_iter, float(self.tol), "SVI sub-SVMs")
        owner = np.asarray(owner)
        results = []
        for p in range(len(problems)):
            res = [res_all[i] for i in np.flatnonzero(owner == p)]
            sub_info[p].update({"objective": [float(r.objective) for r in res],
                                "n_iter": [int(r.n_iter) for r in res],
                                "converged": [bool(r.converged) for r in res]})
            res = [(np.asarray(bk.to_host(r.support), dtype=np.int64).ravel(),
                    np.asarray(bk.to_host(r.dual_coef), dtype=np.float64).ravel(),
                    float(r.intercept)) for r in res]
            sub_info[p]["n_support"] = [int(r[0].size) for r in res]
            results.append(res)
        times["sub_svms"] = time.perf_counter() - t0

        # step 3: f̄ for every problem on all rows — ONE kernel mat-vec against
        # the union U of all sub-models' SVs with a |U| × n_problems coefficient
        # matrix W:  f̄_p(x) = Σ_u W[u, p] κ(x_u, x) + b̄_p   (eq. 1)
        t0 = time.perf_counter()
        union, W, bbar = average_submodels(results)
        if union.size:
            F = kernel_matvec(Xd, Xd[bk.to_device(union, dev)], bk.to_device(W.astype(dt), dev),
                              kernel, dtype=dt)
            F = np.asarray(bk.to_host(F), dtype=np.float64).reshape(n, len(problems)) + bbar
        else:
            F = np.tile(bbar, (n, 1))
        times["ensemble"] = time.perf_counter() - t0

        return {"X": X, "Xd": Xd, "yidx": yidx, "classes": classes, "kernel": kernel, "dev": dev,
                "dtype": dt, "sparse": sparse_fit, "subsets": subsets, "problems": problems, "F": F,
                "sub_info": sub_info, "times": times}

    def _margin_stage(self, state: dict, margin_tol: float) -> None:
        """Steps 4–5: margin SVs, closed-form β and b; sets the fitted attributes."""
        import copy
        import time

        X, Xd, yidx, F = state["X"], state["Xd"], state["yidx"], state["F"]
        dev, dt, kernel, problems = state["dev"], state["dtype"], state["kernel"], state["problems"]
        sub_info = copy.deepcopy(state["sub_info"])
        times = dict(state["times"])

        t0 = time.perf_counter()
        margin_rows, labels = [], []
        for p, (pos, neg) in enumerate(problems):  # step 4, every problem
            rows, yp = problem_rows(yidx, pos, neg)
            margin = yp * F[rows, p]
            sel, info = select_margin_rows(margin, yp, margin_tol,
                                           min_sv=int(self.min_margin_sv),
                                           max_sv=None if self.max_margin_sv is None
                                           else int(self.max_margin_sv))
            margin_rows.append(rows[sel])
            labels.append(yp[sel])
            sub_info[p].update(info)
            sub_info[p]["ensemble_train_accuracy"] = float(np.mean(margin > 0))

        # step 5, every problem.  Many small systems (one-vs-one): one BLAS
        # thread each — threaded BLAS on s ≲ 500 only adds hand-off costs
        # (10× slower on a busy 2-core CPU, measured on digits' 45 pairs)
        betas, intercepts = [], []
        small = not dev.is_gpu and max(r.size for r in margin_rows) <= _SERIAL_BLAS_MAX_S
        with one_blas_thread(small):
            for glob, yp in zip(margin_rows, labels):
                beta, b = solve_margin_problem(Xd[bk.to_device(glob, dev)], yp, kernel, self.C, dt)
                betas.append(beta)
                intercepts.append(b)
        times["solve"] = time.perf_counter() - t0

        # the model: the union of the problems' margin SVs, one coefficient row
        # per problem (zeros where a vector belongs to another problem)
        support, coef = stack_margin_models(margin_rows, betas)

        self.classes_ = state["classes"]
        self.kernel_ = kernel
        self.problems_ = problems
        self.subsets_ = state["subsets"]
        self.sub_models_ = sub_info
        self.margin_support_ = margin_rows
        self.support_ = support
        self.n_support_ = np.bincount(yidx[support], minlength=len(self.classes_)).astype(np.int32)
        sv = X[support]
        self.support_vectors_ = sv.astype(dt) if bk.is_sparse(sv) else bk.to_device(sv, dev, dt)
        self.dual_coef_ = (sparse_like(coef.astype(dt), True) if state["sparse"]
                           else bk.to_device(coef.astype(dt), dev))
        self.intercept_ = bk.to_device(np.asarray(intercepts, dtype=dt), dev)
        self.n_iter_ = np.array([max(info["n_iter"]) for info in sub_info], dtype=np.int64)
        self.converged_ = np.array([all(info["converged"]) for info in sub_info])
        self.fit_time_ = times
        self._set_fitted_device(dev)

    # ------------------------------------------------------------------ model (SVCSurfaceMixin)
    def _problem_coef(self) -> Any:
        """(n_SV, n_problems) β of every problem: ``dual_coef_`` transposed (on its device)."""
        dual = self.dual_coef_
        if bk.is_sparse(dual):
            dual = dual.toarray()
        n_sv = self.support_vectors_.shape[0]
        if dual.shape != (len(self.problems_), n_sv) or shape_of(self.intercept_) != (dual.shape[0],):
            raise ValueError(f"The fitted model of SVI was altered: dual_coef_ {dual.shape}, "
                             f"intercept_ {shape_of(self.intercept_)}, {n_sv} support vectors, "
                             f"{len(self.problems_)} binary problems")
        return bk.namespace_of(dual).ascontiguousarray(dual.T)

    def _multiclass_scheme(self) -> str:
        return self.multi_class

    def _decision_shape(self) -> str:
        return "ovr"  # one-vs-one SVI always returns the (n, n_classes) scores

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
