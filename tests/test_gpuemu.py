"""The emulated GPU itself (tests/gpuemu): the fake CuPy is as strict as CuPy, every device
operation reaches the dispatch hooks, and the CPU emulator reports what a GPU would do wrong
(races, divergent barriers, overruns, UB, wrong argument types)."""
from __future__ import annotations

import numpy as np
import pytest

from gpuemu import build, dispatch, launcher
from gpuksvm.array import cuda_sources as _cuda

from conftest import GPU_MODE

needs_emulator = pytest.mark.skipif(GPU_MODE != "emulated", reason=f"GPU mode is {GPU_MODE}, not emulated")
pytestmark = needs_emulator


@pytest.fixture
def cp(gpu):
    return gpu


# ----------------------------------------------------------------------------- strict like CuPy
def test_no_implicit_conversion_to_numpy(cp):
    x = cp.arange(4.0)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(x)
    with pytest.raises(TypeError):
        np.dot(np.ones(4), x)
    np.testing.assert_array_equal(x.get(), np.arange(4.0))
    np.testing.assert_array_equal(cp.asnumpy(x), np.arange(4.0))


@pytest.mark.parametrize("op", [lambda cp, x, h: x + h, lambda cp, x, h: h * x, lambda cp, x, h: cp.add(x, h),
                                lambda cp, x, h: np.add(h, x), lambda cp, x, h: cp.maximum(x, h[0:1]),
                                lambda cp, x, h: x - np.array(1.0)])
def test_numpy_operands_refused(cp, op):
    x = cp.arange(3.0)
    with pytest.raises(TypeError, match="Unsupported type"):
        op(cp, x, np.ones(3))


def test_numpy_scalars_and_python_scalars_allowed(cp):
    x = cp.arange(3.0, dtype=np.float32)
    y = x * np.float32(2) + 1.0
    assert y.dtype == np.float32 and y.get().tolist() == [1.0, 3.0, 5.0]


def test_reductions_return_0d_device_arrays(cp):
    x = cp.arange(6.0).reshape(2, 3)
    for r in (x.sum(), cp.max(x), x.argmin(), cp.linalg.norm(x), x[1, 2]):
        assert isinstance(r, cp.ndarray) and r.shape == ()
    assert float(x.sum()) == 15.0 and int(x.argmax()) == 5 and bool(x[1, 2] == 5.0)


def test_empty_is_garbage(cp):
    assert np.isnan(cp.empty(5).get()).all()
    assert (cp.empty_like(cp.zeros(3, dtype=np.int64)).get() == -1).all()


def test_host_fill_refused_host_index_converted(cp):
    x = cp.zeros(4)
    with pytest.raises(ValueError, match="fill"):
        x[0:2] = np.array([1.0, 2.0])
    x[np.array([0, 2])] = np.array([1.0, 2.0])     # advanced index: CuPy copies the host values
    x[1:3] = cp.asarray([7.0, 8.0])
    assert x.get().tolist() == [1.0, 7.0, 8.0, 0.0]


def test_only_real_cupy_names(cp):
    assert callable(cp.take_along_axis)
    with pytest.raises(AttributeError, match="not in real CuPy"):
        cp.not_a_cupy_function


# ----------------------------------------------------------------------------- the dispatch hook
def test_every_device_operation_reaches_the_hook(cp):
    from gpuksvm.kernels.kernel import Kernel, kernel_block

    seen: list[dispatch.Event] = []
    with dispatch.hooked(seen.append):
        x = cp.asarray(np.arange(12.0).reshape(4, 3))       # h2d
        y = x * 2.0                                           # ufunc (operator)
        s = y.sum()                                           # reduction
        float(s)                                              # d2h, sync
        bool(s > 0)                                           # ufunc + d2h
        z = cp.linalg.cholesky(cp.eye(3))                     # linalg (eye: alloc)
        z.item() if z.size == 1 else z[0, 0].item()           # index + d2h
        cp.asnumpy(y)                                         # d2h
        kernel_block(x, x, Kernel("rbf", gamma=0.5), method="tiled")   # kernel launch among others
        cp.cuda.get_current_stream().synchronize()           # sync
    kinds = [(e.kind, e.name) for e in seen]
    for want in [("h2d", "array"), ("ufunc", "multiply"), ("reduction", "ndarray.sum"), ("d2h", "float"),
                 ("d2h", "bool"), ("linalg", "linalg.cholesky"), ("alloc", "eye"), ("d2h", "ndarray.item"),
                 ("d2h", "ndarray.get"), ("kernel", "kernel_block_tiled_f64"), ("sync", "Stream.synchronize")]:
        assert want in kinds, (want, kinds)
    launch = next(e for e in seen if e.kind == "kernel")
    assert launch.info["block"] == (16, 16, 1) and launch.info["grid"] == (1, 1, 1)
    assert launch.shapes()[:2] == [(4, 3), (4, 3)]
    assert all(e.sync == (e.kind in ("d2h", "sync")) for e in seen)
    mul = next(e for e in seen if e.name == "multiply")
    assert mul.shapes() == [(4, 3)] and mul.result.shape == (4, 3)


