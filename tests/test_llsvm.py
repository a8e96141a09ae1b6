"""Tests of gpuksvm.solvers.nystrom.kmeans (k-means landmarks) and gpuksvm.estimators.llsvm (LLSVM / LLSVM2)."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from gpuksvm.array import backend as bk
from gpuksvm.solvers.nystrom.kmeans import kmeans, nearest_centers
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.solvers.linear.newton import ReducedOracle, line_derivatives
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.solvers.nystrom.llsvm import (
    ArrayRows,
    BlockRows,
    LinearSpec,
    LLSVMResult,
    NewtonProblem,
    fit_llsvm_solution,
)
from gpuksvm.solvers.nystrom.maps import MapParams
from gpuksvm.estimators.llsvm import (
    LLSVM,
    fit_llsvm_grid,
    nystrom_maps,
    spectrum_objective,
    supervised_spectrum,
)


def blobs(rng, n_per, centers, scale=0.3):
    X = np.vstack([c + scale * rng.normal(size=(n_per, len(c))) for c in centers])
    y = np.repeat(np.arange(len(centers)), n_per)
    return X, y


def two_moons(n, rng, noise=0.1):
    t = rng.uniform(0, np.pi, size=n)
    lab = rng.integers(0, 2, size=n)
    X = np.c_[np.cos(t) + lab * 1.0, np.sin(t) * np.where(lab, -1, 1) + lab * 0.4]
    X += noise * rng.normal(size=X.shape)
    return X, np.where(lab == 1, 1, -1)


# --------------------------------------------------------------------------- k-means
def test_kmeans_recovers_separated_clusters(rng):
    centers = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=float)
    X, lab = blobs(rng, 50, centers, scale=0.1)
    for init in ("k-means++", "random"):
        res = kmeans(X, 4, n_iter=10, init=init, random_state=0)
        assert res.centers.shape == (4, 2)
        # k-means++ always finds all four blobs here; random seeds can merge two
        if init == "k-means++":
            found = np.unique(np.round(res.centers) + 0.0, axis=0)
            np.testing.assert_array_equal(found, np.unique(centers, axis=0))
        assert res.labels.shape == (200,)
        # inertia is the sum of squared distances to the assigned centres
        d2 = ((X - res.centers[res.labels]) ** 2).sum()
        assert res.inertia == pytest.approx(d2, rel=1e-9)


def test_kmeans_reproducible_and_sample(rng):
    X = rng.normal(size=(500, 3))
    a = kmeans(X, 20, random_state=3, sample=200)
    b = kmeans(X, 20, random_state=3, sample=200)
    np.testing.assert_array_equal(a.centers, b.centers)
    assert a.labels.shape == (200,)
    c = kmeans(X, 20, random_state=4, sample=200)
    assert not np.array_equal(a.centers, c.centers)


def test_kmeans_lloyd_decreases_inertia(rng):
    X = rng.normal(size=(400, 4))
    r0 = kmeans(X, 15, n_iter=0, random_state=1)
    r5 = kmeans(X, 15, n_iter=5, random_state=1)
    assert r5.inertia < r0.inertia


def test_kmeanspp_batched_rounds_gives_distinct_seeds(rng):
    X = rng.normal(size=(300, 2))
    res = kmeans(X, 100, n_iter=0, pp_rounds=8, random_state=0)
    assert np.unique(res.centers, axis=0).shape[0] == 100
    # every seed is a data row
    d = ((res.centers[:, None, :] - X[None]) ** 2).sum(-1).min(1)
    assert d.max() < 1e-20


def test_kmeans_duplicates_and_sparse(rng):
    base = rng.normal(size=(5, 3))
    X = np.repeat(base, 10, axis=0)  # only 5 distinct points, ask for 8 centres
    res = kmeans(X, 8, random_state=0)
    assert np.all(np.isfinite(res.centers)) and res.inertia == pytest.approx(0.0, abs=1e-12)
    Xs = sp.random(80, 30, density=0.2, format="csr", random_state=0)
    a = kmeans(Xs, 6, random_state=2)
    b = kmeans(Xs.toarray(), 6, random_state=2)
    np.testing.assert_allclose(a.centers, b.centers, atol=1e-12)


def test_kmeans_errors(rng):
    X = rng.normal(size=(10, 2))
    with pytest.raises(ValueError, match="larger than"):
        kmeans(X, 11)
    with pytest.raises(ValueError, match="init"):
        kmeans(X, 2, init="bogus")
    with pytest.raises(ValueError, match="n_clusters"):
        kmeans(X, 0)


def test_nearest_centers_matches_brute_force(rng):
    X, C = rng.normal(size=(97, 5)), rng.normal(size=(13, 5))
    lab, d2 = nearest_centers(X, C, block_rows=10)
    D = ((X[:, None] - C[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(lab, D.argmin(1))
    np.testing.assert_allclose(d2, D.min(1), atol=1e-12)


def test_kmeans_landmarks_reduce_nystrom_error(rng):
    """The papers' reason for k-means: smaller ‖K − K̃‖_F than random landmarks."""
    centers = rng.uniform(-6, 6, size=(25, 3))
    X, _ = blobs(rng, 24, centers, scale=0.5)
    kern = Kernel("rbf", gamma=0.5)
    K = kernel_block(X, X, kern)

    def nys_err(Z):
        F = nystrom_maps(Z, [kern])[0].transform(X)
        return np.linalg.norm(K - F @ F.T)

    k = 25
    e_km = np.mean([nys_err(kmeans(X, k, random_state=s).centers) for s in range(3)])
    rs = np.random.RandomState(0)
    e_rand = np.mean([nys_err(X[rs.choice(len(X), k, replace=False)]) for _ in range(3)])
    assert e_km < 0.7 * e_rand


