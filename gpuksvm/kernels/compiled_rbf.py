"""The RBF kernel's host epilogue compiled by numba: a float64 block G = X Zᵀ turned into K(X, Z) in place.

:func:`rbf_epilogue` computes, for every entry of a C-contiguous float64 block,

    K = exp(x),   x = −γ · max(‖xₐ‖² + ‖z_b‖² − 2Gₐᵦ, 0)

in one pass over the block, where :func:`gpuksvm.kernels.kernel.epilogue_numpy`
(its NumPy twin, the reference of its tests) makes six.  The squared distance
is rounded exactly as the twin rounds it (−2G + ‖x‖², then + ‖z‖²); only the
exponential differs, by at most 2 units in the last place (measured over
x ∈ [−708, 0] against NumPy's ``exp``).  NumPy's float64 ``exp`` is a scalar
loop on hosts without AVX-512; this one vectorizes:

* k = round(x / ln 2) by the shifter 1.5·2⁵² (the sum x·log₂e + 1.5·2⁵² holds k
  in its low mantissa bits), r = x − k·ln 2 with ln 2 split in two (Cody & Waite:
  k times its high part is exact), so |r| ≤ ln 2 / 2;
* eʳ by its Taylor polynomial of degree 13 (the first omitted term is below
  5·10⁻¹⁸ of eʳ), evaluated by Estrin's scheme (a tree of depth 4 instead of
  Horner's chain of 13 dependent steps; a Horner loop was latency bound);
* eˣ = eʳ·2ᵏ by adding k to the exponent bits, in a second pass over the row
  (integer adds, which vectorize; a float-to-integer conversion does not on AVX2).

For x < −708 the result is 0 where NumPy returns the subnormal values below
3.3·10⁻³⁰⁸ (a kernel value that small changes no sum it enters); NaN stays NaN.

Measured (the 5,000 × 5,000 Gram matrix of 5,000 uniform random rows of 22
features, as many as ijcnn1's, γ = 2, in 64-row blocks, one thread, 2-core AMD
EPYC host with AVX2, NumPy 2.4): the epilogue took 0.051 s against the twin's
0.173 s (the GEMM 0.025–0.050 s); a Horner loop took 0.084 s.  The 3-γ ijcnn1
grid search of KernelSVC took 2.32 s against 2.74 s with NumPy's pass (medians
of five runs alternating in one process; ``bench/results/tune_cpu_2026-11-27``).

Who uses it: :func:`gpuksvm.kernels.kernel.kernel_block` and
:func:`~gpuksvm.kernels.kernel.epilogue_host` with ``compiled=True`` — the
Gram matrices and held-out blocks of KernelSVC's search engine
(:mod:`gpuksvm.solvers.smo.path`), whose SMO numba compiles anyway.  Other
host blocks stay NumPy's: the first compiled call of a process loads numba's
compiler, and a trivial fit that made it grew the process by 47–50 MB
against 2.1–4.9 MB without it (``python -m bench.memory --constant``), beyond the
bound the memory tests hold every fit to.

numba is optional (the ``fast`` extra): :data:`AVAILABLE` says whether it
imported; without it the callers' blocks go through the NumPy twin.
"""
from __future__ import annotations

import math

import numpy as np

try:
    import numba
except ImportError:  # the optional "fast" extra is not installed: AVAILABLE is False
    numba = None

__all__ = ["AVAILABLE", "rbf_epilogue"]

#: whether numba imported (the compiled epilogue can run)
AVAILABLE = numba is not None

_LOG2E = 1.4426950408889634             # log₂ e
_LN2_HI = 6.93147180369123816490e-01    # ln 2 to 32 bits: k·_LN2_HI is exact for |k| < 2¹¹
_LN2_LO = 1.90821492927058770002e-10    # ln 2 − _LN2_HI
_SHIFTER = 6755399441055744.0           # 1.5·2⁵²: x·log₂e + this rounds to an integer k in the low bits
_SHIFTER_BITS = 0x4338000000000000      # its bit pattern: bits(x·log₂e + shifter) − this = k
_X_MIN = -708.0                         # below: eˣ < 2⁻¹⁰²¹, 0 here (2ᵏ·eʳ stays normal above it)

