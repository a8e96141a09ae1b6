"""The command line and the files around it: inputs are never written over, outputs that are not
regular files are refused, standard output, damaged model files, control characters."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gpuksvm import LinearSVM
from gpuksvm.persistence import io
from gpuksvm.__main__ import main
from gpuksvm.cli.contract import printable

from _estimator_zoo import zoo_data
from test_cli import _err_line, _run


@pytest.fixture
def files(tmp_path, capsys):
    """A training file, a test file (both one-based SVMlight) and a model trained on the first."""
    X, y = zoo_data("binary", n=120, seed=1)
    train, test, model = tmp_path / "train.svm", tmp_path / "test.svm", tmp_path / "m.npz"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    dump_svmlight_file(X[:50], y[:50], str(test), zero_based=False)
    assert main(["train", "-m", "linear", "--device", "cpu", "-q", str(train), str(model)]) == 0
    capsys.readouterr()
    return train, test, model


def _link(kind, target, path):
    if kind == "symlink":
        os.symlink(target, path)
    elif kind == "hardlink":
        os.link(target, path)
    return path if kind != "same" else target


def _contents(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


# ----------------------------------------------------------------------------- never over an input
@pytest.mark.parametrize("kind", ["same", "symlink", "hardlink"])
def test_train_refuses_a_model_file_that_is_its_training_file(files, tmp_path, capsys, kind):
    train, _test, _model = files
    before = _contents(tmp_path)
    target = _link(kind, train, tmp_path / "alias.svm")
    rc, out, err = _run(["train", "-m", "linear", "--device", "cpu", train, target], capsys)
    line = _err_line(err, "train")
    assert rc == 1 and "is the training file" in line and "nothing was written" in line
    assert _contents(tmp_path) == {**before, **({"alias.svm": before["train.svm"]}
                                                if kind == "hardlink" else {})}
    assert out == ""


def test_train_refuses_dash_as_its_model_file(files, tmp_path, capsys, monkeypatch):
    """``-`` is standard output for predict's labels; train writes no file called ``-``."""
    train, _test, _model = files
    monkeypatch.chdir(tmp_path)
    before = _contents(tmp_path)
    rc, out, err = _run(["train", "-m", "linear", "--device", "cpu", train, "-"], capsys)
    line = _err_line(err, "train")
    assert rc == 1 and "standard output" in line and "model.npz" in line
    assert _contents(tmp_path) == before and out == ""


@pytest.mark.parametrize("command", ["train", "predict"])
def test_an_output_path_ending_in_a_separator_is_refused(files, tmp_path, capsys, command):
    train, test, model = files
    before = _contents(tmp_path)
    out_path = str(tmp_path / "out") + os.sep
    args = (["train", "-m", "linear", "--device", "cpu", train, out_path] if command == "train"
            else ["predict", test, model, out_path])
    rc, _, err = _run(args, capsys)
    assert rc == 1 and "names a folder" in _err_line(err, command)
    assert _contents(tmp_path) == before


