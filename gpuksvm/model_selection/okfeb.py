"""The shared-work search engine of OK-FEB's learners: the extractor's passes once per fold and setting.

:func:`search_okfeb` is the engine the cross-validated searches use for
:class:`~gpuksvm.estimators.okfeb.OKFEBClassifier` and
:class:`~gpuksvm.estimators.okfeb.OKFEBRegressor`.  Their extractor does not
read the linear learner's parameters
(:func:`~gpuksvm.estimators.okfeb.learner_params`: ``alpha`` and
``fit_intercept``; the regressor's ``alpha``, ``learning_rate`` and
``normalize``), so candidates are grouped by every other parameter, and within
a group each fold is one call of :func:`~gpuksvm.estimators.okfeb.fit_okfeb_grid`
on its training rows: the extractor streams the rows once (and, for
``solver="exact"``, forms every row's final features once), and only the
learners — each one's exact solve or online steps, and its capacity check —
run per candidate.  With an int ``random_state`` each model equals
``clone(estimator).set_params(**candidate).fit(X[train], y[train])``.

A group of one candidate (a grid over the extractor's parameters, such as
``gamma`` or ``rank``) has nothing to share: its fits are independent, and its
``shared_work`` says so.  So does a fold whose shared fit raised (each of its
candidates is then fitted apart and reports its own error).  Nothing is shared
across folds (``splits_apart``): the folds run on the search's ``n_jobs``
threads.
"""
from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

import numpy as np

from gpuksvm.estimators.okfeb import OKFEBClassifier, OKFEBRegressor, fit_okfeb_grid, learner_params
from gpuksvm.model_selection.shared import SplitFit, group_candidates, independent_fits, take

__all__ = ["search_okfeb", "SHARED"]

SHARED = "the extractor's passes and features per fold, shared by the learner's settings"


def search_okfeb(estimator: OKFEBClassifier | OKFEBRegressor, X: Any, y: Any,
                 splits: Sequence[tuple[np.ndarray, np.ndarray]], candidates: Sequence[dict], *,
                 sample_weight: Any = None) -> Iterator[SplitFit]:
    """One fitted model per (candidate, split), the candidates that differ only in the learner's
    parameters sharing the extractor's passes.

    Parameters
    ----------
    estimator : OKFEBClassifier or OKFEBRegressor
        The unfitted template (not modified).
    X : (n, d) validated array or CSR matrix, all rows
    y : (n,) labels or targets
    splits : list of (train_idx, test_idx)
    candidates : list of parameter dicts
    sample_weight : not taken by OK-FEB's learners: given, every fit is independent (and
        raises, as the estimator's own ``fit`` does)

    Yields
    ------
    SplitFit
        One per (candidate, split), in no particular order; ``fit_time`` is an equal share of
        the fold's shared fit among its candidates.
    """
    learner = learner_params(estimator)
    groups = group_candidates(estimator, candidates, learner)
    all_splits = list(range(len(splits)))
    for template, members in groups:
        if sample_weight is not None or len(members) == 1:
            reason = ("sample_weight given" if sample_weight is not None
                      else f"no other candidate differs only in {', '.join(learner)}")
            yield from independent_fits(estimator, X, y, splits, candidates, members, all_splits, sample_weight,
                                        reason)
            continue
        settings = [{k: candidates[c][k] for k in learner if k in candidates[c]} for c in members]
        for s, (train, _) in enumerate(splits):
            start = time.perf_counter()
            try:
                models = fit_okfeb_grid(take(X, train), take(y, train), estimator=template, settings=settings)
            except Exception as exc:  # noqa: BLE001 - each fit reports its own error
                yield from independent_fits(estimator, X, y, splits, candidates, members, [s], sample_weight,
                                            f"the shared fit failed ({type(exc).__name__})")
                continue
            share = (time.perf_counter() - start) / len(models)
            for c, model in zip(members, models):
                yield SplitFit(candidate=c, split=s, estimator=model, fit_time=share, shared=SHARED)


search_okfeb.splits_apart = True   # nothing is shared across folds: run_engine runs them on n_jobs threads
