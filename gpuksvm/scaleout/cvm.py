"""CVM on Dask (SPEC §2): a row source whose furthest-point search runs chunk by chunk.

:class:`DaskRows` is the dask implementation of the CVM solver's row source
(:class:`gpuksvm.solvers.cvm.algorithm.CVMRows`): every chunk returns its
furthest points and squared violations (exact scan); with sampling, only the
sampled rows are fetched; the rows' order keys are hashed where the chunks
are.  Per-row scalars (labels, kernel scales, the rows' two content-hash
keys) are gathered once; the features never are.  The core-set QP and the
rest of the algorithm (:func:`gpuksvm.solvers.cvm.algorithm.solve_cvm`) run
on the driver, unchanged.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.cvm.scan import (
    HostScanner,
    candidate_scores,
    kernel_scale,
    merge_top,
    scan_block_rows,
    top_order,
    top_positions,
)
from gpuksvm.solvers.row_order import RowHasher
from gpuksvm.scaleout.common import DaskSource, RemoteRows, delayed_chunks, host_chunks, on_device_of
from gpuksvm.scaleout.runtime import compute, on_workers, require_dask

__all__ = ["DaskRows", "DaskScanner", "fit_cvm"]


def _cvm_chunk_scan(Xb: Any, yb: Any, xsb: Any, pb: Any, start: int, st: dict) -> tuple:
    """One chunk of the exact furthest-point scan (eq. 12–13) over the rows outside the core set:
    its ``k`` smallest finite s, ascending, with their keys and rows, and Σ max(0, q − s)² (the
    stop rule).

    ``pb`` are the rows' positions in the scanned rows (−1: not scanned), or None (every row,
    keyed by its index); ties at the k-th score go to the smaller key, as in the host scan.  The
    chunk is scanned in row blocks of the task's memory budget
    (:func:`~gpuksvm.solvers.cvm.scan.scan_block_rows`, the host scan's rule): each block keeps
    its ``k`` best, merged with the best so far, so any blocking returns the same rows."""
    xp = bk.namespace_of(Xb)
    dt = np.dtype(st["dtype"])
    m, d = Xb.shape
    k, q = int(st["k"]), float(st["q"])
    core = st["core"]
    core = core[(core >= start) & (core < start + m)] - start     # the chunk's core rows, local
    Z = on_device_of(st["Z"], Xb).astype(dt, copy=False)
    coef = on_device_of(st["coef"], Xb).astype(dt, copy=False)
    best_s, best_k, best_x = np.empty(0), np.empty(0, np.int64), np.empty((0, d), dtype=dt)
    vsum = 0.0
    step = scan_block_rows(m, Z.shape[0], d, dt, bk.device_of(Xb))
    for s0 in range(0, m, max(step, 1)):
        s1 = min(s0 + step, m)
        # the core rows count as +inf (their α/C self terms never matter)
        s = candidate_scores(xp.asarray(Xb[s0:s1], dtype=dt), Z, coef, st["kernel"], b=st["b"],
                             y=None if yb is None else xp.asarray(yb[s0:s1], dtype=dt),
                             xscale=None if xsb is None else xp.asarray(xsb[s0:s1], dtype=dt))
        keys = xp.arange(start + s0, start + s1) if pb is None else xp.asarray(pb[s0:s1], dtype=xp.int64)
        out = keys >= 0
        mine = core[(core >= s0) & (core < s1)] - s0
        if mine.size:
            out[xp.asarray(mine)] = False
        s = xp.where(out, s.astype(xp.float64), xp.inf)
        v = xp.maximum(q - s, 0.0)
        vsum += float(v @ v)
        part = top_positions(s, keys, k)
        cand_s = np.concatenate([best_s, np.asarray(bk.to_host(s[part]), dtype=np.float64)])
        cand_k = np.concatenate([best_k, np.asarray(bk.to_host(keys[part]), dtype=np.int64)])
        cand_x = np.concatenate([best_x, np.asarray(bk.to_host(xp.asarray(Xb[s0:s1][part], dtype=dt)))])
        keep = top_order(cand_s, cand_k, k)
        best_s, best_k, best_x = cand_s[keep], cand_k[keep], cand_x[keep]
    return best_s, best_k, best_x, vsum


def _chunk_kernel_scale(Xb: Any, kernel: Kernel, dtype: Any) -> np.ndarray:
    """1/√κ(x, x) of a chunk's rows (host), in row blocks of the task's memory budget: a row
    costs its features converted to ``dtype`` and two values (κ(x, x), its scale)."""
    dt = np.dtype(dtype)
    m, d = Xb.shape
    out = np.empty(m, dtype=dt)
    step = bk.plan_rows(m, (d + 2) * dt.itemsize, "cpu", what="the kernel scales")
    for s0 in range(0, m, max(step, 1)):
        out[s0:s0 + step] = kernel_scale(np.asarray(Xb[s0:s0 + step], dtype=dt), kernel, True)
    return out


class DaskScanner(HostScanner):
    """:class:`~gpuksvm.solvers.cvm.scan.HostScanner` whose rows live in dask chunks on the workers.

    ``exact_scan`` is a map-reduce: every chunk returns the ``k`` smallest s
    of its rows outside the core set (its furthest points, eq. 13), those
    rows, and its Σ max(0, q − s)² for the stop rule; the driver keeps the
    ``k`` smallest (ties to the earlier row of ``idx``, as the host scan: the
    chunks hold the rows' positions in ``idx``, sent once per problem).  The
    sampled search (``scores``) fetches only the sampled rows.  Fetched rows
    are cached so adding the found points to the core set costs no extra pass.
    """

    xp = np

    def __init__(self, remote: RemoteRows, y: Any, kernel: Kernel, xscale: Any, C: float, dtype: Any,
                 capacity: int = 64) -> None:
        super().__init__(remote, y, kernel, None if xscale is None else np.asarray(xscale), C, dtype, capacity)
        _, da = require_dask()
        self.remote = remote
        self._cache: dict = {}
        self._chunks = remote.array.chunks[0]
        self._starts = np.concatenate([[0], np.cumsum(self._chunks)[:-1]]).astype(np.int64)
        self._positions: tuple | None = None        # (host idx, its persisted positions)
        per_row = []
        for vec in (self.y, self.xscale):
            per_row.append(None if vec is None else
                           remote.persist(da.from_array(np.asarray(vec, dtype=self.dtype), chunks=(self._chunks,))))
        self._y_d, self._xs_d = per_row

    def rows(self, idx: Any):
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        missing = np.unique(idx[[int(i) not in self._cache for i in idx]])
        if missing.size:
            got = self.X[missing]
            if len(self._cache) + missing.size > 8192:    # full: keep only the cached rows asked for
                wanted = {int(i) for i in idx}
                self._cache = {i: r for i, r in self._cache.items() if i in wanted}
            for i, r in zip(missing, got):
                self._cache[int(i)] = r
        out = np.stack([self._cache[int(i)] for i in idx]) if idx.size else np.empty((0, self.d))
        return np.asarray(out, dtype=self.dtype).reshape(-1, self.d)

    def _idx_positions(self, idx: np.ndarray):
        """Per row its position in ``idx`` (−1 outside), persisted in chunks while ``idx`` is the same."""
        host = np.asarray(idx, dtype=np.int64)
        if self._positions is None or not np.array_equal(self._positions[0], host):
            _, da = require_dask()
            pos = np.full(self.n, -1, dtype=np.int64)
            pos[host] = np.arange(host.shape[0], dtype=np.int64)
            self._positions = (host.copy(), self.remote.persist(da.from_array(pos, chunks=(self._chunks,))))
        return self._positions[1]

    def exact_scan(self, idx: np.ndarray | None, coef: Any, b: float, q: float,
                   k: int) -> tuple[np.ndarray, np.ndarray, float]:
        dask, _ = require_dask()
        core = self.core_idx.copy()
        st = dask.delayed({"Z": np.asarray(self.Z), "coef": np.asarray(bk.to_host(coef)),
                           "b": float(b), "core": core, "q": float(q), "k": int(k), "kernel": self.kernel,
                           "dtype": self.dtype}, pure=True)
        fn = dask.delayed(on_workers(_cvm_chunk_scan), pure=True)
        cols = [delayed_chunks(self.remote.array)]
        for extra in (self._y_d, self._xs_d, None if idx is None else self._idx_positions(idx)):
            cols.append(delayed_chunks(extra) if extra is not None else [None] * len(cols[0]))
        parts = [fn(xb, yb, xs, pb, int(s0), st)
                 for xb, yb, xs, pb, s0 in zip(*cols, self._starts)]
        (res,) = compute(parts, client=self.remote.client, ledger=self.remote.ledger, label="furthest point")
        p_top, s_top = merge_top([r[0] for r in res], [r[1] for r in res], k)
        i_top = p_top if idx is None else np.asarray(idx, dtype=np.int64)[p_top]
        fetched = {int(p): row for r in res for p, row in zip(r[1], r[2])}
        for p, i in zip(p_top, i_top):                    # the next append needs no fetch
            self._cache[int(i)] = fetched[int(p)]
        return i_top, s_top, float(sum(r[3] for r in res))


class DaskRows(DaskSource):
    """A dask array as the CVM solver's row source (:class:`~gpuksvm.solvers.cvm.algorithm.CVMRows`).

    Built from ``X`` (and the labels ``y``, None for the one-class task): the
    chunks are aligned by rows and persisted, and one pass checks that X is
    finite (:class:`~gpuksvm.scaleout.common.DaskSource`).  The solver reads
    the rows through :meth:`scanner` (a :class:`DaskScanner`),
    :meth:`row_keys` (every chunk hashed where it is: two uint64 keys a row,
    so the same rows in any order and any chunking give the same model) and
    :meth:`take` (only the rows asked for are fetched).
    """

    def __init__(self, X: Any, y: Any = None, *, client: Any = None) -> None:
        super().__init__(X, y, client=client)
        self.remote = RemoteRows(self.X, client=self.client, ledger=self.ledger, max_rows=0, label="rows")

    def kernel_scale(self, kernel: Kernel, normalize: bool, dtype: Any) -> np.ndarray | None:
        """1/√κ(x, x) per row (host), computed chunk-wise, for a normalized kernel; else None."""
        if not normalize or kernel.constant_diag is not None:
            return None
        xs = host_chunks(self.X).map_blocks(on_workers(partial(_chunk_kernel_scale, kernel=kernel, dtype=dtype)),
                                            drop_axis=1, dtype=dtype, meta=np.empty((0,), dtype=dtype))
        (xscale,) = compute(xs, client=self.client, ledger=self.ledger, label="kernel scales")
        return np.asarray(xscale, dtype=dtype)

    def scanner(self, y: np.ndarray | None, kernel: Kernel, xscale: Any, C: float, dtype: Any,
                device: Any = None) -> DaskScanner:
        return DaskScanner(self.remote, y, kernel, xscale, C, dtype)

    def row_keys(self, hasher: RowHasher) -> np.ndarray:
        dask, _ = require_dask()
        fn = dask.delayed(on_workers(RowHasher.keys), pure=True)       # each chunk hashed where it is
        (keys,) = compute([fn(hasher, xb) for xb in delayed_chunks(self.X)], client=self.client,
                          ledger=self.ledger, label="row-order keys")
        return np.concatenate(keys)

    def take(self, idx: np.ndarray) -> np.ndarray:
        return self.remote[idx]

    def release(self) -> None:
        """Let go of the per-row arrays persisted for the scans."""
        self.remote.release()


def fit_cvm(estimator: Any, X: Any, y: Any = None, *, client: Any = None) -> Any:
    """Fit a :class:`~gpuksvm.estimators.cvm.CVM` or :class:`~gpuksvm.estimators.cvm.OneClassCVM` on a dask array.

    The same as ``estimator.fit(X, y, client=client)``: the estimator's fit
    runs :func:`gpuksvm.solvers.cvm.algorithm.solve_cvm` on a :class:`DaskRows`
    source, so the core-set loop is the single-process one (same order of
    the rows by their content hash, same initial pair, same warm-started
    core-set QP on the driver, same random draws, same duality-gap stop);
    only the hash and the furthest-point search touch the data:

    * exact search (``sample_size=None``, or small problems): every chunk
      returns its furthest candidates outside the core set (the smallest s of
      eq. 13, and those rows) and its sum of squared violations; the driver
      keeps the best — one pass per search iteration;
    * sampled search: the sampled rows of each iteration are fetched (the same
      rows the single-process fit samples), scored on the driver.

    The result equals the single-process fit with the same ``random_state`` (up
    to the rounding of the exact scan's sum of violations, added chunk by
    chunk).

    Parameters
    ----------
    estimator : CVM or OneClassCVM (fitted in place)
    X : dask array (n, d); y : labels (ignored for the one-class task)
    client : distributed.Client, optional

    Returns
    -------
    estimator, fitted; ``estimator.dask_info_`` records the passes and bytes.
    """
    return estimator.fit(X, y, client=client)
