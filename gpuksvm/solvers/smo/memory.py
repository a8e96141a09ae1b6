"""Kernel caches within the memory budget (``set_config(cpu_memory_budget=...)``).

A solver's kernel cache (LIBSVM's ``cache_size``, the host SMO's row cache,
the CVM's K̃ rows) counts against the CPU memory budget: the caches of one
call hold at most :data:`CACHE_BUDGET_SHARE` of it together, the rest is left
to the solver's other working memory (the problem's copy of its rows, the
O(n) vectors, kernel blocks).  :func:`cache_within_budget` says how many bytes
a cache may take and whether the budget, not the caller, decided it; the
estimators then record ``memory_fallback_`` and warn
(:func:`warn_memory_fallback`).
"""
from __future__ import annotations

import warnings

from gpuksvm.array import backend as bk

__all__ = ["CACHE_BUDGET_SHARE", "MIN_CACHE_BYTES", "cache_within_budget", "warn_memory_fallback"]

#: Share of the CPU memory budget the kernel caches of one call may hold.  KernelSVC on
#: ijcnn1 (49,990 rows) with its 200 MB LIBSVM cache under a 200 MB budget grew by 266 MB;
#: the rest of its working memory is the problem's float64 rows and O(n) vectors (≈ 60 MB),
#: so half the budget leaves the other half for them.
CACHE_BUDGET_SHARE = 0.5
#: The smallest cache handed to a solver (LIBSVM needs some rows to work with).
MIN_CACHE_BYTES = 1 << 20


def cache_within_budget(cache_bytes: int, *, n_parallel: int = 1) -> tuple[int, bool]:
    """Bytes each of ``n_parallel`` concurrent kernel caches may take, and whether the budget cut
    them below ``cache_bytes``.

    Parameters
    ----------
    cache_bytes : int
        The cache asked for (``cache_size`` in bytes).
    n_parallel : int
        Solvers running at once, each with its own cache.

    Returns
    -------
    bytes : int
        ``min(cache_bytes, CACHE_BUDGET_SHARE · budget / n_parallel)``, at least
        :data:`MIN_CACHE_BYTES`.
    capped : bool
        True when the budget made it smaller than ``cache_bytes``.
    """
    cap = int(CACHE_BUDGET_SHARE * bk.memory_budget(bk.CPU)) // max(int(n_parallel), 1)
    want = int(cache_bytes)
    got = max(min(want, cap), min(want, MIN_CACHE_BYTES))
    return got, got < want


def warn_memory_fallback(estimator: str, what: str, stacklevel: int = 3) -> None:
    """The one :class:`~gpuksvm.array.backend.MemoryFallbackWarning` of a fit whose in-memory path
    did not fit ``cpu_memory_budget``: ``what`` says what was made smaller instead."""
    budget = bk.memory_budget(bk.CPU)
    warnings.warn(f"{estimator}: the memory budget (cpu_memory_budget={budget / 2**20:.0f} MiB) is "
                  f"too small for the in-memory path; {what}. See memory_fallback_; raise the budget "
                  "with gpuksvm.set_config(cpu_memory_budget=...) to avoid it.",
                  bk.MemoryFallbackWarning, stacklevel=stacklevel)
