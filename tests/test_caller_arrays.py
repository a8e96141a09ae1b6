"""No estimator method changes the caller's arrays, sparse included.

SciPy and scikit-learn sort a compressed matrix's indices and sum its
duplicates in place (``X.max()``, ``X.multiply``, ``SVC``'s sparse path);
the validation boundary hands the estimators a canonical copy instead
(``validation.canonical_sparse``).  Every estimator of the zoo runs ``fit``,
``partial_fit`` and every output method on matrices with unsorted indices,
duplicate entries and explicit zeros (CSR and CSC, int32 and int64 indices)
and on dense arrays of several layouts; indices, indptr, data, their dtypes
and the format flags must be the same, byte for byte, afterwards.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from _estimator_zoo import ZOO, estimator_for, zoo_data
from gpuksvm.array.validation import canonical_sparse

N_ROWS = 120


def messy_sparse(X: np.ndarray, fmt: str, index_dtype) -> sp.spmatrix:
    """X as a CSR/CSC matrix whose every row (column) lists its entries in reverse order
    and splits its first entry into two duplicates (unsorted, not canonical)."""
    A = np.asarray(X, dtype=np.float64)
    A = A if fmt == "csr" else A.T
    indices, data, indptr = [], [], [0]
    for row in A:
        cols = np.arange(row.shape[0])[::-1]
        vals = row[cols].copy()
        vals[0] /= 2
        indices += [*cols.tolist(), int(cols[0])]
        data += [*vals.tolist(), float(vals[0])]
        indptr.append(len(indices))
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    M = cls((np.array(data), np.array(indices, dtype=index_dtype), np.array(indptr, dtype=index_dtype)),
            shape=X.shape)
    np.testing.assert_allclose(M.toarray(), X)
    return M


def _sparse_explicit_zero(X: np.ndarray, fmt: str, index_dtype) -> sp.spmatrix:
    """:func:`messy_sparse` with an explicit zero more in the first row (on a column it holds)."""
    M = messy_sparse(X, fmt, index_dtype)
    indices, data, indptr = M.indices.tolist(), M.data.tolist(), M.indptr.copy()
    indices.insert(int(indptr[1]), int(indices[0]))
    data.insert(int(indptr[1]), 0.0)
    indptr[1:] += 1
    cls = type(M)
    Z = cls((np.array(data), np.array(indices, dtype=index_dtype), indptr.astype(index_dtype)), shape=M.shape)
    np.testing.assert_allclose(Z.toarray(), X)
    return Z


def snapshot(X):
    if sp.issparse(X):
        return (X.format, X.shape, X.indices.dtype, X.indices.tobytes(), X.indptr.dtype, X.indptr.tobytes(),
                X.data.dtype, X.data.tobytes(), X.has_sorted_indices, X.has_canonical_format)
    return (X.dtype, X.shape, X.strides, X.tobytes(order="A"), 
            {f: X.flags[f] for f in ("C_CONTIGUOUS", "F_CONTIGUOUS", "OWNDATA", "WRITEABLE", "ALIGNED",
                                     "WRITEBACKIFCOPY")})


def _variants(X):
    """name -> a fresh copy of X in that representation."""
    out = {}
    for fmt in ("csr", "csc"):
        for idt in (np.int32, np.int64):
            out[f"{fmt}-{np.dtype(idt).name}"] = (lambda f=fmt, i=idt: messy_sparse(X, f, i))
            out[f"{fmt}-{np.dtype(idt).name}-zero"] = (lambda f=fmt, i=idt: _sparse_explicit_zero(X, f, i))
    out["dense-C"] = lambda: np.ascontiguousarray(X)
    out["dense-F"] = lambda: np.asfortranarray(X)
    out["dense-float32"] = lambda: np.ascontiguousarray(X, dtype=np.float32)
    out["dense-readonly"] = lambda: _readonly(X)
    return out


def _readonly(X):
    A = np.array(X)
    A.flags.writeable = False
    return A


def _make(name):
    """The zoo's estimator at its default gamma ("scale": a variance of the caller's X) and
    with probabilities on, so that predict_proba runs too."""
    est, task = estimator_for(name)
    params = est.get_params()
    if "gamma" in params:
        est.set_params(gamma="scale")
    if "probability" in params and task != "blocks":
        est.set_params(probability=True)
    return est, task


def _fit(est, task, X, y, method="fit"):
    fn = getattr(est, method)
    if task == "blocks":
        return fn([(X[a:a + 60], y[a:a + 60]) for a in range(0, X.shape[0], 60)])
    if task in ("one_class", "transform"):
        return fn(X)
    if method == "partial_fit" and task != "regression":
        return fn(X, y, classes=np.unique(y))
    return fn(X, y)


_CALLS = ("fit", "partial_fit", "predict", "decision_function", "predict_proba", "predict_log_proba",
          "transform", "score_samples", "score")


def _call(est, task, method, X, y):
    if method in ("fit", "partial_fit"):
        return _fit(est, task, X, y, method)
    if method == "score":
        return est.score(X) if task in ("one_class", "transform") else est.score(X, y)
    return getattr(est, method)(X)


@pytest.mark.parametrize("name", list(ZOO))
def test_no_method_changes_the_callers_arrays(name):
    X, y = zoo_data(ZOO[name][3], n=N_ROWS)
    ran = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for variant, make in _variants(X).items():
            est, task = _make(name)             # fitted on this representation (SVC's rule: a model
            for method in _CALLS:               # fitted on dense data does not take sparse input)
                if not hasattr(est, method):
                    continue
                A, y_given = make(), np.array(y)
                before, y_before = snapshot(A), snapshot(y_given)
                try:
                    _call(est, task, method, A, y_given)
                except (AttributeError, NotImplementedError):   # not offered by this model
                    continue
                assert snapshot(A) == before, f"{name}.{method} changed the caller's {variant} X"
                assert snapshot(y_given) == y_before, f"{name}.{method} changed the caller's y"
                ran.add(method)
    assert "fit" in ran and ran - {"fit", "partial_fit"}, ran


def test_canonical_sparse_copies_only_what_it_must():
    X = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    canonical = sp.csr_matrix(X)
    assert canonical_sparse(canonical, canonical) is canonical          # already canonical: no copy
    M = messy_sparse(X, "csr", np.int64)
    before = snapshot(M)
    C = canonical_sparse(M, M)
    assert C is not M and snapshot(M) == before
    assert C.has_canonical_format and C.has_sorted_indices
    np.testing.assert_array_equal(C.toarray(), X)
    own = M.copy()                                                       # a copy already made
    assert canonical_sparse(own, M) is own and own.has_canonical_format
