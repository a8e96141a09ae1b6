"""A resource budget for every CUDA kernel, read from ptxas's own report.

Every ``kernels_cuda/*.cu`` is compiled with the real NVRTC (pip package
``nvidia-cuda-nvrtc``, no GPU needed) and CuPy's options to CUBIN for sm_80
and sm_90 with ``--ptxas-options=-v``; ptxas then writes, per entry function,
its stack frame, spill stores and loads, registers and static shared memory
into the program log.  Every ``extern "C"`` kernel must have

* a 0-byte stack frame (and cumulative stack: no callee with one) and no spills
  -- local memory is DRAM traffic in the inner loop;
* registers × its largest launch block ≤ 65,536 (one SM's register file; the
  registers are counted as allocated, in units of 8 per thread), so that its
  largest block can launch at all;
* static + dynamic shared memory ≤ 48 KiB (more needs an opt-in attribute).

The launch blocks and dynamic shared memory come from the library's own
launch code: each launch site runs once at its largest configuration on NumPy
arrays with ``_cuda.launch`` replaced by a recorder (geometry and argument
count checked as a real launch checks them), and a kernel's block is also at
least the largest its :data:`gpuksvm.array.cuda_sources.BLOCK_RULES` entry allows.

``pytest -s tests/test_kernel_resources.py -k table`` prints the table;
``python tests/test_kernel_resources.py [DIR]`` prints it for the sources in
DIR (default: the package's).
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpuemu import nvrtc
from gpuksvm.array import cuda_sources as _cuda
from gpuksvm.array import backend as bk
from gpuksvm.kernels import kernel as K
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.cvm import scan as meb_scan
from gpuksvm.solvers.smo import cuda_launch as smo_cuda, working_set as smo_working_set
from test_cuda_sources import nvrtc_lib  # noqa: F401 - the fixture: NVRTC loaded, or skip with the reason

ARCHS = (80, 90)                    # Ampere, Hopper
REGISTER_FILE = 65_536              # 32-bit registers per SM (and per block) on sm_80 / sm_90
REGISTER_UNIT = 8                   # registers are allocated per thread in multiples of 8
SHARED_LIMIT = 48 * 1024            # per block without cudaFuncSetAttribute
PTXAS_VERBOSE = "--ptxas-options=-v"


# ----------------------------------------------------------------------------- ptxas's report
@dataclass
class KernelResources:
    """What ptxas reports for one entry function."""

    kernel: str
    arch: int
    registers: int = -1
    stack_frame: int = -1
    cumulative_stack: int = 0
    spill_stores: int = -1
    spill_loads: int = -1
    static_shared: int = 0


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for 'sm_(\d+)'")
_PROPS = re.compile(r"Function properties for (\w+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_CUMULATIVE = re.compile(r"(\d+) bytes cumulative stack size")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict[str, KernelResources]:
    """Entry function -> its resources, from NVRTC's program log of a ``-v`` ptxas run.

    ptxas reports an entry as ``Compiling entry function 'k'``, then ``Function
    properties for k`` with its stack line, then ``Used N registers, ...``;
    other functions (``__internal_accurate_pow``) have properties and no entry.
    """
    out: dict[str, KernelResources] = {}
    entry = None          # the entry being compiled
    props = None          # whose properties the next stack line describes
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry = KernelResources(m.group(1), int(m.group(2)))
            out[entry.kernel] = entry
            props = None
        elif m := _PROPS.search(line):
            props = m.group(1)
        elif m := _STACK.search(line):
            if entry is not None and props == entry.kernel:
                entry.stack_frame, entry.spill_stores, entry.spill_loads = (int(g) for g in m.groups())
        elif (m := _USED.search(line)) and entry is not None:
            entry.registers = int(m.group(1))
            if c := _CUMULATIVE.search(line):
                entry.cumulative_stack = int(c.group(1))
            if s := _SMEM.search(line):
                entry.static_shared = int(s.group(1))
    return out


def ptxas_report(code: str, name: str, arch: int, src_dir: Path | None = None) -> tuple[dict, str]:
    """Compile ``code`` to CUBIN for ``sm_<arch>`` with CuPy's options and ptxas ``-v``."""
    options = nvrtc.cupy_options(_cuda.nvrtc_options(src_dir), arch) + [PTXAS_VERBOSE]
    res = nvrtc.compile_source(code, name, options)
    assert res.ok, f"NVRTC {nvrtc.version()} sm_{arch}, {name}:\n{res.log}"
    return parse_ptxas_log(res.log), res.log


# ----------------------------------------------------------------------------- the launch sites
@dataclass
class LaunchBudget:
    """The largest launch of one kernel: threads per block and dynamic shared memory."""

    threads: int = 0
    dynamic_shared: int = 0