def test_hooks_are_removed_and_not_reentered(cp):
    calls = []

    def hook(ev):
        calls.append(ev.name)
        cp.zeros(1).sum()            # the hook's own device work is not reported

    with dispatch.hooked(hook):
        cp.ones(2) + 1
    n = len(calls)
    assert n == 2 and hook not in dispatch.hooks()
    cp.ones(2) + 1
    assert len(calls) == n


# ----------------------------------------------------------------------------- the emulator
PROBE_SRC = r'''
extern "C" __global__ void rotate(const float* x, float* out, int n) {
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    out[t] = s[(t + 1) % n];
}
extern "C" __global__ void rotate_racy(const float* x, float* out, int n) {
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = x[t];
    out[t] = s[(t + 1) % n];
}
extern "C" __global__ void divergent(float* out) {
    if (threadIdx.x < 16) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
extern "C" __global__ void overrun(float* out, int n) { out[threadIdx.x] = 1.0f; }
extern "C" __global__ void const_write(const float* x) { ((float*)x)[0] = 2.0f; }
extern "C" __global__ void fixed_array(float* out, int i) { float a[4] = {1, 2, 3, 4}; out[0] = a[i]; }
extern "C" __global__ void uninit_shared(float* out) { __shared__ float s[32]; out[threadIdx.x] = s[threadIdx.x]; }
extern "C" __global__ void warp_ops(const float* x, float* out, unsigned int* bal) {
    const int t = threadIdx.x;
    float v = x[t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);   // lane 0: its warp's sum
    float m = x[t];
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));   // every lane: max
    const float b = __shfl_sync(0xffffffffu, x[t], 3);          // lane 3 of the warp
    const float u = __shfl_up_sync(0xffffffffu, x[t], 1);       // lane - 1 (lane 0: its own)
    const unsigned votes = __ballot_sync(0xffffffffu, x[t] > 10.0f);
    __syncwarp();
    out[4 * t] = v; out[4 * t + 1] = m; out[4 * t + 2] = b; out[4 * t + 3] = u;
    if ((t & 31) == 0) bal[t / 32] = votes;
}
extern "C" __global__ void warp_split(const float* x, float* out) {
    const int t = threadIdx.x;
    if (t & 1) { out[t] = __shfl_xor_sync(0xffffffffu, x[t], 1); return; }
    __syncwarp();
    out[t] = x[t];
}
extern "C" __global__ void warp_exited(const float* x, float* out) {
    const int t = threadIdx.x;
    if (t >= 16) return;
    out[t] = __shfl_down_sync(0x0000ffffu, x[t], 8);
}
extern "C" __global__ void dyn_shared(float* out, int n) {
    extern __shared__ float d[];
    d[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = d[n - 1 - threadIdx.x];
}
'''


@pytest.fixture(scope="module")
def probes():
    if build.compiler() is None:
        pytest.skip("no C++ compiler")
    mod = launcher.Module(PROBE_SRC, "probe.cu", [], view_of=lambda x: x._a if hasattr(x, "_a") else None)
    return mod


