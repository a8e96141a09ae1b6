"""The compiled RBF pass against its NumPy twin on a 5,000 × 5,000 block of 22 features, 64-row blocks, one thread."""
import time

import numpy as np

from gpuksvm.kernels.compiled_rbf import rbf_epilogue
from gpuksvm.kernels.kernel import Kernel, epilogue_numpy

rng = np.random.default_rng(0)
X = rng.random((5000, 22))
xn = np.einsum("ij,ij->i", X, X)
gamma = 2.0
blocks = [X[i:i + 64] @ X.T for i in range(0, 5000, 64)]
rbf_epilogue(blocks[0].copy(), xn[:64], xn, gamma)          # numba loads (or compiles) it
for rep in range(3):
    twin = [b.copy() for b in blocks]
    t = time.perf_counter()
    for i, b in enumerate(twin):
        epilogue_numpy(b, xn[i * 64:i * 64 + 64], xn, Kernel("rbf", gamma=gamma))
    t_numpy = time.perf_counter() - t
    comp = [b.copy() for b in blocks]
    t = time.perf_counter()
    for i, b in enumerate(comp):
        rbf_epilogue(b, xn[i * 64:i * 64 + 64], xn, gamma)
    t_compiled = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(0, 5000, 64):
        X[i:i + 64] @ X.T
    t_gemm = time.perf_counter() - t
    R, N = np.vstack(twin), np.vstack(comp)
    ulps = (np.abs(R - N) / np.spacing(R)).max()
    print(f"epilogue numpy {t_numpy:.3f} s  compiled {t_compiled:.3f} s  gemm {t_gemm:.3f} s  max {ulps:.0f} ulp")
