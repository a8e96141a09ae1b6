"""The pieces of ``cv_results_``: per-fold scores, parameter columns, ranks, failures, halving's top k.

Used by :mod:`gpuksvm.model_selection.search`; the keys, dtypes, ranking
(``method="min"``, NaN tied with the worst) and messages are scikit-learn's.
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Sequence

import numpy as np
from numpy.ma import MaskedArray
from scipy.stats import rankdata
from sklearn.base import ClassifierMixin, is_classifier
from sklearn.exceptions import FitFailedWarning

__all__ = ["DECISION_SCORERS", "FoldScores", "build_results", "check_failures", "fold_scorer", "metric_names",
           "param_columns", "rank_scores", "reads_no_probability", "score_table", "takes_weights", "top_k"]


#: scorers that read ``predict`` or (first) ``decision_function`` only: with them the fold models
#: of a ``probability=True`` estimator are fitted without Platt scaling (the same scores, without
#: an internal 5-fold cross-validation per fit)
DECISION_SCORERS = ("accuracy", "balanced_accuracy", "f1", "precision", "recall", "jaccard",
                    "matthews_corrcoef", "roc_auc", "average_precision")


def reads_no_probability(scoring: Any) -> bool:
    """True when every scorer of ``scoring`` reads ``predict`` or (first) ``decision_function``."""
    names = [scoring] if scoring is None or isinstance(scoring, str) else \
        list(scoring.values()) if isinstance(scoring, dict) else \
        list(scoring) if isinstance(scoring, (list, tuple, set)) else [scoring]

    def plain(name: Any) -> bool:
        if name is None:
            return True
        if not isinstance(name, str):
            return False
        return name in ("roc_auc", "average_precision") or (
            name.startswith(DECISION_SCORERS) and not name.startswith(("roc_auc_", "average_precision_")))

    return all(plain(n) for n in names)


def takes_weights(scorer: Callable) -> bool:
    """A scorer (or a user's scoring function) with a ``sample_weight`` or ``**kwargs`` parameter."""
    try:
        params = inspect.signature(scorer).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "sample_weight" or p.kind is p.VAR_KEYWORD for p in params)


