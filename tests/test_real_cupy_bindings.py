"""The stand-in CuPy against the real one: its names, and the library's calls bound to real signatures.

``tests/gpuemu/fake/cupy_api.json`` is the real CuPy's public names (``tests/realcupy.py names``);
the stand-in offers none outside it.  The library's calls into the stand-in are recorded
(:func:`gpuemu.dispatch.calls_hooked`) and bound against the real functions' signatures in a
subprocess that imports the real CuPy (``conftest.py`` does the same for every call of a whole
run, at its end).  The checks that need the real CuPy skip, with the reason, without it.
"""
import contextlib
import json
import re

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse

import gpuemu
import realcupy
from _estimator_zoo import ZOO, fitted_zoo_model, output_methods
from gpuemu import dispatch

API = {k: frozenset(v) for k, v in json.loads(realcupy.API_FILE.read_text()).items() if k != "signatures"}
#: the stand-in's own marker (``gpuemu.install`` and the test header read it); real CuPy lacks it
STAND_IN_MARKERS = {"GPUEMU"}
#: ndarray methods NumPy has and CuPy 14 lacks
NUMPY_ONLY_METHODS = ("getfield", "resize", "setflags", "to_device")


@pytest.fixture
def fake():
    """The stand-in CuPy (whatever this run's GPU mode: these tests are about the stand-in)."""
    with gpuemu.emulated_gpu() as cp:
        yield cp


@pytest.fixture(scope="module")
def real_names():
    realcupy.require()
    names = realcupy.ask("names")
    return names.pop("_real"), names


def test_api_file_is_real_cupys_names(real_names):
    info, names = real_names
    assert json.loads(realcupy.API_FILE.read_text()) == names, (
        f"tests/gpuemu/fake/cupy_api.json differs from CuPy {info['version']}'s names and signatures: "
        "rewrite it with realcupy.write_api_file()")


def _offered(obj, candidates) -> set:
    """The public names ``obj`` has, found in ``dir`` or by asking for each candidate."""
    names = {n for n in dir(obj) if not n.startswith("_")}
    for n in candidates:
        if n.startswith("_") or n in names:
            continue
        try:
            getattr(obj, n)
        except Exception:
            continue
        names.add(n)
    return names


def test_stand_in_offers_only_real_names(fake):
    import cupyx
    import cupyx.scipy.linalg
    import cupyx.scipy.sparse

    x = fake.zeros((2, 2))
    checks = {"cupy": (fake, dir(np)), "cupy.linalg": (fake.linalg, dir(np.linalg)),
              "cupy.random": (fake.random, dir(np.random) + dir(np.random.RandomState)),
              "cupy.random.RandomState": (fake.random.RandomState(0), dir(np.random.RandomState)),
              "cupy.random.Generator": (fake.random.default_rng(0), dir(np.random.Generator)),
              "cupy.ndarray": (x, dir(np.ndarray)), "cupyx": (cupyx, ()),
              "cupyx.scipy.linalg": (cupyx.scipy.linalg, dir(scipy.linalg)),
              "cupyx.scipy.sparse": (cupyx.scipy.sparse, dir(scipy.sparse))}
    for fmt in ("csr", "csc", "coo"):
        m = getattr(cupyx.scipy.sparse, f"{fmt}_matrix")(scipy.sparse.eye(2, format=fmt))
        checks[f"cupyx.scipy.sparse.{fmt}_matrix"] = (m, dir(getattr(scipy.sparse, f"{fmt}_matrix")))
    extra = {k: sorted(_offered(obj, cand) - API[k] - STAND_IN_MARKERS) for k, (obj, cand) in checks.items()}
    assert not any(extra.values()), f"the stand-in offers names real CuPy lacks: {extra}"


@pytest.mark.parametrize("name", NUMPY_ONLY_METHODS)
def test_numpy_only_ndarray_methods_are_refused(fake, name):
    assert name not in API["cupy.ndarray"]
    with pytest.raises(AttributeError, match=name):
        getattr(fake.zeros(3), name)


