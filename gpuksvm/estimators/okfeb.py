"""OK-FEB: online kernel feature extraction on a budget (SPEC §4) — the estimators.

Paper: Sheikholeslami, Berberidis, Giannakis, "Large-scale kernel-based feature
extraction via low-rank subspace tracking on a budget" (IEEE TSP 2018).

* :class:`OKFEB` — the feature extractor (a scikit-learn transformer): it
  validates its parameters and input and calls the algorithm, whose state is an
  :class:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace` (``subspace_``); the model,
  the equations and the implementation notes are in :mod:`gpuksvm.solvers.okfeb.subspace`.
* :class:`OKFEBClassifier` / :class:`OKFEBRegressor` — a linear model on its
  features (the paper's Pegasos / regularized LMS, §VII-D); how ``fit`` orders
  the rows and trains the linear model, and the capacity check that says when
  the budget is too small for the data, are in
  :mod:`gpuksvm.solvers.okfeb.learners` with the measurements behind each default.
* :func:`fit_okfeb_grid` — one learner at several settings of its linear model
  (:data:`LEARNER_PARAMS`), the extractor's passes run once: the search engine of
  :mod:`gpuksvm.model_selection.okfeb`.
"""
from __future__ import annotations

import copy
from numbers import Integral, Real
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin, fit_context, name_retries
from gpuksvm.estimators.okfeb_extractor import OKFEB, windowed_kernel_error
from gpuksvm.estimators.params import (
    DEPRECATED,
    count,
    deprecated,
    non_negative,
    positive,
    shared_parameter_doc,
)
from gpuksvm.solvers.linear.problem import ovr_targets
from gpuksvm.solvers.okfeb.subspace import batch_objective
from gpuksvm.solvers.okfeb.learners import (
    BudgetTooSmallWarning,
    exact_classifier,
    exact_ridge,
    warn_if_too_small,
)
from gpuksvm.solvers.okfeb.training import Learner, OKFEBLearnerResult, fit_learners, map_outputs
from gpuksvm.solvers.linear.online import Pegasos, RegularizedLMS
from gpuksvm.array.validation import (
    check_allocation,
    check_invertible,
    check_param,
    encode_classes,
    validate_X,
    validate_X_y,
)

__all__ = ["OKFEB", "OKFEBClassifier", "OKFEBRegressor", "BudgetTooSmallWarning", "windowed_kernel_error",
           "batch_objective", "fit_okfeb_grid", "learner_params", "LEARNER_PARAMS"]


# =========================================================================== learners
#: the parameters of the linear learner only (the extractor does not read them): models that differ
#: only in these share the extractor's passes (:func:`fit_okfeb_grid`)
LEARNER_PARAMS = {"classification": ("alpha", "fit_intercept"),
                  "regression": ("alpha", "learning_rate", "normalize")}
_FE_PARAMS = ("kernel", "gamma", "degree", "coef0", "rank", "n_landmarks", "reg", "step_size",
              "step_decay", "censor", "target_censor_rate", "forget", "mode", "batch_size",
              "shuffle", "device", "dtype", "random_state")
_SOLVERS = ("exact", "online")


_LEARNER_CONSTRAINTS = {
    **{k: OKFEB._parameter_constraints[k] for k in _FE_PARAMS + ("budget",)},
    "alpha": [positive()],
    "fit_intercept": ["boolean"],
    "solver": [StrOptions(set(_SOLVERS))],
    "n_epochs": [count(1)],
    "verbose": ["verbose"],
}


