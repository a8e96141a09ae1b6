"""The one point every operation of the fake CuPy goes through, and the hooks that observe it.

Every device operation of ``gpuemu/fake/cupy`` — ufuncs and operators, array
functions, reductions, indexing, linear algebra, random numbers, sparse
operations, RawKernel launches, allocations, host→device and device→host
copies and the synchronizing conversions (``.get()``, ``.item()``,
``float(x)``, ``int(x)``, ``bool(x)``, ``cupy.asnumpy``, ``.tolist()``,
stream/device ``synchronize``) — runs as ``dispatch(kind, name, run, ...)``.
After it ran, each registered hook is called with its :class:`Event`.

Hooks are the extension point for tooling (issue 17 attaches a tracer that
records names, shapes, dtypes, FLOPs, bytes and syncs)::

    from gpuemu import dispatch

    def log(ev: dispatch.Event) -> None:
        print(ev.kind, ev.name, ev.shapes(), ev.sync)

    with dispatch.hooked(log):
        model.fit(cupy.asarray(X), y)

A hook must not call the fake CuPy itself (that would dispatch again: such
calls are not reported to hooks, to avoid recursion).  Exceptions raised by a
hook propagate to the caller of the operation.

Kernel substitutes: within :func:`substituted`, a RawKernel launch of a named
kernel runs the given function (its NumPy twin) instead of the CPU emulator,
and its event says so (``info["substituted"]``).  Emulating a kernel thread by
thread is far too slow at the papers' scale; tooling that only counts
operations (``bench/gpu_model.py``) traces there with the twins instead.  The
emulator, with its checks, stays the default everywhere else.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = ["KINDS", "Event", "dispatch", "add_hook", "remove_hook", "hooked", "hooks", "substituted",
           "kernel_substitute", "public_call", "calls_hooked"]

#: What an event can be.  ``sync`` marks the ones that make the host wait for the device.
KINDS = ("ufunc", "function", "reduction", "method", "index", "alloc", "linalg", "random", "sparse",
         "kernel", "h2d", "d2h", "sync")

_hooks: list[Callable[["Event"], None]] = []
_substitutes: dict[str, Callable[[tuple, tuple, tuple], None]] = {}
_local = threading.local()


@dataclass
class Event:
    """One device operation.

    kind : one of :data:`KINDS`;  name : e.g. ``"add"``, ``"sum"``, ``"linalg.eigh"``,
    ``"cvm_furthest_f32"``, ``"asarray"``;  args / kwargs : as the caller passed them
    (device arrays are fake ``cupy.ndarray``);  result : what the operation returned;
    sync : True when the host waited for the device (device→host copies, scalar
    conversions, synchronize);  info : kind-specific details (a kernel's grid, block,
    shared_mem; a transfer's nbytes);  elapsed_s : host seconds the emulation of the
    operation took (tooling subtracts it to time the caller's own host work).
    """

    kind: str
    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    result: Any = None
    sync: bool = False
    info: dict = field(default_factory=dict)
    elapsed_s: float = 0.0

    def arrays(self) -> list:
        """The device arrays among the arguments (nested lists/tuples included)."""
        out: list = []

        def walk(v: Any) -> None:
            if isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif type(v).__module__.split(".")[0] in ("cupy", "cupyx") and hasattr(v, "shape"):
                out.append(v)

        walk(self.args)
        walk(tuple(self.kwargs.values()))
        return out

    def shapes(self) -> list[tuple]:
        return [tuple(a.shape) for a in self.arrays()]


def add_hook(fn: Callable[[Event], None]) -> Callable[[Event], None]:
    """Call ``fn(event)`` after every device operation (until :func:`remove_hook`)."""
    _hooks.append(fn)
    return fn


def remove_hook(fn: Callable[[Event], None]) -> None:
    _hooks.remove(fn)


def hooks() -> tuple:
    return tuple(_hooks)


@contextlib.contextmanager
def hooked(fn: Callable[[Event], None]) -> Iterator[Callable[[Event], None]]:
    """``fn`` observes the operations of the ``with`` block."""
    add_hook(fn)
    try:
        yield fn
    finally:
        remove_hook(fn)


def dispatch(kind: str, name: str, run: Callable[[], Any], args: tuple = (), kwargs: dict | None = None,
             *, sync: bool = False, **info: Any) -> Any:
    """Run one device operation (``run()``) and report it to the hooks."""
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    t0 = time.perf_counter()
    try:
        result = run()
    finally:
        _local.depth = depth
    if depth == 0 and _hooks:         # nested operations (inside another one) are not reported twice
        ev = Event(kind, name, tuple(args), dict(kwargs or {}), result, sync, info, time.perf_counter() - t0)
        _local.depth = depth + 1      # a hook's own use of the fake CuPy is not reported
        try:
            for h in tuple(_hooks):
                h(ev)
        finally:
            _local.depth = depth
    return result


@contextlib.contextmanager
def substituted(kernels: dict[str, Callable[[tuple, tuple, tuple], None]]) -> Iterator[None]:
    """Within the block, a RawKernel launch of a kernel named in ``kernels`` runs
    ``kernels[name](grid, block, args)`` instead of the CPU emulator (``args`` as
    launched: device arrays and NumPy scalars; the function writes the kernel's outputs)."""
    saved = dict(_substitutes)
    _substitutes.update(kernels)
    try:
        yield
    finally:
        _substitutes.clear()
        _substitutes.update(saved)


def kernel_substitute(name: str) -> Callable[[tuple, tuple, tuple], None] | None:
    """The substitute of kernel ``name`` (see :func:`substituted`), or None: run the emulator."""
    return _substitutes.get(name)


# ----------------------------------------------------------------------------- calls
_call_hooks: list[Callable[[str, tuple, dict], None]] = []


@contextlib.contextmanager
def calls_hooked(fn: Callable[[str, tuple, dict], None], *,
                 exclusive: bool = False) -> Iterator[Callable[[str, tuple, dict], None]]:
    """``fn(qualname, args, kwargs)`` observes the calls into the stand-in's public API in the block
    (``exclusive``: the other call hooks see none of them)."""
    saved = list(_call_hooks)
    if exclusive:
        _call_hooks.clear()
    _call_hooks.append(fn)
    try:
        yield fn
    finally:
        _call_hooks[:] = saved


def public_call(qualname: str | Callable[[tuple], str], fn: Callable, *, constructor: bool = False) -> Callable:
    """``fn`` as a public function of the stand-in named ``qualname`` (or ``qualname(args)``: a
    method names itself from its object's type): calls from outside the stand-in are reported to
    the :func:`calls_hooked` hooks (``constructor``: ``fn`` is a class's ``__init__``, reported
    as a call of the class, without the new object)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        if not _call_hooks or getattr(_local, "in_call", False) or getattr(_local, "depth", 0):
            return fn(*args, **kwargs)
        _local.in_call = True
        try:
            name = qualname(args) if callable(qualname) else qualname
            for h in tuple(_call_hooks):
                h(name, args[1:] if constructor else args, kwargs)
            return fn(*args, **kwargs)
        finally:
            _local.in_call = False
    call.__name__ = getattr(fn, "__name__", "call")
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    call.__doc__ = getattr(fn, "__doc__", None)
    call.__wrapped__ = fn
    return call
