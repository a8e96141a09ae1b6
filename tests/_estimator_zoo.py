"""Small fitted models of every gpuksvm estimator, shared by test_io, test_cli and test_common.

The cases come from :mod:`gpuksvm.registry` (each method's ``zoo`` and ``check_params``):
a method added there is in every test that walks the zoo.
"""
from __future__ import annotations

import importlib
from dataclasses import is_dataclass

import numpy as np
import scipy.sparse as sp

from gpuksvm import registry
from gpuksvm.array import backend as bk
from gpuksvm.datasets import make_checkerboard

# name -> (module, class, params, task); task "blocks": binary, fitted out of core on a list of
# (X_block, y_block) pairs (LinearSVM's "newton-stream" with n_passes_, LLSVM's streamed kernel rows)
ZOO = {case.name: (m.module, m.name, dict(case.params), case.task)
       for m in registry.METHODS for case in m.zoo}


def checked_estimators() -> list:
    """One unfitted estimator per ``check_params`` set of every method (scikit-learn's checks), on the CPU."""
    return [m.load()(**params, device="cpu") for m in registry.METHODS for params in m.check_params]


def zoo_data(task: str, n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    if task == "multiclass":
        centers = np.array([[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]])
        y = np.repeat(np.array([0, 1, 2]), n // 3)
        X = centers[y] + rng.normal(scale=0.7, size=(len(y), 2))
        return X, y
    if task == "regression":
        X = rng.uniform(-2, 2, size=(n, 2))
        return X, np.sin(X[:, 0]) + 0.5 * X[:, 1]
    X, y = make_checkerboard(n, grid=2, random_state=seed)
    return X, y


def estimator_for(name: str, *, device: str = "cpu"):
    module, cls_name, params, task = ZOO[name]
    mod = importlib.import_module(module)
    cls = getattr(mod, cls_name)
    p = dict(params)
    names = cls().get_params()
    if "random_state" in names:
        p["random_state"] = 0
    p["device"] = device
    return cls(**p), task


def fitted_zoo_model(name: str, *, device: str = "cpu"):
    est, task = estimator_for(name, device=device)
    X, y = zoo_data(task)
    if task in ("one_class", "transform"):
        est.fit(X)
    elif task == "blocks":
        est.fit([(X[a:a + 100], y[a:a + 100]) for a in range(0, X.shape[0], 100)])
    else:
        est.fit(X, y)
    return est, X


OUTPUT_METHODS = ("predict", "decision_function", "predict_proba", "transform", "score_samples")


def output_methods(model, X):
    """(name, method, its output on X) for every prediction-like method the model has."""
    for meth in OUTPUT_METHODS:
        fn = getattr(model, meth, None)
        if fn is None:
            continue
        try:
            val = fn(X)
        except (AttributeError, NotImplementedError):
            continue
        yield meth, fn, val


def outputs(model, X):
    """(name, host array) of every prediction-like output the model has."""
    out = [(meth, np.asarray(bk.to_host(val))) for meth, _, val in output_methods(model, X)]
    assert out, f"{type(model).__name__} has no output method"
    return out


def compare_fitted(a, b, path: str = "model"):
    """Assert two objects hold the same fitted state (arrays equal, recursively)."""
    if hasattr(a, "get_params") and hasattr(a, "__dict__"):
        assert type(a) is type(b), path
        for k, v in vars(a).items():
            if k.endswith("_") and not k.startswith("__"):
                assert hasattr(b, k), f"{path}.{k} lost"
                compare_fitted(v, getattr(b, k), f"{path}.{k}")
        return
    if isinstance(a, np.ndarray) or bk.is_gpu_array(a):
        a_h, b_h = np.asarray(bk.to_host(a)), np.asarray(bk.to_host(b))
        assert a_h.dtype == b_h.dtype and a_h.shape == b_h.shape, path
        if a_h.dtype == object:
            for i, (u, w) in enumerate(zip(a_h.ravel(), b_h.ravel())):
                compare_fitted(u, w, f"{path}[{i}]")
        else:
            np.testing.assert_array_equal(a_h, b_h, err_msg=path)
        return
    if sp.issparse(a):
        np.testing.assert_array_equal(a.toarray(), b.toarray(), err_msg=path)
        return
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            compare_fitted(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (u, w) in enumerate(zip(a, b)):
            compare_fitted(u, w, f"{path}[{i}]")
        return
    if isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
        return
    if is_dataclass(a) or isinstance(a, (str, int, float, bool, type(None), np.generic)):
        assert a == b, path
        return
    if isinstance(a, (np.random.RandomState, np.random.Generator)):
        assert type(a) is type(b), path
        return
    if hasattr(a, "__dict__"):      # a solver's state record; "_" attributes are caches
        public = lambda o: {k: v for k, v in vars(o).items() if not k.startswith("_")}  # noqa: E731
        compare_fitted(public(a), public(b), path)
        return
    assert a == b, path


