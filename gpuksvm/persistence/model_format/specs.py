"""What a model file's values may be: the error, the limits, and the :class:`Spec` kinds.

A :class:`Spec` checks one decoded attribute (array dtype kind and shape, an
integer range, a nested class, …) and binds the named dimensions it uses in a
:class:`Dims`, so that every use of a dimension agrees across a model's
attributes (see :mod:`gpuksvm.persistence.model_format`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import scipy.sparse as sp

from gpuksvm.array import backend as bk
from gpuksvm.array.validation import WorkingRangeError, check_working_range

__all__ = ["ModelFormatError", "ArrayInfo", "SparseInfo", "MAX_DEPTH", "MAX_ITEMS", "ARRAY_DTYPE_RE",
           "INT64_RANGE", "FLOAT_DTYPES", "Dims", "Spec", "NoneSpec", "Int", "Float", "Bool", "Str", "Arr",
           "Labels", "Strings", "SparseOrArr", "Instance", "DeviceSpec", "DTypeSpec", "ListOf", "TupleOf",
           "Info", "DictOf", "Either", "Opt", "is_array", "is_sparse", "format_error", "value_bound",
           "check_values", "check_rows"]

#: deepest nesting of the JSON tree (and of decoded values) a file may have
MAX_DEPTH = 32
#: longest string, list or dict a tree may hold (the header size bounds them too)
MAX_ITEMS = 10_000_000
#: dtypes an array member may have: bool, (u)int8..64, float32/64, fixed-width unicode
ARRAY_DTYPE_RE = re.compile(r"^[<>|=]?(b1|i1|i2|i4|i8|u1|u2|u4|u8|f4|f8|U\d{1,4})$")
INT64_RANGE = (-(2 ** 63), 2 ** 63 - 1)
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def value_bound(dtype: Any) -> float:
    """Largest magnitude a stored float of ``dtype`` may have: √max / 2⁸ (7e16 in float32, 5e151 in
    float64), so that the product of two stored values, summed over up to 2¹⁶ terms, stays finite."""
    return math.sqrt(float(np.finfo(np.dtype(dtype)).max)) / 2 ** 8


class ModelFormatError(ValueError):
    """A model file is corrupted, not a gpuksvm model, holds something the closed
    format does not allow, or is from a newer format version."""


@dataclass(frozen=True)
class ArrayInfo:
    """Stand-in for an array whose contents were not read (``gpuksvm info``): dtype and shape."""

    dtype: np.dtype
    shape: tuple

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass(frozen=True)
class SparseInfo:
    """Stand-in for a sparse matrix built from unread arrays (``gpuksvm info``)."""

    format: str
    shape: tuple
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return 2


def is_array(v: Any) -> bool:
    return isinstance(v, (np.ndarray, ArrayInfo))


def is_sparse(v: Any) -> bool:
    return isinstance(v, SparseInfo) or sp.issparse(v)


def _where(path: str) -> str:
    return path or "model"


def format_error(path: str, msg: str) -> ModelFormatError:
    return ModelFormatError(f"{_where(path)}: {msg}")


class Dims:
    """Named dimensions of one estimator node; every use of a name must agree."""

    def __init__(self, initial: dict | None = None) -> None:
        self.values: dict[str, int] = dict(initial or {})

    def bind(self, name: str, value: int, path: str) -> None:
        old = self.values.get(name)
        if old is None:
            self.values[name] = int(value)
        elif old != value:
            raise ModelFormatError(f"{_where(path)}: dimension {name!r} is {value} here but {old} "
                                   f"elsewhere in the model (inconsistent model file)")

    def get(self, name: str) -> int | None:
        return self.values.get(name)


class Spec:
    """What one attribute may hold; :meth:`check` raises ModelFormatError otherwise."""

    def check(self, v: Any, dims: Dims, path: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bad(self, v: Any, path: str, what: str) -> ModelFormatError:
        got = type(v).__name__
        if is_array(v) or is_sparse(v):
            got = f"{got} {tuple(v.shape)} {np.dtype(v.dtype).name}"
        return ModelFormatError(f"{_where(path)}: expected {what}, got {got}")


class NoneSpec(Spec):
    def check(self, v, dims, path):
        if v is not None:
            raise self._bad(v, path, "None")


class Int(Spec):
    def __init__(self, low: int | None = None, high: int | None = None, dim: str | None = None):
        self.low, self.high, self.dim = low, high, dim

    def check(self, v, dims, path):
        if type(v) is not int:
            raise self._bad(v, path, "an integer")
        if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
            raise ModelFormatError(f"{_where(path)}: integer {v} out of range [{self.low}, {self.high}]")
        if self.dim:
            dims.bind(self.dim, v, path)


class Float(Spec):
    """A Python float in ``[low, high]``, finite unless declared ``finite=False``."""

    def __init__(self, low: float | None = None, high: float | None = None, *, finite: bool = True):
        self.low, self.high, self.finite = low, high, finite

    def check(self, v, dims, path):
        if type(v) is not float:
            raise self._bad(v, path, "a float")
        if self.finite and not math.isfinite(v):
            raise ModelFormatError(f"{_where(path)}: {v} is not a finite number")
        if self.low is not None and not v >= self.low:
            raise ModelFormatError(f"{_where(path)}: {v} is below {self.low}")
        if self.high is not None and not v <= self.high:
            raise ModelFormatError(f"{_where(path)}: {v} is above {self.high}")


class Bool(Spec):
    def check(self, v, dims, path):
        if type(v) is not bool:
            raise self._bad(v, path, "True or False")


class Str(Spec):
    def __init__(self, choices: Iterable[str] | None = None):
        self.choices = None if choices is None else tuple(choices)

    def check(self, v, dims, path):
        if type(v) is not str:
            raise self._bad(v, path, "a string")
        if self.choices is not None and v not in self.choices:
            raise ModelFormatError(f"{_where(path)}: {v!r} is not one of {self.choices}")


def _check_shape(v: Any, shape: tuple | None, ndim: int | None, dims: Dims, path: str) -> None:
    if ndim is not None and v.ndim != ndim:
        raise ModelFormatError(f"{_where(path)}: expected a {ndim}-D array, got shape {tuple(v.shape)}")
    if shape is None:
        return
    if len(v.shape) != len(shape):
        raise ModelFormatError(f"{_where(path)}: expected a {len(shape)}-D array, got shape "
                               f"{tuple(v.shape)}")
    for want, got in zip(shape, v.shape):
        if want is None:
            continue
        if isinstance(want, int):
            if got != want:
                raise ModelFormatError(f"{_where(path)}: expected shape {shape}, got {tuple(v.shape)}")
        else:
            dims.bind(want, int(got), path)


def check_values(a: Any, path: str, *, finite: bool = True, low: float | None = None,
                 high: float | None = None, low_open: bool = False, dtype: Any = None) -> None:
    """The declared values of a read array (an :class:`ArrayInfo` stand-in has none to check).

    ``finite``: float values are finite with magnitude at most :func:`value_bound` of
    ``dtype`` (by default the array's own); ``low``/``high``: every value in that range
    (``low_open``: above ``low``).
    """
    if sp.issparse(a):
        a = a.data
    if not isinstance(a, np.ndarray) or a.size == 0:
        return
    kind = a.dtype.kind
    if kind == "f" and finite:
        bound = value_bound(a.dtype if dtype is None else dtype)
        with np.errstate(invalid="ignore"):
            ok = bool((np.abs(a) <= bound).all())
        if not ok:
            raise ModelFormatError(f"{_where(path)}: holds values that are not finite or exceed "
                                   f"{bound:.3g} in magnitude")
    if kind not in "iuf" or (low is None and high is None):
        return
    lo, hi = (a.min(), a.max()) if kind in "iu" else (np.nanmin(a), np.nanmax(a))
    lo, hi = (int(lo), int(hi)) if kind in "iu" else (float(lo), float(hi))
    if low is not None and (lo <= low if low_open else lo < low):
        raise ModelFormatError(f"{_where(path)}: holds {lo}, expected values "
                               f"{'above' if low_open else 'at least'} {low}")
    if high is not None and hi > high:
        raise ModelFormatError(f"{_where(path)}: holds {hi}, expected values at most {high}")


def check_rows(X: Any, path: str, dtype: Any = None) -> None:
    """Stored data rows (support vectors, landmarks) are in the working range of ``dtype`` (by
    default their own; :func:`gpuksvm.array.validation.check_working_range`: finite, squared norms
    that kernels can hold)."""
    if not (isinstance(X, np.ndarray) or sp.issparse(X)) or X.ndim != 2:
        return
    try:
        check_working_range(X, X.dtype if dtype is None else dtype, name="of stored rows")
    except WorkingRangeError as exc:
        raise ModelFormatError(f"{_where(path)}: {exc}") from None


class Arr(Spec):
    """A NumPy array of the given dtype kinds ("f" float, "i" signed, "u", "b", "U") and values.

    Float arrays are declared ``finite`` (the default: finite, magnitude at most
    :func:`value_bound`) or not (``finite=False``: a history that may hold NaN); ``low`` /
    ``high`` bound the values (``low_open``: strictly above ``low``).  Values are checked on
    the arrays read from a file, shapes also on the header's stand-ins.
    """

    def __init__(self, kinds: str, shape: tuple | None = None, ndim: int | None = None, *,
                 finite: bool = True, low: float | None = None, high: float | None = None,
                 low_open: bool = False, rows: bool = False):
        self.kinds, self.shape, self.ndim = kinds, shape, ndim
        self.finite, self.low, self.high, self.low_open = finite, low, high, low_open
        self.rows = rows

    def check(self, v, dims, path):
        if not is_array(v) or np.dtype(v.dtype).kind not in self.kinds:
            raise self._bad(v, path, f"an array of dtype kind {self.kinds!r}")
        _check_shape(v, self.shape, self.ndim, dims, path)
        if self.rows:
            check_rows(v, path)
        else:
            check_values(v, path, finite=self.finite, low=self.low, high=self.high, low_open=self.low_open)


class Labels(Spec):
    """``classes_``: a 1-D array of distinct labels in increasing order (numbers, bools,
    non-empty fixed-width strings, or a string array) along dimension ``dim``, at least
    ``least`` of them."""

    def __init__(self, dim: str = "n_classes", least: int = 2):
        self.dim, self.least = dim, least
        self.options = Either(Arr("biufU", (dim,)), Strings((dim,)), what="class labels")

    def check(self, v, dims, path):
        self.options.check(v, dims, path)
        n = v.shape[0]
        if n < self.least:
            raise ModelFormatError(f"{_where(path)}: {n} class(es); a classifier has at least {self.least}")
        if np.dtype(v.dtype).kind == "U" and np.dtype(v.dtype).itemsize == 0:
            raise ModelFormatError(f"{_where(path)}: labels of dtype <U0 (empty strings)")
        if not isinstance(v, np.ndarray):
            return
        if v.dtype == object or v.dtype.kind == "U":
            values = [str(x) for x in v]
            if not any(values):
                raise ModelFormatError(f"{_where(path)}: the labels are all empty strings")
        else:
            values = v.tolist()
            if v.dtype.kind == "f" and not bool(np.isfinite(v).all()):
                raise ModelFormatError(f"{_where(path)}: labels are not finite")
        if len(set(values)) != n:
            raise ModelFormatError(f"{_where(path)}: the labels are not distinct")
        if any(not a < b for a, b in zip(values, values[1:])):
            raise ModelFormatError(f"{_where(path)}: the labels are not sorted (fit sorts them; a "
                                   "label i is class index i, so another order swaps predictions)")


class Strings(Spec):
    """A 1-D object array of str (scikit-learn's ``feature_names_in_``, string labels)."""

    def __init__(self, shape: tuple | None = None):
        self.shape = shape

    def check(self, v, dims, path):
        if not (isinstance(v, np.ndarray) and v.dtype == object and v.ndim == 1
                and all(type(s) is str for s in v)):
            raise self._bad(v, path, "a 1-D array of strings")
        _check_shape(v, self.shape, 1, dims, path)


class SparseOrArr(Spec):
    """A float array or a CSR matrix (support vectors of sparse training data)."""

    def __init__(self, shape: tuple, *, rows: bool = False):
        self.dense = Arr("f", shape, rows=rows)
        self.shape, self.rows = shape, rows

    def check(self, v, dims, path):
        if is_sparse(v):
            if v.format != "csr" or np.dtype(v.dtype).kind != "f":
                raise self._bad(v, path, "a float CSR matrix")
            _check_shape(v, self.shape, 2, dims, path)
            if self.rows:
                check_rows(v, path)
            elif sp.issparse(v):
                check_values(v.data, path)
            return
        self.dense.check(v, dims, path)


class Instance(Spec):
    """An object of exactly one of the given classes (Kernel, RandomState, a nested estimator)."""

    def __init__(self, *classes: type, what: str | None = None):
        self.classes = classes
        self.what = what or " or ".join(c.__name__ for c in classes)

    def check(self, v, dims, path):
        if type(v) not in self.classes:
            raise self._bad(v, path, self.what)


class DeviceSpec(Spec):
    def check(self, v, dims, path):
        if type(v) is not bk.Device or v != bk.CPU:
            raise self._bad(v, path, "the CPU device")


class DTypeSpec(Spec):
    def check(self, v, dims, path):
        if not isinstance(v, np.dtype) or v not in FLOAT_DTYPES:
            raise self._bad(v, path, "dtype float32 or float64")


class ListOf(Spec):
    def __init__(self, item: Spec, dim: str | None = None):
        self.item, self.dim = item, dim

    def check(self, v, dims, path):
        if type(v) is not list:
            raise self._bad(v, path, "a list")
        for i, x in enumerate(v):
            self.item.check(x, dims, f"{path}[{i}]")
        if self.dim:
            dims.bind(self.dim, len(v), path)


class TupleOf(Spec):
    def __init__(self, *items: Spec):
        self.items = items

    def check(self, v, dims, path):
        if type(v) is not tuple or len(v) != len(self.items):
            raise self._bad(v, path, f"a tuple of {len(self.items)}")
        for i, (x, s) in enumerate(zip(v, self.items)):
            s.check(x, dims, f"{path}[{i}]")


class Info(Spec):
    """Plain information (a fit summary): None/bool/int/float/str in lists, tuples, str-keyed dicts."""

    def check(self, v, dims, path, depth: int = 0):
        if depth > 8:
            raise ModelFormatError(f"{_where(path)}: summary nested too deeply")
        if v is None or type(v) in (bool, int, float, str):
            return
        if type(v) in (list, tuple):
            for i, x in enumerate(v):
                self.check(x, dims, f"{path}[{i}]", depth + 1)
            return
        if type(v) is dict and all(type(k) is str for k in v):
            for k, x in v.items():
                self.check(x, dims, f"{path}[{k!r}]", depth + 1)
            return
        raise self._bad(v, path, "plain values (numbers, strings, lists, dicts)")


class DictOf(Spec):
    """A dict with exactly the given string keys, each value checked by ``item`` (a fit history)."""

    def __init__(self, keys: Iterable[str], item: Spec):
        self.keys, self.item = frozenset(keys), item

    def check(self, v, dims, path):
        if type(v) is not dict or set(v) != self.keys:
            raise self._bad(v, path, f"a dict with the keys {sorted(self.keys)}")
        for k, x in v.items():
            self.item.check(x, dims, f"{path}[{k!r}]")


class Either(Spec):
    def __init__(self, *options: Spec, what: str = ""):
        self.options, self.what = options, what

    def check(self, v, dims, path):
        errors = []
        for opt in self.options:
            trial = Dims(dims.values)
            try:
                opt.check(v, trial, path)
            except ModelFormatError as exc:
                errors.append(str(exc).split(": ", 1)[-1])
                continue
            dims.values = trial.values
            return
        raise ModelFormatError(f"{_where(path)}: {self.what or 'unexpected value'} "
                               f"({'; '.join(errors)})")


def Opt(spec: Spec) -> Spec:  # noqa: N802 - a spec constructor
    return Either(NoneSpec(), spec)
