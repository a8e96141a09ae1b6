"""Every CUDA kernel against its NumPy twin, launched by the library's own launch code.

Ragged shapes (tile remainders, one row, one column, strided output rows), every
kernel function and both dtypes.  On a real GPU these run on the device; in the
emulated mode on the CPU emulator, where a barrier or bound missing from a kernel
shows up as a wrong result, a fault, a divergent barrier or a UBSan trap — the
mutation check at the end proves it: every barrier and every bound removed from
a kernel, one at a time, makes one of these checks fail.
"""
from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpuemu import build as emu_build, launcher
from gpuksvm.array import cuda_sources as _cuda
from gpuksvm.kernels import kernel as K
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.cvm import meb, scan as cvm_scan
from gpuksvm.solvers.smo import cuda_launch as smo_cuda, working_set as smo_working_set

from conftest import EMULATED_FULL, GPU_MODE

pytestmark = pytest.mark.gpu

KERNELS = [Kernel("rbf", gamma=0.3), Kernel("poly", gamma=0.2, coef0=1.0, degree=3), Kernel("linear"),
           Kernel("sigmoid", gamma=0.05, coef0=-0.2)]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _relerr(a, b) -> float:
    if b.size == 0:
        return 0.0
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(1.0, np.abs(b).max()))


# ----------------------------------------------------------------------------- the checks
def check_epilogue(cp, dtype, kern, n, k, ldpad, seed=0):
    rng = np.random.default_rng(seed)
    X, Z = rng.normal(size=(n, 7)), rng.normal(size=(k, 7))
    G = X @ Z.T
    xn, zn = (X * X).sum(1), (Z * Z).sum(1)
    ref = K.epilogue_numpy(G.copy(), xn, zn, kern)
    buf = cp.zeros((n, k + ldpad), dtype=dtype)     # rows padded: a view buf[:, :k], ldg = k + ldpad
    buf[:, :k] = cp.asarray(G, dtype=dtype)
    rbf = kern.name == "rbf"
    K._epilogue_gpu(buf[:, :k], cp.asarray(xn, dtype=dtype) if rbf else None,
                    cp.asarray(zn, dtype=dtype) if rbf else None, kern)
    out = buf.get()
    assert _relerr(out[:, :k], ref) <= TOL[dtype] * 10
    assert np.all(out[:, k:] == 0), "the epilogue wrote into the row padding"


def check_tiled(cp, dtype, kern, n, k, d, seed=1, max_grid_y=None):
    rng = np.random.default_rng(seed)
    X, Z = rng.normal(size=(n, d)) / np.sqrt(d), rng.normal(size=(k, d)) / np.sqrt(d)
    ref = K.kernel_block(X, Z, kern)
    out = cp.full((n + 3, k), np.nan, dtype=dtype)   # rows 2 .. n+1 of a larger array
    Xd, Zd = cp.asarray(X, dtype=dtype), cp.asarray(Z, dtype=dtype)
    rbf = kern.name == "rbf"
    saved = K._MAX_GRID_Y
    K._MAX_GRID_Y = max_grid_y or saved
    try:
        K._tiled_block_gpu(Xd, Zd, K.row_sq_norms(Xd, dtype) if rbf else None,
                           K.row_sq_norms(Zd, dtype) if rbf else None, out[2:n + 2], kern)
    finally:
        K._MAX_GRID_Y = saved
    o = out.get()
    assert _relerr(o[2:n + 2], ref) <= TOL[dtype] * 10
    assert np.isnan(o[:2]).all() and np.isnan(o[n + 2:]).all(), "the tiled kernel wrote outside its rows"


def check_matvec(cp, dtype, kern, n, k, d, m, seed=3):
    rng = np.random.default_rng(seed)
    X, Z, V = rng.normal(size=(n, d)) / np.sqrt(d), rng.normal(size=(k, d)) / np.sqrt(d), rng.normal(size=(k, m))
    out = cp.empty((n, m), dtype=dtype)
    K._fused_matvec_gpu(*(cp.asarray(a, dtype=dtype) for a in (X, Z, V)), out, kern)
    ref = K.kernel_block(X, Z, kern) @ V
    assert _relerr(out.get(), ref) <= (1e-4 if dtype == np.float32 else 1e-11)


