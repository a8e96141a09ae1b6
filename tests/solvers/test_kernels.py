import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import (
    Kernel,
    kernel_block,
    kernel_diag,
    kernel_matvec,
    make_kernel,
    resolve_gamma,
)

KERNELS = [Kernel("rbf", gamma=0.3), Kernel("poly", gamma=0.2, degree=3, coef0=1.0),
           Kernel("linear"), Kernel("sigmoid", gamma=0.05, coef0=0.1)]


def reference(X, Z, k):
    if k.name == "rbf":
        return rbf_kernel(X, Z, gamma=k.gamma)
    if k.name == "poly":
        return polynomial_kernel(X, Z, degree=k.degree, gamma=k.gamma, coef0=k.coef0)
    if k.name == "sigmoid":
        return sigmoid_kernel(X, Z, gamma=k.gamma, coef0=k.coef0)
    return linear_kernel(X, Z)


def relerr(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


SHAPES = [(1, 1, 1), (1, 5, 3), (7, 1, 3), (40, 17, 1), (123, 45, 9)]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("shape", SHAPES)
def test_block_matches_sklearn_float64(kernel, shape, rng):
    n, k, d = shape
    X, Z = rng.normal(size=(n, d)), rng.normal(size=(k, d))
    ref = reference(X, Z, kernel)
    K = kernel_block(X, Z, kernel)
    assert K.dtype == np.float64 and K.shape == (n, k)
    assert relerr(K, ref) < 1e-12


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_block_float32(kernel, rng):
    X, Z = rng.normal(size=(200, 11)), rng.normal(size=(30, 11))
    ref = reference(X, Z, kernel)
    K = kernel_block(X.astype(np.float32), Z.astype(np.float32), kernel)
    assert K.dtype == np.float32
    assert relerr(K, ref) < 1e-5


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_block_sparse(kernel, rng):
    X = sp.random(60, 20, density=0.2, format="csr", random_state=1)
    Z = sp.random(9, 20, density=0.3, format="csr", random_state=2)
    ref = reference(X.toarray(), Z.toarray(), kernel)
    assert relerr(kernel_block(X, Z.toarray(), kernel), ref) < 1e-12
    assert relerr(kernel_block(X, Z, kernel), ref) < 1e-12
    assert relerr(kernel_block(X.tocsc(), Z, kernel), ref) < 1e-12


def test_awkward_layouts(rng):
    k = Kernel("rbf", gamma=0.5)
    X = rng.normal(size=(30, 8))
    Z = rng.normal(size=(12, 8))
    ref = reference(X, Z, k)
    assert relerr(kernel_block(np.asfortranarray(X), Z, k), ref) < 1e-12
    assert relerr(kernel_block(X[::2], Z[:, :], k), reference(X[::2], Z, k)) < 1e-12
    Xi = rng.integers(-3, 3, size=(10, 4))
    assert relerr(kernel_block(Xi, Xi, k), reference(Xi.astype(float), Xi.astype(float), k)) < 1e-12
    assert relerr(kernel_block(X.tolist(), Z.tolist(), k), ref) < 1e-12
    # a single 1-D row is read as one sample
    assert kernel_block(X[0], Z, k).shape == (1, 12)


def test_inputs_not_modified(rng):
    X = rng.normal(size=(20, 3))
    Z = rng.normal(size=(5, 3))
    X0, Z0 = X.copy(), Z.copy()
    for k in KERNELS:
        kernel_block(X, Z, k, block_rows=3)
        kernel_matvec(X, Z, np.ones(5), k)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Z, Z0)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("block", [1, 2, 3, 7, 50, 64, 1000])
def test_chunked_equals_unchunked(kernel, block, rng):
    X, Z = rng.normal(size=(64, 5)), rng.normal(size=(13, 5))
    full = kernel_block(X, Z, kernel, block_rows=10**6)
    # BLAS may round differently for different block shapes: equal to round-off
    np.testing.assert_allclose(kernel_block(X, Z, kernel, block_rows=block), full, rtol=1e-13, atol=1e-14)


