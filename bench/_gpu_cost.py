"""The H100 cost model of ``bench/gpu_model.py``: constants, per-operation costs, the tracer.

A fit run on the emulated GPU (``tests/gpuemu``: the fake CuPy, every device
operation through :func:`gpuemu.dispatch.dispatch`) is recorded by
:class:`Tracer`, a dispatch hook.  Each event becomes an :class:`Op` with its
name, shapes, dtype, FLOPs, bytes read and written, kernel launches, whether
the host waited for the device (a sync) and the bytes it moved over PCIe; each
RawKernel launch keeps its grid, block and arguments.  The predicted H100 time
of a trace is (issue 17)

    T = Σ_op max(host issue cost, FLOPs / peak, bytes / bandwidth)
        + syncs × SYNC_S + PCIe bytes / PCIE_BYTES_PER_S

with two extensions, each stated where it is used: hand-written RawKernels add
their compute and memory phases (``serial``: they do not overlap them, see
:data:`RAW_KERNEL_FLOPS_FP32`), and the SMO subproblem kernel, one thread block
per problem stepping through a sequential loop, costs its latency per step
(:func:`_smo_subproblem_cost`).

This is a model, not a measurement.  Its constants come from SPEC §7's H100
measurements and public H100 figures (:data:`CONSTANTS` names the source of
each), and ``tests/test_gpu_model.py`` checks it against every SPEC §7 figure.
It does not model: overlap of host work with device work beyond the per-op max,
concurrency of independent kernels, L2-cache reuse between operations, clock
boost, the first call's compilation and handle creation (warm runs only).
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from gpuemu import dispatch  # noqa: E402

# =========================================================================== constants
#: name -> (value, unit, where it comes from).  Everything the model assumes is here.
CONSTANTS: dict[str, tuple[float, str, str]] = {
    "GEMM_FP32": (50.8e12, "FLOP/s",
                  "SPEC §7: FP32 GEMM measured on an H100 (cuBLAS)"),
    "GEMM_FP64": (63.9e12, "FLOP/s",
                  "issue 17's SPEC §7 figures: FP64 GEMM measured on an H100 (not in SPEC.md's text; "
                  "67 TFLOP/s FP64 tensor-core peak in NVIDIA's H100 SXM5 datasheet)"),
    "HBM_BYTES_PER_S": (2.97e12, "B/s",
                        "SPEC §7: device-to-device copy on an H100, bytes read + written per second "
                        "(bench/kernels.py counts a copy of N bytes as 2N; HBM3 peak 3.35 TB/s)"),
    "CUDA_CORE_FP32": (67e12, "FLOP/s",
                       "H100 SXM5 FP32 peak without tensor cores: 132 SMs x 128 lanes x 2 x 1.98 GHz "
                       "(NVIDIA datasheet; e.g. www.3eyedtech.com/gpgpu lists 67 TFLOPS FP32)"),
    "CUDA_CORE_FP64": (34e12, "FLOP/s", "H100 SXM5 FP64 peak without tensor cores (NVIDIA datasheet)"),
    "RAW_KERNEL_EFFICIENCY": (0.5, "x CUDA-core peak",
                              "the fallback of kernel_efficiency() for a kernel that "
                              "bench/results/kernel_static.json does not cover: hand-written kernels load every operand pair from shared memory: a 4x4 "
                              "register tile issues 8 shared loads per 16 FMAs and an SM serves 32 "
                              "words/clock against 128 FMA lanes, so half the FMA peak; checked against "
                              "the tiled RBF block figures of SPEC §7 (tests/test_gpu_model.py)"),
    "LAUNCH_ELEMENTWISE_S": (10e-6, "s",
                             "host cost of one CuPy elementwise call: cupy/cupy PR #3298 measured an "
                             "ElementwiseKernel call at 11 us CPU / 14-15 us GPU for 100-element arrays; "
                             "also used for RawKernel launches (CuPy packs the same arguments)"),
    "LAUNCH_REDUCTION_S": (25e-6, "s",
                           "host cost of one CuPy reduction: cupy/cupy PR #7265 measured a ReductionKernel "
                           "sum at 28 us CPU / 32 us GPU per call"),
    "LAUNCH_GEMM_S": (15e-6, "s",
                      "host cost of cupy.matmul (cuBLAS handle, workspace; cupy/cupy issue #8191 reports "
                      "matmul's CPU launch overhead above PyTorch's ~8 us)"),
    "LAUNCH_LINALG_S": (40e-6, "s",
                        "host cost of a cuSOLVER call through cupy.linalg (workspace size query, "
                        "allocation, several kernels); an assumption, no public figure found"),
    "VIEW_S": (2e-6, "s", "host cost of a CuPy view/empty (no kernel): Python + memory pool, assumption"),
    "SYNC_S": (20e-6, "s",
               "one device->host synchronisation: a synchronous cudaMemcpy of a few bytes costs 5-7 us of "
               "driver time (DualPath, arXiv 2602.21548), plus CuPy's .get()/.item() Python (~10 us, as a "
               "launch) and the idle device until the next launch; NVIDIA's Nsight Systems guide puts a "
               "small-kernel host round trip near 20 us"),
    "PCIE_BYTES_PER_S": (25e9, "B/s",
                         "host<->device over PCIe gen5 x16 from pageable NumPy memory (what CuPy's "
                         "asarray/get do): 64 GB/s theoretical, ~50 GB/s measured pinned (e.g. "
                         "procrastineto/GPU-PCIe-Test#3), pageable about half of pinned"),
    "H2D_CALL_S": (10e-6, "s", "host cost of one host->device copy call (cudaMemcpy 5-7 us + CuPy)"),
    "CLOCK_HZ": (1.755e9, "Hz", "H100 SXM5 sustained SM clock under load (1.98 GHz boost)"),
    "BARRIER_LEVEL_CYCLES": (40.0, "cycles",
                             "one level of a shared-memory tree reduction: __syncthreads + a shared "
                             "load/compare/store (shared-memory latency ~30 cycles on Hopper: Luo et al., "
                             "'Dissecting the NVIDIA Hopper Architecture', arXiv 2501.12084)"),
    "SHUFFLE_STEP_CYCLES": (30.0, "cycles",
                            "one step of a warp butterfly reduction: two dependent __shfl_xor_sync (value, "
                            "index) and a compare/select; shared-memory-class latency (~30 cycles, as "
                            "BARRIER_LEVEL_CYCLES' load), an assumption"),
    "GLOBAL_LOAD_CYCLES": (400.0, "cycles", "a dependent global-memory load on an H100 (~400 cycles to HBM)"),
    "EIGH_COLUMN_S": (12e-6, "s",
                      "syevd's tridiagonal reduction is a chain of dependent launches per column "
                      "(~4 device-side launches of ~3 us): an assumption"),
    "EIGH_FLOPS": (0.0, "FLOP/s",
                   "fitted: the rate of syevd's 9k^3 FLOPs that makes eigh of a 4000x4000 float32 matrix take "
                   "93 ms (SPEC §7 as quoted in issue 17) with EIGH_COLUMN_S; the only eigh figure there is, "
                   "so it is an input of the model, not a check"),
    "FACTOR_PANEL_S": (20e-6, "s",
                       "Cholesky/LU: one dependent panel step (several small kernels) per 64 columns; "
                       "an assumption"),
}
#: Another GPU as factors on the H100 SXM constants (name -> {constant: factor}, source).
DEVICES: dict[str, tuple[dict[str, float], str]] = {
    "H100 SXM": ({}, "the constants above"),
    "H100 PCIe": ({"HBM_BYTES_PER_S": 2.0 / 3.35, "GEMM_FP32": 51.0 / 67.0, "GEMM_FP64": 51.0 / 67.0,
                   "CUDA_CORE_FP32": 51.0 / 67.0, "CUDA_CORE_FP64": 26.0 / 34.0, "CLOCK_HZ": 1.755 / 1.98},
                  "NVIDIA H100 datasheet, PCIe against SXM5: 2.0 against 3.35 TB/s HBM, 51 against 67 TFLOP/s FP32 "
                  "(114 against 132 SMs), 26 against 34 TFLOP/s FP64, boost 1.755 against 1.98 GHz; GEMM rates "
                  "scaled as the FP32 peak"),
}

_EIGH_FIG_S, _EIGH_FIG_K = 93e-3, 4000
CONSTANTS["EIGH_FLOPS"] = (9.0 * _EIGH_FIG_K**3 / (_EIGH_FIG_S - _EIGH_FIG_K * CONSTANTS["EIGH_COLUMN_S"][0]),
                           *CONSTANTS["EIGH_FLOPS"][1:])


def const(name: str) -> float:
    return CONSTANTS[name][0]


KERNEL_STATIC = ROOT / "bench" / "results" / "kernel_static.json"


@functools.lru_cache(maxsize=1)
def _static_efficiencies() -> dict[tuple[str, int], float]:
    """(kernel family, bits) -> the ``fma_efficiency`` of its sm_90 record in
    bench/results/kernel_static.json (bench/kernel_static.py: the FFMA/DFMA share of the hot loop's
    issue time in the compiled SASS); empty when the file is missing."""
    try:
        rows = json.loads(KERNEL_STATIC.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for r in rows:
        if r.get("arch") == "sm_90" and r.get("fma_efficiency"):
            fam, bits = re.match(r"(.*)_f(32|64)$", r["kernel"]).groups()
            out[(fam, int(bits))] = float(r["fma_efficiency"])
    return out


def kernel_efficiency(family: str, bits: int) -> float:
    """Fraction of the CUDA-core peak a hand-written kernel's inner loop sustains: from the static
    analysis of its SASS when bench/results/kernel_static.json has it, else RAW_KERNEL_EFFICIENCY."""
    return _static_efficiencies().get((family, bits), const("RAW_KERNEL_EFFICIENCY"))


def _raw_rate(family: str, itemsize: int) -> str:
    """The rate class of a hand-written kernel: ``raw32:<family>`` / ``raw64:<family>``."""
    return f"raw{8 * itemsize}:{family}"


def rate_of(kind: str) -> float:
    """FLOP/s of a rate class: gemm32/gemm64 (cuBLAS), fp32/fp64 (CUDA cores), raw32/raw64
    (hand-written kernels; ``raw32:<family>`` at that kernel's :func:`kernel_efficiency`), eigh,
    factor (cuSOLVER factorizations at half the GEMM rate)."""
    if kind.startswith("raw") and ":" in kind:
        bits, family = kind[3:].split(":", 1)
        peak = const("CUDA_CORE_FP64") if bits == "64" else const("CUDA_CORE_FP32")
        return peak * kernel_efficiency(family, int(bits))
    return {"gemm32": const("GEMM_FP32"), "gemm64": const("GEMM_FP64"),
            "fp32": const("CUDA_CORE_FP32"), "fp64": const("CUDA_CORE_FP64"),
            "raw32": const("CUDA_CORE_FP32") * const("RAW_KERNEL_EFFICIENCY"),
            "raw64": const("CUDA_CORE_FP64") * const("RAW_KERNEL_EFFICIENCY"),
            "eigh": const("EIGH_FLOPS"), "factor32": 0.5 * const("GEMM_FP32"),
            "factor64": 0.5 * const("GEMM_FP64")}[kind]


# =========================================================================== operations
@dataclass
class Op:
    """One device operation with its cost inputs (see the module docstring for the time)."""

    kind: str
    name: str
    site: str = ""
    shapes: tuple = ()
    dtype: str = ""
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    rate: str = "fp32"
    launches: int = 1
    host: str = ""                  # the constant giving the host issue cost (LAUNCH_*_S, VIEW_S, ...)
    latency_s: float = 0.0          # device time that is latency, not throughput (SMO steps, eigh columns)
    serial: bool = False            # compute and memory phases add instead of overlapping
    sync: bool = False
    implicit_sync: str = ""         # why a CuPy call that looks asynchronous waits for the device
    pcie_bytes: float = 0.0
    kernel: dict = field(default_factory=dict)   # grid, block, shared_mem, args of a RawKernel launch

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def host_s(self) -> float:
        return const(self.host) if self.host else 0.0

    def device_s(self) -> float:
        return device_time(self.flops, self.bytes, self.latency_s, self.rate, self.serial)

    def time_s(self) -> float:
        """This op's term of Σ max(launch overhead, FLOPs/peak, bytes/bandwidth) (syncs and PCIe apart)."""
        return op_time(self.kind, self.host, self.device_s())


def device_time(flops: float, nbytes: float, latency_s: float, rate: str, serial: bool) -> float:
    """Device seconds of one op: latency + compute and memory time, overlapped (max) or added (serial)."""
    compute = flops / rate_of(rate) if flops else 0.0
    memory = nbytes / const("HBM_BYTES_PER_S")
    return latency_s + (compute + memory if serial else max(compute, memory))


def op_time(kind: str, host: str, device_s: float) -> float:
    """max(host issue cost, device time); syncs and transfers are costed apart (0 here)."""
    if kind in ("d2h", "sync"):
        return 0.0
    return max(const(host) if host else 0.0, device_s)


@dataclass
class Spec:
    """What the cost formulas need of an array: shape, dtype and the bytes it occupies."""

    shape: tuple
    dtype: np.dtype
    nbytes: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize


def spec(shape: Iterable[int], dtype: Any = np.float32) -> Spec:
    shape = tuple(int(s) for s in shape)
    dt = np.dtype(dtype)
    return Spec(shape, dt, int(np.prod(shape)) * dt.itemsize if shape else dt.itemsize)


def _spec_of(a: Any) -> Spec:
    """Spec of a fake device array; a broadcast view occupies only its non-zero-stride extent."""
    x = a._a
    touched = x.itemsize
    for s, st in zip(x.shape, x.strides):
        if st != 0:
            touched *= s
    return Spec(tuple(x.shape), x.dtype, int(touched) if x.size else 0)


def _is_device(a: Any) -> bool:
    return type(a).__module__.split(".")[0] in ("cupy", "cupyx") and hasattr(a, "_a")


def _walk(v: Any, out: list) -> list:
    if isinstance(v, (list, tuple)):
        for x in v:
            _walk(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            _walk(x, out)
    elif _is_device(v):
        out.append(v)
    return out


def _float_rate(dtype: np.dtype, gemm: bool = False) -> str:
    wide = np.dtype(dtype) == np.float64
    return ("gemm64" if wide else "gemm32") if gemm else ("fp64" if wide else "fp32")


# --------------------------------------------------------------------------- per-kind costs
_GEMM = {"matmul", "dot", "tensordot", "inner", "vdot", "outer", "kron"}
_SORTS = {"sort", "argsort", "lexsort", "partition", "argpartition", "unique", "msort"}
#: CuPy calls that read a device value on the host to size their output (cupy/_core/
#: _routines_indexing.pyx: ``count_nonzero = int(scan_index[-1])  # synchronize!``)
_SIZE_SYNC = {"nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract"}
_TRANSCENDENTAL = {"exp", "log", "tanh", "power", "sqrt", "expm1", "log1p", "sin", "cos", "float_power",
                   "true_divide", "divide", "reciprocal"}


def _matmul_flops(a: Spec, b: Spec) -> float:
    if len(a.shape) == 1 and len(b.shape) == 1:
        return 2.0 * a.shape[0]
    if len(a.shape) == 1:
        return 2.0 * b.size
    if len(b.shape) == 1:
        return 2.0 * a.size
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = max(int(np.prod(a.shape[:-2])) if len(a.shape) > 2 else 1,
                int(np.prod(b.shape[:-2])) if len(b.shape) > 2 else 1)
    return 2.0 * batch * m * n * k


def _einsum_flops(subscripts: str, ins: list[Spec]) -> float:
    lhs = subscripts.replace(" ", "").split("->")[0].split(",")
    dims: dict[str, int] = {}
    for sub, s in zip(lhs, ins):
        for ch, n in zip(sub, s.shape):
            dims[ch] = n
    return 2.0 * float(np.prod(list(dims.values()))) if dims else 0.0


def linalg_cost(name: str, ins: list[Spec]) -> tuple[float, float, str]:
    """(FLOPs, latency seconds, rate class) of a cupy.linalg / cupyx.scipy.linalg call.

    eigh (syevd, batch b): b·(k·EIGH_COLUMN_S + 9k³ FLOPs at EIGH_FLOPS);
    cholesky: k³/3, solve: 2k³/3 + 2k²m, inv: 2k³, each at half the GEMM rate plus
    FACTOR_PANEL_S per 64 columns; solve_triangular: k²m at half the GEMM rate.
    """
    a = ins[0] if ins else spec((1, 1))
    k = a.shape[-1] if a.shape else 1
    batch = int(np.prod(a.shape[:-2])) if len(a.shape) > 2 else 1
    wide = a.dtype == np.float64
    fac = "factor64" if wide else "factor32"
    panels = batch * math.ceil(k / 64) * const("FACTOR_PANEL_S")
    short = name.rsplit(".", 1)[-1]
    if short in ("eigh", "eigvalsh"):
        return batch * 9.0 * k**3, batch * k * const("EIGH_COLUMN_S"), "eigh"
    if short == "cholesky":
        return batch * k**3 / 3.0, panels, fac
    if short in ("solve", "lstsq"):
        m = ins[1].size // k if len(ins) > 1 and k else 1
        return batch * (2.0 * k**3 / 3.0 + 2.0 * k * k * m), panels, fac
    if short in ("inv", "pinv"):
        return batch * 2.0 * k**3, panels, fac
    if short in ("qr", "svd", "eig", "eigvals", "det", "slogdet", "matrix_rank"):
        return batch * 4.0 * k**3, panels * 2, fac
    if short == "solve_triangular":
        m = ins[1].size // k if len(ins) > 1 and k else 1
        return float(k) * k * m, 0.0, fac
    return float(a.size), 0.0, _float_rate(a.dtype)          # norm and the like: one pass


# =========================================================================== RawKernels
#: kernel family -> cost formula(grid, block, shared_mem, args as launched) -> Op fields.
#: Args are fake device arrays (their ``_a`` NumPy data readable after the launch) and scalars.
@contextlib.contextmanager
def on_device(name: str):
    """The constants of :data:`DEVICES` ``name`` for the duration (the H100 SXM ones restored after)."""
    factors = DEVICES[name][0]
    saved = {k: CONSTANTS[k] for k in factors}
    try:
        for k, f in factors.items():
            CONSTANTS[k] = (saved[k][0] * f, *saved[k][1:])
        yield
    finally:
        CONSTANTS.update(saved)


def first_call_compile_s(kernel_names: Iterable[str]) -> float:
    """Seconds NVRTC + ptxas take for the sources of these kernels on their first launch in a
    process (CuPy's on-disk kernel cache serves later processes): each source's sm_90
    ``source_compile_s`` in bench/results/kernel_static.json, measured there; 0 without it."""
    try:
        rows = json.loads(KERNEL_STATIC.read_text())
    except (OSError, ValueError):
        return 0.0
    per_kernel = {r["kernel"]: r.get("source_compile_s", 0.0) for r in rows if r.get("arch") == "sm_90"}
    modules = {}
    for name in kernel_names:
        src = _cuda_module_of(name)
        if src is not None and name in per_kernel:
            modules[src] = per_kernel[name]
    return float(sum(modules.values()))


def _cuda_module_of(kernel: str) -> str | None:
    from gpuksvm.array import cuda_sources as _cuda

    for src in _cuda.cuda_sources():
        if kernel in _cuda.signatures(src.stem):
            return src.stem
    return None


KERNEL_COSTS: dict[str, Callable[..., dict]] = {}


def _kernel_cost(family: str):
    def deco(fn):
        KERNEL_COSTS[family] = fn
        return fn
    return deco


def _epi_flops(ktype: int) -> float:
    """FP32-equivalent FLOPs of the kernel function per output (exp/pow/tanh as 4 each on the SFU):
    rbf: sub, fma, max, mul, exp; poly: fma + pow (log, mul, exp); sigmoid: fma + tanh; linear: 0."""
    return {0: 0.0, 1: 8.0, 2: 11.0, 3: 6.0}.get(int(ktype), 8.0)


@_kernel_cost("kernel_epilogue")
def _epilogue_cost(grid, block, shared, args) -> dict:
    """In-place pass over G (n×k): reads and writes n·k values, reads xn, zn; a streaming kernel,
    so memory and compute overlap (max form)."""
    G, xn, zn, n, k = args[0], args[1], args[2], int(args[3]), int(args[4])
    it = G._a.itemsize
    return {"flops": n * k * _epi_flops(args[6]), "bytes_read": (n * k + (n + k if xn is not None else 0)) * it,
            "bytes_written": n * k * it, "rate": _raw_rate("kernel_epilogue", it)}


@_kernel_cost("kernel_block_tiled")
def _tiled_cost(grid, block, shared, args) -> dict:
    """64×64 output tile per 16×16 block: 2·n·k·d FMA FLOPs + the kernel function per output at the
    raw-kernel rate, plus the n·k stores and one read of X and Z (tile re-reads hit L2); the tile is
    computed, then stored: the phases add (serial)."""
    n, k, d = int(args[5]), int(args[6]), int(args[7])
    it = args[0]._a.itemsize
    return {"flops": 2.0 * n * k * d + n * k * _epi_flops(args[9]), "bytes_read": (n + k) * (d + 1) * it,
            "bytes_written": n * k * it, "rate": _raw_rate("kernel_block_tiled", it), "serial": True}


@_kernel_cost("kernel_matvec")
def _matvec_cost(grid, block, shared, args) -> dict:
    """One thread per row streams Z and V through shared memory: n·k·(2d + kernel function + 2m)
    FLOPs (one FMA per feature: the RBF distance from the dot product and the norms) at the
    kernel's rate (its static efficiency covers the staging in its hot loop, so memory overlaps);
    reads X, Z, V once (Z, V re-reads per block hit L2), writes n·m."""
    n, k, d, m = (int(a) for a in args[4:8])
    it = args[0]._a.itemsize
    return {"flops": n * k * (2.0 * d + _epi_flops(args[8]) + 2.0 * m), "bytes_read": (n * d + k * (d + m)) * it,
            "bytes_written": n * m * it, "rate": _raw_rate("kernel_matvec", it)}


@_kernel_cost("cvm_partial")
def _cvm_partial_cost(grid, block, shared, args) -> dict:
    """Pass 1 of the CVM search, grid (candidate blocks, core slices): per candidate and core vector
    2d FLOPs (one FMA per feature), the kernel function and an FP64 FMA into the double accumulator
    (4 FP32 FLOPs: FP64 runs at half rate), at the kernel's rate; reads each candidate row once per
    slice (re-reads hit L2: counted once) and the core rows; writes one double per candidate and
    slice, with its squared norm, and the core rows and norms (rows of ``ld`` values: d padded to
    16-byte vectors); writes one double per candidate and slice.  A grid of fewer blocks than the
    H100's 132 SMs computes at that share of the peak."""
    d, ld, n_cand, m = int(args[1]), int(args[2]), int(args[5]), int(args[9])
    it = args[0]._a.itemsize
    blocks = int(grid[0]) * int(grid[1])
    flops = n_cand * m * (2.0 * d + _epi_flops(args[11]) + 4.0)
    return {"flops": _sm_share(flops, blocks), "bytes_read": n_cand * ((ld + 1) * it + 8) + m * (ld + 1) * it,
            "bytes_written": int(grid[1]) * n_cand * 8, "rate": _raw_rate("cvm_partial", it)}


@_kernel_cost("cvm_furthest")
@_kernel_cost("cvm_scores")
def _cvm_cost(grid, block, shared, args) -> dict:
    """Pass 2 of the CVM search: sums each candidate's slice partials (n_split doubles), its index,
    y, self term and scale; a 256-wide tree reduction per block (8 barrier levels, latency); the
    last block reduces the group minima.  ``cvm_scores`` (one more argument, ``scores``) also
    writes every candidate's s as a double."""
    n_split, n_cand = int(args[1]), int(args[3])
    it = 8 if args[6] is None else args[6]._a.itemsize
    levels = 2 * (int(np.log2(max(int(block[0]), 2))) + 1)
    latency = levels * const("BARRIER_LEVEL_CYCLES") / const("CLOCK_HZ")
    scores = args[14] if len(args) > 14 else None
    return {"flops": n_cand * (n_split + 4.0), "bytes_read": n_cand * (8 * n_split + 3 * it + 8),
            "bytes_written": int(grid[0]) * 16 + (n_cand * 8 if scores is not None else 0),
            "rate": _raw_rate("cvm_furthest", 8), "latency_s": latency}


@_kernel_cost("smo_subproblem")
def _smo_subproblem_cost(grid, block, shared, args) -> dict:
    """One thread block per problem runs its SMO steps one after another: a step is three block
    arg-max reductions (a warp butterfly of five shuffle steps; with more than one warp also two
    barriers and a second butterfly) and two dependent global loads (rows i and j of K_ww), so a
    step costs (3·(5·SHUFFLE_STEP_CYCLES [+ 2·BARRIER_LEVEL_CYCLES + 5·SHUFFLE_STEP_CYCLES])
    + 2·GLOBAL_LOAD_CYCLES) / CLOCK_HZ.
    The blocks run concurrently (P ≤ 132 SMs): the launch takes the longest problem's steps
    (``n_inner``, read from the kernel's output) plus one step's worth of setup."""
    n_inner = np.asarray(args[9]._a, dtype=np.int64)
    second = 2 * const("BARRIER_LEVEL_CYCLES") + 5 * const("SHUFFLE_STEP_CYCLES") if int(block[0]) > 32 else 0.0
    cyc = 3 * (5 * const("SHUFFLE_STEP_CYCLES") + second) + 2 * const("GLOBAL_LOAD_CYCLES")
    steps = int(n_inner.max()) + 1 if n_inner.size else 1
    waves = math.ceil(int(grid[0]) / 132)
    ws = int(args[6])
    it = args[0]._a.itemsize
    P = int(grid[0])
    return {"latency_s": waves * steps * cyc / const("CLOCK_HZ"), "bytes_read": P * ws * (ws + 4) * it,
            "bytes_written": P * ws * it, "flops": 0.0, "rate": _raw_rate("smo_subproblem", it)}


def _sm_share(nbytes: float, n_blocks: int) -> float:
    """Bytes as the model counts them for a grid of ``n_blocks`` blocks: fewer blocks than the
    H100's 132 SMs move their data through fewer SMs, at each SM's fair share of the bandwidth."""
    return nbytes * max(1.0, 132.0 / max(int(n_blocks), 1))


@_kernel_cost("smo_round_keys")
def _round_keys_cost(grid, block, shared, args) -> dict:
    """Grid (chunks, P): reads y, C, α, F and writes the two key arrays once (a streaming pass,
    max form), ~12 FLOPs per row, then a 256-wide tree reduction of five partials per block."""
    n1 = int(args[4])
    it = args[0]._a.itemsize
    P, chunks = int(grid[1]), int(grid[0])
    levels = int(np.log2(max(int(block[0]), 2))) + 1
    return {"flops": 12.0 * P * n1, "bytes_read": _sm_share(4 * P * n1 * it, P * chunks),
            "bytes_written": _sm_share(2 * P * n1 * it + 40 * P * chunks, P * chunks),
            "rate": _raw_rate("smo_round_keys", it),
            "latency_s": levels * const("BARRIER_LEVEL_CYCLES") / const("CLOCK_HZ")}


@_kernel_cost("smo_round_finish")
def _round_finish_cost(grid, block, shared, args) -> dict:
    """One block per problem: clears the kept rows' keys (a dependent read then write each) and
    reduces the chunk partials: latency of one global load round trip + a 256-wide tree."""
    P, n_chunks, n_keep = int(grid[0]), int(args[1]), int(args[3])
    it = args[4]._a.itemsize
    levels = int(np.log2(max(int(block[0]), 2))) + 1
    return {"bytes_read": _sm_share(P * (n_keep * (8 + 2 * it) + n_chunks * 40), P),
            "bytes_written": _sm_share(P * (n_keep * 2 * it + 32), P), "flops": 0.0,
            "rate": _raw_rate("smo_round_finish", it),
            "latency_s": (2 * const("GLOBAL_LOAD_CYCLES") + levels * const("BARRIER_LEVEL_CYCLES"))
            / const("CLOCK_HZ")}


def kernel_family(name: str) -> str:
    import re
    return re.sub(r"_f(32|64)$", "", name)


# =========================================================================== NumPy twins
def _kernel_of(code: Any, gamma: Any, coef0: Any, degree: Any):
    from gpuksvm.kernels.kernel import KERNEL_CODES, Kernel
    name = {v: k for k, v in KERNEL_CODES.items()}[int(code)]
    return Kernel(name, gamma=float(gamma), degree=float(degree), coef0=float(coef0))


def _host(a: Any):
    return None if a is None else a._a


def _twin_epilogue(grid, block, args) -> None:
    from gpuksvm.kernels.kernel import epilogue_host
    G, xn, zn, n, k = _host(args[0]), _host(args[1]), _host(args[2]), int(args[3]), int(args[4])
    epilogue_host(G[:n, :k], xn, zn, _kernel_of(*args[6:10]))


def _twin_tiled(grid, block, args) -> None:
    from gpuksvm.kernels.kernel import kernel_block
    X, Z, out = _host(args[0]), _host(args[1]), _host(args[4])
    n, k = int(args[5]), int(args[6])
    out[:n, :k] = kernel_block(X[:n], Z[:k], _kernel_of(*args[9:13]), dtype=X.dtype)


def _twin_matvec(grid, block, args) -> None:
    from gpuksvm.kernels.kernel import kernel_matvec
    X, Z, V, out = (_host(a) for a in args[:4])
    out[...] = kernel_matvec(X, Z, V, _kernel_of(*args[8:12]), dtype=X.dtype, method="blocked")


#: candidate rows per block of the CVM twin (bounds its kernel block at rows × core vectors)
_TWIN_CVM_ROWS = 1 << 15


def _twin_cvm_partial(grid, block, args) -> None:
    """``cvm_partial``: per core slice (grid y), every candidate's Σ coef_i k(z_i, x) over it."""
    from gpuksvm.solvers.cvm.meb import candidate_scores
    X, d, cand, n_cand = _host(args[0]), int(args[1]), _host(args[4]), int(args[5])
    Z, coef, m, per = _host(args[6]), _host(args[8]), int(args[9]), int(args[10])
    X, Z = X[:, :d], Z[:, :d]   # rows of ld values, zero beyond d
    kern = _kernel_of(*args[11:15])
    partial = _host(args[15]).reshape(int(grid[1]), n_cand)
    rows = np.arange(n_cand) if cand is None else cand[:n_cand].astype(np.int64)
    for p in range(int(grid[1])):
        z0, z1 = p * per, min(m, (p + 1) * per)
        for lo in range(0, rows.size, _TWIN_CVM_ROWS):
            r = rows[lo:lo + _TWIN_CVM_ROWS]
            partial[p, lo:lo + r.size] = candidate_scores(X[r], Z[z0:z1], coef[z0:z1], kern) if z1 > z0 else 0.0


def _twin_cvm(grid, block, args) -> None:
    """``cvm_furthest`` and ``cvm_scores`` (its 15th argument, ``scores``, gets every candidate's s)."""
    partial, n_split, cand, n_cand, group = _host(args[0]), int(args[1]), _host(args[2]), int(args[3]), int(args[4])
    b, y, self_term, xscale = float(args[5]), _host(args[6]), _host(args[7]), _host(args[8])
    part_s, part_i, counter, out_s, out_i = (_host(a) for a in args[9:14])
    scores = _host(args[14]) if len(args) > 14 else None
    rows = np.arange(n_cand) if cand is None else cand[:n_cand].astype(np.int64)
    s = partial[:n_split * n_cand].reshape(n_split, n_cand).sum(axis=0)
    if xscale is not None:
        s *= xscale[rows]
    s += b
    if y is not None:
        s *= y[rows]
    if self_term is not None:
        s += self_term[rows]
    if scores is not None:
        scores[:n_cand] = s
    n_groups = int(grid[0])
    for g in range(n_groups):
        lo, hi = g * group, min((g + 1) * group, n_cand)
        if lo >= hi:
            part_s[g], part_i[g] = np.inf, -1
            continue
        sg, rg = s[lo:hi], rows[lo:hi]
        best = sg.min()
        part_s[g], part_i[g] = best, rg[sg == best].min()
    if counter is not None:
        best = part_s[:n_groups].min()
        out_s[0], out_i[0] = best, part_i[:n_groups][part_s[:n_groups] == best].min()


def _twin_smo(grid, block, args) -> None:
    from gpuksvm.solvers.smo.working_set import solve_subproblems_host
    Kww, yw, Cw, alpha, Fw, active = (_host(a) for a in args[:6])
    a, n_in, g0 = solve_subproblems_host(Kww, yw, Cw, alpha, Fw, active.astype(bool), float(args[7]),
                                         int(args[8]))
    alpha[...] = a
    _host(args[9])[...] = n_in
    _host(args[10])[...] = g0


def _twin_round_keys(grid, block, args) -> None:
    y, C, a, F = (_host(v) for v in args[:4])
    chunk = int(args[5])
    su, sl, part = _host(args[6]), _host(args[7]), _host(args[8])
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y < 0) & (a < C)) | ((y > 0) & (a > 0))
    su[...] = np.where(up, -F, np.inf)
    sl[...] = np.where(low, F, np.inf)
    term = a.astype(np.float64) * (-y.astype(np.float64) * F - 1.0)
    for c in range(int(grid[0])):
        sel = slice(c * chunk, (c + 1) * chunk)
        part[:, c, 0] = np.where(up[:, sel], F[:, sel], -np.inf).max(axis=1)
        part[:, c, 1] = np.where(low[:, sel], F[:, sel], np.inf).min(axis=1)
        part[:, c, 2] = term[:, sel].sum(axis=1)
        part[:, c, 3] = np.isfinite(su[:, sel]).sum(axis=1)
        part[:, c, 4] = np.isfinite(sl[:, sel]).sum(axis=1)


