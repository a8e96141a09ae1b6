"""cupyx of the gpuksvm test stand-in: scipy.sparse and scipy.linalg."""
from . import scipy  # noqa: F401
from ._ufunc_config import errstate, geterr, seterr  # noqa: F401
