"""A NumPy-backed stand-in for the CuPy API gpuksvm uses, strict where CuPy is strict.

Like real CuPy (checked against cupy/_core and cupy/cuda of CuPy 13/14):
  * implicit device→host conversion is refused: ``numpy.asarray(x)``, ``numpy.dot(x, ...)``
    raise ``TypeError`` (use ``.get()`` / ``cupy.asnumpy``);
  * NumPy arrays (any size, 0-d included) as operands of CuPy ufuncs, operators and
    functions raise ``TypeError`` (CuPy: ``Unsupported type``); NumPy *scalars* are fine;
  * ``x[basic index] = numpy_array`` raises ``ValueError`` (CuPy refuses host fills,
    gh-2079); host index arrays are converted, as CuPy does;
  * reductions and element access return 0-d device arrays, not NumPy scalars;
  * ``empty`` / ``empty_like`` memory is garbage (0xFF bytes: NaN, -1);
  * only names real CuPy has exist: ``cupy_api.json`` holds the public names of real CuPy's
    ``cupy``, ``cupy.linalg``, ``cupy.random``, ``cupy.ndarray``, ``cupyx.scipy.*`` (written and
    checked by ``tests/realcupy.py``); an ``ndarray`` method NumPy has and CuPy lacks
    (``getfield``, ``resize``, ``setflags``, ``to_device``) raises ``AttributeError``;
  * a call real CuPy's signature refuses (a NumPy-only keyword such as ``where=``) raises
    ``TypeError`` (the signatures are in ``cupy_api.json`` too);
  * every public function and method reports its calls to :func:`gpuemu.dispatch.calls_hooked`
    hooks (``tests/realcupy.py`` binds them against real CuPy's signatures);
  * ``RawModule`` compiles with the real NVRTC when it is installed (compile errors are
    real) and runs kernels in the CPU emulator (``gpuemu.launcher``);
    ``cupy._core.core.compile_with_cache`` takes CuPy's compile steps (per-device ``-arch``
    memo, kernel-cache backend, NVRTC, then a load that needs a device: ``cupy/cuda/compiler.py``).
Every operation goes through :func:`gpuemu.dispatch.dispatch` (see there for hooks).
  * device arrays take blocks of the default memory pool as CuPy's do (``cupy/cuda/memory.py``:
    ``used_bytes`` / ``total_bytes``, ``set_limit``, ``OutOfMemoryError`` past the limit or the
    device's memory, blocks cached when an array is collected); ``gpuemu.pool`` reads its peak.
Not modelled: streams and asynchrony, several devices, CuPy's type
promotion corner cases, cuBLAS/cuSOLVER numerics (NumPy/LAPACK compute instead).
"""
from __future__ import annotations

import builtins as _builtins
import functools as _functools
import sys as _sys

import numpy as _np

from gpuemu.dispatch import dispatch as _dispatch
from gpuemu.dispatch import public_call as _public_call

from ._api import API as _API
from ._api import as_real as _as_real
from ._api import report_calls as _report_calls
from ._api import report_constructor_calls as _report_constructor_calls
from ._api import report_method_calls as _report_method_calls

__version__ = "14.0.0+gpuemu"
GPUEMU = True     # marks the stand-in (gpuksvm's tests print which GPU mode ran)

_NAMES = _API["cupy"]

from numpy import (bool_, complex64, complex128, dtype, e, finfo, float16, float32, float64,  # noqa: E402,F401
                   floating, generic, iinfo, inexact, inf, int8, int16, int32, int64, integer, intp, nan,
                   newaxis, number, pi, signedinteger, uint8, uint16, uint32, uint64, unsignedinteger)

bool = bool_  # noqa: A001


# ----------------------------------------------------------------------------- strictness
def _refuse(msg: str, exc: type = TypeError):
    raise exc(msg)


def _is_sparse(x) -> _builtins.bool:
    return type(x).__module__.startswith("cupyx.scipy.sparse")