def _accuracy(estimator: Any, X: Any, y: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
    """``ClassifierMixin.score``: the (weighted) share of rows whose predicted label is y's."""
    return float(np.average(np.asarray(estimator.predict(X)) == y, weights=sample_weight))


def fold_scorer(scoring: Any, estimator: Any, scorer: Callable | dict) -> Callable | dict:
    """The scorer of the fold models: ``scorer`` (scikit-learn's, as resolved from ``scoring``),
    except for the default score of a classifier that keeps ``ClassifierMixin.score``, whose
    accuracy is computed without scikit-learn's per-call checks (the search checked the labels
    once, and the fold models predict labels of ``classes_``): ``accuracy_score``'s checks of
    each call's labels and ``score``'s parameter validation were 10 of the 18 % of the CPU time
    the 120 fold scorings of the 5,000-row ijcnn1 search took (py-spy, 2-core host), the
    same values."""
    if scoring is None and is_classifier(estimator) and type(estimator).score is ClassifierMixin.score:
        return _accuracy
    return scorer


class FoldScores:
    """Times and scores of every (candidate, split) of one evaluation, candidate-major."""

    def __init__(self, n_candidates: int, n_splits: int) -> None:
        shape = (n_candidates, n_splits)
        self.fit_time = np.zeros(shape)
        self.score_time = np.zeros(shape)
        self.test: list[list[Any]] = [[None] * n_splits for _ in range(n_candidates)]
        self.train: list[list[Any]] = [[None] * n_splits for _ in range(n_candidates)]
        self.shared: list[list[str]] = [[] for _ in range(n_candidates)]
        self.failures: list[BaseException] = []


def param_columns(candidates: Sequence[dict]) -> dict[str, MaskedArray]:
    """``param_<name>``: one masked array per parameter (masked where a candidate lacks it), with the
    dtype NumPy infers from the values, except strings and sequences (object), as scikit-learn's."""
    values: dict[str, dict[int, Any]] = {}
    for i, params in enumerate(candidates):
        for name, value in params.items():
            values.setdefault(f"param_{name}", {})[i] = value
    out = {}
    for key, by_index in values.items():
        try:
            arr = np.array(list(by_index.values()))
            dtype = arr.dtype if arr.dtype.kind != "U" and arr.ndim == 1 else np.dtype(object)
        except ValueError:
            dtype = np.dtype(object)
        col = MaskedArray(np.empty(len(candidates), dtype=dtype), mask=True)
        for i, value in by_index.items():
            col[i] = value
        out[key] = col
    return out


def rank_scores(means: np.ndarray) -> np.ndarray:
    """1 = best; NaN means tie with the worst (all NaN: all 1)."""
    if np.isnan(means).all():
        return np.ones(means.shape, dtype=np.int32)
    filled = np.where(np.isnan(means), np.nanmin(means) - 1, means)
    return rankdata(-filled, method="min").astype(np.int32)


def check_failures(failures: list[BaseException], n_fits: int, error_score: Any) -> None:
    """Raise when every fit failed, else warn with the count and the errors (scikit-learn's messages)."""
    if not failures:
        return
    kinds: dict[str, int] = {}
    for exc in failures:
        text = f"{type(exc).__name__}: {exc}"
        kinds[text] = kinds.get(text, 0) + 1
    summary = "\n".join(f"{n} fits failed with the following error:\n{text}" for text, n in kinds.items())
    if len(failures) == n_fits:
        raise ValueError(f"\nAll the {n_fits} fits failed.\nIt is very likely that your model is "
                         "misconfigured.\nYou can try to debug the error by setting error_score='raise'."
                         f"\n\nBelow are more details about the failures:\n{summary}")
    warnings.warn(f"\n{len(failures)} fits failed out of a total of {n_fits}.\nThe score on these "
                  f"train-test partitions for these parameters will be set to {error_score!r}.\n"
                  "If these failures are not expected, you can try to debug them by setting "
                  f"error_score='raise'.\n\nBelow are more details about the failures:\n{summary}",
                  FitFailedWarning, stacklevel=4)


def build_results(candidates: list, blocks: list[FoldScores], extra: dict[str, list], *, return_train_score: bool,
                  error_score: Any) -> dict:
    """``cv_results_`` of the evaluated candidates (blocks in evaluation order)."""
    fit_time = np.vstack([b.fit_time for b in blocks])
    score_time = np.vstack([b.score_time for b in blocks])
    test = [row for b in blocks for row in b.test]
    train = [row for b in blocks for row in b.train]
    names = metric_names(test)
    results: dict[str, Any] = {k: np.asarray(v) for k, v in extra.items()}

    def store(key: str, table: np.ndarray, *, splits: bool = False, rank: bool = False) -> None:
        if splits:
            for s in range(table.shape[1]):
                results[f"split{s}_{key}"] = table[:, s]
        means = table.mean(axis=1)
        results[f"mean_{key}"] = means
        if key.startswith(("train_", "test_")) and np.any(~np.isfinite(means)):
            warnings.warn(f"One or more of the {key.split('_')[0]} scores are non-finite: {means}",
                          UserWarning, stacklevel=5)
        results[f"std_{key}"] = np.sqrt(((table - means[:, None]) ** 2).mean(axis=1))
        if rank:
            results[f"rank_{key}"] = rank_scores(means)

    store("fit_time", fit_time)
    store("score_time", score_time)
    results.update(param_columns(candidates))
    results["params"] = list(candidates)
    for name in names:
        store(f"test_{name}", score_table(test, name, error_score), splits=True, rank=True)
        if return_train_score:
            store(f"train_{name}", score_table(train, name, error_score), splits=True)
    shared = [b_shared for b in blocks for b_shared in b.shared]
    results["shared_work"] = np.array(["; ".join(s) if s else "none" for s in shared], dtype=object)
    return results

def metric_names(test: list[list[Any]]) -> list[str]:
    """The metrics of the scores (``["score"]`` for one unnamed metric)."""
    first = next((v for row in test for v in row if v is not None), None)
    if isinstance(first, dict):
        return list(first)
    return ["score"]

def score_table(rows: list[list[Any]], name: str, error_score: Any) -> np.ndarray:
    """(n_candidates, n_splits) scores of one metric; a failed fit or score is ``error_score``."""
    return np.array([[error_score if v is None else v[name] if isinstance(v, dict) else v
                      for v in row] for row in rows], dtype=np.float64)


def top_k(results: dict, k: int, itr: int) -> list[dict]:
    """The k best candidates of iteration ``itr``, worst first (NaN scores rank lowest)."""
    rows = np.flatnonzero(np.asarray(results["iter"]) == itr)
    scores = np.asarray(results["mean_test_score"])[rows]
    order = np.roll(np.argsort(scores), np.count_nonzero(np.isnan(scores)))
    return [results["params"][rows[i]] for i in order[-k:]]
