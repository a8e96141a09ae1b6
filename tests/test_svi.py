"""Tests of gpuksvm.estimators.svi (SVI, SPEC §3).  Reference: scikit-learn's SVC."""
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from gpuksvm.datasets import load_dataset, make_two_sines, subsample
from gpuksvm.solvers.multiclass import ovr_decision_function
from gpuksvm.solvers.svi import algorithm as svi_solver
from gpuksvm.solvers.smo.engines import solve_batched
from gpuksvm.solvers.svi.steps import ensemble_check, plan_problem, row_order_keys
from gpuksvm.estimators.svi import (
    FITTED_ATTRIBUTES,
    SVI,
    ExactFallbackWarning,
    MarginCapWarning,
    closed_form_beta,
    draw_subsets,
    select_margin_rows,
)

#: the paper's algorithm: θ-subsets whatever their size, no ensemble check
PAPER = {"min_subset_rows": 0, "ensemble_check": False}


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


def _rank(X, seed):
    """The order-independent row order SVI gives its solvers (same draws as the fit)."""
    keys = row_order_keys(X, np.random.RandomState(seed))
    rank = np.empty(X.shape[0], np.int64)
    rank[np.lexsort((keys[:, 1], keys[:, 0]))] = np.arange(X.shape[0])
    return rank


def _ensemble_margins(est, X, y, seed=0):
    """y f̄ recomputed independently: the sub-SVMs re-solved, kernels by scikit-learn."""
    yp = np.where(y == est.classes_[1], 1.0, -1.0)
    rank = _rank(X, seed)
    subs = [S[np.argsort(rank[S])] for S in est.subsets_[0]]
    res = solve_batched(X, yp, subs, est.kernel_, est.C, tol=est.tol, device="cpu")
    f = np.zeros(X.shape[0])
    for r in res:
        sup = np.asarray(r.support)
        f += rbf_kernel(X, X[sup], gamma=est.kernel_.gamma) @ np.asarray(r.dual_coef) + r.intercept
    return yp * f / len(res)


def test_fit_two_sines_margin_rule_and_solution():
    X, y = _two_sines()
    est = SVI(gamma=1.0, C=10.0, margin_tol=0.2, random_state=0, device="cpu", **PAPER).fit(X, y)
    assert est.sub_models_[0]["guard"] is None and not est.solved_exactly_[0]
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
    est = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu", **PAPER).fit(X, y)
    g1, g2 = np.meshgrid(np.linspace(0, 4 * np.pi, 120), np.linspace(-2, 2, 60))
    grid = np.c_[g1.ravel(), g2.ravel()]
    agree = np.mean(est.predict(grid) == svc.predict(grid))
    assert agree >= 0.98, agree
    assert est.support_.size < svc.support_.size
    Xt, yt = _two_sines(2000, seed=1)
    assert est.score(Xt, yt) >= svc.score(Xt, yt) - 0.02


def test_reproducible_and_seed_dependent():
    X, y = _two_sines(800)
    a = SVI(gamma=1.0, C=10.0, random_state=7, device="cpu", **PAPER).fit(X, y)
    b = SVI(gamma=1.0, C=10.0, random_state=7, device="cpu", **PAPER).fit(X, y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    c = SVI(gamma=1.0, C=10.0, random_state=8, device="cpu", **PAPER).fit(X, y)
    assert not np.array_equal(a.subsets_[0][0], c.subsets_[0][0])
    allrows = np.concatenate(a.subsets_[0])
    assert np.unique(allrows).size == allrows.size == 5 * 80


def test_guards_cap_and_floor():
    X, y = _two_sines(800)
    with pytest.warns(MarginCapWarning, match="max_margin_sv=50"):
        capped = SVI(gamma=1.0, C=10.0, margin_tol=10.0, max_margin_sv=50, random_state=0,
                     device="cpu", **PAPER).fit(X, y)
    assert capped.support_.size == 50 and capped.sub_models_[0]["guard"] == "max"
    assert capped.margin_capped_.tolist() == [True]
    floor = SVI(gamma=1.0, C=10.0, margin_tol=0.0, min_margin_sv=30, random_state=0,
                device="cpu", **PAPER).fit(X, y)
    assert floor.support_.size >= 30 and floor.sub_models_[0]["guard"] in ("min", "class")
    assert floor.score(X, y) > 0.7


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_multiclass(multi_class):
    X, y = make_blobs(n_samples=600, centers=4, cluster_std=2.0, random_state=0)
    Xt, yt = make_blobs(n_samples=600, centers=4, cluster_std=2.0, random_state=0)
    labels = np.array(["a", "b", "c", "d"])[y]
    est = SVI(C=1.0, multi_class=multi_class, random_state=0, device="cpu", **PAPER).fit(X, labels)
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
    d = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu", **PAPER).fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    s = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu", **PAPER).fit(sp.csr_matrix(X), y)
    assert sp.issparse(s.support_vectors_)
    np.testing.assert_array_equal(d.support_, s.support_)
    np.testing.assert_allclose(d.decision_function(X), s.decision_function(sp.csr_matrix(X)),
                               atol=1e-7)


