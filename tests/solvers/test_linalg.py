import numpy as np
import pytest

from gpuksvm.array import linalg
from gpuksvm.kernels.kernel import Kernel, kernel_block


def spd_stack(rng, b, k):
    A = rng.normal(size=(b, k, k))
    return A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(k)


def test_eigh_single_and_batched(rng):
    S = spd_stack(rng, 4, 6)
    w, U = linalg.eigh(S)
    assert w.shape == (4, 6) and U.shape == (4, 6, 6)
    for i in range(4):
        np.testing.assert_allclose(U[i] @ np.diag(w[i]) @ U[i].T, S[i], atol=1e-10)
    w0, U0 = linalg.eigh(S[0])
    np.testing.assert_allclose(w0, w[0], rtol=1e-12)
    with pytest.raises(ValueError):
        linalg.eigh(np.ones((2, 3)))


def test_inv_sqrt_whitens_full_rank(rng):
    S = spd_stack(rng, 1, 8)[0]
    M, w, kept = linalg.inv_sqrt_psd(S)
    assert kept == 8
    np.testing.assert_allclose(M.T @ S @ M, np.eye(8), atol=1e-9)
    # F F^T = K for the Nyström map of the landmarks themselves
    np.testing.assert_allclose((S @ M) @ (S @ M).T, S, atol=1e-8)


def test_inv_sqrt_floor_on_rank_deficient(rng):
    X = rng.normal(size=(10, 3))
    K = kernel_block(X, X, Kernel("linear"))  # rank 3
    for mode in ("clip", "drop"):
        M, w, kept = linalg.inv_sqrt_psd(K, floor=1e-10, mode=mode)
        assert kept == 3
        assert np.all(np.isfinite(M))
        assert w.min() >= 1e-10 * w.max() * (1 - 1e-12)
    Md, _, _ = linalg.inv_sqrt_psd(K, mode="drop")
    F = K @ Md
    np.testing.assert_allclose(F @ F.T, K, atol=1e-8)
    with pytest.raises(ValueError):
        linalg.inv_sqrt_psd(K, mode="zap")


def test_inv_sqrt_batched_matches_single(rng):
    S = spd_stack(rng, 3, 5)
    M, w, kept = linalg.inv_sqrt_psd(S)
    for i in range(3):
        Mi, wi, _ = linalg.inv_sqrt_psd(S[i])
        np.testing.assert_allclose(np.abs(M[i]), np.abs(Mi), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(w[i], wi, rtol=1e-12)


def test_cholesky_and_solve(rng):
    A = spd_stack(rng, 1, 7)[0]
    B = rng.normal(size=(7, 2))
    X = linalg.solve_spd(A, B)
    np.testing.assert_allclose(A @ X, B, atol=1e-10)
    G = rng.normal(size=(7, 7)) + 7 * np.eye(7)
    np.testing.assert_allclose(G @ linalg.solve(G, B), B, atol=1e-10)
    with pytest.raises(np.linalg.LinAlgError):
        linalg.cho_factor(-np.eye(3))
    L = linalg.cho_factor(np.zeros((3, 3)), jitter=1.0)
    np.testing.assert_allclose(L, np.eye(3))


@pytest.mark.gpu
def test_gpu_linalg_matches_numpy(gpu, rng):
    S = spd_stack(rng, 3, 16)
    M, w, _ = linalg.inv_sqrt_psd(S)
    Mg, wg, _ = linalg.inv_sqrt_psd(gpu.asarray(S))
    np.testing.assert_allclose(wg.get(), w, rtol=1e-10)
    for i in range(3):
        np.testing.assert_allclose((Mg[i].T @ gpu.asarray(S[i]) @ Mg[i]).get(), np.eye(16), atol=1e-8)
    B = rng.normal(size=(16, 3))
    np.testing.assert_allclose(linalg.solve_spd(gpu.asarray(S[0]), gpu.asarray(B)).get(),
                               linalg.solve_spd(S[0], B), rtol=1e-8)
