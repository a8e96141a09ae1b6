"""``gpuksvm doctor``: what this machine gives gpuksvm, one line per check, each failure with its fix.

The checks, in order: gpuksvm, Python, NumPy, SciPy, CuPy (version and location);
the CUDA driver and runtime versions; each CUDA library gpuksvm's GPU path
loads (NVRTC, cuBLAS, cuSOLVER, cuSPARSE, cuRAND), loaded as CuPy loads it
and located with ``cuda.pathfinder`` where installed; each CUDA device with
its compute capability and memory; whether each ``kernels_cuda`` source
compiles with CuPy's options (``cupy.RawModule`` with gpuksvm's options on
device 0; without a device, CuPy's own compile path for the oldest supported
architecture, sm_75, writing nothing to CuPy's kernel cache); and which device
``device="auto"`` picks and why.

The steps are those of :mod:`gpuksvm.array.gpu_probe` (what ``device="auto"``
decides on), taken one at a time so that every failure shows, not only the
first.  ``gpuksvm doctor --expect-gpu`` exits with status 1 when no GPU can be
used (for a GPU machine's CI), else 0.
"""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import scipy

from gpuksvm.array import cuda_sources as _cuda
from gpuksvm._version import __version__
from gpuksvm.array.gpu_probe import (
    CUDA_LIBRARIES,
    DRIVER_FIX,
    INSTALL_FIX,
    NO_DRIVER_FIX,
    OLDEST_ARCH,
    DeviceFreeCompileUnavailable,
    compile_source,
    compile_source_for_arch,
    driver_version,
    explain,
    import_cupy,
    load_cuda_library,
)
from gpuksvm.array.backend import gpu_status

__all__ = ["Check", "DoctorReport", "doctor", "main"]

OK, FAIL, INFO, SKIP = "ok", "FAIL", "info", "skip"
_LABELS = {"nvrtc": "NVRTC", "cublas": "cuBLAS", "cusolver": "cuSOLVER", "cusparse": "cuSPARSE",
           "curand": "cuRAND"}


