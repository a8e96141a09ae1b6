"""One call for a GPU session: the GPU tests, then every GPU benchmark, then a short table.

    python bench/gpu_suite.py [--scale small|paper] [--only kernels,llsvm] [--skip-tests]
    python bench/gpu_suite.py --emulated --scale tiny      # no GPU: the CI check of this script

Runs ``pytest -m gpu`` (GPU-vs-NumPy parity tests and the kernel twins), then
the hand-written kernels at the shapes of ``bench/kernel_static.py`` (achieved bandwidth and
FLOP rate beside the predicted roofline fraction: ``kernel_measured.json``), then
each benchmark script's ``main(["--scale", S, "--device", "gpu"])`` in this
process (so CuPy start-up, cuBLAS handles and kernel compilation are paid
once), and prints a summary table: what ran, how long it took, whether it
passed.  JSON files land in ``bench/results/`` (or ``--results``; copied to
``$OUT`` when that is set, for the device tool).  Exits non-zero if the tests
or a benchmark failed.

``--emulated`` runs everything on the emulated GPU of ``tests/gpuemu`` (fake
CuPy + the CPU emulator of kernels_cuda): timings then mean nothing, it only
proves the suite runs.  ``--scale tiny`` exists for that: benchmarks without a
tiny scale are listed as skipped in the table.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# bench/dask.py is named like the dask package: import the real one with bench/ off sys.path
# (python puts a script's folder first), then put bench/ back for _timing and report
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
try:
    import dask  # noqa: F401
except ImportError:
    pass
sys.path.insert(0, str(HERE))
import _timing  # noqa: E402
from report import run_benchmark  # noqa: E402  (bench/report.py: same loading and error capture)

BENCHES = ["kernels", "solvers", "llsvm", "cvm", "svi", "okfeb", "dask"]


def _has_scale(name: str, scale: str) -> bool:
    """Does ``bench/<name>.py`` take ``--scale <scale>`` (small and paper: all of them)?"""
    return scale != "tiny" or '"tiny"' in (HERE / f"{name}.py").read_text()


@contextlib.contextmanager
def _device_context(emulated: bool):
    if not emulated:
        yield
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import gpuemu

    gpuemu.prebuild()
    with gpuemu.emulated_gpu():
        yield


# ----------------------------------------------------------------------------- per-kernel roofline
#: (rows n, columns k) of the kernel-block shapes measured per scale; the paper scale is the one
#: bench/kernel_static.py predicts (an n=1M x k=4,000 block)
KERNEL_SHAPES = {"tiny": (256, 192), "small": (65_536, 4_000), "paper": (1_000_000, 4_000)}


def _timed(cp, fn, repeats: int) -> float:
    """Median seconds of ``fn()`` on the device: CUDA events around each call after one warm-up
    (the warm-up pays the first-call compile); wall time on the emulated GPU."""
    fn()
    times = []
    for _ in range(repeats):
        if hasattr(cp.cuda, "Event"):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            cp.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def measure_kernels(scale: str, emulated: bool) -> list[dict]:
    """Achieved bandwidth and FLOP rate of the hand-written kernels at the shapes of
    bench/kernel_static.py (reduced at smaller scales), side by side with its predicted roofline
    fraction.  The compulsory bytes and useful FLOPs are kernel_static's (the roofline counts)."""
    import cupy as cp
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    import kernel_static as ks
    from gpuksvm.array import cuda_sources as _cuda
    from gpuksvm.kernels import kernel as K
    from gpuksvm.kernels.kernel import Kernel

    static = {}
    if ks.RESULTS.is_file():
        import json

        static = {(r["kernel"], r["arch"]): r for r in json.loads(ks.RESULTS.read_text())}
    n, k = KERNEL_SHAPES[scale]
    repeats = 1 if emulated else 5
    rbf = Kernel("rbf", gamma=0.5)
    rng = np.random.default_rng(0)
    rows = []
    dev = ks.H100_SXM
    for dt in (np.float32,):
        it = np.dtype(dt).itemsize
        for d in ks.DS[:3]:   # the tiled kernel's range (d <= 64)
            X = cp.asarray(rng.random((n, d), dtype=dt))
            Z = cp.asarray(rng.random((k, d), dtype=dt))
            xn, zn = K.row_sq_norms(X, dt), K.row_sq_norms(Z, dt)
            out = cp.empty((n, k), dtype=dt)
            t = _timed(cp, lambda: K._tiled_block_gpu(X, Z, xn, zn, out, rbf), repeats)
            flops, nbytes = 2.0 * n * k * d, n * k * it + (n + k) * d * it
            rows.append(_measured_row("kernel_block_tiled_f32", f"d={d}", t, flops, nbytes, dev, static))
            t = _timed(cp, lambda: K._epilogue_gpu(out, xn, zn, rbf), repeats)
            rows.append(_measured_row("kernel_epilogue_f32", f"d={d}", t, 0.0, 2 * n * k * it, dev, static))
        for d in ks.DS:   # the fused mat-vec: one right-hand side
            X = cp.asarray(rng.random((n, d), dtype=dt))
            Z = cp.asarray(rng.random((k, d), dtype=dt))
            V = cp.asarray(rng.random((k, 1), dtype=dt))
            out = cp.empty((n, 1), dtype=dt)
            t = _timed(cp, lambda: K._fused_matvec_gpu(X, Z, V, out, rbf), repeats)
            rows.append(_measured_row("kernel_matvec_f32", f"d={d}", t, 2.0 * n * k * d, (n + k) * d * it, dev,
                                      static))
        rows += _measure_cvm_search(cp, np.dtype(dt), n, ks.CVM_CORE if scale == "paper" else 64, repeats, dev,
                                    static, rng)
    launches = _cuda.launch_counts() if hasattr(_cuda, "launch_counts") else {}
    for r in rows:
        r["launches_in_process"] = int(launches.get(r["kernel"], 0)) if isinstance(launches, dict) else None
    return rows


