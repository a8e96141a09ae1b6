"""What every gpuksvm estimator must do, tested once for all of them (issue 16).

* scikit-learn's estimator checks (``parametrize_with_checks``), each
  expected failure with its measured reason;
* the output-kind rule: every prediction-like method returns the caller's kind
  of array (NumPy in → NumPy out, CuPy in → CuPy out; labels a GPU array
  cannot hold stay NumPy), whatever device the model was fitted on;
* parameters stay as the user set them: ``get_params()`` is the same after
  ``fit``, pickling, ``to_device``, saving and loading, and ``clone``;
* the renamed parameters: the old name warns (FutureWarning) and gives the
  same model as the new one; setting both is an error;
* the Dask fit of every method that has one equals the in-memory fit,
  over the weight options;
* the GPU fit equals the CPU fit (a GPU test: emulated when no GPU is present).
"""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpuksvm import registry
from gpuksvm.array import backend as bk
from gpuksvm.persistence import io
from gpuksvm.estimators.kernel_svc import KernelSVC
from gpuksvm.estimators.llsvm import LLSVM
from gpuksvm.estimators.okfeb import OKFEB, OKFEBClassifier, OKFEBRegressor
from gpuksvm.estimators.svi import SVI

from _estimator_zoo import ZOO, checked_estimators, estimator_for, fitted_zoo_model, output_methods, outputs, zoo_data

# --------------------------------------------------------------------------- scikit-learn's checks
_SAMPLE_WEIGHT_CHECKS = ("check_sample_weight_equivalence_on_dense_data",
                         "check_sample_weight_equivalence_on_sparse_data")


def _expected_failures(est) -> dict[str, str]:
    """The checks an estimator is known to fail, each with its measured reason."""
    name = type(est).__name__
    if name == "KernelSVC":
        # as for scikit-learn's SVC, weights equal to repetitions agree only up to tol
        return {c: "sample_weight equals repeated rows only up to the solver's tol (as SVC)"
                for c in _SAMPLE_WEIGHT_CHECKS}
    if name == "LinearSVM" and est.loss == "hinge":
        # LIBLINEAR's hinge DCD stops at max_iter short of the exact optimum on these tiny unscaled
        # sets (scikit-learn's own LinearSVC is in the same position); class weights are checked
        # against LinearSVC in test_linear_svm
        return {**{c: "LIBLINEAR hinge-loss DCD stops before the exact optimum" for c in _SAMPLE_WEIGHT_CHECKS},
                # its fixed accuracy threshold is missed by the unconverged LIBLINEAR hinge
                "check_class_weight_classifiers": "LIBLINEAR hinge-loss DCD stops before the exact optimum"}
    if name == "LLSVM":
        # integer sample weights are not repeated rows: the landmarks (k-means on the rows, or
        # random rows) depend on the row multiset itself, as for KMeans-based Nystroem pipelines
        out = {c: "landmarks depend on repeated rows, not on their weights" for c in _SAMPLE_WEIGHT_CHECKS}
        if est.dtype == "float32":
            # reordered rows / subsets agree to float32 round-off (BLAS sums in another order,
            # amplified by M), not to the checks' tolerances (atol 1e-9; rtol 1e-4 with atol 1e-7)
            out["check_methods_sample_order_invariance"] = "float32 round-off, not atol 1e-9"
            out["check_methods_subset_invariance"] = "float32 round-off, not atol 1e-7"
        return out
    return {}


_CHECKED = checked_estimators()


