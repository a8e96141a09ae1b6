"""The shared-work search engine of KernelSVC: every fold and C value of a kernel solved together.

:func:`search_kernel_svc` is the engine the cross-validated searches use for
:class:`~gpuksvm.estimators.kernel_svc.KernelSVC`.  Candidates are grouped by
every parameter but ``C``; within a group the folds that resolve to the same
kernel (all of them, unless a data-dependent γ such as ``"scale"`` differs
between folds) are solved in one call into the solver layer:

* CPU (``solver`` ``"auto"`` or ``"libsvm"``): every kernel of every setting
  in one call of :func:`gpuksvm.solvers.smo.path.solve_grids` — the kernel
  rows computed once for all folds and C values, the (kernel, fold) paths in
  parallel threads; where numba is installed (the ``fast`` extra) and the
  Gram matrix of all rows fits the memory budget, a compiled SMO on that
  matrix, each fold's smallest C from α = 0 and every other from the previous
  C's solution, scaled or as it is (:data:`SHARED_CPU_GRAM` in
  ``cv_results_["shared_work"]``), else LIBSVM on active sets seeded by the previous C's and the previous fold's solution
  (:data:`SHARED_CPU`).  Measured (random 5,000 ijcnn1 rows, γ ∈ {0.5, 1, 2}
  × 8 C, 5 folds, 2-core host shared with other work, load average ≈ 3.5,
  one process, so one thread; before the seeds and the held-out values): the
  compiled SMO searches took 9.5 and 10.2 s, the active-set LIBSVM search
  between them 11.2 s, the same ``mean_test_score`` — the compiled SMO takes
  LIBSVM's steps (see :mod:`gpuksvm.solvers.smo.path`) without LIBSVM's
  per-call overhead and the active set's rounds.  With dense float64 rows the
  compiled SMO's fold models carry their decision values on the held-out
  fold, computed once per fold for all C values
  (:class:`~gpuksvm.solvers.smo.svc.HeldOutDecisions`): scoring a fold model
  reads them instead of evaluating its kernel rows again.  On active sets, a
  binary problem whose support vectors outnumber the kernel rows the budget
  caches is solved by one LIBSVM fit on its rows, as an independent fit is
  (:data:`SHARED_WHOLE` appended to its fold model's ``shared_work``, one
  warning for the search: see :func:`gpuksvm.solvers.smo.path.solve_grids`);
* GPU (``solver`` ``"auto"`` or ``"working_set"``):
  :func:`gpuksvm.solvers.smo.path.solve_grid_batched` — all folds × C values ×
  pairs in one batched working-set call.

Each model equals ``clone(estimator).set_params(**candidate).fit(X[train],
y[train], sample_weight=sw[train])`` to the solver tolerance (same dual
problem, same stopping rule).  A binary problem the compiled SMO stops at its
step cap (:data:`gpuksvm.solvers.smo.gram_smo.MAX_ITER`, LIBSVM's) gives one
``ConvergenceWarning`` for the search, and its candidate's
``shared_work`` says NOT CONVERGED (:data:`SHARED_CAPPED`).  Anything else falls back to independent fits,
said in the :class:`~gpuksvm.model_selection.shared.SplitFit`'s ``shared``:
``probability=True`` (Platt scaling runs its own internal CV; the search
calibrates from out-of-fold values itself), callable and precomputed kernels,
``max_iter`` ≠ −1 (an iteration cap counts another solver's steps),
``solver="smo"`` or the working-set solver on the CPU, C = inf, and a fold
that lacks a class or a positive weight for one (the fit raises its own error).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from gpuksvm.array import backend as bk
from gpuksvm.array.validation import encode_classes
from gpuksvm.estimators.kernel_svc import KernelSVC, svc_row_weights
from gpuksvm.kernels.kernel import make_kernel
from gpuksvm.model_selection.shared import SplitFit, group_candidates, independent_fits, is_positive_number
from gpuksvm.solvers.smo import gram_smo
from gpuksvm.solvers.smo.path import (ENGINE_GRAM, GridJob, GridProblem, GridSolution, solve_grid_batched,
                                      solve_grids)

__all__ = ["search_kernel_svc"]

_KERNELS = ("linear", "poly", "rbf", "sigmoid")
SHARED_CPU = "kernel rows; alpha seeding along C and across folds"
SHARED_CPU_GRAM = "the Gram matrix of all rows (compiled SMO); alpha seeding along C"
SHARED_GPU = "kernel rows; all folds and C values in one batched working-set call"
#: appended to SHARED_CPU_GRAM for a fold model with a binary problem stopped at the step cap
SHARED_CAPPED = " — NOT CONVERGED: a binary problem stopped at the compiled SMO's step cap"
#: appended to SHARED_CPU for a fold model with a binary problem solved by one LIBSVM fit on its rows
SHARED_WHOLE = (" — a binary problem solved by one LIBSVM fit on its rows: its support vectors outnumbered the "
                "kernel rows the memory budget caches")


def _warn_capped(sols: Sequence[GridSolution]) -> None:
    """One ConvergenceWarning for the search when the compiled SMO stopped binary problems at its
    step cap (their fold models are recorded in ``cv_results_["shared_work"]``)."""
    capped = sum(k for sol in sols for row in sol.capped for k in row)
    if capped:
        models = sum(k > 0 for sol in sols for row in sol.capped for k in row)
        warnings.warn(f"The compiled SMO stopped {capped} binary problem(s) of {models} fold model(s) at its "
                      f"step cap (max_iter={gram_smo.MAX_ITER:,}) before the optimality gap reached tol: those models are "
                      "not converged; cv_results_['shared_work'] names their candidates.",
                      ConvergenceWarning, stacklevel=3)


def _warn_whole(sols: Sequence[GridSolution]) -> None:
    """One UserWarning for the search when the active-set engine solved binary problems whole (its
    fold models are recorded in ``cv_results_["shared_work"]``)."""
    whole = sum(k for sol in sols for row in sol.whole for k in row)
    if whole:
        warnings.warn(f"The shared engine solved {whole} binary problem(s) by one LIBSVM fit each, as "
                      "independent fits do: their support vectors outnumbered the kernel rows the memory "
                      "budget caches (the Gram matrix of all rows does not fit it); a larger "
                      "set_config(cpu_memory_budget=...) shares more. cv_results_['shared_work'] names "
                      "their candidates.", UserWarning, stacklevel=3)


def _fold_notes(sol: GridSolution) -> list[list[str]]:
    """What each fold model of a solved job says it did beyond the engine's sharing."""
    return [[(SHARED_CAPPED if capped else "") + (SHARED_WHOLE if whole else "")
             for capped, whole in zip(row_c, row_w)] for row_c, row_w in zip(sol.capped, sol.whole)]


