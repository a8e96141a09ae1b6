"""cupy.cuda.compiler: the compile step of ``cupy._core.core.compile_with_cache``, as CuPy 14 takes it.

As in CuPy's ``_compile_with_cache_cuda``: ``-ftz=true`` is appended; the ``-arch`` option
comes from :func:`_get_arch_for_options_for_nvrtc`, memoized per device (so it asks for the
current device and fails without one; ``__wrapped__`` is the bare function); the kernel-cache
key hashes the architecture, the options, NVRTC's version and the source; a binary the cache
backend (:data:`_kernel_cache_backend`, :func:`_set_kernel_cache_backend`) returns is loaded,
else the real NVRTC (:mod:`gpuemu.nvrtc`) compiles, the backend saves the binary and the module
is loaded, which needs a device.  Unlike CuPy's default backend (files in
``~/.cupy/kernel_cache``) the stand-in's keeps binaries in memory.  NVRTC's answers are kept per
(source, options) in the process, so repeated compiles of a source cost nothing.
"""
from __future__ import annotations

import functools
import hashlib

from gpuemu import failures
from gpuemu import nvrtc as _real_nvrtc


class CompileException(Exception):
    """NVRTC rejected a source (as cupy.cuda.compiler.CompileException)."""

    def __init__(self, msg, source="", name="", options=(), backend="nvrtc"):
        super().__init__(msg)
        self.source, self.name, self.options, self.backend = source, name, options, backend


class _MemoryKernelCacheBackend:
    """The stand-in's default kernel-cache backend: binaries in a dict (CuPy's writes files)."""

    def __init__(self):
        self.binaries = {}

    def load(self, name):
        return self.binaries.get(name)

    def save(self, name, cubin, source):
        self.binaries[name] = cubin


_kernel_cache_backend = _MemoryKernelCacheBackend()


def _set_kernel_cache_backend(backend):
    global _kernel_cache_backend
    _kernel_cache_backend = backend


def _for_each_device(fn):
    """CuPy's ``_util.memoize(for_each_device=True)``: the memo is keyed on the current device."""
    memo = {}

    @functools.wraps(fn)
    def call(*args):
        from . import Device
        key = (Device().id, args)
        if key not in memo:
            memo[key] = fn(*args)
        return memo[key]
    return call


@_for_each_device
def _get_arch():
    from . import Device
    return Device().compute_capability


@_for_each_device
def _get_arch_for_options_for_nvrtc(arch=None):
    if arch is None:
        arch = _get_arch()
    return f"-arch=sm_{arch}", "cubin"


_nvrtc_results: dict = {}


def _compile_module_with_cache(source, options=(), *, arch=None, **_ignored):
    """What ``compile_with_cache`` calls after assembling the options (see the module docstring)."""
    from . import nvrtc
    from .. import _raw

    if arch is None:
        arch = _get_arch()
    own = tuple(options)
    options = own + ("-ftz=true",)
    arch_option, _kind = _get_arch_for_options_for_nvrtc(arch)
    version = nvrtc.getVersion()              # NVRTC missing: raises as CuPy does
    name = hashlib.sha1(repr((arch, options, version, arch_option, source)).encode()).hexdigest() + ".cubin"
    if _kernel_cache_backend.load(name) is None:
        if failures.current() == "compile-error":
            raise CompileException("kern.cu(1): error: the fake NVRTC rejects this source "
                                   "(gpuemu.failures 'compile-error')", source, name + ".cu", options)
        nvrtc_options = tuple(_real_nvrtc.cupy_options(own, int(arch)))
        key = (source, nvrtc_options)
        if key not in _nvrtc_results:
            _nvrtc_results[key] = _real_nvrtc.compile_source(source, name + ".cu", list(nvrtc_options))
        res = _nvrtc_results[key]
        if not res.ok:
            raise CompileException(res.log, source, name + ".cu", options)
        _kernel_cache_backend.save(name, res.binary, source)
    failures.check_device()                    # Module.load
    mod = _raw.RawModule(code=source, options=own)
    mod.compile()
    return mod
