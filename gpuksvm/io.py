"""Model files: a versioned, portable ``.npz`` format with a JSON header (no pickle).

:func:`save` writes any fitted gpuksvm estimator (or a scikit-learn estimator,
e.g. a ``Pipeline`` around one) to a single file; :func:`load` reads it back on
any machine — a model fitted on a GPU loads and predicts on a CPU-only machine.
Loading never unpickles anything, so an untrusted model file cannot run code:
only classes from the ``gpuksvm`` and ``sklearn`` packages (estimators,
dataclasses such as :class:`~gpuksvm.kernels.Kernel`, and plain gpuksvm state
objects) and NumPy's own random generators can be rebuilt from a file.

File layout (format version 1)
------------------------------
The file is a ZIP archive readable by ``numpy.load(path, allow_pickle=False)``:

``header.json``
    UTF-8 JSON, the first member::

        {"format": "gpuksvm-model", "format_version": 1,
         "gpuksvm_version": "0.1.0", "numpy_version": "...", "created": "<ISO 8601 UTC>",
         "class": "gpuksvm.llsvm.LLSVM", "fitted_device": "cuda:0",
         "params": {...},            # get_params(deep=False), as JSON for `gpuksvm info`
         "tree": <node>,             # the whole object, typed tree encoding (below)
         "arrays": {"a0": {"dtype": "<f8", "shape": [1000, 22], "sha256": "..."}, ...}}

``a0.npy``, ``a1.npy``, ...
    The arrays referenced by the tree, in the ``.npy`` format
    (``allow_pickle=False``; object arrays are never stored as ``.npy``).

Typed tree encoding
-------------------
Every value is a JSON object with a type tag ``"t"``:

=============  ==================================================================
``none``       ``None``
``bool``       ``{"t": "bool", "v": true}``
``int``        Python or NumPy integer (``"dtype"`` kept for NumPy scalars)
``float``      ``"v"`` is a number or one of ``"nan"``, ``"inf"``, ``"-inf"``
``complex``    ``"re"``, ``"im"``
``str``        ``{"t": "str", "v": "..."}``; ``bytes`` as hex
``array``      ``{"t": "array", "ref": "a3", "device": "cuda"}`` — a NumPy (or
               CuPy, moved to the host) array stored as ``a3.npy``
``objarray``   object-dtype array: ``"shape"`` and the encoded ``"items"``
``sparse``     SciPy / CuPy sparse matrix: ``"format"``, ``"shape"`` and its arrays
``list``,      ``"items"``
``tuple``,
``set``
``dict``       ``"items"``: ``[[key, value], ...]`` (keys are encoded too)
``dtype``      a NumPy dtype or scalar type (``"kind": "dtype"|"type"``)
``dataclass``  ``"cls"`` (``module:QualName``) and ``"fields"``
``namedtuple`` ``"cls"`` and ``"fields"``
``estimator``  ``"cls"``, ``"params"`` (``get_params(deep=False)``) and
               ``"state"`` (every other attribute, fitted ones included)
``object``     a plain gpuksvm object: ``"cls"`` and ``"state"``
``rng``        ``numpy.random.RandomState`` or ``Generator``: its bit-generator state
``device``     a :class:`gpuksvm.backend.Device` (always restored as the CPU)
=============  ==================================================================

Arrays on a GPU are copied to the host; the model's ``device`` parameter is
reset to ``"auto"`` (as when pickling), so it predicts on the GPU when one is
present and on the CPU otherwise; pass ``load(path, device=...)`` to choose.

Writes are atomic: the file is written to a temporary file in the same folder,
flushed to disk and moved over ``path`` with :func:`os.replace`, so a crash
never leaves a partial model at ``path`` (an existing file survives intact).

Pickle and joblib work as well (estimators pickle to host arrays), but only
this format is safe for files from an untrusted source.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import importlib
import io as _io
import json
import math
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import backend as bk

__all__ = ["save", "load", "read_header", "ModelFormatError", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "gpuksvm-model"
#: the version this gpuksvm writes; it reads every version up to this one
FORMAT_VERSION = 1
HEADER_MEMBER = "header.json"

# classes a model file may name; anything else is refused at load time
_ALLOWED_PACKAGES = ("gpuksvm", "sklearn")
_MAX_DEPTH = 64


class ModelFormatError(ValueError):
    """A model file is corrupted, not a gpuksvm model, or from a newer format version."""


# --------------------------------------------------------------------------- helpers
def _qualname(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _allowed_module(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in _ALLOWED_PACKAGES)


def _resolve_class(spec: str, where: str) -> type:
    """Import ``module:QualName`` — only from the allowed packages."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ModelFormatError(f"{where}: bad class reference {spec!r}")
    module, qual = spec.split(":", 1)
    if not _allowed_module(module):
        raise ModelFormatError(
            f"{where}: refusing to load class {spec!r}: model files may only name classes from "
            f"{', '.join(_ALLOWED_PACKAGES)}")
    try:
        obj: Any = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ModelFormatError(f"{where}: class {spec!r} does not exist in this installation "
                               f"({exc})") from exc
    if not isinstance(obj, type):
        raise ModelFormatError(f"{where}: {spec!r} is not a class")
    return obj


