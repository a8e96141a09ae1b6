"""cupy.random on NumPy's generators (same API; not CuPy's streams of numbers)."""
import numpy as _np

from . import _call

_global = _np.random.RandomState(0)


def seed(s=None):
    global _global
    _global = _np.random.RandomState(s)


class _Generator:
    def __init__(self, gen):
        self._g = gen

    def __getattr__(self, name):
        fn = getattr(self._g, name)
        if not callable(fn) or name.startswith("_"):
            raise AttributeError(name)
        return lambda *a, **k: _call(f"random.{name}", fn, a, k, kind="random")


def RandomState(seed=None):  # noqa: N802 - CuPy's name
    return _Generator(_np.random.RandomState(seed))


def default_rng(seed=None):
    return _Generator(_np.random.default_rng(seed))


def __getattr__(name):
    return getattr(_Generator(_global), name)
