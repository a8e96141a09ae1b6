"""The command line: train -> predict round trips, info, errors."""
from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gpuksvm import registry
from gpuksvm.persistence import io
from gpuksvm.__main__ import main
from gpuksvm.cli.commands import make_estimator, parse_kernel

from _estimator_zoo import ZOO, zoo_data

# (cli method, zoo entry, extra CLI args, Python params matching them)
CASES = [
    ("linear", "linear", ["-c", "2"], {"C": 2.0}),
    ("svc", "svc", ["-t", "2", "-g", "2", "-c", "10"], {"kernel": "rbf", "gamma": 2.0, "C": 10.0}),
    ("llsvm", "llsvm", ["-g", "2", "-c", "10", "-k", "20"], {"gamma": 2.0, "C": 10.0, "n_landmarks": 20}),
    ("cvm", "cvm", ["-g", "2", "-c", "10"], {"gamma": 2.0, "C": 10.0}),
    ("svi", "svi_multiclass", ["-t", "rbf", "-g", "2", "-c", "10"], {"kernel": "rbf", "gamma": 2.0, "C": 10.0}),
    ("okfeb", "okfeb_classifier", ["-g", "2"], {"gamma": 2.0}),
    ("okfeb-regressor", "okfeb_regressor", ["-g", "2"], {"gamma": 2.0}),
]
# every other command-line method of the registry, with its first in-memory zoo model's parameters
_FLAGS = {"kernel": "-t", "C": "-c", "gamma": "-g", "degree": "-d", "coef0": "-r", "n_landmarks": "-k",
          "tol": "-e"}


def _options(params: dict) -> list[str]:
    return [a for k, v in params.items() for a in ((_FLAGS[k], str(v)) if k in _FLAGS else ("--set", f"{k}={v!r}"))]


for _m in registry.METHODS:
    _case = next((c for c in _m.zoo if c.task not in ("blocks", "transform")), None)
    if _m.cli and _case is not None and _m.cli[0] not in {c[0] for c in CASES}:
        CASES.append((_m.cli[0], _case.name, _options(_case.params), dict(_case.params)))


def _write(path, X, y):
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return str(path)


def _skip_missing(entry):
    module = ZOO[entry][0]
    importlib.import_module(module)


@pytest.mark.parametrize("method,entry,args,params", CASES, ids=[c[0] for c in CASES])
def test_train_predict_round_trip_equals_python_api(method, entry, args, params, tmp_path, capsys):
    _skip_missing(entry)
    task = ZOO[entry][3]
    X, y = zoo_data(task, n=240, seed=1)
    Xt, yt = zoo_data(task, n=120, seed=2)
    train = _write(tmp_path / "train.svm", X, y)
    test = _write(tmp_path / "test.svm", Xt, yt)
    model_file = tmp_path / "m.model"
    out = tmp_path / "pred.txt"
    rc = main(["train", "-m", method, *args, "--device", "cpu", "--seed", "0", train, str(model_file)])
    assert rc == 0, capsys.readouterr().err
    assert "model written to" in capsys.readouterr().out
    assert main(["predict", test, str(model_file), str(out)]) == 0
    printed = capsys.readouterr().out
    cli_pred = np.array([float(v) for v in out.read_text().split()])

    # the same model through the Python API
    est = make_estimator(method, options={"device": "cpu", "seed": 0})
    est.set_params(**params)
    # what the CLI reads back: the file's dtype and layout
    from gpuksvm.datasets import load_svmlight

    Xf, yf = load_svmlight(train)
    est.fit(Xf, yf)
    Xtf, ytf = load_svmlight(test, n_features=Xf.shape[1])
    api_pred = np.asarray(est.predict(Xtf), dtype=float)
    np.testing.assert_array_equal(cli_pred, api_pred)
    loaded = io.load(model_file)
    assert loaded.get_params() == est.get_params()
    if task == "regression":
        mse = np.mean((api_pred - ytf) ** 2)
        assert f"Mean squared error = {mse:g} (regression)" in printed
    else:
        correct = int(np.sum(api_pred == ytf))
        assert f"({correct}/{len(ytf)}) (classification)" in printed
        assert printed.startswith("Accuracy = ")


def _model(tmp_path):
    X, y = zoo_data("binary", n=200)
    train = _write(tmp_path / "train.svm", X, y)
    model_file = str(tmp_path / "m.npz")
    assert main(["train", "-m", "svi", "-g", "2", "-c", "10", "--device", "cpu", "--seed", "0", "-q",
                 train, model_file]) == 0
    return train, model_file


