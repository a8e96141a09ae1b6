"""Launch emulated kernels (:mod:`gpuemu.build` libraries) the way ``cupy.RawKernel`` does.

Argument packing follows CuPy (``cupy/cuda/function.pyx: _pointer``): a device
array passes its data pointer, ``None`` a NULL pointer, a NumPy scalar or a
size-1 NumPy array its bytes, a Python int/float/bool an int64/float64/bool; a
larger NumPy array is a ``TypeError``.  The kernel then reads each parameter
with its declared C type, as ``cuLaunchKernel`` does, so a float64 array given
to a ``float*`` parameter is garbage on a GPU.  Here every such mismatch raises
:class:`ArgTypeError` before the launch (``strict``, the default).

During a launch every array argument lives in a copy that ends flush against
a PROT_NONE page (overlapping arguments share one copy): reading or writing
past the end of an array faults, and the fault becomes an :class:`EmuError`
naming the argument.  Writes through a ``const T*`` parameter are reported.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gpuksvm.array.cuda_sources import C_TYPES, Param, kernel_signatures

from . import build as _build

__all__ = ["ArgTypeError", "EmuError", "Module", "Kernel", "ORDERS", "settings"]

ORDERS = {"forward": 0, "reverse": 1, "random": 2}


class ArgTypeError(TypeError):
    """An argument does not match the kernel's declared parameter type."""


class EmuError(RuntimeError):
    """The emulator saw undefined behaviour: divergent barrier, fault, bad launch, const write."""


@dataclass
class Settings:
    """Thread order between barriers (``GPUEMU_ORDER``: forward, reverse, random; default random,
    seeded by ``GPUEMU_SEED`` + the launch number) and the guard pages (``GPUEMU_GUARD=0`` turns
    them off)."""

    order: str = os.environ.get("GPUEMU_ORDER", "random")
    seed: int = int(os.environ.get("GPUEMU_SEED", "1"))
    guard: bool = os.environ.get("GPUEMU_GUARD", "1") != "0"
    strict: bool = True


settings = Settings()
_lock = threading.RLock()        # one launch at a time: the emulator state and signal handlers are global
_n_launches = 0
_PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _source_line(pc: int) -> str:
    """file:line of a code address in an emulator library (addr2line), best effort."""
    info = _DlInfo()
    if not pc or not _libc.dladdr(ctypes.c_void_p(pc), ctypes.byref(info)) or not info.dli_fname:
        return f"pc={pc:#x}"
    lib, off = info.dli_fname.decode(), pc - (info.dli_fbase or 0)
    try:
        out = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", lib, hex(off)], capture_output=True,
                             text=True, timeout=30).stdout.split("\n")
        frames = [f"{out[i + 1].rsplit('/', 1)[-1]} ({out[i].split('(')[0]})" for i in range(0, len(out) - 1, 2)]
        return " <- ".join(frames) or f"{lib}+{off:#x}"
    except (OSError, subprocess.SubprocessError):
        return f"{lib}+{off:#x}"


@dataclass
class _Span:
    """Host bytes [lo, hi) of one or more overlapping array arguments and their guarded copy."""

    lo: int
    hi: int
    members: list          # (argument index, address)
    const: bool
    base: int = 0
    total: int = 0

    @property
    def copy_lo(self) -> int:
        return self.base + self.total - _PAGE - (self.hi - self.lo)

    @property
    def guard(self) -> tuple[int, int]:
        return self.base + self.total - _PAGE, self.base + self.total


def _extent(a: np.ndarray) -> tuple[int, int]:
    addr = a.ctypes.data
    lo = addr + sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    hi = addr + sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    return lo, hi


class Module:
    """The kernels of one CUDA source built for the CPU.

    ``view_of(x)`` returns the NumPy array holding a device array's memory, or
    None when ``x`` is not a device array (the fake CuPy supplies it).
    """

    def __init__(self, code: str, name: str, include_dirs: list[Path], view_of: Callable[[Any], Any]):
        self.name = name
        self.path = _build.build(code, name, include_dirs)
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.gpuemu_launch.restype = ctypes.c_int
        self.lib.gpuemu_launch.argtypes = [ctypes.c_int] + [ctypes.c_uint] * 6 + [
            ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_int]
        self.lib.gpuemu_report.restype = ctypes.c_char_p
        self.signatures = kernel_signatures(code)
        self.view_of = view_of

    def get_function(self, name: str) -> "Kernel":
        if name not in self.signatures:
            raise AttributeError(f"no extern \"C\" kernel {name!r} in {self.name}")
        return Kernel(self, list(self.signatures).index(name), name, self.signatures[name])