@pytest.mark.parametrize("kind", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("victim", ["test file", "model file"])
def test_predict_refuses_an_output_that_is_an_input(files, tmp_path, capsys, kind, victim):
    train, test, model = files
    before = _contents(tmp_path)
    original = test if victim == "test file" else model
    target = _link(kind, original, tmp_path / "alias")
    rc, _, err = _run(["predict", test, model, target], capsys)
    line = _err_line(err, "predict")
    assert rc == 1 and f"is the {victim}" in line and "nothing was written" in line
    after = _contents(tmp_path)
    after.pop("alias", None)
    assert after == before                       # byte for byte, and no temporary file left
    loaded = io.load(model)
    assert loaded.predict(np.zeros((1, loaded.n_features_in_))).shape == (1,)


# ----------------------------------------------------------------------------- standard output
def test_dash_writes_the_predictions_to_stdout(files, tmp_path, capsys, monkeypatch):
    train, test, model = files
    monkeypatch.chdir(tmp_path)                  # where a file named '-' would appear
    before = _contents(tmp_path)
    rc, out, err = _run(["predict", test, model, "-"], capsys)
    assert rc == 0
    labels = out.splitlines()
    assert len(labels) == 50 and set(labels) <= {"-1", "1"}
    assert "Accuracy = " in err                  # the summary leaves standard output to the labels
    assert _contents(tmp_path) == before         # no file named '-'
    rc, out, err = _run(["predict", "-q", test, model, "-"], capsys)
    assert rc == 0 and out.splitlines() == labels and err == ""


@pytest.mark.parametrize("path", ["/dev/stdout", "/proc/self/fd/1"])
@pytest.mark.parametrize("sink", ["pipe", "file"])
def test_a_path_that_is_the_process_stdout_is_written_directly(files, tmp_path, path, sink):
    """Predicting to /dev/stdout failed with a '.tmp' path error (a temporary file beside it)."""
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    train, test, model = files
    argv = [sys.executable, "-m", "gpuksvm", "predict", str(test), str(model), path]
    if sink == "pipe":
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        out = res.stdout
    else:
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        with open(out_dir / "redirected.txt", "w") as fh:
            res = subprocess.run(argv, stdout=fh, stderr=subprocess.PIPE, text=True, timeout=300)
        assert [p.name for p in out_dir.iterdir()] == ["redirected.txt"]
        out = (out_dir / "redirected.txt").read_text()
    assert res.returncode == 0, res.stderr
    assert len(out.splitlines()) == 50 and set(out.split()) <= {"-1", "1"}
    assert "Accuracy = " in res.stderr


def test_stdout_that_is_an_input_is_refused(files, tmp_path):
    train, test, model = files
    before = test.read_bytes()
    with open(test, "ab") as fh:                 # gpuksvm predict test.svm m.npz - >> test.svm
        res = subprocess.run([sys.executable, "-m", "gpuksvm", "predict", str(test), str(model), "-"],
                             stdout=fh, stderr=subprocess.PIPE, text=True, timeout=300)
    assert res.returncode == 1 and "standard output is the test file" in res.stderr
    assert test.read_bytes() == before


# ----------------------------------------------------------------------------- outputs that are not files
def _socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    return s


@pytest.mark.parametrize("kind", ["fifo", "socket", "folder", "link-to-fifo"])
@pytest.mark.parametrize("command", ["train", "predict"])
def test_targets_that_are_not_regular_files_are_refused(files, tmp_path, capsys, kind, command):
    """The atomic write replaced a FIFO, socket or device at the output path by a regular file."""
    train, test, model = files
    target = tmp_path / "target"
    sock = None
    if kind in ("fifo", "link-to-fifo"):
        os.mkfifo(tmp_path / "fifo")
        if kind == "fifo":
            target = tmp_path / "fifo"
        else:
            os.symlink(tmp_path / "fifo", target)
    elif kind == "socket":
        sock = _socket(target)
    else:
        target.mkdir()
    try:
        mode = os.stat(target).st_mode
        argv = (["train", "-m", "linear", "--device", "cpu", train, target] if command == "train"
                else ["predict", test, model, target])
        rc, _, err = _run(argv, capsys)
    finally:
        if sock is not None:
            sock.close()
    line = _err_line(err, command)
    what = {"fifo": "a FIFO", "link-to-fifo": "a FIFO", "socket": "a socket", "folder": "a folder"}[kind]
    assert rc == 1 and (f"it is {what} (" in line or f"it is {what}," in line), line
    assert ("cannot write the model file to" if command == "train" else "cannot write the predictions to") \
        in line
    if command == "predict":
        assert "model" not in line.split("cannot write the predictions to")[1]
    assert os.stat(target).st_mode == mode        # still what it was
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["train", "predict"])
def test_a_character_device_is_refused_with_its_kind(files, tmp_path, capsys, command):
    """As root, 'gpuksvm predict t.svm m.npz /dev/null' replaced /dev/null by a regular file.

    Shown on a copy of /dev/null made with mknod in the test's folder (needs root), never on
    the real one."""
    train, test, model = files
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError):
        pytest.skip("cannot create a character device here (not root)")
    argv = (["train", "-m", "linear", "--device", "cpu", train, null] if command == "train"
            else ["predict", test, model, null])
    rc, _, err = _run(argv, capsys)
    line = _err_line(err, command)
    assert rc == 1 and f"to {null}: it is a character device, not a regular file" in line
    assert stat.S_ISCHR(os.stat(null).st_mode)


def test_output_folder_errors_say_what_is_written(files, tmp_path, capsys):
    """A missing output folder in predict said 'cannot write the model'."""
    train, test, model = files
    rc, _, err = _run(["predict", test, model, tmp_path / "nope" / "p.txt"], capsys)
    line = _err_line(err, "predict")
    assert rc == 1 and "cannot write the predictions to" in line and "does not exist" in line
    assert "model" not in line.split("cannot write the predictions to")[1]
    os.symlink("loop-b", tmp_path / "loop-a")
    os.symlink("loop-a", tmp_path / "loop-b")
    rc, _, err = _run(["predict", test, model, tmp_path / "loop-a"], capsys)
    line = _err_line(err, "predict")
    assert rc == 1 and "cannot write the predictions to" in line and "symbolic links" in line


# ----------------------------------------------------------------------------- SVMlight errors in the CLI
@pytest.mark.parametrize("line,match", [
    (b"-1 1:1 2147483648:1", r"line 2: .*'2147483648' is too large"),
    (b"-1 1:1 99999999999999999999999:1", r"line 2: .*'99999999999999999999999' is too large"),
    (b"-1 qid:7 1:1", r"line 2: .*'qid:7' is a ranking query id"),
], ids=["2**31", "beyond-int64", "qid"])
@pytest.mark.parametrize("command", ["train", "predict"])
def test_big_indices_and_qid_name_file_and_line_in_the_cli(files, tmp_path, capsys, line, match, command):
    import re

    train, test, model = files
    bad = tmp_path / "bad.svm"
    bad.write_bytes(b"1 1:0.5 2:1\n" + line + b"\n")
    argv = (["train", "-m", "linear", "--device", "cpu", bad, tmp_path / "new.npz"] if command == "train"
            else ["predict", bad, model, tmp_path / "o.txt"])
    rc, _, err = _run(argv, capsys)
    assert rc == 1 and re.search(str(bad).replace(".", r"\.") + ", " + match, _err_line(err, command))
    assert not (tmp_path / "new.npz").exists() and not (tmp_path / "o.txt").exists()


