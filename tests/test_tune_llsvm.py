"""The LLSVM shared-work search engine against independent fits, (candidate, split) by split."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

from gpuksvm.array import backend as bk
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.estimators.llsvm import LLSVM
from gpuksvm.model_selection import llsvm as engine
from gpuksvm.model_selection.shared import engine_for

from _tune_data import xor_classes


def _data(n=600, classes=2, seed=0):
    return xor_classes(n, classes=classes, seed=seed, third_above=0.9)


def _grid(gammas=(0.5, 2.0), Cs=(0.5, 4.0, 32.0)):
    return [{"gamma": g, "C": C} for g in gammas for C in Cs]


def _host(a):
    return np.asarray(bk.to_host(a))


def _check_equivalent(est, X, y, splits, cands, sample_weight=None, shared=engine.SHARED):
    """Every SplitFit equals the independent fit; returns the fits."""
    fits = list(engine.search_llsvm(est, X, y, splits, cands, sample_weight=sample_weight))
    assert sorted((f.candidate, f.split) for f in fits) == [(c, s) for c in range(len(cands))
                                                          for s in range(len(splits))]
    for f in fits:
        assert f.error is None and f.shared == shared and f.fit_time > 0
        tr, te = splits[f.split]
        kw = {} if sample_weight is None else {"sample_weight": sample_weight[tr]}
        ref = clone(est).set_params(**cands[f.candidate]).fit(bk.take_rows(X, tr), y[tr], **kw)
        got = f.estimator
        assert got.get_params() == ref.get_params()
        np.testing.assert_array_equal(got.classes_, ref.classes_)
        np.testing.assert_allclose(_host(got.landmarks_), _host(ref.landmarks_), rtol=1e-6, atol=1e-8)
        Xte = bk.take_rows(X, te)
        d_got, d_ref = _host(got.decision_function(Xte)), _host(ref.decision_function(Xte))
        # each C starts from the previous C's solution: the same optimum to the Newton tolerance
        scale = max(1.0, float(np.abs(d_ref).max()))
        np.testing.assert_allclose(d_got, d_ref, rtol=1e-3, atol=1e-3 * scale)
        differ = _host(got.predict(Xte)) != _host(ref.predict(Xte))
        near = np.abs(d_ref).min(axis=1) < 1e-2 if d_ref.ndim == 2 else np.abs(d_ref) < 1e-2
        assert not (differ & ~near).any()
    return fits


def test_the_registry_gives_llsvm_its_engine():
    assert engine_for(LLSVM()) is engine.search_llsvm


def test_binary_grid_matches_independent_fits():
    X, y = _data()
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    _check_equivalent(LLSVM(n_landmarks=40, device="cpu", random_state=0), X, y, splits, _grid())


def test_three_classes_with_sample_weight_and_llsvm2():
    X, y = _data(classes=3, seed=1)
    sw = np.random.default_rng(2).uniform(0.2, 3.0, size=y.size)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=1).split(X, y))
    est = LLSVM(n_landmarks=30, device="cpu", random_state=3)
    _check_equivalent(est, X, y, splits, _grid(gammas=(1.0,)), sample_weight=sw)
    _check_equivalent(est.set_params(spectrum="supervised"), X, y, splits, _grid(gammas=(0.5, 1.0), Cs=(1.0, 8.0)))


def test_sparse_input_and_a_grid_that_is_not_a_product():
    X, y = _data(seed=4)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=2).split(X, y))
    cands = [{"gamma": 0.5, "C": 1.0}, {"gamma": 0.5, "C": 8.0}, {"gamma": 2.0, "C": 2.0},
             {"gamma": 2.0, "C": 1.0, "n_landmarks": 20}]
    _check_equivalent(LLSVM(n_landmarks=30, device="cpu", random_state=0), sp.csr_matrix(X), y, splits, cands)


def test_settings_it_cannot_share_fall_back_to_independent_fits():
    X, y = _data(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    fits = list(engine.search_llsvm(est, X, y, splits, [{"gamma": "scale", "C": 1.0}, {"kernel": "linear"}]))
    assert len(fits) == 6
    reasons = {f.candidate: f.shared for f in fits}
    assert reasons[0] == "none: gamma is not a positive number"
    assert reasons[1] == "none: kernel='linear'"
    for f in fits:
        tr, te = splits[f.split]
        ref = clone(est).set_params(**[{"gamma": "scale", "C": 1.0}, {"kernel": "linear"}][f.candidate])
        ref.fit(X[tr], y[tr])
        np.testing.assert_allclose(_host(f.estimator.decision_function(X[te])), _host(ref.decision_function(X[te])))


def test_a_failing_setting_reports_its_own_error():
    X, y = _data(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    fits = list(engine.search_llsvm(est, X, y, splits, [{"gamma": 1.0, "C": 1.0, "n_landmarks": 0}]))
    assert len(fits) == 3 and all(f.estimator is None and isinstance(f.error, ValueError) for f in fits)
    assert all(f.shared.startswith("none: the shared fit failed") for f in fits)


def test_the_template_and_the_callers_arrays_are_unchanged():
    X, y = _data(n=300)
    X0, y0 = X.copy(), y.copy()
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    params = est.get_params()
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    list(engine.search_llsvm(est, X, y, splits, _grid()))
    assert est.get_params() == params and not hasattr(est, "landmarks_")
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("C", [1, 8])
def test_an_integer_C_stays_as_the_candidate_gave_it(C):
    X, y = _data(n=300)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    fits = list(engine.search_llsvm(LLSVM(n_landmarks=20, device="cpu", random_state=0), X, y, splits,
                                    [{"gamma": 1.0, "C": C}]))
    assert all(type(f.estimator.C) is int for f in fits)


def test_linear_svm_fit_from_equals_cold_fit():
    """The warm start along C (LinearSVM.fit_from): a cold solve's solution to the tolerance, no more steps."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(3000, 20)).astype(np.float32)
    y = np.sign(X[:, 0] + 0.3 * X[:, 1] + 0.2 * rng.normal(size=3000))
    y3 = np.digitize(X[:, 0] + 0.2 * rng.normal(size=3000), [-0.5, 0.5])
    for labels in (y, y3):
        prev = LinearSVM(C=1.0, solver="newton", device="cpu", dtype="float64").fit(X, labels)
        cold = LinearSVM(C=64.0, solver="newton", device="cpu", dtype="float64").fit(X, labels)
        warm = LinearSVM(C=64.0, solver="newton", device="cpu", dtype="float64").fit_from(prev, X, labels)
        np.testing.assert_allclose(warm.objective_, cold.objective_, rtol=1e-4)
        np.testing.assert_allclose(warm.decision_function(X), cold.decision_function(X), atol=1e-2)
        assert warm.n_iter_ <= cold.n_iter_ + 1


