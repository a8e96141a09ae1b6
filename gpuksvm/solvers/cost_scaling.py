"""Extreme costs: one factor for every cost when C·weight is beyond what the solvers represent.

When C·(sample weight × class weight) is so large that C·n·max‖x̃ᵢ‖² exceeds
1e13, the regularizer weighs less than 1e-13 of the loss's curvature: the
problem is numerically its C → ∞ limit (to far below any solver tolerance),
Newton's Hessian I + 2C·F̃ᵀDF̃ can no longer resolve its identity part in
float64, and beyond ~1e150 the products overflow (an unscaled C = 1e300 gives
an all-zero model).  Every cost is then multiplied by the same factor that brings
the product to that bound — relative weights are kept, the solution is the same
to the solver's tolerance — with a :class:`ScaledProblemWarning`; the
estimators record the factor as ``cost_scale_``.  Used by
:class:`~gpuksvm.estimators.linear_svm.LinearSVM` (in memory and out of core) and by the
Dask LLSVM fit (:mod:`gpuksvm.scaleout.llsvm`).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["ScaledProblemWarning", "extreme_cost_scale", "scaled_costs"]

#: C·n·max‖x̃‖² beyond which costs are scaled down (module docstring)
_COST_LIMIT = 1e13


class ScaledProblemWarning(UserWarning):
    """The costs were scaled down to the C → ∞ limit the solvers can represent (``cost_scale_``)."""


def extreme_cost_scale(C: float, top: float, n: int, r: float, *, owner: str = "LinearSVM",
                       stacklevel: int = 2) -> float:
    """Log of the factor that every cost C·weight is multiplied by (module docstring): 0.0 unless C·top·n·r > ``_COST_LIMIT``, else a
    :class:`ScaledProblemWarning` and the factor that brings the product to that bound.

    ``top`` is the largest weight (sample weight × class weight), ``n`` the number of
    rows and ``r`` max‖x̃ᵢ‖² (the constant column's s² included).  In log space: the
    product itself may overflow and the factor can be below 1e-308.
    """
    if not math.isfinite(r):
        raise ValueError(f"{owner}: the squared row norms of the features exceed float64 ({r}); "
                         "scale the features (e.g. sklearn.preprocessing.StandardScaler)")
    if top == 0.0 or r == 0.0:
        return 0.0
    log_load = math.log(C) + math.log(top) + math.log(n) + math.log(r)
    if log_load <= math.log(_COST_LIMIT):
        return 0.0
    log_scale = math.log(_COST_LIMIT) - log_load
    warnings.warn(f"{owner}: the costs C·weight (C={C:.3g}, weights up to {top:.3g}) make "
                  f"C·n·max‖x‖² = 1e{log_load / math.log(10):.0f}, far beyond what the solvers can "
                  f"represent; the problem is numerically its C → ∞ limit, so every cost was scaled "
                  f"by 1e{log_scale / math.log(10):.0f} (relative weights kept; see cost_scale_)",
                  ScaledProblemWarning, stacklevel=stacklevel + 1)
    return log_scale


def scaled_costs(C: float, S: np.ndarray, log_scale: float) -> tuple[float, np.ndarray]:
    """(C, multipliers S) with the factor exp(``log_scale``) of :func:`extreme_cost_scale`
    applied: C is folded into S, since C·S·factor is moderate even when C or S alone is not."""
    if log_scale == 0.0:
        return C, S
    with np.errstate(divide="ignore"):
        return 1.0, np.exp(np.log(S) + (math.log(C) + log_scale))