def _is_estimator(obj: Any) -> bool:
    try:
        from sklearn.base import BaseEstimator
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        return False
    return isinstance(obj, BaseEstimator)


def _float_json(v: float) -> Any:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _float_from_json(v: Any) -> float:
    if isinstance(v, str):
        if v not in ("nan", "inf", "-inf"):
            raise ModelFormatError(f"bad float value {v!r}")
        return float(v)
    return float(v)


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data
                          if a.size else b"").hexdigest()


# --------------------------------------------------------------------------- encoder
class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.fitted_device = "cpu"

    def _store(self, a: Any) -> dict:
        on_gpu = bk.is_gpu_array(a)
        if on_gpu:
            self.fitted_device = str(bk.device_of(a))
        host = np.ascontiguousarray(bk.to_host(a))
        ref = f"a{len(self.arrays)}"
        self.arrays[ref] = host
        node = {"t": "array", "ref": ref}
        if on_gpu:
            node["device"] = "cuda"
        return node

    def encode(self, obj: Any, path: str, depth: int = 0) -> dict:
        if depth > _MAX_DEPTH:
            raise TypeError(f"cannot save {path}: nesting deeper than {_MAX_DEPTH} levels")
        d = depth + 1
        if obj is None:
            return {"t": "none"}
        if isinstance(obj, (bool, np.bool_)):
            return {"t": "bool", "v": bool(obj)}
        if isinstance(obj, (int, np.integer)):
            node: dict = {"t": "int", "v": int(obj)}
            if isinstance(obj, np.integer):
                node["dtype"] = np.dtype(type(obj)).str
            return node
        if isinstance(obj, (float, np.floating)):
            node = {"t": "float", "v": _float_json(float(obj))}
            if isinstance(obj, np.floating):
                node["dtype"] = np.dtype(type(obj)).str
            return node
        if isinstance(obj, (complex, np.complexfloating)):
            return {"t": "complex", "re": _float_json(obj.real), "im": _float_json(obj.imag)}
        if isinstance(obj, str):
            return {"t": "str", "v": str(obj)}
        if isinstance(obj, (bytes, bytearray)):
            return {"t": "bytes", "v": bytes(obj).hex()}
        if isinstance(obj, bk.Device):
            if obj.is_gpu:
                self.fitted_device = str(obj)
            return {"t": "device"}
        if isinstance(obj, np.dtype):
            return {"t": "dtype", "kind": "dtype", "v": obj.str}
        if isinstance(obj, type) and issubclass(obj, np.generic):
            return {"t": "dtype", "kind": "type", "v": np.dtype(obj).str}
        if bk.is_sparse(obj):
            host = bk.to_host(obj)
            fmt = host.format
            if fmt not in ("csr", "csc", "coo"):
                host, fmt = host.tocsr(), "csr"
            parts = ({"row": host.row, "col": host.col, "data": host.data} if fmt == "coo"
                     else {"indices": host.indices, "indptr": host.indptr, "data": host.data})
            return {"t": "sparse", "format": fmt, "shape": list(host.shape),
                    "array": bool(isinstance(host, getattr(sp, "sparray", ()))),
                    "parts": {k: self._store(v) for k, v in parts.items()}}
        if isinstance(obj, np.ndarray) or bk.is_gpu_array(obj):
            if obj.dtype == object:
                flat = [self.encode(v, f"{path}[{i}]", d) for i, v in enumerate(obj.reshape(-1))]
                return {"t": "objarray", "shape": list(obj.shape), "items": flat}
            if obj.dtype.hasobject or obj.dtype.kind == "V" and obj.dtype.names:
                raise TypeError(f"cannot save {path}: structured arrays are not supported")
            return self._store(obj)
        if isinstance(obj, np.random.RandomState):
            return {"t": "rng", "kind": "RandomState",
                    "state": self.encode(obj.get_state(legacy=False), f"{path}.state", d)}
        if isinstance(obj, np.random.Generator):
            bitgen = obj.bit_generator
            return {"t": "rng", "kind": "Generator", "bit_generator": type(bitgen).__name__,
                    "state": self.encode(bitgen.state, f"{path}.state", d)}
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            cls = type(obj)
            return {"t": "namedtuple", "cls": _qualname(cls),
                    "fields": {f: self.encode(getattr(obj, f), f"{path}.{f}", d) for f in obj._fields}}
        if isinstance(obj, list):
            return {"t": "list", "items": [self.encode(v, f"{path}[{i}]", d) for i, v in enumerate(obj)]}
        if isinstance(obj, tuple):
            return {"t": "tuple", "items": [self.encode(v, f"{path}[{i}]", d) for i, v in enumerate(obj)]}
        if isinstance(obj, (set, frozenset)):
            items = [self.encode(v, f"{path}{{}}", d) for v in obj]
            return {"t": "set", "frozen": isinstance(obj, frozenset), "items": items}
        if isinstance(obj, dict):
            if type(obj) is not dict:
                obj = dict(obj)
            return {"t": "dict", "items": [[self.encode(k, f"{path}.<key>", d),
                                           self.encode(v, f"{path}[{k!r}]", d)]
                                          for k, v in obj.items()]}
        cls = type(obj)
        if not _allowed_module(cls.__module__):
            raise TypeError(f"cannot save {path}: objects of type {cls.__module__}.{cls.__qualname__} "
                            f"are not supported by the gpuksvm model format (use pickle/joblib)")
        if dataclasses.is_dataclass(obj):
            fields = {f.name: self.encode(getattr(obj, f.name), f"{path}.{f.name}", d)
                      for f in dataclasses.fields(obj) if f.init}
            return {"t": "dataclass", "cls": _qualname(cls), "fields": fields}
        if _is_estimator(obj):
            params = obj.get_params(deep=False)
            state = {k: v for k, v in vars(obj).items() if k not in params}
            enc_params = {k: self.encode(v, f"{path}.{k}", d) for k, v in params.items()}
            if "device" in params and params["device"] not in (None, "auto", "cpu") \
                    and not isinstance(params["device"], bk.Device):
                # a GPU-fitted model predicts on the CPU after loading unless moved back
                enc_params["device"] = {"t": "str", "v": "auto"}
            enc_state = {k: self.encode(v, f"{path}.{k}", d) for k, v in state.items()}
            return {"t": "estimator", "cls": _qualname(cls), "params": enc_params, "state": enc_state}
        if callable(obj) or not hasattr(obj, "__dict__"):
            raise TypeError(f"cannot save {path}: objects of type {cls.__qualname__} are not supported")
        state = {k: self.encode(v, f"{path}.{k}", d) for k, v in vars(obj).items()}
        return {"t": "object", "cls": _qualname(cls), "state": state}


