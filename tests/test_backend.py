import contextlib
import warnings

import numpy as np
import pytest

from gpuksvm.array import backend as bk


def test_auto_is_cpu_without_warning(monkeypatch):
    monkeypatch.delenv("GPUKSVM_DEVICE", raising=False)
    if bk.cuda_available():
        pytest.skip("a GPU is present")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dev = bk.resolve_device("auto")
    assert dev == bk.CPU and str(dev) == "cpu"
    assert bk.get_namespace("auto") is np


@pytest.mark.parametrize("spec", ["gpu", "cuda", "cuda:0", "GPU"])
def test_explicit_gpu_without_device_raises(spec):
    if bk.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(bk.DeviceUnavailableError, match="CUDA GPU"):
        bk.resolve_device(spec)


@pytest.mark.parametrize("spec", ["tpu", "cuda:x", "", 3, "cpu:1:2"])
def test_bad_device_strings(spec):
    with pytest.raises(ValueError):
        bk.resolve_device(spec)


def test_env_override(monkeypatch):
    monkeypatch.setenv("GPUKSVM_DEVICE", "cpu")
    assert bk.resolve_device("auto") == bk.CPU
    assert bk.resolve_device(None) == bk.CPU


def test_dtype_policy():
    assert bk.resolve_dtype(None, "cpu") == np.float64
    assert bk.resolve_dtype("float32", "cpu") == np.float32
    with pytest.raises(ValueError):
        bk.resolve_dtype(np.int32, "cpu")
    with pytest.raises(ValueError):
        bk.resolve_dtype("float16", "cpu")


def test_transfers_and_kinds():
    x = np.arange(6.0).reshape(2, 3)
    y = bk.to_device(x, "cpu", copy=True)
    y[0, 0] = 99
    assert x[0, 0] == 0
    assert bk.array_kind(x) == "numpy"
    assert bk.as_kind([1.0, 2.0], "numpy").tolist() == [1.0, 2.0]
    assert bk.to_host(x) is x


def test_parse_bytes_and_config():
    assert bk.parse_bytes("512MB") == 512_000_000
    assert bk.parse_bytes("1GiB") == 2**30
    assert bk.parse_bytes(1000) == 1000
    for bad in ("-1", "lots", 0):
        with pytest.raises(ValueError):
            bk.parse_bytes(bad)
    with bk.config_context(cpu_memory_budget="1MB"):
        assert bk.memory_budget("cpu") == 1_000_000
        assert bk.plan_rows(10**6, 1000, "cpu") == 1000
    assert bk.memory_budget("cpu") != 1_000_000
    with pytest.raises(ValueError):
        bk.set_config(gpu_memory_fraction=1.5)


def test_gpu_memory_budget_setting_and_environment(monkeypatch):
    monkeypatch.delenv("GPUKSVM_GPU_MEMORY_BUDGET", raising=False)
    assert bk.get_config()["gpu_memory_budget"] is None
    with bk.config_context(gpu_memory_budget="256MB"):
        assert bk.get_config()["gpu_memory_budget"] == 256_000_000
    assert bk.get_config()["gpu_memory_budget"] is None
    monkeypatch.setenv("GPUKSVM_GPU_MEMORY_BUDGET", "1GiB")
    assert bk.get_config()["gpu_memory_budget"] == 2**30
    with bk.config_context(gpu_memory_budget=1000):     # the setting wins over the environment
        assert bk.get_config()["gpu_memory_budget"] == 1000
    for bad in ("-1", "lots", 0):
        with pytest.raises(ValueError):
            bk.set_config(gpu_memory_budget=bad)


def test_plan_rows_bounds():
    assert bk.plan_rows(0, 8) == 0
    assert bk.plan_rows(10, 8, budget=8) == 1
    assert bk.plan_rows(10, 8, budget=64, min_rows=4) == 8
    assert bk.plan_rows(10**6, 8, budget=8 * 1000, multiple=64) == 960
    assert bk.plan_rows(50, 8, budget=10**9) == 50


