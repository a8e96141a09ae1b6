"""cupy.linalg on LAPACK, failing as CuPy fails.

CuPy's factorizations run cuSOLVER (``potrf``, ``getrf``/``getrs``, ``syevd``; cupy/linalg/
_decomposition.py, _solve.py, _eigenvalue.py) and report failure only in ``devInfo``, which CuPy
reads only under ``cupyx.errstate(linalg="raise")`` (then ``numpy.linalg.LinAlgError``,
cupy/linalg/_util.py); by default it returns what cuSOLVER left.  The stand-in calls the same
LAPACK routines (SciPy's wrappers) and does the same:

* ``cholesky`` — ``tril`` of ``potrf``'s output.  On a positive definite matrix LAPACK's factor.
  On one that is not, cuSOLVER does not stop at the failing pivot as LAPACK does: it takes the
  square root of the pivot and goes on, so the failing column's diagonal entry is 0 (a zero pivot)
  or NaN (a negative one) and the entries after it are ±inf/NaN, while the rows before it hold the
  factor of the leading block.  Seen on an NVIDIA H200 (CUDA runtime 13.2, CuPy 14.2.0):
  ``cholesky([[4, 2, 1], [2, 1, 3], [1, 3, 2]])`` gave ``[[2, 0, 0], [1, 0, 0], [0.5, inf, nan]]``;
  the stand-in continues the column-by-column factorization through the failing pivot in IEEE
  arithmetic (:func:`_continued_cholesky`), which gives exactly that.  ``devInfo`` is LAPACK's
  (the position of the first failing pivot);
* ``solve`` / ``inv`` — ``getrf`` then ``getrs``: on a singular matrix the factorization
  completes with an exact zero on U's diagonal and the triangular solves divide by it (±inf/NaN);
* ``eigh`` / ``eigvalsh`` — ``syevd`` (``heevd`` for complex), whatever it returns.

Not modelled: cuSOLVER's own rounding (batched ``eigh`` is Jacobi, ``syevjBatched``, in CuPy; the
stand-in uses ``syevd`` per matrix), cuBLAS's batched ``getri`` in ``inv`` of a stack.  The other
functions compute with NumPy and raise as NumPy raises.
"""
import numpy as _np
import scipy.linalg as _sla

from gpuemu.dispatch import dispatch as _dispatch

from . import _call, _unwrap, _wrap
from . import ndarray as _ndarray

_NAMES = ("matrix_power cholesky qr svd eigh eig eigvalsh eigvals norm cond det matrix_rank slogdet solve "
          "tensorsolve lstsq inv pinv tensorinv").split()
LinAlgError = _np.linalg.LinAlgError


# ----------------------------------------------------------------------------- CuPy's checks
def _assert_cupy_array(*arrays):
    for a in arrays:
        if not isinstance(a, _ndarray):
            raise LinAlgError("cupy.linalg only supports cupy.ndarray")


def _assert_stacked_square(a):
    if a.ndim < 2:
        raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")


def _common_type(*arrays, reject_float16=True):
    """(compute dtype, result dtype) as cupy.linalg._util.linalg_common_type (integers → float64)."""
    dtypes = [a.dtype for a in arrays]
    if reject_float16 and _np.dtype(_np.float16) in dtypes:
        raise TypeError("float16 is unsupported in linalg")
    inexact = [d if d.kind in "fc" else _np.dtype(_np.float64) for d in dtypes]
    compute = _np.result_type(*inexact)
    if compute == _np.float16:
        compute = _np.dtype(_np.float32)
    return compute, _np.result_type(*inexact)


def _check_info(routine: str, info, library: str = "cuSOLVER"):
    """cupy.linalg._util._check_{cusolver_dev_info,cublas_info_array}_if_synchronization_allowed."""
    import cupyx

    if cupyx._ufunc_config.get_config_linalg() == "ignore":
        return
    info = _np.asarray(info)
    if (info != 0).any():
        what = "devInfo" if library == "cuSOLVER" else "infoArray/devInfoArray"
        raise LinAlgError(f"Error reported by {routine} in {library}. {what} = {info}. "
                          f"Please refer to the {library} documentation.")


def _lapack(name: str, dtype):
    return _sla.get_lapack_funcs((name,), dtype=dtype)[0]


def _matrices(x: _np.ndarray) -> _np.ndarray:
    return x.reshape((-1,) + x.shape[-2:])


def _linalg_op(name: str, run, args):
    return _dispatch("linalg", f"linalg.{name}", run, args, {})


# ----------------------------------------------------------------------------- factorizations
def _square_op(name: str, a, compute):
    """CuPy's frame for one square matrix or a stack: its checks, dtypes and empty case around
    ``compute(array, compute_dtype)``."""
    _assert_cupy_array(a)
    _assert_stacked_square(a)

    def run():
        dt, out_dt = _common_type(a._a)
        if a.size == 0:
            return _wrap(_np.empty(a.shape, out_dt))
        return _wrap(compute(a._a, dt).astype(out_dt, copy=False))
    return _linalg_op(name, run, (a,))