def _measure_cvm_search(cp, dt, n: int, m: int, repeats: int, dev, static: dict, rng) -> list[dict]:
    """The CVM search (``cvm_partial`` + ``cvm_scores``, the scanner's ``scores``: both passes and
    the copy of the scores to the host) with ``m`` core vectors, over the sampled search's 413
    candidates and over every row, at d = 2 and 784 (the shapes of bench/kernel_static.py, whose
    prediction is of ``cvm_partial`` alone)."""
    import numpy as np

    from gpuksvm.kernels.kernel import Kernel
    from gpuksvm.solvers.cvm import meb

    rows = []
    it = dt.itemsize
    for d in (2, 784):
        X = cp.asarray(rng.random((n, d), dtype=dt))
        sc = meb.GpuScanner(X, None, Kernel("rbf", gamma=0.5), None, 1.0, dt)
        for i in range(m):
            sc.append(i)
        coef, b = sc.set_alpha(np.full(m, 1.0 / m))
        for label, nc in [("sampled 413", min(413, n)), ("exact 1M", n)]:
            idx = rng.choice(n, size=nc, replace=False).astype(np.int64)
            t = _timed(cp, lambda: sc.scores(idx, coef, b), repeats)
            rows.append(_measured_row("cvm_partial_f32", f"{label} d={d}", t, 2.0 * nc * m * d, nc * d * it, dev,
                                      static))
    return rows


def _measured_row(kernel: str, label: str, t: float, flops: float, nbytes: float, dev, static: dict) -> dict:
    peak = dev.sms * dev.clock_hz * 32 * 2 * dev.ffma_per_clk
    roofline = max(flops / peak, nbytes / dev.hbm_bytes_per_s)
    pred = static.get((kernel, "sm_90"), {})
    return {"kernel": kernel, "shape": label, "measured_s": t, "achieved_gb_s": nbytes / t / 1e9,
            "achieved_tflop_s": flops / t / 1e12, "roofline_fraction_measured": roofline / t,
            "roofline_fraction_predicted": pred.get("roofline_fraction", {}).get(label),
            "predicted_s_h100_sxm_paper_shape": pred.get("predicted_s_h100_sxm", {}).get(label)}


