"""Never silent: where CuPy is installed but cannot be used, ``device="auto"`` warns once with the
reason and the fix, ``device="gpu"`` raises with the same, and ``gpuksvm doctor`` shows every check.

Run on the fake CuPy (``tests/gpuemu``) made to fail as the real CuPy fails
(:mod:`gpuemu.failures`); ``tests/test_cuda_install.py`` runs the same on the
real CuPy without a driver.  Here the probe really runs (the ``gpu`` fixture
would bypass it): the fake is installed as ``cupy`` and the probe's cache is
cleared around each test.
"""
from __future__ import annotations

import importlib
import io
import shutil
import threading
import warnings

import numpy as np
import pytest

import gpuemu
from gpuemu import build as emu_build
from gpuemu import nvrtc as emu_nvrtc
from gpuemu.failures import failing
import gpuksvm
from gpuksvm.array import cuda_sources as _cuda, gpu_probe as _gpu_probe
from gpuksvm.array import backend as bk
from gpuksvm.cli import main as cli_main

doctor = importlib.import_module("gpuksvm.cli.doctor")      # the module (gpuksvm.cli.doctor is the function)

pytestmark = pytest.mark.skipif(emu_build.compiler() is None,
                                reason="the fake CuPy's kernels need g++ (apt-get install g++)")


def _reset() -> None:
    bk.gpu_status.cache_clear()
    bk._fallback_warned.clear()


@pytest.fixture
def fake_cupy(monkeypatch, _emulator):
    """The fake CuPy as ``import cupy`` gives it, the probe run afresh, kernels compiled afresh."""
    monkeypatch.delenv("GPUKSVM_DEVICE", raising=False)
    monkeypatch.setattr(_cuda, "_modules", {})
    cupy = gpuemu.install()
    _reset()
    try:
        yield cupy
    finally:
        gpuemu.uninstall()
        _reset()


def _auto_warnings() -> tuple[list, list]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        devices = [str(bk.resolve_device("auto")) for _ in range(3)]
    return devices, [w for w in caught if issubclass(w.category, bk.GpuUnavailableWarning)]


# (mode, what the reason says, what the fix says)
FAILURES = [
    ("no-driver", "NVIDIA driver is not installed (CUDARuntimeError: cudaErrorInsufficientDriver",
     "install the NVIDIA driver"),
    ("old-driver", "NVIDIA driver (CUDA 12.4) is older than CuPy's CUDA runtime", "update the NVIDIA driver"),
    ("no-device", "finds no GPU (CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected)",
     "nvidia-smi lists the GPU"),
    ("no-nvrtc", "NVRTC cannot be loaded (DynamicLibNotFoundError: Failure finding \"libnvrtc.so",
     "pip install 'gpuksvm[cuda12]'"),
    ("no-cublas", "cuBLAS cannot be loaded (ImportError: Failure finding \"libcublasLt.so",
     "set CUDA_PATH"),
    ("no-cusolver", "nvJitLink (needed by cuSOLVER and cuSPARSE) cannot be loaded", "pip install"),
    ("no-curand", "cuRAND cannot be loaded", "pip install"),
    ("compile-error", "a gpuksvm CUDA source does not compile", "report it with the output of 'gpuksvm doctor'"),
]


@pytest.mark.parametrize("mode, reason, fix", FAILURES, ids=[f[0] for f in FAILURES])
def test_auto_warns_once_and_gpu_raises(fake_cupy, mode, reason, fix):
    with failing(mode):
        devices, caught = _auto_warnings()
        with pytest.raises(bk.DeviceUnavailableError) as err:
            bk.resolve_device("gpu")
    assert devices == ["cpu"] * 3
    assert len(caught) == 1, [str(w.message) for w in caught]
    for text in (str(caught[0].message), str(err.value)):
        assert reason in text and fix in text, text


def test_working_fake_gpu_is_picked_without_warning(fake_cupy):
    devices, caught = _auto_warnings()
    assert devices == ["cuda:0"] * 3 and caught == []
    assert bk.gpu_status().usable
    # the probe compiled every CUDA source on device 0 (the fixture emptied _cuda's module cache)
    assert set(_cuda._modules) == {(src.stem, 0) for src in _cuda.cuda_sources()}


