"""Device-generic k-means for landmark selection (LLSVM, SPEC §1 step 1).

The LLSVM papers pick Nyström landmarks as k-means centres computed
"approximately using only a few iterations" on at most 20,000 rows (the papers
take the first ones; LLSVM draws them at random by their contents, the same rows
in any row order: :func:`sample_rows`, :class:`RowReservoir`):
k-means landmarks give a smaller Nyström error ‖K − K̃‖ than random rows
(AISTATS 2012 §3; TNNLS 2018 §III), which is what the SVM accuracy depends on
(their Theorem 1).  This module provides exactly that and nothing more:

* seeding by k-means++ (D² sampling) or by random rows;
* a few Lloyd iterations;
* every distance computation is a GEMM (``X·Cᵀ`` through
  :func:`gpuksvm.kernels.kernel.kernel_block` with the linear kernel) plus row norms,
  in row chunks sized by :func:`gpuksvm.array.backend.plan_rows`, so the ``m × k``
  distance matrix is never stored whole;
* the same code runs on NumPy and on CuPy (dense or sparse rows).

k-means++ is run in *rounds*: each round draws a batch of new centres by D²
sampling without replacement (Efraimidis–Spirakis keys) and then updates the
distances with one GEMM.  With ``k ≤ pp_rounds`` every round draws one centre
and this is the classical k-means++ seeding; for large ``k`` (thousands of
landmarks) it replaces ``k`` sequential passes by ``pp_rounds`` passes, which
is what makes seeding cheap on a GPU.  The Lloyd iterations that follow remove
the small difference in seeding quality.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.array.backend import take_rows
from gpuksvm.kernels.kernel import Kernel, kernel_block, row_sq_norms
from gpuksvm.array.blas_threads import NARROW_DIM, host_blas_threads
from gpuksvm.solvers.row_order import RowHasher, content_sample, smallest_keys
from gpuksvm.array.validation import check_choice, check_param

__all__ = ["KMeansResult", "kmeans", "nearest_centers", "sample_rows", "RowReservoir"]

_LINEAR = Kernel("linear")

# Narrow CPU work (k-means on ≤ NARROW_DIM-dimensional rows) runs on one BLAS
# thread (gpuksvm.array.blas_threads).  Measured on the 2-core development CPU with
# its cores busy with other work: k-means (20,000 × 22, k = 1000) 2.4–3.2 s with two BLAS
# threads vs 1.2–1.5 s with one; eigh of a 1000 × 1000 K_zz 2.7–24 s vs
# 0.4–0.7 s.


@dataclass
class KMeansResult:
    """Output of :func:`kmeans`.

    Attributes
    ----------
    centers : (k, d) dense array on the compute device
    labels : (m,) int64 host array, nearest centre of each clustered row (in X's row order)
    inertia : float, Σ ‖xᵢ − c_{labels[i]}‖² over the clustered rows
    n_iter : int, Lloyd iterations run
    """

    centers: Any
    labels: np.ndarray
    inertia: float
    n_iter: int


def sample_rows(X: Any, n_sample: int | None, random_state: Any = None,
                targets: np.ndarray | None = None) -> np.ndarray:
    """Indices of ``min(n_sample, n)`` random rows of ``X`` (``None`` = all rows), drawn by their
    contents and listed in the seeded order of their contents
    (:func:`gpuksvm.solvers.row_order.content_sample`): the same rows in any row order give the
    same rows in the same order, so what is drawn from them by position afterwards is the same."""
    return content_sample(X, n_sample, random_state, targets)


class RowReservoir:
    """A uniform random sample of at most ``size`` rows from a stream of row blocks.

    Every row gets the seeded hash of its contents
    (:class:`~gpuksvm.solvers.row_order.RowHasher`, its keys drawn from
    ``random_state`` at the first block); the sample is the ``size`` rows with
    the smallest hashes (a bottom-k sample: uniform without replacement), in
    hash order.  Only the current sample is kept (O(size + block) memory), so
    one pass over an out-of-core source draws it; the sample depends on the
    rows only — not on their order nor on how they are cut into blocks — so
    :func:`sample_rows` on the same rows in memory draws the same rows (and
    leaves ``random_state`` in the same state).  LLSVM draws its k-means
    sample this way (the first rows of a file sorted by label are one class).

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.nystrom.kmeans import RowReservoir, sample_rows
    >>> X = np.arange(20.0).reshape(10, 2); y = np.arange(10)
    >>> res = RowReservoir(3, random_state=0)
    >>> for a in range(0, 10, 4):
    ...     res.add(X[a:a + 4], y[a:a + 4])
    >>> idx, Xs, ys = res.result()
    >>> idx.tolist() == sample_rows(X, 3, 0, y).tolist() == ys.tolist()
    True
    """

    def __init__(self, size: int, random_state: Any = None):
        self.size = int(check_param("size", size, Integral, low=1))
        self.random_state = check_random_state(random_state)
        self.n_seen = 0
        self._hasher: RowHasher | None = None
        self._keys = np.empty((0, 2), dtype=np.uint64)
        self._idx = np.empty(0, dtype=np.int64)
        self._X = self._y = None

    def add(self, X: Any, y: Any = None) -> None:
        """Offer the next rows (``X`` and ``y`` host arrays)."""
        if self._hasher is None:
            self._hasher = RowHasher(X.shape[1], self.random_state)
        nb = int(X.shape[0])
        keys = np.concatenate([self._keys, self._hasher.keys(X)])
        idx = np.concatenate([self._idx, np.arange(self.n_seen, self.n_seen + nb, dtype=np.int64)])
        Xc = X if self._X is None else _stack_rows(self._X, X)
        yc = None if y is None else (np.asarray(y) if self._y is None
                                     else np.concatenate([self._y, np.asarray(y)]))
        self.n_seen += nb
        # labels, then the position in the stream, order rows equal in both keys
        keep = smallest_keys(keys, self.size, yc, idx)
        self._keys, self._idx = keys[keep], idx[keep]
        self._X = Xc[keep]
        self._y = None if yc is None else yc[keep]

    def result(self) -> tuple[np.ndarray, Any, Any]:
        """(row indices in the stream, rows, labels) of the sample, in the order of their hashes."""
        return self._idx.copy(), self._X, self._y


def _stack_rows(A: Any, B: Any) -> Any:
    if sp.issparse(A) or sp.issparse(B):
        return sp.vstack([sp.csr_matrix(A), sp.csr_matrix(B)]).tocsr()
    return np.concatenate([np.asarray(A), np.asarray(B)], axis=0)


def _dense_rows(X: Any):
    return X.toarray() if bk.is_sparse(X) else X


def nearest_centers(X: Any, C: Any, *, x_sq: Any = None, c_sq: Any = None,
                    block_rows: int | None = None) -> tuple[Any, Any]:
    """Index of and squared distance to the nearest centre, for every row of ``X``.

    ‖x − c‖² = ‖x‖² + ‖c‖² − 2 xᵀc: one GEMM per row chunk (the ``m × k``
    distance matrix is never stored whole), clamped at 0 for round-off.

    Returns
    -------
    labels : (m,) int64 array on ``X``'s device
    d2 : (m,) squared distances on ``X``'s device
    """
    xp = bk.namespace_of(C)
    m, k = X.shape[0], C.shape[0]
    dt = np.dtype(C.dtype)
    if x_sq is None:
        x_sq = row_sq_norms(X, dt)
    if c_sq is None:
        c_sq = row_sq_norms(C, dt)
    labels = xp.empty(m, dtype=np.int64)
    d2 = xp.empty(m, dtype=dt)
    if m == 0:
        return labels, d2
    if block_rows is None:
        block_rows = bk.plan_rows(m, (2 * k + X.shape[1]) * dt.itemsize, bk.device_of(C))

    half_c_sq = 0.5 * c_sq

    def run(s: int, e: int) -> None:
        # argmin_j ‖x − c_j‖² = argmax_j (xᵀc_j − ½‖c_j‖²): one elementwise pass over the block
        G = kernel_block(X[s:e], C, _LINEAR, dtype=dt, block_rows=e - s)  # X_b Cᵀ
        G -= half_c_sq[None, :]
        j = xp.argmax(G, axis=1)
        labels[s:e] = j
        best = x_sq[s:e] - 2.0 * xp.take_along_axis(G, j[:, None], axis=1)[:, 0]
        d2[s:e] = xp.maximum(best, 0)

    bk.map_row_blocks(run, m, block_rows, what="k-means assignment")
    return labels, d2


def _kmeanspp(X: Any, x_sq: Any, k: int, rs: np.random.RandomState, xp, dt,
              pp_rounds: int) -> np.ndarray:
    """Row indices of the k-means++ seeds (rounds of D² sampling, see module doc)."""
    m = X.shape[0]
    first = int(rs.randint(m))
    chosen = [first]
    taken = np.zeros(m, dtype=bool)
    taken[first] = True
    d2 = nearest_centers(X, xp.asarray(_dense_rows(X[first:first + 1])), x_sq=x_sq)[1]
    n_rounds = max(1, min(int(pp_rounds), k - 1)) if k > 1 else 0
    remaining = k - 1
    for r in range(n_rounds):
        if remaining <= 0:
            break
        b = -(-remaining // (n_rounds - r))  # ceil: spread what is left over the rounds left
        w = bk.to_host(d2).astype(np.float64)
        w[taken] = 0.0
        pos = np.flatnonzero(w > 0)
        u = rs.random_sample(m)
        if pos.size >= b:
            # Efraimidis–Spirakis: the b smallest keys −log(u)/w are a weighted sample
            keys = np.full(m, np.inf)
            keys[pos] = -np.log(u[pos]) / w[pos]
            new = np.argpartition(keys, b - 1)[:b]
        else:  # fewer distinct points left than centres wanted: fill uniformly
            rest = np.flatnonzero(~taken & (w <= 0))
            fill = rs.choice(rest, size=min(b - pos.size, rest.size), replace=False) if rest.size else []
            new = np.concatenate([pos, np.asarray(fill, dtype=np.int64)])
        new = np.asarray(new, dtype=np.int64)
        if new.size == 0:
            break
        taken[new] = True
        chosen.extend(new.tolist())
        remaining -= new.size
        if remaining > 0:
            Cb = xp.asarray(take_rows(X, np.sort(new), dense=True))
            d2 = xp.minimum(d2, nearest_centers(X, Cb, x_sq=x_sq)[1])
    return np.asarray(chosen[:k], dtype=np.int64)


def _center_sums(X: Any, labels_host: np.ndarray, k: int, device: bk.Device, dt) -> tuple[Any, np.ndarray]:
    """Per-cluster sums of the rows (one sparse one-hot product) and counts."""
    m = labels_host.shape[0]
    onehot = sp.csr_matrix((np.ones(m, dtype=dt), (labels_host, np.arange(m))), shape=(k, m))
    onehot = bk.to_device(onehot, device)
    S = onehot @ X
    if bk.is_sparse(S):
        S = S.toarray()
    counts = np.bincount(labels_host, minlength=k)
    return S, counts


def kmeans(X: Any, n_clusters: int, *, n_iter: int = 5, init: str = "k-means++",
           sample: int | None = 20000, random_state: Any = None, device: Any = None,
           dtype: Any = None, pp_rounds: int = 64, tol: float = 0.0) -> KMeansResult:
    """A few Lloyd iterations of k-means on at most ``sample`` rows of ``X``.

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n, d)
        NumPy/SciPy on the CPU or CuPy on a GPU.
    n_clusters : int
        Number of centres ``k`` (at most the number of clustered rows).
    n_iter : int
        Lloyd iterations (the LLSVM papers run "a few"; 0 returns the seeds).
    init : {"k-means++", "random"}
        D² seeding (see the module docstring) or ``k`` distinct random rows.
    sample : int or None
        Cluster a random subset of this many rows (``None``: all rows), drawn by
        their contents (:func:`sample_rows`): the same rows in any order give the
        same centres.
    random_state : int, RandomState or None
    device : str or Device, optional
        Where to compute; default: the device of ``X`` (CPU for host arrays).
    dtype : float32 or float64, optional
        Compute dtype; default :func:`gpuksvm.array.backend.resolve_dtype`.
    pp_rounds : int
        Rounds of D² sampling used by k-means++ (k ≤ pp_rounds: classical k-means++).
    tol : float
        Stop early when no centre moves by more than ``tol`` (squared, relative
        to the mean squared row norm); 0 runs all ``n_iter`` iterations unless
        the assignment stops changing.

    Returns
    -------
    KMeansResult
        Centres on the compute device; labels and inertia of the clustered rows.
        An empty cluster keeps its previous centre.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.nystrom.kmeans import kmeans
    >>> X = np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 10]
    >>> res = kmeans(X, 2, random_state=0)
    >>> sorted(res.centers[:, 0].tolist())
    [0.0, 10.0]
    """
    check_param("n_clusters", n_clusters, Integral, low=1)
    check_param("n_iter", n_iter, Integral, low=0)
    check_choice("init", init, ("k-means++", "random"))
    check_param("sample", sample, Integral, low=1, allow_none=True)
    dev = bk.resolve_device(device) if device is not None else bk.device_of(X)
    dt = bk.resolve_dtype(dtype, dev)
    rs = check_random_state(random_state)
    with host_blas_threads(dev, narrow=X.shape[1] <= NARROW_DIM):
        return _kmeans(X, int(n_clusters), int(n_iter), init, sample, rs, dev, dt, int(pp_rounds), float(tol))


def _kmeans(X: Any, k: int, n_iter: int, init: str, sample: int | None, rs: np.random.RandomState,
            dev: bk.Device, dt: np.dtype, pp_rounds: int, tol: float) -> KMeansResult:
    """The body of :func:`kmeans` (arguments already checked)."""
    xp = bk.get_namespace(dev)

    idx = sample_rows(X, sample, rs)
    Xs = X[bk.device_index(X, idx)]
    Xs = bk.to_device(Xs, dev, dt)
    m = Xs.shape[0]
    if k > m:
        raise ValueError(f"n_clusters={k} is larger than the number of rows clustered ({m})")
    x_sq = row_sq_norms(Xs, dt)

    if init == "random":
        seeds = np.sort(rs.choice(m, size=k, replace=False))
    else:
        seeds = _kmeanspp(Xs, x_sq, k, rs, xp, dt, pp_rounds)
    C = xp.array(take_rows(Xs, seeds, dense=True), dtype=dt)

    scale = float(bk.to_host(x_sq).mean()) or 1.0
    labels_dev, d2 = nearest_centers(Xs, C, x_sq=x_sq)
    labels = np.asarray(bk.to_host(labels_dev))
    it = 0
    for it in range(1, n_iter + 1):
        S, counts = _center_sums(Xs, labels, k, dev, dt)
        nonempty = xp.asarray(counts > 0)
        cnt = xp.asarray(np.maximum(counts, 1).astype(dt))
        C_new = xp.where(nonempty[:, None], S / cnt[:, None], C)  # empty cluster: keep centre
        shift = float(bk.to_host(xp.max(xp.sum((C_new - C) ** 2, axis=1))))
        C = C_new
        new_dev, d2 = nearest_centers(Xs, C, x_sq=x_sq)
        new_labels = np.asarray(bk.to_host(new_dev))
        converged = np.array_equal(new_labels, labels) or shift <= tol * scale
        labels = new_labels
        if converged:
            break
    inertia = float(bk.to_host(xp.sum(d2)))
    # the clustered rows were taken in the order of their contents; labels follow X's row order
    return KMeansResult(centers=C, labels=labels[np.argsort(idx)], inertia=inertia, n_iter=it)
