"""Failed factorizations on a GPU: CuPy raises nothing unless ``cupyx.errstate(linalg="raise")``
and returns what cuSOLVER left, whose rows before the failing pivot look like a factor;
gpuksvm.array.linalg asks for the error, so every fallback that depends on it fires on a GPU as on
the CPU — each checked here on a matrix that is not positive definite, on the GPU of this run
(emulated: the stand-in returns what cuSOLVER returned on an H200, see tests/gpuemu/fake/cupy/linalg.py)."""
from __future__ import annotations

import numpy as np
import pytest

from gpuksvm.array import linalg
from gpuksvm.estimators.okfeb import OKFEB
from gpuksvm.solvers.linear.problem import Design
from gpuksvm.solvers.linear.newton import _cholesky_step, _newton_hessian
from gpuksvm.solvers.linear.newton_memory import DesignOracle

pytestmark = pytest.mark.gpu

INDEFINITE = np.array([[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 2.0]])   # 2nd leading minor is 0


def test_cupy_cholesky_of_an_indefinite_matrix_is_silent(gpu):
    """The premise: without the error state CuPy raises nothing, and the rows before the failing
    pivot hold the leading block's factor, finite; only the devInfo that CuPy reads under the error
    state says where the factorization failed (the NaN after the pivot is no rule: a failing
    pivot in the last column leaves a factor with a NaN or 0 on the diagonal alone)."""
    L = gpu.linalg.cholesky(gpu.asarray(INDEFINITE)).get()
    np.testing.assert_allclose(L[:1, :1], np.linalg.cholesky(INDEFINITE[:1, :1]), rtol=1e-15)
    assert np.isfinite(L[:2]).all() and L[1, 1] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cho_factor_raises_on_an_indefinite_matrix(gpu, dtype):
    A = INDEFINITE.astype(dtype)
    with pytest.raises(np.linalg.LinAlgError):
        linalg.cho_factor(A)
    with pytest.raises(np.linalg.LinAlgError):
        linalg.cho_factor(gpu.asarray(A))
    with pytest.raises(np.linalg.LinAlgError):
        linalg.solve_spd(gpu.asarray(A), gpu.ones((3, 2), dtype=dtype))
    L = linalg.cho_factor(gpu.asarray(A), jitter=10.0)          # made definite: factored
    np.testing.assert_allclose(L.get(), linalg.cho_factor(A, jitter=10.0), rtol=1e-5)


def test_solve_raises_on_a_singular_matrix(gpu):
    S = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError):
        linalg.solve(S, np.ones(2))
    with pytest.raises(np.linalg.LinAlgError):
        linalg.solve(gpu.asarray(S), gpu.ones(2))
    np.testing.assert_allclose(linalg.solve(gpu.asarray(S + np.eye(2)), gpu.ones(2)).get(),
                               linalg.solve(S + np.eye(2), np.ones(2)), atol=1e-15)


# ----------------------------------------------------------------------------- Newton's fallbacks
def _gram(rng, d=5):
    F = rng.normal(size=(40, d))
    return F.T @ F


def test_newton_step_rebuilds_an_indefinite_gram(gpu, rng):
    good = _gram(rng)
    g = rng.normal(size=5)
    want = -np.linalg.solve(_newton_hessian(good), g)
    calls = []

    def rebuild():
        calls.append(1)
        return gpu.asarray(good)
    got = _cholesky_step(gpu.asarray(-good), gpu.asarray(g), rebuild)    # I + 2·(−G): indefinite
    assert calls == [1]
    np.testing.assert_allclose(got.get(), want, rtol=1e-10)


def test_newton_step_floors_the_eigenvalues_of_an_indefinite_gram(gpu, rng):
    bad = -_gram(rng)
    g = rng.normal(size=5)
    want = _cholesky_step(bad, g)                        # the NumPy twin: SciPy raised, floored
    w, V = np.linalg.eigh(_newton_hessian(bad))
    np.testing.assert_allclose(want, -(V @ ((V.T @ g) / np.maximum(w, 1.0))), rtol=1e-10)
    np.testing.assert_allclose(_cholesky_step(gpu.asarray(bad), gpu.asarray(g)).get(), want, rtol=1e-10)


class _DriftedGrams(DesignOracle):
    """Grams that lost positive definiteness (as float32 up/downdates can at large n·C): each
    problem's own Gram and a freshly built shared one are replaced by their negatives."""

    def _prepare_grams(self, act, active):
        fresh = self._ref_gram is None
        super()._prepare_grams(act, active)
        for c in np.flatnonzero(active):
            if not self._on_ref[c]:
                self._grams[c] = -self._grams[c]
        if fresh and self._ref_gram is not None:
            self._ref_gram = -self._ref_gram


def _first_direction(oracle_type, xp, F, Y):
    oracle = oracle_type(Design(xp.asarray(F), 1.0), xp.asarray(Y), xp.ones_like(xp.asarray(Y)),
                         method="cholesky")
    active = np.ones(Y.shape[1], dtype=bool)
    _, G = oracle.evaluate(xp.zeros((F.shape[1] + 1, Y.shape[1])), active)
    P = oracle.direction(G, active)
    return P if xp is np else P.get()


@pytest.mark.parametrize("problems", [1, 3], ids=["own-gram", "shared-gram"])
def test_newton_memory_rebuilds_indefinite_grams(gpu, rng, problems):
    """One problem: its Gram is rebuilt from the rows (float64); three (one-vs-rest at w = 0): the
    shared Gram G_ref is.  Either way the direction is the one of the true Gram."""
    F = rng.normal(size=(60, 4))
    Y = np.where(rng.integers(0, problems + 1, size=(60, 1)) == np.arange(problems), 1.0, -1.0)
    want = _first_direction(DesignOracle, np, F, Y)
    np.testing.assert_allclose(_first_direction(_DriftedGrams, np, F, Y), want, rtol=1e-9)
    np.testing.assert_allclose(_first_direction(_DriftedGrams, gpu, F, Y), want, rtol=1e-9)


# ----------------------------------------------------------------------------- OK-FEB
@pytest.mark.parametrize("mode", ["budget", "parametric"])
def test_okfeb_indefinite_kernel_error_on_the_gpu(gpu, mode):
    """The sigmoid kernel makes AᵀK_SA + λI indefinite: the same explanation as on the CPU."""
    X = np.random.default_rng(0).normal(size=(200, 3))
    kw = dict(kernel="sigmoid", gamma=5.0, coef0=-1.0, rank=5, n_landmarks=12, random_state=0, mode=mode)
    msg = "kernel='sigmoid' is not positive semi-definite.*kernel='rbf'"
    with pytest.raises(ValueError, match=msg):
        OKFEB(device="cpu", **kw).fit(X)
    with pytest.raises(ValueError, match=msg):
        OKFEB(device="gpu", **kw).fit(gpu.asarray(X))


def test_okfeb_batch_mode_indefinite_kernel_raises_on_the_gpu(gpu):
    X = np.random.default_rng(0).normal(size=(200, 3))
    kw = dict(kernel="sigmoid", gamma=5.0, coef0=-1.0, rank=5, n_landmarks=12, random_state=0, mode="batch")
    with pytest.raises(np.linalg.LinAlgError):
        OKFEB(device="cpu", **kw).fit(X)
    with pytest.raises(np.linalg.LinAlgError):
        OKFEB(device="gpu", **kw).fit(gpu.asarray(X))
