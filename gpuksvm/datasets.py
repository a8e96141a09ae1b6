"""Datasets: SVMlight loading, the bundled demo data, and the papers' generators.

Real data
---------
:func:`load_dataset` loads ``"ijcnn1"`` (bundled with the package: 49,990
train / 91,701 test rows, 22 features), ``"adult"`` (123 features) and
``"abalone"`` (8 features, regression) from SVMlight files.  Files not bundled
are looked up in ``$GPUKSVM_DATA_DIR`` and then in ``shared/datasets`` beside
the repository.  Parsing is delegated to scikit-learn; a malformed file raises
a ``ValueError`` naming the file and the first bad line — including what
scikit-learn lets through (NaN/inf values, ``qid:`` ranking query ids, which
gpuksvm refuses as LIBSVM does) or reports without a line (unsorted,
duplicate or negative indices, indices of 2**31 and beyond, ``1,2`` labels,
``1_0`` read as 10).  The index base is
guessed as scikit-learn does, with a warning when one stray ``0:`` decides it
(:func:`read_svmlight`).

Generators
----------
* :func:`make_checkerboard` — the 4×4 checkerboard (CVM §5.1, LLSVM
  "Ncheckerboard" with label noise);
* :func:`make_two_sines` — two sine curves, one class each (SVI Fig. 2);
* :func:`make_two_spheres` — points on two concentric spheres plus Gaussian
  noise (OK-FEB §VII-A);
* :func:`sphere_to_spheroid_stream` — a stream on the unit sphere that switches
  to a spheroid at a known time (OK-FEB §VII-B, Figs. 4–5).
"""
from __future__ import annotations

import bz2
import gzip
import math
import os
import stat
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.utils import check_random_state

from gpuksvm.data.files import file_kind
from gpuksvm.array.validation import check_allocation

__all__ = [
    "DATASETS",
    "MAX_FEATURE_INDEX",
    "dataset_path",
    "load_dataset",
    "load_svmlight",
    "read_svmlight",
    "SVMLightData",
    "SVMLightIndexWarning",
    "svmlight_line_error",
    "subsample",
    "find_malformed_line",
    "make_checkerboard",
    "make_two_sines",
    "make_two_spheres",
    "sphere_to_spheroid_stream",
]

#: name -> (number of features, task)
DATASETS = {
    "ijcnn1": (22, "classification"),
    "adult": (123, "classification"),
    "abalone": (8, "regression"),
}
_SPLIT_SUFFIX = {"train": "trn", "test": "tst"}
#: the largest SVMlight feature index read (scikit-learn's parser keeps indices as 32-bit C ints)
MAX_FEATURE_INDEX = 2 ** 31 - 1


def _search_dirs() -> list[Path]:
    dirs = []
    env = os.environ.get("GPUKSVM_DATA_DIR")
    if env:
        dirs.append(Path(env))
    try:
        dirs.append(Path(str(resources.files("gpuksvm.data"))))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover
        pass
    here = Path(__file__).resolve().parent
    dirs += [here / "data", here.parent / "shared" / "datasets", here.parent.parent / "shared" / "datasets"]
    return dirs


def dataset_path(name: str, split: str = "train") -> Path:
    """Path of a named dataset file (``<name>.trn.bz2`` / ``<name>.tst.bz2``)."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    if split not in _SPLIT_SUFFIX:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    fname = f"{name}.{_SPLIT_SUFFIX[split]}.bz2"
    for d in _search_dirs():
        p = d / fname
        if p.exists():
            return p
    raise FileNotFoundError(
        f"dataset file {fname} not found; looked in {[str(d) for d in _search_dirs()]}. "
        "Set GPUKSVM_DATA_DIR to the folder holding it.")


class SVMLightIndexWarning(UserWarning):
    """An SVMlight file's index base was guessed from a few lines (see :func:`read_svmlight`)."""


def open_binary(path: str | os.PathLike):
    """A binary file object of ``path``, decompressing ``.bz2`` / ``.gz`` on the fly."""
    low = os.fspath(path).lower()
    if low.endswith(".bz2"):
        return bz2.open(path, "rb")
    if low.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


