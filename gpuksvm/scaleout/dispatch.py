"""One rule for Dask inputs: the :func:`dask_dispatch` decorator of estimator methods.

An estimator method whose first argument ``X`` may be a Dask collection is
decorated once::

    @dask_dispatch(fit_llsvm)          # fit: the distributed algorithm
    def fit(self, X, y=None, sample_weight=None): ...

    @dask_dispatch()                   # predict, transform, ...: mapped lazily
    def predict(self, X): ...

With a Dask ``X`` the first form calls ``fit_llsvm(self, X, *args, **kwargs)``
(a distributed fit of :mod:`gpuksvm.scaleout`, X never gathered); the second
maps the method over the row chunks (:func:`~gpuksvm.scaleout.predict.map_method`)
and returns a dask array.  Any other ``X`` runs the method itself.  The
decorated method's ``dask_route`` attribute names where a Dask ``X`` goes.  The
estimator modules import the distributed algorithms; the algorithms never
import an estimator module (no import circle).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from gpuksvm.scaleout.predict import map_method
from gpuksvm.scaleout.runtime import is_dask_collection

__all__ = ["dask_dispatch"]

Method = TypeVar("Method", bound=Callable[..., Any])


def dask_dispatch(distributed: Callable[..., Any] | None = None) -> Callable[[Method], Method]:
    """Route a Dask ``X`` to ``distributed(self, X, ...)``, or map the method lazily over its chunks."""

    def decorate(method: Method) -> Method:
        name = method.__name__

        @functools.wraps(method)
        def dispatched(self: Any, X: Any = None, *args: Any, **kwargs: Any) -> Any:
            if is_dask_collection(X):
                if distributed is not None:
                    return distributed(self, X, *args, **kwargs)
                return map_method(self, X, name)
            return method(self, X, *args, **kwargs)

        dispatched.dask_route = distributed if distributed is not None else map_method  # type: ignore[attr-defined]
        return dispatched  # type: ignore[return-value]

    return decorate
