"""The stand-in's public surface as real CuPy's: its names, its signatures, the call reports.

``cupy_api.json`` (written from the real CuPy by ``tests/realcupy.py``) holds real CuPy's public
names per namespace and the signatures of its functions and methods.  :func:`as_real` makes a
function refuse what the real signature refuses; :func:`report_calls` and friends wrap the
public functions so that :func:`gpuemu.dispatch.calls_hooked` hooks see every call as made.
"""
from __future__ import annotations

import functools as _functools
import inspect as _inspect
import json as _json
from pathlib import Path as _Path

from gpuemu.dispatch import public_call as _public_call

#: real CuPy's public names per namespace, and its functions' signatures (tests/realcupy.py
#: writes and checks the file)
_FILE = _json.loads((_Path(__file__).resolve().parent.parent / "cupy_api.json").read_text())
API = {k: frozenset(v) for k, v in _FILE.items() if k != "signatures"}
SIGNATURES = _FILE["signatures"]


@_functools.lru_cache(maxsize=None)
def _real_signature(qualname: str):
    """Real CuPy's signature of ``qualname`` (from cupy_api.json), or None where it is unknown."""
    params = SIGNATURES.get(qualname)
    if params is None:
        return None
    P = _inspect.Parameter
    return _inspect.Signature([P(name, getattr(P, kind), default=_DEFAULT if has_default else P.empty)
                               for name, kind, has_default in params])


class _Default:
    """A parameter's default in a real signature (the file records only that there is one)."""

    def __repr__(self):
        return "..."


_DEFAULT = _Default()


def as_real(qualname: str, fn):
    """``fn`` refusing, as real CuPy does, a call its signature does not take (a NumPy-only keyword,
    one argument too many)."""
    sig = _real_signature(qualname)
    if sig is None:
        return fn

    def call(*args, **kwargs):
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{qualname}(): {exc} (real CuPy: {qualname.rsplit('.', 1)[-1]}{sig})") from None
        return fn(*args, **kwargs)
    call.__name__ = getattr(fn, "__name__", qualname)
    call.__wrapped__ = fn
    return call


def report_calls(module, prefix: str) -> None:
    """Every public function of ``module`` (and each one its ``__getattr__`` makes) reports its
    calls as ``<prefix>.<name>`` (:func:`gpuemu.dispatch.public_call`)."""
    ns = vars(module)
    for name, v in list(ns.items()):
        if not name.startswith("_") and _inspect.isfunction(v) and v.__module__.split(".")[0] in ("cupy", "cupyx"):
            ns[name] = _public_call(f"{prefix}.{name}", as_real(f"{prefix}.{name}", v))
    make = ns.get("__getattr__")
    if make is not None and not getattr(make, "_reports_calls", False):
        def __getattr__(name):
            v = make(name)
            if callable(v) and not isinstance(v, type):
                return _public_call(f"{prefix}.{name}", as_real(f"{prefix}.{name}", v))
            return v
        __getattr__._reports_calls = True
        ns["__getattr__"] = __getattr__


def report_method_calls(cls, prefix: str = "") -> None:
    """The public methods of ``cls`` report their calls as ``<prefix or the object's type>.<name>``
    (with the object as the first argument); so do those its ``__getattr__`` makes."""
    def qualname(name):
        return (lambda args: f"{prefix or _type_name(args[0])}.{name}")
    for name, v in list(vars(cls).items()):
        if not name.startswith("_") and _inspect.isfunction(v):
            setattr(cls, name, _public_call(qualname(name), as_real(f"{prefix}.{name}", v) if prefix else v))
    make = vars(cls).get("__getattr__")
    if make is not None and prefix == "":
        def __getattr__(self, name):
            v = make(self, name)
            if callable(v) and not isinstance(v, type) and not isinstance(v, _functools.partial):
                return _functools.partial(_public_call(qualname(name), lambda s, *a, **k: v(*a, **k)), self)
            return v
        cls.__getattr__ = __getattr__


def report_constructor_calls(cls, qualname: str) -> None:
    """Creating a ``cls`` reports a call of ``qualname`` (its arguments, without the new object)."""
    cls.__init__ = _public_call(qualname, cls.__init__, constructor=True)


def _type_name(obj) -> str:
    """The public name of ``obj``'s type in real CuPy (``cupyx.scipy.sparse.csr_matrix``)."""
    return getattr(obj, "_public_type", None) or f"{type(obj).__module__}.{type(obj).__name__}"
