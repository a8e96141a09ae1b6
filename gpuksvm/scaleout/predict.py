"""Prediction on Dask: a fitted estimator's own method mapped over the row chunks (lazy).

:func:`map_method` returns a dask array; nothing runs until the caller
computes it.  The fitted estimator travels once per worker inside a
:class:`ChunkPredictor`, which also keeps, per worker, the copies of the
estimator moved to the devices of CuPy-backed chunks (an explicit cache owned
by the one mapped call, not a process-wide table).
"""
from __future__ import annotations

import copy

import threading
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.scaleout.runtime import on_workers, require_dask, row_chunked

__all__ = ["ChunkPredictor", "map_method"]


class ChunkPredictor:
    """``estimator.<method>`` applied to one row chunk, on the chunk's device.

    A GPU chunk on another device than the fitted arrays gets a copy of the
    estimator moved there (made once per device and kept in this object, so
    one worker moves the model once per mapped call, not once per chunk).
    """

    def __init__(self, estimator: Any, method: str) -> None:
        self.estimator = estimator
        self.method = method
        self._copies: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"estimator": self.estimator, "method": self.method}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["estimator"], state["method"])

    def _estimator_on(self, Xb: Any) -> Any:
        """The estimator with its fitted arrays on the device of the chunk ``Xb`` (a copy per device)."""
        est = self.estimator
        if not bk.is_gpu_array(Xb) or not hasattr(est, "fitted_device_"):
            return est
        dev = bk.device_of(Xb)
        if est.fitted_device_ == str(dev):
            return est
        with self._lock:
            moved = self._copies.get(str(dev))
            if moved is None:
                moved = self._copies[str(dev)] = copy.copy(est).to_device(dev)
        return moved

    def __call__(self, Xb: Any) -> Any:
        out = getattr(self._estimator_on(Xb), self.method)(Xb)
        if bk.is_gpu_array(Xb) and not bk.is_gpu_array(out):
            out = bk.to_device(np.asarray(out), bk.device_of(Xb))
        return out


def _apply_to_chunk(Xb: Any, predictor: ChunkPredictor) -> Any:
    return predictor(Xb)


def map_method(estimator: Any, X: Any, method: str) -> Any:
    """``estimator.<method>`` applied to every row chunk of a dask array → dask array.

    The fitted estimator is shipped once per worker; each chunk's result has
    the chunk's rows (1-D or 2-D, as the method returns on a NumPy array) and
    stays in the chunk's array kind (NumPy or CuPy).  The chunks are predicted
    under the memory settings of the thread that calls this (captured now, see
    :func:`~gpuksvm.scaleout.runtime.on_workers`), not the workers' defaults.
    """
    check_is_fitted(estimator)
    dask, da = require_dask()
    X, _ = row_chunked(X)
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and X.shape[1] != expected:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} "
                         f"is expecting {expected} features as input.")
    probe = np.asarray(bk.to_host(getattr(estimator, method)(np.zeros((1, X.shape[1])))))
    meta_mod = bk.namespace_of(da.utils.meta_from_array(X))
    meta = meta_mod.empty((0,) * probe.ndim, dtype=probe.dtype) if probe.dtype != object \
        else np.empty((0,) * probe.ndim, dtype=object)
    apply = dask.delayed(ChunkPredictor(estimator, method), pure=True)
    if probe.ndim == 1:
        return X.map_blocks(on_workers(_apply_to_chunk), apply, chunks=(X.chunks[0],), drop_axis=1,
                            dtype=probe.dtype, meta=meta)
    return X.map_blocks(on_workers(_apply_to_chunk), apply, chunks=(X.chunks[0], probe.shape[1:]),
                        dtype=probe.dtype, meta=meta)