def _twin_round_finish(grid, block, args) -> None:
    keep, n_keep = _host(args[2]), int(args[3])
    su, sl, part, stats = _host(args[4]), _host(args[5]), _host(args[6]), _host(args[7])
    dec = np.zeros((su.shape[0], 2))
    if n_keep:
        rows = np.arange(su.shape[0])[:, None]
        dec[:, 0] = np.isfinite(su[rows, keep]).sum(axis=1)
        dec[:, 1] = np.isfinite(sl[rows, keep]).sum(axis=1)
        su[rows, keep] = np.inf
        sl[rows, keep] = np.inf
    t = su.dtype.type
    stats[:, 0] = t(part[:, :, 0].max(axis=1)) - t(part[:, :, 1].min(axis=1))
    stats[:, 1] = 0.5 * part[:, :, 2].sum(axis=1)
    stats[:, 2] = part[:, :, 3].sum(axis=1) - dec[:, 0]
    stats[:, 3] = part[:, :, 4].sum(axis=1) - dec[:, 1]


#: kernel family -> NumPy twin run in place of the CPU emulator when tracing at scale
TWINS = {"kernel_epilogue": _twin_epilogue, "kernel_block_tiled": _twin_tiled, "kernel_matvec": _twin_matvec,
         "cvm_partial": _twin_cvm_partial, "cvm_furthest": _twin_cvm, "cvm_scores": _twin_cvm,
         "smo_subproblem": _twin_smo, "smo_round_keys": _twin_round_keys, "smo_round_finish": _twin_round_finish}


