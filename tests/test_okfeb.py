"""Tests of OK-FEB (SPEC §4) and its online learners."""
from __future__ import annotations

import pickle
import tracemalloc
from dataclasses import replace

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpuksvm.datasets import make_two_spheres, sphere_to_spheroid_stream
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.estimators.okfeb import OKFEB, OKFEBClassifier, OKFEBRegressor, windowed_kernel_error
from gpuksvm.solvers.linear.online import Pegasos, RandomFourierFeatures, RegularizedLMS


@pytest.fixture(scope="module")
def spheres():
    X, y = make_two_spheres(1200, random_state=0)
    return X, y


# --------------------------------------------------------------------------- Alg. 1
def test_batch_objective_monotone(spheres):
    X = spheres[0][:200]
    fe = OKFEB(gamma=1.0, rank=6, mode="batch", max_iter=15, tol=0, device="cpu", random_state=0).fit(X)
    h = np.asarray(fe.objective_history_)
    assert len(h) == 15
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))
    assert h[-1] < 0.8 * h[0]


def test_features_closed_form(spheres):
    """q = (AᵀKA + λI)⁻¹Aᵀk and the error formula against explicit kernel algebra."""
    X = spheres[0][:200]
    fe = OKFEB(gamma=1.0, rank=5, n_landmarks=20, censor=0.0, device="cpu", random_state=0).fit(X)
    S, A, lam = fe.stored_vectors_, fe.A_, fe.reg
    K = kernel_block(S, S, fe.kernel_)
    np.testing.assert_allclose(fe.stored_gram_, K, atol=1e-12)
    Kx = kernel_block(X[:7], S, fe.kernel_)
    Q = np.linalg.solve(A.T @ K @ A + lam * np.eye(5), A.T @ Kx.T).T
    np.testing.assert_allclose(fe.transform(X[:7]), Q, rtol=1e-8, atol=1e-10)
    e = 1 - 2 * np.einsum("ij,ij->i", Q, Kx @ A) + np.einsum("ij,ij->i", Q @ (A.T @ K @ A), Q)
    np.testing.assert_allclose(fe.fitting_error(X[:7]), np.maximum(e, 0), atol=1e-10)


# --------------------------------------------------------------------------- Alg. 2 / 3
@pytest.mark.parametrize("mode", ["parametric", "nonparametric"])
def test_online_approaches_batch_cost(spheres, mode):
    X = spheres[0]
    batch = OKFEB(gamma=1.0, rank=6, mode="batch", max_iter=20, device="cpu", random_state=0).fit(X[:400])
    ref = batch.fitting_error(X[600:]).mean()
    fe = OKFEB(gamma=1.0, rank=6, mode=mode, step_size=0.5, shuffle=False, device="cpu",
               random_state=0).fit(X[:400])
    err = fe.fitting_error(X[600:]).mean()
    assert err < 1.12 * ref
    # the running (prequential) LS error falls as the stream goes on
    e = fe.last_errors_
    assert e[300:].mean() < e[:100].mean()
    assert fe.n_stored_ == 400 and fe.censor_rate_ == 0.0


# --------------------------------------------------------------------------- budget & censoring
@pytest.mark.parametrize("batch_size", [1, 3])
def test_budget_never_exceeded(spheres, batch_size):
    X = spheres[0]
    fe = OKFEB(gamma=1.0, rank=5, n_landmarks=12, censor=0.0, batch_size=batch_size, device="cpu",
               random_state=0)
    for s in range(0, 600, 50):
        fe.partial_fit(X[s:s + 50])
        assert fe.n_stored_ <= 12
        assert fe.A_.shape == (fe.n_stored_, 5)
        assert len(np.unique(fe.support_)) == fe.n_stored_
    np.testing.assert_allclose(fe.stored_vectors_, X[fe.support_])
    assert fe.n_seen_ == 600 and fe.budget_use_ == 1.0


