"""Model files (gpuksvm.persistence.io): round trips, corruption, future versions, atomic writes."""
from __future__ import annotations

import gc
import json
import os
import pickle
import stat
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpuksvm import LLSVM, SVI, KernelSVC, LinearSVM
from gpuksvm.persistence import io
from gpuksvm.array.backend import CPU, Device
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.persistence.model_format import REGISTRY
from gpuksvm.persistence.model_format.registry import _common

from _estimator_zoo import ZOO, compare_fitted, fitted_zoo_model, outputs

# ----------------------------------------------------------------------------- helpers
DATA = Path(__file__).parent / "data"


def _linear(**attrs):
    """A small fitted LinearSVM (plus any attributes to test what saving refuses)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    est = LinearSVM(device="cpu").fit(X, (X[:, 0] > 0).astype(int))
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


# ----------------------------------------------------------------------------- closed format
def test_parameter_kinds_round_trip(tmp_path):
    """Parameters beyond JSON scalars: a Kernel, a NumPy dtype type, a RandomState, landmarks,
    a class_weight dict with integer keys, inf."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    rs = np.random.RandomState(5)
    rs.rand(3)
    est = LLSVM(kernel=Kernel("rbf", gamma=0.7), landmarks=X[:15].copy(), dtype=np.float64,
                class_weight={0: 1.0, 1: 2.5}, random_state=rs, device="cpu").fit(X, y)
    back = io.load(io.save(est, tmp_path / "p.npz"))
    p, q = est.get_params(), back.get_params()
    assert q["kernel"] == p["kernel"] and q["class_weight"] == {0: 1.0, 1: 2.5}
    np.testing.assert_array_equal(q["landmarks"], p["landmarks"])
    assert np.dtype(q["dtype"]) == np.float64
    np.testing.assert_array_equal(q["random_state"].rand(4), p["random_state"].rand(4))
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
    svm = LinearSVM(C=1e300, device="cpu")
    assert io.load(io.save(svm, tmp_path / "u.npz")).get_params() == svm.get_params()


def test_file_is_plain_npz_without_pickle(tmp_path):
    est = _linear()
    path = io.save(est, tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as npz:
        assert "header.json" in npz.files
        header = json.loads(npz["header.json"])
        ref = header["model"]["fitted"]["coef_"]["array"]
        np.testing.assert_array_equal(npz[ref], est.coef_)
    assert header["format"] == "gpuksvm-model" and header["format_version"] == io.FORMAT_VERSION == 2
    assert header["class"] == header["model"]["estimator"] == "gpuksvm.linear_svm.LinearSVM"


def test_pipeline_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)) * [1.0, 10.0, 100.0]
    y = (X[:, 0] + X[:, 1] / 10 > 0).astype(int)
    pipe = make_pipeline(StandardScaler(), LinearSVM(device="cpu")).fit(X, y)
    back = io.load(io.save(pipe, tmp_path / "p.npz"))
    assert [type(s) for _, s in back.steps] == [StandardScaler, LinearSVM]
    np.testing.assert_array_equal(back.decision_function(X), pipe.decision_function(X))


def test_save_refuses_what_the_format_cannot_hold(tmp_path):
    # another library's estimator, an undeclared attribute, a callable: TypeError, nothing written
    with pytest.raises(TypeError, match="DummyClassifier"):
        io.save(DummyClassifier().fit(np.zeros((2, 1)), [0, 1]), tmp_path / "a.npz")
    with pytest.raises(TypeError, match="attribute 'fn_' of LinearSVM is not declared"):
        io.save(_linear(fn_=lambda x: x), tmp_path / "b.npz")
    with pytest.raises(TypeError, match="LogisticRegression"):
        io.save(make_pipeline(StandardScaler(), LogisticRegression()).fit(np.eye(3), [0, 1, 1]),
                tmp_path / "c.npz")
    assert not list(tmp_path.iterdir())  # nothing left behind


