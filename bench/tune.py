"""Train and tune in one call: gpuksvm.model_selection.GridSearchCV against scikit-learn's searches.

``python -m bench tune --scale small`` runs, on the same rows, the same folds
(``StratifiedKFold(5, shuffle=True, random_state=0)``, 10 folds for the
TorchKM protocol) and the same grid, in one process:

* ``GridSearchCV (gpuksvm)`` — :class:`gpuksvm.model_selection.GridSearchCV`
  over the gpuksvm estimator (its search engine), ``n_jobs=-1`` as the SVC
  search below (KernelSVC's engine then runs its problems on every core
  whatever the load average, and the fold models are scored on threads);
* ``GridSearchCV (sklearn) same estimator`` — scikit-learn's search over the
  same gpuksvm estimator (independent fits, scikit-learn's default ``n_jobs``,
  as the search the targets were stated against);
* ``GridSearchCV(SVC, n_jobs=-1) (sklearn)`` — scikit-learn's search over
  its SVC (LIBSVM), processes on every core (KernelSVC cases only; skipped
  when one SVC fit times the number of fits over the cores predicts more
  than 10 minutes — the output says so);
* ``TorchKM (cvksvm, CPU)`` — when the optional ``torchkm`` package is
  importable (it is no dependency of gpuksvm), binary cases only (TorchKM has no
  multi-class): its scikit-learn wrapper ``TorchKMSVC`` with the same folds
  (``foldid``), the same C values (its λ = 1/(2nC)) and the RBF width of each γ
  (``rbf_sigma = γ/2``: TorchKM's kernel is exp(−2σ‖x−x'‖²)), one call per γ; the
  best γ is the one of the lowest out-of-fold error.  TorchKM forms the dense
  n × n kernel and its eigendecomposition (float64), and scores the pooled
  out-of-fold misclassification rather than the mean of the folds' accuracies.
  It runs on one torch thread, like gpuksvm's host solvers: on the shared 2-core
  CPU (load average ~2) one ``TorchKMSVC`` fit of 600 ijcnn1 rows, 2 C × 3 folds,
  took 0.75 s on one thread and 38 s on two (OpenMP workers spinning);
* ``GridSearchCV (gpuksvm) on cuda:0`` — with ``--device gpu``: our search with the estimator on
  the GPU (``device="gpu"``, its engine's batched GPU solver), measured, in the same rounds; one
  untimed search on 300 rows first (kernel compilation or CuPy's cache load);
* ``GPU (predicted)`` — without ``--device gpu``: the H100 cost model of ``bench/_gpu_cost.py`` on an
  emulated trace of a few of the search's fits (``--scale small``: 2, ``paper``: 3),
  scaled to all of them: a **model prediction**, not a measurement.

The searches of a case run in rounds (``--scale small``: 3; otherwise 1), each round one
search of each kind in turn, so that a drift of a shared host's speed falls on all of them alike;
a record's time is the median (every time in ``fit_times_s``), and the log line after the SVC
search gives the ratio of the medians and the ratio within each round.  Every record has the search time (``fit_s``), the refit model's test
accuracy, and in ``extra`` the selected parameters, the best CV score, the
largest |Δ mean_test_score| against scikit-learn's search over the same
estimator and the speed-up over it; gpuksvm's record also the distinct
``cv_results_["shared_work"]`` values (the engine that ran, and a candidate
whose fold models the compiled SMO stopped at its step cap).  One untimed fit on 500 rows and one
untimed search on 300 rows (2 folds, the grid's first two values of each
parameter) come first: first-call costs, among them loading the compiled SMO
of the KernelSVC engine from numba's cache (or compiling it, ≈ 3 s, on the
first run after an installation), stay out of the timed search.  The load average is printed before and after (a shared
machine: compare within one run only).

Cases (``--scale small``: the first five; ``paper``: all):

=============  ===================================================================
svc_ijcnn1     KernelSVC, ijcnn1 5,000 rows (paper: 50,000), γ∈{0.5,1,2} × C∈logspace(−1,3,8)
llsvm_ijcnn1   LLSVM(n_landmarks=300), ijcnn1 10,000 rows, γ∈{1,2} × C∈{1,8,64}
okfeb_ijcnn1   OKFEBClassifier (defaults: rank 50, 150 landmarks), ijcnn1 5,000 rows, γ∈{1,2} × alpha∈logspace(−6,−2,5)
svi_ijcnn1     SVI (defaults), ijcnn1 5,000 rows (below its ensemble's 10,000: the exact SVM), the KernelSVC grid
cvm_ijcnn1     CVM (defaults), ijcnn1 5,000 rows, γ∈{0.5,2} × C∈logspace(−1,3,8)
svc_adult      KernelSVC, adult (all 32,561 rows), γ∈{0.01,0.05,0.1} × C∈logspace(−1,2,4)
svc_digits     KernelSVC, scikit-learn digits (10 classes, one-vs-one), γ∈{0.005,0.01,0.02} × C∈{1,10,100}
torchkm_p10    KernelSVC, Gaussian clusters n=10,000, p=10, γ=1/p, 50 C∈logspace(−2,3,50), 10 folds
torchkm_p100   the same with p=100
=============  ===================================================================

The TorchKM protocol's data: two Gaussian clusters (``make_blobs``, centres
drawn by scikit-learn with ``random_state=0``, ``cluster_std=4``), 10,000
training and 10,000 test rows, standardized with the training rows' mean and
standard deviation (TorchKM standardizes its simulated data), so that γ = 1/p
puts γ‖x − x'‖² near 2.

One or more paper cases at a smaller size (a smoke run, or TorchKM's protocol
where its n × n kernel is too slow on the CPU)::

    python -m bench.tune torchkm_p10 --n-train 2000 --n-test 2000 --device cpu

``--skip same_estimator`` leaves out scikit-learn's search over the gpuksvm estimator (its
independent fits take hours at 50,000 rows; the records then carry no |Δ| against it), ``--skip
svc`` the SVC search; ``--device gpu`` adds our search on the GPU, measured; ``--repeats N`` runs
N rounds.  The CPU memory budget (``GPUKSVM_CPU_MEMORY_BUDGET``, printed first) decides whether
the KernelSVC engine holds a γ's Gram matrix of all rows (8n² bytes) or solves on kernel-row
caches::

    GPUKSVM_CPU_MEMORY_BUDGET=24GB python -m bench.tune svc_ijcnn1 --skip same_estimator --device gpu
"""
from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, Iterator

