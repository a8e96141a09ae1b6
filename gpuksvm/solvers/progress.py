"""One progress and logging path for every estimator and solver (``verbose``).

* :func:`report` — a one-line message ``[Owner] message`` when ``verbose`` is at
  least ``level``, on standard error — or, when the application gave the
  ``gpuksvm`` logger a handler of its own (``logging.getLogger("gpuksvm")``),
  to that logger at INFO level.  (A handler on the root logger alone does not
  redirect them: a root logger at the default WARNING level would drop what
  ``verbose`` asked to see.)
* :func:`progress` — a tqdm progress bar over a loop when ``verbose`` and tqdm
  is installed, else the plain iterable.

Every estimator's ``verbose`` parameter means the same: 0 silent, 1 one line
per fit stage or binary problem, 2 one line per solver iteration.
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Callable

__all__ = ["report", "progress", "LOGGER"]

LOGGER = logging.getLogger("gpuksvm")


def report(owner: str, message: str | Callable[[], str], verbose: int, *, level: int = 1) -> None:
    """``[owner] message`` when ``verbose >= level`` (module docstring).  ``message`` may be a
    function that returns it, called only then: a per-iteration line that formats arrays (the
    Newton step's, ~0.3 ms) costs nothing in a silent solve."""
    if int(verbose or 0) < level:
        return
    line = f"[{owner}] {message() if callable(message) else message}"
    if LOGGER.handlers:
        LOGGER.info(line)
    else:
        print(line, file=sys.stderr)


def progress(iterable: Any = None, *, total: int | None = None, desc: str = "", verbose: int = 0):
    """A tqdm progress bar when ``verbose`` and tqdm is installed, else the iterable."""
    if verbose:
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover - tqdm is optional
            pass
        else:
            return tqdm(iterable, total=total, desc=desc, leave=False)
    return iterable if iterable is not None else range(total or 0)
