"""The KernelSVC shared-work search engine against independent fits, (candidate, split) by split."""
import threading
import weakref

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold

from gpuksvm.array import backend as bk
from gpuksvm.array.validation import encode_classes
from gpuksvm.estimators.kernel_svc import KernelSVC
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.model_selection import kernel_svc as engine
from gpuksvm.solvers.smo import gram_smo, path
from gpuksvm.solvers.smo.svc import solve_svc

from _tune_data import xor_classes


def _data(n=240, classes=2, seed=0):
    return xor_classes(n, classes=classes, seed=seed, noise=0.4)


def _grid(gammas=(0.5, 2.0), Cs=(0.1, 1.0, 10.0, 100.0)):
    return [{"gamma": g, "C": C} for g in gammas for C in Cs]


#: what the CPU engine records when the Gram matrix fits the budget: the compiled SMO where numba is
#: installed, else LIBSVM on active sets
SHARED = engine.SHARED_CPU_GRAM if gram_smo.AVAILABLE else engine.SHARED_CPU


def _host(a):
    return np.asarray(bk.to_host(a))


def _check_equivalent(est, X, y, splits, cands, sample_weight=None, shared=SHARED):
    """Every SplitFit equals the independent fit to the solver tolerance; returns the fits."""
    fits = list(engine.search_kernel_svc(est, X, y, splits, cands, sample_weight=sample_weight))
    assert sorted((f.candidate, f.split) for f in fits) == [(c, s) for c in range(len(cands))
                                                          for s in range(len(splits))]
    for f in fits:
        # a fold model may add what it did beyond the engine's sharing (" — ...")
        assert f.error is None and (f.shared == shared or f.shared.startswith(shared + " — ")) and f.fit_time > 0
        tr, te = splits[f.split]
        kw = {} if sample_weight is None else {"sample_weight": sample_weight[tr]}
        ref = clone(est).set_params(**cands[f.candidate]).fit(bk.take_rows(X, tr), y[tr], **kw)
        got = f.estimator
        assert got.get_params() == ref.get_params()
        np.testing.assert_array_equal(got.classes_, ref.classes_)
        Xte = bk.take_rows(X, te)
        d_got, d_ref = _host(got.decision_function(Xte)), _host(ref.decision_function(Xte))
        # the compiled SMO's models carry their values on the held-out rows (read from the Gram
        # matrix): the same as computed afresh (the rows reversed are not recognised)
        kept = got.__dict__.get("_held_out") is not None
        assert kept == (shared == engine.SHARED_CPU_GRAM and isinstance(X, np.ndarray) and X.dtype == np.float64)
        fresh = bk.take_rows(X, te[::-1])
        np.testing.assert_allclose(d_got, _host(got.decision_function(fresh))[::-1], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(_host(got.predict(Xte)), _host(got.predict(fresh))[::-1])
        scale = max(1.0, float(np.abs(d_ref).max()))
        tol = est.tol * 10 * scale
        # two solutions within the gap tolerance: their α differ by O(tol), which far from the
        # boundary (|f| ≫ 1, large C, a polynomial kernel) shows as a relative difference
        np.testing.assert_allclose(d_got, d_ref, atol=tol, rtol=0.05)
        differ = _host(got.predict(Xte)) != _host(ref.predict(Xte))
        # a different label only for a row within the tolerance of a boundary
        near = np.abs(d_ref).min(axis=1) < tol if d_ref.ndim == 2 else np.abs(d_ref) < tol
        assert not (differ & ~near).any()
        obj_got, obj_ref = np.asarray(got.objective_), np.asarray(ref.objective_)
        assert np.all(np.abs(obj_got - obj_ref) <= 10 * est.tol * (1 + np.abs(obj_ref))), (obj_got, obj_ref)
        assert got.support_vectors_.shape[1] == ref.support_vectors_.shape[1]
    return fits


def test_binary_grid_matches_independent_fits():
    X, y = _data()
    splits = list(StratifiedKFold(4, shuffle=True, random_state=0).split(X, y))
    _check_equivalent(KernelSVC(device="cpu"), X, y, splits, _grid())


def test_three_classes_sample_and_class_weight():
    X, y = _data(classes=3, seed=1)
    sw = np.random.default_rng(2).uniform(0.2, 3.0, size=y.size)
    sw[:5] = 0.0                       # rows of weight 0 are left out, as LIBSVM does
    splits = list(StratifiedKFold(3, shuffle=True, random_state=1).split(X, y))
    cands = _grid(gammas=(1.0,), Cs=(0.5, 5.0, 50.0))
    _check_equivalent(KernelSVC(device="cpu", class_weight="balanced"), X, y, splits, cands, sample_weight=sw)
    _check_equivalent(KernelSVC(device="cpu", class_weight={0: 1.0, 1: 2.0, 2: 0.5}), X, y, splits, cands)


def test_sparse_float32_poly_and_scale_gamma():
    X, y = _data(seed=3)
    X[np.abs(X) < 0.6] = 0.0
    splits = list(KFold(3, shuffle=True, random_state=0).split(X, y))
    cands = [{"C": C} for C in (0.3, 3.0, 30.0)]
    _check_equivalent(KernelSVC(device="cpu"), sp.csr_matrix(X), y, splits, cands)   # γ="scale" per fold
    _check_equivalent(KernelSVC(device="cpu", gamma=0.7), X.astype(np.float32), y, splits, cands)
    _check_equivalent(KernelSVC(device="cpu", kernel="poly", degree=2, gamma=0.5, coef0=1.0), X, y, splits,
                      cands)


def test_small_budget_never_builds_the_whole_gram(monkeypatch):
    X, y = _data(n=300, seed=4)
    n = X.shape[0]
    shapes = []
    real = path.kernel_block

    def recording(A, B=None, *args, **kwargs):
        out = real(A, B, *args, **kwargs)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(path, "kernel_block", recording)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    with bk.config_context(cpu_memory_budget=n * n * 8 - 8), pytest.warns(UserWarning, match="one LIBSVM fit"):
        # the cache holds 149 rows: problems with more SVs (150-200 of a fold's 200 rows at C <= 10)
        # are solved by one LIBSVM fit on their rows, the others on active sets
        fits = _check_equivalent(KernelSVC(device="cpu", gamma=1.0), X, y, splits, _grid(gammas=(1.0,)),
                                 shared=engine.SHARED_CPU)
    kinds = {f.shared for f in fits}
    assert kinds == {engine.SHARED_CPU, engine.SHARED_CPU + engine.SHARED_WHOLE}, kinds
    assert shapes and max(r for r, _ in shapes) <= n // 2
    shapes.clear()
    with bk.config_context(cpu_memory_budget=n * n * 8 * 4):   # the whole Gram fits: each row once
        list(engine.search_kernel_svc(KernelSVC(device="cpu", gamma=1.0), X, y, splits, _grid(gammas=(1.0,))))
    gram = [(r, c) for r, c in shapes if c == n]
    assert gram and sum(r for r, _ in gram) <= n
    # besides: once per fold, the held-out rows against the union of its models' SVs
    assert sorted(r for r, c in shapes if c != n) == sorted(te.size for _, te in splits)


def test_without_numba_libsvm_on_active_sets_runs(monkeypatch):
    """The compiled SMO unavailable (numba not installed): the same search by LIBSVM on active sets."""
    monkeypatch.setattr(gram_smo, "AVAILABLE", False)
    X, y = _data(classes=3, seed=1)
    sw = np.random.default_rng(2).uniform(0.2, 3.0, size=y.size)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=1).split(X, y))
    _check_equivalent(KernelSVC(device="cpu", class_weight="balanced"), X, y, splits,
                      _grid(gammas=(1.0,), Cs=(0.5, 50.0)), sample_weight=sw, shared=engine.SHARED_CPU)