def test_barrier_makes_shared_memory_order_independent(cp, probes, monkeypatch):
    x = cp.arange(64, dtype=np.float32)
    want = np.roll(np.arange(64, dtype=np.float32), -1)
    for order in launcher.ORDERS:
        monkeypatch.setattr(launcher.settings, "order", order)
        out = cp.zeros(64, dtype=np.float32)
        probes.get_function("rotate")((1,), (64,), (x, out, np.int32(64)))
        assert np.array_equal(out.get(), want), order
    # the same without the barrier is a race: some thread order reads poisoned shared memory
    results = set()
    for order in launcher.ORDERS:
        monkeypatch.setattr(launcher.settings, "order", order)
        out = cp.zeros(64, dtype=np.float32)
        probes.get_function("rotate_racy")((1,), (64,), (x, out, np.int32(64)))
        results.add(np.array_equal(out.get(), want))
    assert False in results


def test_warp_primitives_in_lock_step(cp, probes, monkeypatch):
    """Shuffles, ballot and __syncwarp give every lane its warp's values, in any thread order."""
    x = np.random.default_rng(0).permutation(64).astype(np.float32)
    w = x.reshape(2, 32)
    for order in launcher.ORDERS:
        monkeypatch.setattr(launcher.settings, "order", order)
        out, bal = cp.zeros(4 * 64, dtype=np.float32), cp.zeros(2, dtype=np.uint32)
        probes.get_function("warp_ops")((1,), (64,), (cp.asarray(x), out, bal))
        o = out.get().reshape(64, 4)
        assert np.array_equal(o[::32, 0], w.sum(axis=1)), order
        assert np.array_equal(o[:, 1], np.repeat(w.max(axis=1), 32))
        assert np.array_equal(o[:, 2], np.repeat(w[:, 3], 32))
        assert np.array_equal(o[:, 3], np.concatenate([[w[0, 0]], w[0, :-1], [w[1, 0]], w[1, :-1]]))
        want = [sum(1 << i for i in range(32) if row[i] > 10) for row in w]
        assert bal.get().tolist() == want


def test_warp_primitive_misuse_reported(cp, probes):
    """Lanes of one warp at different primitives, and a shuffle reading an exited lane."""
    x = cp.arange(32, dtype=np.float32)
    with pytest.raises(launcher.EmuError, match="lanes wait at different sites"):
        probes.get_function("warp_split")((1,), (32,), (x, cp.zeros(32, dtype=np.float32)))
    with pytest.raises(launcher.EmuError, match="has exited"):
        probes.get_function("warp_exited")((1,), (32,), (x, cp.zeros(32, dtype=np.float32)))


def test_divergent_barrier_reported(cp, probes):
    with pytest.raises(launcher.EmuError, match="divergent __syncthreads"):
        probes.get_function("divergent")((1,), (32,), (cp.zeros(32, dtype=np.float32),))


def test_overrun_faults_with_the_argument_named(cp, probes):
    out = cp.zeros(40, dtype=np.float32)
    with pytest.raises(launcher.EmuError, match=r"past the end of argument\(s\) float\* out"):
        probes.get_function("overrun")((1,), (41,), (out, np.int32(40)))
    probes.get_function("overrun")((1,), (40,), (out, np.int32(40)))     # in bounds: fine


def test_write_through_const_reported(cp, probes):
    with pytest.raises(launcher.EmuError, match="const argument"):
        probes.get_function("const_write")((1,), (1,), (cp.zeros(1, dtype=np.float32),))


def test_ubsan_trap_caught_with_the_line(cp, probes):
    with pytest.raises(launcher.EmuError, match=r"UBSan.*probe.cu:\d+"):
        probes.get_function("fixed_array")((1,), (1,), (cp.zeros(1, dtype=np.float32), np.int32(5)))


def test_shared_memory_is_poisoned(cp, probes):
    out = cp.zeros(32, dtype=np.float32)
    probes.get_function("uninit_shared")((1,), (32,), (out,))
    assert np.isnan(out.get()).all()


def test_dynamic_shared_memory_bounds(cp, probes):
    out = cp.zeros(32, dtype=np.float32)
    probes.get_function("dyn_shared")((1,), (32,), (out, np.int32(32)), shared_mem=128)
    assert (out.get() == 1).all()
    with pytest.raises(launcher.EmuError, match="SIGSEGV.*past the end of dynamic shared memory"):
        probes.get_function("dyn_shared")((1,), (32,), (out, np.int32(32)), shared_mem=64)


