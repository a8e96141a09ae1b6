"""bench/gpu_model.py: the tracer's accounting, the H100 cost model and its calibration (issue 17).

The model predicts GPU times from traces of the emulated GPU; before anything
trusts it, it must reproduce SPEC §7's H100 measurements within 2×
(:func:`test_calibration_within_2x`).  The tracer's counts are checked on
programs whose operations are known, and the NumPy twins that stand in for the
CPU emulator when tracing at scale are checked against the emulator.
"""
from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import gpuemu
from gpuemu import build as _emu_build

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

pytestmark = pytest.mark.skipif(_emu_build.compiler() is None,
                                reason="the emulated GPU needs a C++ compiler (g++)")


@pytest.fixture(scope="module")
def gm(_emulator):
    """bench/gpu_model.py imported as a module, sys.path restored (it puts bench/ and tests/ there)."""
    saved = list(sys.path)
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("gpu_model")
    finally:
        sys.path[:] = saved


@pytest.fixture(scope="module")
def cost(gm):
    return gm.cost


# ----------------------------------------------------------------------------- the formula
def test_predicted_time_is_the_issue_formula(cost):
    """T = Σ max(host cost, FLOPs/peak, bytes/bandwidth) + syncs × sync cost + PCIe bytes / PCIe bandwidth."""
    c = cost.const
    tr = cost.Tracer()
    small = cost.Op("ufunc", "add", site="a", shapes=((10,),), bytes_read=80, bytes_written=40,
                    host="LAUNCH_ELEMENTWISE_S")                                   # launch-bound
    gemm = cost.Op("function", "matmul", site="b", shapes=((4096, 4096),), flops=2 * 4096.0**3,
                   bytes_read=2 * 4096**2 * 4, bytes_written=4096**2 * 4, rate="gemm32", host="LAUNCH_GEMM_S")
    copy = cost.Op("function", "copyto", site="c", shapes=((2**28,),), bytes_read=2**30, bytes_written=2**30,
                   host="LAUNCH_ELEMENTWISE_S")                                    # bandwidth-bound
    get = cost.Op("d2h", "ndarray.item", site="d", sync=True, launches=0, pcie_bytes=4)
    put = cost.Op("h2d", "array", site="e", launches=0, host="H2D_CALL_S", pcie_bytes=10**6)
    for op, n in ((small, 7), (gemm, 2), (copy, 1), (get, 3), (put, 1)):
        tr.add(op, n)
    s = cost.summarize(list(tr.groups.values()))
    want = (7 * c("LAUNCH_ELEMENTWISE_S") + 2 * 2 * 4096.0**3 / c("GEMM_FP32") + 2**31 / c("HBM_BYTES_PER_S")
            + c("H2D_CALL_S") + 3 * c("SYNC_S") + (3 * 4 + 10**6) / c("PCIE_BYTES_PER_S"))
    assert s["predicted_s"] == pytest.approx(want, rel=1e-12)
    assert (s["ops"], s["syncs"], s["pcie_bytes"]) == (11, 3, 10**6 + 12)
    assert s["launches"] == 10          # the transfers launch no kernel
    assert s["top_ops"][0]["op"] == "matmul @ b"