def test_censor_rate_rises_with_eps(spheres):
    X = spheres[0][:800]
    rates = [OKFEB(gamma=1.0, rank=5, n_landmarks=15, censor=eps, device="cpu", random_state=0).fit(X).censor_rate_
             for eps in (0.0, 0.3, 0.5, 0.7)]
    assert rates[0] == 0.0
    assert all(b > a for a, b in zip(rates, rates[1:])), rates


def test_auto_censor_hits_target(spheres):
    X = spheres[0]
    fe = OKFEB(gamma=1.0, rank=5, n_landmarks=15, censor="auto", target_censor_rate=0.7, device="cpu",
               random_state=0).fit(np.vstack([X, X]))
    assert 0.6 < fe.censor_rate_ < 0.75
    assert fe.censor_threshold_ > 0


def _crafted(forget):
    X = np.arange(12.0).reshape(4, 3) / 10.0
    fe = OKFEB(gamma=1.0, rank=2, n_landmarks=4, forget=forget, device="cpu", random_state=0)
    fe.partial_fit(X)                                    # the first min(r, B)=2 rows + 2 updates
    assert fe.n_stored_ == 4 and list(fe.support_) == [0, 1, 2, 3]
    fe.subspace_.A[:4] = np.array([[3.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 4.0]])  # row norms 3, 1, 2, 4
    fe.subspace_.maintain_budget(3)
    return sorted(fe.support_.tolist())


def test_min_norm_rule_beta_one():
    assert _crafted(1.0) == [0, 2, 3]            # the row of smallest norm (index 1) goes


def test_recency_rule_small_beta():
    assert _crafted(0.05) == [1, 2, 3]           # rᵢ = β³, β², β, 1: the oldest goes


def test_tracking_jump_and_recovery():
    """Sphere → spheroid at t=2000 (paper Figs. 4–5), tight budget (B=8, r=5)."""
    X = sphere_to_spheroid_stream(4000, change_at=2000, noise=0.01, random_state=0)
    post = {}
    for beta in (1.0, 0.5):
        fe = OKFEB(gamma=1.0, rank=5, n_landmarks=8, censor=0.01, forget=beta, step_size=1.0,
                   shuffle=False, device="cpu", random_state=0).fit(X)      # a stream: keep its order
        w = fe.last_errors_.reshape(-1, 200).mean(axis=1)      # windows of 200 as in Fig. 5
        before, after = w[5:10].mean(), w[10]
        assert after > 1.15 * before                             # the change shows as a jump
        post[beta] = w[10:].mean()
        if beta < 1:
            assert w[-5:].mean() < after                         # and the error comes down again
    assert post[0.5] < 0.95 * post[1.0]                          # better tracking with smaller β


def test_memory_flat_over_long_stream():
    """1,000,000 rows in blocks of 50,000: the peak memory of a block does not grow."""
    rng = np.random.default_rng(0)
    fe = OKFEB(gamma=0.5, rank=2, n_landmarks=4, target_censor_rate=0.995, device="cpu", random_state=0)
    chunk = rng.normal(size=(50_000, 3))
    traced = (1, 2, 17, 18, 19)               # tracing every block would triple the run time
    peaks = []
    for i in range(20):
        if i in traced:
            tracemalloc.start()
        fe.partial_fit(chunk[::-1] if i % 2 else chunk)
        if i in traced:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    assert fe.n_seen_ == 1_000_000 and fe.n_updates_ > 1000
    assert max(peaks[2:]) <= 1.05 * max(peaks[:2]) + 16384, peaks
    st = fe.subspace_
    assert st.S.shape[0] <= 5 and st.K.shape == (st.S.shape[0],) * 2
    assert fe.n_stored_ == 4


# --------------------------------------------------------------------------- outputs
def test_kernel_output_inner_products(spheres):
    X = spheres[0]
    fe = OKFEB(gamma=1.0, rank=30, n_landmarks=60, censor=0.0, output="kernel", shuffle=False, device="cpu",
               random_state=0).fit(X)
    Z = fe.transform(X[:300])
    q = OKFEB(**{**fe.get_params(), "output": "features"})
    assert Z.shape == (300, 30)
    err = windowed_kernel_error(X[:300], Z, fe.kernel_, window=100)
    assert err == pytest.approx(fe.kernel_approximation_error(X[:300], window=100))
    assert err < 0.2
    assert q.get_params()["output"] == "features"