class _UnderscoreWatch:
    """A binary file whose lines (or reads) are passed on, noting whether any held ``_``: the
    parser under :func:`read_svmlight` reads numbers with Python's ``int``/``float``, which take
    ``_`` as a digit separator (``1_0`` is 10), so such a file is checked line by line."""

    def __init__(self, fh: Any):
        self._fh, self.seen = fh, False

    def read(self, *args: Any) -> bytes:
        data = self._fh.read(*args)
        self.seen = self.seen or b"_" in data
        return data

    def readline(self, *args: Any) -> bytes:
        line = self._fh.readline(*args)
        self.seen = self.seen or b"_" in line
        return line

    def __iter__(self) -> Iterator[bytes]:
        for line in self._fh:
            if b"_" in line:
                self.seen = True
            yield line


def svmlight_content(line: bytes) -> bytes:
    """A line without its comment and surrounding white space (empty: no data on the line)."""
    return line.split(b"#", 1)[0].strip()


def _number(tok: bytes) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _shown(tok: bytes) -> str:
    return repr(tok.decode("utf-8", errors="replace")[:40])


def svmlight_line_error(content: bytes, *, zero_based: bool | None = None,
                        n_features: int | None = None) -> str | None:
    """Why a line (without its comment, see :func:`svmlight_content`) is not valid SVMlight data.

    ``None`` for a valid line.  Checks what scikit-learn's parser checks and
    what it lets through: one finite label (``1,2`` is a multi-label list, not
    read here), then ``index:value`` pairs with integer indices that are
    non-negative (positive when ``zero_based`` is False), at most
    :data:`MAX_FEATURE_INDEX`, strictly increasing, below ``n_features`` (after
    the base), and finite values.  A ``qid:N`` token (a ranking query id) is an
    error, as in LIBSVM: no gpuksvm method uses query ids, and dropping them
    silently would train a ranking file as a classification one.
    """
    if b"\x00" in content:
        return "binary data, not an SVMlight text line"
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes that are not text (a binary file?)"
    toks = content.split()
    if not toks:
        return None
    for tok in toks:
        if b"_" in tok:
            return (f"token {_shown(tok)} holds '_' (Python's digit separator: Python reads 1_0 as 10); "
                    "an SVMlight number has none")
    label = _number(toks[0])
    if label is None:
        if b"," in toks[0] and all(_number(t) is not None for t in toks[0].split(b",")):
            return (f"label {_shown(toks[0])} is a multi-label list; gpuksvm reads one label per line")
        if b":" in toks[0]:
            return f"the line starts with {_shown(toks[0])}, not with a label"
        return f"label {_shown(toks[0])} is not a number"
    if not math.isfinite(label):
        return f"label {_shown(toks[0])} is not a finite number"
    prev = -1
    low = 1 if zero_based is False else 0
    for tok in toks[1:]:
        key, sep, val = tok.partition(b":")
        if not sep:
            return f"token {_shown(tok)} is not index:value"
        if key == b"qid":
            return (f"{_shown(tok)} is a ranking query id (SVMrank's qid:), which gpuksvm does not "
                    "read: a line holds a label and index:value pairs, as in LIBSVM; remove the "
                    "qid: tokens")
        try:
            idx = int(key)
        except ValueError:
            return f"feature index {_shown(key)} is not an integer"
        if idx > MAX_FEATURE_INDEX:
            return (f"feature index {_shown(key)} is too large: the largest index an SVMlight "
                    f"file may use is 2**31 - 1 = {MAX_FEATURE_INDEX}")
        if idx < low:
            return (f"feature index {idx} is negative" if idx < 0 else
                    "feature index 0 in a one-based file (indices start at 1)")
        if idx <= prev:
            return (f"feature indices must be sorted and unique: {idx} comes after {prev}"
                    if idx < prev else f"feature index {idx} appears twice")
        prev = idx
        if n_features is not None and idx - (0 if zero_based else 1) >= n_features:
            return f"feature index {idx} is beyond the {n_features} features expected"
        v = _number(val)
        if v is None:
            return f"value {_shown(val)} of feature {idx} is not a number"
        if not math.isfinite(v):
            return f"value {_shown(val)} of feature {idx} is not finite (NaN/inf are not allowed)"
    return None


