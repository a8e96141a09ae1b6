"""Issue 14, sections 2–4: wrong results that passed silently, tracebacks that are now messages,
and README/code disagreements.  Every test here failed on the code before the fix."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from gpuksvm import CVM, LLSVM, OKFEB, SVI, KernelSVC, LinearSVM, OKFEBClassifier, OKFEBRegressor, OneClassCVM
from gpuksvm.kernels.kernel import Kernel, resolve_gamma
from gpuksvm.estimators.linear_svm import ScaledProblemWarning


def _data(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] + X[:, 1] > 0).astype(int)


ALL = {
    "LinearSVM": lambda **k: LinearSVM(device="cpu", **k),
    "KernelSVC": lambda **k: KernelSVC(device="cpu", **k),
    "LLSVM": lambda **k: LLSVM(n_landmarks=15, device="cpu", random_state=0, **k),
    "CVM": lambda **k: CVM(device="cpu", random_state=0, **k),
    "OneClassCVM": lambda **k: OneClassCVM(device="cpu", random_state=0, **k),
    "SVI": lambda **k: SVI(device="cpu", random_state=0, **k),
    "OKFEB": lambda **k: OKFEB(rank=5, n_landmarks=12, device="cpu", random_state=0, **k),
    "OKFEBClassifier": lambda **k: OKFEBClassifier(rank=5, n_landmarks=12, device="cpu", random_state=0, **k),
    "OKFEBRegressor": lambda **k: OKFEBRegressor(rank=5, n_landmarks=12, device="cpu", random_state=0, **k),
}
UNSUPERVISED = {"OneClassCVM", "OKFEB"}


def _fit(name, X, y, **kw):
    est = ALL[name](**kw)
    if name in UNSUPERVISED:
        return est.fit(X)
    return est.fit(X, X[:, 0] if name == "OKFEBRegressor" else y)


def _output(est, X):
    return est.transform(X) if type(est) is OKFEB else est.predict(X)


# --------------------------------------------------------------------------- 2. working dtype
@pytest.mark.parametrize("name", sorted(ALL))
def test_values_finite_in_float64_but_not_in_float32_are_refused(name):
    """1e39 is finite in float64 but inf in float32: fit and predict say so (issue 14 §2)."""
    X, y = _data()
    Xb = X.copy()
    Xb[0, 0] = 1e39
    with pytest.raises(ValueError, match=r"1e\+39, beyond the largest float32.*dtype='float64'"):
        _fit(name, Xb, y, dtype="float32")
    est = _fit(name, X, y, dtype="float32")
    with pytest.raises(ValueError, match=r"1e\+39, beyond the largest float32"):
        _output(est, Xb)


@pytest.mark.parametrize("name", sorted(ALL))
def test_squares_that_overflow_the_working_dtype_are_refused(name, capfd):
    """X·1e300 (float64) and X·1e20 (float32): every kernel value / Gram product would overflow;
    before, OverflowError (34, ...), LAPACK "DPOTRI" lines on stderr and 'zero-size array to
    reduction' (CVM), a broadcast error (LLSVM) or silent garbage."""
    X, y = _data()
    with pytest.raises(ValueError, match="squared norm .* beyond what float64 can hold.*Scale the features"):
        _fit(name, X * 1e300, y, dtype="float64")
    with pytest.raises(ValueError, match="squared norm .* beyond what float32.*dtype='float64'"):
        _fit(name, X * 1e20, y, dtype="float32")
    assert "DPOTRI" not in capfd.readouterr().err


def test_gamma_scale_on_huge_values_names_the_cause():
    """gamma="scale" on 1e20 data in float32 gave "gamma must be > 0, got 0.0" (a gamma the user
    never set): the moments are now float64, and an unusable result says what to change."""
    X, y = _data()
    g = resolve_gamma("scale", (X * 1e20).astype(np.float32))
    assert np.isfinite(g) and g > 0
    m = LLSVM(n_landmarks=15, dtype="float64", device="cpu", random_state=0).fit(X * 1e20, y)
    assert m.score(X * 1e20, y) > 0.9
    with pytest.raises(ValueError, match=r"gamma='scale' resolved to .*Var\(X\).*pass a numeric gamma"):
        resolve_gamma("scale", np.array([[0.0], [1e200], [-1e200]]) * 1e108)


# --------------------------------------------------------------------------- 2. extreme costs
@pytest.mark.parametrize("case", ["C=1e300", "sample_weight=1e200", "both", "float32"])
@pytest.mark.parametrize("solver", ["newton", "dual_cd", "liblinear"])
def test_linear_svm_extreme_costs_are_scaled_so_it_solves(case, solver):
    """C=1e300 or weights ≥ 1e200 gave an all-zero model with only overflow warnings."""
    X, y = _data()
    kw, fkw = {"C": 1e300}, {}
    if case == "sample_weight=1e200":
        kw, fkw = {}, {"sample_weight": np.full(len(y), 1e200)}
    elif case == "both":
        fkw = {"sample_weight": np.full(len(y), 1e200)}
    elif case == "float32":
        kw["dtype"] = "float32"
    if solver == "liblinear" and case == "float32":
        pytest.skip("LIBLINEAR computes in float64")
    with pytest.warns(ScaledProblemWarning, match="C → ∞ limit"):
        m = LinearSVM(solver=solver, device="cpu", **kw).fit(X, y, **fkw)
    _assert_scaled_limit(m, X, y)


