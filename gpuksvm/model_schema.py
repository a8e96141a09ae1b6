"""The closed schema of gpuksvm model files: which classes a file may hold and what each holds.

A model file (:mod:`gpuksvm.io`) stores one estimator as a JSON tree plus named
arrays.  This module is the *only* place that turns such a tree into Python
objects, and it is closed in the way safetensors and skops.io's trusted types
are:

* **Classes come from one explicit registry** (:data:`REGISTRY`): the gpuksvm
  estimators, the state records they nest (OK-FEB's ``OnlineSubspace`` and
  online learners ``Pegasos``, ``RegularizedLMS``), and the two scikit-learn classes a gpuksvm model is
  really wrapped in (``Pipeline`` and ``StandardScaler``).  A file names a
  registry key; the class is the object stored under that key (saving checks
  ``type(obj) is cls`` — no subclasses, no module import, no attribute walk).
* **Each class declares its fitted attributes** (:class:`Entry` ``fitted``):
  name → :class:`Spec` (array kind, dtype kind, shape, the nested estimator
  class it must be, …).  Loading sets only declared attributes; an undeclared
  name, a value of another shape or type, a nested estimator of another class
  is a :class:`ModelFormatError`.  Dimensions are named (``"n_sv"``,
  ``"n_features_in_"``, an integer parameter such as ``"rank"``) and must agree
  across attributes, so a model that loads predicts without shape errors.
* **Constructor parameters** are JSON values (plus a few closed kinds: a
  :class:`~gpuksvm.kernels.Kernel`, a NumPy float dtype, a NumPy
  ``RandomState``, an array of user landmarks, the steps of a ``Pipeline``) and
  go through the estimator's own parameter checks (``_check_params``,
  scikit-learn's ``_validate_params``) before the model is returned.
* **Values** are a closed set of node kinds (below); there is no generic
  "object" node, and nothing is ever unpickled.

Node kinds of the JSON tree (format version 2)
----------------------------------------------
=======================  ===================================================
JSON ``null/true/1/1.5/"s"``  ``None``, bool, int (int64 range), float, str
``{"float": "nan"}``      a non-finite float (``"nan"``, ``"inf"``, ``"-inf"``)
``[...]``                 list
``{"tuple": [...]}``      tuple
``{"dict": {...}}``       dict with string keys
``{"items": [[k, v]]}``   dict with int/float/str/bool keys (``class_weight``)
``{"array": "a3"}``       the array stored as member ``a3.npy``
``{"strings": [...]}``    a 1-D object array of str (labels, feature names)
``{"sparse": "csr", ...}``  a SciPy CSR/CSC/COO matrix from its arrays
``{"kernel": {...}}``     a :class:`~gpuksvm.kernels.Kernel` (validated)
``{"dtype": "float32"}``  ``numpy.dtype('float32')`` or ``'float64'``
``{"device": "cpu"}``     the CPU device (models always load on the host)
``{"random_state": ...}`` a ``numpy.random.RandomState`` (MT19937 state)
``{"estimator": name, "params": {...}, "fitted": {...}}``  a registry class
=======================  ===================================================

The same code reads a tree for :func:`gpuksvm.io.load` (with the arrays) and for
``gpuksvm info`` (with :class:`ArrayInfo` stand-ins from the header's table):
both validate everything above.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import scipy.sparse as sp
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from . import backend as bk
from .cvm import CVM, OneClassCVM
from .kernel_svc import KernelSVC
from .kernels import Kernel
from .linear_svm import LinearSVM
from .llsvm import LLSVM
from .okfeb import OKFEB, OKFEBClassifier, OKFEBRegressor
from .solvers.okfeb import OnlineSubspace
from .solvers.online import Pegasos, RegularizedLMS
from .svi import SVI

__all__ = ["ModelFormatError", "ArrayInfo", "REGISTRY", "Entry", "encode_model", "decode_model",
           "translate_v1", "describe_value", "MAX_DEPTH", "ARRAY_DTYPE_RE"]

#: deepest nesting of the JSON tree (and of decoded values) a file may have
MAX_DEPTH = 32
#: longest string, list or dict a tree may hold (the header size bounds them too)
MAX_ITEMS = 10_000_000
#: dtypes an array member may have: bool, (u)int8..64, float32/64, fixed-width unicode
ARRAY_DTYPE_RE = re.compile(r"^[<>|=]?(b1|i1|i2|i4|i8|u1|u2|u4|u8|f4|f8|U\d{1,4})$")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


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


def _is_array(v: Any) -> bool:
    return isinstance(v, (np.ndarray, ArrayInfo))


def _is_sparse(v: Any) -> bool:
    return isinstance(v, SparseInfo) or sp.issparse(v)


def _where(path: str) -> str:
    return path or "model"


# =========================================================================== specs
class _Dims:
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

    def check(self, v: Any, dims: _Dims, path: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bad(self, v: Any, path: str, what: str) -> ModelFormatError:
        got = type(v).__name__
        if _is_array(v) or _is_sparse(v):
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
    def __init__(self, low: float | None = None):
        self.low = low

    def check(self, v, dims, path):
        if type(v) is not float:
            raise self._bad(v, path, "a float")
        if self.low is not None and not v >= self.low:
            raise ModelFormatError(f"{_where(path)}: {v} is below {self.low}")


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


def _check_shape(v: Any, shape: tuple | None, ndim: int | None, dims: _Dims, path: str) -> None:
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


class Arr(Spec):
    """A NumPy array of the given dtype kinds ("f" float, "i" signed, "u", "b", "U")."""

    def __init__(self, kinds: str, shape: tuple | None = None, ndim: int | None = None):
        self.kinds, self.shape, self.ndim = kinds, shape, ndim

    def check(self, v, dims, path):
        if not _is_array(v) or np.dtype(v.dtype).kind not in self.kinds:
            raise self._bad(v, path, f"an array of dtype kind {self.kinds!r}")
        _check_shape(v, self.shape, self.ndim, dims, path)


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

    def __init__(self, shape: tuple):
        self.dense = Arr("f", shape)
        self.shape = shape

    def check(self, v, dims, path):
        if _is_sparse(v):
            if v.format != "csr" or np.dtype(v.dtype).kind != "f":
                raise self._bad(v, path, "a float CSR matrix")
            _check_shape(v, self.shape, 2, dims, path)
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
        if v != bk.CPU:
            raise self._bad(v, path, "the CPU device")


class DTypeSpec(Spec):
    def check(self, v, dims, path):
        if not isinstance(v, np.dtype) or v not in _FLOAT_DTYPES:
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
            trial = _Dims(dims.values)
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


def _labels(dim: str = "n_classes") -> Spec:
    return Either(Arr("biufU", (dim,)), Strings((dim,)), what="class labels")


INT_1D, FLOAT_1D = Arr("iu", ndim=1), Arr("f", ndim=1)
KERNEL = Instance(Kernel)
PROBLEMS = ListOf(TupleOf(Int(low=0), Opt(Int(low=0))), dim="n_problems")


# =========================================================================== registry
@dataclass
class Entry:
    """One class a model file may hold.

    Attributes
    ----------
    name : the key a file names it by
    cls : the class (compared by identity when saving)
    fitted : declared attribute name → Spec (for ``kind="record"``: every attribute)
    kind : "estimator" (constructor parameters + fitted attributes) or "record"
        (a plain state holder rebuilt from its declared attributes only)
    required : attributes a fitted model of this class must have
    validate : the class's own parameter checks, run on the rebuilt object
    check : consistency checks across attributes (beyond the named dimensions)
    transient : attributes not stored, recreated on load (caches)
    upgrade : rewrites the ``fitted`` JSON object of a file written before the class's
        attributes changed (pure JSON → JSON: renames and regrouping, nothing is built)
    """

    name: str
    cls: type
    fitted: dict[str, Spec]
    kind: str = "estimator"
    required: tuple = ()
    validate: Callable[[Any], None] | None = None
    check: Callable[[Any, _Dims, str], None] | None = None
    transient: dict[str, Callable[[], Any]] = field(default_factory=dict)
    upgrade: Callable[[dict], dict] | None = None

    @property
    def v1_name(self) -> str:
        """How format version 1 named the class (``module:QualName``)."""
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


def _fail(path: str, msg: str) -> ModelFormatError:
    return ModelFormatError(f"{_where(path)}: {msg}")


def _common(extra: dict[str, Spec]) -> dict[str, Spec]:
    """Attributes every gpuksvm estimator may have, plus its own."""
    out = {"n_features_in_": Int(low=1, high=_INT64[1], dim="n_features_in_"),
           "feature_names_in_": Strings(("n_features_in_",)),
           "_fitted_on": DeviceSpec(),
           "dask_info_": Info()}
    out.update(extra)
    return out


def _check_device_and_dtype(est: Any) -> None:
    """The ``device`` and ``dtype`` parameters every gpuksvm estimator has."""
    try:
        bk.resolve_device(est.device)
    except bk.DeviceUnavailableError:
        pass      # a valid device name; the model runs on the CPU here
    bk.resolve_dtype(est.dtype, bk.CPU)


def _own_checks(*methods: str) -> Callable[[Any], None]:
    def run(est: Any) -> None:
        _check_device_and_dtype(est)
        for m in methods:
            getattr(est, m)()
    return run


def _n_outputs(n_classes: int) -> int:
    return 1 if n_classes == 2 else n_classes


def _problems_for(est: Any, dims: _Dims, path: str, scheme: str) -> None:
    """The number of binary problems agrees with the classes and the multi-class scheme."""
    k = dims.get("n_classes")
    p = dims.get("n_problems")
    if k is None or p is None:
        return
    want = 1 if k == 2 else (k * (k - 1) // 2 if scheme == "ovo" else k)
    if p != want:
        raise _fail(path, f"{p} binary problems for {k} classes ({scheme}); expected {want}")
    problems = getattr(est, "problems_", None)
    if problems is not None:
        for i, (a, b) in enumerate(problems):
            if a >= k or (b is not None and b >= k):
                raise _fail(f"{path}.problems_[{i}]", f"class index out of range for {k} classes")


def _check_linear(est: Any, dims: _Dims, path: str) -> None:
    k, m = dims.get("n_classes"), dims.get("n_outputs")
    if k is not None and m is not None and m != _n_outputs(k):
        raise _fail(path, f"{m} weight rows for {k} classes")
    if dims.get("n_platt") not in (None, m):
        raise _fail(path, "probA_/probB_ do not match the binary problems")


def _check_llsvm(est: Any, dims: _Dims, path: str) -> None:
    svm = getattr(est, "svm_", None)
    if svm is not None:
        if getattr(svm, "n_features_in_", None) not in (None, dims.get("k")):
            raise _fail(f"{path}.svm_", "its input width differs from the number of landmarks")
        if hasattr(svm, "coef_") and hasattr(est, "coef_") and svm.coef_.shape != est.coef_.shape:
            raise _fail(f"{path}.svm_", "its weights differ in shape from the model's")
    _check_linear(est, dims, path)


def _check_cvm(est: Any, dims: _Dims, path: str) -> None:
    one_class = type(est) is OneClassCVM or getattr(est, "task", None) == "one_class"
    if one_class:
        if dims.get("n_problems") not in (None, 1):
            raise _fail(path, "a one-class model has exactly one problem")
    else:
        _problems_for(est, dims, path, getattr(est, "multi_class", "ovo"))


def _check_svc(est: Any, dims: _Dims, path: str) -> None:
    _problems_for(est, dims, path, "ovo")
    sv = getattr(est, "support_vectors_", None)
    if sv is not None:
        want = ((0, 0) if getattr(est, "kernel_", None) == "precomputed"
                else (dims.get("n_sv"), dims.get("n_features_in_")))
        if any(w is not None and got != w for got, w in zip(sv.shape, want)):
            raise _fail(f"{path}.support_vectors_", f"shape {tuple(sv.shape)}, expected "
                        f"{tuple('?' if w is None else w for w in want)}")
    k, r = dims.get("n_classes"), dims.get("n_dual_rows")
    if k is not None and r is not None and r != max(k - 1, 1):
        raise _fail(path, f"dual_coef_ has {r} rows for {k} classes")
    ns = getattr(est, "n_support_", None)
    if isinstance(ns, np.ndarray) and dims.get("n_sv") is not None and int(ns.sum()) != dims.get("n_sv"):
        raise _fail(f"{path}.n_support_", "does not add up to the number of support vectors")


def _check_svi(est: Any, dims: _Dims, path: str) -> None:
    _problems_for(est, dims, path, getattr(est, "multi_class", "ovo"))


def _check_subspace(st: Any, dims: _Dims, path: str) -> None:
    cap, m = dims.get("cap"), dims.get("m")
    if cap is not None and m is not None and m > cap:
        raise _fail(path, f"{m} stored vectors but buffers for {cap}")
    dt = getattr(st, "dtype", None)
    if dt is not None:
        for name in ("S", "sn", "A", "K", "ra", "Pbuf", "P", "C", "L"):
            a = getattr(st, name, None)
            if a is not None and np.dtype(a.dtype) != dt:
                raise _fail(f"{path}.{name}", f"dtype {np.dtype(a.dtype).name} differs from the "
                            f"state's {dt.name}")


def _check_okfeb(est: Any, dims: _Dims, path: str) -> None:
    st = getattr(est, "subspace_", None)
    if st is None:
        return
    if st.A.shape[1] != est.rank:
        raise _fail(f"{path}.subspace_", f"rank {st.A.shape[1]} but the model's rank is {est.rank}")
    d = dims.get("n_features_in_")
    if d is not None and st.S.shape[1] != d:
        raise _fail(f"{path}.subspace_", f"stored vectors of width {st.S.shape[1]} for {d} features")


#: OK-FEB's fitted state before it moved into OnlineSubspace (format 1, and format 2 files
#: written until then): estimator attribute → OnlineSubspace attribute
_OKFEB_LEGACY = {"kernel_": "kernel", "_dt": "dtype", "_rs": "rng", "_S": "S", "_sn": "sn", "_A": "A",
                 "_K": "K", "_ra": "ra", "_Pbuf": "Pbuf", "_rec": "rec", "_sidx": "sidx", "_m": "m",
                 "n_seen_": "n_seen", "n_updates_": "n_updates", "_err_sum": "err_sum",
                 "_n_censored": "n_censored", "_ema": "ema", "_theta": "theta",
                 "censor_threshold_": "censor_threshold", "objective_history_": "objective_history",
                 "n_iter_": "n_iter", "last_errors_": "last_errors", "_P": "P", "_C": "C", "_L": "L"}
_OKFEB_LEGACY_DROPPED = ("_cache",)      # a cache, rebuilt on use


def _okfeb_upgrade(fitted: dict) -> dict:
    """An OKFEB ``fitted`` object with the legacy flat state → one with a ``subspace_`` record node."""
    if "subspace_" in fitted or not any(k in fitted for k in _OKFEB_LEGACY):
        return fitted
    out = {k: v for k, v in fitted.items() if k not in _OKFEB_LEGACY and k not in _OKFEB_LEGACY_DROPPED}
    out["subspace_"] = {"estimator": "gpuksvm.solvers.okfeb.OnlineSubspace",
                        "fitted": {new: fitted[old] for old, new in _OKFEB_LEGACY.items() if old in fitted}}
    return out


def _check_learner(est: Any, dims: _Dims, path: str) -> None:
    fe, lr = getattr(est, "extractor_", None), getattr(est, "_learner", None)
    if fe is not None and lr is not None and lr.n_features != fe.rank:
        raise _fail(f"{path}._learner", f"{lr.n_features} weights for {fe.rank} OK-FEB features")
    if fe is not None and getattr(fe, "n_features_in_", None) not in (None, dims.get("n_features_in_")):
        raise _fail(f"{path}.extractor_", "its input width differs from the model's")
    k = dims.get("n_classes")
    if k is not None and isinstance(lr, Pegasos) and lr.G.shape[1] != _n_outputs(k):
        raise _fail(f"{path}._learner", f"{lr.G.shape[1]} outputs for {k} classes")


def _check_record_width(est: Any, dims: _Dims, path: str) -> None:
    w = est.G if isinstance(est, Pegasos) else est.w
    if w.shape[0] != est.n_features + int(est.fit_intercept):
        raise _fail(path, f"{w.shape[0]} weights for {est.n_features} features")


def _check_pipeline(est: Pipeline) -> None:
    est._validate_params()
    if est.memory is not None:
        raise ModelFormatError("Pipeline.memory must be None in a model file")
    for i, step in enumerate(est.steps):
        if not (type(step) is tuple and len(step) == 2 and type(step[0]) is str):
            raise ModelFormatError(f"Pipeline.steps[{i}] must be a (name, estimator) pair")
        if not (step[1] in (None, "passthrough") or type(step[1]) in _BY_CLASS):
            raise ModelFormatError(f"Pipeline.steps[{i}] is not a registered estimator")
    est._validate_steps()


_PROBA = {"probA_": Arr("f", ("n_platt",)), "probB_": Arr("f", ("n_platt",))}

_LINEAR_FITTED = _common({
    "classes_": _labels(),
    "coef_": Arr("f", ("n_outputs", "n_features_in_")),
    "intercept_": Arr("f", ("n_outputs",)),
    "objective_": Arr("f", ("n_outputs",)),
    "n_iter_": Int(low=0),
    "converged_": Bool(),
    "solver_": Str(("newton", "newton-cg", "dual_cd", "dcd", "liblinear", "liblinear-primal", "sbm",
                    "newton-stream", "newton-dask")),
    "cost_scale_": Float(low=0.0),
    "n_passes_": Int(low=0),
    "dual_coef_": Opt(Arr("f", (None, "n_outputs"))),
    **_PROBA,
})

_CVM_STOP = Str(("converged", "max_iter", "max_core_size", "stalled"))
#: per search iteration of :func:`gpuksvm.solvers.meb.fit_core_set` (1-D, one entry each)
_CVM_HISTORY = DictOf(("m", "search_kernel", "qp_kernel", "qp_steps", "added", "seconds"),
                      Arr("iuf", ndim=1))
_CVM_FITTED = _common({
    "classes_": _labels(),
    "kernel_": KERNEL,
    "problems_": PROBLEMS,
    "support_": Arr("iu", ("n_sv",)),
    "support_vectors_": Arr("f", ("n_sv", "n_features_in_")),
    "dual_coef_": Arr("f", ("n_problems", "n_sv")),
    "_sv_scale": Opt(Arr("f", ("n_sv",))),
    "n_support_total_": Int(low=0, dim="n_sv"),
    "intercept_": Arr("f", ("n_problems",)),
    "core_set_": Either(INT_1D, ListOf(INT_1D)),
    "alpha_": Either(FLOAT_1D, ListOf(FLOAT_1D)),
    "radius_": Either(Float(), FLOAT_1D),
    "rho_": Arr("f", ("n_problems",)),
    "n_iter_": Either(Int(low=0), INT_1D),
    "stop_reason_": Either(_CVM_STOP, ListOf(_CVM_STOP)),
    "duality_gap_": Either(Float(), FLOAT_1D),
    "history_": Either(_CVM_HISTORY, ListOf(_CVM_HISTORY)),
    "search_": Str(),
    "kappa_tilde_": Float(),
    "n_smo_steps_": Either(Int(low=0), INT_1D),
    "core_set_size_": Either(Int(low=0), INT_1D),
    "offset_": Float(),
})
_CVM_REQUIRED = ("kernel_", "support_vectors_", "dual_coef_", "intercept_", "_sv_scale",
                 "n_features_in_", "rho_")

_OKFEB_FITTED = _common({"subspace_": Instance(OnlineSubspace)})
_OKFEB_REQUIRED = ("subspace_", "n_features_in_", "_fitted_on")

_SUBSPACE_FITTED = {
    "kernel": KERNEL,
    "dtype": DTypeSpec(),
    "rng": Instance(np.random.RandomState),
    "S": Arr("f", ("cap", "n_features")),
    "sn": Arr("f", ("cap",)),
    "A": Arr("f", ("cap", "rank")),
    "K": Opt(Arr("f", ("cap", "cap"))),
    "ra": Arr("f", ("cap",)),
    "Pbuf": Opt(Arr("f", ("cap", "rank"))),
    "rec": Arr("f", ("cap",)),
    "sidx": Arr("iu", ("cap",)),
    "m": Int(low=0, dim="m"),
    "n_seen": Int(low=0),
    "n_updates": Int(low=0),
    "err_sum": Float(),
    "n_censored": Int(low=0),
    "ema": Opt(Float()),
    "theta": Float(),
    "censor_threshold": Float(),
    "objective_history": ListOf(Float()),
    "n_iter": Int(low=0),
    "last_errors": FLOAT_1D,
    "P": Arr("f", ("m", "rank")),
    "C": Arr("f", ("rank", "rank")),
    "L": Arr("f", ("rank", "rank")),
}

_CAPACITY = {"capacity_check_": Info(), "budget_too_small_": Bool()}

_SVM_SHAPES = {
    "support_": Arr("iu", ("n_sv",)),
    "support_vectors_": SparseOrArr(("n_sv", "n_features_in_")),
    "intercept_": Arr("f", ("n_problems",)),
    "n_support_": Arr("iu", ("n_classes",)),
}

_ENTRIES = [
    Entry("gpuksvm.linear_svm.LinearSVM", LinearSVM, _LINEAR_FITTED,
          required=("classes_", "coef_", "intercept_", "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_linear),
    Entry("gpuksvm.llsvm.LLSVM", LLSVM, _common({
        "classes_": _labels(),
        "kernel_": KERNEL,
        "landmarks_": Arr("f", ("k", "n_features_in_")),
        "n_landmarks_": Int(low=1, dim="k"),
        "eigvals_": Arr("f", ("k",)),
        "spectrum_": Arr("f", ("k",)),
        "map_": Arr("f", ("k", "k")),
        "svm_": Instance(LinearSVM),
        "coef_": Arr("f", ("n_outputs", "k")),
        "intercept_": Arr("f", ("n_outputs",)),
        "dual_coef_": Arr("f", ("n_outputs", "k")),
        "n_iter_": Int(low=0),
        "_n_features_out": Int(low=1, dim="k"),
        "fit_times_": Info(),
    }), required=("classes_", "kernel_", "landmarks_", "map_", "svm_", "dual_coef_", "intercept_",
                  "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_llsvm),
    Entry("gpuksvm.cvm.CVM", CVM, _CVM_FITTED, required=_CVM_REQUIRED + ("classes_",),
          validate=_own_checks("_check_params"), check=_check_cvm),
    Entry("gpuksvm.cvm.OneClassCVM", OneClassCVM, _CVM_FITTED, required=_CVM_REQUIRED + ("offset_",),
          validate=_own_checks("_check_params"), check=_check_cvm),
    Entry("gpuksvm.kernel_svc.KernelSVC", KernelSVC, _common({
        **_SVM_SHAPES,
        # (0, 0) for kernel="precomputed", as SVC's (checked in _check_svc)
        "support_vectors_": SparseOrArr((None, None)),
        "classes_": _labels(),
        "kernel_": Either(KERNEL, Str(("precomputed",))),
        "dual_coef_": SparseOrArr(("n_dual_rows", "n_sv")),
        "solver_": Str(),
        "n_iter_": Arr("iu", ("n_problems",)),
        "objective_": Arr("f", ("n_problems",)),
        "converged_": Arr("b", ("n_problems",)),
        "shape_fit_": TupleOf(Int(low=0), Int(low=0)),
        **_PROBA,
    }), required=("classes_", "kernel_", "support_vectors_", "dual_coef_", "intercept_",
                  "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_svc),
    Entry("gpuksvm.svi.SVI", SVI, _common({
        **_SVM_SHAPES,
        "classes_": _labels(),
        "kernel_": KERNEL,
        "problems_": PROBLEMS,
        "subsets_": ListOf(ListOf(INT_1D)),
        "sub_models_": ListOf(Info()),
        "margin_support_": ListOf(INT_1D),
        "dual_coef_": SparseOrArr(("n_problems", "n_sv")),
        "n_iter_": Arr("iu", ("n_problems",)),
        "solved_exactly_": Arr("b", ("n_problems",)),
        "margin_capped_": Arr("b", ("n_problems",)),
        "converged_": Arr("b", ("n_problems",)),
        "fit_times_": Info(),
        **_PROBA,
    }), required=("classes_", "kernel_", "support_vectors_", "dual_coef_", "intercept_",
                  "problems_", "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_svi,
          upgrade=lambda fitted: {("fit_times_" if k == "fit_time_" else k): v for k, v in fitted.items()}),
    Entry("gpuksvm.okfeb.OKFEB", OKFEB, _OKFEB_FITTED, required=_OKFEB_REQUIRED,
          validate=_own_checks("_check_params"), check=_check_okfeb, upgrade=_okfeb_upgrade),
    Entry("gpuksvm.solvers.okfeb.OnlineSubspace", OnlineSubspace, _SUBSPACE_FITTED, kind="record",
          required=tuple(_SUBSPACE_FITTED), check=_check_subspace, transient={"_cache": dict}),
    Entry("gpuksvm.okfeb.OKFEBClassifier", OKFEBClassifier, _common({
        "classes_": _labels(),
        "extractor_": Instance(OKFEB),
        "_learner": Instance(Pegasos),
        **_CAPACITY,
    }), required=("classes_", "extractor_", "_learner", "n_features_in_"),
          validate=_own_checks("_check_params"),
          check=_check_learner),
    Entry("gpuksvm.okfeb.OKFEBRegressor", OKFEBRegressor, _common({
        "extractor_": Instance(OKFEB),
        "_learner": Instance(RegularizedLMS),
        **_CAPACITY,
    }), required=("extractor_", "_learner", "n_features_in_"),
          validate=_own_checks("_check_params"),
          check=_check_learner),
    Entry("gpuksvm.solvers.online.Pegasos", Pegasos, {
        "lam": Float(low=5e-324), "fit_intercept": Bool(), "n_features": Int(low=0),
        "G": Arr("f", (None, None), ndim=2), "t": Int(low=0),
    }, kind="record", required=("lam", "fit_intercept", "n_features", "G", "t"),
          check=_check_record_width),
    Entry("gpuksvm.solvers.online.RegularizedLMS", RegularizedLMS, {
        "step": Float(low=5e-324), "alpha": Float(low=0.0), "normalized": Bool(),
        "fit_intercept": Bool(), "n_features": Int(low=0), "w": FLOAT_1D, "t": Int(low=0),
    }, kind="record", required=("step", "alpha", "normalized", "fit_intercept", "n_features", "w",
                                "t"),
          check=_check_record_width),
    Entry("sklearn.pipeline.Pipeline", Pipeline, {}, validate=_check_pipeline),
    Entry("sklearn.preprocessing.StandardScaler", StandardScaler, {
        "n_features_in_": Int(low=1, high=_INT64[1], dim="n_features_in_"),
        "feature_names_in_": Strings(("n_features_in_",)),
        "n_samples_seen_": Either(Int(low=0), Float(low=0.0), Arr("iuf", ("n_features_in_",))),
        "mean_": Opt(Arr("f", ("n_features_in_",))),
        "var_": Opt(Arr("f", ("n_features_in_",))),
        "scale_": Opt(Arr("f", ("n_features_in_",))),
    }, required=("n_features_in_", "n_samples_seen_", "mean_", "var_", "scale_"),
          validate=lambda est: est._validate_params()),
]

#: registry key → Entry: every class a model file may hold
REGISTRY: dict[str, Entry] = {e.name: e for e in _ENTRIES}
_BY_CLASS: dict[type, Entry] = {e.cls: e for e in _ENTRIES}
_BY_V1_NAME: dict[str, Entry] = {e.v1_name: e for e in _ENTRIES}


def entry_for(obj: Any) -> Entry | None:
    """The registry entry of ``obj``'s exact class (None for anything else)."""
    return _BY_CLASS.get(type(obj))


