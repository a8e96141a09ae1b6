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
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["kernels", "solvers", "llsvm", "cvm", "svi", "okfeb", "dask"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(HERE))
    spec.loader.exec_module(mod)
    return mod


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
        t0 = time.perf_counter()
        try:
            mod = _load(name)
            mod.main(["--device", "gpu", "--scale", args.scale])
            status = "ok"
        except Exception:  # noqa: BLE001 - report and go on with the next benchmark
            traceback.print_exc()
            status = "FAILED"
            ok = False
        summary.append((f"bench/{name}.py", time.perf_counter() - t0, status))
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
