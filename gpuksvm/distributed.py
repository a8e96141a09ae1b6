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


def predict(estimator: Any, X: Any) -> Any:
    """Lazy ``estimator.predict`` over a dask array."""
    return map_method(estimator, X, "predict")


def decision_function(estimator: Any, X: Any) -> Any:
    """Lazy ``estimator.decision_function`` over a dask array."""
    return map_method(estimator, X, "decision_function")


def transform(estimator: Any, X: Any) -> Any:
    """Lazy ``estimator.transform`` over a dask array."""
    return map_method(estimator, X, "transform")


def predict_proba(estimator: Any, X: Any) -> Any:
    """Lazy ``estimator.predict_proba`` over a dask array."""
    return map_method(estimator, X, "predict_proba")


def predict_log_proba(estimator: Any, X: Any) -> Any:
    """Lazy ``estimator.predict_log_proba`` over a dask array."""
    return map_method(estimator, X, "predict_log_proba")


def score_samples(estimator: Any, X: Any) -> Any:
    """Lazy ``estimator.score_samples`` over a dask array (one-class models)."""
    return map_method(estimator, X, "score_samples")
