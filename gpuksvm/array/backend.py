"""The array layer: devices, array namespaces, transfers, dtypes and memory plans.

Everything above this module is written once against an *array namespace*
(``numpy`` or ``cupy``) obtained from :func:`get_namespace`.  Only this module,
:mod:`gpuksvm.kernels.kernel`, :mod:`gpuksvm.array.linalg` and :mod:`gpuksvm.array.cuda_sources` may import
CuPy; estimators never do.

Device strings
--------------
``"auto"``
    CUDA device 0 when CuPy can be used (:func:`gpu_status`: a device answers,
    the CUDA libraries load, gpuksvm's CUDA sources compile), else the CPU.
    Never fails.  Silent on a machine without CuPy; where CuPy is installed but
    cannot be used, one :class:`GpuUnavailableWarning` per process names the
    reason and the fix (``gpuksvm doctor`` shows every check).  The environment
    variable ``GPUKSVM_DEVICE`` overrides what ``"auto"`` means (e.g. ``cpu``).
``"cpu"``
    NumPy / SciPy.
``"gpu"``, ``"cuda"``
    CUDA device 0; :class:`DeviceUnavailableError` with the reason and the fix
    if none can be used.
``"cuda:N"``
    CUDA device ``N``.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import re
import sys
import threading
import time
import warnings
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as sp

from gpuksvm.array.gpu_probe import GpuStatus, probe

__all__ = [
    "asarray_in",
    "release_free_heap",
    "in_calling_config",
    "CallerSettings",
    "caller_settings",
    "host_unless_gpu",
    "gpu_ready",
    "compute_copy",
    "device_for",
    "namespace_of_any",
    "densified_for",
    "device_index",
    "is_array",
    "take_rows",
    "vstack_rows",
    "Device",
    "DeviceUnavailableError",
    "GpuUnavailableWarning",
    "MemoryBudgetError",
    "GpuStatus",
    "gpu_status",
    "MemoryFallbackWarning",
    "resolve_device",
    "cuda_available",
    "get_namespace",
    "namespace_of",
    "device_of",
    "is_gpu_array",
    "is_sparse",
    "to_device",
    "to_host",
    "synchronize",
    "array_kind",
    "as_kind",
    "resolve_dtype",
    "set_config",
    "get_config",
    "config_context",
    "available_memory",
    "model_load_max_bytes",
    "memory_budget",
    "plan_rows",
    "is_out_of_memory",
    "smaller_on_out_of_memory",
    "fallback_text",
    "map_row_blocks",
    "FallbackCollector",
]


class DeviceUnavailableError(RuntimeError):
    """A GPU device was asked for explicitly but none can be used."""


class GpuUnavailableWarning(UserWarning):
    """CuPy is installed but no GPU can be used: ``device="auto"`` runs on the CPU.

    Issued once per process; the message names the reason and the fix.
    """


class MemoryBudgetError(ValueError):
    """The memory budget is smaller than one row block of an operation sized from it.

    Raised by :func:`plan_rows` before anything is allocated; the message names the
    operation, the budget and the minimum.  A ``ValueError`` (a setting to change), not a
    ``MemoryError``: a smaller block cannot help, so :func:`map_row_blocks` does not retry it.

    Attributes
    ----------
    budget : int
        The budget the block was planned in, bytes (an operation may be given a part of the
        configured budget).
    configured : int
        The configured memory budget of the device, bytes.
    minimum : int
        The smallest budget that holds one block (``min_rows`` rows of ``bytes_per_row``), bytes.
    """

    def __init__(self, budget: int, minimum: int, what: str = "a block operation",
                 configured: int | None = None) -> None:
        self.budget = int(budget)
        self.minimum = int(minimum)
        self.configured = self.budget if configured is None else int(configured)
        if self.configured == self.budget:
            head = f"the memory budget of {self.budget:,} bytes is smaller than one row block of {what}"
            ask = f"raise the budget to at least {self.minimum:,} bytes"
        else:   # the operation was given a part of the budget (the rest holds other working memory)
            head = (f"the {self.budget:,} bytes left for {what} of the memory budget ({int(configured):,} "
                    "bytes) are smaller than one row block")
            ask = f"raise the budget so that at least {self.minimum:,} bytes are left for it"
        super().__init__(f"{head}, which needs {self.minimum:,} bytes: {ask} "
                         "(gpuksvm.set_config(cpu_memory_budget=...) on the CPU)")


class MemoryFallbackWarning(UserWarning):
    """Working memory made smaller than asked: a block that ran out of device memory and was retried
    with smaller blocks, or an in-memory path (a kernel cache, a solve) cut to the memory budget
    (the estimator's ``memory_fallback_`` says what)."""


# --------------------------------------------------------------------------- config
_DEFAULT_CONFIG = {
    # bytes of scratch memory a CPU block operation may use
    "cpu_memory_budget": None,  # None -> GPUKSVM_CPU_MEMORY_BUDGET or 512 MiB
    # fraction of the *free* GPU memory a block operation may use
    "gpu_memory_fraction": 0.5,
    # bytes of GPU memory a block operation may use at most (the smaller of it and the fraction)
    "gpu_memory_budget": None,  # None -> GPUKSVM_GPU_MEMORY_BUDGET or no cap beyond the fraction
    # when host solvers limit the BLAS to one thread (gpuksvm.array.blas_threads)
    "host_blas_threads": "auto",
    # decompressed bytes loading one model file may take (gpuksvm.persistence.io.load)
    "model_load_max_bytes": None,  # None -> GPUKSVM_MODEL_LOAD_MAX_BYTES or half the available memory
}
#: values of the ``host_blas_threads`` setting (see :func:`set_config`)
HOST_BLAS_POLICIES = ("auto", "by_size", "untouched")
_config_local = threading.local()


def _config() -> dict:
    if not hasattr(_config_local, "cfg"):
        _config_local.cfg = dict(_DEFAULT_CONFIG)
    return _config_local.cfg


def get_config() -> dict:
    """Return a copy of the current configuration (memory budgets, host BLAS threads).

    Examples
    --------
    >>> import gpuksvm
    >>> sorted(gpuksvm.get_config())   # doctest: +NORMALIZE_WHITESPACE
    ['cpu_memory_budget', 'gpu_memory_budget', 'gpu_memory_fraction', 'host_blas_threads',
     'model_load_max_bytes']
    """
    cfg = dict(_config())
    cfg["cpu_memory_budget"] = _cpu_budget_bytes()
    cfg["gpu_memory_budget"] = _gpu_budget_bytes()
    cfg["model_load_max_bytes"] = model_load_max_bytes()
    return cfg


def set_config(*, cpu_memory_budget: int | str | None = None,
               gpu_memory_budget: int | str | None = None,
               gpu_memory_fraction: float | None = None,
               host_blas_threads: str | None = None,
               model_load_max_bytes: int | str | None = None) -> None:
    """Set the memory budgets used to size row blocks, and the host BLAS thread policy.

    The settings are per thread (as scikit-learn's); :func:`config_context`
    changes them for a ``with`` block.

    Parameters
    ----------
    cpu_memory_budget : int or str, optional
        Bytes (or a string such as ``"256MB"``, ``"2GiB"``) of scratch memory a
        CPU block operation may use.
    gpu_memory_budget : int or str, optional
        Bytes (or ``"256MB"``) of GPU memory a block operation may use at
        most: :func:`memory_budget` of a GPU is the smaller of this and
        ``gpu_memory_fraction`` of the free memory.  Default: the environment
        variable ``GPUKSVM_GPU_MEMORY_BUDGET``, else no cap beyond the
        fraction (``get_config()`` reports None).
    gpu_memory_fraction : float in (0, 1], optional
        Fraction of the currently free GPU memory a block operation may use.
    host_blas_threads : {"auto", "by_size", "untouched"}, optional
        When the CPU solvers limit OpenBLAS/MKL to one thread (the arithmetic
        never changes, only the time; measured reasons in
        :mod:`gpuksvm.array.blas_threads`).  ``"auto"`` (default): for small
        problems (designs at most 256 columns wide, eigendecompositions up to
        2048², SMO sub-problems) and for every host solver step while the
        1-minute load average already fills the cores this process may use;
        ``"by_size"``: the size rule only (timings independent of the
        machine's load); ``"untouched"``: never.
    model_load_max_bytes : int or str, optional
        Bytes (or ``"4GiB"``) of decompressed content one model file may
        hold for :func:`gpuksvm.persistence.io.load` (see there); a larger file is
        refused before its arrays are read.  Default: the environment
        variable ``GPUKSVM_MODEL_LOAD_MAX_BYTES``, else half the memory
        available now (``MemAvailable`` in ``/proc/meminfo``, capped by the
        room left under a cgroup v2 ``memory.max``; elsewhere
        ``sysconf`` available pages, else physical pages; 2 GiB where the
        system reports none), at least 512 MiB.

    Examples
    --------
    >>> import gpuksvm
    >>> with gpuksvm.config_context():         # restores the settings at the end of the block
    ...     gpuksvm.set_config(gpu_memory_fraction=0.25)
    ...     gpuksvm.get_config()["gpu_memory_fraction"]
    0.25
    """
    cfg = _config()
    if cpu_memory_budget is not None:
        cfg["cpu_memory_budget"] = parse_bytes(cpu_memory_budget)
    if gpu_memory_budget is not None:
        cfg["gpu_memory_budget"] = parse_bytes(gpu_memory_budget)
    if gpu_memory_fraction is not None:
        if not 0.0 < float(gpu_memory_fraction) <= 1.0:
            raise ValueError(f"gpu_memory_fraction must be in (0, 1], got {gpu_memory_fraction!r}")
        cfg["gpu_memory_fraction"] = float(gpu_memory_fraction)
    if host_blas_threads is not None:
        if host_blas_threads not in HOST_BLAS_POLICIES:
            raise ValueError(f"host_blas_threads must be one of {HOST_BLAS_POLICIES}, got {host_blas_threads!r}")
        cfg["host_blas_threads"] = host_blas_threads
    if model_load_max_bytes is not None:
        cfg["model_load_max_bytes"] = parse_bytes(model_load_max_bytes)


@contextlib.contextmanager
def config_context(**kwargs: Any) -> Iterator[None]:
    """Temporarily change the configuration (see :func:`set_config`).

    Examples
    --------
    >>> import gpuksvm
    >>> with gpuksvm.config_context(cpu_memory_budget="64MB", host_blas_threads="by_size"):
    ...     cfg = gpuksvm.get_config()
    >>> cfg["cpu_memory_budget"], cfg["host_blas_threads"]
    (64000000, 'by_size')
    """
    with _settings(_config()):
        set_config(**kwargs)
        yield


@contextlib.contextmanager
def _settings(cfg: dict) -> Iterator[None]:
    """The calling thread's settings replaced by a copy of ``cfg`` for a block, then restored."""
    old, new = dict(_config()), dict(cfg)
    try:
        _config().clear()
        _config().update(new)
        yield
    finally:
        _config().clear()
        _config().update(old)


@dataclass(frozen=True)
class CallerSettings:
    """The settings of :func:`set_config` of one thread, to run work elsewhere under them.

    The settings are per thread (as scikit-learn's): the threads of a pool, and the threads of a
    Dask worker, start from the defaults, so a caller's ``set_config(cpu_memory_budget=...)``
    would not reach them.  :func:`caller_settings` captures them in the calling thread, with the
    budgets resolved to bytes there (the caller's environment variables count); :meth:`applied`
    puts them in place in whichever thread runs the work (:func:`in_calling_config` for a thread
    pool, :func:`gpuksvm.scaleout.runtime.on_workers` for Dask tasks).  Frozen and picklable, so
    it travels with a task function to another process.

    Every setting of :func:`get_config` is carried (the fields below, one per setting).

    A *share* is the number of units of work that run at once under one caller's settings
    (threads of a pool, tasks at once on a Dask worker).  One rule for both: each unit is given
    ``cpu_memory_budget // share`` and the GPU budget divided by ``share`` too —
    ``gpu_memory_budget // share`` where a cap is set, and ``gpu_memory_fraction / share`` —
    because the threads of one process share one GPU as they share its memory.  Together the
    units then stay within the caller's budgets; the fraction is divided as well since units
    that size their blocks at the same moment all see the same free GPU memory.

    Attributes
    ----------
    cpu_memory_budget : int
        Bytes: the setting, else ``GPUKSVM_CPU_MEMORY_BUDGET`` of the caller, else 512 MiB.
    gpu_memory_budget : int or None
        Bytes: the setting, else ``GPUKSVM_GPU_MEMORY_BUDGET`` of the caller; None: no cap
        beyond the fraction (the place the work runs may have its own environment variable).
    gpu_memory_fraction : float
        Fraction of the free GPU memory a block operation may use.
    host_blas_threads : str
        The host BLAS thread policy (:data:`HOST_BLAS_POLICIES`).
    model_load_max_bytes : int or None
        Bytes: the setting, else ``GPUKSVM_MODEL_LOAD_MAX_BYTES`` of the caller; None: half the
        memory available where the work runs (that machine's memory, not the caller's).

    Examples
    --------
    >>> import pickle
    >>> import gpuksvm
    >>> from gpuksvm.array import backend as bk
    >>> with gpuksvm.config_context(cpu_memory_budget="64MB", gpu_memory_budget="32MB"):
    ...     settings = pickle.loads(pickle.dumps(bk.caller_settings()))
    >>> settings.budget_bytes(), settings.budget_bytes(gpu=True), settings.less(1_000_000).budget_bytes()
    (64000000, 32000000, 63000000)
    >>> with settings.applied(share=4):
    ...     cfg = gpuksvm.get_config()
    >>> cfg["cpu_memory_budget"], cfg["gpu_memory_budget"], cfg["gpu_memory_fraction"]
    (16000000, 8000000, 0.125)
    """

    cpu_memory_budget: int
    gpu_memory_budget: int | None
    gpu_memory_fraction: float
    host_blas_threads: str
    model_load_max_bytes: int | None

    def _budget_name(self, gpu: bool) -> str:
        return "gpu_memory_budget" if gpu and self.gpu_memory_budget is not None else "cpu_memory_budget"

    def budget_bytes(self, gpu: bool = False) -> int:
        """Bytes the work may use: the CPU budget, or for GPU work (``gpu``) the GPU cap where
        the caller had one (else the CPU budget: the caller cannot know the free GPU memory of
        the place the work runs)."""
        return int(getattr(self, self._budget_name(gpu)))

    def less(self, nbytes: int, gpu: bool = False) -> "CallerSettings":
        """The same settings with ``nbytes`` (held where the work runs, e.g. persisted chunks)
        taken off the budget of :meth:`budget_bytes` (at least 1 byte is left)."""
        name = self._budget_name(gpu)
        return replace(self, **{name: max(int(getattr(self, name)) - int(nbytes), 1)})

    def shared(self, share: int) -> "CallerSettings":
        """The settings of one of ``share`` units of work that run at once: the CPU budget, the
        GPU cap and the GPU fraction divided by ``share`` (see the class)."""
        share = max(int(share), 1)
        gpu = self.gpu_memory_budget
        return replace(self, cpu_memory_budget=max(self.cpu_memory_budget // share, 1),
                       gpu_memory_budget=None if gpu is None else max(gpu // share, 1),
                       gpu_memory_fraction=self.gpu_memory_fraction / share)

    @contextlib.contextmanager
    def applied(self, share: int = 1) -> Iterator[None]:
        """The calling thread's settings replaced, for a ``with`` block, by these for one of
        ``share`` units of work at once (:meth:`shared`); restored at the end."""
        with _settings(asdict(self.shared(share))):
            yield


def caller_settings() -> CallerSettings:
    """The calling thread's settings, budgets resolved to bytes (see :class:`CallerSettings`).

    Examples
    --------
    >>> import gpuksvm
    >>> with gpuksvm.config_context(host_blas_threads="by_size"):
    ...     caller_settings().host_blas_threads
    'by_size'
    """
    cfg = dict(_config())
    cfg.update(cpu_memory_budget=_cpu_budget_bytes(), gpu_memory_budget=_gpu_budget_bytes(),
               model_load_max_bytes=_bytes_setting("model_load_max_bytes", "GPUKSVM_MODEL_LOAD_MAX_BYTES"))
    return CallerSettings(**cfg)


@dataclass(frozen=True)
class _InSettings:
    """``fn`` run under ``settings`` for one of ``share`` units at once (picklable)."""

    fn: Callable[..., Any]
    settings: CallerSettings
    share: int = 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.settings.applied(self.share):
            return self.fn(*args, **kwargs)


def in_calling_config(fn: Callable[..., Any], *, share: int = 1) -> Callable[..., Any]:
    """``fn`` made to run under the calling thread's settings, in whichever thread calls it.

    The worker threads of a pool start from the defaults; wrap the function a pool runs with
    this (in the calling thread: :func:`caller_settings`).  ``share``: the threads that run at
    once; each is given the caller's CPU and GPU budgets divided by ``share``
    (:meth:`CallerSettings.shared`), so that together they stay within them.  The result is
    picklable when ``fn`` is.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import gpuksvm
    >>> from gpuksvm.array import backend as bk
    >>> with gpuksvm.config_context(cpu_memory_budget="64MB"), ThreadPoolExecutor(2) as pool:
    ...     budgets = list(pool.map(bk.in_calling_config(lambda _: bk.memory_budget("cpu"), share=2), [0, 1]))
    >>> budgets
    [32000000, 32000000]
    """
    return _InSettings(fn, caller_settings(), max(int(share), 1))


_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "t": 1e12, "tb": 1e12, "tib": 2**40}


def parse_bytes(value: int | float | str) -> int:
    """Parse ``1000``, ``"512MB"``, ``"2 GiB"`` into a positive number of bytes."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        n = int(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"cannot parse a memory size from {value!r} (try e.g. '512MB')")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise ValueError(f"a memory budget must be positive, got {value!r}")
    return n


def _bytes_setting(name: str, env_var: str) -> int | None:
    """A byte-size setting of the calling thread: the setting, else the environment variable, else None."""
    b = _config()[name]
    if b is not None:
        return int(b)
    env = os.environ.get(env_var)
    return parse_bytes(env) if env else None


def _cpu_budget_bytes() -> int:
    b = _bytes_setting("cpu_memory_budget", "GPUKSVM_CPU_MEMORY_BUDGET")
    return 512 * 2**20 if b is None else b


def _gpu_budget_bytes() -> int | None:
    """The ``gpu_memory_budget`` setting in effect: the setting, ``GPUKSVM_GPU_MEMORY_BUDGET``, else None."""
    return _bytes_setting("gpu_memory_budget", "GPUKSVM_GPU_MEMORY_BUDGET")


def _read_int(path: str, field: str | None = None) -> int | None:
    """An integer read from a small system file (a ``field:`` line in kB, or the whole file)."""
    try:
        with open(path) as fh:
            if field is None:
                text = fh.read(64).strip()
                return int(text) if text.isdigit() else None
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory() -> int | None:
    """Bytes of memory this process could still use, as far as the system says (None: unknown)."""
    avail = _read_int("/proc/meminfo", "MemAvailable")
    if avail is None and hasattr(os, "sysconf"):
        for name in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
            try:
                avail = os.sysconf(name) * os.sysconf("SC_PAGE_SIZE")
                break
            except (ValueError, OSError):
                continue
    limit = _read_int("/sys/fs/cgroup/memory.max")
    used = _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        room = max(limit - used, 0)
        avail = room if avail is None else min(avail, room)
    return avail if avail is None or avail > 0 else None


def model_load_max_bytes() -> int:
    """The ``model_load_max_bytes`` setting in effect (see :func:`set_config`)."""
    b = _bytes_setting("model_load_max_bytes", "GPUKSVM_MODEL_LOAD_MAX_BYTES")
    if b is not None:
        return b
    avail = available_memory()
    return max(512 * 2**20, (avail if avail is not None else 4 * 2**30) // 2)


# --------------------------------------------------------------------------- devices
@dataclass(frozen=True)
class Device:
    """A resolved compute device: ``Device("cpu")`` or ``Device("cuda", 0)``."""

    kind: str
    index: int | None = None

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    @property
    def xp(self):
        return get_namespace(self)

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this the current CUDA device for the duration (no-op on CPU)."""
        if not self.is_gpu:
            yield
            return
        import cupy

        with cupy.cuda.Device(self.index):
            yield


CPU = Device("cpu")


@lru_cache(maxsize=1)
def gpu_status() -> GpuStatus:
    """Whether CuPy can be used here and, if not, why not and what would fix it (probed once)."""
    return probe()


def _cupy_or_none():
    """The CuPy module when a GPU can be used, else None."""
    return gpu_status().cupy


def cuda_available() -> bool:
    """True when CuPy imports, a CUDA device answers, its libraries load and the kernels compile.

    Examples
    --------
    >>> from gpuksvm import cuda_available
    >>> isinstance(cuda_available(), bool)    # False on a machine without a usable GPU
    True
    """
    return _cupy_or_none() is not None


_fallback_warned = threading.Event()


def _warn_auto_fallback() -> None:
    """The one warning per process when CuPy is installed but ``device="auto"`` falls back to the CPU."""
    status = gpu_status()
    if not status.installed or _fallback_warned.is_set():
        return
    _fallback_warned.set()
    warnings.warn(f"device='auto' runs on the CPU: CuPy is installed but cannot use a GPU: "
                  f"{status.describe()} ('gpuksvm doctor' shows every check)", GpuUnavailableWarning, stacklevel=3)


def _gpu_device_count() -> int:
    cp = _cupy_or_none()
    return 0 if cp is None else int(cp.cuda.runtime.getDeviceCount())


_DEVICE_RE = re.compile(r"^(cpu|gpu|cuda|auto)(?::(\d+))?$")


def resolve_device(device: str | Device | None = "auto") -> Device:
    """Turn a device setting into a :class:`Device`.

    Examples
    --------
    >>> from gpuksvm import resolve_device
    >>> resolve_device("cpu")
    Device(kind='cpu', index=None)
    >>> resolve_device("cpu").is_gpu
    False

    Raises
    ------
    ValueError
        For a string that names no device.
    DeviceUnavailableError
        When a GPU is asked for explicitly and none can be used.
    """
    if isinstance(device, Device):
        return device
    if device is None:
        device = "auto"
    if not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'auto', 'cpu', 'gpu' or 'cuda:0', got {device!r}")
    spec = device.strip().lower()
    if spec == "auto":
        env = os.environ.get("GPUKSVM_DEVICE", "").strip().lower()
        if env and env != "auto":
            return resolve_device(env)
        if cuda_available():
            return Device("cuda", 0)
        _warn_auto_fallback()
        return CPU
    m = _DEVICE_RE.match(spec)
    if m is None:
        raise ValueError(f"unknown device {device!r}; use 'auto', 'cpu', 'gpu', 'cuda' or 'cuda:N'")
    kind, idx = m.group(1), m.group(2)
    if kind == "cpu":
        return CPU
    if kind == "auto":
        raise ValueError(f"unknown device {device!r}")
    if not cuda_available():
        status = gpu_status()
        cpu = "" if "device='cpu'" in status.fix else "; or use device='cpu'"
        raise DeviceUnavailableError(
            f"device={device!r} asks for a CUDA GPU, but none is usable here: {status.describe()}{cpu}.")
    index = int(idx) if idx is not None else 0
    count = _gpu_device_count()
    if index >= count:
        raise DeviceUnavailableError(f"device={device!r}: only {count} CUDA device(s) present")
    return Device("cuda", index)


# --------------------------------------------------------------------------- namespaces
def get_namespace(device: str | Device = "cpu"):
    """The array module (``numpy`` or ``cupy``) for a device."""
    dev = resolve_device(device)
    if dev.is_gpu:
        return _cupy_or_none()
    return np


def is_gpu_array(x: Any) -> bool:
    """True for CuPy arrays and CuPy sparse matrices (without importing CuPy)."""
    mod = type(x).__module__
    return mod.startswith("cupy") or mod.startswith("cupyx")


def is_sparse(x: Any) -> bool:
    if sp.issparse(x):
        return True
    if is_gpu_array(x):
        import cupyx.scipy.sparse as csp

        return csp.issparse(x)
    return False


def namespace_of(x: Any):
    """The array module of an array (``cupy`` for CuPy arrays, else ``numpy``)."""
    if is_gpu_array(x):
        import cupy

        return cupy
    return np


def device_of(x: Any) -> Device:
    if is_gpu_array(x):
        return Device("cuda", int(x.device.id))
    return CPU


def array_kind(x: Any) -> str:
    """``"cupy"`` for arrays living on a GPU, ``"numpy"`` for everything else."""
    return "cupy" if is_gpu_array(x) else "numpy"


def to_host(x: Any) -> Any:
    """Return a NumPy array (or SciPy sparse matrix) holding ``x``."""
    if x is None:
        return None
    if is_gpu_array(x):          # CuPy arrays and CuPy sparse matrices alike
        return x.get()
    if sp.issparse(x):
        return x
    return np.asarray(x)


def to_device(x: Any, device: str | Device, dtype: Any = None, *, copy: bool = False) -> Any:
    """Move ``x`` to ``device`` (and cast to ``dtype``).

    Dense arrays become NumPy/CuPy arrays; SciPy sparse matrices become CSR on
    the CPU and ``cupyx.scipy.sparse`` CSR on a GPU.  The caller's array is never
    modified; with ``copy=True`` the result never shares memory with it.
    """
    dev = resolve_device(device)
    if x is None:
        return None
    if dev.is_gpu:
        import cupy

        with cupy.cuda.Device(dev.index):
            if is_sparse(x):
                import cupyx.scipy.sparse as csp

                if not is_gpu_array(x):
                    x = sp.csr_matrix(x)
                    if dtype is not None:
                        x = x.astype(dtype)
                    return csp.csr_matrix(x)
                x = x.tocsr()
                return x.astype(dtype) if dtype is not None else (x.copy() if copy else x)
            out = cupy.asarray(x, dtype=dtype)
            if copy and out is x:
                out = out.copy()
            return out
    if is_gpu_array(x):
        x = x.get()
        if dtype is not None:
            x = x.astype(dtype, copy=False)
        return x
    if sp.issparse(x):
        x = x.tocsr()
        if dtype is not None and x.dtype != dtype:
            return x.astype(dtype)
        return x.copy() if copy else x
    return np.array(x, dtype=dtype, copy=True) if copy else np.asarray(x, dtype=dtype)


def compute_copy(x: Any, device: str | Device, dtype: Any = None, *, dense: bool | str = False) -> Any:
    """``x`` ready for the compute paths: on ``device`` in ``dtype`` (:func:`to_device`).

    ``dense``: densify sparse ``x`` (``True``), only on a GPU (``"gpu"``: the
    GPU paths that are dense), or never (``False``: CSR on either device).
    """
    dev = resolve_device(device)
    if dense is True and is_sparse(x):
        x = x.toarray()
    return to_device(densified_for(x, dev) if dense == "gpu" else x, dev, dtype)


def host_unless_gpu(x: Any, device: str | Device) -> Any:
    """``x`` brought to the host when ``device`` is the CPU (a CuPy ``x`` with ``device="cpu"``
    asked for explicitly computes on the host); as given for a GPU."""
    return to_host(x) if is_gpu_array(x) and not resolve_device(device).is_gpu else x


def gpu_ready(x: Any, device: str | Device, dtype: Any = None) -> Any:
    """``x`` as the GPU paths read it when ``device`` is a GPU (on the device in ``dtype``; SciPy-sparse
    ``x`` densified, CuPy-sparse kept); as given on the CPU, whose paths take sparse and any dtype."""
    dev = resolve_device(device)
    if not dev.is_gpu:
        return x
    return to_device(x.toarray() if is_sparse(x) and not is_gpu_array(x) else x, dev, dtype)


def densified_for(x: Any, device: str | Device) -> Any:
    """Sparse ``x`` as a dense array (of its own kind) when ``device`` is a GPU, whose paths are
    dense; else ``x`` as given."""
    return x.toarray() if is_sparse(x) and resolve_device(device).is_gpu else x


def device_for(device: str | Device | None, x: Any) -> Device:
    """The device a computation on ``x`` runs on: ``device``, where ``"auto"`` follows a CuPy ``x``
    to its GPU."""
    if is_gpu_array(x) and isinstance(device, str) and device == "auto":
        return device_of(x)
    return resolve_device(device)


def namespace_of_any(*arrays: Any):
    """The namespace of the first CuPy array among ``arrays``, else NumPy (a mixed computation runs
    on the GPU)."""
    for a in arrays:
        if is_gpu_array(a):
            return namespace_of(a)
    return np


def asarray_in(xp: Any, x: Any, dtype: Any = None) -> Any:
    """``x`` as an array of the namespace ``xp`` in ``dtype`` (a CuPy ``x`` is brought to the host
    for NumPy, a host ``x`` copied to the GPU for CuPy)."""
    return xp.asarray(to_host(x) if xp is np else x, dtype=dtype)


def is_array(x: Any) -> bool:
    """True for NumPy arrays and for CuPy arrays and sparse matrices (not SciPy sparse, not lists)."""
    return isinstance(x, np.ndarray) or is_gpu_array(x)


def device_index(x: Any, idx: Any) -> Any:
    """The index ``idx`` where it can index ``x``: on ``x``'s GPU for a CuPy ``x``, else as given."""
    return to_device(idx, device_of(x)) if is_gpu_array(x) else idx


def take_rows(x: Any, rows: Any, *, dense: bool = False) -> Any:
    """Rows ``rows`` (host or device indices) of ``x``, in ``x``'s own kind.

    NumPy and CuPy arrays (the index moved to ``x``'s device), SciPy and CuPy
    sparse matrices, pandas DataFrames (positional) and lists/tuples of
    samples.  ``dense``: sparse rows come back as a dense array.
    """
    if is_gpu_array(x):
        out = x[device_index(x, rows)]
    elif hasattr(x, "iloc"):
        out = x.iloc[rows]
    elif isinstance(x, (list, tuple)):
        return [x[i] for i in rows]
    else:
        out = x[rows]
    return out.toarray() if dense and is_sparse(out) else out


def vstack_rows(a: Any, b: Any) -> Any:
    """Rows of ``a`` then of ``b`` (``a`` None: ``b``), dense or sparse, on ``a``'s device."""
    if a is None:
        return b
    if is_sparse(a) or is_sparse(b):
        if is_gpu_array(a):
            import cupyx.scipy.sparse as csp  # only reached with CuPy blocks

            return csp.vstack([a, b]).tocsr()
        return sp.vstack([a, b]).tocsr()
    return namespace_of(a).concatenate([a, b], axis=0)


def as_kind(x: Any, kind: str) -> Any:
    """Return ``x`` as the kind of array a caller passed in (see :func:`array_kind`)."""
    if x is None:
        return None
    if kind == "cupy":
        if is_gpu_array(x):
            return x
        import cupy

        return cupy.asarray(x)
    return to_host(x)


def labels_as_kind(labels: Any, kind: str) -> Any:
    """Predicted class labels in the caller's kind of array (the rule of every ``predict``).

    Numeric labels follow :func:`as_kind`; labels a GPU array cannot hold
    (strings, objects) stay NumPy.
    """
    labels = to_host(labels)
    return as_kind(labels, kind) if np.asarray(labels).dtype.kind in "biuf" else labels


# --------------------------------------------------------------------------- dtypes
def resolve_dtype(dtype: Any, device: str | Device) -> np.dtype:
    """The floating dtype to compute in.

    ``None`` means float32 on a GPU (its fast path) and float64 on the CPU (the
    reference).  Only float32 and float64 are accepted.
    """
    dev = resolve_device(device)
    if dtype is None:
        return np.dtype(np.float32 if dev.is_gpu else np.float64)
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return dt


# --------------------------------------------------------------------------- memory
def memory_budget(device: str | Device) -> int:
    """Bytes of scratch memory one block operation may use on ``device``.

    GPU: ``gpu_memory_fraction`` of the free device memory (memory cached by
    CuPy's pool counts as free; at least 1 MiB), capped by ``gpu_memory_budget``
    where one is set (:func:`set_config`, or the environment variable
    ``GPUKSVM_GPU_MEMORY_BUDGET``).  CPU: ``cpu_memory_budget`` (default 512 MiB,
    or the environment variable ``GPUKSVM_CPU_MEMORY_BUDGET``).
    """
    dev = resolve_device(device)
    if not dev.is_gpu:
        return _cpu_budget_bytes()
    import cupy

    with cupy.cuda.Device(dev.index):
        free, _total = cupy.cuda.runtime.memGetInfo()
        pool = cupy.get_default_memory_pool()
        free += pool.free_bytes()
    budget = max(int(free * _config()["gpu_memory_fraction"]), 1 << 20)
    cap = _gpu_budget_bytes()
    return budget if cap is None else min(budget, cap)


def plan_rows(n_rows: int, bytes_per_row: int, device: str | Device = "cpu", *,
              budget: int | None = None, min_rows: int = 1, max_rows: int | None = None,
              multiple: int = 1, what: str = "a block operation") -> int:
    """How many rows of a block operation fit in the memory budget.

    Parameters
    ----------
    n_rows : int
        Rows to process in all.
    bytes_per_row : int
        Scratch bytes one row needs (e.g. ``k * itemsize`` for a kernel block
        against ``k`` landmarks).
    budget : int, optional
        Overrides :func:`memory_budget`.
    min_rows : int
        The smallest block the operation can work in.
    multiple : int
        Round the block size down to a multiple of this (tile alignment).
    what : str
        The operation, as the error names it.

    Raises
    ------
    MemoryBudgetError
        When the budget is smaller than ``min_rows`` rows of ``bytes_per_row`` (the block
        could only be planned by exceeding the budget).

    Examples
    --------
    >>> plan_rows(10_000, 800, budget=80_000)
    100
    >>> with config_context(cpu_memory_budget=500):
    ...     plan_rows(10_000, 800, what="a kernel block")
    Traceback (most recent call last):
    ...
    gpuksvm.array.backend.MemoryBudgetError: the memory budget of 500 bytes is smaller than one row block of a kernel block, which needs 800 bytes: raise the budget to at least 800 bytes (gpuksvm.set_config(cpu_memory_budget=...) on the CPU)
    """
    if n_rows <= 0:
        return 0
    configured = memory_budget(device)
    budget = configured if budget is None else int(budget)
    per_row = max(int(bytes_per_row), 1)
    minimum = per_row * max(int(min_rows), 1)
    if budget < minimum:
        raise MemoryBudgetError(budget, minimum, what, configured=configured)
    rows = max(int(budget // per_row), min_rows)
    if multiple > 1 and rows >= multiple:
        rows -= rows % multiple
    if max_rows is not None:
        rows = min(rows, int(max_rows))
    return int(max(1, min(rows, n_rows)))


def is_out_of_memory(exc: BaseException) -> bool:
    """True for CuPy/CUDA out-of-memory errors and Python's ``MemoryError``."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    if name == "OutOfMemoryError":
        return True
    msg = str(exc)
    return "CUBLAS_STATUS_ALLOC_FAILED" in msg or "cudaErrorMemoryAllocation" in msg \
        or "CUSOLVER_STATUS_ALLOC_FAILED" in msg


def synchronize(device: str | Device) -> None:
    """Wait for the work queued on ``device``'s current CUDA stream (no-op on the CPU)."""
    dev = resolve_device(device)
    if dev.is_gpu:
        get_namespace(dev).cuda.get_current_stream().synchronize()


def synchronized_clock(device: str | Device) -> float:
    """``time.perf_counter()`` after ``device`` finished its queued work (honest stage times)."""
    synchronize(device)
    return time.perf_counter()


def free_gpu_cache() -> None:
    """Return CuPy's cached blocks to the driver (used before an OOM retry)."""
    cp = _cupy_or_none()
    if cp is not None:
        cp.get_default_memory_pool().free_all_blocks()


_fallback_local = threading.local()


class FallbackCollector:
    """Out-of-memory retries within a ``with`` block, gathered as one fallback.

    While the block runs, the retries of :func:`smaller_on_out_of_memory` (and so of
    :func:`map_row_blocks`) made *in this thread*, at any depth (an operation's row blocks,
    the kernel blocks within them), are reported here instead of each issuing a
    :class:`MemoryFallbackWarning`.  When the block ends (also by an exception) the first
    message is passed on once: to the enclosing collector of this thread if there is one,
    else as one ``MemoryFallbackWarning``.  ``messages`` keeps them all; ``retried`` says
    whether there was one; ``cut`` names what was made smaller (each ``what`` once, in order;
    an enclosing collector receives the inner ones' too), for a fit's ``memory_fallback_``
    (:func:`fallback_text`).

    Thread-safe: each thread has its own stack of collectors and nothing of Python's
    process-wide warnings state (filters, ``showwarning``) is touched, so fits running at once
    on several threads (a model search's ``n_jobs`` on threads) neither see nor swallow each
    other's retries or warnings.  Threads started within the block are not covered (their
    retries warn as usual).

    Examples
    --------
    >>> def grow(size):
    ...     if size > 100:
    ...         raise MemoryError("too big")
    ...     return size
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     with FallbackCollector() as fallback:
    ...         first = smaller_on_out_of_memory(grow, 400, 10, what="a buffer")
    ...         second = smaller_on_out_of_memory(grow, 800, 10, what="a buffer")
    >>> first, second
    ((100, 100), (100, 100))
    >>> fallback.messages
    ['a buffer: out of memory, retrying with 200 bytes', 'a buffer: out of memory, retrying with 400 bytes']
    >>> [str(w.message) for w in caught]
    ['a buffer: out of memory, retrying with 200 bytes']
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.cut: list[str] = []

    @property
    def retried(self) -> bool:
        """Whether a retry was reported."""
        return bool(self.messages)

    def report(self, message: str, what: str | None = None) -> None:
        """Record one fallback: the message its warning would have had and what was made smaller
        (``cut``: each ``what`` once, in order, for a fit's ``memory_fallback_``,
        :func:`fallback_text`)."""
        self.messages.append(str(message))
        if what and what not in self.cut:
            self.cut.append(what)

    @staticmethod
    def active() -> "FallbackCollector | None":
        """The innermost collector of the calling thread, or None."""
        stack = getattr(_fallback_local, "stack", None)
        return stack[-1] if stack else None

    def __enter__(self) -> "FallbackCollector":
        if not hasattr(_fallback_local, "stack"):
            _fallback_local.stack = []
        _fallback_local.stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _fallback_local.stack
        stack.remove(self)
        if self.messages:
            outer = stack[-1] if stack else None
            if outer is not None:
                outer.report(self.messages[0])
                outer.cut.extend(w for w in self.cut if w not in outer.cut)
            else:
                # at the code whose with block this is; no registry: every block that retried
                # warns (once), not only the first at that line of the process
                at = sys._getframe(1)
                warnings.warn_explicit(self.messages[0], MemoryFallbackWarning, at.f_code.co_filename,
                                       at.f_lineno, module=at.f_globals.get("__name__"),
                                       module_globals=at.f_globals)


def fallback_text(*parts: str | None, retried: list | None = None) -> str | None:
    """A fit's ``memory_fallback_``: the named ``parts`` that are not None and, when ``retried``
    (a :class:`FallbackCollector`'s ``cut``) holds any, ``"out_of_memory: <what>; <what>"``; None when
    nothing was made smaller."""
    names = [p for p in parts if p]
    if retried:
        names.append("out_of_memory: " + "; ".join(retried))
    return ", ".join(names) or None


def smaller_on_out_of_memory(fn: Callable[[int], Any], size: int, minimum: int, *,
                             what: str = "an allocation", size_text: str = "{size:,} bytes",
                             warn: bool = True) -> tuple[Any, int]:
    """``(fn(size), size)``; on an out-of-memory error ``fn`` is retried with half the size (not
    below ``minimum``) after returning the pool's cached blocks, with a
    :class:`MemoryFallbackWarning` at the first fallback (when ``warn``; ``size_text`` formats
    the new size in it), or, within a :class:`FallbackCollector` block of the calling thread,
    that message and ``what`` reported to it instead (it warns once for the block and names
    what was cut for the fit's ``memory_fallback_``).

    For working memory whose size is a choice (a block, a buffer's spare capacity), not a need:
    the error is raised again once ``minimum`` fails.  Returns ``fn``'s result and the size used.
    """
    size, minimum = max(int(size), 1), int(minimum)
    while True:
        try:
            return fn(size), size
        except Exception as exc:  # noqa: BLE001 - only OOM is handled
            if not is_out_of_memory(exc) or size <= minimum:
                raise
        # past the handler, and after a collection (reference cycles through the traceback's
        # frames), the failed try's arrays are freed, so the cache handed back now holds them too
        # (else they stay cached, in pieces the retry's larger arrays cannot reuse, and count
        # against the pool's limit; CuPy's own allocator collects before it gives up, too)
        gc.collect()
        free_gpu_cache()
        size = max(size // 2, minimum)
        if warn:
            message = f"{what}: out of memory, retrying with {size_text.format(size=size)}"
            collector = FallbackCollector.active()
            if collector is not None:
                collector.report(message, what)
            else:
                warnings.warn(message, MemoryFallbackWarning, stacklevel=3)
            warn = False


def map_row_blocks(fn: Callable[[int, int], None], n_rows: int, block_rows: int,
                   *, min_rows: int = 1, what: str = "block operation") -> int:
    """Call ``fn(start, stop)`` over ``[0, n_rows)`` in blocks of ``block_rows``.

    On an out-of-memory error the failing block is retried with half as many
    rows (down to ``min_rows``; :func:`smaller_on_out_of_memory`); the first fallback issues a
    :class:`MemoryFallbackWarning` naming the new size.  ``fn`` must be safe to
    call again on the same range.  Returns the block size finally used.
    """
    start = 0
    block = max(int(block_rows), 1)
    warned = False
    while start < n_rows:
        first = start
        _, used = smaller_on_out_of_memory(lambda b: fn(first, min(first + b, n_rows)), block, min_rows,
                                           what=what, size_text="blocks of {size} rows", warn=not warned)
        warned = warned or used < block
        block = used
        start = min(first + used, n_rows)
    return block


def release_free_heap() -> None:
    """Hand the C heap's free memory back to the OS (glibc ``malloc_trim``; a no-op elsewhere).

    glibc keeps freed heap blocks resident (up to its trim threshold, which grows with the largest
    block freed), and each thread that allocated has an arena of its own whose free blocks the
    other threads do not reuse.  Measured: after the demo's fits a 40 MB array raised VmHWM by 0
    bytes, after ``malloc_trim(0)`` by 40 MB; an LLSVM search whose folds ran on 2 threads grew
    VmHWM by 249–307 MB with its refit, 225 MB when the heap was handed back before the refit.
    """
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
