"""The zip container of model files, read with bounded memory.

:func:`open_archive` opens a model file (a regular file only, see
:func:`gpuksvm.data.files.open_regular`) as a :class:`zipfile.ZipFile` after
bounding what parsing its directory takes; :func:`read_json_header`,
:func:`check_total` and :func:`read_member` read the header and the arrays
only after checking their declared sizes against the caller's limit and
the header's array table.  Every failure is a :class:`ModelFormatError`.
What the header and the tree may contain is checked in :mod:`gpuksvm.persistence.io`
and :mod:`gpuksvm.persistence.model_format`.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import tokenize
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from gpuksvm.data.files import open_regular, zip_directory_size
from gpuksvm.persistence.model_format import ModelFormatError

__all__ = ["ModelFileNotFoundError", "HEADER_MEMBER", "MAX_HEADER_BYTES", "JSON_MEMORY_FACTOR", "sha256",
           "open_archive", "read_json_header", "check_members", "check_total", "read_member"]

HEADER_MEMBER = "header.json"
#: largest header.json accepted (a model's header is a few kB to a few MB)
MAX_HEADER_BYTES = 64 * 2 ** 20
#: a JSON header takes up to this many times its size as Python objects (measured: about 33
#: for ``[[],[],...]``); the header counts this many times against the load limit
JSON_MEMORY_FACTOR = 40
#: largest .npy header accepted in a member (NumPy writes < 200 bytes)
_MAX_NPY_HEADER = 10_000
#: DEFLATE cannot compress by more than ~1032:1; a member claiming more lies about its size
_MAX_DEFLATE_RATIO = 1100
#: each byte of the zip directory takes up to ~8 bytes as zipfile.ZipInfo objects (measured)
_ZIP_DIRECTORY_FACTOR = 10
_READ_CHUNK = 2 ** 20


class ModelFileNotFoundError(ModelFormatError, FileNotFoundError):
    """There is no model file at the path (a :class:`ModelFormatError` and a ``FileNotFoundError``)."""


def sha256(a: np.ndarray) -> str:
    """The SHA-256 hex digest of an array's bytes in C order (the header's per-array checksum)."""
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data
                          if a.size else b"").hexdigest()


_LIMIT_HINT = "max_bytes=, or gpuksvm.set_config(model_load_max_bytes=...)"
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, struct.error,
               zlib.error, NotImplementedError)


@contextmanager
def open_archive(path: Path, max_bytes: int) -> Iterator[zipfile.ZipFile]:
    """The model file at ``path`` as a zip archive read from one regular-file descriptor.

    Every failure (no such file, a link loop, a folder/FIFO/socket/device, no
    permission, not a zip archive, a zip directory that would take more than
    ``max_bytes`` to parse, duplicate member names) is a
    :class:`ModelFormatError`; a missing file a :class:`ModelFileNotFoundError`.
    """
    try:
        fh = open_regular(path, "load the model file")
    except FileNotFoundError as exc:
        err = ModelFileNotFoundError(str(exc) if os.path.islink(path) else f"no such model file: {path}")
        err.errno = exc.errno
        raise err from None
    except OSError as exc:
        raise ModelFormatError(str(exc)) from None
    except ValueError as exc:  # a NUL character in the path
        raise ModelFormatError(f"cannot load the model file {str(path)!r}: {exc}") from None
    with fh:
        try:
            directory = zip_directory_size(fh)
        except OSError as exc:
            raise ModelFormatError(f"{path}: cannot read the file ({exc})") from None
        if _ZIP_DIRECTORY_FACTOR * directory > max_bytes:
            raise ModelFormatError(f"{path}: the zip directory declares {directory} bytes, which may take "
                                   f"{_ZIP_DIRECTORY_FACTOR} times that in memory, more than the "
                                   f"{max_bytes} bytes allowed ({_LIMIT_HINT})")
        try:
            zf = zipfile.ZipFile(fh, "r")
        except _ZIP_ERRORS as exc:
            raise ModelFormatError(f"{path}: not a gpuksvm model file, or the file is corrupted "
                                   f"(truncated/damaged archive: {exc})") from exc
        with zf:
            counts = Counter(zf.namelist())
            if len(counts) != len(zf.filelist):
                dup = sorted(n for n, c in counts.items() if c > 1)[:5]
                raise ModelFormatError(f"{path}: the archive holds duplicate members {dup}")
            yield zf


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


def read_json_header(zf: zipfile.ZipFile, path: Path, max_bytes: int) -> dict:
    try:
        info = zf.getinfo(HEADER_MEMBER)
    except KeyError as exc:
        raise ModelFormatError(f"{path}: not a gpuksvm model file (no {HEADER_MEMBER} member)") from exc
    _check_member_info(info, path, MAX_HEADER_BYTES)
    if JSON_MEMORY_FACTOR * info.file_size > max_bytes:
        raise ModelFormatError(f"{path}: the header declares {info.file_size} bytes, which may take "
                               f"{JSON_MEMORY_FACTOR} times that in memory, more than the {max_bytes} "
                               f"bytes allowed ({_LIMIT_HINT})")
    try:
        with zf.open(info) as fh:
            raw = fh.read(MAX_HEADER_BYTES + 1)
    except _ZIP_ERRORS as exc:
        raise ModelFormatError(f"{path}: corrupted model file: cannot read its header ({exc})") from exc
    if len(raw) > MAX_HEADER_BYTES:
        raise ModelFormatError(f"{path}: the header is larger than {MAX_HEADER_BYTES} bytes")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        what = "is nested too deeply" if isinstance(exc, RecursionError) else f"does not parse ({exc})"
        raise ModelFormatError(f"{path}: corrupted model file: the JSON header {what}") from None
    return header


def read_member(zf: zipfile.ZipFile, ref: str, spec: dict, path: Path) -> np.ndarray:
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
                n = fh.readinto(view[got:got + _READ_CHUNK])  # (a whole-array read() copies it twice)
                if not n:
                    break
                got += n
            if got != nbytes or fh.read(1):
                raise ValueError("the array data has the wrong length")
    except ModelFormatError:
        raise
    except (*_ZIP_ERRORS, TypeError, KeyError, SyntaxError, tokenize.TokenError, OverflowError,
            RecursionError, MemoryError) as exc:
        # (the .npy header is a Python literal: a damaged one fails in ast/tokenize)
        raise ModelFormatError(f"{path}: corrupted model file: cannot read array {name} "
                               f"({type(exc).__name__}: {exc})") from None
    a = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    if sha256(a) != spec["sha256"]:
        raise ModelFormatError(f"{path}: corrupted model file: array {name} does not match its "
                               f"checksum in the header")
    return a


def check_members(zf: zipfile.ZipFile, table: dict, path: Path) -> None:
    """Refuse an archive holding a member that is neither the header nor an array it lists."""
    expected = {HEADER_MEMBER} | {f"{ref}.npy" for ref in table}
    extra = set(zf.namelist()) - expected
    if extra:
        raise ModelFormatError(f"{path}: the archive holds members the header does not list "
                               f"({sorted(extra)[:5]})")


def check_total(zf: zipfile.ZipFile, table: dict, path: Path, max_bytes: int) -> None:
    """Refuse a file whose arrays (and header) declare more decompressed bytes than ``max_bytes``."""
    arrays = 0
    for ref, spec in table.items():
        declared = math.prod(spec["shape"]) * np.dtype(spec["dtype"]).itemsize
        try:
            stored = zf.getinfo(f"{ref}.npy").file_size
        except KeyError:
            stored = 0
        arrays += max(declared, stored)
    header = JSON_MEMORY_FACTOR * zf.getinfo(HEADER_MEMBER).file_size
    if arrays + header > max_bytes:
        raise ModelFormatError(f"{path}: the file declares {arrays} bytes of arrays (and a header worth "
                               f"{header}), more than the {max_bytes} bytes allowed ({_LIMIT_HINT})")