def record_launches() -> dict[str, LaunchBudget]:
    """Kernel name -> its largest recorded launch, from every launch site of the library at its
    largest configuration (NumPy arrays stand in for device arrays; nothing runs)."""
    seen: dict[str, LaunchBudget] = {}

    def recorder(module, name, grid, block, args, *, shared_mem=0):
        params = _cuda.signatures(module).get(name)
        assert params is not None, f"{name} is not a kernel of {module}.cu"
        assert len(args) == len(params), f"{name}: {len(args)} arguments for {len(params)} parameters"
        grid, block = _cuda._dim3(grid), _cuda._dim3(block)
        _cuda._check_geometry(name, grid, block, int(shared_mem))
        b = seen.setdefault(name, LaunchBudget())
        b.threads = max(b.threads, math.prod(block))
        b.dynamic_shared = max(b.dynamic_shared, int(shared_mem))

    saved = (_cuda.launch, _cuda.get_function, bk.get_namespace)
    _cuda.launch = recorder
    _cuda.get_function = lambda module, name: None
    bk.get_namespace = lambda *a, **k: np
    try:
        # Nothing runs, so the outputs the launch sites read back hold whatever np.empty left there;
        # arithmetic on that garbage (e.g. CVM's Σ max(0, q - s)² over unwritten scores) may overflow.
        with np.errstate(all="ignore"):
            for dt in (np.float32, np.float64):
                _launch_sites(np.dtype(dt))
    finally:
        _cuda.launch, _cuda.get_function, bk.get_namespace = saved
    return seen


def _launch_sites(dt: np.dtype) -> None:
    rng = np.random.default_rng(0)
    rbf, poly = Kernel("rbf", gamma=0.5), Kernel("poly", gamma=0.5, coef0=1.0, degree=2)
    # kernel_block.cu: the epilogue and the tiled block
    G = np.zeros((3, 5), dtype=dt)
    K._epilogue_gpu(G, np.ones(3, dt), np.ones(5, dt), rbf)
    X, Z = rng.random((70, K._TILED_MAX_D)).astype(dt), rng.random((70, K._TILED_MAX_D)).astype(dt)
    K._tiled_block_gpu(X, Z, np.ones(70, dt), np.ones(70, dt), np.zeros((70, 70), dt), rbf)
    # kernel_matvec.cu at its largest d and m
    d, m = K._FUSED_MAX_D, K._FUSED_MAX_M
    K._fused_matvec_gpu(np.ones((3, d), dt), np.ones((4, d), dt), np.ones((4, m), dt), np.zeros((3, m), dt), poly)
    # smo.cu at the largest working set
    ws = smo_working_set._MAX_WS
    y = np.ones((1, ws), dt)
    smo_cuda._solve_subproblems_cuda(np.eye(ws, dtype=dt)[None], y, y, np.zeros((1, ws), dt), y, np.ones(1, bool),
                                     1e-3, 1)
    keep = np.zeros((1, 2), np.int64)
    smo_cuda._round_keys_cuda(y, y, np.zeros((1, ws), dt), y, keep)
    # cvm.cu: the scanner at its widest rows, every kind of search
    d = meb_scan.GpuScanner._MAX_D
    scanner = meb_scan.GpuScanner(rng.random((600, d)), None, rbf, None, 1.0, dt)
    for i in (0, 1, 2):
        scanner.append(i)
    coef, b = scanner.set_alpha(np.full(3, 1 / 3))
    scanner.group_min(rng.integers(0, 600, size=(4, 59)), coef, b)
    scanner.scores(np.arange(600), coef, b)
    scanner.exact_scan(None, coef, b, 0.0, 3)
    try:
        scanner.exact_min(None, coef, b)
    except AttributeError:   # it reads its result with .get(): the launch is recorded by then
        pass


def launch_block(name: str, recorded: LaunchBudget | None) -> int:
    """The largest block a kernel runs with: recorded, or allowed by its BLOCK_RULES entry."""
    threads = recorded.threads if recorded else 0
    rule = _cuda.BLOCK_RULES.get(_cuda._family(name))
    if rule is not None:
        threads = max(threads, math.prod(rule.shape) if rule.shape else rule.max_threads)
    return threads


