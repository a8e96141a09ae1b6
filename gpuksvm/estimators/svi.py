"""SVI — fast kernel SVM training via support vector identification (SPEC §3).

Mao, Fu, Wu & Hu, "Fast Kernel SVM Training via Support Vector Identification"
(papers/svi-support-vector-identification.txt).  The estimator validates its
input and calls :func:`gpuksvm.solvers.svi.algorithm.fit` (Algorithm 1 with subsets sized
per binary problem, a held-out check of the sub-SVM ensemble and the exact SVM
where the ensemble cannot find the margin); the steps themselves are pure
functions in :mod:`gpuksvm.solvers.svi.steps`, re-exported here.
"""
from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils._param_validation import Hidden, Interval, StrOptions

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin, fit_context
from gpuksvm.estimators.calibration import ProbabilityMixin
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.estimators.params import (
    DEVICE_PARAMS,
    KERNEL_PARAMS,
    MAX_ITER_OR_NO_LIMIT,
    count,
    grid_values,
    non_negative,
    positive,
)
from gpuksvm.scaleout.svi import DaskRows
from gpuksvm.solvers.svi import algorithm as svi_solver
from gpuksvm.solvers.svi.algorithm import (
    DEFAULT_MARGIN_TOL,
    DEFAULT_MAX_MARGIN_SV,
    DEFAULT_MIN_MARGIN_SV,
    DEFAULT_MIN_SUBSET_ROWS,
    ExactFallbackWarning,
    MarginCapWarning,
    SVIParams,
    SVIResult,
    SolvedRows,
    exact_paths,
)
from gpuksvm.solvers.smo.memory import warn_memory_fallback
from gpuksvm.solvers.multiclass import binary_problems, problem_rows
from gpuksvm.solvers.svi.steps import closed_form_beta, draw_subsets, plan_problem, select_margin_rows
from gpuksvm.estimators.svc_surface import SVCSurfaceMixin, shape_of, sparse_like
from gpuksvm.array.validation import encode_classes, validate_X_y

__all__ = ["SVI", "FITTED_ATTRIBUTES", "ExactFallbackWarning", "MarginCapWarning", "fit_svi_grid", "grid_kernels", "grid_unsupported",
           "draw_subsets",
           "select_margin_rows", "closed_form_beta", "DEFAULT_MARGIN_TOL", "DEFAULT_MAX_MARGIN_SV",
           "DEFAULT_MIN_MARGIN_SV", "DEFAULT_MIN_SUBSET_ROWS"]

#: The fitted attributes of :class:`SVI` (``probA_``/``probB_`` with
#: ``probability=True``; a Dask fit adds ``dask_info_``).
FITTED_ATTRIBUTES = ("classes_", "n_features_in_", "kernel_", "support_", "support_vectors_",
                     "n_support_", "dual_coef_", "intercept_", "margin_support_", "problems_",
                     "subsets_", "sub_models_", "solved_exactly_", "margin_capped_", "n_iter_",
                     "converged_", "fit_times_", "memory_fallback_", "probA_", "probB_")


def fit_svi(estimator: "SVI", X: Any, y: Any, *, client: Any = None) -> "SVI":
    """The Dask route of ``SVI.fit`` (:func:`~gpuksvm.scaleout.dispatch.dask_dispatch`):
    ``SVI._fit_dask``; :func:`gpuksvm.scaleout.svi.fit_svi` describes it."""
    return estimator._fit_dask(X, y, client=client)


