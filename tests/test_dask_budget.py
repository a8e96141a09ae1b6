"""The Dask worker tasks run under the driver's memory budget.

The settings of gpuksvm.array.backend are per thread; a worker thread starts from its own
defaults (512 MiB, or its GPUKSVM_CPU_MEMORY_BUDGET).  Checked on an in-process LocalCluster
(worker threads of this process, so a probe can record what a task saw): every task function
of an LLSVM fit and of a prediction sees the budget the driver set, the tasks running at once
on a worker split it, the keep-F decision follows it, and a Newton pass works a chunk larger
than its budget in row blocks to the same sums.  The CVM's furthest-point scan of a chunk and
SVI's margin pass of a chunk work in row blocks of the task's share too: the same rows as one
block, and a scratch peak (tracemalloc on the CPU, the emulated pool's peak for a CuPy chunk)
within the share plus the shipped model and a stated constant.
"""
from __future__ import annotations

import functools
import tracemalloc

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gpuksvm  # noqa: E402
from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.datasets import make_checkerboard  # noqa: E402
from gpuksvm.estimators.llsvm import LLSVM  # noqa: E402
from gpuksvm.kernels.kernel import Kernel  # noqa: E402
from gpuksvm.scaleout import cvm as dcvm  # noqa: E402
from gpuksvm.scaleout import llsvm as dllsvm  # noqa: E402
from gpuksvm.scaleout import svi as dsvi  # noqa: E402
from gpuksvm.solvers.cvm.scan import scan_block_rows  # noqa: E402
from gpuksvm.solvers.svi.steps import submodel_block_rows, submodel_row_bytes  # noqa: E402
from gpuksvm.scaleout import predict as dpredict  # noqa: E402
from gpuksvm.scaleout.runtime import on_workers  # noqa: E402
from gpuemu.pool import measure_peak  # noqa: E402

MB64 = 64_000_000


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as lc, distributed.Client(lc) as c:
        yield c


@pytest.fixture(autouse=True)
def _no_budget_in_env(monkeypatch):
    monkeypatch.delenv("GPUKSVM_CPU_MEMORY_BUDGET", raising=False)


@pytest.fixture(scope="module")
def board():
    X, y = make_checkerboard(2000, flip=0.1, random_state=3)
    return X, y


def _llsvm(**kw):
    params = dict(gamma=20.0, C=10.0, n_landmarks=30, kmeans_sample=300, device="cpu", random_state=0,
                  tol=1e-8, max_iter=200, dtype="float64")
    return LLSVM(**{**params, **kw})


def _probe(monkeypatch, module, names):
    """Replace ``module.<name>`` by a wrapper recording the CPU budget each call ran under."""
    seen: dict[str, list[int]] = {name: [] for name in names}

    def wrap(name, fn):
        @functools.wraps(fn)
        def probed(*args, **kwargs):
            seen[name].append(bk.memory_budget("cpu"))
            return fn(*args, **kwargs)
        return probed

    for name in names:
        monkeypatch.setattr(module, name, wrap(name, getattr(module, name)))
    return seen


def test_worker_threads_start_from_their_own_defaults(client):
    """The control: outside a task wrapper, a worker thread does not see the driver's setting."""
    with gpuksvm.config_context(cpu_memory_budget="64MB"):
        plain = client.submit(bk.memory_budget, "cpu", pure=False).result()
        wrapped = client.submit(on_workers(bk.memory_budget), "cpu", pure=False).result()
    assert plain == 512 * 2**20
    assert wrapped == MB64


def test_llsvm_fit_and_predict_tasks_see_the_drivers_budget(client, board, monkeypatch):
    X, y = board
    seen = _probe(monkeypatch, dllsvm, ["_chunk_sample", "_features_block", "_sqhinge_stats",
                                        "_sqhinge_line", "_sum_stats"])
    seen_predict = _probe(monkeypatch, dpredict, ["_apply_to_chunk"])
    Xd, yd = da.from_array(X, chunks=(500, X.shape[1])), da.from_array(y, chunks=500)
    with gpuksvm.config_context(cpu_memory_budget="64MB"):
        est = dllsvm.fit_llsvm(_llsvm(), Xd, yd, client=client)
        pred = est.predict(Xd)
    assert bk.get_config()["cpu_memory_budget"] == 512 * 2**20   # the driver's setting is restored
    got = pred.compute()                                       # computed outside the block
    np.testing.assert_array_equal(got, est.predict(X))
    assert est.dask_info_["cache_features"]
    f_share = X.shape[0] * (est.map_.shape[1] + 1) * 8          # F on the one worker
    for name in ("_chunk_sample", "_features_block", "_sum_stats"):
        assert seen[name] and set(seen[name]) == {MB64}, name
    # the Newton passes run under what keeping F leaves of the budget
    for name in ("_sqhinge_stats", "_sqhinge_line"):
        assert seen[name] and set(seen[name]) == {MB64 - f_share}, name
    assert seen_predict["_apply_to_chunk"] and set(seen_predict["_apply_to_chunk"]) == {MB64}


