"""GridSearchCV and HalvingGridSearchCV: scikit-learn's searches, with gpuksvm's search engines.

Both classes are scikit-learn's (same constructor, attributes and methods:
``cv_results_``, ``best_params_``, ``best_estimator_``, ``predict``,
``score`` ...).  What differs is how ``fit`` evaluates the candidates of a
gpuksvm estimator:

1. X, y (and ``sample_weight``) are validated once and the splits are
   materialized once;
2. the estimator's search engine (:mod:`gpuksvm.model_selection.shared`)
   fits every (candidate, split), sharing what it can across folds and
   settings (an estimator without an engine of its own: independent fits,
   as scikit-learn does);
3. every fold model is scored on its test rows (and training rows with
   ``return_train_score=True``) by the scorers scikit-learn would use, and
   ``cv_results_`` is built with scikit-learn's keys, dtypes and ranking,
   plus the column ``shared_work`` (what each candidate's fits reused);
4. the best candidate is selected and refitted as scikit-learn does.  With
   ``probability=True`` on a Platt-scaled estimator the refit model's
   sigmoids are fitted on the selected candidate's out-of-fold decision
   values (:meth:`~gpuksvm.estimators.calibration.ProbabilityMixin.calibrate_from_folds`)
   instead of a second, internal 5-fold cross-validation.

With ``client=`` (a Dask client) the engine calls run as tasks on its
workers (:func:`~gpuksvm.model_selection.shared.run_engine`).

Anything else — an estimator not from gpuksvm (scikit-learn's SVC, a
Pipeline), a precomputed or user-function kernel, a Dask collection, fit
parameters other than ``sample_weight`` and ``groups`` — is searched by
scikit-learn's own ``fit``, unchanged.  Either way a ``fit`` that raises
leaves the search object as it was (the previous search stays usable).
"""
from __future__ import annotations

import numbers
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from math import ceil, floor, log
from typing import Any, Callable

import numpy as np
from joblib import effective_n_jobs, parallel_backend
from sklearn.base import clone, is_classifier
from sklearn.experimental import enable_halving_search_cv  # noqa: F401  (makes the class importable)
from sklearn.metrics import check_scoring, get_scorer
from sklearn.model_selection import GridSearchCV as _SklearnGridSearchCV
from sklearn.model_selection import HalvingGridSearchCV as _SklearnHalvingGridSearchCV
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils import check_array, resample
from sklearn.utils.validation import check_consistent_length

from gpuksvm.array import backend as bk
from gpuksvm.array.blas_threads import one_blas_thread
from gpuksvm.estimators.calibration import ProbabilityMixin
from gpuksvm.estimators.svc_surface import is_precomputed, is_user_callable
from gpuksvm.model_selection.results import (FoldScores, build_results, check_failures, fold_scorer,
                                             reads_no_probability, takes_weights, top_k)
from gpuksvm.model_selection.shared import SplitFit, engine_for, engine_name, run_engine, take, workers_within_budget
from gpuksvm.scaleout.runtime import is_dask_collection

__all__ = ["GridSearchCV", "HalvingGridSearchCV"]


