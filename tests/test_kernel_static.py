"""``bench/kernel_static.py`` stays runnable: every kernel on sm_80 and sm_90, the fields the
per-kernel table needs, and the parts of the analysis checked on code whose answer is known.

Needs NVRTC (pip ``nvidia-cuda-nvrtc``, a test extra) and cuobjdump + nvdisasm (pip
``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm``, installed on first use into
``~/.cache/gpuksvm/kernel-static``); without them the module is skipped with the reason.
Compiled output is cached there too, so a second run takes seconds.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from gpuemu import nvrtc
from gpuksvm.array import cuda_sources as _cuda
from test_cuda_sources import nvrtc_lib  # noqa: F401 - the fixture: NVRTC loaded, or skip with the reason

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("kernel_static", ROOT / "bench" / "kernel_static.py")
ks = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("kernel_static", ks)
_spec.loader.exec_module(ks)

REQUIRED = ("kernel", "arch", "registers", "stack_bytes", "spill_bytes", "shared_bytes", "occupancy",
            "inner_loop", "bound", "roofline_fraction")


@pytest.fixture(scope="module")
def tools(nvrtc_lib):
    try:
        return ks.sass_tools(install=True)
    except ks.ToolsUnavailable as exc:
        pytest.skip(f"cuobjdump/nvdisasm cannot be obtained: {exc}")


@pytest.fixture(scope="module")
def rows(tools, tmp_path_factory):
    out = tmp_path_factory.mktemp("ks") / "kernel_static.json"
    assert ks.main(["--out", str(out), "--jobs", "2"]) == 0     # two compiles at once: 11 s, not 19 s, uncached
    return json.loads(out.read_text())


def test_json_covers_every_kernel_on_both_archs(rows):
    names = {k for src in _cuda.cuda_sources() for k in _cuda.signatures(src.stem)}
    seen = {(r["kernel"], r["arch"]) for r in rows}
    assert seen == {(k, f"sm_{a}") for k in names for a in ks.ARCHS}
    for r in rows:
        missing = [f for f in REQUIRED if f not in r]
        assert not missing, f"{r['kernel']} {r['arch']}: no {missing}"
        assert r["registers"] > 0 and r["stack_bytes"] == 0 and r["spill_bytes"] == 0, r["kernel"]
        assert 0 < r["occupancy"] <= 1, r["kernel"]
        assert {"ffma", "dfma", "lds", "ldg", "stg", "int", "bar"} <= set(r["inner_loop"])
        assert r["roofline_fraction"] and all(0 <= v <= 1 for v in r["roofline_fraction"].values())


def test_tiled_block_inner_loop_reuses_shared_loads(rows):
    """The tiled kernel block's inner loop: at least 4 FFMA per shared load (f32)."""
    for r in rows:
        if r["kernel"] == "kernel_block_tiled_f32":
            m = r["inner_loop"]
            assert m["ffma"] >= 4 * m["lds"] > 0, (r["arch"], m)


def test_occupancy_rules():
    # 96 registers x 256 threads: 3072 registers a warp, 21 warps of registers -> 2 blocks, 16 of 64 warps
    assert ks.occupancy(96, 256, 16640, 90)["occupancy"] == 0.25
    assert ks.occupancy(96, 256, 16640, 90)["limiter"] == "registers"
    assert ks.occupancy(32, 1024, 0, 90)["occupancy"] == 1.0
    assert ks.occupancy(33, 1024, 0, 90)["occupancy"] == 0.5        # 40 allocated: one 1024-thread block
    # 48 KiB + the 1 KiB reserved: 3 blocks in sm_80's 164 KiB, 4 in sm_90's 228 KiB
    assert ks.occupancy(32, 256, 48 * 1024, 80)["blocks_per_sm"] == 3
    assert ks.occupancy(32, 256, 48 * 1024, 90)["blocks_per_sm"] == 4
    assert ks.occupancy(16, 32, 0, 90)["limiter"] == "blocks"        # 32 one-warp blocks: half the warps


_PROBE = r'''
extern "C" __global__ void probe(const float* x, float* out, int n) {
    __shared__ float s[256];
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
    for (int i = 0; i < n; ++i) {
        for (int e = threadIdx.x; e < 256; e += blockDim.x) s[e] = x[i * 256 + e];
        __syncthreads();
        const float a = s[(threadIdx.x * 7 + i) & 255];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = fmaf(a, s[(j * 33 + i) & 255], acc[j]);
        __syncthreads();
    }
    float t = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) t += acc[j] * (float)j;
    out[threadIdx.x] = t;
}
'''


