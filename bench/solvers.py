"""Engines on ijcnn1: the ``solvers_kernel``, ``solvers_linear`` and ``solvers_batched`` cases run together.

The cases live in ``bench/cases.py`` (``python -m bench solvers_kernel --scale small``); this file
keeps ``bench/gpu_suite.py``'s ``bench/solvers.py --scale S --device D`` call working (scales
"tiny", "small" and "paper") and writes the run's records to ``bench/results/solvers.json`` as
well, where the suite collects its results.
"""
from __future__ import annotations

import sys
from pathlib import Path

CASES = ("solvers_kernel", "solvers_linear", "solvers_batched")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench solvers_kernel solvers_linear solvers_batched`` with ``argv``'s options.

    The records also go to ``bench/results/solvers.json``.
    """
    root = Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from bench.__main__ import run_as_script

    return run_as_script("solvers", CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