class _OKFEBLearner(DeviceMixin, BaseEstimator):
    """Shared machinery: an OK-FEB extractor and a linear learner on its features q.

    ``fit`` = the extractor's pass(es) in the order of
    :func:`~gpuksvm.solvers.okfeb.learners.stream_order` + the learner (solved
    exactly on the final features, or online in the same pass) + the capacity
    check; ``partial_fit`` = one online pass of both over the rows as given.
    """

    _task = "classification"
    _parameter_constraints: dict = _LEARNER_CONSTRAINTS
    _renamed_parameters = {"budget": "n_landmarks"}

    def _extractor(self) -> OKFEB:
        params = {k: self._param(k) for k in _FE_PARAMS}
        if params["mode"] == "batch":
            raise ValueError("the online learners need an online mode ('budget', 'parametric', "
                             "'nonparametric'), got mode='batch'")
        return OKFEB(output="features", verbose=0, **params)

    def _check_param_relations(self) -> None:
        self._extractor()           # refuses mode="batch"; its parameters are declared here too

    def _check_learner_size(self, n_outputs: int) -> None:
        """The learner's weights are (rank + 1) × outputs: refuse an absurd rank before allocating."""
        check_param("rank", self.rank, Integral, low=1)
        check_allocation((int(self.rank) + 1) * n_outputs * 8,
                         f"the online learner's weights for rank={self.rank}")

    def _stream(self, X: Any, targets: np.ndarray) -> None:
        """One online pass of extractor and learner over the rows as given (prequential features)."""
        Z = self.extractor_.partial_fit_transform(X)
        self._learner_step(Z, targets)
        self.n_features_in_ = self.extractor_.n_features_in_

    def _fit_rows(self, X: Any, targets: np.ndarray) -> None:
        """``fit`` after validation: the extractor's passes, the learner and the capacity check
        (:func:`_fit_learners` on this model alone)."""
        _fit_learners([self], X, targets, stacklevel=6)

    def _as_learner(self) -> Learner:
        """This model's linear learner as the extractor's passes drive it."""
        return Learner(alpha=float(self.alpha), step=self._learner_step, solve_exact=self._set_exact,
                       model_output=self._model_output)

    def _store(self, result: OKFEBLearnerResult) -> None:
        """The one writer of what ``fit`` leaves besides the extractor's state and the learner's
        weights (which the extractor and the learner callbacks hold)."""
        self.n_features_in_ = self.extractor_.n_features_in_
        self.capacity_check_ = result.capacity_check
        self.budget_too_small_ = result.budget_too_small
        self.memory_fallback_ = result.memory_fallback

    def _on_features(self, X: Any, fn: Any) -> tuple[np.ndarray, str]:
        """(``fn`` of the host features of X, in row blocks of the memory budget; the caller's
        array kind)."""
        check_is_fitted(self, "extractor_")
        X, kind = validate_X(self, X, reset=False)     # checked once, here
        fe = self.extractor_
        return map_outputs(fe.subspace_, X, fe.output, float(fe.reg), fn), kind

    @property
    def n_seen_(self) -> int:
        check_is_fitted(self, "extractor_")
        return self.extractor_.n_seen_