def _unsupported(est: KernelSVC) -> str | None:
    """Why this parameter setting cannot use the shared engine (None: it can)."""
    if est.probability:
        return "probability=True (Platt scaling's internal CV)"
    if not (isinstance(est.kernel, str) and est.kernel in _KERNELS):
        return f"kernel={est.kernel!r}"
    if est.max_iter != -1:
        return "max_iter is set"
    gpu = bk.resolve_device(est.device).is_gpu
    if est.solver not in (("auto", "working_set") if gpu else ("auto", "libsvm")):
        return f"solver={est.solver!r} on the {'GPU' if gpu else 'CPU'}"
    return None


def _fold_weights(est: KernelSVC, y: np.ndarray, yidx: np.ndarray, classes: np.ndarray, tr: np.ndarray,
                  sample_weight: np.ndarray | None) -> np.ndarray | None:
    """Cᵢ/C of the fold's rows as KernelSVC.fit sets them (:func:`svc_row_weights`, negative weights
    as 0: those rows are left out); None when the fit would refuse the fold."""
    if np.unique(yidx[tr]).size != classes.size:
        return None
    try:
        _, _, w = svc_row_weights(est.class_weight, None if sample_weight is None else sample_weight[tr],
                                  yidx[tr], y[tr], classes, yidx[tr])
    except ValueError:
        return None
    return np.maximum(w, 0.0)


