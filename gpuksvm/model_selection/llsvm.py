"""The shared-work search engine of LLSVM: landmarks once per fold, maps and features once per (fold, γ).

:func:`search_llsvm` is the engine the cross-validated searches use for
:class:`~gpuksvm.estimators.llsvm.LLSVM`.  Candidates are grouped by every
parameter but ``gamma`` and ``C``; within a group, for every fold, one call of
:func:`~gpuksvm.estimators.llsvm.fit_llsvm_grid` on the fold's training rows
fits all its (γ, C) settings: k-means (which does not depend on γ or C) runs
once, the Nyström maps of all γ come from one batched eigendecomposition, the
features are formed once per γ, and only the linear SVM runs per (γ, C), each C after the
first from the previous C's weights and Hessian Grams (a
:class:`~gpuksvm.solvers.linear.newton_memory.NewtonPath`: its first Newton step adds only the
rows whose activity changed, where a fresh Gram sums every active row).  With
the template's ``random_state`` the landmarks, maps and LLSVM2's labelled
subset are those an independent fit draws, so each model equals
``clone(estimator).set_params(**candidate).fit(X[train], y[train])`` (the same
linear problem on the same features, solved from the same start).  The features
are validated once per (fold, γ), and the models of one γ keep the kernel rows
K(X_test, Z) of the rows they last predicted on, recognised by their contents: the
scorers of all C values on a held-out fold compute them once, and every
prediction is the one computed afresh (:func:`~gpuksvm.estimators.llsvm.fit_llsvm_grid`).

Nothing is shared across folds, so each fold is an engine call of its own
(``splits_apart``): the folds run on the search's ``n_jobs`` threads.  Measured
(``python -m bench.tune llsvm_ijcnn1``, quiet 2-core host, load average 0.6–0.9):
the search took 1.55–1.65 s with the folds on two threads against 2.00–2.10 s
with the folds in turn, scikit-learn's search over the same LLSVM 5.1–5.6 s.

Memory: a fold's grid fit holds one γ's features at a time, under the budget of its thread
(the search's ``cpu_memory_budget``, shared among its ``n_jobs`` threads) less what the fold
models hold — this fold's (estimated: a k × k map per γ and the landmarks) and every fold model the
engine has handed out that is still alive (the search holds them until it has scored them).
Where the features and the Newton solver's scratch do not fit what is left, that (fold, γ) is
fitted over kernel blocks streamed per Newton pass, to the same solution
(:meth:`~gpuksvm.estimators.llsvm.LLSVM.fit`'s own switch): its models' ``memory_fallback_`` is
``"streamed_features"``, their candidates' ``shared_work`` says so (:data:`SHARED_STREAMED`), and
the search warns once (one ``MemoryFallbackWarning``, whatever the number of such fits).
Measured (``python -m bench.memory --search '{"gamma": [1, 2], "C": [1, 8, 64]}' --estimators LLSVM
--budgets 200MB``: 20,000 ijcnn1 rows, k = 1,000, 5 folds, 2-core CPU): with the folds in turn
the search's VmHWM grew by 201–203 MB against the bound's 232 MB (271–272 MB while a γ's features
were kept until the next γ's were formed), in 15.5–19.6 s; on 2 threads each fold streams (its
thread's 100 MB less the fold models does not hold F and the scratch, 128 MB) and the engine grew
it by 226 MB, the search with its refit by 249–307 MB over two runs (the threads' freed C heap
stays resident while the refit runs; 225 MB where it is handed back first; 322–347 MB before), in
69–112 s at load averages 1.7–2.6 (the folds in turn, in memory, are 4–6 times faster).  So the
folds run on threads only as many at once as hold their features in memory (``unit_bytes``), and
one at a time, each streaming with the whole budget, where a fold's features do not fit the whole
budget either (:func:`~gpuksvm.model_selection.shared.run_engine`).

Settings ``fit_llsvm_grid`` does not take fall back to independent fits, said
in the :class:`~gpuksvm.model_selection.shared.SplitFit`'s ``shared``: a
kernel given as a :class:`~gpuksvm.kernels.kernel.Kernel` or ``"linear"``, and
a γ that is not a number (``"scale"``, ``"auto"``: resolved per fold by the fit).
"""
from __future__ import annotations

import threading
import time
import warnings
import weakref
from typing import Any, Iterator, Sequence

import numpy as np
from sklearn.base import clone

from gpuksvm.array import backend as bk
from gpuksvm.estimators.llsvm import LLSVM, fit_llsvm_grid
from gpuksvm.solvers.nystrom.llsvm import in_memory_bytes
from gpuksvm.model_selection.shared import (SplitFit, group_candidates, independent_fits, is_positive_number,
                                             take)

