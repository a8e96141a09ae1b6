import bz2
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from gpuksvm import datasets


def test_bundled_ijcnn1():
    X, y = datasets.load_dataset("ijcnn1", "train", n_samples=500)
    assert X.shape == (500, 22) and set(np.unique(y)) <= {-1.0, 1.0}
    assert "gpuksvm" in str(datasets.dataset_path("ijcnn1", "test"))


def test_unknown_and_bad_split():
    with pytest.raises(ValueError):
        datasets.dataset_path("mnist")
    with pytest.raises(ValueError):
        datasets.dataset_path("ijcnn1", "valid")


def test_malformed_file_names_line(tmp_path):
    p = tmp_path / "bad.svm"
    p.write_text("1 1:0.5 2:1\n-1 1:0.25\n+1 1:abc 3:1\n")
    with pytest.raises(ValueError, match=r"bad\.svm.*line 3"):
        datasets.load_svmlight(p, n_features=3)
    pb = tmp_path / "ok.svm.bz2"
    pb.write_bytes(bz2.compress(b"1 1:0.5 2:1\n-1 3:0.25 # comment\n"))
    X, y = datasets.load_svmlight(pb, n_features=3)
    assert X.shape == (2, 3) and y.tolist() == [1, -1]
    assert datasets.find_malformed_line(pb) is None
    with pytest.raises(FileNotFoundError):
        datasets.load_svmlight(tmp_path / "missing.svm")


def test_checkerboard():
    X, y = datasets.make_checkerboard(4000, random_state=0)
    assert X.shape == (4000, 2) and X.min() >= 0 and X.max() <= 1
    cells = np.floor(X * 4).sum(1) % 2
    assert np.all((cells == 0) == (y == 1))
    Xn, yn = datasets.make_checkerboard(4000, flip=0.2, random_state=0)
    np.testing.assert_array_equal(Xn, X)
    assert np.mean(yn != y) == pytest.approx(0.2, abs=1e-3)
    with pytest.raises(ValueError):
        datasets.make_checkerboard(10, flip=0.7)
    with pytest.raises(ValueError):
        datasets.make_checkerboard(0)


def test_two_sines_and_spheres():
    X, y = datasets.make_two_sines(1000, noise=0.0, random_state=1)
    np.testing.assert_allclose(X[:, 1] - np.sin(X[:, 0]), 0.5 * y)
    X, y = datasets.make_two_spheres(500, noise=0.0, random_state=2)
    r = np.linalg.norm(X, axis=1)
    np.testing.assert_allclose(r, np.where(y < 0, 1.0, 2.0))
    a, b = datasets.make_two_spheres(50, random_state=3)[0], datasets.make_two_spheres(50, random_state=3)[0]
    np.testing.assert_array_equal(a, b)


def test_spheroid_stream():
    X = datasets.sphere_to_spheroid_stream(1000, change_at=600, noise=0.0, random_state=0)
    np.testing.assert_allclose(np.linalg.norm(X[:600], axis=1), 1.0)
    ax = np.array([1.5, 1.5, 0.5])
    np.testing.assert_allclose(np.sum((X[600:] / ax) ** 2, axis=1), 1.0)
    with pytest.raises(ValueError):
        datasets.sphere_to_spheroid_stream(10, change_at=20)


def test_subsample_keeps_file_order_and_is_reproducible():
    from gpuksvm.datasets import subsample

    X = np.arange(40.0).reshape(20, 2)
    y = np.arange(20)
    Xs, ys = subsample(X, y, 7, np.random.default_rng(3))
    assert Xs.shape == (7, 2) and np.all(np.diff(ys) > 0) and np.array_equal(Xs[:, 0] / 2, ys)
    Xs2, ys2 = subsample(X, y, 7, np.random.RandomState(3))      # RandomState works too
    assert ys2.shape == (7,) and np.all(np.diff(ys2) > 0)
    np.testing.assert_array_equal(subsample(X, y, 7, np.random.default_rng(3))[1], ys)
    for n in (None, 20, 25):
        assert subsample(X, y, n, np.random.default_rng(0))[1] is y


BAD_LINES = {
    "unsorted": (b"-1 2:1 1:3", "sorted and unique"),
    "duplicate": (b"-1 1:1 1:3", "appears twice"),
    "negative": (b"-1 -1:1 2:3", "negative"),
    "multilabel": (b"1,2 1:1 2:3", "multi-label"),
    "nan": (b"-1 1:nan 2:1", "not finite"),
    "inf": (b"-1 1:1 2:-inf", "not finite"),
    "nan-label": (b"nan 1:1", "label .* not a finite number"),
    "no-label": (b"1:2 3:4", "not with a label"),
    "float-index": (b"-1 1.5:2", "not an integer"),
    "binary": (b"\x00\x01\x02\xff\xfe", "binary"),
    # indices beyond a C int (scikit-learn's parser raised a bare OverflowError), beyond int64
    "index-2**31": (b"-1 1:1 2147483648:1", "'2147483648' is too large"),
    "index-2**32+1": (b"-1 4294967297:1", "'4294967297' is too large"),
    "index-beyond-int64": (b"-1 1:1 99999999999999999999999:1", "'99999999999999999999999' is too large"),
    # ranking query ids: refused (LIBSVM refuses them; scikit-learn dropped them silently)
    "qid": (b"-1 qid:3 1:1", "'qid:3' is a ranking query id"),
    "qid-later": (b"-1 1:1 qid:3", "'qid:3' is a ranking query id"),
}


