"""The memory budget is a bound: every estimator's fit, predict, decision_function, transform,
predict_proba and partial_fit stays within it.

Each estimator runs once in a fresh process (:func:`bench.memory.run_child`, the child of
``bench/memory.py``) on 5,000 synthetic training rows of 22 features and predicts 20,000 rows,
under ``cpu_memory_budget="16MB"`` (SVI at ``C=32`` with 500-row sub-SVMs: see :data:`PARAMS`):
small enough that it binds (an n × n kernel of the
training rows is 200 MB, LLSVM's 1,000-landmark feature matrix 20 MB, one kernel block of the
test rows against 1,000 support vectors 160 MB).  The figure is Linux's VmHWM growth
(exact, reset through ``/proc/self/clear_refs``; the same on a loaded machine), held to
:func:`bench.memory.bound_bytes`: the budget + the inputs + the fitted model (fit) or the
result (predict) + ``CONSTANT_BYTES``.  No timings.

A budget smaller than one row block of an operation is an error naming the minimum
(:class:`gpuksvm.MemoryBudgetError`), and the failed fit keeps the previous model.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import gpuksvm
from bench import cases  # noqa: F401  (registers the cases)
from bench.harness import REGISTRY
from bench.memory import ESTIMATORS as BENCHED
from bench.memory import (CONSTANT_BYTES, MB, SCALES, bound_bytes, estimator_params, grid, model_nbytes, run_child,
                          synthetic)
from gpuksvm.cli.demo import _can_reset_hwm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_reset_hwm(),
                                reason="needs Linux's resettable VmHWM")

N_TRAIN, N_TEST, BUDGET = 5000, 20000, "16MB"
ESTIMATORS = ("LinearSVM", "KernelSVC", "LLSVM", "CVM", "SVI", "OKFEBClassifier")

#: (estimator, stage) that exceed the bound today, with the figure measured here (MB = 10^6 bytes)
#: (5,000 rows, budget 16 MB, CONSTANT_BYTES 24 MB; the model and inputs under 5 MB)
OVER: dict = {}


def _over(name: str, stage: str) -> list:
    reason = OVER.get((name, stage))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


#: the test's changes to the bench's paper parameters.  SVI: on 5,000 rows its defaults solve the exact
#: SVM from the start (fewer than n_subsets × min_subset_rows = 10,000 rows), and at its paper C = 512
#: that SMO took 20 s of the child's 23 s (a quiet 2-core machine; C sets the number of SMO steps,
#: not the row blocks or kernel caches sized from the budget; the bound adds the model's own bytes).
#: With 500-row sub-SVMs the fit runs the ensemble, its margin system and its check, then the exact
#: fallback after the ensemble's freed blocks (the check fails here; the fit test asserts the
#: fallback's warning); at C = 32 the fit takes 1.7 s.
PARAMS = {"SVI": {"C": 32.0, "min_subset_rows": 500}}

_RESULTS: dict[str, dict] = {}


def _measured(name: str) -> dict:
    """The child's figures for ``name`` (one fresh process per estimator, shared by its tests)."""
    if name not in _RESULTS:
        _RESULTS[name] = run_child({"estimator": name, "dataset": "synthetic", "budget": BUDGET,
                                    "n_train": N_TRAIN, "n_test": N_TEST, "decision": True, "device": "cpu",
                                    "params": {**estimator_params(name, "paper"), **PARAMS.get(name, {})},
                                    "scale": "test"}, timeout=300)
    return _RESULTS[name]


def _cases(stage: str) -> list:
    return [pytest.param(name, id=name, marks=_over(name, stage)) for name in ESTIMATORS]