@pytest.mark.parametrize("kw", [dict(), dict(forget=0.6), dict(censor=0.3), dict(mode="nonparametric"),
                                dict(kernel="poly", gamma=0.5, degree=2, coef0=1.0), dict(step_decay=0.7, step_size=2.0)])
def test_host_step_matches_general_path(spheres, kw):
    """The in-place per-sample host step (rank-one updates, running row sums, inlined budget
    maintenance, vectorized censoring) gives the state of the general _add path."""
    X = spheres[0][:700]
    kw = {"gamma": 1.0, **kw}
    a = OKFEB(rank=6, n_landmarks=20, device="cpu", random_state=0, **kw)
    b = OKFEB(rank=6, n_landmarks=20, device="cpu", random_state=0, **kw)
    Qa = a.partial_fit_transform(X)
    b._reset(X)                                   # the same state, streamed by the general path
    Qb = b.subspace_.stream(X, replace(b.subspace_params(), host_step=False), "features")
    assert a.n_updates_ == b.n_updates_ and a.n_updates_ > 40
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.A_, b.A_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(Qa, Qb, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.last_errors_, b.last_errors_, rtol=1e-8, atol=1e-10)
    assert a.censor_rate_ == b.censor_rate_
    # the running Gershgorin row sums are those of the stored Gram matrix
    np.testing.assert_allclose(a.subspace_.ra[:a.n_stored_], np.abs(a.stored_gram_).sum(axis=1), rtol=1e-10)


def test_censor_scan_matches_per_row_rule():
    """The vectorized censoring of a run of rows equals the row-by-row rule (ε = θ·ē)."""
    rng = np.random.default_rng(0)
    fe = OKFEB(gamma=1.0, rank=2, n_landmarks=3, target_censor_rate=0.7, device="cpu")
    fe.fit(rng.normal(size=(50, 2)))
    ref = OKFEB(**fe.get_params()).fit(rng.normal(size=(50, 2)))
    st, rst, p = fe.subspace_, ref.subspace_, fe.subspace_params()
    for attr in ("theta", "ema", "n_censored", "m"):
        setattr(rst, attr, getattr(st, attr))
    e = rng.exponential(st.ema, size=400)
    pos, decisions = 0, []
    while pos < len(e):
        j, eps = st.censor_scan(p, e[pos:])
        if j < 0:
            decisions += [True] * (len(e) - pos)
            break
        decisions += [True] * j + [False]
        pos += j + 1
    expected = [rst.threshold(p, float(v))[1] for v in e]
    assert decisions == expected
    assert 0 < sum(decisions) < len(e)
    assert st.theta == pytest.approx(rst.theta, rel=1e-12)
    assert st.ema == pytest.approx(rst.ema, rel=1e-12)


def test_partial_fit_transform_is_prequential(spheres):
    X = spheres[0][:300]
    a = OKFEB(gamma=1.0, rank=5, n_landmarks=15, device="cpu", random_state=0)
    Q = a.partial_fit_transform(X)
    b = OKFEB(gamma=1.0, rank=5, n_landmarks=15, device="cpu", random_state=0)
    b.partial_fit(X[:150])
    np.testing.assert_allclose(Q[150], b.transform(X[150:151])[0], rtol=1e-10, atol=1e-12)
    c = OKFEB(gamma=1.0, rank=5, n_landmarks=15, shuffle=False, device="cpu", random_state=0).fit(X)
    np.testing.assert_allclose(a.A_, c.A_)                 # chunked == one call
    # output="kernel": z = C^{1/2}q with the C of the state the row met
    k = OKFEB(gamma=1.0, rank=5, n_landmarks=15, output="kernel", device="cpu", random_state=0)
    Z = k.partial_fit_transform(X)
    np.testing.assert_allclose(Z[150], b.set_params(output="kernel").transform(X[150:151])[0],
                               rtol=1e-10, atol=1e-12)


