"""The GPU stand-in fails and rounds as CuPy and NVRTC do (checked against CuPy's source:
cupy/linalg/_decomposition.py, _solve.py, _util.py, cupyx/_ufunc_config.py,
cupy/_core/_routines_sorting.pyx).  The ``gpu`` tests hold on a real GPU too (they check CuPy's
behaviour that the stand-in copies); the others check the stand-in against LAPACK and the
emulator's build."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg.lapack as lapack

from gpuemu import build, launcher

from conftest import GPU_MODE

emulated_only = pytest.mark.skipif(GPU_MODE != "emulated", reason=f"GPU mode is {GPU_MODE}, not emulated")

INDEFINITE = np.array([[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 2.0]])   # 2nd leading minor is 0
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])


# ----------------------------------------------------------------------------- failed factorizations
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_of_an_indefinite_matrix_is_silent_unless_asked(gpu, dtype):
    import cupyx

    A = gpu.asarray(INDEFINITE.astype(dtype))
    L = gpu.linalg.cholesky(A)
    # cuSOLVER goes on through the zero pivot (as returned on an H200, CUDA 13.2, CuPy 14.2.0)
    assert L.dtype == dtype
    np.testing.assert_array_equal(L.get(), np.array([[2.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.5, np.inf, np.nan]]))
    with cupyx.errstate(linalg="raise"):
        with pytest.raises(np.linalg.LinAlgError, match="potrf"):
            gpu.linalg.cholesky(A)
        gpu.linalg.cholesky(A + 10 * gpu.eye(3, dtype=dtype))      # a definite one passes
    assert cupyx.geterr()["linalg"] == "ignore"                    # the state is restored
    gpu.linalg.cholesky(A)


@pytest.mark.gpu
def test_solve_and_inv_of_a_singular_matrix_are_silent_unless_asked(gpu):
    import cupyx

    S = gpu.asarray(SINGULAR)
    x = gpu.linalg.solve(S, gpu.ones(2)).get()
    assert not np.isfinite(x).all()                                 # getrs divided by U's zero pivot
    assert not np.isfinite(gpu.linalg.inv(S).get()).all()
    with cupyx.errstate(linalg="raise"):
        for f in (lambda: gpu.linalg.solve(S, gpu.ones(2)), lambda: gpu.linalg.inv(S)):
            with pytest.raises(np.linalg.LinAlgError, match="getrf"):
                f()


@pytest.mark.gpu
def test_triangular_solve_does_not_check_the_diagonal(gpu):
    from cupyx.scipy.linalg import solve_triangular

    L = np.tril(np.ones((3, 3)))
    L[1, 1] = 0.0
    x = solve_triangular(gpu.asarray(L), gpu.ones(3), lower=True).get()   # cuBLAS trsm: no check
    assert x[0] == 1.0 and not np.isfinite(x[1:]).all()


@emulated_only
@pytest.mark.gpu
def test_the_stand_in_returns_lapacks_partial_results(gpu):
    c, info = lapack.dpotrf(INDEFINITE, lower=1, clean=0)
    assert info == 2
    with np.errstate(all="ignore"):      # the factorization continued through the zero pivot
        want = np.tril(c)
        want[1, 1] = 0.0
        want[2, 1] = (INDEFINITE[2, 1] - want[2, 0] * want[1, 0]) / want[1, 1]
        want[2, 2] = np.sqrt(INDEFINITE[2, 2] - want[2, 0] ** 2 - want[2, 1] ** 2)
    np.testing.assert_array_equal(gpu.linalg.cholesky(gpu.asarray(INDEFINITE)).get(), want)
    negative = np.array([[1.0, 2.0], [2.0, 1.0]])          # a negative pivot: its root is NaN
    assert np.isnan(gpu.linalg.cholesky(gpu.asarray(negative)).get()[1, 1])
    stack = np.stack([INDEFINITE, INDEFINITE + 10 * np.eye(3)])
    Ls = gpu.linalg.cholesky(gpu.asarray(stack)).get()
    np.testing.assert_array_equal(Ls[0], want)
    np.testing.assert_allclose(Ls[1], np.linalg.cholesky(stack[1]), rtol=1e-14)
    lu, piv, info = lapack.dgetrf(SINGULAR)
    assert info == 2
    np.testing.assert_array_equal(gpu.linalg.solve(gpu.asarray(SINGULAR), gpu.ones(2)).get(),
                                  lapack.dgetrs(lu, piv, np.ones(2))[0])
    np.testing.assert_array_equal(gpu.linalg.inv(gpu.asarray(SINGULAR)).get(),     # getrs of the identity
                                  lapack.dgetrs(lu, piv, np.eye(2))[0])
    w, V = gpu.linalg.eigh(gpu.asarray(np.full((2, 2), np.nan)))       # syevd's output, no raise
    assert w.shape == (2,) and V.shape == (2, 2)


@pytest.mark.gpu
def test_errstate_is_cupys(gpu):
    """cupyx.errstate / seterr: keyword-only, only linalg in ('ignore', 'raise'), thread-local."""
    import threading

    from cupyx import _ufunc_config as cfg

    with pytest.raises(TypeError):
        cfg.errstate("raise")
    for bad in ({"divide": "raise"}, {"invalid": "ignore"}, {"linalg": "warn"}):
        with pytest.raises(NotImplementedError):
            cfg.seterr(**bad)
    with cfg.errstate(linalg="raise"):
        seen = []
        t = threading.Thread(target=lambda: seen.append(cfg.get_config_linalg()))
        t.start()
        t.join()
        assert cfg.get_config_linalg() == "raise" and seen == ["ignore"]
    assert cfg.geterr() == {"divide": None, "over": None, "under": None, "invalid": None, "linalg": "ignore"}


# ----------------------------------------------------------------------------- sorting
@pytest.mark.gpu
def test_argsort_is_stable(gpu):
    x = np.tile(np.array([3.0, 1.0, 2.0, 1.0, 0.0, 3.0]), 40)
    want = np.argsort(x, kind="stable")
    assert not np.array_equal(np.argsort(x), want)       # NumPy's default sort is not stable here
    np.testing.assert_array_equal(gpu.argsort(gpu.asarray(x)).get(), want)
    np.testing.assert_array_equal(gpu.asarray(x).argsort().get(), want)
    X = x.reshape(12, 20)
    np.testing.assert_array_equal(gpu.argsort(gpu.asarray(X), axis=0).get(), np.argsort(X, axis=0, kind="stable"))
    with pytest.raises(ValueError, match="kind"):
        gpu.argsort(gpu.asarray(x), kind="quicksort")


@pytest.mark.gpu
def test_argpartition_as_cupy(gpu):
    """Short rows or a large kth: a full sort.  Otherwise the max_k = max(32, 2^bit_length(kth))
    smallest come first, sorted, the rest in no promised order."""
    rng = np.random.default_rng(0)
    short = rng.normal(size=20)
    np.testing.assert_array_equal(gpu.argpartition(gpu.asarray(short), 3).get(), np.argsort(short))
    x = rng.normal(size=5000)
    p = gpu.argpartition(gpu.asarray(x), 9).get()
    np.testing.assert_array_equal(np.sort(p), np.arange(5000))
    np.testing.assert_array_equal(x[p[:32]], np.sort(x)[:32])
    assert x[p[32:]].min() >= x[p[31]]
    np.testing.assert_array_equal(gpu.argpartition(gpu.asarray(x), 600).get(), np.argsort(x))
    with pytest.raises(ValueError, match="out of bounds"):
        gpu.argpartition(gpu.asarray(x), 5000)


# ----------------------------------------------------------------------------- FMA contraction
FMA_PROBE = 'extern "C" __global__ void madd(const float* a, float* out) { out[0] = a[0] * a[1] + a[2]; }\n'


@pytest.mark.parametrize("fma", ["auto", "on", "off"])
def test_emulator_fuses_multiply_adds_as_nvrtc(monkeypatch, fma):
    """(1 + 2⁻¹²)² − (1 + 2⁻¹¹) is 2⁻²⁴ fused and 0 rounded twice: the emulator fuses (as NVRTC's
    default -fmad=true does) when the CPU can, with GPUEMU_FMA unset too, and GPUEMU_FMA=off builds
    without."""
    if build.compiler() is None:
        pytest.skip("no C++ compiler")
    if fma != "off" and not build.cpu_has_fma():
        pytest.skip("this CPU has no FMA instructions")
    if fma == "auto":
        monkeypatch.delenv("GPUEMU_FMA", raising=False)
    else:
        monkeypatch.setenv("GPUEMU_FMA", fma)
    mod = launcher.Module(FMA_PROBE, "madd.cu", [], view_of=lambda x: x if isinstance(x, np.ndarray) else None)
    a = np.array([1 + 2.0 ** -12, 1 + 2.0 ** -12, -(1 + 2.0 ** -11)], dtype=np.float32)
    out = np.full(1, np.nan, dtype=np.float32)
    mod.get_function("madd")((1,), (1,), (a, out))
    assert out[0] == (0.0 if fma == "off" else np.float32(2.0 ** -24))
    assert build.fma_contraction() == (fma != "off")
    monkeypatch.setenv("GPUEMU_FMA", "sometimes")
    with pytest.raises(build.BuildError, match="GPUEMU_FMA"):
        build.flags()


@pytest.mark.gpu
def test_smo_candidates_on_tied_keys_match_the_cpu(gpu):
    """Equal gradients (ties in the I_up / I_low keys): the working-set candidates are the same
    rows on the CPU and the GPU, whose sort is stable."""
    from gpuksvm.solvers.smo.working_set import _round_state

    rng = np.random.default_rng(3)
    P, n1 = 2, 200
    y = np.where(rng.random((P, n1)) < 0.5, -1.0, 1.0)
    C = np.ones((P, n1))
    a = np.where(rng.random((P, n1)) < 0.5, 0.0, 0.5)
    F = rng.integers(-2, 3, size=(P, n1)).astype(np.float64)      # five distinct values: ties
    keep = np.zeros((P, 0), dtype=np.int64)
    host = _round_state(y, C, a, F, keep, 40, np)
    dev = _round_state(*(gpu.asarray(v) for v in (y, C, a, F, keep)), 40, gpu)
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d, h)