def test_the_engine_follows_the_memory_budget():
    """The compiled SMO runs on the Gram matrix only when n × n float64 fits a job's share of the budget."""
    X, y = _data(n=200, seed=8)
    classes, yidx = encode_classes(y)
    job = path.GridJob(Kernel("rbf", gamma=1.0), [path.GridProblem(np.arange(150), np.ones(150))], [1.0])
    small = path.solve_grids(X, yidx, classes, [job], budget=8 * 200 * 200 - 1, n_jobs=1)[0]
    big = path.solve_grids(X, yidx, classes, [job], budget=8 * 200 * 200, n_jobs=1)[0]
    assert small.engine == path.ENGINE_ACTIVE_SET
    assert big.engine == (path.ENGINE_GRAM if gram_smo.AVAILABLE else path.ENGINE_ACTIVE_SET)
    # ijcnn1's 50,000 rows: 20 GB of Gram matrix, never within the default 512 MiB budget
    assert not path.gram_fits(50_000, bk.memory_budget("cpu"))
    assert path.gram_fits(5_000, bk.memory_budget("cpu")) == gram_smo.AVAILABLE


@pytest.mark.skipif(not gram_smo.AVAILABLE, reason="the compiled SMO needs numba")
def _counted_kernel_rows():
    """A KernelRows subclass that counts its instances alive (``live[0]``) and the most at once
    (``most[0]``)."""
    live, most = [0], [0]
    guard = threading.Lock()

    class CountedRows(path.KernelRows):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            with guard:
                live[0] += 1
                most[0] = max(most[0], live[0])
            weakref.finalize(self, lambda: live.__setitem__(0, live[0] - 1))

    return CountedRows, live, most


