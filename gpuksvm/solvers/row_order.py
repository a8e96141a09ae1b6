"""Row samples and row orders that depend on the rows' contents, not on their positions.

A random sample drawn by position (``rs.choice(n, k)``) is another sample when
the same rows come in another order (a file sorted by label, shuffled, split
into other blocks), so the model changes with the order.  Here every row gets
a seeded hash of its contents, and a sample is the rows with the smallest
hashes (a bottom-k sample: uniform without replacement, since the hashes of
distinct rows behave as independent uniform keys); an order is the rows sorted
by their hashes.  The same rows give the same sample in any order, in memory,
block by block or chunk by chunk.

The hash (:class:`RowHasher`)
-----------------------------
Two 64-bit keys per row, both sums over the row's nonzero entries (so a dense
and a sparse row with the same values get the same keys, and explicit zeros
count as zeros)::

    key1(x) = mix(s₁ ⊕ Σⱼ [xⱼ ≠ 0] ((bits32(xⱼ) ⊕ c₁ⱼ) · a₁ⱼ))     (mod 2⁶⁴)
    key2(x) = mix(s₂ ⊕ Σⱼ [xⱼ ≠ 0] ((bits64(xⱼ) ⊕ c₂ⱼ) · a₂ⱼ))

``bits32`` is the bit pattern of the value rounded to float32 and ``bits64``
of the value in float64 (−0 counts as 0); ``aⱼ`` (odd), ``cⱼ`` and ``s`` are
drawn from ``random_state``; ``mix`` is the SplitMix64 finalizer.  Sums of
unsigned 64-bit integers wrap around, which makes them exact and independent
of the summation order.  key1 is the primary key: it sees float32 values, so a
float32 copy of the rows (the GPU's working dtype) ranks them as the float64
rows do; key2 breaks the ties of key1 (rows equal in float32 only).  Rows
equal in both keys are the same row: which copy is taken changes nothing, and
``targets`` (labels) order them when given.  Cost: about ten vectorized passes
over the stored values, by row blocks (O(block) memory), on the rows' device.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk

__all__ = ["RowHasher", "content_sample", "smallest_keys", "merge_smallest"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: values hashed at a time (a block of rows of about this many entries)
_BLOCK_VALUES = 1 << 22


def _mix(x: Any, xp: Any) -> Any:
    """SplitMix64's finalizer (a bijection of uint64 that spreads every input bit)."""
    x = x ^ (x >> xp.uint64(30))
    x = x * xp.uint64(_M1)
    x = x ^ (x >> xp.uint64(27))
    x = x * xp.uint64(_M2)
    return x ^ (x >> xp.uint64(31))


def _value_bits(values: Any, xp: Any) -> tuple[Any, Any]:
    """(bits of the values rounded to float32, bits of the values in float64) as uint64; 0 for ±0."""
    v64 = values.astype(xp.float64) + 0.0          # −0 + 0 = +0
    v32 = v64.astype(xp.float32) + xp.float32(0.0)
    return v32.view(xp.uint32).astype(xp.uint64), v64.view(xp.uint64)


