"""``python -m gpuksvm`` / the ``gpuksvm`` console script: see :mod:`gpuksvm.cli.commands`."""
from __future__ import annotations

import sys
from typing import Sequence

from gpuksvm.cli import main as _cli_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``train``, ``predict``, ``info``, ``demo``); returns the exit status."""
    return _cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
