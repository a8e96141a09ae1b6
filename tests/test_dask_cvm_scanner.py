"""The Dask CVM scanner's row cache: a full cache keeps the cached rows a request still needs."""
import numpy as np
import pytest

pytest.importorskip("dask")

from gpuksvm.scaleout.cvm import DaskScanner  # noqa: E402


def test_a_full_row_cache_keeps_the_rows_asked_for():
    """8,190 rows cached, then a request of 2 cached and 3 new rows: the cache overflows its
    8,192 rows and is emptied, but the 2 cached rows asked for must stay (they are not fetched
    again).  Before: a KeyError (the CVM fit on ijcnn1's 49,990 rows in 10,000-row dask chunks)."""
    X = np.arange(10000 * 3, dtype=np.float64).reshape(10000, 3)
    scanner = object.__new__(DaskScanner)          # the cache's logic only: no cluster
    scanner.X, scanner.d, scanner.dtype = X, 3, np.dtype(np.float64)
    scanner._cache = {i: X[i] for i in range(8190)}
    idx = np.array([5, 9000, 7, 9001, 9002])
    np.testing.assert_array_equal(scanner.rows(idx), X[idx])
    assert set(scanner._cache) == {5, 7, 9000, 9001, 9002}
