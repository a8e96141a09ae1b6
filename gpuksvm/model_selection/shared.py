"""The search engines: the protocol, the registry, and the independent-fit engine.

A search engine evaluates every (candidate, split) pair of a grid search for
one estimator class and may share work between them (kernel rows across
folds, a warm start along C).  It is a function

``engine(estimator, X, y, splits, candidates, *, sample_weight=None)``

that yields exactly one :class:`SplitFit` per (candidate, split), in any
order, each estimator fitted as
``clone(estimator).set_params(**candidates[c]).fit(X[train], y[train])``
would be, to the solver tolerance.  A fit that raises yields a
:class:`SplitFit` with ``estimator=None`` and the exception; the search
applies ``error_score``.

:data:`ENGINES` maps an estimator class (``module.ClassName``) to its
engine (``"module:function"``, imported on first use, or the function).  A
gpuksvm estimator without an entry uses :func:`search_independent`; an
estimator from elsewhere is searched by scikit-learn itself
(:func:`engine_for` returns None).

Parallel work (``n_jobs`` threads, or the tasks of a Dask client): an engine may carry ``group_key(estimator,
params) -> hashable``; candidates with equal keys share work and are given
to one engine call, different groups run on threads.  An engine with
``independent = True`` shares nothing: every (candidate, split) is its own
call.  Any other engine gets all candidates in one call, and all splits unless it carries
``splits_apart = True`` (it shares nothing across splits: each split is a call of its own, so the
splits run on the threads too).  An engine may carry ``unit_bytes(estimator, X, splits, candidates)
-> int``, the working memory one of its calls needs to run in memory: when one call fits the CPU
memory budget but not its share on ``n_jobs`` threads, at most budget // unit_bytes calls run at
once (LLSVM's folds streamed their features on 2 threads in 69–112 s where they ran in memory one
after the other in 15.5–19.6 s: 20,000 ijcnn1 rows, k = 1,000, budget 200 MB); when one call does
not fit the whole budget either, the calls run one at a time, each streaming with the whole budget
(the LLSVM search of 20,000 synthetic rows, k = 300, 3 folds, 2 × 2 grid, budget 24 MB, fresh
processes, with its refit: 31.5–32.9 s and 35.6 MB of VmHWM growth one at a time against
33.7–38.8 s and 47.5–47.6 MB on 2 threads, load average 4.8–5.7 on the 2-core host; the threads
split the budget into smaller blocks and each keeps a C heap of its own).  An engine with
``takes_n_jobs = True`` parallelizes inside its call and is given the
search's ``n_jobs`` (as scikit-learn's ``n_jobs``: −1 is every core, None
the engine's own default) when its calls run one at a time on this host, 1
when they already run on several threads, None on Dask workers.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import import_module
from numbers import Real
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import clone

from gpuksvm.array import backend as bk

__all__ = ["SplitFit", "ENGINES", "register_engine", "engine_for", "is_gpuksvm_estimator",
           "search_independent", "independent_fits", "group_candidates", "is_positive_number", "run_engine", "take", "engine_name"]


@dataclass
class SplitFit:
    """One (candidate, split) fit produced by a search engine."""
    candidate: int                 # index into `candidates`
    split: int                     # index into `splits`
    estimator: Any                 # the fitted estimator; None when the fit failed
    fit_time: float                # seconds: own work + an equal share of the work it shared
    error: BaseException | None = None
    shared: str = "none"           # what this fit reused, e.g. "kernel rows; alpha seeding"


Engine = Callable[..., Iterator[SplitFit]]

#: estimator class ("module.ClassName") -> engine ("module:function" or the function).
ENGINES: dict[str, str | Engine] = {
    "gpuksvm.estimators.kernel_svc.KernelSVC": "gpuksvm.model_selection.kernel_svc:search_kernel_svc",
    "gpuksvm.estimators.llsvm.LLSVM": "gpuksvm.model_selection.llsvm:search_llsvm",
    "gpuksvm.estimators.okfeb.OKFEBClassifier": "gpuksvm.model_selection.okfeb:search_okfeb",
    "gpuksvm.estimators.okfeb.OKFEBRegressor": "gpuksvm.model_selection.okfeb:search_okfeb",
    "gpuksvm.estimators.svi.SVI": "gpuksvm.model_selection.svi:search_svi",
    "gpuksvm.estimators.cvm.CVM": "gpuksvm.model_selection.cvm:search_cvm",
}


def _class_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_engine(cls: type, engine: str | Engine | None) -> str | Engine | None:
    """Set (or with None remove) the engine of an estimator class; returns the previous entry.

    Parameters
    ----------
    cls : type
        The estimator class (its exact type: a subclass needs its own entry).
    engine : str, callable or None
        ``"module:function"`` (imported on first use), the function, or None.
    """
    key = _class_key(cls)
    previous = ENGINES.get(key)
    if engine is None:
        ENGINES.pop(key, None)
    else:
        ENGINES[key] = engine
    return previous


def is_gpuksvm_estimator(estimator: Any) -> bool:
    """True for an instance of a class defined in the gpuksvm package."""
    return type(estimator).__module__.split(".")[0] == "gpuksvm"


def engine_for(estimator: Any) -> Engine | None:
    """The engine that searches ``estimator``: its registered one, the independent-fit engine for
    another gpuksvm estimator, None for an estimator from elsewhere (scikit-learn searches it)."""
    entry = ENGINES.get(_class_key(type(estimator)))
    if entry is None:
        return search_independent if is_gpuksvm_estimator(estimator) else None
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        return getattr(import_module(module), name)
    return entry


def engine_name(engine: Engine) -> str:
    """``"module:function"`` of an engine (``search_engine_`` and error messages)."""
    return f"{engine.__module__}:{engine.__name__}"


def take(a: Any, rows: np.ndarray) -> Any:
    """Rows of an array (NumPy, CuPy, SciPy/CuPy CSR) or None."""
    return None if a is None else bk.take_rows(a, rows)


def search_independent(estimator: Any, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                       candidates: Sequence[dict], *, sample_weight: Any = None) -> Iterator[SplitFit]:
    """The engine that shares nothing: one fit per (candidate, split), as scikit-learn does.

    Used for every gpuksvm estimator without an engine of its own.  ``sample_weight``
    is passed to ``fit`` only when given (not every estimator takes it).
    """
    for c, params in enumerate(candidates):
        for s, (train, _) in enumerate(splits):
            start = time.perf_counter()
            try:
                est = clone(estimator).set_params(**clone(params, safe=False))
                if sample_weight is None:
                    est.fit(take(X, train), take(y, train))
                else:
                    est.fit(take(X, train), take(y, train), sample_weight=take(sample_weight, train))
            except Exception as exc:  # noqa: BLE001 - the search applies error_score
                yield SplitFit(c, s, None, time.perf_counter() - start, error=exc)
                continue
            yield SplitFit(c, s, est, time.perf_counter() - start)


search_independent.independent = True


def independent_fits(estimator: Any, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                     candidates: Sequence[dict], cands: Sequence[int], split_ids: Sequence[int],
                     sample_weight: Any, reason: str) -> Iterator[SplitFit]:
    """:func:`search_independent` on some candidates and splits of a shared-work engine's grid,
    indices mapped back and ``shared`` saying why these fits share nothing (``"none: <reason>"``)."""
    for fit in search_independent(estimator, X, y, [splits[s] for s in split_ids],
                                  [candidates[c] for c in cands], sample_weight=sample_weight):
        fit.candidate, fit.split = cands[fit.candidate], split_ids[fit.split]
        fit.shared = f"none: {reason}"
        yield fit


def is_positive_number(value: Any) -> bool:
    """A finite number > 0 (not a bool): a C or γ an engine can share work along."""
    return isinstance(value, Real) and not isinstance(value, bool) and 0 < value < np.inf


def group_candidates(estimator: Any, candidates: Sequence[dict],
                     shared: Sequence[str]) -> list[tuple[Any, list[int]]]:
    """The candidates grouped by every parameter but ``shared`` (those an engine shares work along).

    Returns
    -------
    list of (template, candidate indices): the template is the estimator with the group's first
    candidate set (its parameters outside ``shared`` are the whole group's).
    """
    groups: dict[tuple, list[int]] = {}
    for c, cand in enumerate(candidates):
        params = clone(estimator).set_params(**cand).get_params(deep=False)
        groups.setdefault(tuple(sorted((k, _value_key(v)) for k, v in params.items() if k not in shared)),
                          []).append(c)
    return [(clone(estimator).set_params(**candidates[members[0]]), members) for members in groups.values()]


def _value_key(value: Any) -> str:
    """A parameter value as :func:`group_candidates` compares it: its repr, and for a NumPy
    ``RandomState`` its state (each clone holds a copy: equal states, other objects)."""
    if isinstance(value, np.random.RandomState):
        kind, keys, pos, has_gauss, gauss = value.get_state()
        return f"RandomState({kind}, {keys.tobytes().hex()}, {pos}, {has_gauss}, {gauss!r})"
    return repr(value)


def _units(engine: Engine, estimator: Any, candidates: Sequence[dict],
           n_splits: int) -> list[tuple[list[int], list[int]]]:
    """The engine calls that can run apart: (candidate indices, split indices) each."""
    every_split = list(range(n_splits))
    if getattr(engine, "independent", False):
        return [([c], [s]) for c in range(len(candidates)) for s in every_split]
    split_sets = [[s] for s in every_split] if getattr(engine, "splits_apart", False) else [every_split]
    key = getattr(engine, "group_key", None)
    if key is None:
        return [(list(range(len(candidates))), spl) for spl in split_sets]
    groups: dict[Any, list[int]] = {}
    for c, params in enumerate(candidates):
        groups.setdefault(key(estimator, params), []).append(c)
    return [(members, spl) for members in groups.values() for spl in split_sets]


def _run_unit(engine: Engine, estimator: Any, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
              candidates: Sequence[dict], sample_weight: Any, cands: list[int], spl: list[int],
              n_jobs: int | None = None) -> list[SplitFit]:
    """One engine call on the candidates ``cands`` and splits ``spl``, indices mapped back to the whole
    grid's (a module-level function: Dask workers run it); ``n_jobs`` goes to an engine that
    ``takes_n_jobs``."""
    out = []
    extra = {"n_jobs": n_jobs} if getattr(engine, "takes_n_jobs", False) else {}
    for fit in engine(estimator, X, y, [splits[s] for s in spl], [candidates[c] for c in cands],
                      sample_weight=sample_weight, **extra):
        if not (0 <= fit.candidate < len(cands) and 0 <= fit.split < len(spl)):
            raise RuntimeError(f"search engine {engine_name(engine)} yielded (candidate {fit.candidate}, "
                               f"split {fit.split}) outside its {len(cands)} candidates × {len(spl)} splits")
        fit.candidate, fit.split = cands[fit.candidate], spl[fit.split]
        out.append(fit)
    return out


def _on_dask(client: Any, args: tuple, units: list[tuple[list[int], list[int]]]) -> list[list[SplitFit]]:
    """The engine calls as tasks of a Dask client, the data scattered to the workers once."""
    engine, estimator, X, y, splits, candidates, sample_weight = args
    data = client.scatter([X, y, sample_weight], broadcast=True)
    futures = [client.submit(_run_unit, engine, estimator, *data[:2], splits, candidates, data[2], cands, spl,
                             pure=False) for cands, spl in units]
    return client.gather(futures)


def workers_within_budget(engine: Engine, estimator: Any, X: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                          candidates: Sequence[dict], workers: int) -> int:
    """``workers`` threads cut to as many of the engine's calls as fit the CPU memory budget at once
    (its ``unit_bytes``), and to one when a call does not fit the whole budget (each streams with all
    of it); ``workers`` for an engine that declares no ``unit_bytes``.  The search scores its fold
    models on as many threads as this leaves: a search bound by memory scores in turn too."""
    unit_bytes = getattr(engine, "unit_bytes", None)
    if workers > 1 and unit_bytes is not None:
        each, budget = int(unit_bytes(estimator, X, splits, candidates)), bk.memory_budget(bk.CPU)
        if each > 0:
            workers = max(1, min(workers, budget // each))
    return workers


def run_engine(engine: Engine, estimator: Any, X: Any, y: Any, splits: Sequence[tuple[np.ndarray, np.ndarray]],
               candidates: Sequence[dict], *, sample_weight: Any = None, n_jobs: int | None = None,
               client: Any = None) -> list[SplitFit]:
    """Every (candidate, split) fit, ordered candidate-major (index ``c * n_splits + s``).

    Independent engine calls (see the module docstring) run on ``n_jobs`` threads, or as tasks of
    the Dask ``client`` when one is given (X, y and the weights are scattered to every worker once;
    the fitted fold models come back to this process).  An engine that ``takes_n_jobs`` is given
    ``n_jobs`` when its calls run one at a time here (KernelSVC's: one call for the whole grid,
    its threads in the solver layer), 1 when they run on threads, None on Dask.

    Raises
    ------
    RuntimeError
        The engine yielded a pair twice, one out of range, or missed one.
    """
    n_splits = len(splits)
    units = _units(engine, estimator, candidates, n_splits)
    args = (engine, estimator, X, y, splits, candidates, sample_weight)
    workers = min(effective_n_jobs(n_jobs), len(units))
    if client is None:
        workers = workers_within_budget(engine, estimator, X, splits, candidates, workers)
    if client is not None:
        batches = _on_dask(client, args, units)
    elif workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            run = bk.in_calling_config(lambda unit: _run_unit(*args, *unit, n_jobs=1), share=workers)
            batches = list(pool.map(run, units))
    else:
        batches = [_run_unit(*args, *unit, n_jobs=n_jobs) for unit in units]
    table: list[SplitFit | None] = [None] * (len(candidates) * n_splits)
    for fit in (f for batch in batches for f in batch):
        at = fit.candidate * n_splits + fit.split
        if table[at] is not None:
            raise RuntimeError(f"search engine {engine_name(engine)} yielded (candidate {fit.candidate}, "
                               f"split {fit.split}) twice")
        table[at] = fit
    missing = [(i // n_splits, i % n_splits) for i, f in enumerate(table) if f is None]
    if missing:
        raise RuntimeError(f"search engine {engine_name(engine)} yielded no fit for (candidate, split) "
                           f"{missing[:5]}{' ...' if len(missing) > 5 else ''}")
    return table  # type: ignore[return-value]
