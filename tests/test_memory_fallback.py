"""The kernel SVMs within ``set_config(cpu_memory_budget=...)``: what a small budget makes smaller
(``memory_fallback_`` + one ``MemoryFallbackWarning``), that the result stays the unconstrained
one to tolerance, and the peak growth of a fit and predict in a fresh process.

LLSVM's budget lives in ``tests/test_llsvm_memory.py``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import gpuksvm
from gpuksvm import CVM, SVI, KernelSVC, OKFEBClassifier
from gpuksvm.array.backend import MemoryFallbackWarning
from gpuksvm.cli.demo import _can_reset_hwm
from gpuksvm.datasets import make_checkerboard
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.solvers.cvm.algorithm import CVMParams, qp_memory
from gpuksvm.solvers.smo.memory import CACHE_BUDGET_SHARE, cache_within_budget
from gpuksvm.solvers.svi.steps import (
    closed_form_beta,
    margin_solve_bytes,
    margin_solve_dtype,
    max_margin_rows,
)

MB = 1e6
ROOT = Path(__file__).resolve().parents[1]


def _memory_warnings(record) -> list:
    return [w for w in record if issubclass(w.category, MemoryFallbackWarning)]


# --------------------------------------------------------------------------- the pieces
def test_closed_form_beta_in_one_matrix_solves_eq_9():
    """The symmetric system in K's memory gives the LU solution of (I/(2C) + ΠK)β = Πy."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.where(rng.normal(size=300) > 0, 1.0, -1.0)
    K = kernel_block(X, None, Kernel("rbf", gamma=0.4))
    C = 3.0
    A = K - K.mean(axis=0, keepdims=True)
    A[np.diag_indices(300)] += 1 / (2 * C)
    beta_lu = np.linalg.solve(A, y - y.mean())
    b_lu = float(np.mean(y - K @ beta_lu))
    K0 = K.copy()
    beta, b = closed_form_beta(K, y, C)
    assert np.array_equal(K, K0)                      # not overwritten unless asked
    np.testing.assert_allclose(beta, beta_lu, rtol=1e-9, atol=1e-11)
    assert abs(b - b_lu) < 1e-9
    beta2, b2 = closed_form_beta(K, y, C, overwrite_k=True)
    np.testing.assert_allclose(beta2, beta_lu, rtol=1e-9, atol=1e-11)
    assert not np.array_equal(K, K0)


def test_margin_solve_sizes_follow_the_budget():
    assert margin_solve_dtype(5000, 22, np.float64, 512 * 2**20) == (np.float64, False)
    assert margin_solve_dtype(5000, 22, np.float64, 200 * 10**6) == (np.float32, True)
    assert margin_solve_dtype(9000, 22, np.float32, 2**40) == (np.float32, False)
    for budget in (10**6, 64 * 10**6, 10**9):
        s = max_margin_rows(22, budget)
        assert margin_solve_bytes(s, 22, 4) <= budget < margin_solve_bytes(s + 1, 22, 4)


