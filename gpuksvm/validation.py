"""Input and parameter validation shared by every estimator.

NumPy, SciPy-sparse, pandas and list inputs go through scikit-learn's
``validate_data`` (so error messages and ``n_features_in_`` /
``feature_names_in_`` follow scikit-learn exactly); CuPy inputs get the same
checks on the device.  Nothing here modifies the caller's arrays.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Iterable

import numpy as np
from sklearn.utils import check_array as _sk_check_array
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, validate_data

from . import backend as bk

__all__ = [
    "validate_X",
    "validate_X_y",
    "encode_classes",
    "check_sample_weight",
    "class_counts",
    "class_weight_vector",
    "check_param",
    "check_choice",
]

_FLOATS = (np.float64, np.float32)


def _check_gpu_array(X: Any, *, name: str, ensure_2d: bool = True) -> Any:
    if bk.is_sparse(X):
        nnz_data = X.data
        if nnz_data.size and not bool(bk.namespace_of(nnz_data).isfinite(nnz_data).all()):
            raise ValueError(f"Input {name} contains NaN or infinity.")
        return X
    xp = bk.namespace_of(X)
    if ensure_2d and X.ndim != 2:
        raise ValueError(f"Expected 2D array for {name}, got {X.ndim}D array instead.")
    if X.shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if ensure_2d and X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.dtype.kind not in "fiub":
        raise ValueError(f"{name} must be numeric, got dtype {X.dtype}")
    if X.dtype.kind == "f" and not bool(xp.isfinite(X).all()):
        raise ValueError(f"Input {name} contains NaN or infinity.")
    return X


def validate_X(estimator: Any, X: Any, *, reset: bool, accept_sparse: bool = True,
               dtype: Any = _FLOATS) -> tuple[Any, str]:
    """Validate ``X`` for ``fit`` (``reset=True``) or predict (``reset=False``).

    Returns the validated array (same device as given) and the caller's array
    kind (``"numpy"`` or ``"cupy"``) so outputs can be returned in that kind.
    """
    kind = bk.array_kind(X)
    if kind == "cupy":
        X = _check_gpu_array(X, name="X")
        if not accept_sparse and bk.is_sparse(X):
            raise TypeError("this estimator does not accept sparse input; pass a dense array")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        _check_n_features(estimator, X.shape[1], reset)
        return X, kind
    X = validate_data(estimator, X, reset=reset, accept_sparse="csr" if accept_sparse else False,
                      dtype=dtype, ensure_all_finite=True)
    return X, kind


def _check_n_features(estimator: Any, n_features: int, reset: bool) -> None:
    if reset:
        estimator.n_features_in_ = int(n_features)
        return
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and n_features != expected:
        raise ValueError(f"X has {n_features} features, but {type(estimator).__name__} "
                         f"is expecting {expected} features as input.")


def validate_X_y(estimator: Any, X: Any, y: Any, *, accept_sparse: bool = True,
                 y_numeric: bool = False, dtype: Any = _FLOATS) -> tuple[Any, np.ndarray, str]:
    """Validate training data; ``y`` always comes back as a 1-D host array."""
    kind = bk.array_kind(X)
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None.")
    if bk.is_gpu_array(y):
        y = bk.to_host(y)
    if kind == "cupy":
        X, _ = validate_X(estimator, X, reset=True, accept_sparse=accept_sparse)
        y = _sk_check_array(y, ensure_2d=False, dtype="numeric" if y_numeric else None,
                            ensure_all_finite=y_numeric)
        y = np.ravel(y)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                             f"[{X.shape[0]}, {y.shape[0]}]")
        return X, y, kind
    X, y = validate_data(estimator, X, y, accept_sparse="csr" if accept_sparse else False,
                         dtype=dtype, ensure_all_finite=True, y_numeric=y_numeric,
                         multi_output=False)
    return X, np.asarray(y), kind


def encode_classes(y: np.ndarray, *, min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``classes_`` (sorted) and the index of each label; errors on one class."""
    check_classification_targets(y)
    classes, idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < min_classes:
        raise ValueError(f"The number of classes has to be greater than one; got {classes.shape[0]} class"
                         if min_classes == 2 else
                         f"need at least {min_classes} classes, got {classes.shape[0]}")
    return classes, idx.astype(np.int64)


