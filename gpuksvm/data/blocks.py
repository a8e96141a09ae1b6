"""Block sources: training data read one block of rows at a time (out of core).

A :class:`BlockSource` is *re-iterable*: each ``for Xb, yb in source`` is one
pass over the data and yields ``(X_block, y_block)`` pairs, in the same order
on every pass (selective block minimization, :func:`gpuksvm.solvers.linear.sbm.sbm`,
keeps one dual variable per row and identifies rows by their position in a
pass).  ``n_features`` is the number of columns (``None`` when unknown until
the first block is read); ``source.map(fn)`` is the source of
``(fn(X_block), y_block)`` pairs, :class:`LinearMapBlockSource` the source of
``(base_fn(X_block) · T, y_block)`` (LLSVM's feature map, whose solver streams
``base_fn(X_block)`` and applies T to its statistics),
``source.labels()`` returns every label in order (a cheap pass: SVMlight files
only read each line's first token) and ``source.max_row_sq_norm()`` the
largest squared row norm (for the extreme-cost rule of
:class:`~gpuksvm.estimators.linear_svm.LinearSVM`).

:func:`as_block_source` builds one from

* a :class:`BlockSource` (returned unchanged);
* a NumPy array or ``np.memmap`` plus ``y`` (rows are sliced lazily, so a
  memmap is read from disk one block at a time), or a SciPy sparse matrix;
* a path to an SVMlight / LIBSVM file, optionally ``.bz2`` / ``.gz``
  compressed: ``block_size`` lines are read at a time and each block's lines
  are parsed by :func:`sklearn.datasets.load_svmlight_file`; a malformed line
  raises ``ValueError`` naming the file and the line number;
* a zero-argument callable returning a fresh iterator of ``(Xb, yb)`` pairs;
* a list (or tuple) of ``(Xb, yb)`` pairs (an "iterable of blocks" that can be
  read more than once; a one-shot generator cannot serve several passes and
  is refused with a message saying so).

Every block's ``yb`` must have one label per row of ``Xb``; a block that does
not is a ``ValueError`` naming the block.

Examples
--------
>>> import numpy as np
>>> from gpuksvm.data.blocks import as_block_source
>>> X = np.arange(10.0).reshape(5, 2); y = np.array([0, 1, 0, 1, 1])
>>> src = as_block_source(X, y, block_size=2)
>>> [Xb.shape[0] for Xb, yb in src]
[2, 2, 1]
>>> src.n_features, src.labels().tolist()
(2, [0, 1, 0, 1, 1])
"""
from __future__ import annotations

import io
import os
import warnings
import zlib
from numbers import Integral
from os import PathLike
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from gpuksvm.array import backend as bk
from gpuksvm.datasets import (
    SVMLightIndexWarning,
    index_base_note,
    malformed,
    open_binary,
    svmlight_content,
    svmlight_line_error,
)
from gpuksvm.array.validation import check_param, check_working_range, max_row_sq_norm

__all__ = ["BlockSource", "ArrayBlockSource", "SVMLightBlockSource", "CallableBlockSource",
           "SequenceBlockSource", "MappedBlockSource", "LinearMapBlockSource", "as_block_source"]


