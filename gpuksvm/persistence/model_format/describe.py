"""One-line descriptions of decoded model-file values (``gpuksvm info``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.persistence.model_format.registry import entry_for
from gpuksvm.persistence.model_format.specs import is_array, is_sparse

__all__ = ["describe_value"]


def describe_value(v: Any) -> str:
    """A one-line description of a decoded value (for ``gpuksvm info``)."""
    if is_array(v):
        return f"array {tuple(v.shape)} {np.dtype(v.dtype).name}"
    if is_sparse(v):
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
