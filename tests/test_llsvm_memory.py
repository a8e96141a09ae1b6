"""Memory of LLSVM's in-memory fit and predict: the feature matrix F plus bounded scratch.

The whole-fit bound runs in a fresh process and reads Linux's VmHWM (exact, reset through
``/proc/self/clear_refs``); the stage bounds count NumPy's allocations with :mod:`tracemalloc`
(exact too: NumPy reports every buffer to it), so neither depends on timing or on the load.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

from gpuksvm import LLSVM, config_context
from gpuksvm.solvers.nystrom import maps as nystrom
from gpuksvm.cli.demo import _can_reset_hwm
from gpuksvm.solvers.linear.problem import Design
from gpuksvm.solvers.linear.newton_memory import newton_squared_hinge
from gpuksvm.array.validation import _SCAN_VALUES, check_working_range, max_row_sq_norm

MB = 1e6
ROOT = Path(__file__).resolve().parents[1]


def _traced_peak(fn):
    """fn()'s result and the peak of the bytes traced while it ran, above those traced at its start."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    from gpuksvm import LLSVM
    from gpuksvm.demo import PeakMemory
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160000, 22))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=X.shape[0]) > 0, 1, -1)
    X, Xt, y = X[:60000], X[60000:], y[:60000]
    est = LLSVM(n_landmarks=300, device="cpu", random_state=0)
    with PeakMemory("vmhwm") as fit:
        est.fit(X, y)
    with PeakMemory("vmhwm") as pred:
        est.decision_function(Xt)
    print(json.dumps({"fit": fit.peak_bytes, "predict": pred.peak_bytes, "F": X.shape[0] * 300 * 4,
                      "inputs": X.nbytes + y.nbytes, "test": Xt.nbytes}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_reset_hwm(),
                    reason="needs Linux's resettable VmHWM")
def test_fit_and_predict_peak_in_a_fresh_process():
    """60,000 × 22 rows, k = 300 (F = 72 MB float32), then 100,000 rows predicted.

    fit ≤ 2·F + inputs + 64 MB and predict ≤ one capped kernel block + 2 × the test rows +
    32 MB.  The constants are the libraries' own resident memory (OpenBLAS's thread buffers
    are touched by the first large GEMM, ~10 MB; glibc keeps freed heap blocks resident) and
    the k-means sample; measured here: fit 176 MB against the bound's 219 MB, predict 45 MB
    against 82 MB.  The validation scans that converted all of F to float64 twice and the
    whole-size kernel blocks peaked at 455 MB (fit) and ~130 MB (predict).  VmHWM counts
    pages, not time: the figure is the same on a loaded machine.
    """
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    fit_bound = 2 * r["F"] + r["inputs"] + 64 * MB
    assert r["fit"] <= fit_bound, (r["fit"] / MB, fit_bound / MB)
    predict_bound = nystrom.KERNEL_BLOCK_BYTES + 2 * r["test"] + 32 * MB
    assert r["predict"] <= predict_bound, (r["predict"] / MB, predict_bound / MB)


def test_validation_scans_convert_bounded_blocks():
    """max_row_sq_norm and the working-range check of a float32 F hold blocks of at most
    _SCAN_VALUES values (8 MB of float64), not copies of all of F."""
    F = np.random.default_rng(0).normal(size=(20000, 500)).astype(np.float32)   # 40 MB
    sq, peak = _traced_peak(lambda: max_row_sq_norm(F))
    assert sq == pytest.approx(float((F.astype(np.float64) ** 2).sum(axis=1).max()), rel=1e-12)
    assert peak <= 2.5 * _SCAN_VALUES * 8, peak / MB
    _, peak = _traced_peak(lambda: check_working_range(F, np.float32, training=True))
    assert peak <= 2.5 * _SCAN_VALUES * 8, peak / MB


def test_transform_and_predict_hold_one_capped_kernel_block(monkeypatch):
    X = np.random.default_rng(1).normal(size=(20000, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    est = LLSVM(n_landmarks=100, kmeans_sample=2000, device="cpu", random_state=0).fit(X[:2000], y[:2000])
    F_ref = est.transform(X)
    D_ref = est.decision_function(X)
    monkeypatch.setattr(nystrom, "KERNEL_BLOCK_BYTES", 1 << 20)      # 2,621 rows of 100 landmarks
    F, peak = _traced_peak(lambda: est.transform(X))
    # float32 features of other block shapes: the GEMMs round otherwise (up to 5.1e-6 apart on an
    # AMD EPYC with OpenBLAS's Haswell kernels, values up to about 1)
    np.testing.assert_allclose(F, F_ref, rtol=1e-5, atol=2e-5)
    assert peak <= F.nbytes + (1 << 20) + 1.5 * MB, (peak - F.nbytes) / MB   # F, a block, row norms
    D, peak = _traced_peak(lambda: est.decision_function(X))
    np.testing.assert_allclose(D, D_ref, rtol=1e-5, atol=1e-5)
    assert peak <= (1 << 20) + 1.5 * MB, peak / MB                          # the kernel block 8 MB whole


def test_signed_gram_copies_each_block_once():
    rng = np.random.default_rng(2)
    F = rng.normal(size=(8192, 499)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=8192).astype(np.float32)
    design = Design(F, 1.0)
    G, peak = _traced_peak(lambda: design.signed_gram(w))
    Ft = np.hstack([F, np.ones((8192, 1), np.float32)]).astype(np.float64)
    np.testing.assert_allclose(G, (Ft * w[:, None]).T @ Ft, rtol=1e-4, atol=1e-2)
    # one float32 copy of the block's rows (16 MB), its float32 and float64 Grams and the sum
    assert peak <= F.nbytes + 4 * 500 * 500 * 8, peak / MB


def test_signed_gram_accumulates_in_place_in_column_blocks():
    # the streamed solver's accumulators: out += the signed Gram, formed a column block at a time
    # beside it (no second dim x dim array)
    rng = np.random.default_rng(4)
    F = rng.normal(size=(3000, 400))
    w = rng.uniform(-2.0, 2.0, size=3000)
    design = Design(F, 0.5)
    acc = rng.normal(size=(401, 401))
    expect = acc + design.signed_gram(w)
    out, peak = _traced_peak(lambda: design.signed_gram(w, out=acc, cols=50))
    assert out is acc
    np.testing.assert_allclose(acc, expect, rtol=1e-10, atol=1e-8)
    # the rows' copy (one sign at a time) and a 400 x 50 product, not a 401 x 401 one
    assert peak <= F.nbytes + 400 * 50 * 8 + 0.5 * MB, peak / MB


class _ProductRunsOutOnce(np.ndarray):
    """Rows whose second product wider than 25 columns raises MemoryError (once)."""
    products = 0
    failed = False

    def __matmul__(self, other):
        if np.ndim(other) == 2 and other.shape[1] > 25:
            type(self).products += 1
            if type(self).products == 2 and not type(self).failed:
                type(self).failed = True
                raise MemoryError("injected")
        return np.asarray(self) @ np.asarray(other)


def test_signed_gram_out_of_memory_midway_adds_every_row_once(monkeypatch):
    """An out-of-memory error after part of a block is in ``out`` (the positive rows added, the
    negative ones failing; a column block failing after the first was added) is retried without
    adding anything twice: the same sum as without the error."""
    monkeypatch.setattr(_ProductRunsOutOnce, "products", 0)
    monkeypatch.setattr(_ProductRunsOutOnce, "failed", False)
    rng = np.random.default_rng(5)
    F = rng.normal(size=(3000, 100))
    w = rng.uniform(-2.0, 2.0, size=3000)
    expect = Design(F, 0.5).signed_gram(w)
    calls = {"negative": 0}
    rows_gram = Design._rows_gram

    def negative_runs_out_once(self, rows, weights, float64, out, sign, cols=None):
        if sign < 0:
            calls["negative"] += 1
            if calls["negative"] == 1:
                raise MemoryError("injected")
        return rows_gram(self, rows, weights, float64, out, sign, cols)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with monkeypatch.context() as m:
            m.setattr(Design, "_rows_gram", negative_runs_out_once)
            got = Design(F, 0.5).signed_gram(w, block_rows=1000)
        np.testing.assert_allclose(got, expect, rtol=1e-10, atol=1e-8)
        F_oom = F.view(_ProductRunsOutOnce)
        got = Design(F_oom, 0.5).signed_gram(w, block_rows=1000, cols=50)
        assert _ProductRunsOutOnce.failed
        np.testing.assert_allclose(np.asarray(got), expect, rtol=1e-10, atol=1e-8)
    assert sum("out of memory" in str(x.message) for x in caught) == 2


def test_newton_cg_does_not_copy_mostly_active_rows():
    """Newton-CG with more than half of the rows active uses F itself (inactive rows weigh 0)
    instead of a copy of the active rows; with few active rows the copy (≤ F/2) pays."""
    rng = np.random.default_rng(3)
    F = rng.normal(size=(20000, 300)).astype(np.float32)                    # 24 MB
    y = np.where(F[:, 0] > 0, 1.0, -1.0).astype(np.float32)
    W0 = np.zeros((301, 1), np.float32)
    W0[0] = 1.0                                       # 68 % of the rows active at the first step
    sol, peak = _traced_peak(lambda: newton_squared_hinge(F, y, 1.0, method="cg", W0=W0, max_iter=3))
    assert sol.info["method"] == "cg"
    # the later steps copy their ~15 % active rows (3.6 MB); a copy of the first step's 68 %
    # would be 16 MB
    assert peak <= F.nbytes / 4, peak / MB


def test_newton_frees_the_warm_start_rows_before_the_full_solve():
    """The random tenth of the rows that gives the warm start is copied, solved and freed: the
    full solve's peak is one 8,192-row Gram block (6.5 MB here) and n-long vectors, without the
    tenth's 3.3 MB beside it (11.5 MB when it was kept)."""
    rng = np.random.default_rng(4)
    F = rng.normal(size=(40960, 199)).astype(np.float32)                    # 33 MB
    y = np.where(F[:, 0] + F[:, 1] + 0.5 * rng.normal(size=40960) > 0, 1.0, -1.0).astype(np.float32)
    sol, peak = _traced_peak(lambda: newton_squared_hinge(F, y, 1.0, random_state=0))
    assert sol.info["method"] == "cholesky"
    assert peak <= 8192 * 200 * 4 + 2.5 * MB, peak / MB


_STREAM_CHILD = textwrap.dedent("""
    import json, warnings
    import numpy as np
    from gpuksvm import LLSVM, set_config
    from gpuksvm.cli.demo import PeakMemory
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60000, 22))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=X.shape[0]) > 0, 1, -1)
    set_config(cpu_memory_budget="48MB")
    est = LLSVM(n_landmarks=400, device="cpu", random_state=0)
    with warnings.catch_warnings(record=True) as caught, PeakMemory("vmhwm") as fit:
        warnings.simplefilter("always")
        est.fit(X, y)
    with PeakMemory("vmhwm") as pred:
        est.decision_function(X)
    print(json.dumps({"fit": fit.peak_bytes, "predict": pred.peak_bytes, "F": X.shape[0] * 400 * 4,
                      "inputs": X.nbytes + y.nbytes, "streamed": est.memory_fallback_ == "streamed_features",
                      "warnings": [str(w.message) for w in caught]}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_reset_hwm(),
                    reason="needs Linux's resettable VmHWM")
def test_budget_smaller_than_F_streams_within_the_budget():
    """60,000 × 22 rows, k = 400: F is 96 MB (float32), twice the 48 MB budget.  The fit streams
    the kernel blocks per Newton pass (``memory_fallback_ == "streamed_features"``, one warning) and its peak stays within the
    budget + the inputs + 64 MB of libraries' resident memory (a copy of F alone would exceed it);
    prediction holds one budget-sized kernel block.  Measured: fit 91 MB against the bound's
    123 MB, predict 32 MB against 80 MB."""
    proc = subprocess.run([sys.executable, "-c", _STREAM_CHILD], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["streamed"] is True
    assert len([w for w in r["warnings"] if "memory budget" in w]) == 1, r["warnings"]
    bound = 48e6 + r["inputs"] + 64 * MB
    assert bound < r["F"] + r["inputs"] + 64 * MB
    assert r["fit"] <= bound, (r["fit"] / MB, bound / MB)
    assert r["predict"] <= 48e6 + 32 * MB, r["predict"] / MB


def test_streamed_fit_reaches_the_in_memory_solution():
    """The switch changes where F lives, not the model: the same coefficients to the solver's
    tolerance; the default budget keeps F in memory (``memory_fallback_`` None, no warning)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(12000, 8))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=12000) > 0, 1, -1)
    kw = dict(n_landmarks=150, kmeans_sample=2000, tol=1e-6, device="cpu", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = LLSVM(**kw).fit(X, y)
    assert ref.memory_fallback_ is None
    # 8 MB: the whole 2,000-row sample warm-starts the streamed solver; 1.5 MB: its in-memory
    # solve does not fit, a 324-row head of the sample does (the same solution either way)
    for budget in ("8MB", "1.5MB"):
        with config_context(cpu_memory_budget=budget), pytest.warns(UserWarning, match="memory budget"):
            est = LLSVM(**kw).fit(X, y)
        assert est.memory_fallback_ == "streamed_features"
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-3 * float(np.abs(ref.coef_).max()))
        np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-3)
        assert est.svm_.objective_[0] == pytest.approx(ref.svm_.objective_[0], rel=1e-6)
        assert np.mean(est.predict(X) == ref.predict(X)) > 0.999


