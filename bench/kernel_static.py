"""Instruction-level analysis of every CUDA kernel of gpuksvm, without a GPU.

For every ``extern "C"`` kernel of ``kernels_cuda/*.cu`` on sm_80 (A100) and sm_90 (H100):

1. NVRTC compiles the source to a cubin with the options CuPy uses
   (:func:`gpuksvm._cuda.nvrtc_options` + CuPy's own, :mod:`gpuemu.nvrtc`), ptxas ``-v``
   reporting registers, stack frame, spills and static shared memory;
2. ``cuobjdump -sass`` (pip packages ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm``,
   installed on first use into a cache folder, :func:`sass_tools`) disassembles it;
3. the **hot loop** is found in the SASS: of the loops (a backward branch and its target), the
   one with the most FFMA + DFMA instructions (ties: the most instructions; a kernel without
   floating-point multiply-adds: the loop with the most instructions).  Its instructions are
   counted by class (``ffma``, ``dfma``, ``lds``, ``sts``, ``ldg``, ``stg``, ``int``, ``bar``, ...;
   loads and stores also by width).  These are static counts of the loop body: every path of
   the body counted once (a loop nested in it once, not per iteration; a subroutine it calls,
   such as ptxas's out-of-line 64-bit division, once per call);
4. the theoretical occupancy at the library's largest launch block (the launch sites run with a
   recorder, ``tests/test_kernel_resources.py``) by the CUDA occupancy rules (:func:`occupancy`);
5. ``fma_efficiency``: the share of the hot loop's issue time (on its busiest pipe) that is
   FFMA (float kernels) or DFMA (double kernels) -- the fraction of the CUDA-core peak the loop
   sustains with its latency hidden; ``bench/_gpu_cost.py`` uses it per kernel;
6. a bound and a roofline fraction per shape: the hot loop's issue time on the busiest pipe
   (:func:`loop_cycles`) times the number of warp iterations of the shape
   (:data:`SHAPES`), against the time the shape's useful FLOPs and compulsory bytes take at
   the H100's peaks.  These are **predictions** of a model, not measurements.

    python bench/kernel_static.py            # writes bench/results/kernel_static.json, prints the table

Compiled output (ptxas log + SASS) is cached under ``~/.cache/gpuksvm/kernel-static``
(``$GPUKSVM_KERNEL_STATIC_CACHE``), keyed by the sources, the options and the tool versions.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from gpuemu import nvrtc  # noqa: E402
from gpuksvm.array import cuda_sources as _cuda  # noqa: E402
from gpuksvm.solvers.cvm.scan import candidate_blocks, core_split  # noqa: E402

ARCHS = (80, 90)
RESULTS = ROOT / "bench" / "results" / "kernel_static.json"

# =========================================================================== tools
TOOL_PACKAGES = ("nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm")


class ToolsUnavailable(RuntimeError):
    """cuobjdump / nvdisasm are not on PATH, not in the cache, and could not be installed."""


def cache_root() -> Path:
    env = os.environ.get("GPUKSVM_KERNEL_STATIC_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gpuksvm" / "kernel-static"


def _tool_dir(folder: Path) -> Path | None:
    for cand in sorted(folder.glob("nvidia/*/bin")) + [folder / "bin", folder]:
        if (cand / "cuobjdump").is_file() and (cand / "nvdisasm").is_file():
            return cand
    return None


def sass_tools(install: bool = True) -> Path:
    """The folder holding ``cuobjdump`` and ``nvdisasm`` (cuobjdump runs nvdisasm from PATH).

    Looked for in ``$GPUKSVM_SASS_TOOLS``, on PATH, then in the cache folder; when missing and
    ``install`` is true, the pip packages of NVRTC's major version are installed there
    (``pip install --no-deps --target``).  Raises :class:`ToolsUnavailable` with the reason."""
    env = os.environ.get("GPUKSVM_SASS_TOOLS")
    if env:
        found = _tool_dir(Path(env))
        if found is None:
            raise ToolsUnavailable(f"GPUKSVM_SASS_TOOLS={env} holds no cuobjdump + nvdisasm")
        return found
    on_path = shutil.which("cuobjdump")
    if on_path and shutil.which("nvdisasm"):
        return Path(on_path).parent
    major = nvrtc.version()[0]
    target = cache_root() / f"tools-cu{major}"
    found = _tool_dir(target)
    if found is not None:
        return found
    if not install or os.environ.get("GPUKSVM_SKIP_CUDA_INSTALL") == "1":
        raise ToolsUnavailable(f"cuobjdump/nvdisasm not found (PATH, {target}) and installing is off")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tools-"))
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
           "--target", str(tmp)] + [f"{p}=={major}.*" for p in TOOL_PACKAGES]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ToolsUnavailable(f"pip install of {', '.join(TOOL_PACKAGES)} failed: {exc}") from exc
    if proc.returncode != 0 or _tool_dir(tmp) is None:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ToolsUnavailable(f"pip install of {', '.join(TOOL_PACKAGES)} (=={major}.*) failed: {tail[0]}")
    try:
        tmp.rename(target)
    except OSError:   # another process installed it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    found = _tool_dir(target)
    if found is None:
        raise ToolsUnavailable(f"installed {TOOL_PACKAGES} but found no cuobjdump/nvdisasm in {target}")
    return found


def disassemble(cubin: bytes, tools: Path) -> str:
    """``cuobjdump -sass`` of a cubin (nvdisasm found through PATH)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
        proc = subprocess.run([str(tools / "cuobjdump"), "-sass", str(path)], capture_output=True, text=True,
                              env=env, timeout=300)
    if proc.returncode != 0:
        raise ToolsUnavailable(f"cuobjdump -sass failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


# =========================================================================== compile (cached)
def _compile_key(src_dir: Path, arch: int, tools: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(src_dir.glob("*.cu")) + sorted(src_dir.glob("*.cuh")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update(repr((nvrtc.cupy_options(_cuda.nvrtc_options(src_dir), arch), nvrtc.version(),
                   sorted(q.name for q in tools.iterdir()), (tools / "cuobjdump").stat().st_size)).encode())
    return h.hexdigest()[:24]


def compiled(src: Path, arch: int, tools: Path) -> tuple[str, str, float]:
    """(ptxas ``-v`` log, SASS text, NVRTC's wall seconds for the source on this machine) of one
    source for ``sm_<arch>``; cached on disk (the seconds are those of the run that filled it)."""
    src_dir = src.parent
    key = _compile_key(src_dir, arch, tools)
    path = cache_root() / "sass" / f"{src.stem}-sm_{arch}-{key}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        if "compile_s" in data:
            return data["log"], data["sass"], data["compile_s"]
    options = nvrtc.cupy_options(_cuda.nvrtc_options(src_dir), arch) + ["--ptxas-options=-v"]
    t0 = time.perf_counter()
    res = nvrtc.compile_source(src.read_text(), src.name, options)
    seconds = time.perf_counter() - t0
    if not res.ok:
        raise RuntimeError(f"NVRTC sm_{arch} {src.name}:\n{res.log}")
    sass = disassemble(res.binary, tools)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"log": res.log, "sass": sass, "compile_s": seconds}))
    tmp.replace(path)
    return res.log, sass, seconds