def test_budget_drives_blocks(rng):
    X, Z = rng.normal(size=(500, 5)), rng.normal(size=(40, 5))
    k = Kernel("rbf", gamma=0.2)
    full = kernel_block(X, Z, k)
    with bk.config_context(cpu_memory_budget=4096):
        np.testing.assert_allclose(kernel_block(X, Z, k), full, rtol=1e-13)
        np.testing.assert_allclose(kernel_matvec(X, Z, np.ones(40), k), full.sum(1), rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 20), d=st.integers(1, 6), m=st.integers(1, 4),
       block=st.integers(1, 50), seed=st.integers(0, 1000))
def test_matvec_equals_block_times_v(n, k, d, m, block, seed):
    r = np.random.default_rng(seed)
    X, Z, V = r.normal(size=(n, d)), r.normal(size=(k, d)), r.normal(size=(k, m))
    for kern in KERNELS:
        ref = kernel_block(X, Z, kern) @ V
        out = kernel_matvec(X, Z, V, kern, block_rows=block)
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(kernel_matvec(X, Z, V[:, 0], kern), ref[:, 0], rtol=1e-10, atol=1e-10)


def test_matvec_sparse_and_errors(rng):
    X = sp.random(30, 10, density=0.3, format="csr", random_state=0)
    Z = rng.normal(size=(6, 10))
    V = rng.normal(size=6)
    k = Kernel("rbf", gamma=0.1)
    np.testing.assert_allclose(kernel_matvec(X, Z, V, k), reference(X.toarray(), Z, k) @ V, rtol=1e-12)
    with pytest.raises(ValueError, match="fused"):
        kernel_matvec(X, Z, V, k, method="fused")
    with pytest.raises(ValueError, match="rows"):
        kernel_matvec(X, Z, V[:3], k)
    with pytest.raises(ValueError, match="features"):
        kernel_block(rng.normal(size=(3, 4)), rng.normal(size=(3, 5)), k)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_diag(kernel, rng):
    X = rng.normal(size=(25, 4))
    np.testing.assert_allclose(kernel_diag(X, kernel), np.diag(reference(X, X, kernel)), rtol=1e-12)
    Xs = sp.csr_matrix(X)
    np.testing.assert_allclose(kernel_diag(Xs, kernel), np.diag(reference(X, X, kernel)), rtol=1e-12)


def test_rbf_clamp_float32():
    # identical rows far from the origin: the expanded form can go negative in float32
    X = np.full((4, 50), 1000.0, dtype=np.float32)
    K = kernel_block(X, X, Kernel("rbf", gamma=1.0))
    assert np.all(K <= 1.0) and np.all(np.isfinite(K))
    np.testing.assert_allclose(K, 1.0)


def test_gamma_resolution(rng):
    X = rng.normal(size=(50, 4)) * 3
    assert resolve_gamma("scale", X) == pytest.approx(1 / (4 * X.var()))
    assert resolve_gamma("auto", X) == 0.25
    from scipy.spatial.distance import pdist
    assert resolve_gamma("mean_dist", X) == pytest.approx(1 / pdist(X, "sqeuclidean").mean(), rel=1e-10)
    Xs = sp.csr_matrix(X)
    assert resolve_gamma("scale", Xs) == pytest.approx(resolve_gamma("scale", X))
    assert resolve_gamma("mean_dist", Xs) == pytest.approx(resolve_gamma("mean_dist", X))
    assert resolve_gamma("scale", np.ones((5, 2))) == 1.0
    assert resolve_gamma(2, X) == 2.0
    for bad in (0, -1.0, "fast", np.nan, True, None):
        with pytest.raises(ValueError):
            resolve_gamma(bad, X)


def test_make_kernel_and_validation(rng):
    X = rng.normal(size=(10, 3))
    k = make_kernel("rbf", "scale", X=X)
    assert k.name == "rbf" and k.constant_diag == 1.0
    assert make_kernel(k) is k
    assert make_kernel("polynomial", 0.5).name == "poly"
    assert make_kernel("linear", "scale").constant_diag is None
    np.testing.assert_allclose(k(X), reference(X, X, k))
    for bad in [dict(name="cosine"), dict(name="rbf", gamma=-1), dict(name="poly", degree=-2),
                dict(name="rbf", gamma=np.inf)]:
        with pytest.raises(ValueError):
            Kernel(**bad)
    with pytest.raises(ValueError):
        make_kernel(42)