class OKFEBClassifier(ClassifierMixin, _OKFEBLearner):
    """A linear SVM on OK-FEB features (paper §VI-A, eq. 37; Pegasos online, §VII-D).

    ``fit`` streams the rows through the extractor in a random order that does
    not depend on the order given, then solves the linear SVM on the features q
    of every row under the final extractor, then checks that the features beat a linear model on the raw features and
    a constant (``capacity_check_``; a :class:`BudgetTooSmallWarning` when not).
    ``partial_fit`` trains extractor and Pegasos in one pass over the rows as
    given (one-vs-rest for more than two classes).

    Parameters
    ----------
    mode : {"budget", "parametric", "nonparametric"}, default="budget"
        The extractor's online mode (as :class:`OKFEB`; "batch" is refused).
    solver : {"exact", "online"}, default="exact"
        How ``fit`` trains the linear model.  "exact": the extractor streams
        the rows, then the L2-loss SVM min (α/2)‖w‖² + (1/n)Σ max(0, 1 − y wᵀq̃)²
        is solved by primal Newton on every row's features under the final
        extractor; "online": Pegasos in the same pass as the extractor, on the
        features each row met on arrival (what ``partial_fit`` does).  The
        measured reason for the default is in :mod:`gpuksvm.solvers.okfeb.learners`.
    n_epochs : int, default=1
        Passes of ``fit`` over the rows (each in a new random order when
        ``shuffle``); 1 is the online setting.
    alpha : float, default=1e-4
        λ of the objective (α/2)‖w‖² + (1/n)Σ loss (Pegasos' λ; the exact solve
        uses C = 1/(α n)).
    fit_intercept : bool, default=True
        Constant feature (regularized).

    Attributes
    ----------
    extractor_ : OKFEB
    classes_ : array of labels
    coef_ : (n_outputs, r) host array, intercept_ : (n_outputs,)
    capacity_check_ : dict, the scores of the capacity check (``fit``)
    budget_too_small_ : bool, whether it failed (a BudgetTooSmallWarning was issued)
    memory_fallback_ : str or None
        ``"feature_blocks"`` when a row block of the final features ran out of device memory
        during ``fit`` and was retried with smaller blocks (one ``MemoryFallbackWarning``; the
        same features), else None.  The features are computed in row blocks sized from the
        memory budget, on the device and on the host.
    n_features_in_ : int

    Examples
    --------
    >>> from gpuksvm import OKFEBClassifier
    >>> from gpuksvm.datasets import make_two_spheres
    >>> X, y = make_two_spheres(600, noise=0.1, random_state=0)
    >>> clf = OKFEBClassifier(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    def __init__(self, kernel: str = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, rank: int = 50, n_landmarks: int = 150, reg: float = 1e-3,
                 step_size: float = 0.5, step_decay: float = 0.0, censor: Any = "auto",
                 target_censor_rate: float = 0.8, forget: float = 1.0, mode: str = "budget",
                 batch_size: int = 1, alpha: float = 1e-4, fit_intercept: bool = True,
                 solver: str = "exact", n_epochs: int = 1, shuffle: bool = True, device: str = "auto",
                 dtype: Any = None, random_state: Any = None, verbose: int = 0, budget: Any = DEPRECATED) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank = rank
        self.n_landmarks = n_landmarks
        self.reg = reg
        self.step_size = step_size
        self.step_decay = step_decay
        self.censor = censor
        self.target_censor_rate = target_censor_rate
        self.forget = forget
        self.mode = mode
        self.batch_size = batch_size
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.budget = budget

    def _targets(self, y: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(self.classes_, y)
        if np.any(idx >= len(self.classes_)) or np.any(self.classes_[np.minimum(idx, len(self.classes_) - 1)] != y):
            raise ValueError("y contains labels not in classes_ (pass all labels as `classes` "
                             "to the first partial_fit)")
        return ovr_targets(idx, len(self.classes_))[0]

    def _check_param_relations(self) -> None:
        super()._check_param_relations()
        check_invertible("alpha", self.alpha, "Pegasos' weights are G/(alpha·t) and the exact solve "
                         "uses C = 1/(alpha·n)")

    def _start(self, classes: np.ndarray) -> None:
        self.classes_ = np.asarray(classes)
        self.extractor_ = self._extractor()
        n_out = 1 if len(self.classes_) == 2 else len(self.classes_)
        self._check_learner_size(n_out)
        self._learner = Pegasos(int(self.rank), n_out, lam=float(self.alpha),
                                fit_intercept=bool(self.fit_intercept))

    def _learner_step(self, Z: Any, Y: np.ndarray) -> None:
        self._learner.partial_fit(Z, Y)

    def _set_exact(self, Z: np.ndarray, Y: np.ndarray, n: int) -> None:
        self._learner.set_weights(exact_classifier(Z, Y, float(self.alpha), bool(self.fit_intercept)), n)

    def _model_output(self, F: np.ndarray) -> np.ndarray:
        """Class indices the fitted model gives rows with features F."""
        D = self._learner.decision_function(F)
        return (D[:, 0] > 0).astype(np.int64) if D.shape[1] == 1 else np.argmax(D, axis=1)

    @fit_context()
    def fit(self, X: Any, y: Any) -> "OKFEBClassifier":
        X, y, _ = validate_X_y(self, X, y)
        classes, _ = encode_classes(y)
        self._start(classes)
        self._fit_rows(X, self._targets(y))
        return self

    @fit_context(partial=True)
    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> "OKFEBClassifier":
        """Update extractor and Pegasos with the next rows, in the order given (``classes`` needed
        on the first call unless every label occurs in it)."""
        first = not hasattr(self, "extractor_")
        if first:
            X, y, _ = validate_X_y(self, X, y)
            classes, _ = encode_classes(y if classes is None else np.asarray(classes))
            self._start(classes)
        else:
            X, kind = validate_X(self, X, reset=False)
            y = np.ravel(bk.to_host(y))
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        self._stream(X, self._targets(np.asarray(y)))
        return self

    @property
    def coef_(self) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        w = self._learner.coef
        return (w[:-1] if self.fit_intercept else w).T

    @property
    def intercept_(self) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        w = self._learner.coef
        return w[-1] if self.fit_intercept else np.zeros(w.shape[1])

    def _decisions(self, X: Any) -> tuple[np.ndarray, str]:
        check_is_fitted(self, "extractor_")
        D, kind = self._on_features(X, self._learner.decision_function)
        return (D[:, 0] if D.shape[1] == 1 else D), kind

    def decision_function(self, X: Any) -> Any:
        """Decision values of the linear SVM on the features, in the caller's kind of array."""
        D, kind = self._decisions(X)
        return bk.as_kind(D, kind)

    def predict(self, X: Any) -> Any:
        """Class labels, in the caller's kind of array (:func:`gpuksvm.array.backend.labels_as_kind`)."""
        D, kind = self._decisions(X)
        idx = (D > 0).astype(np.int64) if D.ndim == 1 else np.argmax(D, axis=1)
        return bk.labels_as_kind(self.classes_[idx], kind)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # rank-r features of a budgeted extractor: scikit-learn's fixed accuracy bar does not apply
        tags.classifier_tags.poor_score = True
        return tags


