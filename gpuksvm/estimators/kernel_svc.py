"""KernelSVC — the exact C-SVC (hinge loss) engine, on GPU and CPU.

The dual of every binary problem is solved by :mod:`gpuksvm.solvers.smo.engines`:

* ``solver="libsvm"`` — scikit-learn's LIBSVM (CPU; the default there, the
  fastest CPU engine for a single problem);
* ``solver="smo"`` — our own two-variable SMO with second-order working-set
  selection (Fan, Chen & Lin 2005), a kernel-row cache of ``cache_size`` MB
  and optional shrinking (CPU);
* ``solver="working_set"`` — the batched ThunderSVM-style working-set solver:
  one CUDA thread block per problem solves its working-set subproblem, so all
  one-vs-one pairs train in the same launches (GPU; its NumPy twin on CPU);
* ``solver="auto"`` — ``working_set`` on a GPU, ``libsvm`` on the CPU.

``solver_`` records which engine ran.  Multi-class problems are one-vs-one,
with LIBSVM's conventions for ``support_``, ``support_vectors_``,
``dual_coef_``, ``intercept_`` and ``n_support_`` (so the fitted attributes can
be compared with :class:`sklearn.svm.SVC` entry by entry).  ``probability=True``
adds Platt scaling with internal 5-fold CV (:mod:`gpuksvm.estimators.calibration`).

KernelSVC is a drop-in for :class:`sklearn.svm.SVC` (scikit-learn's
own SVC tests run against it in ``tests/test_sklearn_svc_suite.py``): the same
parameters (plus ``solver``, ``device``, ``dtype``), ``kernel="precomputed"``
and callable kernels, ``coef_`` for the linear kernel, sparse ``dual_coef_``
after a sparse fit, ``break_ties``, LIBSVM's vote on ties, SVC's errors and its
``ConvergenceWarning``; the prediction surface is
:class:`gpuksvm.estimators.svc_surface.SVCSurfaceMixin`, shared with SVI.

Kernels given as data: ``kernel="precomputed"`` takes the (n, n) Gram matrix
of the training rows at fit and K(X_test, X_train) at predict; a callable
``kernel(A, B)`` is evaluated on the training rows once, as SVC does (the n×n
Gram matrix is the one exception to "never materialize n×n": a black-box
function of two sets of rows cannot be chunked inside a LIBSVM call), then
solved as precomputed.  A callable runs on the CPU: with a GPU ``device`` the
model falls back to the CPU with a warning (``fitted_device_`` says so); a
precomputed Gram matrix is solved on the GPU by the working-set solver.

Scaling: like every SMO solver, iteration counts grow quickly on unscaled
features (large γ·‖x‖²) — standardize X first (e.g. ``StandardScaler``).
"""
from __future__ import annotations

import warnings
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import check_consistent_length, column_or_1d

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin, fit_context
from gpuksvm.estimators.calibration import ProbabilityMixin
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.estimators.params import (
    CLASS_WEIGHT,
    DEVICE_PARAMS,
    KERNEL_PARAMS,
    MAX_ITER_OR_NO_LIMIT,
    positive,
)
from gpuksvm.solvers.progress import report
from gpuksvm.solvers.smo.memory import cache_within_budget, warn_memory_fallback
from gpuksvm.solvers.smo.svc import KernelSVCResult, pair_coef, solve_svc
from gpuksvm.solvers.svc_dual import PRECOMPUTED
from gpuksvm.estimators.svc_surface import (
    NOT_FINITE_MESSAGE,
    SVCSurfaceMixin,
    callable_gram,
    is_precomputed,
    is_user_callable,
    n_samples_of,
    shape_of,
    sparse_like,
    warn_unconverged,
)
from gpuksvm.array.validation import (
    check_sample_weight,
    class_counts,
    encode_classes,
    validate_X_y,
    WorkingRangeError,
    WorkingUnderflowError,
    zero_weight_classes_message,
)

__all__ = ["KernelSVC", "svc_row_weights"]

SOLVERS = ("auto", "libsvm", "smo", "working_set")

_CONSTRAINTS = {
    "C": [Interval(Real, 0, np.inf, closed="right")],        # inf: a hard margin (SVC allows it)
    **KERNEL_PARAMS,
    "kernel": [StrOptions({"linear", "poly", "rbf", "sigmoid", "precomputed"}), Kernel, callable],
    "tol": [positive()],
    "max_iter": MAX_ITER_OR_NO_LIMIT,
    "cache_size": [positive()],
    "shrinking": ["boolean"],
    "class_weight": CLASS_WEIGHT,
    "probability": ["boolean"],
    "decision_function_shape": [StrOptions({"ovr", "ovo"})],
    "break_ties": ["boolean"],
    "solver": [StrOptions(set(SOLVERS))],
    **DEVICE_PARAMS,
}


