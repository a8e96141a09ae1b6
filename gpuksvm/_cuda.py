"""Loader of the hand-written CUDA sources in ``kernels_cuda/``.

Each ``.cu`` file is compiled once per process (and per device) with
``cupy.RawModule``; CuPy keeps the compiled binaries in its on-disk cache
(``~/.cupy/kernel_cache``), so later processes skip NVRTC.  A failed
compilation raises :class:`CudaCompileError` naming the file and NVRTC's log.

Only :mod:`gpuksvm.kernels` and the solver modules call into this module, and
every kernel launched from here has a NumPy twin that is the CPU path and the
test oracle.
"""
from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path

__all__ = ["CudaCompileError", "cuda_source_dir", "cuda_sources", "get_function", "launch_1d"]


class CudaCompileError(RuntimeError):
    """A ``kernels_cuda/*.cu`` file did not compile or a kernel is missing."""


def cuda_source_dir() -> Path:
    """The folder holding the ``.cu`` sources (installed package data, or the repo)."""
    try:
        pkg = resources.files("gpuksvm.kernels_cuda")
        p = Path(str(pkg))
        if any(p.glob("*.cu")):
            return p
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - broken install
        pass
    repo = Path(__file__).resolve().parent.parent / "kernels_cuda"
    if any(repo.glob("*.cu")):
        return repo
    raise CudaCompileError("the CUDA sources (kernels_cuda/*.cu) are not installed with gpuksvm")


def cuda_sources() -> list[Path]:
    """All ``.cu`` files shipped with the package."""
    return sorted(cuda_source_dir().glob("*.cu"))


def nvrtc_options(src_dir: Path | None = None) -> tuple[str, ...]:
    """The options gpuksvm passes to ``cupy.RawModule`` (CuPy appends ``-arch`` and ``-ftz=true``).

    ``tests/test_cuda_sources.py`` compiles every source with exactly these
    options and the real NVRTC for several architectures.
    """
    return ("-std=c++14", f"-I{src_dir if src_dir is not None else cuda_source_dir()}")


_lock = threading.Lock()
_modules: dict[tuple[str, int], object] = {}


def _module(name: str):
    import cupy

    dev = cupy.cuda.Device().id
    key = (name, dev)
    mod = _modules.get(key)
    if mod is not None:
        return mod
    with _lock:
        mod = _modules.get(key)
        if mod is not None:
            return mod
        src_dir = cuda_source_dir()
        path = src_dir / f"{name}.cu"
        if not path.exists():
            raise CudaCompileError(f"no CUDA source {path}")
        code = path.read_text()
        try:
            mod = cupy.RawModule(code=code, options=nvrtc_options(src_dir))
            mod.compile()
        except Exception as exc:  # CompileException, NVRTC missing, ...
            raise CudaCompileError(
                f"compiling {path.name} with NVRTC failed: {exc}\n"
                "Check that the CuPy wheel matches the installed CUDA driver "
                "(extras 'cuda12' / 'cuda13'), or use device='cpu'.") from exc
        _modules[key] = mod
        return mod


def get_function(module: str, name: str):
    """The compiled kernel ``name`` of ``kernels_cuda/<module>.cu``."""
    mod = _module(module)
    try:
        return mod.get_function(name)
    except Exception as exc:
        raise CudaCompileError(f"kernel {name!r} not found in {module}.cu: {exc}") from exc


def launch_1d(kernel, n_threads_total: int, args: tuple, *, block: int = 256,
              shared_mem: int = 0, max_blocks: int | None = 65535 * 8) -> None:
    """Launch ``kernel`` with enough 1-D blocks to cover ``n_threads_total``."""
    grid = max(1, (int(n_threads_total) + block - 1) // block)
    if max_blocks is not None:
        grid = min(grid, max_blocks)
    kernel((grid,), (block,), args, shared_mem=shared_mem)
