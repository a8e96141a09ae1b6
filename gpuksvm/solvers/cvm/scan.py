"""The CVM's furthest-point search (SPEC §2, eq. 12–13), on the host and on the GPU.

* the furthest-point search: for candidate rows ℓ,

      s_ℓ = y_ℓ (r_ℓ Σ_{i∈S} αᵢyᵢrᵢ κ(xᵢ, x_ℓ) + b) + [ℓ∈S] α_ℓ/C  = (K̃α)_ℓ,
      ‖c − φ̃(z_ℓ)‖² = κ̃ + αᵀK̃_Sα − 2 s_ℓ                       (eq. 12)

  so the furthest point is arg-min s (eq. 13; r = 1/√κ(x,x) for normalized
  kernels, 1 otherwise; one-class: y ≡ 1, b = 0).  :class:`HostScanner` is the
  NumPy path (row blocks through :func:`gpuksvm.kernels.kernel.kernel_block`, never an
  n×|S| matrix beyond one block) and the oracle of :class:`GpuScanner`, which
  runs the fused CUDA kernels of ``kernels_cuda/cvm.cu`` (every candidate's s, or
  per-group minima and the arg-min, in two launches: the kernel sums over slices of
  the core set, then their reduction).  The scanners also hold the
  core rows and give the core-set QP its K̃ rows (:meth:`ScannerBase.core_block`).

The core-set loop that uses it is :func:`gpuksvm.solvers.cvm.meb.fit_core_set`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpuksvm.array import cuda_sources as _cuda
from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_diag

__all__ = ["HostScanner", "GpuScanner", "make_scanner", "candidate_scores", "kernel_scale", "block_top",
           "candidate_blocks", "core_split", "scan_block_rows",
           "merge_top", "top_order", "top_positions", "ScannerBase"]

#: The most candidate rows of one block of the NumPy scan, whatever the budget allows.
SCAN_MAX_ROWS = 1 << 16


def scan_block_rows(n_rows: int, n_core: int, d: int, dtype: Any, device: Any) -> int:
    """Candidate rows per block of the blocked furthest-point scan, within the memory budget.

    One rule for every scan that is not the fused CUDA kernel (:class:`HostScanner`, the Dask
    chunks of :mod:`gpuksvm.scaleout.cvm`): a candidate row costs ``n_core + d + 4`` values
    of ``dtype`` (its kernel row against the core set, its converted features, and its score,
    label, scale and mask), at most :data:`SCAN_MAX_ROWS` rows a block.

    Parameters
    ----------
    n_rows : int
        Candidate rows in all.
    n_core : int
        Core vectors (the kernel block's columns).
    d : int
        Features.
    dtype : dtype
        The scan's working dtype.
    device : str or Device
        Whose memory budget (:func:`gpuksvm.array.backend.memory_budget`) the blocks take.

    Returns
    -------
    int
        Rows per block (0 for no rows).

    Raises
    ------
    MemoryBudgetError
        When the budget is smaller than one candidate row.
    """
    return bk.plan_rows(n_rows, (int(n_core) + int(d) + 4) * np.dtype(dtype).itemsize, device,
                        max_rows=SCAN_MAX_ROWS, what="the CVM furthest-point scan")


def kernel_scale(X: Any, kernel: Kernel, normalize: bool):
    """r = 1/√κ(x, x) per row for a normalized kernel (None when not needed)."""
    if not normalize or kernel.constant_diag is not None:
        return None
    xp = bk.namespace_of(X)
    dg = kernel_diag(X, kernel)
    if bool((dg <= 0).any()):
        raise ValueError("normalize=True needs κ(x, x) > 0 for every row "
                         f"(kernel={kernel.name!r} gives κ(x, x) <= 0 for some rows, e.g. zero rows)")
    return 1.0 / xp.sqrt(dg)


def candidate_scores(Xc: Any, Z: Any, coef: Any, kernel: Kernel, *, b: float = 0.0,
                     y: Any = None, self_term: Any = None, xscale: Any = None):
    """s for a block of candidate rows ``Xc`` (NumPy or CuPy): the twin of ``cvm.cu``.

    s = y (r · K(Xc, Z) coef + b) + self_term; every optional term may be None.
    """
    Kb = kernel_block(Xc, Z, kernel)
    s = Kb @ coef
    if xscale is not None:
        s *= xscale
    s += b
    if y is not None:
        s *= y
    if self_term is not None:
        s += self_term
    return s


def block_top(s: Any, rows: Any, q: float, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The ``k`` smallest scores ``s`` of the rows ``rows`` (host arrays) and Σ max(0, q − s)².

    ``rows`` are the tie keys (ties at the k-th score go to the smaller one)
    and what is returned for the chosen scores.  Rows that must not count
    (core vectors) carry s = +inf.  One block of the exact scan;
    :func:`merge_top` combines the blocks.
    """
    xp = bk.namespace_of(s)
    v = xp.maximum(q - s, 0.0)
    part = top_positions(s, rows, k)
    return (np.asarray(bk.to_host(s[part]), dtype=np.float64), np.asarray(bk.to_host(rows[part]), dtype=np.int64),
            float(v @ v))


def top_positions(s: Any, keys: Any, k: int) -> Any:
    """Positions of the ``min(k, len(s))`` smallest ``s`` (unordered), ties at the k-th value to the smaller key."""
    kk = min(int(k), s.shape[0])
    return _k_smallest(s, keys, kk) if kk < s.shape[0] else bk.namespace_of(s).arange(s.shape[0])


def _k_smallest(s: Any, rows: Any, k: int) -> Any:
    """Positions of the ``k`` smallest ``s``, ties at the k-th value to the smaller row.

    ``argpartition`` alone breaks such ties arbitrarily, and differently in NumPy
    (introselect) and CuPy (a sort or a bitonic selection): with many equal scores
    (an RBF kernel whose values all underflow) CPU and GPU then chose different rows.
    """
    xp = bk.namespace_of(s)
    part = xp.argpartition(s, k - 1)[:k]
    t = s[part[k - 1]]                       # the k-th smallest value
    below = xp.nonzero(s < t)[0]
    tied = xp.nonzero(s == t)[0]
    tied = tied[xp.argsort(rows[tied], kind="stable")[:k - below.shape[0]]]
    return xp.concatenate([below, tied])


def top_order(s: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` smallest finite ``s`` (host arrays), ascending, ties to the smaller key."""
    order = np.lexsort((keys, s))[: int(k)]
    return order[np.isfinite(s[order])]


def merge_top(s_parts: list, i_parts: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest finite scores over blocks, ascending (ties to the smaller key), and their keys."""
    s_all, i_all = np.concatenate(s_parts), np.concatenate(i_parts)
    order = top_order(s_all, i_all, k)
    return i_all[order], s_all[order]


class ScannerBase:
    """State shared by the host and GPU scanners: data, labels, core rows, self terms."""

    def __init__(self, X: Any, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float,
                 dtype: np.dtype, capacity: int = 64, *, xp: Any = np) -> None:
        self.xp = xp
        self.X = X
        self.kernel = kernel
        self.C = float(C)
        self.dtype = np.dtype(dtype)
        self.n, self.d = X.shape
        xp = self.xp
        self.y = None if y is None else xp.asarray(y, dtype=self.dtype)
        self.y_host = None if y is None else np.asarray(y, dtype=np.float64)
        self.xscale = xscale
        self.xscale_host = None if xscale is None else np.asarray(bk.to_host(xscale), dtype=np.float64)
        self.self_term = xp.zeros(self.n, dtype=self.dtype)
        self.in_core = np.zeros(self.n, dtype=bool)        # host mask of the core rows
        self.in_core_dev = self.in_core if xp is np else xp.zeros(self.n, dtype=bool)
        cap = max(capacity, 2)
        self._core = np.empty(cap, dtype=np.int64)
        self._m = 0
        self._zw = self.d                                   # values per core row (GpuScanner: padded, zero beyond d)
        self._Z = xp.zeros((cap, self._zw), dtype=self.dtype)
        self._zn = xp.empty(cap, dtype=self.dtype)         # ‖z‖² of the core rows (RBF)
        self._Z32 = None                                    # float32 copy for the QP's row regime

    @property
    def m(self) -> int:
        return self._m

    @property
    def core_idx(self) -> np.ndarray:
        """Training-row indices of the core vectors, by core position."""
        return self._core[: self._m]

    @property
    def Z(self):
        return self._Z[: self._m, : self.d]

    def rows(self, idx: Any):
        """Dense rows of X (on the scanner's device)."""
        R = self.X[idx]
        if bk.is_sparse(R):
            R = R.toarray()
        return self.xp.asarray(R, dtype=self.dtype).reshape(-1, self.d)

    def _host_kernel(self, rows_of: Any, n: int, B: Any, dtype: Any, *, kernel_dtype: Any = None,
                     z_sq_norms: Any = None) -> np.ndarray:
        """K(A, B) as a host array of ``dtype``, A's rows ``rows_of(s, e)`` (``n`` in all).

        On a GPU in row blocks of the memory budget (per row: the block row, its conversion and
        A's row), each copied to the host; a block that runs out of device memory is retried
        smaller (:func:`~gpuksvm.array.backend.map_row_blocks`, a ``MemoryFallbackWarning``).
        """
        if self.xp is np:
            return np.asarray(kernel_block(rows_of(0, n), B, self.kernel, dtype=kernel_dtype,
                                           z_sq_norms=z_sq_norms), dtype=dtype)
        K = np.empty((n, B.shape[0]), dtype=dtype)
        step = bk.plan_rows(n, (2 * B.shape[0] + B.shape[1]) * 8, bk.device_of(B))

        def run(s: int, e: int) -> None:
            K[s:e] = bk.to_host(kernel_block(rows_of(s, e), B, self.kernel, dtype=kernel_dtype,
                                             z_sq_norms=z_sq_norms))

        bk.map_row_blocks(run, n, step, what="CVM kernel rows")
        return K

    def kernel_between(self, idx_a: np.ndarray, idx_b: np.ndarray) -> np.ndarray:
        """Normalized kernel block κₙ(X[a], X[b]) as a host float64 array."""
        K = self._host_kernel(lambda s, e: self.rows(idx_a[s:e]), len(idx_a), self.rows(idx_b), np.float64)
        if self.xscale_host is not None:
            K *= self.xscale_host[idx_a][:, None] * self.xscale_host[idx_b][None, :]
        return K

    def _grow(self, cap: int) -> None:
        """Room for ``cap`` core vectors (the first ``m`` kept)."""
        m, xp = self._m, self.xp
        Z = xp.zeros((cap, self._zw), dtype=self.dtype)
        Z[:m] = self._Z[:m]
        zn = xp.empty(cap, dtype=self.dtype)
        zn[:m] = self._zn[:m]
        Z32 = None
        if self._Z32 is not None:
            Z32 = xp.zeros((cap, self._zw), dtype=np.float32)
            Z32[:m] = self._Z32[:m]
        core = np.empty(cap, dtype=np.int64)
        core[:m] = self._core[:m]
        self._core, self._Z, self._zn = core, Z, zn
        if Z32 is not None:
            self._Z32 = Z32

    def append(self, idx: np.ndarray) -> None:
        """Add the rows ``idx`` (distinct, not core vectors yet) to the core set."""
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        m, k = self._m, idx.shape[0]
        xp = self.xp
        R = self.rows(idx)
        if m + k > self._Z.shape[0]:
            # the spare capacity (doubling) is cut to what is needed when the device is out of memory
            bk.smaller_on_out_of_memory(self._grow, max(2 * self._Z.shape[0], m + k), m + k,
                                        what="CVM core-set rows", size_text="room for {size} core vectors")
        self._Z[m:m + k, :self.d] = R
        self._zn[m:m + k] = (R * R).sum(axis=1)
        if self._Z32 is not None:
            self._Z32[m:m + k, :self.d] = R
        self._core[m:m + k] = idx
        self._m = m + k
        self.in_core[idx] = True
        if self.in_core_dev is not self.in_core:
            self.in_core_dev[xp.asarray(idx)] = True

    def remove(self, keep: np.ndarray) -> None:
        """Keep only the core vectors at the positions where ``keep`` is True (the others have α = 0)."""
        core = self.core_idx
        gone = core[~keep]
        xp = self.xp
        self.in_core[gone] = False
        if self.in_core_dev is not self.in_core:
            self.in_core_dev[xp.asarray(gone)] = False
        self.self_term[xp.asarray(gone)] = 0
        kept = np.flatnonzero(keep)
        k = kept.shape[0]
        kd = xp.asarray(kept)
        self._Z[:k] = self._Z[kd]
        self._zn[:k] = self._zn[kd]
        if self._Z32 is not None:
            self._Z32[:k] = self._Z32[kd]
        self._core[:k] = core[kept]
        self._m = k

    def core_block(self, pos: np.ndarray, c0: int, c1: int, dtype: Any = np.float64) -> np.ndarray:
        """K̃ between the core vectors at positions ``pos`` and ``c0:c1`` (eq. 7 / eq. 10), on the host.

        k̃ = yᵢyⱼ(κₙ + 1) + δᵢⱼ/C (two-class) or κₙ + δᵢⱼ/C (one-class); the
        diagonal is set to κ̃ exactly.  These are the rows of the core-set QP;
        ``dtype=float32`` computes them from a float32 copy of the core rows
        (the QP's row regime stores float32 rows: half the memory traffic).
        """
        xp = self.xp
        if np.dtype(dtype) == np.float32 and self.dtype != np.float32:
            if self._Z32 is None:
                self._Z32 = self._Z.astype(np.float32)
            Z = self._Z32
        else:
            Z = self._Z
        zn = self._zn[c0:c1] if self.kernel.name == "rbf" else None
        K = self._host_kernel(lambda s, e: Z[xp.asarray(pos[s:e])], pos.shape[0], Z[c0:c1],
                              dtype, kernel_dtype=dtype, z_sq_norms=zn)
        core = self.core_idx
        if self.xscale_host is not None:
            K *= (self.xscale_host[core[pos]][:, None] * self.xscale_host[core[c0:c1]][None, :]).astype(K.dtype)
        kt = 1.0 + 1.0 / self.C
        if self.y_host is not None:
            yc = self.y_host[core]
            K += 1.0
            K *= (yc[pos][:, None] * yc[c0:c1][None, :]).astype(K.dtype)
            kt += 1.0
        r = np.flatnonzero((pos >= c0) & (pos < c1))
        K[r, pos[r] - c0] = kt
        return K

    def _scores(self, idx: np.ndarray | None, s0: int, s1: int, coef, b: float):
        """s of the rows ``s0:s1`` (of all rows, or of ``idx``) on the scanner's device."""
        sel = slice(s0, s1) if idx is None else idx[s0:s1]
        return candidate_scores(self.rows(sel), self.Z, coef, self.kernel, b=b,
                                y=None if self.y is None else self.y[sel],
                                self_term=self.self_term[sel],
                                xscale=None if self.xscale is None else self.xscale[sel])

    def scores(self, idx: np.ndarray, coef, b: float) -> np.ndarray:
        """s of the rows ``idx`` as a host float64 array (the sampled search)."""
        return np.asarray(bk.to_host(self._scores(idx, 0, idx.shape[0], coef, b)), dtype=np.float64)

    def exact_scan(self, idx: np.ndarray | None, coef, b: float, q: float,
                   k: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Every row outside the core set (or of ``idx``): the ``k`` smallest s and their rows
        (ascending; ties to the earlier row of ``idx``, to the smaller row without ``idx``), and
        Σ max(0, q − s)², in row blocks (in the order of ``idx``)."""
        xp = self.xp
        n = self.n if idx is None else idx.shape[0]
        step = scan_block_rows(n, self.m, self.d, self.dtype, bk.device_of(self.self_term))
        top_s, top_p = [], []
        vsum = 0.0
        for s0 in range(0, n, step):
            s1 = min(s0 + step, n)
            pos = xp.arange(s0, s1)
            rows = pos if idx is None else xp.asarray(idx[s0:s1])
            s = xp.where(self.in_core_dev[rows], xp.inf, self._scores(idx, s0, s1, coef, b))
            ts, tp, vs = block_top(s, pos, q, k)
            top_s.append(ts)
            top_p.append(tp)
            vsum += vs
        p_top, s_top = merge_top(top_s, top_p, k)
        return (p_top if idx is None else np.asarray(idx, dtype=np.int64)[p_top]), s_top, vsum

    def set_alpha(self, alpha: np.ndarray) -> tuple[Any, float]:
        """Update the self terms α_ℓ/C of core rows; return (coef on device, b)."""
        alpha = np.asarray(alpha, dtype=np.float64)
        idx = self.core_idx
        xp = self.xp
        self.self_term[xp.asarray(idx)] = xp.asarray(alpha / self.C, dtype=self.dtype)
        coef = alpha.copy()
        b = 0.0
        if self.y_host is not None:
            coef *= self.y_host[idx]
            b = float(coef.sum())                 # b = Σ αᵢyᵢ  (eq. 11)
        if self.xscale_host is not None:
            coef *= self.xscale_host[idx]
        return xp.asarray(coef, dtype=self.dtype), b


class HostScanner(ScannerBase):
    """Blocked furthest-point search in NumPy (CPU path; oracle of :class:`GpuScanner`),
    or in CuPy with ``xp=cupy`` (GPU input the fused kernel does not take)."""

    def group_min(self, groups: np.ndarray, coef, b: float) -> tuple[np.ndarray, np.ndarray]:
        """Per-row-of-``groups`` minimum of s and its row index (sampled search)."""
        flat = groups.ravel()
        s = np.asarray(bk.to_host(self._scores(flat, 0, flat.shape[0], coef, b)), dtype=np.float64)
        s = s.reshape(groups.shape)
        best = s.min(axis=1)
        # ties go to the smallest row index, as in the CUDA kernel
        arg = np.where(s == best[:, None], groups, np.iinfo(np.int64).max).min(axis=1)
        return best, arg.astype(np.int64)

    def exact_min(self, idx: np.ndarray | None, coef, b: float) -> tuple[float, int]:
        """Minimum of s over all rows (or the rows ``idx``) and its row index, in row blocks."""
        n = self.n if idx is None else idx.shape[0]
        rows = scan_block_rows(n, self.m, self.d, self.dtype, bk.device_of(self.self_term))
        best, besti = np.inf, -1
        for s0 in range(0, n, rows):
            s1 = min(s0 + rows, n)
            s = self._scores(idx, s0, s1, coef, b)
            k = int(self.xp.argmin(s))
            sk = float(s[k])
            if sk < best:
                best, besti = sk, (s0 + k if idx is None else int(idx[s0 + k]))
        return best, besti


#: Blocks the first pass of the GPU search aims at: two per SM of a 132-SM H100 (the kernel's
#: __launch_bounds__(256, 2)); fewer candidate blocks than this split the core set.
SPLIT_TARGET_BLOCKS = 264
#: Core rows per tile of kernels_cuda/cvm.cu (CVM_ZROWS): a slice of the core set is whole tiles.
CVM_ZROWS = 16


def candidate_blocks(n_cand: int, block: int = 256) -> tuple[int, int]:
    """(blocks, candidates per block) of the first pass: the fewest blocks of ``block`` threads,
    the candidates spread evenly over them in whole warps (413 candidates: 2 blocks of 224, 7 busy
    warps each, where blocks of 256 left 3 of the second block's 8 warps without a candidate)."""
    blocks = max(1, -(-int(n_cand) // block))
    per = -(-int(n_cand) // blocks)
    return blocks, min(block, 32 * max(1, -(-per // 32)))


def core_split(candidate_blocks: int, m: int) -> tuple[int, int]:
    """(slices, core rows per slice) of the core set for ``candidate_blocks`` blocks of candidates:
    enough slices of whole tiles that the grid reaches :data:`SPLIT_TARGET_BLOCKS` blocks (the
    sampled search's few hundred candidates are two blocks: unsplit, 2 of 132 SMs work)."""
    tiles = max(1, -(-int(m) // CVM_ZROWS))
    want = max(1, -(-SPLIT_TARGET_BLOCKS // max(int(candidate_blocks), 1)))
    per = max(1, tiles // want)   # at least `want` slices where there are tiles enough
    return -(-tiles // per), per * CVM_ZROWS


def _row_stride(d: int, dtype: Any) -> int:
    """Values per row of the GPU scanner's copy of X: ``d`` rounded up to a whole number of 16-byte
    vectors (4 floats, 2 doubles)."""
    v = 16 // np.dtype(dtype).itemsize
    return -(-int(d) // v) * v


class GpuScanner(ScannerBase):
    """Furthest-point search with the fused CUDA kernels of ``kernels_cuda/cvm.cu``: ``cvm_partial``
    (the kernel sums over slices of the core set, :func:`core_split`), then ``cvm_furthest`` or
    ``cvm_scores`` (s, the group minima)."""

    _BLOCK = 256
    _MAX_D = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, xp=bk.get_namespace("cuda"), **kwargs)
        xp = self.xp
        # every array argument of cvm_partial in the scanner's dtype, C-contiguous (const T*); the
        # rows of X and of the core rows padded with zeros to `ld` values, a whole number of
        # 16-byte vectors (the kernel stages rows as float4 / double2)
        self.ld = _row_stride(self.d, self.dtype)
        self._zw = self.ld
        self._Z = xp.zeros((self._Z.shape[0], self.ld), dtype=self.dtype)   # no core rows yet
        if self.ld == self.d:
            self.Xc = xp.ascontiguousarray(self.X, dtype=self.dtype)
        else:
            self.Xc = xp.zeros((self.n, self.ld), dtype=self.dtype)
            self.Xc[:, :self.d] = xp.asarray(self.X, dtype=self.dtype)
        # ||x||^2 per row (the kernel adds the norms to the dot products: RBF), in row blocks of
        # the memory budget (a block's squares are the temporary)
        self._xn = xp.empty(self.n, dtype=self.dtype)
        step = bk.plan_rows(self.n, 2 * self.ld * self.dtype.itemsize, bk.device_of(self.Xc))
        for s0 in range(0, self.n, step):
            R = self.Xc[s0:s0 + step]
            self._xn[s0:s0 + R.shape[0]] = (R * R).sum(axis=1)
        self._xscale_dev = None if self.xscale is None else xp.ascontiguousarray(self.xscale, dtype=self.dtype)
        suffix = "f32" if self.dtype == np.float32 else "f64"
        self._kernel_names = {False: f"cvm_furthest_{suffix}", True: f"cvm_scores_{suffix}",
                              "partial": f"cvm_partial_{suffix}"}
        for name in self._kernel_names.values():
            _cuda.get_function("cvm", name)            # compile now: a failure names the source
        self._idx_key = None                           # (host idx, its device copy) of the exact scans
        self._counter = xp.zeros(1, dtype=xp.uint32)
        self._out_s = xp.empty(1, dtype=xp.float64)
        self._out_i = xp.empty(1, dtype=xp.int64)

    @staticmethod
    def supported(X: Any, dtype: Any = np.float64) -> bool:
        """Dense X of at most ``_MAX_D`` features whose padded copy is under 64 GiB (the kernel
        addresses X's rows by 32-bit offsets in 16-byte vectors)."""
        if bk.is_sparse(X) or X.shape[1] > GpuScanner._MAX_D:
            return False
        return X.shape[0] * _row_stride(X.shape[1], dtype) * np.dtype(dtype).itemsize < 1 << 36

    def _launch(self, cand, n_cand: int, group_size: int, n_groups: int, coef, b: float,
                final: bool, scores: Any = None):
        xp = self.xp
        k = self.kernel
        # pass 1: partial sums over slices of the core set (grid: candidate blocks x slices)
        blocks, per_block = candidate_blocks(n_cand, self._BLOCK)
        n_split, rows_per_split = core_split(blocks, self.m)
        partial = xp.empty(n_split * n_cand, dtype=xp.float64)
        _cuda.launch("cvm", self._kernel_names["partial"], (blocks, n_split), (self._BLOCK,),
                     (self.Xc, self.d, self.ld, self._xn, cand, n_cand, self._Z, self._zn,
                      xp.ascontiguousarray(coef, dtype=self.dtype), self.m, rows_per_split, k.code, k.gamma,
                      k.coef0, k.degree, partial, per_block))
        # pass 2: s, the group minima (and every s for cvm_scores)
        part_s = xp.empty(n_groups, dtype=xp.float64)
        part_i = xp.empty(n_groups, dtype=xp.int64)
        args = (partial, n_split, cand, n_cand, group_size, float(b), self.y, self.self_term, self._xscale_dev,
                part_s, part_i, self._counter if final else None, self._out_s, self._out_i)
        if scores is not None:
            args += (scores,)
        # the kernels' tiles (core rows, candidate chunks) are static shared memory
        _cuda.launch("cvm", self._kernel_names[scores is not None], (n_groups,), (self._BLOCK,), args)
        return part_s, part_i

    def _all_scores(self, cand, n: int, coef, b: float):
        """s of every candidate (device float64): ``cvm_partial`` then ``cvm_scores``."""
        out = self.xp.empty(n, dtype=self.xp.float64)
        n_groups = int(min(max(1, -(-n // self._BLOCK)), 4096))
        self._launch(cand, n, -(-n // n_groups), n_groups, coef, b, final=False, scores=out)
        return out

    def scores(self, idx: np.ndarray, coef, b: float) -> np.ndarray:
        cand = self.xp.asarray(idx, dtype=self.xp.int64)
        return np.asarray(bk.to_host(self._all_scores(cand, cand.shape[0], coef, b)), dtype=np.float64)

    def _device_idx(self, idx: np.ndarray | None):
        """The device copy of the candidate rows of an exact scan (None: all rows).

        The copy of the last ``idx`` is reused while the caller passes the same
        rows (one problem's rows, every iteration); the key is a host copy of
        their values (an id() can be reused by a new array, and an array can be
        changed in place).
        """
        if idx is None:
            return None
        host = np.asarray(idx, dtype=np.int64)
        if self._idx_key is None or not np.array_equal(self._idx_key[0], host):
            self._idx_key = (host.copy(), self.xp.asarray(host))
        return self._idx_key[1]

    def exact_scan(self, idx: np.ndarray | None, coef, b: float, q: float,
                   k: int) -> tuple[np.ndarray, np.ndarray, float]:
        xp = self.xp
        cand = self._device_idx(idx)
        n = self.n if idx is None else idx.shape[0]
        pos = xp.arange(n)
        rows = pos if cand is None else cand
        s = xp.where(self.in_core_dev[rows], xp.inf, self._all_scores(cand, n, coef, b))
        s_top, p_top, vsum = block_top(s, pos, q, k)
        p_top, s_top = merge_top([s_top], [p_top], k)
        return (p_top if idx is None else np.asarray(idx, dtype=np.int64)[p_top]), s_top, vsum

    def group_min(self, groups: np.ndarray, coef, b: float) -> tuple[np.ndarray, np.ndarray]:
        xp = self.xp
        cand = xp.asarray(groups.ravel(), dtype=xp.int64)
        part_s, part_i = self._launch(cand, cand.shape[0], groups.shape[1], groups.shape[0],
                                      coef, b, final=False)
        return bk.to_host(part_s), bk.to_host(part_i)

    def exact_min(self, idx: np.ndarray | None, coef, b: float) -> tuple[float, int]:
        n = self.n if idx is None else idx.shape[0]
        cand = self._device_idx(idx)
        n_groups = int(min(max(1, -(-n // self._BLOCK)), 4096))
        group_size = -(-n // n_groups)
        self._launch(cand, n, group_size, n_groups, coef, b, final=True)
        return float(self._out_s.get()[0]), int(self._out_i.get()[0])


def make_scanner(X: Any, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float,
                 dtype: np.dtype, device: bk.Device, capacity: int = 64) -> ScannerBase:
    """The fused-CUDA scanner on a GPU for dense X, else the NumPy scanner."""
    if device.is_gpu and GpuScanner.supported(X, dtype):
        return GpuScanner(X, y, kernel, xscale, C, dtype, capacity)
    if device.is_gpu:
        # sparse or very wide X on a GPU: blocked CuPy path (same code as the host twin)
        return HostScanner(X, y, kernel, xscale, C, dtype, capacity, xp=bk.get_namespace(device))
    return HostScanner(X, y, kernel, xscale, C, dtype, capacity)