def test_plan_rows_refuses_a_budget_below_one_block():
    """A budget smaller than one block (min_rows rows) is an error naming the minimum in bytes."""
    with pytest.raises(bk.MemoryBudgetError, match="needs 800 bytes") as info:
        bk.plan_rows(10, 800, budget=799, what="a kernel block")
    assert (info.value.budget, info.value.minimum) == (799, 800)
    assert "a kernel block" in str(info.value) and isinstance(info.value, ValueError)
    with pytest.raises(bk.MemoryBudgetError, match="at least 3,200 bytes"):   # a part of the budget
        bk.plan_rows(10, 800, budget=3199, min_rows=4)
    with bk.config_context(cpu_memory_budget=100):
        with pytest.raises(bk.MemoryBudgetError, match="budget of 100 bytes"):
            bk.plan_rows(10, 800, "cpu")
    assert not bk.is_out_of_memory(info.value)     # not retried with smaller blocks


def test_map_row_blocks_retries_on_oom():
    seen = []

    def fn(s, e):
        if e - s > 16:
            raise MemoryError("simulated")
        seen.append((s, e))

    with pytest.warns(bk.MemoryFallbackWarning, match="out of memory, retrying with blocks of 32 rows"):
        used = bk.map_row_blocks(fn, 100, 64)
    assert used == 16
    covered = np.zeros(100, bool)
    for s, e in seen:
        covered[s:e] = True
    assert covered.all()


def test_map_row_blocks_other_errors_propagate():
    def fn(s, e):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        bk.map_row_blocks(fn, 10, 4)


@pytest.mark.gpu
def test_gpu_transfer_roundtrip(gpu):
    x = np.random.default_rng(0).normal(size=(5, 3))
    g = bk.to_device(x, "cuda", np.float32)
    assert bk.array_kind(g) == "cupy"
    assert bk.device_of(g).is_gpu
    np.testing.assert_allclose(bk.to_host(g), x.astype(np.float32))
    assert bk.resolve_dtype(None, "cuda") == np.float32
    assert bk.memory_budget("cuda") > 0


def test_host_blas_thread_policy_is_an_explicit_setting(monkeypatch):
    """The load-average switch of the host BLAS limit is the documented ``host_blas_threads``
    setting (issue 16: no hidden global state): "auto" follows the load, "by_size" never does,
    "untouched" never limits; bad values are refused."""
    import os

    from gpuksvm.array import backend as bk
    from gpuksvm.array import blas_threads as _blas

    monkeypatch.setattr(os, "getloadavg", lambda: (1e6, 1e6, 1e6))
    assert bk.get_config()["host_blas_threads"] == "auto"
    assert _blas.host_busy()
    with bk.config_context(host_blas_threads="by_size"):
        assert not _blas.host_busy()
    entered = []
    monkeypatch.setattr(_blas, "_limited", lambda: entered.append(1) or contextlib.nullcontext())
    with bk.config_context(host_blas_threads="untouched"):
        with _blas.one_blas_thread():
            pass
    assert entered == []
    with _blas.one_blas_thread():
        pass
    assert entered == [1]
    with pytest.raises(ValueError, match="host_blas_threads"):
        bk.set_config(host_blas_threads="sometimes")


def test_verbose_reports_go_to_stderr_or_the_gpuksvm_logger(capsys):
    """One progress path (issue 16): ``[Owner] message`` on stderr, or on the application's
    handler of the "gpuksvm" logger; nothing when verbose is 0."""
    import logging

    from gpuksvm.solvers.progress import LOGGER, report

    report("LLSVM", "step 1", 0)
    assert capsys.readouterr() == ("", "")
    report("LLSVM", "step 1", 1)
    assert capsys.readouterr().err == "[LLSVM] step 1\n"
    report("LLSVM", "detail", 1, level=2)
    assert capsys.readouterr().err == ""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    LOGGER.addHandler(handler)
    old = LOGGER.level
    LOGGER.setLevel(logging.INFO)
    try:
        report("CVM", "problem 1/3", 2)
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(old)
    assert [r.getMessage() for r in records] == ["[CVM] problem 1/3"]
    assert capsys.readouterr().err == ""