def test_tasks_running_at_once_on_a_worker_split_its_budget():
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=2,
                                  dashboard_address=None) as lc, distributed.Client(lc) as c:
        with gpuksvm.config_context(cpu_memory_budget="64MB"):
            got = c.submit(on_workers(bk.memory_budget), "cpu", pure=False).result()
    assert got == MB64 // 2


@pytest.mark.parametrize("budget, cached", [("1MB", True), ("900KB", False)])
def test_keeping_f_on_the_workers_follows_the_drivers_budget(client, board, budget, cached):
    """F of 2,000 rows × 31 float64 columns is 496,000 bytes: kept when it is at most half the
    budget (1 MB), recomputed in every pass under 900 KB; the same model either way."""
    X, y = board
    Xd, yd = da.from_array(X, chunks=(500, X.shape[1])), da.from_array(y, chunks=500)
    ref = _llsvm().fit(X, y)
    with gpuksvm.config_context(cpu_memory_budget=budget):
        est = dllsvm.fit_llsvm(_llsvm(), Xd, yd, client=client)
    assert X.shape[0] * (est.map_.shape[1] + 1) * 8 == 496_000
    assert est.dask_info_["cache_features"] is cached
    d_ref = ref.decision_function(X)
    np.testing.assert_allclose(est.decision_function(X), d_ref, atol=1e-4 * np.abs(d_ref).max())


def _newton_args(rng, m=3000, d=5, k=40, n_problems=3):
    X = rng.normal(size=(m, d))
    Z = rng.normal(size=(k, d))
    M = rng.normal(size=(k, k)) / k
    fmap = dllsvm._FeatureMap(Z, M, Kernel("rbf", gamma=0.5), np.dtype(np.float64), 1.0)
    classes = np.arange(n_problems)
    y = rng.integers(0, n_problems, size=m)
    sw = rng.uniform(0.5, 2.0, size=m)
    spec = {"classes": classes, "C": 1.0, "class_weight": None, "log_scale": 0.0,
            "active": np.ones(n_problems, dtype=bool)}
    W = rng.normal(size=(k + 1, n_problems)) * 0.1
    return X, y, sw, W, spec, fmap


def test_newton_pass_works_a_chunk_larger_than_its_budget_in_row_blocks(rng):
    X, y, sw, W, spec, fmap = _newton_args(rng)
    with gpuksvm.config_context(cpu_memory_budget="1GB"):
        whole = dllsvm._sqhinge_stats(X, y, sw, W, spec, fmap)
        line_whole = dllsvm._sqhinge_line(X, y, sw, (W, -W, np.full(W.shape[1], 0.5)), spec, fmap)
        n_whole = sum(1 for _ in dllsvm._pass_blocks(X, fmap, 1000, 0, "a test"))
    with gpuksvm.config_context(cpu_memory_budget="1MB"):
        blocked = dllsvm._sqhinge_stats(X, y, sw, W, spec, fmap)
        line_blocked = dllsvm._sqhinge_line(X, y, sw, (W, -W, np.full(W.shape[1], 0.5)), spec, fmap)
        blocks = [rows for rows, _ in dllsvm._pass_blocks(X, fmap, 1000, 0, "a test")]
    assert n_whole == 1 and len(blocks) > 1
    assert blocks[0].start == 0 and blocks[-1].stop >= X.shape[0]
    assert blocked["n"] == whole["n"] == X.shape[0]
    for key in ("loss", "grad", "hess"):
        np.testing.assert_allclose(blocked[key], whole[key], rtol=1e-10, atol=1e-10)
    for key in ("d1", "d2"):
        np.testing.assert_allclose(line_blocked[key], line_whole[key], rtol=1e-10, atol=1e-10)


def test_a_budget_below_one_row_block_names_the_minimum(rng):
    X, y, sw, W, spec, fmap = _newton_args(rng, m=50)
    with gpuksvm.config_context(cpu_memory_budget=1000), pytest.raises(bk.MemoryBudgetError, match="at least"):
        dllsvm._sqhinge_stats(X, y, sw, W, spec, fmap)


def test_the_captured_budget_is_the_calling_threads():
    with gpuksvm.config_context(cpu_memory_budget="64MB", gpu_memory_budget="32MB"):
        b = bk.caller_settings()
    assert b.budget_bytes() == MB64 and b.budget_bytes(gpu=True) == 32_000_000
    assert b.less(1_000_000).budget_bytes() == MB64 - 1_000_000
    assert b.less(1_000_000, gpu=True).budget_bytes(gpu=True) == 31_000_000
    assert b.shared(2).cpu_memory_budget == MB64 // 2