def _assert_scaled_limit(m, X, y):
    """A finite, accurate model, scaled (cost_scale_), in the direction of a large ordinary C."""
    assert np.all(np.isfinite(m.coef_)) and np.abs(m.coef_).max() > 0
    assert m.score(X, y) >= 0.98
    assert m.cost_scale_ < 1e-100
    ref = LinearSVM(C=1e6, solver="newton", device="cpu").fit(X, y)
    cos = float(m.coef_[0] @ ref.coef_[0] / np.linalg.norm(m.coef_) / np.linalg.norm(ref.coef_))
    assert cos > 0.99


def test_ordinary_costs_are_not_scaled():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaledProblemWarning)
        assert LinearSVM(C=1e4, device="cpu").fit(X, y).cost_scale_ == 1.0


def test_llsvm_with_huge_sample_weights_solves():
    """LLSVM with sample_weight=1e200 returned an all-zero model."""
    X, y = _data()
    with pytest.warns(ScaledProblemWarning):
        m = LLSVM(n_landmarks=20, device="cpu", random_state=0).fit(X, y, sample_weight=np.full(200, 1e200))
    assert np.abs(m.coef_).max() > 0 and m.score(X, y) > 0.95


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_linear_svm_extreme_costs_out_of_core_are_scaled(dtype):
    """The same rule out of core ("newton-stream", merge of issue 15's streamed Newton):
    C=1e300 on a list of blocks overflowed into an all-zero model."""
    X, y = _data()
    blocks = [(X[:70], y[:70]), (X[70:], y[70:])]
    with pytest.warns(ScaledProblemWarning, match="C → ∞ limit"):
        m = LinearSVM(C=1e300, dtype=dtype, device="cpu").fit(blocks)
    assert m.solver_ == "newton-stream" and m.n_passes_ > 1
    _assert_scaled_limit(m, X, y)


def test_llsvm_extreme_costs_out_of_core_are_scaled():
    """Out-of-core LLSVM streams K(X_b, Z) with M applied to the statistics: its cost rule uses
    the bound ‖K(x, Z) M‖² ≤ κ(x, x) (no pass forming F); C=1e300 overflowed before."""
    X, y = _data()
    blocks = [(X[:70], y[:70]), (X[70:], y[70:])]
    with pytest.warns(ScaledProblemWarning):
        m = LLSVM(C=1e300, n_landmarks=20, device="cpu", random_state=0).fit(blocks)
    assert m.svm_.solver_ == "newton-stream" and m.svm_.cost_scale_ < 1e-100
    assert np.abs(m.coef_).max() > 0 and m.score(X, y) > 0.95


def test_zero_weight_class_out_of_core_is_an_error():
    """The one zero-weight-class rule on the out-of-core paths (Newton and SBM) too."""
    X, y = _data()
    blocks = [(X[:70], y[:70]), (X[70:], y[70:])]
    for solver in ("auto", "sbm"):
        with pytest.raises(ValueError, match="every row of class 0 has zero weight"):
            LinearSVM(class_weight={0: 0.0}, solver=solver, device="cpu").fit(blocks)


def test_linear_svm_huge_data_refused_not_zero():
    """X·1e300 gave an all-zero model; squares overflow float64, so it is refused clearly."""
    X, y = _data()
    with pytest.raises(ValueError, match="Scale the features"):
        LinearSVM(device="cpu").fit(X * 1e300, y)


def test_intercept_scaling_that_overflows_is_a_clear_error():
    """intercept_scaling=1e200 raised OverflowError (34, 'Numerical result out of range')."""
    X, y = _data()
    with pytest.raises(ValueError, match=r"intercept_scaling.* in the range \(0(\.0)?, 1e\+150\)"):
        LinearSVM(intercept_scaling=1e200, device="cpu").fit(X, y)


def test_huge_integer_parameter_is_a_clear_error():
    """C=10**400 (an int) raised OverflowError deep inside."""
    X, y = _data()
    with pytest.raises(ValueError, match="C is too large"):
        LinearSVM(C=10 ** 400, device="cpu").fit(X, y)


# --------------------------------------------------------------------------- 2. OK-FEB divergence
def test_okfeb_regressor_divergence_is_an_error():
    """OKFEBRegressor(learning_rate=1e6) trained into NaN and predicted NaN without complaint."""
    X, _ = _data()
    y = X[:, 0]
    with pytest.raises(ValueError, match=r"learning_rate must be in \(0, 2\)"):
        OKFEBRegressor(learning_rate=1e6, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="diverged.*Reduce learning_rate"):   # the online LMS
        OKFEBRegressor(learning_rate=1e6, normalized=False, solver="online", rank=5, n_landmarks=12,
                       device="cpu", random_state=0).fit(X, y)


