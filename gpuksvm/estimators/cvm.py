"""Core Vector Machine: two-class and one-class L2-SVMs as minimum enclosing balls (SPEC §2).

Tsang, Kwok & Cheung (2005).  With a kernel of constant diagonal κ(x,x) = κ
(RBF; or any kernel normalized as κ(x,z)/√(κ(x,x)κ(z,z))) the L2-SVM duals are
MEB problems  max −αᵀK̃α, α ≥ 0, Σα = 1  in the feature space of a transformed
kernel k̃ with constant diagonal κ̃:

* two-class (eq. 8–10): the primal

      min ‖w‖² + b² − 2ρ + C Σᵢ ξᵢ²   s.t.  yᵢ(wᵀφ(xᵢ) + b) ≥ ρ − ξᵢ       (eq. 8)

  has the dual with k̃(zᵢ,zⱼ) = yᵢyⱼκ(xᵢ,xⱼ) + yᵢyⱼ + δᵢⱼ/C, κ̃ = κ + 1 + 1/C;
  recovery (eq. 11)  w = Σαᵢyᵢφ(xᵢ), b = Σαᵢyᵢ, ξᵢ = αᵢ/C, ρ = αᵀK̃α;
  decision f(x) = Σαᵢyᵢκ(xᵢ,x) + b (on the scale of ρ, not 1);
* one-class (eq. 7):  k̃ = κ + δᵢⱼ/C, κ̃ = κ + 1/C;  f(x) = Σαᵢκ(xᵢ,x) − ρ.

**C is the L2-SVM's C, not SVC's.**  Dividing eq. 8 by ρ² (w' = w/ρ, …) and
minimizing over ρ turns it into the squared-hinge SVM with a regularized bias

      min ½‖w'‖² + ½b'² + (C/2) Σᵢ max(0, 1 − yᵢf'(xᵢ))²,   f = ρ f',

i.e. LIBLINEAR's L2-loss SVM with C_LIBLINEAR = C/2 and the bias as a
feature of value 1 (``LinearSVC(loss="squared_hinge", C=C/2)`` on the
explicit feature map — the reference of the tests).  SVC's C weighs the
slacks ξ, this C their squares, so the two agree on points with ξ ≈ 1 and
the L2-SVM punishes gross violators harder.  Measured (γ = 0.05, adult,
8,000 rows, exact L2 dual): C = 0.3 → 84.8 %, 1 → 84.8 %, 3 → 84.5 %,
10 → 83.7 %, 30 → 82.6 % (SVC's usual C = 1: 84.6 %); the default C = 1
is the L2-SVM counterpart of SVC's default on standardized data.  Every
misclassified or margin-violating row is a support vector of an L2-SVM (no
box bounds αᵢ), so noisy data keep most rows: adult keeps ~60 % of its rows,
a checkerboard with 20 % flipped labels nearly all of them.

The core-set algorithm (§4, Bădoiu–Clarkson) and the QP on the core set are
in :func:`gpuksvm.solvers.cvm.meb.fit_core_set` and
:mod:`gpuksvm.solvers.cvm.simplex_qp`.  It stops on the relative duality gap of
the L2-SVM (``tol``), not on a fixed ε of the ball: with the primal value P
of (w, b) from α and ρ = αᵀK̃α, and the dual value D = −αᵀK̃α,

      (P − D)/|D| ≤ tol,   P − D = C Σᵢ max(0, ρ − yᵢf(xᵢ))² − ‖α‖²/C,

the sum over the training rows estimated from the furthest-point search's
samples for the rows outside the core set.  When it stops for another reason
(``max_iter``, ``max_core_size``, a QP that cannot reach the target)
``stop_reason_`` says so and a ``ConvergenceWarning`` gives the gap reached.

The samples of the search and of the initial pair are drawn by position in
an order of the rows by a seeded hash of their contents
(:mod:`gpuksvm.solvers.row_order`, one O(n) pass and a sort per fit,
``fit_times_["row_order"]``), and ties go to the earlier row of that order:
the same rows in any order — a file sorted by label, shuffled — give the same
core set and the same model.

Multi-class: one-vs-one by default.  Each pairwise problem only holds the rows
of two classes, so its core set (and K̃_S) is smaller and its ball tighter than
in a one-vs-rest problem, the sampled search stays cheap, and voting needs no
calibration between problems whose decision values live on different scales
(ρ differs per problem) — which is also what LibCVM (built on LIBSVM) does.
``multi_class="ovr"`` is available; its decision values are divided by each
problem's ρ so that the margin sits at 1 in every problem before the arg-max.

:class:`CVM` has scikit-learn SVC's prediction surface
(:class:`~gpuksvm.estimators.svc_surface.SVCSurfaceMixin`: ``decision_function_shape``,
``break_ties``, ``coef_`` for a linear kernel — w of eq. 11 in the normalized
kernel's feature space, see :attr:`CVM.coef_`); its decision values are the
normalized-kernel expansion above (``_problem_decisions``).  Per-problem
fitted attributes are per problem also for one problem: arrays of
shape (n_problems,) and lists of n_problems entries, in the order of
``problems_``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sklearn.base import ClassifierMixin, OutlierMixin, clone
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.estimators.cvm_base import CVMBase, fit_cvm
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.estimators.params import DEPRECATED, positive_floats, shared_parameter_doc
from gpuksvm.estimators.base import fit_context
from gpuksvm.scaleout.dispatch import dask_dispatch
from gpuksvm.estimators.svc_surface import DecisionRows, SVCSurfaceMixin
from gpuksvm.array.validation import encode_classes, validate_X, validate_X_y

__all__ = ["CVM", "OneClassCVM", "fit_cvm_path"]

class CVM(ClassifierMixin, CVMBase, SVCSurfaceMixin):
    """Core Vector Machine classifier (two-class L2-SVM as an MEB; SPEC §2).

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear"} or Kernel, default="rbf"
        Kernels whose κ(x, x) is not constant (poly, linear) need ``normalize=True``.
    gamma : "scale", "auto", "mean_dist" or float, default="scale"
        "scale" = 1/(d·Var(X)) as in :class:`~gpuksvm.KernelSVC` and
        :class:`~gpuksvm.LLSVM`; "mean_dist" = 1/β with β the mean squared
        distance between rows (CVM paper §5, LibCVM's default).  With
        ``task="one_class"`` pass "mean_dist", :class:`OneClassCVM`'s default
        (with "scale" its outlier threshold flags several times more inliers).
    degree : int, default=3
    coef0 : float, default=0.0
        Polynomial kernel parameters (scikit-learn SVC's defaults: set
        ``coef0`` for a polynomial kernel).
    C : float, default=1.0
        The L2-SVM's C: the weight of the *squared* slacks in eq. 8 (it
        enters K̃ as 1/C on the diagonal).  Not SVC's C — see the module
        docstring for the mapping (squared-hinge SVM with C/2).  Measured on
        standardized data with the default γ, against ``SVC()``'s defaults:
        adult (5,000 rows) 84.9 % vs 84.9 %, ijcnn1 (5,000 rows) 95.5 % vs
        95.5 %, digits 98.3 % vs 98.5 %, breast cancer 97.7 % vs 97.7 %
        (C = 0.3 loses 1–2 points on the last three, C = 10 loses 1.8 on adult).
    tol : float, default=1e-2
        Stop when the L2-SVM's relative duality gap (P − D)/|D| is at most
        ``tol`` (module docstring).  Measured on adult (4,000 rows, C = 1):
        tol = 0.1 → 84.1 %, 0.01 → 84.6 % (the exact L2-SVM: 84.6 %), at
        1.2× the time.
    sample_size : int or None, default=59
        Rows per sample of the furthest-point search (probabilistic speed-up:
        the furthest of 59 random rows is among the furthest 5 % with
        probability 0.95, paper §4.1.2); None scans every row (exact search;
        on a GPU one fused kernel).  When the problem has at most
        ``sample_size * n_tries`` rows the search is exact.
    n_tries : int, default=7
        Samples drawn per iteration (LibCVM: 7 fresh samples before declaring
        convergence): converged when every sample's estimate of the gap of the
        rows outside the core set is within its half of ``tol``; otherwise the
        violators of the samples that are not (at most 4·``sample_size``)
        join the core set.
    max_iter : int, default=100000
        Maximum number of search iterations that add core vectors.
    max_core_size : int, default=50000
        Cap on |S| (LibCVM's); reaching it stops the fit with
        ``stop_reason_ = "max_core_size"`` and a warning.
    cache_size : float or None, default=None
        MB for the K̃ rows of the core-set QP (float32 rows beyond 3,072 core
        vectors; |S|²·4 bytes hold them all: 1.6 GB for 20,000 core vectors).
        None: half of ``cpu_memory_budget`` (256 MiB at the default 512 MiB),
        the share every kernel cache of the library gets, so the default never
        outgrows the budget.  A larger cache recomputes fewer K̃ values where
        core sets are large: measured on the full adult (~20,000 core vectors,
        one run): 2,048 MB → 32 s (each K̃ value computed once), 1,024 MB →
        51 s, 512 MB → 45 s (2.2–2.6× the K̃ values recomputed); raise
        ``cpu_memory_budget`` with it, as a ``cache_size`` above half the
        budget is cut to that half (``memory_fallback_``, one warning).
    shrinking : bool, default=True
        Drop core vectors with α = 0 that lie strictly inside the ball
        (:meth:`gpuksvm.solvers.cvm.simplex_qp.CoreSetQP.shrink`).
    normalize : bool, default=False
        Use κ(x, z)/√(κ(x, x)κ(z, z)) (paper eq. 4, case 3).
    task : {"classification", "one_class"}, default="classification"
        "one_class" fits the one-class L2-SVM on X ignoring y and predicts ±1
        (as :class:`OneClassCVM`).
    multi_class : {"ovo", "ovr"}, default="ovo"
        One-vs-one (default, see the module docstring for why) or one-vs-rest.
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        One-vs-one problems, more than two classes: ``decision_function``
        returns (n, n_classes) one-vs-rest shaped scores (votes plus squashed
        summed confidences) or, with "ovo", the (n, K(K−1)/2) pairwise values
        (as scikit-learn's SVC).
    break_ties : bool, default=True
        One-vs-one, more than two classes: True predicts the arg-max of the
        one-vs-rest shaped scores, whose confidences decide between classes
        with equal votes; False is LIBSVM's vote, the lowest class index among
        tied classes (SVC's default).  Unlike SVC, the default is True: a tie
        of votes goes to the more confident class, not the lower index;
        ``decision_function_shape="ovo"`` needs ``break_ties=False`` (as SVC);
        ``fit`` refuses the combination.
    device : {"auto", "cpu", "gpu", "cuda:N"}, default="auto"
    dtype : {"float32", "float64"} or None, default=None
        Compute dtype of the furthest-point search (None: float32 on a GPU,
        float64 on the CPU).  The core-set QP keeps α and g in float64.
    random_state : int, RandomState or None, default=None
        Seeds the hash of the rows' contents that orders the rows
        (:mod:`gpuksvm.solvers.row_order`) and the draws of the initial pair
        and of the sampled search, which pick positions in that order: the
        same rows in any order (sorted by label, shuffled) give the same model.
    verbose : int, default=0
    eps : float, default="deprecated"
        Deprecated, no effect (a ``FutureWarning``; removed in the next
        release): the fit stops on ``tol``.
    eps_schedule : str, default="deprecated"
        Deprecated, no effect, as ``eps``.
    inner_solver : str, default="deprecated"
        Deprecated, no effect, as ``eps``.

    Attributes
    ----------
    classes_ : ndarray
    problems_ : list of (int, int or None), length n_problems
        The binary problems (positive class index, negative class index or
        None for "the rest"): one, (1, 0), for two classes; the order of
        every per-problem attribute below.
    core_set_ : list of n_problems ndarrays of int
        Training-row indices of each problem's core vectors at the end.
    alpha_ : list of n_problems ndarrays
        MEB weights α of the core vectors (Σα = 1 per problem).
    support_ : ndarray of int
        Rows with α > 0 (union over the binary problems).
    support_vectors_ : array (n_SV, n_features)
    dual_coef_ : ndarray (n_problems, n_SV)
        αᵢyᵢ (eq. 11).
    intercept_ : ndarray (n_problems,)
        b = Σαᵢyᵢ (eq. 11).
    rho_ : ndarray (n_problems,)
        ρ = αᵀK̃α, the margin of the L2-SVM.
    radius_ : ndarray (n_problems,)
        Radius R of the final ball in the k̃ feature space.
    n_iter_ : ndarray of int (n_problems,)
        Search iterations that added core vectors (an array also for one
        problem, as scikit-learn SVC's ``n_iter_``).
    stop_reason_ : list of n_problems str
        "converged" (relative duality gap ≤ tol), or why it stopped early:
        "max_iter", "max_core_size", "stalled" (the core-set QP could not
        reach the gap target) — each with a ConvergenceWarning.
    duality_gap_ : ndarray (n_problems,)
        The relative duality gap at the stop (rows outside the core set
        estimated from the search's samples when the search is sampled).
    search_ : str
        "sampled(59)" or "exact".
    n_smo_steps_ : ndarray of int (n_problems,)
        QP steps (SMO pair steps plus active-set steps).
    core_set_size_ : ndarray of int (n_problems,)
        |S| at the end, ``len(core_set_[p])``.
    history_ : list of n_problems dicts of arrays
        Per search iteration that added core vectors, cumulative from the
        start: core-set size ``m``, ``added`` core vectors, kernel evaluations
        of the search (``search_kernel``) and of the QP (``qp_kernel``), QP
        steps (``qp_steps``), wall ``seconds``.
    fit_times_ : dict
        Seconds per stage of the fit (the vocabulary of LLSVM and SVI):
        ``prepare`` (the device copy, gamma, kernel scales), ``row_order``
        (the rows' content hash and its sort), ``core_sets`` (the core-set
        loops of every problem), ``model`` (the stored model).
    memory_fallback_ : str or None
        ``"kernel_cache"`` when a core set outgrew the dense QP and
        ``cpu_memory_budget`` cut the K̃ row cache below ``cache_size`` (to
        half the budget; one ``MemoryFallbackWarning``); ``"out_of_memory: ..."`` (also) when
        the GPU ran out of memory and a retry cut a kernel block or the core set's spare room
        (one ``MemoryFallbackWarning``); else None.  The dense
        QP itself ends where its six s×s float64 matrices would exceed the
        budget (3,072 core vectors at the default 512 MiB, 2,041 at 200 MB).
    kernel_ : Kernel
    n_features_in_ : int

    Examples
    --------
    >>> from gpuksvm import CVM
    >>> from gpuksvm.datasets import make_checkerboard
    >>> X, y = make_checkerboard(300, random_state=0)
    >>> clf = CVM(gamma=30.0, C=1000.0, device="cpu", random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.95
    True
    """

    def __init__(self, kernel: str | Kernel = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, C: float = 1.0, tol: float = 1e-2, sample_size: int | None = 59,
                 n_tries: int = 7, max_iter: int = 100_000, max_core_size: int = 50_000,
                 cache_size: float | None = None, shrinking: bool = True, normalize: bool = False,
                 task: str = "classification", multi_class: str = "ovo",
                 decision_function_shape: str = "ovr", break_ties: bool = True, device: str = "auto",
                 dtype: Any = None, random_state: Any = None, verbose: int = 0,
                 eps: Any = DEPRECATED, eps_schedule: str = DEPRECATED,
                 inner_solver: str = DEPRECATED) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.tol = tol
        self.sample_size = sample_size
        self.n_tries = n_tries
        self.max_iter = max_iter
        self.max_core_size = max_core_size
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.normalize = normalize
        self.task = task
        self.multi_class = multi_class
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.eps = eps
        self.eps_schedule = eps_schedule
        self.inner_solver = inner_solver

    @fit_context(distributed=fit_cvm)
    def fit(self, X: Any, y: Any = None) -> "CVM":
        """Fit the CVM on (X, y); with ``task="one_class"`` y is ignored."""
        if self.task == "one_class":
            X, _ = validate_X(self, X, reset=True)
            return self._fit_array(X, None, None)
        X, y, _ = validate_X_y(self, X, y)
        classes, yi = encode_classes(y)
        return self._fit_array(X, classes, yi)

    _parameter_constraints: dict = {
        **CVMBase._parameter_constraints,
        "task": [StrOptions({"classification", "one_class"})],
        "multi_class": [StrOptions({"ovo", "ovr"})],
        "decision_function_shape": [StrOptions({"ovr", "ovo"})],
        "break_ties": ["boolean"],
    }

    def _check_param_relations(self) -> None:
        super()._check_param_relations()
        self._check_break_ties()   # at fit, not at every predict: break_ties defaults to True here

    def _set_one_class_fit(self, threshold: float) -> None:
        self.classes_ = np.array([-1, 1])

    def _multiclass_scheme(self) -> str:
        return self.multi_class

    def _decision_rows(self, X: Any) -> DecisionRows:
        """Validated X and f_p(x) = Σαᵢyᵢκₙ(xᵢ, x) + b_p of its rows, for the SVC surface's
        predict/decision_function (in row blocks).

        κₙ is the kernel as fitted (normalized with ``normalize=True``,
        :meth:`_kernel_expansion`).  One-vs-rest problems (more than two
        classes) return f_p/ρ_p: each problem's margin sits at ρ_p, not 1
        (module docstring), so the values are put on one scale before the
        arg-max.  One-class task: Σαᵢκ(xᵢ, x) minus the outlier threshold
        (``classes_`` = [−1, 1], so the binary rule predicts +1 for f ≥ 0).
        """
        check_is_fitted(self, "dual_coef_")
        Xd, kind = self._validated_input(X, self.support_vectors_.dtype)
        expansion = self._expansion_values()
        b = np.asarray(bk.to_host(self.intercept_), dtype=np.float64)[None, :]
        ovr = self.task != "one_class" and len(self.classes_) > 2 and self.multi_class == "ovr"
        rho = np.asarray(self.rho_, dtype=np.float64)[None, :] if ovr else None

        def values(rows: Any) -> np.ndarray:
            D = expansion(rows)
            D += b
            if rho is not None:
                D /= rho
            return D

        return DecisionRows(Xd, kind, values)

    @property
    def coef_(self):
        """Primal weights w_p = Σᵢ αᵢyᵢ xᵢ/‖xᵢ‖ of a linear kernel (eq. 11), (n_problems, n_features).

        The CVM needs κ(x, x) constant, so a linear kernel is used normalized
        (``normalize=True``): κₙ(x, z) = xᵀz/(‖x‖‖z‖), whose feature map is
        φ(x) = x/‖x‖.  ``coef_`` is the paper's w = Σαᵢyᵢφ(xᵢ) in that space, so

            f_p(x) = coef_[p] · x/‖x‖ + intercept_[p]

        (``decision_function`` for two classes and, with
        ``decision_function_shape="ovo"``, the pairwise values; one-vs-rest
        values are then divided by ``rho_``).  Unlike SVC's ``coef_``,
        ``X @ coef_.T + intercept_`` is *not* the decision function unless the
        rows of X have unit norm: the boundary w·x + b‖x‖ = 0 is a cone, a
        hyperplane only when b = 0.  Rows in the order of ``intercept_``;
        read-only; other kernels: ``AttributeError``.
        """
        return SVCSurfaceMixin.coef_.fget(self)


class OneClassCVM(OutlierMixin, CVMBase):
    """One-class L2-SVM by the Core Vector Machine (novelty detection; CVM paper §3.2.1).

    The MEB dual with k̃ = κ + δᵢⱼ/C (eq. 7).  Like scikit-learn's
    ``OneClassSVM``: ``score_samples(x) = Σαᵢκ(xᵢ, x) = wᵀφ(x)``,
    ``decision_function = score_samples − offset_`` (negative for outliers) and
    ``predict`` returns +1 (inlier) / −1 (outlier).  The fit stops on the
    relative duality gap of the one-class L2-SVM,
    C Σᵢ max(0, ρ − wᵀφ(xᵢ))² − ‖α‖²/C over αᵀK̃α.

    **The outlier threshold** is ``offset_ = ρ − τ`` with τ = 3·median(ξⱼ)
    over the support vectors (ξⱼ = αⱼ/C): x is an outlier when its slack
    ρ − wᵀφ(x) exceeds three times the typical support-vector slack.  The
    paper's hyperplane wᵀφ(x) = ρ (eq. 7; ρ is kept as ``rho_``) is not used
    as the threshold: with squared slacks *every* support vector has
    ξⱼ = αⱼ/C > 0 and lies beyond it, and on data whose rows are not in general
    position — duplicated rows, boolean features, few distinct values, a
    low-dimensional cloud with constant columns — nearly every row is a
    support vector, so with ρ as the threshold every training row is an
    outlier.  A median-based factor (robust statistics' usual 3) is used
    because the α-weighted mean slack is dominated by the outliers' own large
    α and misses 1 of 10 planted outliers in ``tests/test_cvm.py``.  The
    median needs the small-α support vectors, which the duality-gap stop
    (``tol``) leaves at α = 0 (65 instead of 76 on the planted-outlier data,
    which moves τ by 45 % and misses one of its outliers), so the core-set QP is finished
    to a KKT gap ≤ 10⁻⁴·ρ before τ is taken (``gpuksvm.solvers.cvm.algorithm.THRESHOLD_KKT``; then the
    same flags at tol = 0.1, 10⁻² and at the optimum, 10 data seeds).
    Measured with the defaults (C = 1, tol = 10⁻², γ = "mean_dist"), 3 data
    seeds, outlier fractions with ρ → with ρ − τ: 200 rows boolean 5-D 100 % →
    0 %; 20 points × 10 copies 35–45 % → 0 %; 1-D normal plus two constant
    columns 90–100 % → 8.5–9.5 %; 3-D normal 22–25 % → 2–3 %; 10-D normal,
    1,000 rows 8–9 % → 0.2–1.4 %; 300 normal 2-D rows plus 10 planted far
    points (10 seeds): inliers 22 % → 2.0 % (at most 3.3 %), all 10 planted
    points flagged.  C ↑ still gives fewer outliers (3-D normal, 400 rows:
    C = 0.1, 1, 10 → 4.3 %, 1.9 %, 0.1 %).

    **γ defaults to "mean_dist"** (the paper's and LibCVM's 1/β; for
    standardized data half of :class:`CVM`'s "scale"): with "scale" the
    narrower kernel makes more rows support vectors of small slack and the
    same rule flags 13 % of the planted-outlier data's inliers (at most
    15 %; ρ alone 50 %) and 4.5–13.5 % of the 3-D normal's, against 2 % and
    2–3 % with "mean_dist" (same runs as above).

    Parameters
    ----------
    gamma : "mean_dist", "scale", "auto" or float, default="mean_dist"
        As in :class:`CVM`; the default differs (see above).
    C : float, default=1.0
        Weight of the squared slacks.

    Attributes
    ----------
    core_set_, alpha_, radius_, n_iter_, stop_reason_, duality_gap_, n_smo_steps_,
    core_set_size_, history_, fit_times_
        As in :class:`CVM`, for the one problem: arrays of shape (1,) and
        lists of one entry.
    support_, support_vectors_, search_
        As in :class:`CVM`.
    dual_coef_ : ndarray (1, n_SV)
        α of the support vectors.
    offset_ : float
        The outlier threshold ρ − τ (see above).
    rho_ : ndarray (1,)
        ρ = αᵀK̃α, the margin of the paper's hyperplane.
    intercept_ : ndarray (1,)
        −offset_.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import OneClassCVM
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> oc = OneClassCVM(gamma=0.5, device="cpu", random_state=0).fit(X)
    >>> int(oc.predict([[8.0, 8.0]])[0])
    -1
    """

    _task = "one_class"

    def __init__(self, kernel: str | Kernel = "rbf", gamma: Any = "mean_dist", degree: int = 3,
                 coef0: float = 0.0, C: float = 1.0, tol: float = 1e-2, sample_size: int | None = 59,
                 n_tries: int = 7, max_iter: int = 100_000, max_core_size: int = 50_000,
                 cache_size: float | None = None, shrinking: bool = True, normalize: bool = False,
                 device: str = "auto", dtype: Any = None, random_state: Any = None, verbose: int = 0,
                 eps: Any = DEPRECATED, eps_schedule: str = DEPRECATED,
                 inner_solver: str = DEPRECATED) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.tol = tol
        self.sample_size = sample_size
        self.n_tries = n_tries
        self.max_iter = max_iter
        self.max_core_size = max_core_size
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.normalize = normalize
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.eps = eps
        self.eps_schedule = eps_schedule
        self.inner_solver = inner_solver

    @fit_context(distributed=fit_cvm)
    def fit(self, X: Any, y: Any = None) -> "OneClassCVM":
        """Fit on X (y is ignored)."""
        X, _ = validate_X(self, X, reset=True)
        return self._fit_array(X, None, None)

    def _set_one_class_fit(self, threshold: float) -> None:
        self.offset_ = threshold

    @dask_dispatch()
    def score_samples(self, X: Any):
        """Σαᵢκ(xᵢ, x) (higher = more normal)."""
        D, kind = self._kernel_expansion(X)
        return bk.as_kind(D[:, 0], kind)

    @dask_dispatch()
    def decision_function(self, X: Any):
        """score_samples − offset_: negative for outliers."""
        D, kind = self._kernel_expansion(X)
        return bk.as_kind(D[:, 0] - self.offset_, kind)

    @dask_dispatch()
    def predict(self, X: Any):
        """+1 for inliers, −1 for outliers."""
        D, kind = self._kernel_expansion(X)
        return bk.as_kind(np.where(D[:, 0] - self.offset_ >= 0, 1, -1), kind)


# the parameters OneClassCVM shares with CVM are described once, in CVM's docstring
OneClassCVM.__doc__ = shared_parameter_doc(OneClassCVM, CVM)


def fit_cvm_path(X: Any, y: Any, *, Cs: Sequence[float], estimator: CVM) -> list[CVM]:
    """CVM classifiers along C, each binary problem's core set started from the C below it.

    The C values are fitted in ascending order: the smallest as
    ``clone(estimator).set_params(C=C).fit(X, y)`` fits it (from the initial pair), each other
    from the core vectors with α > 0 of the same problem at the C below it and their α
    (``start`` of :func:`gpuksvm.solvers.cvm.meb.fit_core_set`): its searches, additions and
    stop on the relative duality gap ``tol`` run as in its own fit, so each model is a solution to
    the same tolerance, reached in fewer iterations (on one 4,000-row ijcnn1 fold, 0–9 at each C
    after the first against 39–51).  It is not its own fit's model: the core sets and the draws
    of the sampled search differ (held-out accuracies within 0.003 there).

    Parameters
    ----------
    X, y : training data
    Cs : positive numbers (any order; a value given twice is one model, listed twice)
    estimator : CVM
        Template for every other parameter (not modified); ``task="classification"``.

    Returns
    -------
    list of fitted CVM, in the order of ``Cs``.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.estimators.cvm import CVM, fit_cvm_path
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> models = fit_cvm_path(X, y, Cs=[10.0, 1.0], estimator=CVM(device="cpu", random_state=0))
    >>> [m.C for m in models], [bool(m.duality_gap_.max() <= m.tol) for m in models]
    ([10.0, 1.0], [True, True])
    """
    Cs = positive_floats("C", Cs)
    if not Cs:
        raise ValueError("Cs must be non-empty")
    if estimator.task != "classification":
        raise ValueError(f"fit_cvm_path fits task='classification', not {estimator.task!r}")
    proto = clone(estimator)
    proto._check_params()
    X, y, _ = validate_X_y(proto, X, y)
    classes, yi = encode_classes(y)
    fitted: dict[float, CVM] = {}
    starts = None
    for C in sorted(set(Cs)):
        est = clone(estimator).set_params(C=C)
        est._check_params()
        est._fit_array(X, classes, yi, starts)
        est.n_features_in_ = proto.n_features_in_
        if hasattr(proto, "feature_names_in_"):
            est.feature_names_in_ = proto.feature_names_in_
        fitted[C] = est
        starts = [(core[alpha > 0], alpha[alpha > 0]) for core, alpha in zip(est.core_set_, est.alpha_)]
    return [fitted[C] for C in Cs]