# =========================================================================== encoder
_SCALAR_TYPES = (type(None), bool, int, float, str)


class _Writer:
    """Python objects → JSON tree + arrays (only what :class:`_Reader` accepts)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.fitted_device = "cpu"

    def _store(self, a: Any, path: str) -> dict:
        if bk.is_gpu_array(a):
            self.fitted_device = str(bk.device_of(a))
        host = np.ascontiguousarray(bk.to_host(a))
        if not ARRAY_DTYPE_RE.match(host.dtype.str):
            raise TypeError(f"cannot save {path}: arrays of dtype {host.dtype} are not supported by "
                            f"the gpuksvm model format (use pickle/joblib)")
        ref = f"a{len(self.arrays)}"
        self.arrays[ref] = host
        return {"array": ref}

    def value(self, v: Any, path: str, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise TypeError(f"cannot save {path}: nesting deeper than {MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(v, (np.bool_, np.integer, np.floating)) and not isinstance(v, np.ndarray):
            v = v.item()
        if type(v) is float and not math.isfinite(v):
            return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        if type(v) is int and not _INT64[0] <= v <= _INT64[1]:
            raise TypeError(f"cannot save {path}: integer {v} does not fit in 64 bits")
        if type(v) in _SCALAR_TYPES:
            return v
        if type(v) is Kernel:
            return {"kernel": {"name": v.name, "gamma": v.gamma, "degree": v.degree, "coef0": v.coef0}}
        if isinstance(v, bk.Device):
            if v.is_gpu:
                self.fitted_device = str(v)
            return {"device": "cpu"}
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            dt = np.dtype(v)
            if dt not in _FLOAT_DTYPES:
                raise TypeError(f"cannot save {path}: dtype {dt} (only float32/float64)")
            return {"dtype": dt.name}
        if type(v) is np.random.RandomState:
            name, key, pos, has_gauss, gauss = v.get_state(legacy=True)
            return {"random_state": {"key": self._store(key, path), "pos": int(pos),
                                     "has_gauss": int(has_gauss), "gauss": float(gauss)}}
        if bk.is_sparse(v):
            host = bk.to_host(v)
            fmt = host.format if host.format in ("csr", "csc", "coo") else "csr"
            host = host.asformat(fmt)
            parts = ({"row": host.row, "col": host.col} if fmt == "coo"
                     else {"indices": host.indices, "indptr": host.indptr})
            parts["data"] = host.data
            node = {"sparse": fmt, "shape": [int(s) for s in host.shape]}
            node.update({k: self._store(a, path) for k, a in parts.items()})
            return node
        if isinstance(v, np.ndarray) or bk.is_gpu_array(v):
            if v.dtype == object:
                if v.ndim == 1 and all(type(s) is str for s in v):
                    return {"strings": list(v)}
                raise TypeError(f"cannot save {path}: object arrays hold only strings in the "
                                "gpuksvm model format (use pickle/joblib)")
            return self._store(v, path)
        if type(v) is list:
            return [self.value(x, f"{path}[{i}]", d) for i, x in enumerate(v)]
        if type(v) is tuple:
            return {"tuple": [self.value(x, f"{path}[{i}]", d) for i, x in enumerate(v)]}
        if type(v) is dict:
            if all(type(k) is str for k in v):
                return {"dict": {k: self.value(x, f"{path}[{k!r}]", d) for k, x in v.items()}}
            items = []
            for k, x in v.items():
                if isinstance(k, (np.integer, np.floating, np.bool_)):
                    k = k.item()
                if type(k) not in (bool, int, float, str):
                    raise TypeError(f"cannot save {path}: dict key {k!r} (only numbers and strings)")
                items.append([self.value(k, path, d), self.value(x, f"{path}[{k!r}]", d)])
            return {"items": items}
        if entry_for(v) is not None:
            return self.estimator(v, path, d)
        raise TypeError(f"cannot save {path}: objects of type {type(v).__module__}."
                        f"{type(v).__qualname__} are not supported by the gpuksvm model format "
                        f"(use pickle/joblib)")

    def estimator(self, obj: Any, path: str, depth: int = 0) -> dict:
        entry = entry_for(obj)
        if entry is None:
            raise TypeError(f"cannot save {path}: {type(obj).__module__}.{type(obj).__qualname__} is "
                            "not a class the gpuksvm model format holds (gpuksvm estimators, and "
                            "scikit-learn's Pipeline and StandardScaler around them); use "
                            "pickle/joblib for other objects")
        state = dict(vars(obj))
        params: dict = {}
        if entry.kind == "estimator":
            for k in type(obj)._get_param_names():
                v = getattr(obj, k)
                params[k] = self.value(v, f"{path}.{k}", depth)
                state.pop(k, None)
        fitted = {}
        for k, v in state.items():
            if k in entry.transient:
                continue
            if k not in entry.fitted:
                raise TypeError(f"cannot save {path}: attribute {k!r} of {type(obj).__name__} is not "
                                f"declared in the model-file schema (gpuksvm/model_schema.py)")
            fitted[k] = self.value(v, f"{path}.{k}", depth)
        node = {"estimator": entry.name, "fitted": fitted}
        if entry.kind == "estimator":
            node["params"] = params
        return node


def encode_model(model: Any) -> tuple[dict, dict[str, np.ndarray], str]:
    """(JSON tree, arrays, fitted device) of ``model``; TypeError for what the format cannot hold."""
    w = _Writer()
    tree = w.estimator(model, type(model).__name__)
    return tree, w.arrays, w.fitted_device


# =========================================================================== decoder
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
            raise _fail(path, f"refers to an array {str(ref)[:40]!r} that the file does not list")
        self.used.add(ref)
        return self.arrays[ref]

    def _keys(self, node: dict, allowed: set, path: str) -> None:
        extra = set(node) - allowed
        if extra:
            raise _fail(path, f"unexpected keys {sorted(extra)[:5]}")

    def value(self, node: Any, path: str, depth: int = 0, *, estimators: bool = False) -> Any:
        if depth > MAX_DEPTH:
            raise _fail(path, f"the tree is nested more than {MAX_DEPTH} levels deep")
        d = depth + 1
        t = type(node)
        if node is None or t in (bool, str):
            if t is str and len(node) > MAX_ITEMS:
                raise _fail(path, "string too long")
            return node
        if t is int:
            if not _INT64[0] <= node <= _INT64[1]:
                raise _fail(path, "integer does not fit in 64 bits")
            return node
        if t is float:
            if not math.isfinite(node):
                raise _fail(path, "non-finite JSON number")
            return node
        if t is list:
            return [self.value(x, f"{path}[{i}]", d, estimators=estimators) for i, x in enumerate(node)]
        if t is not dict:
            raise _fail(path, f"unexpected JSON value of type {t.__name__}")
        tags = set(node) & _TAGS
        if len(tags) != 1:
            raise _fail(path, f"a node must have exactly one kind, got keys {sorted(node)[:6]}")
        tag = tags.pop()
        body = node[tag]
        if tag == "float":
            self._keys(node, {"float"}, path)
            if body not in ("nan", "inf", "-inf"):
                raise _fail(path, f"bad float {str(body)[:20]!r}")
            return float(body)
        if tag == "tuple":
            self._keys(node, {"tuple"}, path)
            if type(body) is not list:
                raise _fail(path, "a tuple node holds a list")
            return tuple(self.value(x, f"{path}[{i}]", d, estimators=estimators)
                         for i, x in enumerate(body))
        if tag == "dict":
            self._keys(node, {"dict"}, path)
            if type(body) is not dict:
                raise _fail(path, "a dict node holds a JSON object")
            return {k: self.value(x, f"{path}[{k!r}]", d) for k, x in body.items()}
        if tag == "items":
            self._keys(node, {"items"}, path)
            if type(body) is not list:
                raise _fail(path, "an items node holds a list of pairs")
            out = {}
            for i, pair in enumerate(body):
                if type(pair) is not list or len(pair) != 2:
                    raise _fail(f"{path}[{i}]", "expected a [key, value] pair")
                k = self.value(pair[0], f"{path}<key>", d)
                if type(k) not in (bool, int, float, str):
                    raise _fail(f"{path}<key>", "dict keys are numbers or strings")
                out[k] = self.value(pair[1], f"{path}[{k!r}]", d)
            return out
        if tag == "array":
            self._keys(node, {"array"}, path)
            return self._array(body, path)
        if tag == "strings":
            self._keys(node, {"strings"}, path)
            if type(body) is not list or not all(type(s) is str for s in body):
                raise _fail(path, "a strings node holds a list of strings")
            out = np.empty(len(body), dtype=object)
            out[:] = body
            return out
        if tag == "sparse":
            return self._sparse(node, path)
        if tag == "kernel":
            self._keys(node, {"kernel"}, path)
            if type(body) is not dict or set(body) != {"name", "gamma", "degree", "coef0"}:
                raise _fail(path, "a kernel node has exactly name, gamma, degree and coef0")
            name = body["name"]
            nums = [body[k] for k in ("gamma", "degree", "coef0")]
            if type(name) is not str or not all(type(x) in (int, float) for x in nums):
                raise _fail(path, "bad kernel fields")
            try:
                return Kernel(name, *nums)
            except (ValueError, TypeError) as exc:
                raise _fail(path, f"invalid kernel: {exc}") from None
        if tag == "dtype":
            self._keys(node, {"dtype"}, path)
            if body not in ("float32", "float64"):
                raise _fail(path, f"dtype must be float32 or float64, got {str(body)[:20]!r}")
            return np.dtype(body)
        if tag == "device":
            self._keys(node, {"device"}, path)
            if body != "cpu":
                raise _fail(path, "bad device node")
            return bk.CPU
        if tag == "random_state":
            return self._random_state(node, path)
        if not estimators:
            raise _fail(path, "an estimator is not allowed here")
        return self.estimator(node, path, d)

    def _sparse(self, node: dict, path: str) -> Any:
        fmt = node["sparse"]
        names = ("row", "col", "data") if fmt == "coo" else ("indices", "indptr", "data")
        if fmt not in ("csr", "csc", "coo"):
            raise _fail(path, f"unknown sparse format {str(fmt)[:20]!r}")
        self._keys(node, {"sparse", "shape", *names}, path)
        shape = node.get("shape")
        if not (type(shape) is list and len(shape) == 2
                and all(type(s) is int and 0 <= s < 2 ** 40 for s in shape)):
            raise _fail(path, "bad sparse shape")
        parts = {}
        for k in names:
            if k not in node or type(node[k]) is not dict:
                raise _fail(path, f"the sparse node lacks its {k!r} array")
            a = self.value(node[k], f"{path}.{k}", MAX_DEPTH - 1)
            if not _is_array(a) or a.ndim != 1:
                raise _fail(f"{path}.{k}", "expected a 1-D array")
            want = "f" if k == "data" else "iu"
            if np.dtype(a.dtype).kind not in want:
                raise _fail(f"{path}.{k}", f"bad dtype {np.dtype(a.dtype).name}")
            parts[k] = a
        n, d = shape
        nnz = parts["data"].shape[0]
        if fmt == "coo":
            if parts["row"].shape[0] != nnz or parts["col"].shape[0] != nnz:
                raise _fail(path, "row/col/data lengths differ")
        else:
            major = n if fmt == "csr" else d
            if parts["indptr"].shape[0] != major + 1 or parts["indices"].shape[0] != nnz:
                raise _fail(path, "indptr/indices/data lengths do not fit the shape")
        if self.stubs:
            return SparseInfo(fmt, (n, d), np.dtype(parts["data"].dtype))
        try:
            if fmt == "coo":
                minor_ok = all(_in_range(parts[k], lim) for k, lim in (("row", n), ("col", d)))
                if not minor_ok:
                    raise ValueError("row/col index out of range")
                return sp.coo_matrix((parts["data"], (parts["row"], parts["col"])), shape=(n, d))
            ctor = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
            m = ctor((parts["data"], parts["indices"], parts["indptr"]), shape=(n, d))
            m.check_format(full_check=True)
            return m
        except (ValueError, TypeError, IndexError) as exc:
            raise _fail(path, f"invalid sparse matrix ({exc})") from None

    def _random_state(self, node: dict, path: str) -> np.random.RandomState:
        self._keys(node, {"random_state"}, path)
        body = node["random_state"]
        if type(body) is not dict or set(body) != {"key", "pos", "has_gauss", "gauss"}:
            raise _fail(path, "a random_state node has exactly key, pos, has_gauss and gauss")
        key = self.value(body["key"], f"{path}.key", MAX_DEPTH - 1)
        pos, has_gauss, gauss = body["pos"], body["has_gauss"], body["gauss"]
        if not (_is_array(key) and key.dtype == np.dtype(np.uint32) and key.shape == (624,)):
            raise _fail(path, "the MT19937 key is a uint32 array of 624")
        if not (type(pos) is int and 0 <= pos <= 624 and has_gauss in (0, 1)
                and type(has_gauss) is int and type(gauss) in (int, float) and math.isfinite(gauss)):
            raise _fail(path, "bad MT19937 state")
        rs = np.random.RandomState(0)
        if not self.stubs:
            rs.set_state(("MT19937", key, pos, has_gauss, float(gauss)))
        return rs

    # ------------------------------------------------------------------ estimators
    def estimator(self, node: Any, path: str, depth: int = 0) -> Any:
        if type(node) is not dict or "estimator" not in node:
            raise _fail(path, "expected an estimator node")
        name = node["estimator"]
        entry = REGISTRY.get(name) if type(name) is str else None
        if entry is None:
            raise _fail(path, f"class {str(name)[:80]!r} is not one a gpuksvm model file may hold "
                        f"(allowed: {', '.join(REGISTRY)})")
        allowed = {"estimator", "fitted"} | ({"params"} if entry.kind == "estimator" else set())
        self._keys(node, allowed, path)
        fitted = node.get("fitted", {})
        if type(fitted) is not dict:
            raise _fail(path, "'fitted' is a JSON object")
        if entry.upgrade is not None:
            fitted = entry.upgrade(fitted)
        if entry.kind == "record":
            obj = entry.cls.__new__(entry.cls)
            dims = _Dims()
        else:
            obj = self._construct(entry, node.get("params", {}), path, depth)
            dims = _Dims({k: v for k, v in vars(obj).items() if type(v) is int})
        values = {}
        for k, sub in fitted.items():
            spec = entry.fitted.get(k)
            if spec is None:
                raise _fail(f"{path}.{k}", f"{entry.cls.__name__} has no declared attribute {k!r}; "
                            "refusing the file")
            v = self.value(sub, f"{path}.{k}", depth + 1, estimators=True)
            spec.check(v, dims, f"{path}.{k}")
            values[k] = v
        if values:
            missing = [k for k in entry.required if k not in values]
            if missing:
                raise _fail(path, f"a fitted {entry.cls.__name__} needs {', '.join(missing)}")
        for k, v in values.items():
            setattr(obj, k, v)
        for k, make in entry.transient.items():
            if values:
                setattr(obj, k, make())
        if entry.check is not None and values:
            try:
                entry.check(obj, dims, path)
            except (AttributeError, TypeError, IndexError) as exc:
                raise _fail(path, f"inconsistent attributes ({exc})") from None
        return obj

    def _construct(self, entry: Entry, params: Any, path: str, depth: int) -> Any:
        if type(params) is not dict:
            raise _fail(path, "'params' is a JSON object")
        names = set(entry.cls._get_param_names())
        # a file written before a parameter was renamed: its old name becomes the new one
        renamed = getattr(entry.cls, "_renamed_parameters", {})
        params = {(renamed[k] if k in renamed and renamed[k] not in params else k): v for k, v in params.items()}
        unknown = set(params) - names
        if unknown:
            raise _fail(path, f"{entry.cls.__name__} has no parameter(s) {sorted(unknown)[:5]}")
        nested = entry.cls is Pipeline
        kwargs = {k: self.value(v, f"{path}.{k}", depth + 1, estimators=nested)
                  for k, v in params.items()}
        for k, v in kwargs.items():
            if _is_array(v) and np.dtype(v.dtype).kind not in "biuf":
                raise _fail(f"{path}.{k}", "array parameters must be numeric")
        try:
            obj = entry.cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise _fail(path, f"cannot build {entry.cls.__name__} from these parameters: {exc}") from None
        if entry.validate is not None:
            try:
                entry.validate(obj)
            except (ValueError, TypeError) as exc:
                raise _fail(path, f"invalid parameters for {entry.cls.__name__}: {exc}") from None
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
    model = r.estimator(tree, "model")
    unused = set(arrays) - r.used
    if unused:
        raise ModelFormatError(f"the file lists arrays the model does not use: {sorted(unused)[:5]}")
    return model


# =========================================================================== format version 1
def translate_v1(node: Any, path: str = "model", depth: int = 0) -> Any:
    """A format-version-1 typed tree rewritten as a version-2 tree (pure JSON → JSON).

    Version 1 named classes by ``module:QualName`` and had generic ``object``
    nodes.  Only nodes with a version-2 equivalent are translated — classes by
    exact comparison of their name with the registry's classes, never by
    importing anything — and everything else (generic objects, sets, complex
    numbers, bytes, named tuples, other classes) is refused with a
    :class:`ModelFormatError`.  The result then goes through
    :func:`decode_model` like any version-2 file.
    """
    if depth > MAX_DEPTH:
        raise _fail(path, f"the tree is nested more than {MAX_DEPTH} levels deep")
    if type(node) is not dict or type(node.get("t")) is not str:
        raise _fail(path, "malformed node in a format-version-1 tree")
    t, d = node["t"], depth + 1

    def sub(key: str) -> Any:
        if key not in node:
            raise _fail(path, f"a version-1 {t!r} node lacks {key!r}")
        return node[key]

    def items(key: str) -> list:
        v = sub(key)
        if type(v) is not list:
            raise _fail(path, f"a version-1 {t!r} node holds a list")
        return v

    def table(key: str) -> dict:
        v = sub(key)
        if type(v) is not dict:
            raise _fail(path, f"a version-1 {t!r} node holds a JSON object")
        return v

    if t == "none":
        return None
    if t in ("bool", "int", "str"):
        v = sub("v")
        if type(v) is not {"bool": bool, "int": int, "str": str}[t]:
            raise _fail(path, f"bad version-1 {t} value")
        return v
    if t == "float":
        v = sub("v")
        if type(v) in (int, float):
            return float(v)
        if v in ("nan", "inf", "-inf"):
            return {"float": v}
        raise _fail(path, "bad version-1 float")
    if t == "array":
        return {"array": sub("ref")}
    if t == "device":
        return {"device": "cpu"}
    if t == "dtype":
        v = sub("v")
        names = {"<f4": "float32", "<f8": "float64", "float32": "float32", "float64": "float64"}
        if v not in names:
            raise _fail(path, f"version-1 dtype {str(v)[:20]!r} is not float32/float64")
        return {"dtype": names[v]}
    if t == "list":
        return [translate_v1(x, f"{path}[{i}]", d) for i, x in enumerate(items("items"))]
    if t == "tuple":
        return {"tuple": [translate_v1(x, f"{path}[{i}]", d) for i, x in enumerate(items("items"))]}
    if t == "dict":
        pairs = []
        for i, kv in enumerate(items("items")):
            if type(kv) is not list or len(kv) != 2:
                raise _fail(path, "bad version-1 dict item")
            pairs.append([translate_v1(kv[0], f"{path}<key>", d), translate_v1(kv[1], f"{path}[{i}]", d)])
        if all(type(k) is str for k, _ in pairs):
            return {"dict": {k: v for k, v in pairs}}
        return {"items": pairs}
    if t == "objarray":
        vals = [translate_v1(x, f"{path}[{i}]", d) for i, x in enumerate(items("items"))]
        if not all(type(s) is str for s in vals):
            raise _fail(path, "version-1 object arrays load only when they hold strings")
        return {"strings": vals}
    if t == "sparse":
        parts = table("parts")
        out = {"sparse": sub("format"), "shape": sub("shape")}
        for k, v in parts.items():
            out[k] = translate_v1(v, f"{path}.{k}", d)
        return out
    if t == "rng":
        if sub("kind") != "RandomState":
            raise _fail(path, "only numpy RandomState generators load from version-1 files")
        st = translate_v1(sub("state"), f"{path}.state", d)
        try:
            inner = st["dict"]["state"]["dict"]
            body = {"key": inner["key"], "pos": inner["pos"], "has_gauss": st["dict"]["has_gauss"],
                    "gauss": st["dict"]["gauss"]}
        except (KeyError, TypeError):
            raise _fail(path, "bad version-1 RandomState") from None
        return {"random_state": body}
    if t == "dataclass":
        if sub("cls") != f"{Kernel.__module__}:{Kernel.__qualname__}":
            raise _fail(path, f"version-1 dataclass {str(node.get('cls'))[:80]!r} is not allowed")
        fields = {k: translate_v1(v, f"{path}.{k}", d) for k, v in table("fields").items()}
        return {"kernel": fields}
    if t in ("estimator", "object"):
        entry = _BY_V1_NAME.get(sub("cls")) if type(sub("cls")) is str else None
        if entry is None or (t == "object") != (entry.kind == "record"):
            raise _fail(path, f"version-1 {t} node of class {str(node.get('cls'))[:80]!r} is not a "
                        "class gpuksvm model files may hold; refusing the file")
        state = {k: translate_v1(v, f"{path}.{k}", d) for k, v in table("state").items()
                 if k not in entry.transient}
        out = {"estimator": entry.name, "fitted": state}
        if t == "estimator":
            out["params"] = {k: translate_v1(v, f"{path}.{k}", d) for k, v in table("params").items()}
        return out
    raise _fail(path, f"version-1 node type {t!r} is not supported by the closed loader; "
                "refusing the file")


# =========================================================================== description
def describe_value(v: Any) -> str:
    """A one-line description of a decoded value (for ``gpuksvm info``)."""
    if _is_array(v):
        return f"array {tuple(v.shape)} {np.dtype(v.dtype).name}"
    if _is_sparse(v):
        return f"sparse {v.format} {tuple(v.shape)} {np.dtype(v.dtype).name}"
    if isinstance(v, Kernel):
        return f"Kernel({v.name}, gamma={v.gamma:g}, degree={v.degree:g}, coef0={v.coef0:g})"
    if type(v) in (list, tuple):
        return f"{type(v).__name__} of {len(v)}"
    if type(v) is dict:
        return f"dict of {len(v)}"
    if isinstance(v, np.random.RandomState):
        return "RandomState"
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, bk.Device):
        return str(v)
    e = entry_for(v)
    if e is not None:
        return e.name
    return repr(v)
