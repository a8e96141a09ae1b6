"""The compiled SMO on rows of a Gram matrix (gpuksvm.solvers.smo.gram_smo) against scikit-learn's SVC
(LIBSVM) on the same precomputed kernel: objective, decision values, cold and seeded starts."""
import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC

from gpuksvm.solvers.smo import gram_smo
from gpuksvm.solvers.svc_dual import intercept_from_F

pytest.importorskip("numba")


def _problem(n=400, seed=0, gamma=0.7):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] * X[:, 1] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y, rbf_kernel(X, X, gamma=gamma)


def _objective(K, y, alpha):
    c = y * alpha
    return 0.5 * c @ K @ c - alpha.sum()


def _libsvm(K, y, C):
    svc = SVC(C=C, kernel="precomputed", tol=1e-3).fit(K, y)
    alpha = np.zeros(y.size)
    alpha[svc.support_] = np.abs(svc.dual_coef_.ravel())
    return svc, alpha


def _decision(G, R, y, alpha, grad, Cv, cols):
    b = intercept_from_F(-y * grad, alpha, y, Cv)
    return (y * alpha) @ G[np.ix_(R, cols)] + b


@pytest.mark.parametrize("C", [0.1, 3.0, 300.0])
@pytest.mark.parametrize("shrinking", [True, False])
def test_binary_matches_libsvm_on_a_subset_of_rows(C, shrinking):
    X, y, G = _problem()
    R = np.sort(np.random.default_rng(1).choice(y.size, 300, replace=False))   # a fold: rows of G
    test = np.setdiff1d(np.arange(y.size), R)
    K = G[np.ix_(R, R)]
    alpha, grad, n_iter = gram_smo.solve_on_gram(G, R, y[R], np.full(R.size, C), shrinking=shrinking)
    assert 0 < n_iter < gram_smo.MAX_ITER
    np.testing.assert_allclose(grad, (y[R] * alpha) @ K * y[R] - 1.0, atol=1e-8)   # its own gradient
    assert abs(np.dot(y[R], alpha)) < 1e-9 and (alpha >= 0).all() and (alpha <= C).all()
    svc, ref = _libsvm(K, y[R], C)
    o, o_ref = _objective(K, y[R], alpha), _objective(K, y[R], ref)
    assert abs(o - o_ref) <= 1e-3 * (1 + abs(o_ref))
    d = _decision(G, R, y[R], alpha, grad, np.full(R.size, C), test)
    d_ref = svc.decision_function(G[np.ix_(test, R)])
    np.testing.assert_allclose(d, d_ref, atol=1e-2 * max(1.0, np.abs(d_ref).max()))


def test_class_and_sample_weights_as_per_row_bounds():
    X, y, G = _problem(seed=2)
    R = np.arange(y.size)
    sw = np.random.default_rng(3).uniform(0.2, 3.0, size=y.size)
    cw = {-1.0: 2.0, 1.0: 0.5}
    C = 4.0
    Cv = C * sw * np.where(y > 0, cw[1.0], cw[-1.0])
    alpha, grad, _ = gram_smo.solve_on_gram(G, R, y, Cv)
    assert (alpha <= Cv * (1 + 1e-12)).all()
    svc = SVC(C=C, kernel="precomputed", class_weight=cw).fit(G, y, sample_weight=sw)
    ref = np.zeros(y.size)
    ref[svc.support_] = np.abs(svc.dual_coef_.ravel())
    o, o_ref = _objective(G, y, alpha), _objective(G, y, ref)
    assert abs(o - o_ref) <= 1e-3 * (1 + abs(o_ref))
    np.testing.assert_allclose(_decision(G, R, y, alpha, grad, Cv, R), svc.decision_function(G),
                               atol=2e-2 * max(1.0, np.abs(svc.decision_function(G)).max()))


