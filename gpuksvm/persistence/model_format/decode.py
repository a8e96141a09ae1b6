"""A model file's JSON tree and arrays → validated Python objects, nothing else.

Reads the node kinds listed in :mod:`gpuksvm.persistence.model_format`, builds only classes of
the :data:`~gpuksvm.persistence.model_format.registry.REGISTRY`, sets only their declared
attributes, and checks every attribute against its
:class:`~gpuksvm.persistence.model_format.specs.Spec`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.pipeline import Pipeline

from gpuksvm.array import backend as bk
from gpuksvm.estimators.params import renamed_parameters
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.persistence.model_format.consistency import MAX_DEGREE
from gpuksvm.persistence.model_format.registry import REGISTRY, Entry
from gpuksvm.persistence.model_format.specs import (
    INT64_RANGE,
    MAX_DEPTH,
    MAX_ITEMS,
    Dims,
    ModelFormatError,
    SparseInfo,
    format_error,
    is_array,
)

__all__ = ["decode_model"]


#: what a conversion of a hostile value can raise, turned into ModelFormatError at the boundary
_CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, IndexError, KeyError, AttributeError,
                      np.linalg.LinAlgError)

_TAGS = {"float", "tuple", "dict", "items", "array", "strings", "sparse", "kernel", "dtype",
         "device", "random_state", "estimator"}


class _Reader:
    """JSON tree (+ arrays or ArrayInfo stand-ins) → validated Python objects."""

    def __init__(self, arrays: dict[str, Any], stubs: bool) -> None:
        self.arrays = arrays
        self.stubs = stubs
        self.used: set[str] = set()

    # ------------------------------------------------------------------ leaves
    def _array(self, ref: Any, path: str) -> Any:
        if type(ref) is not str or ref not in self.arrays:
            raise format_error(path, f"refers to an array {str(ref)[:40]!r} that the file does not list")
        if ref in self.used:
            # one member per attribute: a shared one would load as one object behind several names
            raise format_error(path, f"array {ref!r} is already used by another value of the model")
        self.used.add(ref)
        return self.arrays[ref]

    def _keys(self, node: dict, allowed: set, path: str) -> None:
        extra = set(node) - allowed
        if extra:
            raise format_error(path, f"unexpected keys {sorted(extra)[:5]}")

    def value(self, node: Any, path: str, depth: int = 0, *, estimators: bool = False) -> Any:
        if depth > MAX_DEPTH:
            raise format_error(path, f"the tree is nested more than {MAX_DEPTH} levels deep")
        d = depth + 1
        t = type(node)
        if node is None or t in (bool, str):
            if t is str and len(node) > MAX_ITEMS:
                raise format_error(path, "string too long")
            return node
        if t is int:
            if not INT64_RANGE[0] <= node <= INT64_RANGE[1]:
                raise format_error(path, "integer does not fit in 64 bits")
            return node
        if t is float:
            if not math.isfinite(node):
                raise format_error(path, "non-finite JSON number")
            return node
        if t is list:
            return [self.value(x, f"{path}[{i}]", d, estimators=estimators) for i, x in enumerate(node)]
        if t is not dict:
            raise format_error(path, f"unexpected JSON value of type {t.__name__}")
        tags = set(node) & _TAGS
        if len(tags) != 1:
            raise format_error(path, f"a node must have exactly one kind, got keys {sorted(node)[:6]}")
        tag = tags.pop()
        body = node[tag]
        if tag == "float":
            self._keys(node, {"float"}, path)
            if body not in ("nan", "inf", "-inf"):
                raise format_error(path, f"bad float {str(body)[:20]!r}")
            return float(body)
        if tag == "tuple":
            self._keys(node, {"tuple"}, path)
            if type(body) is not list:
                raise format_error(path, "a tuple node holds a list")
            return tuple(self.value(x, f"{path}[{i}]", d, estimators=estimators)
                         for i, x in enumerate(body))
        if tag == "dict":
            self._keys(node, {"dict"}, path)
            if type(body) is not dict:
                raise format_error(path, "a dict node holds a JSON object")
            return {k: self.value(x, f"{path}[{k!r}]", d) for k, x in body.items()}
        if tag == "items":
            self._keys(node, {"items"}, path)
            if type(body) is not list:
                raise format_error(path, "an items node holds a list of pairs")
            out = {}
            for i, pair in enumerate(body):
                if type(pair) is not list or len(pair) != 2:
                    raise format_error(f"{path}[{i}]", "expected a [key, value] pair")
                k = self.value(pair[0], f"{path}<key>", d)
                if type(k) not in (bool, int, float, str):
                    raise format_error(f"{path}<key>", "dict keys are numbers or strings")
                out[k] = self.value(pair[1], f"{path}[{k!r}]", d)
            return out
        if tag == "array":
            self._keys(node, {"array"}, path)
            return self._array(body, path)
        if tag == "strings":
            self._keys(node, {"strings"}, path)
            if type(body) is not list or not all(type(s) is str for s in body):
                raise format_error(path, "a strings node holds a list of strings")
            out = np.empty(len(body), dtype=object)
            out[:] = body
            return out
        if tag == "sparse":
            return self._sparse(node, path)
        if tag == "kernel":
            self._keys(node, {"kernel"}, path)
            if type(body) is not dict or set(body) != {"name", "gamma", "degree", "coef0"}:
                raise format_error(path, "a kernel node has exactly name, gamma, degree and coef0")
            name = body["name"]
            nums = [body[k] for k in ("gamma", "degree", "coef0")]
            if type(name) is not str or not all(type(x) in (int, float) for x in nums):
                raise format_error(path, "bad kernel fields")
            try:
                kernel = Kernel(name, *nums)
            except (ValueError, TypeError, OverflowError) as exc:
                raise format_error(path, f"invalid kernel: {exc}") from None
            if kernel.name == "poly" and kernel.degree > MAX_DEGREE:
                raise format_error(path, f"polynomial degree {kernel.degree:g} is above {MAX_DEGREE}")
            return kernel
        if tag == "dtype":
            self._keys(node, {"dtype"}, path)
            if body not in ("float32", "float64"):
                raise format_error(path, f"dtype must be float32 or float64, got {str(body)[:20]!r}")
            return np.dtype(body)
        if tag == "device":
            self._keys(node, {"device"}, path)
            if body != "cpu":
                raise format_error(path, "bad device node")
            return bk.CPU
        if tag == "random_state":
            return self._random_state(node, path)
        if not estimators:
            raise format_error(path, "an estimator is not allowed here")
        return self.estimator(node, path, d)

    def _sparse(self, node: dict, path: str) -> Any:
        fmt = node["sparse"]
        names = ("row", "col", "data") if fmt == "coo" else ("indices", "indptr", "data")
        if fmt not in ("csr", "csc", "coo"):
            raise format_error(path, f"unknown sparse format {str(fmt)[:20]!r}")
        self._keys(node, {"sparse", "shape", *names}, path)
        shape = node.get("shape")
        if not (type(shape) is list and len(shape) == 2
                and all(type(s) is int and 0 <= s < 2 ** 40 for s in shape)):
            raise format_error(path, "bad sparse shape")
        parts = {}
        for k in names:
            if k not in node or type(node[k]) is not dict:
                raise format_error(path, f"the sparse node lacks its {k!r} array")
            a = self.value(node[k], f"{path}.{k}", MAX_DEPTH - 1)
            if not is_array(a) or a.ndim != 1:
                raise format_error(f"{path}.{k}", "expected a 1-D array")
            want = "f" if k == "data" else "iu"
            if np.dtype(a.dtype).kind not in want:
                raise format_error(f"{path}.{k}", f"bad dtype {np.dtype(a.dtype).name}")
            parts[k] = a
        n, d = shape
        nnz = parts["data"].shape[0]
        if fmt == "coo":
            if parts["row"].shape[0] != nnz or parts["col"].shape[0] != nnz:
                raise format_error(path, "row/col/data lengths differ")
        else:
            major = n if fmt == "csr" else d
            if parts["indptr"].shape[0] != major + 1 or parts["indices"].shape[0] != nnz:
                raise format_error(path, "indptr/indices/data lengths do not fit the shape")
        if self.stubs:
            return SparseInfo(fmt, (n, d), np.dtype(parts["data"].dtype))
        try:
            if fmt == "coo":
                minor_ok = all(_in_range(parts[k], lim) for k, lim in (("row", n), ("col", d)))
                if not minor_ok:
                    raise ValueError("row/col index out of range")
                return sp.coo_matrix((parts["data"], (parts["row"], parts["col"])), shape=(n, d))
            # checked here, not left to SciPy: its check_format skips the index checks when
            # indptr[-1] is 0, and its compiled routines then read past the arrays
            indptr, indices = parts["indptr"], parts["indices"]
            if not (_in_range(indptr, nnz + 1) and int(indptr[0]) == 0 and int(indptr[-1]) == nnz
                    and bool((np.diff(indptr.astype(np.int64)) >= 0).all())):
                raise ValueError("indptr is not a non-decreasing sequence from 0 to the number of entries")
            if not _in_range(indices, d if fmt == "csr" else n):
                raise ValueError("index out of range")
            ctor = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
            m = ctor((parts["data"], indices, indptr), shape=(n, d))
            m.check_format(full_check=True)
            return m
        except (ValueError, TypeError, IndexError) as exc:
            raise format_error(path, f"invalid sparse matrix ({exc})") from None

    def _random_state(self, node: dict, path: str) -> np.random.RandomState:
        self._keys(node, {"random_state"}, path)
        body = node["random_state"]
        if type(body) is not dict or set(body) != {"key", "pos", "has_gauss", "gauss"}:
            raise format_error(path, "a random_state node has exactly key, pos, has_gauss and gauss")
        key = self.value(body["key"], f"{path}.key", MAX_DEPTH - 1)
        pos, has_gauss, gauss = body["pos"], body["has_gauss"], body["gauss"]
        if not (is_array(key) and key.dtype == np.dtype(np.uint32) and key.shape == (624,)):
            raise format_error(path, "the MT19937 key is a uint32 array of 624")
        if not (type(pos) is int and 0 <= pos <= 624 and has_gauss in (0, 1)
                and type(has_gauss) is int and type(gauss) in (int, float) and math.isfinite(gauss)):
            raise format_error(path, "bad MT19937 state")
        rs = np.random.RandomState(0)
        if not self.stubs:
            rs.set_state(("MT19937", key, pos, has_gauss, float(gauss)))
        return rs

    # ------------------------------------------------------------------ estimators
    def estimator(self, node: Any, path: str, depth: int = 0) -> Any:
        if type(node) is not dict or "estimator" not in node:
            raise format_error(path, "expected an estimator node")
        name = node["estimator"]
        entry = REGISTRY.get(name) if type(name) is str else None
        if entry is None:
            raise format_error(path, f"class {str(name)[:80]!r} is not one a gpuksvm model file may hold "
                        f"(allowed: {', '.join(REGISTRY)})")
        allowed = {"estimator", "fitted"} | ({"params"} if entry.kind == "estimator" else set())
        self._keys(node, allowed, path)
        fitted = node.get("fitted", {})
        if type(fitted) is not dict:
            raise format_error(path, "'fitted' is a JSON object")
        if entry.upgrade is not None:
            try:
                fitted = entry.upgrade(fitted)
            except _CONVERSION_ERRORS as exc:
                raise format_error(path, f"cannot read the attributes ({exc})") from None
        if entry.kind == "record":
            obj = entry.cls.__new__(entry.cls)
            dims = Dims()
        else:
            obj = self._construct(entry, node.get("params", {}), path, depth)
            dims = Dims({k: v for k, v in vars(obj).items() if type(v) is int})
        values = {}
        for k, sub in fitted.items():
            if k not in entry.fitted:
                raise format_error(f"{path}.{k}", f"{entry.cls.__name__} has no declared attribute {k!r}; "
                            "refusing the file")
            values[k] = self.value(sub, f"{path}.{k}", depth + 1, estimators=True)
        if entry.upgrade_decoded is not None:
            try:
                values = entry.upgrade_decoded(values)
            except _CONVERSION_ERRORS as exc:
                raise format_error(path, f"cannot read the attributes ({exc})") from None
        for k, v in values.items():
            spec = entry.fitted.get(k)
            if spec is None:
                raise format_error(f"{path}.{k}", f"{entry.cls.__name__} has no declared attribute {k!r}")
            spec.check(v, dims, f"{path}.{k}")
        if values:
            missing = [k for k in entry.required if k not in values]
            if missing:
                raise format_error(path, f"a fitted {entry.cls.__name__} needs {', '.join(missing)}")
        for k, v in values.items():
            setattr(obj, k, v)
        for k, make in entry.transient.items():
            if values:
                setattr(obj, k, make())
        if entry.check is not None and values:
            try:
                entry.check(obj, dims, path)
            except ModelFormatError:
                raise
            except _CONVERSION_ERRORS as exc:
                raise format_error(path, f"inconsistent attributes ({exc})") from None
        return obj

    def _construct(self, entry: Entry, params: Any, path: str, depth: int) -> Any:
        if type(params) is not dict:
            raise format_error(path, "'params' is a JSON object")
        names = set(entry.cls._get_param_names())
        # a file written before a parameter was renamed: its old name becomes the new one
        renamed = renamed_parameters(entry.cls)
        params = {(renamed[k] if k in renamed and renamed[k] not in params else k): v for k, v in params.items()}
        unknown = set(params) - names
        if unknown:
            raise format_error(path, f"{entry.cls.__name__} has no parameter(s) {sorted(unknown)[:5]}")
        nested = entry.cls is Pipeline
        kwargs = {k: self.value(v, f"{path}.{k}", depth + 1, estimators=nested)
                  for k, v in params.items()}
        for k, v in kwargs.items():
            if is_array(v) and np.dtype(v.dtype).kind not in "biuf":
                raise format_error(f"{path}.{k}", "array parameters must be numeric")
        try:
            obj = entry.cls(**kwargs)
        except _CONVERSION_ERRORS as exc:
            raise format_error(path, f"cannot build {entry.cls.__name__} from these parameters: {exc}") from None
        if entry.validate is not None:
            try:
                entry.validate(obj)
            except ModelFormatError:
                raise
            except _CONVERSION_ERRORS as exc:
                raise format_error(path, f"invalid parameters for {entry.cls.__name__}: {exc}") from None
        return obj


def _in_range(a: np.ndarray, bound: int) -> bool:
    return a.size == 0 or (int(a.min()) >= 0 and int(a.max()) < bound)


def decode_model(tree: Any, arrays: dict[str, Any], *, stubs: bool = False) -> Any:
    """The estimator a (version 2) JSON tree describes, validated against the registry.

    ``arrays`` maps every array name the file lists to the array (or to an
    :class:`ArrayInfo` with ``stubs=True``, for ``gpuksvm info``).  Every listed
    array must be used.  Raises :class:`ModelFormatError` for anything else.
    """
    r = _Reader(arrays, stubs)
    try:
        model = r.estimator(tree, "model")
    except ModelFormatError:
        raise
    except _CONVERSION_ERRORS as exc:
        # every check above is meant to refuse first; a value that slips past them to a
        # conversion is still a bad file, never another exception
        raise ModelFormatError(f"model: invalid value ({type(exc).__name__}: {exc})") from None
    unused = set(arrays) - r.used
    if unused:
        raise ModelFormatError(f"the file lists arrays the model does not use: {sorted(unused)[:5]}")
    return model
