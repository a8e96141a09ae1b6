"""The shared-work search engine of SVI: the exact SVMs of small folds along the C path.

:func:`search_svi` is the engine the cross-validated searches use for
:class:`~gpuksvm.estimators.svi.SVI`.  Below ``n_subsets`` × ``min_subset_rows``
rows (10,000 by default) SVI fits no sub-SVM ensemble: it solves the exact SVM,
so most searches of SVI on such data are searches of the exact SVM.  There the
engine groups the candidates by every parameter but ``gamma`` and ``C``, solves
every fold's exact SVM of each binary problem (the one-vs-one pairs, or each class against the
rest) at all the group's γ and C values in one call per problem
(:func:`~gpuksvm.solvers.svi.algorithm.exact_paths`: a γ's kernel rows of all rows
once for every fold and C — the compiled SMO on the Gram matrix within the
memory budget, as KernelSVC's engine —, each C from the solution of the one
below it), and fits each candidate's SVI model with its solution
(:func:`~gpuksvm.estimators.svi.fit_svi_grid`): the same model as its own fit to
the solver tolerance.

Everything else — a fold without every class, folds large enough for the ensemble,
``probability=True``, a GPU, a step cap, a kernel that is not named, a γ that is
not a number, ``sample_weight`` — is fitted independently, and ``shared_work``
says why.  The path solver runs the (fold, C) problems on the search's ``n_jobs`` threads.

Folds large enough for the ensemble are fitted independently because sharing did not pay there.
Measured and not used (ijcnn1, 15,000 random rows, folds of 12,000, γ ∈ {0.5, 2} × C ∈ {1, 8, 64},
5 folds, default memory budget, 2-core VM): each setting's ensemble, margin model and check
fitted as its own fit does, and the exact SVMs of the problems whose check failed (5 of the 6
settings on the fold profiled) solved per (fold, γ) along their failed C values by
``exact_paths``: 57.0 s against 54.7 s for scikit-learn's search over SVI, the same scores.  The ensemble stages depend on C and take
most of a fit (at C = 1 the margin system alone 1.1 s of 2.8 s), and at 12,000 rows the exact
path is no faster than LIBSVM: its Gram matrix (1.15 GB) does not fit the budget, and the active-set
engine took 2.58 and 3.67 s for three C values where three LIBSVM fits took 2.37 and 2.44 s
(about 2,000 support vectors against a kernel-row cache of 2,796 rows); with a 4 GB budget the
Gram matrix, computed for two or three failed C values of a γ, made the grid slower still.
"""
from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.estimators.svi import SVI, fit_svi_grid, grid_kernels, grid_unsupported
from gpuksvm.model_selection.shared import (SplitFit, group_candidates, independent_fits, is_positive_number,
                                             take)
from gpuksvm.solvers.multiclass import binary_problems, problem_rows
from gpuksvm.solvers.svi.algorithm import exact_paths

__all__ = ["search_svi", "SHARED"]

SHARED = "the exact SVM's kernel rows per (fold, γ); alpha seeding along C"


def search_svi(estimator: SVI, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
               candidates: Sequence[dict], *, sample_weight: Any = None,
               n_jobs: int | None = None) -> Iterator[SplitFit]:
    """One fitted SVI per (candidate, split), the exact SVMs of small folds solved along C.

    Parameters
    ----------
    estimator : SVI
        The unfitted template (not modified).
    X : (n, d) validated array or CSR matrix, all rows
    y : (n,) labels
    splits : list of (train_idx, test_idx)
    candidates : list of parameter dicts
    sample_weight : not taken by SVI: given, every fit is independent (and raises, as its own
        ``fit`` does)
    n_jobs : threads of the path solver (:func:`~gpuksvm.solvers.smo.path.solve_grids`)

    Yields
    ------
    SplitFit
        One per (candidate, split), in no particular order; ``fit_time`` is an equal share of
        the group's shared solve among its fits, plus the fit's own time.
    """
    groups = group_candidates(estimator, candidates, ("gamma", "C"))
    settings = {c: (cand.get("gamma", estimator.gamma), cand.get("C", estimator.C))
                for c, cand in enumerate(candidates)}
    y = np.asarray(y)
    classes, yidx = np.unique(y, return_inverse=True)
    for template, members in groups:
        reason = ("sample_weight given" if sample_weight is not None
                  else None if all(is_positive_number(settings[c][0]) and is_positive_number(settings[c][1])
                                   for c in members)
                  else "gamma or C is not a positive number")
        shared = []
        for s, (train, _) in enumerate(splits):
            missing = classes.size - np.unique(yidx[train]).size
            why = reason or (f"{missing} class(es) missing from the fold" if missing
                             else grid_unsupported(template, X, len(train)))
            if why is not None:
                yield from independent_fits(estimator, X, y, splits, candidates, members, [s], sample_weight, why)
            else:
                shared.append(s)
        if not shared:
            continue
        by_gamma: dict[float, list[int]] = {}
        for c in members:
            by_gamma.setdefault(float(settings[c][0]), []).append(c)
        gammas = list(by_gamma)
        Cs = [sorted({float(settings[c][1]) for c in by_gamma[g]}) for g in gammas]
        start = time.perf_counter()
        try:
            kernels = grid_kernels(template, gammas, X)
            Xh = bk.to_host(X)
            # every binary problem's exact SVM in every fold: one call per problem, on its rows of X;
            # a fold's rows of the problem in the order its own fit has them (X[train]'s order)
            paths = []
            for pos, neg in binary_problems(int(classes.size), template.multi_class):
                rows, labels = problem_rows(yidx, pos, neg)
                inside = np.zeros(yidx.size, dtype=bool)
                inside[rows] = True
                folds = [np.searchsorted(rows, np.asarray(splits[s][0])[inside[splits[s][0]]]) for s in shared]
                paths.append(exact_paths(bk.take_rows(Xh, rows), labels, kernels, folds, Cs,
                                         tol=float(template.tol), n_jobs=n_jobs))
        except Exception as exc:  # noqa: BLE001 - each fit reports its own error
            yield from independent_fits(estimator, X, y, splits, candidates, members, shared, sample_weight,
                                        f"the shared fit failed ({type(exc).__name__})")
            continue
        solve_share = (time.perf_counter() - start) / (len(members) * len(shared))
        for f, s in enumerate(shared):
            train = splits[s][0]
            for k, g in enumerate(gammas):
                start = time.perf_counter()
                try:
                    models = fit_svi_grid(take(X, train), take(y, train), gammas=[g], Cs=Cs[k], estimator=template,
                                          paths=[[problem[k][f]] for problem in paths])
                except Exception as exc:  # noqa: BLE001 - each fit reports its own error
                    yield from independent_fits(estimator, X, y, splits, candidates, by_gamma[g], [s], sample_weight,
                                                f"the shared fit failed ({type(exc).__name__})")
                    continue
                own = (time.perf_counter() - start) / len(models)
                fitted = dict(zip(Cs[k], models))
                for c in by_gamma[g]:
                    model = fitted[float(settings[c][1])]
                    # the candidate's own values (an int C stays an int, as set_params would leave it)
                    model.set_params(gamma=settings[c][0], C=settings[c][1])
                    yield SplitFit(candidate=c, split=s, estimator=model, fit_time=solve_share + own, shared=SHARED)


search_svi.takes_n_jobs = True   # run_engine passes the search's n_jobs to the path solver
