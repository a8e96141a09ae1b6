"""Can CuPy be used here, and if not, why not and what would fix it.

The steps :func:`probe` takes are those a fit takes on a GPU, in order: import
CuPy, ask the CUDA runtime for devices, run one reduction (it needs NVRTC),
load the CUDA libraries CuPy calls (cuBLAS, cuSOLVER, cuSPARSE, cuRAND, each
the way CuPy itself loads it), compile every ``kernels_cuda`` source the way
:mod:`gpuksvm.array.cuda_sources` does.  :func:`compile_for_arch` compiles a source through
CuPy's own compile path for a given architecture without a device (what the
doctor checks on a machine without one).  The first failure is the reason; :func:`explain`
turns an exception of CuPy, the CUDA runtime or ``cuda.pathfinder`` into a
reason and a fix.  :mod:`gpuksvm.array.backend` probes once per process for
``device="auto"``; :mod:`gpuksvm.cli.doctor` runs the same steps one by one and
prints each.

Part of the array layer (it imports CuPy); CuPy is imported inside the
functions, as it is optional.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuksvm.array import cuda_sources as _cuda

__all__ = ["CUDA_LIBRARIES", "INSTALL_FIX", "DRIVER_FIX", "NO_DRIVER_FIX", "GpuStatus", "explain",
           "driver_version", "import_cupy", "load_cuda_library", "compile_source", "OLDEST_ARCH", "DeviceFreeBuild",
           "DeviceFreeCompileUnavailable", "compile_for_arch", "compile_source_for_arch", "probe"]

#: the CUDA libraries gpuksvm's GPU path loads (NVRTC compiles kernels, CuPy calls the others)
CUDA_LIBRARIES = ("nvrtc", "cublas", "cusolver", "cusparse", "curand")

INSTALL_FIX = ("pip install 'gpuksvm[cuda12]' for a CUDA 12 driver or 'gpuksvm[cuda13]' for a CUDA 13 "
               "driver (nvidia-smi shows the driver's CUDA version); these extras bring CuPy with "
               "NVIDIA's wheels of the CUDA libraries")
_LIBRARY_FIX = ("install CuPy with its CUDA libraries: " + INSTALL_FIX
                + "; or install a CUDA toolkit of CuPy's CUDA major version and set CUDA_PATH to it")
DRIVER_FIX = ("install or update the NVIDIA driver (nvidia-smi must list the GPU), or install the extra "
              "that matches the driver: " + INSTALL_FIX)
NO_DRIVER_FIX = ("install the NVIDIA driver (nvidia-smi must then list the GPU); on a machine without an "
                 "NVIDIA GPU use device='cpu', or uninstall CuPy")


@dataclass(frozen=True)
class GpuStatus:
    """The outcome of :func:`probe`.

    ``cupy`` is the CuPy module when a GPU can be used, else None; ``installed``
    says whether CuPy is installed at all; ``reason`` and ``fix`` say why it
    cannot be used and what would change that (empty when it can).
    """

    cupy: Any
    installed: bool
    reason: str = ""
    fix: str = ""

    @property
    def usable(self) -> bool:
        return self.cupy is not None

    def describe(self) -> str:
        """``reason. Fix: fix`` (one sentence for warnings and errors)."""
        return f"{self.reason}. Fix: {self.fix}" if self.fix else self.reason


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _one_line(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = text[:limit] + " ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _visible_devices_note() -> str:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "" if value is None else f" (CUDA_VISIBLE_DEVICES={value!r} may hide it)"


def explain(exc: BaseException, driver_version: int | None = None) -> tuple[str, str]:
    """(reason, fix) for an exception raised while using CuPy.

    Recognises, anywhere in the exception's chain: ``cuda.pathfinder``'s
    ``DynamicLibNotFoundError`` and CuPy's ``ImportError`` for a CUDA library
    it cannot find, the CUDA runtime's ``CUDARuntimeError`` (no device, a
    driver too old or missing), NVRTC's ``CompileException``.  With
    ``driver_version`` (``cupy.cuda.runtime.driverGetVersion()``; 0: no driver)
    the insufficient-driver case says which of the two it is.
    """
    chain = _chain(exc)
    for e in chain:
        name, text = type(e).__name__, str(e)
        if name == "DynamicLibNotFoundError" or (isinstance(e, ImportError) and _names_library(text)):
            lib = _names_library(text) or "a CUDA library"
            return f"{lib} cannot be loaded ({_one_line(e)})", _LIBRARY_FIX
        if name == "CUDARuntimeError" or text.startswith("cudaError"):
            if "cudaErrorNoDevice" in text:
                return (f"the CUDA runtime finds no GPU ({_one_line(e)})",
                        "check that nvidia-smi lists the GPU" + _visible_devices_note()
                        + "; on a machine without an NVIDIA GPU use device='cpu'")
            if "cudaErrorInsufficientDriver" in text:
                what = {None: "is missing or older than CuPy's CUDA runtime", 0: "is not installed"}.get(
                    driver_version, f"(CUDA {driver_version // 1000}.{driver_version % 1000 // 10}) "
                                    "is older than CuPy's CUDA runtime")
                fix = NO_DRIVER_FIX if driver_version == 0 else DRIVER_FIX
                return f"the NVIDIA driver {what} ({_one_line(e)})", fix
            return f"the CUDA runtime fails ({_one_line(e)})", DRIVER_FIX
    for e in chain:
        if type(e).__name__ == "CompileException" or isinstance(e, _cuda.CudaCompileError):
            return (f"a gpuksvm CUDA source does not compile with this CuPy/NVRTC ({_one_line(chain[-1])})",
                    "report it with the output of 'gpuksvm doctor'; meanwhile use device='cpu'")
    return (f"CuPy fails ({_one_line(chain[-1])})",
            "run 'gpuksvm doctor' to see which step fails; meanwhile use device='cpu'")


_LIB_NAMES = {"nvrtc": "NVRTC", "cublas": "cuBLAS", "cusolver": "cuSOLVER", "cusparse": "cuSPARSE",
              "curand": "cuRAND", "nvjitlink": "nvJitLink (needed by cuSOLVER and cuSPARSE)",
              "cudart": "the CUDA runtime (cudart)", "cufft": "cuFFT"}


def _names_library(text: str) -> str:
    """The CUDA library a loader's message names ('libnvrtc.so.12: cannot open ...' -> 'NVRTC')."""
    low = text.lower()
    for key, label in _LIB_NAMES.items():
        if f"lib{key}" in low or f"'{key}'" in low or f'"{key}"' in low:
            return label
    return ""


