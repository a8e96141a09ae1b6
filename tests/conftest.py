"""Test configuration: the GPU test mode, shared fixtures, the kernel-launch report.

GPU mode (``GPUKSVM_TEST_GPU``: ``auto`` (default), ``real``, ``emulated``, ``off``):

* ``real`` — CuPy finds a CUDA device: the ``gpu`` tests run on it;
* ``emulated`` — no GPU: the ``gpu`` tests run against the fake CuPy and the CPU
  emulator of ``kernels_cuda`` (``tests/gpuemu``; needs g++);
* ``off`` / no GPU and no C++ compiler — the ``gpu`` tests are skipped, with the reason.

In the emulated mode ``gpu`` tests also marked ``slow`` are skipped unless ``GPUEMU_FULL=1``.

The pytest header says which mode ran.  At the end the launches of every
``extern "C"`` kernel are printed and written to ``.gpu-test-report.json``; a run
of the whole suite fails if some kernel was never launched.

Every call the library makes into the stand-in CuPy is recorded (``tests/realcupy.py``); at the
end the distinct calls are bound against the real CuPy's signatures in a subprocess and a call
real CuPy would refuse fails the run (without the real CuPy the summary says the check was
skipped, and why).

With pytest-xdist (``make test`` runs the suite on several processes; on one where a real GPU
runs the GPU tests) each worker hands its launches and recorded calls to the controller
(``workeroutput``), and the controller reports and checks the whole run's.
"""
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import gpuemu
import realcupy
from gpuemu import build as _emu_build
from gpuemu import dispatch as _emu_dispatch
from gpuemu.pool import fresh_pool
from gpuksvm.array import cuda_sources as _cuda
from gpuksvm.array import backend as bk

TESTS = Path(__file__).resolve().parent
REPORT = TESTS.parent / ".gpu-test-report.json"
CALLS_REPORT = TESTS.parent / ".real-cupy-calls.json"


def _gpu_mode() -> tuple[str, str]:
    """(mode, reason): mode is "real", "emulated" or "skip"."""
    want = os.environ.get("GPUKSVM_TEST_GPU", "auto").strip().lower()
    if want not in ("auto", "real", "emulated", "off"):
        raise pytest.UsageError(f"GPUKSVM_TEST_GPU={want!r}: use auto, real, emulated or off")
    if want == "off":
        return "skip", "GPUKSVM_TEST_GPU=off"
    if want in ("auto", "real") and bk.cuda_available():
        return "real", ""
    if want == "real":
        return "skip", "GPUKSVM_TEST_GPU=real but CuPy finds no CUDA device"
    if _emu_build.compiler() is None:
        return "skip", "no GPU, and the emulated GPU needs a C++ compiler: g++ not found (apt-get install g++)"
    return "emulated", ""


GPU_MODE, GPU_SKIP_REASON = _gpu_mode()


def pytest_report_header(config):
    if GPU_MODE == "real":
        import cupy
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        return f"gpu tests: REAL GPU ({name}, CuPy {cupy.__version__})"
    if GPU_MODE == "emulated":
        return ("gpu tests: EMULATED (no GPU): fake CuPy + kernels_cuda on the CPU emulator; "
                + gpuemu.describe())
    return f"gpu tests: SKIPPED ({GPU_SKIP_REASON})"


#: GPUEMU_FULL=1: also the gpu tests marked slow (and the full mutation sweep) in the emulated mode
EMULATED_FULL = os.environ.get("GPUEMU_FULL") == "1"


def pytest_collection_modifyitems(config, items):
    if GPU_MODE == "skip":
        skip = pytest.mark.skip(reason=f"gpu test skipped: {GPU_SKIP_REASON}")
    elif GPU_MODE == "emulated" and not EMULATED_FULL:
        skip = pytest.mark.skip(reason="slow on the emulated GPU (host-bound): GPUEMU_FULL=1 runs it")
    else:
        return
    for item in items:   # markers, not keywords: a parameter id "gpu" is not a gpu test
        if item.get_closest_marker("gpu") and (GPU_MODE == "skip" or item.get_closest_marker("slow")):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _emulator():
    """The emulator libraries of every CUDA source, built once (in parallel, cached on disk)."""
    return gpuemu.prebuild()


@pytest.fixture
def gpu(request):
    """The cupy module of this run's GPU mode (skips when there is none).

    Emulated: for the duration of the test gpuksvm sees one CUDA device
    (``device="auto"`` resolves to it), backed by the fake CuPy.
    """
    if GPU_MODE == "real":
        yield bk.get_namespace("cuda")
    elif GPU_MODE == "emulated":
        request.getfixturevalue("_emulator")
        with gpuemu.emulated_gpu() as cupy:
            yield cupy
    else:
        pytest.skip(f"gpu test skipped: {GPU_SKIP_REASON}")


@pytest.fixture
def emulated_gpu(gpu):
    """The stand-in CuPy, with a new default pool for the test (see ``gpuemu.pool.fresh_pool``):
    the pool's peak, which only the stand-in keeps, measures the test's device memory."""
    if GPU_MODE != "emulated":
        pytest.skip("the pool's peak is kept by the emulated GPU's memory pool only")
    with fresh_pool():
        yield gpu


@pytest.fixture
def rng():
    return np.random.default_rng(0)