def test_more_threads_than_gram_matrices_in_the_budget_keep_the_compiled_smo(monkeypatch):
    """Three kernels on three threads with a budget of one and a half Gram matrices: every job on the
    Gram matrix, one matrix alive at a time (a job waits for the one before it to be dropped), the
    same models as on one thread.  Before, each job's share (a third of the budget) made all three
    run on active sets.  With room for two matrices, two at a time.  (With one, the fourth thread
    gets C chains of its own: the same models to the tolerance.)"""
    CountedRows, live, most = _counted_kernel_rows()
    X, y = _data(n=300, seed=9)
    classes, yidx = encode_classes(y)
    gram = 8 * 300 * 300
    folds = [path.GridProblem(rows=tr, weight=np.ones(tr.size))
             for tr, _ in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y)]
    jobs = [path.GridJob(Kernel("rbf", gamma=g), folds, [0.1, 1.0, 10.0]) for g in (0.5, 1.0, 2.0)]
    one = path.solve_grids(X, yidx, classes, jobs, budget=gram * 3 // 2, n_jobs=1)
    monkeypatch.setattr(path, "KernelRows", CountedRows)
    for room, alive in ((1.5, 1), (2.5, 2)):
        live[0] = most[0] = 0
        # four threads: more than the three folds of one job keep busy, so the room decides
        three = path.solve_grids(X, yidx, classes, jobs, budget=int(gram * room), n_jobs=4)
        assert [s.engine for s in three] == [path.ENGINE_GRAM] * 3
        assert most[0] == alive and live[0] == 0
        same = np.testing.assert_array_equal if alive == 2 else (
            lambda a, b: np.testing.assert_allclose(a, b, rtol=0.05, atol=0.05))
        for a, b in zip(one, three):
            for row_a, row_b in zip(a.results, b.results):
                for ra, rb in zip(row_a, row_b):
                    same(ra.dual_coef, rb.dual_coef)
                    same(ra.intercept, rb.intercept)


def test_a_later_kernel_writes_its_gram_matrix_over_an_ended_ones_memory(monkeypatch):
    """Three kernels, room for one Gram matrix then for two: the later jobs reuse the memory of the
    matrices dropped before them (one allocation, then at most two: where the first job ends before
    a thread starts the second, as on a loaded host, one), and their models equal those of each
    kernel solved alone, in memory of its own."""
    made = []

    class RecordedRows(path.KernelRows):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self.rows)      # held here: a dropped matrix's memory cannot come back as a new one

    X, y = _data(n=300, seed=4)
    classes, yidx = encode_classes(y)
    gram = 8 * 300 * 300
    folds = [path.GridProblem(rows=tr, weight=np.ones(tr.size))
             for tr, _ in StratifiedKFold(3, shuffle=True, random_state=1).split(X, y)]
    jobs = [path.GridJob(Kernel("rbf", gamma=g), folds, [0.3, 3.0]) for g in (0.5, 1.0, 2.0)]
    alone = [path.solve_grids(X, yidx, classes, [job], budget=gram, n_jobs=1)[0] for job in jobs]
    monkeypatch.setattr(path, "KernelRows", RecordedRows)
    for room, threads, buffers in ((1.5, 1, 1), (1.5, 3, 1), (2.5, 4, 2)):
        made.clear()
        shared = path.solve_grids(X, yidx, classes, jobs, budget=int(gram * room), n_jobs=threads)
        assert len(made) == 3 and 1 <= len({id(rows) for rows in made}) <= buffers
        for a, b in zip(alone, shared):
            assert b.engine == path.ENGINE_GRAM
            for row_a, row_b in zip(a.results, b.results):
                for ra, rb in zip(row_a, row_b):
                    np.testing.assert_array_equal(ra.dual_coef, rb.dual_coef)
                    np.testing.assert_array_equal(ra.intercept, rb.intercept)