def _device_name(emulated: bool) -> str:
    """The GPU the kernels were measured on (the roofline fractions are an H100 SXM's)."""
    if emulated:
        return "emulated GPU"
    import cupy as cp

    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def print_kernel_table(rows: list[dict], emulated: bool) -> None:
    print(f"\n# Kernels: measured ({'EMULATED: meaningless' if emulated else 'this GPU'}) against predicted "
          "(bench/kernel_static.py, H100 SXM, n=1M x k=4,000; a MODEL PREDICTION)")
    print(f"{'kernel':<24} {'shape':<18} {'measured':>10} {'GB/s':>8} {'TFLOP/s':>8} {'fraction':>9} {'predicted':>9}")
    for r in rows:
        pred = r["roofline_fraction_predicted"]
        print(f"{r['kernel']:<24} {r['shape']:<18} {r['measured_s'] * 1e3:>8.3f}ms {r['achieved_gb_s']:>8.1f} "
              f"{r['achieved_tflop_s']:>8.2f} {r['roofline_fraction_measured']:>9.2f} "
              f"{'-' if pred is None else f'{pred:.2f}':>9}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--only", default=",".join(BENCHES))
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-kernels", action="store_true",
                    help="skip the per-kernel measurement (achieved bandwidth / FLOP rate vs kernel_static)")
    ap.add_argument("--pytest-args", default="-m gpu", help="what pytest runs (default: -m gpu)")
    ap.add_argument("--emulated", action="store_true", help="no GPU: the emulated GPU of tests/gpuemu")
    ap.add_argument("--results", default=None, help="folder for the JSON results (default bench/results)")
    args = ap.parse_args(argv)
    if args.results:
        # a folder that is not there yet is made (the kernel table was lost for want of it on an H200)
        Path(args.results).mkdir(parents=True, exist_ok=True)
        os.environ["GPUKSVM_BENCH_RESULTS"] = str(Path(args.results).resolve())
        _timing.RESULTS = Path(args.results).resolve()
    if not args.emulated:
        from gpuksvm.array import backend as bk

        if not bk.cuda_available():
            print("gpu_suite: CuPy finds no CUDA device (use --emulated to check the suite without one)")
            return 2
    summary = []
    ok = True
    if not args.skip_tests:
        env = dict(os.environ, GPUKSVM_TEST_GPU="emulated" if args.emulated else "real")
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              *shlex.split(args.pytest_args)], cwd=ROOT, env=env)
        summary.append((f"pytest {args.pytest_args}", time.perf_counter() - t0,
                        "ok" if res.returncode == 0 else "FAILED"))
        ok &= res.returncode == 0
    with _device_context(args.emulated):
        for name in [s for s in args.only.split(",") if s]:
            if not _has_scale(name, args.scale):
                summary.append((f"bench/{name}.py", 0.0, f"skipped (no --scale {args.scale})"))
                continue
            r = run_benchmark(name, args.scale, "gpu")
            ok &= r["status"] == "ok"
            summary.append((f"bench/{name}.py", r["seconds"], r["status"]))
        if not args.skip_kernels:
            t0 = time.perf_counter()
            try:
                kernel_rows = measure_kernels(args.scale, args.emulated)
                (_timing.RESULTS / "kernel_measured.json").write_text(json.dumps(
                    {"emulated": args.emulated, "device": _device_name(args.emulated), "scale": args.scale,
                     "rows": kernel_rows}, indent=1) + "\n")
                print_kernel_table(kernel_rows, args.emulated)
                status = "ok"
            except Exception as exc:   # noqa: BLE001 - reported in the summary, the suite goes on
                status = f"FAILED ({type(exc).__name__}: {exc})"
                ok = False
            summary.append(("kernel roofline", time.perf_counter() - t0, status))
    out = os.environ.get("OUT")
    if out:
        for p in _timing.RESULTS.glob("*.json"):
            shutil.copy(p, Path(out) / p.name)
    print(f"\n# GPU suite summary ({'EMULATED GPU: timings are meaningless' if args.emulated else 'real GPU'}, "
          f"scale {args.scale})")
    for what, secs, status in summary:
        print(f"{what:<32} {secs:8.1f} s  {status}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
