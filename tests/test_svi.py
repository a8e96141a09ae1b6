"""Tests of gpuksvm.svi (SVI, SPEC §3).  Reference: scikit-learn's SVC."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC

from gpuksvm.datasets import make_two_sines
from gpuksvm.multiclass import ovr_decision_function
from gpuksvm.svi import SVI, closed_form_beta, draw_subsets, select_margin_rows


# --------------------------------------------------------------------------- subsets
def test_draw_subsets_disjoint_stratified_and_reproducible():
    labels = np.r_[np.zeros(900, int), np.ones(80, int), np.full(20, 2)]
    subs = draw_subsets(labels, 5, 0.1, stratify=True, random_state=3)
    assert len(subs) == 5
    allrows = np.concatenate(subs)
    assert np.unique(allrows).size == allrows.size  # pairwise disjoint
    for S in subs:
        assert np.all(np.diff(S) > 0)
        counts = np.bincount(labels[S], minlength=3)
        np.testing.assert_array_equal(counts, [90, 8, 2])  # θ·n_c of every class
    again = draw_subsets(labels, 5, 0.1, stratify=True, random_state=3)
    for a, b in zip(subs, again):
        np.testing.assert_array_equal(a, b)
    other = draw_subsets(labels, 5, 0.1, stratify=True, random_state=4)
    assert any(not np.array_equal(a, b) for a, b in zip(subs, other))


def test_draw_subsets_tiny_class_and_unstratified():
    labels = np.r_[np.zeros(200, int), np.ones(3, int)]
    subs = draw_subsets(labels, 5, 0.2, stratify=True, random_state=0)
    allrows = np.concatenate(subs)
    assert np.unique(allrows).size == allrows.size
    # three rows of class 1 → three subsets hold one each, at least one row per subset of class 0
    assert sorted(int(np.sum(labels[S] == 1)) for S in subs) == [0, 0, 1, 1, 1]
    assert all(np.sum(labels[S] == 0) == 40 for S in subs)
    subs = draw_subsets(labels, 4, 0.25, stratify=False, random_state=0)
    # round(0.25·203) = 51 rows would not fit 4 times: 50 each
    assert [S.size for S in subs] == [50, 50, 50, 50]
    assert np.unique(np.concatenate(subs)).size == 200
    with pytest.raises(ValueError, match="disjoint"):
        draw_subsets(labels, 5, 0.3)


# --------------------------------------------------------------------------- margin rule
def test_select_margin_rows_rule_and_guards():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(500) < 0.5, 1.0, -1.0)
    margin = rng.normal(1.0, 0.5, 500)
    rows, info = select_margin_rows(margin, y, 0.2, min_sv=4, max_sv=None)
    inband = np.flatnonzero(np.abs(margin - 1) <= 0.2)
    np.testing.assert_array_equal(rows, inband)
    assert info["guard"] is None and info["n_candidates"] == inband.size
    # too many: the closest max_sv rows
    rows, info = select_margin_rows(margin, y, 0.2, min_sv=4, max_sv=50)
    assert rows.size == 50 and info["guard"] == "max"
    far = np.abs(margin[np.setdiff1d(inband, rows)] - 1)
    assert far.min() >= np.abs(margin[rows] - 1).max()
    # too few: the closest min_sv rows, whatever τ says
    rows, info = select_margin_rows(margin, y, 0.0, min_sv=20, max_sv=100)
    assert rows.size >= 20 and info["guard"] in ("min", "class")
    closest = np.argsort(np.abs(margin - 1), kind="stable")[:20]
    assert set(closest.tolist()) <= set(rows.tolist())
    assert min(np.sum(y[rows] > 0), np.sum(y[rows] < 0)) >= 10  # min_sv // 2 per class
    # one class missing from the band: its closest rows are added
    y2 = np.r_[np.ones(10), -np.ones(10)]
    m2 = np.r_[np.full(10, 1.0), np.full(10, 3.0) + np.arange(10)]
    rows, info = select_margin_rows(m2, y2, 0.1, min_sv=6, max_sv=None)
    assert info["guard"] == "class"
    assert set(range(10)) <= set(rows.tolist()) and {10, 11, 12} <= set(rows.tolist())


# --------------------------------------------------------------------------- closed form
@pytest.mark.parametrize("C", [0.5, 10.0])
def test_closed_form_satisfies_eqs_6_to_9(C):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = np.where(rng.random(60) < 0.4, 1.0, -1.0)
    K = rbf_kernel(X, gamma=0.7)
    beta, b = closed_form_beta(K.copy(), y.copy(), C)
    s = y.size
    one = np.ones(s)
    Pi = np.eye(s) - np.outer(one, one) / s
    # eq. (6): ∂Q/∂b = 2C 1ᵀ(Kβ + 1b − y) = 0 ;  eq. (7): b = 1ᵀ(y − Kβ)/s
    assert abs(2 * C * one @ (K @ beta + b - y)) <= 1e-8
    assert abs(b - np.mean(y - K @ beta)) <= 1e-12
    # eq. (8): ∂Q/∂β = Kβ + 2C Kᵀ(Kβ + 1b − y) = 0
    assert np.max(np.abs(K @ beta + 2 * C * K.T @ (K @ beta + b - y))) <= 1e-8
    # eq. (9): (I/(2C) + ΠK) β = Π y
    assert np.max(np.abs((np.eye(s) / (2 * C) + Pi @ K) @ beta - Pi @ y)) <= 1e-8
    # independent check: the equivalent bordered (LS-SVM) system
    A = np.block([[K + np.eye(s) / (2 * C), one[:, None]], [one[None, :], np.zeros((1, 1))]])
    sol = np.linalg.solve(A, np.r_[y, 0.0])
    np.testing.assert_allclose(beta, sol[:s], atol=1e-9)
    assert abs(b - sol[s]) <= 1e-9


def test_ovr_decision_function_argmax_is_vote_winner():
    rng = np.random.default_rng(0)
    dec = rng.normal(size=(200, 6))  # 4 classes → 6 pairs
    scores = ovr_decision_function(dec, 4)
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    votes = np.zeros((200, 4))
    for k, (i, j) in enumerate(pairs):
        votes[:, i] += dec[:, k] > 0
        votes[:, j] += dec[:, k] <= 0
    best = np.argmax(scores, axis=1)
    assert np.all(votes[np.arange(200), best] == votes.max(axis=1))


# --------------------------------------------------------------------------- estimator
def _two_sines(n=1200, seed=0):
    return make_two_sines(n, noise=0.35, random_state=seed)


def _ensemble_margins(est, X, y):
    """y f̄ recomputed independently: the sub-SVMs re-solved, kernels by scikit-learn."""
    from gpuksvm.solvers.smo import solve_batched

    yp = np.where(y == est.classes_[1], 1.0, -1.0)
    res = solve_batched(X, yp, est.subsets_, est.kernel_, est.C, tol=est.tol, device="cpu")
    f = np.zeros(X.shape[0])
    for r in res:
        sup = np.asarray(r.support)
        f += rbf_kernel(X, X[sup], gamma=est.kernel_.gamma) @ np.asarray(r.dual_coef) + r.intercept
    return yp * f / len(res)


def test_fit_two_sines_margin_rule_and_solution():
    X, y = _two_sines()
    est = SVI(gamma=1.0, C=10.0, margin_tol=0.2, random_state=0, device="cpu").fit(X, y)
    assert est.sub_models_[0]["guard"] is None
    m = _ensemble_margins(est, X, y)
    sel = est.margin_support_[0]
    np.testing.assert_array_equal(sel, est.support_)
    np.testing.assert_array_equal(sel, np.flatnonzero(np.abs(m - 1) <= 0.2))
    # the model's β, b are eq. (9) and (7) on the selected rows
    K = rbf_kernel(X[sel], gamma=est.kernel_.gamma)
    ys = np.where(y[sel] > 0, 1.0, -1.0)
    beta = est.dual_coef_[0]
    s = sel.size
    lhs = beta / (2 * est.C) + (K - K.mean(axis=0)) @ beta
    assert np.max(np.abs(lhs - (ys - ys.mean()))) <= 1e-8
    assert abs(est.intercept_[0] - np.mean(ys - K @ beta)) <= 1e-8
    assert s == est.support_vectors_.shape[0]
    np.testing.assert_array_equal(est.support_vectors_, X[sel])
    np.testing.assert_array_equal(est.n_support_, [np.sum(y[sel] < 0), np.sum(y[sel] > 0)])


def test_two_sines_boundary_agrees_with_full_svm_with_fewer_svs():
    X, y = _two_sines(2000)
    svc = SVC(gamma=1.0, C=10.0).fit(X, y)
    est = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu").fit(X, y)
    g1, g2 = np.meshgrid(np.linspace(0, 4 * np.pi, 120), np.linspace(-2, 2, 60))
    grid = np.c_[g1.ravel(), g2.ravel()]
    agree = np.mean(est.predict(grid) == svc.predict(grid))
    assert agree >= 0.98, agree
    assert est.support_.size < svc.support_.size
    Xt, yt = _two_sines(2000, seed=1)
    assert est.score(Xt, yt) >= svc.score(Xt, yt) - 0.02


def test_reproducible_and_seed_dependent():
    X, y = _two_sines(800)
    a = SVI(gamma=1.0, C=10.0, random_state=7, device="cpu").fit(X, y)
    b = SVI(gamma=1.0, C=10.0, random_state=7, device="cpu").fit(X, y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    c = SVI(gamma=1.0, C=10.0, random_state=8, device="cpu").fit(X, y)
    assert not np.array_equal(a.subsets_[0], c.subsets_[0])
    allrows = np.concatenate(a.subsets_)
    assert np.unique(allrows).size == allrows.size == 5 * 80


def test_guards_cap_and_floor():
    X, y = _two_sines(800)
    capped = SVI(gamma=1.0, C=10.0, margin_tol=10.0, max_margin_sv=50, random_state=0,
                 device="cpu").fit(X, y)
    assert capped.support_.size == 50 and capped.sub_models_[0]["guard"] == "max"
    floor = SVI(gamma=1.0, C=10.0, margin_tol=0.0, min_margin_sv=30, random_state=0,
                device="cpu").fit(X, y)
    assert floor.support_.size >= 30 and floor.sub_models_[0]["guard"] in ("min", "class")
    assert floor.score(X, y) > 0.7


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_multiclass(multi_class):
    X, y = make_blobs(n_samples=600, centers=4, cluster_std=2.0, random_state=0)
    Xt, yt = make_blobs(n_samples=600, centers=4, cluster_std=2.0, random_state=0)
    labels = np.array(["a", "b", "c", "d"])[y]
    est = SVI(C=1.0, multi_class=multi_class, random_state=0, device="cpu").fit(X, labels)
    n_prob = 6 if multi_class == "ovo" else 4
    assert len(est.problems_) == n_prob == est.dual_coef_.shape[0] == est.intercept_.shape[0]
    assert est.dual_coef_.shape[1] == est.support_.size
    ref = SVC(C=1.0).fit(X, labels).score(X, labels)
    assert est.score(X, labels) >= ref - 0.03
    dec = est.decision_function(X)
    assert dec.shape == (600, 4)
    # default: LIBSVM's vote (ties to the lowest class); break_ties: the arg-max of dec
    votes = np.round(dec) if multi_class == "ovo" else dec
    np.testing.assert_array_equal(est.classes_[np.argmax(votes, axis=1)], est.predict(X))
    np.testing.assert_array_equal(est.classes_[np.argmax(dec, axis=1)],
                                  est.set_params(break_ties=True).predict(X))
    # every problem's rows come from its own classes
    for (pos, neg), rows in zip(est.problems_, est.margin_support_):
        if neg is not None:
            assert set(np.unique(y[rows])) <= {pos, neg}


def test_sparse_matches_dense_and_inputs_untouched():
    X, y = _two_sines(600)
    X0, y0 = X.copy(), y.copy()
    d = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu").fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    s = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu").fit(sp.csr_matrix(X), y)
    assert sp.issparse(s.support_vectors_)
    np.testing.assert_array_equal(d.support_, s.support_)
    np.testing.assert_allclose(d.decision_function(X), s.decision_function(sp.csr_matrix(X)),
                               atol=1e-7)


def test_pickle_roundtrip():
    X, y = _two_sines(600)
    est = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu").fit(X, y)
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict(X), est.predict(X))


def test_bad_input():
    X, y = _two_sines(200)
    with pytest.raises(ValueError, match="NaN"):
        Xn = X.copy()
        Xn[3, 1] = np.nan
        SVI(device="cpu").fit(Xn, y)
    with pytest.raises(ValueError, match="class"):
        SVI(device="cpu").fit(X, np.ones(200))
    with pytest.raises(ValueError, match="0 sample"):
        SVI(device="cpu").fit(X[:0], y[:0])
    est = SVI(gamma=1.0, random_state=0, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.ones((3, 5)))
    for kw, msg in [({"C": 0.0}, "C"), ({"n_subsets": 0}, "n_subsets"),
                    ({"subset_rate": 0.0}, "subset_rate"), ({"n_subsets": 5, "subset_rate": 0.3}, "disjoint"),
                    ({"margin_tol": -0.1}, "margin_tol"), ({"multi_class": "crammer"}, "multi_class"),
                    ({"min_margin_sv": 50, "max_margin_sv": 10}, "min_margin_sv"),
                    ({"max_margin_sv": 0}, "max_margin_sv"), ({"kernel": "spline"}, "kernel"),
                    ({"gamma": -1.0}, "gamma"), ({"stratify": "yes"}, "stratify")]:
        with pytest.raises(ValueError, match=msg):
            SVI(device="cpu", **kw).fit(X, y)


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(SVI(device="cpu", random_state=0))


@pytest.mark.gpu
def test_gpu_matches_cpu(gpu):
    X, y = _two_sines(1500)
    cpu = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu").fit(X, y)
    gp = SVI(gamma=1.0, C=10.0, random_state=0, device="gpu", dtype=np.float64).fit(X, y)
    for a, b in zip(cpu.subsets_, gp.subsets_):
        np.testing.assert_array_equal(a, b)
    # the sub-SVM solvers differ (CPU workers vs batched GPU SMO), so the margin
    # sets may differ by a few rows near the band's edge
    sc, sg = set(cpu.support_.tolist()), set(gp.support_.tolist())
    assert len(sc & sg) >= 0.9 * max(len(sc), len(sg))
    grid = np.c_[np.linspace(0, 4 * np.pi, 3000), np.tile(np.linspace(-2, 2, 30), 100)]
    assert np.mean(cpu.predict(grid) == gp.predict(grid)) >= 0.99
    out = gp.predict(gpu.asarray(X))
    assert type(out).__module__.startswith("cupy")
    # float32 default on the GPU
    g32 = SVI(gamma=1.0, C=10.0, random_state=0, device="gpu").fit(X, y)
    assert g32.dual_coef_.dtype == np.float32
    assert np.mean(g32.predict(X) == cpu.predict(X)) >= 0.99


def test_wider_band_keeps_more_rows_on_the_same_ensemble():
    X, y = _two_sines(800)
    est = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu")
    est._check_params()
    state = est._ensemble_stage(X, y)
    sizes = []
    for tau in (0.05, 0.2, 0.5):
        est._margin_stage(state, tau)
        sizes.append(est.support_.size)
        assert est.sub_models_[0]["n_candidates"] == est.support_.size
    assert sizes[0] < sizes[1] < sizes[2]


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_predict_proba(multi_class):
    X, y = make_blobs(n_samples=240, centers=3, cluster_std=2.5, random_state=1)
    est = SVI(C=1.0, probability=True, multi_class=multi_class, random_state=0,
              device="cpu").fit(X, y)
    P = est.predict_proba(X)
    assert P.shape == (240, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
    assert np.mean(est.classes_[np.argmax(P, axis=1)] == est.predict(X)) >= 0.9
    assert not hasattr(SVI(), "predict_proba") or not SVI().probability
    Xb, yb = _two_sines(400)
    pb = SVI(gamma=1.0, C=10.0, probability=True, random_state=0, device="cpu").fit(Xb, yb)
    p1 = pb.predict_proba(Xb)[:, 1]
    assert np.corrcoef(p1, pb.decision_function(Xb))[0, 1] > 0.8


def test_multiclass_ensemble_values_match_independent_recomputation():
    """f̄ of every one-vs-one problem (the single mat-vec with one column per
    problem) equals the mean of the pair's sub-SVM decision values, recomputed
    problem by problem with scikit-learn's kernel."""
    from gpuksvm.solvers.smo import solve_batched

    X, y = make_blobs(n_samples=450, centers=3, cluster_std=2.5, random_state=2)
    est = SVI(gamma=0.3, C=2.0, random_state=0, device="cpu")
    est._check_params()
    state = est._ensemble_stage(X, y)
    assert state["F"].shape == (450, 3)
    for p, (pos, neg) in enumerate(state["problems"]):
        subs = [S[(y[S] == pos) | (y[S] == neg)] for S in state["subsets"]]
        res = solve_batched(X, np.where(y == pos, 1.0, -1.0), subs, state["kernel"], est.C,
                            tol=est.tol, device="cpu")
        f = np.zeros(450)
        for r in res:
            f += rbf_kernel(X, X[np.asarray(r.support)], gamma=0.3) @ np.asarray(r.dual_coef) + r.intercept
        np.testing.assert_allclose(state["F"][:, p], f / len(res), atol=1e-8)


def test_single_threaded_small_solves_change_nothing(monkeypatch):
    import gpuksvm.svi as svi_mod

    X, y = make_blobs(n_samples=300, centers=3, cluster_std=2.0, random_state=0)
    est = SVI(C=1.0, random_state=0, device="cpu")
    est._check_params()
    state = est._ensemble_stage(X, y)
    est._margin_stage(state, 0.2)  # every s ≤ 512: one BLAS thread
    assert max(r.size for r in est.margin_support_) <= svi_mod._SERIAL_BLAS_MAX_S
    serial = (est.dual_coef_.copy(), est.intercept_.copy())
    monkeypatch.setattr(svi_mod, "_SERIAL_BLAS_MAX_S", 0)  # threaded BLAS as configured
    est._margin_stage(state, 0.2)
    np.testing.assert_allclose(est.dual_coef_, serial[0], atol=1e-10)
    np.testing.assert_allclose(est.intercept_, serial[1], atol=1e-10)
