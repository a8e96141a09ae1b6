"""Engines on ijcnn1: the ``solvers_kernel``, ``solvers_linear`` and ``solvers_batched`` cases run together.

The cases live in ``bench/cases.py`` (``python -m bench solvers_kernel --scale small``); this file
keeps ``bench/gpu_suite.py``'s ``bench/solvers.py --scale S --device D`` call working (scales
"tiny", "small" and "paper") and writes the run's records to ``bench/results/solvers.json`` as
well, where the suite collects its results.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("solvers_kernel", "solvers_linear", "solvers_batched")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench solvers_kernel solvers_linear solvers_batched`` with ``argv``'s options."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.__main__ import main as bench_main
    from bench.harness import RESULTS, read_records

    out = RESULTS / "solvers.jsonl"
    out.unlink(missing_ok=True)
    rc = bench_main([*CASES, *(sys.argv[1:] if argv is None else argv), "--out", str(out)])
    records = [json.loads(r.to_json()) for r in read_records(out)]
    (RESULTS / "solvers.json").write_text(json.dumps({"cases": CASES, "records": records}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
