"""cupy.cuda.memory: the memory pool's bookkeeping, as real CuPy's ``cupy/cuda/memory.pyx`` keeps it.

Every device array the stand-in creates (``cupy.ndarray._from``) takes a block from the default
pool; a view shares its base's block; the block goes back to the pool (cached: ``free_bytes``)
when the array's buffer is garbage-collected.  As in real CuPy (checked against its
``SingleDeviceMemoryPool``):

* sizes are rounded up to 512 bytes (``_round_size``);
* a request is served by the smallest cached block at least as large (best fit), else by a new
  device allocation; ``total_bytes`` = bytes held from the device (used + cached);
* with a limit (``set_limit(size=)``, ``set_limit(fraction=)``, ``CUPY_GPU_MEMORY_LIMIT``), a
  new allocation that would take ``total_bytes`` past it raises :class:`OutOfMemoryError`
  at once -- the cached blocks are *not* released first (the caller's ``free_all_blocks``
  does that);
* without a limit, a new allocation past the device's memory (``$GPUEMU_FREE_BYTES``, default
  2 GiB: what the device had free when the process started) releases the cached blocks and
  tries again, then raises :class:`OutOfMemoryError`.

A cached block larger than a request is split (the rest stays cached) and freed neighbours are
merged; ``free_all_blocks`` releases only the cached blocks that are whole device allocations.
Simpler than CuPy (one arena: no streams; best fit by a scan, not by size bins) and not kinder:
the same requests never fit where CuPy's would not.
Sparse matrices (``cupyx.scipy.sparse``) are not counted until their arrays are read.

Test-only (not CuPy's API): :func:`gpuemu.pool.peak_used_bytes` and friends read and reset the
peak of ``used_bytes()`` kept in ``MemoryPool._gpuemu_peak``.
"""
from __future__ import annotations

import gc
import os
import weakref

import numpy as np

ALLOCATION_UNIT_SIZE = 512


class OutOfMemoryError(MemoryError):
    """As CuPy's: ``OutOfMemoryError(size, total, limit=0)``, the same message."""

    def __init__(self, size, total, limit=0):
        if limit == 0:
            msg = f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes)."
        else:
            msg = (f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes, "
                   f"limit set to: {limit:,} bytes).")
        super().__init__(msg)


def _round_size(size: int) -> int:
    return (int(size) + ALLOCATION_UNIT_SIZE - 1) // ALLOCATION_UNIT_SIZE * ALLOCATION_UNIT_SIZE


def device_capacity() -> int:
    """Bytes the emulated device can hand out: ``$GPUEMU_FREE_BYTES`` (default 2 GiB)."""
    return int(os.environ.get("GPUEMU_FREE_BYTES", 2 * 2**30))


#: ids of the NumPy buffers holding a block, whichever pool lent it
_OWNED: dict = {}


class _Chunk:
    """A piece of one device allocation: CuPy splits a cached block and merges freed neighbours."""

    __slots__ = ("size", "prev", "next", "free")

    def __init__(self, size, prev=None, nxt=None):
        self.size, self.prev, self.next, self.free = size, prev, nxt, False


class MemoryPool:
    """The default device memory pool (one device)."""

    def __init__(self, allocator=None):
        self._in_use: dict = {}      # id of the owning NumPy buffer -> its chunk
        self._free: list = []        # cached chunks
        self._total = 0
        self._limit = 0
        self._used = 0
        self._gpuemu_peak = 0        # test-only: highest used_bytes() since the last reset
        limit = os.environ.get("CUPY_GPU_MEMORY_LIMIT")
        if limit is not None:
            if limit.endswith("%"):
                self.set_limit(fraction=float(limit[:-1]) / 100.0)
            else:
                self.set_limit(size=int(limit))

    # -- CuPy's API
    def used_bytes(self):
        return self._used

    def free_bytes(self):
        return sum(c.size for c in self._free)

    def total_bytes(self):
        return self._total

    def n_free_blocks(self):
        return len(self._free)

    def free_all_blocks(self, stream=None):
        """Release the cached chunks that are whole device allocations (not split)."""
        whole = [c for c in self._free if c.prev is None and c.next is None]
        self._total -= sum(c.size for c in whole)
        self._free = [c for c in self._free if c.prev is not None or c.next is not None]

    def set_limit(self, size=None, fraction=None):
        if size is None:
            if fraction is None:
                size = 0
            else:
                if not 0 <= fraction <= 1:
                    raise ValueError(f"memory limit fraction out of range: {fraction}")
                from .runtime import memGetInfo
                size = fraction * memGetInfo()[1]
            self.set_limit(size=size)
            return
        if fraction is not None:
            raise ValueError("size and fraction cannot be specified at one time")
        if size < 0:
            raise ValueError(f"memory limit size out of range: {size}")
        self._limit = int(size)

    def get_limit(self):
        return self._limit

    # -- the stand-in's bookkeeping
    def _charge(self, a) -> None:
        """Charge the block of the NumPy buffer behind device array data ``a`` (once per buffer: a
        view shares its base's block) until the buffer is garbage-collected."""
        buf = buffer_of(a)
        key = id(buf)
        if key in _OWNED:                            # a view, or a buffer of another pool's
            return
        size = _round_size(buf.nbytes)
        if size == 0:
            return
        fits = [c for c in self._free if c.size >= size]
        if fits:                                     # best fit among the cached chunks, split
            chunk = min(fits, key=lambda c: c.size)
            self._free.remove(chunk)
            if chunk.size > size:
                rest = _Chunk(chunk.size - size, chunk, chunk.next)
                rest.free = True
                if chunk.next is not None:
                    chunk.next.prev = rest
                chunk.next, chunk.size = rest, size
                self._free.append(rest)
        else:
            self._device_malloc(size)
            chunk = _Chunk(size)
        chunk.free = False
        self._in_use[key] = chunk
        _OWNED[key] = self
        self._used += size
        self._gpuemu_peak = max(self._gpuemu_peak, self._used)
        weakref.finalize(buf, self._give_back, key)

    def _device_malloc(self, size: int) -> None:
        if self._limit and self._total + size > self._limit:
            raise OutOfMemoryError(size, self._total, self._limit)
        for attempt in range(3):                  # as _try_malloc: as is, freed cache, gc + freed cache
            if self._total + size <= device_capacity():
                self._total += size
                return
            if attempt == 1:
                gc.collect()
            self.free_all_blocks()
        raise OutOfMemoryError(size, self._total, self._limit)

    def _give_back(self, key) -> None:
        _OWNED.pop(key, None)
        chunk = self._in_use.pop(key, None)
        if chunk is None:
            return
        self._used -= chunk.size
        for nb in (chunk.next, chunk.prev):        # merge with free neighbours
            if nb is not None and nb.free:
                self._free.remove(nb)
                first, second = (chunk, nb) if nb is chunk.next else (nb, chunk)
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                chunk = first
        chunk.free = True
        self._free.append(chunk)


def buffer_of(a):
    """The NumPy array owning ``a``'s memory (``a`` itself when it owns it)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a
