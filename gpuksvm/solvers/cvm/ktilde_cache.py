"""The K̃ rows of the Core Vector Machine's core-set QP (:mod:`gpuksvm.solvers.cvm.simplex_qp`).

K̃ is the transformed kernel of the MEB dual (CVM paper eq. 7/10) among the
core vectors.  While the core set is small it is kept whole, in float64 (the
active set factorizes it); beyond ``dense_max`` core vectors it becomes a row
cache: float32 rows (LIBSVM's Qfloat: half the memory, and K̃'s entries need
no more precision than the QP's tolerance) within a byte budget, least
recently used rows evicted.  Appending core vectors computes their K̃ rows
against the whole core set once; by symmetry the transpose extends every
cached row, so a cached row is always complete and no kernel value is computed
twice while its row stays cached.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["KtildeCache", "DENSE_MAX"]

#: Largest core set kept as a dense float64 K̃_S (75 MB), where the QP may use
#: the active set (O(|P|²) per update, ~10⁷ entries at 3,072: a few ms).
#: Measured on the 100K checkerboard, γ = 10, C = 1e4 (1,896 core vectors,
#: an ill-conditioned K̃): 144 s with 1,536 (the row regime's SMO crawls),
#: 14 s with 3,072, 6 s with 4,096.
DENSE_MAX = 3072
_MIN_SLOTS = 512


class KtildeCache:
    """K̃ rows among the core vectors: a dense float64 K̃_S while small, then LRU float32 rows.

    Dense regime (|S| ≤ ``dense_max``): the whole K̃_S in float64 (the active
    set factorizes it).  Row regime beyond: float32 rows (LIBSVM's Qfloat)
    within ``budget`` bytes, least recently used evicted.  When core vectors
    are appended, their K̃ rows against the whole core set are computed once;
    by symmetry their transpose extends every cached row, so a cached row is
    always complete and no kernel value is computed twice while its row
    stays cached.

    Parameters
    ----------
    block : callable ``(pos, c0, c1, dtype) -> (len(pos), c1 − c0)``
        K̃ between core positions ``pos`` and ``c0:c1`` (float64 dense, float32 rows).
    budget : int
        Bytes for the row regime.
    dense_max : int
        Largest core set kept dense.
    min_slots : int
        Rows the row regime holds at least, whatever the budget (an append's new rows).

    Attributes
    ----------
    m : int
        Core-set size.
    dense : bool
    n_computed : int
        K̃ entries computed so far (the QP's kernel evaluations).
    """

    def __init__(self, block: Callable[[np.ndarray, int, int], np.ndarray], budget: int,
                 dense_max: int = DENSE_MAX, min_slots: int = _MIN_SLOTS) -> None:
        self._block = block
        self.budget = int(budget)
        self.dense_max = int(dense_max)
        self.min_slots = int(min_slots)
        self.m = 0
        self.dense = True
        self.n_computed = 0
        self._buf = np.empty((64, 64))
        self._slot = np.full(64, -1, dtype=np.int64)    # position → slot (−1: not cached)
        self._owner = np.full(0, -1, dtype=np.int64)    # slot → position (row regime)
        self._tick = np.zeros(0, dtype=np.int64)
        self._clock = 1

    def _compute(self, pos: np.ndarray, c0: int, c1: int) -> np.ndarray:
        dt = np.float64 if self.dense else np.float32
        K = np.asarray(self._block(pos, c0, c1, dt), dtype=dt).reshape(pos.shape[0], c1 - c0)
        self.n_computed += K.size
        return K

    @property
    def matrix(self) -> np.ndarray:
        """K̃_S (dense regime only)."""
        return self._buf[: self.m, : self.m]

    def _alloc_rows(self, col_cap: int) -> None:
        """A float32 row buffer for ``col_cap`` columns; the rows that fit keep their slot."""
        n_slots = int(min(col_cap, max(self.min_slots, self.budget // (4 * col_cap))))
        m = self.m
        owner = np.full(n_slots, -1, dtype=np.int64)
        tick = np.zeros(n_slots, dtype=np.int64)
        slot = np.full(max(col_cap, self._slot.shape[0]), -1, dtype=np.int64)
        k = min(n_slots, m if self.dense else self._owner.shape[0])
        if self.dense:
            buf = np.empty((n_slots, col_cap), dtype=np.float32)
            for r0 in range(0, k, 1024):                  # plain slices: no gathered temporary
                r1 = min(r0 + 1024, k)
                buf[r0:r1, :m] = self._buf[r0:r1, :m]
        else:
            buf = _regrown_rows(self._buf, k, m, n_slots, col_cap)
        if self.dense:
            owner[:k] = np.arange(k)
        else:
            owner[:k] = self._owner[:k]
            tick[:k] = self._tick[:k]
        mine = np.flatnonzero(owner >= 0)
        slot[owner[mine]] = mine
        self._buf, self._owner, self._tick, self._slot = buf, owner, tick, slot
        self.dense = False

    def _claim(self, k: int, protect: np.ndarray) -> np.ndarray:
        """``k`` row slots: free ones first, then the least recently used outside ``protect``."""
        age = np.where(self._owner < 0, -1, self._tick)
        if protect.shape[0]:
            age[protect] = np.iinfo(np.int64).max
        slots = np.array([int(np.argmin(age))]) if k == 1 else np.argpartition(age, k - 1)[:k]
        old = self._owner[slots]
        self._slot[old[old >= 0]] = -1
        return slots

    def append(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Add ``k`` core vectors; returns their positions and K̃ rows (computed once: they
        also extend every cached row)."""
        m = self.m
        new = np.arange(m, m + k)
        if self.dense and m + k > self.dense_max:
            self._alloc_rows(max(2 * self.dense_max, m + k))
        if self.dense:
            cap = self._buf.shape[0]
            if m + k > cap:
                cap = min(max(2 * cap, m + k), max(self.dense_max, m + k))
                buf = np.empty((cap, cap))
                buf[:m, :m] = self._buf[:m, :m]
                self._buf = buf
        elif m + k > self._buf.shape[1]:
            self._alloc_rows(max(2 * self._buf.shape[1], m + k))
        if m + k > self._slot.shape[0]:
            self._slot = np.concatenate([self._slot, np.full(max(m + k, self._slot.shape[0]), -1,
                                                             dtype=np.int64)])
        self.m = m + k
        B = self._compute(new, 0, m + k)
        if self.dense:
            self._buf[new, : m + k] = B
            self._buf[:m, new] = B[:, :m].T
            self._slot[: m + k] = np.arange(m + k)
            return new, B
        # by symmetry the new rows' columns of the cached rows extend them (free slots get
        # garbage, overwritten when claimed): one strided write, no gathered temporary
        self._buf[:, m:m + k] = B[:, np.maximum(self._owner, 0)].T
        if k <= self._buf.shape[0] - self.min_slots // 2:
            slots = self._claim(k, np.empty(0, np.int64))
            self._buf[slots, : m + k] = B
            self._owner[slots] = new
            self._slot[new] = slots
            self._tick[slots] = self._clock
            self._clock += 1
        else:
            self._slot[new] = -1
        return new, B

    def rows(self, pos: np.ndarray) -> np.ndarray:
        """K̃ rows of the distinct core positions ``pos``: (len(pos), m), float64 or float32."""
        m = self.m
        pos = np.asarray(pos, dtype=np.int64)
        if self.dense:
            return self._buf[pos, :m]
        if pos.shape[0] > self._buf.shape[0] - self.min_slots // 2:
            return self._compute(pos, 0, m)                # more rows than slots: not cached
        slots = self._slot[pos].copy()
        miss = slots < 0
        if miss.any():
            pm = pos[miss]
            new = self._claim(pm.shape[0], slots[~miss])
            self._buf[new, :m] = self._compute(pm, 0, m)
            self._owner[new] = pm
            self._slot[pm] = new
            slots[miss] = new
        self._tick[slots] = self._clock
        self._clock += 1
        return self._buf[slots, :m]

    def compact(self, keep: np.ndarray) -> None:
        """Drop the core positions where ``keep`` is False (positions renumbered in order)."""
        cols = np.flatnonzero(keep)
        m_new = cols.shape[0]
        if self.dense:
            self._buf[:m_new, :m_new] = self._buf[np.ix_(cols, cols)]
            self._slot[:m_new] = np.arange(m_new)
            self._slot[m_new:] = -1
            self.m = m_new
            return
        newpos = np.cumsum(keep) - 1
        owned = np.flatnonzero(self._owner >= 0)
        alive = keep[self._owner[owned]]
        self._owner[owned[~alive]] = -1
        owned = owned[alive]
        m = self.m
        for r0 in range(0, self._buf.shape[0], 256):             # in row blocks: no full copy
            blk = self._buf[r0:r0 + 256, :m]
            blk[:, :m_new] = blk[:, cols]
        self._owner[owned] = newpos[self._owner[owned]]
        self._slot[:] = -1
        self._slot[self._owner[owned]] = owned
        self.m = m_new


def _regrown_rows(buf: np.ndarray, k: int, m: int, n_slots: int, col_cap: int) -> np.ndarray:
    """The row regime's buffer ``buf`` as (``n_slots``, ``col_cap``), its first ``k`` rows' first
    ``m`` values kept, in ``buf``'s own memory: reallocated (for a large buffer the C library
    remaps its pages, no copy) and its rows moved to the new row length in place.

    A second buffer beside the old one held twice the cache at each growth of the core set: the
    fit's peak (20,000 synthetic rows, budget 64 MB: 98 MB growth, bound 94 MB).
    """
    old_cols = buf.shape[1]
    if buf.base is not None or not buf.flags.c_contiguous:        # not its own memory: a copy
        out = np.empty((n_slots, col_cap), dtype=buf.dtype)
        out[:k, :m] = buf[:k, :m]
        return out
    size = n_slots * col_cap
    buf.resize((max(size, buf.size),), refcheck=False)           # flat, in place (realloc)
    if col_cap >= old_cols:        # longer rows: the last row first (a row's target is above its source)
        for r in range(k - 1, 0, -1):
            buf[r * col_cap:r * col_cap + m] = buf[r * old_cols:r * old_cols + m]
    else:
        for r in range(1, k):
            buf[r * col_cap:r * col_cap + m] = buf[r * old_cols:r * old_cols + m]
    buf.resize((n_slots, col_cap), refcheck=False)
    return buf