def _continued_cholesky(A: _np.ndarray) -> _np.ndarray:
    """The lower Cholesky factor of ``A`` computed column by column without stopping at a pivot
    that is not positive (its square root is 0 or NaN, and the divisions by it give ±inf/NaN):
    what cuSOLVER's ``potrf`` returned for a matrix that is not positive definite."""
    n = A.shape[0]
    L = _np.zeros_like(A)
    with _np.errstate(all="ignore"):
        for j in range(n):
            L[j, j] = _np.sqrt(A[j, j] - L[j, :j] @ L[j, :j])
            L[j + 1:, j] = (A[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


def _potrf(A: _np.ndarray, dt) -> _np.ndarray:
    potrf = _lapack("potrf", dt)
    L = _matrices(A.astype(dt, copy=True))
    info = _np.empty(L.shape[0], _np.int32)
    for i in range(L.shape[0]):
        c, info[i] = potrf(L[i], lower=1, clean=0)
        L[i] = _np.tril(c) if info[i] == 0 else _continued_cholesky(L[i])
    _check_info(potrf.typecode + ("potrfBatched" if A.ndim > 2 else "potrf"), info)
    return L.reshape(A.shape)


def cholesky(a):
    return _square_op("cholesky", a, _potrf)


def _lu_solve(A: _np.ndarray, B: _np.ndarray, dt, batched: bool) -> _np.ndarray:
    """X with A X = B for each matrix of A by ``getrf`` + ``getrs``, devInfo unread unless 'raise'."""
    getrf, getrs = _lapack("getrf", dt), _lapack("getrs", dt)
    As = _matrices(A)
    Bs = B.reshape((As.shape[0],) + B.shape[A.ndim - 2:])
    X = _np.empty(Bs.shape, dt)
    info = _np.empty(As.shape[0], _np.int32)
    for i in range(As.shape[0]):
        lu, piv, info[i] = getrf(As[i].astype(dt))
        X[i], _ = getrs(lu, piv, Bs[i].astype(dt))
    _check_info(getrf.typecode + ("getrfBatched" if batched else "getrf"), info,
                "cuBLAS" if batched else "cuSOLVER")
    return X.reshape(B.shape)


def solve(a, b):
    _assert_cupy_array(a, b)
    _assert_stacked_square(a)
    A, B = a._a, b._a
    if B.ndim == 0:
        raise ValueError("b must have at least one dimension")
    if B.ndim == 1:
        if A.shape[-1] != B.size:
            raise ValueError("a must have (..., M, M) shape and b must have (M,) for one-dimensional b")
        B = _np.broadcast_to(B, A.shape[:-1])
    elif A.shape[:-1] != B.shape[:-1]:
        raise ValueError("a must have (..., M, M) shape and b must have (..., M, K) for multidimensional b")

    def run():
        dt, out_dt = _common_type(A, B)
        if A.size == 0:
            return _wrap(_np.empty(B.shape, out_dt))
        return _wrap(_lu_solve(A, B, dt, A.ndim > 2).astype(out_dt, copy=False))
    return _linalg_op("solve", run, (a, b))


def inv(a):
    return _square_op("inv", a, lambda A, dt: _lu_solve(A, _np.broadcast_to(_np.eye(A.shape[-1], dtype=dt), A.shape),
                                                         dt, A.ndim > 2))


def _syevd(a, UPLO: str, vectors: bool):
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    A = _unwrap(a, "cupy.linalg.eigh")
    _assert_stacked_square(A)
    dt, v_dt = _common_type(A, reject_float16=False)
    w_dt = _np.dtype(v_dt.char.lower())
    if a.size == 0:
        return _np.empty(a.shape[:-1], w_dt), _np.empty(a.shape, v_dt)
    evd = _lapack("heevd" if dt.kind == "c" else "syevd", dt)
    M = _matrices(A.astype(dt, copy=True))
    W = _np.empty(M.shape[:2], dt.char.lower())
    info = _np.empty(M.shape[0], _np.int32)
    for i in range(M.shape[0]):
        W[i], v, info[i] = evd(M[i], compute_v=int(vectors), lower=int(UPLO == "L"))
        if vectors:
            M[i] = v
    _check_info(evd.typecode + ("syevjBatched" if a.ndim > 2 else "syevd"), info)
    return W.reshape(a.shape[:-1]).astype(w_dt, copy=False), M.reshape(a.shape).astype(v_dt, copy=False)


def eigh(a, UPLO="L"):
    return _linalg_op("eigh", lambda: _wrap(_syevd(a, UPLO, True)), (a,))


def eigvalsh(a, UPLO="L"):
    return _linalg_op("eigvalsh", lambda: _wrap(_syevd(a, UPLO, False)[0]), (a,))


def __getattr__(name):
    if name not in _NAMES:
        raise AttributeError(f"module 'cupy.linalg' has no attribute {name!r}")
    fn = getattr(_np.linalg, name)

    def f(*args, **kwargs):
        return _call(f"linalg.{name}", fn, args, kwargs, kind="linalg")
    f.__name__ = name
    return f