# --------------------------------------------------------------------------- maps
def test_nystrom_maps_batched_equals_single_and_exact_on_landmarks(rng):
    Z = rng.normal(size=(30, 4))
    kerns = [Kernel("rbf", gamma=g) for g in (0.05, 0.3, 1.0)] + [Kernel("poly", gamma=0.5, degree=2, coef0=1)]
    maps = nystrom_maps(Z, kerns, eig_floor=1e-12)
    for kern, m in zip(kerns, maps):
        one = nystrom_maps(Z, [kern], eig_floor=1e-12)[0]
        np.testing.assert_allclose(m.eigvals, one.eigvals, rtol=1e-8, atol=1e-12)
        Kzz = kernel_block(Z, Z, kern)
        F = m.transform(Z, block_rows=7)
        # F Fᵀ = K_zz on the landmarks (rank-k factor of Proposition 1); poly has rank 15
        np.testing.assert_allclose(F @ F.T, Kzz, atol=1e-7 * np.abs(Kzz).max())
        np.testing.assert_allclose(m.map, m.eigvecs * np.sqrt(m.spectrum)[None, :], atol=1e-10)
    assert maps[3].n_kept <= 15


def test_float32_floor_raised(rng):
    # float32 maps: K_zz and its eigendecomposition in float64, rounded; the floor is
    # raised to eps(float32)·λ_max (module docstring: the float32 round-off of F)
    Z = rng.normal(size=(20, 2)).astype(np.float32)
    m = nystrom_maps(Z, [Kernel("rbf", gamma=0.01)], eig_floor=1e-10)[0]
    m64 = nystrom_maps(Z.astype(np.float64), [Kernel("rbf", gamma=0.01)],
                       eig_floor=float(np.finfo(np.float32).eps))[0]
    assert m.map.dtype == np.float32
    lo = float(np.finfo(np.float32).eps) * float(m.eigvals.max())
    assert float(m.eigvals.min()) >= lo * (1 - 1e-6)
    assert float(m.eigvals.min()) <= 2 * lo              # not the old 10·eps floor
    np.testing.assert_allclose(m.map, m64.map, rtol=1e-5, atol=1e-6 * np.abs(m64.map).max())
    assert np.all(np.isfinite(m.map))


# --------------------------------------------------------------------------- LLSVM2 spectrum
def test_supervised_spectrum_matches_eq23_and_is_optimal(rng):
    X, y = two_moons(80, rng)
    Z = X[:25]
    kern = Kernel("rbf", gamma=2.0)
    nmap = nystrom_maps(Z, [kern], eig_floor=1e-12)[0]
    XL, yL = X[30:70], y[30:70]
    a, lam = 0.3, 2.0
    mu, c, mu0 = supervised_spectrum(nmap, XL, yL, reg=lam, a=a)
    # direct evaluation: A, 𝓛 = D − A built element by element, c = diag(Uᵀ K_Lzᵀ 𝓛 K_Lz U)
    n = len(yL)
    A = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            A[i, j] = 1.0 if yL[i] == yL[j] else -a
    Lap = np.diag(A.sum(1)) - A
    KLz = kernel_block(XL, Z, kern)
    U = nmap.eigvecs
    c_ref = np.diag(U.T @ KLz.T @ Lap @ KLz @ U)
    lam_z = np.linalg.eigvalsh(kernel_block(Z, Z, kern))
    np.testing.assert_allclose(c, c_ref, rtol=1e-9, atol=1e-9 * np.abs(c_ref).max())
    np.testing.assert_allclose(mu0, 1.0 / np.maximum(lam_z, nmap.eigvals.min()), rtol=1e-6)
    mu_ref = np.array([max(0.0, mu0[i] - c_ref[i] / (2 * lam)) for i in range(len(c_ref))])  # eq. (23)
    np.testing.assert_allclose(mu, mu_ref, rtol=1e-9, atol=1e-12 * np.abs(mu_ref).max())
    assert (mu == 0).any() and (mu > 0).any()  # both branches of (23) are exercised
    # (19): no feasible perturbation lowers cᵀμ + λ‖μ − μ₀‖²
    f_star = spectrum_objective(mu, c, mu0, lam)
    prs = np.random.default_rng(1)
    for scale in (1e-6, 1e-3, 1e-1):
        for _ in range(50):
            pert = np.maximum(mu + scale * np.abs(mu).max() * prs.normal(size=mu.shape), 0)
            assert spectrum_objective(pert, c, mu0, lam) >= f_star - 1e-12 * abs(f_star)
    # a coordinate move along each axis (keeping μ ≥ 0) also never helps
    for i in range(len(mu)):
        for step in (-1e-4, 1e-4):
            pert = mu.copy()
            pert[i] = max(pert[i] + step, 0.0)
            assert spectrum_objective(pert, c, mu0, lam) >= f_star - 1e-12 * abs(f_star)