class KernelSVC(DeviceMixin, SVCSurfaceMixin, ProbabilityMixin, ClassifierMixin, BaseEstimator):
    """Exact kernel C-SVC (hinge loss), one-vs-one for multi-class; a drop-in for sklearn's SVC.

    Parameters
    ----------
    C : float, default=1.0
        Box constraint of the dual (0 ≤ αᵢ ≤ C·wᵢ); ``inf`` for a hard margin.
    kernel : {"rbf", "poly", "linear", "sigmoid", "precomputed"}, Kernel or callable, default="rbf"
        ``"precomputed"``: X is the Gram matrix (n_train × n_train at fit,
        n_test × n_train at predict).  A callable ``kernel(A, B)`` returns the
        (len(A), len(B)) kernel matrix of two sets of samples (any sequence:
        arrays, sparse matrices, lists of strings); it runs on the CPU.
    gamma : "scale", "auto", "mean_dist" or float, default="scale"
    degree : int, default=3
    coef0 : float, default=0.0
    tol : float, default=1e-3
        Stopping tolerance on the optimality gap m(α) − M(α) (LIBSVM's eps).
    max_iter : int, default=-1
        Cap on iterations (two-variable steps; working-set solver: outer
        rounds) per binary problem; -1 for none.  A problem stopped by it
        raises a ``ConvergenceWarning`` (SVC's message) and shows in ``converged_``.
    cache_size : float, default=200
        Kernel-row cache in MB (``solver="libsvm"`` and ``"smo"``).  It counts
        against ``cpu_memory_budget``: at most half the budget (the rest is
        the solver's other working memory), else the cache is made smaller,
        recorded in ``memory_fallback_`` with a ``MemoryFallbackWarning``.
    shrinking : bool, default=True
        Shrinking heuristic (``"smo"``; LIBSVM always shrinks here).
    class_weight : dict, "balanced" or None, default=None
        Cᵢ = C · class_weight[yᵢ] · sample_weightᵢ.
    probability : bool, default=False
        Enable :meth:`predict_proba` (Platt scaling, 5-fold internal CV).
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        Shape of :meth:`decision_function` for more than two classes.
    break_ties : bool, default=False
        More than two classes with ``decision_function_shape="ovr"``:
        ``predict`` returns the arg-max of ``decision_function`` (votes, then
        confidences) instead of LIBSVM's vote (most votes, then the lowest
        class index).  True with ``"ovo"`` is an error at predict, as in SVC.
    solver : {"auto", "libsvm", "smo", "working_set"}, default="auto"
    device : str, default="auto"
    dtype : {"float32", "float64"} or None, default=None
        Compute dtype (None: float32 on a GPU, float64 on the CPU).
    random_state : int, RandomState or None, default=None
        Seeds the probability cross-validation folds.
    verbose : int, default=0
        When positive, ``fit`` prints a one-line summary (solver, SVs, iterations).

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    kernel_ : Kernel, "precomputed" or the callable
        The kernel with γ resolved.
    support_ : ndarray of int64 (n_SV,)
        Indices of the support vectors in the training set, grouped by class
        (also with sample weights ≤ 0, whose rows SVC's ``support_`` skips
        when it counts).
    support_vectors_ : array (n_SV, n_features)
        SciPy-sparse after a sparse fit on the CPU; empty (0, 0) for
        ``kernel="precomputed"`` and callable kernels (as SVC).
    X_fit_ : the training X as given (callable kernel only)
        ``predict`` evaluates ``kernel(X, X_fit_)`` and uses its columns
        ``support_`` — test × train, as SVC does.
    n_support_ : ndarray of int32 (n_classes,)
    dual_coef_ : ndarray or CSR matrix (n_classes − 1, n_SV)
        yᵢαᵢ in LIBSVM's one-vs-one layout (binary: oriented so that
        decision > 0 means ``classes_[1]``, as in scikit-learn); a CSR matrix
        after a fit on sparse X.  It *is* the model: predictions are
        computed from it (and ``intercept_``) at every call.
    coef_ : array (n_classes·(n_classes−1)/2, n_features), linear kernel only
        Read-only primal weights derived from ``dual_coef_`` (sparse after a
        sparse fit).
    intercept_ : ndarray (n_classes·(n_classes−1)/2,)
    n_iter_ : ndarray of int (n_pairs,)
    objective_ : ndarray (n_pairs,)
        Dual objective ½αᵀQα − eᵀα of every binary problem.
    converged_ : ndarray of bool (n_pairs,)
    solver_ : str
        Engine that ran: "libsvm", "smo", "working_set-cpu" or "working_set-cuda".
    memory_fallback_ : str or None
        What the memory budget made smaller than asked (``"kernel_cache"``:
        ``cache_size`` was cut to half of ``cpu_memory_budget``; ``"out_of_memory: ..."``: the GPU
        ran out of memory and the fit went on with less, e.g. the working-set SMO's kernel-row
        cache in host memory, one ``MemoryFallbackWarning``), None if nothing.
    shape_fit_ : tuple
        Shape of the training X.
    probA_, probB_ : ndarray
        Platt sigmoid parameters per pair (``probability=True``).
    n_features_in_ : int
        (n_train for ``kernel="precomputed"``; not set for a callable kernel.)

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import KernelSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = KernelSVC(C=10.0, gamma=1.0, device="cpu").fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    #: Everything ``fit`` sets (model files declare these; ``probA_``/``probB_`` only with
    #: ``probability=True``, ``n_features_in_``/``feature_names_in_`` as scikit-learn's
    #: validation sets them, ``_fitted_on`` by :class:`~gpuksvm.estimators.base.DeviceMixin`).
    #: ``coef_`` is a read-only property derived from ``dual_coef_``, not stored.
    _FITTED_ATTRIBUTES = ("classes_", "kernel_", "support_", "support_vectors_", "n_support_",
                          "dual_coef_", "intercept_", "n_iter_", "objective_", "converged_",
                          "solver_", "shape_fit_", "X_fit_", "probA_", "probB_", "n_features_in_", "memory_fallback_",
                          "feature_names_in_", "_fitted_on")

    def __init__(self, C: float = 1.0, kernel: Any = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, tol: float = 1e-3, max_iter: int = -1, cache_size: float = 200,
                 shrinking: bool = True, class_weight: Any = None, probability: bool = False,
                 decision_function_shape: str = "ovr", break_ties: bool = False, solver: str = "auto",
                 device: str = "auto", dtype: Any = None, random_state: Any = None,
                 verbose: int = 0) -> None:
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.class_weight = class_weight
        self.probability = probability
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.solver = solver
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints: dict = _CONSTRAINTS

    def _validated_training_data(self, X: Any, y: Any) -> tuple[Any, np.ndarray]:
        """X and y checked as SVC does for this kernel (a callable gets X as given)."""
        if is_user_callable(self.kernel):
            check_consistent_length(X, y)
            for attr in ("n_features_in_", "feature_names_in_"):  # no feature count to check
                self.__dict__.pop(attr, None)
            return X, np.asarray(column_or_1d(bk.to_host(y), warn=True))
        if is_precomputed(self.kernel):
            if bk.is_sparse(X):
                raise TypeError("Sparse precomputed kernels are not supported.")
            X, y, _ = validate_X_y(self, X, y, accept_sparse=False)
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"Precomputed matrix must be a square matrix. Input is a "
                                 f"{X.shape[0]}x{X.shape[1]} matrix.")
            return X, y
        try:
            X, y, _ = validate_X_y(self, X, y)
        except WorkingUnderflowError:
            raise
        except WorkingRangeError as exc:  # SVC's sentence about large values first (its tests match it)
            raise WorkingRangeError(f"{NOT_FINITE_MESSAGE} ({exc})") from None
        return X, y

    def _weights(self, sample_weight: Any, X: Any, y: np.ndarray, classes: np.ndarray,
                 yidx: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Sample and class weights (:func:`svc_row_weights` with the estimator's class_weight)."""
        sw, cw, _ = svc_row_weights(self.class_weight, sample_weight, X, y, classes, yidx)
        return sw, cw

    # ------------------------------------------------------------------ fit
    @fit_context()
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "KernelSVC":
        """Fit the C-SVC (one-vs-one for more than two classes).

        Parameters
        ----------
        X : array-like or sparse matrix (CPU), shape (n_samples, n_features)
            ``kernel="precomputed"``: the (n_samples, n_samples) Gram matrix;
            a callable kernel: any sequence of samples it accepts.
        y : array-like (n_samples,)
        sample_weight : array-like (n_samples,), optional
            Per-sample weights: Cᵢ = C·wᵢ; rows of weight ≤ 0 are left out
            (as LIBSVM does).

        Returns
        -------
        self
        """
        X, y = self._validated_training_data(X, y)
        classes, yidx = encode_classes(y)
        sw, cw = self._weights(sample_weight, X, y, classes, yidx)
        dev = self._device()
        callable_kernel = is_user_callable(self.kernel)
        if callable_kernel and dev.is_gpu:
            warnings.warn(f"kernel={self.kernel!r} is a Python function, which runs on the CPU: "
                          f"KernelSVC fits and predicts on the CPU instead of {dev} "
                          "(fitted_device_ == 'cpu')", UserWarning, stacklevel=2)
            dev = bk.CPU
        dt = bk.resolve_dtype(self.dtype, dev)
        X = bk.host_unless_gpu(X, dev)
        if callable_kernel:
            kern, kernel_ = PRECOMPUTED, self.kernel
            data = callable_gram(self.kernel, X, X)
        elif is_precomputed(self.kernel):
            kern = kernel_ = PRECOMPUTED
            data = X
        else:
            kern = kernel_ = self._resolved_kernel(X)
            data = X
        data = bk.gpu_ready(data, dev, dt)
        max_iter = None if self.max_iter == -1 else int(self.max_iter)
        # pair (lo, hi) is solved with +1 for hi; solver="libsvm" is one LIBSVM call, SVC's own
        result = solve_svc(data, yidx, classes, kern, float(self.C), tol=float(self.tol), max_iter=max_iter,
                           device=dev, dtype=dt, sample_weight=None if sw is None else np.maximum(sw, 0.0),
                           class_weight=cw, method=self.solver, shrinking=bool(self.shrinking),
                           cache_bytes=int(float(self.cache_size) * 2**20))
        self._store(result, kernel_=kernel_, X=X)
        cache, capped = cache_within_budget(int(float(self.cache_size) * 2**20))
        cut_cache = capped and result.solver in ("libsvm", "smo")
        self.memory_fallback_ = bk.fallback_text("kernel_cache" if cut_cache else None, result.memory_fallback)
        if cut_cache:
            warn_memory_fallback("KernelSVC", f"the kernel cache was cut from cache_size="
                                 f"{float(self.cache_size):g} MB to {cache / 2**20:.0f} MB")
        warn_unconverged(result.converged.tolist(), result.max_iter_reached.tolist(), max_iter,
                         float(self.tol), "KernelSVC")
        report("KernelSVC", f"solver={self.solver_}, {result.converged.size} binary problem(s), "
               f"{self.support_.size} SVs, iterations={self.n_iter_.tolist()}, "
               f"converged={bool(self.converged_.all())}", self.verbose)
        if self.probability:
            self._fit_probability(X, y, sample_weight=sample_weight)
        return self

    @classmethod
    def from_result(cls, result: KernelSVCResult, X: Any, kernel_: Any, **params: Any) -> "KernelSVC":
        """A fitted KernelSVC with parameters ``params`` holding a problem solved outside
        :meth:`fit` (e.g. by the cross-validated search's shared engine,
        :mod:`gpuksvm.model_selection.kernel_svc`).

        Parameters
        ----------
        result : KernelSVCResult
            The solved one-vs-one C-SVC (:func:`gpuksvm.solvers.smo.svc.solve_svc` or
            :func:`gpuksvm.solvers.smo.path.solve_grid`), support indices into ``X``'s rows.
        X : the validated training data it was solved on (its shape, and whether it is sparse)
        kernel_ : the resolved kernel (``Kernel``, ``"precomputed"`` or the callable)
        **params : the estimator's parameters (checked as :meth:`fit` checks them)

        Returns
        -------
        KernelSVC
        """
        svc = cls(**params)
        svc._check_params()
        svc._store(result, kernel_=kernel_, X=X)
        if not is_user_callable(kernel_):
            svc.n_features_in_ = shape_of(X)[1]
        return svc

    def _store(self, result: KernelSVCResult, *, kernel_: Any, X: Any) -> None:
        """The one writer of the fitted state: a solved one-vs-one C-SVC, with SVC's conventions
        for the training data ``X`` the model was fitted on and the kernel ``kernel_`` it keeps
        (a callable kernel keeps X as ``X_fit_``; a sparse fit gives a CSR ``dual_coef_``)."""
        if not result.finite:
            raise ValueError(NOT_FINITE_MESSAGE)
        callable_kernel = is_user_callable(kernel_)
        model = {
            "classes_": result.classes, "kernel_": kernel_, "support_": result.support,
            "support_vectors_": result.support_vectors, "n_support_": result.n_support,
            "dual_coef_": sparse_like(result.dual_coef, bk.is_sparse(X) and not callable_kernel),
            "intercept_": result.intercept, "solver_": result.solver, "n_iter_": result.n_iter,
            "objective_": result.objective, "converged_": result.converged,
            "shape_fit_": X.shape if hasattr(X, "shape") else (n_samples_of(X),),
        }
        if callable_kernel:
            model["X_fit_"] = X
        if result.held_out is not None:     # read while dual_coef_ and intercept_ are these arrays
            model["_held_out"] = (result.held_out, model["dual_coef_"], model["intercept_"])
        self.__dict__.update(model)
        self._set_fitted_device(result.device)
        for attr in ("probA_", "probB_", "X_fit_", "_held_out"):  # from an earlier fit
            if attr not in model:
                self.__dict__.pop(attr, None)

    # ------------------------------------------------------------------ model (SVCSurfaceMixin)
    def _problem_coef(self) -> np.ndarray:
        """(n_SV, n_pairs) coefficients of each pair, unpacked from ``dual_coef_``'s LIBSVM layout.

        Pair (i, j): the SVs of class i carry ``dual_coef_[j − 1]``, those of
        class j ``dual_coef_[i]``, every other SV 0.  Checks that the fitted
        attributes still fit together (they are public and may be edited).
        """
        dual = self.dual_coef_
        dual = np.asarray(bk.to_host(dual.toarray() if bk.is_sparse(dual) else dual), dtype=np.float64)
        K = len(self.classes_)
        n_support = np.asarray(bk.to_host(self.n_support_)).astype(np.int64)
        n_sv = dual.shape[1] if dual.ndim == 2 else -1
        n_pairs = K * (K - 1) // 2
        n_rows = (None if is_precomputed(self.kernel_) or is_user_callable(self.kernel_)
                  else n_samples_of(self.support_vectors_))
        if (dual.shape != (max(K - 1, 1), n_sv) or n_support.shape != (K,) or n_support.sum() != n_sv
                or shape_of(self.support_) != (n_sv,) or shape_of(self.intercept_) != (n_pairs,)
                or (n_rows is not None and n_rows != n_sv)):
            raise ValueError(
                f"The fitted model of {type(self).__name__} was altered: dual_coef_ {dual.shape}, "
                f"n_support_ {n_support.tolist()}, support_ {shape_of(self.support_)}, "
                f"support_vectors_ rows {n_rows}, intercept_ {shape_of(self.intercept_)} "
                f"do not fit {K} classes")
        return pair_coef(dual, n_support, K)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = is_precomputed(self.kernel)
        tags.input_tags.sparse = not is_precomputed(self.kernel)
        return tags


