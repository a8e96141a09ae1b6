"""Model files: a versioned, closed ``.npz`` format with a JSON header (no pickle).

:func:`save` writes a gpuksvm estimator (fitted or not, or a scikit-learn
``Pipeline`` of ``StandardScaler`` and gpuksvm estimators) to one file;
:func:`load` reads it back on any machine — a model fitted on a GPU loads and
predicts on a CPU-only machine.

What a file can contain, and what loading can do
------------------------------------------------
The format is *closed* (like safetensors, or skops.io with its trusted types):
:data:`gpuksvm.model_format.REGISTRY` lists every class a file may name — the gpuksvm
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

    ``model`` is the tree described in :mod:`gpuksvm.model_format`; ``class``
    must name its root.
``a0.npy``, ``a1.npy``, ...
    The arrays, in the ``.npy`` format (numeric, bool or unicode dtypes only).

Format version 1 files (gpuksvm before the closed format) are translated node
by node into version 2 (:func:`gpuksvm.model_format.translate_v1`) and then
validated exactly like version 2; those holding generic objects are refused.

Arrays on a GPU are copied to the host, so a loaded model predicts on the CPU
(``fitted_device_``) until moved with ``load(path, device=...)`` or
``to_device``; its parameters, ``device`` included, are saved and loaded as
the user set them (``get_params()`` is the same after loading).

Writes are atomic: the file is written to a temporary file in the target's
folder, flushed to disk and moved over the target with :func:`os.replace`, so a
crash never leaves a partial model (an existing file survives intact).  An
existing file keeps its permission bits; writing to a symbolic link writes the
file it points to (the link stays).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import secrets
import stat
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ._version import __version__
from .model_format import (ARRAY_DTYPE_RE, ArrayInfo, ModelFormatError, decode_model, describe_value,
                           encode_model, entry_for, translate_v1)

__all__ = ["save", "load", "read_header", "describe", "check_writable", "write_atomic",
           "ModelFormatError", "FORMAT_NAME", "FORMAT_VERSION", "MAX_HEADER_BYTES"]

FORMAT_NAME = "gpuksvm-model"
#: the version this gpuksvm writes; it reads versions 1 and 2
FORMAT_VERSION = 2
HEADER_MEMBER = "header.json"
#: largest header.json accepted (a model's header is a few kB to a few MB)
MAX_HEADER_BYTES = 64 * 2 ** 20
#: largest .npy header accepted in a member (NumPy writes < 200 bytes)
_MAX_NPY_HEADER = 10_000
#: DEFLATE cannot compress by more than ~1032:1; a member claiming more lies about its size
_MAX_DEFLATE_RATIO = 1100
_MAX_ARRAY_DIMS = 32
_REF_RE = re.compile(r"^a\d{1,9}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_V2_KEYS = {"format", "format_version", "gpuksvm_version", "numpy_version", "created", "class",
            "fitted_device", "metadata", "model", "arrays"}
_MAX_METADATA = 64
_V1_KEYS = {"format", "format_version", "gpuksvm_version", "numpy_version", "created", "class",
            "fitted_device", "params", "tree", "arrays"}


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data
                          if a.size else b"").hexdigest()


# --------------------------------------------------------------------------- writing
def _write_target(path: Path) -> Path:
    """The file a write to ``path`` goes to (a symlink's target), with clear errors."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.is_dir():
        raise IsADirectoryError(f"cannot write the model to {path}: it is a folder; "
                                "give a file name such as model.npz")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write the model to {path}: the folder {folder} does not exist")
    return target


def _open_temp(target: Path) -> tuple[int, Path]:
    """A new temporary file beside ``target`` (mode of the target, or the umask default)."""
    folder = target.parent if str(target.parent) else Path(".")
    for _ in range(100):
        tmp = folder / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
        except PermissionError as exc:
            raise PermissionError(f"cannot write the model to {target}: no permission to create "
                                  f"files in {folder} ({exc.strerror})") from exc
        return fd, tmp
    raise FileExistsError(f"cannot create a temporary file in {folder}")  # pragma: no cover


def check_writable(path: str | os.PathLike) -> Path:
    """Raise a clear ``OSError`` now if :func:`save` could not write ``path``.

    Checks that the folder exists, that ``path`` is not a folder and that a file
    can be created beside it (what the atomic write needs).  Returns the
    file that would be written (a symlink's target).  The CLI calls this
    before training.
    """
    target = _write_target(Path(path))
    fd, tmp = _open_temp(target)
    os.close(fd)
    os.unlink(tmp)
    return target


def write_atomic(path: str | os.PathLike, write: Any) -> Path:
    """Write a file atomically: ``write(fh)`` fills a temporary file beside the target,
    which is then flushed, synced and moved over it (:func:`os.replace`).

    An existing target keeps its permission bits; a symbolic link is followed
    (its target is replaced, the link stays); nothing is left behind on error.
    ``write`` may be ``bytes`` instead of a function.
    """
    path = Path(path)
    target = _write_target(path)
    existing_mode = stat.S_IMODE(os.stat(target).st_mode) if target.exists() else None
    fd, tmp = _open_temp(target)
    try:
        if existing_mode is not None:
            os.chmod(tmp, existing_mode)
        with os.fdopen(fd, "wb") as fh:
            if isinstance(write, (bytes, bytearray)):
                fh.write(write)
            else:
                write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


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
        followed and its target replaced.  ``.npz`` is the conventional
        suffix; none is added.

    Returns
    -------
    pathlib.Path
        The path written (as given).

    Raises
    ------
    TypeError
        If the model is or holds something the closed format cannot represent
        (another library's estimator, a callable, an undeclared attribute);
        pickle/joblib can still store such a model.
    OSError
        If the folder does not exist, ``path`` is a folder, or the file cannot
        be written (nothing is left behind).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> import gpuksvm
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> clf = gpuksvm.LinearSVM(device="cpu").fit(X, y)
    >>> p = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> _ = gpuksvm.save(clf, p)
    >>> bool((gpuksvm.load(p).predict(X) == clf.predict(X)).all())
    True
    """
    path = Path(path)
    if entry_for(model) is None:
        raise TypeError(f"cannot save a {type(model).__module__}.{type(model).__qualname__}: the gpuksvm "
                        "model format holds gpuksvm estimators (and scikit-learn Pipeline/"
                        "StandardScaler around them); use pickle/joblib for other objects")
    if metadata is not None:
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
        "arrays": {ref: {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": _sha256(a)}
                   for ref, a in arrays.items()},
    }
    blob = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(blob) > MAX_HEADER_BYTES:
        raise TypeError(f"cannot save {type(model).__name__}: its header would exceed "
                        f"{MAX_HEADER_BYTES} bytes")
    write_atomic(path, lambda fh: _write_archive(fh, blob, arrays))
    return path


def _write_archive(fh: Any, header: bytes, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(HEADER_MEMBER, header)
        for ref, a in arrays.items():
            _write_member(zf, f"{ref}.npy", a)


def _write_member(zf: zipfile.ZipFile, name: str, a: np.ndarray) -> None:
    with zf.open(name, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, a, allow_pickle=False)


# --------------------------------------------------------------------------- reading
def _open_archive(path: Path) -> zipfile.ZipFile:
    if not path.exists():
        raise FileNotFoundError(f"no such model file: {path}")
    if path.is_dir():
        raise ModelFormatError(f"{path}: is a folder, not a model file")
    try:
        return zipfile.ZipFile(path, "r")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
            NotImplementedError) as exc:
        raise ModelFormatError(f"{path}: not a gpuksvm model file, or the file is corrupted "
                               f"(truncated/damaged archive: {exc})") from exc


def _check_member_info(info: zipfile.ZipInfo, path: Path, limit: int) -> None:
    """Refuse encrypted members, unknown compression and sizes beyond ``limit`` before reading."""
    if info.flag_bits & 0x1:
        raise ModelFormatError(f"{path}: member {info.filename!r} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ModelFormatError(f"{path}: member {info.filename!r} uses an unsupported compression")
    if info.file_size > limit:
        raise ModelFormatError(f"{path}: member {info.filename!r} declares {info.file_size} bytes, "
                               f"more than the {limit} allowed")
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise ModelFormatError(f"{path}: member {info.filename!r} has inconsistent sizes")
    if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 1024:
        raise ModelFormatError(f"{path}: member {info.filename!r} claims a compression ratio no "
                               "real archive has (a zip bomb?)")


def _json_header(zf: zipfile.ZipFile, path: Path) -> dict:
    try:
        info = zf.getinfo(HEADER_MEMBER)
    except KeyError as exc:
        raise ModelFormatError(f"{path}: not a gpuksvm model file (no {HEADER_MEMBER} member)") from exc
    _check_member_info(info, path, MAX_HEADER_BYTES)
    try:
        with zf.open(info) as fh:
            raw = fh.read(MAX_HEADER_BYTES + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, NotImplementedError) as exc:
        raise ModelFormatError(f"{path}: corrupted model file: cannot read its header ({exc})") from exc
    if len(raw) > MAX_HEADER_BYTES:
        raise ModelFormatError(f"{path}: the header is larger than {MAX_HEADER_BYTES} bytes")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        what = "is nested too deeply" if isinstance(exc, RecursionError) else f"does not parse ({exc})"
        raise ModelFormatError(f"{path}: corrupted model file: the JSON header {what}") from None
    return header


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


def _read_member(zf: zipfile.ZipFile, ref: str, spec: dict, path: Path) -> np.ndarray:
    """Read ``<ref>.npy`` after checking its declared sizes against the header's entry."""
    name = f"{ref}.npy"
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ModelFormatError(f"{path}: corrupted model file: array {name} is missing") from None
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])
    nbytes = math.prod(shape) * dtype.itemsize
    _check_member_info(info, path, nbytes + _MAX_NPY_HEADER)
    if info.file_size < nbytes:
        raise ModelFormatError(f"{path}: corrupted model file: array {name} declares {info.file_size} "
                               f"bytes, too few for its header entry")
    try:
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                got_shape, fortran, got_dtype = np.lib.format.read_array_header_1_0(
                    fh, max_header_size=_MAX_NPY_HEADER)
            elif version == (2, 0):
                got_shape, fortran, got_dtype = np.lib.format.read_array_header_2_0(
                    fh, max_header_size=_MAX_NPY_HEADER)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            if got_dtype.str != dtype.str or tuple(got_shape) != shape:
                raise ModelFormatError(f"{path}: corrupted model file: array {name} is "
                                       f"{got_dtype} {tuple(got_shape)}, its header entry says "
                                       f"{dtype} {shape}")
            flat = np.empty(math.prod(shape), dtype=dtype)
            view = memoryview(flat.view(np.uint8))
            got = 0
            while got < nbytes:
                n = fh.readinto(view[got:])
                if not n:
                    break
                got += n
            if got != nbytes or fh.read(1):
                raise ValueError("the array data has the wrong length")
    except ModelFormatError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, TypeError, KeyError, SyntaxError,
            tokenize.TokenError, OverflowError, RecursionError, MemoryError, zlib.error,
            NotImplementedError) as exc:
        # (the .npy header is a Python literal: a damaged one fails in ast/tokenize)
        raise ModelFormatError(f"{path}: corrupted model file: cannot read array {name} "
                               f"({type(exc).__name__}: {exc})") from None
    a = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    if _sha256(a) != spec["sha256"]:
        raise ModelFormatError(f"{path}: corrupted model file: array {name} does not match its "
                               f"checksum in the header")
    return a