class _SharedSearch:
    """The ``fit`` of both searches: scikit-learn's for foreign estimators, the engines for gpuksvm's."""

    # ---------------------------------------------------------------- routing
    def _engine(self, X: Any, params: dict):
        est = self.estimator
        engine = engine_for(est)
        if engine is None or is_dask_collection(X) or set(params) - {"sample_weight", "groups"}:
            return None
        if est.__sklearn_tags__().input_tags.pairwise:
            return None
        kernels = [getattr(est, "kernel", None)] + [p["kernel"] for p in self._candidate_grid() if "kernel" in p]
        if any(is_precomputed(k) or is_user_callable(k) for k in kernels):
            return None
        return engine

    def _candidate_grid(self) -> list[dict]:
        return list(ParameterGrid(self.param_grid))

    def fit(self, X: Any, y: Any = None, **params: Any):
        """Run the search over every candidate of the grid.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training rows (NumPy, SciPy sparse, CuPy, pandas; a Dask collection
            goes to scikit-learn's search).
        y : array-like of shape (n_samples,), default=None
            Targets (None for unsupervised estimators).
        **params : dict
            ``sample_weight`` (split with the rows and passed to every ``fit``)
            and ``groups`` (passed to the splitter); other fit parameters send
            the search to scikit-learn's ``fit``.

        Returns
        -------
        self
        """
        saved = dict(self.__dict__)
        try:
            engine = self._engine(X, params)
            if engine is None:
                self.__dict__.pop("search_engine_", None)
                if self.client is None:
                    return super().fit(X, y, **params)
                with parallel_backend("dask", client=self.client):
                    return super().fit(X, y, **params)
            self._fit_with_engine(engine, X, y, **params)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        return self

    # ---------------------------------------------------------------- scoring
    def _scorers(self) -> tuple[Any, str]:
        """(scorer or dict of scorers, refit metric) as scikit-learn's search resolves ``scoring``."""
        scoring = self.scoring
        if callable(scoring) or scoring is None or isinstance(scoring, str):
            return check_scoring(self.estimator, scoring=scoring), "score"
        if isinstance(scoring, dict):
            if not scoring:
                raise ValueError("An empty dict was passed as scoring")
            scorers = {k: get_scorer(v) if isinstance(v, str) else v for k, v in scoring.items()}
        elif isinstance(scoring, (list, tuple, set)):
            names = list(scoring)
            if not names or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"scoring must be a list of unique strings, got {scoring!r}")
            scorers = {n: get_scorer(n) for n in names}
        else:
            raise ValueError(f"scoring must be a str, a callable, a list, a tuple, a dict or None; got {scoring!r}")
        self._check_refit_metric(scorers)
        return scorers, self.refit

    def _check_refit_metric(self, names: Any) -> None:
        if self.refit is not False and not callable(self.refit) and \
                not (isinstance(self.refit, str) and self.refit in names):
            raise ValueError("For multi-metric scoring, the parameter refit must be set to a scorer key or a "
                             "callable to refit an estimator with the best parameter setting on the whole "
                             "data and make the best_* attributes available for that metric. If this is "
                             f"not needed, refit should be set to False explicitly. {self.refit!r} was passed.")

    def _score(self, scorer: Any, est: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """One score (a dict of them for several metrics); None when scoring failed and
        ``error_score`` is a number.  ``sample_weight`` goes to every scorer that takes it (as
        scikit-learn's search does)."""
        def one(s: Callable) -> float:
            args = (est, X) if y is None else (est, X, y)
            return s(*args, sample_weight=sample_weight) if sample_weight is not None and takes_weights(s) \
                else s(*args)

        try:
            if isinstance(scorer, dict):
                return {name: one(s) for name, s in scorer.items()}
            return one(scorer)
        except Exception:
            if self.error_score == "raise":
                raise
            warnings.warn("Scoring failed. The score on this train-test partition for these parameters "
                          f"will be set to {self.error_score}.", UserWarning, stacklevel=3)
            return None

    # ---------------------------------------------------------------- evaluation
    def _evaluate(self, engine: Callable, template: Any, data: tuple, splits: list, candidates: list,
                  scorer: Any, keep: Callable[[int], bool]) -> tuple[FoldScores, dict[int, list[SplitFit]]]:
        """Fit (through the engine) and score every (candidate, split); the fits of the candidates
        ``keep`` selects are returned too (for the refit model's calibration)."""
        X, y, sw = data
        # scikit-learn's metrics take host arrays: device rows are scored from a host copy (the
        # model moves them to its device and answers in NumPy)
        Xs, ys, ws = (bk.to_host(a) if bk.is_gpu_array(a) else a for a in (X, y, sw))
        n_splits = len(splits)
        if self.verbose > 0:
            print(f"Fitting {n_splits} folds for each of {len(candidates)} candidates, "
                  f"totalling {n_splits * len(candidates)} fits")
        fits = run_engine(engine, template, X, y, splits, candidates, sample_weight=sw, n_jobs=self.n_jobs,
                          client=self.client)
        out = FoldScores(len(candidates), n_splits)
        kept: dict[int, list[SplitFit]] = {}
        scored = []
        for fit in fits:
            c, s = fit.candidate, fit.split
            out.fit_time[c, s] = fit.fit_time
            if fit.shared and fit.shared != "none" and fit.shared not in out.shared[c]:
                out.shared[c].append(fit.shared)
            if fit.estimator is None:
                if self.error_score == "raise":
                    raise fit.error
                out.failures.append(fit.error)
                continue
            scored.append(fit)
            if keep(c):
                kept.setdefault(c, []).append(fit)

        scorer = fold_scorer(self.scoring, template, scorer)

        def score(fit: SplitFit) -> tuple[Any, float, Any]:
            train, test = splits[fit.split]
            start = time.perf_counter()
            test_score = self._score(scorer, fit.estimator, take(Xs, test), take(ys, test), take(ws, test))
            seconds = time.perf_counter() - start
            train_score = self._score(scorer, fit.estimator, take(Xs, train), take(ys, train),
                                      take(ws, train)) if self.return_train_score else None
            return test_score, seconds, train_score

        # host fold models are scored on n_jobs threads, as scikit-learn scores them in its n_jobs
        # processes (NumPy and BLAS release the GIL; one BLAS thread each), but no more than the
        # engine's fits ran on for the memory budget (each thread's C heap adds to the peak: the
        # LLSVM search-memory test's 2 threads grew 42.9–57.4 MB against a 52.1 MB bound, in turn
        # 36.7–37.0 MB); device models in turn
        on_host = not bk.device_for(template.get_params().get("device", "cpu"), X).is_gpu
        workers = 1
        if self.client is None and on_host:
            workers = workers_within_budget(engine, template, X, splits, candidates,
                                            min(effective_n_jobs(self.n_jobs), len(scored)))
        if workers > 1:
            with one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
                scores = list(pool.map(bk.in_calling_config(score, share=workers), scored))
        else:
            scores = [score(fit) for fit in scored]
        for fit, (test_score, seconds, train_score) in zip(scored, scores):
            c, s = fit.candidate, fit.split
            out.test[c][s], out.score_time[c, s] = test_score, seconds
            if self.return_train_score:
                out.train[c][s] = train_score
        check_failures(out.failures, len(fits), self.error_score)
        return out, kept

    # ---------------------------------------------------------------- the search
    def _validated(self, X: Any, y: Any, sample_weight: Any) -> tuple[Any, Any, Any]:
        if not bk.is_gpu_array(X):
            X = check_array(X, accept_sparse="csr", dtype=None)
        if y is not None and not bk.is_gpu_array(y):
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.ravel()
        if sample_weight is not None and not bk.is_gpu_array(sample_weight):
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
        check_consistent_length(*(a for a in (X, y, sample_weight) if a is not None and not bk.is_gpu_array(a)))
        return X, y, sample_weight

    def _splits(self, cv: Any, X: Any, y: Any, groups: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        yh = None if y is None else np.asarray(bk.to_host(y))
        rows = np.zeros((X.shape[0], 1))
        splits = [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(rows, yh, groups)]
        if len(splits) != self.n_splits_:
            raise ValueError("cv.split and cv.get_n_splits return inconsistent results. "
                             f"Expected {self.n_splits_} splits, got {len(splits)}")
        if not splits:
            raise ValueError("No fits were performed. Was the CV iterator empty? Were there no candidates?")
        return splits

    def _fold_template(self) -> Any:
        est = clone(self.estimator)
        if getattr(est, "probability", False) and reads_no_probability(self.scoring):
            est.set_params(probability=False)
        return est

    def _prepare(self, X: Any, y: Any, params: dict) -> tuple[tuple, Any, Any]:
        scorer, refit_metric = self._scorers()
        data = self._validated(X, y, params.get("sample_weight"))
        yh = None if data[1] is None else np.asarray(bk.to_host(data[1]))
        cv = check_cv(self.cv, yh, classifier=is_classifier(self.estimator))
        rows = np.zeros((data[0].shape[0], 1))
        self.n_splits_ = cv.get_n_splits(rows, yh, params.get("groups"))
        return data, scorer, (cv, refit_metric)

    def _finish(self, X: Any, y: Any, params: dict, scorer: Any, refit_metric: Any, results: dict,
                kept: dict[int, list[SplitFit]], splits_of: Callable[[int], list], data: tuple,
                best_index: int | None) -> None:
        """Multi-metric flag, best candidate, refit and the fitted attributes (scikit-learn's rules)."""
        metrics = [k[len("mean_test_"):] for k in results if k.startswith("mean_test_")]
        self.multimetric_ = isinstance(scorer, dict) or metrics != ["score"]
        if callable(self.scoring) and self.multimetric_:
            self._check_refit_metric(metrics)
            refit_metric = self.refit
        if self.refit or not self.multimetric_:
            if best_index is None:
                if callable(self.refit):
                    best_index = self.refit(results)
                    if not isinstance(best_index, numbers.Integral):
                        raise TypeError("best_index_ returned is not an integer")
                    if best_index < 0 or best_index >= len(results["params"]):
                        raise IndexError("best_index_ index out of range")
                else:
                    best_index = int(results[f"rank_test_{refit_metric}"].argmin())
            self.best_index_ = best_index
            if not callable(self.refit):
                self.best_score_ = results[f"mean_test_{refit_metric}"][best_index]
            self.best_params_ = results["params"][best_index]
        if self.refit:
            self._refit(X, y, params, kept.get(self.best_index_, []), splits_of(self.best_index_), data)
        self.scorer_ = scorer
        self.cv_results_ = results

    def _refit(self, X: Any, y: Any, params: dict, fold_fits: list[SplitFit], splits: list, data: tuple) -> None:
        best = clone(self.estimator).set_params(**clone(self.best_params_, safe=False))
        fit_params = {} if params.get("sample_weight") is None else {"sample_weight": params["sample_weight"]}
        calibrate = isinstance(best, ProbabilityMixin) and bool(getattr(best, "probability", False)) and \
            len(fold_fits) == len(splits) and len(splits) > 0
        start = time.perf_counter()
        if calibrate:
            best.set_params(probability=False)
        if self.client is None and effective_n_jobs(self.n_jobs) > 1:
            # the fold fits' threads left their freed C heap resident (an arena per thread): the
            # refit's peak then came on top of it (bk.release_free_heap)
            bk.release_free_heap()
        if y is None:
            best.fit(X, **fit_params)
        else:
            best.fit(X, y, **fit_params)
        if calibrate:
            Xv, yv, _ = data
            folds = [(f.estimator, take(Xv, splits[f.split][1]), splits[f.split][1]) for f in fold_fits]
            try:
                best.calibrate_from_folds(folds, bk.to_host(yv))
            except ValueError:      # a fold without some class: the estimator's own internal CV
                best.set_params(probability=True)
                if y is None:
                    best.fit(X, **fit_params)
                else:
                    best.fit(X, y, **fit_params)
        self.refit_time_ = time.perf_counter() - start
        self.best_estimator_ = best
        if hasattr(best, "feature_names_in_"):
            self.feature_names_in_ = best.feature_names_in_

    def _wants_calibration(self) -> bool:
        return bool(self.refit) and isinstance(self.estimator, ProbabilityMixin) and \
            bool(getattr(self.estimator, "probability", False))


class GridSearchCV(_SharedSearch, _SklearnGridSearchCV):
    """Exhaustive search over a parameter grid, sharing work across folds and settings.

    scikit-learn's :class:`~sklearn.model_selection.GridSearchCV` (same
    constructor, attributes and methods) whose ``fit`` evaluates a gpuksvm
    estimator's candidates through its search engine
    (:mod:`gpuksvm.model_selection.shared`) and scores them with the same
    scorers; any other estimator is searched by scikit-learn unchanged.  See
    :mod:`gpuksvm.model_selection.search` for what is shared and when.

    Parameters
    ----------
    estimator : estimator object
        The unfitted template (never modified).
    param_grid : dict or list of dicts
        Parameter names to lists of values, as scikit-learn's.
    scoring : str, callable, list, tuple, dict or None, default=None
        As scikit-learn's: None uses the estimator's ``score``.
    n_jobs : int or None, default=None
        Threads for independent engine calls (independent fits, or groups of
        candidates that share work) and for scoring the fold models; an engine
        that runs the whole grid in one call (KernelSVC's) runs its own threads
        on ``n_jobs`` (−1: every core, as scikit-learn's; None: every core
        unless the load average already fills them); scikit-learn's processes
        for other estimators.
    refit : bool, str or callable, default=True
        Refit the best candidate on all rows (a scorer name with several
        metrics; a callable picks ``best_index_`` from ``cv_results_``).
    cv : int, cross-validation generator or iterable, default=None
        As scikit-learn's (None: 5 folds, stratified for classifiers).
    verbose : int, default=0
        Prints the number of fits when > 0.
    pre_dispatch : int or str, default='2*n_jobs'
        scikit-learn's (used only when scikit-learn runs the search).
    error_score : 'raise' or float, default=np.nan
        The score of a fit that fails ('raise': the error propagates).
    return_train_score : bool, default=False
        Also score every fold model on its training rows.
    client : dask.distributed.Client or None, default=None
        Run the engine calls (the folds and candidates, grouped as the engine
        shares work) as tasks on this client's workers, the data scattered
        to them once; scikit-learn's search of another estimator runs on it
        through joblib's Dask backend.

    Attributes
    ----------
    cv_results_ : dict of arrays
        scikit-learn's columns plus ``shared_work`` (what each candidate's fits
        reused; "none" for independent fits) for gpuksvm estimators.
    best_estimator_, best_score_, best_params_, best_index_, scorer_, n_splits_, refit_time_, multimetric_
        As scikit-learn's.

    Examples
    --------
    >>> from gpuksvm import KernelSVC
    >>> from gpuksvm.datasets import make_checkerboard
    >>> from gpuksvm.model_selection import GridSearchCV
    >>> X, y = make_checkerboard(200, grid=2, random_state=0)
    >>> search = GridSearchCV(KernelSVC(), {"gamma": [1.0, 2.0], "C": [1.0, 10.0]}, cv=3).fit(X, y)
    >>> sorted(search.best_params_)
    ['C', 'gamma']
    >>> search.search_engine_
    'gpuksvm.model_selection.kernel_svc:search_kernel_svc'
    """

    _parameter_constraints: dict = {**_SklearnGridSearchCV._parameter_constraints, "client": "no_validation"}

    def __init__(self, estimator: Any, param_grid: Any, *, scoring: Any = None, n_jobs: int | None = None,
                 refit: Any = True, cv: Any = None, verbose: int = 0, pre_dispatch: Any = "2*n_jobs",
                 error_score: Any = np.nan, return_train_score: bool = False, client: Any = None) -> None:
        super().__init__(estimator, param_grid, scoring=scoring, n_jobs=n_jobs, refit=refit, cv=cv,
                         verbose=verbose, pre_dispatch=pre_dispatch, error_score=error_score,
                         return_train_score=return_train_score)
        self.client = client

    def _fit_with_engine(self, engine: Callable, X: Any, y: Any, **params: Any) -> None:
        data, scorer, (cv, refit_metric) = self._prepare(X, y, params)
        splits = self._splits(cv, data[0], data[1], params.get("groups"))
        candidates = self._candidate_grid()
        if not candidates:
            raise ValueError("No fits were performed. Was the CV iterator empty? Were there no candidates?")
        calibrating = self._wants_calibration()
        block, kept = self._evaluate(engine, self._fold_template(), data, splits, candidates, scorer,
                                     keep=lambda c: calibrating)
        results = build_results(candidates, [block], {}, return_train_score=self.return_train_score,
                                error_score=self.error_score)
        self.search_engine_ = engine_name(engine)
        self._finish(X, y, params, scorer, refit_metric, results, kept, lambda c: splits, data, None)


class HalvingGridSearchCV(_SharedSearch, _SklearnHalvingGridSearchCV):
    """Successive halving over a parameter grid, each iteration's candidates through the engines.

    scikit-learn's (experimental) :class:`~sklearn.model_selection.HalvingGridSearchCV`:
    every iteration evaluates the remaining candidates on ``n_resources``
    rows (or with the resource parameter set to ``n_resources``) and keeps
    the best ``1 / factor`` of them; the same subsamples as scikit-learn's
    for an integer ``random_state``.  For a gpuksvm estimator each
    iteration's (candidate, split) fits go through the estimator's search
    engine; any other estimator is searched by scikit-learn unchanged.

    Parameters
    ----------
    estimator : estimator object
        The unfitted template (never modified).
    param_grid : dict or list of dicts
        Parameter names to lists of values.
    factor : int or float, default=3
        The proportion of candidates kept per iteration (1 / factor) and the
        growth of the resource.
    resource : str, default='n_samples'
        ``'n_samples'`` or the name of an integer parameter of the estimator.
    max_resources : int or 'auto', default='auto'
        The most resource one candidate gets ('auto': all rows).
    min_resources : {'exhaust', 'smallest'} or int, default='exhaust'
        The resource of the first iteration, as scikit-learn's.
    aggressive_elimination : bool, default=False
        Repeat the first iteration's resource until few enough candidates remain.
    cv : int, cross-validation generator or iterable, default=5
        The splitter; it must yield the same splits at every call.
    scoring : str, callable or None, default=None
        One metric, as scikit-learn's.
    refit : bool, default=True
        Refit the best candidate of the last iteration on all rows.
    error_score : 'raise' or float, default=np.nan
        The score of a fit that fails.
    return_train_score : bool, default=True
        Also score every fold model on its training rows.
    random_state : int, RandomState instance or None, default=None
        Seeds the subsampling of the rows.
    n_jobs : int or None, default=None
        Threads for independent engine calls, and of an engine that runs the whole grid in
        one call (KernelSVC's; None: every core unless the load average already fills them).
    verbose : int, default=0
        Prints each iteration's candidates and resource when > 0.
    client : dask.distributed.Client or None, default=None
        Run each iteration's engine calls as tasks on this client's workers.

    Attributes
    ----------
    cv_results_ : dict of arrays
        scikit-learn's columns (``iter``, ``n_resources`` included) plus
        ``shared_work`` for gpuksvm estimators.
    n_resources_, n_candidates_, n_remaining_candidates_, max_resources_, min_resources_
        As scikit-learn's.
    n_iterations_, n_possible_iterations_, n_required_iterations_
        As scikit-learn's.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from gpuksvm import LinearSVM
    >>> from gpuksvm.model_selection import HalvingGridSearchCV
    >>> X, y = make_classification(400, n_features=5, random_state=0)
    >>> halving = HalvingGridSearchCV(LinearSVM(), {"C": [0.01, 0.1, 1.0, 10.0]}, factor=2, random_state=0)
    >>> halving.fit(X, y).n_candidates_, halving.n_resources_
    ([4, 2, 1], [100, 200, 400])
    """

    _parameter_constraints: dict = {**_SklearnHalvingGridSearchCV._parameter_constraints, "client": "no_validation"}

    def __init__(self, estimator: Any, param_grid: Any, *, factor: float = 3, resource: str = "n_samples",
                 max_resources: Any = "auto", min_resources: Any = "exhaust", aggressive_elimination: bool = False,
                 cv: Any = 5, scoring: Any = None, refit: bool = True, error_score: Any = np.nan,
                 return_train_score: bool = True, random_state: Any = None, n_jobs: int | None = None,
                 verbose: int = 0, client: Any = None) -> None:
        super().__init__(estimator, param_grid, factor=factor, resource=resource, max_resources=max_resources,
                         min_resources=min_resources, aggressive_elimination=aggressive_elimination, cv=cv,
                         scoring=scoring, refit=refit, error_score=error_score,
                         return_train_score=return_train_score, random_state=random_state, n_jobs=n_jobs,
                         verbose=verbose)
        self.client = client

    def _constant_splits(self, cv: Any, rows: np.ndarray, y: Any, groups: Any) -> bool:
        def once() -> list:
            return [(np.asarray(a), np.asarray(b)) for a, b in cv.split(rows, y, groups)]
        first, second = once(), once()
        return len(first) == len(second) and all(
            np.array_equal(a, c) and np.array_equal(b, d) for (a, b), (c, d) in zip(first, second))

    def _resources(self, X: Any, y: Any, cv: Any, groups: Any) -> None:
        n = X.shape[0]
        if self.resource != "n_samples" and self.resource not in self.estimator.get_params():
            raise ValueError(f"Cannot use resource={self.resource} which is not supported by estimator "
                             f"{self.estimator.__class__.__name__}")
        self.min_resources_ = self.min_resources
        if self.min_resources_ in ("smallest", "exhaust"):
            if self.resource == "n_samples":
                self.min_resources_ = 2 * self.n_splits_
                if is_classifier(self.estimator):
                    self.min_resources_ *= int(np.unique(np.asarray(bk.to_host(y))).shape[0])
            else:
                self.min_resources_ = 1
        self.max_resources_ = self.max_resources
        if self.max_resources_ == "auto":
            if self.resource != "n_samples":
                raise ValueError("resource can only be 'n_samples' when max_resources='auto'")
            self.max_resources_ = n
        if self.min_resources_ > self.max_resources_:
            raise ValueError(f"min_resources_={self.min_resources_} is greater than "
                             f"max_resources_={self.max_resources_}.")
        if self.min_resources_ == 0:
            raise ValueError(f"min_resources_={self.min_resources_}: you might have passed an empty dataset X.")

    def _fit_with_engine(self, engine: Callable, X: Any, y: Any, **params: Any) -> None:
        if not (self.scoring is None or isinstance(self.scoring, str) or callable(self.scoring)):
            raise ValueError(f"HalvingGridSearchCV takes one metric: scoring must be a str, a callable or "
                             f"None, got {self.scoring!r}")
        data, scorer, (cv, refit_metric) = self._prepare(X, y, params)
        Xv, yv, _ = data
        groups = params.get("groups")
        yh = None if yv is None else np.asarray(bk.to_host(yv))
        rows = np.zeros((Xv.shape[0], 1))
        if not self._constant_splits(cv, rows, yh, groups):
            raise ValueError("The cv parameter must yield consistent folds across calls to split(). "
                             "Set its random_state to an int, or set shuffle=False.")
        self._resources(Xv, yv, cv, groups)
        candidates = self._candidate_grid()
        if self.resource != "n_samples" and any(self.resource in c for c in candidates):
            raise ValueError(f"Cannot use parameter {self.resource} as the resource since it is part of "
                             "the searched parameters.")
        n_required = 1 + floor(log(len(candidates), self.factor))
        if self.min_resources == "exhaust":
            self.min_resources_ = max(self.min_resources_, self.max_resources_ // self.factor ** (n_required - 1))
        n_possible = 1 + floor(log(self.max_resources_ // self.min_resources_, self.factor))
        n_iterations = n_required if self.aggressive_elimination else min(n_possible, n_required)
        if self.verbose:
            print(f"n_iterations: {n_iterations}\nn_required_iterations: {n_required}\n"
                  f"n_possible_iterations: {n_possible}\nmin_resources_: {self.min_resources_}\n"
                  f"max_resources_: {self.max_resources_}\naggressive_elimination: "
                  f"{self.aggressive_elimination}\nfactor: {self.factor}")
        base = self._splits(cv, Xv, yv, groups)
        template = self._fold_template()
        self.n_resources_, self.n_candidates_ = [], []
        all_candidates: list[dict] = []
        blocks: list[FoldScores] = []
        extra: dict[str, list] = {"iter": [], "n_resources": []}
        split_sets: list[list] = []
        kept_all: dict[int, list[SplitFit]] = {}
        calibrating = self._wants_calibration()
        for itr in range(n_iterations):
            power = max(0, itr - n_required + n_possible) if self.aggressive_elimination else itr
            n_res = min(int(self.factor ** power * self.min_resources_), self.max_resources_)
            self.n_resources_.append(n_res)
            self.n_candidates_.append(len(candidates))
            if self.verbose:
                print(f"----------\niter: {itr}\nn_candidates: {len(candidates)}\nn_resources: {n_res}")
            if self.resource == "n_samples":
                fraction = n_res / Xv.shape[0]
                splits = [(resample(tr, replace=False, random_state=self.random_state,
                                    n_samples=int(fraction * len(tr))),
                           resample(te, replace=False, random_state=self.random_state,
                                    n_samples=int(fraction * len(te)))) for tr, te in base]
            else:
                candidates = [{**c, self.resource: n_res} for c in candidates]
                splits = base
            last = itr == n_iterations - 1
            block, kept = self._evaluate(engine, template, data, splits, candidates, scorer,
                                         keep=lambda c, last=last: calibrating and last)
            offset = len(all_candidates)
            kept_all.update({offset + c: fits for c, fits in kept.items()})
            all_candidates.extend(candidates)
            blocks.append(block)
            split_sets.extend([splits] * len(candidates))
            extra["iter"].extend([itr] * len(candidates))
            extra["n_resources"].extend([n_res] * len(candidates))
            results = build_results(all_candidates, blocks, extra, return_train_score=self.return_train_score,
                                    error_score=self.error_score)
            candidates = top_k(results, ceil(len(candidates) / self.factor), itr)
        self.n_remaining_candidates_ = len(candidates)
        self.n_required_iterations_ = n_required
        self.n_possible_iterations_ = n_possible
        self.n_iterations_ = n_iterations
        last_rows = np.flatnonzero(results["iter"] == results["iter"].max())
        scores = results["mean_test_score"][last_rows]
        best = int(last_rows[0 if np.isnan(scores).all() else int(np.nanargmax(scores))])
        self.search_engine_ = engine_name(engine)
        self._finish(X, y, params, scorer, refit_metric, results, kept_all, lambda c: split_sets[c], data, best)
        self.best_score_ = results["mean_test_score"][self.best_index_]