def test_one_vs_one_three_classes_match_libsvm():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(360, 2)) + np.repeat(np.array([[0, 0], [1.5, 0], [0, 1.5]]), 120, axis=0)
    labels = np.repeat([0, 1, 2], 120)
    G = rbf_kernel(X, X, gamma=1.0)
    svc = SVC(C=2.0, kernel="precomputed", decision_function_shape="ovo").fit(G, labels)
    ref = svc.decision_function(G)
    for col, (lo, hi) in enumerate([(0, 1), (0, 2), (1, 2)]):
        R = np.flatnonzero((labels == lo) | (labels == hi))
        yp = np.where(labels[R] == lo, 1.0, -1.0)        # LIBSVM's pair: +1 for the first class
        alpha, grad, _ = gram_smo.solve_on_gram(G, R, yp, np.full(R.size, 2.0))
        d = _decision(G, R, yp, alpha, grad, np.full(R.size, 2.0), np.arange(360))
        np.testing.assert_allclose(d, ref[:, col], atol=2e-2 * max(1.0, np.abs(ref[:, col]).max()))


def test_seeded_path_reaches_the_cold_solution():
    X, y, G = _problem(seed=5)
    R = np.arange(y.size)
    alpha, grad = None, None
    prev = None
    for C in np.logspace(-1, 3, 6):
        if alpha is not None:
            alpha, grad = alpha * (C / prev), grad * (C / prev) + (C / prev - 1.0)   # DeCoste & Wagstaff
            np.testing.assert_allclose(grad, (y * alpha) @ G * y - 1.0, atol=1e-8)   # exact seed gradient
        alpha, grad, _ = gram_smo.solve_on_gram(G, R, y, np.full(y.size, C), alpha, grad)
        cold, _, _ = gram_smo.solve_on_gram(G, R, y, np.full(y.size, C))
        o, o_cold = _objective(G, y, alpha), _objective(G, y, cold)
        assert abs(o - o_cold) <= 1e-3 * (1 + abs(o_cold))
        _, ref = _libsvm(G, y, C)
        assert abs(o - _objective(G, y, ref)) <= 1e-3 * (1 + abs(o))
        prev = C


def test_a_given_start_is_not_modified():
    X, y, G = _problem(n=120, seed=6)
    R = np.arange(y.size)
    a0, g0 = np.zeros(y.size), np.full(y.size, -1.0)     # α = 0 and its gradient −e
    keep = (a0.copy(), g0.copy())
    gram_smo.solve_on_gram(G, R, y, np.full(y.size, 1.0), a0, g0)
    np.testing.assert_array_equal(a0, keep[0])
    np.testing.assert_array_equal(g0, keep[1])


def _loop(G, R, y, Cv, cap, refill, max_iter=gram_smo.MAX_ITER, wide=False, shrinking=True):
    """The SMO loop from α = 0 with the active rows' Gram matrix copied out when at most ``cap`` rows
    stay active (0: never; the passes then gather G's rows through R), on the wide layout until the
    first shrinking pass when ``wide``."""
    a, g = np.zeros(R.size), np.full(R.size, -1.0)
    R = R.astype(np.uint32)
    it = gram_smo._smo_loop(G, R, np.ascontiguousarray(G[R, R]), y, Cv, a, g, 1e-3, max_iter, shrinking, cap,
                            refill, wide)
    return a, g, it


@pytest.mark.parametrize("C", [1.0, 100.0, 1e4])
@pytest.mark.parametrize("refill", [0.0, 0.9, 1.0])
def test_compact_active_gram_takes_the_same_steps(C, refill):
    # every refill rule (never compact H, below 90 % active, at every drop) and a cap of all rows (H
    # from the first shrinking pass on) against the passes through R: the same steps, α and ∇, bit
    # for bit (the same choices, ties to the last row), also when max_iter stops it with H in use
    X, y, G = _problem(n=700, seed=7, gamma=2.0)
    R = np.sort(np.random.default_rng(8).choice(y.size, 600, replace=False))
    Cv = np.full(R.size, C) * np.random.default_rng(9).uniform(0.5, 2.0, R.size)   # per-row bounds
    full = _loop(G, R, y[R], Cv, 0, refill)
    assert 400 < full[2] < gram_smo.MAX_ITER
    np.testing.assert_allclose(full[1], (y[R] * full[0]) @ G[np.ix_(R, R)] * y[R] - 1.0, atol=1e-8)
    for max_iter in (gram_smo.MAX_ITER, 400):   # the first shrinking pass is at step 300
        ref = full if max_iter == gram_smo.MAX_ITER else _loop(G, R, y[R], Cv, 0, refill, max_iter)
        for cap, wide in ((R.size, False), (0, True), (R.size, True)):
            got = _loop(G, R, y[R], Cv, cap, refill, max_iter, wide)
            assert got[2] == ref[2]
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])


