"""Shared by the search engines' tests: their data (an XOR-like binary problem, a third class on
request) and the check that an engine gives one fit per (candidate, split), beside its own fit."""
import numpy as np
from sklearn.base import clone


def xor_classes(n: int, *, classes: int = 2, seed: int = 0, features: int = 4, noise: float = 0.3,
                third_above: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    """n standard-normal rows of ``features`` columns; class 1 where x₀x₁ + noise > 0, and with
    ``classes=3`` class 2 where x₂ > ``third_above``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, features))
    y = (X[:, 0] * X[:, 1] + noise * rng.normal(size=n) > 0).astype(int)
    if classes == 3:
        y[X[:, 2] > third_above] = 2
    return X, y


def shared_fits(search, est, X, y, splits, cands, shared):
    """The SplitFits of ``search`` (an engine) on a grid — one per (candidate, split), each without
    error, with ``shared`` as what it shared and a fit time — each with its candidate's own fit on
    the split's training rows: a list of (SplitFit, reference model)."""
    fits = list(search(est, X, y, splits, cands))
    assert sorted((f.candidate, f.split) for f in fits) == [(c, s) for c in range(len(cands))
                                                          for s in range(len(splits))]
    pairs = []
    for f in fits:
        assert f.error is None and f.shared == shared and f.fit_time > 0
        train = splits[f.split][0]
        pairs.append((f, clone(est).set_params(**cands[f.candidate]).fit(X[train], y[train])))
    return pairs
