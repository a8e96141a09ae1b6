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
and keeps the previous model when the fit raises, then calls the distributed
fit it names.  The public distributed fits (``fit_llsvm``, ``fit_cvm``,
``fit_svi``) build their Dask row source and call the estimator's public
``fit``, so a direct call enters the same fit context.  This module never
imports an estimator module (no import circle).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from gpuksvm.scaleout.predict import map_method
from gpuksvm.scaleout.runtime import is_dask_collection

__all__ = ["dask_dispatch"]

Method = TypeVar("Method", bound=Callable[..., Any])

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
