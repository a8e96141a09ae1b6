"""Dask inputs of estimator methods: the mapping decorator, and the entry of the distributed fits.

Prediction-like methods whose first argument ``X`` may be a Dask collection
are decorated once::

    @dask_dispatch()                   # predict, transform, ...: mapped lazily
    def predict(self, X): ...

With a Dask ``X`` the method is mapped over the row chunks
(:func:`~gpuksvm.scaleout.predict.map_method`) and a dask array is returned;
any other ``X`` runs the method itself.

Fitting methods route a Dask ``X`` through their fit context
(:func:`gpuksvm.estimators.base.fit_context`), which validates the parameters
and keeps the previous model when the fit raises, then calls
:func:`route_fit`.  The public distributed fits (``fit_llsvm``, ``fit_cvm``,
``fit_svi``) are marked with :func:`distributed_fit`: called directly with a
Dask ``X`` they enter the estimator's ``fit`` (so its fit context), with the
given ``client`` for that call.  This module never imports an estimator
module (no import circle): it only calls the public ``fit`` of the object it
is given.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

from gpuksvm.scaleout.predict import map_method
from gpuksvm.scaleout.runtime import is_dask_collection

__all__ = ["dask_dispatch", "distributed_fit", "route_fit"]

Method = TypeVar("Method", bound=Callable[..., Any])

#: per thread: the estimator whose fit context is calling its distributed fit now (``routed``),
#: and the client a direct call of a distributed fit asked for (``client``)
_calls = threading.local()


def dask_dispatch() -> Callable[[Method], Method]:
    """Map the decorated method lazily over the row chunks of a Dask ``X``."""

    def decorate(method: Method) -> Method:
        name = method.__name__

        @functools.wraps(method)
        def dispatched(self: Any, X: Any = None, *args: Any, **kwargs: Any) -> Any:
            if is_dask_collection(X):
                return map_method(self, X, name)
            return method(self, X, *args, **kwargs)

        dispatched.dask_route = map_method  # type: ignore[attr-defined]
        return dispatched  # type: ignore[return-value]

    return decorate


def route_fit(distributed: Callable[..., Any], estimator: Any, X: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``distributed(estimator, X, *args, **kwargs)`` as the estimator's fit context's Dask route.

    The fit context has validated the parameters and holds the snapshot of
    the estimator; a :func:`distributed_fit` entry called from here runs its
    algorithm at once (with the ``client`` of an enclosing direct call).
    """
    previous = getattr(_calls, "routed", None)
    _calls.routed = estimator
    try:
        return distributed(estimator, X, *args, **kwargs)
    finally:
        _calls.routed = previous


def distributed_fit(function: Method) -> Method:
    """Mark ``function(estimator, X, ..., client=None, **options)`` as a public distributed fit.

    Called by the estimator's fit context (:func:`route_fit`), it runs.
    Called directly with a Dask ``X``, it calls ``estimator.fit(X, ...)``
    instead, so the fit is validated and all-or-nothing exactly as
    ``estimator.fit`` on a Dask ``X``; ``client`` is used for that call.
    Called directly with another ``X``, it runs (and refuses the input).
    """

    @functools.wraps(function)
    def entry(estimator: Any, X: Any, *args: Any, client: Any = None, **kwargs: Any) -> Any:
        if getattr(_calls, "routed", None) is estimator:
            _calls.routed = None           # consumed: a nested fit of another object routes anew
            if client is None:
                client = getattr(_calls, "client", None)
            return function(estimator, X, *args, client=client, **kwargs)
        if not is_dask_collection(X):
            return function(estimator, X, *args, client=client, **kwargs)
        previous = getattr(_calls, "client", None)
        _calls.client = client
        try:
            return estimator.fit(X, *args, **kwargs)
        finally:
            _calls.client = previous

    return entry  # type: ignore[return-value]
