"""A fit that fails leaves the previous fitted state intact — for every estimator (issue 14).

One shared mechanism (gpuksvm.estimators.base.fit_context, the decorator of every
fitting method) is tested here on all estimators: with a failure of the
input (a single class after validation already saw a new width) and with a
failure injected late in the algorithm.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpuksvm.estimators import base
from gpuksvm.estimators.cvm import CVM, OneClassCVM
from gpuksvm.estimators.kernel_svc import KernelSVC
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.estimators.llsvm import LLSVM
from gpuksvm.estimators.okfeb import OKFEB, OKFEBClassifier, OKFEBRegressor
from gpuksvm.solvers.okfeb.subspace import OnlineSubspace
from gpuksvm.estimators.svi import SVI

from _estimator_zoo import compare_fitted

ESTIMATORS = {
    "LinearSVM": lambda: LinearSVM(device="cpu"),
    "KernelSVC": lambda: KernelSVC(gamma=1.0, device="cpu"),
    "LLSVM": lambda: LLSVM(n_landmarks=10, device="cpu", random_state=0),
    "CVM": lambda: CVM(gamma=1.0, device="cpu", random_state=0),
    "OneClassCVM": lambda: OneClassCVM(gamma=1.0, device="cpu", random_state=0),
    "SVI": lambda: SVI(gamma=1.0, device="cpu", random_state=0),
    "OKFEB": lambda: OKFEB(rank=4, n_landmarks=8, device="cpu", random_state=0),
    "OKFEBClassifier": lambda: OKFEBClassifier(rank=4, n_landmarks=8, device="cpu", random_state=0),
    "OKFEBRegressor": lambda: OKFEBRegressor(rank=4, n_landmarks=8, device="cpu", random_state=0),
}
UNSUPERVISED = {"OneClassCVM", "OKFEB"}


def _data(name, n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X[:, 0] + 0.5 * X[:, 1] if name == "OKFEBRegressor" else (X[:, 0] > 0).astype(int)
    return X, y


def _fit(est, name, X, y):
    return est.fit(X) if name in UNSUPERVISED else est.fit(X, y)


def _outputs(est, X):
    fn = getattr(est, "decision_function", None) or getattr(est, "predict", None) or est.transform
    if type(est) is OKFEBRegressor:
        fn = est.predict
    elif type(est) is OKFEB:
        fn = est.transform
    return np.asarray(fn(X))


def _snapshot(est):
    import copy

    return copy.deepcopy(vars(est))


def _assert_unchanged(est, before, X, ref):
    assert set(vars(est)) == set(before), "attributes were added or removed by the failed fit"
    compare_fitted(before, vars(est))
    np.testing.assert_array_equal(_outputs(est, X), ref)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_failed_refit_with_bad_input_keeps_the_model(name):
    """Issue 14: a re-fit on 3-column data with one class set n_features_in_ = 3 and kept the
    old 2-column model."""
    est = ESTIMATORS[name]()
    X, y = _data(name)
    _fit(est, name, X, y)
    ref = _outputs(est, X)
    before = _snapshot(est)
    X3 = np.random.default_rng(1).normal(size=(5, 3))
    with pytest.raises(ValueError):
        if name == "OKFEBRegressor":
            est.fit(X3, np.array([0.0, 1.0, np.nan, 2.0, 3.0]))   # NaN target
        elif name in UNSUPERVISED:
            X3[4, 2] = np.inf if name == "OKFEB" else X3[4, 2]
            est.fit(X3[:1] if name == "OneClassCVM" else X3)        # 1 row / inf
        else:
            est.fit(X3, np.zeros(5))                                  # one class
    _assert_unchanged(est, before, X, ref)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_failure_late_in_the_fit_keeps_the_model(name, monkeypatch):
    """A failure injected after the new model was partly built (where fits record the fitted
    device) leaves every attribute as before."""
    est = ESTIMATORS[name]()
    X, y = _data(name)
    _fit(est, name, X, y)
    ref = _outputs(est, X)
    before = _snapshot(est)

    def boom(self, device):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(base.DeviceMixin, "_set_fitted_device", boom)
    X3, y3 = _data(name, n=60, d=3, seed=2)
    with pytest.raises(RuntimeError, match="injected"):
        _fit(est, name, X3, y3)
    monkeypatch.undo()
    _assert_unchanged(est, before, X, ref)


@pytest.mark.parametrize("name", ["OKFEB", "OKFEBClassifier", "OKFEBRegressor"])
def test_failed_partial_fit_keeps_the_stream_state(name, monkeypatch):
    """partial_fit updates buffers in place; a failure mid-update restores them."""
    est = ESTIMATORS[name]()
    X, y = _data(name, n=200)
    _fit(est, name, X[:100], y[:100])
    ref = _outputs(est, X)
    before = _snapshot(est)
    calls = {"n": 0}
    real = OnlineSubspace._add_one_host

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected failure")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(OnlineSubspace, "_add_one_host", flaky)
    with pytest.raises(RuntimeError, match="injected"):
        if name == "OKFEB":
            est.partial_fit(X[100:])
        else:
            est.partial_fit(X[100:], y[100:])
    assert calls["n"] == 3
    monkeypatch.undo()
    _assert_unchanged(est, before, X, ref)


def _without_fit_context(cls):
    """The fitting methods of ``cls`` that do not carry the fit context, or carry the wrong kind
    (``partial_fit*`` updates state in place: partial=True; ``fit`` replaces it: partial=False)."""
    bad = []
    for name, fn in base.fitting_methods(cls).items():
        ctx = getattr(fn, "__fit_context__", None)
        if ctx is None or ctx.partial != name.startswith("partial_fit"):
            bad.append(f"{cls.__name__}.{name}")
    return bad


def test_every_public_estimator_fit_carries_the_fit_context():
    import inspect

    import gpuksvm
    from sklearn.base import BaseEstimator

    public = [getattr(gpuksvm, n) for n in gpuksvm.__all__]
    classes = {c for c in public if inspect.isclass(c) and issubclass(c, BaseEstimator)}
    classes |= {type(make()) for make in ESTIMATORS.values()}
    assert {"LLSVM", "CVM", "OneClassCVM", "SVI", "LinearSVM", "KernelSVC", "OKFEB", "OKFEBClassifier",
            "OKFEBRegressor"} <= {c.__name__ for c in classes}
    assert [m for c in sorted(classes, key=lambda c: c.__name__) for m in _without_fit_context(c)] == []
    for cls in classes:
        assert base.fitting_methods(cls)["fit"], cls


def test_a_fit_without_the_fit_context_is_caught():
    class Bare(LLSVM):
        def fit(self, X, y=None, sample_weight=None):
            return super().fit(X, y, sample_weight)

    class Misdeclared(OKFEB):
        @base.fit_context()                     # partial_fit updates in place: needs partial=True
        def partial_fit(self, X, y=None):
            return super().partial_fit(X, y)

    assert _without_fit_context(Bare) == ["Bare.fit"]
    assert _without_fit_context(Misdeclared) == ["Misdeclared.partial_fit"]
    assert _without_fit_context(LLSVM) == []


def test_fit_context_validates_once_and_routes_dask_only_where_declared():
    calls = []

    class Counted(LLSVM):
        def _check_params(self):
            calls.append(type(self).__name__)
            super()._check_params()

    X, y = _data("LLSVM")
    Counted(n_landmarks=10, device="cpu", random_state=0).fit(X, y)
    assert calls == ["Counted"]
    assert LLSVM.fit.dask_route is not None and KernelSVC.fit.dask_route is None
    # partial_fit validates on the call that starts the state only (as scikit-learn's)
    seen = []

    class CountedStream(OKFEB):
        def _check_params(self):
            seen.append(1)
            super()._check_params()

    est = CountedStream(rank=4, n_landmarks=8, mode="budget", device="cpu", random_state=0)
    est.partial_fit(X[:50])
    est.partial_fit(X[50:])
    assert len(seen) == 1

def test_a_direct_distributed_fit_enters_the_fit_context():
    """fit_llsvm(est, X_dask, ...) runs as est.fit(X_dask): parameters checked once, all-or-nothing."""
    da = pytest.importorskip("dask.array")
    from sklearn.utils._param_validation import InvalidParameterError

    from gpuksvm.scaleout import fit_llsvm

    calls = []

    class Counted(LLSVM):
        def _check_params(self):
            calls.append(1)
            super()._check_params()

    X, y = _data("LLSVM", n=200)
    Xd, yd = da.from_array(X, chunks=(100, 2)), da.from_array(y, chunks=100)
    est = fit_llsvm(Counted(n_landmarks=10, device="cpu", random_state=0), Xd, yd, client=None)
    assert calls == [1] and est.n_features_in_ == 2
    ref = _outputs(est, X)
    est.set_params(C=-1.0)
    before = _snapshot(est)
    with pytest.raises(InvalidParameterError):
        fit_llsvm(est, Xd, yd, client=None)
    assert calls == [1, 1]
    _assert_unchanged(est, before, X, ref)
    # a refusal inside the distributed algorithm leaves the previous model too
    est.set_params(C=1.0, loss="hinge")
    before = _snapshot(est)
    with pytest.raises(ValueError, match="squared_hinge"):
        fit_llsvm(est, Xd, yd, client=None)
    _assert_unchanged(est, before, X, ref)