def _victim(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("do not delete")
    return victim


def test_issue14_exploit_file_deleting_payload_is_refused(tmp_path):
    """Issue 14: a genuine model with a hidden private attribute of class
    ``tempfile._TemporaryFileCloser`` (reached as ``gpuksvm.persistence.io:tempfile...``) deleted an
    arbitrary file when the loaded model was freed.  The file is refused; nothing is deleted."""
    victim = _victim(tmp_path)
    bad = tmp_path / "exploit.npz"
    _rewrite_header(DATA / "v1_exploit.npz", bad,
                    lambda h: h["tree"]["state"]["_payload"]["state"]["name"].update(v=str(victim)))
    refused = None
    try:
        model = io.load(bad)
        del model
    except io.ModelFormatError as exc:
        refused = exc
    gc.collect()
    assert victim.exists() and victim.read_text() == "do not delete", "loading deleted a file"
    assert refused is not None and "_TemporaryFileCloser" in str(refused)


@pytest.mark.parametrize("payload", [
    {"estimator": "gpuksvm.persistence.io:tempfile._TemporaryFileCloser", "fitted": {}},
    {"estimator": "tempfile._TemporaryFileCloser", "fitted": {}},
    {"t": "object", "cls": "gpuksvm.persistence.io:tempfile._TemporaryFileCloser", "state": {}},
    {"estimator": "gpuksvm.okfeb.OKFEB", "params": {}, "fitted": {}},   # a real class, undeclared name
    3,
], ids=["walk", "name", "v1-node", "registered-class", "plain-value"])
def test_undeclared_attribute_refused_whatever_its_value(tmp_path, payload):
    src = io.save(_linear(), tmp_path / "ok.npz")
    bad = tmp_path / "bad.npz"
    _rewrite_header(src, bad, lambda h: h["model"]["fitted"].update(_payload=payload))
    with pytest.raises(io.ModelFormatError, match="_payload"):
        io.load(bad)
    with pytest.raises(io.ModelFormatError, match="_payload"):
        io.describe(bad)


def test_nested_estimator_must_be_the_declared_class(tmp_path):
    X = np.random.default_rng(0).normal(size=(80, 2))
    y = (X[:, 0] > 0).astype(int)
    src = io.save(LLSVM(n_landmarks=8, device="cpu", random_state=0).fit(X, y), tmp_path / "l.npz")
    okfeb = {"estimator": "gpuksvm.okfeb.OKFEB", "params": {}, "fitted": {}}
    bad = tmp_path / "bad.npz"
    _rewrite_header(src, bad, lambda h: h["model"]["fitted"].update(svm_=okfeb))
    with pytest.raises(io.ModelFormatError, match=r"svm_: expected LinearSVM, got OKFEB"):
        io.load(bad)


#: attributes an estimator lists that no model file holds: KernelSVC's training rows for a
#: callable kernel (saving a callable kernel is refused)
_NOT_IN_MODEL_FILES = {"X_fit_"}


def test_schema_declares_the_fitted_attributes_the_estimators_list():
    """An estimator's own list of fitted attributes and its model-file declaration agree: each
    listed attribute is declared (or ``save`` would refuse the model), and the schema declares
    no attribute the estimator no longer sets beyond those every estimator may carry."""
    every_estimator = set(_common({}))      # n_features_in_, feature_names_in_, _fitted_on, dask_info_
    checked = set()
    for entry in REGISTRY.values():
        listed = getattr(entry.cls, "FITTED_ATTRIBUTES", getattr(entry.cls, "_FITTED_ATTRIBUTES", None))
        if listed is None:
            continue
        checked.add(entry.cls)
        declared = set(entry.fitted)
        assert set(listed) - declared <= _NOT_IN_MODEL_FILES, (entry.name, set(listed) - declared)
        assert declared - set(listed) <= every_estimator, (entry.name, declared - set(listed))
    assert checked >= {KernelSVC, SVI}


def test_pipeline_steps_only_registered_estimators(tmp_path):
    pipe = make_pipeline(StandardScaler(), LinearSVM(device="cpu")).fit(np.eye(4), [0, 1, 0, 1])
    src = io.save(pipe, tmp_path / "p.npz")
    bad = tmp_path / "bad.npz"

    def mutate(h):
        h["model"]["params"]["steps"][1]["tuple"][1] = {"estimator": "sklearn.svm.SVC", "params": {},
                                                        "fitted": {}}

    _rewrite_header(src, bad, mutate)
    with pytest.raises(io.ModelFormatError, match="'sklearn.svm.SVC' is not one a gpuksvm model file"):
        io.load(bad)


def test_header_class_must_match_the_tree_and_info_shows_the_tree(tmp_path, capsys):
    from gpuksvm.cli import main

    src = io.save(_linear(), tmp_path / "ok.npz")
    bad = tmp_path / "lying.npz"
    _rewrite_header(src, bad, lambda h: h.update({"class": "gpuksvm.svi.SVI"}))
    with pytest.raises(io.ModelFormatError, match="class 'gpuksvm.svi.SVI' is not the model's"):
        io.load(bad)
    assert main(["info", str(bad)]) == 1
    assert "gpuksvm info: error:" in capsys.readouterr().err
    assert main(["info", str(src)]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(": gpuksvm.linear_svm.LinearSVM")


@pytest.mark.parametrize("mutate,match", [
    (lambda h: h["model"]["fitted"].update(n_iter_=10 ** 30), "64 bits"),
    (lambda h: h["model"]["fitted"].update(coef_="zero"), "coef_: expected an array"),
    (lambda h: h["model"]["fitted"].update(coef_={"array": "a0", "t": "object"}), "unexpected keys"),
    (lambda h: h["model"]["fitted"].update(coef_={"array": "a0", "tuple": []}), "exactly one kind"),
    (lambda h: h["model"]["fitted"].update(classes_=[1, 2]), "class labels"),
    (lambda h: h["model"]["params"].update(C=-1.0), "invalid parameters for LinearSVM: .*C.* must be"),
    (lambda h: h["model"]["params"].update(nonsense=1), "no parameter"),
    (lambda h: h["model"].update(estimator=["x"] * 3), "is not one a gpuksvm model file"),
    (lambda h: h.update(arrays={"a0": {"dtype": "|O", "shape": [1], "sha256": "0" * 64}}), "not allowed"),
    (lambda h: h.update(arrays={"../x": {"dtype": "<f8", "shape": [1], "sha256": "0" * 64}}), "bad array name"),
    (lambda h: h.update(model=json.loads("[" * 100 + "]" * 100)), "expected an estimator node"),
    (lambda h: h.update(extra=1), "unknown entries"),
], ids=["huge-int", "wrong-node-type", "extra-key", "two-kinds", "list-not-array", "bad-param", "unknown-param",
        "bad-class-name", "object-dtype", "path-name", "deep-list", "unknown-header-key"])
def test_malformed_values_are_model_format_errors(tmp_path, mutate, match):
    src = io.save(_linear(), tmp_path / "ok.npz")
    bad = tmp_path / "bad.npz"
    _rewrite_header(src, bad, mutate)
    for fn in (io.load, io.describe):
        with pytest.raises(io.ModelFormatError, match=match):
            fn(bad)


def test_inconsistent_shapes_are_refused(tmp_path):
    """A model that loads predicts: dimensions named in the schema must agree."""
    est = _linear()
    est.coef_ = np.zeros((1, 5))          # 5 weights, but n_features_in_ is 3
    with pytest.raises(TypeError, match="dimension 'n_features_in_' is 5 here but 3"):
        io.save(est, tmp_path / "m.npz")


def test_deeply_nested_header_is_a_model_format_error(tmp_path):
    """Issue 14: '[' * 200000 as the header gave a raw RecursionError."""
    bad = tmp_path / "deep.npz"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr(io.HEADER_MEMBER, "[" * 200000)
    with pytest.raises(io.ModelFormatError, match="nested too deeply"):
        io.load(bad)
    with pytest.raises(io.ModelFormatError):
        io.read_header(bad)


def test_huge_int_in_a_version_1_file_is_a_model_format_error(tmp_path):
    """Issue 14: a huge integer with a NumPy dtype gave a raw OverflowError."""
    bad = tmp_path / "v1big.npz"
    _rewrite_header(DATA / "v1_linear.npz", bad,
                    lambda h: h["tree"]["state"].update(n_iter_={"t": "int", "v": 10 ** 30, "dtype": "<i8"}))
    with pytest.raises(io.ModelFormatError, match="64 bits"):
        io.load(bad)


def test_member_size_checked_before_reading(tmp_path):
    """Issue 14: a 1.5 MB file decompressing to 1.6 GB took 3 GB of memory before being refused.
    A member whose declared size does not match the header's array is refused unread."""
    src = io.save(_linear(), tmp_path / "ok.npz")
    bomb = tmp_path / "bomb.npz"
    big = 64 * 2 ** 20
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zout:
        for name in zin.namelist():
            if name == "a0.npy":
                with zout.open(name, "w", force_zip64=True) as fh:
                    np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False,
                                                             "shape": (big // 8,)})
                    chunk = bytes(2 ** 20)
                    for _ in range(big // 2 ** 20):
                        fh.write(chunk)
            else:
                zout.writestr(name, zin.read(name))
    assert bomb.stat().st_size < 2 * 2 ** 20
    tracemalloc.start()
    try:
        with pytest.raises(io.ModelFormatError, match="a0.npy"):
            io.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2 ** 20, f"peak {peak / 2**20:.0f} MiB while refusing a bomb"


def test_extra_members_refused(tmp_path):
    src = io.save(_linear(), tmp_path / "ok.npz")
    bad = tmp_path / "extra.npz"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bad, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        zout.writestr("../../evil.sh", b"rm -rf /")
    with pytest.raises(io.ModelFormatError, match="members the header does not list"):
        io.load(bad)


# ----------------------------------------------------------------------------- format version 1
@pytest.mark.parametrize("name", ["linear", "llsvm", "okfeb_classifier"])
def test_version_1_files_load_through_the_closed_path(name):
    """Files written by gpuksvm 87b6a68 (format 1) load and predict as then: to the last bits where
    the BLAS kernels round as the machine that wrote them did; on an AMD EPYC (OpenBLAS's Haswell
    kernels) float32 values differed by up to 2.4e-7 (2 ulps), float64 ones by 5.7e-14."""
    model = io.load(DATA / f"v1_{name}.npz")
    X = np.load(DATA / "v1_X.npy")
    want = np.load(DATA / f"v1_{name}_decision.npy")
    got = model.decision_function(X)
    assert got.dtype == want.dtype
    eps = np.finfo(want.dtype).eps
    np.testing.assert_allclose(got, want, rtol=16 * eps, atol=16 * eps * np.abs(want).max())
    assert io.describe(DATA / f"v1_{name}.npz")["format_version"] == 1


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
        # LLSVM's float32 features K(x, Z)·U Λ^{-1/2}: float32 rounding of K(x, Z) (GPU vs CPU
        # summation order) is amplified by 1/√λ of the smallest eigenvalues (1e-4 seen on the zoo)
        atol = 1e-3 if what == "transform" else 1e-4
        np.testing.assert_allclose(np.asarray(gpu.asnumpy(a) if hasattr(a, "get") else a, dtype=float),
                                   np.asarray(b, dtype=float), rtol=1e-4, atol=atol, err_msg=what)
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
    # parameters as the user set them (issue 16); the arrays are on the host
    assert back.device == "cuda:0" and back._fitted_device() == CPU and back.fitted_device_ == "cpu"
    assert model.device == "cuda:0"
    back.set_params(device="cpu")
    for (what, a), (_, b) in zip(ref, outputs(back, X)):
        np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("name", ["cvm", "one_class_cvm"])
def test_cvm_file_with_one_problem_as_scalars_loads_per_problem(name, tmp_path):
    """A binary or one-class CVM saved before issue 16 held its one problem's ``n_iter_`` etc.
    as numbers and ``core_set_`` etc. as the bare object; such a file loads with the
    per-problem shapes of a fit today (arrays of shape (1,), lists of one entry)."""
    model, X = fitted_zoo_model(name)
    old = pickle.loads(pickle.dumps(model))
    for k in ("radius_", "duality_gap_"):
        setattr(old, k, float(getattr(model, k)[0]))
    for k in ("n_iter_", "n_smo_steps_", "core_set_size_"):
        setattr(old, k, int(getattr(model, k)[0]))
    for k in ("core_set_", "alpha_", "stop_reason_", "history_"):
        setattr(old, k, getattr(model, k)[0])
    path = io.save(old, tmp_path / "old.npz")
    fitted = io.read_header(path)["model"]["fitted"]
    assert type(fitted["n_iter_"]) is int and type(fitted["stop_reason_"]) is str    # the old layout
    back = io.load(path)
    compare_fitted(model, back)          # n_iter_ an int64 array (1,), core_set_ a list of one array, …
    assert back.n_iter_.shape == (1,) and isinstance(back.core_set_, list) and len(back.history_) == 1
    for (what, a), (_, b) in zip(outputs(model, X), outputs(back, X)):
        np.testing.assert_array_equal(a, b, err_msg=what)
    # the new layout is strict: a scalar where no old file had one is refused
    bad = tmp_path / "bad.npz"
    _rewrite_header(path, bad, lambda h: h["model"]["fitted"].update(n_iter_=[3]))
    with pytest.raises(io.ModelFormatError, match="n_iter_"):
        io.load(bad)


# ----------------------------------------------------------------------------- bad files
@pytest.fixture
def saved(tmp_path):
    X = np.random.default_rng(0).normal(size=(300, 2))
    est = SVI(gamma=2.0, device="cpu", random_state=0).fit(X, (X[:, 0] * X[:, 1] > 0).astype(int))
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
        info = max(zf.infolist(), key=lambda i: i.compress_size)
    # damage the stored array payload (past the local header and the .npy header)
    pos = info.header_offset + 30 + len(info.filename) + len(info.extra) + 100
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
                a = np.lib.format.read_array(__import__("io").BytesIO(data))
                buf = __import__("io").BytesIO()
                np.lib.format.write_array(buf, a + 1)
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
    with pytest.raises(io.ModelFormatError, match=r"format version 3 .*newer gpuksvm.*Upgrade"):
        io.load(bad)
    with pytest.raises(io.ModelFormatError, match="newer"):
        io.read_header(bad)


def test_foreign_class_refused(saved, tmp_path):
    bad = tmp_path / "evil.npz"
    _rewrite_header(saved, bad, lambda h: h["model"]["fitted"].update(
        kernel_={"estimator": "os:system", "params": {}, "fitted": {}}))
    with pytest.raises(io.ModelFormatError, match="class 'os:system' is not one"):
        io.load(bad)


def test_malformed_tree_rejected(saved, tmp_path):
    bad = tmp_path / "tree.npz"
    _rewrite_header(saved, bad, lambda h: h["model"]["fitted"].update(support_={"array": "a99"}))
    with pytest.raises(io.ModelFormatError, match="array 'a99' that the file does not list"):
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
    with pytest.raises(OSError, match="simulated"):
        io.save(_linear(), saved)
    assert saved.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.npz"]  # no temp file left
    assert type(io.load(saved)) is SVI


def test_killed_process_never_leaves_partial_model(saved, tmp_path):
    """A process killed mid-write (os._exit, no cleanup) leaves the old model intact."""
    before = saved.read_bytes()
    code = f"""
import os, numpy as np
from gpuksvm import io, LinearSVM
real = io._write_member
def dying(zf, name, a):
    real(zf, name, a)
    os._exit(3)          # the process dies with the archive half written
io._write_member = dying
X = np.random.default_rng(0).normal(size=(1000, 50))
est = LinearSVM(device="cpu").fit(X, (X[:, 0] > 0).astype(int))
io.save(est, {str(saved)!r})
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 3, res.stderr
    assert saved.read_bytes() == before
    assert type(io.load(saved)) is SVI
    leftovers = [p for p in tmp_path.iterdir() if p.name != "ok.npz"]
    assert all(p.name.startswith(".ok.npz.") and p.name.endswith(".tmp") for p in leftovers)


def test_save_replaces_existing_file(saved):
    est = _linear()
    io.save(est, saved)
    np.testing.assert_array_equal(io.load(saved).coef_, est.coef_)


def test_overwrite_keeps_the_file_mode(tmp_path):
    """Issue 14: the temporary file's 0600 replaced the target's mode."""
    path = tmp_path / "m.npz"
    path.write_bytes(b"old")
    os.chmod(path, 0o640)
    io.save(_linear(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    new = tmp_path / "new.npz"
    io.save(_linear(), new)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask


def test_save_through_a_symlink_writes_its_target(tmp_path):
    """Issue 14: saving to a symlink replaced the link by a regular file."""
    real = tmp_path / "models" / "current.npz"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "model.npz"
    link.symlink_to(real)
    est = _linear()
    io.save(est, link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    np.testing.assert_array_equal(io.load(real).coef_, est.coef_)
    assert sorted(p.name for p in real.parent.iterdir()) == ["current.npz"]


def test_save_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="folder .*nope does not exist"):
        io.save(_linear(), tmp_path / "nope" / "m.npz")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        io.save(_linear(), tmp_path)
    assert list(tmp_path.iterdir()) == []