# --------------------------------------------------------------------------- chunk scratch
#: What a worker function's peak may exceed its budget share by, besides the arrays shipped to it
#: (core set, sub-models): NumPy's einsum buffers (8,192 values, 64 KiB, for the rows' squared
#: norms) and the few k-sized or per-problem arrays of the merges.
SCRATCH_CONSTANT = 128 * 1024
#: a worker's budget, shared by two tasks at once (``threads_here``, num_workers=2)
WORKER_BUDGET, TASKS = 2_000_000, 2
SHARE = WORKER_BUDGET // TASKS


def _as_task(fn, *args, budget=WORKER_BUDGET, measure=True):
    """``fn(*args)`` as the driver's task runs it (``on_workers``, two tasks at once on the
    worker: each gets half of ``budget``); its result and its traced peak (bytes)."""
    with gpuksvm.config_context(cpu_memory_budget=budget):
        task = on_workers(fn)
    with dask.config.set(num_workers=TASKS):
        if measure:
            tracemalloc.start()
        try:
            out = task(*args)
            peak = tracemalloc.get_traced_memory()[1] if measure else 0
        finally:
            if measure:
                tracemalloc.stop()
    return out, peak


def _cvm_state(rng, d, n_core, kernel, m):
    core = np.sort(rng.choice(m, 40, replace=False)).astype(np.int64) + 1000   # some in the chunk
    return {"Z": rng.normal(size=(n_core, d)), "coef": rng.normal(size=n_core), "b": 0.1, "core": core,
            "q": 0.5, "k": 7, "kernel": kernel, "dtype": np.dtype(np.float64)}


def _same_top(got, ref):
    for a, b in zip(got[:3], ref[:3]):
        np.testing.assert_array_equal(a, b)
    assert got[3] == pytest.approx(ref[3], rel=1e-12)


@pytest.mark.parametrize("kernel, positions", [(Kernel("rbf", gamma=0.5), False),
                                               (Kernel("poly", gamma=0.3, coef0=1.0, degree=2), True),
                                               (Kernel("rbf", gamma=1e4), False)],   # every s ties at 0
                         ids=["rbf", "poly-positions", "rbf-ties"])
def test_cvm_chunk_scan_works_in_blocks_of_the_tasks_share(rng, kernel, positions):
    """A 4,000-row chunk against 600 core vectors (a 19 MB kernel block in one piece) under a
    1 MB share: blocks of 204 rows, the same furthest points, ties and violation sum."""
    m, d, n_core = 4000, 8, 600
    X, y = rng.normal(size=(m, d)), np.sign(rng.normal(size=m))
    xs = rng.uniform(0.5, 1.5, size=m)
    pb = None
    if positions:                                   # a subset of the rows scanned, in a shuffled order
        pb = np.full(m, -1, dtype=np.int64)
        pb[rng.permutation(m)[:3000]] = np.arange(3000)
    st = _cvm_state(rng, d, n_core, kernel, m)
    args = (X, y, xs, pb, 1000, st)
    ref, _ = _as_task(dcvm._cvm_chunk_scan, *args, budget=10**9, measure=False)
    with gpuksvm.config_context(cpu_memory_budget=SHARE):
        assert scan_block_rows(m, n_core, d, np.float64, "cpu") < m
    got, peak = _as_task(dcvm._cvm_chunk_scan, *args)
    shipped = st["Z"].nbytes + 2 * st["coef"].nbytes              # core rows, coefficients, their norms
    assert peak <= SHARE + shipped + SCRATCH_CONSTANT, f"peak {peak:,} B"
    _same_top(got, ref)
    assert got[1].shape == (7,) and np.all(np.diff(got[0]) >= 0)   # the k best, ascending


def test_kernel_scales_of_a_chunk_work_in_blocks_of_the_tasks_share(rng):
    """A float32 chunk of 20,000 × 10 scaled in float64 (a 1.6 MB converted copy in one piece)
    under a 256 kB share: the same scales, the conversion in blocks."""
    X = rng.normal(size=(20_000, 10)).astype(np.float32)
    kernel = Kernel("poly", gamma=0.5, coef0=1.0, degree=3)
    ref, _ = _as_task(dcvm._chunk_kernel_scale, X, kernel, np.float64, budget=10**9, measure=False)
    got, peak = _as_task(dcvm._chunk_kernel_scale, X, kernel, np.float64, budget=512_000)
    assert peak <= 256_000 + got.nbytes + SCRATCH_CONSTANT, f"peak {peak:,} B"
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.float64 and np.all(got > 0)