def test_as_many_gram_matrices_as_keep_the_threads_busy(monkeypatch):
    """A job gives the threads one task per fold at a time: two or five threads on five folds share
    one Gram matrix whatever the room for more, six threads use at most two, and the models are the
    same.  (Two Gram matrices for two threads took 2.05 s against 1.88 s for one on the 2-core
    host's 5,000-row ijcnn1 grid.)"""
    CountedRows, live, most = _counted_kernel_rows()
    X, y = _data(n=250, seed=6)
    classes, yidx = encode_classes(y)
    folds = [path.GridProblem(rows=tr, weight=np.ones(tr.size))
             for tr, _ in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y)]
    jobs = [path.GridJob(Kernel("rbf", gamma=g), folds, [0.5, 5.0]) for g in (0.5, 1.0, 2.0)]
    one = path.solve_grids(X, yidx, classes, jobs, budget=8 * 250 * 250 * 4, n_jobs=1)
    monkeypatch.setattr(path, "KernelRows", CountedRows)
    for threads, alive in ((2, 1), (5, 1), (6, 2)):
        live[0] = most[0] = 0
        many = path.solve_grids(X, yidx, classes, jobs, budget=8 * 250 * 250 * 4, n_jobs=threads)
        assert 1 <= most[0] <= alive, threads
        for a, b in zip(one, many):
            assert b.engine == path.ENGINE_GRAM
            for row_a, row_b in zip(a.results, b.results):
                for ra, rb in zip(row_a, row_b):
                    np.testing.assert_array_equal(ra.dual_coef, rb.dual_coef)


def test_kernel_rows_cache_evicts_and_computes_each_row_once():
    X, _ = _data(n=400)
    k = Kernel("rbf", gamma=0.5)
    cache = path.KernelRows(X, k, budget=16 * 400 * 10)     # ten rows of 400
    assert not cache.full and cache.capacity == 10
    coef = np.arange(1.0, 8.0)
    idx = np.arange(3, 10)
    full = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(cache.weighted_sum(idx, coef), coef @ full[idx], atol=1e-12)
    cache.weighted_sum(idx, coef)
    assert cache.computed == 7                                   # cached: not computed again
    np.testing.assert_allclose(cache.weighted_sum(np.arange(20, 40), np.ones(20)), full[20:40].sum(0),
                               atol=1e-12)                       # beyond capacity: computed, not kept
    assert cache.gram(np.arange(50)) is None
    np.testing.assert_allclose(cache.gram(np.arange(4)), full[:4, :4], atol=1e-12)