def _subproblems(P, ws, pad, rng):
    X = rng.normal(size=(P, ws, 3))
    Kww = np.exp(-0.5 * ((X[:, :, None, :] - X[:, None, :, :]) ** 2).sum(-1))
    y = np.where(rng.random((P, ws)) < 0.5, -1.0, 1.0)
    if pad:
        y[:, -pad:] = 0.0                      # padding slots never move
    C = np.ones((P, ws))
    a = np.where(rng.random((P, ws)) < 0.5, 0.0, rng.random((P, ws)))
    a[y == 0] = 0
    F = rng.normal(size=(P, ws))
    active = rng.random(P) < 0.8
    active[0] = True
    return Kww, y, C, a, F, active


def check_smo(cp, dtype, P, ws, pad, seed=4):
    rng = np.random.default_rng(seed)
    Kww, y, C, a, F, act = [v.astype(dtype) if v.dtype.kind == "f" else v for v in _subproblems(P, ws, pad, rng)]
    tol, max_inner = 1e-3, (10 * ws if ws <= 100 else 50)
    a_h, n_h, g_h = smo_working_set.solve_subproblems_host(Kww, y, C, a, F, act, tol, max_inner)
    a_d, n_d, g_d = smo_cuda._solve_subproblems_cuda(*(cp.asarray(v) for v in (Kww, y, C, a, F)), act, tol, max_inner)
    assert np.array_equal(n_d.get(), n_h), (n_d.get(), n_h)
    assert max(_relerr(a_d.get(), a_h), _relerr(g_d.get(), g_h)) <= TOL[dtype] * 100