def _svi_case(rng, m=20_000, d=6, n_sv=300):
    X = rng.normal(size=(m, d))
    y = rng.integers(0, 3, size=m).astype(np.float64)
    problems = [(0, 1), (0, 2), (1, 2)]
    ens = {"XU": rng.normal(size=(n_sv, d)), "W": rng.normal(size=(n_sv, 3)) * 0.3,
           "bbar": rng.normal(size=3) * 0.1}
    spec = {"problems": problems, "classes": np.arange(3.0), "kernel": Kernel("rbf", gamma=0.5),
            "device": "cpu", "dtype": np.float64, "margin_tol": 0.5, "min_sv": 10, "max_sv": 40}
    return X, y, ens, spec


def _same_candidates(got, ref):
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        for key in ("rows", "y"):
            np.testing.assert_array_equal(a[key], b[key])
        np.testing.assert_allclose(a["margin"], b["margin"], rtol=1e-12, atol=1e-12)
        assert [a[k] for k in ("n_band", "n_correct", "n_rows")] == [b[k] for k in ("n_band", "n_correct", "n_rows")]


def test_svi_margin_pass_works_in_blocks_of_the_tasks_share(rng):
    """A 20,000-row chunk, three one-vs-one problems (a cap of 40 margin rows each) under a 1 MB
    share: its per-row values (1.9 MB) in blocks, the same candidates as one block."""
    X, y, ens, spec = _svi_case(rng)
    args = (X, y, 500, ens, spec)
    ref, _ = _as_task(dsvi._svi_candidates, *args, budget=10**9, measure=False)
    assert all(r["n_band"] > r["rows"].shape[0] > 0 for r in ref)   # the cap binds: a real selection
    with gpuksvm.config_context(cpu_memory_budget=SHARE):
        assert submodel_block_rows(X.shape[0], submodel_row_bytes(*ens["XU"].shape, np.float64), "cpu") < X.shape[0]
    got, peak = _as_task(dsvi._svi_candidates, *args)
    _same_candidates(got, ref)
    shipped = ens["XU"].nbytes + ens["W"].nbytes
    assert peak <= SHARE + shipped + SCRATCH_CONSTANT, f"peak {peak:,} B"


def _on_gpu_task(fn, *args, budget=WORKER_BUDGET):
    """``fn(*args)`` as a task under a GPU budget (two tasks at once); result and pool peak growth."""
    with gpuksvm.config_context(gpu_memory_budget=budget):
        task = on_workers(fn)
    with dask.config.set(num_workers=TASKS), measure_peak() as pool:
        out = task(*args)
    return out, pool.growth


@pytest.mark.gpu
def test_cvm_chunk_scan_of_a_cupy_chunk_within_the_share(emulated_gpu, rng):
    cp = emulated_gpu
    m, d, n_core = 2000, 8, 300
    X, y = rng.normal(size=(m, d)), np.sign(rng.normal(size=m))
    st = _cvm_state(rng, d, n_core, Kernel("rbf", gamma=0.5), m)
    Xg, yg = cp.asarray(X), cp.asarray(y)
    host, _ = _as_task(dcvm._cvm_chunk_scan, X, y, None, None, 1000, st, budget=10**9, measure=False)
    whole, _ = _on_gpu_task(dcvm._cvm_chunk_scan, Xg, yg, None, None, 1000, st, budget=10**9)
    got, growth = _on_gpu_task(dcvm._cvm_chunk_scan, Xg, yg, None, None, 1000, st)
    _same_top(got, whole)
    np.testing.assert_array_equal(got[1], host[1])
    np.testing.assert_allclose(got[0], host[0], rtol=1e-10)
    shipped = st["Z"].nbytes + 2 * st["coef"].nbytes
    assert growth <= SHARE + shipped + SCRATCH_CONSTANT, f"pool peak growth {growth:,} B"


@pytest.mark.gpu
def test_svi_margin_pass_of_a_cupy_chunk_within_the_share(emulated_gpu, rng):
    cp = emulated_gpu
    X, y, ens, spec = _svi_case(rng, m=8000)
    spec = {**spec, "device": "gpu"}
    Xg, yg = cp.asarray(X), cp.asarray(y)
    host, _ = _as_task(dsvi._svi_candidates, X, y, 500, ens, {**spec, "device": "cpu"}, budget=10**9,
                       measure=False)
    whole, _ = _on_gpu_task(dsvi._svi_candidates, Xg, yg, 500, ens, spec, budget=10**9)
    got, growth = _on_gpu_task(dsvi._svi_candidates, Xg, yg, 500, ens, spec, budget=SHARE // 2)
    _same_candidates(got, whole)
    for a, b in zip(got, host):
        np.testing.assert_array_equal(a["rows"], b["rows"])
        np.testing.assert_allclose(a["margin"], b["margin"], rtol=1e-10, atol=1e-10)
    shipped = ens["XU"].nbytes + ens["W"].nbytes
    assert growth <= SHARE // 4 + shipped + SCRATCH_CONSTANT, f"pool peak growth {growth:,} B"