# =========================================================================== SASS parsing
_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


@dataclass
class Instr:
    addr: int
    opcode: str      # with its modifiers: LDS.U.128
    operands: str

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]


def parse_sass(text: str) -> dict[str, list[Instr]]:
    """Function name -> its instructions, from ``cuobjdump -sass`` text."""
    out: dict[str, list[Instr]] = {}
    cur = None
    for line in text.splitlines():
        if m := _FUNC.match(line):
            cur = out.setdefault(m.group(1), [])
        elif cur is not None and (m := _INSTR.match(line)):
            cur.append(Instr(int(m.group(1), 16), m.group(3), m.group(4).strip()))
    return out


_TARGET = re.compile(r"0x([0-9a-f]+)\s*$")


def loops(instrs: list[Instr]) -> list[tuple[int, int]]:
    """(first, last) instruction index of every loop: a branch to an address at or before itself."""
    index = {ins.addr: i for i, ins in enumerate(instrs)}
    out = []
    for i, ins in enumerate(instrs):
        if ins.base in ("BRA", "JMP") and (m := _TARGET.search(ins.operands)):
            target = int(m.group(1), 16)
            if target <= ins.addr and target in index:
                out.append((index[target], i))
    return out


INT_OPS = {"IMAD", "IADD3", "IADD", "IADD32I", "LEA", "LOP3", "LOP", "SHF", "SHL", "SHR", "ISETP", "IMNMX",
           "VIMNMX", "IABS", "IMUL", "POPC", "FLO", "BREV", "PRMT", "SGXT", "BMSK", "ISCADD", "IMAD32I", "I2I"}
_WIDTH = re.compile(r"\.(8|16|32|64|128|U8|S8|U16|S16)\b")


def width_bits(opcode: str) -> int:
    """Access width of a load/store opcode in bits (32 when the opcode names none)."""
    for mod in opcode.split(".")[1:]:
        if mod in ("64", "128"):
            return int(mod)
        if mod in ("U8", "S8"):
            return 8
        if mod in ("U16", "S16"):
            return 16
    return 32


