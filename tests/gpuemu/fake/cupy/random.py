"""cupy.random on NumPy's generators (CuPy's names only; not CuPy's streams of numbers)."""
import numpy as _np

from . import _call
from ._api import API as _API

_global = _np.random.RandomState(0)


def seed(s=None):
    global _global
    _global = _np.random.RandomState(s)


class _Generator:
    def __init__(self, gen):
        self._g = gen

    def __getattr__(self, name):
        kind = "Generator" if isinstance(self._g, _np.random.Generator) else "RandomState"
        fn = getattr(self._g, name, None)
        if not callable(fn) or name.startswith("_") or name not in _API[f"cupy.random.{kind}"]:
            raise AttributeError(f"'cupy.random.{kind}' object has no attribute {name!r}")
        return lambda *a, **k: _call(f"random.{name}", fn, a, k, kind="random")


def RandomState(seed=None):  # noqa: N802 - CuPy's name
    return _Generator(_np.random.RandomState(seed))


def default_rng(seed=None):
    return _Generator(_np.random.default_rng(seed))


def __getattr__(name):
    if name not in _API["cupy.random"]:
        raise AttributeError(f"module 'cupy.random' has no attribute {name!r}")
    return getattr(_Generator(_global), name)