#: an ``extern "C"`` kernel's name in a .cu source: after ``__global__``, the return type and any
#: ``__launch_bounds__(...)``, in either order, up to the opening parenthesis of its parameters
_EXTERN_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+(?:(?:void|__launch_bounds__\s*\([^)]*\))\s+)+(\w+)\s*\(')


def test_every_kernel_has_a_cost_formula_and_a_twin(cost):
    """Every ``extern "C"`` kernel in kernels_cuda/*.cu, read from the sources themselves, has a
    cost formula (the tracer raises on a launch without one) and a NumPy twin (traces at scale)."""
    from gpuksvm.array import cuda_sources as _cuda
    found = {}
    for src in sorted((ROOT / "kernels_cuda").glob("*.cu")):
        names = _EXTERN_KERNEL.findall(src.read_text())
        assert len(names) == src.read_text().count('extern "C"'), f"{src.name}: a kernel the pattern misses"
        found.update({n: src.name for n in names})
    assert set(found) == {n for src in _cuda.cuda_sources() for n in _cuda.signatures(src.stem)}
    missing = sorted(n for n in found if cost.kernel_family(n) not in cost.KERNEL_COSTS)
    assert not missing, f"no cost formula in bench/_gpu_cost.py for {missing}"
    untwinned = sorted(n for n in found if cost.kernel_family(n) not in cost.TWINS)
    assert not untwinned, f"no NumPy twin registered in bench/_gpu_cost.py for {untwinned}"


# ----------------------------------------------------------------------------- the tracer
def test_tracer_records_operations_syncs_and_copies(cost):
    from gpuksvm.array import cuda_sources as _cuda
    from gpuksvm.kernels.kernel import Kernel, kernel_block
    with gpuemu.emulated_gpu() as cp:
        x = np.arange(1000, dtype=np.float32) - 500
        tr = cost.Tracer()
        with tr:
            d = cp.asarray(x)                       # h2d: 4,000 bytes
            y = d * 2                               # one elementwise launch: reads 4,000, writes 4,000
            s = y.sum()                             # one reduction launch
            v = float(s)                            # sync: 4 bytes back
            head = d[:10]                           # a view: no launch
            pos = d[d > 0]                          # comparison + mask gather: implicit sync
            nz = cp.flatnonzero(d)                  # implicit sync
            K = kernel_block(d[:64].reshape(16, 4), d[64:96].reshape(8, 4), Kernel("rbf", gamma=0.1),
                             method="tiled")        # one RawKernel launch (+ norms)
    assert v == float((x * 2).sum()) and head.shape == (10,) and pos.shape == (499,) and nz.shape == (999,)
    assert K.shape == (16, 8)
    groups = list(tr.groups.values())
    by: dict = {}
    for g in groups:                     # summed per op name (a name may be called at several sites)
        b = by.setdefault(g["name"], {**g, **{q: 0 for q in ("count", "launches", "syncs", "implicit_syncs",
                                                              "bytes", "pcie_bytes")}})
        for q in ("count", "launches", "syncs", "implicit_syncs", "bytes", "pcie_bytes"):
            b[q] += g[q]
    assert by["array"]["pcie_bytes"] == 4000 and by["array"]["kind"] == "h2d"
    assert by["multiply"]["launches"] == 1 and by["multiply"]["bytes"] == 8000
    assert by["float"]["syncs"] == 1 and by["float"]["pcie_bytes"] == 4
    assert by["getitem"]["implicit_syncs"] == 1          # d[d > 0]; d[:10] was a view
    assert by["flatnonzero"]["implicit_syncs"] == 1
    kern = by["kernel_block_tiled_f32"]
    assert kern["kernel"]["grid"] == [1, 1, 1] and kern["kernel"]["block"] == [16, 16, 1]
    assert kern["flops"] == pytest.approx(2 * 16 * 8 * 4 + 16 * 8 * 8)
    s = tr.summary()
    assert s["syncs"] == 3 and s["raw_kernel_launches"] == 1
    assert sum(1 for g in groups if g["kind"] == "kernel") == 1
    assert _cuda.launch_counts().get("kernel_block_tiled_f32", 0) >= 1


def _solve_ws(cp, use_twins: bool, cost):
    from gpuksvm.kernels.kernel import Kernel
    from gpuksvm.solvers.smo.working_set import solve_working_set
    rng = np.random.default_rng(3)
    X = rng.normal(size=(260, 5)).astype(np.float32)
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=260) > 0, 1.0, -1.0)
    subs = [np.arange(0, 140), np.arange(140, 260)]
    tr = cost.Tracer(use_twins=use_twins)
    with tr:
        res = solve_working_set(cp.asarray(X), [y[s] for s in subs], subs, Kernel("rbf", gamma=0.5), [10.0, 10.0],
                                device="cuda", working_set_size=64)
    return res, tr