def test_supervised_spectrum_large_reg_recovers_nystrom(rng):
    X, y = two_moons(60, rng)
    nmap = nystrom_maps(X[:20], [Kernel("rbf", gamma=1.0)])[0]
    mu, _, mu0 = supervised_spectrum(nmap, X[20:], y[20:], reg=1e12)
    np.testing.assert_allclose(mu, mu0, rtol=1e-6)


# --------------------------------------------------------------------------- reference SVM
def dual_kernel_svm(K, y, C, loss, s2=1.0):
    """Exact kernel SVM with a regularized bias (kernel K + s²), solved in the dual.

    squared hinge: min ½αᵀ(Q + I/(2C))α − 1ᵀα, α ≥ 0;  hinge: min ½αᵀQα − 1ᵀα, 0 ≤ α ≤ C;
    Q = yyᵀ ∘ (K + s²).  Returns coefficients a = α∘y and the bias weight s²·Σa.
    """
    n = len(y)
    Q = np.outer(y, y) * (K + s2)
    if loss == "squared_hinge":
        Q = Q + np.eye(n) / (2 * C)
        bounds = [(0, None)] * n
    else:
        bounds = [(0, C)] * n
    res = minimize(lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1), np.zeros(n), jac=True,
                   method="L-BFGS-B", bounds=bounds,
                   options=dict(maxiter=100000, maxfun=100000, ftol=1e-16, gtol=1e-13))
    alpha = res.x
    g = Q @ alpha - 1
    ub = np.inf if loss == "squared_hinge" else C
    proj = np.where(alpha <= 1e-12, np.minimum(g, 0), np.where(alpha >= ub - 1e-12, np.maximum(g, 0), g))
    assert np.abs(proj).max() < 1e-7  # KKT of the reference itself
    coef = alpha * y
    return coef, s2 * coef.sum()


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_proposition1_equals_exact_kernel_svm(rng, loss):
    """Z = all training rows: LLSVM is the exact kernel SVM (same loss, regularized bias)."""
    X, y = two_moons(60, rng, noise=0.25)
    Xt, _ = two_moons(40, rng, noise=0.25)
    kern = Kernel("rbf", gamma=1.5)
    C = 2.0
    coef, b = dual_kernel_svm(kernel_block(X, X, kern), y.astype(float), C, loss)
    ref = kernel_block(Xt, X, kern) @ coef + b
    est = LLSVM(kernel="rbf", gamma=1.5, landmarks=X, C=C, loss=loss, eig_floor=1e-14, tol=1e-10,
                max_iter=100000, device="cpu", dtype=np.float64).fit(X, y)
    dec = est.decision_function(Xt)
    scale = np.abs(ref).max()
    assert np.abs(dec - ref).max() <= 1e-4 * scale
    # the training decision values too
    ref_tr = kernel_block(X, X, kern) @ coef + b
    assert np.abs(est.decision_function(X) - ref_tr).max() <= 1e-4 * np.abs(ref_tr).max()


# --------------------------------------------------------------------------- estimator
def test_rsvm_prediction_equals_linearized(rng):
    X, y = blobs(rng, 40, np.array([[0, 0], [3, 0], [0, 3]]), scale=0.8)
    est = LLSVM(gamma=0.5, n_landmarks=30, C=5.0, device="cpu", random_state=0,
                dtype=np.float64).fit(X, y)
    assert est.dual_coef_.shape == (3, 30) and est.coef_.shape == (3, 30)
    np.testing.assert_allclose(est.dual_coef_, est.coef_ @ est.map_.T, rtol=1e-12)
    Xt = rng.normal(size=(50, 2)) * 2
    lin = est.transform(Xt) @ est.coef_.T + est.intercept_
    rsvm = est.decision_function(Xt)
    assert rsvm.shape == (50, 3)
    np.testing.assert_allclose(rsvm, lin, atol=1e-9 * np.abs(lin).max())
    # Σⱼ μⱼ κ(x, zⱼ) + b written out
    direct = kernel_block(Xt, est.landmarks_, est.kernel_) @ est.dual_coef_.T + est.intercept_
    np.testing.assert_allclose(rsvm, direct, atol=1e-12 * np.abs(direct).max())
    # multi-class OvR shares one map
    assert est.map_.shape == (30, 30)
    assert est.score(X, y) > 0.85
    np.testing.assert_array_equal(est.predict(Xt), est.classes_[np.argmax(rsvm, 1)])


