"""Behaviour shared by every gpuksvm estimator: devices, pickling, progress.

:class:`DeviceMixin` gives an estimator

* ``_device()`` — the resolved :class:`~gpuksvm.backend.Device` of its
  ``device`` parameter;
* ``to_device("cpu" | "gpu" | "cuda:N")`` — moves all fitted arrays;
* pickling to host arrays, so a model fitted on a GPU predicts on a CPU-only
  machine (it is restored on the CPU; call ``to_device("gpu")`` to move it).

Fitted arrays live on the device they were computed on; inputs to ``predict``
are moved there, and outputs come back in the caller's kind of array.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import backend as bk

__all__ = ["DeviceMixin", "move_arrays", "progress"]


def move_arrays(obj: Any, device: bk.Device) -> Any:
    """Recursively move NumPy/CuPy arrays inside dicts, lists and tuples."""
    if isinstance(obj, np.ndarray) or bk.is_gpu_array(obj):
        if obj.dtype == object:
            return obj
        return bk.to_device(obj, device)
    if isinstance(obj, dict):
        return {k: move_arrays(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [move_arrays(v, device) for v in obj]
    if isinstance(obj, tuple):
        return tuple(move_arrays(v, device) for v in obj)
    if isinstance(obj, DeviceMixin):
        return obj._moved_copy(device)
    return obj


class DeviceMixin:
    """Device handling for estimators with a ``device`` parameter."""

    def _device(self) -> bk.Device:
        return bk.resolve_device(getattr(self, "device", "auto"))

    @property
    def fitted_device_(self) -> str:
        """Where the fitted arrays live (``"cpu"`` or ``"cuda:N"``)."""
        return str(getattr(self, "_fitted_on", bk.CPU))

    def _set_fitted_device(self, device: bk.Device) -> None:
        self._fitted_on = device

    def _fitted_device(self) -> bk.Device:
        return getattr(self, "_fitted_on", bk.CPU)

    def _fitted_xp(self):
        return bk.get_namespace(self._fitted_device())

    def _validated_input(self, X: Any, dtype: Any, *, keep_sparse: bool = True,
                         refuse_sparse: bool = False) -> tuple[Any, str]:
        """Prediction input: validated against the fit, on the fitted device in ``dtype``.

        Returns ``(X_on_device, kind)`` where ``kind`` is the caller's array
        kind (for :func:`~gpuksvm.backend.as_kind`).  SciPy-sparse rows stay
        sparse on the CPU when ``keep_sparse``; a GPU gets them densified.
        ``refuse_sparse``: sparse X is an error (a model fitted on dense X,
        as scikit-learn's SVC).
        """
        from .validation import validate_X

        X, kind = validate_X(self, X, reset=False)
        if refuse_sparse and bk.is_sparse(X):
            raise ValueError(f"cannot use sparse input in {type(self).__name__!r} trained on dense data")
        dev = self._fitted_device()
        if bk.is_sparse(X):
            if keep_sparse and not dev.is_gpu:
                return X.astype(dtype), kind
            X = X.toarray()
        return bk.to_device(X, dev, dtype), kind

    def _moved_copy(self, device: bk.Device) -> "DeviceMixin":
        import copy

        new = copy.copy(self)
        new._move_fitted(device)
        return new

    def _move_fitted(self, device: bk.Device) -> None:
        for key, val in list(vars(self).items()):
            if key.endswith("_") and not key.startswith("__"):
                setattr(self, key, move_arrays(val, device))
            elif key.startswith("_") and key not in ("_fitted_on",):
                setattr(self, key, move_arrays(val, device))
        self._fitted_on = device

    def to_device(self, device: str | bk.Device) -> "DeviceMixin":
        """Move the fitted model to ``device`` (in place) and return it.

        The ``device`` parameter is set to the new device so later fits and
        predictions run there.
        """
        dev = bk.resolve_device(device)
        self._move_fitted(dev)
        self.device = str(dev) if dev.is_gpu else "cpu"
        return self

    def __getstate__(self) -> dict:
        state = dict(vars(self))
        out = {k: move_arrays(v, bk.CPU) for k, v in state.items()}
        if "_fitted_on" in out:
            out["_fitted_on"] = bk.CPU
        if out.get("device") not in (None, "auto", "cpu"):
            # a GPU-fitted model predicts on the CPU after unpickling unless moved back
            out["device"] = "auto"
        return out

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def progress(iterable: Any = None, *, total: int | None = None, desc: str = "", verbose: int = 0):
    """A tqdm progress bar when ``verbose`` and tqdm is installed, else the iterable."""
    if verbose:
        try:
            from tqdm.auto import tqdm

            return tqdm(iterable, total=total, desc=desc, leave=False)
        except ImportError:  # pragma: no cover - tqdm is optional
            pass
    return iterable if iterable is not None else range(total or 0)