def test_predict_proba_holds_one_block_of_features(monkeypatch):
    """predict_proba maps and scores one capped row block at a time: the same probabilities as
    the linear SVM on all of F, without F (20,000 × 100 float32, 8 MB) in memory."""
    X = np.random.default_rng(6).normal(size=(20000, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    est = LLSVM(n_landmarks=100, kmeans_sample=2000, probability=True, device="cpu",
                random_state=0).fit(X[:2000], y[:2000])
    P_ref = est.svm_.predict_proba(est.transform(X))
    monkeypatch.setattr(nystrom, "KERNEL_BLOCK_BYTES", 1 << 20)      # 2,621 rows of 100 landmarks
    P, peak = _traced_peak(lambda: est.predict_proba(X))
    np.testing.assert_allclose(P, P_ref, rtol=1e-5, atol=2e-5)     # float32 features, as above (6.0e-6)
    assert peak <= P.nbytes * 2 + 4 * (1 << 20) + 1.5 * MB, peak / MB


def test_a_fit_that_cannot_stream_says_so():
    """The hinge loss (dual coordinate descent) has no streamed twin here: over the budget it keeps
    F in memory, with a warning, and ``memory_fallback_`` stays None."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4000, 5))
    y = np.where(X[:, 0] > 0, 1, -1)
    with config_context(cpu_memory_budget="1MB"), pytest.warns(UserWarning, match="F is kept in memory"):
        est = LLSVM(n_landmarks=100, loss="hinge", kmeans_sample=1000, device="cpu", random_state=0).fit(X, y)
    assert est.memory_fallback_ is None