def svc_row_weights(class_weight: Any, sample_weight: Any, X: Any, y: np.ndarray, classes: np.ndarray,
                    yidx: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """KernelSVC's weights: Cᵢ = C·class_weight[yᵢ]·sample_weightᵢ, with SVC's errors.

    Returns ``(sample_weight, class weights per class, w)``, ``w`` the per-row multiplier of C (rows
    with w ≤ 0 are left out, as LIBSVM does).  Raises ValueError, with SVC's messages, when no row
    of positive weight is left for a class.  The cross-validated search
    (:mod:`gpuksvm.model_selection.kernel_svc`) applies the same rule to each fold.
    """
    sw = (None if sample_weight is None
          else check_sample_weight(sample_weight, X, ensure_non_negative=False))
    # SVC's class-weight semantics, not gpuksvm.array.validation.class_weight_vector (LinearSVM's
    # and LLSVM's, LinearSVC's rule): KernelSVC is an SVC drop-in, and SVC's "balanced"
    # counts raw rows (it ignores sample_weight), accepts negative dict weights (those
    # rows are dropped below) and names a missing class with its own message
    cw = None if class_weight is None else compute_class_weight(class_weight, classes=classes, y=y)
    w = np.ones(yidx.shape[0]) if sw is None else sw
    if cw is not None:
        w = w * cw[yidx]
    # LIBSVM leaves out the rows of weight ≤ 0 (their αᵢ are 0), so does every solver here
    kept = w > 0
    if not kept.any():
        raise ValueError("Invalid input - all samples have zero or negative weights.")
    # SVC's sentence first (its tests match it), then the rule every estimator states
    dead = zero_weight_classes_message(classes, class_counts(yidx, classes.shape[0], np.clip(w, 0, None)))
    left = np.unique(yidx[kept])
    if left.size < 2:
        raise ValueError("Invalid input - all samples with positive weights belong to the same "
                         f"class ({dead}).")
    if dead:
        missing = classes[np.setdiff1d(np.arange(classes.shape[0]), left)]
        raise ValueError(f"Invalid input - all samples of class(es) {missing.tolist()} have zero "
                         f"or negative weights ({dead}).")
    return sw, cw, w