# the extractor's parameters are described once, in OKFEB's docstring
OKFEBClassifier.__doc__ = shared_parameter_doc(OKFEBClassifier, OKFEB)


class OKFEBRegressor(RegressorMixin, _OKFEBLearner):
    """Ridge regression on OK-FEB features (paper §VI-B; regularized LMS online, §VII-D).

    ``fit`` as :class:`OKFEBClassifier` with ridge regression in place of the
    linear SVM; ``partial_fit`` trains extractor and the leaky normalized LMS
    in one pass over the rows as given.

    Parameters
    ----------
    solver : {"exact", "online"}, default="exact"
        How ``fit`` trains the linear model, as in :class:`OKFEBClassifier`:
        "exact" solves the ridge regression min (1/n)Σ(y − wᵀq − b)² + α‖w‖²
        in closed form, "online" runs the leaky normalized LMS.
    learning_rate : float, default=0.1
        Normalized LMS step μ (0 < μ < 2); used online (``partial_fit``, ``solver="online"``).
    alpha : float, default=1e-4
        ℓ2 regularization: the ridge penalty α of the exact solve, the LMS leak online.
    normalize : bool, default=True
        Divide the LMS step by δ + ‖q‖² (the normalized LMS; δ = 1e-8).
    normalized : bool, default="deprecated"
        Deprecated alias of ``normalize`` (a ``FutureWarning``).

    Attributes
    ----------
    extractor_ : OKFEB
    coef_ : (r,) host array, intercept_ : float
    capacity_check_ : dict, budget_too_small_ : bool (see :class:`OKFEBClassifier`; the score is R²)
    memory_fallback_ : str or None, as :class:`OKFEBClassifier`
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import OKFEBRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(600, 2)); y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    >>> reg = OKFEBRegressor(gamma=0.5, rank=20, n_landmarks=60, device="cpu", random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.8
    True
    """

    _task = "regression"
    _parameter_constraints: dict = {
        **{k: v for k, v in _LEARNER_CONSTRAINTS.items() if k != "fit_intercept"},
        "alpha": [non_negative()],
        "learning_rate": [positive()],
        "normalize": ["boolean"],
        "normalized": deprecated(["boolean"]),
    }
    _renamed_parameters = {"budget": "n_landmarks", "normalized": "normalize"}

    def __init__(self, kernel: str = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, rank: int = 50, n_landmarks: int = 150, reg: float = 1e-3,
                 step_size: float = 0.5, step_decay: float = 0.0, censor: Any = "auto",
                 target_censor_rate: float = 0.8, forget: float = 1.0, mode: str = "budget",
                 batch_size: int = 1, learning_rate: float = 0.1, alpha: float = 1e-4,
                 normalize: bool = True, solver: str = "exact", n_epochs: int = 1, shuffle: bool = True,
                 device: str = "auto", dtype: Any = None, random_state: Any = None,
                 verbose: int = 0, budget: Any = DEPRECATED, normalized: Any = DEPRECATED) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank = rank
        self.n_landmarks = n_landmarks
        self.reg = reg
        self.step_size = step_size
        self.step_decay = step_decay
        self.censor = censor
        self.target_censor_rate = target_censor_rate
        self.forget = forget
        self.mode = mode
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.normalize = normalize
        self.solver = solver
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.budget = budget
        self.normalized = normalized

    def _check_param_relations(self) -> None:
        super()._check_param_relations()
        if self._param("normalize"):   # normalized LMS converges for 0 < μ < 2 only
            check_param("learning_rate", self.learning_rate, Real, low=0, high=2, closed="neither")

    def _start(self) -> None:
        self.extractor_ = self._extractor()
        self._check_learner_size(1)
        self._learner = RegularizedLMS(int(self.rank), step=float(self.learning_rate),
                                       alpha=float(self.alpha), normalized=bool(self._param("normalize")))

    def _learner_step(self, Z: Any, y: np.ndarray) -> None:
        self._learner.partial_fit(Z, y)
        if not np.isfinite(self._learner.w).all():   # a diverged model predicts NaN: refuse it
            raise ValueError(f"OKFEBRegressor diverged: the LMS weights became inf/NaN within "
                             f"{self._learner.t} samples. Reduce learning_rate (now "
                             f"{self.learning_rate!r}"
                             + ("; the normalized LMS needs 0 < learning_rate < 2" if self._param("normalize")
                                else "; or use normalize=True") + ") or scale y")

    def _set_exact(self, Z: np.ndarray, y: np.ndarray, n: int) -> None:
        self._learner.set_weights(exact_ridge(Z, y, float(self.alpha)), n)

    def _model_output(self, F: np.ndarray) -> np.ndarray:
        return self._learner.predict(F)

    @fit_context()
    def fit(self, X: Any, y: Any) -> "OKFEBRegressor":
        X, y, _ = validate_X_y(self, X, y, y_numeric=True)
        self._start()
        self._fit_rows(X, np.asarray(y, dtype=np.float64))
        return self

    @fit_context(partial=True)
    def partial_fit(self, X: Any, y: Any) -> "OKFEBRegressor":
        """Update extractor and LMS with the next rows, in the order given."""
        first = not hasattr(self, "extractor_")
        if first:
            X, y, _ = validate_X_y(self, X, y, y_numeric=True)
            self._start()
        else:
            X, _ = validate_X(self, X, reset=False)
            y = np.ravel(bk.to_host(y)).astype(np.float64)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
        self._stream(X, np.asarray(y, dtype=np.float64))
        return self

    @property
    def coef_(self) -> np.ndarray:
        check_is_fitted(self, "extractor_")
        return self._learner.w[:-1].copy()

    @property
    def intercept_(self) -> float:
        check_is_fitted(self, "extractor_")
        return float(self._learner.w[-1])

    def predict(self, X: Any) -> Any:
        """Predicted targets, in the caller's kind of array."""
        check_is_fitted(self, "extractor_")
        P, kind = self._on_features(X, self._learner.predict)
        return bk.as_kind(P, kind)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.regressor_tags.poor_score = True
        return tags