def test_float32_default_agrees_with_float64(rng):
    """The default dtype is float32 on the CPU too; it must classify like the float64 reference,
    and Proposition 2 (RSVM prediction == linearized prediction) holds to float32 round-off."""
    X, y = blobs(rng, 60, np.array([[0, 0], [3, 0], [0, 3]]), scale=0.9)
    Xt = rng.normal(size=(300, 2)) * 2
    kw = dict(gamma=0.5, n_landmarks=40, C=5.0, device="cpu", random_state=0)
    assert LLSVM().dtype == "float32"
    a = LLSVM(**kw).fit(X, y)
    b = LLSVM(dtype=np.float64, **kw).fit(X, y)
    assert a.map_.dtype == np.float32 and a.coef_.dtype == np.float32
    assert b.map_.dtype == np.float64
    np.testing.assert_allclose(a.landmarks_, b.landmarks_, atol=1e-4)
    da, db = a.decision_function(Xt), b.decision_function(Xt)
    assert np.mean(a.predict(Xt) == b.predict(Xt)) >= 0.99
    np.testing.assert_allclose(da, db, atol=2e-3 * np.abs(db).max())
    lin = a.transform(Xt) @ a.coef_.T + a.intercept_
    np.testing.assert_allclose(da, lin, atol=1e-4 * np.abs(lin).max())
    # None keeps the library's convention (float64 on the CPU)
    assert LLSVM(dtype=None, **kw).fit(X, y).map_.dtype == np.float64


def test_binary_labels_kept_and_checkerboard(rng):
    from gpuksvm.datasets import make_checkerboard

    X, y = make_checkerboard(2000, random_state=0)
    Xt, yt = make_checkerboard(2000, random_state=1)
    labels = np.where(y > 0, "white", "black")
    est = LLSVM(gamma=30.0, C=10.0, n_landmarks=150, device="cpu", random_state=0).fit(X, labels)
    assert list(est.classes_) == ["black", "white"]
    acc = np.mean(est.predict(Xt) == np.where(yt > 0, "white", "black"))
    assert acc > 0.93
    assert est.decision_function(Xt).shape == (2000,)
    assert est.fit_times_.keys() == {"landmarks", "map", "features", "svm"}


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_kernels_rbf_and_poly(rng, kernel):
    X = rng.uniform(-1, 1, size=(400, 2))
    y = np.where((X ** 2).sum(1) < 0.5, 1, -1)  # a circle: degree-2 separable
    est = LLSVM(kernel=kernel, gamma=1.0, degree=2, coef0=1.0, n_landmarks=40, C=100.0,
                device="cpu", random_state=0).fit(X, y)
    assert est.kernel_.name == kernel
    assert est.score(X, y) > 0.95


def test_supervised_spectrum_estimator(rng):
    X, y = two_moons(300, rng, noise=0.2)
    est = LLSVM(gamma=2.0, n_landmarks=40, C=10, spectrum="supervised", n_labeled=50,
                spectrum_reg=1e4, device="cpu", random_state=0).fit(X, y)
    nys = LLSVM(gamma=2.0, n_landmarks=40, C=10, device="cpu", random_state=0).fit(X, y)
    np.testing.assert_allclose(est.landmarks_, nys.landmarks_)
    assert not np.allclose(est.spectrum_, nys.spectrum_)
    np.testing.assert_allclose(nys.spectrum_, 1.0 / nys.eigvals_)
    assert est.score(X, y) > 0.85
    with pytest.raises(ValueError, match="spectrum_reg"):
        LLSVM(gamma=2.0, n_landmarks=40, spectrum="supervised", spectrum_reg=1e-12, dissimilar_pair_weight=0.2,
              device="cpu", random_state=0).fit(X, y)


