"""Behaviour shared by every gpuksvm estimator: the fit context, devices, pickling.

:func:`fit_context` decorates every fitting method (``fit``, ``partial_fit``,
``partial_fit_transform``) and does, in one place, what each fit needs
around its algorithm: the parameter check, the all-or-nothing transaction (a
call that raises leaves the estimator exactly as it was — the previous model
stays usable, never a mix of new and old attributes) and the route of a Dask
``X`` to the distributed fit of :mod:`gpuksvm.scaleout`.
:meth:`DeviceMixin._fit_setup` gives the first things a fit resolves — device,
dtype, random state, the compute-ready copy of X and the kernel — as one
:class:`FitSetup`.

:class:`DeviceMixin` gives an estimator

* ``_device()`` — the resolved :class:`~gpuksvm.array.backend.Device` of its
  ``device`` parameter;
* ``to_device("cpu" | "gpu" | "cuda:N")`` — moves all fitted arrays;
* pickling to host arrays, so a model fitted on a GPU predicts on a CPU-only
  machine (it is restored on the CPU; call ``to_device("gpu")`` to move it);
* parameters stay as the user set them: pickling, saving and ``to_device``
  never rewrite ``device`` (``get_params()`` is unchanged); where the fitted
  arrays live is the fitted attribute ``fitted_device_``, and predictions run
  there, while the next ``fit`` runs where ``device`` says.

Fitted arrays live on the device they were computed on; inputs to ``predict``
are moved there, and outputs come back in the caller's kind of array.
"""
from __future__ import annotations

import copy
import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.estimators.params import ParamsMixin
from gpuksvm.kernels.kernel import Kernel, make_kernel
from gpuksvm.array.validation import validate_X
from gpuksvm.scaleout.runtime import is_dask_collection

__all__ = ["DeviceMixin", "FitContext", "FitSetup", "fit_context", "fitting_methods", "move_arrays", "name_retries"]

#: the names of fitting methods: each carries a :func:`fit_context`
FITTING_METHODS = ("fit", "partial_fit", "partial_fit_transform")

_active = threading.local()


@dataclass(frozen=True)
class FitContext:
    """What :func:`fit_context` does around one fitting method (its ``__fit_context__``).

    Attributes
    ----------
    partial : bool
        The method updates the fitted state in place (``partial_fit``,
        ``partial_fit_transform``): the snapshot deep-copies the fitted state,
        and the parameters are validated only when the estimator is not fitted
        yet (the call that starts the state), as scikit-learn's ``partial_fit``.
    distributed : callable or None
        Where a Dask ``X`` goes: ``distributed(self, X, *args, **kwargs)``, a
        fit of :mod:`gpuksvm.scaleout`; None: the method takes no Dask input.
    """

    partial: bool = False
    distributed: Callable[..., Any] | None = None


def _is_fitted(est: Any) -> bool:
    return any(k.endswith("_") and not k.startswith("__") for k in vars(est))


def _snapshot(est: Any, *, deep: bool) -> dict:
    """The instance dictionary, with the fitted state deep-copied when ``deep`` (parameters are not)."""
    state = est.__dict__
    if not deep:
        return dict(state)
    params = set(type(est)._get_param_names()) if hasattr(type(est), "_get_param_names") else set()
    return {k: (v if k in params else copy.deepcopy(v)) for k, v in state.items()}


def fit_context(*, partial: bool = False, distributed: Callable[..., Any] | None = None
                ) -> Callable[[Callable], Callable]:
    """Decorator of every fitting method: validation, all-or-nothing, Dask routing, in one place.

    ``@fit_context()`` on ``fit``, ``@fit_context(partial=True)`` on
    ``partial_fit`` / ``partial_fit_transform``, and
    ``@fit_context(distributed=fit_llsvm)`` on a ``fit`` that takes a Dask
    ``X``.  Around the method it

    1. snapshots the instance dictionary — shallowly for ``fit`` (which
       assigns new fitted objects rather than mutating old ones), with the
       fitted state deep-copied for ``partial=True`` (in-place updates);
    2. validates the parameters (``self._check_params()``: the declared
       constraints and the class's relations), for ``partial=True`` only
       while the estimator is not fitted yet;
    3. sends a Dask ``X`` to ``distributed(self, X, *args, **kwargs)``, any
       other ``X`` to the method;
    4. if anything raises (KeyboardInterrupt included), puts the dictionary
       back — the previous model stays usable, never a mix of new and old
       attributes — and lets the exception propagate.

    A nested call on the same object (``partial_fit`` calling
    ``partial_fit_transform``) runs inside the outer context: one snapshot,
    one validation.  The wrapper carries ``__fit_context__`` (a
    :class:`FitContext`) and ``dask_route`` (``distributed``).
    """
    spec = FitContext(partial=partial, distributed=distributed)

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def fitting(self, X: Any = None, *args: Any, **kwargs: Any):
            active = getattr(_active, "ids", None)
            if active is None:
                active = _active.ids = set()
            if id(self) in active:
                return method(self, X, *args, **kwargs)
            saved = _snapshot(self, deep=partial)
            active.add(id(self))
            try:
                # every out-of-memory retry of the fit (validation, solver, checks): one warning,
                # and named in memory_fallback_
                with bk.FallbackCollector() as retried:
                    if not (partial and _is_fitted(self)):
                        self._check_params()
                    if distributed is not None and is_dask_collection(X):
                        return distributed(self, X, *args, **kwargs)
                    fitted = method(self, X, *args, **kwargs)
                name_retries(self, retried.cut)
                return fitted
            except BaseException:
                self.__dict__.clear()
                self.__dict__.update(saved)
                raise
            finally:
                active.discard(id(self))

        fitting.__fit_context__ = spec
        fitting.dask_route = distributed
        return fitting

    return decorate


