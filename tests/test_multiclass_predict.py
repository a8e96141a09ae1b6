"""Multi-class prediction from binary decision values works in row blocks of the memory budget.

``predict``, ``decision_function`` and ``predict_proba`` of the SVC surface (KernelSVC, SVI,
CVM) compute the decision values of a block of rows, vote (or score, or couple) on it and keep
only the per-row results: the same values as all rows at once, and a peak of NumPy's traced
allocations within the budget plus the output (:mod:`tracemalloc`, exact on a loaded machine).
"""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import gpuksvm
from gpuksvm import CVM, SVI, KernelSVC
from gpuksvm.cli.demo import PeakMemory
from gpuksvm.solvers.multiclass import binary_problems, decision_block_rows, ovo_predict, ovr_decision_function

MB = 1e6
K = 10


@pytest.fixture(scope="module")
def ten_classes():
    X, y = make_blobs(1200, n_features=8, centers=K, cluster_std=2.5, random_state=0)
    Xt, _ = make_blobs(40000, n_features=8, centers=K, cluster_std=3.0, random_state=1)
    return X, y, Xt


@pytest.fixture(scope="module")
def svc(ten_classes):
    X, y, _ = ten_classes
    return KernelSVC(gamma=0.1, probability=True, random_state=0, device="cpu").fit(X, y)


def _outputs(est, X):
    out = {"predict": est.predict(X), "decision_function": est.decision_function(X)}
    if hasattr(est, "probA_"):
        out["predict_proba"] = est.predict_proba(X)
    return out


@pytest.mark.parametrize("make", [
    pytest.param(lambda: KernelSVC(gamma=0.1, probability=True, random_state=0, device="cpu"), id="svc-ovo"),
    pytest.param(lambda: KernelSVC(gamma=0.1, break_ties=True, device="cpu"), id="svc-break-ties"),
    pytest.param(lambda: KernelSVC(gamma=0.1, decision_function_shape="ovo", device="cpu"), id="svc-ovo-shape"),
    pytest.param(lambda: CVM(C=10.0, multi_class="ovr", device="cpu", random_state=0), id="cvm-ovr"),
    pytest.param(lambda: CVM(C=10.0, device="cpu", random_state=0), id="cvm-ovo"),
    pytest.param(lambda: SVI(multi_class="ovr", device="cpu", random_state=0), id="svi-ovr"),
])
def test_blocks_give_the_values_of_all_rows_at_once(ten_classes, make):
    """Under a budget of a few hundred rows per block the outputs are those of one block (the
    default budget holds these 3,000 rows), and they follow the vote / score rules of the
    model's own decision values."""
    X, y, Xt = ten_classes
    Xt = Xt[:3000]
    est = make().fit(X, y)
    with gpuksvm.config_context(cpu_memory_budget="1MB"):
        assert decision_block_rows(3000, K * (K - 1) // 2, K) < 1000        # several blocks
        blocked = _outputs(est, Xt)
    whole = _outputs(est, Xt)
    np.testing.assert_array_equal(blocked["predict"], whole["predict"])
    for name in ("decision_function", "predict_proba"):
        if name in whole:
            np.testing.assert_allclose(blocked[name], whole[name], rtol=0, atol=1e-12)
    D = est._problem_decisions(Xt)[0]
    if est._multiclass_scheme() == "ovr":
        want_idx, want_df = np.argmax(D, axis=1), D
    else:
        want_idx = ovo_predict(D, K, break_ties=bool(getattr(est, "break_ties", False)))
        want_df = D if est.decision_function_shape == "ovo" else ovr_decision_function(D, K)
    np.testing.assert_array_equal(whole["predict"], est.classes_[want_idx])
    np.testing.assert_allclose(whole["decision_function"], want_df, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["predict", "decision_function", "decision_function_ovo", "predict_proba"])
def test_peak_within_the_budget_plus_input_and_output(svc, ten_classes, method):
    """40,000 rows of 8 features (2.6 MB), 45 one-vs-one problems, budget 4 MB: the decision
    values of all rows would be 14.4 MB.  The traced peak stays within the budget + the input +
    the output (the bound of the memory budget; the input's validation alone peaks at 4.3 MB).
    Measured at the commit before row blocks: 29.3 MB for predict and for decision_function of
    either shape, 209 MB for predict_proba; with them 4.7, 5.8, 17.0 (ovo: output 14.4 MB) and
    4.7 MB."""
    _, _, Xt = ten_classes
    budget = 4_000_000
    shape = "ovo" if method.endswith("_ovo") else "ovr"
    svc.set_params(decision_function_shape=shape)
    try:
        with gpuksvm.config_context(cpu_memory_budget=budget), PeakMemory("tracemalloc") as mem:
            out = getattr(svc, method.removesuffix("_ovo"))(Xt)
    finally:
        svc.set_params(decision_function_shape="ovr")
    assert out.shape[0] == Xt.shape[0]
    if shape == "ovo":
        assert out.shape[1] == len(binary_problems(K, "ovo"))
    assert mem.peak_bytes <= budget + Xt.nbytes + out.nbytes, \
        f"{method}: peak {mem.peak_bytes / MB:.1f} MB, output {out.nbytes / MB:.1f} MB"


def test_decision_block_rows_follow_the_budget():
    with gpuksvm.config_context(cpu_memory_budget=1_000_000):
        rows = decision_block_rows(10**6, 45, 10, width=10)
    assert rows == 1_000_000 // 4 // (8 * (2 * 45 + 5 * 10 + 10))
    with gpuksvm.config_context(cpu_memory_budget=1000), pytest.raises(gpuksvm.MemoryBudgetError,
                                                                       match="decision values"):
        decision_block_rows(100, 45, 10)


def test_blocks_on_the_gpu(gpu):
    """On the (emulated) GPU, blocks sized from the device budget too: the values of one block,
    in the caller's kind of array.  160 training rows (4 classes, 6 one-vs-one problems, each
    fitted 6 times for the probabilities): the block rows do not depend on them."""
    X, y = make_blobs(160, n_features=6, centers=4, cluster_std=2.5, random_state=0)
    Xt, _ = make_blobs(2000, n_features=6, centers=4, cluster_std=3.0, random_state=1)
    est = KernelSVC(gamma=0.1, probability=True, random_state=0, device="cuda").fit(X, y)
    whole = _outputs(est, Xt)
    with gpuksvm.config_context(cpu_memory_budget="200KB", gpu_memory_budget="100KB"):
        assert decision_block_rows(2000, 6, 4, device=est.fitted_device_, itemsize=4) < 500
        blocked = _outputs(est, Xt)
        labels = est.predict(gpu.asarray(Xt))
    np.testing.assert_array_equal(blocked["predict"], whole["predict"])
    np.testing.assert_array_equal(gpu.asnumpy(labels), whole["predict"])
    for name in ("decision_function", "predict_proba"):
        np.testing.assert_allclose(blocked[name], whole[name], rtol=0, atol=1e-6)
