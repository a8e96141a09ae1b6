"""The LLSVM search engine within the memory budget: one γ's features at a time, the fold models
counted, and a (fold, γ) whose features do not fit fitted over streamed kernel blocks and said so.

The whole-search bound runs in a fresh process (:func:`bench.memory.run_search`: Linux's VmHWM,
reset through ``/proc/self/clear_refs``; exact, the same on a loaded machine) and is held to
:func:`bench.memory.bound_bytes`: the budget + the inputs + the refitted best model +
``CONSTANT_BYTES``.  No timings.
"""
from __future__ import annotations

import gc
import sys
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV as SklearnGridSearchCV

from bench.memory import MB, run_search, synthetic
from gpuksvm import LLSVM, config_context
from gpuksvm.array import backend as bk
from gpuksvm.cli.demo import _can_reset_hwm
from gpuksvm.estimators.llsvm import fit_llsvm_grid
from gpuksvm.model_selection import llsvm as engine
from test_llsvm_memory import _traced_peak

#: 20,000 rows of 22 features, k = 300, 3 folds: a fold's F is 13,333 × 300 float32 (16 MB), with
#: the Newton solver's scratch 32 MB, more than the 24 MB budget (and its 12 MB share per thread)
N, K, BUDGET = 20000, 300, "24MB"
GRID = {"gamma": [1.0, 2.0], "C": [1.0, 8.0]}

vmhwm = pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_reset_hwm(),
                           reason="needs Linux's resettable VmHWM")


def _search(n_jobs: int, refit: bool) -> dict:
    return run_search({"estimator": "LLSVM", "dataset": "synthetic", "n_train": N, "budget": BUDGET,
                       "n_jobs": n_jobs, "refit": refit, "grid": GRID, "cv": 3, "params": {"n_landmarks": K}},
                      timeout=600)


@pytest.fixture(scope="module")
def sklearn_scores():
    """scikit-learn's GridSearchCV over the same LLSVM (the default budget: F in memory)."""
    X, y = synthetic(N, 0)
    est = LLSVM(n_landmarks=K, device="cpu", random_state=0)
    return SklearnGridSearchCV(est, GRID, cv=3).fit(X, y).cv_results_["mean_test_score"]


@vmhwm
# n_jobs=2: a fold streams even with the whole budget, so the folds run one at a time
# (run_engine's unit_bytes rule); on 2 threads, each with half the budget, the search with its
# refit had grown 48.8 and 53.4 MB in two runs against this bound's 52.1 (each thread's C heap)
@pytest.mark.parametrize("n_jobs", [1, 2], ids=["n_jobs=1", "n_jobs=2"])
def test_the_search_streams_what_does_not_fit_and_stays_within_the_bound(n_jobs, sklearn_scores):
    refit = True
    r = _search(n_jobs, refit)
    assert r["peak"] <= r["bound"], f"grew {r['peak'] / MB:.1f} MB, bound {r['bound'] / MB:.1f} MB"
    # every fold's features streamed, and every candidate says so
    assert all(engine.SHARED_STREAMED in w for w in r["shared_work"]), r["shared_work"]
    search_warnings = [w for w in r["warnings"] if w.startswith("MemoryFallbackWarning: LLSVM search:")]
    assert len(search_warnings) == 1, r["warnings"]        # one for the search, not one per fit
    if refit:
        assert r["best_fallback"] == "streamed_features"  # 20,000 rows do not fit 24 MB either
    np.testing.assert_allclose(r["mean_test_score"], sklearn_scores, rtol=0, atol=0.002)


def test_the_grid_holds_one_gammas_features_at_a_time():
    """Three γ cost about the peak of one: each γ's F (8,000 × 400 float32, 12.8 MB), its
    validation and Newton's Grams go before the next γ's F is formed.  Measured (traced): one γ
    31.2 MB, three 34.4 MB; holding the previous γ's while forming the next: 44.7 MB (+1.05 F)."""
    X, y = synthetic(8000, 0)
    est = LLSVM(n_landmarks=400, kmeans_sample=2000, device="cpu", random_state=0)
    F = 8000 * 400 * 4
    with config_context(cpu_memory_budget="40MB"):      # F and the solver's scratch fit: in memory
        _, one = _traced_peak(lambda: fit_llsvm_grid(X, y, gammas=[1.0], Cs=[1.0, 8.0], estimator=est))
        models, three = _traced_peak(lambda: fit_llsvm_grid(X, y, gammas=[0.5, 1.0, 2.0], Cs=[1.0, 8.0],
                                                            estimator=est))
    assert three - one < 0.5 * F, (one / MB, three / MB)
    assert all(m.memory_fallback_ is None for m in models)


def test_the_grid_streams_what_does_not_fit_and_the_caller_may_warn_instead():
    """Under a budget smaller than F and the solver's scratch every model is fitted over streamed
    kernel blocks (``memory_fallback_``), to the in-memory solution; one warning, or none with
    ``warn_fallback=False``."""
    X, y = synthetic(6000, 0)
    est = LLSVM(n_landmarks=150, kmeans_sample=2000, tol=1e-6, device="cpu", random_state=0)
    kw = dict(gammas=[1.0, 2.0], Cs=[1.0, 8.0], estimator=est)
    ref = fit_llsvm_grid(X, y, **kw)
    with config_context(cpu_memory_budget="4MB"):
        with pytest.warns(bk.MemoryFallbackWarning, match="memory budget") as caught:
            got = fit_llsvm_grid(X, y, **kw)
        assert len([w for w in caught if issubclass(w.category, bk.MemoryFallbackWarning)]) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            quiet = fit_llsvm_grid(X, y, **kw, warn_fallback=False)
    for a, b, c in zip(ref, got, quiet):
        assert a.memory_fallback_ is None
        assert b.memory_fallback_ == c.memory_fallback_ == "streamed_features"
        assert b.svm_.objective_[0] == pytest.approx(a.svm_.objective_[0], rel=1e-5)
        assert np.mean(b.predict(X) == a.predict(X)) > 0.999


def test_the_fold_budget_counts_the_fold_models_alive():
    """A fold's fit is given the budget less this fold's models and the fold models still alive
    (the search holds them until it has scored them); they count until they are gone."""
    X, y = synthetic(3000, 0)
    est = LLSVM(n_landmarks=100, device="cpu", random_state=0)
    with config_context(cpu_memory_budget="64MB"):
        before = engine._fold_budget(est, X, 3000, 2)
        assert before == 64_000_000 - (2 * 100 * 100 + 100 * 22) * 4 - engine._held_bytes()
        models = fit_llsvm_grid(X, y, gammas=[1.0, 2.0], Cs=[1.0], estimator=est)
        engine._hold(models)
        held = sum(m.map_.nbytes for m in models) + models[0].landmarks_.nbytes
        assert engine._fold_budget(est, X, 3000, 2) <= before - held
        del models
        gc.collect()
        assert engine._fold_budget(est, X, 3000, 2) == before
