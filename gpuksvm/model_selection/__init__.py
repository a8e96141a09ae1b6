"""Cross-validated model selection that shares work across folds and settings.

:class:`GridSearchCV` and :class:`HalvingGridSearchCV` are scikit-learn's
searches; for a gpuksvm estimator their ``fit`` goes through the estimator's
search engine (:mod:`gpuksvm.model_selection.shared`), any other estimator is
searched by scikit-learn unchanged.
"""
from __future__ import annotations

from gpuksvm.model_selection.search import GridSearchCV, HalvingGridSearchCV
from gpuksvm.model_selection.shared import SplitFit, register_engine

__all__ = ["GridSearchCV", "HalvingGridSearchCV", "SplitFit", "register_engine"]