def test_bad_input_and_params(spheres):
    X = spheres[0][:50]
    with pytest.raises(ValueError):
        OKFEB(rank=0).fit(X)
    with pytest.raises(ValueError):
        OKFEB(forget=0.0).fit(X)
    with pytest.raises(ValueError):
        OKFEB(censor="often").fit(X)
    with pytest.raises(ValueError):
        OKFEB(mode="batch").partial_fit(X)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        OKFEB(device="cpu").fit(Xn)
    fe = OKFEB(gamma=1.0, rank=3, n_landmarks=6, device="cpu").fit(X)
    with pytest.raises(ValueError, match="features"):
        fe.transform(X[:, :2])
    X0 = X.copy()
    fe.partial_fit(X)
    np.testing.assert_array_equal(X, X0)


def test_reproducible_and_pickle(spheres):
    X = spheres[0][:400]
    a = OKFEB(gamma=1.0, rank=5, n_landmarks=15, device="cpu", random_state=3).fit(X)
    b = OKFEB(gamma=1.0, rank=5, n_landmarks=15, device="cpu", random_state=3).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.transform(X), c.transform(X))


# --------------------------------------------------------------------------- learners
def test_classifier_two_spheres_pipeline():
    X, y = make_two_spheres(3000, noise=0.1, random_state=0)
    Xt, yt = make_two_spheres(1000, noise=0.1, random_state=1)
    clf = OKFEBClassifier(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0)
    pipe = make_pipeline(StandardScaler(with_std=False), clf).fit(X, y)
    assert pipe.score(Xt, yt) > 0.9
    inc = OKFEBClassifier(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0)
    for s in range(0, 3000, 500):
        inc.partial_fit(X[s:s + 500], y[s:s + 500], classes=[-1.0, 1.0])
    assert inc.score(Xt, yt) > 0.9
    assert inc.n_seen_ == 3000


def test_classifier_multiclass_and_labels():
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [3, 0], [0, 3]])
    lab = rng.integers(0, 3, 1500)
    X = centers[lab] + rng.normal(scale=0.5, size=(1500, 2))
    y = np.array(["a", "b", "c"])[lab]
    clf = OKFEBClassifier(gamma=0.5, rank=10, n_landmarks=30, device="cpu", random_state=0).fit(X, y)
    assert set(clf.predict(X[:20])) <= {"a", "b", "c"}
    assert clf.score(X, y) > 0.9
    assert clf.decision_function(X[:4]).shape == (4, 3)
    with pytest.raises(ValueError):
        OKFEBClassifier().fit(X, np.zeros(1500))


def test_regressor_sine():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(4000, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2
    reg = OKFEBRegressor(gamma=0.5, rank=20, n_landmarks=60, learning_rate=0.2, device="cpu",
                         random_state=0).fit(X, y)
    assert reg.score(X, y) > 0.8
    assert reg.coef_.shape == (20,)


def test_online_solvers():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 4))
    y = np.where(X @ [1.0, -1.0, 0.5, 0.0] > 0.2, 1.0, -1.0)
    p = Pegasos(4, 1, lam=1e-3).partial_fit(X, y[:, None])
    assert np.mean(np.sign(p.decision_function(X)[:, 0]) == y) > 0.95
    # closed form: w = G/(λt) with G the sum of violators
    assert p.t == 2000 and p.coef.shape == (5, 1)
    m = RegularizedLMS(4, step=0.5, alpha=0.0).partial_fit(X, X @ [1.0, 2.0, 3.0, 4.0] - 1)
    np.testing.assert_allclose(m.w, [1, 2, 3, 4, -1], atol=1e-6)
    rff = RandomFourierFeatures(4, 3000, gamma=0.2, random_state=0)
    Z = rff.transform(X[:50])
    K = kernel_block(X[:50], None, Kernel("rbf", 0.2))
    assert np.abs(Z @ Z.T - K).max() < 0.15


