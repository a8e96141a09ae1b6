"""gpuksvm's GPU path on a machine without a GPU (test infrastructure, not shipped).

* :mod:`gpuemu.nvrtc` — the real NVRTC compiler (pip ``nvidia-cuda-nvrtc``) via ctypes;
* :mod:`gpuemu.build` / :mod:`gpuemu.launcher` — the CUDA sources built for the CPU
  (``gpuemu.h``: one fiber per CUDA thread) and launched as CuPy launches them;
* ``gpuemu/fake/cupy`` — a NumPy-backed stand-in for the CuPy API gpuksvm uses,
  strict where CuPy is strict; every device operation goes through
  :func:`gpuemu.dispatch.dispatch`, where :mod:`gpuemu.dispatch` hooks observe it.

``tests/conftest.py`` picks the mode: a real GPU when CuPy finds one, else this
emulation (needs g++), else the ``gpu`` tests skip with the reason.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

__all__ = ["FAKE_DIR", "install", "uninstall", "prebuild", "emulated_gpu", "describe"]

FAKE_DIR = Path(__file__).resolve().parent / "fake"


_fake_modules: dict = {}     # the stand-in's modules while they are not installed


def _cupy_modules() -> list[str]:
    return [m for m in sys.modules if m.split(".")[0] in ("cupy", "cupyx", "cupy_backends")]


def install():
    """Make ``import cupy`` / ``import cupyx`` give the stand-in (a real CuPy already imported is
    dropped from ``sys.modules``); returns the fake ``cupy`` module.  Its modules are kept
    between :func:`install` / :func:`uninstall` pairs (and so its caches)."""
    mod = sys.modules.get("cupy")
    if mod is not None and getattr(mod, "GPUEMU", False):
        return mod
    for name in _cupy_modules():
        del sys.modules[name]
    if str(FAKE_DIR) not in sys.path:
        sys.path.insert(0, str(FAKE_DIR))
    if _fake_modules:
        sys.modules.update(_fake_modules)
        return sys.modules["cupy"]
    importlib.invalidate_caches()
    return importlib.import_module("cupy")


def uninstall() -> None:
    """Back to a machine without CuPy: ``import cupy`` fails again."""
    mod = sys.modules.get("cupy")
    if mod is None or not getattr(mod, "GPUEMU", False):
        return
    for name in _cupy_modules():
        _fake_modules[name] = sys.modules.pop(name)
    while str(FAKE_DIR) in sys.path:
        sys.path.remove(str(FAKE_DIR))


def prebuild(max_workers: int = 2) -> list[Path]:
    """Build the emulator library of every ``kernels_cuda`` source now, in parallel (cached)."""
    from gpuksvm.array import cuda_sources as _cuda

    from . import build

    src = _cuda.cuda_source_dir()
    with ThreadPoolExecutor(max_workers) as pool:   # g++ runs in subprocesses: threads suffice
        jobs = [pool.submit(build.build, p.read_text(), "kern.cu", [src]) for p in _cuda.cuda_sources()]
        return [j.result() for j in jobs]


@contextlib.contextmanager
def emulated_gpu() -> Iterator[object]:
    """Within the block gpuksvm sees one CUDA device: the stand-in CuPy and the CPU emulator.

    Outside it, ``import cupy`` fails as on a machine without CuPy.  The emulated device exists
    in this process only, so inside the block Dask computes with threads and a default
    ``distributed`` client (whose workers are other processes, without the stand-in) is hidden:
    ``distributed.default_client()`` answers "no client", as in a process that made none."""
    from gpuksvm.array import backend

    cupy = install()
    saved = backend._cupy_or_none
    backend._cupy_or_none = lambda: cupy
    try:
        with _local_dask():
            yield cupy
    finally:
        backend._cupy_or_none = saved
        uninstall()


@contextlib.contextmanager
def _local_dask() -> Iterator[None]:
    try:
        import dask
        import distributed
    except ImportError:
        yield
        return

    def no_client():
        raise ValueError("No clients found (gpuemu: the emulated GPU is local to this process)")

    saved = distributed.default_client
    distributed.default_client = no_client
    try:
        with dask.config.set(scheduler="threads"):
            yield
    finally:
        distributed.default_client = saved


def describe() -> str:
    """One line on what the emulation checks here (compiler, NVRTC)."""
    from . import build, launcher, nvrtc

    try:
        nv = "NVRTC %d.%d compile check" % nvrtc.version()
    except nvrtc.NvrtcUnavailable:
        nv = "no NVRTC compile check (pip install nvidia-cuda-nvrtc)"
    s = launcher.settings
    return (f"{build.compiler()} with UBSan, FMA contraction {'on' if build.fma_contraction() else 'off'}, "
            f"guard pages {'on' if s.guard else 'off'}, thread order {s.order} (seed {s.seed}), {nv}")