@pytest.mark.parametrize("name", _cases("fit"))
def test_fit_within_the_bound(name):
    r = _measured(name)
    assert r["budget_bytes"] == 16_000_000
    assert r["fit_bound"] == bound_bytes(r["budget_bytes"], r["inputs"], r["model"])
    assert r["fit_peak"] <= r["fit_bound"], (f"fit grew {r['fit_peak'] / MB:.1f} MB, bound "
                                             f"{r['fit_bound'] / MB:.1f} MB")
    if name == "SVI":   # the ensemble ran, and so did the exact fallback after it (see PARAMS)
        assert any(w.startswith("ExactFallbackWarning: SVI solved 1 of 1") for w in r["warnings"]), r["warnings"]


@pytest.mark.parametrize("name", _cases("predict"))
def test_predict_within_the_bound(name):
    r = _measured(name)
    assert r["predict_peak"] <= r["predict_bound"], (f"predict grew {r['predict_peak'] / MB:.1f} MB, bound "
                                                     f"{r['predict_bound'] / MB:.1f} MB")


@pytest.mark.parametrize("name", _cases("decision_function"))
def test_decision_function_within_the_bound(name):
    r = _measured(name)
    assert r["decision_peak"] <= r["decision_bound"], (f"decision_function grew {r['decision_peak'] / MB:.1f} MB, "
                                                       f"bound {r['decision_bound'] / MB:.1f} MB")


#: the other outputs of the contract, each estimator that has them fitted once in a fresh process
#: (2,000 training rows: a probability fit is six fits; its 2,000² kernel is 32 MB, twice the budget)
OUTPUT_CASES = [
    pytest.param("LLSVM", {"probability": True}, ("transform", "predict_proba"), id="LLSVM"),
    pytest.param("KernelSVC", {"probability": True}, ("predict_proba",), id="KernelSVC"),
    pytest.param("SVI", {"probability": True}, ("predict_proba",), id="SVI"),
    pytest.param("OKFEB", {}, ("transform", "partial_fit"), id="OKFEB"),
    pytest.param("OKFEBClassifier", {}, ("partial_fit",), id="OKFEBClassifier"),
]


@pytest.mark.parametrize("name, extra, outputs", OUTPUT_CASES)
def test_transform_predict_proba_and_partial_fit_within_the_bound(name, extra, outputs):
    r = run_child({"estimator": name, "dataset": "synthetic", "budget": BUDGET, "n_train": 2000, "n_test": N_TEST,
                   "outputs": list(outputs), "device": "cpu", "scale": "test",
                   "params": {**estimator_params(name, "paper"), **PARAMS.get(name, {}), **extra}}, timeout=300)
    assert r["budget_bytes"] == 16_000_000
    for output in outputs:
        peak, bound = r[output]["peak"], r[output]["bound"]
        print(f"{name}.{output}: grew {peak / MB:.1f} MB, bound {bound / MB:.1f} MB")
        assert 0 < peak <= bound, f"{output} grew {peak / MB:.1f} MB, bound {bound / MB:.1f} MB"


def test_the_bound_adds_its_terms():
    assert bound_bytes(16_000_000, 1_000, 2_000, 3_000) == 16_006_000 + CONSTANT_BYTES
    assert bound_bytes(1, 0, constant=0) == 1


def test_model_size_counts_each_buffer_once_and_not_the_inputs():
    X = np.zeros((100, 10))

    class Model:
        pass

    m = Model()
    m.coef_ = np.zeros(50)
    m.view_ = m.coef_[:10]                                    # the same buffer: counted once
    m.parts_ = [X[:5], {"w": np.zeros(3, np.float32)}]        # a view of the input: not the model's
    m.xp = np                                                 # a module: not followed
    assert model_nbytes(m, exclude=(X,)) == 50 * 8 + 3 * 4


# --------------------------------------------------------------------------- a budget below one block
#: the estimators whose fit sizes its row blocks from the budget
PLANNED = ("KernelSVC", "LLSVM", "CVM", "SVI", "OKFEBClassifier")


