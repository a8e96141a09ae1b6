"""RBF kernel-block throughput (issue: foundation benchmark).

For each (n, k, d) it prints seconds (median after warm-up), effective TFLOP/s
(2·n·k·d / t) and the ratio to the output-write floor n·k·itemsize / bandwidth.
On a GPU the bandwidth is measured in the same process (a device-to-device
copy) and three variants run side by side: a plain CuPy baseline (GEMM, norms,
elementwise exp with temporaries), our GEMM + fused epilogue, and our one-pass
tiled kernel (d ≤ 64).  On the CPU: NumPy BLAS + in-place epilogue.

    python bench/kernels.py                   # device auto, sizes for that device
    python bench/kernels.py --device cpu
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import machine_info, print_table, time_call, write_json  # noqa: E402

from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.kernels.kernel import Kernel, kernel_block  # noqa: E402

GPU_SIZES = {"tiny": [(200, 70, 22), (70, 30, 100)],          # tiny: gpu_suite's emulated CI run
             "small": [(1_000_000, 2000, 22), (200_000, 4000, 784)],
             "paper": [(1_000_000, 2000, 22), (200_000, 4000, 784)]}
CPU_SIZES = {"tiny": [(200, 70, 22), (70, 30, 100)],
             "small": [(20_000, 1000, 22), (5_000, 1000, 784)],
             "paper": [(100_000, 2000, 22), (20_000, 4000, 784)]}


def _cpu_bandwidth(nbytes: int = 256 * 2**20) -> float:
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    t = time_call(lambda: np.copyto(b, a), device="cpu", repeats=5)["median_s"]
    return 2 * a.nbytes / t


def _gpu_bandwidth(xp, nbytes: int = 2**30) -> float:
    a = xp.ones(nbytes // 4, dtype=xp.float32)
    b = xp.empty_like(a)
    t = time_call(lambda: xp.copyto(b, a), device="cuda", repeats=5)["median_s"]
    return 2 * a.nbytes / t


def _plain_cupy_rbf(xp, X, Z, gamma):
    G = X @ Z.T
    xn = (X * X).sum(1)
    zn = (Z * Z).sum(1)
    return xp.exp(-gamma * xp.maximum(xn[:, None] + zn[None, :] - 2 * G, 0))


def run(device: str = "auto", scale: str = "small", repeats: int = 3) -> dict:
    dev = bk.resolve_device(device)
    xp = bk.get_namespace(dev)
    kern = Kernel("rbf", gamma=0.5)
    dtype = np.float32
    rows = []
    copy_bytes = 2**20 if scale == "tiny" else None
    if dev.is_gpu:
        bw = _gpu_bandwidth(xp, *(copy_bytes,) if copy_bytes else ())
        sizes = GPU_SIZES[scale]
    else:
        bw = _cpu_bandwidth(*(copy_bytes,) if copy_bytes else ())
        sizes = CPU_SIZES[scale]
    rng = np.random.default_rng(0)
    for n, k, d in sizes:
        X = bk.to_device((rng.normal(size=(n, d)) / np.sqrt(d)).astype(dtype), dev)   # float32 (NEP 50)
        Z = bk.to_device((rng.normal(size=(k, d)) / np.sqrt(d)).astype(dtype), dev)
        out = xp.empty((n, k), dtype=dtype)
        floor_s = n * k * np.dtype(dtype).itemsize / bw
        variants = []
        if dev.is_gpu:
            variants.append(("cupy-plain", lambda X=X, Z=Z: _plain_cupy_rbf(xp, X, Z, kern.gamma)))
            variants.append(("gemm+epilogue",
                             lambda X=X, Z=Z, out=out: kernel_block(X, Z, kern, out=out, method="gemm")))
            if d <= 64:
                variants.append(("tiled",
                                 lambda X=X, Z=Z, out=out: kernel_block(X, Z, kern, out=out, method="tiled")))
        else:
            variants.append(("numpy-blas", lambda X=X, Z=Z, out=out: kernel_block(X, Z, kern, out=out)))
        base = None
        for name, fn in variants:
            t = time_call(fn, device=dev, repeats=repeats)["median_s"]
            base = t if base is None else base
            rows.append({"n": n, "k": k, "d": d, "variant": name, "seconds": t,
                         "TFLOP/s": 2.0 * n * k * d / t / 1e12, "x_write_floor": t / floor_s,
                         "speedup_vs_first": base / t})
        del X, Z, out, variants
        if dev.is_gpu:
            bk.free_gpu_cache()
    return {"machine": machine_info(dev), "bandwidth_GBps": bw / 1e9, "rows": rows}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scale", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    res = run(args.device, args.scale, args.repeats)
    print(f"# RBF kernel block, float32, device {res['machine']['device']} "
          f"({res['machine'].get('gpu', 'cpu')}), measured copy bandwidth {res['bandwidth_GBps']:.1f} GB/s")
    print_table(res["rows"], ["n", "k", "d", "variant", "seconds", "TFLOP/s", "x_write_floor",
                              "speedup_vs_first"])
    path = write_json("kernels", res)
    print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