def test_info(tmp_path, capsys):
    _train, model_file = _model(tmp_path)
    capsys.readouterr()
    assert main(["info", model_file]) == 0
    text = capsys.readouterr().out
    assert "gpuksvm.svi.SVI" in text and "gamma = 2.0" in text and "format version 2" in text
    assert "fitted attributes:" in text and "classes_: array (2,)" in text
    assert main(["info", "--json", model_file]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["class"] == "gpuksvm.svi.SVI" and info["params"]["C"] == 10.0
    assert info["fitted_device"] == "cpu"


def test_default_model_file_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    X, y = zoo_data("binary", n=200)
    _write(tmp_path / "data.svm", X, y)
    assert main(["train", "-m", "svi", "--device", "cpu", "-q", "data.svm"]) == 0
    assert (tmp_path / "data.svm.model").exists()


def test_malformed_training_file_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.svm"
    bad.write_text("+1 1:0.5 2:0.1\n-1 1:0.2 2:0.3\n+1 1:0.4 2:oops\n")
    rc = main(["train", "-m", "llsvm", str(bad), str(tmp_path / "m.npz")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "bad.svm" in err and "line 3" in err and "Traceback" not in err
    assert not (tmp_path / "m.npz").exists()


def test_malformed_test_file_and_bad_model(tmp_path, capsys):
    _train, model_file = _model(tmp_path)
    bad = tmp_path / "bad_test.svm"
    bad.write_text("+1 1:0.5 2:0.1\n+1 1:0.5 2\n")
    assert main(["predict", str(bad), model_file, str(tmp_path / "o.txt")]) == 1
    err = capsys.readouterr().err
    assert "bad_test.svm" in err and "line 2" in err
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["predict", _train, str(junk), str(tmp_path / "o.txt")]) == 1
    assert "junk.model" in capsys.readouterr().err
    wide = tmp_path / "wide.svm"
    wide.write_text("+1 1:0.5 7:0.1\n")
    assert main(["predict", str(wide), model_file, str(tmp_path / "o.txt")]) == 1
    assert "wide.svm" in capsys.readouterr().err


def test_option_errors(tmp_path, capsys):
    X, y = zoo_data("binary", n=50)
    train = _write(tmp_path / "t.svm", X, y)
    assert main(["train", "-m", "nosuch", train]) == 1
    assert "unknown method 'nosuch'" in capsys.readouterr().err
    assert main(["train", "-m", "llsvm", "--set", "nonsense=3", train]) == 1
    assert "no parameter 'nonsense'" in capsys.readouterr().err
    assert main(["train", "-m", "llsvm", "--set", "novalue", train]) == 1
    assert "name=value" in capsys.readouterr().err
    assert main(["train", "--device", "cpu", "-m", "llsvm", str(tmp_path / "missing.svm")]) == 1
    assert "missing.svm" in capsys.readouterr().err
    assert main([]) == 2


def test_make_estimator_maps_options():
    est = make_estimator("llsvm", options={"kernel": parse_kernel("1"), "C": 3.0, "gamma": "scale",
                                           "degree": 2.0, "coef0": 0.5, "landmarks": 64, "seed": 7},
                         extra={"landmarks": "random"})
    p = est.get_params()
    assert (p["kernel"], p["C"], p["gamma"], p["degree"], p["coef0"], p["n_landmarks"],
            p["random_state"], p["landmarks"]) == ("poly", 3.0, "scale", 2.0, 0.5, 64, 7, "random")
    assert [parse_kernel(c) for c in "0123"] == ["linear", "poly", "rbf", "sigmoid"]


def test_option_the_method_lacks_is_rejected():
    from gpuksvm.cli.commands import CLIError

    with pytest.raises(CLIError, match="-k"):
        make_estimator("svi", options={"landmarks": 10})


def test_python_m_gpuksvm_runs():
    res = subprocess.run([sys.executable, "-m", "gpuksvm", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0
    for cmd in ("train", "predict", "info", "demo"):
        assert cmd in res.stdout


# ----------------------------------------------------------------------------- issue 14: messages
def _run(argv, capsys):
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _err_line(err, command):
    """The one error line: 'gpuksvm <command>: error: ...', no traceback."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(lines) == 1 and lines[0].startswith(f"gpuksvm {command}: error: "), err
    return lines[0]


def test_output_paths_that_cannot_be_written_are_errors_before_work(tmp_path, capsys, monkeypatch):
    train, model_file = _model(tmp_path)
    capsys.readouterr()
    # predictions into a missing folder / onto a folder
    for out in (tmp_path / "nope" / "p.txt", tmp_path):
        rc, _, err = _run(["predict", train, model_file, str(out)], capsys)
        assert rc == 1 and "cannot write the predictions" in _err_line(err, "predict")
    # the model path is checked before the data are read and the model trained
    import gpuksvm.cli.commands as cli

    def no_training(*a, **k):
        raise AssertionError("the data were read before the model path was checked")

    monkeypatch.setattr(cli, "_read_data", no_training)
    for bad in (tmp_path / "nope" / "m.npz", tmp_path):
        rc, _, err = _run(["train", "-m", "linear", train, str(bad)], capsys)
        line = _err_line(err, "train")
        assert rc == 1 and "cannot write the model file" in line


@pytest.mark.parametrize("content,match", [
    (b"1 1:0.5 2:1\n-1 1:nan 2:1\n", r"bad\.svm, line 2.*not finite"),
    (b"1 1:0.5 2:1\n-1 2:1 1:3\n", r"bad\.svm, line 2.*sorted and unique"),
    (b"1 1:0.5 2:1\n-1 1:1 1:3\n", r"bad\.svm, line 2.*appears twice"),
    (b"1 1:0.5 2:1\n-1 -1:1 2:3\n", r"bad\.svm, line 2.*negative"),
    (b"1 1:0.5 2:1\n1,2 1:1 2:3\n", r"bad\.svm, line 2.*multi-label"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), r"bad\.svm, line 1.*binary"),
], ids=["nan", "unsorted", "duplicate", "negative", "multilabel", "binary"])
@pytest.mark.parametrize("command", ["train", "predict"])
def test_malformed_files_name_file_and_line_in_train_and_predict(tmp_path, capsys, content, match, command):
    bad = tmp_path / "bad.svm"
    bad.write_bytes(content)
    if command == "train":
        argv = ["train", "-m", "linear", str(bad), str(tmp_path / "m.npz")]
    else:
        train, model_file = _model(tmp_path)
        capsys.readouterr()
        argv = ["predict", str(bad), model_file, str(tmp_path / "o.txt")]
    rc, _, err = _run(argv, capsys)
    assert rc == 1
    assert re.search(match, _err_line(err, command))
    assert not (tmp_path / "o.txt").exists()


def test_huge_feature_index_refused_before_allocating(tmp_path, capsys):
    """A feature index of 2e9 made the CLI try to allocate n × 2e9 floats (terabytes)."""
    bad = tmp_path / "wide.svm"
    bad.write_text("1 1:0.5 2:1\n-1 1:0.2 2000000000:1\n" * 3)
    tracemalloc.start()
    try:
        rc, _, err = _run(["train", "-m", "linear", str(bad), str(tmp_path / "m.npz")], capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = _err_line(err, "train")
    assert rc == 1 and "wide.svm" in line and "largest feature index" in line and "line 2" in line
    assert peak < 50 * 2 ** 20


def test_not_gzip_and_binary_files_name_the_file(tmp_path, capsys):
    fake = tmp_path / "data.svm.gz"
    fake.write_text("1 1:0.5\n")
    rc, _, err = _run(["train", "-m", "linear", str(fake), str(tmp_path / "m.npz")], capsys)
    assert rc == 1 and "data.svm.gz: cannot read the file" in _err_line(err, "train")


def test_absurd_set_sizes_refused_before_allocating(tmp_path, capsys):
    X, y = zoo_data("binary", n=60)
    train = _write(tmp_path / "t.svm", X, y)
    for setting in ("n_landmarks=1000000000000", "rank=1000000000000"):
        rc, _, err = _run(["train", "-m", "okfeb", "--device", "cpu", "--set", setting, train,
                           str(tmp_path / "m.npz")], capsys)
        assert rc == 1 and "of memory of this machine" in _err_line(err, "train")


def test_diverging_regressor_is_an_error_and_nan_predictions_are_never_written(tmp_path, capsys, monkeypatch):
    """OKFEBRegressor(learning_rate=1e6) trained into NaN; the CLI wrote 'nan' lines and exited 0."""
    X, y = zoo_data("regression", n=120)
    train = _write(tmp_path / "r.svm", X, y)
    rc, _, err = _run(["train", "-m", "okfeb-regressor", "--device", "cpu", "--set", "learning_rate=1e6",
                       "--set", "normalize=False", "--set", "solver=online", train, str(tmp_path / "m.npz")], capsys)
    assert rc == 1 and "diverged" in _err_line(err, "train")
    assert not (tmp_path / "m.npz").exists()
    # a model file with NaN weights (damaged after training) is refused when loaded
    model = make_estimator("okfeb-regressor", options={"device": "cpu", "seed": 0}).fit(X, y)
    io.save(model, tmp_path / "good.npz")
    model._learner.w[:] = np.nan
    io.save(model, tmp_path / "nan.npz")
    out = tmp_path / "pred.txt"
    rc, _, err = _run(["predict", train, str(tmp_path / "nan.npz"), str(out)], capsys)
    assert rc == 1 and "not finite" in _err_line(err, "predict")
    assert not out.exists()
    # and a model that predicts NaN all the same writes nothing
    monkeypatch.setattr(type(model), "predict", lambda self, X: np.full(X.shape[0], np.nan))
    rc, _, err = _run(["predict", train, str(tmp_path / "good.npz"), str(out)], capsys)
    assert rc == 1 and "non-finite predictions" in _err_line(err, "predict")
    assert not out.exists()


def test_index_base_recorded_and_checked(tmp_path, capsys):
    """One stray '0:' made a one-based file zero-based and shifted every column silently."""
    X, y = zoo_data("binary", n=200)
    one = tmp_path / "one.svm"
    dump_svmlight_file(X, y, str(one), zero_based=False)
    lines = one.read_text().splitlines()
    lines[6] = lines[6].split(" ", 1)[0] + " 0:1.0 " + lines[6].split(" ", 1)[1]
    stray = tmp_path / "stray.svm"
    stray.write_text("\n".join(lines) + "\n")
    rc, _, err = _run(["train", "-m", "linear", "--device", "cpu", stray.as_posix(),
                       str(tmp_path / "z.npz")], capsys)
    assert rc == 0
    assert "gpuksvm train: warning: " in err and "index 0 appears on only 1 of 200 lines (first at " \
        "line 7)" in err
    assert io.read_header(tmp_path / "z.npz")["metadata"]["svmlight_zero_based"] is True
    rc, _, err = _run(["predict", str(one), str(tmp_path / "z.npz"), str(tmp_path / "p.txt")], capsys)
    assert "gpuksvm predict: warning: " in err and "never uses feature index 0" in err
    # a one-based model refuses a test file with index 0, naming the line
    rc, _, err = _run(["train", "-m", "linear", "--device", "cpu", str(one), str(tmp_path / "o.npz")],
                      capsys)
    assert rc == 0 and io.read_header(tmp_path / "o.npz")["metadata"]["svmlight_zero_based"] is False
    rc, _, err = _run(["predict", str(stray), str(tmp_path / "o.npz"), str(tmp_path / "p.txt")], capsys)
    line = _err_line(err, "predict")
    assert rc == 1 and "stray.svm, line 7" in line and "one-based" in line


def test_info_and_predict_refuse_tampered_models(tmp_path, capsys):
    train, model_file = _model(tmp_path)
    capsys.readouterr()
    bad = tmp_path / "tampered.npz"
    with zipfile.ZipFile(model_file) as zin, zipfile.ZipFile(bad, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "header.json":
                h = json.loads(data)
                h["model"]["fitted"]["n_iter_"] = 10 ** 40
                data = json.dumps(h).encode()
            zout.writestr(name, data)
    for argv, cmd in ((["info", str(bad)], "info"),
                      (["predict", train, str(bad), str(tmp_path / "o.txt")], "predict")):
        rc, _, err = _run(argv, capsys)
        assert rc == 1 and "64 bits" in _err_line(err, cmd)


def test_unexpected_errors_are_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    import gpuksvm.cli.commands as cli

    train, model_file = _model(tmp_path)
    capsys.readouterr()

    def broken(*a, **k):
        raise KeyError("internal")

    monkeypatch.setattr(cli, "_test_data", broken)
    rc, _, err = _run(["predict", train, model_file, str(tmp_path / "o.txt")], capsys)
    assert rc == 1 and "bug in gpuksvm" in _err_line(err, "predict")