def test_a_report_given_as_a_function_is_formatted_only_when_shown(capsys):
    from gpuksvm.solvers.progress import report

    calls = []

    def message():
        calls.append(1)
        return "step 7"

    report("Newton", message, 1, level=2)
    assert calls == [] and capsys.readouterr().err == ""
    report("Newton", message, 2, level=2)
    assert calls == [1] and capsys.readouterr().err == "[Newton] step 7\n"


def test_smaller_on_out_of_memory_halves_to_the_minimum_and_warns_once():
    tried = []

    def fn(size):
        tried.append(size)
        if size > 20:
            raise MemoryError("simulated")
        return size * 2

    with pytest.warns(bk.MemoryFallbackWarning, match="out of memory, retrying with 50 bytes") as rec:
        assert bk.smaller_on_out_of_memory(fn, 100, 10, what="a buffer") == (24, 12)
    assert tried == [100, 50, 25, 12]
    assert len(rec) == 1
    with pytest.raises(MemoryError):                 # the minimum fails too: raised again
        bk.smaller_on_out_of_memory(fn, 100, 30)
    with pytest.raises(ValueError):                  # other errors are not retried
        bk.smaller_on_out_of_memory(lambda s: int("x"), 100, 1)


def _grow_to(limit):
    """A buffer allocation that runs out of memory above ``limit`` bytes."""
    def fn(size):
        if size > limit:
            raise MemoryError("simulated")
        return size
    return fn


def test_fallback_collector_gathers_nested_retries_as_one_warning():
    """Retries within a collector's block, at any depth, are reported to it; the outermost issues
    the first message once when the block ends (also when it raises); nested ones pass theirs on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bk.FallbackCollector() as outer:
            bk.smaller_on_out_of_memory(_grow_to(10), 40, 1, what="first")
            with bk.FallbackCollector() as inner:
                bk.map_row_blocks(lambda s, e: _grow_to(3)(e - s), 12, 12, what="rows")
            assert inner.retried and outer.messages == ["first: out of memory, retrying with 20 bytes",
                                                        "rows: out of memory, retrying with blocks of 6 rows"]
            assert caught == []                      # nothing issued inside the block
        fallbacks = [w for w in caught if issubclass(w.category, bk.MemoryFallbackWarning)]
        assert [str(w.message) for w in fallbacks] == ["first: out of memory, retrying with 20 bytes"]
        assert fallbacks[0].filename == __file__     # at the with block's code
        with pytest.raises(RuntimeError, match="after"):
            with bk.FallbackCollector() as failed:
                bk.smaller_on_out_of_memory(_grow_to(10), 40, 1, what="raising")
                raise RuntimeError("after the retry")
        assert [str(w.message) for w in caught[1:]] == ["raising: out of memory, retrying with 20 bytes"]
        assert failed.retried and bk.FallbackCollector.active() is None
        with bk.FallbackCollector() as quiet:        # no retry, no warning
            bk.smaller_on_out_of_memory(_grow_to(10), 5, 1)
        assert not quiet.retried and len(caught) == 2


def test_fallback_collector_sees_only_its_own_thread():
    """A collector in one thread neither takes nor hides another thread's retries (they warn as
    usual there) and changes no process-wide warnings state."""
    import threading

    entered, done = threading.Event(), threading.Event()
    seen: list = []

    def other():
        entered.wait(10)
        bk.smaller_on_out_of_memory(_grow_to(10), 40, 1, what="other thread")
        done.set()

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, *a, **k: seen.append(
            (threading.current_thread().name, category, str(message)))
        t = threading.Thread(target=other, name="other")
        t.start()
        with bk.FallbackCollector() as mine:
            entered.set()
            assert done.wait(10)
            assert mine.messages == []
        t.join(10)
    assert seen == [("other", bk.MemoryFallbackWarning, "other thread: out of memory, retrying with 20 bytes")]
