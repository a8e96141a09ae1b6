"""The linear SVM's solve: engine choice, extreme-cost scaling, LIBLINEAR, out-of-core routing.

:func:`solve_linear_svm` (arrays in memory) and :func:`solve_linear_svm_blocks`
(a :class:`~gpuksvm.data.blocks.BlockSource`, out of core) solve the
one-vs-rest L2-regularized linear SVM that
:class:`~gpuksvm.estimators.linear_svm.LinearSVM` fits, with the parameters of
a :class:`LinearSVMParams`, and return a :class:`LinearSVMResult`: the model
and the engine that ran.  The problem, the engines and the measurements behind
``solver="auto"``'s rule are described in :mod:`gpuksvm.estimators.linear_svm`.

* :func:`choose_engine` — the engine that ``solver`` and the data select;
* the costs C·weight are scaled to the C → ∞ limit the solvers represent when
  they are extreme (:mod:`gpuksvm.solvers.cost_scaling`; ``cost_scale``);
* :func:`solve_liblinear` — LIBLINEAR through scikit-learn's ``LinearSVC``, on
  the same problem as the other engines;
* out of core: Newton over the streamed blocks
  (:func:`~gpuksvm.solvers.linear.newton_stream.newton_stream`) for the squared
  hinge on features narrower than
  :data:`~gpuksvm.solvers.linear.problem.STREAM_MAX_DIM`, SBM
  (:func:`~gpuksvm.solvers.linear.sbm.sbm`) otherwise.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gpuksvm.array import backend as bk
from gpuksvm.array.validation import class_counts, class_weight_vector, encode_classes, max_row_sq_norm
from gpuksvm.solvers.cost_scaling import extreme_cost_scale, scaled_costs
from gpuksvm.solvers.linear import problem as lin
from gpuksvm.solvers.linear.dual_cd import dual_cd
from gpuksvm.solvers.linear.newton_memory import NewtonPath, newton_squared_hinge
from gpuksvm.solvers.linear.newton_stream import newton_stream
from gpuksvm.solvers.linear.sbm import sbm

__all__ = ["SOLVERS", "LinearSVMParams", "LinearSVMResult", "choose_engine", "class_weights",
           "solve_linear_svm", "solve_linear_svm_blocks", "solve_liblinear"]

#: the values of ``LinearSVMParams.solver`` (``"dcd"`` is read as ``"dual_cd"``)
SOLVERS = ("auto", "newton", "dual_cd", "liblinear", "sbm")

#: C·class_weight beyond which SBM's dual variables would overflow
_SBM_MAX_COST = 1e100


@dataclass(frozen=True)
class LinearSVMParams:
    """The settings of one linear SVM solve (LinearSVM's parameters, as the solvers take them).

    Attributes
    ----------
    C : float
    loss : {"squared_hinge", "hinge"}
    solver : {"auto", "newton", "dual_cd", "liblinear", "sbm"} (or "dcd", read as "dual_cd")
    fit_intercept : bool
    intercept_scaling : float
        s, the value of the regularized constant column (used with ``fit_intercept``).
    class_weight : dict, "balanced" or None
    tol : float
    max_iter : int
    n_passes : int
        SBM passes over the data.
    cache_drop : float
        SBM's fraction of (block ∪ cache) dropped after each block.
    random_state : int, RandomState or None
    verbose : int
    """

    C: float = 1.0
    loss: str = "squared_hinge"
    solver: str = "auto"
    fit_intercept: bool = True
    intercept_scaling: float = 1.0
    class_weight: Any = None
    tol: float = 1e-4
    max_iter: int = 1000
    n_passes: int = 3
    cache_drop: float = 0.75
    random_state: Any = None
    verbose: int = 0

    @property
    def scaling(self) -> float | None:
        """s of the constant column, or None without an intercept."""
        return float(self.intercept_scaling) if self.fit_intercept else None


@dataclass(frozen=True)
class LinearSVMResult:
    """A solved linear SVM: what :class:`~gpuksvm.estimators.linear_svm.LinearSVM` stores.

    Attributes
    ----------
    classes : (n_classes,) sorted class labels
    n_features : int, width of X (without the constant column)
    coef : (1, d) or (n_classes, d) weights, on ``device`` in the working dtype
    intercept : (1,) or (n_classes,) intercepts, likewise
    objective : host float64 primal objective of each binary problem
    n_iter : int, Newton steps, DCD epochs or SBM passes (largest over problems)
    converged : bool
    solver : str, the engine that ran ("newton", "newton-cg", "dual_cd", "liblinear",
        "liblinear-primal", "sbm", "newton-stream", ...)
    cost_scale : float, the factor applied to every cost C·weight (1.0 unless extreme)
    device : the device the model lives on
    dual_coef : (n, m) host dual variables (DCD and SBM), else None
    n_passes : passes over the data (out-of-core solves), else None
    memory_fallback : what the memory budget or an out-of-memory error made the solve cut
        (``"problem_groups"``: Newton's one-vs-rest problems solved a group at a time;
        ``"out_of_memory: ..."``, :func:`~gpuksvm.array.backend.fallback_text`), else None
    """

    classes: np.ndarray
    n_features: int
    coef: Any
    intercept: Any
    objective: np.ndarray
    n_iter: int
    converged: bool
    solver: str
    cost_scale: float
    device: bk.Device
    dual_coef: np.ndarray | None = None
    n_passes: int | None = None
    memory_fallback: str | None = None

    @classmethod
    def from_solution(cls, sol: lin.LinearSolution, classes: np.ndarray, n_features: int, solver: str,
                      device: bk.Device, dtype: Any, log_scale: float = 0.0,
                      n_passes: int | None = None, memory_fallback: str | None = None) -> "LinearSVMResult":
        """The result of a :class:`~gpuksvm.solvers.linear.problem.LinearSolution` found by any
        linear solver (the Dask Newton fit's too): weights moved to ``device`` in ``dtype``;
        ``log_scale`` as :func:`~gpuksvm.solvers.cost_scaling.extreme_cost_scale` returned it."""
        return cls(classes=np.asarray(classes), n_features=int(n_features),
                   coef=bk.to_device(sol.coef, device, dtype), intercept=bk.to_device(sol.intercept, device, dtype),
                   objective=np.asarray(sol.objective, dtype=np.float64), n_iter=int(sol.n_iter),
                   converged=bool(sol.converged), solver=solver, cost_scale=math.exp(log_scale),
                   device=device, dual_coef=sol.alpha, n_passes=None if n_passes is None else int(n_passes),
                   memory_fallback=memory_fallback)


def choose_engine(solver: str, loss: str, device: bk.Device, X: Any) -> str:
    """The engine ``solver`` selects for X on ``device`` (in memory).

    ``"auto"``: on a GPU Newton for the squared hinge, DCD for the hinge; on
    the CPU LIBLINEAR for the hinge (its compiled DCD is faster than a NumPy
    one) and for sparse X wider than :data:`~gpuksvm.solvers.linear.problem.NARROW_DIM`
    (where Newton's CG steps lose to it), Newton otherwise.
    """
    if solver == "dcd":
        return "dual_cd"
    if solver != "auto":
        return solver
    if device.is_gpu:
        return "newton" if loss == "squared_hinge" else "dual_cd"
    if loss == "hinge":
        return "liblinear"
    return "liblinear" if bk.is_sparse(X) and X.shape[1] > lin.NARROW_DIM else "newton"


def class_weights(class_weight: Any, classes: np.ndarray, y_idx: np.ndarray,
                  sample_weight: np.ndarray | None = None) -> np.ndarray | None:
    """Per-class multipliers of C (:func:`gpuksvm.array.validation.class_weight_vector`: "balanced"
    counts rows by their sample weights, as LinearSVC; a class of zero total weight is an error)."""
    return class_weight_vector(class_weight, classes, class_counts(y_idx, classes.shape[0], sample_weight))


def solve_linear_svm(X: Any, y: np.ndarray, params: LinearSVMParams, *, device: bk.Device,
                     dtype: Any = None, sample_weight: np.ndarray | None = None,
                     stacklevel: int = 2, start: tuple[Any, Any] | NewtonPath | None = None,
                     row_sq_norm: float | None = None) -> LinearSVMResult:
    """Solve the one-vs-rest linear SVM on validated arrays.

    Parameters
    ----------
    X : (n, d) NumPy, CuPy or SciPy-sparse array (validated)
    y : (n,) labels
    params : LinearSVMParams
    device : the device to solve on (LIBLINEAR solves on the host; its model is moved there)
    dtype : working dtype, or None for the device's default
    sample_weight : (n,) checked non-negative multipliers of C, or None
    stacklevel : of the :class:`~gpuksvm.solvers.cost_scaling.ScaledProblemWarning`, counted
        from the caller of this function
    start : (coef, intercept), optional
        Weights of a solution of the same problem at another C (a warm start along a C path).
        The Newton engine starts from them; its stopping rule is relative to ‖∇f(0)‖, so the
        solution is a cold solve's to the tolerance.  The other engines start from zero.
        A :class:`~gpuksvm.solvers.linear.newton_memory.NewtonPath` instead: the state of the
        previous fit on the same X (the Newton engine's weights and Hessian Grams), which this
        fit then replaces with its own — the fits along a C path share one.
    row_sq_norm : float, optional
        max‖xᵢ‖² of X (:func:`~gpuksvm.array.validation.max_row_sq_norm`) when the caller has it
        (fits along a C path on the same rows); computed otherwise.

    Returns
    -------
    LinearSVMResult
    """
    classes, y_idx = encode_classes(y)
    cw = class_weights(params.class_weight, classes, y_idx, sample_weight)
    dt = bk.resolve_dtype(dtype, device)
    engine = choose_engine(params.solver, params.loss, device, X)
    Y, S = lin.ovr_targets(y_idx, classes.shape[0], class_weight=cw, sample_weight=sample_weight)
    s = params.scaling
    r2 = max_row_sq_norm(X) if row_sq_norm is None else float(row_sq_norm)
    log_scale = extreme_cost_scale(float(params.C), float(S.max()) if S.size else 0.0, X.shape[0],
                                   r2 + (s or 0.0) ** 2, stacklevel=stacklevel + 1)
    C, S = scaled_costs(float(params.C), S, log_scale)
    if engine == "liblinear":
        sol = solve_liblinear(X, y, params, Y, S, C, log_scale, sample_weight=sample_weight)
        return LinearSVMResult.from_solution(sol, classes, X.shape[1], sol.info["engine"], device, dt, log_scale)
    Xd = bk.to_device(X, device, dt)
    fallback = None
    if engine == "newton":
        path = start if isinstance(start, NewtonPath) else None
        W0 = None if path is not None else _start_weights(start, Y.reshape(Y.shape[0], -1).shape[1], X.shape[1], s,
                                                          device, dt)
        with bk.FallbackCollector() as retried:
            sol = newton_squared_hinge(Xd, Y, C, sample_weight=S, intercept_scaling=s, W0=W0, tol=float(params.tol),
                                       max_iter=int(params.max_iter), random_state=params.random_state,
                                       verbose=params.verbose, path=path)
        grouped = sol.info["problems_planned"] < Y.reshape(Y.shape[0], -1).shape[1]
        fallback = bk.fallback_text("problem_groups" if grouped else None, retried=retried.cut)
        if sol.info["method"] == "cg":
            engine = "newton-cg"
    else:
        sol = dual_cd(Xd, Y, C, params.loss, sample_weight=S, intercept_scaling=s, tol=float(params.tol),
                      max_iter=int(params.max_iter), shrinking=True, random_state=params.random_state)
    return LinearSVMResult(classes=classes, n_features=int(X.shape[1]), coef=sol.coef, intercept=sol.intercept,
                           objective=np.asarray(sol.objective, dtype=np.float64), n_iter=int(sol.n_iter),
                           converged=bool(sol.converged), solver=engine, cost_scale=math.exp(log_scale),
                           device=device, dual_coef=sol.alpha, memory_fallback=fallback)


def _start_weights(start: tuple[Any, Any] | None, m: int, d: int, scale: float | None,
                   device: bk.Device, dt: Any) -> Any:
    """W (dim, m) of Newton's design from ``(coef, intercept)``: coefᵀ, then intercept / scale for
    the constant column; None without a start or when its shape is another problem's."""
    if start is None:
        return None
    xp = bk.get_namespace(device)
    coef = bk.to_device(start[0], device, dt)
    if tuple(coef.shape) != (m, d):
        return None
    if not scale:
        return coef.T.copy()
    b = bk.to_device(start[1], device, dt).reshape(1, m) / float(scale)
    return xp.concatenate([coef.T, b.astype(dt)], axis=0)


def solve_liblinear(X: Any, y: np.ndarray, params: LinearSVMParams, Y: np.ndarray, S: np.ndarray, C: float,
                    log_scale: float = 0.0, *, sample_weight: np.ndarray | None = None) -> lin.LinearSolution:
    """LIBLINEAR through scikit-learn's LinearSVC (host, float64).

    The same problem as the other engines: C (times the cost scale
    exp(``log_scale``)), loss, class and sample weights, and the regularized
    constant column ``intercept_scaling`` (LIBLINEAR's own bias feature).
    Squared hinge with n > d runs LIBLINEAR's primal trust-region Newton,
    everything else its dual CD (scikit-learn's ``dual="auto"`` rule);
    ``info["engine"]`` says which.  ``Y``, ``S`` and ``C`` are the targets and
    (scaled) costs the other engines take: the objective reported is that
    problem's.
    """
    from sklearn.svm import LinearSVC
    from sklearn.utils import check_random_state

    X = bk.to_host(X)
    X = X.astype(np.float64) if X.dtype != np.float64 else X
    seed = check_random_state(params.random_state).randint(np.iinfo(np.int32).max)
    cw = params.class_weight if not isinstance(params.class_weight, dict) else dict(params.class_weight)
    dual = not (params.loss == "squared_hinge" and X.shape[0] > X.shape[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        # LIBLINEAR forms C·weight in double precision: the scaled C is enough (cost_scaling)
        ref = LinearSVC(C=math.exp(math.log(float(params.C)) + log_scale), loss=params.loss, dual=dual,
                        tol=float(params.tol), fit_intercept=bool(params.fit_intercept),
                        intercept_scaling=float(params.intercept_scaling), class_weight=cw,
                        max_iter=int(params.max_iter), random_state=seed).fit(X, y, sample_weight=sample_weight)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    coef = np.asarray(ref.coef_, dtype=np.float64)
    intercept = np.asarray(ref.intercept_, dtype=np.float64).reshape(-1)
    if not params.fit_intercept:
        intercept = np.zeros(coef.shape[0])
    obj = lin.primal_objective(coef, intercept if params.fit_intercept else None, X, Y, C, params.loss, S,
                               intercept_scaling=params.scaling)
    return lin.LinearSolution(coef, intercept, obj, int(np.max(ref.n_iter_)), converged,
                              info={"engine": "liblinear" if dual else "liblinear-primal"})


def solve_linear_svm_blocks(source: Any, params: LinearSVMParams, *, device: bk.Device, dtype: Any = None,
                            stacklevel: int = 2) -> LinearSVMResult:
    """Solve the one-vs-rest linear SVM out of core, over the blocks of a
    :class:`~gpuksvm.data.blocks.BlockSource`.

    The squared hinge with ``solver`` "auto" or "newton" on features narrower
    than :data:`~gpuksvm.solvers.linear.problem.STREAM_MAX_DIM` runs Newton over
    the streamed blocks, with the costs scaled as in memory (max‖x̃ᵢ‖² from
    :meth:`~gpuksvm.data.blocks.BlockSource.max_row_sq_norm`, whose pass, if
    any, counts in ``n_passes``); everything else runs SBM, with
    ``cost_scale = 1`` and C·class_weight > 1e100 refused (its dual variables
    would overflow).
    """
    labels = source.labels()
    classes, y_idx = encode_classes(labels)
    cw = class_weights(params.class_weight, classes, y_idx)
    dt = bk.resolve_dtype(dtype, device)
    width = source.n_features
    if (params.solver in ("auto", "newton") and params.loss == "squared_hinge"
            and (width is None or width < lin.STREAM_MAX_DIM)):
        return _solve_newton_stream(source, labels, classes, cw, params, device, dt, stacklevel + 1)
    top = float(params.C) * (1.0 if cw is None else float(np.max(cw)))
    if top > _SBM_MAX_COST:
        raise ValueError(f"C·class_weight = {top:.3g} is too large for out-of-core training (SBM's "
                         "dual variables would overflow); use C ≤ 1e100 — at such costs the model "
                         "is the C → ∞ limit anyway")
    sol, classes, n_features = sbm(
        source, float(params.C), params.loss, n_passes=int(params.n_passes), cache_drop=float(params.cache_drop),
        labels=labels, classes=classes, class_weight=cw, intercept_scaling=params.scaling,
        tol=float(params.tol), inner_max_iter=min(int(params.max_iter), 50),
        random_state=params.random_state, device=device, dtype=dt, verbose=params.verbose)
    return LinearSVMResult(classes=classes, n_features=int(n_features), coef=sol.coef, intercept=sol.intercept,
                           objective=np.asarray(sol.objective, dtype=np.float64), n_iter=int(sol.n_iter),
                           converged=bool(sol.converged), solver="sbm", cost_scale=1.0, device=device,
                           dual_coef=sol.alpha, n_passes=int(sol.n_iter) + 1)     # and the objective's pass


def _solve_newton_stream(source: Any, labels: np.ndarray, classes: np.ndarray, cw: np.ndarray | None,
                         params: LinearSVMParams, device: bk.Device, dt: Any,
                         stacklevel: int) -> LinearSVMResult:
    """Newton over the streamed blocks, with the costs scaled as in memory."""
    s = params.scaling or 0.0
    weights = np.ones(classes.shape[0]) if cw is None else cw
    r, r_passes = source.max_row_sq_norm()
    log_scale = extreme_cost_scale(float(params.C), float(weights.max()), labels.shape[0], r + s * s,
                                   stacklevel=stacklevel + 1)
    C, scaled = scaled_costs(float(params.C), weights, log_scale)
    with bk.FallbackCollector() as retried:
        sol, classes, n_features = newton_stream(
            source, C, labels=labels, classes=classes,
            class_weight=None if cw is None and log_scale == 0.0 else scaled,
            intercept_scaling=params.scaling, tol=float(params.tol), max_iter=int(params.max_iter),
            device=device, verbose=params.verbose)
    return LinearSVMResult.from_solution(sol, classes, n_features, "newton-stream", device, dt, log_scale,
                                         n_passes=int(sol.info["n_passes"]) + r_passes,
                                         memory_fallback=bk.fallback_text(retried=retried.cut))