@parametrize_with_checks(_CHECKED, expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        # KernelSVC's FutureWarning on probability=True (scikit-learn 1.9's, SVC's sentence)
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*probability.*")
        check(estimator)


def test_every_estimator_is_checked():
    """Every public estimator is a registry method, checked by scikit-learn's checks and in the zoo."""
    import gpuksvm

    public = {name for name in gpuksvm.__all__
              if isinstance(getattr(gpuksvm, name), type) and issubclass(getattr(gpuksvm, name), BaseEstimator)}
    names = {m.name for m in registry.METHODS}
    assert public == names
    assert {type(e).__name__ for e in _CHECKED} == names
    assert {ZOO[k][1] for k in ZOO} == names


# --------------------------------------------------------------------------- parameters stay
@pytest.mark.parametrize("name", sorted(ZOO))
def test_parameters_stay_as_set(name, tmp_path):
    """get_params() is the user's after fit, pickling, to_device, save/load and clone (the
    fitted device is the fitted attribute fitted_device_, never a rewritten ``device``)."""
    est, task = estimator_for(name, device="cpu")
    est.set_params(device="cuda:0")               # a GPU model, as a user on a GPU machine sets it
    want = est.get_params(deep=False)
    model, X = fitted_zoo_model(name, device="cpu")
    model.set_params(device="cuda:0")
    assert model.get_params(deep=False) == want
    back = pickle.loads(pickle.dumps(model))
    assert back.get_params(deep=False) == want
    model.to_device("cpu")
    assert model.get_params(deep=False) == want and model.fitted_device_ == "cpu"
    loaded = io.load(io.save(model, tmp_path / "m.npz"))
    assert loaded.get_params(deep=False) == want
    assert clone(model).get_params(deep=False) == want
    for (what, a), (_, b) in zip(outputs(model.set_params(device="cpu"), X), outputs(back, X)):
        np.testing.assert_array_equal(a, b, err_msg=what)


# --------------------------------------------------------------------------- renamed parameters
_RENAMED = [
    (LLSVM, {"n_landmarks": 20, "random_state": 0, "spectrum": "supervised", "device": "cpu"},
     "a", "dissimilar_pair_weight", 0.5),
    (OKFEB, {"rank": 4, "random_state": 0, "device": "cpu"}, "budget", "n_landmarks", 12),
    (OKFEBClassifier, {"rank": 4, "random_state": 0, "device": "cpu"}, "budget", "n_landmarks", 12),
    (OKFEBRegressor, {"rank": 4, "random_state": 0, "device": "cpu"}, "budget", "n_landmarks", 12),
    (OKFEBRegressor, {"rank": 4, "random_state": 0, "device": "cpu", "solver": "online"},
     "normalized", "normalize", False),
]


@pytest.mark.parametrize("cls,base,old,new,value", _RENAMED,
                         ids=[f"{c.__name__}.{o}" for c, _, o, _, _ in _RENAMED])
def test_old_parameter_names_warn_and_work(cls, base, old, new, value):
    task = {"OKFEB": "transform", "OKFEBRegressor": "regression"}.get(cls.__name__, "binary")
    X, y = zoo_data(task)
    args = (X,) if task == "transform" else (X, y)
    ref = cls(**base, **{new: value}).fit(*args)
    with pytest.warns(FutureWarning, match=f"'{old}' is now called '{new}'"):
        old_style = cls(**base, **{old: value}).fit(*args)
    for (what, a), (_, b) in zip(outputs(ref, X), outputs(old_style, X)):
        np.testing.assert_array_equal(a, b, err_msg=what)
    assert value != cls().get_params()[new]            # setting the new name too is noticed
    with pytest.raises(ValueError, match=f"set '{new}' only"):
        cls(**base, **{old: value, new: value}).fit(*args)


def test_svi_fit_time_is_now_fit_times():
    X, y = zoo_data("binary")
    est = SVI(gamma=2.0, random_state=0, device="cpu").fit(X, y)
    with pytest.warns(FutureWarning, match="fit_times_"):
        assert est.fit_time_ == est.fit_times_
    with pytest.warns(FutureWarning, match="max_iter=-1"):
        SVI(gamma=2.0, random_state=0, device="cpu", max_iter=None).fit(X, y)


@pytest.mark.parametrize("cls", [KernelSVC, LLSVM, SVI, OKFEB])
def test_one_vocabulary_for_the_kernel(cls):
    """degree is an int and coef0 defaults to 0.0 (scikit-learn's SVC) in every estimator."""
    import inspect

    params = inspect.signature(cls).parameters
    assert params["degree"].default == 3 and isinstance(params["degree"].default, int)
    assert params["coef0"].default == 0.0
    X, y = zoo_data("binary")
    with pytest.warns(FutureWarning, match="should be an int"):
        est = cls(kernel="poly", degree=2.0, gamma=0.5, device="cpu")
        est.fit(X) if cls is OKFEB else est.fit(X, y)
    with pytest.raises(ValueError, match="whole number"):
        est = cls(kernel="poly", degree=2.5, device="cpu")
        est.fit(X) if cls is OKFEB else est.fit(X, y)


# --------------------------------------------------------------------------- output kind
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ZOO))
def test_outputs_come_back_in_the_callers_array_kind(gpu, name):
    """cuML's output-type mirroring: CuPy in → CuPy out (numeric), NumPy in → NumPy out, for a
    model fitted on the CPU and predicting CuPy rows."""
    model, X = fitted_zoo_model(name, device="cpu")
    Xg = gpu.asarray(X)
    for meth, fn, host in output_methods(model, X):
        dev = fn(Xg)
        assert isinstance(host, np.ndarray), (meth, type(host))
        if np.asarray(host).dtype.kind in "biuf":
            assert bk.is_gpu_array(dev), (meth, type(dev))
        else:
            assert isinstance(dev, np.ndarray), (meth, type(dev))
        if host.dtype.kind in "biuf":
            np.testing.assert_allclose(np.asarray(bk.to_host(dev)), host, rtol=1e-6, atol=1e-9, err_msg=meth)
        else:
            np.testing.assert_array_equal(dev, host, err_msg=meth)


