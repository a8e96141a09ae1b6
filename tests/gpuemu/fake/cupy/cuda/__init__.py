"""cupy.cuda: one fake device (id 0), the null stream, events, runtime queries."""
from __future__ import annotations

import contextlib
import time

import types

from gpuemu import failures
from gpuemu.dispatch import dispatch as _dispatch

from . import compiler, memory, nvrtc, runtime  # noqa: F401
from .memory import MemoryPool, OutOfMemoryError  # noqa: F401  (as real cupy.cuda exports them)

_LIBRARIES = ("cublas", "cusolver", "cusparse", "curand")


def __getattr__(name):
    """``cupy.cuda.cublas`` etc.: CuPy imports them lazily, loading the library (ImportError if missing)."""
    if name in _LIBRARIES:
        failures.check_library(name)
        return types.ModuleType(f"cupy_backends.cuda.libs.{name}")
    raise AttributeError(f"module 'cupy.cuda' has no attribute {name!r}")

_current = [0]


class Device:
    def __init__(self, device=None):
        device = _current[0] if device is None else int(device)
        if not 0 <= device < runtime.getDeviceCount():
            raise runtime.CUDARuntimeError(101)      # cudaErrorInvalidDevice: invalid device ordinal
        self.id = device
        self._prev: list = []

    def __enter__(self):
        self._prev.append(_current[0])
        _current[0] = self.id
        return self

    def __exit__(self, *exc):
        _current[0] = self._prev.pop()
        return False

    def use(self):
        _current[0] = self.id

    def synchronize(self):
        _dispatch("sync", "Device.synchronize", lambda: None, (), {}, sync=True)

    @property
    def compute_capability(self):
        return "80"

    @property
    def mem_info(self):
        return runtime.memGetInfo()

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


class Stream:
    null: "Stream"

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr = 0

    def synchronize(self):
        _dispatch("sync", "Stream.synchronize", lambda: None, (), {}, sync=True)

    def use(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


Stream.null = Stream(null=True)


class Event:
    """A CUDA event: records the host clock (the emulated device runs synchronously)."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.time = None

    def record(self, stream=None):
        self.time = time.perf_counter()

    def synchronize(self):
        _dispatch("sync", "Event.synchronize", lambda: None, (), {}, sync=True)


def get_current_stream(device_id=None):
    return Stream.null


def get_elapsed_time(start_event, end_event):
    """Milliseconds between two recorded events (host time of the emulation: not a GPU figure)."""
    return (end_event.time - start_event.time) * 1e3


def is_available():
    return True


@contextlib.contextmanager
def using_allocator(allocator=None):
    yield


def set_allocator(allocator=None):
    pass
