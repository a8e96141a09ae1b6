"""Tests of gpuksvm.scaleout: training and prediction on Dask (issue 9).

One CPU LocalCluster (2 worker processes, 1 thread each) is shared by the
module.  Checked: the distributed fits equal the single-process fits with the
same random_state; only small state travels and no worker holds more than its
chunks plus k×k-sized state (a scheduler plugin watches every task result); a
worker killed mid-fit is recovered from (same model) and unrecoverable loss
gives a clear error; predictions on dask arrays are lazy dask arrays.
"""
from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm import scaleout as gd  # noqa: E402
from gpuksvm.scaleout.runtime import DistributedFitError, Ledger, is_dask_collection  # noqa: E402
from gpuksvm.datasets import make_checkerboard  # noqa: E402


# --------------------------------------------------------------------------- cluster
class _Watch(distributed.diagnostics.plugin.SchedulerPlugin):
    """Records, at every task result, what each worker holds (bytes by kind of key)."""

    name = "gpuksvm-watch"

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.reset()

    def reset(self):
        self.max_other = 0        # non-chunk keys held by one worker at once
        self.max_chunk_key = 0    # largest single chunk (tuple key)
        self.by_prefix = {}       # largest result per task prefix

    def transition(self, key, start, finish, *args, **kwargs):
        if finish != "memory":
            return
        from dask.utils import key_split

        ts = self.scheduler.tasks.get(key)
        if ts is None:
            return
        prefix = key_split(key)
        self.by_prefix[prefix] = max(self.by_prefix.get(prefix, 0), int(ts.nbytes))
        if isinstance(key, tuple):
            self.max_chunk_key = max(self.max_chunk_key, int(ts.nbytes))
        for ws in ts.who_has or ():
            other = sum(int(t.nbytes) for t in ws.has_what if not isinstance(t.key, tuple))
            self.max_other = max(self.max_other, other)


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, memory_limit="1GiB") as lc:
        with distributed.Client(lc) as client:
            watch = _Watch(lc.scheduler)
            lc.scheduler.add_plugin(watch)
            yield lc, client, watch


@pytest.fixture
def client(cluster):
    lc, client, watch = cluster
    client.wait_for_workers(2, timeout=60)
    watch.reset()
    return client


def _dask(X, y, chunks):
    return da.from_array(X, chunks=(chunks, X.shape[1])), da.from_array(y, chunks=chunks)


def _assert_lazy_matches(out, want, Xd, *, rtol, atol):
    """``out`` is a lazy dask array chunked like ``Xd``'s rows and equals ``want``."""
    assert isinstance(out, da.Array) and out.chunks[0] == Xd.chunks[0]
    got = out.compute()
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- basics
def test_is_dask_collection():
    X = np.zeros((4, 2))
    assert not is_dask_collection(X)
    assert not is_dask_collection([1, 2])
    assert is_dask_collection(da.from_array(X))
    assert gd.is_dask_collection is is_dask_collection


