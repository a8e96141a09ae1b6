"""Test-only readings of the stand-in CuPy's memory pool: its peak (real CuPy's pool has none).

The pool itself (``cupy.get_default_memory_pool()``: ``used_bytes``, ``total_bytes``,
``set_limit``, ...) is CuPy's API, modelled in ``fake/cupy/cuda/memory.py``; what is here reads
the bookkeeping only the stand-in keeps.  Use inside :func:`gpuemu.emulated_gpu`.
"""
from __future__ import annotations

import contextlib
import gc
import sys
from dataclasses import dataclass
from typing import Iterator


def default_pool():
    """The stand-in's default memory pool (the installed fake ``cupy``'s)."""
    cupy = sys.modules["cupy"]
    if not getattr(cupy, "GPUEMU", False):
        raise RuntimeError("gpuemu.pool reads the stand-in CuPy's pool: use it inside gpuemu.emulated_gpu()")
    return cupy.get_default_memory_pool()


def peak_used_bytes() -> int:
    """The highest ``used_bytes()`` since the last :func:`reset_peak`."""
    return default_pool()._gpuemu_peak


def reset_peak() -> int:
    """Start a new peak at the bytes in use now (returned)."""
    pool = default_pool()
    pool._gpuemu_peak = pool.used_bytes()
    return pool._gpuemu_peak


@dataclass
class PeakGrowth:
    """Bytes in use at the start (after a collection) and the peak since, of the default pool."""

    start: int = 0
    peak: int = 0

    @property
    def growth(self) -> int:
        return self.peak - self.start


@contextlib.contextmanager
def measure_peak() -> Iterator[PeakGrowth]:
    """``with measure_peak() as m: ...``: ``m.growth`` is the pool's peak growth over the block."""
    gc.collect()
    m = PeakGrowth(start=reset_peak())
    try:
        yield m
    finally:
        m.peak = peak_used_bytes()


@contextlib.contextmanager
def fresh_pool() -> Iterator[object]:
    """A new, empty default pool for the block (the blocks and cache of earlier tests out of the
    way: what is measured and limited no longer depends on what ran before); arrays made
    before it give their blocks back to the pool they came from."""
    cupy = sys.modules["cupy"]
    default_pool()
    saved = cupy._pool
    gc.collect()
    cupy._pool = type(saved)()
    try:
        yield cupy._pool
    finally:
        cupy._pool = saved