def test_fits_on_checked_rows_equal_fit_and_fit_from():
    """The C path validates the features once (LinearSVM._check_rows / _fit_rows): the same models
    as fit and fit_from on the same rows, bit for bit, sample weights and calibration included."""
    rng = np.random.RandomState(1)
    X = rng.normal(size=(800, 12)).astype(np.float32)
    y = np.sign(X[:, 0] + 0.4 * X[:, 1] + 0.3 * rng.normal(size=800))
    sw = rng.uniform(0.5, 2.0, size=800)
    for kw in ({}, {"sample_weight": sw}):
        first = LinearSVM(C=1.0, device="cpu")
        rows = first._check_rows(X, y, kw.get("sample_weight"))
        first._fit_rows(rows)
        cold = LinearSVM(C=1.0, device="cpu").fit(X, y, **kw)
        np.testing.assert_array_equal(first.coef_, cold.coef_)
        np.testing.assert_array_equal(first.intercept_, cold.intercept_)
        warm = LinearSVM(C=8.0, device="cpu")._fit_rows(rows, (first.coef_, first.intercept_))
        ref = LinearSVM(C=8.0, device="cpu").fit_from(cold, X, y, **kw)
        np.testing.assert_array_equal(warm.coef_, ref.coef_)
        assert warm.n_iter_ == ref.n_iter_ and warm.n_features_in_ == 12
    prob = LinearSVM(C=1.0, probability=True, random_state=0, device="cpu")
    prob._fit_rows(prob._check_rows(X, y, None))
    ref = LinearSVM(C=1.0, probability=True, random_state=0, device="cpu").fit(X, y)
    np.testing.assert_array_equal(prob.predict_proba(X[:50]), ref.predict_proba(X[:50]))