@pytest.mark.parametrize("d,k", [(2, 100), (2, 10), (3, 10), (3, 100)])
def test_supervised_spectrum_on_an_easy_gaussian_problem(d, k):
    """Issue 14: spectrum="supervised" reached 65.7 % (k=100) and 47.7 % (3-D, k=10) on an easy
    linearly separable Gaussian problem where the Nyström spectrum gives > 99 %: with a = 0.2 the
    update zeroed the leading eigen-directions.  The paper's a = 1 (𝓛 = D − yyᵀ) keeps them."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, d))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    Xt = rng.normal(size=(2000, d))
    yt = (Xt[:, 0] + Xt[:, 1] > 0).astype(int)
    sup = LLSVM(n_landmarks=k, spectrum="supervised", device="cpu", random_state=0).fit(X, y)
    nys = LLSVM(n_landmarks=k, device="cpu", random_state=0).fit(X, y)
    assert sup.score(Xt, yt) > 0.98
    assert sup.score(Xt, yt) >= nys.score(Xt, yt) - 0.01


def test_sample_weight_zero_equals_dropping_rows(rng):
    X, y = two_moons(120, rng, noise=0.2)
    Z = X[::6]
    sw = np.ones(len(y))
    sw[:30] = 0
    kw = dict(gamma=1.0, landmarks=Z, C=3.0, tol=1e-10, max_iter=100000, device="cpu", dtype=np.float64)
    a = LLSVM(**kw).fit(X, y, sample_weight=sw)
    b = LLSVM(**kw).fit(X[30:], y[30:])
    Xt, _ = two_moons(30, rng)
    da, db = a.decision_function(Xt), b.decision_function(Xt)
    np.testing.assert_allclose(da, db, atol=1e-4 * np.abs(db).max())
    # class_weight reaches the linear SVM: upweighting a class moves the decision towards it
    c = LLSVM(class_weight={1: 20.0}, **kw).fit(X, y)
    d = LLSVM(**kw).fit(X, y)
    assert np.mean(c.predict(Xt) == 1) >= np.mean(d.predict(Xt) == 1)
    assert np.mean(c.decision_function(X)) > np.mean(d.decision_function(X))


def test_sparse_equals_dense_and_inputs_untouched(rng):
    Xd = sp.random(150, 12, density=0.3, format="csr", random_state=0)
    y = np.where(np.asarray(Xd.sum(1)).ravel() > np.median(np.asarray(Xd.sum(1))), 1, -1)
    Xs = Xd.copy()
    dense = Xd.toarray()
    dense_copy = dense.copy()
    kw = dict(gamma=0.5, n_landmarks=20, C=1.0, device="cpu", random_state=0, tol=1e-8, dtype=np.float64)
    a = LLSVM(**kw).fit(Xs, y)
    b = LLSVM(**kw).fit(dense, y)
    np.testing.assert_allclose(a.landmarks_, b.landmarks_, atol=1e-12)
    np.testing.assert_allclose(a.decision_function(Xs), b.decision_function(dense), atol=1e-6)
    np.testing.assert_array_equal(dense, dense_copy)
    assert (Xs != Xd).nnz == 0
    for lm in ("random",):
        c = LLSVM(landmarks=lm, **{k: v for k, v in kw.items()}).fit(Xs, y)
        assert c.landmarks_.shape == (20, 12)


def test_reproducible_and_pickle(rng):
    X, y = two_moons(200, rng)
    kw = dict(gamma=2.0, n_landmarks=25, device="cpu", random_state=7)
    a, b = LLSVM(**kw).fit(X, y), LLSVM(**kw).fit(X, y)
    np.testing.assert_array_equal(a.landmarks_, b.landmarks_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.decision_function(X), a.decision_function(X))
    assert c.to_device("cpu") is c


def test_bad_input(rng):
    X, y = two_moons(50, rng)
    with pytest.raises(ValueError, match="NaN|infinity"):
        Xn = X.copy()
        Xn[3, 1] = np.nan
        LLSVM(n_landmarks=5, device="cpu").fit(Xn, y)
    with pytest.raises(ValueError, match="class"):
        LLSVM(n_landmarks=5, device="cpu").fit(X, np.ones(len(X)))
    with pytest.raises(ValueError, match="n_landmarks"):
        LLSVM(n_landmarks=0, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="landmarks"):
        LLSVM(landmarks="bogus", device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="shape"):
        LLSVM(landmarks=np.zeros((4, 3)), device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="C"):
        LLSVM(C=-1.0, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="loss"):
        LLSVM(loss="log", device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="spectrum"):
        LLSVM(spectrum="magic", device="cpu").fit(X, y)
    est = LLSVM(n_landmarks=5, device="cpu", random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.zeros((3, 5)))
    with pytest.warns(UserWarning, match="n_landmarks"):
        LLSVM(n_landmarks=500, device="cpu", random_state=0).fit(X, y)
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        LLSVM().transform(X)
    with pytest.raises(AttributeError):
        est.predict_proba(X)


def test_grid_equals_individual_fits(rng):
    X, y = two_moons(150, rng, noise=0.2)
    Z = X[::5]
    base = LLSVM(landmarks=Z, tol=1e-9, max_iter=100000, device="cpu", dtype=np.float64)
    models = fit_llsvm_grid(X, y, gammas=[0.5, 2.0], Cs=[1.0, 10.0], estimator=base)
    assert [(m.gamma, m.C) for m in models] == [(0.5, 1.0), (0.5, 10.0), (2.0, 1.0), (2.0, 10.0)]
    for m in models:
        ind = LLSVM(landmarks=Z, gamma=m.gamma, C=m.C, tol=1e-9, max_iter=100000, device="cpu",
                    dtype=np.float64).fit(X, y)
        np.testing.assert_allclose(m.decision_function(X), ind.decision_function(X),
                                   atol=1e-6 * np.abs(ind.decision_function(X)).max())
    sup = fit_llsvm_grid(X, y, gammas=[0.5, 2.0], Cs=[1.0],
                         estimator=LLSVM(n_landmarks=20, spectrum="supervised", spectrum_reg=100.0,
                                         n_labeled=40, device="cpu", random_state=0))
    assert all(m.spectrum == "supervised" for m in sup)
    np.testing.assert_array_equal(sup[0].landmarks_, sup[1].landmarks_)


def test_feature_names_and_transform(rng):
    X, y = two_moons(80, rng)
    est = LLSVM(n_landmarks=10, device="cpu", random_state=0)
    F = est.fit_transform(X, y)
    assert F.shape == (80, 10)
    np.testing.assert_allclose(F, est.transform(X))
    names = est.get_feature_names_out()
    assert names[0] == "llsvm0" and len(names) == 10


def test_probability(rng):
    from gpuksvm.estimators.linear_svm import LinearSVM

    if not hasattr(LinearSVM, "predict_proba"):
        pytest.skip("LinearSVM has no Platt scaling yet")
    X, y = blobs(rng, 40, np.array([[0, 0], [3, 0], [0, 3]]), scale=0.8)
    est = LLSVM(gamma=0.5, n_landmarks=20, probability=True, device="cpu", random_state=0).fit(X, y)
    P = est.predict_proba(X)
    assert P.shape == (120, 3)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-9)
    assert np.mean(est.classes_[P.argmax(1)] == est.predict(X)) > 0.95
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), P, rtol=1e-9)


# --------------------------------------------------------------------------- out of core
def test_out_of_core_block_source_and_file(rng, tmp_path):
    from sklearn.datasets import dump_svmlight_file

    from gpuksvm.data.blocks import as_block_source
    from gpuksvm.datasets import make_checkerboard

    X, y = make_checkerboard(1200, grid=2, flip=0.1, random_state=0)
    Xt, yt = make_checkerboard(2000, grid=2, random_state=1)
    kw = dict(gamma=10.0, C=10.0, n_landmarks=30, kmeans_sample=500, device="cpu", random_state=0,
              dtype="float64", tol=1e-8)
    mem = LLSVM(**kw).fit(X, y)
    assert mem.score(Xt, yt) > 0.95
    src = as_block_source(X, y, block_size=400)
    ooc = LLSVM(block_size=400, **kw).fit(src)
    assert ooc.n_features_in_ == 2 and ooc.landmarks_.shape == (30, 2)
    # issue 15 item 6: the k-means sample is the in-memory fit's random sample (one
    # reservoir pass over the blocks), not the first 500 rows
    np.testing.assert_allclose(ooc.landmarks_, mem.landmarks_, rtol=1e-12)
    np.testing.assert_allclose(ooc.map_, mem.map_, rtol=1e-10, atol=1e-12)
    # issue 15 item 5: Newton over the streamed blocks reaches the in-memory optimum
    # (SBM's three passes stopped 1e-2 away from it)
    assert ooc.svm_.solver_ == "newton-stream" and ooc.svm_.converged_
    assert ooc.svm_.n_passes_ >= 2
    np.testing.assert_allclose(ooc.svm_.objective_, mem.svm_.objective_, rtol=1e-7)
    d_mem = mem.decision_function(X)
    np.testing.assert_allclose(ooc.decision_function(X), d_mem, atol=1e-5 * np.abs(d_mem).max())
    path = tmp_path / "cb.svm"
    dump_svmlight_file(X, y, str(path))
    f = LLSVM(block_size=400, **kw).fit(str(path))
    np.testing.assert_allclose(f.svm_.objective_, mem.svm_.objective_, rtol=1e-7)
    # the hinge loss still trains by SBM
    hinge = LLSVM(block_size=400, loss="hinge", **kw).fit(src)
    assert hinge.svm_.solver_ == "sbm" and abs(hinge.score(Xt, yt) - mem.score(Xt, yt)) < 0.03
    with pytest.raises(ValueError, match="sample_weight"):
        LLSVM(**kw).fit(src, sample_weight=np.ones(1200))


def test_out_of_core_multiclass_and_float32_equal_in_memory(rng):
    from gpuksvm.data.blocks import as_block_source

    X, y = blobs(rng, 300, np.array([[0, 0], [3, 0], [0, 3]]), scale=1.0)
    perm = rng.permutation(X.shape[0])
    X, y = X[perm], y[perm]
    kw = dict(gamma=0.5, C=3.0, n_landmarks=25, kmeans_sample=400, device="cpu", random_state=1,
              class_weight={1: 2.0})
    for dtype in ("float64", "float32"):
        mem = LLSVM(dtype=dtype, tol=1e-8, **kw).fit(X, y)
        ooc = LLSVM(dtype=dtype, tol=1e-8, block_size=250, **kw).fit(as_block_source(X, y, block_size=250))
        assert ooc.svm_.solver_ == "newton-stream"
        np.testing.assert_allclose(ooc.landmarks_, mem.landmarks_)
        # float32: F = K M is rounded in memory, the stream sums K and M in float64
        rtol = 1e-7 if dtype == "float64" else 2e-4
        np.testing.assert_allclose(ooc.svm_.objective_, mem.svm_.objective_, rtol=rtol)
        assert np.mean(ooc.predict(X) == mem.predict(X)) > 0.995


@pytest.mark.parametrize("kernel", [Kernel("rbf", gamma=0.7), Kernel("poly", gamma=0.5, degree=2, coef0=1.0),
                                    Kernel("linear")])
def test_feature_sq_norm_bound_holds(rng, kernel):
    """The out-of-core cost rule's bound max‖K(x, Z) M‖² ≤ maxⱼ(sⱼλⱼ)·max κ(x, x), for the
    Nyström and the supervised (LLSVM2) spectrum; tight for RBF with the Nyström spectrum."""
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int)
    nmap = nystrom_maps(X[:25], [kernel], dtype=np.float64)[0]
    sup = nmap.with_spectrum(supervised_spectrum(nmap, X[:80], y[:80], reg=1.0, a=1.0)[0])
    sq = float((X * X).sum(axis=1).max())
    for m in (nmap, sup):
        F = m.transform(X)
        assert float((F * F).sum(axis=1).max()) <= m.feature_sq_norm_bound(sq) * (1 + 1e-9)
    if kernel.name == "rbf":
        assert nmap.feature_sq_norm_bound(sq) == pytest.approx(1.0)
        assert float((nmap.transform(X) ** 2).sum(axis=1).max()) > 0.9


def test_out_of_core_rank_deficient_map_at_large_C():
    """A degree-2 polynomial kernel on 3 features has rank 10 < k = 20: the streamed Newton's
    Gram T̃ᵀ G T̃ lost positive definiteness to round-off amplified by M (the floored directions)
    and the fit raised LinAlgError from C = 1e6 on; the Hessian H ≥ I is now floored at 1."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int)
    blocks = [(X[a:a + 300], y[a:a + 300]) for a in range(0, 2000, 300)]
    kw = dict(C=1e6, kernel="poly", degree=2, gamma=0.5, coef0=1.0, dtype="float64", max_iter=500,
              n_landmarks=20, device="cpu", random_state=0)
    ooc = LLSVM(**kw).fit(blocks)
    mem = LLSVM(**kw).fit(X, y)
    assert ooc.svm_.solver_ == "newton-stream" and ooc.svm_.converged_
    np.testing.assert_allclose(ooc.map_, mem.map_)
    F = mem.transform(X)
    Y = np.where(y == 1, 1.0, -1.0)[:, None]

    def objective(svm):
        w, b = svm.coef_[0], svm.intercept_[0]
        return 0.5 * (w @ w + b * b) + 1e6 * np.sum(np.maximum(0.0, 1 - Y[:, 0] * (F @ w + b)) ** 2)
    # the streamed solution is at least as good as the in-memory one (here: 6 % lower)
    assert objective(ooc.svm_) <= objective(mem.svm_) * (1 + 1e-6)
    assert ooc.score(X, y) == mem.score(X, y) == 1.0