OKFEBRegressor.__doc__ = shared_parameter_doc(OKFEBRegressor, OKFEBClassifier, OKFEB)


def _fit_learners(models: Sequence[_OKFEBLearner], X: Any, targets: np.ndarray, *, stacklevel: int) -> None:
    """Fit models that differ only in :data:`LEARNER_PARAMS`, started (``_start``) on validated
    rows: the first model's extractor streams the rows once
    (:func:`~gpuksvm.solvers.okfeb.training.fit_learners`), every model gets a copy of it, its own
    learner and capacity check (a :class:`BudgetTooSmallWarning` each, as its own fit gives)."""
    lead = models[0]
    fe = lead.extractor_
    results = fit_learners(X, targets, fe.start(X), fe.subspace_params(), [m._as_learner() for m in models],
                           solver=lead.solver, n_epochs=int(lead.n_epochs), shuffle=bool(lead.shuffle),
                           random_state=lead.random_state, output=fe.output, reg=float(lead.reg), task=lead._task)
    for model, result in zip(models, results):
        if model is not lead:
            model.extractor_ = copy.deepcopy(fe)
        model._store(result)
        warn_if_too_small(result.capacity_check, type(model).__name__, int(model.rank),
                          int(model._param("n_landmarks")), model.solver, stacklevel=stacklevel)