@pytest.mark.parametrize("args,match", [
    (lambda cp: (cp.zeros(4), cp.zeros(4, dtype=np.float32), np.int32(4)), "dtype float64"),
    (lambda cp: (cp.zeros(4, dtype=np.float32), cp.zeros(4, dtype=np.float32), 4), "int64 scalar"),
    (lambda cp: (cp.zeros(4, dtype=np.float32), np.zeros(4, dtype=np.float32), np.int32(4)), "numpy.ndarray"),
    (lambda cp: (cp.zeros(4, dtype=np.float32), cp.zeros(4, dtype=np.float32)), "2 arguments for 3"),
])
def test_argument_types_checked_against_the_signature(cp, probes, args, match):
    with pytest.raises(TypeError, match=match):
        probes.get_function("rotate")((1,), (4,), args(cp))


def test_invalid_launch_configuration(cp, probes):
    with pytest.raises(launcher.EmuError, match="invalid launch"):
        probes.get_function("overrun")((1,), (1025,), (cp.zeros(2000, dtype=np.float32), np.int32(2000)))


def test_raw_module_compiles_with_nvrtc(cp):
    from gpuemu import nvrtc
    try:
        nvrtc.load()
    except nvrtc.NvrtcUnavailable:
        pytest.skip("NVRTC not installed")
    bad = cp.RawModule(code='extern "C" __global__ void k(float* x) { x[0] = -INFINITY; }\n')
    with pytest.raises(cp.cuda.compiler.CompileException, match="INFINITY"):
        bad.get_function("k")


# ----------------------------------------------------------------------------- the launch helper
def test_launch_helper_counts_and_checks(cp):
    before = _cuda.launch_counts().get("kernel_epilogue_f32", 0)
    G = cp.ones((3, 4), dtype=np.float32)
    _cuda.launch_1d("kernel_block", "kernel_epilogue_f32", 12, (G, None, None, 3, 4, 4, 3, 0.5, 0.0, 3.0))
    assert _cuda.launch_counts()["kernel_epilogue_f32"] == before + 1
    np.testing.assert_allclose(G.get(), np.tanh(0.5), rtol=1e-6)
    bad = [
        ((cp.ones((3, 4)), None, None, 3, 4, 4, 3, 0.5, 0.0, 3.0), "dtype float64"),          # float64 for float*
        ((cp.ones((4, 3), dtype=np.float32).T, None, None, 3, 4, 4, 3, 0.5, 0.0, 3.0), "row stride"),  # F order
        ((G, None, None, 3, 4, 5, 3, 0.5, 0.0, 3.0), "row stride"),                           # wrong ldg
        ((G, None, None, 3, 4, 4, 2**31, 0.5, 0.0, 3.0), "is not a int"),                    # int overflow
        ((G, None, None, 3, 4, 4, np.int64(3), 0.5, 0.0, 3.0), "NumPy scalar of dtype int64"),
        ((G, None, None, 3.0, 4, 4, 3, 0.5, 0.0, 3.0), "is not a long long"),
        ((np.ones((3, 4), np.float32), None, None, 3, 4, 4, 3, 0.5, 0.0, 3.0), "expected a device array"),
    ]
    for args, match in bad:
        with pytest.raises(_cuda.KernelLaunchError, match=match):
            _cuda.launch_1d("kernel_block", "kernel_epilogue_f32", 12, args)


@pytest.mark.parametrize("name,block,match", [
    ("kernel_block_tiled_f32", (8, 8), r"assumes a \(16, 16, 1\)"),
    ("cvm_furthest_f32", (192,), "power-of-two"),
    ("cvm_furthest_f32", (512,), "at most 256"),
    ("smo_subproblem_f64", (32, 2), "power-of-two"),
    ("kernel_matvec_f32", (2048,), "invalid launch"),
])
def test_launch_geometry_rules(cp, name, block, match):
    module = {"kernel": "kernel_block", "cvm": "cvm", "smo": "smo"}.get(name.split("_")[0], "kernel_matvec")
    module = "kernel_matvec" if name.startswith("kernel_matvec") else module
    with pytest.raises(_cuda.KernelLaunchError, match=match):
        _cuda.launch(module, name, (1,), block, ())


def test_cupy_is_absent_outside_gpu_tests():
    """Outside a gpu test the machine looks like one without CuPy (no leak of the stand-in)."""
    import sys

    from gpuemu import FAKE_DIR

    assert not getattr(sys.modules.get("cupy"), "GPUEMU", False)
    assert str(FAKE_DIR) not in sys.path