# --------------------------------------------------------------------------- sklearn


# --------------------------------------------------------------------------- GPU
class _OracleRows(ArrayRows):
    """Rows in memory that hand the orchestration a Newton oracle (the seam the Dask rows use)."""

    def problem(self, features, spec):
        F = np.c_[features, np.full(features.shape[0], spec.intercept_scaling)]
        classes, idx = np.unique(self.y, return_inverse=True)
        Y = np.where(idx == 1, 1.0, -1.0)[:, None]
        cost = np.full_like(Y, spec.C)

        def stats(W, active):
            O = F @ W
            act = Y * O < 1
            R = np.where(act, O - Y, 0.0)
            hess = np.stack([spec.C * F[act[:, j]].T @ F[act[:, j]] for j in range(W.shape[1])])
            return {"loss": spec.C * (R * R).sum(axis=0), "grad": spec.C * F.T @ R, "hess": hess}

        def line_stats(W, P, t):
            return line_derivatives(F @ W, F @ P, Y, cost, t)

        oracle = ReducedOracle(stats, line_stats, dim=F.shape[1], m=1, npos=np.array([np.sum(idx == 1)]),
                               n=F.shape[0], scale=spec.intercept_scaling)
        return NewtonProblem(oracle, classes, 0.0, "newton-oracle", report=lambda sol: {"oracle": sol.n_iter})