class RowHasher:
    """The seeded content hash of rows of ``n_features`` columns (module docstring).

    Parameters
    ----------
    n_features : int
    random_state : int, RandomState or None
        The keys are drawn from it (2 + 4·n_features integers).

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.row_order import RowHasher
    >>> X = np.arange(12.0).reshape(6, 2)
    >>> k = RowHasher(2, random_state=0).keys(X)
    >>> bool((RowHasher(2, random_state=0).keys(X[::-1]) == k[::-1]).all())
    True
    """

    def __init__(self, n_features: int, random_state: Any = None) -> None:
        rs = check_random_state(random_state)
        self.n_features = int(n_features)
        self.seeds = rs.randint(0, 2 ** 64, size=2, dtype=np.uint64)
        self.a = rs.randint(0, 2 ** 64, size=(2, self.n_features), dtype=np.uint64) | np.uint64(1)
        self.c = rs.randint(0, 2 ** 64, size=(2, self.n_features), dtype=np.uint64)

    def _column_keys(self, xp: Any) -> tuple[Any, Any, Any]:
        return xp.asarray(self.a), xp.asarray(self.c), xp.asarray(self.seeds)

    def keys(self, X: Any) -> np.ndarray:
        """(n, 2) host uint64 keys of the rows of ``X`` (NumPy, CuPy or SciPy-sparse)."""
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features, the hasher {self.n_features}")
        if bk.is_sparse(X):
            return self._sparse_keys(X)
        xp = bk.namespace_of(X)
        a, c, s = self._column_keys(xp)
        n = X.shape[0]
        out = np.empty((n, 2), dtype=np.uint64)
        d = max(1, self.n_features)
        # about 8 temporaries of 8 bytes per value live at once (the bits, products, masks)
        step = bk.plan_rows(max(1, _BLOCK_VALUES // d), 64 * d, bk.device_of(X))

        def run(r: int, e: int) -> None:
            bits = _value_bits(X[r:e], xp)
            for t in range(2):
                h = (bits[t] ^ c[t][None, :]) * a[t][None, :]
                h = xp.where(bits[t] != 0, h, xp.uint64(0))
                out[r:e, t] = bk.to_host(_mix(h.sum(axis=1, dtype=xp.uint64) ^ s[t], xp))

        with np.errstate(over="ignore"):
            bk.map_row_blocks(run, n, step, what="row keys")
        return out

    def _sparse_keys(self, X: Any) -> np.ndarray:
        X = X.tocsr() if X.format != "csr" else X
        if not X.has_canonical_format:       # duplicates are summed first (on a copy)
            X = X.copy()
            X.sum_duplicates()
        xp = bk.namespace_of(X.data)
        a, c, s = self._column_keys(xp)
        cols = X.indices
        out = np.empty((X.shape[0], 2), dtype=np.uint64)
        with np.errstate(over="ignore"):
            bits = _value_bits(X.data, xp)
            for t in range(2):
                h = (bits[t] ^ c[t][cols]) * a[t][cols]
                h = xp.where(bits[t] != 0, h, xp.uint64(0))
                csum = xp.concatenate([xp.zeros(1, dtype=xp.uint64), xp.cumsum(h, dtype=xp.uint64)])
                rows = csum[X.indptr[1:]] - csum[X.indptr[:-1]]      # wraps mod 2⁶⁴: exact
                out[:, t] = bk.to_host(_mix(rows ^ s[t], xp))
        return out


def _order_of(keys: np.ndarray, targets: np.ndarray | None, positions: np.ndarray | None) -> np.ndarray:
    """Row indices sorted by (key1, key2, targets, positions); ``positions`` None: the order given."""
    by: tuple = () if positions is None else (np.asarray(positions),)
    if targets is not None:
        t = np.asarray(targets).reshape(keys.shape[0], -1)
        # labels by rank among the labels present (their sorted order: any dtype, the same
        # relative order in any subset of the rows)
        by += tuple(np.unique(t[:, j], return_inverse=True)[1].ravel() for j in range(t.shape[1] - 1, -1, -1))
    return np.lexsort(by + (keys[:, 1], keys[:, 0])).astype(np.int64)


def smallest_keys(keys: np.ndarray, size: int | None, targets: np.ndarray | None = None,
                  positions: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``size`` rows of smallest keys (all rows when None), in key order.

    Rows equal in both keys are the same row; ``targets`` (labels) and then
    ``positions`` (their places in the whole data; default: their order here)
    order them, so that a sample merged from parts (:func:`merge_smallest`)
    is the sample of the whole.
    """
    order = _order_of(keys, targets, positions)
    return order if size is None else order[: int(size)]


def merge_smallest(parts: list[tuple], size: int | None) -> tuple:
    """The ``size`` smallest of parts ``(keys, labels, positions)`` (each from
    :func:`smallest_keys` of some rows) as one such part: a bottom-k sample of blocks, chunks
    or a tree of them is the bottom-k sample of all their rows."""
    keys = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    positions = np.concatenate([p[2] for p in parts])
    keep = smallest_keys(keys, size, labels, positions)
    return keys[keep], labels[keep], positions[keep]


def content_sample(X: Any, size: int | None, random_state: Any = None,
                   targets: np.ndarray | None = None) -> np.ndarray:
    """Indices of ``min(size, n)`` rows of ``X`` drawn uniformly by their contents, in key order.

    The same rows in any order give the same rows (module docstring);
    ``size=None`` gives every row, in key order.
    """
    return smallest_keys(RowHasher(X.shape[1], random_state).keys(X), size, targets)
