"""LinearSVM — the L2-regularized linear SVM engine (GPU and CPU, in memory or out of core).

Problem (per binary problem; SPEC §1 "Linear SVM solvers"):

    min_w  ½‖w‖² + C Σᵢ cᵢ ℓ(yᵢ w̃ᵀx̃ᵢ),   ℓ = squared hinge (default) or hinge,

with cᵢ = sample_weightᵢ × class weight.  **Intercept**: with
``fit_intercept=True`` a constant column of value ``intercept_scaling`` (s) is
appended to the features and its weight w_{d+1} is *regularized like the
others*, exactly as LIBLINEAR (scikit-learn's ``LinearSVC``) does; the
intercept is ``intercept_ = s · w_{d+1}``.  A larger s weakens the
regularization of the intercept.  The column is applied implicitly (the data
are never copied to append it).

Engines (``solver``; the one that ran is in ``solver_``):

* ``"newton"`` — primal Newton for the squared hinge
  (:func:`gpuksvm.solvers.linear.newton_memory.newton_squared_hinge`): Cholesky of
  H = I + 2C F̃_IᵀF̃_I for one dense problem of moderate width, Hessian-free
  Newton-CG (all one-vs-rest problems in the same GEMMs) otherwise;
* ``"dual_cd"`` — dual coordinate descent with shrinking (Hsieh et al. 2008),
  both losses, all one-vs-rest problems in the same sweeps
  (:func:`gpuksvm.solvers.linear.dual_cd.dual_cd`); ``"dcd"`` is a deprecated alias
  (``FutureWarning``);
* ``"liblinear"`` — scikit-learn's ``LinearSVC`` (LIBLINEAR), CPU only, with
  the same C, loss, class/sample weights and intercept column: its primal
  trust-region Newton (TRON) for the squared hinge when n > d (``solver_`` is
  then ``"liblinear-primal"``), its dual coordinate descent otherwise
  (``"liblinear"``) — scikit-learn's ``dual="auto"`` rule;
* ``"sbm"`` — selective block minimization out of core
  (:func:`gpuksvm.solvers.linear.sbm.sbm`).

Out of core (``fit`` gets a :class:`gpuksvm.data.blocks.BlockSource`, a list of
``(X_block, y_block)`` pairs or an SVMlight file path): the squared hinge with
``solver="auto"`` or ``"newton"`` runs the in-memory Newton solver over the
streamed blocks (:func:`gpuksvm.solvers.linear.newton_stream.newton_stream`,
``solver_ = "newton-stream"``: about one pass per Newton step, dim × dim
statistics per pass, the same stopping rule and line search, so the same
solution as in memory) when the features are at most 2,048 wide; the hinge
loss, wider features and the other solvers run SBM.  ``n_passes_`` counts the
passes over the data.

``solver="auto"`` (the engine that ran is always in ``solver_``):

* GPU: squared hinge → Newton, hinge → DCD;
* CPU, squared hinge → Newton, except sparse X with more than 256 columns →
  LIBLINEAR; hinge → LIBLINEAR (its compiled DCD is faster than a NumPy one).

Measured on the 2-core development CPU, squared hinge, C=1, against
scikit-learn's ``LinearSVC`` defaults (LIBLINEAR's primal TRON here): ijcnn1
49,990 × 22 Newton 0.093 s vs 0.355 s (``python bench/solvers.py --scale
paper``, interleaved medians); adult 32,561 × 123
dense 0.10 vs 0.21 s, sparse (Newton-CG) 0.14 vs 0.24 s; 5 classes
20,000 × 50 (all one-vs-rest problems in the same CG products) 0.52 vs 1.2 s;
dense 20,000 × 1,000 3.9 vs 8–10 s — but sparse 30,000 × 50,000 (0.2% dense)
4.7 vs 3.1 s at C=1 and 17.5 vs 3.7 s at C=10, hence LIBLINEAR for wide
sparse data.  The CPU solvers run their BLAS calls on one thread for narrow
designs (≤ :data:`gpuksvm.solvers.linear.problem.NARROW_DIM` columns), on a busy
host (:mod:`gpuksvm.array.blas_threads`) and, at any width, in Newton's Cholesky
steps (NumPy's and SciPy's OpenBLAS alternate there: 40,000 × 2,000 took 25 s on
two threads, 3.6 s on one; :func:`gpuksvm.solvers.linear.newton_memory.newton_squared_hinge`):
with two spinning OpenBLAS threads the same ijcnn1 fit took 1.05 s.

Multi-class: one-vs-rest, with LIBLINEAR's class-weight rule (in problem c only
class c's weight applies).

**Extreme costs.**  When C·(sample weight × class weight) is so large that
C·n·max‖x̃ᵢ‖² exceeds 1e13, the regularizer weighs less than 1e-13 of the
loss's curvature: the problem is numerically its C → ∞ limit (to far below
any solver tolerance), Newton's Hessian I + 2C·F̃ᵀDF̃ can no longer resolve
its identity part in float64, and beyond ~1e150 the products overflow (an
unscaled C = 1e300 gives an all-zero model).  Every cost is then multiplied by the same factor that
brings the product to that bound — relative weights are kept, the solution is
the same to the solver's tolerance — with a :class:`ScaledProblemWarning`, and
``cost_scale_`` records the factor (1.0 otherwise).  Data whose squares
overflow the working dtype are refused (:func:`gpuksvm.array.validation.check_working_range`).
Out of core, Newton (``"newton-stream"``) is scaled the same way, with
max‖x̃ᵢ‖² from :meth:`gpuksvm.data.blocks.BlockSource.max_row_sq_norm` (one more
pass for sources that are neither arrays nor carry a bound, counted in
``n_passes_``); SBM keeps ``cost_scale_ = 1`` and refuses C·class_weight > 1e100,
where its dual variables would overflow.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin, fit_context
from gpuksvm.data.blocks import as_block_source, is_block_input
from gpuksvm.estimators.calibration import ProbabilityMixin
from gpuksvm.estimators.params import CLASS_WEIGHT, DEVICE_PARAMS, count, positive
from gpuksvm.solvers.linear import problem as lin
from gpuksvm.solvers.cost_scaling import ScaledProblemWarning, extreme_cost_scale, scaled_costs
from gpuksvm.solvers.linear.svm import (
    SOLVERS,
    LinearSVMParams,
    LinearSVMResult,
    solve_linear_svm,
    solve_linear_svm_blocks,
)
from gpuksvm.array.validation import check_sample_weight, max_row_sq_norm, validate_X, validate_X_y

__all__ = ["LinearSVM", "ScaledProblemWarning", "extreme_cost_scale", "scaled_costs"]


@dataclass(frozen=True)
class _CheckedRows:
    """Training arrays a LinearSVM fit validated: X and y as validated, the checked sample
    weights, the weights as given (for the calibration's own split) and max‖xᵢ‖²."""

    X: Any
    y: np.ndarray
    sample_weight: Any
    given_weight: Any
    row_sq_norm: float


_CONSTRAINTS = {
    "C": [positive()],
    "loss": [StrOptions(set(lin.LOSSES))],
    "solver": [StrOptions(set(SOLVERS) | {"dcd"}, deprecated={"dcd"})],
    "fit_intercept": ["boolean"],
    # the constant column's square enters every Gram product: keep it far from overflow
    "intercept_scaling": [Interval(Real, 0, 1e150, closed="neither")],
    "class_weight": CLASS_WEIGHT,
    "tol": [positive()],
    "max_iter": [count(1)],
    "block_size": [None, count(1)],
    "n_passes": [count(1)],
    "cache_drop": [Interval(Real, 0, 1, closed="right")],
    "probability": ["boolean"],
    **DEVICE_PARAMS,
}
class LinearSVM(DeviceMixin, ProbabilityMixin, ClassifierMixin, BaseEstimator):
    """L2-regularized linear SVM (squared hinge or hinge loss), one-vs-rest.

    Parameters
    ----------
    C : float, default=1.0
        Cost of the losses.
    loss : {"squared_hinge", "hinge"}, default="squared_hinge"
    solver : {"auto", "newton", "dual_cd", "liblinear", "sbm"}, default="auto"
        See the module docstring; ``"sbm"`` on arrays reads them in
        ``block_size`` blocks (e.g. an ``np.memmap`` never fully loaded).
    fit_intercept : bool, default=True
        Append the constant column (regularized, as LIBLINEAR).
    intercept_scaling : float > 0, default=1.0
        Its value s; ``intercept_ = s · w_{d+1}``.
    class_weight : dict, "balanced" or None, default=None
        Multipliers of C per class.
    tol : float, default=1e-4
        Newton: relative gradient-norm tolerance; DCD/SBM/LIBLINEAR: projected
        gradient tolerance (LIBLINEAR's dual criterion).
    max_iter : int, default=1000
        Newton steps or DCD epochs (SBM: DCD epochs per sub-problem are
        ``min(max_iter, 50)``).
    block_size : int or None, default=None
        Rows per block for out-of-core training (None: 5,000).
    n_passes : int, default=3
        SBM passes over the data.
    cache_drop : float in (0, 1], default=0.75
        SBM: fraction of (block ∪ cache) dropped after each block (paper: 0.75).
    probability : bool, default=False
        Platt scaling with internal 5-fold cross-validation
        (:mod:`gpuksvm.estimators.calibration`): ``predict_proba`` / ``predict_log_proba``
        (one sigmoid per one-vs-rest problem, normalized).  In-memory data only.
    device : {"auto", "cpu", "gpu", "cuda:N"}, default="auto"
    dtype : {"float32", "float64"} or None, default=None
        None: float32 on a GPU, float64 on the CPU.
    random_state : int, RandomState or None, default=None
        Coordinate order of DCD/SBM, LIBLINEAR's seed, Platt's folds.
    verbose : int, default=0

    Attributes
    ----------
    classes_ : (n_classes,) class labels
    coef_ : (1, d) or (n_classes, d) weights (on the fitting device)
    intercept_ : (1,) or (n_classes,)
    solver_ : str — the engine that ran ("newton", "newton-cg", "dual_cd", "liblinear",
        "liblinear-primal", "sbm", "newton-stream"; "newton-dask" for the model an LLSVM
        fit on a dask array holds)
    cost_scale_ : float — factor applied to every cost C·weight (1.0 unless the costs were
        extreme, see the module docstring)
    n_iter_ : int — Newton steps, DCD epochs or SBM passes (largest over problems)
    n_passes_ : int — passes over the data (out-of-core fits only)
    memory_fallback_ : str or None — what the memory budget made smaller (``"problem_groups"``:
        the Newton solver's one-vs-rest problems solved a group at a time, their per-row state
        did not fit together; ``"out_of_memory: ..."``: the GPU ran out of memory and the fit
        went on with less — fewer problems at once, the streamed blocks cut into pieces; one
        ``MemoryFallbackWarning`` either way), None if nothing
    objective_ : (1,) or (n_classes,) host float64 primal objective of each binary problem
    converged_ : bool
    n_features_in_ : int
    dual_coef_ : (n, 1 or n_classes) dual variables α (DCD and SBM only), host
    probA_, probB_ : Platt sigmoid parameters (``probability=True``)

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import LinearSVM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] - X[:, 1] > 0).astype(int)
    >>> clf = LinearSVM(C=1.0, device="cpu").fit(X, y)
    >>> clf.solver_, clf.score(X, y) > 0.95
    ('newton', True)
    """

    def __init__(self, C: float = 1.0, loss: str = "squared_hinge", solver: str = "auto",
                 fit_intercept: bool = True, intercept_scaling: float = 1.0, class_weight: Any = None,
                 tol: float = 1e-4, max_iter: int = 1000, block_size: int | None = None,
                 n_passes: int = 3, cache_drop: float = 0.75, probability: bool = False,
                 device: str = "auto", dtype: Any = None, random_state: Any = None, verbose: int = 0):
        self.C = C
        self.loss = loss
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.n_passes = n_passes
        self.cache_drop = cache_drop
        self.probability = probability
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    _parameter_constraints: dict = _CONSTRAINTS

    def _check_param_relations(self) -> None:
        if self.solver == "dcd":
            warnings.warn("solver='dcd' is now called solver='dual_cd' (the README's name); 'dcd' "
                          "will stop working in a future version", FutureWarning, stacklevel=4)
        if self.solver == "newton" and self.loss != "squared_hinge":
            raise ValueError("solver='newton' solves the squared hinge only; use loss='squared_hinge' "
                             "or solver='dual_cd' / 'liblinear' for the hinge")

    def _solver_params(self) -> LinearSVMParams:
        """The parameters of the solve (:class:`gpuksvm.solvers.linear.svm.LinearSVMParams`)."""
        return LinearSVMParams(C=float(self.C), loss=self.loss, solver=self.solver,
                               fit_intercept=bool(self.fit_intercept),
                               intercept_scaling=float(self.intercept_scaling), class_weight=self.class_weight,
                               tol=float(self.tol), max_iter=int(self.max_iter), n_passes=int(self.n_passes),
                               cache_drop=float(self.cache_drop), random_state=self.random_state,
                               verbose=self.verbose)

    # ------------------------------------------------------------------ fit
    @fit_context()
    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> "LinearSVM":
        """Fit the model.

        Parameters
        ----------
        X : array-like (NumPy, CuPy, SciPy sparse) of shape (n, d), or a
            :class:`gpuksvm.data.blocks.BlockSource` / list of ``(X_block, y_block)``
            pairs / SVMlight file path (trained out of core; ``y`` must then be None).
        y : (n,) labels
        sample_weight : (n,) non-negative multipliers of C (arrays only)
        """
        if is_block_input(X) or self.solver == "sbm":
            return self._fit_blocks(X, y, sample_weight)
        return self._fit_arrays(X, y, sample_weight, None)

    @fit_context()
    def fit_from(self, start: "LinearSVM", X: Any, y: Any, sample_weight: Any = None) -> "LinearSVM":
        """Fit on arrays starting from ``start``'s weights (a fitted model of the same problem at
        another C: a warm start along a C path).

        The in-memory Newton engine starts from them and stops by the same rule as a cold fit
        (relative to the gradient at zero), so the model is :meth:`fit`'s to the tolerance;
        the other engines start from zero.
        """
        if is_block_input(X) or self.solver == "sbm":
            raise ValueError("fit_from takes arrays (in memory); use fit for block input or solver='sbm'")
        check_is_fitted(start, "coef_")
        return self._fit_arrays(X, y, sample_weight, (start.coef_, start.intercept_))

    def _fit_arrays(self, X: Any, y: Any, sample_weight: Any, start: Any) -> "LinearSVM":
        """The in-memory fit of :meth:`fit` and :meth:`fit_from`."""
        return self._fit_checked(self._check_rows(X, y, sample_weight), start, stacklevel=5)

    def _check_rows(self, X: Any, y: Any, sample_weight: Any) -> "_CheckedRows":
        """The validation of an in-memory fit, kept for more fits on the same rows."""
        given = sample_weight
        X, y, _ = validate_X_y(self, X, y)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, X)
        return _CheckedRows(X, y, sw, given, max_row_sq_norm(X))

    @fit_context()
    def _fit_rows(self, rows: "_CheckedRows", start: Any = None) -> "LinearSVM":
        """An in-memory fit on rows another fit validated (:meth:`_check_rows`): the fits along a
        C path on one feature matrix validate it once.  ``start``: (coef, intercept), as :meth:`fit_from`."""
        return self._fit_checked(rows, start, stacklevel=4)

    def _fit_checked(self, rows: "_CheckedRows", start: Any, stacklevel: int) -> "LinearSVM":
        dev = self._device()
        self._store(solve_linear_svm(rows.X, rows.y, self._solver_params(), device=dev, dtype=self.dtype,
                                     sample_weight=rows.sample_weight, stacklevel=stacklevel - 1, start=start,
                                     row_sq_norm=rows.row_sq_norm))
        self._warn_unconverged(stacklevel=stacklevel)
        if self.probability:
            self._fit_probability(rows.X, rows.y, rows.given_weight)
        return self

    def _fit_blocks(self, X: Any, y: Any, sample_weight: Any) -> "LinearSVM":
        """Out of core (:func:`gpuksvm.solvers.linear.svm.solve_linear_svm_blocks`)."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported with out-of-core (block source) input")
        if self.probability:
            raise ValueError("probability=True needs in-memory data; it is not available with "
                             "out-of-core (block source) input")
        src = as_block_source(X, y, block_size=int(self.block_size or 5000))
        dev = self._device()
        self._store(solve_linear_svm_blocks(src, self._solver_params(), device=dev, dtype=self.dtype,
                                            stacklevel=3))
        self._warn_unconverged(stacklevel=4)
        return self

    def _store(self, result: LinearSVMResult) -> None:
        """The one writer of the fitted state: a solved linear SVM."""
        self.classes_ = np.asarray(result.classes)
        self.n_features_in_ = int(result.n_features)
        self.coef_ = result.coef
        self.intercept_ = result.intercept
        self.objective_ = np.asarray(result.objective, dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.solver_ = result.solver
        self.cost_scale_ = float(result.cost_scale)
        if result.dual_coef is not None:
            self.dual_coef_ = result.dual_coef
        if result.n_passes is not None:
            self.n_passes_ = int(result.n_passes)
        self.memory_fallback_ = result.memory_fallback
        self._set_fitted_device(result.device)

    def _warn_unconverged(self, stacklevel: int) -> None:
        """The ConvergenceWarning of a fit stopped by ``max_iter`` (SBM stops after ``n_passes``)."""
        if self.converged_ or self.solver_ == "sbm":
            return
        if self.solver_ == "newton-stream":
            msg = (f"LinearSVM (newton-stream) did not converge in max_iter={self.max_iter} Newton steps; "
                   "increase max_iter")
        else:
            msg = (f"LinearSVM ({self.solver_}) did not converge in max_iter={self.max_iter} iterations; "
                   "increase max_iter or scale the data")
        warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel)

    @classmethod
    def from_result(cls, result: LinearSVMResult, **params: Any) -> "LinearSVM":
        """A fitted LinearSVM with parameters ``params`` holding a solved problem (a solve run
        outside :meth:`fit`, e.g. the Dask LLSVM fit's Newton:
        :meth:`gpuksvm.solvers.linear.svm.LinearSVMResult.from_solution`)."""
        svm = cls(**params)
        svm._store(result)
        return svm

    # ------------------------------------------------------------------ predict
    def _decision_blocks(self, X: Any) -> tuple[Any, str, Any, int]:
        """X validated, the caller's array kind, and the function from a block of its rows to
        their host (b, n_problems) float64 values wᵀx + b (each block moved to the fitted device
        in the model's dtype there: a copy of up to ``n_features`` values per row)."""
        check_is_fitted(self, "coef_")
        X, kind = validate_X(self, X, reset=False)
        dev, W = self._fitted_device(), self.coef_
        b = np.asarray(bk.to_host(self.intercept_), dtype=np.float64)[None, :]

        def values(rows: Any) -> np.ndarray:
            D = bk.to_device(rows, dev, W.dtype) @ W.T
            D = np.asarray(bk.to_host(D.toarray() if bk.is_sparse(D) else D), dtype=np.float64)
            D += b
            return D

        return X, kind, values, int(X.shape[1])

    def decision_function(self, X: Any) -> Any:
        """Decision values wᵀx + b: (n,) for two classes, (n, n_classes) for more.

        In row blocks of the memory budget (:meth:`_map_decisions`): no copy of all of X in the
        model's dtype, no (n, n_classes) temporary beyond the result."""
        check_is_fitted(self, "coef_")
        P = int(self.coef_.shape[0])
        D, kind = self._map_decisions(X, 0 if P == 1 else P, np.float64, (lambda V: V[:, 0]) if P == 1 else _same)
        return bk.as_kind(D, kind)

    def predict(self, X: Any) -> Any:
        """Class labels, in the caller's kind of array (:func:`gpuksvm.array.backend.labels_as_kind`);
        in row blocks of the memory budget, as :meth:`decision_function`."""
        check_is_fitted(self, "coef_")
        idx, _ = self._map_decisions(X, 0, np.int64, _vote)
        return bk.labels_as_kind(self.classes_[idx], bk.array_kind(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _same(D: np.ndarray) -> np.ndarray:
    return D


def _vote(D: np.ndarray) -> np.ndarray:
    """Class indices of a block of decision values: wᵀx + b > 0 (two classes), else the arg-max."""
    return (D[:, 0] > 0).astype(np.int64) if D.shape[1] == 1 else np.argmax(D, axis=1)
