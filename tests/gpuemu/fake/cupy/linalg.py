"""cupy.linalg on NumPy.  As in CuPy (linalg error state 'ignore' by default), factorizing a
matrix that is not positive definite / is singular gives NaN instead of raising."""
import numpy as _np

from gpuemu.dispatch import dispatch as _dispatch

from . import _call, _unwrap, _wrap

_NAMES = ("matrix_power cholesky qr svd eigh eig eigvalsh eigvals norm cond det matrix_rank slogdet solve "
          "tensorsolve lstsq inv pinv tensorinv").split()
LinAlgError = _np.linalg.LinAlgError


def _nan_on_error(name, fn, shape_of):
    def f(*args, **kwargs):
        a = [_unwrap(x, f"cupy.linalg.{name}") for x in args]

        def run():
            try:
                return _wrap(fn(*a, **kwargs))
            except _np.linalg.LinAlgError:
                return _wrap(_np.full(shape_of(*a), _np.nan, dtype=_np.result_type(*a)))
        return _dispatch("linalg", f"linalg.{name}", run, args, kwargs)
    f.__name__ = name
    return f


cholesky = _nan_on_error("cholesky", _np.linalg.cholesky, lambda A: A.shape)
inv = _nan_on_error("inv", _np.linalg.inv, lambda A: A.shape)
solve = _nan_on_error("solve", _np.linalg.solve, lambda A, B: B.shape)


def __getattr__(name):
    if name not in _NAMES:
        raise AttributeError(f"module 'cupy.linalg' has no attribute {name!r}")
    fn = getattr(_np.linalg, name)

    def f(*args, **kwargs):
        return _call(f"linalg.{name}", fn, args, kwargs, kind="linalg")
    f.__name__ = name
    return f