class BlockSource:
    """Base class of re-iterable sources of ``(X_block, y_block)`` pairs.

    Subclasses implement :meth:`__iter__`; each iteration is one pass over the
    data, yielding blocks in the same order every time.

    Attributes
    ----------
    n_features : int or None
        Number of columns of every block (``None`` if unknown in advance).
    """

    n_features: int | None = None

    def __iter__(self) -> Iterator[tuple[Any, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def map(self, fn: Callable[[Any], Any]) -> "BlockSource":
        """The source yielding ``(fn(X_block), y_block)``; ``n_features`` becomes unknown."""
        return MappedBlockSource(self, fn)

    def labels(self) -> np.ndarray:
        """All labels in pass order, as one host array (one pass over the source)."""
        ys = [np.ravel(bk.to_host(yb)) for _, yb in self]
        if not ys:
            raise ValueError("the block source yielded no data")
        return np.concatenate(ys)

    def max_row_sq_norm(self) -> tuple[float, int]:
        """(max_i ‖xᵢ‖², passes over the data it took): one pass here, every block checked
        finite and usable in float64 (:func:`gpuksvm.array.validation.check_working_range`)."""
        best = 0.0
        for Xb, _ in self:
            _check_finite(Xb)
            check_working_range(Xb, np.float64)
            best = max(best, max_row_sq_norm(Xb))
        return best, 1


class ArrayBlockSource(BlockSource):
    """Row blocks of an in-memory or memory-mapped array (dense, sparse or CuPy).

    Parameters
    ----------
    X : array of shape (n, d) — ``np.memmap`` is read lazily, block by block.
    y : array of shape (n,)
    block_size : int
    """

    def __init__(self, X: Any, y: Any, *, block_size: int = 5000):
        if y is None:
            raise ValueError("y is required when X is an array (only a BlockSource yields its labels)")
        if not hasattr(X, "shape") or len(X.shape) != 2:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D, got shape {X.shape}")
        y = np.ravel(bk.to_host(y))
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                             f"[{X.shape[0]}, {y.shape[0]}]")
        if X.shape[0] == 0:
            raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
        self.X = sp.csr_matrix(X) if (sp.issparse(X) and not isinstance(X, sp.csr_matrix)) else X
        self.y = y
        self.block_size = _check_block_size(block_size)
        self.n_features = int(X.shape[1])

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        n = self.X.shape[0]
        for a in range(0, n, self.block_size):
            b = min(a + self.block_size, n)
            Xb = self.X[a:b]
            if isinstance(Xb, np.memmap):
                Xb = np.array(Xb)  # read this block from disk, drop the mapping
            yield Xb, self.y[a:b]

    def labels(self) -> np.ndarray:
        return self.y.copy()

    def max_row_sq_norm(self) -> tuple[float, int]:
        """As :meth:`BlockSource.max_row_sq_norm`; no pass for an in-memory array (a memmap is read once)."""
        if not isinstance(self.X, np.memmap):
            _check_finite(self.X)
            check_working_range(self.X, np.float64)
            return max_row_sq_norm(self.X), 0
        return super().max_row_sq_norm()


def _checked_pairs(blocks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """The ``(Xb, yb)`` pairs of one pass, each checked: a pair, one label per row."""
    for i, item in enumerate(blocks):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError(f"a block source must yield (X_block, y_block) pairs; block {i} is "
                             f"a {type(item).__name__}")
        Xb, yb = item
        n_rows = Xb.shape[0] if hasattr(Xb, "shape") else len(Xb)
        n_labels = yb.shape[0] if hasattr(yb, "shape") and len(yb.shape) else (
            len(yb) if hasattr(yb, "__len__") else None)
        if n_labels != n_rows:
            raise ValueError(f"block {i}: X_block has {n_rows} rows but y_block has "
                             f"{n_labels if n_labels is not None else 'no'} labels (one label per row)")
        yield Xb, yb


class CallableBlockSource(BlockSource):
    """Blocks from a zero-argument callable returning a fresh iterator of ``(Xb, yb)``."""

    def __init__(self, fn: Callable[[], Iterable[tuple[Any, Any]]], *, n_features: int | None = None):
        self.fn = fn
        self.n_features = None if n_features is None else int(n_features)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        it = self.fn()
        if it is None:
            raise ValueError("the block-source callable returned None instead of an iterator")
        yield from _checked_pairs(it)


class SequenceBlockSource(BlockSource):
    """Blocks from a list (or tuple) of ``(Xb, yb)`` pairs, read again on every pass."""

    def __init__(self, blocks: list | tuple, *, n_features: int | None = None):
        if not blocks:
            raise ValueError("the list of blocks is empty")
        self.blocks = list(blocks)
        first = self.blocks[0][0]
        width = int(first.shape[1]) if hasattr(first, "shape") and len(first.shape) == 2 else None
        if n_features is not None and width is not None and int(n_features) != width:
            raise ValueError(f"n_features={n_features} but the first block has {width} columns")
        self.n_features = width if n_features is None else int(n_features)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        yield from _checked_pairs(self.blocks)


def _is_block_list(data: Any) -> bool:
    """A list/tuple of (X_block, y_block) pairs (X_block 2-D), not a list of rows."""
    if not isinstance(data, (list, tuple)) or not data:
        return False
    first = data[0]
    if not (isinstance(first, tuple) and len(first) == 2):
        return False
    Xb = first[0]
    return sp.issparse(Xb) or bk.is_sparse(Xb) or len(getattr(Xb, "shape", ())) == 2 or (
        isinstance(Xb, list) and bool(Xb) and isinstance(Xb[0], (list, tuple, np.ndarray)))


class MappedBlockSource(BlockSource):
    """``(fn(X_block), y_block)`` for every block of ``parent``."""

    def __init__(self, parent: BlockSource, fn: Callable[[Any], Any]):
        self.parent = parent
        self.fn = fn
        self.n_features = None

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        for Xb, yb in self.parent:
            yield self.fn(Xb), yb

    def labels(self) -> np.ndarray:
        return self.parent.labels()


class LinearMapBlockSource(BlockSource):
    """Feature blocks F_b = base_fn(X_b) · T of a parent source, with T a fixed matrix.

    LLSVM out of core: ``base_fn`` = K(·, Z) and T = M, so F_b = K(X_b, Z) M.
    Iterating yields ``(F_b, y_b)`` (in ``dtype``); a solver that only needs
    sums of products of rows (:class:`gpuksvm.solvers.linear.newton_stream.StreamOracle`)
    iterates :meth:`base` instead and applies T to its small statistics, so no
    pass forms F (an n·k² product).

    Parameters
    ----------
    parent : BlockSource
    base_fn : callable X_block → B_block (p columns, any device)
    transform : (p, d) array T
    sample : (X_rows, y_rows), optional
        A uniform random sample of the parent's rows (raw rows, not features),
        which a solver may use for a warm start.
    labels : all labels in pass order, if already read (else the parent's)
    max_rows : int, optional — cut every parent block into pieces of at most
        this many rows before ``base_fn`` (bounds the memory of B).
    dtype : dtype of the yielded feature blocks (default: T's)
    row_sq_norm_bound : float, optional
        An upper bound of the squared norms of the feature rows, if the builder
        knows one (LLSVM: :meth:`gpuksvm.solvers.nystrom.maps.NystromMap.feature_sq_norm_bound`); else
        :meth:`max_row_sq_norm` forms the feature blocks in one pass.
    """

    def __init__(self, parent: BlockSource, base_fn: Callable[[Any], Any], transform: Any, *,
                 sample: tuple[Any, Any] | None = None, labels: np.ndarray | None = None,
                 max_rows: int | None = None, dtype: Any = None, row_sq_norm_bound: float | None = None):
        self.parent = parent
        self.row_sq_norm_bound = None if row_sq_norm_bound is None else float(row_sq_norm_bound)
        self.base_fn = base_fn
        self.transform = transform
        self.sample = sample
        self._labels = None if labels is None else np.ravel(np.asarray(labels))
        self.max_rows = None if max_rows is None else _check_block_size(max_rows)
        self.dtype = np.dtype(dtype or transform.dtype)
        self.n_features = int(transform.shape[1])

    def _pieces(self, Xb: Any) -> Iterator[tuple[int, int]]:
        step = self.max_rows or max(int(Xb.shape[0]), 1)
        for a in range(0, int(Xb.shape[0]), step):
            yield a, min(a + step, int(Xb.shape[0]))

    def base(self) -> Iterator[tuple[Any, Any]]:
        """One pass yielding ``(base_fn(X_piece), y_piece)`` (pieces of at most ``max_rows``)."""
        for Xb, yb in self.parent:
            for a, b in self._pieces(Xb):
                yield self.base_fn(Xb[a:b]), yb[a:b]

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """The parent's blocks as features F_b (computed piece by piece, in ``dtype``)."""
        for Xb, yb in self.parent:
            parts = []
            for a, b in self._pieces(Xb):
                Bb = self.base_fn(Xb[a:b]).astype(self.dtype, copy=False)
                xp = bk.namespace_of(Bb)
                parts.append(Bb @ xp.asarray(self.transform, dtype=self.dtype))
            if parts:
                yield (parts[0] if len(parts) == 1 else bk.namespace_of(parts[0]).concatenate(parts)), yb

    def labels(self) -> np.ndarray:
        return self._labels.copy() if self._labels is not None else self.parent.labels()

    def max_row_sq_norm(self) -> tuple[float, int]:
        """The builder's bound (no pass), else the feature rows' maximum (one pass)."""
        if self.row_sq_norm_bound is not None:
            return self.row_sq_norm_bound, 0
        return super().max_row_sq_norm()


class SVMLightBlockSource(BlockSource):
    """An SVMlight / LIBSVM file read ``block_size`` lines at a time.

    Parameters
    ----------
    path : str or path-like (``.bz2`` and ``.gz`` are decompressed on the fly)
    block_size : int
        Data lines per block (comment and blank lines do not count).
    n_features : int, optional
        Number of columns; if ``None``, one scan of the file finds the largest
        feature index.
    zero_based : bool or "auto"
        As in :func:`sklearn.datasets.load_svmlight_file`, but decided once for
        the whole file ("auto": zero-based iff some feature index is 0).
    dtype : float dtype of the blocks (CSR matrices).
    """

    def __init__(self, path: str | PathLike, *, block_size: int = 5000, n_features: int | None = None,
                 zero_based: bool | str = "auto", dtype: Any = np.float64):
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"no such SVMlight file: {self.path!r}")
        self.block_size = _check_block_size(block_size)
        if zero_based not in (True, False, "auto"):
            raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
        self.dtype = np.dtype(dtype)
        self.zero_based = zero_based
        self.n_features = None if n_features is None else int(n_features)
        self._labels: np.ndarray | None = None     # kept by _scan for labels()
        if self.n_features is None or zero_based == "auto":
            self._scan()

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        """(line number, content) of every data line."""
        try:
            with open_binary(self.path) as fh:
                for lineno, line in enumerate(fh, start=1):
                    c = svmlight_content(line)
                    if c:
                        yield lineno, c
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{self.path}: cannot read the file ({exc})") from None

    def _error(self, lineno: int, what: str, text: bytes | None = None) -> ValueError:
        shown = None if text is None else text.decode("utf-8", errors="replace")
        return malformed(self.path, what, lineno, shown)

    def _scan(self) -> None:
        """One pass: every line checked (file and line named on error), the largest feature
        index, whether indices are zero-based, and the labels (kept for :meth:`labels`)."""
        max_idx, n_zero, first_zero, n_lines = -1, 0, None, 0
        labels: list[float] = []
        zb = None if self.zero_based == "auto" else bool(self.zero_based)
        for lineno, c in self._lines():
            why = svmlight_line_error(c, zero_based=zb)
            if why is not None:
                raise self._error(lineno, why, c)
            toks = c.split()
            n_lines += 1
            labels.append(float(toks[0]))
            feats = toks[1:]
            if feats:
                lo = int(feats[0].partition(b":")[0])
                max_idx = max(max_idx, int(feats[-1].partition(b":")[0]))
                if lo == 0:
                    n_zero += 1
                    first_zero = lineno if first_zero is None else first_zero
        self._labels = np.asarray(labels) if labels else None
        if self.zero_based == "auto":
            self.zero_based = n_zero > 0
            note = index_base_note(self.path, n_zero, n_lines, first_zero)
            if note:
                warnings.warn(note, SVMLightIndexWarning, stacklevel=3)
        if self.n_features is None:
            if max_idx < 0:
                raise ValueError(f"{self.path}: no feature found; pass n_features")
            self.n_features = max_idx + 1 if self.zero_based else max_idx

    def _parse(self, chunk: list[tuple[int, bytes]]) -> tuple[sp.csr_matrix, np.ndarray]:
        from sklearn.datasets import load_svmlight_file

        def load(lines: list[bytes]):
            return load_svmlight_file(io.BytesIO(b"\n".join(lines) + b"\n"), n_features=self.n_features,
                                      zero_based=self.zero_based, dtype=self.dtype, query_id=True)

        try:
            Xb, yb, query_ids = load([c for _, c in chunk])
            ok = bool(np.isfinite(Xb.data).all() and np.isfinite(yb).all()) and not len(query_ids)
            # the parser reads numbers with Python's int/float, for which 1_0 is 10
            ok = ok and not any(b"_" in c for _, c in chunk)
        except (ValueError, OverflowError):     # OverflowError: an index beyond a C int
            ok = False
        if not ok:  # find the offending line and name it
            for lineno, c in chunk:
                why = svmlight_line_error(c, zero_based=self.zero_based, n_features=self.n_features)
                if why is not None:
                    raise self._error(lineno, why, c)
            raise malformed(self.path, "a block does not parse", chunk[0][0])
        return Xb.tocsr(), np.asarray(yb)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        chunk: list[tuple[int, bytes]] = []
        for item in self._lines():
            chunk.append(item)
            if len(chunk) == self.block_size:
                yield self._parse(chunk)
                chunk = []
        if chunk:
            yield self._parse(chunk)

    def labels(self) -> np.ndarray:
        if self._labels is not None:
            return self._labels.copy()
        out = []
        for lineno, c in self._lines():
            tok = c.split(None, 1)[0]
            try:
                out.append(float(tok))
            except ValueError:
                raise self._error(lineno, svmlight_line_error(c) or "bad label", c) from None
        if not out:
            raise ValueError(f"{self.path}: the file has no data line")
        return np.asarray(out)


def _check_block_size(block_size: Any) -> int:
    return int(check_param("block_size", block_size, Integral, low=1))


def check_block(Xb: Any, n_features: int, device: Any, dtype: Any) -> Any:
    """One block of an out-of-core pass: of the expected width, finite, on ``device`` in ``dtype``."""
    if Xb.shape[1] != n_features:
        raise ValueError(f"a block has {Xb.shape[1]} features, expected {n_features}")
    Xb = bk.to_device(Xb, device, dtype)
    _check_finite(Xb)
    return Xb


def _check_finite(Xb: Any) -> None:
    data = Xb.data if bk.is_sparse(Xb) else Xb
    if not bool(bk.namespace_of(data).isfinite(data).all()):
        raise ValueError("Input X contains NaN or infinity.")


def is_block_input(X: Any) -> bool:
    """Whether ``X`` is out-of-core input for :func:`as_block_source`: a
    :class:`BlockSource`, an SVMlight path, or a zero-argument callable
    returning an iterator of ``(X_block, y_block)``."""
    if isinstance(X, (BlockSource, str, PathLike)) or _is_block_list(X):
        return True
    if hasattr(X, "__next__") and not hasattr(X, "shape"):
        return True    # a one-shot iterator: as_block_source explains what to pass instead
    return callable(X) and not hasattr(X, "shape")


def as_block_source(data: Any, y: Any = None, *, block_size: int = 5000,
                    n_features: int | None = None) -> BlockSource:
    """Wrap ``data`` as a :class:`BlockSource` (see the module docstring).

    Parameters
    ----------
    data : BlockSource, array / memmap / sparse matrix (with ``y``), SVMlight path, callable,
        or list of ``(X_block, y_block)`` pairs
    y : labels, only with an array
    block_size : int
        Rows (or file lines) per block.
    n_features : int, optional
        Column count for a file or a callable (a file is scanned when omitted).
    """
    _check_block_size(block_size)
    if isinstance(data, BlockSource):
        if y is not None:
            raise ValueError("y must be None when X is a block source (it yields the labels)")
        return data
    if isinstance(data, (str, PathLike)):
        if y is not None:
            raise ValueError("y must be None for an SVMlight file (the file holds the labels)")
        return SVMLightBlockSource(data, block_size=block_size, n_features=n_features)
    if callable(data) and not hasattr(data, "shape"):
        if y is not None:
            raise ValueError("y must be None for a callable block source (it yields the labels)")
        return CallableBlockSource(data, n_features=n_features)
    if _is_block_list(data):
        if y is not None:
            raise ValueError("y must be None for a list of (X_block, y_block) pairs (it holds the labels)")
        return SequenceBlockSource(data, n_features=n_features)
    if hasattr(data, "__next__") and not hasattr(data, "shape"):
        raise TypeError("a generator or iterator can be read only once, but training reads the "
                        "blocks several times; pass a list of (X_block, y_block) pairs or a "
                        "zero-argument function returning a fresh iterator")
    if hasattr(data, "shape") or isinstance(data, (list, tuple)):
        src = ArrayBlockSource(data, y, block_size=block_size)
        if n_features is not None and int(n_features) != src.n_features:
            raise ValueError(f"n_features={n_features} but the array has {src.n_features} columns")
        return src
    raise TypeError(f"cannot make a block source from {type(data).__name__}; pass an array with y, "
                    "an SVMlight file path, a callable returning an iterator of (X, y) blocks, "
                    "or a BlockSource")