def learner_params(estimator: OKFEBClassifier | OKFEBRegressor) -> tuple[str, ...]:
    """The parameters of ``estimator``'s linear learner (:data:`LEARNER_PARAMS` of its task)."""
    if not isinstance(estimator, _OKFEBLearner):
        raise TypeError(f"OKFEBClassifier or OKFEBRegressor expected, got {type(estimator).__name__}")
    return LEARNER_PARAMS[estimator._task]


def fit_okfeb_grid(X: Any, y: Any, *, estimator: OKFEBClassifier | OKFEBRegressor,
                   settings: Sequence[dict]) -> list[OKFEBClassifier | OKFEBRegressor]:
    """Fit an OK-FEB learner at several settings of its linear learner, the extractor's passes shared.

    The extractor (Alg. 4+5 over the rows in ``fit``'s order, and the final features of every row
    for ``solver="exact"``) does not read the learner's parameters (:data:`LEARNER_PARAMS`:
    ``alpha`` and ``fit_intercept`` of the classifier; ``alpha``, ``learning_rate`` and
    ``normalize`` of the regressor), so it streams the rows once and every setting's learner is
    trained on its features: the exact solve on every row's final features, or Pegasos / the LMS
    on the prequential features of each pass.  With an int ``random_state`` (or a
    ``RandomState``) each model is the one ``clone(estimator).set_params(**setting).fit(X, y)``
    gives — the same extractor, learner and capacity check; with ``random_state=None`` the
    models share one random stream order.

    Parameters
    ----------
    X, y : training data
    estimator : OKFEBClassifier or OKFEBRegressor
        Template for every other parameter (not modified).
    settings : sequence of dicts of :data:`LEARNER_PARAMS` (non-empty)

    Returns
    -------
    list of fitted models, one per setting, in order; each has its setting's parameters.

    Examples
    --------
    >>> from gpuksvm.estimators.okfeb import OKFEBClassifier, fit_okfeb_grid
    >>> from gpuksvm.datasets import make_two_spheres
    >>> X, y = make_two_spheres(600, noise=0.1, random_state=0)
    >>> base = OKFEBClassifier(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0)
    >>> models = fit_okfeb_grid(X, y, estimator=base, settings=[{"alpha": 1e-4}, {"alpha": 1e-2}])
    >>> [m.alpha for m in models]
    [0.0001, 0.01]
    """
    learner = learner_params(estimator)
    settings = [dict(s) for s in settings]
    if not settings:
        raise ValueError("settings must be non-empty")
    other = sorted({k for s in settings for k in s} - set(learner))
    if other:
        raise ValueError(f"fit_okfeb_grid shares the extractor across the learner's parameters {learner}; "
                         f"{other} change the extractor: fit those settings apart")
    models = [clone(estimator).set_params(**s) for s in settings]
    for m in models:
        m._check_params()
    lead = models[0]
    regression = lead._task == "regression"
    X, y, _ = validate_X_y(lead, X, y, **({"y_numeric": True} if regression else {}))
    if regression:
        targets = np.asarray(y, dtype=np.float64)
        for m in models:
            m._start()
    else:
        classes, _ = encode_classes(y)
        for m in models:
            m._start(classes)
        targets = lead._targets(y)
    with bk.FallbackCollector() as retried:      # as fit_context: one warning, named in memory_fallback_
        _fit_learners(models, X, targets, stacklevel=4)
    for m in models:
        name_retries(m, retried.cut)
        if m is not lead and hasattr(lead, "feature_names_in_"):
            m.feature_names_in_ = lead.feature_names_in_
    return models
