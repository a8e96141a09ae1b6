"""Model files (gpuksvm.io): round trips, corruption, future versions, atomic writes."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
import zipfile

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpuksvm import io
from gpuksvm.backend import CPU, Device
from gpuksvm.kernels import Kernel

from _estimator_zoo import ZOO, compare_fitted, fitted_zoo_model, outputs

# ----------------------------------------------------------------------------- helpers


def _dummy_with(**attrs):
    """A scikit-learn estimator carrying arbitrary fitted attributes (to test the tree encoding)."""
    est = DummyClassifier(strategy="most_frequent").fit(np.zeros((4, 1)), [0, 0, 1, 1])
    for k, v in attrs.items():
        setattr(est, k, v)
    return est


def _rewrite_header(src, dst, mutate):
    """Copy a model file, passing its JSON header through ``mutate``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == io.HEADER_MEMBER:
                header = json.loads(data)
                mutate(header)
                data = json.dumps(header).encode()
            zout.writestr(name, data)


# ----------------------------------------------------------------------------- tree encoding
def test_typed_tree_round_trip(tmp_path):
    rs = np.random.RandomState(3)
    rs.rand(5)
    gen = np.random.default_rng(4)
    gen.random(3)
    attrs = dict(
        f64_=np.arange(12, dtype=np.float64).reshape(3, 4), f32_=np.ones(3, np.float32),
        i8_=np.array([1, -2], np.int8), b_=np.array([True, False]), u_=np.array(["a", "bc"]),
        empty_=np.zeros((0, 3)), fortran_=np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        scalar_=np.float32(1.5), npint_=np.int64(7), pyint_=12345678901234567890, nan_=float("nan"),
        inf_=-np.inf, s_="text", none_=None, t_=(1, "x", 2.5), set_={1, 2}, bytes_=b"\x00\xff",
        dict_={"a": np.arange(3), 3: [np.eye(2), {"deep": (None, True)}], ("x", 1): "tuplekey"},
        kernel_=Kernel("poly", gamma=0.5, degree=2, coef0=1.0), device_=Device("cpu"),
        dtype_=np.dtype(np.float32), dtype_type_=np.float64, rs_=rs, gen_=gen,
        obj_=np.array(["a", 1, None], dtype=object), csr_=sp.random(5, 4, density=0.5, format="csr",
                                                                     random_state=0),
        coo_=sp.coo_matrix(np.eye(3)), complex_=1 + 2j,
        nested_=[LogisticRegression(C=2.0).fit(np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 0, 1, 1])],
    )
    est = _dummy_with(**attrs)
    path = tmp_path / "tree.npz"
    io.save(est, path)
    back = io.load(path)
    assert type(back) is DummyClassifier and back.get_params() == est.get_params()
    for k, v in attrs.items():
        w = getattr(back, k)
        if k in ("rs_", "gen_"):
            assert type(w) is type(v)
            a = v.random(4) if k == "gen_" else v.rand(4)
            b = w.random(4) if k == "gen_" else w.rand(4)
            np.testing.assert_array_equal(a, b)  # same stream position
        elif k in ("csr_", "coo_"):
            assert w.format == v.format
            np.testing.assert_array_equal(w.toarray(), v.toarray())
        elif k == "nested_":
            np.testing.assert_array_equal(w[0].coef_, v[0].coef_)
            assert w[0].C == 2.0
        elif k == "nan_":
            assert np.isnan(w)
        elif isinstance(v, np.ndarray):
            assert w.dtype == v.dtype and w.shape == v.shape
            np.testing.assert_array_equal(w, v)
        elif k == "dict_":
            np.testing.assert_array_equal(w["a"], v["a"])
            np.testing.assert_array_equal(w[3][0], np.eye(2))
            assert w[3][1] == {"deep": (None, True)} and w[("x", 1)] == "tuplekey"
        else:
            assert w == v and type(w) is type(v), k


