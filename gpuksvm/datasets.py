"""Datasets: SVMlight loading, the bundled demo data, and the papers' generators.

Real data
---------
:func:`load_dataset` loads ``"ijcnn1"`` (bundled with the package: 49,990
train / 91,701 test rows, 22 features), ``"adult"`` (123 features) and
``"abalone"`` (8 features, regression) from SVMlight files.  Files not bundled
are looked up in ``$GPUKSVM_DATA_DIR`` and then in ``shared/datasets`` beside
the repository.  Parsing is delegated to scikit-learn; a malformed file raises
a ``ValueError`` naming the file and the first bad line.

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
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.utils import check_random_state

__all__ = [
    "DATASETS",
    "dataset_path",
    "load_dataset",
    "load_svmlight",
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


def _open_text(path: Path):
    if path.suffix == ".bz2":
        return bz2.open(path, "rt")
    if path.suffix == ".gz":
        return gzip.open(path, "rt")
    return open(path, "rt")


_TOKEN = re.compile(r"^-?\d+:[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|nan|inf)$", re.I)
_LABEL = re.compile(r"^[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)(,[-+]?\d+\.?\d*)*$")


def check_svmlight_line(line: str) -> bool:
    """True if ``line`` is a well-formed SVMlight line (or blank/comment)."""
    body = line.split("#", 1)[0].strip()
    if not body:
        return True
    toks = body.split()
    if not _LABEL.match(toks[0]):
        return False
    rest = toks[1:]
    if rest and rest[0].startswith("qid:"):
        rest = rest[1:]
    return all(_TOKEN.match(t) for t in rest)


def find_malformed_line(path: str | os.PathLike) -> tuple[int, str] | None:
    """The first malformed line of an SVMlight file as ``(line_number, text)``."""
    with _open_text(Path(path)) as fh:
        for lineno, line in enumerate(fh, 1):
            if not check_svmlight_line(line):
                return lineno, line.rstrip("\n")
    return None


def load_svmlight(path: str | os.PathLike, n_features: int | None = None, *,
                  dense: bool = True, dtype: Any = np.float64) -> tuple[Any, np.ndarray]:
    """Load an SVMlight file (plain, .bz2 or .gz); parse errors name file and line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        X, y = load_svmlight_file(str(path), n_features=n_features, dtype=dtype)
    except ValueError as exc:
        bad = find_malformed_line(path)
        where = f" at line {bad[0]}: {bad[1][:80]!r}" if bad else ""
        raise ValueError(f"{path}: malformed SVMlight data{where} ({exc})") from exc
    return (X.toarray() if dense else X), y


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
