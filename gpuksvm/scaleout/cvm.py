"""CVM on Dask (SPEC §2): the furthest-point search chunk by chunk, the core-set QP on the driver.

Every chunk returns its furthest points and squared violations (exact scan);
with sampling, only the sampled rows are fetched.  Per-row scalars (labels,
kernel scales) are gathered once; the features never are.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .. import backend as bk
from ..kernels import Kernel
from ..solvers.meb_scan import HostScanner, block_top, candidate_scores, kernel_scale, merge_top
from ..validation import encode_classes
from .common import (RemoteRows, check_finite_and_classes, client_or_default, delayed_chunks,
                     host_chunks, on_device_of, persist, record_info, set_n_features)
from .runtime import Ledger, compute, require_dask, row_chunked, scheduler_context

__all__ = ["fit_cvm"]


def _cvm_chunk_scan(Xb: Any, yb: Any, xsb: Any, mb: Any, start: int, st: dict) -> tuple:
    """One chunk of the exact furthest-point scan (eq. 12–13) over the rows outside the core set:
    its ``k`` smallest s with their row indices and rows, and Σ max(0, q − s)² (the stop rule)."""
    xp = bk.namespace_of(Xb)
    dt = st["dtype"]
    m = Xb.shape[0]
    if m == 0:
        return np.empty(0), np.empty(0, np.int64), np.empty((0, Xb.shape[1])), 0.0
    Xb = xp.asarray(Xb, dtype=dt)
    self_term = xp.zeros(m, dtype=dt)
    core, vals = st["core"], st["self"]
    here = (core >= start) & (core < start + m)
    if here.any():
        self_term[xp.asarray(core[here] - start)] = xp.asarray(vals[here], dtype=dt)
    s = candidate_scores(Xb, on_device_of(st["Z"], Xb).astype(dt, copy=False),
                         on_device_of(st["coef"], Xb).astype(dt, copy=False), st["kernel"],
                         b=st["b"], y=None if yb is None else xp.asarray(yb, dtype=dt),
                         self_term=self_term, xscale=None if xsb is None else xp.asarray(xsb, dtype=dt))
    out = xp.ones(m, dtype=bool) if mb is None else xp.asarray(mb)
    if here.any():
        out[xp.asarray(core[here] - start)] = False
    s = xp.where(out, s.astype(xp.float64), xp.inf)
    s_top, local, vsum = block_top(s, xp.arange(m), st["q"], st["k"])
    return s_top, local + start, np.asarray(bk.to_host(Xb[xp.asarray(local)])), vsum


def _make_dask_scanner(rows: "RemoteRows", y: Any, kernel: Kernel, xscale: Any, C: float,
                       dtype: Any, device: Any = None, capacity: int = 64):
    """A furthest-point scanner over a dask array (same interface as ``meb.make_scanner``)."""
    class _DaskScanner(HostScanner):
        """HostScanner whose rows live in dask chunks on the workers.

        ``exact_scan`` is a map-reduce: every chunk returns the ``k`` smallest
        s of its rows outside the core set (its furthest points, eq. 13), those
        rows, and its Σ max(0, q − s)² for the stop rule; the driver keeps the
        ``k`` smallest (ties to the smallest row index, as the host scan).  The
        sampled search (``scores``) fetches only the sampled rows.  Fetched
        rows are cached so adding the found points to the core set costs no
        extra pass.
        """

        xp = np

        def __init__(self) -> None:
            super().__init__(rows, y, kernel, None if xscale is None else np.asarray(xscale),
                             C, dtype, capacity)
            _, da = require_dask()
            X = rows._X
            self._cache: dict = {}
            self._chunks = X.chunks[0]
            self._starts = np.concatenate([[0], np.cumsum(self._chunks)[:-1]]).astype(np.int64)
            self._masks: dict = {}
            per_row = []
            for vec in (self.y, self.xscale):
                per_row.append(None if vec is None else
                               rows._persist(da.from_array(np.asarray(vec, dtype=self.dtype),
                                                           chunks=(self._chunks,))))
            self._y_d, self._xs_d = per_row

        def rows(self, idx: Any):
            idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
            missing = np.unique(idx[[int(i) not in self._cache for i in idx]])
            if missing.size:
                got = self.X[missing]
                if len(self._cache) + missing.size > 8192:
                    self._cache.clear()
                for i, r in zip(missing, got):
                    self._cache[int(i)] = r
            out = np.stack([self._cache[int(i)] for i in idx]) if idx.size else \
                np.empty((0, self.d))
            return np.asarray(out, dtype=self.dtype).reshape(-1, self.d)

        def _mask(self, idx: np.ndarray):
            key = (id(idx), idx.shape[0])
            if key not in self._masks:
                _, da = require_dask()
                mask = np.zeros(self.n, dtype=bool)
                mask[idx] = True
                self._masks = {key: (idx, rows._persist(da.from_array(mask, chunks=(self._chunks,))))}
            return self._masks[key][1]

        def exact_scan(self, idx: np.ndarray | None, coef: Any, b: float, q: float,
                       k: int) -> tuple[np.ndarray, np.ndarray, float]:
            dask, _ = require_dask()
            core = self.core_idx.copy()
            st = dask.delayed({"Z": np.asarray(self.Z), "coef": np.asarray(bk.to_host(coef)),
                               "b": float(b), "core": core, "q": float(q), "k": int(k),
                               "self": np.asarray(self.self_term[core]), "kernel": self.kernel,
                               "dtype": self.dtype}, pure=True)
            fn = dask.delayed(_cvm_chunk_scan, pure=True)
            cols = [delayed_chunks(rows._X)]
            for extra in (self._y_d, self._xs_d, None if idx is None else self._mask(idx)):
                cols.append(delayed_chunks(extra) if extra is not None else [None] * len(cols[0]))
            parts = [fn(xb, yb, xs, mb, int(s0), st)
                     for xb, yb, xs, mb, s0 in zip(*cols, self._starts)]
            (res,) = compute(parts, client=rows._client, ledger=rows._ledger, label="furthest point")
            i_top, s_top = merge_top([r[0] for r in res], [r[1] for r in res], k)
            for r in res:                                     # the next append needs no fetch
                for i, row in zip(r[1], r[2]):
                    if i in i_top:
                        self._cache[int(i)] = row
            return i_top, s_top, float(sum(r[3] for r in res))

    return _DaskScanner()


def fit_cvm(estimator: Any, X: Any, y: Any = None, *, client: Any = None) -> Any:
    """Fit a :class:`~gpuksvm.cvm.CVM` or :class:`~gpuksvm.cvm.OneClassCVM` on a dask array.

    The core-set loop is the estimator's own (same initial pair, same
    warm-started core-set QP on the driver, same random draws, same
    duality-gap stop); only the furthest-point search touches the data:

    * exact search (``sample_size=None``, or small problems): every chunk
      returns its furthest candidates outside the core set (the smallest s of
      eq. 13, and those rows) and its sum of squared violations; the driver
      keeps the best — one pass per search iteration;
    * sampled search: the sampled rows of each iteration are fetched (the same
      rows the single-process fit samples), scored on the driver.

    Per-row scalars (labels, and 1/√κ(x,x) with ``normalize=True``) are
    gathered once; the features never are.  The result equals the
    single-process fit with the same ``random_state``.

    Parameters
    ----------
    estimator : CVM or OneClassCVM (fitted in place)
    X : dask array (n, d); y : labels (ignored for the one-class task)
    client : distributed.Client, optional

    Returns
    -------
    estimator, fitted; ``estimator.dask_info_`` records the passes and bytes.
    """
    require_dask()
    est = estimator
    est._check_params()
    one_class = getattr(est, "_task", "") == "one_class" or getattr(est, "task", "") == "one_class"
    client = client_or_default(client)
    ledger = Ledger()
    rs = check_random_state(est.random_state)
    X, y = row_chunked(X, None if one_class else y)
    X, y = persist(client, X, y)
    n, d = (int(s) for s in X.shape)
    check_finite_and_classes(X, None, client=client, ledger=ledger)
    set_n_features(est, d)
    dev = est._device()
    dt = bk.resolve_dtype(est.dtype, dev)
    Xh = host_chunks(X)
    with scheduler_context(client):
        kernel = est._make_kernel(Xh)
    xscale = None
    if est.normalize and kernel.constant_diag is None:
        _, da = require_dask()
        xs = Xh.map_blocks(lambda b: kernel_scale(np.asarray(b, dtype=dt), kernel, True),
                           drop_axis=1, dtype=dt, meta=np.empty((0,), dtype=dt))
        (xscale,) = compute(xs, client=client, ledger=ledger, label="kernel scales")
        xscale = np.asarray(xscale, dtype=dt)
    rows = RemoteRows(X, client=client, ledger=ledger, max_rows=0, label="rows")
    rows.__gpuksvm_scanner__ = lambda *a, **k: _make_dask_scanner(rows, *a, **k)
    t0 = time.perf_counter()
    yi = None
    if not one_class:
        (y_host,) = compute(host_chunks(y), client=client, ledger=ledger, label="labels")
        est.classes_, yi = encode_classes(np.asarray(y_host).ravel())
    est._fit_rows(rows, yi, kernel, xscale, dev, dt, rs)
    record_info(est, ledger, client, {"n_chunks": len(X.chunks[0]), "seconds": time.perf_counter() - t0})
    rows._release()
    return est
