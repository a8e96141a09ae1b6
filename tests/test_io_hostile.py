"""Model files and outputs against hostile paths: writers replace only regular files, loading
opens only regular files without blocking and is bounded by the memory available."""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import gpuksvm
from gpuksvm import LinearSVM
from gpuksvm.data import files
from gpuksvm.persistence import io
from gpuksvm.cli import main as cli_main


def _linear(n_features=3):
    X = np.random.default_rng(0).normal(size=(40, n_features))
    return LinearSVM(device="cpu").fit(X, (X[:, 0] > 0).astype(int))


@contextmanager
def _no_hang(seconds=20):
    """Fail (instead of hanging the test run) if the block blocks."""
    def expired(*_):
        raise TimeoutError(f"blocked for {seconds} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def short_dir():
    """A folder with a short path (a UNIX socket's path is limited to ~100 bytes)."""
    d = tempfile.mkdtemp(prefix="gk", dir="/tmp" if os.path.isdir("/tmp") else None)
    yield Path(d)
    for p in Path(d).iterdir():
        p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
    os.rmdir(d)


def _make(kind, path):
    """A FIFO, socket, folder or (as root) character device at ``path``; returns a closer."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        return sock.close
    elif kind == "folder":
        os.mkdir(path)
    elif kind == "chardev":  # a private copy of /dev/null (major 1, minor 3): needs root
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError) as exc:
            pytest.skip(f"cannot create a device node here ({exc})")
    return lambda: None


_KIND_WORD = {"fifo": "FIFO", "socket": "socket", "folder": "folder", "chardev": "character device"}
_KINDS = sorted(_KIND_WORD)


def _type_of(path):
    return stat.S_IFMT(os.lstat(path).st_mode)


# ----------------------------------------------------------------------------- writers
@pytest.mark.parametrize("kind", _KINDS)
def test_writers_never_replace_what_is_not_a_regular_file(kind, short_dir):
    target = short_dir / "t"
    close = _make(kind, target)
    try:
        before = _type_of(target)
        for write in (lambda: io.save(_linear(), target), lambda: io.check_writable(target),
                      lambda: io.write_atomic(target, b"1\n2\n")):
            with _no_hang(), pytest.raises(OSError, match=_KIND_WORD[kind]) as err:
                write()
            assert str(target) in str(err.value)
            assert _type_of(target) == before
        # through a symbolic link, the same
        link = short_dir / "link"
        link.symlink_to(target)
        with pytest.raises(OSError, match=_KIND_WORD[kind]):
            io.save(_linear(), link)
        assert link.is_symlink() and _type_of(target) == before
        link.unlink()
        assert sorted(p.name for p in short_dir.iterdir()) == ["t"]  # no temporary file left
    finally:
        close()


def test_a_target_swapped_for_a_fifo_while_writing_is_refused(short_dir):
    """The check is repeated right before os.replace."""
    target = short_dir / "pred.txt"
    target.write_text("old\n")

    def write(fh):
        fh.write(b"new\n")
        target.unlink()
        os.mkfifo(target)

    with pytest.raises(files.NotRegularFileError, match="FIFO"):
        io.write_atomic(target, write)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert sorted(p.name for p in short_dir.iterdir()) == ["pred.txt"]


@pytest.mark.parametrize("suffix", ["/", "//", os.sep + "."])
def test_writers_refuse_a_path_that_names_a_folder(tmp_path, suffix):
    """``out/`` (or ``out/.``) names a folder: no regular file ``out`` is written in its place
    (pathlib would drop the separator)."""
    target = str(tmp_path / "out") + suffix
    for write in (lambda: io.save(_linear(), target), lambda: io.check_writable(target),
                  lambda: io.write_atomic(target, b"1\n")):
        with pytest.raises(IsADirectoryError, match="names a folder"):
            write()
    assert list(tmp_path.iterdir()) == []


def test_writers_reach_through_a_symlink_only_to_a_regular_file(short_dir):
    """A symlink to a FIFO, a path below a FIFO, a dangling link into a missing folder."""
    fifo = short_dir / "fifo"
    os.mkfifo(fifo)
    (short_dir / "to_fifo").symlink_to(fifo)
    (short_dir / "dangling").symlink_to(short_dir / "missing" / "m.npz")
    cases = {"to_fifo": "FIFO", "fifo/m.npz": "[Nn]ot a directory|does not exist",
             "dangling": "does not exist"}
    for name, match in cases.items():
        with _no_hang(), pytest.raises(OSError, match=match):
            io.save(_linear(), short_dir / name)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (short_dir / "missing").exists()
    assert sorted(p.name for p in short_dir.iterdir()) == ["dangling", "fifo", "to_fifo"]


def test_writing_to_a_symlink_loop_says_so(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    a.symlink_to(b)
    b.symlink_to(a)
    for write in (lambda: io.save(_linear(), a), lambda: io.check_writable(a)):
        with pytest.raises(OSError, match="loop of symbolic links"):
            write()


def test_same_file_through_links(tmp_path):
    f = tmp_path / "d.svm"
    f.write_text("1 1:1\n")
    g = tmp_path / "other.svm"
    g.write_text("1 1:1\n")
    link = tmp_path / "link.svm"
    link.symlink_to(f)
    hard = tmp_path / "hard.svm"
    os.link(f, hard)
    assert io.same_file(f, f) and io.same_file(str(f), link) and io.same_file(hard, link)
    assert not io.same_file(f, g)
    assert not io.same_file(f, tmp_path / "missing") and not io.same_file(tmp_path / "x", tmp_path / "x")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert not io.same_file(loop, loop)


def test_save_metadata_must_be_a_dict(tmp_path):
    for bad in ("abc", ["ab"], 3):
        with pytest.raises(TypeError, match="metadata must be a dict"):
            io.save(_linear(), tmp_path / "m.npz", metadata=bad)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- opening for reading
def _readers(path):
    return {"load": lambda: io.load(path), "read_header": lambda: io.read_header(path),
            "describe": lambda: io.describe(path)}


@pytest.mark.parametrize("kind", _KINDS)
def test_loading_opens_only_regular_files_without_blocking(kind, short_dir):
    path = short_dir / "m.npz"
    close = _make(kind, path)
    try:
        for name, read in _readers(path).items():
            with _no_hang(), pytest.raises(io.ModelFormatError, match=_KIND_WORD[kind]) as err:
                read()
            assert str(path) in str(err.value), name
    finally:
        close()


_DEV_ZERO_SCRIPT = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (2 * 2 ** 30, 2 * 2 ** 30))  # a regression fails, not the machine
from gpuksvm import io
try:
    io.load("/dev/zero")
except io.ModelFormatError as exc:
    print(exc)
"""


def test_dev_zero_is_refused_unread():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", _DEV_ZERO_SCRIPT], capture_output=True, text=True,
                         timeout=120, env=env)
    assert "/dev/zero: it is a character device" in res.stdout, res.stderr[-2000:]