def twin_substitutes() -> dict[str, Callable]:
    """{kernel name: twin} for every ``extern "C"`` kernel whose family has a twin here."""
    from gpuksvm.array import cuda_sources as _cuda
    out = {}
    for src in _cuda.cuda_sources():
        for name in _cuda.signatures(src.stem):
            fam = kernel_family(name)
            if fam in TWINS:
                out[name] = TWINS[fam]
    return out


# =========================================================================== events -> ops
_PKG = str(ROOT / "gpuksvm")


def _call_site() -> str:
    """file:line (function) of the innermost gpuksvm frame that made the current device call."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if fn.startswith(_PKG) and not fn.endswith(("_cuda.py", "backend.py")):
            return f"{Path(fn).relative_to(ROOT)}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return "(outside gpuksvm)"


def _key_parts(key: Any) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _has_bool_mask(key: Any) -> bool:
    return any((_is_device(k) and k._a.dtype == np.bool_) or (isinstance(k, np.ndarray) and k.dtype == np.bool_)
               for k in _key_parts(key))


def _is_basic(key: Any) -> bool:
    """Only ints, slices, None and Ellipsis: CuPy makes a view (no kernel)."""
    return all(isinstance(k, (int, np.integer, slice, type(None), type(Ellipsis))) and not isinstance(k, bool)
               for k in _key_parts(key))


def _host_key(key: Any) -> Any:
    if isinstance(key, tuple):
        return tuple(_host_key(k) for k in key)
    return key._a if _is_device(key) else key


def _shares(result: Any, ins: list) -> bool:
    if not _is_device(result):
        return False
    r = result._a
    return any(np.shares_memory(r, a._a) for a in ins if a._a.size and r.size) if r.size else True


def op_from_event(ev: dispatch.Event, site: str = "") -> Op:
    """The :class:`Op` of one dispatched fake-CuPy event."""
    ins = _walk(ev.args, []) + _walk({k: v for k, v in ev.kwargs.items() if k != "out"}, [])
    outs = _walk(ev.result, []) if ev.kind not in ("d2h", "sync") else []
    in_specs = [_spec_of(a) for a in ins]
    out_specs = [_spec_of(a) for a in outs]
    dt = (out_specs or in_specs or [spec((1,))])[0].dtype
    short = ev.name.rsplit(".", 1)[-1]
    op = Op(ev.kind, ev.name, site, tuple(s.shape for s in in_specs + out_specs), str(dt))
    rd = float(sum(s.nbytes for s in in_specs))
    wr = float(sum(s.nbytes for s in out_specs))
    if ev.kind == "kernel":
        fam = kernel_family(ev.name)
        cost = KERNEL_COSTS.get(fam)
        if cost is None:
            raise KeyError(f"no cost formula for kernel {ev.name!r}: add one to bench/_gpu_cost.py")
        for k, v in cost(ev.info["grid"], ev.info["block"], ev.info.get("shared_mem", 0), ev.args).items():
            setattr(op, k, v)
        op.host = "LAUNCH_ELEMENTWISE_S"
        op.kernel = {"grid": list(ev.info["grid"]), "block": list(ev.info["block"]),
                     "shared_mem": int(ev.info.get("shared_mem", 0)),
                     "substituted": bool(ev.info.get("substituted", False)),
                     "args": [list(a.shape) if _is_device(a) else (None if a is None else float(a))
                              for a in ev.args]}
        return op
    if ev.kind in ("d2h", "sync"):
        op.sync, op.launches = True, 0
        op.pcie_bytes = float(ev.info.get("nbytes", 0))
        return op
    if ev.kind == "h2d":
        op.launches, op.host = 0, "H2D_CALL_S"
        op.pcie_bytes = float(ev.info.get("nbytes", 0))
        return op
    op.bytes_read, op.bytes_written = rd, wr
    if ev.kind == "index":
        key = ev.args[1] if len(ev.args) > 1 else ()
        if ev.name == "getitem" and _is_basic(key):
            op.launches, op.host, op.bytes_read, op.bytes_written = 0, "VIEW_S", 0.0, 0.0
            return op
        if ev.name == "setitem":
            region = ev.args[0]._a[_host_key(key)]
            op.bytes_written = float(np.asarray(region).nbytes)
            op.bytes_read = float(sum(s.nbytes for s in in_specs[1:]))
        if _has_bool_mask(key):
            op.implicit_sync = "boolean mask index (CuPy counts the True entries on the host)"
            op.launches = 3          # scan, count, gather/scatter
        op.host = "LAUNCH_ELEMENTWISE_S"
        op.rate = _float_rate(dt)
        return op
    if ev.kind == "alloc":
        if short in ("empty", "empty_like"):
            op.launches, op.host, op.bytes_read, op.bytes_written = 0, "VIEW_S", 0.0, 0.0
        else:
            op.host = "LAUNCH_ELEMENTWISE_S"
        return op
    if ev.kind == "linalg" or ev.name.startswith("cupyx.scipy.linalg"):
        flops, latency, rate = linalg_cost(ev.name, in_specs)
        op.flops, op.latency_s, op.rate = flops, latency, rate
        op.host = "LAUNCH_LINALG_S"
        return op
    if short in _GEMM and len(in_specs) >= 2:
        op.flops = _matmul_flops(in_specs[0], in_specs[1])
        op.rate = _float_rate(dt, gemm=True)
        op.host = "LAUNCH_GEMM_S"
        return op
    if short == "einsum":
        sub = ev.args[0] if ev.args and isinstance(ev.args[0], str) else ""
        op.flops = _einsum_flops(sub, in_specs) if sub else rd
        op.rate = _float_rate(dt)
        op.host = "LAUNCH_REDUCTION_S"
        return op
    if short in _SORTS:
        # radix sort: ~4 passes reading and writing keys and indices
        op.bytes_read, op.bytes_written = 4 * (rd + wr), 4 * (rd + wr)
        op.host = "LAUNCH_REDUCTION_S"
        op.launches = 4
    elif ev.kind == "reduction":
        op.flops = sum(s.size for s in in_specs)
        op.host = "LAUNCH_REDUCTION_S"
    elif ev.kind in ("method", "function") and _shares(ev.result, ins):
        op.launches, op.host, op.bytes_read, op.bytes_written = 0, "VIEW_S", 0.0, 0.0
        return op
    else:
        n_out = sum(s.size for s in out_specs)
        op.flops = n_out * (4.0 if short in _TRANSCENDENTAL else 1.0)
        op.host = "LAUNCH_ELEMENTWISE_S"
    if short in _SIZE_SYNC or (short == "where" and len(ev.args) == 1):
        op.implicit_sync = f"cupy.{short} sizes its output from a device count"
    op.rate = _float_rate(dt)
    return op


# =========================================================================== the tracer
class Tracer:
    """Dispatch hook that turns every device operation into an :class:`Op` and aggregates them.

    Ops are grouped by (call site, kind, name, shapes, dtype): a group keeps the count and the
    summed cost terms, so long traces stay small.  ``with Tracer() as t: model.fit(...)``;
    ``use_twins=True`` runs RawKernels as their NumPy twins (:data:`TWINS`) instead of the CPU
    emulator, for traces at the papers' scale.
    """

    def __init__(self, use_twins: bool = False) -> None:
        self.use_twins = use_twins
        self.groups: dict[tuple, dict] = {}
        self.n_events = 0
        self.wall_s = 0.0
        self.emulation_s = 0.0        # host seconds the fake CuPy spent running the operations
        self.hook_s = 0.0             # ... and this tracer spent recording them

    def __call__(self, ev: dispatch.Event) -> None:
        t0 = time.perf_counter()
        self.emulation_s += ev.elapsed_s
        self.add(op_from_event(ev, _call_site()))
        self.hook_s += time.perf_counter() - t0

    @property
    def host_work_s(self) -> float:
        """Seconds the traced code spent on the host outside device operations (its Python, its
        NumPy work), measured on this machine: not part of the predicted device time."""
        return max(self.wall_s - self.emulation_s - self.hook_s, 0.0)

    def add(self, op: Op, count: int = 1) -> None:
        self.n_events += count
        key = (op.site, op.kind, op.name, op.shapes, op.dtype)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = {"site": op.site, "kind": op.kind, "name": op.name,
                                    "shapes": [list(s) for s in op.shapes], "dtype": op.dtype,
                                    "host": op.host, "rate": op.rate, "serial": op.serial,
                                    "count": 0, "launches": 0, "syncs": 0, "implicit_syncs": 0,
                                    "flops": 0.0, "bytes": 0.0, "latency_s": 0.0, "pcie_bytes": 0.0,
                                    "why_sync": op.implicit_sync, "kernel": op.kernel or None}
        g["count"] += count
        g["launches"] += op.launches * count
        g["syncs"] += (int(op.sync) + int(bool(op.implicit_sync))) * count
        g["implicit_syncs"] += int(bool(op.implicit_sync)) * count
        g["flops"] += op.flops * count
        g["bytes"] += op.bytes * count
        g["latency_s"] += op.latency_s * count
        g["pcie_bytes"] += op.pcie_bytes * count

    def __enter__(self) -> "Tracer":
        self._cm = [dispatch.hooked(self)]
        if self.use_twins:
            self._cm.append(dispatch.substituted(twin_substitutes()))
        for cm in self._cm:
            cm.__enter__()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s += time.perf_counter() - self._t0
        for cm in reversed(self._cm):
            cm.__exit__(*exc)

    def summary(self) -> dict:
        return {**summarize(list(self.groups.values())), "host_work_s": self.host_work_s}


def group_time(g: dict) -> tuple[float, float, float]:
    """(op seconds, device seconds, host seconds) of an op group with the current constants.

    The ops of a group have the same shapes, so the same FLOPs and bytes; a data-dependent
    latency (SMO steps) is averaged over the group."""
    n = g["count"]
    if not n:
        return 0.0, 0.0, 0.0
    dev = device_time(g["flops"] / n, g["bytes"] / n, g["latency_s"] / n, g["rate"], g["serial"])
    host = const(g["host"]) if g["host"] else 0.0
    if g["kind"] in ("d2h", "sync"):
        return 0.0, 0.0, 0.0
    return n * op_time(g["kind"], g["host"], dev), n * dev, n * host


def summarize(groups: list[dict], top: int = 5) -> dict:
    """Totals of a trace's op groups and its predicted H100 time (see the module docstring):
    ops (device operations, views included; syncs apart), launches (device kernels: CuPy's and
    RawKernels), raw_kernel_launches, syncs (explicit and implicit), PCIe bytes; the predicted
    seconds split into ops, syncs and PCIe, and how much of the op time is launch-bound (host
    issue cost ≥ device time) and the host issue seconds summed over the ops (``host_issue_s``); the
    ``top`` most expensive ops by call site and the sync sites.  Also ``predicted_pcie_s`` (the same
    trace with the H100 PCIe constants, :data:`DEVICES`) and ``first_call_compile_s`` (the NVRTC
    compile of the kernel sources the trace launches, paid once per process; not in the
    prediction)."""
    out = _summarize(groups, top)
    with on_device("H100 PCIe"):
        out["predicted_pcie_s"] = _summarize(groups, top)["predicted_s"]
    out["first_call_compile_s"] = first_call_compile_s({g["name"] for g in groups if g["kind"] == "kernel"})
    return out


def _summarize(groups: list[dict], top: int) -> dict:
    ops = sum(g["count"] for g in groups if g["kind"] not in ("d2h", "sync"))
    launches = sum(g["launches"] for g in groups)
    raw = sum(g["launches"] for g in groups if g["kind"] == "kernel")
    syncs = sum(g["syncs"] for g in groups)
    pcie = sum(g["pcie_bytes"] for g in groups)
    op_s = launch_bound = host_issue = 0.0
    by_site: dict[str, dict] = defaultdict(lambda: {"count": 0, "time_s": 0.0, "syncs": 0})
    sync_sites: dict[str, int] = defaultdict(int)
    for g in groups:
        t, dev, host = group_time(g)
        op_s += t
        host_issue += host
        if host >= dev:
            launch_bound += t
        s = by_site[f"{g['name']} @ {g['site']}"]
        s["count"] += g["count"]
        s["time_s"] += t + g["syncs"] * const("SYNC_S") + g["pcie_bytes"] / const("PCIE_BYTES_PER_S")
        s["syncs"] += g["syncs"]
        if g["syncs"]:
            sync_sites[f"{g['name']} @ {g['site']}"] += g["syncs"]
    sync_s = syncs * const("SYNC_S")
    pcie_s = pcie / const("PCIE_BYTES_PER_S")
    top_ops = sorted(by_site.items(), key=lambda kv: -kv[1]["time_s"])[:top]
    return {"ops": ops, "launches": launches, "raw_kernel_launches": raw, "syncs": syncs,
            "pcie_bytes": pcie, "op_s": op_s, "sync_s": sync_s, "pcie_s": pcie_s,
            "predicted_s": op_s + sync_s + pcie_s, "launch_bound_s": launch_bound, "host_issue_s": host_issue,
            "top_ops": [{"op": k, "count": v["count"], "time_s": v["time_s"], "syncs": v["syncs"]}
                        for k, v in top_ops],
            "sync_sites": dict(sorted(sync_sites.items(), key=lambda kv: -kv[1]))}
