"""The real NVRTC (CUDA's run-time compiler, the one ``cupy.RawModule`` uses), without a GPU.

NVRTC ships as the pip package ``nvidia-cuda-nvrtc`` (a ``test`` extra of
gpuksvm); it needs no driver and no device.  This module loads it with ctypes
and compiles a CUDA source with exactly the options CuPy would use:

    gpuksvm's own options (:func:`gpuksvm.array.cuda_sources.nvrtc_options`)
    + what CuPy appends for a RawModule (cupy/cuda/compiler.py, NVRTC backend):
      ``-ftz=true``, ``-arch=sm_XX``, ``--device-as-default-execution-space``.

CuPy also passes ``--pch`` to NVRTC >= 12.8: an automatic precompiled header,
a compile-time cache that does not change what compiles; it is left out
because it writes into /tmp and mixes one program's log into the next.

CuPy also adds include directories (its own headers, CCCL, the CUDA headers);
the gpuksvm sources include only their own ``common.cuh``, so those are left
out on purpose: a source that needs a CUDA header must fail here.
"""
from __future__ import annotations

import ctypes
import glob
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NvrtcUnavailable", "CompileResult", "load", "version", "cupy_options", "compile_source",
           "kernel_names"]

_KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)')


class NvrtcUnavailable(RuntimeError):
    """The pip package nvidia-cuda-nvrtc is not installed (or its library does not load)."""


_lib = None


def load() -> ctypes.CDLL:
    """The NVRTC shared library of the ``nvidia-cuda-nvrtc`` wheel (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    try:
        import nvidia  # namespace package of NVIDIA's wheels
    except ImportError as exc:
        raise NvrtcUnavailable("pip package nvidia-cuda-nvrtc is not installed "
                               "(pip install 'gpuksvm[test]')") from exc
    libs, builtins = [], []
    for base in nvidia.__path__:
        for p in sorted(glob.glob(str(Path(base) / "*" / "lib" / "libnvrtc*.so*"))):
            (builtins if "builtins" in p else libs).append(p)
    libs = [p for p in libs if "alt" not in Path(p).name]
    if not libs:
        raise NvrtcUnavailable("nvidia-cuda-nvrtc is installed but libnvrtc.so was not found in it")
    for b in builtins:   # libnvrtc dlopens its builtins library: make it findable first
        if "alt" not in Path(b).name:
            ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
    _lib = ctypes.CDLL(libs[-1], mode=ctypes.RTLD_GLOBAL)
    _lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return _lib


def version() -> tuple[int, int]:
    lib = load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def cupy_options(own_options: tuple[str, ...], arch: int) -> list[str]:
    """``own_options`` (what gpuksvm passes to RawModule) plus what CuPy appends for NVRTC."""
    return list(own_options) + ["-ftz=true", f"-arch=sm_{arch}", "--device-as-default-execution-space"]


def kernel_names(code: str) -> list[str]:
    """The ``extern "C" __global__`` entry points of a CUDA source."""
    return _KERNEL_RE.findall(code)


@dataclass
class CompileResult:
    ok: bool
    log: str
    lowered: dict = field(default_factory=dict)   # kernel name -> the symbol NVRTC emitted
    binary: bytes = b""                            # the cubin (-arch=sm_XX) or PTX (-arch=compute_XX)

    def missing_kernels(self) -> list[str]:
        return [k for k, v in self.lowered.items() if v != k]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: {load().nvrtcGetErrorString(rc).decode()}")


def _output(lib: ctypes.CDLL, prog: ctypes.c_void_p) -> bytes:
    """The compiled program: its cubin when NVRTC made one (a real architecture), else its PTX."""
    size = ctypes.c_size_t()
    get = lib.nvrtcGetCUBIN
    if lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)) != 0 or size.value == 0:
        _check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        get = lib.nvrtcGetPTX
    buf = ctypes.create_string_buffer(size.value)
    _check(get(prog, buf), get.__name__)
    return buf.raw


def compile_source(code: str, name: str, options: list[str]) -> CompileResult:
    """Compile ``code`` with NVRTC; every extern "C" kernel is registered as a name expression."""
    lib = load()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        kernels = kernel_names(code)
        for k in kernels:
            _check(lib.nvrtcAddNameExpression(prog, k.encode()), "nvrtcAddNameExpression")
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        res = CompileResult(rc == 0, log.value.decode(errors="replace"))
        if rc == 0:
            for k in kernels:
                p = ctypes.c_char_p()
                lib.nvrtcGetLoweredName(prog, k.encode(), ctypes.byref(p))
                res.lowered[k] = p.value.decode() if p.value else None
            res.binary = _output(lib, prog)
        return res
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