def test_pickle_roundtrip():
    X, y = _two_sines(600)
    est = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu", **PAPER).fit(X, y)
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
    with pytest.warns(ExactFallbackWarning):
        est = SVI(gamma=1.0, random_state=0, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.ones((3, 5)))
    for kw, msg in [({"C": 0.0}, "C"), ({"n_subsets": 0}, "n_subsets"),
                    ({"subset_rate": 0.0}, "subset_rate"), ({"n_subsets": 5, "subset_rate": 0.3}, "disjoint"),
                    ({"margin_tol": -0.1}, "margin_tol"), ({"multi_class": "crammer"}, "multi_class"),
                    ({"min_margin_sv": 50, "max_margin_sv": 10}, "min_margin_sv"),
                    ({"max_margin_sv": 0}, "max_margin_sv"), ({"kernel": "spline"}, "kernel"),
                    ({"gamma": -1.0}, "gamma"), ({"stratify": "yes"}, "stratify"),
                    ({"min_subset_rows": -1}, "min_subset_rows"),
                    ({"ensemble_check": "yes"}, "ensemble_check")]:
        with pytest.raises(ValueError, match=msg):
            SVI(device="cpu", **kw).fit(X, y)


@pytest.mark.gpu
def test_gpu_matches_cpu(gpu):
    X, y = _two_sines(1500)
    cpu = SVI(gamma=1.0, C=10.0, random_state=0, device="cpu", **PAPER).fit(X, y)
    gp = SVI(gamma=1.0, C=10.0, random_state=0, device="gpu", dtype=np.float64, **PAPER).fit(X, y)
    for a, b in zip(cpu.subsets_[0], gp.subsets_[0]):
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
    g32 = SVI(gamma=1.0, C=10.0, random_state=0, device="gpu", **PAPER).fit(X, y)
    assert g32.dual_coef_.dtype == np.float32
    assert np.mean(g32.predict(X) == cpu.predict(X)) >= 0.99


def _stages(est, X, y):
    """Steps 1–3 of ``est`` on (X, y): the solver's ensemble, as bench/studies/svi_margin_tol.py runs it."""
    est._check_params()
    X, y, classes, yidx, Xd, kernel, dev, dt = est._prepare(X, y)
    return svi_solver.ensemble_stage(X, Xd, yidx, kernel, est._solver_params(), dev, dt)


def test_wider_band_keeps_more_rows_on_the_same_ensemble():
    X, y = _two_sines(800)
    ens = _stages(SVI(gamma=1.0, C=10.0, random_state=0, device="cpu", **PAPER), X, y)
    sizes = []
    for tau in (0.05, 0.2, 0.5):
        model = svi_solver.margin_stage(ens, tau)
        sizes.append(model.support.size)
        assert model.sub_info[0]["n_candidates"] == model.support.size
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
    """The sub-model values of every one-vs-one problem (f̄ is their mean) equal
    the pair's sub-SVMs re-solved one by one, with scikit-learn's kernel."""
    X, y = make_blobs(n_samples=450, centers=3, cluster_std=2.5, random_state=2)
    ens = _stages(SVI(gamma=0.3, C=2.0, random_state=0, device="cpu", **PAPER), X, y)
    assert [F.shape for F in ens.F] == [(300, 5)] * 3
    for p, (pos, neg) in enumerate(ens.problems):
        rows = np.flatnonzero((y == pos) | (y == neg))
        np.testing.assert_array_equal(ens.rows[p], rows)
        for m, S in enumerate(ens.subsets[p]):
            assert set(np.unique(y[S])) == {pos, neg}
            S = S[np.argsort(ens.rank[S])]
            (r,) = solve_batched(X, np.where(y == pos, 1.0, -1.0), [S], ens.kernel, 2.0, device="cpu")
            f = rbf_kernel(X[rows], X[np.asarray(r.support)], gamma=0.3) @ np.asarray(r.dual_coef)
            np.testing.assert_allclose(ens.F[p][:, m], f + r.intercept, atol=1e-8)