def test_fallbacks_and_errors():
    X, y = _data(n=120, seed=5)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    cands = [{"C": 1.0, "probability": True, "random_state": 0}, {"C": -1.0}, {"C": 2.0, "solver": "smo"},
             {"C": 1.0, "kernel": lambda A, B: A @ B.T}, {"C": 1.0, "gamma": -2.0}, {"C": np.int64(3)}]
    fits = {(f.candidate, f.split): f for f in
            engine.search_kernel_svc(KernelSVC(device="cpu", gamma=1.0), X, y, splits, cands)}
    assert len(fits) == len(cands) * len(splits)
    for s in range(len(splits)):
        assert fits[0, s].shared.startswith("none: probability") and fits[0, s].estimator.probA_.size == 1
        assert fits[1, s].estimator is None and fits[1, s].error is not None   # the fit's own error
        assert fits[2, s].shared.startswith("none: solver") and fits[2, s].estimator.solver_ == "smo"
        assert fits[3, s].shared.startswith("none: kernel") and fits[3, s].error is None
        assert fits[4, s].estimator is None and fits[4, s].error is not None   # γ < 0: the fit's error
        assert fits[5, s].shared == SHARED and fits[5, s].error is None
    # a fold without a class: the fit raises, and the search gets that error for that split only
    y2 = y.copy()
    y2[:] = 0
    y2[:10] = 1
    bad = [(np.arange(10, 120), np.arange(10)), splits[0]]
    out = {f.split: f for f in engine.search_kernel_svc(KernelSVC(device="cpu"), X, y2, bad, [{"C": 1.0}])}
    assert out[0].error is not None and out[0].shared.startswith("none: a fold")
    assert out[1].error is None and out[1].shared == SHARED


def test_from_result_equals_fit():
    X, y = _data(classes=3, seed=6)
    est = KernelSVC(C=3.0, gamma=0.8, device="cpu").fit(X, y)
    classes, yidx = encode_classes(y)
    k = Kernel("rbf", gamma=0.8)
    res = solve_svc(X, yidx, classes, k, 3.0, method="libsvm")
    made = KernelSVC.from_result(res, X, k, **est.get_params())
    np.testing.assert_allclose(made.decision_function(X), est.decision_function(X))
    assert made.n_features_in_ == 4 and made.solver_ == "libsvm" and made.fitted_device_ == "cpu"
    with pytest.raises(ValueError):
        KernelSVC.from_result(res, X, k, C=-1.0)


@pytest.mark.gpu
def test_gpu_one_batched_call_per_kernel(gpu, monkeypatch):
    X, y = _data(n=90, classes=3, seed=7)
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    calls = []
    real = path.solve_batched

    def counting(*args, **kwargs):
        calls.append(len(args[2]))
        return real(*args, **kwargs)

    monkeypatch.setattr(path, "solve_batched", counting)
    est = KernelSVC(device="cuda", gamma=0.5, dtype="float64")
    _check_equivalent(est, X, y, splits, [{"C": C} for C in (0.5, 5.0)], shared=engine.SHARED_GPU)
    assert calls[0] == 3 * 3 * 2       # folds × pairs × C values in the first (shared) call


