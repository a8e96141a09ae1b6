"""The shared-work search engine of :class:`~gpuksvm.estimators.llsvm.LLSVM`.

Per fold, the candidates that differ only in ``gamma`` and ``C`` are one
:func:`~gpuksvm.estimators.llsvm.fit_llsvm_grid` call: the sample and the
landmarks once (k-means does not depend on γ or C, and with the estimator's
``random_state`` they are an independent fit's landmarks), the maps of all γ
from one batched eigendecomposition, the features once per γ, and the linear
SVM per (γ, C).  Candidates that differ in any other parameter are grouped by
it; a group the grid cannot share (a kernel given as an object or ``"linear"``,
a data-dependent ``gamma`` such as ``"scale"``) is fitted independently, which
the :class:`~gpuksvm.model_selection.shared.SplitFit` records in ``shared``.
"""
from __future__ import annotations

import time
from numbers import Real
from typing import Any, Iterator, Sequence

import numpy as np
from sklearn.base import clone

from gpuksvm.estimators.llsvm import fit_llsvm_grid
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.model_selection.shared import SplitFit

__all__ = ["search_llsvm"]

_GRID = ("gamma", "C")
_SHARED = "landmarks; batched eigh; features per gamma"


def _group_key(estimator: Any, params: dict) -> tuple:
    """The parameters other than γ and C of one candidate (its group)."""
    full = clone(estimator).set_params(**params).get_params(deep=False)
    return tuple(sorted((k, repr(v)) for k, v in full.items() if k not in _GRID))


def _shareable(estimator: Any, group: Sequence[dict]) -> bool:
    """A grid over numeric γ of a kernel given by name (what :func:`fit_llsvm_grid` fits)."""
    proto = clone(estimator).set_params(**group[0])
    if isinstance(proto.kernel, Kernel) or proto.kernel not in ("rbf", "poly"):
        return False
    return all(isinstance(clone(estimator).set_params(**c).gamma, Real)
               and not isinstance(clone(estimator).set_params(**c).gamma, bool) for c in group)


def _independent(estimator: Any, X: Any, y: Any, sw: Any, splits: Sequence, cands: Sequence[tuple[int, dict]],
                 why: str, which: Sequence[int] | None = None) -> Iterator[SplitFit]:
    """Independent fits of ``cands`` on the splits numbered ``which`` (default all)."""
    for s in range(len(splits)) if which is None else which:
        train = splits[s][0]
        for c, params in cands:
            t0 = time.perf_counter()
            try:
                est = clone(estimator).set_params(**params)
                est.fit(X[train], y[train], sample_weight=None if sw is None else sw[train])
                yield SplitFit(c, s, est, time.perf_counter() - t0, shared=f"none ({why})")
            except Exception as exc:  # the search applies error_score
                yield SplitFit(c, s, None, time.perf_counter() - t0, error=exc, shared=f"none ({why})")


def search_llsvm(estimator: Any, X: Any, y: Any, splits: Sequence, candidates: Sequence[dict], *,
                 sample_weight: Any = None) -> Iterator[SplitFit]:
    """Fit every (candidate, split) of a search over an LLSVM, sharing work per fold.

    Parameters
    ----------
    estimator : LLSVM
        The unfitted template (not modified).
    X, y : the full data (X dense or CSR)
    splits : list of (train_idx, test_idx)
    candidates : list of parameter dicts
    sample_weight : array-like, optional

    Yields
    ------
    SplitFit
        One per (candidate, split); its estimator equals
        ``clone(estimator).set_params(**candidates[c]).fit(X[train], y[train])``
        to the linear solver's tolerance.  ``fit_time``: the fold's grid time
        divided equally among its fits.
    """
    sw = None if sample_weight is None else np.asarray(sample_weight)
    groups: dict[tuple, list[tuple[int, dict]]] = {}
    for c, params in enumerate(candidates):
        groups.setdefault(_group_key(estimator, params), []).append((c, dict(params)))
    for cands in groups.values():
        if not _shareable(estimator, [p for _, p in cands]):
            yield from _independent(estimator, X, y, sw, splits, cands,
                                    "kernel object, 'linear' or data-dependent gamma")
            continue
        base = clone(estimator).set_params(**{k: v for k, v in cands[0][1].items() if k not in _GRID})
        gammas = sorted({float(clone(base).set_params(**p).gamma) for _, p in cands})
        Cs = sorted({float(clone(base).set_params(**p).C) for _, p in cands})
        for s, (train, _) in enumerate(splits):
            t0 = time.perf_counter()
            try:
                models = fit_llsvm_grid(X[train], y[train], gammas=gammas, Cs=Cs, estimator=base,
                                        sample_weight=None if sw is None else sw[train])
            except Exception:  # one fit's failure must not fail its neighbours: refit them alone
                yield from _independent(estimator, X, y, sw, splits, cands, "shared fit failed", [s])
                continue
            share = (time.perf_counter() - t0) / len(models)
            by_grid = {(m.gamma, m.C): m for m in models}
            for c, params in cands:
                proto = clone(base).set_params(**params)
                model = by_grid[(float(proto.gamma), float(proto.C))]
                yield SplitFit(c, s, _with_params(model, proto), share, shared=_SHARED)


def _with_params(model: Any, proto: Any) -> Any:
    """The grid's fitted model with the candidate's parameters as given (e.g. an int C stays an int)."""
    return model.set_params(gamma=proto.gamma, C=proto.C)