def _unwrap(x, what: str = "argument", host_ok: _builtins.bool = False):
    """The NumPy array behind a device array; NumPy arrays are refused unless ``host_ok``."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, _np.ndarray):
        if host_ok:
            return x
        _refuse(f"Unsupported type {type(x)}: a NumPy array given to {what} (CuPy takes device arrays only)")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, what, host_ok) for v in x)
    return x


def _wrap(r):
    if isinstance(r, _np.ndarray):
        return ndarray._from(r)
    if isinstance(r, _np.generic):
        return ndarray._from(_np.asarray(r))
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    if isinstance(r, list):
        return [_wrap(v) for v in r]
    return r


_REDUCTIONS = frozenset("sum prod mean std var max min amax amin argmax argmin any all count_nonzero nanmax "
                        "nanmin nansum nanmean nanargmax nanargmin ptp median cumsum cumprod trace".split())
_ALLOC = frozenset("empty empty_like zeros zeros_like ones ones_like full full_like arange eye identity "
                   "linspace".split())
# arguments real CuPy converts from the host itself (index arrays): cupy/_core/_routines_indexing.pyx
_HOST_OK = {"take": {1, "indices"}, "put": {1, 2, "ind", "v"}, "ndarray.take": {0, "indices"}}


def _call(name: str, fn, args: tuple, kwargs: dict, kind: str | None = None):
    """Run NumPy's ``fn`` on the unwrapped arguments as the device operation ``name``."""
    ok = _HOST_OK.get(name, ())
    a = [_unwrap(x, f"cupy.{name}", i in ok) for i, x in enumerate(args)]
    kw = {k: _unwrap(v, f"cupy.{name}({k}=)", k in ok) for k, v in kwargs.items()}
    out = kwargs.get("out")
    short = name.rsplit(".", 1)[-1]
    kind = kind or ("reduction" if short in _REDUCTIONS else "alloc" if short in _ALLOC else
                    "method" if name.startswith("ndarray.") else "function")

    def run():
        r = fn(*a, **kw)
        if isinstance(out, ndarray) and r is out._a:
            return out
        return _wrap(r)
    return _dispatch(kind, name, run, args, kwargs)


def _d2h(name: str, x: "ndarray", convert, **info):
    """A synchronizing device→host operation."""
    return _dispatch("d2h", name, convert, (x,), {}, sync=True, nbytes=x.nbytes, **info)


# ----------------------------------------------------------------------------- ndarray
class _Flags:
    def __init__(self, a: _np.ndarray):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata

    def __getitem__(self, k: str):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous, "OWNDATA": self.owndata}[k]


class _MemoryPointer:
    def __init__(self, a: _np.ndarray):
        self.ptr = a.ctypes.data if a.size else 0
        self.device_id = 0


def _is_advanced(key) -> _builtins.bool:
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, (list, _np.ndarray, ndarray, _builtins.bool, _np.bool_)):
            return True
    return False


