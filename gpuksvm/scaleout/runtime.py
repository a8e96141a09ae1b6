"""Small Dask internals shared by the distributed fits of :mod:`gpuksvm.scaleout`.

Dask (``dask[array]``) and ``distributed`` are optional: nothing here imports
them at module import time, and :func:`is_dask_collection` answers ``False``
without importing Dask for every non-Dask object.  ``dask_cuda`` is never
needed: CuPy-backed chunks work on any worker that has a GPU.

What lives here:

* :func:`is_dask_collection`, :func:`require_dask`;
* :func:`compute` — ``dask.compute`` on a chosen client (or the default
  scheduler) that turns the loss of workers into a clear
  :class:`DistributedFitError` and records, in a :class:`Ledger`, how many
  bytes every pass brought back to the driver (the "only k×k travels" check);
* :func:`row_chunked` — validates a dask ``X`` / ``y`` pair and aligns them in
  row chunks with all columns in one chunk;
* :func:`tree_reduce` — a fan-in tree of delayed ``combine`` calls, so partial
  results are summed on the workers and only the final one travels;
* :func:`threads_here`, :func:`on_workers` — a task function made to run, on whichever worker,
  under the settings the driver had when the graph was built
  (:class:`gpuksvm.array.backend.CallerSettings`), shared by the tasks running at once there.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from gpuksvm.array import backend as bk

__all__ = ["DistributedFitError", "Ledger", "is_dask_collection", "require_dask", "compute",
           "scheduler_context", "row_chunked", "tree_reduce", "nbytes_of", "n_workers", "on_workers",
           "threads_here"]


class DistributedFitError(RuntimeError):
    """A distributed fit could not complete (workers lost, inconsistent partial results).

    Raised instead of returning a model computed from incomplete data.
    """


def is_dask_collection(x: Any) -> bool:
    """True for Dask collections (dask arrays, dataframes, delayed); never imports Dask otherwise."""
    mod = type(x).__module__ or ""
    if not mod.startswith("dask"):
        return False
    try:
        import dask
    except ImportError:  # pragma: no cover - a dask object without dask
        return False
    return bool(dask.is_dask_collection(x))


def require_dask():
    """Import and return ``(dask, dask.array)`` with a clear error when missing."""
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - dask is an optional extra
        raise ImportError("distributed training needs Dask: pip install 'gpuksvm[dask]' "
                          "(dask[array] and distributed)") from exc
    return dask, da


def nbytes_of(obj: Any) -> int:
    """Bytes held by the arrays inside ``obj`` (dicts, lists, tuples, dataclasses)."""
    if hasattr(obj, "nbytes") and hasattr(obj, "dtype"):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(nbytes_of(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes_of(v) for v in obj)
    if hasattr(obj, "__dataclass_fields__"):
        return sum(nbytes_of(getattr(obj, f)) for f in obj.__dataclass_fields__)
    return 0


@dataclass
class Ledger:
    """What a distributed fit brought back to the driver, pass by pass.

    Attributes
    ----------
    n_passes : int
        Number of ``compute`` calls (passes over the data or gathers).
    max_result_bytes : int
        Largest number of array bytes returned by one pass.
    total_result_bytes : int
    passes : list of (label, bytes)
    """

    n_passes: int = 0
    max_result_bytes: int = 0
    total_result_bytes: int = 0
    passes: list = field(default_factory=list)

    def record(self, label: str, result: Any) -> None:
        b = nbytes_of(result)
        self.n_passes += 1
        self.max_result_bytes = max(self.max_result_bytes, b)
        self.total_result_bytes += b
        self.passes.append((label, b))

    def as_dict(self) -> dict:
        return {"n_passes": self.n_passes, "max_result_bytes": self.max_result_bytes,
                "total_result_bytes": self.total_result_bytes,
                "passes": [list(p) for p in self.passes]}


def _worker_loss_types() -> tuple:
    types: list = []
    try:
        from distributed.client import FutureCancelledError
        from distributed.comm.core import CommClosedError
        from distributed.scheduler import KilledWorker

        types += [KilledWorker, CommClosedError, FutureCancelledError]
    except ImportError:  # pragma: no cover - dask without distributed
        pass
    try:
        from concurrent.futures import CancelledError

        types.append(CancelledError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


@contextlib.contextmanager
def scheduler_context(client: Any = None) -> Iterator[None]:
    """Run the Dask computations in the block on ``client`` (default scheduler if None)."""
    if client is None:
        yield
        return
    import dask

    with dask.config.set(scheduler=client):
        yield


def compute(*objs: Any, client: Any = None, ledger: Ledger | None = None, label: str = "") -> tuple:
    """``dask.compute(*objs)`` on ``client``; worker loss → :class:`DistributedFitError`.

    Task failures raised by gpuksvm code (bad input, …) propagate unchanged.
    Lost workers are first handled by Dask itself: tasks are re-run elsewhere
    and lost chunks recomputed from their lineage; only when the scheduler
    gives up (``KilledWorker`` after ``distributed.scheduler.allowed-failures``
    deaths, a closed connection, cancelled futures) does the fit stop here.
    """
    import dask

    try:
        if client is not None:
            out = dask.compute(*objs, scheduler=client)
        else:
            out = dask.compute(*objs)
    except _worker_loss_types() as exc:
        raise DistributedFitError(
            f"distributed fit failed{' during ' + label if label else ''}: Dask lost the workers "
            f"holding part of the data or of the computation ({type(exc).__name__}: {exc}). "
            "No model was produced; restart the failed workers and fit again.") from exc
    if ledger is not None:
        ledger.record(label, out)
    return out


def n_workers(client: Any) -> int:
    """Number of workers of a distributed client (1 for the local scheduler)."""
    if client is None:
        return 1
    try:
        return max(len(client.scheduler_info().get("workers", {})), 1)
    except Exception:  # noqa: BLE001 - informational only
        return 1


def row_chunked(X: Any, y: Any = None):
    """Validate a 2-D dask array (and labels) and return them in aligned row chunks.

    ``X`` is rechunked so each chunk holds all columns; ``y`` (dask array,
    NumPy array or list) becomes a 1-D dask array with ``X``'s row chunks.
    Shapes must be known (no NaN chunk sizes).
    """
    _, da = require_dask()
    if not isinstance(X, da.Array):
        if is_dask_collection(X) and hasattr(X, "to_dask_array"):
            X = X.to_dask_array(lengths=True)
        else:
            raise TypeError(f"expected a dask array, got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead.")
    if any(np.isnan(c) for c in X.chunks[0]) or np.isnan(X.shape[1]):
        raise ValueError("dask array X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if X.shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.dtype.kind not in "fiub":
        raise ValueError(f"X must be numeric, got dtype {X.dtype}")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    if y is None:
        return X, None
    if not isinstance(y, da.Array):
        if is_dask_collection(y) and hasattr(y, "to_dask_array"):
            y = y.to_dask_array(lengths=True)
        else:
            y = np.asarray(bk.to_host(y))
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim == 1 and y.shape[0] == X.shape[0]:
                y = da.from_array(y, chunks=(X.chunks[0],))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                         f"[{X.shape[0]}, {y.shape[0]}]")
    if y.chunks[0] != X.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    return X, y


def tree_reduce(parts: Sequence[Any], combine: Callable[[list], Any], *, fan_in: int = 8) -> Any:
    """Reduce delayed ``parts`` with a tree of delayed ``combine(list)`` calls (on the workers)."""
    import dask

    parts = list(parts)
    if not parts:
        raise ValueError("nothing to reduce")
    fn = dask.delayed(on_workers(combine), pure=True)
    level = 0
    while len(parts) > 1 or level == 0:
        parts = [fn(parts[i:i + fan_in]) for i in range(0, len(parts), fan_in)]
        level += 1
    return parts[0]


def threads_here() -> int:
    """Tasks that may run at once in this process: the threads of the ``distributed`` worker
    running the calling task; outside one (Dask's local schedulers, in the driver process) the
    local pool's size (``num_workers`` of the Dask configuration, else the CPU count), which
    over-counts for the synchronous scheduler (a smaller budget, never a larger one)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        worker = None
    if worker is not None:   # ``Worker.state.nthreads`` (distributed ≥ 2022.11), else ``Worker.nthreads``
        return max(int(getattr(getattr(worker, "state", None), "nthreads", None)
                       or getattr(worker, "nthreads", None) or 1), 1)
    import dask
    from dask.system import CPU_COUNT

    return max(int(dask.config.get("num_workers", None) or CPU_COUNT), 1)


@dataclass(frozen=True)
class _OnWorkers:
    """``fn`` run under the driver's :class:`~gpuksvm.array.backend.CallerSettings`, shared by the
    tasks running at once on the worker (picklable; Dask names its tasks after ``fn``)."""

    fn: Callable[..., Any]
    settings: bk.CallerSettings

    @property
    def __name__(self) -> str:  # the tasks' key prefix, as for ``fn`` itself
        fn = self.fn
        while isinstance(fn, functools.partial):
            fn = fn.func
        return getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.settings.applied(threads_here()):
            return self.fn(*args, **kwargs)


def on_workers(fn: Callable[..., Any], settings: bk.CallerSettings | None = None) -> Callable[..., Any]:
    """``fn`` made to run under ``settings`` (default: the calling thread's,
    :func:`gpuksvm.array.backend.caller_settings`) in whichever worker thread Dask runs it.

    The workers' threads start from their own defaults (``GPUKSVM_CPU_MEMORY_BUDGET`` of the
    worker's environment, else 512 MiB), so the settings are captured on the driver when the
    graph is built and applied around each task.  Each worker process is given the driver's
    budgets: the tasks that run at once on one worker (:func:`threads_here`) split them
    (:meth:`~gpuksvm.array.backend.CallerSettings.shared`, the rule of a thread pool's
    :func:`~gpuksvm.array.backend.in_calling_config`), so a worker's scratch stays within
    ``cpu_memory_budget`` (and the GPU budget).  Every task function of
    :mod:`gpuksvm.scaleout` goes through this (``dask.delayed(on_workers(fn))``,
    ``X.map_blocks(on_workers(fn), ...)``).

    Examples
    --------
    >>> import dask
    >>> import gpuksvm
    >>> from gpuksvm.array import backend as bk
    >>> with gpuksvm.config_context(cpu_memory_budget="64MB"):
    ...     probe = dask.delayed(on_workers(bk.memory_budget))("cpu")
    >>> with dask.config.set(scheduler="sync", num_workers=1):   # one task at a time
    ...     dask.compute(probe)[0]
    64000000
    """
    settings = bk.caller_settings() if settings is None else settings
    if isinstance(fn, _OnWorkers):
        return replace(fn, settings=settings)
    return _OnWorkers(fn, settings)