def violations(res: KernelResources, threads: int, dynamic_shared: int) -> list[str]:
    """What breaks the budget (empty: within it)."""
    out = []
    if res.registers < 0 or res.stack_frame < 0:
        out.append("no ptxas report (registers / stack frame)")
    if res.stack_frame or res.cumulative_stack:
        out.append(f"{res.stack_frame} bytes stack frame ({res.cumulative_stack} cumulative): local memory")
    if res.spill_stores or res.spill_loads:
        out.append(f"{res.spill_stores} bytes spill stores, {res.spill_loads} bytes spill loads")
    regs = -(-max(res.registers, 0) // REGISTER_UNIT) * REGISTER_UNIT
    if threads <= 0:
        out.append("no launch recorded and no BLOCK_RULES entry: its block size is unknown")
    elif regs * threads > REGISTER_FILE:
        out.append(f"{res.registers} registers (allocated {regs}) × {threads} threads = {regs * threads} "
                   f"> {REGISTER_FILE}")
    if res.static_shared + dynamic_shared > SHARED_LIMIT:
        out.append(f"{res.static_shared} + {dynamic_shared} bytes shared memory > {SHARED_LIMIT}")
    return out


# ----------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def launches():
    return record_launches()


@pytest.fixture(scope="module")
def reports(nvrtc_lib):
    """(source name, arch) -> (kernels in the source, ptxas report, log), compiled once."""
    cache = {}

    def get(src: Path, arch: int):
        key = (src.name, arch)
        if key not in cache:
            code = src.read_text()
            cache[key] = (nvrtc.kernel_names(code),) + ptxas_report(code, src.name, arch)
        return cache[key]
    return get


def test_every_kernel_is_launched(launches):
    """Every extern "C" kernel has a launch site that the recorder reaches (else its block and
    dynamic shared memory would be guesses)."""
    names = {k for src in _cuda.cuda_sources() for k in _cuda.signatures(src.stem)}
    assert names - set(launches) == set(), f"kernels without a recorded launch: {sorted(names - set(launches))}"


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
@pytest.mark.parametrize("src", _cuda.cuda_sources(), ids=lambda p: p.name)
def test_kernel_resource_budget(reports, launches, src, arch):
    kernels, report, log = reports(src, arch)
    assert kernels, f"no extern \"C\" kernel in {src.name}"
    problems = []
    for name in kernels:
        res = report.get(name)
        if res is None:
            problems.append(f"{name}: missing from ptxas's report")
            continue
        rec = launches.get(name)
        for v in violations(res, launch_block(name, rec), rec.dynamic_shared if rec else 0):
            problems.append(f"{name} sm_{arch}: {v}")
    assert not problems, "\n".join(problems) + f"\n--- ptxas log ---\n{log}"


def test_budget_check_can_fail(nvrtc_lib):
    """Not vacuous: an array indexed at run time lives in local memory, and the report says so;
    a kernel missing from the log is noticed; too many registers or too much shared memory fail."""
    code = ('extern "C" __global__ void local_array(float* x, int n, int i) {\n'
            '    float a[32];\n    for (int j = 0; j < n; ++j) a[j] = x[j];\n    float s = 0.0f;\n'
            '    for (int j = 0; j < n; ++j) s += a[j] * a[n - 1 - j];\n    x[0] = s + a[i];\n}\n')
    report, _ = ptxas_report(code, "local.cu", 80)
    res = report["local_array"]
    assert res.stack_frame >= 128 and any("stack frame" in v for v in violations(res, 128, 0))
    assert parse_ptxas_log("ptxas info    : 0 bytes gmem\n") == {}
    ok = KernelResources("k", 80, registers=64, stack_frame=0, spill_stores=0, spill_loads=0, static_shared=1024)
    assert violations(ok, 1024, 0) == []
    assert violations(ok, 1025, 0) and violations(ok, 1, SHARED_LIMIT)
    odd = KernelResources("k", 80, registers=65, stack_frame=0, spill_stores=0, spill_loads=0)
    assert 65 * 960 <= REGISTER_FILE and violations(odd, 960, 0)   # 65 registers are 72 allocated


def resource_table(src_dir: Path | None = None, launches: dict | None = None, report_of=None) -> list[dict]:
    """One row per kernel and arch: registers, stack, spills, static + dynamic shared memory.

    ``report_of(src, arch)`` gives ptxas's report of a source (default: compile it now)."""
    src_dir = Path(src_dir) if src_dir is not None else _cuda.cuda_source_dir()
    launches = record_launches() if launches is None else launches
    if report_of is None:
        def report_of(src, arch):
            return ptxas_report(src.read_text(), src.name, arch, src_dir)[0]
    rows = []
    for src in sorted(src_dir.glob("*.cu")):
        for arch in ARCHS:
            report = report_of(src, arch)
            for name in nvrtc.kernel_names(src.read_text()):
                res = report.get(name, KernelResources(name, arch))
                rec = launches.get(name)
                rows.append({"kernel": name, "arch": f"sm_{arch}", "registers": res.registers,
                             "threads": launch_block(name, rec), "stack_bytes": res.stack_frame,
                             "spill_bytes": res.spill_stores + res.spill_loads,
                             "static_shared": res.static_shared,
                             "dynamic_shared": rec.dynamic_shared if rec else 0})
    return rows


def format_table(rows: list[dict]) -> str:
    cols = ["kernel", "arch", "registers", "threads", "stack_bytes", "spill_bytes", "static_shared",
            "dynamic_shared"]
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def test_print_resource_table(reports, launches, capsys):
    """The table (``-s`` shows it): every kernel on both architectures."""
    rows = resource_table(launches=launches, report_of=lambda src, arch: reports(src, arch)[1])
    with capsys.disabled():
        print("\n" + format_table(rows))
    names = {k for src in _cuda.cuda_sources() for k in _cuda.signatures(src.stem)}
    assert {r["kernel"] for r in rows} == names and len(rows) == len(names) * len(ARCHS)


if __name__ == "__main__":
    print(format_table(resource_table(sys.argv[1] if len(sys.argv) > 1 else None)))