def check_svmlight_line(line: str | bytes) -> bool:
    """True if ``line`` is a well-formed SVMlight line (or blank/comment)."""
    raw = line.encode("utf-8", errors="surrogateescape") if isinstance(line, str) else line
    return svmlight_line_error(svmlight_content(raw)) is None


def _lines(path: Path):
    """(line number, raw line) of a file; unreadable compressed data is a ValueError naming the file."""
    try:
        with open_binary(path) as fh:
            yield from enumerate(fh, 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: cannot read the file ({exc})") from None


def find_malformed_line(path: str | os.PathLike, *, zero_based: bool | None = None,
                        n_features: int | None = None) -> tuple[int, str, str] | None:
    """The first malformed line of an SVMlight file: ``(line_number, text, reason)``, else None."""
    for lineno, line in _lines(Path(path)):
        why = svmlight_line_error(svmlight_content(line), zero_based=zero_based, n_features=n_features)
        if why is not None:
            return lineno, line.rstrip(b"\r\n").decode("utf-8", errors="replace"), why
    return None


def data_line_numbers(path: Path, rows: set[int]) -> dict[int, int]:
    """File line numbers of the given data rows (0-based, blank/comment lines not counted)."""
    out, row = {}, -1
    for lineno, line in _lines(path):
        if svmlight_content(line):
            row += 1
            if row in rows:
                out[row] = lineno
                if len(out) == len(rows):
                    break
    return out


def malformed(path: Path, reason: str, lineno: int | None = None, text: str | None = None) -> ValueError:
    """The ValueError every SVMlight reader raises: file, line and what is wrong."""
    where = f", line {lineno}" if lineno is not None else ""
    shown = f": {text[:80]!r}" if text else ""
    return ValueError(f"{path}{where}: malformed SVMlight data ({reason}){shown}")


def index_base_note(path: Path, n_zero_lines: int, n_lines: int, first_line: int | None) -> str | None:
    """The warning text when index 0 appears on only some lines, so the file is read as zero-based."""
    if n_zero_lines == 0 or 2 * n_zero_lines >= n_lines:
        return None
    at = f" (first at line {first_line})" if first_line is not None else ""
    return (f"{path}: feature index 0 appears on only {n_zero_lines} of {n_lines} lines{at}, so the "
            "whole file is read as zero-based (column j = index j). If the file is one-based "
            "(LIBSVM's convention), those lines are wrong and every column is shifted by one: fix "
            "them or pass zero_based=False.")


@dataclass
class SVMLightData:
    """An SVMlight file as read by :func:`read_svmlight`.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix (n, n_features)
    y : (n,) float64 labels
    zero_based : bool — the index base the file was read with
    n_zero_lines : int — lines that use feature index 0
    """

    X: Any
    y: np.ndarray
    zero_based: bool
    n_zero_lines: int


def read_svmlight(path: str | os.PathLike, n_features: int | None = None, *,
                  zero_based: bool | str = "auto", dtype: Any = np.float64) -> SVMLightData:
    """Read an SVMlight / LIBSVM file (plain, ``.bz2`` or ``.gz``) as a CSR matrix.

    Parsing is scikit-learn's; every malformed line — bad tokens, unsorted,
    duplicate or negative indices, an index beyond :data:`MAX_FEATURE_INDEX`,
    multi-label lists such as ``1,2``, ``qid:`` query ids (refused, as LIBSVM
    refuses them), NaN or infinite values, binary data, numbers holding
    Python's ``_`` digit separator (``1_0``, which scikit-learn's parser reads
    as 10) — is a ``ValueError`` naming the file and the line.  A device or
    socket is refused unread (``/dev/zero`` has no end); a FIFO is read (a
    shell's ``<(zcat data.gz)``).

    Parameters
    ----------
    path : str or path-like
    n_features : int, optional
        Number of columns; an index beyond it is an error naming the line.
    zero_based : bool or "auto"
        The index base.  "auto" reads the file as zero-based when some index
        is 0 (as scikit-learn does) and then warns
        (:class:`SVMLightIndexWarning`) when index 0 appears on fewer than half
        of the lines: one stray ``0:`` would otherwise silently shift every
        column of a one-based file.  ``False`` makes index 0 an error.
    dtype : float dtype of X
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise ValueError(f"{path}: is a folder, not an SVMlight file")
    mode = path.stat().st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):   # /dev/zero has no end
        raise ValueError(f"{path}: is {file_kind(mode)}, not an SVMlight file")
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")

    def bad_line(**kw: Any) -> ValueError:
        found = find_malformed_line(path, **kw)
        return malformed(path, found[2], found[0], found[1]) if found else None

    try:
        with open_binary(path) as fh:
            watched = _UnderscoreWatch(fh)
            raw, y, query_ids = load_svmlight_file(watched, dtype=dtype, zero_based=True, query_id=True)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: cannot read the file ({exc})") from None
    except (ValueError, OverflowError) as exc:   # OverflowError: an index beyond a C int
        raise (bad_line() or malformed(path, str(exc))) from None
    if len(query_ids):
        raise bad_line() or malformed(path, "qid: query ids are not read")
    if watched.seen:        # in a comment, or a number the parser misread (1_0 as 10)
        found = bad_line()
        if found:
            raise found
    raw = raw.tocsr()
    y = np.asarray(y, dtype=np.float64)
    if not (np.isfinite(raw.data).all() and np.isfinite(y).all()):
        raise bad_line() or malformed(path, "NaN or infinite values")
    zero_rows = np.unique(raw.indptr.searchsorted(np.flatnonzero(raw.indices == 0), side="right") - 1)
    if zero_based is False and zero_rows.size:
        raise bad_line(zero_based=False)
    zb = bool(zero_rows.size) if zero_based == "auto" else bool(zero_based)
    if zero_based == "auto" and zb:
        first = data_line_numbers(path, {int(zero_rows[0])}).get(int(zero_rows[0]))
        note = index_base_note(path, int(zero_rows.size), raw.shape[0], first)
        if note:
            warnings.warn(note, SVMLightIndexWarning, stacklevel=2)
    X = raw if zb else raw[:, 1:]
    if n_features is not None:
        n_features = int(n_features)
        if X.shape[1] > n_features:
            raise bad_line(zero_based=zb, n_features=n_features) or malformed(
                path, f"feature indices beyond the {n_features} features expected")
        if X.shape[1] < n_features:
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return SVMLightData(X.tocsr(), y, zb, int(zero_rows.size))


def load_svmlight(path: str | os.PathLike, n_features: int | None = None, *,
                  dense: bool = True, dtype: Any = np.float64,
                  zero_based: bool | str = "auto") -> tuple[Any, np.ndarray]:
    """Load an SVMlight file (plain, .bz2 or .gz) as ``(X, y)``; see :func:`read_svmlight`.

    With ``dense=True`` the size of the dense matrix is checked against the
    machine's memory before it is allocated (a stray huge feature index would
    otherwise ask for terabytes).
    """
    data = read_svmlight(path, n_features, zero_based=zero_based, dtype=dtype)
    X = data.X
    if dense:
        check_allocation(X.shape[0] * X.shape[1] * np.dtype(dtype).itemsize,
                         f"{path}: a dense {X.shape[0]} x {X.shape[1]} matrix (the largest feature "
                         f"index sets the width)")
        X = X.toarray()
    return X, data.y


def subsample(X: Any, y: Any, n: int | None, rng: Any) -> tuple[Any, Any]:
    """``n`` rows drawn without replacement by ``rng`` (a NumPy ``Generator`` or
    ``RandomState``), kept in their file order; all rows when ``n`` is None or
    at least the row count."""
    if n is None or n >= X.shape[0]:
        return X, y
    idx = np.sort(rng.choice(X.shape[0], size=n, replace=False))
    return X[idx], y[idx]


def load_dataset(name: str, split: str = "train", *, dense: bool = True,
                 n_samples: int | None = None) -> tuple[Any, np.ndarray]:
    """Load a named dataset; ``n_samples`` keeps the first rows only.

    Examples
    --------
    >>> from gpuksvm.datasets import load_dataset
    >>> X, y = load_dataset("ijcnn1", "train")
    >>> X.shape
    (49990, 22)
    """
    n_features, _task = DATASETS[name] if name in DATASETS else (None, None)
    X, y = load_svmlight(dataset_path(name, split), n_features=n_features, dense=dense)
    if n_samples is not None:
        X, y = X[:n_samples], y[:n_samples]
    return X, y


# --------------------------------------------------------------------------- generators
def _check_n(n_samples: int) -> int:
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    return int(n_samples)


def make_checkerboard(n_samples: int, *, grid: int = 4, flip: float = 0.0,
                      random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``grid × grid`` checkerboard on the unit square.

    X is uniform on [0, 1]², y = +1 on "white" cells ((⌊grid·x₁⌋ + ⌊grid·x₂⌋)
    even) and −1 on the others; ``flip`` is the fraction of labels flipped at
    random (the LLSVM paper's noisy checkerboard uses 0.2; test sets are clean).
    """
    n = _check_n(n_samples)
    if not 0.0 <= flip < 0.5:
        raise ValueError(f"flip must be in [0, 0.5), got {flip!r}")
    rs = check_random_state(random_state)
    X = rs.uniform(0.0, 1.0, size=(n, 2))
    cells = np.floor(X * grid).astype(np.int64).sum(axis=1)
    y = np.where(cells % 2 == 0, 1.0, -1.0)
    if flip > 0:
        idx = rs.choice(n, size=int(round(flip * n)), replace=False)
        y[idx] = -y[idx]
    return X, y