def _check_members(zf: zipfile.ZipFile, table: dict, path: Path) -> None:
    expected = {HEADER_MEMBER} | {f"{ref}.npy" for ref in table}
    names = zf.namelist()
    extra = set(names) - expected
    if extra or len(names) != len(set(names)):
        raise ModelFormatError(f"{path}: the archive holds members the header does not list "
                               f"({sorted(extra)[:5] or 'duplicates'})")


def read_header(path: str | os.PathLike) -> dict:
    """The JSON header of a model file after its top-level checks (no array is read).

    Raises :class:`ModelFormatError` for a file that is not a gpuksvm model, is
    damaged, or is from a newer format version.
    """
    path = Path(path)
    with _open_archive(path) as zf:
        return _check_header(_json_header(zf, path), path)


def describe(path: str | os.PathLike) -> dict:
    """What a model file holds, validated against the closed schema, without reading its arrays.

    Returns a dict with ``file``, ``class`` (of the validated tree),
    ``format_version``, ``gpuksvm_version``, ``created``, ``fitted_device``,
    ``metadata``, ``params`` (JSON-friendly), ``fitted`` (attribute → description, public
    ones), ``state`` (private declared attributes), ``n_arrays`` and
    ``array_bytes``.  Raises :class:`ModelFormatError` like :func:`load`.
    """
    path = Path(path)
    header = read_header(path)
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


