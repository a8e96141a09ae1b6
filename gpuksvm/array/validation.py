"""Input and parameter validation shared by every estimator.

NumPy, SciPy-sparse, pandas and list inputs go through scikit-learn's
``validate_data`` (so error messages and ``n_features_in_`` /
``feature_names_in_`` follow scikit-learn exactly); CuPy inputs get the same
checks on the device.  Nothing here modifies the caller's arrays.

Finite is judged in the estimator's *working* dtype (:func:`check_working_range`):
a value of 1e39 is finite in float64 but inf in float32, and rows whose
squared norm overflows the working dtype make every kernel value and Gram
product NaN — both are refused with a message naming the dtype and what to
change, at fit and at predict.
"""
from __future__ import annotations

import hashlib
import os
from numbers import Integral, Real
from typing import Any, Iterable

import numpy as np
from sklearn.utils import check_array as _sk_check_array
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, validate_data

from gpuksvm.array import backend as bk

__all__ = [
    "content_key",
    "validate_X",
    "validate_X_y",
    "canonical_sparse",
    "encode_classes",
    "storable_labels",
    "MAX_LABEL_CHARS",
    "check_sample_weight",
    "class_counts",
    "class_weight_vector",
    "check_param",
    "check_int_width",
    "check_invertible",
    "check_choice",
    "check_allocation",
    "physical_memory",
    "check_working_range",
    "WorkingRangeError",
    "WorkingUnderflowError",
    "check_class_weights", "zero_weight_classes_message",
    "working_dtype",
    "max_row_sq_norm",
]

_FLOATS = (np.float64, np.float32)


def content_key(X: Any) -> tuple | None:
    """A key that is equal for host arrays of equal contents: shape, dtype and a BLAKE2 digest of
    the bytes (a copy of the same rows has the key; rows changed in place do not); None for
    anything but a dense NumPy array.  Caches of values computed for particular rows (a
    search's held-out fold) recognise their rows by it."""
    if not isinstance(X, np.ndarray):
        return None
    digest = hashlib.blake2b(np.ascontiguousarray(X).data, digest_size=16).digest()
    return X.shape, X.dtype.str, digest


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


def working_dtype(estimator: Any) -> np.dtype:
    """The float dtype ``estimator`` computes in (its ``dtype`` on its fitted or chosen device)."""
    fitted = any(k.endswith("_") and not k.startswith("_") for k in vars(estimator))
    device = (getattr(estimator, "fitted_device_", None) if fitted else None) or getattr(estimator, "device", "auto")
    try:
        return bk.resolve_dtype(getattr(estimator, "dtype", None), device)
    except Exception:  # an invalid or unavailable device/dtype is reported by fit itself
        return np.dtype(np.float64)


def _abs_max(data: Any) -> float:
    if data.size == 0:
        return 0.0
    xp = bk.namespace_of(data)
    if data.dtype.kind == "b":
        return float(bool(xp.any(data)))
    hi, lo = float(data.max()), float(data.min())
    return max(abs(hi), abs(lo))


#: Values a validation scan converts at a time (8 MB of float64): the scans' temporaries stay
#: small beside the array they check, whatever its width.
_SCAN_VALUES = 1 << 20