class SVI(DeviceMixin, SVCSurfaceMixin, ProbabilityMixin, ClassifierMixin, BaseEstimator):
    """Kernel SVM trained by support vector identification (SVI, SPEC §3).

    M sub-SVMs on disjoint θ-subsets vote (averaged decision values) on which
    training rows lie on the margin (y f̄ ≈ 1); a regularized least-squares
    problem on those s rows (eq. 5) gives the final weights β in closed form
    (eq. 9) and the bias b (eq. 7).  On a binary problem where the ensemble
    works the model keeps only the s margin SVs (ijcnn1: 1,257 vs SVC's
    1,913, ``bench/results/svi.json``), so prediction is cheaper than with the
    full SVM.  One-vs-one keeps the union of every pair's margin SVs, which can
    exceed SVC's union (digits with the paper's algorithm: 1,159 vs 458; with
    the defaults its pairs are solved exactly and keep SVC's 459).  The algorithm is
    :func:`gpuksvm.solvers.svi.algorithm.fit`; this class validates and calls it.  Its
    prediction surface is scikit-learn SVC's (:mod:`gpuksvm.estimators.svc_surface`:
    ``break_ties``, ``coef_`` for a linear kernel, ``converged_``).

    **Margin rule and its default.**  The paper writes "y f̄ ≈ 1" and leaves the
    tolerance open.  Here a row is a margin SV when ``|y f̄ − 1| ≤ margin_tol``,
    capped at ``max_margin_sv`` rows (the closest ones) and floored at
    ``min_margin_sv`` (:func:`~gpuksvm.solvers.svi.steps.select_margin_rows`).
    τ trades accuracy for size: a wider band keeps more rows, which both
    lengthens the s³ solve and covers more of each class's region (far from
    every margin SV the decision function falls back to b).  The default τ = 0.2 comes from
    ``bench/studies/svi_margin_tol.py --scale paper`` (results in
    ``bench/results/svi_margin_tol.json``): for each dataset the sub-SVM
    ensemble (M = 5, θ = 0.1, the paper's algorithm: no subset sizing, no
    check) of three seeds, then steps 4–5 for
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
    ``choose_default`` in ``bench/studies/svi_margin_tol.py`` — no more SVs than SVC
    for every seed wherever some τ achieves it, then the smallest mean accuracy
    regret — picks τ = 0.2: at τ = 0.3 one ijcnn1 seed keeps more SVs (1,979)
    than SVC.  On ijcnn1 τ = 0.2 gives 98.31–98.40% over the seeds with a third
    fewer SVs than SVC; ``margin_tol=0.3`` buys ≈ 0.1 point for an SVC-sized
    model.

    **Small problems, the ensemble check and the exact fallback.**  Sub-SVMs
    of a few hundred rows cannot locate the margin: on digits (one-vs-one
    pairs of ≈ 240 rows, sub-SVMs of ≈ 24) the paper's algorithm stays 4–5
    points below SVC at every τ, although steps 4–5 on the *exact* SVM's
    decision values (the "oracle" of the study) give SVC's 99.33 %.  So each
    binary problem gets sub-SVMs of at least ``min_subset_rows`` rows (θ is
    raised for it), a problem with fewer than ``n_subsets * min_subset_rows``
    rows is solved by the exact SVM, and an ensemble that fails a held-out
    check (its sub-models disagree, or the closed form loses accuracy
    against them) is replaced by the exact SVM too — each with an
    :class:`ExactFallbackWarning`, recorded in ``solved_exactly_``.  The
    measured reasons for the defaults are in :mod:`gpuksvm.solvers.svi.algorithm`.
    ``min_subset_rows=0, ensemble_check=False`` runs the paper's algorithm.

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear", "sigmoid"} or Kernel, default="rbf"
    gamma : float or {"scale", "auto", "mean_dist"}, default="scale"
    degree : int, default=3
    coef0 : float, default=0.0
    C : float, default=1.0
        Regularization of the sub-SVMs (hinge loss) and of the least-squares
        problem (5).
    n_subsets : int, default=5
        M, the number of disjoint subsets (paper: 5).
    subset_rate : float, default=0.1
        θ, fraction of the rows in each subset (paper: 0.1).
        ``n_subsets * subset_rate`` must be ≤ 1.
    min_subset_rows : int, default=2000
        Least number of rows of a sub-SVM: a binary problem's θ is raised to
        ``min_subset_rows / n_rows`` when needed, and a problem with fewer than
        ``n_subsets * min_subset_rows`` rows is solved by the exact SVM (with
        an :class:`ExactFallbackWarning`).  0: the paper's θ everywhere.
    stratify : bool, default=True
        Draw every subset stratified by class
        (:func:`~gpuksvm.solvers.svi.steps.draw_subsets`).
    margin_tol : float, default=0.2
        τ of the margin rule |y f̄ − 1| ≤ τ.
    max_margin_sv : int or None, default=5000
        Cap on the margin SVs of each binary problem (closest to the margin
        first).  A cap that cuts the band changes the model: it warns
        (:class:`MarginCapWarning`) and sets ``margin_capped_``.  ``None``: no
        cap (the s×s solve costs O(s³) time and s² memory).
    min_margin_sv : int, default=10
        Floor on the margin SVs of each binary problem; each class keeps at
        least ``min_margin_sv // 2`` of them (at least 1).
    ensemble_check : bool, default=True
        Check every ensemble on held-out rows and solve the problems that fail
        with the exact SVM (:func:`~gpuksvm.solvers.svi.steps.ensemble_check`).
    multi_class : {"ovo", "ovr"}, default="ovo"
        One-vs-one (K(K−1)/2 problems, as the paper's LibSVM baseline) or
        one-vs-rest (K problems) for more than two classes.
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        Shape of ``decision_function`` for one-vs-one problems, as scikit-learn's
        SVC: "ovr" (n, n_classes) vote-based values, or "ovo" the (n, K(K−1)/2)
        pairwise values.
    break_ties : bool, default=False
        One-vs-one with more than two classes: ``predict`` returns the
        arg-max of ``decision_function`` (votes, then confidences) instead of
        LIBSVM's vote (most votes, then the lowest class index), as
        scikit-learn's SVC; the default is SVC's.  (Measured with the paper's
        algorithm, ``SVI(C=10, min_subset_rows=0, ensemble_check=False)``, on
        digits scaled to [0, 1], stratified ⅔/⅓ splits, seeds 0–2: test
        accuracy 94.99/95.49/94.49% with True, 94.82/95.33/94.66% with False;
        0.2–0.7% of the test rows have a tie of votes.  With the defaults
        digits' pairs are solved exactly.)
    tol : float, default=1e-3
        Stopping tolerance of the sub-SVM solver (and of the exact SVM).
    max_iter : int, default=-1
        Iteration cap of the sub-SVM solver and of the exact SVM; -1: no limit
        (SVC's spelling; ``None`` is a deprecated spelling of it).  A solver stopped by it raises one
        ``ConvergenceWarning`` per fit, with SVC's message (see ``converged_``).
    probability : bool, default=False
        Fit Platt sigmoids on 5-fold out-of-fold decision values
        (:mod:`gpuksvm.estimators.calibration`; five more SVI fits) for ``predict_proba``.
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
        Training-row indices of the vectors kept by the model (the union over
        the binary problems of their margin SVs, or of the exact SVM's SVs
        where ``solved_exactly_``).
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
        The rows of each binary problem's model (global training-row
        indices): those selected by the margin rule — every one satisfies
        |y f̄ − 1| ≤ margin_tol unless a guard of ``select_margin_rows``
        applied — or the exact SVM's SVs where ``solved_exactly_``.
    problems_ : list of (int, int or None)
        (positive class index, negative class index or None = rest) of each
        binary problem.  Binary: [(1, 0)].
    subsets_ : list of lists of int64 arrays
        Per binary problem, the disjoint subsets its sub-SVMs trained on
        (empty for a problem solved exactly from the start).
    sub_models_ : list of dict
        Per binary problem: ``n_rows``, ``subset_rate`` (θ after sizing, None
        when too small), the sub-SVM summaries (``n_support``, ``objective``,
        ``n_iter``, ``converged``, ``subsets`` kept), the margin statistics
        (``n_candidates``, ``n_selected``, ``guard``: ``"memory"`` where the memory
        budget cut the band, see ``memory_fallback_``), the ensemble's training
        accuracy, the ``check`` (``disagreement``, ``accuracy_model``,
        ``accuracy_ensemble``, ``passed``, ``reasons``) and ``exact``: None,
        or why the exact SVM solved the problem (``"too_small"``,
        ``"no_mixed_subset"``, ``"check"``; ``exact_solver`` then summarizes it).
    solved_exactly_ : (n_problems,) bool array
        True where the binary problem's model is the exact SVM's.
    margin_capped_ : (n_problems,) bool array
        True where ``max_margin_sv`` cut the margin band of a problem whose
        closed-form model was kept.
    memory_fallback_ : str or None
        What ``cpu_memory_budget`` made smaller than the in-memory path needs
        (one :class:`~gpuksvm.array.backend.MemoryFallbackWarning`):
        ``"float32_margin_solve"`` (step 5's s×s system solved in float32, half
        the memory), ``"margin_rows"`` (fewer margin rows than the band holds,
        as many as a float32 system in the budget takes); None if nothing.
    probA_, probB_ : (n_problems,) arrays
        Platt sigmoid parameters (``probability=True`` only).
    n_iter_ : (n_problems,) int64 array
        Largest sub-SVM iteration count of each binary problem (the exact
        solver's where ``solved_exactly_``).
    converged_ : (n_problems,) bool array
        Whether every SMO solve of each binary problem reached ``tol``: its
        sub-SVMs and, where ``solved_exactly_``, the exact SVM.
    fit_times_ : dict
        Seconds spent in each stage (``subsets``, ``sub_svms``, ``ensemble``,
        ``solve``, ``check`` — the check and the exact fallback).

    Examples
    --------
    >>> from gpuksvm import SVI
    >>> from gpuksvm.datasets import make_two_sines
    >>> X, y = make_two_sines(1000, random_state=0)
    >>> clf = SVI(gamma=1.0, C=10.0, min_subset_rows=100, random_state=0, device="cpu").fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    >>> clf.support_vectors_.shape[0] < 1000
    True
    """

    #: the fitted attributes (:data:`gpuksvm.estimators.svi.FITTED_ATTRIBUTES`)
    FITTED_ATTRIBUTES = FITTED_ATTRIBUTES

    def __init__(self, kernel: str | Kernel = "rbf", gamma: Any = "scale", degree: float = 3,
                 coef0: float = 0.0, C: float = 1.0, n_subsets: int = 5, subset_rate: float = 0.1,
                 min_subset_rows: int = DEFAULT_MIN_SUBSET_ROWS, stratify: bool = True,
                 margin_tol: float = DEFAULT_MARGIN_TOL,
                 max_margin_sv: int | None = DEFAULT_MAX_MARGIN_SV,
                 min_margin_sv: int = DEFAULT_MIN_MARGIN_SV, ensemble_check: bool = True,
                 multi_class: str = "ovo", decision_function_shape: str = "ovr",
                 break_ties: bool = False, tol: float = 1e-3,
                 max_iter: int = -1, probability: bool = False,
                 device: str = "auto", dtype: Any = None, random_state: Any = None,
                 n_jobs: int | None = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.n_subsets = n_subsets
        self.subset_rate = subset_rate
        self.min_subset_rows = min_subset_rows
        self.stratify = stratify
        self.margin_tol = margin_tol
        self.max_margin_sv = max_margin_sv
        self.min_margin_sv = min_margin_sv
        self.ensemble_check = ensemble_check
        self.multi_class = multi_class
        self.decision_function_shape = decision_function_shape
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
    _parameter_constraints: dict = {
        **KERNEL_PARAMS,
        "C": [positive()],
        "n_subsets": [count(1)],
        "subset_rate": [Interval(Real, 0, 1, closed="right")],
        "min_subset_rows": [count(0)],
        "stratify": ["boolean"],
        "margin_tol": [non_negative()],
        "max_margin_sv": [None, count(1)],
        "min_margin_sv": [count(1)],
        "ensemble_check": ["boolean"],
        "multi_class": [StrOptions({"ovo", "ovr"})],
        "decision_function_shape": [StrOptions({"ovr", "ovo"})],
        "break_ties": ["boolean"],
        "tol": [positive()],
        "max_iter": [*MAX_ITER_OR_NO_LIMIT, Hidden(None)],    # None: a deprecated "no limit"
        "probability": ["boolean"],
        "n_jobs": [None, Integral],
        **DEVICE_PARAMS,
    }

    def _check_param_relations(self) -> None:
        if self.n_subsets * self.subset_rate > 1.0 + 1e-12:
            raise ValueError(f"n_subsets * subset_rate must be <= 1 (disjoint subsets), got "
                             f"{self.n_subsets} * {self.subset_rate}")
        if self.max_margin_sv is not None and self.min_margin_sv > self.max_margin_sv:
            raise ValueError(f"min_margin_sv ({self.min_margin_sv}) must not exceed "
                             f"max_margin_sv ({self.max_margin_sv})")
        if self.max_iter is None:
            warnings.warn("SVI: max_iter=None is now spelled max_iter=-1 (no limit, as SVC); None will be "
                          "refused in the next release", FutureWarning, stacklevel=4)

    @property
    def fit_time_(self) -> dict:
        """Deprecated name of ``fit_times_`` (one vocabulary with LLSVM)."""
        warnings.warn("SVI.fit_time_ is now called fit_times_; fit_time_ will be removed in the next release",
                      FutureWarning, stacklevel=2)
        return self.fit_times_

    def _solver_params(self) -> SVIParams:
        """The validated parameters as the algorithm takes them."""
        return SVIParams(C=float(self.C), n_subsets=int(self.n_subsets),
                         subset_rate=float(self.subset_rate), min_subset_rows=int(self.min_subset_rows),
                         stratify=bool(self.stratify), margin_tol=float(self.margin_tol),
                         min_margin_sv=int(self.min_margin_sv),
                         max_margin_sv=None if self.max_margin_sv is None else int(self.max_margin_sv),
                         multi_class=self.multi_class, ensemble_check=bool(self.ensemble_check),
                         tol=float(self.tol), max_iter=-1 if self.max_iter is None else self.max_iter, random_state=self.random_state,
                         n_jobs=self.n_jobs, verbose=int(self.verbose))

    # ------------------------------------------------------------------ fit
    @fit_context(distributed=fit_svi)
    def fit(self, X: Any, y: Any) -> "SVI":
        """Fit the SVI model (Algorithm 1 of the paper, :func:`gpuksvm.solvers.svi.algorithm.fit`).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)

        Returns
        -------
        self
        """
        sparse_fit = bk.is_sparse(X)  # validation keeps sparse input sparse (a GPU then densifies it)
        X, y, classes, yidx, Xd, kernel, dev, dt = self._prepare(X, y)
        params = self._solver_params()
        result = svi_solver.fit(svi_solver.ArrayRows(X, Xd, kernel, params, dev, dt), yidx, kernel, params)
        self._store(result, classes, dev, dt, sparse_fit=sparse_fit)
        if self.probability:
            self._fit_probability(X, y)
        return self

    def _fit_dask(self, X: Any, y: Any, *, client: Any = None) -> "SVI":
        """``fit`` on a dask array: the solver on a :class:`~gpuksvm.scaleout.svi.DaskRows` source
        (sub-SVMs, margin passes, solves and checks run on the workers)."""
        if self.probability:
            raise ValueError("SVI with a dask array: probability=True is not supported (fit Platt "
                             "scaling on a sample)")
        params = self._solver_params()
        rows = DaskRows(X, y, client=client, device=self.device, dtype=self.dtype)
        self.n_features_in_ = rows.shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        classes, yidx = encode_classes(rows.labels())
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        kernel = rows.evaluate(self._resolved_kernel)
        rows.bind(kernel, params, classes)
        result = svi_solver.fit(rows, yidx, kernel, params)
        self._store(result, classes, dev, dt, dask_info=rows.info())
        return self

    def _prepare(self, X: Any, y: Any) -> tuple:
        """Validated ``X``, ``y``, the classes and encoded labels, X on the compute
        device, the kernel (γ resolved), the device and the working dtype."""
        X, y, _kind = validate_X_y(self, X, y)
        classes, yidx = encode_classes(y)
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        kernel = self._resolved_kernel(X)
        X = bk.densified_for(X, dev)
        return X, y, classes, yidx, bk.to_device(X, dev, dt), kernel, dev, dt

    def _store(self, result: SVIResult, classes: np.ndarray, dev: bk.Device, dt: np.dtype, *,
               sparse_fit: bool = False, dask_info: dict | None = None) -> None:
        """Set the fitted attributes (:data:`FITTED_ATTRIBUTES`) from the solver's result
        (the one writer of the fitted model).  ``sparse_fit``: X was sparse
        (``dual_coef_`` is then CSR, as SVC's); ``dask_info``: the record of a Dask fit."""
        self.classes_ = classes
        self.kernel_ = result.kernel
        self.problems_ = result.problems
        self.subsets_ = result.subsets
        self.sub_models_ = result.sub_info
        self.margin_support_ = result.margin_rows
        self.support_ = result.support
        self.n_support_ = result.n_support
        sv = result.support_vectors
        self.support_vectors_ = sv.astype(dt) if bk.is_sparse(sv) else bk.to_device(sv, dev, dt)
        self.dual_coef_ = (sparse_like(result.coef.astype(dt), True) if sparse_fit
                           else bk.to_device(result.coef.astype(dt), dev))
        self.intercept_ = bk.to_device(result.intercepts.astype(dt), dev)
        self.solved_exactly_ = result.solved_exactly
        self.margin_capped_ = result.margin_capped
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.fit_times_ = result.times
        self.memory_fallback_ = result.memory_fallback
        if result.memory_fallback:
            warn_memory_fallback("SVI", "step 5's margin system was made smaller "
                                 f"({result.memory_fallback})", stacklevel=4)
        if dask_info is not None:
            self.dask_info_ = dask_info
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def grid_unsupported(estimator: SVI, X: Any, n_rows: int) -> str | None:
    """Why :func:`fit_svi_grid` cannot fit ``estimator``'s settings on ``n_rows`` rows of X (None:
    it can).  It fits only where SVI solves every binary problem by the exact SVM from the start:
    fewer rows than ``n_subsets`` × ``min_subset_rows``."""
    if plan_problem(n_rows, int(estimator.n_subsets), float(estimator.subset_rate),
                    int(estimator.min_subset_rows)) is not None:
        return f"{n_rows} rows: SVI fits its sub-SVM ensemble there"
    if not isinstance(estimator.kernel, str):
        return "the kernel is not given by name"
    if estimator.probability:
        return "probability=True (Platt scaling by an internal cross-validation)"
    if estimator.max_iter not in (-1, None):
        return f"max_iter={estimator.max_iter!r} (the shared solver has its own step cap)"
    if bk.device_for(estimator.device, X).is_gpu:
        return "device='gpu' (the batched GPU solver)"
    return None


def grid_kernels(estimator: SVI, gammas: Sequence[float], X: Any) -> list[Kernel]:
    """The kernel of ``estimator`` at each γ of ``gammas`` (numbers), as its fit on X resolves it."""
    return [clone(estimator).set_params(gamma=g)._resolved_kernel(X) for g in gammas]


def fit_svi_grid(X: Any, y: Any, *, gammas: Sequence[float], Cs: Sequence[float], estimator: SVI,
                 n_jobs: int | None = None, paths: Sequence[Sequence[Sequence[dict]]] | None = None) -> list[SVI]:
    """SVI models over a γ × C grid of data SVI solves by the exact SVM, sharing kernel rows.

    Below ``n_subsets`` × ``min_subset_rows`` rows SVI solves every binary problem (the pair of a
    one-vs-one scheme, a class against the rest) by the exact SVM: no sub-SVM ensemble (the module
    docstring of :mod:`gpuksvm.solvers.svi.algorithm`).  Each problem's exact SVM is solved at every
    C of each γ along the C path on shared kernel rows
    (:func:`~gpuksvm.solvers.svi.algorithm.exact_paths`: the Gram matrix within the memory budget,
    each C from the solution of the one below it), and each model is SVI's fit with those solutions
    (:class:`~gpuksvm.solvers.svi.algorithm.SolvedRows`): the same model as
    ``clone(estimator).set_params(gamma=g, C=C).fit(X, y)`` to the solver tolerance.

    Parameters
    ----------
    X, y : training data
    gammas, Cs : sequences of positive numbers
    estimator : SVI
        Template for every other parameter (not modified); :func:`grid_unsupported` must say None.
    n_jobs : threads of the path solver (default: the estimator's ``n_jobs``)
    paths : paths[p][k][c], the exact SVM of binary problem p (in SVI's order,
        :func:`~gpuksvm.solvers.multiclass.binary_problems`) at ``gammas[k]`` and ``Cs[c]``, its
        ``support`` positions among the problem's rows, already solved (a search solves every fold's
        in one call per problem); default: solved here

    Returns
    -------
    list of fitted SVI, in the order ``[(g, C) for g in gammas for C in Cs]``.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.estimators.svi import SVI, fit_svi_grid
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> models = fit_svi_grid(X, y, gammas=[1.0], Cs=[1.0, 10.0], estimator=SVI(device="cpu"))
    >>> [m.C for m in models], bool(models[0].solved_exactly_.all())
    ([1.0, 10.0], True)
    """
    gammas, Cs = grid_values(gammas, Cs)
    proto = clone(estimator).set_params(gamma=gammas[0], C=Cs[0])
    proto._check_params()
    sparse_fit = bk.is_sparse(X)
    X, y, classes, yidx, Xd, _, dev, dt = proto._prepare(X, y)
    reason = grid_unsupported(proto, X, int(X.shape[0]))
    if reason is not None:
        raise ValueError(f"fit_svi_grid: {reason}; fit these settings one by one")
    problems = [problem_rows(yidx, pos, neg) for pos, neg in binary_problems(int(classes.size), proto.multi_class)]
    kernels = grid_kernels(proto, gammas, X)
    if paths is None:
        Xh = bk.to_host(X)
        paths = [[k_paths[0] for k_paths in exact_paths(bk.take_rows(Xh, rows), labels, kernels,
                                                        [np.arange(rows.size)], [Cs] * len(gammas),
                                                        tol=float(proto.tol),
                                                        n_jobs=proto.n_jobs if n_jobs is None else n_jobs)]
                 for rows, labels in problems]
    models = []
    for k, (g, kernel) in enumerate(zip(gammas, kernels)):
        for c, C in enumerate(Cs):
            est = clone(estimator).set_params(gamma=g, C=C)
            params = est._solver_params()
            # each problem's solution, its support as rows of X
            solved = {SolvedRows.key(rows, labels): dict(paths[p][k][c], support=rows[paths[p][k][c]["support"]])
                      for p, (rows, labels) in enumerate(problems)}
            source = SolvedRows(X, Xd, kernel, params, dev, dt, solved)
            est._store(svi_solver.fit(source, yidx, kernel, params), classes, dev, dt, sparse_fit=sparse_fit)
            est.n_features_in_ = proto.n_features_in_
            if hasattr(proto, "feature_names_in_"):
                est.feature_names_in_ = proto.feature_names_in_
            models.append(est)
    return models
