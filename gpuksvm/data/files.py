"""Safe file access for model files and predictions: regular files only, atomic writes.

* :func:`write_atomic` and :func:`check_writable` write only to a regular file
  (or a path that does not exist yet): a folder, FIFO, socket or device at the
  target is refused with an ``OSError`` before anything is written, and again
  right before the finished temporary file is moved over it; so is a path
  ending in a separator (it names a folder).
* :func:`open_regular` opens a path for reading without blocking (a FIFO with
  no writer, a terminal) and returns a file only if the opened descriptor is a
  regular file (so ``/dev/zero`` is never read).
* :func:`same_file` tells whether two paths name one file (through symbolic
  and hard links).
* :func:`zip_directory_size` reads the size of a zip archive's directory from
  its end record, so that the memory parsing it takes is bounded first.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

__all__ = ["NotRegularFileError", "file_kind", "same_file", "open_regular", "check_writable",
           "write_atomic", "zip_directory_size"]


class NotRegularFileError(OSError):
    """A path exists but is a FIFO, socket or device, where a regular file is needed."""


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, in words (``"a FIFO (named pipe)"``, ``"a folder"``, ...)."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _error(cls: type, code: int | None, message: str) -> OSError:
    exc = cls(message)
    exc.errno = code
    return exc


def _not_regular(path: Any, mode: int, doing: str) -> OSError:
    kind = file_kind(mode)
    if stat.S_ISDIR(mode):
        hint = "; give a file name such as model.npz" if doing == "write" else ""
        return _error(IsADirectoryError, errno.EISDIR, f"cannot {doing} {path}: it is a folder{hint}")
    return _error(NotRegularFileError, errno.EINVAL,
                  f"cannot {doing} {path}: it is {kind}, not a regular file")


def _stat_error(path: Any, exc: OSError, doing: str) -> OSError:
    """A clear ``OSError`` for a failed ``stat``/``open`` of ``path`` (same class and errno)."""
    if exc.errno == errno.ELOOP:
        return _error(OSError, exc.errno, f"cannot {doing} {path}: a loop of symbolic links")
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return _error(FileNotFoundError, exc.errno, f"cannot {doing} {path}: it is a symbolic link "
                      f"to {os.readlink(path)}, which does not exist")
    return _error(type(exc), exc.errno, f"cannot {doing} {path}: {exc.strerror or exc}")


def same_file(a: str | os.PathLike | int, b: str | os.PathLike | int) -> bool:
    """True if ``a`` and ``b`` are the same existing file (same device and inode, after
    following symbolic links; hard links count); False if either does not exist or
    cannot be examined.  An ``int`` is an open file descriptor (``1``: standard output)."""
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except (OSError, ValueError):
        return False


def open_regular(path: str | os.PathLike, doing: str = "read") -> IO[bytes]:
    """Open ``path`` for binary reading, refusing anything but a regular file.

    The path is examined first (a device is never opened when the path already
    says what it is), then opened with ``O_NONBLOCK`` and ``O_NOCTTY`` (a FIFO
    without a writer or a terminal cannot block or be adopted) and the
    *descriptor* is examined again, so a path swapped in between is refused
    too.  Raises ``FileNotFoundError``, ``IsADirectoryError``,
    :class:`NotRegularFileError` or another ``OSError`` naming the path.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _stat_error(path, exc, doing) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode, doing)
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
             | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _stat_error(path, exc, doing) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode, doing)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# --------------------------------------------------------------------------- writing