def test_the_opened_descriptor_is_checked_not_only_the_path(short_dir, monkeypatch):
    """A path that passed the first check but is a FIFO when opened: refused, not read."""
    fifo = short_dir / "m.npz"
    os.mkfifo(fifo)
    regular = short_dir / "regular"
    regular.write_bytes(b"x")
    real_stat = os.stat
    monkeypatch.setattr(files.os, "stat", lambda p, *a, **k: real_stat(regular if str(p) == str(fifo) else p))
    with _no_hang(), pytest.raises(io.ModelFormatError, match="FIFO"):
        io.load(fifo)


def test_symlink_loop_and_missing_files(tmp_path):
    loop = tmp_path / "m.npz"
    loop.symlink_to(loop)
    for read in _readers(loop).values():
        with pytest.raises(io.ModelFormatError, match="loop of symbolic links") as err:
            read()
        assert not isinstance(err.value, FileNotFoundError)
    missing = tmp_path / "missing.npz"
    with pytest.raises(io.ModelFileNotFoundError, match="no such model file") as err:
        io.load(missing)
    assert isinstance(err.value, FileNotFoundError) and isinstance(err.value, io.ModelFormatError)
    dangling = tmp_path / "dangling.npz"
    dangling.symlink_to(tmp_path / "gone.npz")
    with pytest.raises(io.ModelFileNotFoundError, match="gone.npz, which does not exist"):
        io.describe(dangling)


def test_every_failure_to_open_is_a_model_format_error(tmp_path):
    regular = io.save(_linear(), tmp_path / "m.npz")
    for path, match in ((str(regular) + "\0x", "embedded null"), (regular / "inside.npz", "Not a directory"),
                        (tmp_path / ("x" * 300), "File name too long")):
        for name, read in _readers(path).items():
            with pytest.raises(io.ModelFormatError, match=match):
                read()


