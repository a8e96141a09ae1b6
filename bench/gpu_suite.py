"""One call for a GPU session: the GPU tests, then every GPU benchmark, then a short table.

    python bench/gpu_suite.py [--scale small|paper] [--only kernels,llsvm] [--skip-tests]
    python bench/gpu_suite.py --emulated --scale tiny      # no GPU: the CI check of this script

Runs ``pytest -m gpu`` (GPU-vs-NumPy parity tests and the kernel twins), then
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--only", default=",".join(BENCHES))
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--pytest-args", default="-m gpu", help="what pytest runs (default: -m gpu)")
    ap.add_argument("--emulated", action="store_true", help="no GPU: the emulated GPU of tests/gpuemu")
    ap.add_argument("--results", default=None, help="folder for the JSON results (default bench/results)")
    args = ap.parse_args(argv)
    if args.results:
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