import numpy as np

import gpuksvm
from gpuksvm.datasets import load_dataset, subsample
from gpuksvm.model_selection import GridSearchCV

from .harness import Case, Context, Record, accuracy, load_average, register

SVC_BUDGET_S = 600.0     # skip scikit-learn's SVC search when it is predicted to take longer
TORCHKM_MAX_N = 10_000   # TorchKM holds K and its eigenvectors, two n × n float64 matrices (1.6 GB here)


def _ijcnn1(n_train: int | None, n_test: int | None):
    rng = np.random.default_rng(0)
    X, y = subsample(*load_dataset("ijcnn1", "train"), n_train, rng)
    Xt, yt = subsample(*load_dataset("ijcnn1", "test"), n_test, rng)
    return X, y, Xt, yt


def _adult(n_train: int | None, n_test: int | None):
    rng = np.random.default_rng(0)
    X, y = subsample(*load_dataset("adult", "train"), n_train, rng)
    Xt, yt = subsample(*load_dataset("adult", "test"), n_test, rng)
    return X, y, Xt, yt


def _digits(n_train: int | None, n_test: int | None):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X, Xt, y, yt = train_test_split(X / 16.0, y, test_size=1 / 3, random_state=0, stratify=y)
    return X, y, Xt, yt


def _blobs(p: int) -> Callable:
    def make(n_train: int | None, n_test: int | None):
        from sklearn.datasets import make_blobs

        n, m = n_train or 10_000, n_test or 10_000
        X, y = make_blobs(n + m, n_features=p, centers=2, cluster_std=4.0, random_state=0)
        mean, std = X[:n].mean(axis=0), X[:n].std(axis=0)      # standardized, as TorchKM's protocol
        X = (X - mean) / np.where(std > 0, std, 1.0)
        return X[:n], y[:n], X[n:], y[n:]
    return make