def _reference_smo(G, R, y, Cv, tol=1e-3):
    """LIBSVM's iterations without shrinking, written out in NumPy: i the last maximal −y∇ over I_up,
    j the last largest b²/a over I_low (b = m + y∇ > 0, a = Kᵢᵢ + Kⱼⱼ − 2Kᵢⱼ floored at 10⁻¹²), the
    step clipped to the box (LIBSVM's case analysis), ∇ += y(yᵢΔαᵢKᵢ + yⱼΔαⱼKⱼ).  Returns α and
    the steps."""
    K = G[np.ix_(R, R)]
    n = R.size
    a, g = np.zeros(n), np.full(n, -1.0)
    last = lambda v: n - 1 - int(np.argmax(v[::-1]))   # the last position of the maximum
    for it in range(10 ** 6):
        up = ((y > 0) & (a < Cv)) | ((y < 0) & (a > 0))
        low = ((y > 0) & (a > 0)) | ((y < 0) & (a < Cv))
        vu = np.where(up, -y * g, -np.inf)
        i = last(vu)
        m = vu[i]
        vl = np.where(low, y * g, -np.inf)
        b = m + vl
        curv = K[i, i] + np.diag(K) - 2.0 * K[i]
        curv = np.where(curv > 0, curv, 1e-12)
        with np.errstate(invalid="ignore"):
            w = np.where(low & (b > 0), (b * b) / curv, -np.inf)
        if m + vl.max() < tol or w.max() == -np.inf:
            return a, it
        j = last(w)
        ai, aj = a[i], a[j]
        qa = max(K[i, i] + K[j, j] - 2.0 * K[i, j], 1e-12)
        if y[i] != y[j]:
            delta = (-g[i] - g[j]) / qa
            diff = ai - aj
            ai, aj = ai + delta, aj + delta
            if diff > 0 and aj < 0:
                aj, ai = 0.0, diff
            elif diff <= 0 and ai < 0:
                ai, aj = 0.0, -diff
            if diff > Cv[i] - Cv[j] and ai > Cv[i]:
                ai, aj = Cv[i], Cv[i] - diff
            elif diff <= Cv[i] - Cv[j] and aj > Cv[j]:
                aj, ai = Cv[j], Cv[j] + diff
        else:
            delta = (g[i] - g[j]) / qa
            s = ai + aj
            ai, aj = ai - delta, aj + delta
            if s > Cv[i] and ai > Cv[i]:
                ai, aj = Cv[i], s - Cv[i]
            elif s <= Cv[i] and aj < 0:
                aj, ai = 0.0, s
            if s > Cv[j] and aj > Cv[j]:
                aj, ai = Cv[j], s - Cv[j]
            elif s <= Cv[j] and ai < 0:
                ai, aj = 0.0, s
        di, dj = (ai - a[i]) * y[i], (aj - a[j]) * y[j]
        a[i], a[j] = ai, aj
        g = g + y * (di * K[i] + dj * K[j])
    raise AssertionError("the reference did not stop")


@pytest.mark.parametrize("C", [0.5, 20.0])
@pytest.mark.parametrize("wide", [False, True])
def test_every_layout_takes_the_steps_written_out_in_numpy(C, wide):
    # without shrinking the loop runs on one layout from start to end: gathered through R, or wide
    # (every row of G, the rows outside the problem inert): LIBSVM's steps as the NumPy reference
    # takes them, α bit for bit (the reference computes each value with the same operations)
    X, y, G = _problem(n=260, seed=11, gamma=1.5)
    R = np.sort(np.random.default_rng(12).choice(y.size, 200, replace=False))
    Cv = np.full(R.size, C) * np.random.default_rng(13).uniform(0.5, 2.0, R.size)
    ref, steps = _reference_smo(G, R, y[R], Cv)
    assert steps > 100
    got = _loop(G, R, y[R], Cv, 0, 0.75, wide=wide, shrinking=False)
    assert got[2] == steps
    np.testing.assert_array_equal(got[0], ref)


