"""The functions of ``gpuksvm.distributed``, the previous name of :mod:`gpuksvm.scaleout` (removed in the next release).

``import gpuksvm.distributed`` loads this module with a FutureWarning (:mod:`gpuksvm._moved`);
its names keep working for one release.  Call the estimators' methods with a dask array instead.
"""
from __future__ import annotations

from typing import Any

from gpuksvm.scaleout import DistributedFitError, fit_cvm, fit_llsvm, fit_svi, is_dask_collection, map_method

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