@pytest.mark.filterwarnings("ignore:SVI solved")       # 400 rows: SVI's exact fallback (expected)
@pytest.mark.parametrize("name", PLANNED)
def test_a_budget_below_one_row_block_is_an_error_naming_the_minimum(name):
    X, y = synthetic(400, 0)
    params = dict(estimator_params(name, "paper"), **({"n_landmarks": 50} if name == "LLSVM" else {}))
    est = getattr(gpuksvm, name)(**params, device="cpu", random_state=0).fit(X, y)
    before = est.decision_function(X)
    with gpuksvm.config_context(cpu_memory_budget=64):
        with pytest.raises(gpuksvm.MemoryBudgetError, match=r"(budget of 64 bytes|memory budget \(64 bytes\)).* at least [\d,]+ bytes") as info:
            est.fit(X[:300], -y[:300])
    assert info.value.configured == 64 and info.value.minimum > info.value.budget
    with gpuksvm.config_context(cpu_memory_budget=info.value.minimum):   # the minimum itself is accepted
        gpuksvm.array.backend.plan_rows(10, info.value.minimum)
    np.testing.assert_array_equal(est.decision_function(X), before)      # the failed fit kept the model


def test_the_memory_case_is_registered_and_measures_the_default_budget_first():
    assert set(REGISTRY["memory"].scales) == {"tiny", "small", "paper"} and set(BENCHED) == set(ESTIMATORS)
    specs = list(grid("paper"))
    assert len(specs) == 6 * 3 * 2 == len(ESTIMATORS) * len(SCALES["paper"]["budgets"]) * 2
    for i in range(0, len(specs), 3):     # each (data set, estimator) starts at the default budget
        assert [s["budget"] for s in specs[i:i + 3]] == ["default", "256MB", "64MB"]
    assert {(s["dataset"], s["n_train"], s["n_test"]) for s in specs} == {("ijcnn1", None, None),
                                                                          ("synthetic", 20000, 1000000)}
    assert next(s for s in specs if s["estimator"] == "LLSVM")["params"]["n_landmarks"] == 1000


# --------------------------------------------------------------------------- the linear model's predictions
def _three_classes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = synthetic(n, seed)
    return X, np.where(X[:, 2] > 0.05, 2, y)


def test_linear_predictions_run_in_row_blocks_within_the_budget():
    """LinearSVM's decision_function, predict and predict_proba of 200,000 float32 rows under a
    4 MB budget: the same values as unbudgeted, and a traced peak within the budget + the
    result (all rows at once: a float64 copy of X, 35 MB, and (n, 3) temporaries)."""
    import tracemalloc

    X, y = _three_classes(3000, 0)
    est = gpuksvm.LinearSVM(probability=True, random_state=0).fit(X, y)
    Xt = _three_classes(200_000, 1)[0].astype(np.float32)
    Xt_before = Xt.copy()
    free = {m: getattr(est, m)(Xt) for m in ("decision_function", "predict", "predict_proba")}
    budget = 4_000_000
    with gpuksvm.config_context(cpu_memory_budget=budget):
        for method, ref in free.items():
            tracemalloc.start()
            try:
                out = getattr(est, method)(Xt)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak <= budget + out.nbytes + 1_000_000, f"{method}: {peak / MB:.1f} MB traced"
            np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(Xt, Xt_before)


def test_a_budget_below_one_block_of_linear_probabilities_is_an_error_naming_the_minimum():
    X, y = synthetic(400, 0)
    est = gpuksvm.LinearSVM(probability=True, random_state=0).fit(X, y)
    with gpuksvm.config_context(cpu_memory_budget=1000):    # validates X, but not one block of probabilities
        with pytest.raises(gpuksvm.MemoryBudgetError, match=r"block of decision values.* at least [\d,]+ bytes") as info:
            est.predict_proba(X)
    assert info.value.minimum > info.value.budget
    with gpuksvm.config_context(cpu_memory_budget=4 * info.value.minimum):   # the decision blocks' quarter share
        assert est.predict_proba(X).shape == (400, 2)