def classify(op: Instr) -> str:
    b = op.base
    if b == "FFMA":
        return "ffma"
    if b == "DFMA":
        return "dfma"
    if b in ("FADD", "FMUL", "FMNMX", "FSETP", "FSEL", "FCHK", "FRND", "HFMA2"):
        return "fp32"
    if b in ("DADD", "DMUL", "DSETP", "DMNMX"):
        return "fp64"
    if b == "MUFU":
        return "mufu"
    if b in ("LDS", "LDSM"):
        return "lds"
    if b == "STS":
        return "sts"
    if b in ("LDG", "LD"):
        return "ldg"
    if b in ("STG", "ST"):
        return "stg"
    if b in ("LDL", "STL"):
        return "local"
    if b in ("BAR", "WARPSYNC"):
        return "bar"
    if b in ("SHFL", "VOTE", "REDUX", "MATCH"):
        return "warp"
    if b in INT_OPS:
        return "int"
    if b.startswith("U") or b in ("S2UR", "R2UR"):
        return "uniform"
    if b in ("ATOM", "ATOMG", "RED", "ATOMS"):
        return "atomic"
    if b in ("BRA", "EXIT", "BSYNC", "BSSY", "CALL", "RET", "JMP", "NOP", "BPT", "YIELD"):
        return "control"
    if b in ("MOV", "SEL", "S2R", "CS2R", "P2R", "R2P", "PLOP3", "MOV32I", "LDC", "I2F", "F2I", "F2F", "I2FP",
             "F2IP", "DEPBAR", "MEMBAR", "ERRBAR", "CCTL", "FENCE"):
        return "move"
    return "other"


CLASSES = ("ffma", "dfma", "fp32", "fp64", "mufu", "lds", "sts", "ldg", "stg", "local", "int", "bar", "warp",
           "move", "uniform", "atomic", "control", "other")


def mix(instrs: list[Instr]) -> dict:
    """Counts by class, and the widths of the memory instructions: {"lds_widths": {"128": 2}, ...}."""
    counts = Counter(classify(i) for i in instrs)
    out: dict = {c: counts.get(c, 0) for c in CLASSES}
    out["total"] = len(instrs)
    for cls in ("lds", "sts", "ldg", "stg"):
        widths = Counter(str(width_bits(i.opcode)) for i in instrs if classify(i) == cls)
        out[f"{cls}_widths"] = dict(sorted(widths.items(), key=lambda kv: int(kv[0])))
    return out