# --------------------------------------------------------------------------- sklearn


# --------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["budget", "batch"])
def test_gpu_matches_cpu(gpu, spheres, mode):
    X = spheres[0][:400]
    kw = dict(gamma=1.0, rank=6, n_landmarks=20, censor=0.05, mode=mode, max_iter=10, dtype=np.float64,
              random_state=0)
    a = OKFEB(device="cpu", **kw).fit(X)
    b = OKFEB(device="gpu", **kw).fit(gpu.asarray(X))
    np.testing.assert_allclose(gpu.asnumpy(b.transform(gpu.asarray(X))), a.transform(X),
                               rtol=1e-6, atol=1e-8)
    assert a.n_updates_ == b.n_updates_
    c = pickle.loads(pickle.dumps(b))
    np.testing.assert_allclose(c.transform(X), a.transform(X), rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- row order, capacity (issue 15)
def _imbalanced_spheres(n=1500, seed=0):
    """Two spheres, two thirds of the rows in class +1 (the issue's binary set had 66.7 %)."""
    X, y = make_two_spheres(2 * n, noise=0.1, random_state=seed)
    keep = np.concatenate([np.flatnonzero(y > 0)[:2 * n // 3], np.flatnonzero(y < 0)[:n // 3]])
    return X[keep], y[keep]


def _digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("data", ["spheres_2to1", "digits"])
def test_classifier_above_majority_on_label_sorted_rows(data):
    """Rows sorted by label (as LIBSVM files often are) made the one-pass classifier predict the
    last class: 33.6 % on a binary set whose majority class had 66.7 % (issue 15)."""
    X, y = _imbalanced_spheres() if data == "spheres_2to1" else _digits()
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]
    tr = np.arange(len(y)) % 4 != 0                     # every 4th row held out (all classes)
    majority = np.max(np.unique(ys[tr], return_counts=True)[1]) / tr.sum()
    # digits: rank 20 on 60 landmarks scores about as a linear model on the raw pixels (0.91 vs
    # 0.92, 2-fold CV, over the random_state), so the capacity check may flag it; rank 30 is above
    rank, k = (30, 100) if data == "digits" else (20, 60)
    clf = OKFEBClassifier(rank=rank, n_landmarks=k, device="cpu", random_state=0).fit(Xs[tr], ys[tr])
    assert clf.score(Xs[~tr], ys[~tr]) > majority + 0.1 + (0.5 if data == "digits" else 0.0)
    assert not clf.budget_too_small_


@pytest.mark.parametrize("Est", [OKFEB, OKFEBClassifier, OKFEBRegressor])
def test_fit_does_not_depend_on_the_row_order(Est):
    """The same rows shuffled or sorted by target give the same model with the same random_state."""
    X, y = _imbalanced_spheres(900)
    target = X[:, 0] ** 2 + y if Est is OKFEBRegressor else y
    rng = np.random.default_rng(1)
    orders = {"shuffled": rng.permutation(len(y)), "sorted": np.argsort(target, kind="stable")}
    out = {}
    for name, p in orders.items():
        est = Est(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0)
        est.fit(X[p]) if Est is OKFEB else est.fit(X[p], target[p])
        out[name] = est.transform(X) if Est is OKFEB else (
            est.predict(X) if Est is OKFEBRegressor else est.decision_function(X))
        if Est is OKFEB:       # support_ and last_errors_ refer to the rows as given
            np.testing.assert_array_equal(est.stored_vectors_, X[p][est.support_])
            out[name + "_errors"] = est.last_errors_[np.argsort(p)]
    np.testing.assert_allclose(out["shuffled"], out["sorted"], rtol=1e-9, atol=1e-9)
    if Est is OKFEB:
        np.testing.assert_allclose(out["shuffled_errors"], out["sorted_errors"], rtol=1e-9, atol=1e-12)


def test_partial_fit_keeps_the_given_order():
    """partial_fit is a stream: the rows are processed in the order given (fit shuffles)."""
    from gpuksvm.estimators.okfeb import BudgetTooSmallWarning

    X, y = _imbalanced_spheres(600)
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]
    kw = dict(gamma=1.0, rank=5, n_landmarks=15, device="cpu", random_state=0)
    inc = OKFEBClassifier(**kw)
    for s in range(0, len(ys), 150):
        inc.partial_fit(Xs[s:s + 150], ys[s:s + 150], classes=[-1.0, 1.0])
    ext = OKFEB(shuffle=False, **kw).fit(Xs)                            # the extractor's stream
    np.testing.assert_array_equal(inc.extractor_.support_, ext.support_)
    np.testing.assert_allclose(inc.extractor_.A_, ext.A_, rtol=1e-10, atol=1e-12)
    # the same stream through fit: the same model, and the check sees it is no better than a constant
    with pytest.warns(BudgetTooSmallWarning, match="not above a constant predictor"):
        one = OKFEBClassifier(solver="online", shuffle=False, **kw).fit(Xs, ys)
    np.testing.assert_allclose(inc.decision_function(X), one.decision_function(X), rtol=1e-10, atol=1e-12)
    # the sorted stream kept stored vectors of the first class only; fit (shuffled) keeps both
    assert set(ys[inc.extractor_.support_]) == {-1.0}
    shuffled = OKFEBClassifier(solver="online", **kw).fit(Xs, ys)
    assert set(ys[shuffled.extractor_.support_]) == {-1.0, 1.0}
    assert shuffled.score(X, y) > 0.75             # majority: 2/3


def test_budget_too_small_warns():
    """A rank too small for the data: the features lose to a linear model on the raw features.
    The fit says so (warning + budget_too_small_ + capacity_check_) instead of staying silent."""
    from gpuksvm.estimators.okfeb import BudgetTooSmallWarning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 20))
    y = np.where(X @ rng.normal(size=20) > 0, 1, 0)             # linear in 20 directions
    with pytest.warns(BudgetTooSmallWarning, match="linear model on the raw features"):
        clf = OKFEBClassifier(rank=2, n_landmarks=6, device="cpu", random_state=0).fit(X, y)
    chk = clf.capacity_check_
    assert clf.budget_too_small_ and chk["checked"] and chk["too_small"]
    assert chk["features_score"] <= chk["linear_score"] and chk["rows"] == 1500
    with pytest.warns(BudgetTooSmallWarning):
        reg = OKFEBRegressor(rank=2, n_landmarks=6, device="cpu", random_state=0).fit(X, X @ np.ones(20))
    assert reg.budget_too_small_ and reg.capacity_check_["metric"] == "r2"
    # where the budget suffices nothing is said
    Xs, ys = make_two_spheres(1500, noise=0.1, random_state=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetTooSmallWarning)
        ok = OKFEBClassifier(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0).fit(Xs, ys)
    assert not ok.budget_too_small_
    assert ok.capacity_check_["features_score"] > ok.capacity_check_["linear_score"] + 0.3