# ----------------------------------------------------------------------------- GPU twins
@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-4)])
@pytest.mark.parametrize("method", ["gemm", "tiled"])
@pytest.mark.parametrize("shape", [(1000, 300, 22), (67, 5, 1), (130, 129, 64), (1, 1, 3)])
def test_gpu_block_matches_numpy_twin(gpu, kernel, dtype, tol, method, shape, rng):
    n, k, d = shape
    X, Z = rng.normal(size=(n, d)) / np.sqrt(d), rng.normal(size=(k, d)) / np.sqrt(d)
    ref = kernel_block(X, Z, kernel)
    Kg = kernel_block(gpu.asarray(X, dtype=dtype), gpu.asarray(Z, dtype=dtype), kernel, block_rows=257,
                      method=method)
    assert bk.array_kind(Kg) == "cupy" and Kg.dtype == dtype
    assert relerr(bk.to_host(Kg), ref) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["gemm", "tiled"])
def test_gpu_block_out_dtype_and_layout_checked(gpu, method, rng):
    """out= of another dtype (written through the kernel's T*: garbage) or Fortran order (the
    kernels write by row stride: wrong values) is refused; padded rows are fine (issue 13)."""
    X = gpu.asarray(rng.normal(size=(70, 5)), dtype=np.float32)
    k = Kernel("rbf", gamma=0.5)
    with pytest.raises(ValueError, match="dtype float64, expected float32"):
        kernel_block(X, X, k, out=gpu.zeros((70, 70)), method=method)
    with pytest.raises(ValueError, match="C-ordered"):
        kernel_block(X, X, k, out=gpu.zeros((70, 70), dtype=np.float32, order="F"), method=method)
    with pytest.raises(ValueError, match="CuPy array"):
        kernel_block(X, X, k, out=np.zeros((70, 70), dtype=np.float32), method=method)
    buf = gpu.zeros((70, 80), dtype=np.float32)
    kernel_block(X, X, k, out=buf[:, :70], method=method)
    ref = rbf_kernel(bk.to_host(X).astype(np.float64), gamma=0.5)
    assert relerr(bk.to_host(buf[:, :70]), ref) < 1e-5 and not bk.to_host(buf[:, 70:]).any()


def test_block_out_dtype_and_layout_checked_on_cpu(rng):
    X = rng.normal(size=(30, 4))
    with pytest.raises(ValueError, match="dtype float32, expected float64"):
        kernel_block(X, X, Kernel("rbf"), out=np.zeros((30, 30), dtype=np.float32))
    with pytest.raises(ValueError, match="C-ordered"):
        kernel_block(X, X, Kernel("rbf"), out=np.zeros((30, 30), order="F"))


@pytest.mark.gpu
def test_gpu_tiled_rejects_large_d(gpu, rng):
    X = gpu.asarray(rng.normal(size=(10, 100)))
    with pytest.raises(ValueError, match="tiled"):
        kernel_block(X, X, Kernel("rbf"), method="tiled")
    np.testing.assert_allclose(bk.to_host(kernel_block(X, X, Kernel("rbf", gamma=0.01))),
                               rbf_kernel(bk.to_host(X), gamma=0.01), rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("d", [1, 22, 64, 100])
def test_gpu_matvec_fused_and_blocked(gpu, kernel, d, rng):
    X, Z, V = rng.normal(size=(700, d)), rng.normal(size=(130, d)), rng.normal(size=(130, 3))
    ref = kernel_block(X, Z, kernel) @ V
    Xg, Zg, Vg = (gpu.asarray(a) for a in (X, Z, V))
    for method in (["blocked", "fused"] if d <= 64 else ["blocked"]):
        out = bk.to_host(kernel_matvec(Xg, Zg, Vg, kernel, method=method))
        np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
    out32 = bk.to_host(kernel_matvec(Xg.astype("float32"), Zg.astype("float32"), Vg.astype("float32"), kernel))
    assert relerr(out32, ref) < 1e-4


@pytest.mark.gpu
def test_gpu_sparse_block(gpu, rng):
    import cupyx.scipy.sparse as csp
    X = sp.random(80, 30, density=0.2, format="csr", random_state=0)
    Z = rng.normal(size=(10, 30))
    k = Kernel("rbf", gamma=0.3)
    Kg = kernel_block(csp.csr_matrix(X), gpu.asarray(Z), k)
    assert relerr(bk.to_host(Kg), reference(X.toarray(), Z, k)) < 1e-12