def _reader_calls(path):
    from gpuksvm.data.blocks import SVMLightBlockSource

    return {
        "load_svmlight": lambda: datasets.load_svmlight(path),
        "load_svmlight(n_features)": lambda: datasets.load_svmlight(path, n_features=4),
        "SVMLightBlockSource": lambda: list(SVMLightBlockSource(path, block_size=2)),
        "SVMLightBlockSource(n_features)": lambda: list(SVMLightBlockSource(path, block_size=2,
                                                                            n_features=4, zero_based=False)),
    }


@pytest.mark.parametrize("case", sorted(BAD_LINES))
@pytest.mark.parametrize("reader", ["load_svmlight", "load_svmlight(n_features)", "SVMLightBlockSource",
                                    "SVMLightBlockSource(n_features)"])
def test_every_reader_names_file_and_line(tmp_path, case, reader):
    """Issue 14: unsorted/duplicate/negative indices, '1,2' labels and NaN values were reported
    without a line (or not at all: NaN loaded silently) by the in-memory reader."""
    line, reason = BAD_LINES[case]
    path = tmp_path / "bad.svm"
    path.write_bytes(b"1 1:0.5 2:1\n# a comment\n-1 1:0.25\n" + line + b"\n1 2:1\n")
    with pytest.raises(ValueError, match=rf"bad\.svm, line 4: malformed SVMlight data \(.*{reason}"):
        _reader_calls(path)[reader]()


def test_stray_zero_index_warns_and_is_recorded(tmp_path):
    path = tmp_path / "stray.svm"
    path.write_text("".join(f"{(-1) ** i} 1:{i} 3:1\n" for i in range(20)) + "1 0:1 2:1\n")
    with pytest.warns(datasets.SVMLightIndexWarning, match=r"index 0 appears on only 1 of 21 lines "
                      r"\(first at line 21\).*zero_based=False"):
        data = datasets.read_svmlight(path)
    assert data.zero_based and data.n_zero_lines == 1 and data.X.shape == (21, 4)
    with pytest.raises(ValueError, match=r"line 21.*index 0 in a one-based file"):
        datasets.read_svmlight(path, zero_based=False)


def test_bad_compressed_files_name_the_file(tmp_path):
    fake = tmp_path / "d.svm.gz"
    fake.write_text("1 1:1\n")
    with pytest.raises(ValueError, match=r"d\.svm\.gz: cannot read the file"):
        datasets.load_svmlight(fake)
    fakebz = tmp_path / "d.svm.bz2"
    fakebz.write_text("1 1:1\n")
    with pytest.raises(ValueError, match=r"d\.svm\.bz2: cannot read the file"):
        datasets.load_svmlight(fakebz)


def test_largest_index_reads_and_qid_is_refused_by_the_line_check(tmp_path):
    path = tmp_path / "edge.svm"
    path.write_bytes(b"1 1:1\n-1 2147483647:2\n")      # 2**31 - 1: the largest index read
    data = datasets.read_svmlight(path, zero_based=False)
    assert data.X.shape == (2, 2 ** 31 - 1) and data.X[1, 2 ** 31 - 2] == 2.0
    assert datasets.MAX_FEATURE_INDEX == 2 ** 31 - 1
    assert "ranking query id" in datasets.svmlight_line_error(b"1 qid:1 1:1")
    assert not datasets.check_svmlight_line("1 qid:1 1:1")


@pytest.mark.parametrize("line", [b"1_0 1:1", b"1 1_0:1", b"1 1:1_5", b"1 1:2e1_0"],
                         ids=["label", "index", "value", "exponent"])
@pytest.mark.parametrize("suffix", [".svm", ".svm.bz2"])
def test_python_digit_separators_are_not_svmlight_numbers(tmp_path, line, suffix):
    """Python's int()/float() read ``1_0`` as 10 (the parser under read_svmlight uses them);
    LIBSVM reads no such number: the line is refused, naming file and line."""
    raw = b"# a_comment 1_0:1 is fine\n-1 1:1 # x_y\n" + line + b"\n"
    path = tmp_path / f"u{suffix}"
    path.write_bytes(bz2.compress(raw) if suffix.endswith(".bz2") else raw)
    assert datasets.svmlight_line_error(line) is not None and "'_'" in datasets.svmlight_line_error(line)
    for zero_based in ("auto", False, True):
        with pytest.raises(ValueError, match=r"u\.svm(\.bz2)?, line 3.*'_'"):
            datasets.read_svmlight(path, zero_based=zero_based)


def test_underscores_in_comments_only_read(tmp_path):
    path = tmp_path / "c.svm"
    path.write_bytes(b"# n_features: 2\n1 1:1 2:0.5 # row_1\n-1 2:1\n")
    data = datasets.read_svmlight(path)
    assert data.X.shape == (2, 2) and data.y.tolist() == [1.0, -1.0]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
def test_a_character_device_is_refused_unread(tmp_path):
    """A copy of /dev/zero (made with mknod here) was read without bound as an SVMlight file
    (one endless line: MemoryError, or the OOM killer); run under an address-space limit."""
    dev = tmp_path / "zero"
    os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
            "from gpuksvm import datasets\n"
            "try:\n    datasets.read_svmlight(sys.argv[1])\n"
            "except ValueError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(dev)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "character device" in out.stdout and str(dev) in out.stdout