# --------------------------------------------------------------------------- memory budget
def _raise_memory_error_above(monkeypatch, rows: int) -> list:
    """kernel_matvec of the features raises MemoryError for blocks of more than ``rows`` rows
    (what an out-of-memory device does); returns the block sizes it was called with."""
    import gpuksvm.solvers.okfeb.subspace as subspace_mod

    real, sizes = subspace_mod.kernel_matvec, []

    def limited(X, *args, **kwargs):
        sizes.append(X.shape[0])
        if X.shape[0] > rows:
            raise MemoryError(f"test: {X.shape[0]} rows")
        return real(X, *args, **kwargs)

    monkeypatch.setattr(subspace_mod, "kernel_matvec", limited)
    return sizes


@pytest.mark.parametrize("Est", [OKFEBClassifier, OKFEBRegressor])
def test_fit_features_retried_smaller_out_of_memory(monkeypatch, Est):
    """Blocks of the final features that run out of memory are retried smaller: the same model,
    one MemoryFallbackWarning for the fit, memory_fallback_ says so (None without a retry)."""
    import warnings

    from gpuksvm.array.backend import MemoryFallbackWarning

    X, y = make_two_spheres(300, noise=0.1, random_state=0)
    kw = dict(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0)
    ref = Est(**kw).fit(X, y)
    assert ref.memory_fallback_ is None
    sizes = _raise_memory_error_above(monkeypatch, 100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = Est(**kw).fit(X, y)
    fallbacks = [w for w in caught if issubclass(w.category, MemoryFallbackWarning)]
    assert len(fallbacks) == 1 and est.memory_fallback_ == "feature_blocks"
    assert max(sizes) == X.shape[0] and sizes[-1] <= 100
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    got = est.decision_function(X) if Est is OKFEBClassifier else est.predict(X)
    want = ref.decision_function(X) if Est is OKFEBClassifier else ref.predict(X)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)