def test_reduced_oracle_newton_matches_a_generic_optimizer(rng):
    # the Dask fit's data access: the single-process Newton solver over sums only
    from scipy.optimize import minimize

    from gpuksvm.solvers.linear.newton import ReducedOracle, line_derivatives, newton_solve

    F = rng.normal(size=(300, 6))
    y = np.where(F[:, 0] + 0.5 * rng.normal(size=300) > 0, 1.0, -1.0)
    c = rng.uniform(0.5, 2.0, size=300)

    def stats(W, active):
        o = F @ W[:, 0]
        act = y * o < 1
        r = np.where(act, o - y, 0.0)
        Fi = F[act] * c[act, None]
        return {"loss": np.array([np.sum(c * r * r)]), "grad": (F.T @ (c * r))[:, None],
                "hess": (Fi.T @ F[act])[None]}

    def line(W, P, t):
        return line_derivatives(F @ W, F @ P, y[:, None], c[:, None], t)

    oracle = ReducedOracle(stats, line, dim=6, m=1, npos=[int((y > 0).sum())], n=300)
    res = newton_solve(oracle, tol=1e-10, max_iter=50)
    assert res.converged and res.n_iter < 20

    def f(w):
        m = np.maximum(0.0, 1.0 - y * (F @ w))
        return 0.5 * w @ w + np.sum(c * m * m)

    ref = minimize(f, np.zeros(6), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(res.info["W"][:, 0], ref.x, atol=1e-5)
    assert res.objective[0] <= ref.fun + 1e-9


def test_row_chunked_validation():
    from gpuksvm.scaleout.runtime import row_chunked

    X = da.from_array(np.ones((10, 4)), chunks=(5, 2))
    Xc, yc = row_chunked(X, np.arange(10))
    assert Xc.chunks[1] == (4,) and yc.chunks == Xc.chunks[:1]
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        row_chunked(X, np.arange(9))
    with pytest.raises(ValueError, match="2D"):
        row_chunked(da.ones(5), None)
    with pytest.raises(TypeError, match="dask array"):
        row_chunked(np.ones((3, 2)), None)


# --------------------------------------------------------------------------- LLSVM
def _llsvm(**kw):
    from gpuksvm.estimators.llsvm import LLSVM

    params = dict(gamma=20.0, C=10.0, n_landmarks=40, kmeans_sample=400, device="cpu",
                  random_state=0, tol=1e-8, max_iter=200, dtype="float64")
    params.update(kw)
    return LLSVM(**params)


@pytest.fixture(scope="module")
def board():
    X, y = make_checkerboard(2400, flip=0.1, random_state=3)
    return X, y


def test_llsvm_distributed_equals_single_process(client, board):
    X, y = board
    Xd, yd = _dask(X, y, 500)
    ref = _llsvm().fit(X, y)
    est = gd.fit_llsvm(_llsvm(), Xd, yd, client=client)
    np.testing.assert_array_equal(est.landmarks_, ref.landmarks_)   # same sample, same k-means
    np.testing.assert_allclose(est.map_, ref.map_, rtol=1e-10, atol=1e-10)
    d_ref, d_est = ref.decision_function(X), est.decision_function(X)
    np.testing.assert_allclose(d_est, d_ref, atol=1e-4 * np.abs(d_ref).max())
    assert np.mean(est.predict(X) == ref.predict(X)) > 0.998
    info = est.dask_info_
    assert info["n_workers"] == 2 and info["newton_converged"]
    # only (k+1)×(k+1) state per problem came back from every Newton pass
    newton = [b for label, b in info["passes"] if label == "newton"]
    assert newton and max(newton) <= info["state_bytes_per_problem"] + 64


def test_llsvm_multiclass_weights_equal_single_process(client, rng):
    X = np.vstack([c + 0.6 * rng.normal(size=(250, 3)) for c in ([0, 0, 0], [2, 0, 0], [0, 2, 1])])
    y = np.repeat(np.array([3, 7, 9]), 250)
    y[:30] = 9
    sw = rng.uniform(0.5, 2.0, size=y.shape[0])
    kw = dict(gamma=0.5, n_landmarks=30, class_weight={7: 2.0}, kmeans_sample=None)
    ref = _llsvm(**kw).fit(X, y, sample_weight=sw)
    Xd, yd = _dask(X, y, 200)
    est = gd.fit_llsvm(_llsvm(**kw), Xd, yd, sample_weight=da.from_array(sw, chunks=200),
                       client=client)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    d_ref = ref.decision_function(X)
    np.testing.assert_allclose(est.decision_function(X), d_ref, atol=1e-4 * np.abs(d_ref).max())


@pytest.mark.parametrize("n_classes,class_weight,weighted", [
    (2, "balanced", True), (3, "balanced", True), (3, "balanced", False), (2, None, True)])
def test_llsvm_weight_options_equal_single_process(client, rng, n_classes, class_weight, weighted):
    # issue 16: "balanced" with sample_weight counted raw rows per class on Dask and
    # weighted counts in memory (decision values 80 % of their range apart); one
    # class-weight rule (gpuksvm.array.validation.class_weight_vector) serves both.  The dict
    # cases (with and without sample_weight) are the two tests beside this one.
    centers = np.array([[0, 0, 0], [2, 0, 0], [0, 2, 1]])[:n_classes]
    sizes = [300, 120, 180][:n_classes]
    X = np.vstack([c + 0.7 * rng.normal(size=(m, 3)) for c, m in zip(centers, sizes)])
    y = np.repeat(np.array([3, 7, 9])[:n_classes], sizes)
    sw = rng.uniform(0.2, 3.0, size=y.shape[0]) * np.where(y == 3, 2.0, 1.0) if weighted else None
    kw = dict(gamma=0.5, n_landmarks=25, class_weight=class_weight, kmeans_sample=300)
    ref = _llsvm(**kw).fit(X, y, sample_weight=sw)
    Xd, yd = _dask(X, y, 200)
    swd = None if sw is None else da.from_array(sw, chunks=200)
    est = gd.fit_llsvm(_llsvm(**kw), Xd, yd, sample_weight=swd, client=client)
    np.testing.assert_array_equal(est.landmarks_, ref.landmarks_)
    d_ref = ref.decision_function(X)
    np.testing.assert_allclose(est.decision_function(X), d_ref, atol=1e-4 * np.abs(d_ref).max())
    np.testing.assert_allclose(est.svm_.objective_, ref.svm_.objective_, rtol=1e-7)


def test_llsvm_binary_class_weight_equals_single_process(client, board):
    # two classes: every row carries its own class's weight (LIBLINEAR), the
    # negative class's included
    X, y = board
    kw = dict(class_weight={-1.0: 3.0})
    ref = _llsvm(**kw).fit(X, y)
    est = gd.fit_llsvm(_llsvm(**kw), *_dask(X, y, 500), client=client)
    d_ref = ref.decision_function(X)
    np.testing.assert_allclose(est.decision_function(X), d_ref, atol=1e-4 * np.abs(d_ref).max())


def test_llsvm_workers_hold_only_chunks_and_small_state(client, cluster):
    _, _, watch = cluster
    rng = np.random.default_rng(1)
    n, d, k = 4000, 16, 30
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    Xd, yd = _dask(X, y, 500)
    watch.reset()
    est = gd.fit_llsvm(_llsvm(gamma=0.1, n_landmarks=k, kmeans_sample=200), Xd, yd, client=client)
    p = k + 1
    state = (p * p + p + 1) * 8
    # every Newton partial result and tree sum is (k+1)×(k+1)-sized
    assert watch.by_prefix["sqhinge_stats"] <= state + 1024
    assert watch.by_prefix["sum_stats"] <= state + 1024
    # no chunk-keyed result bigger than one chunk of X or F (nothing concatenated)
    assert watch.max_chunk_key <= 500 * max(d, p) * 8 + 1024
    # non-chunk data on one worker at once: the k-means sample + k×k-sized state
    sample = 200 * d * 8
    assert watch.max_other <= sample + 16 * state + 64 * 1024
    assert watch.max_other < X.nbytes / 2
    # and what came back to the driver: never more than the sample or k×k state
    assert est.dask_info_["max_result_bytes"] <= max(sample, state) + 1024


def test_llsvm_dask_model_file_round_trip(client, board, tmp_path):
    """The Dask fit's svm_ (solver_ "newton-dask", objective_, converged_, cost_scale_,
    n_passes_) is declared in the model-file schema."""
    from _estimator_zoo import compare_fitted

    from gpuksvm.persistence import io

    X, y = board
    est = gd.fit_llsvm(_llsvm(), *_dask(X, y, 500), client=client)
    assert est.svm_.solver_ == "newton-dask" and est.svm_.cost_scale_ == 1.0
    assert est.svm_.n_passes_ == est.dask_info_["n_passes"] and est.svm_.converged_
    back = io.load(io.save(est, tmp_path / "dask.npz"))
    compare_fitted(est, back)
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))


