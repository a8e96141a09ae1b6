"""The command line: train -> predict round trips, info, errors."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gpuksvm import io
from gpuksvm.__main__ import main
from gpuksvm.cli import make_estimator, parse_kernel

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
    from gpuksvm.cli import CLIError

    with pytest.raises(CLIError, match="-k"):
        make_estimator("svi", options={"landmarks": 10})


def test_python_m_gpuksvm_runs():
    res = subprocess.run([sys.executable, "-m", "gpuksvm", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0
    for cmd in ("train", "predict", "info", "demo"):
        assert cmd in res.stdout