# 1/j! for j = 0..13: the Taylor coefficients of eʳ
_C = tuple(1.0 / math.factorial(j) for j in range(14))
(_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13) = _C


def _exp_reduced(x, kbits, b):  # pragma: no cover - compiled by numba
    """eʳ for x = k·ln 2 + r (k's shifter bits stored in ``kbits[b]``): the first pass's work."""
    kd = x * _LOG2E + _SHIFTER
    k = kd - _SHIFTER
    r = (x - k * _LN2_HI) - k * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    s03 = (_C0 + r * _C1) + r2 * (_C2 + r * _C3)
    s47 = (_C4 + r * _C5) + r2 * (_C6 + r * _C7)
    s811 = (_C8 + r * _C9) + r2 * (_C10 + r * _C11)
    s1213 = _C12 + r * _C13
    p = (s03 + r4 * s47) + r8 * (s811 + r4 * s1213)
    if x < _X_MIN:          # 0, and k = 0 so that the second pass leaves it 0
        p = 0.0
        kd = _SHIFTER
    if x != x:              # NaN in, NaN out
        p = x
        kd = _SHIFTER
    kbits[b] = kd
    return p


def _rbf_rows(G, xn, zn, gamma, kbits):  # pragma: no cover - compiled by numba
    """G[a, b] ← exp(−γ·max(−2G[a, b] + xn[a] + zn[b], 0)) row by row (``kbits``: one row of scratch)."""
    n, m = G.shape
    ki = kbits.view(np.int64)
    for a in range(n):
        row = G[a]
        xa = xn[a]
        for b in range(m):
            d = (-2.0 * row[b] + xa) + zn[b]
            if d < 0.0:
                d = 0.0
            row[b] = _exp_reduced(-gamma * d, kbits, b)
        bits = row.view(np.int64)
        for b in range(m):
            bits[b] += (ki[b] - _SHIFTER_BITS) << 52


if numba is not None:
    # 'contract' lets the compiler fuse a multiply and an add (one rounding instead of two): the
    # shifter sum and the reduction only gain; −2G + ‖x‖² is exact either way (× −2 is exact)
    _exp_reduced = numba.njit(cache=True, nogil=True, fastmath={"contract"})(_exp_reduced)
    _rbf_rows = numba.njit(cache=True, nogil=True, fastmath={"contract"})(_rbf_rows)


def rbf_epilogue(G: np.ndarray, xn: np.ndarray, zn: np.ndarray, gamma: float) -> np.ndarray:
    """Turn the block ``G = X Zᵀ`` into the RBF kernel block K(X, Z) in place.

    Parameters
    ----------
    G : (n, m) C-contiguous float64 array, overwritten
    xn : (n,) ‖xₐ‖² of the rows of X
    zn : (m,) ‖z_b‖² of the rows of Z
    gamma : γ ≥ 0

    Returns
    -------
    G
    """
    if numba is None:
        raise ImportError("rbf_epilogue needs numba (pip install 'gpuksvm[fast]')")
    if G.dtype != np.float64 or not G.flags.c_contiguous or G.ndim != 2:
        raise ValueError("rbf_epilogue needs a C-contiguous 2-D float64 block")
    if not (np.isfinite(gamma) and gamma >= 0):     # the reduction assumes x ≤ 0
        raise ValueError(f"rbf_epilogue needs a finite gamma >= 0, got {gamma!r}")
    xn = np.ascontiguousarray(xn, dtype=np.float64)
    zn = np.ascontiguousarray(zn, dtype=np.float64)
    if xn.shape != (G.shape[0],) or zn.shape != (G.shape[1],):   # the compiled loop reads them unchecked
        raise ValueError(f"rbf_epilogue: a {G.shape[0]} × {G.shape[1]} block needs {G.shape[0]} and "
                         f"{G.shape[1]} squared norms, got shapes {xn.shape} and {zn.shape}")
    if G.size:
        _rbf_rows(G, xn, zn, float(gamma), np.empty(G.shape[1]))
    return G
