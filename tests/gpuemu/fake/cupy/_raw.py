"""cupy.RawModule / cupy.RawKernel: NVRTC compiles (when installed), the CPU emulator runs.

``compile()`` first compiles the code with the real NVRTC and the options CuPy
would use for an sm_80 device (a failure raises ``CompileException`` with
NVRTC's log, as on a GPU machine); without the ``nvidia-cuda-nvrtc`` package
that step is skipped and :data:`NVRTC_CHECKED` stays False.  Then the code is
built for the CPU (:mod:`gpuemu.build`, cached) and every launch runs in the
emulator (:mod:`gpuemu.launcher`) as a "kernel" event of :mod:`gpuemu.dispatch` — or,
within :func:`gpuemu.dispatch.substituted`, as the kernel's NumPy twin (tracing at scale).
"""
from __future__ import annotations

from pathlib import Path

from gpuemu import failures, launcher, nvrtc
from gpuemu.dispatch import dispatch as _dispatch
from gpuemu.dispatch import kernel_substitute as _kernel_substitute

from .cuda.compiler import CompileException

ARCH = 80
NVRTC_CHECKED = False     # True once a module was compiled by the real NVRTC in this process
_modules: dict = {}


def _view_of(x):
    from . import ndarray
    return x._a if isinstance(x, ndarray) else None


class RawModule:
    def __init__(self, *, code=None, path=None, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, name_expressions=None, jitify=None):
        self.code = Path(path).read_text() if code is None else code
        self.options = tuple(options)
        self._module = None

    def compile(self, log_stream=None):
        global NVRTC_CHECKED
        if self._module is not None:
            return
        failures.check_device()
        failures.check_nvrtc()
        if failures.current() == "compile-error":
            raise CompileException("kern.cu(1): error: the fake NVRTC rejects this source "
                                   "(gpuemu.failures 'compile-error')", self.code, "kern.cu", self.options)
        key = (self.code, self.options)
        if key not in _modules:
            try:
                nvrtc.load()
            except nvrtc.NvrtcUnavailable:
                pass
            else:
                res = nvrtc.compile_source(self.code, "kern.cu", nvrtc.cupy_options(self.options, ARCH))
                if not res.ok:
                    raise CompileException(res.log, self.code, "kern.cu", self.options)
                NVRTC_CHECKED = True
            includes = [Path(o[2:]) for o in self.options if o.startswith("-I")]
            _modules[key] = launcher.Module(self.code, "kern.cu", includes, _view_of)
        self._module = _modules[key]

    def get_function(self, name):
        self.compile()
        return _Function(self._module.get_function(name))


class _Function:
    """A kernel of a RawModule (what ``RawModule.get_function`` returns)."""

    def __init__(self, kernel: launcher.Kernel):
        self._kernel = kernel
        self.kernel_name = kernel.name

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None, enable_cooperative_groups=False):
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        block = tuple(block) if isinstance(block, (tuple, list)) else (block,)
        sub = _kernel_substitute(self._kernel.name)
        if sub is None:
            run = lambda: self._kernel(grid, block, args, shared_mem=shared_mem)  # noqa: E731
        else:
            run = lambda: sub(grid, block, tuple(args))  # noqa: E731
        _dispatch("kernel", self._kernel.name, run, tuple(args), {}, grid=grid, block=block,
                  shared_mem=shared_mem, substituted=sub is not None)


class RawKernel:
    def __init__(self, code, name, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, jitify=None):
        self._module = RawModule(code=code, options=options)
        self.name = name

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None, enable_cooperative_groups=False):
        self._module.get_function(self.name)(grid, block, args, shared_mem=shared_mem)
