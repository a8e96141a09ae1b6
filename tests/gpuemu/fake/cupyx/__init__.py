"""cupyx of the gpuksvm test stand-in: scipy.sparse and scipy.linalg."""
import sys as _sys

from cupy import _api

from . import scipy  # noqa: F401
from ._ufunc_config import errstate, geterr, seterr  # noqa: F401
from .scipy import linalg as _linalg
from .scipy import sparse as _sparse

_api.report_calls(_sys.modules[__name__], "cupyx")
_api.report_calls(_linalg, "cupyx.scipy.linalg")
_api.report_calls(_sparse, "cupyx.scipy.sparse")
_api.report_method_calls(_sparse.spmatrix)
for _fmt in ("csr", "csc", "coo"):
    _api.report_constructor_calls(getattr(_sparse, f"{_fmt}_matrix"), f"cupyx.scipy.sparse.{_fmt}_matrix")