class ndarray:
    """An array on the fake device: a NumPy array only reachable through device operations."""

    __array_priority__ = 100
    __slots__ = ("_a", "__weakref__")

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        a = _garbage(shape, dtype, order)
        _pool._charge(a)
        self._a = a

    @classmethod
    def _from(cls, a: _np.ndarray) -> "ndarray":
        _pool._charge(a)     # a new buffer takes a block of the memory pool; a view shares its base's
        obj = object.__new__(cls)
        obj._a = a
        return obj

    shape = property(lambda s: s._a.shape)
    dtype = property(lambda s: s._a.dtype)
    ndim = property(lambda s: s._a.ndim)
    size = property(lambda s: s._a.size)
    itemsize = property(lambda s: s._a.itemsize)
    nbytes = property(lambda s: s._a.nbytes)
    strides = property(lambda s: s._a.strides)
    flags = property(lambda s: _Flags(s._a))
    data = property(lambda s: _MemoryPointer(s._a))
    T = property(lambda s: s.transpose())
    real = property(lambda s: _call("ndarray.real", lambda a: a.real, (s,), {}))
    imag = property(lambda s: _call("ndarray.imag", lambda a: a.imag, (s,), {}))

    @property
    def device(self):
        from .cuda import Device
        return Device(0)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr, "version": 3,
                "data": (self.data.ptr, False), "strides": None if self._a.flags.c_contiguous else self.strides}

    # -- host conversions: explicit ones synchronize, implicit ones are refused
    def __array__(self, dtype=None, copy=None):
        _refuse("Implicit conversion to a NumPy array is not allowed. "
                "Please use `.get()` to construct a NumPy array explicitly.")

    def get(self, stream=None, order="C", out=None, blocking=True):
        def run():
            if out is not None:
                out[...] = self._a
                return out
            return _np.array(self._a, order=order, copy=True)
        return _d2h("ndarray.get", self, run)

    def set(self, arr, stream=None):
        if not isinstance(arr, _np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.shape != self.shape:
            raise ValueError("Shape mismatch")

        def run():
            self._a[...] = arr
        _dispatch("h2d", "ndarray.set", run, (self,), {}, nbytes=arr.nbytes)

    def item(self):
        return _d2h("ndarray.item", self, self._a.item)

    def tolist(self):
        return _d2h("ndarray.tolist", self, self._a.tolist)

    def __int__(self):
        return _d2h("int", self, lambda: int(self._a))

    def __index__(self):
        if self.ndim or self.dtype.kind not in "iu":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return _d2h("index", self, lambda: int(self._a))

    def __float__(self):
        return _d2h("float", self, lambda: float(self._a))

    def __complex__(self):
        return _d2h("complex", self, lambda: complex(self._a))

    def __bool__(self):
        return _d2h("bool", self, lambda: _builtins.bool(self._a))   # NumPy's error for size > 1

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        return _d2h("repr", self, lambda: repr(self._a))

    def __str__(self):
        return _d2h("str", self, lambda: str(self._a))

    def __format__(self, spec):
        return _d2h("format", self, lambda: format(self._a.item() if self._a.ndim == 0 else self._a, spec))

    def __reduce__(self):
        return (array, (self.get(),))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    __hash__ = None

    # -- indexing
    def __getitem__(self, key):
        k = _unwrap(key, "an index", host_ok=True)

        def run():
            r = self._a[k]
            return ndarray._from(r if isinstance(r, _np.ndarray) else _np.asarray(r))
        return _dispatch("index", "getitem", run, (self, key), {})

    def __setitem__(self, key, value):
        k = _unwrap(key, "an index", host_ok=True)
        if isinstance(value, _np.ndarray) and value.ndim and not _is_advanced(key):
            _refuse("non-scalar numpy.ndarray cannot be used for fill (x[basic index] = numpy array; "
                    "CuPy refuses host assignments, copy it to the device first)", ValueError)
        if isinstance(value, (list, tuple)) and not _is_advanced(key) and _np.ndim(value):
            _refuse("x[basic index] = a list is a host fill, which CuPy refuses", ValueError)
        v = _unwrap(value, "an assignment", host_ok=True)

        def run():
            self._a[k] = v
        _dispatch("index", "setitem", run, (self, key, value), {})

    # -- methods
    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        if not copy and _np.dtype(dtype) == self.dtype:
            return self
        return _call("ndarray.astype", lambda a: a.astype(dtype, order=order, copy=True), (self,), {})

    def copy(self, order="C"):
        return _call("ndarray.copy", lambda a: a.copy(order=order), (self,), {}, kind="alloc")

    def view(self, dtype=None):
        return _call("ndarray.view", lambda a: a.view() if dtype is None else a.view(dtype), (self,), {})

    def fill(self, value):
        if isinstance(value, _np.ndarray) and value.ndim:
            _refuse("non-scalar numpy.ndarray cannot be used for fill", ValueError)
        v = _unwrap(value, "fill", host_ok=True)
        _dispatch("method", "ndarray.fill", lambda: self._a.fill(v), (self,), {})

    def __getattr__(self, name):
        if name.startswith("_") or name not in _API["cupy.ndarray"] or not callable(getattr(_np.ndarray, name, None)):
            raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")
        return _functools.partial(_ndarray_method(name), self)

    # -- NumPy protocols: NumPy functions on device arrays are CuPy's or refused
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        for x in inputs + tuple(kwargs.get("out", ())):
            if isinstance(x, _np.ndarray):
                _refuse(f"Unsupported type {type(x)}: numpy.{ufunc.__name__} mixes NumPy and CuPy arrays")
        out = kwargs.get("out")
        kw = dict(kwargs)
        if out is not None:
            kw["out"] = tuple(_unwrap(o) for o in out)
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"

        def run():
            r = fn(*[_unwrap(x) for x in inputs], **kw)
            if out is not None and len(out) == 1 and r is kw["out"][0]:
                return out[0]
            return _wrap(r)
        return _dispatch("ufunc" if method == "__call__" else "reduction", name, run, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, ndarray) for t in types):
            _refuse(f"Unsupported type: numpy.{func.__name__} mixes NumPy and CuPy arrays")
        mod = func.__module__ or ""
        if mod.startswith("numpy.linalg"):
            from . import linalg
            f = getattr(linalg, func.__name__, None)
        else:
            f = globals().get(func.__name__) if func.__name__ in _NAMES else None
            f = f or (_function(func.__name__) if func.__name__ in _NAMES else None)
        if f is None:
            return NotImplemented
        return f(*args, **kwargs)


def _operator(ufunc_name: str, reflected: _builtins.bool = False, inplace: _builtins.bool = False):
    uf = getattr(_np, ufunc_name)

    def op(self, other):
        if isinstance(other, _np.ndarray):
            _refuse(f"Unsupported type {type(other)}: operator {ufunc_name} with a NumPy array")
        if _is_sparse(other):
            return NotImplemented
        o = _unwrap(other)

        def run():
            if inplace:
                uf(self._a, o, out=self._a)
                return self
            return _wrap(uf(o, self._a) if reflected else uf(self._a, o))
        return _dispatch("ufunc", ufunc_name, run, (other, self) if reflected else (self, other), {})
    return op