def make_two_sines(n_samples: int = 2000, *, noise: float = 0.15, gap: float = 0.5,
                   periods: float = 2.0, random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Two sine curves, the upper one class +1 and the lower one class −1 (SVI Fig. 2).

    x₁ is uniform on [0, 2π·periods]; x₂ = sin(x₁) ± gap + N(0, noise²).
    Half the rows (rounded up) are positive.
    """
    n = _check_n(n_samples)
    rs = check_random_state(random_state)
    n_pos = (n + 1) // 2
    t = rs.uniform(0.0, 2 * np.pi * periods, size=n)
    y = np.where(np.arange(n) < n_pos, 1.0, -1.0)
    x2 = np.sin(t) + y * gap + rs.normal(0.0, noise, size=n)
    X = np.column_stack([t, x2])
    perm = rs.permutation(n)
    return X[perm], y[perm]


def _sphere_surface(rs: np.random.RandomState, n: int, dim: int) -> np.ndarray:
    G = rs.normal(size=(n, dim))
    return G / np.linalg.norm(G, axis=1, keepdims=True)


def make_two_spheres(n_samples: int, *, radii: tuple[float, float] = (1.0, 2.0), dim: int = 3,
                     noise: float = 0.05, random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Two equiprobable classes on concentric spheres (OK-FEB §VII-A).

    Class −1 lies on the sphere of radius ``radii[0]``, class +1 on ``radii[1]``,
    each plus isotropic Gaussian noise of std ``noise``.  Not linearly separable.
    """
    n = _check_n(n_samples)
    rs = check_random_state(random_state)
    y = np.where(rs.uniform(size=n) < 0.5, -1.0, 1.0)
    r = np.where(y < 0, radii[0], radii[1])
    X = _sphere_surface(rs, n, dim) * r[:, None] + rs.normal(0.0, noise, size=(n, dim))
    return X, y


def sphere_to_spheroid_stream(n_samples: int = 5000, *, change_at: int | None = None, dim: int = 3,
                              axes: tuple[float, ...] = (1.5, 1.5, 0.5), noise: float = 0.01,
                              random_state: Any = None) -> np.ndarray:
    """A stream on the unit sphere that switches to a spheroid at ``change_at`` (OK-FEB Figs. 4–5).

    Rows before ``change_at`` (default: half way) lie on ‖x‖ = 1; rows from it on
    lie on the spheroid Σ xᵢ²/aᵢ² = 1 with semi-axes ``axes`` (the paper's exact
    axes were lost in the text conversion; these give a clearly different
    manifold).  Gaussian noise of std ``noise`` is added.
    """
    n = _check_n(n_samples)
    change_at = n // 2 if change_at is None else int(change_at)
    if not 0 <= change_at <= n:
        raise ValueError(f"change_at must be in [0, {n}], got {change_at!r}")
    if len(axes) != dim:
        raise ValueError(f"axes must have {dim} entries, got {len(axes)}")
    rs = check_random_state(random_state)
    X = _sphere_surface(rs, n, dim)
    X[change_at:] *= np.asarray(axes, dtype=float)[None, :]
    return X + rs.normal(0.0, noise, size=X.shape)
