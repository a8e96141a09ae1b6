"""Tests of the CVM's solver pieces: the core-set QP and its K̃ cache
(gpuksvm.solvers.cvm.simplex_qp) and the furthest-point scanners and core-set loop
(gpuksvm.solvers.cvm.meb).  References: scipy's NNLS for the simplex QP (see
test_cvm.py) and K̃ built from scikit-learn's pairwise kernels."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import nnls
from sklearn.metrics.pairwise import rbf_kernel

from gpuksvm.estimators.cvm import CVM
from gpuksvm.datasets import make_checkerboard
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.cvm.ktilde_cache import DENSE_MAX, KtildeCache
from gpuksvm.solvers.cvm.meb import HostScanner
from gpuksvm.solvers.cvm.simplex_qp import CoreSetQP


def simplex_reference(Kt: np.ndarray) -> np.ndarray:
    L = np.linalg.cholesky(Kt)
    gam, _ = nnls(L.T, np.linalg.solve(L, np.ones(Kt.shape[0])), maxiter=50 * Kt.shape[0])
    return gam / gam.sum()


def random_ktilde(m: int, C: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3))
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    return np.outer(y, y) * (rbf_kernel(X, gamma=0.5) + 1.0) + np.eye(m) / C


class block_of:
    """K̃ between core positions, for a core set kept as rows ``live`` of ``Kt`` (the scanner's job)."""

    def __init__(self, Kt: np.ndarray) -> None:
        self.Kt = Kt
        self.live = np.arange(Kt.shape[0])

    def __call__(self, pos, c0, c1, dtype=np.float64):
        return self.Kt[np.ix_(self.live[np.asarray(pos)], self.live[c0:c1])].astype(dtype)

    def compact(self, keep: np.ndarray) -> None:
        self.live = self.live[: keep.shape[0]][keep]


# --------------------------------------------------------------------------- core-set QP
@pytest.mark.parametrize("regime, C", [("dense_smo", 1.0), ("dense_smo", 1000.0), ("dense_active_set", 1.0),
                                       ("dense_active_set", 1000.0), ("rows", 1.0)])
def test_core_set_qp_reaches_the_reference(regime, C):
    """Grown in chunks and re-solved warm each time, as the core-set loop does, the QP ends at the
    simplex optimum in every regime (the row regime with a cache too small for all rows; its
    float32 rows bound the accuracy)."""
    Kt = random_ktilde(150, C)
    kw = dict(dense_max=4, min_slots=16) if regime == "rows" else {}
    qp = CoreSetQP(Kt[0, 0], block_of(Kt), cache_bytes=60 * 4 * 150, **kw)
    qp.active_set = regime == "dense_active_set"
    qp.append(2)
    qp.set_alpha(np.array([0.5, 0.5]))
    for k in (10, 30, 50, 58):
        qp.append(k)
        qp.solve(1e-4)
    rows = regime == "rows"
    qp.solve(1e-7 if rows else 1e-11)
    assert qp.cache.dense == (not rows)
    a_ref = simplex_reference(Kt)
    assert qp.kkt_gap() <= (1e-7 if rows else 1e-9)
    np.testing.assert_allclose(qp.alpha, a_ref, atol=1e-5 if rows else 1e-6)
    np.testing.assert_allclose(qp.g, Kt @ qp.alpha, atol=1e-6 if rows else 1e-9)
    assert qp.q == pytest.approx(a_ref @ Kt @ a_ref, rel=1e-6)


def test_dense_smo_hands_ill_conditioned_problems_to_the_active_set():
    Kt = random_ktilde(300, 1e4, seed=1)
    qp = CoreSetQP(Kt[0, 0], block_of(Kt), cache_bytes=1 << 24)
    qp.append(300)
    a0 = np.zeros(300)
    a0[:2] = 0.5
    qp.set_alpha(a0)
    qp.solve(1e-10)
    assert qp.active_set and qp.status in ("optimal", "smo_fallback")
    np.testing.assert_allclose(qp.alpha, simplex_reference(Kt), atol=1e-6)


def test_duality_gap_of_the_core_set():
    """C Σ max(0, q − g + α/C)² − ‖α‖²/C: zero at the optimum, positive away from it."""
    C = 5.0
    Kt = random_ktilde(80, C)
    qp = CoreSetQP(Kt[0, 0], block_of(Kt), cache_bytes=1 << 20)
    qp.append(80)
    qp.set_alpha(np.full(80, 1 / 80))
    assert qp.duality_gap(C) > 1e-3
    qp.solve(1e-12)
    assert abs(qp.duality_gap(C)) <= 1e-10


def test_shrink_drops_only_inactive_core_vectors():
    Kt = random_ktilde(200, 10.0)
    block = block_of(Kt)
    qp = CoreSetQP(Kt[0, 0], block, cache_bytes=40 * 4 * 200, dense_max=8, min_slots=8)
    qp.append(200)
    a0 = np.zeros(200)
    a0[:2] = 0.5
    qp.set_alpha(a0)
    qp.solve(1e-10)
    alpha, q = qp.alpha.copy(), qp.q
    keep = qp.shrink(q + 1e-6, min_fraction=0.0)
    assert keep is not None and not keep.all()
    block.compact(keep)
    assert (alpha[~keep] == 0).all() and qp.m == keep.sum()
    np.testing.assert_array_equal(qp.alpha, alpha[keep])
    # the cached rows were compacted with the positions
    sub = Kt[np.ix_(keep, keep)]
    pos = np.arange(qp.m)
    np.testing.assert_allclose(qp.cache.rows(pos[:5]), sub[:5], rtol=1e-6)
    assert qp.q == pytest.approx(q, rel=1e-12)


def test_cache_rows_equal_the_kernel_after_growth_eviction_and_compaction():
    Kt = random_ktilde(120, 3.0)
    block = block_of(Kt)
    cache = KtildeCache(block, budget=16 * 4 * 120, dense_max=10, min_slots=4)
    rng = np.random.default_rng(0)
    m = 0
    for k in (3, 7, 5, 40, 1, 64):
        cache.append(k)
        m += k
        for _ in range(6):
            pos = rng.choice(m, size=min(m, 5), replace=False)
            np.testing.assert_allclose(cache.rows(pos), Kt[np.ix_(pos, np.arange(m))], rtol=1e-6)
    assert not cache.dense and cache._buf.shape[0] < m          # rows were evicted
    keep = rng.random(m) < 0.7
    cache.compact(keep)
    block.compact(keep)
    sub = Kt[np.ix_(keep, keep)]
    for _ in range(6):
        pos = rng.choice(cache.m, size=5, replace=False)
        np.testing.assert_allclose(cache.rows(pos), sub[pos], rtol=1e-6)
    # a cached row is computed once: rows seen again cost no kernel evaluation
    pos = np.arange(3)
    cache.rows(pos)
    before = cache.n_computed
    cache.rows(pos)
    assert cache.n_computed == before


# --------------------------------------------------------------------------- the loop's cost
def test_per_added_core_vector_cost_is_flat():
    """Counted, not timed: per core vector added, the QP computes one K̃ row (|S| kernel
    values) and takes a few SMO steps of O(|S|) — flat in |S|, the same order as the
    furthest-point search — on a noisy problem whose core set grows past the dense regime."""
    X, y = make_checkerboard(4500, flip=0.2, random_state=0)
    m = CVM(gamma=30.0, C=1.0, device="cpu", random_state=0).fit(X, y)
    h = m.history_[0]
    assert m.core_set_size_[0] > DENSE_MAX + 1000           # well into the row regime
    added = np.diff(h["added"])
    ok = added > 0
    size = h["m"][1:][ok]
    qp_kernel = np.diff(h["qp_kernel"])[ok] / added[ok] / size    # K̃ values per added vector, / |S|
    steps = np.diff(h["qp_steps"])[ok] / added[ok]
    search = np.diff(h["search_kernel"])[ok] / added[ok] / size
    early, late = size < 1500, size > DENSE_MAX
    assert early.sum() >= 3 and late.sum() >= 3
    assert qp_kernel.max() <= 1.5                         # each row once (a few cache misses)
    assert np.median(steps[late]) <= 3 * max(np.median(steps[early]), 1.0)
    assert np.median(steps[late]) <= 10
    # the QP's kernel work is of the order of the search's
    assert h["qp_kernel"][-1] <= 2 * h["search_kernel"][-1]
    assert np.median(search[late]) <= 3


# --------------------------------------------------------------------------- scanners
@pytest.fixture(scope="module")
def board():
    return make_checkerboard(240, grid=2, random_state=3)


def test_host_scanner_scores_match_definition(board):
    """s_ℓ = yℓ(Σαᵢyᵢκ(xᵢ,xℓ) + b) + [ℓ∈S]αℓ/C = (K̃α)ℓ, and ‖c − φ̃(zℓ)‖² = κ̃ + αᵀK̃α − 2sℓ (eq. 12)."""
    X, y = board
    C = 10.0
    sc = HostScanner(X, y, Kernel("rbf", gamma=4.0), None, C, np.float64)
    core = np.array([5, 17, 40, 99])
    sc.append(core)
    alpha = np.array([0.1, 0.4, 0.3, 0.2])
    coef, b = sc.set_alpha(alpha)
    Kt = np.outer(y, y) * (rbf_kernel(X, gamma=4.0) + 1.0) + np.eye(len(y)) / C
    full = np.zeros(len(y))
    full[core] = alpha
    g = Kt @ full
    np.testing.assert_allclose(sc.scores(np.arange(len(y)), coef, b), g, atol=1e-12)
    # the QP's rows: K̃ among the core vectors, float64 and float32
    np.testing.assert_allclose(sc.core_block(np.array([0, 2]), 0, 4), Kt[np.ix_(core[[0, 2]], core)],
                               atol=1e-12)
    np.testing.assert_allclose(sc.core_block(np.array([1, 3]), 1, 4, np.float32),
                               Kt[np.ix_(core[[1, 3]], core[1:])], atol=1e-6)
    # exact scan: the k smallest s outside the core set and Σ max(0, q − s)²
    q = full @ g
    top, top_s, vsum = sc.exact_scan(None, coef, b, q, 7)
    out = np.setdiff1d(np.arange(len(y)), core)
    order = out[np.lexsort((out, g[out]))][:7]
    np.testing.assert_array_equal(top, order[g[order] < np.inf])
    np.testing.assert_allclose(top_s, g[top], atol=1e-12)
    assert vsum == pytest.approx((np.maximum(q - g[out], 0) ** 2).sum(), rel=1e-10)
    sub = np.arange(0, len(y), 3)
    top, _, vsum = sc.exact_scan(sub, coef, b, q, 3)
    sub_out = np.setdiff1d(sub, core)
    assert set(top) <= set(sub_out)
    assert vsum == pytest.approx((np.maximum(q - g[sub_out], 0) ** 2).sum(), rel=1e-10)
    # group minima (furthest point of each sample) and the arg-min over all rows
    groups = np.array([[1, 5, 17, 30], [40, 41, 42, 43]])
    best, arg = sc.group_min(groups, coef, b)
    for grp, bs, ar in zip(groups, best, arg):
        assert ar == grp[np.argmin(g[grp])] and bs == pytest.approx(g[grp].min(), abs=1e-12)
    s_best, i_best = sc.exact_min(None, coef, b)
    assert i_best == int(np.argmin(g))
    # removing core vectors (α = 0) makes them ordinary rows again
    sc.set_alpha(np.array([0.0, 0.5, 0.5, 0.0]))
    sc.remove(np.array([False, True, True, False]))
    np.testing.assert_array_equal(sc.core_idx, core[1:3])
    assert not sc.in_core[[5, 99]].any() and sc.in_core[[17, 40]].all()


@pytest.mark.gpu
@pytest.mark.parametrize("d", [2, 40])
def test_gpu_scanner_matches_host(gpu, d):
    from gpuksvm.solvers.cvm.meb import GpuScanner

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, d))
    y = np.where(rng.random(5000) < 0.5, 1.0, -1.0)
    for kern, scale, yy in ((Kernel("rbf", gamma=0.3), False, y), (Kernel("rbf", gamma=0.3), False, None),
                            (Kernel("poly", gamma=0.2, degree=2, coef0=1.0), True, y)):
        Xd = gpu.asarray(X)
        xs_h = None
        xs_d = None
        if scale:
            xs_h = 1.0 / np.sqrt((0.2 * (X * X).sum(1) + 1.0) ** 2)
            xs_d = gpu.asarray(xs_h)
        host = HostScanner(X, yy, kern, xs_h, 10.0, np.float64)
        dev = GpuScanner(Xd, yy, kern, xs_d, 10.0, np.float64)
        core = rng.choice(5000, 300, replace=False)
        host.append(core)
        dev.append(core)
        alpha = rng.random(300)
        alpha /= alpha.sum()
        ch, bh = host.set_alpha(alpha)
        cd, bd = dev.set_alpha(alpha)
        assert bh == pytest.approx(bd)
        sub = rng.choice(5000, 1234, replace=False)
        np.testing.assert_allclose(dev.scores(sub, cd, bd), host.scores(sub, ch, bh), rtol=1e-9, atol=1e-12)
        q = float(np.median(host.scores(sub, ch, bh)))
        for idx in (None, sub):
            th, sh, vh = host.exact_scan(idx, ch, bh, q, 25)
            td, sd, vd = dev.exact_scan(idx, cd, bd, q, 25)
            np.testing.assert_array_equal(td, th)
            np.testing.assert_allclose(sd, sh, rtol=1e-9, atol=1e-12)
            assert vd == pytest.approx(vh, rel=1e-9)
        np.testing.assert_allclose(dev.core_block(np.arange(5), 0, 300),
                                   host.core_block(np.arange(5), 0, 300), atol=1e-9)
        sh, ih = host.exact_min(None, ch, bh)
        sd, idd = dev.exact_min(None, cd, bd)
        assert sd == pytest.approx(sh, rel=1e-9, abs=1e-12) and idd == ih
        assert dev.exact_min(sub, cd, bd)[1] == host.exact_min(sub, ch, bh)[1]
        groups = rng.integers(0, 5000, size=(7, 59))
        gh, ah = host.group_min(groups, ch, bh)
        gd, ad = dev.group_min(groups, cd, bd)
        np.testing.assert_allclose(gd, gh, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(ad, ah)


@pytest.mark.gpu
def test_gpu_scanner_candidate_cache_follows_the_rows(gpu):
    """The exact scans reuse their device copy of ``idx`` only while the rows are the same: an
    array changed in place (or a new array that got a freed one's id) is copied again (issue 13)."""
    from gpuksvm.solvers.cvm.meb import GpuScanner

    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    kern = Kernel("rbf", gamma=0.5)
    host = HostScanner(X, None, kern, None, 10.0, np.float64)
    dev = GpuScanner(gpu.asarray(X), None, kern, None, 10.0, np.float64)
    core = rng.choice(600, 20, replace=False)
    host.append(core)
    dev.append(core)
    alpha = np.full(20, 1 / 20)
    (ch, bh), (cd, bd) = host.set_alpha(alpha), dev.set_alpha(alpha)
    q = float(np.median(host.scores(np.arange(600), ch, bh)))
    idx = np.arange(0, 300, dtype=np.int64)
    for _ in range(2):                          # the same array object, then other rows in it
        assert dev.exact_min(idx, cd, bd) == pytest.approx(host.exact_min(idx, ch, bh))
        (th, sh, vh), (td, sd, vd) = host.exact_scan(idx, ch, bh, q, 9), dev.exact_scan(idx, cd, bd, q, 9)
        np.testing.assert_array_equal(td, th)
        assert vd == pytest.approx(vh, rel=1e-9)
        idx += 300


def test_block_top_breaks_ties_to_the_smaller_row():
    """Many equal scores (an RBF kernel whose values all underflow): the k smallest take the tied
    rows in row order, as exact_scan promises — argpartition alone chose arbitrary ones (and NumPy
    and CuPy differently)."""
    from gpuksvm.solvers.cvm.scan import block_top

    s = np.full(300, 1.0)
    s[[7, 151, 299]] = 0.5
    s[::5] = np.inf
    rows = np.arange(1000, 1300)[::-1].copy()              # rows need not be ascending
    ts, ti, _ = block_top(s, rows, 0.0, 9)
    tied = np.flatnonzero(s == 1.0)
    want = np.r_[rows[[7, 151, 299]], np.sort(rows[tied])[:6]]
    np.testing.assert_array_equal(np.sort(ti), np.sort(want))
    np.testing.assert_array_equal(np.sort(ts), [0.5] * 3 + [1.0] * 6)


# --------------------------------------------------------------------------- the order of the rows
def _tied_scanners(gpu=None):
    """Scanners whose scores are all tied: an RBF kernel that underflows between distinct rows."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 3))
    kern = Kernel("rbf", gamma=1e6)
    host = HostScanner(X, None, kern, None, 10.0, np.float64)
    scanners = [host]
    if gpu is not None:
        from gpuksvm.solvers.cvm.meb import GpuScanner
        scanners.append(GpuScanner(gpu.asarray(X), None, kern, None, 10.0, np.float64))
    core = np.array([3, 250, 77])
    coefs = []
    for sc in scanners:
        sc.append(core)
        coefs.append(sc.set_alpha(np.full(3, 1 / 3)))
    return scanners, coefs, core


def _check_ties_follow_idx(scanners, coefs, core):
    idx = np.random.default_rng(5).permutation(400)
    for sc, (coef, b) in zip(scanners, coefs):
        top, top_s, _ = sc.exact_scan(idx, coef, b, 1.0, 10)
        want = idx[~np.isin(idx, core)][:10]
        np.testing.assert_array_equal(top, want)                  # the earlier rows of idx, in its order
        np.testing.assert_array_equal(top_s, np.zeros(10))
        top, _, _ = sc.exact_scan(None, coef, b, 1.0, 10)         # without idx: the smaller rows
        np.testing.assert_array_equal(top, np.setdiff1d(np.arange(400), core)[:10])


def test_exact_scan_ties_go_to_the_earlier_row_of_idx():
    """Tied scores: the exact scan takes the rows that come first in ``idx`` (the estimators pass
    the rows in their content-hash order), not the smallest row indices."""
    _check_ties_follow_idx(*_tied_scanners())


@pytest.mark.gpu
def test_gpu_exact_scan_ties_go_to_the_earlier_row_of_idx(gpu):
    _check_ties_follow_idx(*_tied_scanners(gpu))


@pytest.mark.parametrize("sample_size", [None, 20])
@pytest.mark.parametrize("tied", [False, True])
def test_fit_core_set_depends_on_the_order_of_rows_only(sample_size, tied):
    """The same rows given in the same order of ``rows`` at other positions of X: the same core set
    (the same rows, in the same order) and α — the initial pair, the samples and the ties all go by
    position in ``rows``.  ``tied``: every score ties (an RBF kernel that underflows)."""
    from gpuksvm.solvers.cvm.meb import fit_core_set

    rng = np.random.default_rng(6)
    X = rng.normal(size=(500, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    perm = rng.permutation(500)
    inv = np.empty(500, dtype=np.int64)
    inv[perm] = np.arange(500)
    order = rng.permutation(500)                        # the order the search draws from (rows of X)
    kern = Kernel("rbf", gamma=1e6 if tied else 4.0)
    kw = dict(C=10.0, tol=1e-3, sample_size=sample_size, n_tries=3, max_iter=60, max_core_size=500,
              cache_bytes=1 << 24, shrinking=True, max_add=8)
    a = fit_core_set(HostScanner(X, y, kern, None, 10.0, np.float64), y, order,
                     rs=np.random.RandomState(0), **kw)
    b = fit_core_set(HostScanner(X[perm], y[perm], kern, None, 10.0, np.float64), y[perm], inv[order],
                     rs=np.random.RandomState(0), **kw)
    np.testing.assert_array_equal(perm[b.core], a.core)
    np.testing.assert_array_equal(b.alpha, a.alpha)
    assert (a.n_iter, a.stop) == (b.n_iter, b.stop)


def test_row_cache_grows_in_its_own_memory_and_keeps_its_rows():
    """Each growth of the core set past the row buffer's width regrows the buffer in place (one
    cache's memory, not two: the fit's peak at a tight budget) and keeps every cached row."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    Kt = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)) + np.eye(300)

    def block(pos, c0, c1, dt):
        return Kt[np.ix_(pos, np.arange(c0, c1))].astype(dt)

    cache = KtildeCache(block, budget=40 * 4 * 64, dense_max=8, min_slots=8)
    cache.append(10)                      # past dense_max: the row regime
    assert not cache.dense
    grown = 0
    for k in (20, 40, 80, 150):
        buf, width = cache._buf, cache._buf.shape[1]
        cache.rows(np.arange(min(cache.m, 12)))
        cache.append(k)
        if cache._buf.shape[1] != width:
            grown += 1
            assert cache._buf is buf and cache._buf.base is None
        pos = np.arange(cache.m)
        np.testing.assert_allclose(cache.rows(pos[-5:]), Kt[np.ix_(pos[-5:], pos)].astype(np.float32))
        cached = np.flatnonzero(cache._owner >= 0)
        np.testing.assert_allclose(cache._buf[cached, :cache.m],
                                   Kt[np.ix_(cache._owner[cached], pos)].astype(np.float32))
    assert grown >= 2
