"""cupyx.scipy.sparse on SciPy sparse matrices: device-side sparse matrices whose dense results
are fake cupy arrays.  NumPy arrays and SciPy (host) sparse matrices are refused as operands,
as in cupyx; constructing from a SciPy matrix is the host→device copy."""
from __future__ import annotations

import numpy as _np
import scipy.sparse as _sp

import cupy as _cp
from cupy import _api
from cupy import _refuse, _unwrap
from gpuemu.dispatch import dispatch as _dispatch


def _wrap(r):
    if _sp.issparse(r):
        return _FORMATS.get(r.format, csr_matrix)._from(r)
    if isinstance(r, _np.matrix):
        return _cp.ndarray._from(_np.asarray(r))
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    return _cp._wrap(r)


def _operand(x, what):
    if isinstance(x, spmatrix):
        return x._s
    if _sp.issparse(x):
        _refuse(f"a SciPy (host) sparse matrix given to {what}")
    return _unwrap(x, what)


def _op(name, fn, args, kwargs=None, kind="sparse"):
    a = [_operand(x, f"cupyx.scipy.sparse {name}") for x in args]
    kw = {k: _operand(v, f"cupyx.scipy.sparse {name}") for k, v in (kwargs or {}).items()}
    return _dispatch(kind, f"sparse.{name}", lambda: _wrap(fn(*a, **kw)), tuple(args), kwargs or {})


class spmatrix:
    format: str = ""

    def __init__(self, arg1, shape=None, dtype=None, copy=False):
        fmt = self.format
        if isinstance(arg1, spmatrix):
            s = arg1._s.asformat(fmt)
        elif _sp.issparse(arg1):           # host -> device
            s = _dispatch("h2d", f"sparse.{fmt}_matrix", lambda: arg1.asformat(fmt).copy(), (), {},
                          nbytes=arg1.data.nbytes)
        elif isinstance(arg1, _cp.ndarray):
            s = _sp.csr_matrix(arg1._a).asformat(fmt)
        elif isinstance(arg1, tuple):
            parts = _unwrap(arg1, f"cupyx {fmt}_matrix")
            s = getattr(_sp, f"{fmt}_matrix")(parts, shape=shape, dtype=dtype)
        else:
            raise ValueError("Unsupported initializer format")
        if dtype is not None:
            s = s.astype(dtype)
        self._s = s.copy() if copy else s

    @classmethod
    def _from(cls, s):
        obj = object.__new__(cls)
        obj._s = s
        return obj

    shape = property(lambda s: s._s.shape)
    dtype = property(lambda s: s._s.dtype)
    nnz = property(lambda s: s._s.nnz)
    ndim = property(lambda s: 2)
    data = property(lambda s: _cp.ndarray._from(s._s.data))
    T = property(lambda s: s.transpose())

    @property
    def device(self):
        return _cp.cuda.Device(0)

    def get(self, stream=None):
        return _dispatch("d2h", "sparse.get", self._s.copy, (self,), {}, sync=True, nbytes=self._s.data.nbytes)

    def toarray(self, order=None, out=None):
        return _op("toarray", lambda s: s.toarray(), (self,))

    def todense(self, order=None, out=None):
        return self.toarray()

    def __array__(self, *args, **kwargs):
        _refuse("Implicit conversion of a cupyx sparse matrix to NumPy is not allowed")

    def __len__(self):
        raise TypeError("sparse matrix length is ambiguous; use getnnz() or shape[0]")

    def __getitem__(self, key):
        k = _unwrap(key, "cupyx sparse index", host_ok=True)
        return _op("getitem", lambda s: s[k], (self,))

    def __matmul__(self, other):
        return _op("matmul", lambda a, b: a @ b, (self, other))

    def __rmatmul__(self, other):
        return _op("matmul", lambda a, b: a @ b, (other, self))

    def dot(self, other):
        return self @ other

    def __mul__(self, other):
        if _np.isscalar(other):
            return _op("multiply", lambda a: a * other, (self,))
        return self @ other

    def __rmul__(self, other):
        if _np.isscalar(other):
            return _op("multiply", lambda a: other * a, (self,))
        return other @ self

    def __truediv__(self, other):
        return _op("divide", lambda a: a / other, (self,))

    def __neg__(self):
        return _op("negative", lambda a: -a, (self,))

    def __add__(self, other):
        return _op("add", lambda a, b: a + b, (self, other))

    __radd__ = __add__

    def __sub__(self, other):
        return _op("subtract", lambda a, b: a - b, (self, other))

    def sum(self, axis=None, dtype=None, out=None):
        return _op("sum", lambda a: _np.asarray(a.sum(axis=axis, dtype=dtype)), (self,), kind="reduction")

    def mean(self, axis=None, dtype=None, out=None):
        return _op("mean", lambda a: _np.asarray(a.mean(axis=axis, dtype=dtype)), (self,), kind="reduction")

    def __getattr__(self, name):
        if name.startswith("_") or name not in _api.API.get(f"cupyx.scipy.sparse.{type(self).__name__}", ()):
            raise AttributeError(f"'cupyx.scipy.sparse.{type(self).__name__}' object has no attribute {name!r}")
        attr = getattr(self._s, name)
        if not callable(attr):
            return _wrap(attr)
        return lambda *a, **k: _op(name, lambda s, *aa, **kk: getattr(s, name)(*aa, **kk), (self, *a), k)


class _compressed_sparse_matrix(spmatrix):  # noqa: N801
    indices = property(lambda s: _cp.ndarray._from(s._s.indices))
    indptr = property(lambda s: _cp.ndarray._from(s._s.indptr))


class csr_matrix(_compressed_sparse_matrix):  # noqa: N801 - cupyx's names
    format = "csr"


class csc_matrix(_compressed_sparse_matrix):  # noqa: N801
    format = "csc"


class coo_matrix(spmatrix):  # noqa: N801
    format = "coo"
    row = property(lambda s: _cp.ndarray._from(s._s.row))
    col = property(lambda s: _cp.ndarray._from(s._s.col))


_FORMATS = {"csr": csr_matrix, "csc": csc_matrix, "coo": coo_matrix}


def issparse(x):
    return isinstance(x, spmatrix)


isspmatrix = issparse


def isspmatrix_csr(x):
    return isinstance(x, csr_matrix)


def isspmatrix_csc(x):
    return isinstance(x, csc_matrix)


def vstack(blocks, format=None, dtype=None):
    return _op("vstack", lambda *b: _sp.vstack(b, format=format, dtype=dtype), tuple(blocks))


def hstack(blocks, format=None, dtype=None):
    return _op("hstack", lambda *b: _sp.hstack(b, format=format, dtype=dtype), tuple(blocks))


def identity(n, dtype="d", format=None):
    return _dispatch("alloc", "sparse.identity", lambda: _wrap(_sp.identity(n, dtype=dtype, format=format or "csr")))


def eye(m, n=None, k=0, dtype="d", format=None):
    return _dispatch("alloc", "sparse.eye", lambda: _wrap(_sp.eye(m, n, k=k, dtype=dtype, format=format or "csr")))


def diags(diagonals, offsets=0, shape=None, format=None, dtype=None):
    return _op("diags", lambda *d: _sp.diags(list(d), offsets, shape=shape, format=format, dtype=dtype),
               tuple(diagonals) if isinstance(diagonals, (list, tuple)) else (diagonals,))