@pytest.mark.parametrize("call, refused", [
    (lambda cp, x: cp.sum(x, axis=0, where=x > 0), "cupy.sum(): got an unexpected keyword argument 'where'"),
    (lambda cp, x: x.sum(axis=0, where=x > 0), "cupy.ndarray.sum(): got an unexpected keyword argument 'where'"),
    (lambda cp, x: cp.argsort(x, stable=True), "cupy.argsort(): got an unexpected keyword argument 'stable'"),
    (lambda cp, x: cp.exp(x, where=x > 0), "cupy.exp(): got an unexpected keyword argument 'where'"),
    (lambda cp, x: cp.linalg.eigh(x, "L", 0), "cupy.linalg.eigh(): too many positional arguments"),
], ids=["sum-where", "ndarray.sum-where", "argsort-stable", "ufunc-where", "eigh-3-args"])
def test_stand_in_refuses_what_real_signatures_refuse(fake, call, refused):
    """NumPy takes these; CuPy's signatures (in cupy_api.json) do not, and neither does the stand-in."""
    x = fake.ones((2, 2))
    with dispatch.calls_hooked(lambda *a: None, exclusive=True):     # not in the run's own record
        with pytest.raises(TypeError, match=re.escape(refused)):
            call(fake, x)


def test_calls_are_recorded_as_made(fake):
    log = realcupy.CallLog()
    x = fake.zeros((2, 3))
    with dispatch.calls_hooked(log):
        x.astype(np.float32, copy=False).sum(axis=0)
        fake.asarray(np.ones(2), dtype=np.float64)
        fake.linalg.eigh(fake.eye(2))
    assert set(log.calls) == {("cupy.ndarray.astype", 2, ("copy",)), ("cupy.ndarray.sum", 1, ("axis",)),
                              ("cupy.asarray", 1, ("dtype",)), ("cupy.linalg.eigh", 1, ()),
                              ("cupy.eye", 1, ())}     # not asarray's own call of cupy.array


def test_binding_check_catches_calls_real_cupy_refuses(fake):
    """Not vacuous: NumPy-only keywords and a wrong argument count are refused by the real CuPy."""
    realcupy.require()
    log = realcupy.CallLog()
    x = fake.ones((2, 2))
    calls = [lambda: fake.sum(x, axis=0, where=x > 0),        # NumPy's `where=`: not in cupy.sum
             lambda: x.astype(np.float32, device="cpu"),        # NumPy 2's `device=`: not in ndarray.astype
             lambda: fake.linalg.eigh(x, "L", "extra"),
             lambda: fake.argsort(x, axis=-1, stable=True),     # NumPy 2's `stable=`
             lambda: fake.sum(x, axis=0)]                       # fine
    with dispatch.calls_hooked(log, exclusive=True):    # not in the run's own record (conftest)
        for call in calls:
            with contextlib.suppress(TypeError):        # where the stand-in refuses too
                call()
    result = log.check()
    refused = sorted(m["call"] for m in result["mismatches"])
    assert refused == ["cupy.argsort(_, axis=_, stable=_)", "cupy.linalg.eigh(_, _, _)",
                       "cupy.ndarray.astype(_, _, device=_)", "cupy.sum(_, axis=_, where=_)"], result
    assert result["checked"] == 5


#: the library's GPU paths run under recording here (every estimator family, fit and outputs)
PATHS = ("linear", "linear_blocks", "svc", "llsvm_multiclass", "cvm", "one_class_cvm", "svi",
         "okfeb_classifier", "okfeb_regressor")


def test_library_calls_bind_against_real_cupy(fake, request):
    realcupy.require()
    request.getfixturevalue("_emulator")
    assert set(PATHS) <= set(ZOO)
    log = realcupy.CallLog()
    with dispatch.calls_hooked(log):
        for name in PATHS:
            model, X = fitted_zoo_model(name, device="gpu")
            for _ in output_methods(model, fake.asarray(X)):
                pass
    result = log.check()
    print(f"real CuPy {result['_real']['version']}: {result['checked']} distinct calls bound, "
          f"{len(result['mismatches'])} refused, unbound: {result['unbound']}")
    assert result["checked"] >= 40
    assert not result["mismatches"], realcupy.describe_mismatches(result)
    assert not result["unbound"], result["unbound"]


def test_skips_with_the_reason_without_real_cupy(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUKSVM_REAL_CUPY", str(tmp_path))
    path, reason = realcupy.location()
    assert path is None and str(tmp_path) in reason and realcupy.INSTALL_HINT in reason
    with pytest.raises(pytest.skip.Exception, match="real-CuPy check not run"):
        realcupy.require()