for _n, _u in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "true_divide"),
               ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "power"), ("matmul", "matmul"),
               ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
               ("lshift", "left_shift"), ("rshift", "right_shift")]:
    setattr(ndarray, f"__{_n}__", _operator(_u))
    setattr(ndarray, f"__r{_n}__", _operator(_u, reflected=True))
    setattr(ndarray, f"__i{_n}__", _operator(_u, inplace=True))
for _n, _u in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"),
               ("eq", "equal"), ("ne", "not_equal")]:
    setattr(ndarray, f"__{_n}__", _operator(_u))
for _n, _u in [("neg", "negative"), ("pos", "positive"), ("abs", "absolute"), ("invert", "invert")]:
    setattr(ndarray, f"__{_n}__",
            (lambda u: lambda self: _dispatch("ufunc", u.__name__, lambda: _wrap(u(self._a)), (self,), {}))(
                getattr(_np, _u)))


@_functools.lru_cache(maxsize=None)
def _ndarray_method(name: str):
    """``cupy.ndarray.<name>`` for the methods NumPy computes (called with the array first)."""
    def method(self, *args, **kwargs):
        bound = getattr(self._a, name)
        return _call(f"ndarray.{name}", lambda *a, **k: bound(*a, **k), args, kwargs)
    method.__name__ = name
    return _public_call(f"cupy.ndarray.{name}", _as_real(f"cupy.ndarray.{name}", method))


def _garbage(shape, dtype=float, order="C") -> _np.ndarray:
    """Uninitialized device memory: 0xFF bytes (NaN for floats, -1 for integers, True for bool)."""
    a = _np.empty(shape, dtype=dtype, order=order)
    a.view(_np.uint8).reshape(-1)[...] = 0x01 if a.dtype.kind == "b" else 0xFF
    return a


# ----------------------------------------------------------------------------- creation / transfers
def empty(shape, dtype=float, order="C"):
    return _dispatch("alloc", "empty", lambda: ndarray._from(_garbage(shape, dtype, order)), (), {})


def empty_like(a, dtype=None, order="K", subok=None, shape=None):
    src = _unwrap(a, "cupy.empty_like")
    return _dispatch("alloc", "empty_like", lambda: ndarray._from(
        _garbage(src.shape if shape is None else shape, src.dtype if dtype is None else dtype)), (a,), {})


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, blocking=False):
    if isinstance(obj, ndarray):
        return _call("array", lambda a: _np.array(a, dtype=dtype, copy=True, order=order, ndmin=ndmin),
                     (obj,), {}, kind="alloc")
    if _is_sparse(obj):
        raise TypeError("cupy.array does not take sparse matrices")
    src = _unwrap(obj, "cupy.array", host_ok=True)

    def run():
        a = _np.array(src, dtype=dtype, order=order if order in "CF" else "K", ndmin=ndmin, copy=True)
        if a.dtype == object:
            raise ValueError(f"Unsupported dtype object (from {type(obj).__name__})")
        return ndarray._from(a)
    return _dispatch("h2d", "array", run, (), {}, nbytes=_np.asarray(src).nbytes if src is not None else 0)


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    if isinstance(a, ndarray):
        if (dtype is None or _np.dtype(dtype) == a.dtype) and order in (None, "K", "A") and not copy:
            return a
        return _call("asarray", lambda x: _np.array(x, dtype=dtype, order=order or "K", copy=True), (a,), {})
    return array(a, dtype=dtype, order=order or "K")


asanyarray = asarray


def ascontiguousarray(a, dtype=None):
    if not isinstance(a, ndarray):
        _refuse(f"Argument 'a' has incorrect type (expected cupy.ndarray, got {type(a).__name__})")
    if (dtype is None or _np.dtype(dtype) == a.dtype) and a._a.flags.c_contiguous and a.ndim:
        return a
    return _call("ascontiguousarray", lambda x: _np.ascontiguousarray(x, dtype=dtype).reshape(x.shape or (1,)),
                 (a,), {})


def asfortranarray(a, dtype=None):
    if not isinstance(a, ndarray):
        _refuse(f"Argument 'a' has incorrect type (expected cupy.ndarray, got {type(a).__name__})")
    return _call("asfortranarray", lambda x: _np.asfortranarray(x, dtype=dtype), (a,), {})


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    if _is_sparse(a):
        raise TypeError("cupy.asnumpy does not take sparse matrices (use .get())")
    return _np.asarray(a, order=order)