def test_unreadable_file_is_a_model_format_error(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    p = io.save(_linear(), tmp_path / "m.npz")
    os.chmod(p, 0)
    with pytest.raises(io.ModelFormatError, match="Permission denied"):
        io.load(p)


def test_info_on_a_fifo_is_a_clean_error(short_dir, capsys):
    fifo = short_dir / "m.npz"
    os.mkfifo(fifo)
    with _no_hang():
        assert cli_main(["info", str(fifo)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "FIFO" in err


def test_describe_refuses_duplicate_headers_as_load_does(tmp_path):
    src = io.save(_linear(), tmp_path / "ok.npz")
    dup = tmp_path / "dup.npz"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dup, "w") as zout, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        header = json.loads(zin.read(io.HEADER_MEMBER))
        header["metadata"] = {"shown": "the second header"}
        zout.writestr(io.HEADER_MEMBER, json.dumps(header))
    messages = set()
    for read in _readers(dup).values():
        with pytest.raises(io.ModelFormatError, match=r"duplicate members \['header.json'\]") as err:
            read()
        messages.add(str(err.value))
    assert len(messages) == 1


# ----------------------------------------------------------------------------- bounded loading
_BOMB_FEATURES = 30_000_000  # an all-zero float64 coef_ of 240 MB


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """A genuine model whose all-zero coef_ of 240 MB compresses into a file of about 229 KiB."""
    d = tmp_path_factory.mktemp("bomb")
    est = _linear()
    est.coef_ = np.zeros((1, _BOMB_FEATURES))
    est.n_features_in_ = _BOMB_FEATURES
    plain = io.save(est, d / "plain.npz")
    path = d / "bomb.npz"
    with zipfile.ZipFile(plain) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED,
                                                        compresslevel=9) as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
    plain.unlink()
    assert path.stat().st_size < 300 * 2 ** 10
    return path


def test_zip_bomb_refused_under_the_limit_before_reading(bomb):
    tracemalloc.start()
    try:
        with pytest.raises(io.ModelFormatError, match=r"declares 240000\d+ bytes of arrays.*more than "
                                                      r"the 104857600 bytes allowed"):
            io.load(bomb, max_bytes="100MiB")
        with gpuksvm.config_context(model_load_max_bytes=50 * 2 ** 20), \
                pytest.raises(io.ModelFormatError, match="more than the 52428800 bytes allowed"):
            io.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2 ** 20, f"peak {peak / 2**20:.0f} MiB while refusing"
    assert io.describe(bomb, max_bytes="1MiB")["array_bytes"] >= 8 * _BOMB_FEATURES  # arrays not read


def test_zip_bomb_loads_under_a_large_limit(bomb):
    model = io.load(bomb, max_bytes=2 ** 30)
    assert model.coef_.shape == (1, _BOMB_FEATURES) and not model.coef_.any()


def test_the_default_limit_follows_the_available_memory(monkeypatch):
    monkeypatch.delenv("GPUKSVM_MODEL_LOAD_MAX_BYTES", raising=False)
    monkeypatch.setattr(gpuksvm.array.backend, "available_memory", lambda: 8 * 2 ** 30)
    assert gpuksvm.get_config()["model_load_max_bytes"] == 4 * 2 ** 30
    monkeypatch.setattr(gpuksvm.array.backend, "available_memory", lambda: 2 ** 20)
    assert gpuksvm.get_config()["model_load_max_bytes"] == 512 * 2 ** 20  # the floor
    monkeypatch.setenv("GPUKSVM_MODEL_LOAD_MAX_BYTES", "3GiB")
    assert gpuksvm.get_config()["model_load_max_bytes"] == 3 * 2 ** 30
    with gpuksvm.config_context(model_load_max_bytes="1MB"):
        assert gpuksvm.get_config()["model_load_max_bytes"] == 10 ** 6


def test_available_memory_is_reported():
    free = gpuksvm.array.backend.available_memory()
    assert free is None or free > 0
    if os.path.exists("/proc/meminfo"):
        assert free is not None


def _peak_while_every_reader_refuses(path, limit, match):
    """Peak traced memory while load, read_header and describe all refuse ``path`` under ``limit``."""
    tracemalloc.start()
    try:
        with gpuksvm.config_context(model_load_max_bytes=limit):
            for read in _readers(path).values():
                with pytest.raises(io.ModelFormatError, match=match):
                    read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_header_that_would_expand_in_memory_is_refused_unparsed(tmp_path):
    """8 MB of '[],' compress into ~10 kB and would take ~24 times that as Python lists."""
    path = tmp_path / "header_bomb.npz"
    pad = "[" + ",".join(["[]"] * (8 * 2 ** 20 // 3)) + "]"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr(io.HEADER_MEMBER, '{"format": "gpuksvm-model", "pad": %s}' % pad)
    assert path.stat().st_size < 100_000
    assert _peak_while_every_reader_refuses(path, "64MiB", "header declares .* times that in memory") \
        < 4 * 2 ** 20
    with pytest.raises(io.ModelFormatError, match="bad format_version"):  # parsed under a large limit
        io.read_header(path, max_bytes="1GiB")


_RSS_SCRIPT = r"""
import sys
from gpuksvm import io
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
io.load(sys.argv[2])                      # imports and first-use allocations
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")                     # reset the peak (VmHWM) to the current RSS
except OSError:
    pass
before = status("VmRSS")
model = io.load(sys.argv[1])
print(status("VmHWM") - before)
"""


def test_load_peak_memory_is_a_small_multiple_of_the_declared_arrays(tmp_path):
    """Peak RSS growth of a load <= LOAD_MEMORY_FACTOR (2) x the declared array bytes + 16 MiB
    (reading a member with one read() call took 2.9 x)."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc/self/status (Linux)")
    rng = np.random.default_rng(0)
    n_features = 6_000_000
    est = _linear()
    est.coef_ = rng.normal(size=(1, n_features))
    est.n_features_in_ = n_features
    big = io.save(est, tmp_path / "big.npz")
    small = io.save(_linear(), tmp_path / "small.npz")
    declared = io.describe(big)["array_bytes"]
    assert declared >= 8 * n_features
    res = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(big), str(small)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    growth = int(res.stdout.split()[-1])
    bound = io.LOAD_MEMORY_FACTOR * declared + 16 * 2 ** 20
    assert growth <= bound, f"load took {growth / 2**20:.0f} MiB for {declared / 2**20:.0f} MiB of arrays"


def _directory_of_many_entries(path, n=60_000):
    """A zip file that is nothing but a central directory of ``n`` one-letter entries."""
    entry = (b"PK\x01\x02" + bytes([20, 3, 20, 0]) + bytes(24) + (1).to_bytes(2, "little")
             + bytes(12) + b"a")
    directory = entry * n
    end = (b"PK\x05\x06" + bytes(4) + n.to_bytes(2, "little") * 2 + len(directory).to_bytes(4, "little")
           + bytes(6))
    path.write_bytes(directory + end)
    return path


def test_a_zip_directory_that_would_expand_in_memory_is_refused_unparsed(tmp_path):
    """2.8 MB of directory entries take ~8 times that as zipfile.ZipInfo objects."""
    path = _directory_of_many_entries(tmp_path / "dir_bomb.npz")
    assert _peak_while_every_reader_refuses(path, "16MiB", "zip directory declares 2820000 bytes") < 2 * 2 ** 20
    with pytest.raises(io.ModelFormatError, match="duplicate members"):  # parsed under a large limit
        io.load(path, max_bytes="1GiB")


def test_zip_directory_size_finds_the_record_zipfile_uses(tmp_path, monkeypatch):
    """Checked against zipfile's own end-record search: plain, with a comment, with a zip64 end
    record, with bytes after the end record, truncated."""
    plain = io.save(_linear(), tmp_path / "plain.npz")
    commented = tmp_path / "comment.npz"
    commented.write_bytes(plain.read_bytes())
    with zipfile.ZipFile(commented, "a") as zf:
        zf.comment = b"PK\x05\x06 a comment that holds the signature" * 100
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)  # zipfile then writes zip64 end records
    zip64 = tmp_path / "zip64.npz"
    zip64.write_bytes(plain.read_bytes())
    with zipfile.ZipFile(zip64, "a") as zf:
        zf.writestr("extra", b"x")
    trailing = tmp_path / "trailing.npz"
    trailing.write_bytes(plain.read_bytes() + b"junk")
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(plain.read_bytes()[:-30])
    many = _directory_of_many_entries(tmp_path / "many.npz", 100)
    for path in (plain, commented, zip64, trailing, truncated, many):
        with open(path, "rb") as fh:
            ours = files.zip_directory_size(fh)
            assert fh.tell() == 0
            theirs = zipfile._EndRecData(fh)  # the private function zipfile.ZipFile calls
        assert ours == (theirs[zipfile._ECD_SIZE] if theirs else 0), path.name
    with open(zip64, "rb") as fh:
        assert zipfile._EndRecData(fh)[0] == b"PK\x06\x06"  # the zip64 record was exercised


@pytest.mark.parametrize("kind", ["chardev", "fifo"])
def test_cli_never_replaces_a_device_or_fifo(kind, short_dir, capsys):
    """`gpuksvm predict ... /dev/null` as root replaced the device by a regular file; a copy here."""
    rng = np.random.default_rng(0)
    data = short_dir / "d.svm"
    data.write_text("".join(f"{1 if x[0] > 0 else -1} 1:{x[0]:.3f} 2:{x[1]:.3f}\n"
                            for x in rng.normal(size=(30, 2))))
    model = short_dir / "m.npz"
    assert cli_main(["train", "-q", "-m", "linear", str(data), str(model)]) == 0
    target = short_dir / "out"
    _make(kind, target)
    for argv in (["predict", str(data), str(model), str(target)], ["train", "-m", "linear", str(data), str(target)]):
        with _no_hang():
            assert cli_main(argv) == 1
        err = capsys.readouterr().err
        assert _KIND_WORD[kind] in err and "Traceback" not in err
        assert _type_of(target) == (stat.S_IFCHR if kind == "chardev" else stat.S_IFIFO)