def check_round_keys(cp, dtype, P, n1, n_keep, seed=6):
    """The fused round decisions of the working-set solver against round_keys_host: padding rows
    (y = 0), bounds hit (α = 0, α = C), kept rows (distinct, plus the dummy last row repeated)."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random((P, n1)) < 0.5, -1.0, 1.0)
    y[:, -1] = 0.0                                        # the dummy row
    y[:, : n1 // 7] *= rng.random((P, n1 // 7)) < 0.8      # some padding
    C = np.where(y != 0, 1.0 + rng.random((P, n1)), 0.0)
    u = rng.random((P, n1))
    a = np.where(u < 0.3, 0.0, np.where(u < 0.5, C, C * rng.random((P, n1))))
    F = rng.normal(size=(P, n1)).astype(dtype)
    keep = np.full((P, n_keep), n1 - 1, dtype=np.int64)
    for p in range(P):
        k = min(n_keep - 1, n1 - 1) if n_keep else 0
        keep[p, :k] = rng.choice(n1 - 1, size=k, replace=False)
    args = [v.astype(dtype) for v in (y, C, a)] + [F]
    su_h, sl_h, st_h = smo_working_set.round_keys_host(*args, keep)
    su_d, sl_d, st_d = smo_cuda._round_keys_cuda(*(cp.asarray(v) for v in args), cp.asarray(keep))
    assert np.array_equal(su_d.get(), su_h) and np.array_equal(sl_d.get(), sl_h)
    st = st_d.get()
    assert np.array_equal(st[:, [0, 2, 3]], st_h[:, [0, 2, 3]]), (st, st_h)
    assert _relerr(st[:, 1], st_h[:, 1]) <= 1e-12


def check_cvm(cp, dtype, kern, n, d, m, labels, scale, subset, seed=5, far_row=None, unsplit=False):
    """``far_row``: that row is moved far from the others (and kept out of the core set), so it
    is the furthest point of a one-class problem: the arg-min then sits at a chosen thread of a
    chosen block (a block-reduction bug that loses high slots cannot hide).  ``unsplit``: the
    core set is not split over blocks (every block takes all its tiles in sequence, as with many
    candidates; a small test's few blocks otherwise get one tile each)."""
    target = cvm_scan.SPLIT_TARGET_BLOCKS
    cvm_scan.SPLIT_TARGET_BLOCKS = 1 if unsplit else target
    try:
        _check_cvm(cp, dtype, kern, n, d, m, labels, scale, subset, seed, far_row)
    finally:
        cvm_scan.SPLIT_TARGET_BLOCKS = target


def _check_cvm(cp, dtype, kern, n, d, m, labels, scale, subset, seed, far_row):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if far_row is not None:
        X[far_row] = 10.0
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0) if labels else None
    xscale = 1.0 / np.sqrt(1.0 + rng.random(n)) if scale else None
    host = meb.HostScanner(X.astype(dtype), y, kern, None if xscale is None else xscale.astype(dtype), 2.0, dtype)
    # the GPU scanner gets float64 inputs: it must cast them to its dtype at the kernel boundary
    dev = meb.GpuScanner(cp.asarray(X), y, kern, None if xscale is None else cp.asarray(xscale), 2.0, dtype)
    core = rng.choice(np.setdiff1d(np.arange(n), [] if far_row is None else [far_row]), size=m, replace=False)
    for s in (host, dev):
        for i in core:
            s.append(int(i))
    alpha = rng.random(m)
    alpha /= alpha.sum()
    (ch, bh), (cd, bd) = host.set_alpha(alpha), dev.set_alpha(alpha)
    idx = np.sort(rng.choice(n, size=n // 2, replace=False)).astype(np.int64) if subset else None
    (sh, ih), (sd, i_d) = host.exact_min(idx, ch, bh), dev.exact_min(idx, cd, bd)
    groups = rng.integers(0, n, size=(4, 59))
    (gh, ah), (gd, ad) = host.group_min(groups, ch, bh), dev.group_min(groups, cd, bd)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert abs(sh - sd) / max(1.0, abs(sh)) <= tol and _relerr(gd, gh) <= tol
    if dtype == np.float64:
        assert ih == i_d and np.array_equal(ah, ad)
    if far_row is not None:
        assert ih == far_row
    # cvm_scores_*: every candidate's s (the sampled search), and the exact scan built on it
    rows = np.arange(n, dtype=np.int64) if idx is None else idx
    sc_h, sc_d = host.scores(rows, ch, bh), dev.scores(rows, cd, bd)
    assert sc_d.shape == sc_h.shape and _relerr(sc_d, sc_h) <= tol
    q = float(np.median(sc_h))
    (th, tsh, vh), (td, tsd, vd) = host.exact_scan(idx, ch, bh, q, 9), dev.exact_scan(idx, cd, bd, q, 9)
    assert abs(vd - vh) <= tol * max(1.0, abs(vh)) and _relerr(tsd, tsh) <= tol
    if dtype == np.float64:
        assert np.array_equal(td, th)


# ----------------------------------------------------------------------------- the twin tests
DTYPES = [np.float32, np.float64]
ids = dict(ids=lambda v: v.name if isinstance(v, Kernel) else np.dtype(v).name if isinstance(v, type) else str(v))


@pytest.mark.parametrize("dtype", DTYPES, **ids)
@pytest.mark.parametrize("kern", [k for k in KERNELS if k.name != "linear"], **ids)
@pytest.mark.parametrize("n,k,ldpad", [(1, 1, 0), (5, 7, 3), (300, 257, 0), (3, 1000, 5)])
def test_epilogue(gpu, dtype, kern, n, k, ldpad):
    check_epilogue(gpu, dtype, kern, n, k, ldpad)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
@pytest.mark.parametrize("kern", KERNELS, **ids)
# d=130: full slices and a remainder at either slice width (float 2 x 64 + 2, double 4 x 32 + 2)
@pytest.mark.parametrize("n,k,d", [(1, 1, 1), (63, 65, 16), (130, 100, 33), (65, 1, 64), (70, 66, 130)])
def test_tiled_block(gpu, dtype, kern, n, k, d):
    check_tiled(gpu, dtype, kern, n, k, d)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
def test_tiled_block_grid_stride(gpu, dtype):
    """gridDim.y clamped (as for n > 65535·64): the row-tile loop strides."""
    check_tiled(gpu, dtype, KERNELS[0], 333, 70, 5, max_grid_y=2)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
@pytest.mark.parametrize("kern", KERNELS, **ids)
@pytest.mark.parametrize("n,k,d,m", [(1, 1, 1, 1), (127, 63, 17, 3), (129, 65, 64, 16), (300, 200, 1, 1)])
def test_fused_matvec(gpu, dtype, kern, n, k, d, m):
    check_matvec(gpu, dtype, kern, n, k, d, m)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
@pytest.mark.parametrize("P,ws,pad", [(1, 2, 0), (3, 6, 1), (5, 32, 0), (4, 64, 3), (2, 100, 4), (1, 1024, 0)])
def test_smo_subproblem(gpu, dtype, P, ws, pad):
    check_smo(gpu, dtype, P, ws, pad)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
@pytest.mark.parametrize("P,n1,n_keep", [(1, 2, 0), (1, 2, 1), (3, 300, 17), (2, 1025, 512), (5, 3000, 64),
                                         (1, 4097, 1)])
def test_smo_round_keys(gpu, dtype, P, n1, n_keep):
    check_round_keys(gpu, dtype, P, n1, n_keep)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
@pytest.mark.parametrize("kern", KERNELS[:3], **ids)
@pytest.mark.parametrize("n,d,m,labels,scale,subset", [
    (300, 5, 7, True, False, False), (1000, 40, 3, True, True, False), (257, 1, 1, False, False, False),
    (600, 200, 4, True, False, True), (2000, 33, 130, False, True, True),
    # d=28: a last chunk of 12 columns (float: 3 of 4 vectors, double: 6 of 8)
    (300, 28, 20, True, True, False)])
def test_cvm_furthest(gpu, dtype, kern, n, d, m, labels, scale, subset):
    check_cvm(gpu, dtype, kern, n, d, m, labels, scale, subset)


@pytest.mark.parametrize("dtype", DTYPES, **ids)
def test_cvm_furthest_tiles_in_sequence(gpu, dtype):
    """The core set unsplit: a block takes its 3 tiles (16, 16 and 8 core rows) one after another."""
    check_cvm(gpu, dtype, KERNELS[0], 300, 20, 40, True, False, False, unsplit=True)


@pytest.mark.parametrize("n,far_row", [(256, 200), (40_000, 150 * 255 + 3)],
                         ids=["thread 200 of one block", "block 150 of 157"])
def test_cvm_furthest_in_high_slots(gpu, n, far_row):
    """The minimum held by a high thread (first reduction) or a high block (last-block reduction)."""
    check_cvm(gpu, np.float64, KERNELS[0], n, 1, 3, False, False, False, far_row=far_row)


# ----------------------------------------------------------------------------- mutation check
@dataclass(frozen=True)
class Mutant:
    name: str
    source: str          # kernels_cuda file
    old: str             # text replaced (its n-th occurrence)
    new: str
    occurrence: int = 0


def _barrier_mutants() -> list[Mutant]:
    """One mutant per __syncthreads() in every source and header: the barrier removed."""
    out = []
    for src in _cuda.cuda_sources() + sorted(_cuda.cuda_source_dir().glob("*.cuh")):
        text = src.read_text()
        for i, mt in enumerate(re.finditer(r"__syncthreads\(\);", text)):
            line = text.count("\n", 0, mt.start()) + 1
            out.append(Mutant(f"{src.stem}:{line} no barrier", src.name, "__syncthreads();", ";", i))
    return out


#: Every bound check of the kernels (index < size guards and tile-remainder clamps), each removed.
BOUND_MUTANTS = [
    Mutant("kernel_block: epilogue loop bound idx < total", "kernel_block.cu",
           "idx < total;", "idx < total + (long long)blockDim.x;"),
    Mutant("kernel_block: tiled load row bound g < n_rows", "kernel_block.cu",
           "const bool in = g < n_rows && (!tail", "const bool in = (!tail"),
    Mutant("kernel_block: tiled load feature bound of the last slice", "kernel_block.cu",
           "(!tail || k0 + cl + 8 * h < d)", "true"),
    Mutant("kernel_block: tiled store bound i < n", "kernel_block.cu", "if (i >= n) continue;", ""),
    Mutant("kernel_block: tiled store bound j < k", "kernel_block.cu", "if (j >= k) continue;", ""),
    Mutant("kernel_matvec: row clamp of the row pointers", "kernel_matvec.cu", "min(i, n - 1)", "i"),
    Mutant("kernel_matvec: row bound on store", "kernel_matvec.cu", "if (i < n) {", "{"),
    Mutant("kernel_matvec: column bound on store", "kernel_matvec.cu", "if (c < m) out", "out"),
    Mutant("kernel_matvec: tile remainder clamp", "kernel_matvec.cu", "min(GK_ZROWS, k - t0)", "GK_ZROWS"),
    Mutant("common: full chunks end at d", "common.cuh", "c0 + DC <= d", "c0 < d"),
    Mutant("common: tile row bound on load of Z (full chunk)", "common.cuh", "r < rows ? zc", "true ? zc"),
    Mutant("common: column bound on load of X (last chunk)", "common.cuh", "c < cols ? rowptr", "true ? rowptr"),
    Mutant("common: column bound on load of Z (last chunk)", "common.cuh", "(r < rows && c < cols) ? zc",
           "(r < rows) ? zc"),
    Mutant("common: tile row bound on staging V", "common.cuh", "e < rows * vcols", "e < R * vcols"),
    Mutant("common: tile row bound of the kernel values r < rows", "common.cuh", "r < rows; ++r", "r < R; ++r"),
    Mutant("smo: thread bound tid < ws", "smo.cu", "const bool valid = tid < ws;", "const bool valid = true;"),
    Mutant("smo: warp reduction skips its last shuffle", "smo.cu", "o > 0; o >>= 1", "o > 1; o >>= 1"),
    Mutant("smo: block reduction stops at the warp with two warps", "smo.cu", "if (nwarps == 1) {",
           "if (nwarps <= 2) {"),
    Mutant("smo: round keys row bound i < i1", "smo.cu", "i < i1;", "i < i1 + SMO_RK_BLOCK;"),
    Mutant("smo: round keys chunk end clamp", "smo.cu", "if (i1 > n1) i1 = n1;", ""),
    Mutant("smo: round keys reduction bound tid < w", "smo.cu", "if (tid < w) {", "{"),
    Mutant("smo: round finish kept-row bound j < n_keep", "smo.cu", "j < n_keep;", "j < n_keep + 1;"),
    Mutant("smo: round finish chunk bound c < n_chunks", "smo.cu", "c < n_chunks;", "c < n_chunks + 1;"),
    Mutant("cvm: candidate clamp of the row pointers", "cvm.cu",
           "(j < per_block && first + j < n_cand) ? first + j : n_cand - 1", "first + j"),
    Mutant("cvm: partial store bound", "cvm.cu", "if (active) partial", "partial"),
    Mutant("cvm: a block's candidates start at per_block", "cvm.cu", "blockIdx.x * per_block;",
           "blockIdx.x * CVM_BLOCK;"),
    Mutant("cvm: slice end clamp z1 <= m", "cvm.cu", "min(m, z0 + rows_per_split)", "z0 + rows_per_split"),
    Mutant("cvm: tile remainder clamp", "cvm.cu", "min(CVM_ZROWS, z1 - t0)", "CVM_ZROWS"),
    Mutant("cvm: candidate bound c < g1", "cvm.cu", "c < g1;", "c <= g1;"),
    Mutant("cvm: group end clamp g1 <= n_cand", "cvm.cu", "if (g1 > n_cand) g1 = n_cand;", ""),
    Mutant("cvm: slice bound p < n_split", "cvm.cu", "p < n_split;", "p <= n_split;"),
    Mutant("cvm: reduction bound tid < w", "cvm.cu", "if (tid < w) {", "{"),
]

#: The probes of a source: (label, check) run on a mutant until one fails.
PROBES = {
    "kernel_block.cu": [
        ("tiled f64 rbf 130x100 d=33", lambda cp: check_tiled(cp, np.float64, KERNELS[0], 130, 100, 33)),
        ("tiled f64 linear 65x1 d=64", lambda cp: check_tiled(cp, np.float64, KERNELS[2], 65, 1, 64)),
        ("tiled f64 rbf 333x70 d=5 grid-stride", lambda cp: check_tiled(cp, np.float64, KERNELS[0], 333, 70, 5,
                                                                         max_grid_y=2)),
        ("epilogue f64 rbf 5x7 pad 3", lambda cp: check_epilogue(cp, np.float64, KERNELS[0], 5, 7, 3)),
    ],
    "kernel_matvec.cu": [
        ("matvec f64 rbf 127x63 d=17 m=3", lambda cp: check_matvec(cp, np.float64, KERNELS[0], 127, 63, 17, 3)),
        ("matvec f64 poly 129x65 d=64 m=16", lambda cp: check_matvec(cp, np.float64, KERNELS[1], 129, 65, 64, 16)),
    ],
    "smo.cu": [
        ("smo f64 P=3 ws=6 pad 1", lambda cp: check_smo(cp, np.float64, 3, 6, 1)),
        ("smo f64 P=4 ws=64 pad 3", lambda cp: check_smo(cp, np.float64, 4, 64, 3)),
        ("round keys f64 P=3 n1=300 keep 17", lambda cp: check_round_keys(cp, np.float64, 3, 300, 17)),
        ("round keys f64 P=2 n1=1025 keep 512", lambda cp: check_round_keys(cp, np.float64, 2, 1025, 512)),
    ],
    "common.cuh": [
        ("matvec f64 rbf 127x63 d=17 m=3", lambda cp: check_matvec(cp, np.float64, KERNELS[0], 127, 63, 17, 3)),
        ("matvec f64 poly 129x65 d=64 m=16", lambda cp: check_matvec(cp, np.float64, KERNELS[1], 129, 65, 64, 16)),
        ("cvm f64 poly n=2000 m=130 subset",
         lambda cp: check_cvm(cp, np.float64, KERNELS[1], 2000, 33, 130, False, True, True)),
    ],
    "cvm.cu": [
        ("cvm f64 rbf n=300 m=7", lambda cp: check_cvm(cp, np.float64, KERNELS[0], 300, 5, 7, True, False, False)),
        ("cvm f64 rbf n=300 m=40 unsplit", lambda cp: check_cvm(cp, np.float64, KERNELS[0], 300, 20, 40, True,
                                                                False, False, unsplit=True)),
        ("cvm f64 poly n=2000 m=130 subset",
         lambda cp: check_cvm(cp, np.float64, KERNELS[1], 2000, 33, 130, False, True, True)),
        ("cvm f64 rbf n=257 (ragged groups)", lambda cp: check_cvm(cp, np.float64, KERNELS[0], 257, 1, 1,
                                                                  False, False, False)),
        ("cvm f64 min at thread 200", lambda cp: check_cvm(cp, np.float64, KERNELS[0], 256, 1, 3, False, False,
                                                           False, far_row=200)),
        ("cvm f64 min in block 150", lambda cp: check_cvm(cp, np.float64, KERNELS[0], 40_000, 1, 3, False,
                                                          False, False, far_row=150 * 255 + 3)),
    ],
}

ALL_MUTANTS = _barrier_mutants() + BOUND_MUTANTS
#: The subset every CI run checks: per source, its first barrier and its first bound mutant.
CI_MUTANTS = {m.name for src in PROBES for m in (
    [x for x in _barrier_mutants() if x.source == src][:1] + [x for x in BOUND_MUTANTS if x.source == src][:1])}
MUTATION_REPORT = Path(__file__).resolve().parent.parent / ".gpu-mutation-report.json"


def _mutated_dir(tmp_path: Path, mutant: Mutant) -> Path:
    d = tmp_path / "kernels_cuda"
    d.mkdir()
    for f in _cuda.cuda_source_dir().iterdir():
        if f.suffix in (".cu", ".cuh"):
            (d / f.name).write_text(f.read_text())
    text = (d / mutant.source).read_text()
    starts = [mt.start() for mt in re.finditer(re.escape(mutant.old), text)]
    assert len(starts) > mutant.occurrence, f"{mutant.name}: {mutant.old!r} not in {mutant.source}"
    pos = starts[mutant.occurrence]
    (d / mutant.source).write_text(text[:pos] + mutant.new + text[pos + len(mutant.old):])
    return d


#: The sources whose kernels a header's probes launch: its mutant's libraries (an emulator library
#: hashes every header of its folder, so a header's mutant changes every source's library).
PROBED_SOURCES = {"common.cuh": ("kernel_matvec.cu", "cvm.cu")}


@pytest.fixture(scope="module", autouse=True)
def mutant_builds(request, tmp_path_factory):
    """Each selected mutant's folder and the builds of its emulator libraries, started with the
    module: two g++ at a time beside the other tests (the libraries are cached by content, so the
    mutant's probes load them).  Built one by one inside the tests, the ten CI mutants took 52 s
    with a cold cache, 14 s with a warm one (a quiet 2-core machine)."""
    selected = {item.callspec.params["mutant"].name for item in request.session.items
                if item.originalname == "test_mutant_is_caught"}
    run = [m for m in ALL_MUTANTS if m.name in selected and (EMULATED_FULL or m.name in CI_MUTANTS)]
    if GPU_MODE != "emulated" or not run:
        yield {}
        return
    pool = ThreadPoolExecutor(2)        # g++ runs in subprocesses: threads suffice
    out = {}
    for m in run:
        d = _mutated_dir(tmp_path_factory.mktemp("mutant"), m)
        out[m.name] = (d, [pool.submit(emu_build.build, (d / s).read_text(), "kern.cu", [d])
                           for s in PROBED_SOURCES.get(m.source, (m.source,))])
    try:
        yield out
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("mutant", ALL_MUTANTS, ids=lambda m: m.name)
def test_mutant_is_caught(gpu, mutant, mutant_builds, monkeypatch):
    if GPU_MODE != "emulated":
        pytest.skip("the mutation check runs on the emulator")
    if mutant.name not in CI_MUTANTS and not EMULATED_FULL:
        pytest.skip("full mutation sweep: GPUEMU_FULL=1 (CI runs one barrier and one bound per source)")
    src, builds = mutant_builds[mutant.name]
    wait(builds)     # a build that failed is built again by the probe that loads it, and fails there
    monkeypatch.setattr(_cuda, "cuda_source_dir", lambda: src)
    monkeypatch.setattr(_cuda, "_modules", {})
    _cuda.signatures.cache_clear()
    try:
        caught = None
        for label, probe in PROBES[mutant.source]:
            for order in ("forward", "reverse", "random"):
                monkeypatch.setattr(launcher.settings, "order", order)
                try:
                    probe(gpu)
                except Exception as exc:   # noqa: BLE001 - any failure of a check catches the mutant
                    caught = f"{label} [{order}]: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                    break
            if caught:
                break
    finally:
        _cuda.signatures.cache_clear()
    report = json.loads(MUTATION_REPORT.read_text()) if MUTATION_REPORT.exists() else {}
    report[mutant.name] = caught or "NOT CAUGHT"
    MUTATION_REPORT.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    assert caught, f"mutant {mutant.name!r} passed every probe of {mutant.source}"