def check_sample_weight(sample_weight: Any, X: Any) -> np.ndarray:
    """Host float64 weights (ones if ``None``); errors on negative/non-finite."""
    if bk.is_gpu_array(sample_weight):
        sample_weight = bk.to_host(sample_weight)
    n = X.shape[0]
    sw = _check_sample_weight(sample_weight, np.empty((n, 1)), dtype=np.float64,
                              ensure_non_negative=True)
    return np.asarray(sw, dtype=np.float64)


def class_counts(y_idx: np.ndarray, n_classes: int, sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Rows per class, each counted with its sample weight (float64, length ``n_classes``)."""
    return np.bincount(np.asarray(y_idx, dtype=np.int64), weights=sample_weight,
                       minlength=int(n_classes)).astype(np.float64)


def class_weight_vector(class_weight: Any, classes: np.ndarray,
                        counts: np.ndarray | None = None) -> np.ndarray | None:
    """Per-class multipliers of C: the one rule of every estimator and every fit path.

    Parameters
    ----------
    class_weight : None, "balanced" or dict {label: weight}
    classes : (n_classes,) sorted class labels
    counts : (n_classes,) rows per class weighted by their sample weights
        (:func:`class_counts`; a distributed fit sums them over its chunks).
        Needed for "balanced" only.

    Returns
    -------
    None (no class weights) or (n_classes,) float64.  "balanced" gives
    Σ counts / (n_classes · counts[c]) — scikit-learn's
    ``compute_class_weight(..., sample_weight=sw)`` and LinearSVC's rule, so
    rows count with their sample weights; a dict gives its value for the
    classes it names and 1 elsewhere, and naming a label that is not a class
    is an error.
    """
    if class_weight is None:
        return None
    classes = np.asarray(classes)
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
        if counts is None:
            raise ValueError("class_weight='balanced' needs the class counts")
        counts = np.asarray(counts, dtype=np.float64)
        if counts.shape != (classes.shape[0],) or not np.all(counts > 0):
            raise ValueError("class_weight='balanced' needs a positive (weighted) count for every "
                             f"class, got {counts.tolist()}")
        return counts.sum() / (classes.shape[0] * counts)
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
    unknown = [c for c in class_weight if not np.any(classes == c)]
    if unknown:
        raise ValueError(f"class_weight names classes not in y: {sorted(unknown, key=str)}")
    out = np.ones(classes.shape[0])
    for c, val in class_weight.items():
        check_param(f"class_weight[{c!r}]", val, Real, low=0.0)
        out[np.flatnonzero(classes == c)[0]] = float(val)
    return out


def check_param(name: str, value: Any, kind: type | tuple = Real, *, low: float | None = None,
                high: float | None = None, closed: str = "both", allow_none: bool = False) -> Any:
    """Check a numeric parameter and raise a clear ``ValueError`` otherwise.

    ``closed`` says which bounds are included: ``"both"``, ``"left"``,
    ``"right"`` or ``"neither"``.
    """
    if value is None and allow_none:
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if Integral in kinds and Real not in kinds else "a number"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    lo_ok = low is None or (value >= low if closed in ("both", "left") else value > low)
    hi_ok = high is None or (value <= high if closed in ("both", "right") else value < high)
    if not (lo_ok and hi_ok):
        lb = "[" if closed in ("both", "left") else "("
        rb = "]" if closed in ("both", "right") else ")"
        raise ValueError(f"{name} must be in {lb}{'-inf' if low is None else low}, "
                         f"{'inf' if high is None else high}{rb}, got {value!r}")
    return value


def check_choice(name: str, value: Any, options: Iterable) -> Any:
    options = tuple(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value