def _grid_models(X, y, **params):
    from gpuksvm.estimators.llsvm import fit_llsvm_grid

    est = LLSVM(n_landmarks=30, device="cpu", random_state=0, **params)
    return fit_llsvm_grid(X, y, gammas=[0.5, 2.0], Cs=[1.0, 8.0, 64.0], estimator=est)


def _without_memo(model):
    import copy

    plain = copy.copy(model)
    plain.__dict__.pop("_kernel_rows")
    return plain


def test_scoring_all_C_reuses_one_kernel_block_and_answers_as_without_it():
    """The models of one γ of fit_llsvm_grid keep K(X, Z) of the rows they last predicted on:
    the decisions, labels, features and probabilities are exactly those computed afresh."""
    X, y = _data(n=500, classes=3, seed=5)
    models = _grid_models(X[:400], y[:400])
    Xte = X[400:]
    memo = models[0]._kernel_rows
    assert all(m._kernel_rows is memo for m in models[:3]) and models[3]._kernel_rows is not memo
    for m in models:
        plain = _without_memo(m)
        for method in ("decision_function", "predict", "transform"):
            # a copy of the rows each time, as a search's scorer gets them
            np.testing.assert_array_equal(getattr(m, method)(Xte.copy()), getattr(plain, method)(Xte))
    memo._entries.clear()
    A = Xte[::-1].copy()
    models[0].decision_function(A)
    models[1].predict(A.copy())
    ((blocks, readers),) = memo._entries.values()
    assert len(blocks) == 1 and len(readers) == 2       # one kernel block, read by two C values
    models[2].decision_function(A)
    assert memo._entries == {}                          # every C has read it: dropped
    prob = _grid_models(X[:400], y[:400], probability=True)
    for m in prob[:2]:
        np.testing.assert_array_equal(m.predict_proba(Xte), _without_memo(m).predict_proba(Xte))


def test_the_kept_kernel_block_follows_the_rows_and_the_fit():
    """Rows changed in place, other rows, a refit on other data, a pickled copy: never a stale block."""
    import pickle

    X, y = _data(n=500, seed=6)
    model = _grid_models(X[:400], y[:400])[1]
    A, B = X[400:450].copy(), X[450:].copy()
    model.decision_function(A)
    A[:5] *= -1.0                                  # changed in place: computed afresh
    np.testing.assert_array_equal(model.decision_function(A), _without_memo(model).decision_function(A))
    model.decision_function(B)
    model.decision_function(X[:20])
    assert len(model._kernel_rows._entries) == model._kernel_rows.KEEP
    copy_ = pickle.loads(pickle.dumps(model))
    assert copy_._kernel_rows._entries == {} and copy_._kernel_rows.members == 3
    np.testing.assert_array_equal(copy_.decision_function(B), model.decision_function(B))
    model.fit(X[100:], y[100:])                    # new landmarks: the kept blocks go
    assert "_kernel_rows" not in model.__dict__
    ref = clone(model).fit(X[100:], y[100:])
    np.testing.assert_array_equal(model.decision_function(B), ref.decision_function(B))


def test_no_block_is_kept_beyond_a_64th_of_the_memory_budget():
    import gpuksvm

    X, y = _data(n=500, seed=7)
    model = _grid_models(X[:400], y[:400])[0]
    Xte = X[400:].astype(np.float32)            # 100 rows × 30 landmarks × 4 bytes = 12,000 bytes
    with gpuksvm.config_context(cpu_memory_budget=64 * 11_999):
        assert model._kernel_rows.blocks(Xte, model.landmarks_, model) is None
        np.testing.assert_array_equal(model.decision_function(Xte), _without_memo(model).decision_function(Xte))
    with gpuksvm.config_context(cpu_memory_budget=64 * 12_000):
        assert model._kernel_rows.blocks(Xte, model.landmarks_, model) == {}


