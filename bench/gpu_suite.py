"""One call for a GPU session: the GPU test subset, then every GPU benchmark.

    python bench/gpu_suite.py [--scale small|paper] [--only kernels,llsvm] [--skip-tests]

Runs ``pytest -m gpu`` (GPU-vs-NumPy parity tests), then each benchmark
script's ``main(["--device", "gpu", ...])`` in this process (so CuPy start-up,
cuBLAS handles and kernel compilation are paid once), and prints a short
summary table: what ran, how long it took and whether it passed.  JSON files
land in ``bench/results/`` (and are copied to ``$OUT`` when that is set, for the
device tool).  Exits non-zero if the tests or a benchmark failed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from report import run_benchmark  # noqa: E402  (bench/report.py: same loading and error capture)

BENCHES = ["kernels", "solvers", "llsvm", "cvm", "svi", "okfeb", "dask"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="small", choices=["small", "paper"])
    ap.add_argument("--only", default=",".join(BENCHES))
    ap.add_argument("--skip-tests", action="store_true")
    args = ap.parse_args(argv)
    summary = []
    ok = True
    if not args.skip_tests:
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                              str(HERE.parent / "tests")], cwd=HERE.parent)
        summary.append(("pytest -m gpu", time.perf_counter() - t0, "ok" if res.returncode == 0 else "FAILED"))
        ok &= res.returncode == 0
    for name in [s for s in args.only.split(",") if s]:
        r = run_benchmark(name, args.scale, "gpu")
        ok &= r["status"] == "ok"
        summary.append((f"bench/{name}.py", r["seconds"], r["status"]))
    out = os.environ.get("OUT")
    if out:
        for p in (HERE / "results").glob("*.json"):
            shutil.copy(p, Path(out) / p.name)
    print("\n# GPU suite summary")
    for what, secs, status in summary:
        print(f"{what:<24} {secs:8.1f} s  {status}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
