"""Behaviour shared by every gpuksvm estimator: devices, pickling, all-or-nothing fits.

:class:`DeviceMixin` gives an estimator

* ``_device()`` — the resolved :class:`~gpuksvm.array.backend.Device` of its
  ``device`` parameter;
* ``to_device("cpu" | "gpu" | "cuda:N")`` — moves all fitted arrays;
* pickling to host arrays, so a model fitted on a GPU predicts on a CPU-only
  machine (it is restored on the CPU; call ``to_device("gpu")`` to move it);
* parameters stay as the user set them: pickling, saving and ``to_device``
  never rewrite ``device`` (``get_params()`` is unchanged); where the fitted
  arrays live is the fitted attribute ``fitted_device_``, and predictions run
  there, while the next ``fit`` runs where ``device`` says;
* **all-or-nothing fits**: ``fit``, ``partial_fit`` and ``partial_fit_transform``
  of every subclass are wrapped (:func:`keeps_state_on_error`) so that a call
  that raises leaves the estimator exactly as it was before the call — the
  previous model stays usable, never a mix of new and old attributes.

Fitted arrays live on the device they were computed on; inputs to ``predict``
are moved there, and outputs come back in the caller's kind of array.
"""
from __future__ import annotations

import copy
import functools
import threading
from typing import Any, Callable

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.estimators.params import ParamsMixin
from gpuksvm.array.validation import validate_X

__all__ = ["DeviceMixin", "move_arrays", "keeps_state_on_error"]

#: methods wrapped by keeps_state_on_error in every DeviceMixin subclass; fit replaces the
#: fitted attributes (a shallow snapshot restores them), the partial_fit family updates
#: buffers in place (a deep snapshot of the fitted state restores them)
_TRANSACTIONAL = {"fit": False, "partial_fit": True, "partial_fit_transform": True}
_active = threading.local()


def keeps_state_on_error(method: Callable, *, deep: bool) -> Callable:
    """Wrap a fitting method so that an exception restores the estimator's previous state.

    Before the call the instance dictionary is snapshotted — shallowly for
    ``fit`` (which assigns new fitted objects rather than mutating old ones), or
    with the fitted state deep-copied (``deep=True``: methods that update
    buffers in place, such as ``partial_fit``).  If the call raises (any
    exception, KeyboardInterrupt included) the dictionary is put back and the
    exception propagates.  Nested calls on the same object (``partial_fit``
    calling ``partial_fit_transform``) take one snapshot.
    """

    @functools.wraps(method)
    def wrapper(self, *args: Any, **kwargs: Any):
        active = getattr(_active, "ids", None)
        if active is None:
            active = _active.ids = set()
        if id(self) in active:
            return method(self, *args, **kwargs)
        state = self.__dict__
        if deep:
            params = set(type(self)._get_param_names()) if hasattr(type(self), "_get_param_names") else set()
            saved = {k: (v if k in params else copy.deepcopy(v)) for k, v in state.items()}
        else:
            saved = dict(state)
        active.add(id(self))
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            state.clear()
            state.update(saved)
            raise
        finally:
            active.discard(id(self))

    wrapper.__keeps_state__ = True
    return wrapper


def move_arrays(obj: Any, device: bk.Device) -> Any:
    """Recursively move NumPy/CuPy arrays inside dicts, lists and tuples, and the arrays of nested
    estimators and of objects with a ``_moved_copy(device)`` method (solver state records)."""
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
    if isinstance(obj, DeviceMixin) or callable(getattr(type(obj), "_moved_copy", None)):
        return obj._moved_copy(device)      # an estimator, or a solver's state record
    return obj


class DeviceMixin(ParamsMixin):
    """Device handling for estimators with a ``device`` parameter, all-or-nothing fits, and the
    declared parameters (:class:`~gpuksvm.estimators.params.ParamsMixin`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, deep in _TRANSACTIONAL.items():
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "__keeps_state__", False):
                setattr(cls, name, keeps_state_on_error(fn, deep=deep))

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
        kind (for :func:`~gpuksvm.array.backend.as_kind`).  SciPy-sparse rows stay
        sparse on the CPU when ``keep_sparse``; a GPU gets them densified.
        ``refuse_sparse``: sparse X is an error (a model fitted on dense X,
        as scikit-learn's SVC).
        """
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

        Predictions run there from now on (``fitted_device_``).  The ``device``
        parameter is the user's and is not changed: a later ``fit`` runs where
        it says (``set_params(device=...)`` to change that too).
        """
        dev = bk.resolve_device(device)
        self._move_fitted(dev)
        return self

    def __getstate__(self) -> dict:
        state = dict(vars(self))
        out = {k: move_arrays(v, bk.CPU) for k, v in state.items()}
        if "_fitted_on" in out:
            out["_fitted_on"] = bk.CPU
        return out

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