class _NewtonStage:
    """A linear stage: LinearSVM's Newton solver on the features."""

    def fit(self, spec, X, y=None, sample_weight=None):
        return LinearSVM(C=spec.C, solver="newton", tol=spec.tol, max_iter=spec.max_iter, device="cpu",
                         dtype=np.float64, random_state=0).fit(X, y, sample_weight=sample_weight)

    def from_newton(self, *args, **kwargs):
        raise AssertionError("rows in memory hand over features, not an oracle")


def test_row_sources_plug_into_one_fit(rng):
    """fit(X, y), fit(ArrayRows), fit(BlockRows) and a row source with its own Newton oracle
    run the same orchestration (fit_llsvm_solution) and store through the same writer."""
    X, y = two_moons(600, rng, noise=0.2)
    kw = dict(gamma=2.0, n_landmarks=30, C=5.0, tol=1e-10, max_iter=500, random_state=0, dtype=np.float64,
              device="cpu")
    ref = LLSVM(solver="newton", **kw).fit(X, y)
    same = LLSVM(solver="newton", **kw).fit(ArrayRows(X, y))
    np.testing.assert_array_equal(same.dual_coef_, ref.dual_coef_)
    np.testing.assert_array_equal(same.landmarks_, ref.landmarks_)
    blocks = LLSVM(**kw).fit(BlockRows([(X[i:i + 200], y[i:i + 200]) for i in range(0, 600, 200)]))
    np.testing.assert_array_equal(blocks.landmarks_, ref.landmarks_)
    assert blocks.svm_.solver_ == "newton-stream"
    d_ref = ref.decision_function(X)
    np.testing.assert_allclose(blocks.decision_function(X), d_ref, atol=1e-5 * np.abs(d_ref).max())
    est = LLSVM(**kw).fit(_OracleRows(X, y))
    assert est.svm_.solver_ == "newton-oracle" and est.svm_.converged_ and not hasattr(est, "dask_info_")
    np.testing.assert_allclose(est.decision_function(X), d_ref, atol=1e-5 * np.abs(d_ref).max())
    # the solver on its own, with a linear stage of the caller's
    params = MapParams(n_landmarks=30, landmarks="kmeans", kmeans_iter=5, kmeans_init="k-means++",
                       kmeans_sample=20000, eig_floor=1e-10, spectrum="nystrom", n_labeled=100, spectrum_reg=1.0,
                       dissimilar_pair_weight=1.0)
    res = fit_llsvm_solution(ArrayRows(X, y), kernel=ref.kernel_, params=params,
                             spec=LinearSpec(C=5.0, tol=1e-10, max_iter=500), linear=_NewtonStage(),
                             device=bk.CPU, dtype=np.float64, random_state=0)
    assert isinstance(res, LLSVMResult) and res.fit_times.keys() == {"landmarks", "map", "features", "svm"}
    np.testing.assert_array_equal(res.dual_coef, ref.dual_coef_)
    np.testing.assert_allclose(res.dual_coef, res.coef @ res.map.T)
    with pytest.raises(ValueError, match="row source"):
        LLSVM(**kw).fit(ArrayRows(X, y), y)