def get_array_module(*args):
    import sys
    for a in args:
        if isinstance(a, ndarray) or _is_sparse(a):
            return sys.modules[__name__]
    return _np


# ----------------------------------------------------------------------------- everything else
_functions: dict = {}


def _function(name: str):
    f = _functions.get(name)
    if f is None:
        npf = getattr(_np, name, None)
        if npf is None or not callable(npf) or isinstance(npf, type):
            return None

        def f(*args, **kwargs):
            return _call(name, npf, args, kwargs)
        f.__name__ = name
        _functions[name] = f
    return f


def __getattr__(name: str):
    if name.startswith("__") or name not in _NAMES:
        raise AttributeError(f"module 'cupy' has no attribute {name!r}" +
                             ("" if name.startswith("__") else " (not in real CuPy's namespace)"))
    f = _function(name)
    if f is None:
        raise AttributeError(f"the fake cupy does not provide {name!r} (real CuPy has it: add it to "
                             "tests/gpuemu/fake/cupy)")
    return f


def result_type(*arrays_and_dtypes):
    return _np.result_type(*[x.dtype if isinstance(x, ndarray) else x for x in arrays_and_dtypes])


def can_cast(from_, to, casting="safe"):
    return _np.can_cast(from_.dtype if isinstance(from_, ndarray) else from_, to, casting)


def isscalar(x):
    return _np.isscalar(x)


def ndim(a):
    return a.ndim if isinstance(a, ndarray) else _np.ndim(a)


def shape(a):
    return a.shape if isinstance(a, ndarray) else _np.shape(a)


def size(a, axis=None):
    return (a.size if axis is None else a.shape[axis]) if isinstance(a, ndarray) else _np.size(a, axis)


class _PinnedMemoryPool:
    """Pinned host memory: gpuksvm allocates none (nothing to count)."""

    def used_bytes(self):
        return 0

    def free_bytes(self):
        return 0

    def total_bytes(self):
        return 0

    def n_free_blocks(self):
        return 0

    def free_all_blocks(self, stream=None):
        pass


_pinned_pool = _PinnedMemoryPool()


def get_default_memory_pool():
    return _pool


def get_default_pinned_memory_pool():
    return _pinned_pool


def is_available():
    return True


def show_config(*, _full=False):
    print("cupy: the gpuksvm test stand-in (NumPy + the gpuemu CPU emulator)")


# ----------------------------------------------------------------------------- sorting (CuPy's rules)
from . import _sorting  # noqa: E402


def argsort(a, axis=-1, kind=None):
    return _call("argsort", lambda A: _sorting.argsort(A, axis, kind), (a,), {})


def argpartition(a, kth, axis=-1):
    return _call("argpartition", lambda A: _sorting.argpartition(A, kth, axis), (a,), {})


def _ndarray_argsort(self, axis=-1, kind=None):
    return _call("ndarray.argsort", lambda A: _sorting.argsort(A, axis, kind), (self,), {})


def _ndarray_argpartition(self, kth, axis=-1):
    return _call("ndarray.argpartition", lambda A: _sorting.argpartition(A, kth, axis), (self,), {})


ndarray.argsort, ndarray.argpartition = _ndarray_argsort, _ndarray_argpartition

from . import cuda, linalg, random  # noqa: E402,F401

_pool = cuda.memory.MemoryPool()     # the device memory pool (see cupy.cuda.memory)
from ._raw import RawKernel, RawModule  # noqa: E402,F401

# ----------------------------------------------------------------------------- call reports
_report_calls(_sys.modules[__name__], "cupy")
_report_calls(linalg, "cupy.linalg")
_report_calls(random, "cupy.random")
_report_calls(cuda, "cupy.cuda")
_report_calls(cuda.runtime, "cupy.cuda.runtime")
_report_method_calls(ndarray, "cupy.ndarray")
_report_method_calls(RawModule, "cupy.RawModule")
for _cls, _name in [(RawModule, "cupy.RawModule"), (RawKernel, "cupy.RawKernel"), (cuda.Device, "cupy.cuda.Device"),
                    (cuda.Stream, "cupy.cuda.Stream"), (cuda.Event, "cupy.cuda.Event")]:
    _report_constructor_calls(_cls, _name)
random._Generator._public_type = property(
    lambda g: "cupy.random." + ("Generator" if isinstance(g._g, _np.random.Generator) else "RandomState"))
_report_method_calls(random._Generator)
