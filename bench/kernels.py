"""RBF kernel-block throughput: sizes and the plain-CuPy baseline of the ``kernels_rbf`` case.

For each (n, k, d) the case (``python -m bench kernels_rbf``, ``bench/cases.py``) records seconds
(median after warm-up), effective TFLOP/s (2·n·k·d / t) and the ratio to the output-write floor
n·k·itemsize / bandwidth.  On a GPU the bandwidth is measured in the same process (a
device-to-device copy) and three variants run side by side: a plain CuPy baseline
(:func:`_plain_cupy_rbf`: GEMM, norms, elementwise exp with temporaries), our GEMM + fused
epilogue, and our one-pass tiled kernel (d ≤ 64).  On the CPU: NumPy BLAS + in-place epilogue.

    python -m bench kernels_rbf --scale small --device cpu
    python bench/kernels.py --scale tiny --device gpu     # the same case (bench/gpu_suite.py runs this)

``bench/gpu_model.py`` traces :func:`_plain_cupy_rbf` from this file.
"""
from __future__ import annotations

import sys
from pathlib import Path

GPU_SIZES = {"tiny": [(200, 70, 22), (70, 30, 100)],          # tiny: gpu_suite's emulated CI run
             "small": [(1_000_000, 2000, 22), (200_000, 4000, 784)],
             "paper": [(1_000_000, 2000, 22), (200_000, 4000, 784)]}
CPU_SIZES = {"tiny": [(200, 70, 22), (70, 30, 100)],
             "small": [(20_000, 1000, 22), (5_000, 1000, 784)],
             "paper": [(100_000, 2000, 22), (20_000, 4000, 784)]}


def _plain_cupy_rbf(xp, X, Z, gamma):
    G = X @ Z.T
    xn = (X * X).sum(1)
    zn = (Z * Z).sum(1)
    return xp.exp(-gamma * xp.maximum(xn[:, None] + zn[None, :] - 2 * G, 0))


CASES = ('kernels_rbf',)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench kernels_rbf`` with ``argv``'s options.

    The records also go to ``bench/results/kernels.json``.
    """
    root = Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from bench.__main__ import run_as_script

    return run_as_script("kernels", CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
