"""The RBF host epilogue compiled by numba (gpuksvm.kernels.compiled_rbf) against its NumPy twin and
scikit-learn's rbf_kernel: values within 2 units in the last place, the tails, NaN, and when it runs."""
import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from gpuksvm.kernels import compiled_rbf
from gpuksvm.kernels import kernel as kernel_module
from gpuksvm.kernels.kernel import Kernel, epilogue_host, epilogue_numpy, kernel_block

pytest.importorskip("numba")

_TAIL = np.exp(-708.0)     # below: the pass returns 0 (3.3·10⁻³⁰⁸, 1.5 times the smallest normal number)


def _ulps(got, ref):
    """|got − ref| in units in the last place of ref, where ref is at least exp(−708)."""
    computed = ref >= _TAIL
    return np.abs(got - ref)[computed] / np.spacing(ref[computed])


@pytest.mark.parametrize("gamma", [1e-9, 1e-3, 0.5, 2.0, 40.0])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0])
def test_block_within_two_ulps_of_the_numpy_twin(gamma, scale, rng):
    X = rng.normal(scale=scale, size=(70, 9))
    Z = rng.normal(scale=scale, size=(53, 9))
    G = X @ Z.T
    xn, zn = np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", Z, Z)
    ref = epilogue_numpy(G.copy(), xn, zn, Kernel("rbf", gamma=gamma))
    got = compiled_rbf.rbf_epilogue(G.copy(), xn, zn, gamma)
    assert _ulps(got, ref).max(initial=0.0) <= 2.0
    tail = ref < _TAIL                         # 0 where NumPy has values below exp(−708), or the same
    assert np.all((got[tail] == 0.0) | (got[tail] == ref[tail]))


def test_every_exponent_from_minus_708_to_0():
    """One row of 2·10⁶ arguments over the whole range the pass computes, and below it."""
    x = -np.linspace(0.0, 800.0, 2_000_001)
    G = np.zeros((1, x.size))
    got = compiled_rbf.rbf_epilogue(G, np.zeros(1), -x, 1.0)[0]    # d = ‖z‖² = −x, γ = 1
    ref = np.exp(x)
    assert _ulps(got, ref).max() <= 2.0
    assert np.all(got[x < -708.0] == 0.0)
    assert np.abs(got - ref)[x < -708.0].max() <= _TAIL
    assert got[0] == 1.0 and np.all(np.diff(got) <= 0.0)         # monotone, exact at 0


def test_negative_squared_distance_clamped_and_nan_kept():
    G = np.array([[1.0 + 1e-12, np.nan, 0.25]])       # −2G + 1 + 1 < 0 in the first column: clamped to 0
    got = compiled_rbf.rbf_epilogue(G, np.array([1.0]), np.array([1.0, 1.0, 1.0]), 3.0)
    assert got[0, 0] == 1.0 and np.isnan(got[0, 1])
    assert got[0, 2] == pytest.approx(np.exp(-4.5), rel=1e-15)


def test_refuses_blocks_it_cannot_write_in_place(rng):
    G = rng.normal(size=(6, 8))
    with pytest.raises(ValueError, match="C-contiguous 2-D float64"):
        compiled_rbf.rbf_epilogue(G[:, :5], np.ones(6), np.ones(5), 1.0)
    with pytest.raises(ValueError, match="C-contiguous 2-D float64"):
        compiled_rbf.rbf_epilogue(G.astype(np.float32), np.ones(6), np.ones(8), 1.0)
    for gamma in (-1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="finite gamma"):
            compiled_rbf.rbf_epilogue(G.copy(), np.ones(6), np.ones(8), gamma)
    for xn, zn in ((np.ones(5), np.ones(8)), (np.ones(6), np.ones(7)), (np.ones((6, 1)), np.ones(8))):
        with pytest.raises(ValueError, match="squared norms"):
            compiled_rbf.rbf_epilogue(G.copy(), xn, zn, 1.0)


def test_epilogue_host_takes_the_compiled_pass_only_when_asked_for_contiguous_float64_rbf(rng, monkeypatch):
    calls = []
    real = compiled_rbf.rbf_epilogue
    monkeypatch.setattr(compiled_rbf, "rbf_epilogue", lambda *a: calls.append(a[0].dtype) or real(*a))
    G = rng.normal(size=(5, 7))
    xn, zn = rng.random(5) + 3, rng.random(7) + 3
    rbf = Kernel("rbf", gamma=0.5)
    epilogue_host(G.copy(), xn, zn, rbf)                                   # not asked: NumPy's
    assert calls == []
    epilogue_host(G.copy(), xn, zn, rbf, compiled=True)
    epilogue_host(G.astype(np.float32), xn.astype(np.float32), zn.astype(np.float32), rbf, compiled=True)
    epilogue_host(np.zeros((5, 9))[:, :7], xn, zn, rbf, compiled=True)          # padded rows
    epilogue_host(G.copy(), None, None, Kernel("poly", gamma=0.5, degree=2, coef0=1.0), compiled=True)
    assert calls == [np.float64]
    monkeypatch.setattr(compiled_rbf, "AVAILABLE", False)      # without numba: the NumPy pass
    epilogue_host(G.copy(), xn, zn, rbf, compiled=True)
    assert calls == [np.float64]


def test_kernel_block_on_the_host_matches_sklearn_compiled_or_not(rng, monkeypatch):
    X, Z = rng.normal(size=(300, 6)), rng.normal(size=(90, 6))
    ref = rbf_kernel(X, Z, gamma=0.4)
    compiled = kernel_block(X, Z, Kernel("rbf", gamma=0.4), block_rows=64, compiled=True)
    twin = kernel_block(X, Z, Kernel("rbf", gamma=0.4), block_rows=64)
    np.testing.assert_array_equal(twin, epilogue_numpy(X @ Z.T, np.einsum("ij,ij->i", X, X),
                                                       np.einsum("ij,ij->i", Z, Z), Kernel("rbf", gamma=0.4)))
    np.testing.assert_allclose(compiled, ref, rtol=1e-13, atol=0)
    assert _ulps(compiled, twin).max() <= 2.0
    monkeypatch.setattr(kernel_module.compiled_rbf, "AVAILABLE", False)
    np.testing.assert_array_equal(kernel_block(X, Z, Kernel("rbf", gamma=0.4), block_rows=64, compiled=True), twin)


def test_the_search_engine_computes_its_gram_matrix_with_the_compiled_pass(monkeypatch):
    from gpuksvm.solvers.smo import path

    calls = []
    real = compiled_rbf.rbf_epilogue
    monkeypatch.setattr(compiled_rbf, "rbf_epilogue", lambda *a: calls.append(a[0].shape) or real(*a))
    X = np.random.default_rng(3).normal(size=(150, 4))
    cache = path.KernelRows(X, Kernel("rbf", gamma=0.3), budget=8 * 150 * 150)
    np.testing.assert_allclose(cache.matrix(), rbf_kernel(X, X, gamma=0.3), rtol=1e-13, atol=0)
    assert calls and sum(shape[0] for shape in calls) == 150