def test_single_threaded_small_solves_change_nothing(monkeypatch):
    X, y = make_blobs(n_samples=300, centers=3, cluster_std=2.0, random_state=0)
    ens = _stages(SVI(C=1.0, random_state=0, device="cpu", **PAPER), X, y)
    model = svi_solver.margin_stage(ens, 0.2)  # every s ≤ 512: one BLAS thread
    assert max(r.size for r in model.margin_rows) <= svi_solver._SERIAL_BLAS_MAX_S
    monkeypatch.setattr(svi_solver, "_SERIAL_BLAS_MAX_S", 0)  # threaded BLAS as configured
    threaded = svi_solver.margin_stage(ens, 0.2)
    np.testing.assert_allclose(threaded.coef, model.coef, atol=1e-10)
    np.testing.assert_allclose(threaded.intercepts, model.intercepts, atol=1e-10)


# --------------------------------------------------------------------------- issue 15: sizing,
# check, exact fallback, cap, row order
def _digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=1 / 3, stratify=y, random_state=0)


def test_subsets_sized_from_the_problem():
    assert plan_problem(9_999, 5, 0.1, 2000) is None          # too small: exact
    assert plan_problem(10_000, 5, 0.1, 2000) == 0.2          # θ raised to 2,000 rows
    assert plan_problem(50_000, 5, 0.1, 2000) == 0.1          # the paper's θ
    assert plan_problem(300, 5, 0.1, 0) == 0.1
    X, y = make_two_sines(2000, noise=0.15, random_state=0)
    est = SVI(gamma=1.0, C=10.0, min_subset_rows=300, random_state=0, device="cpu").fit(X, y)
    info = est.sub_models_[0]
    assert info["subset_rate"] == 0.15 and info["exact"] is None and not est.solved_exactly_[0]
    assert all(300 <= S.size <= 400 for S in est.subsets_[0]) and len(est.subsets_[0]) == 5
    rows = np.concatenate(est.subsets_[0])
    assert np.unique(rows).size == rows.size
    # clean data: the sub-models agree and the check passes
    assert info["check"]["passed"] and info["check"]["disagreement"] < 0.01


def test_ensemble_check_statistics():
    # 3 sub-models, 6 rows; row i is in subset inside[i]
    F = np.array([[1.0, 1.0, -1.0],
                  [1.0, -1.0, -1.0],
                  [-1.0, -1.0, 1.0],
                  [1.0, 1.0, 1.0],
                  [-1.0, 1.0, 1.0],
                  [1.0, 1.0, 1.0]])
    inside = np.zeros((6, 3), bool)
    inside[0, 0] = inside[1, 1] = inside[2, 2] = True
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0, 1.0])
    f_model = np.array([1.0, -1.0, -1.0, 1.0, -1.0, 1.0])
    is_margin = np.array([False, False, False, False, False, True])
    res = ensemble_check(F, inside, y, f_model, is_margin, max_disagreement=0.5, max_loss=0.0)
    # rows outside both subsets — pair (0,1): rows 2–5, signs differ on row 4 → 1/4;
    # (0,2): rows 1,3,4,5, differ on rows 1 and 4 → 2/4; (1,2): rows 0,3,4,5, differ on row 0 → 1/4
    assert res["disagreement"] == pytest.approx(1 / 3)
    # leave-subset-out means on rows 0–4 (row 5 is a margin row): 0, 0, −1, 1, 1/3; against
    # y = +, −, +, +, − that is right on rows 1 and 3 only → 2/5
    assert res["accuracy_ensemble"] == pytest.approx(0.4) and res["n_rows"] == 5
    assert res["accuracy_model"] == pytest.approx(0.8) and res["passed"]
    fail = ensemble_check(F, inside, y, -f_model, is_margin, max_disagreement=0.2, max_loss=0.0)
    assert not fail["passed"] and len(fail["reasons"]) == 2