# ----------------------------------------------------------------------------- damaged model files
def test_a_model_that_loads_but_cannot_predict_is_a_damaged_file_not_a_bug(files, tmp_path, capsys):
    """A LinearSVM file with one class loaded, then predict raised IndexError: 'this is a bug'."""
    train, test, model = files
    X, y = zoo_data("binary", n=60, seed=3)
    one = LinearSVM(device="cpu").fit(X, y)
    one.classes_ = one.classes_[:1]
    bad = tmp_path / "one-class.npz"
    try:
        io.save(one, bad)
    except TypeError:
        pytest.skip("save refuses a one-class LinearSVM")
    out = tmp_path / "o.txt"
    rc, _, err = _run(["predict", test, bad, out], capsys)
    line = _err_line(err, "predict")
    assert rc == 1 and "one-class.npz" in line and "bug in gpuksvm" not in line
    assert not out.exists()


@pytest.mark.parametrize("error", [OverflowError("int too large to convert"), KeyError("a3"),
                                   ValueError("The truth value of an array is ambiguous")])
@pytest.mark.parametrize("command", ["predict", "info"])
def test_a_loader_error_other_than_model_format_error_names_the_file(files, tmp_path, capsys, monkeypatch,
                                                                      error, command):
    import gpuksvm.cli.commands as cli

    train, test, model = files

    def broken(*a, **k):
        raise error

    monkeypatch.setattr(cli.io, "load" if command == "predict" else "describe", broken)
    argv = ["predict", test, model, tmp_path / "o.txt"] if command == "predict" else ["info", model]
    rc, _, err = _run(argv, capsys)
    line = _err_line(err, command)
    assert rc == 1 and f"{model}: the model file is damaged or inconsistent" in line
    assert type(error).__name__ in line and "bug in gpuksvm" not in line
    assert not (tmp_path / "o.txt").exists()


# ----------------------------------------------------------------------------- control characters
CONTROL = "\x1b[2J\x1b]0;owned\x07\x9b31m\x7f\r\nnext\u202e"


def _raw_controls(text):
    return [c for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) < 0xa0 or c == "\u202e"]


def test_info_escapes_control_characters_from_the_file(files, tmp_path, capsys):
    """gpuksvm info printed header strings raw: a file could send terminal escape sequences."""
    train, test, model = files
    X, y = zoo_data("binary", n=60, seed=3)
    clf = LinearSVM(device="cpu").fit(X, np.where(y > 0, "yes" + CONTROL, "no"))
    path = tmp_path / "escape.npz"
    io.save(clf, path, metadata={"note" + CONTROL: "clear" + CONTROL})
    doctored = tmp_path / "doctored.npz"              # header strings no checksum covers
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(doctored, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "header.json":
                header = json.loads(data)
                header["created"] = "2026" + CONTROL
                header["fitted_device"] = "cpu" + CONTROL
                data = json.dumps(header).encode()
            zout.writestr(name, data)
    for f in (path, doctored):
        rc, out, err = _run(["info", f], capsys)
        assert rc == 0, err
        assert not _raw_controls(out), repr(out)
        assert "\\x1b[2J" in out and "\\x9b31m" in out and "\\x0anext\\u202e" in out
        assert "note\\x1b[2J" in out
        rc, out, err = _run(["info", "--json", f], capsys)
        assert rc == 0 and not _raw_controls(out)
        assert json.loads(out)["metadata"]["note" + CONTROL] == "clear" + CONTROL
    # class labels are written with their control characters escaped: one label per line
    pred = tmp_path / "p.txt"
    rc, _, err = _run(["predict", test, path, pred], capsys)
    assert rc == 0, err
    text = pred.read_text()
    assert len(text.splitlines()) == 50 and not _raw_controls(text)
    # error messages too (a file name can hold anything)
    rc, _, err = _run(["info", tmp_path / ("missing" + CONTROL)], capsys)
    assert rc == 1 and not _raw_controls(err) and "missing\\x1b[2J" in err


def test_printable():
    assert printable("plain text, déjà vu, 中文") == "plain text, déjà vu, 中文"
    assert printable("a\x1b[2Jb\tc\x9bd\x7f\u200b\U000e0001") == "a\\x1b[2Jb\\x09c\\x9bd\\x7f\\u200b\\U000e0001"
    assert printable(3) == "3"