def test_no_cupy_is_silent(monkeypatch):
    """Without CuPy: 'auto' is the CPU with no warning at all; 'gpu' says how to install it."""
    monkeypatch.delenv("GPUKSVM_DEVICE", raising=False)
    _reset()
    try:
        status = bk.gpu_status()
        if status.installed:
            pytest.skip("CuPy is installed in this environment")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert bk.resolve_device("auto") == bk.CPU
        with pytest.raises(bk.DeviceUnavailableError, match=r"CuPy is not installed\. Fix: pip install "
                                                             r"'gpuksvm\[cuda12\]'"):
            bk.resolve_device("gpu")
        report = doctor.doctor(quiet=True)
        assert report.exit_status() == 0 and report.exit_status(expect_gpu=True) == 1
        assert [c.name for c in report.failures] == []
    finally:
        _reset()


def _report(mode: str | None) -> tuple[doctor.DoctorReport, str]:
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the doctor itself never warns
        if mode is None:
            report = doctor.doctor(file=out)
        else:
            with failing(mode):
                report = doctor.doctor(file=out)
    return report, out.getvalue()


def _line(text: str, name: str) -> str:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line[7:].startswith(name):
            fix = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].strip().startswith("fix:") else ""
            return line + ("\n" + fix if fix else "")
    raise AssertionError(f"no line {name!r} in\n{text}")


def test_doctor_on_a_working_fake_gpu(fake_cupy):
    report, text = _report(None)
    assert report.failures == [], text
    assert report.gpu_usable and report.auto_device == "cuda:0" and report.exit_status(True) == 0
    for name in ("Python", "NumPy", "SciPy", "CuPy", "CUDA driver", "CUDA runtime"):
        assert _line(text, name)
    assert "NumPy" in text and np.__version__ in _line(text, "NumPy")
    assert "compute capability 8.0, 16.0 GiB" in _line(text, "device cuda:0")
    for lib in ("NVRTC", "cuBLAS", "cuSOLVER", "cuSPARSE", "cuRAND"):
        assert _line(text, lib).startswith("[ ok ]")
    for src in _cuda.cuda_sources():
        line = _line(text, f"compile {src.name}")
        assert line.startswith("[ ok ]") and f"{len(_cuda.signatures(src.stem))} kernels" in line
    assert _line(text, "device='auto'").startswith("[ ok ]")


@pytest.mark.parametrize("mode, failing_lines", [
    ("no-driver", ["CUDA driver", "CUDA devices", "device='auto'"]),
    ("no-device", ["CUDA devices", "device='auto'"]),
    ("no-nvrtc", ["NVRTC", "compile cvm.cu", "compile kernel_block.cu", "device='auto'"]),
    ("no-cusparse", ["cuSPARSE", "device='auto'"]),
    ("compile-error", ["compile smo.cu", "device='auto'"]),
])
def test_doctor_names_each_failure_and_its_fix(fake_cupy, mode, failing_lines):
    report, text = _report(mode)
    failed = {c.name for c in report.failures}
    assert set(failing_lines) <= failed, text
    for name in failing_lines:
        line = _line(text, name)
        assert line.startswith("[FAIL]") and "\n" in line and "fix: " in line, line
    assert report.auto_device == "cpu" and not report.gpu_usable
    assert report.exit_status() == 0 and report.exit_status(expect_gpu=True) == 1
    assert _line(text, "NumPy").startswith("[ ok ]")
    if mode == "no-driver":
        assert "none (no NVIDIA driver" in _line(text, "CUDA driver")
    if mode == "no-nvrtc":
        assert "pip install 'gpuksvm[cuda12]'" in _line(text, "NVRTC")
        assert "NVRTC cannot be loaded" in _line(text, "compile smo.cu")


@pytest.mark.parametrize("expect, mode, status", [(False, "no-driver", 0), (True, "no-driver", 1),
                                                  (True, None, 0)])
def test_doctor_command_exit_status(fake_cupy, capsys, expect, mode, status):
    argv = ["doctor"] + (["--expect-gpu"] if expect else [])
    if mode is None:
        rc = cli_main(argv)
    else:
        with failing(mode):
            rc = cli_main(argv)
    out, err = capsys.readouterr()
    assert rc == status, out + err
    assert "[ ok ] Python" in out and "device='auto'" in out
    assert ("a GPU was expected" in err) == bool(status)


def _require_nvrtc() -> None:
    try:
        emu_nvrtc.load()
    except emu_nvrtc.NvrtcUnavailable as exc:
        pytest.skip(f"the stand-in's compile_with_cache compiles with the real NVRTC: {exc}")