def test_kernel_matvec_keeps_and_reuses_its_blocks():
    from gpuksvm.kernels.kernel import Kernel, kernel_matvec

    rng = np.random.default_rng(0)
    X, Z = rng.normal(size=(50, 3)), rng.normal(size=(7, 3))
    V1, V2 = rng.normal(size=(7, 2)), rng.normal(size=7)
    k = Kernel("rbf", gamma=0.4)
    kept: dict = {}
    a = kernel_matvec(X, Z, V1, k, block_rows=20, blocks=kept)
    assert sorted(kept) == [(0, 20, "<f8"), (20, 40, "<f8"), (40, 50, "<f8")]
    kept[(0, 20, "<f8")] = np.zeros((20, 7))      # taken from the dict, not recomputed
    b = kernel_matvec(X, Z, V2, k, block_rows=20, blocks=kept)
    np.testing.assert_array_equal(a, kernel_matvec(X, Z, V1, k, block_rows=20))
    np.testing.assert_array_equal(b[:20], 0.0)
    np.testing.assert_array_equal(b[20:], kernel_matvec(X, Z, V2, k, block_rows=20)[20:])


def test_the_host_fit_runs_on_one_blas_thread(monkeypatch):
    """k-means, the kernel blocks and the Newton steps of a CPU LLSVM fit run on one BLAS thread
    (NumPy's and SciPy's OpenBLAS would take the cores from each other)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from gpuksvm.estimators import llsvm as est_llsvm
    from gpuksvm.solvers.linear.newton_memory import newton_squared_hinge

    seen = []

    def blas_threads(_=None):
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))

    class Stage(est_llsvm._LinearSVMStage):
        def fit(self, spec, F, y=None, sample_weight=None):
            blas_threads()
            return super().fit(spec, F, y, sample_weight)

    monkeypatch.setattr(est_llsvm, "_LinearSVMStage", Stage)
    X, y = _data(n=400)
    with threadpool_limits(2, user_api="blas"):
        blas_threads()
        if seen[0] < 2:
            pytest.skip("this BLAS does not take 2 threads")
        newton_squared_hinge(X, np.where(y > 0, 1.0, -1.0), 1.0, method="cholesky", callback=blas_threads)
        LLSVM(n_landmarks=20, device="cpu", random_state=0).fit(X, y)
        blas_threads()
    assert len(seen) > 3 and all(n == 1 for n in seen[1:-1]) and seen[-1] >= 2


def test_the_search_does_each_shared_step_once(monkeypatch):
    """Work the engine shares is done once: k-means once per fold, the maps' eigendecomposition
    once per fold (all γ together), the features and their validation once per (fold, γ), and
    every C after the first on a (fold, γ) starts from the previous C's Hessian Grams."""
    from gpuksvm.estimators.linear_svm import LinearSVM as LSVM
    from gpuksvm.solvers.linear.newton_memory import DesignOracle
    from gpuksvm.solvers.nystrom import llsvm as nystrom_llsvm

    calls = {"landmarks": 0, "maps": 0, "features": 0, "checks": 0, "seeded": 0}

    def counted(name, f):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return f(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(nystrom_llsvm, "select_landmarks", counted("landmarks", nystrom_llsvm.select_landmarks))
    monkeypatch.setattr(nystrom_llsvm, "nystrom_maps", counted("maps", nystrom_llsvm.nystrom_maps))
    monkeypatch.setattr(nystrom_llsvm.ArrayRows, "features", counted("features", nystrom_llsvm.ArrayRows.features))
    monkeypatch.setattr(LSVM, "_check_rows", counted("checks", LSVM._check_rows))
    monkeypatch.setattr(DesignOracle, "seed_grams", counted("seeded", DesignOracle.seed_grams))
    X, y = _data(n=2400)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    fits = list(engine.search_llsvm(LLSVM(n_landmarks=40, device="cpu", random_state=0), X, y, splits,
                                    _grid(gammas=(0.5, 1.0, 2.0), Cs=(1.0, 8.0, 64.0))))
    assert len(fits) == 27 and all(f.error is None for f in fits)
    assert calls == {"landmarks": 3, "maps": 3, "features": 9, "checks": 9, "seeded": 18}


def test_newton_path_starts_each_C_from_the_previous_grams():
    """Along a C path (NewtonPath) the next solve adds only the rows whose activity changed to the
    previous C's Grams: far fewer Gram rows than a warm start from the weights alone, and the same
    solution as a cold solve to the tolerance; other rows or weights start afresh."""
    from gpuksvm.solvers.linear.newton_memory import NewtonPath, newton_squared_hinge

    rng = np.random.default_rng(0)
    F = rng.normal(size=(4000, 30)).astype(np.float32)
    Y = np.sign(F[:, 0] + 0.5 * F[:, 1] + 0.5 * rng.normal(size=4000))
    path, W = NewtonPath(), None
    for C in (1.0, 8.0, 64.0):
        on_path = newton_squared_hinge(F, Y, C, path=path, random_state=0)
        warm = newton_squared_hinge(F, Y, C, W0=W, random_state=0)
        cold = newton_squared_hinge(F, Y, C, random_state=0)
        W = warm.info["W"]
        np.testing.assert_allclose(on_path.objective, cold.objective, rtol=1e-5)
        np.testing.assert_allclose(on_path.coef, cold.coef, rtol=1e-3, atol=1e-3)
        if C > 1.0:
            assert on_path.info["gram_rows"] < 0.5 * warm.info["gram_rows"]
    assert path.grams(F.copy(), None, 1.0, 1, 1.0) is None          # other rows: nothing carried
    assert path.grams(F, np.ones(4000), 1.0, 1, 1.0) is None        # other weights
    assert path.grams(F, None, 1.0, 1, 128.0)[2] == 2.0             # the Grams scaled to the new C


def test_the_folds_run_apart_on_the_search_threads(monkeypatch):
    """The engine shares nothing across folds, so each fold is an engine call of its own (run on
    the search's n_jobs threads); the scores equal those of one thread."""
    from gpuksvm.model_selection import GridSearchCV

    calls = []
    real = engine.search_llsvm

    def counting(*args, **kwargs):
        calls.append(len(args[3]))        # the splits given to this call
        yield from real(*args, **kwargs)

    counting.splits_apart = real.splits_apart
    X, y = _data(n=300)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"gamma": [0.5, 2.0], "C": [0.5, 4.0]}
    est = LLSVM(n_landmarks=30, device="cpu", random_state=0)
    one = GridSearchCV(est, grid, cv=cv, n_jobs=1).fit(X, y)
    monkeypatch.setattr("gpuksvm.model_selection.shared.engine_for", lambda e: counting)
    monkeypatch.setattr("gpuksvm.model_selection.search.engine_for", lambda e: counting)
    two = GridSearchCV(est, grid, cv=cv, n_jobs=2).fit(X, y)
    assert calls == [1, 1, 1]
    np.testing.assert_array_equal(one.cv_results_["mean_test_score"], two.cv_results_["mean_test_score"])
    assert two.cv_results_["shared_work"][0] == engine.SHARED


def test_the_callers_memory_budget_reaches_the_search_threads(monkeypatch):
    """Settings are per thread: the engine calls on the search's threads run under the caller's
    cpu_memory_budget, shared among the threads (not the default budget of a new thread)."""
    from gpuksvm.model_selection import GridSearchCV

    seen = []
    real = engine.search_llsvm

    def recording(*args, **kwargs):
        seen.append(bk.memory_budget("cpu"))
        yield from real(*args, **kwargs)

    recording.splits_apart = True
    monkeypatch.setattr("gpuksvm.model_selection.search.engine_for", lambda e: recording)
    X, y = _data(n=300)
    est = LLSVM(n_landmarks=30, device="cpu", random_state=0)
    with bk.config_context(cpu_memory_budget=64_000_000):
        GridSearchCV(est, {"gamma": [0.5], "C": [1.0]}, cv=3, n_jobs=2).fit(X, y)
        GridSearchCV(est, {"gamma": [0.5], "C": [1.0]}, cv=3, n_jobs=1).fit(X, y)
    assert seen == [32_000_000] * 3 + [64_000_000] * 3