def test_fits_on_two_threads_each_warn_once_for_their_own_retries(monkeypatch):
    """Two OK-FEB fits at once on two threads (a model search's n_jobs on threads), both retrying
    blocks that run out of memory, whose warning blocks overlap out of nesting order (the first
    ends while the second runs): each fit issues its one MemoryFallbackWarning in its own thread
    and sets memory_fallback_; no warnings state is shared between them (Python's warnings
    filters are process-wide, so catching warnings in a fit could swallow the other's)."""
    import threading
    import warnings

    import gpuksvm.solvers.okfeb.subspace as subspace_mod
    from gpuksvm.array.backend import MemoryFallbackWarning

    X, y = make_two_spheres(300, noise=0.1, random_state=0)
    kw = dict(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0)
    ref = OKFEBClassifier(**kw).fit(X, y)
    real = subspace_mod.kernel_matvec
    first_in, second_in, first_done = threading.Event(), threading.Event(), threading.Event()

    def limited(Xb, *args, **kwargs):
        if Xb.shape[0] > 100:
            if threading.current_thread().name == "first":
                first_in.set()
                second_in.wait(30)            # both fits are inside their warning blocks
            else:
                second_in.set()
                first_done.wait(30)           # the first fit ends while the second still runs
            raise MemoryError(f"test: {Xb.shape[0]} rows")
        return real(Xb, *args, **kwargs)

    monkeypatch.setattr(subspace_mod, "kernel_matvec", limited)
    seen, fitted, lock = [], {}, threading.Lock()

    def record(message, category, *args, **kwargs):
        with lock:
            seen.append((threading.current_thread().name, category))

    def fit(name):
        if name == "second":
            first_in.wait(30)
        fitted[name] = OKFEBClassifier(**kw).fit(X, y)
        if name == "first":
            first_done.set()

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        threads = [threading.Thread(target=fit, args=(name,), name=name) for name in ("first", "second")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    for name in ("first", "second"):
        assert fitted[name].memory_fallback_ == "feature_blocks"
        np.testing.assert_allclose(fitted[name].coef_, ref.coef_, rtol=1e-10, atol=1e-12)
        assert [c for n, c in seen if n == name and issubclass(c, MemoryFallbackWarning)] \
            == [MemoryFallbackWarning], (name, seen)


def test_transform_in_blocks_of_the_budget():
    """transform in row blocks sized from the budget gives the features of one block; a budget
    smaller than one row is an error naming the minimum."""
    from gpuksvm.array import backend as bk

    X, _ = make_two_spheres(500, random_state=0)
    fe = OKFEB(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0).fit(X)
    ref = fe.transform(X)
    st = fe.subspace_
    assert st.output_block_rows(500, X.shape[1]) == 500
    with bk.config_context(cpu_memory_budget=20_000):
        assert st.output_block_rows(500, X.shape[1]) < 100
        np.testing.assert_allclose(fe.transform(X), ref, rtol=1e-12, atol=1e-13)
    with bk.config_context(cpu_memory_budget=100), pytest.raises(bk.MemoryBudgetError,
                                                                   match="OK-FEB's feature blocks"):
        fe.transform(X)