class _RecordingBackend:
    """A kernel-cache backend standing for the user's: records what reaches it."""

    def __init__(self):
        self.calls = []

    def load(self, name):
        self.calls.append(("load", name))
        return None

    def save(self, name, cubin, source):
        self.calls.append(("save", name))


@pytest.mark.parametrize("mode", ["no-driver", "no-device"])
def test_doctor_compiles_without_a_device(fake_cupy, mode):
    """No device: each source still goes through CuPy's compile path, for sm_75, and the user's
    kernel cache is neither read nor written (nor left replaced)."""
    _require_nvrtc()
    from cupy.cuda import compiler

    users = _RecordingBackend()
    compiler._set_kernel_cache_backend(users)
    memo = compiler._get_arch_for_options_for_nvrtc
    try:
        report, text = _report(mode)
        assert compiler._kernel_cache_backend is users and compiler._get_arch_for_options_for_nvrtc is memo
    finally:
        compiler._set_kernel_cache_backend(compiler._MemoryKernelCacheBackend())
    for src in _cuda.cuda_sources():
        line = _line(text, f"compile {src.name}")
        assert line.startswith("[ ok ]") and "\n" not in line, line
        assert f"{len(_cuda.signatures(src.stem))} kernels compiled for sm_75 without a device" in line, line
    assert users.calls == []
    assert not any(c.name.startswith("compile ") for c in report.failures)
    assert not report.gpu_usable and report.exit_status(expect_gpu=True) == 1


def test_doctor_reports_nvrtcs_error_without_a_device(fake_cupy, monkeypatch, tmp_path):
    """A source NVRTC rejects, no device: its line is a failure with NVRTC's own message and the fix;
    the other sources still compile."""
    _require_nvrtc()
    src_dir = tmp_path / "kernels_cuda"
    shutil.copytree(_cuda.cuda_source_dir(), src_dir)
    broken = src_dir / "smo.cu"
    broken.write_text(broken.read_text() + "\nstatic __device__ int gpuksvm_broken = undeclared_name;\n")
    monkeypatch.setattr(_cuda, "cuda_source_dir", lambda: src_dir)
    report, text = _report("no-driver")
    line = _line(text, "compile smo.cu")
    assert line.startswith("[FAIL]") and "does not compile" in line and "undeclared_name" in line, line
    assert "fix: report it with the output of 'gpuksvm doctor'" in line
    assert _line(text, "compile cvm.cu").startswith("[ ok ]")


def test_device_free_cache_backend_serves_other_threads():
    """While compile_for_arch holds CuPy's cache backend, other threads still get the user's cache."""
    users = _RecordingBackend()
    backend = _gpu_probe._NoCacheBackend(users)
    other = threading.Thread(target=lambda: (backend.load("a.cubin"), backend.save("a.cubin", b"x", "src")))
    other.start()
    other.join()
    assert users.calls == [("load", "a.cubin"), ("save", "a.cubin")]
    assert backend.load("b.cubin") is None
    with pytest.raises(_gpu_probe._Compiled) as done:
        backend.save("b.cubin", b"\x7fELF", "src")
    assert done.value.build == _gpu_probe.DeviceFreeBuild("b.cubin", b"\x7fELF")
    assert users.calls == [("load", "a.cubin"), ("save", "a.cubin")]


def test_device_free_compile_refuses_an_in_memory_cache(monkeypatch):
    """CUPY_CACHE_IN_MEMORY=1 makes CuPy skip the cache backend and load the module: not a compile check."""
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
    with pytest.raises(_gpu_probe.DeviceFreeCompileUnavailable, match="CUPY_CACHE_IN_MEMORY=1"):
        _gpu_probe.compile_for_arch("", (), 75)


def test_explain_classifies_by_the_chain():
    """A CudaCompileError wrapping a missing NVRTC is a library problem, not a compile problem."""
    try:
        try:
            raise gpuemu.failures.DynamicLibNotFoundError('Failure finding "libnvrtc.so.13 or libnvrtc.so.12"')
        except RuntimeError as inner:
            raise _cuda.CudaCompileError("compiling smo.cu with NVRTC failed") from inner
    except _cuda.CudaCompileError as exc:
        reason, fix = _gpu_probe.explain(exc)
    assert reason.startswith("NVRTC cannot be loaded") and "CUDA_PATH" in fix
    reason, fix = _gpu_probe.explain(ValueError("something else"))
    assert reason == "CuPy fails (ValueError: something else)" and "gpuksvm doctor" in fix


def test_doctor_is_exported():
    assert gpuksvm.doctor is doctor.doctor and "doctor" in gpuksvm.__all__
