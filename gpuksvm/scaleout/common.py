"""What every distributed fit shares: rows fetched by index, persisted inputs, checks, the record.

:class:`RemoteRows` gathers only the rows a fit asks for (a sample, a core
vector), with a ceiling and a ledger of the bytes that travelled; the other
helpers validate a dask input in one pass (finite values, labels), choose the
client, and record ``dask_info_`` on the fitted estimator.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.scaleout.runtime import (
    DistributedFitError,
    Ledger,
    compute,
    n_workers,
    on_workers,
    require_dask,
    row_chunked,
    scheduler_context,
)

__all__ = ["DaskSource", "RemoteRows", "host_chunks", "persist", "check_finite_and_classes",
           "client_or_default", "on_device_of", "delayed_chunks"]


class RemoteRows:
    """Row access to a dask array that gathers only the rows asked for.

    Lets the single-process helpers of the estimators (landmark sampling,
    LLSVM2's labelled subset) run unchanged on a dask array: ``rows[idx]``
    fetches just those rows; converting the whole array is allowed only when
    it has at most ``max_rows`` rows (a sample that *is* the data set).
    """

    def __init__(self, X: Any, *, client: Any, ledger: Ledger, max_rows: int, label: str):
        self._X = X
        self._client = client
        self._ledger = ledger
        self._max_rows = int(max_rows)
        self._label = label
        self.shape = tuple(int(s) for s in X.shape)
        self.ndim = X.ndim
        self.dtype = X.dtype
        self._held: list = []

    def _fetch(self, key: Any) -> np.ndarray:
        (out,) = compute(self._X[key], client=self._client, ledger=self._ledger, label=self._label)
        return np.asarray(bk.to_host(out))

    def __getitem__(self, idx: Any) -> np.ndarray:
        if bk.is_gpu_array(idx):
            idx = bk.to_host(idx)
        if isinstance(idx, (list, np.ndarray)):
            idx = np.asarray(idx)
            order = np.argsort(idx, kind="stable")
            if np.all(order == np.arange(order.size)):
                return self._fetch(idx)
            got = self._fetch(idx[order])  # dask gathers sorted rows fastest
            out = np.empty_like(got)
            out[order] = got
            return out
        return self._fetch(idx)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def array(self) -> Any:
        """The dask array the rows come from."""
        return self._X

    @property
    def client(self) -> Any:
        return self._client

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def persist(self, A: Any) -> Any:
        """Persist a small per-row dask array (labels, masks) on the workers for this fit."""
        A = self._client.persist(A) if self._client is not None else A.persist()
        self._held.append(A)
        return A

    def release(self) -> None:
        """Let go of the arrays held by :meth:`persist`."""
        self._held.clear()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.shape[0] > self._max_rows:
            raise DistributedFitError(
                f"refusing to gather all {self.shape[0]} rows on the driver "
                f"(limit {self._max_rows}); this is a bug in the distributed fit")
        out = self._fetch(slice(None))
        return out.astype(dtype, copy=False) if dtype is not None else out


class DaskSource:
    """What the row sources of the distributed fits share: a dask ``X`` (and ``y``) aligned in
    row chunks and persisted, checked finite in one pass, the client and the ledger.

    Parameters
    ----------
    X : dask array (n, d)
    y : dask array or array-like (n,), optional
    client : distributed.Client, optional
        Default: the active client, else the local scheduler.
    """

    def __init__(self, X: Any, y: Any = None, *, client: Any = None) -> None:
        require_dask()
        self.client = client_or_default(client)
        self.ledger = Ledger()
        X, y = row_chunked(X, y)
        X, y = persist(self.client, X, y)
        check_finite_and_classes(X, None, client=self.client, ledger=self.ledger)
        self.X, self.y = X, y
        self.shape = tuple(int(s) for s in X.shape)

    def labels(self) -> np.ndarray:
        """The labels gathered on the driver (one pass)."""
        (y_host,) = compute(host_chunks(self.y), client=self.client, ledger=self.ledger, label="labels")
        return np.asarray(y_host).ravel()

    def evaluate(self, fn: Callable[[Any], Any]) -> Any:
        """``fn`` of the rows (a dask array of host chunks) under this source's scheduler
        (resolving γ on the data: its reductions run on the workers)."""
        with scheduler_context(self.client):
            return fn(host_chunks(self.X))

    def info(self, **extra: Any) -> dict:
        """The record of the fit (``dask_info_``): workers, passes, bytes brought back, and ``extra``."""
        return {"n_workers": n_workers(self.client), **self.ledger.as_dict(),
                "n_chunks": int(self.X.numblocks[0]), **extra}


def host_chunks(A: Any) -> Any:
    """The same dask array with host (NumPy) chunks (for small reductions on the driver)."""
    _, da = require_dask()
    if bk.array_kind(da.utils.meta_from_array(A)) == "numpy":
        return A
    return A.map_blocks(on_workers(bk.to_host), dtype=A.dtype, meta=np.empty((0,) * A.ndim, dtype=A.dtype))


def persist(client: Any, *arrays: Any) -> list:
    """Load the chunks into worker memory once (a lazy ``from_array`` would ship them every pass)."""
    arrays = [a for a in arrays]
    todo = [i for i, a in enumerate(arrays) if a is not None]
    if not todo:
        return arrays
    got = (client.persist([arrays[i] for i in todo]) if client is not None
           else require_dask()[0].persist(*[arrays[i] for i in todo]))
    for i, a in zip(todo, got):
        arrays[i] = a
    return arrays


def check_finite_and_classes(X: Any, y: Any, *, client: Any, ledger: Ledger) -> np.ndarray:
    """One pass: NaN/inf in X → ValueError; returns the sorted labels (host)."""
    _, da = require_dask()
    # reduced on the chunks' own device; only one boolean comes back
    finite = da.isfinite(X).all() if X.dtype.kind == "f" else da.asarray(True)
    if y is None:
        (ok,) = compute(finite, client=client, ledger=ledger, label="validate")
        labels = None
    else:
        ok, labels = compute(finite, da.unique(host_chunks(y)), client=client, ledger=ledger,
                             label="validate")
    if not bool(bk.to_host(ok)):
        raise ValueError("Input X contains NaN or infinity.")
    return labels



def client_or_default(client: Any) -> Any:
    """The given client, else the active distributed client, else None (local scheduler)."""
    if client is not None:
        return client
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def on_device_of(A: Any, like: Any) -> Any:
    """``A`` (host or device array) on the device (and namespace) of the chunk ``like``."""
    if bk.is_gpu_array(like):
        return bk.to_device(A, bk.device_of(like))
    return bk.to_host(A)




def delayed_chunks(A: Any) -> list:
    return list(A.to_delayed().ravel())