def _scan_rows(X: Any) -> int:
    """Rows of ``X`` per block of a validation scan: about :data:`_SCAN_VALUES` stored values
    (a sparse matrix's by its mean number of nonzeros per row), fewer where the memory budget
    of ``X``'s device is smaller than two float64 copies of them (the scans' temporaries), at
    least one row."""
    if bk.is_sparse(X):
        width = -(-int(X.nnz) // max(int(X.shape[0]), 1))
    else:
        width = int(X.shape[1]) if X.ndim > 1 else 1
    width = max(width, 1)
    return bk.plan_rows(max(_SCAN_VALUES // width, 1), 2 * 8 * width, bk.device_of(X))


def max_row_sq_norm(X: Any) -> float:
    """max_i ‖xᵢ‖² in float64 without overflow in the squares (inf if it exceeds float64);
    computed by row blocks of :data:`_SCAN_VALUES` values (fewer within the memory budget; a
    block out of memory is retried smaller)."""
    data = X.data if bk.is_sparse(X) else X
    amax = _abs_max(data)
    if amax == 0.0 or not np.isfinite(amax):
        return 0.0 if amax == 0.0 else float("inf")
    best = [0.0]

    def scan(s: int, e: int) -> None:
        B = X[s:e]
        if bk.is_sparse(B):
            B = B.astype(np.float64) / amax
            sq = B.multiply(B).sum(axis=1)
        else:
            B = B.astype(np.float64)
            B /= amax
            sq = (B * B).sum(axis=1)
        best[0] = max(best[0], float(sq.max()) if sq.size else 0.0)

    bk.map_row_blocks(scan, X.shape[0], _scan_rows(X), what="validation scan")
    with np.errstate(over="ignore"):
        return float(np.float64(best[0]) * np.float64(amax) * np.float64(amax))


class WorkingRangeError(ValueError):
    """Input values finite as given but not usable in the working dtype
    (raised by :func:`check_working_range`)."""


class WorkingUnderflowError(WorkingRangeError):
    """Input values nonzero as given but too small for the working dtype: they, or their
    squares, fall below its smallest normal number (raised by :func:`check_working_range`)."""


def _min_abs_nonzero(data: Any) -> float:
    """The smallest nonzero |value| of a float array (inf if every value is 0), by row blocks."""
    xp = bk.namespace_of(data)
    best = [float("inf")]

    def scan(s: int, e: int) -> None:
        a = xp.abs(data[s:e])
        a = a[a > 0]
        if a.size:
            best[0] = min(best[0], float(a.min()))

    bk.map_row_blocks(scan, data.shape[0], _scan_rows(data), what="validation scan")
    return best[0]


def _check_underflow(data: Any, amax: float, dt: np.dtype, name: str, who: str, training: bool) -> None:
    """The twin of the overflow checks: nonzero values must be normal numbers of ``dt``, and in
    training data the largest must have a normal square (kernels and Gram products are sums of
    products xᵢzᵢ)."""
    tiny = float(np.finfo(dt).tiny)
    fix = ("Scale the features (e.g. sklearn.preprocessing.StandardScaler)"
           + ("" if dt == np.float64 else ", or pass dtype='float64'"))
    if training and 0.0 < amax and amax * amax < tiny:
        raise WorkingUnderflowError(
            f"Input {name} has no value larger than {amax:.3g} in magnitude: the squares of its values "
            f"are below the smallest normal {dt.name} ({tiny:.3g}){who}, so every kernel value and Gram "
            f"product would lose its precision or be 0 and the model would be constant. {fix}.")
    if data.dtype.kind != "f":
        return
    smallest = _min_abs_nonzero(data)
    if smallest < tiny:
        raise WorkingUnderflowError(
            f"Input {name} has nonzero values as small as {smallest:.3g} in magnitude, below the "
            f"smallest normal {dt.name} ({tiny:.3g}){who}: they would become subnormal or 0. {fix}.")


def check_working_range(X: Any, dtype: Any, *, name: str = "X", owner: str = "",
                        training: bool = False) -> None:
    """Refuse values that are finite in the input but not usable in the working ``dtype``.

    Overflow: every value must be finite once cast to ``dtype`` (1e39 is inf
    in float32), and the largest squared row norm must stay below 1/16 of the
    dtype's maximum — kernels compute ‖x‖² + ‖z‖² − 2xᵀz and Gram matrices
    sum xxᵀ, so beyond that every kernel value or Hessian entry is inf/NaN
    (:class:`WorkingRangeError`).  Underflow: every nonzero value must be a
    normal number of ``dtype`` (1e-40 is subnormal in float32), and, in
    ``training`` data, the largest |value| must have a normal square (values of
    1e-200 have squares of 0 in float64: every distance would be 0, the model
    constant; a row of such values to predict is merely close to 0)
    (:class:`WorkingUnderflowError`).
    Costs one min/max pass and one pass for the smallest nonzero value (and a
    row-norm pass only for very large values).
    """
    dt = np.dtype(dtype)
    if dt.kind != "f":
        return
    data = X.data if bk.is_sparse(X) else X
    if data.size == 0 or data.dtype.kind not in "fiub":
        return
    fmax = float(np.finfo(dt).max)
    who = f" ({owner} computes in {dt.name})" if owner else f" (the working dtype {dt.name})"
    amax = _abs_max(data)
    fix = ("Scale the features (e.g. sklearn.preprocessing.StandardScaler)"
           + ("" if dt == np.float64 else " or pass dtype='float64'"))
    _check_underflow(data, amax, dt, name, who, training)
    if amax > fmax:
        raise WorkingRangeError(f"Input {name} has values up to {amax:.3g}, beyond the largest {dt.name} "
                         f"({fmax:.3g}){who}: they would become inf. {fix}.")
    limit = fmax / 16
    if amax * amax * X.shape[1] <= limit:
        return
    sq = max_row_sq_norm(X)
    if not sq <= limit:
        raise WorkingRangeError(f"Input {name} has rows with squared norm {sq:.3g}, beyond what {dt.name} "
                         f"can hold in kernel and Gram computations ({limit:.3g}){who}: kernel "
                         f"values and Gram products would be inf or NaN. {fix}.")


def _check_range_of(estimator: Any, X: Any, training: bool) -> None:
    check_working_range(X, working_dtype(estimator), owner=type(estimator).__name__, training=training)


def _has_canonical_rows(X: Any) -> bool:
    """Whether a compressed sparse matrix has strictly increasing indices in every row
    (SciPy's canonical format: sorted, no duplicates), computed without touching ``X``
    (SciPy's own ``has_canonical_format`` caches its answer on the matrix)."""
    indices, indptr = X.indices, X.indptr
    nnz = int(indices.shape[0])
    if nnz < 2:
        return True
    xp = bk.namespace_of(indices)
    row_start = xp.zeros(nnz, dtype=bool)
    inner = indptr[1:-1]
    row_start[inner[inner < nnz]] = True
    increasing = indices[1:].astype(xp.int64) > indices[:-1].astype(xp.int64)
    return bool((increasing | row_start[1:]).all())


def _shares_storage(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if not (bk.is_sparse(a) and bk.is_sparse(b)) or bk.is_gpu_array(a) or bk.is_gpu_array(b):
        return False
    return any(np.shares_memory(u, w) for u in (a.data, a.indices, a.indptr)
               for w in (b.data, b.indices, b.indptr))


def canonical_sparse(X: Any, given: Any) -> Any:
    """``X`` in canonical sparse format, never changing ``given`` (the caller's matrix).

    SciPy and scikit-learn sort indices and sum duplicates *in place* (``X.max()``,
    ``X.multiply``, ``SVC``'s sparse path, ...).  A matrix already canonical is returned
    as is (no copy); otherwise it is canonicalized, on a copy when it shares storage with
    ``given``.  Explicit zeros are kept (they change no result).  Dense input passes through.
    """
    if not bk.is_sparse(X) or X.format not in ("csr", "csc") or _has_canonical_rows(X):
        return X
    if _shares_storage(X, given):
        X = X.copy()
    X.sum_duplicates()           # sorts the indices too
    return X


def validate_X(estimator: Any, X: Any, *, reset: bool, accept_sparse: bool = True,
               dtype: Any = _FLOATS) -> tuple[Any, str]:
    """Validate ``X`` for ``fit`` (``reset=True``) or predict (``reset=False``).

    Returns the validated array (same device as given) and the caller's array
    kind (``"numpy"`` or ``"cupy"``) so outputs can be returned in that kind.
    A sparse matrix comes back in canonical format (:func:`canonical_sparse`;
    the caller's matrix is never changed).
    """
    given = X
    kind = bk.array_kind(X)
    if kind == "cupy":
        X = _check_gpu_array(X, name="X")
        if not accept_sparse and bk.is_sparse(X):
            raise TypeError("this estimator does not accept sparse input; pass a dense array")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        _check_n_features(estimator, X.shape[1], reset)
        X = canonical_sparse(X, given)
        _check_range_of(estimator, X, reset)
        return X, kind
    X = validate_data(estimator, X, reset=reset, accept_sparse="csr" if accept_sparse else False,
                      dtype=dtype, ensure_all_finite=True)
    X = canonical_sparse(X, given)
    _check_range_of(estimator, X, reset)
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
    given = X
    X, y = validate_data(estimator, X, y, accept_sparse="csr" if accept_sparse else False,
                         dtype=dtype, ensure_all_finite=True, y_numeric=y_numeric,
                         multi_output=False)
    X = canonical_sparse(X, given)
    _check_range_of(estimator, X, True)
    return X, np.asarray(y), kind


#: longest fixed-width string label a model file holds in an array (its dtypes end at "U9999");
#: longer labels are kept as an object array of str (a list of strings in the file's header)
MAX_LABEL_CHARS = 9999


def _unstorable_labels(classes: np.ndarray, why: str) -> ValueError:
    return ValueError(
        f"class labels of dtype {classes.dtype} cannot be stored in a model file ({why}): labels may be "
        "booleans, integers, float16/float32/float64 numbers or strings. "
        "Convert y first, e.g. y.astype(str) or integer codes (sklearn.preprocessing.LabelEncoder).")


def storable_labels(classes: np.ndarray) -> np.ndarray:
    """``classes`` in a dtype a model file holds, or a ``ValueError`` at fit rather than at ``save``.

    Kept as they are: bool, (u)int, float32/float64 and fixed-width strings
    of at most :data:`MAX_LABEL_CHARS` characters.  Converted exactly: float16
    to float32 (every float16 is a float32), longer fixed-width strings and an
    object array of strings to an object array of plain ``str``, an object
    array of integers to int64.  Refused: anything else (datetime64,
    timedelta64, complex, bytes, mixed or other objects).
    """
    dt = classes.dtype
    if dt.kind in "biu" or dt in _FLOATS:
        return classes
    if dt == np.float16:
        return classes.astype(np.float32)
    if dt.kind == "U":
        if dt.itemsize // 4 <= MAX_LABEL_CHARS:
            return classes
        return np.array([str(v) for v in classes.tolist()], dtype=object)
    if dt.kind == "O":
        values = classes.tolist()
        if all(isinstance(v, str) for v in values):
            return np.array([str(v) for v in values], dtype=object)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values):
            as_int = np.array(values)
            if as_int.dtype.kind in "iu":
                return as_int
        raise _unstorable_labels(classes, "objects other than strings or 64-bit integers")
    raise _unstorable_labels(classes, "the format has no such dtype")


def encode_classes(y: np.ndarray, *, min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``classes_`` (sorted, in a dtype a model file holds: :func:`storable_labels`) and the
    index of each label; errors on one class."""
    check_classification_targets(y)
    classes, idx = np.unique(y, return_inverse=True)
    classes = storable_labels(classes)
    if classes.shape[0] < min_classes:
        raise ValueError(f"The number of classes has to be greater than one; got {classes.shape[0]} class"
                         if min_classes == 2 else
                         f"need at least {min_classes} classes, got {classes.shape[0]}")
    return classes, idx.astype(np.int64)


def check_sample_weight(sample_weight: Any, X: Any, *, ensure_non_negative: bool = True) -> np.ndarray:
    """Host float64 weights (ones if ``None``); errors on non-finite values, and on negative
    ones or all zeros unless ``ensure_non_negative=False`` (then the caller decides what rows
    of weight ≤ 0 mean).  ``X`` may be any sequence of samples."""
    if bk.is_gpu_array(sample_weight):
        sample_weight = bk.to_host(sample_weight)
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    sw = _check_sample_weight(sample_weight, np.empty((n, 1)), dtype=np.float64,
                              ensure_non_negative=ensure_non_negative,
                              allow_all_zero_weights=not ensure_non_negative)
    return np.asarray(sw, dtype=np.float64)


def class_counts(y_idx: np.ndarray, n_classes: int, sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Rows per class, each counted with its sample weight (float64, length ``n_classes``)."""
    return np.bincount(np.asarray(y_idx, dtype=np.int64), weights=sample_weight,
                       minlength=int(n_classes)).astype(np.float64)


def class_weight_vector(class_weight: Any, classes: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """Per-class multipliers of C: the one class-weight rule of every fit path (in memory,
    out of core, Dask), with the zero-weight rule (:func:`check_class_weights`) applied here.

    Parameters
    ----------
    class_weight : None, "balanced" or dict {label: weight}
    classes : (n_classes,) sorted class labels
    counts : (n_classes,) rows per class weighted by their sample weights
        (:func:`class_counts`; a distributed fit sums them over its chunks).

    Returns
    -------
    None (no class weights) or (n_classes,) float64.  "balanced" gives
    Σ counts / (n_classes · counts[c]) — scikit-learn's
    ``compute_class_weight(..., sample_weight=sw)`` and LinearSVC's rule, so
    rows count with their sample weights; a dict gives its value for the
    classes it names and 1 elsewhere, and naming a label that is not a class
    is an error.  A class whose total weight counts[c] × weight[c] is zero is
    an error (:func:`check_class_weights`).
    """
    classes = np.asarray(classes)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != (classes.shape[0],):
        raise ValueError(f"class counts of shape {counts.shape} for {classes.shape[0]} classes")
    if not (class_weight is None or class_weight == "balanced" or isinstance(class_weight, dict)):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
    out = np.ones(classes.shape[0])
    if isinstance(class_weight, dict):
        unknown = [c for c in class_weight if not np.any(classes == c)]
        if unknown:
            raise ValueError(f"class_weight names classes not in y: {sorted(unknown, key=str)}")
        for c, val in class_weight.items():
            check_param(f"class_weight[{c!r}]", val, Real, low=0.0)
            out[np.flatnonzero(classes == c)[0]] = float(val)
    check_class_weights(classes, counts * out)
    if class_weight is None:
        return None
    if class_weight == "balanced":      # every count is positive here
        return counts.sum() / (classes.shape[0] * counts)
    return out


def check_class_weights(classes: np.ndarray, totals: np.ndarray) -> None:
    """One rule for every estimator: each class needs a positive total weight.

    ``totals`` are the per-class sums of the row costs (sample weight × class
    weight; :func:`class_counts` of the row costs).  A class whose rows all
    weigh zero cannot be learned (its rows constrain nothing), so a
    ``ValueError`` names it instead of a silently one-sided model.
    """
    message = zero_weight_classes_message(classes, totals)
    if message:
        raise ValueError(message)


def zero_weight_classes_message(classes: np.ndarray, totals: np.ndarray) -> str:
    """The message of :func:`check_class_weights` ("" when every class has positive weight).

    Callers with rows of negative weight sum them as zero (LIBSVM drops them).
    """
    dead = [classes[i] for i in np.flatnonzero(~(np.asarray(totals, dtype=np.float64) > 0))]
    if not dead:
        return ""
    names = ", ".join(repr(c.item() if hasattr(c, "item") else c) for c in dead)
    return (f"every row of class {names} has zero weight (sample_weight × class_weight): a class "
            "with no weight cannot be learned; give its rows positive weight or drop the class")


def check_int_width(name: str, value: Any) -> None:
    """An integer parameter must fit in 64 bits (the solvers' and NumPy's integers)."""
    if isinstance(value, (int, np.integer)) and abs(int(value)) >= 2 ** 63:
        raise ValueError(f"{name} is too large: an integer of {int(value).bit_length()} bits "
                         "(at most 64-bit integers are accepted)")


def check_param(name: str, value: Any, kind: type | tuple = Real, *, low: float | None = None,
                high: float | None = None, closed: str = "both", allow_none: bool = False,
                allow_inf: bool = False) -> Any:
    """Check a numeric parameter and raise a clear ``ValueError`` otherwise.

    ``closed`` says which bounds are included: ``"both"``, ``"left"``,
    ``"right"`` or ``"neither"``.  ``allow_inf``: ±inf passes the finiteness
    check (the bounds still apply).
    """
    if value is None and allow_none:
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if Integral in kinds and Real not in kinds else "a number"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if isinstance(value, (float, np.floating)) and not (np.isfinite(value)
                                                       or (allow_inf and np.isinf(value))):
        raise ValueError(f"{name} must be finite, got {value!r}")
    check_int_width(name, value)
    lo_ok = low is None or (value >= low if closed in ("both", "left") else value > low)
    hi_ok = high is None or (value <= high if closed in ("both", "right") else value < high)
    if not (lo_ok and hi_ok):
        lb = "[" if closed in ("both", "left") else "("
        rb = "]" if closed in ("both", "right") else ")"
        raise ValueError(f"{name} must be in {lb}{'-inf' if low is None else low}, "
                         f"{'inf' if high is None else high}{rb}, got {value!r}")
    return value


def check_invertible(name: str, value: Any, use: str) -> float:
    """A positive parameter the solver divides by must have a finite reciprocal in float64.

    Values below the smallest normal float64 (about 2.2e-308) make ``1 / value``
    inf; ``use`` says where the reciprocal appears, and the ``ValueError``
    names ``name``, the parameter the user set.
    """
    tiny = float(np.finfo(np.float64).tiny)
    if not float(value) >= tiny:
        raise ValueError(f"{name}={value!r} is too small: {use}, and 1/{name} overflows float64 below "
                         f"its smallest normal number; {name} must be at least {tiny:.3g}")
    return float(value)


def check_choice(name: str, value: Any, options: Iterable) -> Any:
    options = tuple(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def _bytes_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def check_allocation(nbytes: float, what: str) -> None:
    """Refuse, before allocating, a buffer larger than the machine's physical memory.

    ``what`` says what the buffer is and which input or parameter sets its size
    (e.g. ``"OKFEB buffers for budget=10**9 stored vectors"``); the ValueError
    names it, so the user knows what to change.
    """
    total = physical_memory()
    if total is not None and nbytes > total:
        raise ValueError(f"{what} needs {_bytes_text(nbytes)}, more than the {_bytes_text(total)} of "
                         "memory of this machine; reduce it")