def name_retries(est: Any, cut: list[str]) -> None:
    """A fit that retried after running out of memory and whose solver named no fallback (the
    retry was outside it: e.g. the input's validation scan, which runs before the solver) gets
    ``memory_fallback_ = "out_of_memory: <what>"``; a fallback the solver named stays as it is."""
    if cut and getattr(est, "memory_fallback_", None) is None:
        est.memory_fallback_ = bk.fallback_text(retried=cut)


def fitting_methods(cls: type) -> dict[str, Callable]:
    """The fitting methods ``cls`` has (``fit``, ``partial_fit``, ``partial_fit_transform``), by name."""
    return {name: getattr(cls, name) for name in FITTING_METHODS if callable(getattr(cls, name, None))}


@dataclass(frozen=True)
class FitSetup:
    """What every fit resolves first from the estimator's parameters and the validated X.

    Built by :meth:`DeviceMixin._fit_setup`.

    Attributes
    ----------
    device : Device
        Where the fit runs (the resolved ``device`` parameter).
    dtype : numpy.dtype
        The working precision (``dtype``; None: float32 on a GPU, float64 on the CPU).
    random_state : numpy.random.RandomState
        The fit's generator (``check_random_state(random_state)``), drawn from in order.
    X : array or sparse matrix
        X on ``device`` in ``dtype``: the compute-ready copy (sparse X stays
        CSR on either device unless ``_fit_setup(dense=...)`` densifies it).
    kernel : Kernel or None
        The kernel (``kernel``, ``gamma``, ``degree``, ``coef0``) with a
        data-dependent ``gamma`` resolved on ``X``; None when not asked for.
    """

    device: bk.Device
    dtype: np.dtype
    random_state: np.random.RandomState
    X: Any
    kernel: Kernel | None = None


def move_arrays(obj: Any, device: bk.Device) -> Any:
    """Recursively move NumPy/CuPy arrays inside dicts, lists and tuples, and the arrays of nested
    estimators and of objects with a ``_moved_copy(device)`` method (solver state records)."""
    if bk.is_array(obj):
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
    """Device handling for estimators with a ``device`` parameter, the fit setup, and the
    declared parameters (:class:`~gpuksvm.estimators.params.ParamsMixin`).  Fitting methods
    carry :func:`fit_context`."""

    def _device(self) -> bk.Device:
        return bk.resolve_device(getattr(self, "device", "auto"))

    def _resolved_kernel(self, X: Any) -> Kernel:
        """The kernel of the parameters ``kernel``, ``gamma``, ``degree``, ``coef0``; a
        data-dependent ``gamma`` (``"scale"``, ``"auto"``, ``"mean_dist"``) resolved on ``X``."""
        return make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X)

    def _fit_setup(self, X: Any, *, kernel: bool = True, dense: bool | str = False) -> FitSetup:
        """Device, dtype, random state, X on the device and the kernel of a fit on the validated ``X``.

        ``kernel=False``: no kernel (a linear model, or a kernel the caller
        resolves itself).  ``dense``: densify sparse X (``True``), only for a
        GPU (``"gpu"``), or never (``False``) — :func:`~gpuksvm.array.backend.compute_copy`.
        A data-dependent ``gamma`` is resolved on the compute-ready copy.
        """
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        Xd = bk.compute_copy(X, dev, dt, dense=dense)
        return FitSetup(device=dev, dtype=dt, random_state=check_random_state(self.random_state), X=Xd,
                        kernel=self._resolved_kernel(Xd) if kernel else None)

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
        return bk.compute_copy(X, self._fitted_device(), dtype, dense="gpu" if keep_sparse else True), kind

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
