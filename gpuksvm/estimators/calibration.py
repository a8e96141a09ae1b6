"""Platt scaling shared by every gpuksvm classifier (``probability=True``).

What is computed (as LIBSVM does, Chang & Lin 2011 §8):

1. **Out-of-fold decision values.**  ``fit`` ends with
   ``self._fit_probability(X, y, sample_weight)``: the classifier is cloned
   with ``probability=False`` and refitted on 5 stratified folds
   (``random_state`` seeds the split); every training row gets the decision
   values of the model that did not see it.  With fewer than 2 rows in some
   class the in-sample decision values are used instead (documented fallback).
2. **A sigmoid per binary problem** ``P(pos | f) = 1 / (1 + exp(A f + B))``
   fitted by :func:`fit_platt` — Platt (1999) with the improvements of Lin,
   Lin & Weng (2007, "A note on Platt's probabilistic outputs for support
   vector machines"): regularized targets t₊ = (N₊+1)/(N₊+2),
   t₋ = 1/(N₋+2), a numerically stable objective, and Newton's method with a
   backtracking line search (Algorithm 1 of that note).
3. **Multi-class.**
   * one-vs-one models (``KernelSVC``): pairwise class probabilities
     rᵢⱼ = P(i | i or j, x) are coupled into one distribution by method 2 of
     Wu, Lin & Weng (2004, eq. 4.6 / Q-formulation):
     min_p ½ pᵀQp s.t. Σp = 1 with Q_tt = Σ_{s≠t} r_st², Q_ts = −r_st r_ts,
     solved exactly per row as the (K+1)×(K+1) KKT system (batched solve);
     rᵢⱼ are clipped to [1e-7, 1 − 1e-7] as LIBSVM does.
   * one-vs-rest models (``LinearSVM`` and others): one sigmoid per class on
     its OvR decision value, then the K probabilities are normalized to sum 1
     ("normalized OvR"; LIBLINEAR's rule for its logistic outputs).

A classifier opts in by subclassing :class:`ProbabilityMixin` and having
``probability`` and ``random_state`` parameters, ``classes_`` and
``decision_function``.  One-vs-one classifiers override
:meth:`ProbabilityMixin._platt_problems` and
:meth:`ProbabilityMixin._binary_decisions`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import check_random_state
from sklearn.utils._available_if import available_if
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.array.backend import take_rows
from gpuksvm.solvers.multiclass import decision_block_rows, problem_rows
from gpuksvm.solvers.row_order import content_sample
from gpuksvm.scaleout.dispatch import dask_dispatch

__all__ = ["ProbabilityMixin", "fit_platt", "platt_predict", "couple_pairwise"]

_MIN_PROB = 1e-7


def fit_platt(decision_values: Any, y: Any, *, max_iter: int = 100, min_step: float = 1e-10,
              sigma: float = 1e-12, eps: float = 1e-5) -> tuple[float, float]:
    """Fit Platt's sigmoid ``P(y=1|f) = 1/(1+exp(A f + B))`` to decision values.

    Newton's method with backtracking on the regularized cross-entropy
    (Lin, Lin & Weng 2007, Algorithm 1).

    Parameters
    ----------
    decision_values : (n,) array
        Decision values f (positive = the positive class).
    y : (n,) array
        Labels: ``y > 0`` (or True) marks the positive class.
    max_iter, min_step, sigma, eps
        Newton iterations, smallest line-search step, Hessian ridge, and the
        gradient tolerance of the note's algorithm.

    Returns
    -------
    A, B : float

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.estimators.calibration import fit_platt
    >>> f = np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0]); y = np.array([0, 0, 1, 0, 1, 1])
    >>> A, B = fit_platt(f, y)
    >>> A < 0
    True
    """
    f = np.asarray(bk.to_host(decision_values), dtype=np.float64).ravel()
    yy = np.asarray(bk.to_host(y)).ravel()
    if f.shape != yy.shape:
        raise ValueError(f"decision_values has {f.size} entries but y has {yy.size}")
    if f.size == 0:
        raise ValueError("fit_platt needs at least one decision value")
    if not np.all(np.isfinite(f)):
        raise ValueError("decision_values contain NaN or infinity")
    pos = yy > 0
    n_pos = int(pos.sum())
    n_neg = int(f.size - n_pos)
    hi = (n_pos + 1.0) / (n_pos + 2.0)
    lo = 1.0 / (n_neg + 2.0)
    t = np.where(pos, hi, lo)
    A, B = 0.0, float(np.log((n_neg + 1.0) / (n_pos + 1.0)))

    def objective(A: float, B: float) -> float:
        z = f * A + B
        # Σ t z + log(1 + e^{−z}), written stably for both signs of z
        return float(np.sum(np.where(z >= 0, t * z + np.log1p(np.exp(-np.abs(z))),
                                     (t - 1.0) * z + np.log1p(np.exp(-np.abs(z))))))

    fval = objective(A, B)
    for _ in range(max_iter):
        p = platt_predict(f, A, B)     # probability of the positive class, q = 1 − p
        q = 1.0 - p
        d2 = p * q
        h11 = sigma + float(np.dot(f * f, d2))
        h22 = sigma + float(d2.sum())
        h21 = float(np.dot(f, d2))
        d1 = t - p
        g1 = float(np.dot(f, d1))
        g2 = float(d1.sum())
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            nA, nB = A + step * dA, B + step * dB
            nf = objective(nA, nB)
            if nf < fval + 1e-4 * step * gd:
                A, B, fval = nA, nB, nf
                break
            step /= 2.0
        else:
            break  # line search failed: keep the current (A, B)
    return float(A), float(B)


def platt_predict(decision_values: Any, A: Any, B: Any) -> np.ndarray:
    """``1/(1+exp(A f + B))`` computed without overflow (broadcasts over columns)."""
    f = np.asarray(decision_values, dtype=np.float64)
    z = f * A + B
    ez = np.exp(-np.abs(z))
    return np.where(z >= 0, ez / (1.0 + ez), 1.0 / (1.0 + ez))


def _normalize_rows(P: np.ndarray) -> np.ndarray:
    """Rows scaled to sum to 1; an all-zero row becomes uniform."""
    s = P.sum(axis=1, keepdims=True)
    return np.where(s > 0, P / np.where(s > 0, s, 1.0), 1.0 / P.shape[1])


def couple_pairwise(R: np.ndarray) -> np.ndarray:
    """Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2).

    Parameters
    ----------
    R : (n, K, K) array
        ``R[:, i, j]`` = P(class i | class i or j, x); the diagonal is ignored.

    Returns
    -------
    (n, K) array whose rows sum to 1.
    """
    R = np.clip(np.asarray(R, dtype=np.float64), _MIN_PROB, 1.0 - _MIN_PROB)
    n, K, _ = R.shape
    eye = np.eye(K, dtype=bool)
    Rt = np.swapaxes(R, 1, 2)
    # r_st = R[:, s, t];  Q_tt = Σ_{s≠t} r_st²,  Q_ts = −r_st r_ts   (WLW04, eq. 4.6)
    Q = -Rt * R
    sq = np.where(eye[None], 0.0, R * R)
    Q[:, eye] = sq.sum(axis=1)
    # KKT system [Q 1; 1ᵀ 0][p; b] = [0; 1], one per row
    M = np.zeros((n, K + 1, K + 1))
    M[:, :K, :K] = Q
    M[:, :K, K] = 1.0
    M[:, K, :K] = 1.0
    rhs = np.zeros((n, K + 1))
    rhs[:, K] = 1.0
    P = np.linalg.solve(M, rhs[..., None])[:, :K, 0]
    P = np.clip(P, 0.0, None)
    return _normalize_rows(P)


def probability_enabled(self: Any) -> bool:
    """``available_if`` test of ``predict_proba``: only with ``probability=True`` (as SVC)."""
    if not getattr(self, "probability", False):
        raise AttributeError("predict_proba is not available when probability=False")
    return True


class ProbabilityMixin:
    """Platt-scaled ``predict_proba`` / ``predict_log_proba`` for a classifier.

    The host classifier has ``probability`` and ``random_state`` parameters,
    ``classes_`` and ``decision_function``, and calls
    ``self._fit_probability(X, y, sample_weight)`` at the end of ``fit`` when
    ``self.probability`` is true.  See the module docstring for the method.

    Attributes (set by ``_fit_probability``)
    ----------------------------------------
    probA_, probB_ : ndarray of shape (n_problems,)
        Sigmoid parameters per binary problem (LIBSVM's meaning: one per
        one-vs-one pair, one per class for one-vs-rest, one for binary).
    """

    _probability_folds = 5

    # ---- hooks a one-vs-one classifier overrides ------------------------------------
    def _platt_problems(self) -> tuple[str, list[tuple[int, int | None]]]:
        """(scheme, problems): ``(pos, neg)`` class-index pairs; ``neg=None`` for OvR."""
        K = len(self.classes_)
        if K == 2:
            return "binary", [(1, 0)]
        return "ovr", [(k, None) for k in range(K)]

    def _binary_decisions(self, X: Any) -> np.ndarray:
        """Host (n, n_problems) raw decision values, one column per problem."""
        D = np.asarray(bk.to_host(self.decision_function(X)), dtype=np.float64)
        return D.reshape(-1, 1) if D.ndim == 1 else D

    def _decision_blocks(self, X: Any) -> tuple[Any, str, Callable[[Any], np.ndarray] | None, int]:
        """Prediction input for :meth:`_map_decisions`: (rows, the caller's array kind, a function
        from a row block ``rows[s:e]`` to its host (b, n_problems) float64 decision values,
        float64 work values per row that function needs beyond its result).  A function of None:
        the rows cannot be cut (:meth:`_binary_decisions` of all of them at once); the default.
        An estimator whose decision values are a function of each row alone overrides it."""
        return X, bk.array_kind(X), None, 0

    def _map_decisions(self, X: Any, width: int, dtype: Any, fn: Callable[[np.ndarray], np.ndarray], *,
                       work: int = 0) -> tuple[np.ndarray, str]:
        """``fn`` of the decision values of all rows, in row blocks of the memory budget
        (:func:`~gpuksvm.solvers.multiclass.decision_block_rows`; ``work``: float64 values of
        ``fn``'s work arrays per row): (n, width) (``width`` 0: (n,)) host results of ``dtype``
        and the caller's array kind.

        With a block function from :meth:`_decision_blocks` the decision values of a block are
        computed from its rows alone, so no (n, n_problems) array is held; without one they are
        :meth:`_binary_decisions` of all rows.  An estimator that computes its decision values in
        row blocks of its own overrides it (the SVC surface)."""
        rows, kind, values, row_work = self._decision_blocks(X)
        if values is None:
            D = self._binary_decisions(rows)
            rows, values = D, (lambda block: block)      # noqa: E731 - the values, cut in blocks
        n, P = int(rows.shape[0]), len(self._platt_problems()[1])
        out = np.empty((n, width) if width else (n,), dtype=dtype)

        def run(s: int, e: int) -> None:
            out[s:e] = fn(values(rows[s:e]))

        device = self._fitted_device() if hasattr(self, "_fitted_device") else bk.CPU
        step = decision_block_rows(n, P, len(self.classes_), width=width, work=work + row_work, device=device)
        bk.map_row_blocks(run, n, step, what="decision values")
        return out, kind

    # ---- fitting -------------------------------------------------------------------
    def _fit_probability(self, X: Any, y: Any, sample_weight: Any = None) -> None:
        yh = np.asarray(bk.to_host(y)).ravel()
        classes = np.asarray(bk.to_host(self.classes_))
        yidx = np.searchsorted(classes, yh)
        _, problems = self._platt_problems()
        n = yh.shape[0]
        counts = np.bincount(yidx, minlength=len(classes))
        n_splits = int(min(self._probability_folds, counts.min()))
        if n_splits >= 2:
            rs = check_random_state(self.random_state)
            # a pairwise X (kernel="precomputed") is K(X, X): its columns follow the training rows
            pairwise = self.__sklearn_tags__().input_tags.pairwise
            given = self.__dict__.get(_ORDER_ROWS)
            if given is not None and given.shape[0] != n:
                raise ValueError(f"the rows that order the Platt folds are {given.shape[0]}, the model "
                                 f"is fitted on {n}")
            base = _fold_order(X if given is None else given, yh, rs, pairwise)
            skf = StratifiedKFold(n_splits=n_splits, shuffle=True,
                                  random_state=int(rs.randint(np.iinfo(np.int32).max)))
            D = np.empty((n, len(problems)))
            sw = None if sample_weight is None else np.asarray(bk.to_host(sample_weight))
            for train_at, test_at in skf.split(np.zeros(n), yidx[base]):
                train, test = base[train_at], base[test_at]
                est = clone(self).set_params(probability=False)
                tr = _fold_rows(X, train, train, pairwise)
                if sw is None:
                    est.fit(tr, yh[train])
                else:
                    est.fit(tr, yh[train], sample_weight=sw[train])
                D[test] = est._binary_decisions(_fold_rows(X, test, train, pairwise))
        else:
            D = self._binary_decisions(X)
        self._fit_sigmoids(D, yidx)

    def _fit_sigmoids(self, D: np.ndarray, yidx: np.ndarray) -> None:
        """``probA_``, ``probB_``: one sigmoid per binary problem on the (n, n_problems) values D."""
        _, problems = self._platt_problems()
        A = np.empty(len(problems))
        B = np.empty(len(problems))
        for p, (pos, neg) in enumerate(problems):
            rows, yp = problem_rows(yidx, pos, neg)
            A[p], B[p] = fit_platt(D[rows, p], yp > 0)
        self.probA_ = A
        self.probB_ = B

    def calibrate_from_folds(self, folds: Any, y: Any) -> "ProbabilityMixin":
        """Platt scaling from out-of-fold decision values computed elsewhere (a model search).

        Instead of the internal 5-fold cross-validation of ``fit``, the
        sigmoids are fitted on the decision values that models of the same
        class and parameters, fitted without some rows, give those rows (the
        folds of a cross-validated search: no second internal CV).  Sets
        ``probA_``, ``probB_`` and ``probability=True``.

        Parameters
        ----------
        folds : iterable of (model, X_rows, rows)
            A fitted model of this class with the same ``classes_``, the rows
            it did not see (any array kind it predicts on) and their indices
            into ``y``.  A row held out by several folds counts once per fold.
        y : (n,) array
            The labels of the rows the indices refer to.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            No folds, or a fold model with other classes than this model's
            (its binary problems would not be this model's).
        """
        check_is_fitted(self)
        yh = np.asarray(bk.to_host(y)).ravel()
        classes = np.asarray(bk.to_host(self.classes_))
        blocks, labels = [], []
        for model, X_rows, rows in folds:
            if not np.array_equal(np.asarray(bk.to_host(model.classes_)), classes):
                raise ValueError("calibrate_from_folds: a fold model was fitted on other classes "
                                 f"({np.asarray(bk.to_host(model.classes_)).tolist()}) than this model's "
                                 f"({classes.tolist()})")
            blocks.append(model._binary_decisions(X_rows))
            labels.append(yh[np.asarray(rows)])
        if not blocks:
            raise ValueError("calibrate_from_folds needs at least one fold")
        self._fit_sigmoids(np.vstack(blocks), np.searchsorted(classes, np.concatenate(labels)))
        self.probability = True
        return self

    # ---- prediction ----------------------------------------------------------------
    def _proba_host(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        if not (hasattr(self, "probA_") and hasattr(self, "probB_")):
            raise NotFittedError("predict_proba is not available when fitted with probability=False")
        scheme, problems = self._platt_problems()
        A, B = self.probA_[None, :], self.probB_[None, :]
        K = len(self.classes_)

        def proba(D: np.ndarray) -> np.ndarray:
            R = platt_predict(D, A, B)
            if scheme == "binary":
                return np.column_stack([1.0 - R[:, 0], R[:, 0]])
            if scheme == "ovr":
                return _normalize_rows(R)
            pair = np.full((D.shape[0], K, K), 0.5)
            for p, (i, j) in enumerate(problems):
                pair[:, i, j] = R[:, p]
                pair[:, j, i] = 1.0 - R[:, p]
            return couple_pairwise(pair)

        # per row: Platt's ~5 arrays of the problems' width, then the pairwise coupling's
        # (K + 1) x (K + 1) systems and their copies (couple_pairwise)
        return self._map_decisions(X, K, np.float64, proba, work=5 * len(problems) + 8 * (K + 1) ** 2)[0]

    @available_if(probability_enabled)
    @dask_dispatch()
    def predict_proba(self, X: Any):
        """Class probabilities (Platt scaling with internal 5-fold CV).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        (n_samples, n_classes) array in the caller's array kind; columns
        follow ``classes_``; rows sum to 1.
        """
        return bk.as_kind(self._proba_host(X), bk.array_kind(X))

    @available_if(probability_enabled)
    @dask_dispatch()
    def predict_log_proba(self, X: Any):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return bk.as_kind(np.log(self._proba_host(X)), bk.array_kind(X))


#: the attribute :func:`fold_order_rows` sets for the length of a fit
_ORDER_ROWS = "_probability_order_rows"


@contextlib.contextmanager
def fold_order_rows(estimator: Any, rows: Any) -> Iterator[None]:
    """During the ``with`` block, ``estimator``'s Platt folds are cut in the order of the contents of
    ``rows`` (as many rows as it is fitted on, in the same order) instead of its own input's: a
    model fitted on features computed from other rows (LLSVM's linear SVM on F) orders its folds
    by those rows, whose contents do not depend on rounding.  ``rows=None``: its own input."""
    if rows is None:
        yield
        return
    setattr(estimator, _ORDER_ROWS, rows)
    try:
        yield
    finally:
        estimator.__dict__.pop(_ORDER_ROWS, None)


def _fold_order(X: Any, y: np.ndarray, rs: np.random.RandomState, pairwise: bool) -> np.ndarray:
    """The rows in which the folds are cut: in the seeded order of their contents
    (:func:`~gpuksvm.solvers.row_order.content_sample`) for a matrix of samples, so the same rows
    in any order give the same folds and probabilities; as given for a pairwise Gram matrix or
    the samples of a callable kernel (lists, frames: no contents to hash)."""
    n = y.shape[0]
    matrix = bk.is_sparse(X) or (bk.is_array(X) and X.ndim == 2
                                 and X.dtype.kind in "fiub")
    if pairwise or not matrix:
        return np.arange(n)
    return content_sample(X, None, rs, y)


def _fold_rows(X: Any, rows: np.ndarray, train: np.ndarray, pairwise: bool) -> Any:
    """Rows of X for a fold; of a pairwise X only the columns of the fold's training rows."""
    Xr = take_rows(X, rows)
    if pairwise:
        Xr = Xr[:, bk.device_index(Xr, train)]
    return Xr