@pytest.mark.gpu
def test_gpu_kmeans_matches_cpu(gpu, rng):
    X = rng.normal(size=(600, 5))
    a = kmeans(X, 12, random_state=0, device="cpu", dtype=np.float64)
    b = kmeans(gpu.asarray(X), 12, random_state=0, device="gpu", dtype=np.float64)
    np.testing.assert_allclose(bk.to_host(b.centers), a.centers, atol=1e-9)
    np.testing.assert_array_equal(b.labels, a.labels)


@pytest.mark.gpu
def test_gpu_maps_match_cpu(gpu, rng):
    Z = rng.normal(size=(40, 3))
    kerns = [Kernel("rbf", gamma=g) for g in (0.2, 1.0)]
    a = nystrom_maps(Z, kerns)
    b = nystrom_maps(gpu.asarray(Z), kerns)
    X = rng.normal(size=(100, 3))
    for ma, mb in zip(a, b):
        Fa, Fb = ma.transform(X), bk.to_host(mb.transform(gpu.asarray(X)))
        np.testing.assert_allclose(Fa @ Fa.T, Fb @ Fb.T, atol=1e-8)  # eigenvector signs may differ


@pytest.mark.gpu
@pytest.mark.parametrize("spectrum", ["nystrom", "supervised"])
def test_gpu_llsvm_matches_cpu(gpu, rng, spectrum):
    X, y = two_moons(400, rng, noise=0.2)
    kw = dict(gamma=2.0, n_landmarks=30, C=5.0, tol=1e-8, max_iter=10000, spectrum=spectrum,
              spectrum_reg=100.0, random_state=0, dtype=np.float64)
    a = LLSVM(device="cpu", **kw).fit(X, y)
    b = LLSVM(device="gpu", **kw).fit(X, y)
    np.testing.assert_allclose(bk.to_host(b.landmarks_), a.landmarks_, atol=1e-9)
    da = a.decision_function(X)
    db = b.decision_function(X)  # NumPy in -> NumPy out
    assert isinstance(db, np.ndarray)
    np.testing.assert_allclose(db, da, atol=1e-4 * np.abs(da).max())
    dg = b.decision_function(gpu.asarray(X))
    assert bk.is_gpu_array(dg)
    # float32 default on the GPU still classifies the same
    c = LLSVM(device="gpu", **{**kw, "dtype": None}).fit(X, y)
    assert np.mean(c.predict(X) == a.predict(X)) > 0.98
    # pickled GPU model predicts on the CPU
    d = pickle.loads(pickle.dumps(b))
    np.testing.assert_allclose(d.decision_function(X), db, atol=1e-6 * np.abs(db).max())