def driver_version(cupy: Any) -> int | None:
    """``cupy.cuda.runtime.driverGetVersion()`` (e.g. 12040; 0 without a driver), None if it fails."""
    try:
        return int(cupy.cuda.runtime.driverGetVersion())
    except Exception:  # noqa: BLE001 - the version only refines a message
        return None


def import_cupy() -> tuple[Any, bool, BaseException | None]:
    """(cupy or None, installed, the import's exception or None)."""
    if importlib.util.find_spec("cupy") is None:
        return None, False, None
    try:
        return importlib.import_module("cupy"), True, None
    except Exception as exc:  # noqa: BLE001 - any failure of an installed CuPy is reported
        return None, True, exc


def load_cuda_library(cupy: Any, name: str) -> str:
    """Load one of :data:`CUDA_LIBRARIES` the way CuPy does; returns where it was found ('' if unknown).

    Raises what CuPy raises when the library is missing (``ImportError`` for
    cuBLAS/cuSOLVER/cuSPARSE/cuRAND, ``cuda.pathfinder``'s
    ``DynamicLibNotFoundError`` or a ``RuntimeError`` for NVRTC).
    """
    if name == "nvrtc":
        cupy.cuda.nvrtc.getVersion()
    else:
        getattr(cupy.cuda, name)      # CuPy's lazy import loads the library (cuda.pathfinder in CuPy >= 14)
    try:
        from cuda import pathfinder
    except ImportError:
        return ""
    try:
        found = pathfinder.load_nvidia_dynamic_lib(name)
    except Exception:  # noqa: BLE001 - CuPy found it another way; the location is only a detail
        return ""
    via = getattr(found, "found_via", "")
    return f"{found.abs_path}" + (f" (via {via})" if via else "")


def compile_source(module: str) -> int:
    """Compile ``kernels_cuda/<module>.cu`` on the current device through :mod:`gpuksvm.array.cuda_sources`
    (``cupy.RawModule`` with :func:`gpuksvm.array.cuda_sources.nvrtc_options`); returns its number of kernels."""
    names = list(_cuda.signatures(module))
    for kernel in names:
        _cuda.get_function(module, kernel)
    return len(names)


#: the oldest GPU architecture gpuksvm supports (Turing, sm_75): the target of a compile check
#: on a machine without a device
OLDEST_ARCH = 75


class DeviceFreeCompileUnavailable(RuntimeError):
    """CuPy's compile path cannot be stopped before it loads the module (``CUPY_CACHE_IN_MEMORY=1``)."""


@dataclass(frozen=True)
class DeviceFreeBuild:
    """What :func:`compile_for_arch` made: CuPy's kernel-cache key (the file name it would cache the
    binary under) and the binary NVRTC produced (a cubin; PTX with ``CUPY_COMPILE_WITH_PTX=1``)."""

    cache_key: str
    binary: bytes


class _Compiled(Exception):
    """Raised from the cache backend's ``save``: NVRTC is done, stop before ``Module.load``."""

    def __init__(self, key: str, binary: bytes) -> None:
        super().__init__(key)
        self.build = DeviceFreeBuild(key, bytes(binary))