def test_small_data_falls_back_to_the_exact_svm_and_matches_svc():
    """demo --tiny sizes: 2,000 ijcnn1 rows gave 89–93 % against SVC's 96–97 %."""
    rng = np.random.default_rng(0)
    X, y = load_dataset("ijcnn1", "train")
    Xt, yt = load_dataset("ijcnn1", "test")
    X, y = subsample(X, y, 2000, rng)
    Xt, yt = subsample(Xt, yt, 2000, rng)
    svc = SVC(gamma=0.5, C=512.0).fit(X, y)
    with pytest.warns(ExactFallbackWarning, match="fewer than n_subsets × min_subset_rows"):
        est = SVI(gamma=0.5, C=512.0, random_state=0, device="cpu").fit(X, y)
    assert est.solved_exactly_.tolist() == [True] and est.sub_models_[0]["exact"] == "too_small"
    assert abs(est.score(Xt, yt) - svc.score(Xt, yt)) <= 0.005
    np.testing.assert_allclose(est.decision_function(Xt), svc.decision_function(Xt), atol=0.02)
    assert est.support_.size == svc.support_.size


def test_failed_check_falls_back_with_a_warning_and_matches_svc():
    X, y = _two_sines(1200)    # sub-SVMs of 120 noisy rows disagree on ~11 % of the rows
    svc = SVC(gamma=1.0, C=10.0).fit(X, y)
    with pytest.warns(ExactFallbackWarning, match="failed the ensemble check"):
        est = SVI(gamma=1.0, C=10.0, min_subset_rows=100, random_state=0, device="cpu").fit(X, y)
    info = est.sub_models_[0]
    assert est.solved_exactly_.tolist() == [True] and info["exact"] == "check"
    assert not info["check"]["passed"] and info["check"]["disagreement"] > 0.04
    assert len(est.subsets_[0]) == 5 and info["exact_solver"]["converged"] == [True]
    Xt, yt = _two_sines(2000, seed=1)
    assert np.mean(est.predict(Xt) == svc.predict(Xt)) >= 0.999
    # the paper's algorithm on the same ensemble keeps its own model, silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paper = SVI(gamma=1.0, C=10.0, min_subset_rows=100, ensemble_check=False, random_state=0,
                    device="cpu").fit(X, y)
    assert not paper.solved_exactly_[0] and "check" not in paper.sub_models_[0]


def test_every_solve_of_a_problem_feeds_converged_and_one_convergence_warning():
    """Sub-SVMs and the exact fallback alike: a problem with a solve stopped by max_iter is
    not converged_, and the fit gives one ConvergenceWarning (SVC's sentence) next to
    SVI's own warnings — LIBSVM's per-solve warnings stay inside the solver."""
    X, y = _two_sines(1200)
    kw = dict(gamma=1.0, C=10.0, min_subset_rows=100, random_state=0, device="cpu")
    # sub-SVMs of 120 rows take ≤ 445 LIBSVM iterations, the exact SVM of the 1,200 rows 924
    for extra, exact in [({"ensemble_check": False, "max_iter": 20}, False), ({"max_iter": 600}, True)]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = SVI(**kw, **extra).fit(X, y)
        conv = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        assert len(conv) == 1, conv
        assert conv[0].startswith(f"Solver terminated early (max_iter={extra['max_iter']})")
        assert "(SVI: 1 of 1 binary problem(s)" in conv[0]
        assert est.converged_.tolist() == [False] and est.solved_exactly_.tolist() == [exact]
        assert sum(issubclass(w.category, ExactFallbackWarning) for w in caught) == int(exact)
    info = est.sub_models_[0]
    assert all(info["converged"]) and info["exact_solver"]["max_iter_reached"] == [True]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert SVI(ensemble_check=False, **kw).fit(X, y).converged_.tolist() == [True]