def test_wide_layout_only_for_ascending_rows(monkeypatch):
    # solve_on_gram takes the wide layout for a problem of at least WIDE_SHARE of G's rows in
    # ascending order (the ties follow the problem's order); the result is the same either way, and
    # rows in another order solve the same problem (to the tolerance: other ties)
    X, y, G = _problem(n=500, seed=14, gamma=2.0)
    R = np.sort(np.random.default_rng(15).choice(y.size, 420, replace=False))
    Cv = np.full(R.size, 30.0)
    calls = []
    real = gram_smo._smo_loop
    monkeypatch.setattr(gram_smo, "_smo_loop", lambda *a: calls.append(a[-1]) or real(*a))
    wide = gram_smo.solve_on_gram(G, R, y[R], Cv)
    monkeypatch.setattr(gram_smo, "WIDE_SHARE", float("inf"))
    narrow = gram_smo.solve_on_gram(G, R, y[R], Cv)
    monkeypatch.setattr(gram_smo, "WIDE_SHARE", 0.5)
    perm = np.random.default_rng(16).permutation(R.size)
    shuffled = gram_smo.solve_on_gram(G, R[perm], y[R][perm], Cv[perm])
    assert calls == [True, False, False]
    assert wide[2] == narrow[2]
    np.testing.assert_array_equal(wide[0], narrow[0])
    np.testing.assert_array_equal(wide[1], narrow[1])
    K = G[np.ix_(R, R)]
    o, o_shuffled = _objective(K, y[R], wide[0]), _objective(K, y[R], shuffled[0][np.argsort(perm)])
    assert abs(o - o_shuffled) <= 1e-3 * (1 + abs(o))


def test_the_shrunk_rows_gradient_through_whole_rows_is_the_gathered_one():
    # _gradient_wide (contiguous passes over whole rows of G) against _gradient (gathers through R):
    # the same sums in the same order, equal bit for bit
    X, y, G = _problem(n=300, seed=17)
    R = np.sort(np.random.default_rng(18).choice(y.size, 240, replace=False)).astype(np.uint32)
    alpha, _, _ = gram_smo.solve_on_gram(G, R, y[R], np.full(R.size, 5.0))
    at = np.random.default_rng(19).choice(R.size, 150, replace=False)
    g1, g2 = np.zeros(R.size), np.zeros(R.size)
    gram_smo._gradient(G, R, y[R], alpha, g1, at)
    gram_smo._gradient_wide(G, R, y[R], alpha, g2, at, np.empty(G.shape[0]), np.empty(G.shape[0]))
    np.testing.assert_array_equal(g1[at], g2[at])
    np.testing.assert_allclose(g1[at], y[R][at] * ((y[R] * alpha) @ G[np.ix_(R, R[at])]) - 1.0, atol=1e-10)


@pytest.mark.parametrize("wide_share", [0.5, float("inf")])
def test_a_float32_gram_matrix_takes_the_same_steps_in_every_layout(monkeypatch, wide_share):
    # float32 kernel values (LIBSVM's cache precision) through the wide and the gathered layouts:
    # the same steps and α either way, and the problem solved to the tolerance (against LIBSVM on
    # the float64 matrix)
    X, y, G = _problem(n=500, seed=20, gamma=2.0)
    G32 = np.ascontiguousarray(G, dtype=np.float32)
    R = np.sort(np.random.default_rng(21).choice(y.size, 420, replace=False))
    Cv = np.full(R.size, 10.0)
    monkeypatch.setattr(gram_smo, "WIDE_SHARE", wide_share)
    got = gram_smo.solve_on_gram(G32, R, y[R], Cv)
    monkeypatch.setattr(gram_smo, "WIDE_SHARE", float("inf") if wide_share == 0.5 else 0.5)
    other = gram_smo.solve_on_gram(G32, R, y[R], Cv)
    assert got[2] == other[2]
    np.testing.assert_array_equal(got[0], other[0])
    K = G[np.ix_(R, R)]
    _, ref = _libsvm(K, y[R], 10.0)
    o, o_ref = _objective(K, y[R], got[0]), _objective(K, y[R], ref)
    assert abs(o - o_ref) <= 1e-3 * (1 + abs(o_ref))
