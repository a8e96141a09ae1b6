"""Tests of gpuksvm.data.blocks (block sources for out-of-core training)."""
import bz2

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from gpuksvm.datasets import SVMLightIndexWarning
from gpuksvm.data.blocks import (
    ArrayBlockSource,
    BlockSource,
    CallableBlockSource,
    SVMLightBlockSource,
    as_block_source,
)


def _stack(src):
    Xs, ys = zip(*list(src))
    X = sp.vstack(Xs).toarray() if sp.issparse(Xs[0]) else np.vstack(Xs)
    return X, np.concatenate(ys), [x.shape[0] for x in Xs]


def test_array_and_memmap_blocks(rng, tmp_path):
    X = rng.normal(size=(23, 4))
    y = rng.integers(0, 3, size=23)
    src = as_block_source(X, y, block_size=5)
    assert isinstance(src, ArrayBlockSource) and src.n_features == 4
    Xb, yb, sizes = _stack(src)
    assert sizes == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(Xb, X)
    np.testing.assert_array_equal(yb, y)
    # re-iterable: a second pass gives the same blocks
    np.testing.assert_array_equal(_stack(src)[0], X)
    np.testing.assert_array_equal(src.labels(), y)
    mm = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    ro = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="r", shape=X.shape)
    blocks = list(as_block_source(ro, y, block_size=10))
    assert all(type(b) is np.ndarray for b, _ in blocks)  # read into memory block by block
    np.testing.assert_array_equal(np.vstack([b for b, _ in blocks]), X)
    # sparse input stays sparse
    Xs = sp.random(30, 6, density=0.3, format="coo", random_state=0)
    ys = np.arange(30) % 2
    out, _, _ = _stack(as_block_source(Xs, ys, block_size=7))
    np.testing.assert_allclose(out, Xs.toarray())


def test_svmlight_blocks_match_full_load(rng, tmp_path):
    X = rng.normal(size=(57, 6))
    X[rng.random(X.shape) < 0.5] = 0.0
    y = rng.integers(0, 2, size=57) * 2 - 1
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path), comment="a comment line")
    src = as_block_source(str(path), block_size=10)
    assert isinstance(src, SVMLightBlockSource) and src.n_features == 6
    Xb, yb, sizes = _stack(src)
    assert sizes == [10] * 5 + [7]
    Xf, yf = load_svmlight_file(str(path), n_features=6)
    np.testing.assert_allclose(Xb, Xf.toarray())
    np.testing.assert_array_equal(yb, yf)
    np.testing.assert_array_equal(src.labels(), yf)
    # compressed files are read on the fly; an explicit n_features widens the blocks
    bzp = tmp_path / "d.svm.bz2"
    bzp.write_bytes(bz2.compress(path.read_bytes()))
    src2 = as_block_source(bzp, block_size=100, n_features=9)
    (Xz, yz), = list(src2)
    assert Xz.shape == (57, 9)
    np.testing.assert_allclose(Xz.toarray()[:, :6], Xf.toarray())


def test_svmlight_zero_based_detected_once(tmp_path):
    # the first block alone has no index 0; the decision is made for the whole file
    path = tmp_path / "z.svm"
    path.write_text("1 1:1.0\n-1 2:2.0\n1 0:3.0\n")
    with pytest.warns(SVMLightIndexWarning, match=r"z\.svm: feature index 0 appears on only 1 of 3 "
                      r"lines \(first at line 3\)"):
        src = as_block_source(path, block_size=2)
    X, y, _ = _stack(src)
    np.testing.assert_allclose(X, [[0, 1, 0], [0, 0, 2], [3, 0, 0]])


def test_svmlight_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("# header\n1 1:0.5 2:1\n-1 1:0.25\n\n1 3:abc\n-1 2:1\n")
    with pytest.raises(ValueError, match=r"bad\.svm, line 5"):
        list(SVMLightBlockSource(path, block_size=10, n_features=3))
    path2 = tmp_path / "bad2.svm"
    path2.write_text("1 1:1\n1 2:2\n-1 x:1\n")
    with pytest.raises(ValueError, match=r"bad2\.svm, line 3"):
        SVMLightBlockSource(path2)  # the scan for n_features finds it
    path3 = tmp_path / "bad3.svm"
    path3.write_text("1 1:1\nfoo 2:2\n")
    with pytest.raises(ValueError, match="line 2"):
        SVMLightBlockSource(path3, n_features=2).labels()
    with pytest.raises(FileNotFoundError):
        as_block_source(tmp_path / "missing.svm")


@pytest.mark.parametrize("n_features", [None, 12])
def test_svmlight_blocks_refuse_python_digit_separators(tmp_path, n_features):
    """``1_0`` is not a number in an SVMlight file (Python's int() reads 10), with or without the
    scan that n_features=None makes."""
    path = tmp_path / "u.svm"
    path.write_text("1 1:1 # a_b\n-1 1_0:1\n")
    with pytest.raises(ValueError, match=r"u\.svm, line 2.*'_'"):
        list(SVMLightBlockSource(path, block_size=10, n_features=n_features, zero_based=False))


def test_callable_and_map():
    blocks = [(np.ones((3, 2)), np.array([1, -1, 1])), (np.zeros((2, 2)), np.array([-1, -1]))]
    src = as_block_source(lambda: iter(blocks), n_features=2)
    assert isinstance(src, CallableBlockSource) and src.n_features == 2
    assert len(list(src)) == 2 and len(list(src)) == 2  # fresh iterator per pass
    np.testing.assert_array_equal(src.labels(), [1, -1, 1, -1, -1])
    mapped = src.map(lambda Xb: np.c_[Xb, Xb.sum(axis=1)])
    assert isinstance(mapped, BlockSource) and mapped.n_features is None
    (X0, y0), (X1, _) = list(mapped)
    assert X0.shape == (3, 3) and X1.shape == (2, 3)
    np.testing.assert_array_equal(y0, [1, -1, 1])
    np.testing.assert_array_equal(mapped.labels(), src.labels())
    assert as_block_source(src) is src


def test_bad_inputs(rng):
    X = rng.normal(size=(5, 2))
    with pytest.raises(ValueError, match="y is required"):
        as_block_source(X)
    with pytest.raises(ValueError, match="inconsistent"):
        as_block_source(X, np.ones(4))
    with pytest.raises(ValueError, match="block_size"):
        as_block_source(X, np.ones(5), block_size=0)
    with pytest.raises(ValueError, match="y must be None"):
        as_block_source(lambda: iter([]), np.ones(5))
    with pytest.raises(ValueError, match="n_features"):
        as_block_source(X, np.ones(5), n_features=3)
    with pytest.raises(TypeError, match="block source"):
        as_block_source(42)
    with pytest.raises(ValueError, match="no data"):
        as_block_source(lambda: iter([])).labels()
    with pytest.raises(ValueError, match="pairs"):
        list(as_block_source(lambda: iter([np.ones((2, 2))])))