def _json_params(params: dict) -> dict:
    """A readable, JSON-only summary of parameters (for ``gpuksvm info``)."""
    out = {}
    for k, v in params.items():
        if v is None or isinstance(v, (bool, int, str)):
            out[k] = v
        elif isinstance(v, float):
            out[k] = _float_json(v)
        elif isinstance(v, (np.integer, np.floating)):
            out[k] = _float_json(float(v)) if isinstance(v, np.floating) else int(v)
        else:
            out[k] = repr(v) if not _is_estimator(v) else type(v).__name__
    return out


# --------------------------------------------------------------------------- decoder
class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], where: str) -> None:
        self.arrays = arrays
        self.where = where

    def _fail(self, msg: str) -> ModelFormatError:
        return ModelFormatError(f"{self.where}: {msg}")

    def _array(self, ref: Any) -> np.ndarray:
        if ref not in self.arrays:
            raise self._fail(f"the header refers to a missing array {ref!r}")
        return self.arrays[ref]

    def decode(self, node: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise self._fail("the object tree is nested too deeply")
        if not isinstance(node, dict) or "t" not in node:
            raise self._fail(f"malformed node in the object tree: {str(node)[:80]!r}")
        d = depth + 1
        t = node["t"]
        try:
            if t == "none":
                return None
            if t == "bool":
                return bool(node["v"])
            if t == "int":
                return np.dtype(node["dtype"]).type(node["v"]) if "dtype" in node else int(node["v"])
            if t == "float":
                v = _float_from_json(node["v"])
                return np.dtype(node["dtype"]).type(v) if "dtype" in node else v
            if t == "complex":
                return complex(_float_from_json(node["re"]), _float_from_json(node["im"]))
            if t == "str":
                return str(node["v"])
            if t == "bytes":
                return bytes.fromhex(node["v"])
            if t == "device":
                return bk.CPU
            if t == "dtype":
                dt = np.dtype(node["v"])
                if dt.hasobject:
                    raise self._fail("object dtypes are not allowed")
                return dt if node.get("kind") == "dtype" else dt.type
            if t == "array":
                return self._array(node["ref"])
            if t == "objarray":
                items = [self.decode(v, d) for v in node["items"]]
                out = np.empty(len(items), dtype=object)
                out[:] = items
                return out.reshape(tuple(node["shape"]))
            if t == "sparse":
                parts = {k: self._array(v["ref"]) for k, v in node["parts"].items()}
                shape = tuple(node["shape"])
                fmt = node["format"]
                array_api = node.get("array", False) and hasattr(sp, "csr_array")
                if fmt == "coo":
                    ctor = sp.coo_array if array_api else sp.coo_matrix
                    return ctor((parts["data"], (parts["row"], parts["col"])), shape=shape)
                if fmt not in ("csr", "csc"):
                    raise self._fail(f"unknown sparse format {fmt!r}")
                ctor = getattr(sp, f"{fmt}_array" if array_api else f"{fmt}_matrix")
                return ctor((parts["data"], parts["indices"], parts["indptr"]), shape=shape)
            if t == "list":
                return [self.decode(v, d) for v in node["items"]]
            if t == "tuple":
                return tuple(self.decode(v, d) for v in node["items"])
            if t == "set":
                items = [self.decode(v, d) for v in node["items"]]
                return frozenset(items) if node.get("frozen") else set(items)
            if t == "dict":
                return {self.decode(k, d): self.decode(v, d) for k, v in node["items"]}
            if t == "rng":
                state = self.decode(node["state"], d)
                if node["kind"] == "RandomState":
                    rs = np.random.RandomState()
                    rs.set_state(state)
                    return rs
                if node["kind"] == "Generator":
                    name = node["bit_generator"]
                    if name not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
                        raise self._fail(f"unknown bit generator {name!r}")
                    bitgen = getattr(np.random, name)()
                    bitgen.state = state
                    return np.random.Generator(bitgen)
                raise self._fail(f"unknown random generator kind {node['kind']!r}")
            if t == "namedtuple":
                cls = _resolve_class(node["cls"], self.where)
                if not (issubclass(cls, tuple) and hasattr(cls, "_fields")):
                    raise self._fail(f"{node['cls']} is not a named tuple")
                return cls(**{k: self.decode(v, d) for k, v in node["fields"].items()})
            if t == "dataclass":
                cls = _resolve_class(node["cls"], self.where)
                if not dataclasses.is_dataclass(cls):
                    raise self._fail(f"{node['cls']} is not a dataclass")
                return cls(**{k: self.decode(v, d) for k, v in node["fields"].items()})
            if t == "estimator":
                cls = _resolve_class(node["cls"], self.where)
                if not _is_estimator_class(cls):
                    raise self._fail(f"{node['cls']} is not an estimator class")
                params = {k: self.decode(v, d) for k, v in node["params"].items()}
                state = {k: self.decode(v, d) for k, v in node["state"].items()}
                obj = cls.__new__(cls)
                obj.__dict__.update(params)
                obj.__dict__.update(state)
                if "_fitted_on" in obj.__dict__:
                    obj._fitted_on = bk.CPU
                return obj
            if t == "object":
                cls = _resolve_class(node["cls"], self.where)
                obj = cls.__new__(cls)
                obj.__dict__.update({k: self.decode(v, d) for k, v in node["state"].items()})
                return obj
        except ModelFormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise self._fail(f"malformed {t!r} node in the object tree ({type(exc).__name__}: {exc})") from exc
        raise self._fail(f"unknown node type {t!r} (written by a newer gpuksvm?)")


def _is_estimator_class(cls: type) -> bool:
    from sklearn.base import BaseEstimator

    return issubclass(cls, BaseEstimator)


# --------------------------------------------------------------------------- save / load
def save(model: Any, path: str | os.PathLike) -> Path:
    """Write a (fitted) estimator to ``path`` in the gpuksvm model format.

    Parameters
    ----------
    model : estimator
        A gpuksvm estimator (fitted or not), or any scikit-learn estimator made of
        gpuksvm/scikit-learn parts (e.g. a ``Pipeline``).  Arrays on a GPU are
        copied to the host; the model itself is not changed.
    path : str or path-like
        Destination; written atomically (temporary file + :func:`os.replace`).
        ``.npz`` is the conventional suffix; none is added.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    TypeError
        If the model holds an object the format cannot represent (e.g. a
        function); pickle/joblib can still store such a model.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from sklearn.linear_model import LogisticRegression
    >>> import gpuksvm
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> clf = LogisticRegression().fit(X, y)
    >>> p = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> _ = gpuksvm.save(clf, p)
    >>> (gpuksvm.load(p).predict(X) == clf.predict(X)).all()
    np.True_
    """
    from . import __version__

    path = Path(path)
    enc = _Encoder()
    tree = enc.encode(model, type(model).__name__)
    params = model.get_params(deep=False) if _is_estimator(model) else {}
    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "gpuksvm_version": __version__,
        "numpy_version": np.__version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "fitted_device": enc.fitted_device,
        "params": _json_params(params),
        "tree": tree,
        "arrays": {ref: {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": _sha256(a)}
                   for ref, a in enc.arrays.items()},
    }
    blob = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8")
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_archive(fh, blob, enc.arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _write_archive(fh: Any, header: bytes, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(HEADER_MEMBER, header)
        for ref, a in arrays.items():
            _write_member(zf, f"{ref}.npy", a)


def _write_member(zf: zipfile.ZipFile, name: str, a: np.ndarray) -> None:
    with zf.open(name, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, a, allow_pickle=False)


def _open_archive(path: Path) -> zipfile.ZipFile:
    if not path.exists():
        raise FileNotFoundError(f"no such model file: {path}")
    try:
        return zipfile.ZipFile(path, "r")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ModelFormatError(f"{path}: not a gpuksvm model file, or the file is corrupted "
                               f"(truncated/damaged archive: {exc})") from exc


def _read_header_from(zf: zipfile.ZipFile, path: Path) -> dict:
    try:
        raw = zf.read(HEADER_MEMBER)
    except KeyError as exc:
        raise ModelFormatError(f"{path}: not a gpuksvm model file (no {HEADER_MEMBER} member)") from exc
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ModelFormatError(f"{path}: corrupted model file: cannot read its header ({exc})") from exc
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"{path}: corrupted model file: the JSON header does not parse ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{path}: not a gpuksvm model file (format tag "
                               f"{header.get('format') if isinstance(header, dict) else None!r})")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFormatError(f"{path}: corrupted model file: bad format_version {version!r}")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"{path}: model format version {version} was written by a newer gpuksvm "
            f"({header.get('gpuksvm_version', '?')}); this gpuksvm reads format versions up to "
            f"{FORMAT_VERSION}. Upgrade gpuksvm to load it.")
    for key in ("tree", "arrays"):
        if key not in header:
            raise ModelFormatError(f"{path}: corrupted model file: the header has no {key!r}")
    return header


def read_header(path: str | os.PathLike) -> dict:
    """The JSON header of a model file (class, versions, params, array shapes) without loading it."""
    path = Path(path)
    with _open_archive(path) as zf:
        return _read_header_from(zf, path)


def load(path: str | os.PathLike, *, device: str | None = None) -> Any:
    """Read a model written by :func:`save`.

    Parameters
    ----------
    path : str or path-like
    device : str, optional
        Move the loaded model there (``model.to_device(device)``).  By default
        it stays on the host and predicts on the device its ``device``
        parameter resolves to (``"auto"`` for a model fitted on a GPU).

    Raises
    ------
    ModelFormatError
        If the file is corrupted or truncated, is not a gpuksvm model, names a
        class outside gpuksvm/scikit-learn, or has a format version newer than
        this gpuksvm reads.
    FileNotFoundError
        If there is no such file.

    Examples
    --------
    See :func:`save`.
    """
    path = Path(path)
    with _open_archive(path) as zf:
        header = _read_header_from(zf, path)
        specs = header["arrays"]
        if not isinstance(specs, dict):
            raise ModelFormatError(f"{path}: corrupted model file: bad array table")
        arrays = {}
        for ref, spec in specs.items():
            try:
                with zf.open(f"{ref}.npy") as member:
                    a = np.lib.format.read_array(_io.BytesIO(member.read()), allow_pickle=False)
            except KeyError as exc:
                raise ModelFormatError(f"{path}: corrupted model file: array {ref}.npy is missing") from exc
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                raise ModelFormatError(f"{path}: corrupted model file: cannot read array {ref}.npy "
                                       f"({exc})") from exc
            if (a.dtype.str != spec.get("dtype") or list(a.shape) != list(spec.get("shape", []))
                    or _sha256(a) != spec.get("sha256")):
                raise ModelFormatError(f"{path}: corrupted model file: array {ref}.npy does not match "
                                       f"its checksum/shape in the header")
            arrays[ref] = a
    model = _Decoder(arrays, str(path)).decode(header["tree"])
    if device is not None:
        if not hasattr(model, "to_device"):
            raise TypeError(f"{type(model).__name__} cannot be moved to a device")
        model.to_device(device)
    return model