def test_llsvm_dask_extreme_costs_are_scaled_and_zero_weight_classes_refused(client, board):
    """Issue 14's rules on the Dask fit too: sample_weight=1e200 is scaled to the C → ∞ limit
    (cost_scale_) instead of overflowing; a class of zero total weight is an error."""
    from gpuksvm.estimators.linear_svm import ScaledProblemWarning

    X, y = board
    Xd, yd = _dask(X, y, 500)
    with pytest.warns(ScaledProblemWarning, match="C → ∞ limit"):
        est = gd.fit_llsvm(_llsvm(), Xd, yd, sample_weight=da.from_array(np.full(len(y), 1e200), chunks=500),
                           client=client)
    assert est.svm_.cost_scale_ < 1e-180 and np.all(np.isfinite(est.coef_))
    ref = _llsvm(C=1e6).fit(X, y)
    assert np.mean(est.predict(X) == ref.predict(X)) > 0.97
    with pytest.raises(ValueError, match="every row of class 1.0 has zero weight"):
        gd.fit_llsvm(_llsvm(), Xd, yd, sample_weight=da.from_array(np.where(y == 1, 0.0, 1.0), chunks=500),
                     client=client)
    with pytest.raises(ValueError, match="non-negative"):
        gd.fit_llsvm(_llsvm(), Xd, yd, sample_weight=da.from_array(-np.ones(len(y)), chunks=500),
                     client=client)