def test_okfeb_sigmoid_kernel_failure_names_the_kernel():
    """The sigmoid kernel failed with a bare 'AᵀK_SA + λI is not positive definite'."""
    X, _ = _data()
    with pytest.raises(ValueError, match="kernel='sigmoid' is not positive semi-definite.*kernel='rbf'"):
        OKFEB(kernel="sigmoid", gamma=5.0, coef0=-1.0, rank=5, n_landmarks=12, device="cpu",
              random_state=0).fit(X)


def test_okfeb_absurd_sizes_refused_before_allocating():
    X, _ = _data()
    for kw in ({"n_landmarks": 10 ** 12}, {"rank": 10 ** 12}):
        with pytest.raises(ValueError, match="more than the .* of memory of this machine"):
            OKFEB(device="cpu", **kw).fit(X)


# --------------------------------------------------------------------------- 3. numeric messages
def test_fractional_polynomial_degree_is_refused_with_the_reason():
    """degree=2.5 said "use method='smo'" (no such parameter) and the SMO path gave NaN kernels."""
    with pytest.raises(ValueError, match="degree must be a whole number.*not a real number"):
        Kernel("poly", degree=2.5)
    X, y = _data()
    for name in ("KernelSVC", "LLSVM", "SVI", "OKFEB"):
        with pytest.raises(ValueError, match="whole number"):
            _fit(name, X, y, kernel="poly", degree=2.5)


def test_llsvm_kernel_overflow_names_the_parameter():
    """gamma=1e300 in float32 gave "Input X contains NaN" from the inner LinearSVM."""
    X, y = _data()
    with pytest.raises(ValueError, match="kernel matrix of the landmarks.*gamma=1e\\+300"):
        LLSVM(n_landmarks=15, gamma=1e300, device="cpu", random_state=0).fit(X, y)


# --------------------------------------------------------------------------- 4. README vs code
@pytest.mark.parametrize("name", ["OKFEB", "OKFEBClassifier", "OKFEBRegressor"])
def test_okfeb_takes_scipy_sparse_input(name):
    """README: every estimator accepts SciPy-sparse input; OK-FEB refused it."""
    X, y = _data()
    target = X[:, 0].copy() if name == "OKFEBRegressor" else y
    a = ALL[name]().fit(sp.csr_matrix(X), target) if name != "OKFEB" else ALL[name]().fit(sp.csr_matrix(X))
    b = ALL[name]().fit(X, target) if name != "OKFEB" else ALL[name]().fit(X)
    np.testing.assert_allclose(_output(a, sp.csr_matrix(X)), _output(b, X))


def test_solver_dual_cd_as_the_readme_says():
    X, y = _data()
    m = LinearSVM(solver="dual_cd", loss="hinge", device="cpu", random_state=0).fit(X, y)
    assert m.solver_ == "dual_cd"
    with pytest.warns(FutureWarning, match="solver='dual_cd'"):
        old = LinearSVM(solver="dcd", loss="hinge", device="cpu", random_state=0).fit(X, y)
    np.testing.assert_array_equal(old.coef_, m.coef_)


@pytest.mark.parametrize("est", ["LinearSVM", "LLSVM"])
def test_list_of_blocks_is_an_iterable_of_blocks(est):
    """README: "an iterable of blocks"; a list of (X, y) pairs failed with "requires y"."""
    X, y = _data(400)
    blocks = [(X[:150], y[:150]), (X[150:300], y[150:300]), (X[300:], y[300:])]
    m = (LinearSVM(device="cpu") if est == "LinearSVM" else
         LLSVM(n_landmarks=20, device="cpu", random_state=0)).fit(blocks)
    assert m.n_features_in_ == 3 and m.score(X, y) > 0.95
    with pytest.raises(TypeError, match="read only once.*list of .X_block, y_block. pairs"):
        LinearSVM(device="cpu").fit(iter(blocks))


def test_too_short_y_block_names_the_block():
    """A y block shorter than its X block gave "the block source does not yield the same rows"."""
    X, y = _data(200)
    with pytest.raises(ValueError, match=r"block 1: X_block has 100 rows but y_block has 50 labels"):
        LinearSVM(device="cpu").fit([(X[:100], y[:100]), (X[100:], y[100:150])])

    def gen():
        yield X[:100], y[:100]
        yield X[100:], y[100:150]

    with pytest.raises(ValueError, match=r"block 1: X_block has 100 rows but y_block has 50 labels"):
        LinearSVM(device="cpu").fit(gen)


@pytest.mark.parametrize("name", ["LinearSVM", "KernelSVC", "LLSVM"])
def test_sample_weights_zeroing_a_class_one_rule(name):
    """Zero weight on every row of a class: LinearSVM and LLSVM trained a one-sided model silently,
    KernelSVC failed with "subset 0 holds rows of only one class"; now one rule for all."""
    X, y = _data()
    sw = np.where(y == 1, 0.0, 1.0)
    est = ALL[name]()
    with pytest.raises(ValueError, match="every row of class 1 has zero weight"):
        est.fit(X, y, sample_weight=sw)
    with pytest.raises(ValueError, match="every row of class 0 has zero weight"):
        ALL[name](class_weight={0: 0.0, 1: 1.0}).fit(X, y)