def test_caches_hold_half_the_budget():
    with gpuksvm.config_context(cpu_memory_budget="40MB"):
        assert cache_within_budget(200 * 2**20) == (int(CACHE_BUDGET_SHARE * 40e6), True)
        assert cache_within_budget(200 * 2**20, n_parallel=2) == (int(CACHE_BUDGET_SHARE * 40e6) // 2, True)
        assert cache_within_budget(2**20) == (2**20, False)
        cache, dense_max, capped = qp_memory(CVMParams(cache_size=1024))
        assert capped and cache == int(CACHE_BUDGET_SHARE * 40e6)
        assert 6 * dense_max ** 2 * 8 <= 40e6
    with gpuksvm.config_context(cpu_memory_budget=512 * 2**20):
        assert qp_memory(CVMParams(cache_size=200))[1:] == (3072, False)


# --------------------------------------------------------------------------- the estimators
def _two_class(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.where(X[:, 0] * X[:, 1] + 0.5 * X[:, 2] + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, y


def test_kernel_svc_cache_counts_against_the_budget():
    X, y = _two_class(1500)
    ref = KernelSVC(device="cpu", cache_size=200).fit(X, y)
    assert ref.memory_fallback_ is None
    with gpuksvm.config_context(cpu_memory_budget="8MB"), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        est = KernelSVC(device="cpu", cache_size=200).fit(X, y)
    assert est.memory_fallback_ == "kernel_cache"
    assert len(_memory_warnings(rec)) == 1
    assert "cache_size=200 MB to 4 MB" in str(_memory_warnings(rec)[0].message)
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-6, atol=1e-8)


def test_svi_margin_system_within_the_budget():
    """A budget below the float64 system: float32, then fewer margin rows; close to the full fit."""
    X, y = _two_class(12000)
    Xt, yt = _two_class(4000, seed=1)
    kw = dict(device="cpu", random_state=0, ensemble_check=False)
    ref = SVI(**kw).fit(X, y)
    assert ref.memory_fallback_ is None
    s = int(ref.margin_support_[0].shape[0])
    assert s > 1000
    budget_f32 = margin_solve_bytes(s, 5, 4) + 10**5           # float32 fits, float64 does not
    with gpuksvm.config_context(cpu_memory_budget=budget_f32), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        f32 = SVI(**kw).fit(X, y)
    assert f32.memory_fallback_ == "float32_margin_solve"
    assert len(_memory_warnings(rec)) == 1
    np.testing.assert_array_equal(f32.support_, ref.support_)
    np.testing.assert_allclose(f32.decision_function(Xt), ref.decision_function(Xt), atol=2e-3)
    small = margin_solve_bytes(s // 2, 5, 4)                   # half the band's rows fit
    with gpuksvm.config_context(cpu_memory_budget=small), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cut = SVI(**kw).fit(X, y)
    assert cut.memory_fallback_ == "float32_margin_solve, margin_rows"
    assert cut.sub_models_[0]["guard"] == "memory"
    assert cut.margin_support_[0].shape[0] <= max_margin_rows(5, small)
    assert len(_memory_warnings(rec)) == 1
    assert not cut.margin_capped_.any()
    assert abs(cut.score(Xt, yt) - ref.score(Xt, yt)) < 0.02


def test_cvm_core_qp_within_the_budget():
    X, y = make_checkerboard(4000, random_state=0)
    kw = dict(device="cpu", random_state=0, gamma=20.0, C=100.0, cache_size=200)
    ref = CVM(**kw).fit(X, y)
    assert ref.memory_fallback_ is None
    core = int(ref.core_set_size_.max())
    budget = int(48 * (core // 2) ** 2)           # the dense regime ends at half the core set
    with gpuksvm.config_context(cpu_memory_budget=budget), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        est = CVM(**kw).fit(X, y)
    assert est.memory_fallback_ == "kernel_cache"
    assert len(_memory_warnings(rec)) == 1
    with gpuksvm.config_context(cpu_memory_budget=budget), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")       # the default cache is half the budget: nothing cut
        default = CVM(**dict(kw, cache_size=None)).fit(X, y)
    assert default.memory_fallback_ is None and not _memory_warnings(rec)
    Xt, _ = make_checkerboard(3000, random_state=1)
    agree = np.mean(est.predict(Xt) == ref.predict(Xt))
    assert agree > 0.99, agree


def test_okfeb_predicts_in_blocks_of_the_budget():
    X, y = _two_class(3000)
    est = OKFEBClassifier(device="cpu", random_state=0).fit(X, y)
    ref = est.decision_function(X)
    with gpuksvm.config_context(cpu_memory_budget="2MB"):
        np.testing.assert_allclose(est.decision_function(X), ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(est.predict(X), est.classes_[(ref > 0).astype(int)])


# --------------------------------------------------------------------------- fresh-process peaks
_CHILD = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import gpuksvm
    from gpuksvm import SVI, KernelSVC, OKFEBClassifier
    from gpuksvm.cli.demo import PeakMemory
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40000, 8))
    y = np.where(X[:, 0] * X[:, 1] + 0.5 * X[:, 2] + 0.5 * rng.normal(size=X.shape[0]) > 0, 1, 0)
    X, Xt, y = X[:16000], X[16000:], y[:16000]
    gpuksvm.set_config(cpu_memory_budget=sys.argv[1])
    out = {"inputs": X.nbytes + y.nbytes}
    for name, est in (("KernelSVC", KernelSVC(device="cpu")),
                      ("SVI", SVI(device="cpu", random_state=0, ensemble_check=False)),
                      ("OKFEBClassifier", OKFEBClassifier(device="cpu", random_state=0))):
        with PeakMemory("vmhwm") as fit:
            est.fit(X, y)
        with PeakMemory("vmhwm") as pred:
            est.predict(Xt)
        out[name] = [fit.peak_bytes, pred.peak_bytes, getattr(est, "memory_fallback_", None)]
    print(json.dumps(out))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_reset_hwm(),
                    reason="needs Linux's resettable VmHWM")
def test_fit_and_predict_peaks_within_a_binding_budget():
    """16,000 × 8 rows fitted, 24,000 predicted, budget 24 MB (LIBSVM's default cache is 200 MB;
    SVI's 16,000-row problem keeps thousands of margin rows, a float64 system of ~100 MB).

    Each fit and predict ≤ budget + the inputs + 64 MB: the libraries' own resident memory
    (OpenBLAS's thread buffers, glibc's kept heap) and the models.  Measured on the 2-core
    development machine (fit / predict): KernelSVC 43 / 28 MB, SVI 65 / 28 MB, OKFEB 52 / 18 MB;
    with the default 512 MiB budget KernelSVC 393 / 540 MB and SVI 600 / 521 MB.  VmHWM counts
    pages, not time: the figures do not depend on the load.
    """
    proc = subprocess.run([sys.executable, "-c", _CHILD, "24MB"], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    bound = 24 * MB + r["inputs"] + 64 * MB
    for name in ("KernelSVC", "SVI", "OKFEBClassifier"):
        fit, pred, _fallback = r[name]
        assert fit <= bound, (name, fit / MB, bound / MB)
        assert pred <= bound, (name, pred / MB, bound / MB)
    assert r["KernelSVC"][2] == "kernel_cache"
    assert r["SVI"][2] is not None


def test_cvm_default_cache_is_half_the_budget_and_never_cut():
    for budget in ("40MB", 512 * 2**20):
        with gpuksvm.config_context(cpu_memory_budget=budget):
            cache, _dense_max, capped = qp_memory(CVMParams())
            assert not capped
            assert cache == int(CACHE_BUDGET_SHARE * gpuksvm.get_config()["cpu_memory_budget"])
    assert CVM().get_params()["cache_size"] is None
    assert CVM(cache_size=100).get_params()["cache_size"] == 100