# --------------------------------------------------------------------------- GPU = CPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ZOO))
def test_gpu_fit_equals_cpu_fit(gpu, name):
    """Every estimator fitted on the GPU (float64) predicts as its CPU fit."""
    cpu, X = fitted_zoo_model(name, device="cpu")
    est, task = estimator_for(name, device="gpu")
    if "dtype" in est.get_params():
        est.set_params(dtype="float64")
        cpu = clone(cpu).set_params(dtype="float64")
        _fit(cpu, task, X)
    _fit(est, task, X)
    for (what, a), (_, b) in zip(outputs(cpu, X), outputs(est, X)):
        if a.dtype.kind in "iub" or a.dtype == object:
            assert np.mean(a == b) >= 0.98, what
        else:
            # both stop at the solver's tol: a row on a near-tie of one-vs-one votes may flip its
            # vote-based value by one, so 99 % of the values (not all) must agree
            close = np.isclose(b, a, rtol=2e-3, atol=2e-3 * max(1.0, float(np.abs(a).max())))
            assert close.mean() >= 0.99, (what, float(close.mean()))


def _fit(est, task, X):
    _, y = zoo_data(task)
    if task in ("one_class", "transform"):
        return est.fit(X)
    if task == "blocks":
        return est.fit([(X[a:a + 100], y[a:a + 100]) for a in range(0, X.shape[0], 100)])
    return est.fit(X, y)


# --------------------------------------------------------------------------- Dask = in memory
@pytest.mark.parametrize("weights", ["none", "balanced", "sample_weight", "balanced+sample_weight"])
@pytest.mark.parametrize("name", ["llsvm", "llsvm_multiclass", "svi", "cvm", "one_class_cvm"])
def test_dask_fit_equals_in_memory_fit(name, weights):
    da = pytest.importorskip("dask.array")
    import dask

    est, task = estimator_for(name, device="cpu")
    if "dtype" in est.get_params():
        est.set_params(dtype="float64")
    X, y = zoo_data(task)
    kw = {}
    if "balanced" in weights:
        if "class_weight" not in est.get_params():
            pytest.skip(f"{type(est).__name__} has no class_weight")
        est.set_params(class_weight="balanced")
    if "sample_weight" in weights:
        import inspect

        if "sample_weight" not in inspect.signature(est.fit).parameters:
            pytest.skip(f"{type(est).__name__}.fit has no sample_weight")
        kw["sample_weight"] = np.random.default_rng(1).uniform(0.2, 3.0, size=X.shape[0])
    args = (X,) if task == "one_class" else (X, y)
    ref = clone(est).fit(*args, **kw)
    dargs = [da.from_array(a, chunks=(75,) + a.shape[1:]) for a in args]
    dkw = {k: da.from_array(v, chunks=75) for k, v in kw.items()}
    with dask.config.set(scheduler="threads"):
        got = clone(est).fit(*dargs, **dkw)
    for (what, a), (_, b) in zip(outputs(ref, X), outputs(got, X)):
        if a.dtype.kind in "iub" or a.dtype == object:
            np.testing.assert_array_equal(b, a, err_msg=what)
        else:
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6, err_msg=what)