SHARED_DATASETS = os.environ.get(
    "GPUKSVM_SHARED_DATASETS",
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))


# ----------------------------------------------------------------------------- launch report
def all_kernels() -> set[str]:
    """Every extern "C" kernel of kernels_cuda/*.cu."""
    return {k for src in _cuda.cuda_sources() for k in _cuda.signatures(src.stem)}


def _whole_suite(config) -> bool:
    """True when this run is the whole suite (no -k/-m selection, no test paths given)."""
    if os.environ.get("GPUKSVM_REQUIRE_ALL_KERNELS") == "1":
        return True
    if config.option.keyword or config.option.markexpr or getattr(config.option, "lf", False):
        return False
    return all(Path(a).resolve() == TESTS for a in config.args)


#: the calls into the stand-in CuPy during this run
CALLS = realcupy.CallLog()
_calls_hook = _emu_dispatch.calls_hooked(CALLS)


def pytest_sessionstart(session):
    _calls_hook.__enter__()


def _check_calls(session) -> None:
    """Bind the recorded calls against the real CuPy (a refused call fails the run)."""
    _calls_hook.__exit__(None, None, None)
    if not CALLS.calls:
        return
    path, reason = realcupy.location()
    if path is None:
        session.config._real_cupy_check = ("skip", reason)
        return
    try:
        result = CALLS.check()
    except (RuntimeError, OSError, ValueError) as exc:      # the subprocess failed: say so, fail the run
        session.config._real_cupy_check = ("error", str(exc))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    session.config._real_cupy_check = ("ran", result)
    CALLS_REPORT.write_text(json.dumps({"calls": CALLS.payload(), **result}, indent=1, sort_keys=True) + "\n")
    if result["mismatches"] and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (``make test``): one test process where the GPU tests run on a real GPU (the
    processes would share its memory, which the memory-budget tests read); else xdist's own
    count (one per core)."""
    return 1 if GPU_MODE == "real" else None


#: the kernel launches of the test workers when the suite runs on several (pytest-xdist)
WORKER_LAUNCHES: Counter = Counter()


def _is_worker(config) -> bool:
    """True in a pytest-xdist worker: its launches and calls go to the controller, which checks them."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A worker ended (pytest-xdist): add its kernel launches and stand-in calls to this run's."""
    out = getattr(node, "workeroutput", {}).get("gpuksvm")
    if out:
        WORKER_LAUNCHES.update(out["launches"])
        CALLS.merge(out["calls"])


def pytest_sessionfinish(session, exitstatus):
    if _is_worker(session.config):
        _calls_hook.__exit__(None, None, None)
        session.config.workeroutput["gpuksvm"] = {"launches": _cuda.launch_counts(), "calls": CALLS.payload()}
        return
    _check_calls(session)
    counts = dict(Counter(_cuda.launch_counts()) + WORKER_LAUNCHES)
    never = sorted(all_kernels() - set(counts))
    session.config._gpu_launch_report = (counts, never)
    if GPU_MODE != "skip":
        REPORT.write_text(json.dumps({"mode": GPU_MODE, "launches": dict(sorted(counts.items())),
                                      "never_launched": never}, indent=1) + "\n")
        if never and _whole_suite(session.config) and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            session.config._gpu_launch_failed = True


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts, never = getattr(config, "_gpu_launch_report", ({}, []))
    tr = terminalreporter
    state, detail = getattr(config, "_real_cupy_check", (None, None))
    if state == "skip":
        tr.write_sep("=", f"real-CuPy binding check SKIPPED: {detail}", yellow=True, bold=True)
    elif state == "error":
        tr.write_sep("=", "real-CuPy binding check FAILED to run", red=True, bold=True)
        tr.write_line(detail)
    elif state == "ran":
        real = detail["_real"]
        line = (f"real-CuPy binding check (CuPy {real['version']}): {detail['checked']} distinct calls into the "
                f"stand-in bound against real CuPy's signatures, {len(detail['mismatches'])} refused"
                + (f", {len(detail['unbound'])} without a readable signature" if detail["unbound"] else ""))
        tr.write_sep("=", line, red=bool(detail["mismatches"]), bold=True)
        if detail["mismatches"]:
            tr.write_line(realcupy.describe_mismatches(detail))
        if detail["unbound"]:
            tr.write_line("  not bound (no signature in real CuPy): " + ", ".join(detail["unbound"]))
        tr.write_line(f"  (the calls and real signatures: {CALLS_REPORT.name})")
    if GPU_MODE == "skip":
        tr.write_sep("=", f"GPU tests SKIPPED: {GPU_SKIP_REASON}", yellow=True, bold=True)
        return
    if GPU_MODE == "emulated":
        tr.write_line("gpu tests ran EMULATED (no GPU): fake CuPy + kernels_cuda on the CPU emulator; "
                      + gpuemu.describe())
    tr.write_sep("=", f"GPU mode: {GPU_MODE.upper()} - kernel launches per extern \"C\" kernel")
    for name in sorted(all_kernels() | set(counts)):
        tr.write_line(f"  {name:<26} {counts.get(name, 0):>7}")
    tr.write_line(f"  (written to {REPORT.name})")
    if getattr(config, "_gpu_launch_failed", False):
        tr.write_sep("=", f"FAILED: kernels never launched by the suite: {', '.join(never)}", red=True, bold=True)