def test_hot_loop_and_mix_of_a_known_kernel(tools):
    """A loop of 8 FMAs, 9 shared loads and 2 barriers around a nested copy loop without FMAs: the
    hot loop is the outer one (the copy loop has no FMA) and the counts are the source's."""
    res = nvrtc.compile_source(_PROBE, "probe.cu", nvrtc.cupy_options((), 90))
    assert res.ok, res.log
    funcs = ks.parse_sass(ks.disassemble(res.binary, tools))
    body, span = ks.hot_loop(funcs["probe"])
    m = ks.mix(body)
    assert span is not None
    assert m["ffma"] == 8 and m["bar"] == 2, m
    assert m["lds"] == 9 and m["lds_widths"] == {"32": 9}, m
    assert m["sts"] >= 1 and m["ldg"] >= 1, m


def test_classify_and_widths():
    cls = {op: ks.classify(ks.Instr(0, op, "")) for op in
           ("FFMA", "DFMA", "LDS.U.128", "LDG.E.64.CONSTANT", "STG.E", "IMAD.WIDE", "BAR.SYNC.DEFER_BLOCKING",
            "SHFL.BFLY", "MUFU.EX2", "UIADD3", "LDL", "IADD3")}
    assert cls == {"FFMA": "ffma", "DFMA": "dfma", "LDS.U.128": "lds", "LDG.E.64.CONSTANT": "ldg", "STG.E": "stg",
                   "IMAD.WIDE": "int", "BAR.SYNC.DEFER_BLOCKING": "bar", "SHFL.BFLY": "warp", "MUFU.EX2": "mufu",
                   "UIADD3": "uniform", "LDL": "local", "IADD3": "int"}
    assert [ks.width_bits(o) for o in ("LDS.U.128", "LDG.E.64", "STG.E", "LDG.E.U8")] == [128, 64, 32, 8]


def test_loop_bound_picks_the_busiest_pipe():
    m = {c: 0 for c in ks.CLASSES} | {"lds_widths": {"32": 8}, "sts_widths": {}, "ldg_widths": {}, "stg_widths": {}}
    m.update(ffma=16, lds=8, total=24)
    lc = ks.loop_cycles(m, ks.H100_SXM, shared_distinct=32.0)
    assert lc["bound"] == "shared" and lc["cycles"] == 8.0         # 8 wavefronts vs 16/4 FMA cycles
    m.update(ffma=64, total=72)        # the FMA pipe takes one warp instruction per scheduler and clock:
    lc = ks.loop_cycles(m, ks.H100_SXM)   # the 8 loads cost issue slots
    assert lc["bound"] == "issue" and lc["cycles"] == 18.0 and lc["pipes"]["fma"] == 16.0
    m.update(fp64=0, dfma=32, ffma=0, total=40)
    assert ks.loop_cycles(m, ks.H100_SXM)["bound"] == "fp64"


_DIVIDE = r'''
extern "C" __global__ void divide(float* out, const float* x, long long total, long long k) {
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long i = idx / k;
        out[idx] = fmaf(x[i], 2.0f, (float)(idx - i * k));
    }
}
'''


def test_out_of_line_division_is_counted_in_the_loop(tools):
    """ptxas puts a 64-bit division in a subroutine called from the loop: its integer work counts."""
    res = nvrtc.compile_source(_DIVIDE, "divide.cu", nvrtc.cupy_options((), 90))
    assert res.ok, res.log
    instrs = ks.parse_sass(ks.disassemble(res.binary, tools))["divide"]
    body, span = ks.hot_loop(instrs)
    lo, hi = (int(a, 16) for a in (hex(span[0]), hex(span[1])))
    inside = [i for i in instrs if lo <= i.addr <= hi]
    assert any(i.base == "CALL" for i in inside), "expected ptxas to call its 64-bit division"
    assert ks.mix(body)["int"] >= ks.mix(inside)["int"] + 10 and any(i.base == "RET" for i in body)