def load(path: str | os.PathLike, *, device: str | None = None) -> Any:
    """Read a model written by :func:`save` (format version 1 or 2).

    The whole tree is validated against the closed schema before any array is
    read; each array is read only after its declared size matches the header.

    Parameters
    ----------
    path : str or path-like
    device : str, optional
        Move the loaded model there (``model.to_device(device)``).  By default
        it stays on the host and predicts there; its ``device`` parameter is
        the saved one (where a later ``fit`` runs).

    Raises
    ------
    ModelFormatError
        If the file is corrupted, truncated or tampered with, is not a gpuksvm
        model, holds a class or attribute the format does not allow or a value
        of the wrong kind or shape, or has a newer format version.
    FileNotFoundError
        If there is no such file.

    Examples
    --------
    See :func:`save`.
    """
    path = Path(path)
    with _open_archive(path) as zf:
        header = _check_header(_json_header(zf, path), path)
        _validated(header, path)
        table = header["arrays"]
        _check_members(zf, table, path)
        arrays = {ref: _read_member(zf, ref, spec, path) for ref, spec in table.items()}
    try:
        model = decode_model(_tree_of(header, path), arrays)
    except ModelFormatError as exc:
        raise ModelFormatError(f"{path}: {exc}") from None
    if device is not None:
        if not hasattr(model, "to_device"):
            raise TypeError(f"{type(model).__name__} cannot be moved to a device")
        model.to_device(device)
    return model