class Kernel:
    """One kernel; ``kernel(grid, block, args, shared_mem=0)`` runs it on the CPU."""

    def __init__(self, module: Module, index: int, name: str, params: tuple[Param, ...]):
        self.module, self.index, self.name, self.params = module, index, name, params

    # ------------------------------------------------------------------ packing
    def _pack(self, i: int, x: Any, arrays: list) -> bytes:
        p = self.params[i]
        where = f"{self.name} argument {i} ({p})"
        strict = settings.strict
        if x is None:
            if strict and not p.pointer:
                raise ArgTypeError(f"{where}: None (a NULL pointer) for a scalar parameter")
            return bytes(8)
        view = self.module.view_of(x)
        if view is not None:
            if strict and not p.pointer:
                raise ArgTypeError(f"{where}: a device array for a scalar parameter")
            if strict and view.dtype != p.dtype:
                raise ArgTypeError(f"{where}: array of dtype {view.dtype}; the kernel reads {p.dtype}")
            arrays.append((i, view))
            return np.uint64(view.ctypes.data if view.size else 0).tobytes()
        if isinstance(x, np.ndarray):
            if x.size != 1:
                raise TypeError(f"{where}: a numpy.ndarray of shape {x.shape} cannot be a kernel argument "
                                "(CuPy passes only size-1 NumPy arrays, by value)")
            x = x.reshape(-1)[0]
        if isinstance(x, bool):
            x = np.bool_(x)
        elif isinstance(x, int):
            x = np.int64(x)
        elif isinstance(x, float):
            x = np.float64(x)
        if not isinstance(x, np.generic):
            raise TypeError(f"{where}: unsupported argument type {type(x).__name__}")
        if strict and (p.pointer or x.dtype != C_TYPES[p.ctype]):
            raise ArgTypeError(f"{where}: a {x.dtype} scalar; the kernel reads {p.ctype}{'*' if p.pointer else ''}")
        return x.tobytes()

    # ------------------------------------------------------------------ guard pages
    def _guard(self, arrays: list, slots: list) -> list[_Span]:
        spans: list[_Span] = []
        for i, a in sorted(arrays, key=lambda t: _extent(t[1])[0] if t[1].size else 0):
            if a.size == 0:
                continue
            lo, hi = _extent(a)
            const = self.params[i].const
            if spans and lo < spans[-1].hi:
                s = spans[-1]
                s.hi, s.const = max(s.hi, hi), s.const and const
                s.members.append((i, a.ctypes.data))
            else:
                spans.append(_Span(lo, hi, [(i, a.ctypes.data)], const))
        for s in spans:
            n = s.hi - s.lo
            s.total = ((n + _PAGE - 1) // _PAGE + 1) * _PAGE
            s.base = _libc.mmap(None, s.total, 3, 0x22, -1, 0)      # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
            if s.base in (None, ctypes.c_void_p(-1).value):
                raise MemoryError("gpuemu: mmap failed")
            _libc.mprotect(s.guard[0], _PAGE, 0)
            ctypes.memmove(s.copy_lo, s.lo, n)
            for i, addr in s.members:
                slots[i] = np.uint64(s.copy_lo + (addr - s.lo)).tobytes()
        return spans

    def _unguard(self, spans: list[_Span], copy_back: bool) -> str:
        report = ""
        for s in spans:
            n = s.hi - s.lo
            if s.const:
                if ctypes.string_at(s.copy_lo, n) != ctypes.string_at(s.lo, n):
                    names = ", ".join(str(self.params[i]) for i, _ in s.members)
                    report += f"the kernel wrote into const argument(s) {names}\n"
            elif copy_back:
                ctypes.memmove(s.lo, s.copy_lo, n)
            _libc.munmap(s.base, s.total)
        return report

    def _fault_report(self, spans: list[_Span]) -> str:
        sig, addr, pc, where = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
        self.module.lib.gpuemu_fault(ctypes.byref(sig), ctypes.byref(addr), ctypes.byref(pc), ctypes.byref(where))
        a = addr.value or 0
        if sig.value == 4:       # SIGILL: a UBSan check (trap mode) failed
            return f"undefined behaviour (UBSan check) at {_source_line(pc.value or 0)}"
        for s in spans:
            g0, g1 = s.guard
            if g0 <= a < g1:
                names = ", ".join(str(self.params[i]) for i, _ in s.members)
                return (f"access {a - g0} bytes past the end of argument(s) {names} "
                        f"at {_source_line(pc.value or 0)}")
        what = {11: "SIGSEGV", 7: "SIGBUS", 8: "SIGFPE (integer division by zero?)"}.get(sig.value,
                                                                                    f"signal {sig.value}")
        place = {1: "past the end of dynamic shared memory", 2: "a CUDA thread's stack overflowed (256 KiB)"}.get(
            where.value, "memory not given to the kernel")
        return f"{what} at address {a:#x}: {place}, at {_source_line(pc.value or 0)}"

    # ------------------------------------------------------------------ launch
    def __call__(self, grid: Any, block: Any, args: Any, shared_mem: int = 0, stream: Any = None,
                 enable_cooperative_groups: bool = False) -> None:
        global _n_launches
        grid = tuple(int(g) for g in (grid if isinstance(grid, tuple) else tuple(grid)))
        block = tuple(int(b) for b in (block if isinstance(block, tuple) else tuple(block)))
        grid, block = grid + (1,) * (3 - len(grid)), block + (1,) * (3 - len(block))
        args = tuple(args)
        if len(args) != len(self.params):
            raise ArgTypeError(f"{self.name}: {len(args)} arguments for {len(self.params)} parameters "
                               "(cuLaunchKernel would read past the argument array)")
        arrays: list = []
        slots = [self._pack(i, a, arrays) for i, a in enumerate(args)]
        with _lock:
            spans = self._guard(arrays, slots) if settings.guard else []
            bufs = [ctypes.create_string_buffer(b, 16) for b in slots]
            ptrs = (ctypes.c_void_p * max(1, len(bufs)))(*[ctypes.addressof(b) for b in bufs])
            _n_launches += 1
            rc = self.module.lib.gpuemu_launch(self.index, *grid, *block, int(shared_mem), ptrs,
                                               ORDERS[settings.order], settings.seed + _n_launches,
                                               int(self.name.endswith("_f32")))
            report = self.module.lib.gpuemu_report().decode() if rc == 1 else ""
            if rc == 2:
                report = self._fault_report(spans)
            report += self._unguard(spans, copy_back=rc == 0)
        if rc != 0 or report:
            raise EmuError(f"{self.name} grid={grid} block={block} shared_mem={shared_mem}: {report.strip()}")
