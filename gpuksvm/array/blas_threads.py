"""CPU BLAS threading for the host solvers.

OpenBLAS's worker threads spin-wait for work after every call.  When a call is
small (a few MFLOP), or when the host's cores are already busy, handing half of
it to a second thread costs far more than it gains — and the spinning worker
then steals a core from whatever runs next (a LIBSVM fit, the next Newton
step).  Measured on the 2-core development CPU with its cores busy with other
work: primal Newton on ijcnn1 (49,990 × 23) 1.05 s with 2 BLAS threads vs
0.025 s with one; on a dense 20,000 × 1,000 problem 11–14 s vs 3.9 s;
five LIBSVM fits of 2,000 ijcnn1 rows with their dual objectives 0.8–0.9 s vs
0.53 s.  The helpers here only change the thread count, never the arithmetic.

The policy is a library setting, not hidden state: ``host_blas_threads`` of
:func:`gpuksvm.set_config` / :func:`gpuksvm.config_context` — ``"auto"``
(default: the size rule, plus every host solver step while the load average
fills the cores), ``"by_size"`` (the size rule only) or ``"untouched"``.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

import numpy as np

from gpuksvm.array.backend import Device, get_config, resolve_device

__all__ = ["one_blas_thread", "host_blas_threads", "host_busy", "NARROW_DIM"]

#: Host work on designs at most this many columns wide (k-means rows, linear
#: SVM features) runs on one BLAS thread: each call is too small to pay for a
#: second one.
NARROW_DIM = 256

# The limit is process-wide (OpenBLAS has one pool): nested and concurrent users
# (threads) share one application of it, undone when the last of them leaves.
_lock = threading.Lock()
_controller: Any = None
_limiter: Any = None
_depth = 0


def host_busy() -> bool:
    """True when the 1-minute load average already fills every core this process may use
    and the ``host_blas_threads`` setting is ``"auto"`` (module docstring)."""
    if get_config()["host_blas_threads"] != "auto":
        return False
    try:
        n_cpu = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n_cpu = os.cpu_count() or 1
    try:
        return os.getloadavg()[0] >= n_cpu
    except (AttributeError, OSError):
        return False


def _release_openblas_control() -> None:
    """threadpoolctl ≥ 3.6 lets only the thread that last set OpenBLAS's limit change it
    again; release that claim so that whichever thread leaves last can restore it."""
    import threadpoolctl

    clear = getattr(getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


@contextlib.contextmanager
def _limited() -> Iterator[None]:
    global _controller, _limiter, _depth
    with _lock:
        if _depth == 0:
            try:
                if _controller is None:
                    from threadpoolctl import ThreadpoolController

                    _controller = ThreadpoolController()
                _limiter = _controller.limit(limits=1, user_api="blas")
                _release_openblas_control()
            except Exception:  # pragma: no cover - threadpoolctl missing or unable to inspect the BLAS
                _limiter = None
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _release_openblas_control()
                _limiter = None


def one_blas_thread(enable: bool = True) -> Any:
    """Context manager limiting the process's BLAS libraries to one thread (if ``enable``).

    Re-entrant and thread-safe: the caller's setting comes back when the last
    user leaves.  Uses threadpoolctl (a scikit-learn dependency); without it,
    or if it cannot inspect the loaded BLAS, or with the setting
    ``host_blas_threads="untouched"``, nothing changes.
    """
    if not enable or get_config()["host_blas_threads"] == "untouched":
        return contextlib.nullcontext()
    return _limited()


def host_blas_threads(where: Device | str | Any, *, narrow: bool = False) -> Any:
    """:func:`one_blas_thread` for a computation on ``where`` (a device, or an array namespace):
    one BLAS thread on the host when the data is ``narrow`` (threads cost more than they give)
    or the host is busy (:func:`host_busy`); nothing changes on a GPU."""
    on_host = where is np if not isinstance(where, (Device, str)) else not resolve_device(where).is_gpu
    return one_blas_thread(on_host and (narrow or host_busy()))