def test_a_problem_stopped_at_the_step_cap_warns_once_and_is_recorded(monkeypatch):
    """The compiled SMO stopped by its step cap: one ConvergenceWarning for the search, and the
    candidates whose fold models are not converged say so in cv_results_["shared_work"]."""
    pytest.importorskip("numba")
    from sklearn.exceptions import ConvergenceWarning

    from gpuksvm.model_selection import GridSearchCV

    X, y = _data(n=150, seed=9)
    monkeypatch.setattr(gram_smo, "MAX_ITER", 100)   # C = 100 takes about 250 steps a fold, C = 0.01 under 60
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    with pytest.warns(ConvergenceWarning, match="step cap") as caught:
        search = GridSearchCV(KernelSVC(device="cpu", gamma=1.0), {"C": [0.01, 100.0]}, cv=cv).fit(X, y)
    assert sum(issubclass(w.category, ConvergenceWarning) for w in caught) == 1
    shared = search.cv_results_["shared_work"]
    assert shared[0] == engine.SHARED_CPU_GRAM
    assert engine.SHARED_CAPPED in shared[1]
    fits = list(engine.search_kernel_svc(KernelSVC(device="cpu", gamma=1.0), X, y, list(cv.split(X, y)),
                                         [{"C": 100.0}]))
    assert all(not np.all(f.estimator.converged_) for f in fits)


def test_threads_share_the_gram_matrix_work():
    """Threads asking for the Gram matrix at once split its blocks: every row computed once, the
    same matrix for all of them."""
    import threading

    X, _ = _data(n=1100, seed=10)
    cache = path.KernelRows(X, Kernel("rbf", gamma=0.5), budget=8 * 1100 * 1100)
    got, barrier = [], threading.Barrier(3)

    def ask():
        barrier.wait()
        got.append(cache.matrix())

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3 and all(g is got[0] for g in got)
    assert cache.computed == 1100                        # 5 blocks of 256 rows, none computed twice
    full = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(got[0], full, atol=1e-12)


def test_the_compiled_smo_gram_matrix_is_float64_values_rounded_once():
    # the engine's float32 Gram matrix: each value computed in float64 (as the float64 matrix holds
    # it) and rounded to float32 once, by blocks of 256 rows (the last one short)
    X, _ = _data(n=700, seed=11)
    k = Kernel("rbf", gamma=0.5)
    G64 = path.KernelRows(X, k, budget=8 * 700 * 700).matrix()
    G32 = path.KernelRows(X, k, budget=8 * 700 * 700, dtype=np.float32).matrix()
    assert G64.dtype == np.float64 and G32.dtype == np.float32
    np.testing.assert_array_equal(G32, G64.astype(np.float32))
    # a budget without room for the whole matrix: float64 rows whatever the dtype asked
    assert path.KernelRows(X, k, budget=8 * 700 * 100, dtype=np.float32).rows.dtype == np.float64