def search_kernel_svc(estimator: KernelSVC, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                      candidates: Sequence[dict], *, sample_weight: Any = None,
                      n_jobs: int | None = None) -> Iterator[SplitFit]:
    """One fitted KernelSVC per (candidate, split), sharing kernel rows and solutions.

    Parameters
    ----------
    estimator : KernelSVC
        The unfitted template (not modified).
    X : (n, d) validated array or CSR matrix, all rows
    y : (n,) labels
    splits : list of (train_idx, test_idx)
    candidates : list of parameter dicts
    sample_weight : (n,) array, optional
    n_jobs : int or None
        Threads of the CPU engine (the search's ``n_jobs``, as scikit-learn's: −1 is every
        core).  None: every core, or one while the 1-minute load average already fills them
        (:func:`gpuksvm.solvers.smo.path.solve_grids`).  An explicit value is obeyed whatever
        the load: ``python -m bench tune`` runs this search right after scikit-learn's
        two-process search has raised the load average, where the load rule's one thread took
        5.0 s for the ijcnn1 grid against 3.7 s on two threads on a quiet host.

    Yields
    ------
    SplitFit
        One per (candidate, split), in no particular order; ``fit_time`` is the
        fit's own solver time plus an equal share of its kernel's rows.
    """
    y = np.asarray(bk.to_host(y))
    sw = None if sample_weight is None else np.asarray(bk.to_host(sample_weight), dtype=np.float64)
    all_splits = list(range(len(splits)))
    jobs: list[_Job] = []
    for template, members in group_candidates(estimator, candidates, ("C",)):
        Cs = [clone(estimator).set_params(**candidates[c]).C for c in members]
        finite = [c for c, C in zip(members, Cs) if is_positive_number(C)]
        other = [c for c in members if c not in finite]
        if other:
            yield from independent_fits(estimator, X, y, splits, candidates, other, all_splits, sw,
                                    "C is not a finite positive number")
        if not finite:
            continue
        try:
            reason = _unsupported(template)
            planned, refused = ([], []) if reason else _plan(estimator, template, X, y, splits, finite,
                                                               candidates, sw)
        except Exception as exc:  # e.g. a device or γ the fit refuses: the fits say so themselves
            reason = f"{type(exc).__name__}: {exc}"
        if reason is not None:
            yield from independent_fits(estimator, X, y, splits, candidates, finite, all_splits, sw, reason)
        else:
            jobs.extend(planned)
            if refused:
                yield from independent_fits(estimator, X, y, splits, candidates, finite, refused, sw,
                                        "a fold lacks a class of positive weight")
    if not jobs:
        return
    classes, yidx = encode_classes(y)
    cpu = [j for j in jobs if not j.device.is_gpu]
    if cpu:   # every CPU job in one call: its threads balance folds of all kernels
        # LIBSVM computes in float64 whatever the dtype parameter (so does the CPU fit)
        sols = solve_grids(X, yidx, classes, [j.grid for j in cpu], n_jobs=n_jobs)
        _warn_capped(sols)
        _warn_whole(sols)
        for job, sol in zip(cpu, sols):
            share = sol.kernel_seconds / (len(job.splits) * len(job.members))
            own = [[t + share for t in row] for row in sol.seconds]
            shared = SHARED_CPU_GRAM if sol.engine == ENGINE_GRAM else SHARED_CPU
            yield from _wrap(estimator, X, y, splits, candidates, sw, job, sol.results, own, sol.error,
                             [[shared + note for note in row] for row in _fold_notes(sol)])
    for job in jobs:
        if not job.device.is_gpu:
            continue
        t0 = time.perf_counter()
        results, error = None, None
        try:
            results = solve_grid_batched(X, yidx, classes, job.grid.kernel, job.grid.folds, job.grid.Cs,
                                         tol=job.grid.tol, device=job.device, dtype=job.dtype)
        except Exception as exc:  # e.g. parameters the fit refuses: the fits say so themselves
            error = exc
        share = (time.perf_counter() - t0) / (len(job.splits) * len(job.members))
        yield from _wrap(estimator, X, y, splits, candidates, sw, job, results,
                         [[share] * len(job.members) for _ in job.splits], error, SHARED_GPU)