def test_twins_follow_the_kernels(cost):
    """At scale the tracer runs each RawKernel as its NumPy twin: the same results and op counts up to
    float32 rounding (the twin rounds differently from the compiled kernel: an SMO step more or less)."""
    from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_matvec
    from gpuksvm.solvers.cvm.meb import make_scanner
    from gpuksvm.array import backend as bk
    with gpuemu.emulated_gpu() as cp:
        (emu, t_emu), (twin, t_twin) = _solve_ws(cp, False, cost), _solve_ws(cp, True, cost)
        for a, b in zip(emu, twin):
            assert a.n_rounds == b.n_rounds and a.n_iter == pytest.approx(b.n_iter, rel=0.02)
            assert a.objective == pytest.approx(b.objective, rel=1e-4)
        assert t_emu.summary()["predicted_s"] == pytest.approx(t_twin.summary()["predicted_s"], rel=0.02)
        assert t_emu.summary()["ops"] == t_twin.summary()["ops"]
        assert any(g["kernel"] and g["kernel"]["substituted"] for g in t_twin.groups.values())
        rng = np.random.default_rng(0)
        X = cp.asarray(rng.normal(size=(150, 6)).astype(np.float32))
        Z = cp.asarray(rng.normal(size=(70, 6)).astype(np.float32))
        V = cp.asarray(rng.normal(size=(70, 3)).astype(np.float32))
        kern = Kernel("rbf", gamma=0.3)
        out = {}
        for twins in (False, True):
            with cost.Tracer(use_twins=twins):
                sc = make_scanner(X, np.sign(rng.normal(size=150)), kern, None, 10.0, np.dtype(np.float32),
                                  bk.Device("cuda", 0))
                for i in (3, 50, 99):
                    sc.append(i)
                coef, b = sc.set_alpha(np.array([0.5, 0.3, 0.2]))
                out[twins] = (kernel_block(X, Z, kern, method="tiled").get(),
                              kernel_block(X, Z, kern, method="gemm").get(),
                              kernel_matvec(X, Z, V, kern, method="fused").get(),
                              sc.scores(np.arange(0, 150, 2), coef, b),           # cvm_scores
                              sc.exact_min(None, coef, b), sc.group_min(np.arange(150).reshape(3, 50), coef, b),
                              sc.exact_scan(None, coef, b, 1.0, 5)[0])
            rng = np.random.default_rng(0)
            X = cp.asarray(rng.normal(size=(150, 6)).astype(np.float32))
            Z = cp.asarray(rng.normal(size=(70, 6)).astype(np.float32))
            V = cp.asarray(rng.normal(size=(70, 3)).astype(np.float32))
    for a, b in zip(out[False][:4], out[True][:4]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert out[False][4][1] == out[True][4][1]
    np.testing.assert_array_equal(out[False][5][1], out[True][5][1])
    np.testing.assert_array_equal(out[False][6], out[True][6])


# ----------------------------------------------------------------------------- extrapolation
def test_extrapolation_recomputes_each_op_at_the_target_size(gm, cost):
    """A launch-bound op at the traced sizes that grows with n is bandwidth-bound at the target."""
    def trace(n):
        tr = cost.Tracer()
        tr.add(cost.Op("ufunc", "exp", site="s", shapes=((n,),), bytes_read=4 * n, bytes_written=4 * n,
                       host="LAUNCH_ELEMENTWISE_S"), 3)
        tr.add(cost.Op("reduction", "sum", site="t", shapes=((8,),), bytes_read=32, host="LAUNCH_REDUCTION_S"), 5)
        tr.add(cost.Op("d2h", "ndarray.get", site="u", sync=True, launches=0, pcie_bytes=8), 5)
        return {"rows": n, "groups": list(tr.groups.values()), "host_work_s": 0.0}
    ex = gm.extrapolate([trace(1000), trace(2000)], 10**8)
    direct = cost.summarize(trace(10**8)["groups"])
    assert ex["predicted_s"] == pytest.approx(direct["predicted_s"], rel=1e-9)
    assert ex["syncs"] == 5
    assert cost.summarize(trace(2000)["groups"])["launch_bound_s"] > 0 and direct["launch_bound_s"] < ex["op_s"]


# ----------------------------------------------------------------------------- calibration
def _committed_llsvm(gm) -> dict | None:
    path = BENCH / "results" / "gpu_model.json"
    data = json.loads(path.read_text())
    label = data.get("calibration_label")
    return data["runs"][label]["llsvm_prototype"] if label else None


def test_calibration_within_2x(gm):
    """Every SPEC §7 H100 figure that constrains the model is reproduced within 2×.

    GEMM and copy rates are the model's constants and eigh's rate is fitted to its one figure
    (listed for completeness); the tiled RBF blocks (d = 22 and d = 2) test the raw-kernel cost
    formula; the LLSVM figures test the whole model on the prototype's algorithm (traced at the
    papers' scale by ``python bench/gpu_model.py --only llsvm_prototype``, read from the
    committed JSON).  The plain-CuPy RBF figure is checked apart (next test)."""
    proto = _committed_llsvm(gm)
    assert proto is not None, "bench/results/gpu_model.json has no llsvm_prototype trace: run bench/gpu_model.py"
    cal = gm.calibration(proto)
    assert set(cal) == set(gm.FIGURES)
    for key, c in cal.items():
        if key == "rbf_plain":
            continue
        assert 0.5 <= c["ratio"] <= 2.0, f"{key}: model {c['predicted_s']:.4g} s vs measured {c['measured_s']:.4g} s"


def test_plain_cupy_figure_contradicts_the_bandwidth(gm):
    """SPEC §7's 14.8 ms for the plain-CuPy RBF block cannot be bench/kernels.py's code on an
    H100: the bytes it must move (GEMM output, then six elementwise passes with temporaries)
    take more than twice that at HBM3's 3.35 TB/s *peak*.  So that figure is reported, not used."""
    with gpuemu.emulated_gpu() as cp:
        runs = []
        for n in (4096, 8192):
            r = gm._rbf_trace(cp, n, 2000, 22, "plain")
            r["rows"] = n
            runs.append(r)
    ex = gm.extrapolate(runs, 1_000_000)
    moved = sum(g["bytes"] for g in ex["groups"])
    assert moved / 3.35e12 > 2 * gm.FIGURES["rbf_plain"][0]
    assert moved > 9 * 8e9            # ≥ 9 passes over the 1e6 × 2000 float32 block