def test_the_search_n_jobs_reaches_the_engine_threads(monkeypatch):
    """GridSearchCV(n_jobs=k) runs the compiled SMO's problems on k threads even while the load
    average fills the cores (n_jobs=None keeps the load rule: one thread then)."""
    from gpuksvm.model_selection import GridSearchCV

    pools = []

    class Recording(path.ThreadPoolExecutor):
        def __init__(self, max_workers=None, **kwargs):
            pools.append(max_workers)
            super().__init__(max_workers=max_workers, **kwargs)

    monkeypatch.setattr(path, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(path, "host_busy", lambda: True)
    X, y = _data(n=200, seed=11)
    grid = {"gamma": [0.5], "C": [0.1, 1.0, 10.0]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    busy = GridSearchCV(KernelSVC(device="cpu"), grid, cv=cv).fit(X, y)
    assert pools == []                                   # None on a busy host: one thread
    two = GridSearchCV(KernelSVC(device="cpu"), grid, cv=cv, n_jobs=2).fit(X, y)
    assert pools == [2]                                  # the engine's pool
    np.testing.assert_array_equal(two.cv_results_["mean_test_score"], busy.cv_results_["mean_test_score"])
    assert two.best_params_ == busy.best_params_


def test_run_engine_gives_n_jobs_to_an_engine_that_takes_it():
    from gpuksvm.model_selection import shared

    seen = []

    def whole(estimator, X, y, splits, candidates, *, sample_weight=None, n_jobs=None):
        seen.append(n_jobs)
        return shared.search_independent(estimator, X, y, splits, candidates, sample_weight=sample_weight)

    whole.takes_n_jobs = True
    X, y = _data(n=60, seed=12)
    splits = list(StratifiedKFold(2, shuffle=True, random_state=0).split(X, y))
    cands = [{"C": 1.0}, {"C": 2.0}]
    shared.run_engine(whole, KernelSVC(device="cpu"), X, y, splits, cands, n_jobs=-1)
    shared.run_engine(whole, KernelSVC(device="cpu"), X, y, splits, cands)
    whole.group_key = lambda est, params: params["C"]   # two calls on two threads: one thread each
    shared.run_engine(whole, KernelSVC(device="cpu"), X, y, splits, cands, n_jobs=2)
    assert seen == [-1, None, 1, 1]


@pytest.mark.skipif(not gram_smo.AVAILABLE, reason="the compiled SMO needs numba")
def test_held_out_values_serve_only_their_rows_of_the_model_they_were_computed_for():
    X, y = _data()
    splits = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    fit = next(iter(engine.search_kernel_svc(KernelSVC(device="cpu", gamma=1.0), X, y, splits[:1], [{"C": 1.0}])))
    est, te = fit.estimator, splits[0][1]
    kept = est.__dict__["_held_out"][0].values[:, 0]
    np.testing.assert_array_equal(est.decision_function(X[te]), kept)
    est.intercept_ = est.intercept_ + 1.0          # a model edited: its values are computed afresh
    np.testing.assert_allclose(est.decision_function(X[te]), kept + 1.0, rtol=1e-12, atol=1e-12)
    est.fit(X[:100], y[:100])                      # a new fit drops them
    assert "_held_out" not in est.__dict__


@pytest.mark.skipif(not gram_smo.AVAILABLE, reason="the compiled SMO needs numba")
def test_each_C_value_starts_from_the_previous_one_on_any_number_of_threads(monkeypatch):
    """The compiled SMO's C values of a fold: the smallest from α = 0, each other from the solution
    of the C below it (scaled or as it is).  The same models on one thread and on three."""
    starts = []
    real = gram_smo.solve_on_gram

    def recording(G, R, y, Cv, alpha=None, grad=None, **kwargs):
        starts.append((float(Cv.max()), alpha is not None))
        if alpha is not None:      # the previous C's solution, scaled or not: feasible for this box
            assert np.all(alpha >= 0) and np.all(alpha <= Cv + 1e-12) and abs(np.dot(y, alpha)) < 1e-9
        return real(G, R, y, Cv, alpha, grad, **kwargs)

    monkeypatch.setattr(gram_smo, "solve_on_gram", recording)
    X, y = _data(n=300, seed=12)
    classes, yidx = encode_classes(y)
    folds = [path.GridProblem(rows=tr, weight=np.ones(tr.size))
             for tr, _ in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y)]
    Cs = [10.0, 0.03, 300.0, 0.3, 3.0]           # ascending: 0.03 (cold), then each seeded
    models = [path.solve_grid(X, yidx, classes, Kernel("rbf", gamma=1.0), folds, Cs, n_jobs=k).results
              for k in (1, 3)]
    assert sorted(set(starts)) == [(0.03, False), (0.3, True), (3.0, True), (10.0, True), (300.0, True)]
    assert len(starts) == 2 * len(folds) * len(Cs)
    for one, three in zip(*models):
        for a, b in zip(one, three):
            np.testing.assert_array_equal(a.dual_coef, b.dual_coef)
            np.testing.assert_array_equal(a.intercept, b.intercept)


def test_c_chains_split_the_ascending_path_and_give_the_heads_first():
    Cs = [10.0, 0.03, 300.0, 0.3, 3.0, 1.0]        # ascending indices: 1, 3, 5, 4, 0, 2
    assert path.c_chains(Cs, 1) == ({3: 1, 5: 3, 4: 5, 0: 4, 2: 0}, [1, 3, 5, 4, 0, 2])
    assert path.c_chains(Cs, 2) == ({3: 1, 5: 3, 0: 4, 2: 0}, [1, 4, 3, 0, 5, 2])
    assert path.c_chains(Cs, 3) == ({3: 1, 4: 5, 2: 0}, [1, 5, 0, 3, 4, 2])
    assert path.c_chains(Cs, 9) == ({}, [1, 3, 5, 4, 0, 2])       # more chains than C values: all cold
    assert path.c_chains([1.0], 4) == ({}, [0])


@pytest.mark.skipif(not gram_smo.AVAILABLE, reason="the compiled SMO needs numba")
def test_threads_the_folds_leave_idle_get_c_chains_of_their_own(monkeypatch):
    """Ten threads on five folds of one Gram matrix: each fold's four C values run as two chains
    (two cold starts a fold instead of one), and the models are the same to the tolerance."""
    starts = []
    real = gram_smo.solve_on_gram

    def recording(G, R, y, Cv, alpha=None, grad=None, **kwargs):
        starts.append((float(Cv.max()), alpha is not None))
        return real(G, R, y, Cv, alpha, grad, **kwargs)

    X, y = _data(n=250, seed=13)
    splits = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    cands = [{"C": C} for C in (0.5, 2.0, 8.0, 32.0)]
    est = KernelSVC(device="cpu", gamma=1.0)
    fits = {}
    monkeypatch.setattr(gram_smo, "solve_on_gram", recording)
    for threads in (5, 10):
        starts.clear()
        fits[threads] = {(f.candidate, f.split): f.estimator
                         for f in engine.search_kernel_svc(est, X, y, splits, cands, n_jobs=threads)}
        cold = sorted({C for C, seeded in starts if not seeded})
        assert cold == ([0.5] if threads == 5 else [0.5, 8.0]), threads
    for key, model in fits[10].items():
        ref = fits[5][key]
        np.testing.assert_allclose(model.objective_, ref.objective_, rtol=10 * est.tol)
        Xte = X[splits[key[1]][1]]
        np.testing.assert_allclose(model.decision_function(Xte), ref.decision_function(Xte), atol=0.05)
    _check_equivalent(est, X, y, splits, cands)


@pytest.mark.skipif(not gram_smo.AVAILABLE, reason="the compiled SMO needs numba")
def test_a_seed_is_the_previous_solution_scaled_or_not_whichever_has_the_lower_objective():
    """Scaled (DeCoste & Wagstaff) where the support vectors sit at the bound (small C), as it is
    where they are free (large C); either is feasible for the larger box with its exact gradient."""
    X, y = _data(n=200, seed=3)
    lab = np.where(y == y[0], 1.0, -1.0)
    G = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    R = np.arange(X.shape[0])
    picked = []
    for C in (0.01, 100.0):
        alpha, grad, _ = gram_smo.solve_on_gram(G, R, lab, np.full(R.size, C))
        a, g = path._seed((alpha, grad), 3.0)
        assert np.all(a >= 0) and np.all(a <= 3.0 * C + 1e-12) and abs(np.dot(lab, a)) < 1e-9
        np.testing.assert_allclose(g, (lab[:, None] * lab[None, :] * G) @ a - 1.0, atol=1e-9)
        objective = 0.5 * a @ (g - 1.0)
        others = [0.5 * b @ (h - 1.0) for b, h in ((alpha, grad), (3.0 * alpha, 3.0 * (grad + 1.0) - 1.0))]
        assert objective == min(others)
        picked.append("scaled" if np.array_equal(a, 3.0 * alpha) else "as it is")
    assert picked == ["scaled", "as it is"]
