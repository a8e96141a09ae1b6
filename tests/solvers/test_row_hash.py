"""The content hash of rows (gpuksvm.solvers.row_order): order-free, dense = sparse, CPU = GPU."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpuksvm.solvers.row_order import RowHasher, content_sample, merge_smallest, smallest_keys


@pytest.fixture
def X(rng):
    A = rng.normal(size=(600, 9))
    A[A < 0.2] = 0.0
    A[5] = A[7]                                  # a duplicated row
    return A


def test_keys_follow_the_rows_not_their_positions(X, rng):
    keys = RowHasher(9, 0).keys(X)
    perm = rng.permutation(X.shape[0])
    np.testing.assert_array_equal(RowHasher(9, 0).keys(X[perm]), keys[perm])
    np.testing.assert_array_equal(keys[5], keys[7])                       # equal rows, equal keys
    assert np.unique(keys, axis=0).shape[0] == np.unique(X, axis=0).shape[0]
    assert not np.array_equal(RowHasher(9, 1).keys(X), keys)             # the seed matters


def test_dense_sparse_float32_and_negative_zero_agree(X):
    keys = RowHasher(9, 0).keys(X)
    for fmt in ("csr", "csc"):
        np.testing.assert_array_equal(RowHasher(9, 0).keys(sp.csr_matrix(X).asformat(fmt)), keys)
    M = sp.csr_matrix(X)
    dup = sp.csr_matrix((np.r_[M.data, 0.0, 0.0], np.r_[M.indices, 0, 0],
                         np.r_[M.indptr[:-1], M.indptr[-1] + 2]), shape=M.shape)   # explicit zeros
    np.testing.assert_array_equal(RowHasher(9, 0).keys(dup), keys)
    np.testing.assert_array_equal(RowHasher(9, 0).keys(X.astype(np.float32))[:, 0], keys[:, 0])
    np.testing.assert_array_equal(RowHasher(9, 0).keys(np.where(X == 0, -0.0, X)), keys)


def test_bottom_k_is_uniform_and_merges(X):
    counts = np.zeros(X.shape[0])
    for seed in range(300):
        counts[content_sample(X, 60, seed)] += 1
    # each row is drawn with probability 60/600 (binomial: sd ≈ 5.2 of a mean 30)
    assert abs(counts.mean() - 30) < 1e-9 and counts.std() < 8
    keys, y = RowHasher(9, 3).keys(X), np.arange(X.shape[0]) % 3
    whole = smallest_keys(keys, 50, y)
    parts = [(keys[a:a + 70][k], y[a:a + 70][k], a + k)
             for a in range(0, X.shape[0], 70) for k in [smallest_keys(keys[a:a + 70], 50, y[a:a + 70])]]
    merged = merge_smallest([merge_smallest(parts[:4], 50), merge_smallest(parts[4:], 50)], 50)
    np.testing.assert_array_equal(merged[2], whole)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_keys_match_numpy_twin(gpu, X, dtype):
    A = X.astype(dtype)
    np.testing.assert_array_equal(RowHasher(9, 0).keys(gpu.asarray(A)), RowHasher(9, 0).keys(A))