search_kernel_svc.takes_n_jobs = True   # run_engine passes the search's n_jobs


@dataclass
class _Job:
    """The candidates ``members`` (one setting but C) on the splits ``splits`` that resolve to one kernel."""

    template: KernelSVC
    members: list[int]
    splits: list[int]
    grid: GridJob
    device: bk.Device
    dtype: Any


def _plan(estimator: Any, template: KernelSVC, X: Any, y: np.ndarray, splits: Sequence, members: list[int],
          candidates: Sequence[dict], sw: np.ndarray | None) -> tuple[list[_Job], list[int]]:
    """The jobs of one setting (one per kernel its folds resolve to) and the splits it refuses."""
    classes, yidx = encode_classes(y)
    dev = bk.resolve_device(template.device)
    dt = bk.resolve_dtype(template.dtype, dev)
    Cs = [float(clone(estimator).set_params(**candidates[c]).C) for c in members]
    by_kernel: dict[Any, list[int]] = {}
    refused: list[int] = []
    folds: dict[int, GridProblem] = {}
    for s, (tr, _) in enumerate(splits):
        tr = np.asarray(tr, dtype=np.int64)
        w = _fold_weights(template, y, yidx, classes, tr, sw)
        if w is None:
            refused.append(s)
            continue
        folds[s] = GridProblem(rows=tr, weight=w, held_out=np.asarray(splits[s][1], dtype=np.int64))
        Xk = bk.take_rows(X, tr) if isinstance(template.gamma, str) else None
        kern = make_kernel(template.kernel, template.gamma, template.degree, template.coef0, Xk)
        by_kernel.setdefault(kern, []).append(s)
    jobs = [_Job(template=template, members=members, splits=ids, device=dev, dtype=dt,
                 grid=GridJob(kern, [folds[s] for s in ids], Cs, float(template.tol),
                              int(float(template.cache_size) * 2**20)))
            for kern, ids in by_kernel.items()]
    return jobs, refused


def _wrap(estimator: Any, X: Any, y: np.ndarray, splits: Sequence, candidates: Sequence[dict],
          sw: np.ndarray | None, job: _Job, results: list | None, own: list, error: BaseException | None,
          shared: str | list) -> Iterator[SplitFit]:
    """The SplitFits of a solved job (independent fits when its solve failed); ``shared``: what every
    fit reused, or shared[f][k] per fit."""
    if error is not None or results is None:
        yield from independent_fits(estimator, X, y, splits, candidates, job.members, job.splits, sw,
                                f"the shared engine failed ({type(error).__name__}: {error})")
        return
    # each candidate's parameters once, not once per fold (get_params inspects the signature): the
    # 120-fit ijcnn1 search made 473 get_params calls in 0.19 s against 857 in 0.33 s (cProfile,
    # load average 4-8 on the 2-core host)
    params = [clone(estimator).set_params(**candidates[c]).get_params(deep=False) for c in job.members]
    for f, s in enumerate(job.splits):
        Xtr = bk.take_rows(X, job.grid.folds[f].rows)
        for k, c in enumerate(job.members):
            est, err = None, None
            try:
                est = type(job.template).from_result(results[f][k], Xtr, job.grid.kernel, **params[k])
            except Exception as exc:   # e.g. a parameter the fit refuses
                err = exc
            yield SplitFit(candidate=c, split=s, estimator=est, fit_time=own[f][k], error=err,
                           shared=shared if isinstance(shared, str) else shared[f][k])