def test_file_is_plain_npz_without_pickle(tmp_path):
    est = _dummy_with(w_=np.arange(4.0))
    path = io.save(est, tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as npz:
        assert "header.json" in npz.files
        header = json.loads(npz["header.json"])
        ref = header["tree"]["state"]["w_"]["ref"]
        np.testing.assert_array_equal(npz[ref], np.arange(4.0))
    assert header["format"] == "gpuksvm-model" and header["format_version"] == io.FORMAT_VERSION
    assert header["class"] == "sklearn.dummy.DummyClassifier"


def test_pipeline_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    pipe = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    back = io.load(io.save(pipe, tmp_path / "p.npz"))
    np.testing.assert_array_equal(back.predict_proba(X), pipe.predict_proba(X))


def test_unsupported_object_is_a_clear_type_error(tmp_path):
    est = _dummy_with(fn_=lambda x: x)
    with pytest.raises(TypeError, match="fn_"):
        io.save(est, tmp_path / "bad.npz")
    assert not list(tmp_path.iterdir())  # nothing left behind


# ----------------------------------------------------------------------------- every estimator
@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_estimator_round_trips(name, tmp_path):
    model, X = fitted_zoo_model(name)
    path = io.save(model, tmp_path / f"{name}.npz")
    back = io.load(path)
    assert type(back) is type(model)
    assert back.get_params() == model.get_params()
    compare_fitted(model, back)
    for (what, a), (_, b) in zip(outputs(model, X), outputs(back, X)):
        np.testing.assert_array_equal(a, b, err_msg=what)
    # pickle and joblib give the same model too
    for clone in (pickle.loads(pickle.dumps(model)), joblib.load(_joblib_dump(model, tmp_path))):
        for (what, a), (_, b) in zip(outputs(model, X), outputs(clone, X)):
            np.testing.assert_array_equal(a, b, err_msg=what)


def _joblib_dump(model, tmp_path):
    p = tmp_path / "m.joblib"
    joblib.dump(model, p)
    return p


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ZOO))
def test_gpu_trained_model_loads_on_cpu(name, tmp_path, gpu):
    model, X = fitted_zoo_model(name, device="gpu")
    path = io.save(model, tmp_path / f"{name}.npz")
    header = io.read_header(path)
    assert header["fitted_device"].startswith("cuda")
    back = io.load(path, device="cpu")
    assert back.fitted_device_ == "cpu"
    for (what, a), (_, b) in zip(outputs(model, X), outputs(back, X)):
        np.testing.assert_allclose(np.asarray(gpu.asnumpy(a) if hasattr(a, "get") else a, dtype=float),
                                   np.asarray(b, dtype=float), rtol=1e-4, atol=1e-4, err_msg=what)
    # every array of the loaded model is on the host
    for v in vars(back).values():
        assert not type(v).__module__.startswith("cupy")


def test_gpu_fitted_state_loads_on_cpu_only_machine(tmp_path):
    """A file written from a GPU-fitted model (simulated: device + fitted_on) loads as a CPU model."""
    model, X = fitted_zoo_model("llsvm" if "llsvm" in ZOO else sorted(ZOO)[0])
    ref = outputs(model, X)
    model._fitted_on = Device("cuda", 0)
    model.device = "cuda:0"
    path = io.save(model, tmp_path / "gpu.npz")
    assert io.read_header(path)["fitted_device"] == "cuda:0"
    back = io.load(path)
    assert back.device == "auto" and back._fitted_device() == CPU
    # the original object was not changed by saving
    assert model.device == "cuda:0"
    back.set_params(device="cpu")
    for (what, a), (_, b) in zip(ref, outputs(back, X)):
        np.testing.assert_array_equal(a, b, err_msg=what)


# ----------------------------------------------------------------------------- bad files
@pytest.fixture
def saved(tmp_path):
    est = _dummy_with(w_=np.arange(1000.0), k_=Kernel("rbf", gamma=2.0))
    return io.save(est, tmp_path / "ok.npz")


def test_truncated_file_rejected(saved, tmp_path):
    data = saved.read_bytes()
    bad = tmp_path / "trunc.npz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(io.ModelFormatError, match="trunc.npz.*corrupt"):
        io.load(bad)


