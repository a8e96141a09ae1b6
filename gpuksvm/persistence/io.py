"""Model files: a versioned, closed ``.npz`` format with a JSON header (no pickle).

:func:`save` writes a gpuksvm estimator (fitted or not, or a scikit-learn
``Pipeline`` of ``StandardScaler`` and gpuksvm estimators) to one file;
:func:`load` reads it back on any machine — a model fitted on a GPU loads and
predicts on a CPU-only machine.

What a file can contain, and what loading can do
------------------------------------------------
The format is *closed* (like safetensors, or skops.io with its trusted types):
:data:`gpuksvm.persistence.model_format.REGISTRY` lists every class a file may name — the gpuksvm
estimators, the two online learners OK-FEB nests, scikit-learn's ``Pipeline``
and ``StandardScaler`` — and, per class, every attribute it may carry with its
kind, dtype and shape.  Loading

* builds only those classes (looked up by exact name in that list; nothing is
  imported by name, nothing is unpickled, no other constructor runs);
* passes the constructor parameters (JSON values, a ``Kernel``, a float dtype,
  a ``RandomState``, user landmarks) through the estimator's own parameter
  checks;
* sets only declared attributes, after checking each one's type, dtype and
  shape and that the named dimensions agree (so a loaded model predicts
  without shape errors);
* opens only regular files, without blocking (a FIFO, socket, device or
  folder is refused after ``fstat`` of the opened descriptor, so ``/dev/zero``
  is never read and a FIFO never waits for a writer);
* checks, before any array is read, the total decompressed size the file
  declares (every array's size from the header's table or the zip directory,
  whichever is larger, plus :data:`JSON_MEMORY_FACTOR` times the header's;
  and, before the zip directory is parsed, 10 times its size) against a
  limit tied to the memory available (``max_bytes``, or the
  ``model_load_max_bytes`` setting of :func:`gpuksvm.set_config`), so the
  memory a load takes is bounded whatever the compression ratio;
* reads each array only after checking its declared size against the header
  (no zip bombs), with the header size and the tree depth bounded.

Anything else — an unknown class or attribute, a value of the wrong kind, a
truncated, tampered (SHA-256 per array) or oversized file, a newer format
version — raises :class:`ModelFormatError`, from :func:`load`,
:func:`read_header`, :func:`describe` (``gpuksvm info``) and ``gpuksvm predict``
alike.  Loading cannot run code from the file, import modules, open other
files, or build objects outside the list.  It cannot load models holding
callables (e.g. a callable kernel) or other libraries' objects: :func:`save`
refuses those with a ``TypeError`` (pickle/joblib can store them — but only
this format is safe for files from an untrusted source).

File layout (format version 2)
------------------------------
A ZIP archive readable by ``numpy.load(path, allow_pickle=False)``:

``header.json``
    UTF-8 JSON::

        {"format": "gpuksvm-model", "format_version": 2,
         "gpuksvm_version": "0.1.0", "numpy_version": "...", "created": "<ISO 8601 UTC>",
         "class": "gpuksvm.llsvm.LLSVM", "fitted_device": "cuda:0",
         "model": {"estimator": "gpuksvm.llsvm.LLSVM", "params": {...}, "fitted": {...}},
         "arrays": {"a0": {"dtype": "<f4", "shape": [1000, 22], "sha256": "..."}, ...}}

    ``model`` is the tree described in :mod:`gpuksvm.persistence.model_format`; ``class``
    must name its root.
``a0.npy``, ``a1.npy``, ...
    The arrays, in the ``.npy`` format (numeric, bool or unicode dtypes only).

Format version 1 files (earlier releases, without the closed schema) are translated node
by node into version 2 (:func:`gpuksvm.persistence.model_format.translate_v1`) and then
validated exactly like version 2; those holding generic objects are refused.

Arrays on a GPU are copied to the host, so a loaded model predicts on the CPU
(``fitted_device_``) until moved with ``load(path, device=...)`` or
``to_device``; its parameters, ``device`` included, are saved and loaded as
the user set them (``get_params()`` is the same after loading).

Writes are atomic: the file is written to a temporary file in the target's
folder, flushed to disk and moved over the target with :func:`os.replace`, so a
crash never leaves a partial model (an existing file survives intact).  An
existing file keeps its permission bits; writing to a symbolic link writes the
file it points to (the link stays).  Only a regular file is ever replaced: a
folder, FIFO, socket or device at the target (``/dev/null`` included) is
refused with an ``OSError`` before writing, and again just before the move.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gpuksvm._version import __version__
from gpuksvm.array.backend import model_load_max_bytes, parse_bytes
from gpuksvm.data.files import check_writable, same_file, write_atomic
from gpuksvm.persistence.archive import (
    HEADER_MEMBER,
    JSON_MEMORY_FACTOR,
    MAX_HEADER_BYTES,
    ModelFileNotFoundError,
    check_members,
    check_total,
    open_archive,
    read_json_header,
    read_member,
    sha256,
)
from gpuksvm.persistence.model_format import (
    ARRAY_DTYPE_RE,
    ArrayInfo,
    ModelFormatError,
    decode_model,
    describe_value,
    encode_model,
    entry_for,
    translate_v1,
)

__all__ = ["save", "load", "read_header", "describe", "check_writable", "write_atomic", "same_file",
           "ModelFormatError", "ModelFileNotFoundError", "FORMAT_NAME", "FORMAT_VERSION",
           "MAX_HEADER_BYTES", "JSON_MEMORY_FACTOR", "LOAD_MEMORY_FACTOR"]

FORMAT_NAME = "gpuksvm-model"
#: the version this gpuksvm writes; it reads versions 1 and 2
FORMAT_VERSION = 2
#: :func:`load` takes at most this many times the declared array bytes (plus the header's
#: share and a constant) of peak memory (tests/test_io_hostile.py measures it)
LOAD_MEMORY_FACTOR = 2
_MAX_ARRAY_DIMS = 32
_REF_RE = re.compile(r"^a\d{1,9}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_V2_KEYS = {"format", "format_version", "gpuksvm_version", "numpy_version", "created", "class",
            "fitted_device", "metadata", "model", "arrays"}
_MAX_METADATA = 64
_V1_KEYS = {"format", "format_version", "gpuksvm_version", "numpy_version", "created", "class",
            "fitted_device", "params", "tree", "arrays"}


# --------------------------------------------------------------------------- writing
def _check_metadata(meta: Any, where: str) -> dict:
    """A flat dict of at most 64 short str keys → None/bool/int/float/str (for the header)."""
    if type(meta) is not dict or len(meta) > _MAX_METADATA:
        raise ModelFormatError(f"{where}: metadata must be a dict of at most {_MAX_METADATA} entries")
    for k, v in meta.items():
        if type(k) is not str or len(k) > 100:
            raise ModelFormatError(f"{where}: bad metadata key {_short(k)}")
        ok = v is None or type(v) in (bool, str) or (type(v) is int and abs(v) < 2 ** 63) or (
            type(v) is float and math.isfinite(v))
        if not ok or (type(v) is str and len(v) > 1000):
            raise ModelFormatError(f"{where}: bad metadata value for {k!r}")
    return meta


def save(model: Any, path: str | os.PathLike, *, metadata: dict | None = None) -> Path:
    """Write an estimator to ``path`` in the gpuksvm model format.

    Parameters
    ----------
    model : estimator
        A gpuksvm estimator (fitted or not), or a scikit-learn ``Pipeline`` of
        ``StandardScaler`` and gpuksvm estimators.  Arrays on a GPU are copied
        to the host; the model itself is not changed.
    path : str or path-like
        Destination; written atomically (temporary file + :func:`os.replace`),
        keeping an existing file's permission bits; a symbolic link is
        followed and its target replaced.  An existing folder, FIFO, socket
        or device there is refused.  ``.npz`` is the conventional suffix;
        none is added.
    metadata : dict, optional
        At most 64 entries stored in the header (``gpuksvm info`` shows
        them): str keys of at most 100 characters, values ``None``, bool,
        64-bit int, finite float or a str of at most 1000 characters.

    Returns
    -------
    pathlib.Path
        The path written (as given).

    Raises
    ------
    TypeError
        If the model is or holds something the closed format cannot represent
        (another library's estimator, a callable, an undeclared attribute);
        pickle/joblib can still store such a model.  Also if ``metadata`` is
        not such a dict.
    OSError
        If the folder does not exist, ``path`` is a folder, FIFO, socket or
        device, or the file cannot be written (nothing is left behind).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> import gpuksvm
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> clf = gpuksvm.LinearSVM(device="cpu").fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = gpuksvm.save(clf, os.path.join(folder, "model.npz"))
    ...     same = bool((gpuksvm.load(path).predict(X) == clf.predict(X)).all())
    >>> same
    True
    """
    if entry_for(model) is None:
        raise TypeError(f"cannot save a {type(model).__module__}.{type(model).__qualname__}: the gpuksvm "
                        "model format holds gpuksvm estimators (and scikit-learn Pipeline/"
                        "StandardScaler around them); use pickle/joblib for other objects")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise TypeError(f"save: metadata must be a dict, got {type(metadata).__name__}")
        try:
            metadata = _check_metadata(dict(metadata), "save")
        except ModelFormatError as exc:
            raise TypeError(str(exc)) from None
    tree, arrays, fitted_device = encode_model(model)
    try:  # what the loader will check (structure, kinds, shapes) — never write what cannot load
        decode_model(tree, {r: ArrayInfo(a.dtype, a.shape) for r, a in arrays.items()}, stubs=True)
    except ModelFormatError as exc:
        raise TypeError(f"cannot save {type(model).__name__}: {exc}") from None
    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "gpuksvm_version": __version__,
        "numpy_version": np.__version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "class": tree["estimator"],
        "fitted_device": fitted_device,
        "metadata": metadata or {},
        "model": tree,
        "arrays": {ref: {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": sha256(a)}
                   for ref, a in arrays.items()},
    }
    blob = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(blob) > MAX_HEADER_BYTES:
        raise TypeError(f"cannot save {type(model).__name__}: its header would exceed "
                        f"{MAX_HEADER_BYTES} bytes")
    return write_atomic(path, lambda fh: _write_archive(fh, blob, arrays))


def _write_archive(fh: Any, header: bytes, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(HEADER_MEMBER, header)
        for ref, a in arrays.items():
            _write_member(zf, f"{ref}.npy", a)


def _write_member(zf: zipfile.ZipFile, name: str, a: np.ndarray) -> None:
    with zf.open(name, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, a, allow_pickle=False)


# --------------------------------------------------------------------------- reading
def _max_bytes(max_bytes: int | str | None) -> int:
    return model_load_max_bytes() if max_bytes is None else parse_bytes(max_bytes)


def _short(v: Any) -> str:
    return repr(v)[:60]


def _check_header(header: Any, path: Path) -> dict:
    """Top-level checks of a header (either version) → ``{"version", "model", "arrays", ...}``."""
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        tag = header.get("format") if isinstance(header, dict) else None
        raise ModelFormatError(f"{path}: not a gpuksvm model file (format tag {_short(tag)})")
    version = header.get("format_version")
    if type(version) is not int or version < 1:
        raise ModelFormatError(f"{path}: corrupted model file: bad format_version {_short(version)}")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"{path}: model format version {version} was written by a newer gpuksvm "
            f"({_short(header.get('gpuksvm_version', '?'))}); this gpuksvm reads format versions up to "
            f"{FORMAT_VERSION}. Upgrade gpuksvm to load it.")
    keys = _V1_KEYS if version == 1 else _V2_KEYS
    unknown = set(header) - keys
    if unknown:
        raise ModelFormatError(f"{path}: the header has unknown entries {sorted(unknown)[:5]}")
    for key in ("gpuksvm_version", "numpy_version", "created", "class", "fitted_device"):
        if key in header and (type(header[key]) is not str or len(header[key]) > 200):
            raise ModelFormatError(f"{path}: corrupted model file: bad {key!r} in the header")
    tree_key = "tree" if version == 1 else "model"
    for key in (tree_key, "arrays"):
        if key not in header:
            raise ModelFormatError(f"{path}: corrupted model file: the header has no {key!r}")
    _check_array_table(header["arrays"], path)
    if "metadata" in header:
        _check_metadata(header["metadata"], str(path))
    return header


def _check_array_table(table: Any, path: Path) -> None:
    if type(table) is not dict:
        raise ModelFormatError(f"{path}: corrupted model file: bad array table")
    for ref, spec in table.items():
        where = f"{path}: array {ref[:40]!r}"
        if not _REF_RE.match(ref):
            raise ModelFormatError(f"{where}: bad array name")
        if type(spec) is not dict or set(spec) != {"dtype", "shape", "sha256"}:
            raise ModelFormatError(f"{where}: an array entry has exactly dtype, shape and sha256")
        dt, shape, sha = spec["dtype"], spec["shape"], spec["sha256"]
        if type(dt) is not str or not ARRAY_DTYPE_RE.match(dt):
            raise ModelFormatError(f"{where}: dtype {_short(dt)} is not allowed")
        if not (type(shape) is list and len(shape) <= _MAX_ARRAY_DIMS
                and all(type(s) is int and 0 <= s < 2 ** 48 for s in shape)):
            raise ModelFormatError(f"{where}: bad shape {_short(shape)}")
        if math.prod(shape) * np.dtype(dt).itemsize >= 2 ** 48:
            raise ModelFormatError(f"{where}: declares an array larger than 256 TiB")
        if type(sha) is not str or not _SHA_RE.match(sha):
            raise ModelFormatError(f"{where}: bad checksum entry")


def _tree_of(header: dict, path: Path) -> Any:
    """The version-2 model tree of a checked header (a version-1 tree is translated)."""
    if header["format_version"] == 1:
        try:
            return translate_v1(header["tree"])
        except ModelFormatError as exc:
            raise ModelFormatError(f"{path}: format version 1 file: {exc}") from None
    return header["model"]


def _stubs(table: dict) -> dict[str, ArrayInfo]:
    return {ref: ArrayInfo(np.dtype(s["dtype"]), tuple(s["shape"])) for ref, s in table.items()}


def _validated(header: dict, path: Path) -> Any:
    """Decode the tree against the schema with array stand-ins (no array is read)."""
    tree = _tree_of(header, path)
    try:
        model = decode_model(tree, _stubs(header["arrays"]), stubs=True)
    except ModelFormatError as exc:
        raise ModelFormatError(f"{path}: {exc}") from None
    if header.get("class") != tree.get("estimator"):
        raise ModelFormatError(f"{path}: the header's class {_short(header.get('class'))} is not the "
                               f"model's {_short(tree.get('estimator'))}")
    return model


def read_header(path: str | os.PathLike, *, max_bytes: int | str | None = None) -> dict:
    """The JSON header of a model file after its top-level checks (no array is read).

    ``max_bytes`` bounds the header as in :func:`load`.  Raises
    :class:`ModelFormatError` for a path that is not a regular file, a file that
    is not a gpuksvm model, is damaged, or is from a newer format version.
    """
    path = Path(path)
    limit = _max_bytes(max_bytes)
    with open_archive(path, limit) as zf:
        return _check_header(read_json_header(zf, path, limit), path)


def describe(path: str | os.PathLike, *, max_bytes: int | str | None = None) -> dict:
    """What a model file holds, validated against the closed schema, without reading its arrays.

    Returns a dict with ``file``, ``class`` (of the validated tree),
    ``format_version``, ``gpuksvm_version``, ``created``, ``fitted_device``,
    ``metadata``, ``params`` (JSON-friendly), ``fitted`` (attribute → description, public
    ones), ``state`` (private declared attributes), ``n_arrays`` and
    ``array_bytes``.  Raises :class:`ModelFormatError` like :func:`load` (the
    archive's members are checked as there; ``max_bytes`` bounds the header).
    """
    path = Path(path)
    limit = _max_bytes(max_bytes)
    with open_archive(path, limit) as zf:
        header = _check_header(read_json_header(zf, path, limit), path)
        check_members(zf, header["arrays"], path)
    model = _validated(header, path)
    entry = entry_for(model)
    params = {}
    if entry.kind == "estimator":
        for k, v in model.get_params(deep=False).items():
            if k == "steps":
                v = [f"{name}: {describe_value(step)}" for name, step in v]
            elif not (v is None or type(v) in (bool, int, float, str)):
                v = describe_value(v)
            elif type(v) is float and not math.isfinite(v):
                v = repr(v)
            params[k] = v
    state = {k: v for k, v in vars(model).items() if k in entry.fitted}
    return {
        "file": str(path),
        "class": entry.name,
        "format_version": header["format_version"],
        "gpuksvm_version": header.get("gpuksvm_version"),
        "created": header.get("created"),
        "fitted_device": header.get("fitted_device"),
        "metadata": header.get("metadata", {}),
        "params": params,
        "fitted": {k: describe_value(v) for k, v in state.items() if not k.startswith("_")},
        "state": {k: describe_value(v) for k, v in state.items() if k.startswith("_")},
        "n_arrays": len(header["arrays"]),
        "array_bytes": int(sum(a.nbytes for a in _stubs(header["arrays"]).values())),
    }


def load(path: str | os.PathLike, *, device: str | None = None,
         max_bytes: int | str | None = None) -> Any:
    """Read a model written by :func:`save` (format version 1 or 2).

    Only a regular file is opened (without blocking, checked on the opened
    descriptor).  The whole tree is validated against the closed schema before
    any array is read; then the total decompressed size the file declares (each
    array's size from the header's table or the zip directory, whichever is
    larger, plus :data:`JSON_MEMORY_FACTOR` times the header's size) must not
    exceed ``max_bytes`` (nor may 10 times the zip directory's size, checked
    before it is parsed); each array is read only after its declared size
    matches the header, and read in chunks straight into its final buffer.
    Peak memory is at most :data:`LOAD_MEMORY_FACTOR` (2) times the declared
    array bytes, plus the parsed header and a constant (measured about 1.1
    times for a 48 MB ``coef_``, tests/test_io_hostile.py).

    Parameters
    ----------
    path : str or path-like
    device : str, optional
        Move the loaded model there (``model.to_device(device)``).  By default
        it stays on the host and predicts there; its ``device`` parameter is
        the saved one (where a later ``fit`` runs).
    max_bytes : int or str, optional
        The largest total decompressed size accepted, in bytes or as
        ``"4GiB"``.  Default: the ``model_load_max_bytes`` setting of
        :func:`gpuksvm.set_config` (half the memory available, at least
        512 MiB, unless set).

    Raises
    ------
    ModelFormatError
        If the file is corrupted, truncated or tampered with, is not a gpuksvm
        model, holds a class or attribute the format does not allow or a value
        of the wrong kind or shape, has a newer format version, declares more
        than ``max_bytes``, or the path is not a regular file (a folder, FIFO,
        socket, device, a loop of symbolic links) or cannot be read.
    ModelFileNotFoundError
        If there is no such file (a :class:`ModelFormatError` and a
        ``FileNotFoundError``).

    Examples
    --------
    See :func:`save`.
    """
    path = Path(path)
    limit = _max_bytes(max_bytes)
    with open_archive(path, limit) as zf:
        header = _check_header(read_json_header(zf, path, limit), path)
        _validated(header, path)
        table = header["arrays"]
        check_members(zf, table, path)
        check_total(zf, table, path, limit)
        arrays = {ref: read_member(zf, ref, spec, path) for ref, spec in table.items()}
    try:
        model = decode_model(_tree_of(header, path), arrays)
    except ModelFormatError as exc:
        raise ModelFormatError(f"{path}: {exc}") from None
    if device is not None:
        if not hasattr(model, "to_device"):
            raise TypeError(f"{type(model).__name__} cannot be moved to a device")
        model.to_device(device)
    return model