def test_cvm_core_split_fills_the_device_with_whole_tiles():
    """The CVM search's first pass: few candidate blocks split the core set into slices of whole
    16-row tiles until the grid reaches SPLIT_TARGET_BLOCKS; the slices cover every core row once."""
    from gpuksvm.solvers.cvm.scan import CVM_ZROWS, SPLIT_TARGET_BLOCKS, core_split

    assert core_split(2, 1000) == (63, 16)            # the sampled search: 413 candidates, 126 blocks
    assert core_split(4000, 1000) == (1, 1008)        # the exact scan of 1M rows: enough blocks already
    assert core_split(1, 0) == (1, 16)                # no core vectors yet
    for blocks, m in [(1, 1), (2, 17), (3, 5000), (100, 700), (300, 64)]:
        n_split, per = core_split(blocks, m)
        assert per % CVM_ZROWS == 0 and (n_split - 1) * per < m <= n_split * per
        assert blocks * n_split >= min(SPLIT_TARGET_BLOCKS, blocks * -(-m // CVM_ZROWS))


def test_cvm_candidate_blocks_spread_the_candidates_in_whole_warps():
    """The first pass spreads the candidates evenly over the fewest blocks of 256 in whole warps:
    every candidate has one slot, no block has more than 256, and no block has a warp to spare
    beyond the even share (413 candidates: 2 blocks of 224, not 256 + 157)."""
    from gpuksvm.solvers.cvm.scan import candidate_blocks

    assert candidate_blocks(413) == (2, 224)
    assert candidate_blocks(1_000_000) == (3907, 256)
    for n in [1, 31, 32, 33, 255, 256, 257, 413, 512, 513, 4097, 99_999]:
        blocks, per = candidate_blocks(n)
        assert per % 32 == 0 and 32 <= per <= 256 and blocks == -(-n // 256)
        assert (blocks - 1) * per < n <= blocks * per          # the last block has a candidate
        assert per - 32 < -(-n // blocks) <= per                  # the even share, rounded to a warp


def test_cvm_search_meets_half_the_roofline_at_d784(rows):
    """The CVM search's first pass, f32 on sm_90 at d = 784 (predicted): at least half the H100
    roofline for the sampled search of 413 candidates and for the exact scan of 1M rows."""
    (r,) = [r for r in rows if r["kernel"] == "cvm_partial_f32" and r["arch"] == "sm_90"]
    frac = r["roofline_fraction"]
    assert frac["sampled 413 d=784"] >= 0.5 and frac["exact 1M d=784"] >= 0.5, frac
    m = r["inner_loop"]
    assert m["ffma"] == 256 and m["lds_widths"] == {"128": m["lds"]}, m   # no norm FFMAs, 16-byte loads only


def test_own_row_loads_are_four_wavefronts():
    """A 16-byte shared load by 32 distinct lanes is 4 wavefronts; a broadcast one, 1."""
    m = {c: 0 for c in ks.CLASSES} | {"lds_widths": {"128": 68}, "sts_widths": {}, "ldg_widths": {},
                                       "stg_widths": {}}
    m.update(ffma=256, lds=68, total=324)
    broadcast = ks.loop_cycles(m, ks.H100_SXM, shared_distinct=1.0)["pipes"]["shared"]
    own = ks.loop_cycles(m, ks.H100_SXM, shared_distinct=1.0, own_rows={"128": 4})["pipes"]["shared"]
    assert broadcast == 68.0 and own == 64.0 + 4 * 4.0


def test_a_call_to_the_loop_exit_is_not_a_subroutine():
    """sm_80's ptxas leaves some loops by CALL.REL.NOINC to the instruction after the backward
    branch: nothing after the loop joins its body; a real subroutine (ending in RET) does."""
    ins = [ks.Instr(0x0, "FFMA", "R1, R2, R3, R1"), ks.Instr(0x10, "CALL.REL.NOINC", "0x30"),
           ks.Instr(0x20, "BRA", "0x0"), ks.Instr(0x30, "FFMA", "R4, R4, R4, R4"), ks.Instr(0x40, "EXIT", ""),
           ks.Instr(0x50, "IADD3", "R1, R1, 1"), ks.Instr(0x60, "RET.REL.NODEC", "R20 0x0")]
    assert ks.with_callees(ins, ins[:3]) == ins[:3]
    called = ins[:1] + [ks.Instr(0x10, "CALL.REL.NOINC", "0x50")] + ins[2:3]
    assert ks.with_callees(ins, called) == called + ins[5:7]


def test_cvm_chunks_follow_the_padded_rows():
    """cvm_partial's hot-loop iterations per tile: rows padded to 16-byte vectors, the last chunk at
    width 2, 4, 8 or 16 of the data columns."""
    assert ks.cvm_chunks(784, 4) == ks.cvm_chunks(784, 8) == 49
    assert ks.cvm_chunks(2, 4) == ks.cvm_chunks(2, 8) == 2 / 16
    assert ks.cvm_chunks(22, 4) == ks.cvm_chunks(22, 8) == 1 + 8 / 16
    assert ks.cvm_chunks(30, 4) == 2 and ks.cvm_chunks(30, 8) == 1 + 16 / 16