__all__ = ["search_llsvm"]

SHARED = "landmarks per fold; maps, features and held-out kernel rows per (fold, γ); Newton's Grams along C"
#: appended to :data:`SHARED` for a fold model whose features were streamed (the memory budget)
SHARED_STREAMED = (" — F streamed per Newton pass: the features and the Newton solver's scratch did not fit "
                   "the memory budget")

#: the fold models handed out and still alive → their share of their arrays' host bytes
_HELD: "weakref.WeakKeyDictionary[LLSVM, int]" = weakref.WeakKeyDictionary()
#: the search templates whose search has warned of streamed features
_WARNED: "weakref.WeakSet[LLSVM]" = weakref.WeakSet()
_LOCK = threading.Lock()


def _held_bytes() -> int:
    """Host bytes of the fold models this engine has handed out that are still alive."""
    with _LOCK:
        return int(sum(list(_HELD.values())))


def _hold(models: Sequence[LLSVM]) -> None:
    """Count the host arrays of one fold's models (each buffer once) until the models are gone."""
    arrays = {id(a): int(a.nbytes) for m in models
              for a in (m.landmarks_, m.map_, m.eigvals_, m.spectrum_, m.coef_, m.dual_coef_, m.intercept_)
              if isinstance(a, np.ndarray)}
    share = sum(arrays.values()) // max(len(models), 1)
    with _LOCK:
        for m in models:
            _HELD[m] = share


#: what a fold's fit on a worker thread of the search holds beyond its blocks: the C heap of its
#: own (glibc gives each thread an arena; what one thread frees the others cannot reuse) and its
#: fragmentation.  Measured (2-core x86-64, glibc, 20,000 synthetic rows, k = 300, 3 folds, budget
#: 24 MB): the engine's VmHWM growth with the folds on 2 threads was 54.6 MB against 36.8 MB with
#: the folds in turn at the same total budget, and 42.6 MB on 2 threads with MALLOC_ARENA_MAX=1.
THREAD_HEAP_BYTES = 10_000_000


def _n_landmarks(template: LLSVM, n_rows: int) -> int:
    """k of a fit of ``template`` on ``n_rows`` rows."""
    landmarks = template.landmarks
    return len(landmarks) if not isinstance(landmarks, str) else min(int(template.n_landmarks), int(n_rows))


def _fold_bytes(estimator: LLSVM, X: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                candidates: Sequence[dict]) -> int:
    """The memory one fold's grid fit needs to hold its features in memory (the run_engine protocol's
    ``unit_bytes``): F and the Newton solver's scratch
    (:func:`~gpuksvm.solvers.nystrom.llsvm.in_memory_bytes`, the rule of the fit's own switch to
    streamed features), for the largest fold and k, and :data:`THREAD_HEAP_BYTES`; 0 on a GPU (its budget follows the free device memory)."""
    if bk.device_for(estimator.device, X).is_gpu:
        return 0
    rows = max((len(train) for train, _ in splits), default=0)
    templates = [clone(estimator).set_params(**cand) for cand in candidates] or [estimator]
    k = max(_n_landmarks(t, rows) for t in templates)
    itemsize = max(np.dtype(bk.resolve_dtype(t.dtype, "cpu")).itemsize for t in templates)
    return in_memory_bytes(rows, k, itemsize) + THREAD_HEAP_BYTES