@dataclass(frozen=True)
class Check:
    """One line of the report: ``status`` is ``"ok"``, ``"FAIL"``, ``"info"`` or ``"skip"``."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def line(self) -> str:
        text = f"[{self.status:^4}] {self.name:<24} {self.detail}"
        return text + (f"\n       {'':<24} fix: {self.fix}" if self.fix else "")


@dataclass
class DoctorReport:
    """What :func:`doctor` found: the checks, the device ``"auto"`` picks, whether a GPU can be used."""

    checks: list[Check] = field(default_factory=list)
    auto_device: str = "cpu"
    gpu_usable: bool = False

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    def exit_status(self, expect_gpu: bool = False) -> int:
        """1 when a GPU was expected and none can be used, else 0."""
        return 1 if expect_gpu and not self.gpu_usable else 0

    def text(self) -> str:
        return "\n".join(c.line() for c in self.checks)


def _versions(report: DoctorReport) -> None:
    add = report.checks.append
    add(Check("gpuksvm", OK, f"{__version__} ({os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})"))
    add(Check("Python", OK, f"{platform.python_version()} ({sys.executable})"))
    add(Check("NumPy", OK, np.__version__))
    add(Check("SciPy", OK, scipy.__version__))


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}" if v else "none"


def _runtime_checks(report: DoctorReport, cupy: Any) -> int:
    """Driver, runtime and device lines; returns the number of usable devices."""
    add = report.checks.append
    rt = cupy.cuda.runtime
    try:
        runtime = int(rt.runtimeGetVersion())
    except Exception:  # noqa: BLE001 - the runtime line below says it
        runtime = 0
    try:
        driver = int(rt.driverGetVersion())
    except Exception as exc:  # noqa: BLE001 - reported as a failed line
        add(Check("CUDA driver", FAIL, *explain(exc)))
    else:
        if driver == 0:
            add(Check("CUDA driver", FAIL, "none (no NVIDIA driver: libcuda cannot be loaded)", NO_DRIVER_FIX))
        else:
            too_old = bool(runtime) and driver // 1000 < runtime // 1000
            add(Check("CUDA driver", FAIL if too_old else OK, f"supports CUDA up to {_cuda_version(driver)}"
                      + (f", older than CuPy's CUDA {_cuda_version(runtime)}" if too_old else ""),
                      DRIVER_FIX if too_old else ""))
    add(Check("CUDA runtime", INFO if runtime else FAIL,
              f"{_cuda_version(runtime)} (the CUDA version CuPy was built for)" if runtime
              else "CuPy does not report its CUDA runtime version", "" if runtime else INSTALL_FIX))
    try:
        count = int(rt.getDeviceCount())
    except Exception as exc:  # noqa: BLE001
        add(Check("CUDA devices", FAIL, *explain(exc, driver_version(cupy))))
        return 0
    if count < 1:
        add(Check("CUDA devices", FAIL, "0 devices", "check that nvidia-smi lists the GPU"))
        return 0
    for i in range(count):
        try:
            p = rt.getDeviceProperties(i)
            name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
            add(Check(f"device cuda:{i}", OK, f"{name}, compute capability {p['major']}.{p['minor']}, "
                                              f"{p['totalGlobalMem'] / 2**30:.1f} GiB"))
        except Exception as exc:  # noqa: BLE001
            add(Check(f"device cuda:{i}", FAIL, *explain(exc)))
    return count


def _library_checks(report: DoctorReport, cupy: Any) -> None:
    """One line per CUDA library."""
    for name in CUDA_LIBRARIES:
        try:
            where = load_cuda_library(cupy, name)
        except Exception as exc:  # noqa: BLE001
            reason, fix = explain(exc)
            report.checks.append(Check(_LABELS[name], FAIL, f"not found: {reason}", fix))
            continue
        report.checks.append(Check(_LABELS[name], OK, f"found {where}" if where else "loaded by CuPy"))


def _compile_checks(report: DoctorReport, cupy: Any, devices: int) -> None:
    """One line per CUDA source: compiled on device 0, or without a device for sm_75."""
    for src in _cuda.cuda_sources():
        name = f"compile {src.name}"
        try:
            if devices < 1:
                n, _ = compile_source_for_arch(src.stem, OLDEST_ARCH)
                done = (f"{n} kernels compiled for sm_{OLDEST_ARCH} without a device (CuPy's compile path; "
                        "nothing written to CuPy's kernel cache)")
            else:
                with cupy.cuda.Device(0):
                    n = compile_source(src.stem)
                done = f"{n} kernels compiled for device 0 (cupy.RawModule with gpuksvm.array.cuda_sources.nvrtc_options())"
        except DeviceFreeCompileUnavailable as exc:
            report.checks.append(Check(name, SKIP, f"not checked: {exc}"))
            continue
        except Exception as exc:  # noqa: BLE001
            reason, fix = explain(exc)
            report.checks.append(Check(name, FAIL, reason, fix))
            continue
        report.checks.append(Check(name, OK, done))


def _auto_check(report: DoctorReport) -> None:
    env = os.environ.get("GPUKSVM_DEVICE", "").strip()
    status = gpu_status()
    report.gpu_usable = status.usable
    if status.usable:
        report.auto_device = "cuda:0"
        why = "CuPy finds a working GPU"
    else:
        report.auto_device = "cpu"
        why = "CuPy is not installed (see the CuPy line)" if not status.installed else status.reason
    if env and env.lower() != "auto":
        report.auto_device = env
        why = f"GPUKSVM_DEVICE={env!r} overrides it (without it: {why})"
    fix = status.fix if status.installed and not status.usable else ""
    report.checks.append(Check("device='auto'", OK if status.usable or not status.installed else FAIL,
                               f"{report.auto_device}: {why}", fix))


def doctor(*, file: TextIO | None = None, quiet: bool = False) -> DoctorReport:
    """Check what gpuksvm can use on this machine; print one line per check to ``file``
    (default standard output) unless ``quiet``.

    Returns a :class:`DoctorReport` (its ``checks``, ``auto_device``,
    ``gpu_usable`` and ``exit_status(expect_gpu)``).  Never raises for a
    missing or broken CUDA setup: that is what it reports.
    """
    report = DoctorReport()
    _versions(report)
    cupy, installed, exc = import_cupy()
    if not installed:
        report.checks.append(Check("CuPy", INFO, "not installed: gpuksvm runs on the CPU (NumPy)",
                                   "for a GPU, " + INSTALL_FIX))
    elif cupy is None:
        report.checks.append(Check("CuPy", FAIL, f"installed but does not import: {explain(exc)[0]}",
                                   "reinstall CuPy for this machine's driver: " + INSTALL_FIX))
    else:
        report.checks.append(Check("CuPy", OK, f"{cupy.__version__} ({os.path.dirname(cupy.__file__)})"))
        try:
            from cuda import pathfinder
            report.checks.append(Check("cuda.pathfinder", INFO, pathfinder.__version__))
        except ImportError:
            report.checks.append(Check("cuda.pathfinder", INFO, "not installed (CuPy >= 14 brings it): "
                                                                "libraries are located by CuPy alone"))
        cuda_path = os.environ.get("CUDA_PATH") or os.environ.get("CUDA_HOME")
        report.checks.append(Check("CUDA_PATH", INFO, cuda_path or "not set (the NVIDIA wheels and the "
                                                                   "system loader are searched first)"))
        devices = _runtime_checks(report, cupy)
        _library_checks(report, cupy)
        _compile_checks(report, cupy, devices)
    _auto_check(report)
    if not quiet:
        print(report.text(), file=file if file is not None else sys.stdout)
    return report


def main(expect_gpu: bool = False) -> int:
    """Print the report; the exit status of ``gpuksvm doctor [--expect-gpu]``."""
    report = doctor()
    status = report.exit_status(expect_gpu)
    if status:
        print("gpuksvm doctor: a GPU was expected (--expect-gpu) but none can be used", file=sys.stderr)
    return status