DATA = {"ijcnn1": _ijcnn1, "adult": _adult, "digits": _digits, "blobs_p10": _blobs(10), "blobs_p100": _blobs(100)}

SVC_GRID = {"gamma": [0.5, 1.0, 2.0], "C": [float(c) for c in np.logspace(-1, 3, 8)]}
LLSVM_GRID = {"gamma": [1.0, 2.0], "C": [1.0, 8.0, 64.0]}
OKFEB_GRID = {"gamma": [1.0, 2.0], "alpha": [1e-6, 1e-5, 1e-4, 1e-3, 1e-2]}
CVM_GRID = {"gamma": [0.5, 2.0], "C": [float(c) for c in np.logspace(-1, 3, 8)]}


def _spec(name: str, est: str, data: str, n_train: int | None, grid: dict, *, folds: int = 5,
          n_test: int | None = None, params: dict | None = None) -> dict:
    return {"name": name, "estimator": est, "data": data, "n_train": n_train, "n_test": n_test,
            "grid": grid, "folds": folds, "params": params or {}}


def _torchkm(p: int, n: int) -> dict:
    return _spec(f"torchkm_p{p}", "KernelSVC", f"blobs_p{p}", n,
                 {"gamma": [1.0 / p], "C": [float(c) for c in np.logspace(-2, 3, 50)]}, folds=10, n_test=n)


SCALES = {
    "tiny": {"cases": [_spec("svc_ijcnn1", "KernelSVC", "ijcnn1", 600, {"gamma": [1.0, 2.0], "C": [1.0, 10.0]},
                             folds=3, n_test=2000)],
             "n_trace": 0},
    "small": {"cases": [_spec("svc_ijcnn1", "KernelSVC", "ijcnn1", 5000, SVC_GRID),
                        _spec("llsvm_ijcnn1", "LLSVM", "ijcnn1", 10_000, LLSVM_GRID, params={"n_landmarks": 300}),
                        _spec("okfeb_ijcnn1", "OKFEBClassifier", "ijcnn1", 5000, OKFEB_GRID),
                        _spec("svi_ijcnn1", "SVI", "ijcnn1", 5000, SVC_GRID),
                        _spec("cvm_ijcnn1", "CVM", "ijcnn1", 5000, CVM_GRID)],
              "n_trace": 2, "repeats": 3},
    "paper": {"cases": [_spec("svc_ijcnn1", "KernelSVC", "ijcnn1", 50_000, SVC_GRID),
                        _spec("llsvm_ijcnn1", "LLSVM", "ijcnn1", 10_000, LLSVM_GRID, params={"n_landmarks": 300}),
                        _spec("okfeb_ijcnn1", "OKFEBClassifier", "ijcnn1", 5000, OKFEB_GRID),
                        _spec("svi_ijcnn1", "SVI", "ijcnn1", 5000, SVC_GRID),
                        _spec("cvm_ijcnn1", "CVM", "ijcnn1", 5000, CVM_GRID),
                        _spec("svc_adult", "KernelSVC", "adult", None,
                              {"gamma": [0.01, 0.05, 0.1], "C": [float(c) for c in np.logspace(-1, 2, 4)]}),
                        _spec("svc_digits", "KernelSVC", "digits", None,
                              {"gamma": [0.005, 0.01, 0.02], "C": [1.0, 10.0, 100.0]}),
                        _torchkm(10, 10_000), _torchkm(100, 10_000)],
              "n_trace": 3},
}