class _NoCacheBackend:
    """A CuPy kernel-cache backend for the calling thread only: never a cached binary (so NVRTC
    runs), nothing saved (the binary ends the compile as :class:`_Compiled`); every other thread
    is served by the backend it replaces."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.owner = threading.get_ident()

    def load(self, name: str) -> bytes | None:
        return None if threading.get_ident() == self.owner else self.previous.load(name)

    def save(self, name: str, cubin: bytes, source: str) -> None:
        if threading.get_ident() == self.owner:
            raise _Compiled(name, cubin)
        self.previous.save(name, cubin, source)


_compile_lock = threading.Lock()


def compile_for_arch(code: str, options: tuple[str, ...], arch: int) -> DeviceFreeBuild:
    """Compile CUDA ``code`` for ``sm_<arch>`` through CuPy's own compile path, without a device.

    ``cupy._core.core.compile_with_cache`` is what ``cupy.RawModule(code=, options=)`` calls: it
    adds CuPy's include paths and flags (CCCL, CuPy's and the CUDA headers, ``-ftz=true``,
    ``-arch=sm_<arch>``), computes CuPy's kernel-cache key and compiles with NVRTC.  Two steps
    of that path need a device and are avoided: the per-device memo of the ``-arch`` option
    (``cupy.cuda.compiler._get_arch_for_options_for_nvrtc``, bypassed for the call) and the final
    ``Module.load`` (the cache backend, replaced for the calling thread, ends the compile when
    CuPy hands it the binary).  The user's kernel cache (``~/.cupy/kernel_cache``) is neither
    read nor written.

    Raises CuPy's ``CompileException`` (NVRTC's log) when the code does not compile, what CuPy
    raises when NVRTC cannot be loaded, and :class:`DeviceFreeCompileUnavailable` under
    ``CUPY_CACHE_IN_MEMORY=1`` (CuPy then skips the cache backend and loads the module).
    """
    if os.environ.get("CUPY_CACHE_IN_MEMORY", "").strip() == "1":
        raise DeviceFreeCompileUnavailable("CUPY_CACHE_IN_MEMORY=1: CuPy loads every module it compiles, "
                                           "which needs a device")
    from cupy._core import core
    from cupy.cuda import compiler

    with _compile_lock:
        memoized = compiler._get_arch_for_options_for_nvrtc
        previous = compiler._kernel_cache_backend
        compiler._get_arch_for_options_for_nvrtc = getattr(memoized, "__wrapped__", memoized)
        compiler._set_kernel_cache_backend(_NoCacheBackend(previous))
        try:
            core.compile_with_cache(code, tuple(options), arch=str(int(arch)), prepend_cupy_headers=False,
                                    backend="nvrtc")
        except _Compiled as done:
            return done.build
        finally:
            compiler._set_kernel_cache_backend(previous)
            compiler._get_arch_for_options_for_nvrtc = memoized
    raise DeviceFreeCompileUnavailable("CuPy's compile path did not hand its binary to the kernel cache")


def compile_source_for_arch(module: str, arch: int = OLDEST_ARCH) -> tuple[int, DeviceFreeBuild]:
    """:func:`compile_for_arch` of ``kernels_cuda/<module>.cu`` with :func:`gpuksvm.array.cuda_sources.nvrtc_options`
    (what :func:`compile_source` passes to ``cupy.RawModule``); (its number of kernels, the build)."""
    src_dir = _cuda.cuda_source_dir()
    build = compile_for_arch((src_dir / f"{module}.cu").read_text(), _cuda.nvrtc_options(src_dir), arch)
    return len(_cuda.signatures(module)), build


def probe() -> GpuStatus:
    """Take the steps of the module docstring; the first failure gives the reason and the fix."""
    cupy, installed, exc = import_cupy()
    if not installed:
        return GpuStatus(None, False, "CuPy is not installed", INSTALL_FIX)
    if cupy is None:
        reason, fix = explain(exc)
        if reason.startswith("CuPy fails"):
            reason, fix = (f"CuPy is installed but does not import ({_one_line(exc)})",
                           "reinstall CuPy for this machine's driver: " + INSTALL_FIX)
        return GpuStatus(None, True, reason, fix)
    try:
        if int(cupy.cuda.runtime.getDeviceCount()) < 1:
            return GpuStatus(None, True, "the CUDA runtime reports 0 GPUs",
                             "check that nvidia-smi lists the GPU" + _visible_devices_note())
        cupy.zeros(1, dtype=np.float32).sum().item()
        for name in CUDA_LIBRARIES:
            load_cuda_library(cupy, name)
        for src in _cuda.cuda_sources():
            compile_source(src.stem)
    except Exception as err:  # noqa: BLE001 - every failure means 'no GPU', with its reason
        reason, fix = explain(err, driver_version(cupy))
        return GpuStatus(None, True, reason, fix)
    return GpuStatus(cupy, True)