def _file_path(path: str | os.PathLike) -> Path:
    """``path`` as a :class:`~pathlib.Path`, refusing one that ends in a separator or ``/.``
    (it names a folder; pathlib would drop the ending and name a file)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    seps = tuple(s for s in (os.sep, os.altsep) if s)
    if text.endswith(seps) or text.endswith(tuple(s + "." for s in seps)) or text in (".", ".."):
        raise _error(IsADirectoryError, errno.EISDIR,
                     f"cannot write {text}: the path names a folder (it ends in a separator); give a file name")
    return Path(text)


def _write_target(path: Path) -> Path:
    """The file a write to ``path`` goes to (a symlink's target), refusing what is not a
    regular file or a new name in an existing folder."""
    try:
        target = Path(os.path.realpath(path)) if path.is_symlink() else path
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _stat_error(path, exc, "write") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode, "write")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise _error(FileNotFoundError, errno.ENOENT,
                     f"cannot write {path}: the folder {folder} does not exist")
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
            raise _error(PermissionError, exc.errno, f"cannot write {target}: no permission to "
                         f"create files in {folder} ({exc.strerror})") from exc
        return fd, tmp
    raise FileExistsError(f"cannot create a temporary file in {folder}")  # pragma: no cover


def check_writable(path: str | os.PathLike) -> Path:
    """Raise a clear ``OSError`` now if :func:`write_atomic` could not write ``path``.

    Checks that the folder exists, that ``path`` is a regular file or does not
    exist (a folder, FIFO, socket or device is refused) and that a file can be
    created beside it (what the atomic write needs).  Returns the file that
    would be written (a symlink's target).
    """
    target = _write_target(_file_path(path))
    fd, tmp = _open_temp(target)
    os.close(fd)
    os.unlink(tmp)
    return target


def write_atomic(path: str | os.PathLike, write: Any) -> Path:
    """Write a file atomically: ``write(fh)`` fills a temporary file beside the target,
    which is then flushed, synced and moved over it (:func:`os.replace`).

    The target must be a regular file or not exist: a folder, FIFO, socket or
    device there raises ``OSError`` before anything is written, and the check
    is repeated just before the move (a target replaced meanwhile is refused,
    the temporary file removed).  An existing target keeps its permission bits;
    a symbolic link is followed (its target is replaced, the link stays);
    nothing is left behind on error.  ``write`` may be ``bytes`` instead of a
    function.
    """
    path = _file_path(path)
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
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            raise _not_regular(path, mode, "write")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


# --------------------------------------------------------------------------- zip archives
_END = b"PK\x05\x06"
_END_SIZE = 22
_END64 = b"PK\x06\x06"
_END64_SIZE = 56
_LOCATOR64 = b"PK\x06\x07"
_LOCATOR64_SIZE = 20


def zip_directory_size(fh: IO[bytes]) -> int:
    """The size in bytes that a zip archive's end record gives its central directory.

    The end record is looked for where :mod:`zipfile` looks for it: at the very
    end of the file (no archive comment), else the last signature in the final
    64 KiB + 22 bytes; a zip64 end record directly before the zip64 locator
    that directly precedes it replaces the 32-bit size.  Returns 0 when there is
    no end record (:mod:`zipfile` refuses such a file).  Lets a caller bound
    the memory that parsing the directory takes before :mod:`zipfile` parses it.
    """
    try:
        return _directory_size(fh)
    finally:
        fh.seek(0)


def _directory_size(fh: IO[bytes]) -> int:
    size = fh.seek(0, os.SEEK_END)
    if size < _END_SIZE:
        return 0
    fh.seek(size - _END_SIZE)
    record = fh.read(_END_SIZE)
    where = size - _END_SIZE
    if not (record[:4] == _END and record[-2:] == b"\0\0"):
        start = max(size - 2 ** 16 - _END_SIZE, 0)
        fh.seek(start)
        tail = fh.read()
        i = tail.rfind(_END)
        if i < 0 or len(tail) - i < _END_SIZE:
            return 0
        where, record = start + i, tail[i:i + _END_SIZE]
    directory = int.from_bytes(record[12:16], "little")
    if where >= _LOCATOR64_SIZE + _END64_SIZE:
        fh.seek(where - _LOCATOR64_SIZE)
        if fh.read(4) == _LOCATOR64:
            fh.seek(where - _LOCATOR64_SIZE - _END64_SIZE)
            record64 = fh.read(_END64_SIZE)
            if record64[:4] == _END64:
                directory = int.from_bytes(record64[40:48], "little")
    return directory
