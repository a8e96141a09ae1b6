"""cupyx of the gpuksvm test stand-in: scipy.sparse and scipy.linalg."""
import contextlib as _contextlib
import sys as _sys

import cupy as _cupy

from . import scipy  # noqa: F401
from .scipy import linalg as _linalg
from .scipy import sparse as _sparse


def errstate(**kwargs):
    return _contextlib.nullcontext()


_cupy._report_calls(_sys.modules[__name__], "cupyx")
_cupy._report_calls(_linalg, "cupyx.scipy.linalg")
_cupy._report_calls(_sparse, "cupyx.scipy.sparse")
_cupy._report_method_calls(_sparse.spmatrix)
for _fmt in ("csr", "csc", "coo"):
    _cupy._report_constructor_calls(getattr(_sparse, f"{_fmt}_matrix"), f"cupyx.scipy.sparse.{_fmt}_matrix")