def test_flipped_bytes_rejected(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as zf:
        info = zf.getinfo("a0.npy")
    # damage the stored array payload (past the local header and the .npy header)
    pos = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    data[pos] ^= 0xFF
    data[pos + 1] ^= 0xFF
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(io.ModelFormatError, match="flipped.npz.*corrupt"):
        io.load(bad)


def test_tampered_array_fails_checksum(saved, tmp_path):
    bad = tmp_path / "tampered.npz"
    with zipfile.ZipFile(saved) as zin, zipfile.ZipFile(bad, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "a0.npy":
                buf = __import__("io").BytesIO()
                np.lib.format.write_array(buf, np.arange(1000.0) + 1)
                data = buf.getvalue()
            zout.writestr(name, data)
    with pytest.raises(io.ModelFormatError, match="checksum"):
        io.load(bad)


def test_not_a_model_file(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.arange(3))
    with pytest.raises(io.ModelFormatError, match="not a gpuksvm model"):
        io.load(p)
    q = tmp_path / "text.model"
    q.write_text("svm_type c_svc\n")
    with pytest.raises(io.ModelFormatError, match="text.model"):
        io.load(q)
    with pytest.raises(FileNotFoundError):
        io.load(tmp_path / "missing.npz")


def test_future_version_rejected(saved, tmp_path):
    bad = tmp_path / "future.npz"
    _rewrite_header(saved, bad, lambda h: h.update(format_version=io.FORMAT_VERSION + 1,
                                                   gpuksvm_version="9.0"))
    with pytest.raises(io.ModelFormatError, match=r"format version 2 .*newer gpuksvm.*Upgrade"):
        io.load(bad)
    with pytest.raises(io.ModelFormatError, match="newer"):
        io.read_header(bad)


def test_foreign_class_refused(saved, tmp_path):
    bad = tmp_path / "evil.npz"

    def mutate(h):
        h["tree"]["state"]["k_"]["cls"] = "os:system"

    _rewrite_header(saved, bad, mutate)
    with pytest.raises(io.ModelFormatError, match="refusing to load class 'os:system'"):
        io.load(bad)


def test_malformed_tree_rejected(saved, tmp_path):
    bad = tmp_path / "tree.npz"
    _rewrite_header(saved, bad, lambda h: h["tree"]["state"].update(w_={"t": "array", "ref": "a99"}))
    with pytest.raises(io.ModelFormatError, match="missing array"):
        io.load(bad)


# ----------------------------------------------------------------------------- atomic write
def test_failed_write_keeps_old_file(saved, tmp_path, monkeypatch):
    before = saved.read_bytes()
    calls = {"n": 0}
    real = io._write_member

    def crashing(zf, name, a):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full (simulated)")
        real(zf, name, a)

    monkeypatch.setattr(io, "_write_member", crashing)
    new = _dummy_with(w_=np.zeros(5), v_=np.ones(5))
    with pytest.raises(OSError, match="simulated"):
        io.save(new, saved)
    assert saved.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.npz"]  # no temp file left
    np.testing.assert_array_equal(io.load(saved).w_, np.arange(1000.0))


def test_killed_process_never_leaves_partial_model(saved, tmp_path):
    """A process killed mid-write (os._exit, no cleanup) leaves the old model intact."""
    before = saved.read_bytes()
    code = f"""
import os, numpy as np
from sklearn.dummy import DummyClassifier
from gpuksvm import io
real = io._write_member
def dying(zf, name, a):
    real(zf, name, a)
    os._exit(3)          # the process dies with the archive half written
io._write_member = dying
est = DummyClassifier().fit(np.zeros((2, 1)), [0, 1])
est.big_ = np.ones(100000); est.more_ = np.zeros(10)
io.save(est, {str(saved)!r})
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 3, res.stderr
    assert saved.read_bytes() == before
    np.testing.assert_array_equal(io.load(saved).w_, np.arange(1000.0))
    leftovers = [p for p in tmp_path.iterdir() if p.name != "ok.npz"]
    assert all(p.name.startswith(".ok.npz.") and p.name.endswith(".tmp") for p in leftovers)


def test_save_replaces_existing_file(saved):
    io.save(_dummy_with(w_=np.full(3, 7.0)), saved)
    np.testing.assert_array_equal(io.load(saved).w_, np.full(3, 7.0))
