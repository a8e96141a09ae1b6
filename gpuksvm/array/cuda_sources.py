"""Loader of the hand-written CUDA sources in ``kernels_cuda/``.

Each ``.cu`` file is compiled once per process (and per device) with
``cupy.RawModule``; CuPy keeps the compiled binaries in its on-disk cache
(``~/.cupy/kernel_cache``), so later processes skip NVRTC.  A failed
compilation raises :class:`CudaCompileError` naming the file and NVRTC's log.

Every kernel launch goes through :func:`launch`, which checks the arguments
against the kernel's ``extern "C"`` signature parsed from its source (array
dtype and contiguity, scalar range; Python scalars are converted to the
declared type) and the launch geometry against the kernel's assumptions
(:data:`BLOCK_RULES`), and counts launches per kernel (:func:`launch_counts`).
A wrong dtype reaching a ``float*`` parameter is garbage on a GPU, not an
error, so these checks are the only line of defence.

Only :mod:`gpuksvm.kernels.kernel` and the solver modules call into this module, and
every kernel launched from here has a NumPy twin that is the CPU path and the
test oracle.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["CudaCompileError", "KernelLaunchError", "Param", "BlockRule", "BLOCK_RULES", "cuda_source_dir",
           "cuda_sources", "headers_digest", "nvrtc_options", "kernel_signatures", "signatures", "get_function",
           "launch", "launch_1d", "launch_counts"]


class CudaCompileError(RuntimeError):
    """A ``kernels_cuda/*.cu`` file did not compile or a kernel is missing."""


class KernelLaunchError(TypeError):
    """A kernel argument or the launch geometry does not match what the kernel expects."""


def cuda_source_dir() -> Path:
    """The folder holding the ``.cu`` sources (installed package data, or the repo)."""
    try:
        pkg = resources.files("gpuksvm.kernels_cuda")
        p = Path(str(pkg))
        if any(p.glob("*.cu")):
            return p
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - broken install
        pass
    repo = Path(__file__).resolve().parents[2] / "kernels_cuda"
    if any(repo.glob("*.cu")):
        return repo
    raise CudaCompileError("the CUDA sources (kernels_cuda/*.cu) are not installed with gpuksvm")


def cuda_sources() -> list[Path]:
    """All ``.cu`` files shipped with the package."""
    return sorted(cuda_source_dir().glob("*.cu"))


def headers_digest(src_dir: Path | None = None) -> str:
    """SHA-256 (16 hex digits) of every header (``*.cuh``) next to the sources, names included."""
    folder = src_dir if src_dir is not None else cuda_source_dir()
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.cuh")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def nvrtc_options(src_dir: Path | None = None) -> tuple[str, ...]:
    """The options gpuksvm passes to ``cupy.RawModule`` (CuPy adds its include dirs, ``-arch``,
    ``-ftz=true``: ``tests/test_cupy_compile_path.py`` compiles every source through CuPy's own path).

    CuPy's kernel cache (``~/.cupy/kernel_cache``) is keyed on the source text, the options and
    CuPy's own headers, not on the files a source includes: ``-DGPUKSVM_HEADERS=<digest>``
    (:func:`headers_digest` of every ``*.cuh`` here) puts the headers into the key, so a changed
    ``common.cuh`` compiles anew instead of reusing a cached binary built from the old one.
    """
    folder = src_dir if src_dir is not None else cuda_source_dir()
    return ("-std=c++14", f"-I{folder}", f"-DGPUKSVM_HEADERS={headers_digest(folder)}")


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


# --------------------------------------------------------------------------- signatures
#: C parameter types of the kernels and the NumPy dtype an argument must have.
C_TYPES = {"float": np.dtype(np.float32), "double": np.dtype(np.float64), "int": np.dtype(np.int32),
           "unsigned int": np.dtype(np.uint32), "long long": np.dtype(np.int64),
           "unsigned long long": np.dtype(np.uint64)}

_KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\(([^)]*)\)\s*)?'
                        r'(\w+)\s*\(([^)]*)\)', re.S)
_PARAM_RE = re.compile(r"^(const\s+)?([a-z ]+?)\s*(\*?)\s*(?:__restrict__\s*)?(\w+)$")


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``const float* X`` is Param("X", "float", pointer=True, const=True)."""

    name: str
    ctype: str
    pointer: bool
    const: bool

    @property
    def dtype(self) -> np.dtype:
        return C_TYPES[self.ctype]

    def __str__(self) -> str:
        return f"{'const ' if self.const else ''}{self.ctype}{'*' if self.pointer else ''} {self.name}"


def kernel_signatures(code: str) -> dict[str, tuple[Param, ...]]:
    """The ``extern "C" __global__`` kernels of a CUDA source and their parameters."""
    out = {}
    for _bounds, name, params in _KERNEL_RE.findall(code):
        ps = []
        for raw in params.split(","):
            m = _PARAM_RE.match(" ".join(raw.split()))
            if m is None or " ".join(m.group(2).split()) not in C_TYPES:
                raise CudaCompileError(f"kernel {name}: cannot parse parameter {raw.strip()!r}")
            ps.append(Param(m.group(4), " ".join(m.group(2).split()), bool(m.group(3)), bool(m.group(1))))
        out[name] = tuple(ps)
    return out


@lru_cache(maxsize=None)
def signatures(module: str) -> dict[str, tuple[Param, ...]]:
    """:func:`kernel_signatures` of ``kernels_cuda/<module>.cu``."""
    path = cuda_source_dir() / f"{module}.cu"
    if not path.exists():
        raise CudaCompileError(f"no CUDA source {path}")
    return kernel_signatures(path.read_text())


# --------------------------------------------------------------------------- launches
@dataclass(frozen=True)
class BlockRule:
    """What a kernel assumes about its thread block (checked at every launch).

    shape : the exact block shape, or None;  power_of_two / max_threads : for
    1-D blocks reduced by a shared-memory tree (``for (s = blockDim.x/2; s; s >>= 1)``).
    """

    shape: tuple[int, int, int] | None = None
    power_of_two: bool = False
    max_threads: int = 1024


#: Kernel family (name without _f32/_f64) -> its block assumptions, from the sources:
#: kernel_block.cu's tiled kernel indexes a 16×16 block (tid = ty*16 + tx, loads strided by 256);
#: kernel_matvec.cu stages one row per thread in static shared arrays of GK_BLOCK = 128 rows, each
#: thread a fixed 16 of the block's chunk (an unrolled loop over exactly GK_BLOCK threads);
#: cvm.cu's first pass (cvm_partial_*) stages candidates the same way with CVM_BLOCK = 256; its
#: second (cvm_furthest_*, cvm_scores_*) reduces in static shared arrays of CVM_BLOCK;
#: smo.cu reduces over blockDim.x slots of dynamic shared memory (<= 1024 threads); its round
#: kernels reduce in static shared arrays of SMO_RK_BLOCK = 256 and stride rows by it.
BLOCK_RULES = {
    "kernel_block_tiled": BlockRule(shape=(16, 16, 1)),
    "kernel_matvec": BlockRule(shape=(128, 1, 1)),
    "cvm_partial": BlockRule(shape=(256, 1, 1)),
    "cvm_furthest": BlockRule(power_of_two=True, max_threads=256),
    "cvm_scores": BlockRule(power_of_two=True, max_threads=256),
    "smo_subproblem": BlockRule(power_of_two=True, max_threads=1024),
    "smo_round_keys": BlockRule(shape=(256, 1, 1)),
    "smo_round_finish": BlockRule(shape=(256, 1, 1)),
}

#: (kernel family, pointer parameter) -> the leading-dimension parameter of a row-strided 2-D
#: array (rows may be padded: a view out[s:e] of a wider array); every other array must be C-contiguous.
ROW_STRIDED = {("kernel_epilogue", "G"): "ldg", ("kernel_block_tiled", "out"): "ldo"}

_MAX_SHARED = 48 * 1024
_counts: Counter = Counter()
_counts_lock = threading.Lock()


def _family(name: str) -> str:
    return re.sub(r"_f(32|64)$", "", name)


def _dim3(v: Any) -> tuple[int, int, int]:
    t = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if not 1 <= len(t) <= 3:
        raise KernelLaunchError(f"a grid/block needs 1 to 3 dimensions, got {v!r}")
    return t + (1,) * (3 - len(t))


def _check_geometry(name: str, grid: tuple, block: tuple, shared_mem: int) -> None:
    threads = block[0] * block[1] * block[2]
    if min(grid) < 1 or min(block) < 1 or threads > 1024 or grid[1] > 65535 or grid[2] > 65535 \
            or grid[0] > 2**31 - 1:
        raise KernelLaunchError(f"{name}: invalid launch grid={grid} block={block}")
    if not 0 <= shared_mem <= _MAX_SHARED:
        raise KernelLaunchError(f"{name}: {shared_mem} bytes of dynamic shared memory (at most {_MAX_SHARED})")
    rule = BLOCK_RULES.get(_family(name))
    if rule is None:
        return
    if rule.shape is not None and block != rule.shape:
        raise KernelLaunchError(f"{name} assumes a {rule.shape} thread block, got {block}")
    if rule.power_of_two and (block[1:] != (1, 1) or block[0] & (block[0] - 1)):
        raise KernelLaunchError(f"{name} reduces over a 1-D power-of-two block, got {block}")
    if threads > rule.max_threads:
        raise KernelLaunchError(f"{name} takes at most {rule.max_threads} threads per block, got {threads}")


def _is_device_array(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "cupy" and hasattr(x, "data") and hasattr(x, "strides")


def _check_args(name: str, params: tuple[Param, ...], args: Sequence[Any]) -> tuple:
    if len(args) != len(params):
        raise KernelLaunchError(f"{name} takes {len(params)} arguments, got {len(args)}")
    values = {p.name: a for p, a in zip(params, args)}
    out = []
    for i, (p, a) in enumerate(zip(params, args)):
        where = f"{name} argument {i} ({p})"
        if p.pointer:
            if a is None:            # CuPy passes None as a NULL pointer
                out.append(None)
                continue
            if not _is_device_array(a):
                raise KernelLaunchError(f"{where}: expected a device array of {p.dtype}, got {type(a).__name__}")
            if a.dtype != p.dtype:
                raise KernelLaunchError(f"{where}: array of dtype {a.dtype}, the kernel reads {p.dtype}")
            ld_name = ROW_STRIDED.get((_family(name), p.name))
            if ld_name is not None:
                ld = int(values[ld_name])
                if a.ndim != 2 or a.strides[1] != a.itemsize or (a.shape[0] > 1 and a.strides[0] != ld * a.itemsize):
                    raise KernelLaunchError(f"{where}: needs a 2-D array with unit column stride and row "
                                            f"stride {ld_name}={ld} elements, got strides {a.strides}")
            elif not a.flags.c_contiguous:
                raise KernelLaunchError(f"{where}: the array must be C-contiguous")
            out.append(a)
            continue
        if _is_device_array(a) or isinstance(a, np.ndarray):
            raise KernelLaunchError(f"{where}: an array for a scalar parameter")
        if isinstance(a, np.generic):
            if a.dtype != p.dtype:
                raise KernelLaunchError(f"{where}: NumPy scalar of dtype {a.dtype}, the kernel reads {p.dtype}")
            out.append(a)
        elif isinstance(a, (bool, int, float)):
            if p.dtype.kind in "iu":
                if isinstance(a, float) or not np.iinfo(p.dtype).min <= a <= np.iinfo(p.dtype).max:
                    raise KernelLaunchError(f"{where}: {a!r} is not a {p.ctype}")
            v = p.dtype.type(a)
            if p.dtype.kind == "f" and np.isfinite(a) and not np.isfinite(v):
                raise KernelLaunchError(f"{where}: {a!r} overflows {p.ctype}")
            out.append(v)
        else:
            raise KernelLaunchError(f"{where}: unsupported argument {type(a).__name__}")
    return tuple(out)


def launch(module: str, name: str, grid: Any, block: Any, args: Sequence[Any], *, shared_mem: int = 0) -> None:
    """Launch kernel ``name`` of ``kernels_cuda/<module>.cu`` after checking it.

    Arrays must be device arrays of the parameter's dtype, C-contiguous (or
    row-strided where :data:`ROW_STRIDED` allows); ``None`` is a NULL pointer;
    Python scalars are converted to the parameter's type (integers range-checked),
    NumPy scalars must already have it.  The geometry must satisfy
    :data:`BLOCK_RULES`.  Raises :class:`KernelLaunchError` otherwise.
    """
    params = signatures(module).get(name)
    if params is None:
        raise CudaCompileError(f"kernel {name!r} is not an extern \"C\" kernel of {module}.cu")
    grid, block = _dim3(grid), _dim3(block)
    _check_geometry(name, grid, block, int(shared_mem))
    packed = _check_args(name, params, args)
    get_function(module, name)(grid, block, packed, shared_mem=int(shared_mem))
    with _counts_lock:
        _counts[name] += 1


def launch_1d(module: str, name: str, n_threads_total: int, args: Sequence[Any], *, block: int = 256,
              shared_mem: int = 0, max_blocks: int | None = 65535 * 8) -> None:
    """:func:`launch` with enough 1-D blocks of ``block`` threads to cover ``n_threads_total``
    (at most ``max_blocks``: the kernel then loops over the rest, grid-stride)."""
    grid = max(1, (int(n_threads_total) + block - 1) // block)
    if max_blocks is not None:
        grid = min(grid, max_blocks)
    launch(module, name, (grid,), (block,), args, shared_mem=shared_mem)


def launch_counts() -> dict[str, int]:
    """Launches per kernel name in this process so far (every launch goes through :func:`launch`)."""
    with _counts_lock:
        return dict(_counts)