def _fold_budget(template: LLSVM, X: Any, n_rows: int, n_gammas: int) -> int | None:
    """The CPU budget of one fold's grid fit: the thread's, less the estimate of this fold's models
    (a k × k map per γ and the k landmarks; ``n_rows`` training rows), the fold models still alive
    and, on a worker thread, :data:`THREAD_HEAP_BYTES`; at least a quarter of the thread's.  None for
    a fit on a GPU (its budget follows the free device memory)."""
    if bk.device_for(template.device, X).is_gpu:
        return None
    budget = bk.memory_budget("cpu")
    worker = THREAD_HEAP_BYTES if threading.current_thread() is not threading.main_thread() else 0
    k = _n_landmarks(template, n_rows)
    itemsize = np.dtype(bk.resolve_dtype(template.dtype, "cpu")).itemsize
    own = (n_gammas * k * k + k * int(X.shape[1])) * itemsize
    return max(budget - own - _held_bytes() - worker, budget // 4)


def _warn_streamed(template: LLSVM, models: Sequence[LLSVM], rows: int) -> None:
    """One MemoryFallbackWarning per search (its template) for the fold models whose features streamed."""
    if not any(m.memory_fallback_ == "streamed_features" for m in models):
        return
    with _LOCK:
        if template in _WARNED:
            return
        _WARNED.add(template)
    k = int(models[0].n_landmarks_)
    warnings.warn(f"LLSVM search: the features F of a fold ({rows} x {k}) and the Newton solver's scratch did not "
                  f"fit the memory budget left to the fold's fit ({bk.memory_budget('cpu') / 1e6:.0f} MB): such fold "
                  "models were fitted over kernel blocks recomputed in every Newton pass (the out-of-core path; "
                  "the same solution, slower); cv_results_['shared_work'] names their candidates",
                  bk.MemoryFallbackWarning, stacklevel=3)


def _unsupported(template: LLSVM, gammas: Sequence[Any], Cs: Sequence[Any]) -> str | None:
    """Why a group cannot share work (None: it can)."""
    if not (isinstance(template.kernel, str) and template.kernel in ("rbf", "poly")):
        return f"kernel={template.kernel!r}"
    if not all(is_positive_number(g) for g in gammas):
        return "gamma is not a positive number"
    if not all(is_positive_number(c) for c in Cs):
        return "C is not a finite positive number"
    return None


def _batches(members: Sequence[int], settings: dict[int, tuple[float, float]]) -> list[list[int]]:
    """The candidates of a group as γ × C products: γ values with the same set of C values go together."""
    by_gamma: dict[float, list[int]] = {}
    for c in members:
        by_gamma.setdefault(settings[c][0], []).append(c)
    by_Cs: dict[tuple[float, ...], list[int]] = {}
    for cands in by_gamma.values():
        by_Cs.setdefault(tuple(sorted({settings[c][1] for c in cands})), []).extend(cands)
    return list(by_Cs.values())


def search_llsvm(estimator: LLSVM, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                 candidates: Sequence[dict], *, sample_weight: Any = None) -> Iterator[SplitFit]:
    """One fitted LLSVM per (candidate, split), sharing landmarks, maps and features.

    Parameters
    ----------
    estimator : LLSVM
        The unfitted template (not modified).
    X : (n, d) validated array or CSR matrix, all rows
    y : (n,) labels
    splits : list of (train_idx, test_idx)
    candidates : list of parameter dicts
    sample_weight : (n,) array, optional

    Yields
    ------
    SplitFit
        One per (candidate, split), in no particular order; ``fit_time`` is an
        equal share of the fold's grid fit among the settings it fitted.
    """
    groups = group_candidates(estimator, candidates, ("gamma", "C"))
    settings = {c: (cand.get("gamma", estimator.gamma), cand.get("C", estimator.C))
                for c, cand in enumerate(candidates)}
    all_splits = list(range(len(splits)))
    for template, members in groups:
        reason = _unsupported(template, [settings[c][0] for c in members], [settings[c][1] for c in members])
        if reason is not None:
            yield from independent_fits(estimator, X, y, splits, candidates, members, all_splits, sample_weight,
                                        reason)
            continue
        for batch in _batches(members, settings):
            gammas = sorted({float(settings[c][0]) for c in batch})
            Cs = sorted({float(settings[c][1]) for c in batch})
            for s, (train, _) in enumerate(splits):
                start = time.perf_counter()
                try:
                    budget = _fold_budget(template, X, len(train), len(gammas))
                    with bk.config_context(**({} if budget is None else {"cpu_memory_budget": budget})):
                        models = fit_llsvm_grid(take(X, train), take(y, train), gammas=gammas, Cs=Cs,
                                                estimator=template, sample_weight=take(sample_weight, train),
                                                warn_fallback=False)
                        _warn_streamed(estimator, models, len(train))
                except Exception as exc:  # noqa: BLE001 - each fit reports its own error
                    yield from independent_fits(estimator, X, y, splits, candidates, batch, [s], sample_weight,
                                                f"the shared fit failed ({type(exc).__name__})")
                    continue
                _hold(models)
                share = (time.perf_counter() - start) / len(models)
                fitted = {(g, C): m for (g, C), m in zip([(g, C) for g in gammas for C in Cs], models)}
                for c in batch:
                    model = fitted[(float(settings[c][0]), float(settings[c][1]))]
                    # the candidate's own values (an int C stays an int, as set_params would leave it)
                    model.set_params(gamma=settings[c][0], C=settings[c][1])
                    streamed = model.memory_fallback_ == "streamed_features"
                    yield SplitFit(candidate=c, split=s, estimator=model, fit_time=share,
                                   shared=SHARED + SHARED_STREAMED if streamed else SHARED)


search_llsvm.splits_apart = True   # nothing is shared across folds: run_engine runs them on n_jobs threads
search_llsvm.unit_bytes = _fold_bytes   # ... as many at once as hold their features in memory