def _estimator(spec: dict, device: str = "cpu") -> Any:
    cls = getattr(gpuksvm, spec["estimator"])
    extra = {"random_state": 0} if "random_state" in cls().get_params() else {}
    return cls(device=device, **extra, **spec["params"])


def _timed_search(search: Any, X: Any, y: Any) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    return time.perf_counter() - start


def _timed_searches(makers: dict[str, Callable[[], Any]], X: Any, y: Any, repeat: int,
                    log: Callable[[str], None] = print) -> dict[str, tuple[Any, float, list[float]]]:
    """``repeat`` rounds of one fresh search of each maker, in turn (so a drift of the host's speed
    falls on every search of a round alike): per maker the last search, the median time and every
    time.  Each search's time is logged as it ends (a run cut short keeps what it measured)."""
    times: dict[str, list[float]] = {name: [] for name in makers}
    last: dict[str, Any] = {}
    for r in range(max(1, repeat)):
        for name, make in makers.items():
            last[name] = make()
            times[name].append(_timed_search(last[name], X, y))
            log(f"    round {r + 1}: {name} {times[name][-1]:.2f} s")
    return {name: (last[name], float(np.median(times[name])), times[name]) for name in makers}


def _svc_forecast(X: Any, y: Any, grid: dict, n_fits: int, folds: int) -> float:
    """Seconds scikit-learn's SVC search would take: one fit at the grid's middle setting on a fold's
    rows, times the fits, over the cores."""
    from sklearn.svm import SVC

    mid = {k: v[len(v) // 2] for k, v in grid.items()}
    n = int(X.shape[0] * (folds - 1) / folds)
    start = time.perf_counter()
    SVC(**mid, cache_size=1000).fit(X[:n], y[:n])
    return (time.perf_counter() - start) * n_fits / max(1, os.cpu_count() or 1)


def _predicted_gpu_s(spec: dict, X: Any, y: Any, splits: list, candidates: list, n_trace: int) -> dict:
    """The cost model's H100 seconds for the search's fits (independent fits of the estimator on
    ``device="gpu"``), from an emulated trace of ``n_trace`` of them spread over the grid."""
    from . import gpu_model

    picks = [candidates[i] for i in np.linspace(0, len(candidates) - 1, n_trace).round().astype(int)]
    train, test = splits[0]
    cls = getattr(gpuksvm, spec["estimator"])
    per_fit = []
    with warnings.catch_warnings(), gpu_model.emulated_h100():
        warnings.simplefilter("ignore")
        for params in picks:
            est = cls(device="gpu", **spec["params"], **params)
            tr = gpu_model.cost.Tracer(use_twins=True)
            with tr:
                est.fit(X[train], y[train])
                est.predict(X[test])
            per_fit.append(tr.summary()["predicted_s"])
    n_fits = len(candidates) * len(splits)
    return {"predicted_s": float(np.mean(per_fit)) * n_fits, "traced_fits": n_trace, "fits": n_fits,
            "per_fit_s": [round(s, 4) for s in per_fit]}


def _row(ctx: Context, spec: dict, method: str, seconds: float, search: Any, Xt: Any, yt: Any,
         ref: Any, n_train: int, times: list[float] | None = None) -> Record:
    acc = accuracy(search.predict(Xt), yt) if hasattr(search, "best_estimator_") else None
    extra = {"best_params": {k: float(v) for k, v in search.best_params_.items()},
             "best_cv": float(search.best_score_), "folds": spec["folds"],
             "candidates": len(search.cv_results_["params"])}
    if "shared_work" in getattr(search, "cv_results_", {}):
        # what the engine shared, and whether it stopped a problem at its step cap (it says so there)
        extra["shared_work"] = sorted({str(v) for v in search.cv_results_["shared_work"]})
    if ref is not None:
        extra["max_abs_d_mean_test_score"] = float(np.max(np.abs(search.cv_results_["mean_test_score"]
                                                                 - ref[0].cv_results_["mean_test_score"])))
        extra["speedup_vs_same_estimator"] = ref[1] / seconds
        extra["same_best_params"] = search.best_params_ == ref[0].best_params_
    rec = ctx.record(method=method, dataset=spec["data"], params={"case": spec["name"], **spec["params"]},
                     fit_s=seconds, fit_times_s=times or [seconds], accuracy=acc, n_train=n_train,
                     n_test=int(Xt.shape[0]), extra=extra)
    ctx.log(f"  {spec['name']:13s} {method:40s} {seconds:8.2f} s  best {extra['best_params']}  "
            f"CV {extra['best_cv']:.4f}  test {acc:.4f}"
            + (f"  max|Δ| {extra['max_abs_d_mean_test_score']:.4f}  ×{extra['speedup_vs_same_estimator']:.2f}"
               if ref is not None else ""))
    return rec


class _TorchKMSearch:
    """TorchKM's search over a γ × C grid as the table reads a search: one ``TorchKMSVC`` fit per γ
    (each a C path with its own out-of-fold predictions), the best γ by the lowest error."""

    def __init__(self, grid: dict, splits: list, n: int):
        self.grid = grid
        self.foldid = np.empty(n, dtype=np.int64)
        for f, (_, test) in enumerate(splits):
            self.foldid[test] = f + 1
        self.n_splits = len(splits)

    def fit(self, X: Any, y: Any) -> "_TorchKMSearch":
        import torch
        from torchkm.estimators import TorchKMSVC

        torch.set_num_threads(1)      # one thread (the module docstring's measurement)
        Cs = [float(c) for c in self.grid["C"]]
        self.scores_, self.unconverged_, best = {}, 0, None
        for g in self.grid["gamma"]:
            clf = TorchKMSVC(kernel="rbf", rbf_sigma=float(g) / 2.0, Cs=np.asarray(Cs), nC=len(Cs),
                             cv=self.n_splits, foldid=self.foldid, device="cpu")
            clf.fit(X, y)
            for C, mis in zip(Cs, clf.cv_mis_):
                self.scores_[(float(g), C)] = 1.0 - float(mis)
            conv = clf.converged_
            self.unconverged_ += 0 if conv is None else int((~np.asarray(conv, dtype=bool)).sum())
            if best is None or 1.0 - float(clf.cv_mis_.min()) > best[0]:
                best = (1.0 - float(clf.cv_mis_.min()), float(g), clf)
        self.best_score_, gamma, self.best_estimator_ = best
        self.best_params_ = {"C": self.best_estimator_.best_C_, "gamma": gamma}
        return self

    def results_like(self, params: list) -> None:
        """``cv_results_["mean_test_score"]`` in the order of another search's candidates."""
        self.cv_results_ = {"params": params, "mean_test_score": np.array(
            [self.scores_[(float(p["gamma"]), float(p["C"]))] for p in params])}

    def predict(self, X: Any) -> Any:
        return self.best_estimator_.predict(X)


def _torchkm_available() -> bool:
    try:
        import torchkm.estimators  # noqa: F401
    except Exception:                  # not installed (optional), or its torch cannot load
        return False
    return True


def run_tune(ctx: Context) -> Iterator[Record]:
    """Each case of the scale: our search, scikit-learn's over the same estimator, SVC's, the GPU model."""
    from sklearn.model_selection import GridSearchCV as SkGridSearchCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    ctx.log(f"  load average before: {load_average()}  cores: {os.cpu_count()}  "
            f"cpu_memory_budget: {gpuksvm.get_config()['cpu_memory_budget']}")
    on_gpu = bool(getattr(ctx.device, "is_gpu", False))
    for spec in ctx.params["cases"]:
        X, y, Xt, yt = DATA[spec["data"]](spec["n_train"], spec["n_test"])
        X, Xt = np.ascontiguousarray(X), np.ascontiguousarray(Xt)
        cv = StratifiedKFold(spec["folds"], shuffle=True, random_state=0)
        grid = spec["grid"]
        _estimator(spec).fit(X[:500], y[:500])          # untimed: first-call costs out of the first search
        # untimed: a tiny search through the engine on each device (numba loads or compiles its SMO, the
        # GPU compiles its kernels or CuPy loads them from its cache, here and not in the timing)
        for device in ("cpu", "gpu") if on_gpu else ("cpu",):
            GridSearchCV(_estimator(spec, device), {k: v[:2] for k, v in grid.items()}, cv=2).fit(X[:300], y[:300])
        reps = ctx.repeats
        skip = set(ctx.params.get("skip", ()))
        makers = {"ours": lambda: GridSearchCV(_estimator(spec), grid, cv=cv, n_jobs=-1)}
        if "same_estimator" in skip:
            ctx.log(f"  {spec['name']:13s} GridSearchCV (sklearn) same estimator skipped (--skip same_estimator)")
        else:
            makers["theirs"] = lambda: SkGridSearchCV(_estimator(spec), grid, cv=cv)
        if on_gpu:
            makers["gpu"] = lambda: GridSearchCV(_estimator(spec, "gpu"), grid, cv=cv)
        n_fits = int(np.prod([len(v) for v in grid.values()])) * spec["folds"]
        if "svc" in skip:
            ctx.log(f"  {spec['name']:13s} GridSearchCV(SVC, n_jobs=-1) skipped (--skip svc)")
        elif spec["estimator"] == "KernelSVC":
            forecast = _svc_forecast(X, y, grid, n_fits, spec["folds"])
            if forecast > SVC_BUDGET_S:
                ctx.log(f"  {spec['name']:13s} GridSearchCV(SVC, n_jobs=-1) skipped: forecast {forecast:.0f} s "
                        f"> {SVC_BUDGET_S:.0f} s")
            else:
                makers["svc"] = lambda: SkGridSearchCV(SVC(cache_size=1000), grid, cv=cv, n_jobs=-1)
        runs = _timed_searches(makers, X, y, reps, ctx.log)
        ours, t_ours, ts_ours = runs["ours"]
        ref = None
        n = int(X.shape[0])
        if "theirs" in runs:
            theirs, t_theirs, ts_theirs = runs["theirs"]
            ref = (theirs, t_theirs)
        yield _row(ctx, spec, "GridSearchCV (gpuksvm)", t_ours, ours, Xt, yt, ref, n, ts_ours)
        if ref is not None:
            yield _row(ctx, spec, "GridSearchCV (sklearn) same estimator", t_theirs, theirs, Xt, yt, None, n,
                       ts_theirs)
        if "gpu" in runs:
            on, t_on, ts_on = runs["gpu"]
            yield _row(ctx, spec, f"GridSearchCV (gpuksvm) on {ctx.device}", t_on, on, Xt, yt, ref, n, ts_on)
            ctx.log(f"  {spec['name']:13s} {'':40s} CPU search time / GPU search time {t_ours / t_on:.2f}")
        if "svc" in runs:
            svc, t_svc, ts_svc = runs["svc"]
            yield _row(ctx, spec, "GridSearchCV(SVC, n_jobs=-1) (sklearn)", t_svc, svc, Xt, yt, ref, n, ts_svc)
            rounds = [a / b for a, b in zip(ts_svc, ts_ours)]
            ctx.log(f"  {spec['name']:13s} {'':40s} SVC search time / gpuksvm time {t_svc / t_ours:.2f} "
                    f"(medians of {reps}); per round {', '.join(f'{r:.2f}' for r in rounds)}")
        if _torchkm_available():
            if spec["estimator"] != "KernelSVC" or np.unique(y).size != 2:
                ctx.log(f"  {spec['name']:13s} TorchKM skipped: it is compared on binary KernelSVC cases only "
                        "(TorchKM has no multi-class)")
            elif n > TORCHKM_MAX_N:
                ctx.log(f"  {spec['name']:13s} TorchKM skipped: {n} rows > {TORCHKM_MAX_N} (its dense n × n "
                        "float64 kernel and eigenvectors)")
            else:
                tkm = _TorchKMSearch(grid, list(cv.split(X, y)), int(X.shape[0]))
                t_tkm = _timed_search(tkm, X, y)
                tkm.results_like(list(ours.cv_results_["params"]))
                rec = _row(ctx, spec, "TorchKM (cvksvm, CPU)", t_tkm, tkm, Xt, yt, ref, n)
                rec.extra.update(gpuksvm_speedup=t_tkm / t_ours, unconverged_C=tkm.unconverged_,
                                 note="CV: pooled out-of-fold accuracy")
                ctx.log(f"  {spec['name']:13s} {'':40s} TorchKM time / gpuksvm time {t_tkm / t_ours:.2f}; "
                        f"TorchKM unconverged (γ, C): {tkm.unconverged_}")
                yield rec
        if ctx.params["n_trace"] and not on_gpu:     # on a GPU the search above is measured
            pred = _predicted_gpu_s(spec, X, y, list(cv.split(X, y)), list(ours.cv_results_["params"]),
                                    ctx.params["n_trace"])
            ctx.log(f"  {spec['name']:13s} {'GPU (predicted, H100 cost model)':40s} {pred['predicted_s']:8.2f} s  "
                    f"PREDICTED from {pred['traced_fits']} traced fits of {pred['fits']}")
            yield ctx.record(method="GPU (predicted)", dataset=spec["data"],
                             params={"case": spec["name"], **spec["params"]}, fit_s=pred["predicted_s"],
                             n_train=n, extra={"note": "MODEL PREDICTION (bench/_gpu_cost.py), not a measurement",
                                               **pred})
    ctx.log(f"  load average after: {load_average()}")


TUNE = register(Case(
    "tune", run_tune, scales=SCALES,
    description="GridSearchCV (gpuksvm) vs scikit-learn's over the same estimator and over SVC: time, "
                "selected parameters, CV scores, test accuracy",
    figure=None, columns=("best_params", "best_cv", "max_abs_d_mean_test_score", "speedup_vs_same_estimator")))


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.tune CASE ... [--n-train N] [--n-test N]``: paper cases, optionally smaller."""
    import argparse

    from .harness import new_run_id, run_case, write_records

    paper = {c["name"]: c for c in SCALES["paper"]["cases"]}
    ap = argparse.ArgumentParser(prog="python -m bench.tune", description=main.__doc__)
    ap.add_argument("cases", nargs="+", choices=sorted(paper))
    ap.add_argument("--n-train", type=int, default=None, help="training rows (default: the case's)")
    ap.add_argument("--n-test", type=int, default=None, help="test rows (default: the case's)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"),
                    help="gpu: our search also runs with the estimator on the GPU, measured")
    ap.add_argument("--n-trace", type=int, default=0, help="fits traced for the GPU prediction (0: none)")
    ap.add_argument("--skip", default="", help="comma-separated searches to leave out: same_estimator "
                    "(scikit-learn's search over the gpuksvm estimator: independent fits, hours at paper "
                    "scale), svc (scikit-learn's SVC search)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds of the searches (default 1)")
    ap.add_argument("--out", default=None, help="JSON-lines file to append to")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - {"same_estimator", "svc"}:
        ap.error(f"--skip takes same_estimator and svc, got {sorted(skip)}")
    specs = [{**paper[name], **({"n_train": args.n_train} if args.n_train else {}),
              **({"n_test": args.n_test} if args.n_test else {})} for name in args.cases]
    case = Case("tune", run_tune, scales={"paper": {"cases": specs, "n_trace": args.n_trace, "skip": sorted(skip)}},
                description=TUNE.description, figure=None, columns=TUNE.columns)
    records = list(run_case(case, scale="paper", device=gpuksvm.resolve_device(args.device), run_id=new_run_id(),
                            repeats=args.repeats))
    print(f"{len(records)} records -> {write_records(records, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