def test_llsvm_bad_input(client, board):
    X, y = board
    Xn = X.copy()
    Xn[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        gd.fit_llsvm(_llsvm(), *_dask(Xn, y, 600), client=client)
    with pytest.raises(ValueError, match="greater than one"):
        gd.fit_llsvm(_llsvm(), *_dask(X, np.ones_like(y), 600), client=client)
    with pytest.raises(ValueError, match="squared_hinge"):
        gd.fit_llsvm(_llsvm(loss="hinge"), *_dask(X, y, 600), client=client)
    with pytest.raises(ValueError, match="inconsistent"):
        gd.fit_llsvm(_llsvm(), da.from_array(X, chunks=(600, 2)), y[:-1], client=client)


def test_predict_helpers_return_lazy_dask_arrays(client, board):
    X, y = board
    est = _llsvm().fit(X, y)
    Xd = da.from_array(X, chunks=(700, 2))
    for name in ("decision_function", "predict", "transform"):
        _assert_lazy_matches(getattr(est, name)(Xd), getattr(est, name)(X), Xd, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="features"):
        est.predict(da.from_array(np.ones((10, 3)), chunks=5))


@pytest.mark.parametrize("kw", [dict(landmarks="random"),
                                dict(spectrum="supervised", n_labeled=60, spectrum_reg=10.0)])
def test_local_scheduler_without_client(board, kw):
    """No distributed client: the default (threaded) scheduler gives the same model;
    random landmarks and LLSVM2's labelled subset are drawn exactly as in memory."""
    X, y = board
    X, y = X[:1200], y[:1200]
    ref = _llsvm(n_landmarks=20, **kw).fit(X, y)
    est = gd.fit_llsvm(_llsvm(n_landmarks=20, **kw), *_dask(X, y, 300), client=None)
    np.testing.assert_array_equal(est.landmarks_, ref.landmarks_)
    np.testing.assert_allclose(est.spectrum_, ref.spectrum_, rtol=1e-8)
    d_ref = ref.decision_function(X)
    np.testing.assert_allclose(est.decision_function(X), d_ref, atol=1e-4 * np.abs(d_ref).max())


# --------------------------------------------------------------------------- SVI
def test_svi_distributed_equals_single_process(client):
    from gpuksvm.datasets import make_two_sines
    from gpuksvm.estimators.svi import SVI, MarginCapWarning

    X, y = make_two_sines(1500, random_state=0)
    kw = dict(gamma=1.0, C=10.0, random_state=0, device="cpu", margin_tol=0.3, max_margin_sv=120,
              min_subset_rows=100)
    with pytest.warns(MarginCapWarning):
        ref = SVI(**kw).fit(X, y)
    with pytest.warns(MarginCapWarning):
        est = gd.fit_svi(SVI(**kw), *_dask(X, y, 400), client=client)
    assert not ref.solved_exactly_[0] and ref.sub_models_[0]["check"]["passed"]
    for a, b in zip(est.margin_support_, ref.margin_support_):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(est.subsets_[0], ref.subsets_[0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-6, atol=1e-8)
    for a, b in zip(est.sub_models_, ref.sub_models_):
        assert a["n_candidates"] == b["n_candidates"] and a["n_selected"] == b["n_selected"]
        assert a["check"]["disagreement"] == pytest.approx(b["check"]["disagreement"])
        assert a["check"]["accuracy_model"] == pytest.approx(b["check"]["accuracy_model"])
    np.testing.assert_array_equal(est.margin_capped_, ref.margin_capped_)
    # no pass brought back more than the labels and keys or the selected rows
    assert est.dask_info_["max_result_bytes"] <= max(X.shape[0] * 24, 2 * X.nbytes // 5)
    d = est.decision_function(da.from_array(X, chunks=(500, 2))).compute()
    np.testing.assert_allclose(d, ref.decision_function(X), rtol=1e-6, atol=1e-6)


def test_svi_distributed_fallback_equals_single_process(client):
    """Problems too small for the ensemble and ensembles that fail the check are
    solved by the exact SVM on the workers, as in memory, with the same warning."""
    from gpuksvm.datasets import make_two_sines
    from gpuksvm.estimators.svi import SVI, ExactFallbackWarning

    X, y = make_two_sines(1200, noise=0.35, random_state=0)
    for kw, why in [({}, "too_small"), ({"min_subset_rows": 100}, "check")]:
        kw = dict(gamma=1.0, C=10.0, random_state=0, device="cpu", **kw)
        with pytest.warns(ExactFallbackWarning):
            ref = SVI(**kw).fit(X, y)
        with pytest.warns(ExactFallbackWarning):
            est = gd.fit_svi(SVI(**kw), *_dask(X, y, 300), client=client)
        assert est.sub_models_[0]["exact"] == ref.sub_models_[0]["exact"] == why
        np.testing.assert_array_equal(est.solved_exactly_, [True])
        np.testing.assert_array_equal(est.support_, ref.support_)
        np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X), rtol=1e-6,
                                   atol=1e-6)


def test_svi_distributed_reports_convergence_as_in_memory(client):
    """converged_ and the one ConvergenceWarning of a fit come from the shared assembly, on
    the client (a warning raised on a worker process would not reach the caller)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from gpuksvm.datasets import make_two_sines
    from gpuksvm.estimators.svi import SVI

    X, y = make_two_sines(1200, noise=0.35, random_state=0)
    kw = dict(gamma=1.0, C=10.0, max_iter=50, random_state=0, device="cpu")
    fitted = []
    for fit in (lambda: SVI(**kw).fit(X, y),
                lambda: gd.fit_svi(SVI(**kw), *_dask(X, y, 300), client=client)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fitted.append(fit())
        conv = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        assert len(conv) == 1 and conv[0].startswith("Solver terminated early (max_iter=50)")
    ref, est = fitted
    np.testing.assert_array_equal(est.converged_, [False])
    np.testing.assert_array_equal(est.converged_, ref.converged_)
    assert est.sub_models_[0]["max_iter_reached"] == ref.sub_models_[0]["max_iter_reached"] == [True]


def test_svi_multiclass_distributed(client, rng):
    from gpuksvm.estimators.svi import SVI

    X = np.vstack([c + 0.5 * rng.normal(size=(200, 2)) for c in ([0, 0], [3, 0], [0, 3])])
    y = np.repeat([0, 1, 2], 200)
    kw = dict(gamma=0.5, C=1.0, random_state=1, device="cpu", multi_class="ovr", min_subset_rows=0,
              ensemble_check=False)
    ref = SVI(**kw).fit(X, y)
    est = gd.fit_svi(SVI(**kw), *_dask(X, y, 150), client=client)
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_llsvm_cupy_chunks_match_numpy(gpu, board):
    X, y = board
    Xg = da.from_array(gpu.asarray(X), chunks=(600, 2), asarray=False)
    kw = dict(dtype=np.float64)
    ref = gd.fit_llsvm(_llsvm(**kw), *_dask(X, y, 600), client=None)
    est = gd.fit_llsvm(_llsvm(device="gpu", **kw), Xg, da.from_array(y, chunks=600), client=None)
    np.testing.assert_allclose(bk.to_host(est.decision_function(X)), ref.decision_function(X),
                               atol=1e-6)
    out = est.decision_function(Xg)
    assert bk.is_gpu_array(out.compute())


def test_ledger_records_sizes():
    led = Ledger()
    led.record("a", (np.zeros(10), {"b": np.zeros((2, 2))}))
    led.record("b", 3)
    assert led.n_passes == 2 and led.max_result_bytes == 112 and led.total_result_bytes == 112


# --------------------------------------------------------------------------- CVM
@pytest.mark.parametrize("sample_size", [None, 59])
def test_cvm_distributed_equals_single_process(client, sample_size):
    from gpuksvm.estimators.cvm import CVM

    X, y = make_checkerboard(1200, random_state=0)
    kw = dict(gamma=30.0, C=100.0, tol=3e-3, sample_size=sample_size, device="cpu", random_state=0)
    ref = CVM(**kw).fit(X, y)
    est = gd.fit_cvm(CVM(**kw), *_dask(X, y, 300), client=client)
    assert est.search_ == ref.search_
    np.testing.assert_array_equal(est.core_set_, ref.core_set_)
    np.testing.assert_allclose(est.alpha_, ref.alpha_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X), rtol=1e-9, atol=1e-12)
    # exact scan: one pass per search iteration, each chunk returning its 64 furthest rows
    # (score, index, features) — never the chunk
    scans = [b for label, b in est.dask_info_["passes"] if label == "furthest point"]
    if sample_size is None:
        assert scans and max(scans) <= 4 * 64 * (X.shape[1] + 2) * 8
    else:
        assert not scans
    assert est.dask_info_["max_result_bytes"] <= X.shape[0] * 16   # the rows' two hash keys at most


def test_one_class_cvm_distributed(client, rng):
    from gpuksvm.estimators.cvm import OneClassCVM

    X = rng.normal(size=(600, 3))
    kw = dict(gamma=0.1, tol=3e-2, sample_size=None, device="cpu", random_state=0)
    ref = OneClassCVM(**kw).fit(X)
    est = gd.fit_cvm(OneClassCVM(**kw), da.from_array(X, chunks=(150, 3)), client=client)
    np.testing.assert_array_equal(est.core_set_, ref.core_set_)
    assert est.offset_ == pytest.approx(ref.offset_, rel=1e-10)
    s = est.score_samples(da.from_array(X, chunks=(150, 3)))
    assert isinstance(s, da.Array)
    np.testing.assert_allclose(s.compute(), ref.score_samples(X), rtol=1e-9)


@pytest.mark.gpu
def test_cvm_exact_scan_on_cupy_chunks(gpu):
    from gpuksvm.estimators.cvm import CVM

    X, y = make_checkerboard(1200, random_state=0)
    kw = dict(gamma=30.0, C=100.0, tol=3e-3, sample_size=None, random_state=0, dtype=np.float64)
    ref = CVM(device="cpu", **kw).fit(X, y)
    Xg = da.from_array(gpu.asarray(X), chunks=(300, 2), asarray=False)
    est = gd.fit_cvm(CVM(device="gpu", **kw), Xg, da.from_array(y, chunks=300), client=None)
    np.testing.assert_array_equal(est.core_set_, ref.core_set_)


# --------------------------------------------------------------------------- hooks
def _hooked(cls, method="fit"):
    """The method routes a dask X through gpuksvm.scaleout.dispatch.dask_dispatch."""
    return getattr(getattr(cls, method), "dask_route", None) is not None


def test_llsvm_estimator_dispatches_dask_input(client, board):
    """LLSVM.fit/predict/... on dask arrays: the distributed fit, lazy dask outputs."""
    from gpuksvm.estimators.llsvm import LLSVM

    X, y = board
    Xd, yd = _dask(X, y, 600)
    ref = gd.fit_llsvm(_llsvm(), Xd, yd, client=client)
    est = _llsvm().fit(Xd, yd)                      # the active client is used
    assert est.dask_info_["n_workers"] == 2
    # same sums in the same order; BLAS rounding may differ between worker processes
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    for name in ("predict", "decision_function", "transform"):
        assert _hooked(LLSVM, name)
        _assert_lazy_matches(getattr(est, name)(Xd), getattr(est, name)(X), Xd, rtol=1e-12, atol=1e-12)
    assert isinstance(est.fit_transform(Xd, yd), da.Array)
    with pytest.raises(ValueError, match="probability"):
        _llsvm(probability=True).fit(Xd, yd)
    # an in-memory model with Platt scaling predicts probabilities lazily
    prob = _llsvm(probability=True).fit(X[:1200], y[:1200])
    for name in ("predict_proba", "predict_log_proba"):
        _assert_lazy_matches(getattr(prob, name)(Xd), getattr(prob, name)(X), Xd, rtol=1e-12, atol=1e-12)


def test_svi_estimator_dispatches_dask_input(client):
    from gpuksvm.datasets import make_two_sines
    from gpuksvm.estimators.svi import SVI

    X, y = make_two_sines(800, random_state=1)
    Xd, yd = _dask(X, y, 200)
    kw = dict(gamma=1.0, C=10.0, random_state=0, device="cpu", max_margin_sv=80, min_subset_rows=0,
              ensemble_check=False)
    ref = SVI(**kw).fit(X, y)
    est = SVI(**kw).fit(Xd, yd)
    assert hasattr(est, "dask_info_")
    np.testing.assert_array_equal(est.support_, ref.support_)
    for name in ("predict", "decision_function"):
        _assert_lazy_matches(getattr(est, name)(Xd), getattr(ref, name)(X), Xd, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="probability"):
        SVI(probability=True, **kw).fit(Xd, yd)


# The estimators themselves dispatch dask input to gd.fit_cvm (tested above).
def test_cvm_estimator_dispatches_dask_input(client):
    from gpuksvm.estimators.cvm import CVM

    assert _hooked(CVM)
    X, y = make_checkerboard(800, random_state=0)
    Xd, yd = _dask(X, y, 200)
    kw = dict(gamma=30.0, C=100.0, tol=3e-3, sample_size=None, device="cpu", random_state=0)
    ref = CVM(**kw).fit(X, y)
    est = CVM(**kw).fit(Xd, yd)
    assert hasattr(est, "dask_info_")
    np.testing.assert_array_equal(est.core_set_, ref.core_set_)
    for name in ("predict", "decision_function"):
        assert _hooked(CVM, name), f"CVM.{name} does not dispatch dask input"
        _assert_lazy_matches(getattr(est, name)(Xd), getattr(ref, name)(X), Xd, rtol=1e-9, atol=1e-12)


def test_one_class_cvm_estimator_dispatches_dask_input(client, rng):
    from gpuksvm.estimators.cvm import OneClassCVM

    assert _hooked(OneClassCVM)
    X = rng.normal(size=(400, 3))
    Xd = da.from_array(X, chunks=(100, 3))
    kw = dict(gamma=0.1, tol=3e-2, sample_size=None, device="cpu", random_state=0)
    ref = OneClassCVM(**kw).fit(X)
    est = OneClassCVM(**kw).fit(Xd)
    assert hasattr(est, "dask_info_")
    np.testing.assert_array_equal(est.core_set_, ref.core_set_)
    for name in ("score_samples", "decision_function", "predict"):
        assert _hooked(OneClassCVM, name), f"OneClassCVM.{name} does not dispatch dask input"
        _assert_lazy_matches(getattr(est, name)(Xd), getattr(ref, name)(X), Xd, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------- worker loss
# (last in the file: restarted workers must import gpuksvm again)
def test_llsvm_worker_killed_mid_fit_recovers(client, board):
    X, y = board
    Xd, yd = _dask(X, y, 400)
    ref = gd.fit_llsvm(_llsvm(), Xd, yd, client=client)
    pids = client.run(os.getpid)
    killed = []

    def kill_one(info):
        if info["iteration"] == 1 and not killed:
            victim = sorted(pids)[0]
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)
            time.sleep(0.5)

    est = gd.fit_llsvm(_llsvm(), Xd, yd, client=client, callback=kill_one)
    assert killed
    # the lost F chunks were recomputed from their lineage: the same model
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)


def _poison(block, block_info=None):
    if block_info is not None and block_info[0]["chunk-location"][0] == 1:
        os._exit(1)  # the worker dies whenever it computes this chunk
    return block


def test_unrecoverable_worker_loss_is_a_clear_error(client, cluster):
    lc, _, _ = cluster
    X, y = make_checkerboard(600, random_state=0)
    Xd = da.from_array(X, chunks=(200, 2)).map_blocks(_poison, dtype=X.dtype)
    old = lc.scheduler.allowed_failures
    lc.scheduler.allowed_failures = 0
    try:
        with pytest.raises(DistributedFitError, match="lost the workers"):
            gd.fit_llsvm(_llsvm(), Xd, da.from_array(y, chunks=200), client=client)
    finally:
        lc.scheduler.allowed_failures = old
        client.wait_for_workers(2, timeout=60)


def test_old_module_name_warns_and_still_works():
    """``gpuksvm.distributed`` is a deprecated alias of ``gpuksvm.scaleout`` for one release."""
    import importlib
    import sys

    sys.modules.pop("gpuksvm.distributed", None)
    with pytest.warns(FutureWarning, match="gpuksvm.distributed"):
        old = importlib.import_module("gpuksvm.distributed")
    assert old.fit_llsvm is gd.fit_llsvm and old.fit_svi is gd.fit_svi and old.fit_cvm is gd.fit_cvm
    X = np.random.default_rng(0).normal(size=(120, 2))
    y = (X[:, 0] > 0).astype(int)
    est = _llsvm(dtype=np.float64).fit(X, y)
    out = old.predict(est, da.from_array(X, chunks=(40, 2)))
    assert isinstance(out, da.Array)
    np.testing.assert_array_equal(out.compute(), est.predict(X))