def test_multiclass_within_half_a_point_of_svc_and_no_more_svs():
    """digits (10 classes, one-vs-one pairs of ≈ 240 rows): SVI 95.0 % with 1,110 SVs
    against SVC's 99.3 % with 518 before the pairs were sized."""
    X, Xt, y, yt = _digits()
    svc = SVC(gamma="scale", C=10.0).fit(X, y)
    with pytest.warns(ExactFallbackWarning, match="45 of 45"):
        est = SVI(gamma="scale", C=10.0, random_state=0, device="cpu").fit(X, y)
    assert abs(est.score(Xt, yt) - svc.score(Xt, yt)) <= 0.005
    assert est.support_.size <= svc.support_.size * 1.01
    assert est.solved_exactly_.all() and est.n_iter_.shape == (45,) and est.n_iter_.min() > 0


def test_cap_warns_only_when_it_changes_the_model():
    X, y = _two_sines(800)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # a cap above the band: silent
        est = SVI(gamma=1.0, C=10.0, max_margin_sv=10_000, random_state=0, device="cpu",
                  **PAPER).fit(X, y)
    assert est.margin_capped_.tolist() == [False] and est.sub_models_[0]["guard"] is None
    n_band = est.sub_models_[0]["n_candidates"]
    with pytest.warns(MarginCapWarning, match=f"{n_band:,}–{n_band:,} rows were in the band"):
        capped = SVI(gamma=1.0, C=10.0, max_margin_sv=n_band - 1, random_state=0, device="cpu",
                     **PAPER).fit(X, y)
    assert capped.margin_capped_.tolist() == [True] and capped.support_.size == n_band - 1


@pytest.mark.parametrize("kind", ["binary_ensemble", "multiclass"])
def test_results_do_not_depend_on_row_order(kind):
    """Rows sorted by label (as LIBSVM files often are) and shuffled, same random_state."""
    if kind == "binary_ensemble":
        X, y = _two_sines(2000)
        Xt, yt = _two_sines(2000, seed=1)
        kw = dict(gamma=1.0, C=10.0, **PAPER)
    else:
        X, Xt, y, yt = _digits()
        kw = dict(C=10.0)
    by_label = np.argsort(y, kind="stable")
    shuffled = np.random.default_rng(5).permutation(y.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExactFallbackWarning)
        a = SVI(random_state=0, device="cpu", **kw).fit(X[by_label], y[by_label])
        b = SVI(random_state=0, device="cpu", **kw).fit(X[shuffled], y[shuffled])
    assert abs(a.score(Xt, yt) - b.score(Xt, yt)) <= 0.002
    np.testing.assert_allclose(a.decision_function(Xt), b.decision_function(Xt), atol=1e-6)
    # the same training rows (in a's numbering) keep the same models
    np.testing.assert_array_equal(np.sort(by_label[a.support_]), np.sort(shuffled[b.support_]))


def test_fitted_attributes_listed():
    X, y = make_blobs(n_samples=240, centers=3, cluster_std=2.5, random_state=1)
    with pytest.warns(ExactFallbackWarning):
        est = SVI(C=1.0, probability=True, random_state=0, device="cpu").fit(X, y)
    assert all(hasattr(est, name) for name in FITTED_ATTRIBUTES)
    fitted = {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
    assert fitted <= set(FITTED_ATTRIBUTES)


def test_decision_function_shape_as_svc():
    """SVI takes SVC's decision_function_shape (one vocabulary, issue 16): "ovo" gives the
    K(K-1)/2 pairwise values, "ovr" the (n, K) vote-based ones, the same predictions."""
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [3, 0], [0, 3], [3, 3]], dtype=float)
    y = np.repeat(np.arange(4), 60)
    X = centers[y] + rng.normal(scale=0.6, size=(len(y), 2))
    ovr = SVI(gamma=0.5, random_state=0, device="cpu").fit(X, y)
    ovo = SVI(gamma=0.5, random_state=0, device="cpu", decision_function_shape="ovo").fit(X, y)
    assert ovr.decision_function(X).shape == (240, 4)
    assert ovo.decision_function(X).shape == (240, 6)
    np.testing.assert_array_equal(ovr.predict(X), ovo.predict(X))
