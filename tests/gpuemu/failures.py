"""The ways a real CuPy fails on a machine that cannot run it, for the fake CuPy.

Within :func:`failing` the fake CuPy fails as CuPy 14 does (exception types
and messages taken from CuPy's source: ``cupy_backends/cuda/api/runtime.pyx``
``CUDARuntimeError``, ``cupy_backends/cuda/libs/__init__.py`` and
``_cnvrtc.pxi`` loading the libraries through ``cuda.pathfinder``; and from
CuPy 14.2 run on a machine without a driver):

``"no-driver"``
    no NVIDIA driver: ``runtime.driverGetVersion()`` is 0 and every device call
    (``getDeviceCount``, allocations, kernels) raises ``CUDARuntimeError``
    ``cudaErrorInsufficientDriver`` (what CuPy 14.2 raises without libcuda).
``"old-driver"``
    a driver older than CuPy's CUDA runtime (CUDA 12.4 for the fake's 13.0):
    the same error, with a non-zero driver version.
``"no-device"``
    a driver but no GPU: ``cudaErrorNoDevice``.
``"no-nvrtc"``
    NVRTC not installed: ``cupy.cuda.nvrtc.getVersion()``, every operation
    that compiles a kernel (ufuncs, reductions, ``RawModule``) raises
    ``cuda.pathfinder``'s ``DynamicLibNotFoundError``; allocations and copies
    still work.
``"no-cublas"`` (``"no-cusolver"``, ``"no-cusparse"``, ``"no-curand"``)
    the library is missing: ``cupy.cuda.<lib>`` raises ``ImportError`` with
    ``cuda.pathfinder``'s message, as CuPy's lazy import does.
``"compile-error"``
    NVRTC rejects gpuksvm's sources: ``RawModule.compile`` raises
    ``CompileException``.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from . import dispatch

__all__ = ["MODES", "DynamicLibNotFoundError", "failing", "current", "check_device", "check_library",
           "check_nvrtc"]

MODES = ("no-driver", "old-driver", "no-device", "no-nvrtc", "no-cublas", "no-cusolver", "no-cusparse",
         "no-curand", "compile-error")

#: CUDA runtime error codes and their (name, text), as cudaGetErrorName / cudaGetErrorString give them
CUDA_ERRORS = {35: ("cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"),
               100: ("cudaErrorNoDevice", "no CUDA-capable device is detected"),
               101: ("cudaErrorInvalidDevice", "invalid device ordinal")}

#: the sonames cuda.pathfinder looks for (its message names them)
_SONAMES = {"nvrtc": "libnvrtc.so.13 or libnvrtc.so.12", "cublas": "libcublasLt.so.13 or libcublasLt.so.12",
            "cusolver": "libnvJitLink.so.13 or libnvJitLink.so.12",
            "cusparse": "libnvJitLink.so.13 or libnvJitLink.so.12", "curand": "libcurand.so.11 or libcurand.so.10"}


class DynamicLibNotFoundError(RuntimeError):
    """As ``cuda.pathfinder.DynamicLibNotFoundError`` (a RuntimeError)."""


DynamicLibNotFoundError.__module__ = "cuda.pathfinder._dynamic_libs.load_dl_common"

_mode: list[str | None] = [None]


def current() -> str | None:
    """The failure mode now in force (None: the fake works)."""
    return _mode[0]


def _not_found(lib: str) -> DynamicLibNotFoundError:
    so = _SONAMES[lib]
    return DynamicLibNotFoundError(f'Failure finding "{so}": No such file: {so}, No such file: {so}\n')


def driver_version(default: int) -> int:
    return {"no-driver": 0, "old-driver": 12040}.get(_mode[0], default)


def check_device() -> None:
    """Raise what the CUDA runtime raises for any device call in this mode."""
    from cupy.cuda.runtime import CUDARuntimeError   # the fake's: only its own calls get here

    if _mode[0] in ("no-driver", "old-driver"):
        raise CUDARuntimeError(35)
    if _mode[0] == "no-device":
        raise CUDARuntimeError(100)


def check_nvrtc() -> None:
    if _mode[0] == "no-nvrtc":
        raise _not_found("nvrtc")


def check_library(lib: str) -> None:
    """``cupy.cuda.<lib>``: CuPy turns pathfinder's error into an ImportError with its message."""
    if _mode[0] == f"no-{lib}":
        raise ImportError(str(_not_found(lib)))


_COMPILES = ("ufunc", "reduction", "kernel")   # what CuPy compiles with NVRTC at run time


def _hook(ev: dispatch.Event) -> None:
    if ev.kind in _COMPILES:
        check_nvrtc()
    check_device()


@contextlib.contextmanager
def failing(mode: str) -> Iterator[None]:
    """Within the block the fake CuPy fails as real CuPy does in ``mode`` (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown failure mode {mode!r}; one of {MODES}")
    saved = _mode[0]
    _mode[0] = mode
    try:
        with dispatch.hooked(_hook):
            yield
    finally:
        _mode[0] = saved
