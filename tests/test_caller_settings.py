"""The caller's settings (``gpuksvm.array.backend.CallerSettings``) carried to other threads and
to Dask tasks: every setting, budgets resolved in the caller, one rule for a share.

The settings are per thread; a thread pool's threads and a Dask worker's threads start from the
defaults.  Checked here: the object captures every key of ``get_config`` (a new setting that
is not carried fails the first test), pickles and round-trips, resolves the budgets from the
caller's environment, and a thread pool (``in_calling_config``) and a simulated Dask worker
(``on_workers`` run after a pickle round trip, two tasks at once by ``num_workers``) apply the
same settings for the same share, the GPU budget (cap and fraction) divided as the CPU's.
"""
from __future__ import annotations

import dataclasses
import pickle
from concurrent.futures import ThreadPoolExecutor

import pytest

import gpuksvm
from gpuksvm.array import backend as bk

MB64, MB32 = 64_000_000, 32_000_000
#: settings different from every default, so a setting that is not carried shows
SET = dict(cpu_memory_budget="64MB", gpu_memory_budget="32MB", gpu_memory_fraction=0.8,
           host_blas_threads="untouched", model_load_max_bytes="3GB")


@pytest.fixture(autouse=True)
def _no_budgets_in_env(monkeypatch):
    for var in ("GPUKSVM_CPU_MEMORY_BUDGET", "GPUKSVM_GPU_MEMORY_BUDGET", "GPUKSVM_MODEL_LOAD_MAX_BYTES"):
        monkeypatch.delenv(var, raising=False)


def _seen(_: object = None) -> dict:
    """What a unit of work sees: the whole configuration of its thread."""
    return gpuksvm.get_config()


def test_every_setting_is_captured():
    with gpuksvm.config_context(**SET):
        settings = bk.caller_settings()
        caller = gpuksvm.get_config()
    assert {f.name for f in dataclasses.fields(bk.CallerSettings)} == set(caller)
    assert dataclasses.asdict(settings) == caller
    assert settings.model_load_max_bytes == 3_000_000_000 and settings.host_blas_threads == "untouched"


def test_the_settings_pickle_and_round_trip():
    with gpuksvm.config_context(**SET):
        settings = bk.caller_settings()
    back = pickle.loads(pickle.dumps(settings))
    assert back == settings and hash(back) == hash(settings)
    with back.applied():
        assert _seen() == dataclasses.asdict(settings)
    wrapped = pickle.loads(pickle.dumps(bk.in_calling_config(_seen, share=2)))
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(wrapped).result()["cpu_memory_budget"] == 256 * 2**20   # 512 MiB / 2


def test_the_budgets_are_resolved_from_the_callers_environment(monkeypatch):
    monkeypatch.setenv("GPUKSVM_CPU_MEMORY_BUDGET", "48MB")
    monkeypatch.setenv("GPUKSVM_GPU_MEMORY_BUDGET", "24MB")
    settings = bk.caller_settings()
    monkeypatch.delenv("GPUKSVM_CPU_MEMORY_BUDGET")
    monkeypatch.delenv("GPUKSVM_GPU_MEMORY_BUDGET")
    assert bk.caller_settings().gpu_memory_budget is None
    with settings.applied():
        cfg = _seen()
    assert (cfg["cpu_memory_budget"], cfg["gpu_memory_budget"]) == (48_000_000, 24_000_000)
    assert settings.model_load_max_bytes is None     # left to where the work runs: its own memory


def test_a_share_divides_the_cpu_and_the_gpu_budgets():
    with gpuksvm.config_context(**SET), ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(bk.in_calling_config(_seen, share=4), range(4)))
    for cfg in seen:
        assert cfg["cpu_memory_budget"] == MB64 // 4 and cfg["gpu_memory_budget"] == MB32 // 4
        assert cfg["gpu_memory_fraction"] == pytest.approx(0.2)
        assert cfg["host_blas_threads"] == "untouched" and cfg["model_load_max_bytes"] == 3_000_000_000
    settings = bk.CallerSettings(10, None, 0.5, "auto", None)
    assert settings.shared(3) == bk.CallerSettings(3, None, 0.5 / 3, "auto", None)
    assert settings.shared(100).cpu_memory_budget == 1 and settings.shared(0) == settings
    assert _seen()["cpu_memory_budget"] == 512 * 2**20      # the calling thread is untouched


def test_less_takes_bytes_off_the_budget_of_the_place():
    settings = bk.CallerSettings(MB64, MB32, 0.5, "auto", None)
    assert settings.less(10**6).cpu_memory_budget == MB64 - 10**6
    assert settings.less(10**6, gpu=True) == dataclasses.replace(settings, gpu_memory_budget=MB32 - 10**6)
    uncapped = dataclasses.replace(settings, gpu_memory_budget=None)
    assert uncapped.less(10**6, gpu=True).budget_bytes(gpu=True) == MB64 - 10**6   # no cap: the CPU budget
    assert settings.less(10**9).budget_bytes() == 1


def test_a_thread_pool_and_a_dask_worker_apply_the_same_settings_for_the_same_share():
    dask = pytest.importorskip("dask")
    runtime = pytest.importorskip("gpuksvm.scaleout.runtime")
    with gpuksvm.config_context(**SET):
        task = pickle.loads(pickle.dumps(runtime.on_workers(_seen)))        # shipped to a worker
        with ThreadPoolExecutor(2) as pool:
            threads = list(pool.map(bk.in_calling_config(_seen, share=2), range(2)))
    with dask.config.set(num_workers=2), ThreadPoolExecutor(2) as pool:     # two tasks at once
        workers = list(pool.map(lambda _: task(), range(2)))
    assert threads == workers
    assert threads[0]["cpu_memory_budget"] == MB64 // 2 and threads[0]["gpu_memory_budget"] == MB32 // 2


def test_the_gpu_budget_of_a_thread_is_its_share_of_the_callers(gpu):
    """On the (emulated) GPU: ``memory_budget`` of a thread of a pool of 4 is a quarter of the
    caller's, with a cap (the cap's quarter) and without (a quarter of the fraction)."""
    budget = lambda _: bk.memory_budget("cuda:0")   # noqa: E731
    with ThreadPoolExecutor(1) as pool:
        with gpuksvm.config_context(gpu_memory_budget="32MB"):
            assert pool.submit(bk.in_calling_config(budget, share=4), 0).result() == MB32 // 4
        caller = budget(0)
        thread = pool.submit(bk.in_calling_config(budget, share=4), 0).result()
    assert caller > 4 << 20 and thread == pytest.approx(caller / 4, rel=0.01)
