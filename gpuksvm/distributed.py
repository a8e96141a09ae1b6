"""Deprecated alias of :mod:`gpuksvm.scaleout` (removed in the next release).

The Dask layer is the package :mod:`gpuksvm.scaleout`, one module per method;
this module's old names keep working for one release with a FutureWarning.
"""
from __future__ import annotations

import warnings
from typing import Any

from .scaleout import DistributedFitError, fit_cvm, fit_llsvm, fit_svi, is_dask_collection, map_method

warnings.warn("gpuksvm.distributed is deprecated and will be removed in the next release; "
              "use gpuksvm.scaleout (or call the estimators' methods with a dask array)",
              FutureWarning, stacklevel=2)

__all__ = ["DistributedFitError", "decision_function", "fit_cvm", "fit_llsvm", "fit_svi", "is_dask_collection",
           "predict", "predict_log_proba", "predict_proba", "score_samples", "transform"]


def _lazy(method: str):
    def apply(estimator: Any, X: Any) -> Any:
        return map_method(estimator, X, method)

    apply.__name__ = apply.__qualname__ = method
    apply.__doc__ = f"Lazy ``estimator.{method}`` over a dask array (deprecated: call the method itself)."
    return apply


predict = _lazy("predict")
decision_function = _lazy("decision_function")
transform = _lazy("transform")
predict_proba = _lazy("predict_proba")
predict_log_proba = _lazy("predict_log_proba")
score_samples = _lazy("score_samples")