def fma_loops(instrs: list[Instr]) -> list[tuple[int, int]]:
    """The innermost loops that multiply-add (no loop nested in them has an FFMA/DFMA), the one
    with the most FFMA + DFMA first."""
    spans = loops(instrs)

    def fma(lo: int, hi: int) -> int:
        return sum(1 for i in instrs[lo:hi + 1] if i.base in ("FFMA", "DFMA"))

    def nested(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
        return inner != outer and outer[0] <= inner[0] and inner[1] <= outer[1]

    inner = [s for s in spans if fma(*s) and not any(nested(t, s) and fma(*t) for t in spans)]
    return sorted(inner, key=lambda s: (fma(*s), s[1] - s[0]), reverse=True)


def remainder_loop(instrs: list[Instr]) -> dict | None:
    """The mix of a remainder loop: after the hot loop, the innermost multiply-add loop with the most
    FFMA + DFMA that reads shared memory and has no MUFU (a feature loop, not a kernel-value loop);
    None when there is none."""
    for lo, hi in fma_loops(instrs)[1:]:
        m = mix(instrs[lo:hi + 1])
        if m["lds"] and not m["mufu"]:
            return m
    return None


def hot_loop(instrs: list[Instr]) -> tuple[list[Instr], tuple[int, int] | None]:
    """The hot loop: the first of :func:`fma_loops`; without such a loop, the loop with the most
    instructions; the whole function when it has no loop.  Returns its body (with the subroutines
    it calls) and address span."""
    pool = fma_loops(instrs) or sorted(loops(instrs), key=lambda s: s[1] - s[0], reverse=True)
    if not pool:
        return instrs, None
    lo, hi = pool[0]
    return with_callees(instrs, instrs[lo:hi + 1]), (instrs[lo].addr, instrs[hi].addr)


def with_callees(instrs: list[Instr], body: list[Instr]) -> list[Instr]:
    """``body`` plus, per CALL in it, the called subroutine of the same function (from its address
    to its RET): ptxas moves a 64-bit division or an accurate pow out of line, and its instructions
    run once per call.  A CALL to the instruction just after the loop, or whose target reaches no
    RET, is not a subroutine call (for sm_80 ptxas leaves some loops by a ``CALL.REL.NOINC`` to the
    instruction after the loop's backward branch): it adds nothing."""
    index = {ins.addr: i for i, ins in enumerate(instrs)}
    out = list(body)
    after = index.get(body[-1].addr, len(instrs)) + 1 if body else len(instrs)
    exit_addr = instrs[after].addr if after < len(instrs) else None
    for ins in body:
        m = _TARGET.search(ins.operands) if ins.base == "CALL" else None
        if m is None or int(m.group(1), 16) not in index or int(m.group(1), 16) == exit_addr:
            continue
        callee = []
        for op in instrs[index[int(m.group(1), 16)]:]:
            callee.append(op)
            if op.base == "RET":
                out += callee
                break
    return out


# =========================================================================== ptxas -v resources
def ptxas_resources(log: str) -> dict[str, dict]:
    """Entry -> {registers, stack_bytes, spill_bytes, shared_bytes} from NVRTC's ``-v`` log (parsed
    by tests/test_kernel_resources.py, the resource budget's own reader)."""
    import test_kernel_resources as tkr

    return {name: {"registers": r.registers, "stack_bytes": r.stack_frame,
                   "spill_bytes": r.spill_stores + r.spill_loads, "shared_bytes": r.static_shared}
            for name, r in tkr.parse_ptxas_log(log).items()}


# =========================================================================== occupancy
@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of a compute capability (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability"; the occupancy calculator's allocation units)."""

    name: str
    max_warps: int = 64
    max_blocks: int = 32
    registers: int = 65536
    reg_unit: int = 256            # registers allocated per warp in units of 256
    max_shared: int = 0            # shared memory per SM usable by blocks (bytes)
    shared_unit: int = 128
    reserved_shared: int = 1024    # per block, sm_80 and later


LIMITS = {80: SmLimits("sm_80", max_shared=164 * 1024), 90: SmLimits("sm_90", max_shared=228 * 1024)}


def occupancy(registers: int, threads: int, shared: int, arch: int) -> dict:
    """Theoretical occupancy of a block of ``threads`` threads using ``registers`` per thread and
    ``shared`` bytes of (static + dynamic) shared memory: blocks per SM as the tightest of the warp,
    block, register and shared-memory limits; occupancy = resident warps / max warps."""
    lim = LIMITS[arch]
    warps = math.ceil(threads / 32)
    regs_warp = math.ceil(max(registers, 1) * 32 / lim.reg_unit) * lim.reg_unit
    by_regs = (lim.registers // regs_warp) // warps
    smem = math.ceil((shared + lim.reserved_shared) / lim.shared_unit) * lim.shared_unit
    by_smem = lim.max_shared // smem if shared else lim.max_blocks
    by_warps = lim.max_warps // warps
    blocks = min(by_regs, by_smem, by_warps, lim.max_blocks)
    limits = [("registers", by_regs), ("warps", by_warps), ("blocks", lim.max_blocks)]
    limits += [("shared", by_smem)] if shared else []
    limiter = min(limits, key=lambda kv: kv[1])[0]
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps, "occupancy": blocks * warps / lim.max_warps,
            "limiter": limiter}


# =========================================================================== the roofline model
@dataclass(frozen=True)
class Device:
    """Peaks of one GPU (per SM and clock; datasheet figures)."""

    name: str
    sms: int
    clock_hz: float
    hbm_bytes_per_s: float
    ffma_per_clk: float = 4.0      # warp FFMA instructions per SM per clock (128 FP32 lanes)
    dfma_per_clk: float = 2.0      # 64 FP64 lanes (H100); A100: 32
    int_per_clk: float = 2.0       # 64 INT32 lanes
    mufu_per_clk: float = 0.5      # 16 SFU lanes
    issue_per_clk: float = 4.0     # four schedulers, one instruction each
    lds_bytes_per_clk: float = 128.0   # 32 banks x 4 bytes
    source: str = ""


H100_SXM = Device("H100 SXM", 132, 1.755e9, 3.35e12,
                  source="NVIDIA H100 datasheet: 132 SMs, 3.35 TB/s HBM3; 1.755 GHz sustained "
                         "(bench/_gpu_cost.py CLOCK_HZ); 128 FP32 / 64 FP64 / 64 INT32 / 16 SFU lanes per SM "
                         "(Hopper tuning guide)")
H100_PCIE = Device("H100 PCIe", 114, 1.62e9, 2.0e12,
                   source="NVIDIA H100 PCIe datasheet: 114 SMs, 2.0 TB/s HBM2e, 1.755 GHz boost (1.62 sustained "
                          "assumed)")


def loop_cycles(m: dict, dev: Device = H100_SXM, shared_distinct: float = 32.0,
                own_rows: dict[str, float] | None = None) -> dict:
    """Cycles one SM needs to issue one warp iteration of a loop with instruction mix ``m``,
    per pipe, and the largest (the bound).  A shared load of ``w`` bits by ``shared_distinct``
    distinct lanes moves ``w/8 * shared_distinct`` bytes through the 128 B/clock banks (at least
    one wavefront); ``own_rows`` ({width in bits: count}): that many of the loads are by 32
    distinct lanes instead (each thread its own row: a 16-byte load is 4 wavefronts)."""
    own = {w: min(float(n), float((own_rows or {}).get(w, 0))) for w, n in m["lds_widths"].items()}

    def loads(width: str, n: float) -> list[tuple[float, float]]:   # (distinct lanes, count)
        return [(shared_distinct, n - own[width]), (32.0, own[width])]

    lds_bytes = sum(int(w) / 8 * dl * k for w, n in m["lds_widths"].items() for dl, k in loads(w, n))
    lds_waves = sum(max(1.0, int(w) / 8 * dl / dev.lds_bytes_per_clk) * k
                    for w, n in m["lds_widths"].items() for dl, k in loads(w, n))
    sts_waves = sum(max(1.0, int(w) / 8 * 32 / dev.lds_bytes_per_clk) * n for w, n in m["sts_widths"].items())
    pipes = {"fma": (m["ffma"] + m["fp32"]) / dev.ffma_per_clk + m["int"] / (2 * dev.ffma_per_clk),
             "fp64": (m["dfma"] + m["fp64"]) / dev.dfma_per_clk,
             "int": m["int"] / dev.int_per_clk,
             "mufu": m["mufu"] / dev.mufu_per_clk,
             "shared": max(lds_waves + sts_waves, lds_bytes / dev.lds_bytes_per_clk),
             "issue": m["total"] / dev.issue_per_clk}
    bound = max(pipes, key=pipes.get)
    return {"cycles": pipes[bound], "bound": bound, "pipes": pipes}


@dataclass
class Shape:
    """One workload of a kernel: how many warp iterations its hot loop runs, the useful FLOPs and
    the compulsory DRAM bytes (the roofline's time), the bytes the kernel moves, and a per-output
    issue cost outside the hot loop (cycles per SM, total)."""

    label: str
    warp_iters: float
    useful_flops: float
    min_bytes: float
    moved_bytes: float
    extra_cycles: float = 0.0
    fp64: bool = False
    active_sms: int | None = None
    tail_iters: float = 0.0      # warp iterations of the second multiply-add loop (a remainder loop)


def predict(shape: Shape, m: dict, dev: Device, shared_distinct: float, tail: dict | None = None,
            own_rows: dict[str, float] | None = None) -> dict:
    """Predicted time of a shape: max(issue time of the hot loop (and of the remainder loop, mix
    ``tail``) over the active SMs, bytes moved / HBM); the roofline time: max(useful FLOPs / FMA
    peak, compulsory bytes / HBM).  ``own_rows``: see :func:`loop_cycles`."""
    lc = loop_cycles(m, dev, shared_distinct, own_rows)
    tail_cycles = loop_cycles(tail, dev, shared_distinct)["cycles"] if tail and shape.tail_iters else 0.0
    sms = min(dev.sms, shape.active_sms or dev.sms)
    t_issue = (shape.warp_iters * lc["cycles"] + shape.tail_iters * tail_cycles + shape.extra_cycles) / (
        sms * dev.clock_hz)
    t_mem = shape.moved_bytes / dev.hbm_bytes_per_s
    peak = dev.sms * dev.clock_hz * 32 * 2 * (dev.dfma_per_clk if shape.fp64 else dev.ffma_per_clk)
    t_roof = max(shape.useful_flops / peak, shape.min_bytes / dev.hbm_bytes_per_s)
    t = max(t_issue, t_mem)
    bound = lc["bound"] if t_issue >= t_mem else "hbm"
    return {"time_s": t, "roofline_s": t_roof, "fraction": t_roof / t if t > 0 else 0.0, "bound": bound}


# The shapes the methods use (see the module docstring of bench/gpu_model.py for the workloads).
N_BLOCK, K_BLOCK = 1_000_000, 4_000        # an LLSVM / Nyström block, n x k
DS = (2, 22, 64, 784)
CVM_CANDIDATES = (("sampled 413", 413), ("exact 1M", 1_000_000))
CVM_CORE = 1_000
"""Core vectors of the CVM shapes."""


def fused_chunks(d: int) -> float:
    """Hot-loop iterations per tile of the fused mat-vec (kernel_matvec) at ``d``
    features: d // 16 full chunks, and the last d % 16 columns as a chunk of their power-of-two
    width (common.cuh: gk_chunk_width), counted as that share of a full chunk's loop."""
    rest = d % 16
    width = 0 if rest == 0 else max(2, 1 << (rest - 1).bit_length())
    return d // 16 + width / 16


def cvm_chunks(d: int, it: int) -> float:
    """Hot-loop iterations per tile of cvm_partial at ``d`` features, itemsize ``it``: the rows padded
    to ``ld``, a whole number of 16-byte vectors (the scanner's copy of X); ld // 16 full chunks and
    the last d - 16 * (ld // 16) columns (if any) at width 2, 4, 8 or 16, counted as that share of a
    full chunk's loop."""
    v = 16 // it
    full = (-(-d // v) * v) // 16
    rest = d - 16 * full
    return full + (0 if rest <= 0 else max(2, 1 << (rest - 1).bit_length())) / 16
EPI_CYCLES_PER_OUTPUT = 12 / 4.0
"""Issue cycles per warp of 32 outputs for the rbf kernel value and its store outside a hot loop
(FADD, FFMA, FMNMX, FMUL, MUFU.EX2, FMUL, two address IMAD/LEA, STG, ISETP, ~12 instructions at 4
issues per clock): counted from the rbf path of gk_kernel_value in the SASS."""


def _ceil(a: float, b: float) -> float:
    return math.ceil(a / b)


def _tiled_geometry(src: str, itemsize: int = 4) -> tuple[int, int, int]:
    """(BM, BN, TK) of kernel_block_tiled at ``itemsize`` (4: float, 8: double), read from its
    source's #defines (GK_TK_F32 / GK_TK_F64: the slice width per type; GK_TK: one for both)."""
    vals = dict(re.findall(r"#define\s+(GK_BM|GK_BN|GK_TK|GK_TK_F32|GK_TK_F64)\s+(\d+)", src))
    tk = vals.get("GK_TK_F32" if itemsize == 4 else "GK_TK_F64", vals.get("GK_TK"))   # GK_TK: one width (older sources)
    if tk is None:
        raise ValueError("kernel_block.cu defines neither GK_TK_F32 / GK_TK_F64 nor GK_TK")
    return int(vals.get("GK_BM", 64)), int(vals.get("GK_BN", 64)), int(tk)


def shapes_for(family: str, it: int, threads: int, src_text: str, remainder_loop: bool = False,
               staging_cycles: float = 0.0) -> list[Shape]:
    """The shapes of one kernel family at itemsize ``it`` (4 or 8) and launch block ``threads``;
    ``remainder_loop``: the kernel computes the last d % TK features in a loop of their own (one
    warp iteration per feature) instead of padding d to a multiple of TK; ``staging_cycles``: issue
    cycles of a hot-loop iteration of a warp that only stages (cvm_partial's warps without a
    candidate, :func:`staging_issue`)."""
    fp64 = it == 8
    n, k = N_BLOCK, K_BLOCK
    out = []
    if family == "kernel_epilogue":
        for d in DS:   # the GEMM path: the epilogue after cuBLAS, any d
            out.append(Shape(f"d={d}", n * k / 32, 0.0, 2 * n * k * it, 2 * n * k * it + (n + k) * it, fp64=fp64))
    elif family == "kernel_block_tiled":
        bm, bn, tk = _tiled_geometry(src_text, it)
        blocks = _ceil(n, bm) * _ceil(k, bn)
        warps = blocks * (threads / 32)
        for d in DS:
            full, rest = (d // tk, d % tk) if remainder_loop else (_ceil(d, tk), 0)
            out.append(Shape(f"d={d}", warps * full, 2.0 * n * k * d,
                             n * k * it + (n + k) * d * it, n * k * it + blocks * (bm + bn) * d * it / 8,
                             extra_cycles=n * k / 32 * EPI_CYCLES_PER_OUTPUT, fp64=fp64,
                             tail_iters=warps * rest))
    elif family == "kernel_matvec":
        for d in DS:   # one m=1 mat-vec of an n x k kernel block; hot loop: one 16-row x 16-column chunk
            iters = (n / 32) * _ceil(k, 16) * fused_chunks(d)
            out.append(Shape(f"d={d}", iters, 2.0 * n * k * d, (n * d + k * d) * it, (n * d + k * d) * it,
                             extra_cycles=n * k / 32 * EPI_CYCLES_PER_OUTPUT, fp64=fp64))
    elif family == "cvm_partial":
        m = CVM_CORE   # core vectors
        for label, nc in CVM_CANDIDATES:
            for d in (2, 22, 784):
                blocks, per_block = candidate_blocks(nc, threads)
                n_split, per = core_split(blocks, m)
                # the candidates spread evenly over the blocks in whole warps: a block's warps with
                # a candidate run the hot loop over its slice's tiles, the others only stage
                busy = _ceil(per_block, 32)
                chunks = blocks * n_split * _ceil(per, 16) * cvm_chunks(d, it)
                idle = chunks * (threads / 32 - busy) * staging_cycles
                # moved: the candidates' rows and norms, the core rows and norms, the partial sums
                out.append(Shape(f"{label} d={d}", chunks * busy, 2.0 * nc * m * d, nc * d * it,
                                 nc * (d + 1) * it + m * (d + 1) * it + n_split * nc * 8,
                                 extra_cycles=nc * m / 32 * EPI_CYCLES_PER_OUTPUT + idle, fp64=fp64,
                                 active_sms=blocks * n_split))
    elif family in ("cvm_furthest", "cvm_scores"):
        for label, nc in CVM_CANDIDATES:   # pass 2: the slice partials summed, the group minima
            blocks = _ceil(nc, threads)
            n_split = core_split(blocks, CVM_CORE)[0]
            nbytes = nc * (8 * n_split + 8 + 3 * it) + (nc * 8 if family == "cvm_scores" else 0)
            groups = max(1, _ceil(nc, 59)) if nc < 1000 else min(blocks, 4096)
            out.append(Shape(label, _ceil(nc, 32), 0.0, nbytes, nbytes, fp64=fp64, active_sms=groups))
    elif family == "smo_subproblem":
        ws = 1024
        # one block per problem: one SM; the working-set kernel rows are read per step
        out.append(Shape("ws=1024, 1 problem", (threads / 32) * 1000, 0.0, ws * ws * it, ws * ws * it,
                         fp64=fp64, active_sms=1))
    elif family in ("smo_round_keys", "smo_round_finish"):
        rows = 1_000_000
        out.append(Shape("n=1M", rows / 32, 0.0, 6 * rows * it, 6 * rows * it, fp64=fp64))
    return out


def staging_issue(m: dict, dev: "Device") -> float:
    """Issue cycles of a hot-loop iteration of cvm_partial for a warp that skips the multiply-adds:
    the loop's instructions less its FFMA/DFMA and its shared loads (all of them the dot products':
    the staging's row pointers are in registers)."""
    skipped = m["ffma"] + m["dfma"] + m["lds"]
    return max(0, m["total"] - skipped) / dev.issue_per_clk


def family(name: str) -> str:
    return re.sub(r"_f(32|64)$", "", name)


# =========================================================================== the analysis
def launch_blocks() -> dict[str, tuple[int, int]]:
    """Kernel -> (threads, dynamic shared bytes) of the largest block the library launches it with
    (every launch site run with a recorder: ``tests/test_kernel_resources.py``)."""
    import test_kernel_resources as tkr

    rec = tkr.record_launches()
    return {name: (tkr.launch_block(name, r), r.dynamic_shared) for name, r in rec.items()}


SHARED_DISTINCT = {"kernel_block_tiled": 16.0, "kernel_matvec": 1.0, "cvm_partial": 1.0, "cvm_furthest": 1.0,
                   "cvm_scores": 1.0}
"""Distinct addresses a warp's shared load of the hot loop touches (the rest are broadcasts), by the
kernel's indexing: the tiled block's warp reads 16 columns (and 2 rows) per load; the fused mat-vec and
the CVM's first pass read the tile chunk at one address per warp (the mat-vec's own row is one LDS per
column, 32 distinct words: one wavefront, as a broadcast; the CVM's is 16-byte loads, :func:`own_row_loads`)."""


def own_row_loads(fam: str, it: int, src_text: str) -> dict[str, float] | None:
    """Shared loads per hot-loop iteration by 32 distinct lanes (each thread its own row), by width:
    cvm_partial reads its row's chunk of CVM_DC values as 16-byte vectors (CVM_DC * it / 16 of them)."""
    if fam != "cvm_partial":
        return None
    dc = int(re.search(r"#define\s+CVM_DC\s+(\d+)", src_text).group(1))
    return {"128": dc * it / 16}


def analyze(src_dir: Path | None = None, archs: tuple[int, ...] = ARCHS, tools: Path | None = None,
            blocks: dict[str, tuple[int, int]] | None = None, jobs: int = 1) -> list[dict]:
    """One record per kernel and architecture (see the module docstring).

    ``jobs`` compiles run at once (NVRTC through ctypes releases the GIL; cuobjdump is a
    subprocess).  Each record's ``source_compile_s`` is then the wall time of a compile that
    shared the CPU: the default, 1, measures them one at a time.  With an empty cache the eight
    compiles took 18.9 s one at a time on a quiet 2-core machine.
    """
    src_dir = Path(src_dir) if src_dir is not None else _cuda.cuda_source_dir()
    tools = tools or sass_tools()
    blocks = blocks if blocks is not None else launch_blocks()
    sources = sorted(src_dir.glob("*.cu"))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        builds = {(src, arch): pool.submit(compiled, src, arch, tools) for src in sources for arch in archs}
    rows = []
    for src in sources:
        text = src.read_text()
        names = nvrtc.kernel_names(text)
        for arch in archs:
            log, sass, compile_s = builds[(src, arch)].result()
            res = ptxas_resources(log)
            funcs = parse_sass(sass)
            for name in names:
                r = res.get(name, {"registers": -1, "stack_bytes": -1, "spill_bytes": -1, "shared_bytes": 0})
                instrs = funcs.get(name, [])
                body, span = hot_loop(instrs)
                m = mix(body)
                tail = remainder_loop(instrs)
                threads, dyn = blocks.get(name, (0, 0))
                shared = r["shared_bytes"] + dyn
                occ = occupancy(r["registers"], threads, shared, arch) if threads and r["registers"] > 0 else None
                fam = family(name)
                it = 8 if name.endswith("_f64") else 4
                fractions, bounds, times = {}, {}, {}
                remainder = fam == "kernel_block_tiled" and tail is not None
                own = own_row_loads(fam, it, text)
                for shape in shapes_for(fam, it, threads or 256, text, remainder, staging_issue(m, H100_SXM)):
                    p = predict(shape, m, H100_SXM, SHARED_DISTINCT.get(fam, 32.0), tail, own)
                    fractions[shape.label] = round(p["fraction"], 3)
                    bounds[shape.label] = p["bound"]
                    times[shape.label] = p["time_s"]
                lc = loop_cycles(m, H100_SXM, SHARED_DISTINCT.get(fam, 32.0), own)
                fma = m["ffma"] + m["dfma"]
                fma_cycles = m["dfma"] / H100_SXM.dfma_per_clk if it == 8 else m["ffma"] / H100_SXM.ffma_per_clk
                rows.append({
                    "kernel": name, "arch": f"sm_{arch}", "registers": r["registers"],
                    "stack_bytes": r["stack_bytes"], "spill_bytes": r["spill_bytes"],
                    "shared_bytes": shared, "threads": threads,
                    "occupancy": round(occ["occupancy"], 3) if occ else None,
                    "occupancy_limiter": occ["limiter"] if occ else None,
                    "instructions": len(instrs),
                    "inner_loop": m, "inner_loop_span": [hex(a) for a in span] if span else None,
                    "fma_per_lds": round(fma / m["lds"], 2) if m["lds"] else None,
                    "loop_bound": lc["bound"],
                    "fma_efficiency": round(fma_cycles / lc["cycles"], 3) if fma_cycles else None, "bound": bounds, "roofline_fraction": fractions,
                    "predicted_s_h100_sxm": times,
                    "source_compile_s": round(compile_s, 3),
                })
    return rows


def format_table(rows: list[dict]) -> str:
    head = ["kernel", "arch", "regs", "stack", "spill", "smem", "thr", "occ", "ffma", "dfma", "lds", "ldg", "stg",
            "int", "bar", "fma/lds", "bound", "roofline fraction (predicted, H100 SXM)"]
    lines = []
    for r in rows:
        m = r["inner_loop"]
        frac = " ".join(f"{k}:{v:.2f}" for k, v in r["roofline_fraction"].items())
        bounds = sorted(set(r["bound"].values())) or [r["loop_bound"]]
        lines.append([r["kernel"], r["arch"], r["registers"], r["stack_bytes"], r["spill_bytes"], r["shared_bytes"],
                      r["threads"], "-" if r["occupancy"] is None else f"{r['occupancy']:.2f}", m["ffma"], m["dfma"],
                      m["lds"], m["ldg"], m["stg"], m["int"], m["bar"],
                      "-" if r["fma_per_lds"] is None else r["fma_per_lds"], "/".join(bounds), frac])
    width = [max(len(str(h)), *(len(str(line[i])) for line in lines)) for i, h in enumerate(head)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(head, width))]
    out += ["  ".join(str(v).ljust(w) for v, w in zip(line, width)) for line in lines]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--src", type=Path, default=None, help="folder of .cu sources (default: the package's)")
    ap.add_argument("--no-install", action="store_true", help="do not pip-install cuobjdump/nvdisasm")
    ap.add_argument("--jobs", type=int, default=1,
                    help="compiles at once (default 1: source_compile_s then times each compile alone)")
    args = ap.parse_args(argv)
    try:
        tools = sass_tools(install=not args.no_install)
    except ToolsUnavailable as exc:
        print(f"kernel_static: {exc}", file=sys.stderr)
        return 2
    rows = analyze(args.src, tools=tools, jobs=args.jobs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(format_table(rows))
    print(f"\nwrote {args.out} ({len(rows)} records; fractions and times are model predictions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
