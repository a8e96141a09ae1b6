"""CuPy's index sorts on NumPy arrays (cupy/_core/_routines_sorting.pyx, core.pyx).

* ``argsort`` is Thrust's stable sort (``kind`` may only be None or 'stable'): equal keys keep
  their order, where NumPy's default quicksort does not promise that.
* ``argpartition`` sorts fully (stably) when the row is short (< 32), when max(kth) ≥ 512, or
  when the rows are too short for CuPy's selection kernel; otherwise that kernel (a bitonic
  selection) leaves the max_k = max(32, 2^bit_length(max kth)) smallest in ascending order at
  the front and the others behind them in no promised order — here in the order of their
  indices, so that code relying on NumPy's introselect layout of the tail fails.
"""
import numpy as np


def argsort(A: np.ndarray, axis=-1, kind=None) -> np.ndarray:
    if kind is not None and kind != "stable":
        raise ValueError("kind can only be None or 'stable'")
    A = np.atleast_1d(A)
    if axis is None:
        return np.argsort(A.ravel(), kind="stable")
    return np.argsort(A, axis=axis, kind="stable")


def argpartition(A: np.ndarray, kth, axis=-1) -> np.ndarray:
    data, ax = (A.ravel(), -1) if axis is None else (A, axis)
    ax = _normalize_axis(ax, data.ndim)
    rows = np.moveaxis(data, ax, -1)
    length = rows.shape[-1]
    if length == 0:
        return np.empty((0,), dtype=np.int64)
    if isinstance(kth, int):
        kth = (kth,)
    max_k = 0
    for k in kth:
        if k < 0:
            k += length
        if not 0 <= k < length:
            raise ValueError(f"kth(={k}) out of bounds {length}")
        max_k = max(max_k, k)
    max_k = max(32, 1 << int(max_k).bit_length())
    t, sz = 4, 512
    while sz > 0 and length // sz < max_k + 32 * t:
        sz //= 2
    sz *= A.size // length
    order = np.argsort(rows, axis=-1, kind="stable")
    if not (length < 32 or sz < 1 or max_k >= 1024):
        # the selection kernel's layout: the max_k smallest sorted, the rest unordered
        tail = np.sort(order[..., max_k:], axis=-1)
        order = np.concatenate([order[..., :max_k], tail], axis=-1)
    return np.moveaxis(order, -1, ax)


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim
