"""The registered benchmark cases (``python -m bench --list``).

Each case names its data, its methods and their parameters at each scale;
``tiny`` is a few-second smoke run (tests), ``small`` what a CPU box runs,
``paper`` the papers' sizes.  Parameters used by the figures live in each
record's ``params``.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

import numpy as np

import gpuksvm
from gpuksvm.datasets import load_dataset, make_checkerboard, subsample

from . import memory as _memory
from .harness import RESULTS, Case, Context, Record, accuracy, measure, register, run_script, to_host

HERE = Path(__file__).resolve().parent

IJCNN1 = {"gamma": 2.0, "C": 32.0}          # the LLSVM paper's setting (SPEC §7)


def _ijcnn1(n_train: int | None, n_test: int | None, seed: int = 0):
    """ijcnn1's training and test files, ``n_*`` rows drawn at random (None: all)."""
    rng = np.random.default_rng(seed)
    X, y = subsample(*load_dataset("ijcnn1", "train"), n_train, rng)
    Xt, yt = subsample(*load_dataset("ijcnn1", "test"), n_test, rng)
    return X, y, Xt, yt


def _device_arg(ctx: Context) -> str:
    return str(ctx.device) if ctx.device.is_gpu else "cpu"


def _sklearn_svc(ctx: Context, X, y, Xt, yt, *, dataset: str, gamma: float, C: float,
                 params: dict | None = None) -> Record:
    from sklearn.svm import SVC

    return ctx.fit_predict(SVC(C=C, gamma=gamma, cache_size=1000), X, y, Xt, yt, method="SVC (sklearn)",
                           dataset=dataset, params=dict(params or {}, gamma=gamma, C=C), repeats=1,
                           extra=lambda m: {"n_sv": int(m.n_support_.sum())})


# --------------------------------------------------------------------------- LLSVM vs k on ijcnn1
def run_llsvm_ijcnn1(ctx: Context) -> Iterator[Record]:
    """LLSVM against the number of landmarks k, with Nyström + LinearSVC and SVC in the same run."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    p = ctx.params
    X, y, Xt, yt = _ijcnn1(p["n_train"], p["n_test"])
    Xd, Xtd = ctx.to_device(X), ctx.to_device(Xt)
    ks = p["ks_gpu"] if ctx.device.is_gpu else p["ks"]
    for k in ks:
        est = gpuksvm.LLSVM(n_landmarks=k, device=_device_arg(ctx), random_state=0, **IJCNN1)
        yield ctx.fit_predict(est, Xd, y, Xtd, yt, method="LLSVM", dataset="ijcnn1",
                              params=dict(IJCNN1, k=k),
                              extra=lambda e: {"solver": str(getattr(e.svm_, "solver_", "")),
                                               **{f"{s}_s": float(v) for s, v in e.fit_times_.items()}})
        if p["baselines"] and k <= p["baseline_max_k"]:
            pipe = make_pipeline(Nystroem(gamma=IJCNN1["gamma"], n_components=k, random_state=0),
                                 LinearSVC(C=IJCNN1["C"], random_state=0))
            yield ctx.fit_predict(pipe, X, y, Xt, yt, method="Nystroem+LinearSVC (sklearn)", dataset="ijcnn1",
                                  params=dict(IJCNN1, k=k), repeats=1)
    if p["baselines"]:
        yield _sklearn_svc(ctx, X, y, Xt, yt, dataset="ijcnn1", **IJCNN1)


register(Case(
    "llsvm_ijcnn1", run_llsvm_ijcnn1,
    scales={"tiny": {"n_train": 2000, "n_test": 2000, "ks": [50, 100], "ks_gpu": [50, 100], "baselines": True,
                     "baseline_max_k": 100},
            "small": {"n_train": None, "n_test": None, "ks": [250, 500, 1000],
                      "ks_gpu": [250, 500, 1000, 2000, 4000], "baselines": True, "baseline_max_k": 1000},
            "paper": {"n_train": None, "n_test": None, "ks": [250, 500, 1000, 2000, 4000],
                      "ks_gpu": [250, 500, 1000, 2000, 4000], "baselines": True, "baseline_max_k": 4000,
                      "repeats": 3}},
    description="LLSVM vs landmarks k on ijcnn1 (γ=2, C=32), Nyström+LinearSVC and SVC in the same run"))


# --------------------------------------------------------------------------- LLSVM vs row order
def run_llsvm_order(ctx: Context) -> Iterator[Record]:
    """ijcnn1 in its file order, shuffled and sorted by label: LLSVM's landmarks against the row order.

    LLSVM (k-means on a random sample, the default) against the paper's k-means
    on the first ``first_rows`` rows (landmarks passed explicitly), and ``SVC``
    (order-independent) as the reference, in the same run.  The random-sample
    records carry ``spread_pt``: the accuracy spread over the orders at their k.
    """
    from sklearn.svm import SVC

    from gpuksvm.array import backend as bk
    from gpuksvm.solvers.nystrom.kmeans import kmeans

    p, dev = ctx.params, ctx.device
    X, y, Xt, yt = _ijcnn1(p["n_train"], p["n_test"])
    orders = {"file order": np.arange(X.shape[0]), "shuffled": np.random.RandomState(0).permutation(X.shape[0]),
              "sorted by label": np.argsort(y, kind="stable")}
    dev_arg, Xtd = _device_arg(ctx), ctx.to_device(Xt)
    for k in p["ks"]:
        sampled = []
        for order, idx in orders.items():
            Xo, yo = X[idx], y[idx]
            Xod = ctx.to_device(Xo)
            est = gpuksvm.LLSVM(n_landmarks=k, device=dev_arg, random_state=0, **IJCNN1)
            rec = ctx.fit_predict(est, Xod, yo, Xtd, yt, method="LLSVM (random k-means sample)", dataset="ijcnn1",
                                  params=dict(IJCNN1, k=k, order=order))
            sampled.append(rec)
            yield rec
            Z = to_host(kmeans(Xo[:p["first_rows"]], k, n_iter=5, random_state=0, device=dev_arg,
                               dtype=est.dtype).centers)
            first = gpuksvm.LLSVM(landmarks=Z, device=dev_arg, random_state=0, **IJCNN1)
            yield ctx.fit_predict(first, Xod, yo, Xtd, yt, method="LLSVM (k-means on the first rows, the paper's)",
                                  dataset="ijcnn1", params=dict(IJCNN1, k=k, order=order, first_rows=p["first_rows"]))
        spread = 100 * (max(r.accuracy for r in sampled) - min(r.accuracy for r in sampled))
        for r in sampled:
            r.extra.update(spread_pt=spread, spread_le_0_3pt=spread <= 0.3)
    if p["baselines"]:
        for order in ("shuffled", "sorted by label"):
            idx = orders[order]
            yield _sklearn_svc(ctx, X[idx], y[idx], Xt, yt, dataset="ijcnn1", params={"order": order}, **IJCNN1)


register(Case(
    "llsvm_order", run_llsvm_order, figure=None, columns=("spread_pt",),
    scales={"tiny": {"n_train": 2000, "n_test": 2000, "ks": [50], "first_rows": 1000, "baselines": False},
            "small": {"n_train": None, "n_test": None, "ks": [500, 1000], "first_rows": 20_000, "baselines": True},
            "paper": {"n_train": None, "n_test": None, "ks": [500, 1000], "first_rows": 20_000, "baselines": True}},
    description="LLSVM on ijcnn1 in file order, shuffled, sorted by label: random-sample vs first-rows k-means"))


# --------------------------------------------------------------------------- LLSVM2 vs LLSVM
def _llsvm2_grid(X, y, gammas: list, Cs: list, lams: list, base: dict) -> tuple[list, dict]:
    """LLSVM over γ × C, and LLSVM2 over γ × C at each λ (None where every eigenvalue is zeroed)."""
    from gpuksvm.estimators.llsvm import fit_llsvm_grid

    plain = fit_llsvm_grid(X, y, gammas=gammas, Cs=Cs, estimator=gpuksvm.LLSVM(**base))
    sup = {}
    for lam in lams:
        est = dict(spectrum="supervised", spectrum_reg=lam, n_labeled=100, **base)
        try:
            sup[lam] = fit_llsvm_grid(X, y, gammas=gammas, Cs=Cs, estimator=gpuksvm.LLSVM(**est))
        except ValueError:  # every eigenvalue zeroed at this λ for some γ: fit per γ
            sup[lam] = []
            for g in gammas:
                try:
                    sup[lam] += fit_llsvm_grid(X, y, gammas=[g], Cs=Cs, estimator=gpuksvm.LLSVM(**est))
                except ValueError:
                    sup[lam] += [None] * len(Cs)
    return plain, sup


def run_llsvm2_grid(ctx: Context) -> Iterator[Record]:
    """LLSVM2 vs LLSVM over a γ × C grid on an ijcnn1 subset (the TNNLS paper's stability figure).

    LLSVM2's λ is selected on a validation split from ``lambdas`` (+ ∞, i.e.
    plain LLSVM, is *not* offered to it).  The last record sums up the grid:
    the fraction of grid points where LLSVM2 is better / equal / worse (within
    1e-4) and the spread of the test accuracy over the grid; its ``fit_s`` is
    every grid fit together.
    """
    p = ctx.params
    X, y = load_dataset("ijcnn1", "train")
    Xt, yt = load_dataset("ijcnn1", "test")
    rs = np.random.RandomState(0)
    n_tr, n_val, n_te, k = p["n_train"], p["n_val"], p["n_test"], p["k"]
    perm = rs.permutation(X.shape[0])
    tr, va = perm[:n_tr], perm[n_tr:n_tr + n_val]
    te = rs.permutation(Xt.shape[0])[:n_te]
    Xtr, ytr, Xva, yva, Xte, yte = X[tr], y[tr], X[va], y[va], Xt[te], yt[te]
    lams = [10.0 ** e for e in p["lambda_exponents"]]
    base = dict(n_landmarks=k, device=_device_arg(ctx), random_state=0)
    t = measure(lambda: _llsvm2_grid(Xtr, ytr, p["gammas"], p["Cs"], lams, base), device=ctx.device,
                repeats=1)
    plain, sup = t.result
    a1, a2 = [], []
    common = {"n_train": n_tr, "n_test": n_te}
    for i, m in enumerate(plain):
        cands = [(sup[lam][i], lam) for lam in lams if sup[lam][i] is not None]
        best, best_lam = max(cands, key=lambda c: c[0].score(Xva, yva))
        a1.append(m.score(Xte, yte))
        a2.append(best.score(Xte, yte))
        prm = {"gamma": m.gamma, "C": m.C, "k": k}
        yield ctx.record(method="LLSVM", dataset="ijcnn1", params=prm, accuracy=a1[-1], **common)
        yield ctx.record(method="LLSVM2 (λ by validation)", dataset="ijcnn1", params=dict(prm, llsvm2_lambda=best_lam),
                         accuracy=a2[-1], extra={"llsvm2_better": a2[-1] > a1[-1] + 1e-4,
                                                 "equal": abs(a2[-1] - a1[-1]) <= 1e-4}, **common)
    a1, a2 = np.array(a1), np.array(a2)
    summary = {"settings": len(a1), "llsvm2_better": float(np.mean(a2 > a1 + 1e-4)),
               "equal": float(np.mean(np.abs(a2 - a1) <= 1e-4)), "llsvm2_worse": float(np.mean(a2 < a1 - 1e-4)),
               "llsvm_acc_std": float(a1.std()), "llsvm2_acc_std": float(a2.std()),
               "llsvm_acc_min": float(a1.min()), "llsvm2_acc_min": float(a2.min()), "n_val": n_val,
               "lambdas": lams}
    ctx.log(f"  summary: {summary}  ({t.median_s:.1f} s for every grid fit)")
    yield ctx.record(method="summary: LLSVM2 vs LLSVM over the grid", dataset="ijcnn1", params={"k": k},
                     fit_s=t.median_s, fit_times_s=t.times_s, extra=summary, **common)


register(Case(
    "llsvm2_grid", run_llsvm2_grid, figure=None,
    columns=("llsvm2_better", "equal", "llsvm2_worse", "llsvm_acc_std", "llsvm2_acc_std"),
    scales={"tiny": {"n_train": 1000, "n_val": 500, "n_test": 2000, "k": 50, "gammas": [0.2, 2.0], "Cs": [1.0],
                     "lambda_exponents": [-1, 1]},
            "small": {"n_train": 8000, "n_val": 4000, "n_test": 20_000, "k": 300, "gammas": [0.02, 0.2, 2.0, 20.0],
                      "Cs": [0.1, 1.0, 10.0, 100.0], "lambda_exponents": list(range(-5, 6, 2))},
            "paper": {"n_train": 30_000, "n_val": 10_000, "n_test": 91_701, "k": 1000,
                      "gammas": [0.02, 0.2, 2.0, 20.0, 200.0], "Cs": [0.1, 1.0, 10.0, 100.0],
                      "lambda_exponents": list(range(-5, 6))}},
    description="LLSVM2 (λ by validation) vs LLSVM over γ × C on an ijcnn1 subset: better/equal/worse"))


# --------------------------------------------------------------------------- CVM on the checkerboard
CVM_CB = {"gamma": 60.0, "C": 1e4, "tol": 1e-2}
CVM_CB_PREVIOUS = {"gamma": 60.0, "C": 1000.0}


def _cvm_extra(est: Any) -> dict:
    return {"core_set": int(est.core_set_size_[0]), "n_sv": int(est.n_support_total_),
            "n_iter": int(est.n_iter_[0]), "stop": str(est.stop_reason_[0]),
            "duality_gap": float(est.duality_gap_[0])}


def run_cvm_checkerboard(ctx: Context) -> Iterator[Record]:
    """CVM on the clean 4×4 checkerboard against n, SVC (same γ, C) where it is cheap."""
    p = ctx.params
    Xt, yt = make_checkerboard(p["n_test"], random_state=1)
    Xtd = ctx.to_device(Xt)
    sizes = p["sizes_gpu"] if ctx.device.is_gpu else p["sizes"]
    for n in sizes:
        X, y = make_checkerboard(n, random_state=0)
        Xd = ctx.to_device(X)
        settings = [("CVM", CVM_CB)] + ([("CVM C=1000", CVM_CB_PREVIOUS)] if n == max(sizes) else [])
        for label, prm in settings:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = gpuksvm.CVM(device=_device_arg(ctx), random_state=0, sample_size=59, **prm)
                rec = ctx.fit_predict(est, Xd, y, Xtd, yt, method=label, dataset="checkerboard",
                                      params=dict(prm, n=n), extra=_cvm_extra)
            rec.objective = rec.extra["duality_gap"]
            yield rec
        if n <= p["svc_max_n"]:
            yield _sklearn_svc(ctx, X, y, Xt, yt, dataset="checkerboard", gamma=CVM_CB["gamma"], C=CVM_CB["C"],
                               params={"n": n})


register(Case(
    "cvm_checkerboard", run_cvm_checkerboard, figure="acc_vs_time,time_vs_param:n",
    scales={"tiny": {"sizes": [2000], "sizes_gpu": [2000], "n_test": 2000, "svc_max_n": 2000},
            "small": {"sizes": [10_000, 100_000, 1_000_000], "sizes_gpu": [10_000, 100_000, 1_000_000, 10_000_000],
                      "n_test": 20_000, "svc_max_n": 10_000},
            "paper": {"sizes": [10_000, 100_000, 1_000_000], "sizes_gpu": [10_000, 100_000, 1_000_000, 10_000_000],
                      "n_test": 20_000, "svc_max_n": 100_000, "repeats": 3, "warmup": 1}},
    description="CVM on the clean 4×4 checkerboard vs n (γ=60, C=1e4, tol=1e-2), SVC where cheap"))


# --------------------------------------------------------------------------- every method on ijcnn1
# (label, public estimator name, parameters, parameters at the tiny scale)
METHODS_IJCNN1 = (
    ("LinearSVM", "LinearSVM", {"C": 1.0}, {}),
    ("KernelSVC", "KernelSVC", {"kernel": "rbf", **IJCNN1}, {}),
    ("LLSVM", "LLSVM", {"kernel": "rbf", **IJCNN1, "n_landmarks": 1000}, {"n_landmarks": 100}),
    ("CVM", "CVM", {"kernel": "rbf", **IJCNN1}, {}),
    ("SVI", "SVI", {"kernel": "rbf", "gamma": 0.5, "C": 512.0}, {}),
    ("OKFEB", "OKFEBClassifier", {"kernel": "rbf", "gamma": 0.5, "alpha": 1e-5}, {}),
)


def run_methods_ijcnn1(ctx: Context) -> Iterator[Record]:
    """Every method of the package with its ijcnn1 parameters, and scikit-learn's SVC, on the same rows."""
    p = ctx.params
    X, y, Xt, yt = _ijcnn1(p["n_train"], p["n_test"])
    Xd, Xtd = ctx.to_device(X), ctx.to_device(Xt)
    for label, cls_name, params, tiny in METHODS_IJCNN1:
        cls = getattr(gpuksvm, cls_name)
        prm = dict(params, **(tiny if ctx.scale == "tiny" else {}))
        names = cls().get_params(deep=False)
        kw = {"device": _device_arg(ctx)} if "device" in names else {}
        if "random_state" in names:
            kw["random_state"] = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield ctx.fit_predict(cls(**prm, **kw), Xd, y, Xtd, yt, method=label, dataset="ijcnn1",
                                  params={k: v for k, v in prm.items() if k != "kernel"})
    if p["sklearn_svc"]:
        yield _sklearn_svc(ctx, X, y, Xt, yt, dataset="ijcnn1", **IJCNN1)


register(Case(
    "methods_ijcnn1", run_methods_ijcnn1,
    scales={"tiny": {"n_train": 2000, "n_test": 2000, "sklearn_svc": True},
            "small": {"n_train": 10_000, "n_test": None, "sklearn_svc": True},
            "paper": {"n_train": None, "n_test": None, "sklearn_svc": True}},
    description="every method (linear, exact kernel SVC, LLSVM, CVM, SVI, OK-FEB) and sklearn SVC on ijcnn1"))


# --------------------------------------------------------------------------- engines on ijcnn1
# KernelSVC's solvers vs sklearn SVC, LinearSVM's vs LinearSVC, batched SMO vs sequential SVC fits.
ENGINES = {"gamma": 2.0, "C_kernel": 32.0, "C_linear": 1.0}


@functools.lru_cache(maxsize=2)
def _ijcnn1(split: str) -> tuple[Any, np.ndarray]:
    """ijcnn1's ``split``, read once per process: the three engine cases share it (each read
    decompresses and parses the file, 1.1 s; six of them were 6.8 s of the 18.5 s that
    ``bench/solvers.py --scale tiny`` took on the emulated GPU, a quiet 2-core machine)."""
    return load_dataset("ijcnn1", split)


def _ijcnn1_engines(ctx: Context):
    """ijcnn1 rows for the engine cases: one ``RandomState(0)`` draws the train then the test rows."""
    rs = np.random.RandomState(0)
    X, y = subsample(*_ijcnn1("train"), ctx.params["n_train"], rs)
    Xt, yt = subsample(*_ijcnn1("test"), ctx.params["n_test"], rs)
    return X, y, Xt, yt


def _interleaved(ctx: Context, runs: list, rounds: int) -> list[dict]:
    """Time ``(fit, predict, device)`` triples round-robin (A B A B …) through :func:`measure`.

    On a shared host the load drifts during a run: timing the reference and the
    candidates in alternation keeps that drift out of their ratios.  GPU runs
    get one untimed warm-up.  Per run: every fit and predict time, their
    medians, the last model and its prediction.
    """
    out = [{"fit": [], "predict": []} for _ in runs]
    for r in range(rounds):
        for (fit, predict, dev), o in zip(runs, out):
            warm = 1 if getattr(dev, "is_gpu", False) and r == 0 else 0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = measure(fit, device=dev, warmup=warm)
            p = measure(lambda m=f.result: predict(m), device=dev, warmup=warm)
            o["fit"].append(f.median_s)
            o["predict"].append(p.median_s)
            o["model"], o["pred"] = f.result, p.result
    for o in out:
        o["fit_s"], o["predict_s"] = float(np.median(o["fit"])), float(np.median(o["predict"]))
    return out


def run_solvers_kernel(ctx: Context) -> Iterator[Record]:
    """KernelSVC with every solver on the device against sklearn SVC (RBF γ=2, C=32): dual objectives."""
    from sklearn.svm import SVC

    from gpuksvm.array import backend as bk
    from gpuksvm.kernels.kernel import Kernel
    from gpuksvm.solvers.svc_dual import dual_objective

    X, y, Xt, yt = _ijcnn1_engines(ctx)
    g, C = ENGINES["gamma"], ENGINES["C_kernel"]
    cpu = gpuksvm.resolve_device("cpu")
    runs = [(lambda: SVC(C=C, gamma=g).fit(X, y), lambda m: m.predict(Xt), cpu)]
    variants = [("working_set", ctx.device, np.float32), ("working_set", ctx.device, np.float64)] \
        if ctx.device.is_gpu else []
    variants += [(s, cpu, np.float64) for s in ctx.params["cpu_solvers"]]
    for solver, d, dt in variants:
        Xd = bk.to_device(X, d, dt) if d.is_gpu else X
        Xtd = bk.to_device(Xt, d, dt) if d.is_gpu else Xt
        runs.append((lambda solver=solver, d=d, dt=dt, Xd=Xd: gpuksvm.KernelSVC(
            C=C, gamma=g, solver=solver, device=str(d), dtype=dt).fit(Xd, y),
            lambda m, Xtd=Xtd: m.predict(Xtd), d))
    timed = _interleaved(ctx, runs, ctx.repeats)
    ref = timed[0]
    obj = float(dual_objective(X, ref["model"].support_, ref["model"].dual_coef_, Kernel("rbf", gamma=g)))
    base = {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0])}
    yield ctx.record(method="SVC (sklearn)", dataset="ijcnn1", params={"gamma": g, "C": C, "solver": "libsvm"},
                     fit_s=ref["fit_s"], predict_s=ref["predict_s"], fit_times_s=ref["fit"],
                     accuracy=accuracy(ref["pred"], yt), objective=obj,
                     extra={"n_sv": int(ref["model"].support_.size), "device": "cpu"}, **base)
    for (solver, d, dt), t in zip(variants, timed[1:]):
        est = t["model"]
        o = float(est.objective_[0])
        rec = ctx.record(method="KernelSVC", dataset="ijcnn1",
                         params={"gamma": g, "C": C, "solver": est.solver_, "dtype": np.dtype(dt).name},
                         fit_s=t["fit_s"], predict_s=t["predict_s"], fit_times_s=t["fit"],
                         accuracy=accuracy(t["pred"], yt), objective=o,
                         extra={"n_sv": int(est.support_.size), "device": str(d),
                                "rel_obj_gap": abs(o - obj) / abs(obj), "fit_speedup": ref["fit_s"] / t["fit_s"],
                                "predict_speedup": ref["predict_s"] / t["predict_s"]}, **base)
        ctx.log(f"  KernelSVC[{est.solver_}, {rec.params['dtype']}] on {d}: acc {rec.accuracy:.4f} "
                f"objective {o:.6g} (SVC {obj:.6g})  fit {t['fit_s']:.3f}s (SVC {ref['fit_s']:.3f}s)")
        yield rec


def run_solvers_linear(ctx: Context) -> Iterator[Record]:
    """LinearSVM (auto on the device, each CPU solver) against LinearSVC, squared hinge, C=1: primal objectives."""
    from sklearn.svm import LinearSVC

    from gpuksvm.array import backend as bk

    X, y, Xt, yt = _ijcnn1_engines(ctx)
    C = ENGINES["C_linear"]
    cpu = gpuksvm.resolve_device("cpu")

    def primal(w, b):  # LIBLINEAR's: the bias is regularised too
        m = np.maximum(0.0, 1.0 - y * (X @ w + b))
        return float(0.5 * (w @ w + b * b) + C * np.sum(m * m))

    runs = [(lambda: LinearSVC(C=C, loss="squared_hinge", tol=1e-4, max_iter=5000).fit(X, y),
             lambda m: m.predict(Xt), cpu)]
    variants = [("auto", ctx.device)] + ([("auto", cpu)] if ctx.device.is_gpu else [])
    variants += [(s, cpu) for s in ctx.params["cpu_solvers"] if s != "auto"]
    for solver, d in variants:
        Xd = bk.to_device(X, d) if d.is_gpu else X
        Xtd = bk.to_device(Xt, d) if d.is_gpu else Xt
        runs.append((lambda solver=solver, d=d, Xd=Xd: gpuksvm.LinearSVM(
            C=C, loss="squared_hinge", solver=solver, max_iter=5000, device=str(d), random_state=0).fit(Xd, y),
            lambda m, Xtd=Xtd: m.predict(Xtd), d))
    timed = _interleaved(ctx, runs, max(ctx.repeats, ctx.params["min_rounds"]))   # fits well under 1 s
    ref = timed[0]
    obj = primal(ref["model"].coef_.ravel(), float(ref["model"].intercept_[0]))
    base = {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0])}
    yield ctx.record(method="LinearSVC (sklearn)", dataset="ijcnn1", params={"C": C, "solver": "liblinear"},
                     fit_s=ref["fit_s"], predict_s=ref["predict_s"], fit_times_s=ref["fit"],
                     accuracy=accuracy(ref["pred"], yt), objective=obj, extra={"device": "cpu"}, **base)
    for (solver, d), t in zip(variants, timed[1:]):
        est = t["model"]
        o = float(np.asarray(est.objective_).ravel()[0])
        ctx.log(f"  LinearSVM({solver}) -> {est.solver_} on {d}: acc {accuracy(t['pred'], yt):.4f} "
                f"objective {o:.6g} (LinearSVC {obj:.6g})  fit {t['fit_s']:.3f}s (LinearSVC {ref['fit_s']:.3f}s)")
        yield ctx.record(method=f"LinearSVM({solver})", dataset="ijcnn1",
                         params={"C": C, "solver": est.solver_}, fit_s=t["fit_s"], predict_s=t["predict_s"],
                         fit_times_s=t["fit"], accuracy=accuracy(t["pred"], yt), objective=o,
                         extra={"device": str(d), "rel_obj_gap": abs(o - obj) / abs(obj),
                                "fit_vs_ref": t["fit_s"] / ref["fit_s"]}, **base)


def run_solvers_batched(ctx: Context) -> Iterator[Record]:
    """Disjoint ijcnn1 subsets solved by one ``solve_batched`` call against sequential sklearn SVC fits."""
    from sklearn.svm import SVC

    from gpuksvm.array import backend as bk
    from gpuksvm.kernels.kernel import Kernel
    from gpuksvm.solvers.smo.engines import solve_batched

    X, y, _, _ = _ijcnn1_engines(ctx)
    n_prob, size = ctx.params["problems"], ctx.params["rows"]
    perm = np.random.RandomState(1).permutation(X.shape[0])
    subsets = [np.sort(perm[p * size:(p + 1) * size]) for p in range(n_prob)]
    g, C = ENGINES["gamma"], ENGINES["C_kernel"]
    kern = Kernel("rbf", gamma=g)
    cpu = gpuksvm.resolve_device("cpu")
    runs_ = [(lambda: [SVC(C=C, gamma=g).fit(X[S], y[S]) for S in subsets], lambda m: None, cpu)]
    variants = [("working_set", ctx.device, np.float32), ("working_set", ctx.device, np.float64)] \
        if ctx.device.is_gpu else []
    variants.append(("libsvm", cpu, np.float64))
    for method, d, dt in variants:
        Xd = bk.to_device(X, d, dt) if d.is_gpu else X
        runs_.append((lambda method=method, d=d, dt=dt, Xd=Xd: solve_batched(
            Xd, y, subsets, kern, C, device=d, dtype=dt, method=method), lambda m: None, d))
    timed = _interleaved(ctx, runs_, ctx.repeats)
    ref = timed[0]
    prm = {"gamma": g, "C": C, "problems": n_prob, "rows": size}
    yield ctx.record(method="SVC (sklearn), sequential fits", dataset="ijcnn1", params=dict(prm, solver="libsvm"),
                     fit_s=ref["fit_s"], fit_times_s=ref["fit"], n_train=n_prob * size,
                     extra={"device": "cpu", "n_sv": int(sum(m.support_.size for m in ref["model"]))})
    for (method, d, dt), t in zip(variants, timed[1:]):
        res = t["model"]
        ctx.log(f"  solve_batched[{res[0].solver}, {np.dtype(dt).name}] on {d}: fit {t['fit_s']:.3f}s "
                f"(sequential SVC {ref['fit_s']:.3f}s)")
        yield ctx.record(method="solve_batched", dataset="ijcnn1",
                         params=dict(prm, solver=res[0].solver, dtype=np.dtype(dt).name),
                         fit_s=t["fit_s"], fit_times_s=t["fit"], n_train=n_prob * size,
                         extra={"device": str(d), "speedup": ref["fit_s"] / t["fit_s"],
                                "n_sv": int(sum(r.support.size for r in res)),
                                "converged": all(bool(r.converged) for r in res)})


_ENGINE_ROWS = {"tiny": {"n_train": 300, "n_test": 300},           # tiny: bench/gpu_suite.py's CI size
                "small": {"n_train": 10_000, "n_test": 20_000, "repeats": 3},
                "paper": {"n_train": None, "n_test": None, "repeats": 1}}
register(Case(
    "solvers_kernel", run_solvers_kernel,
    columns=("device", "n_sv", "rel_obj_gap", "fit_speedup", "predict_speedup"),
    scales={s: dict(v, cpu_solvers=["libsvm", "smo", "working_set"]) for s, v in _ENGINE_ROWS.items()},
    description="KernelSVC solvers vs sklearn SVC on ijcnn1 (γ=2, C=32): time, accuracy, dual objective"))
register(Case(
    "solvers_linear", run_solvers_linear, columns=("device", "rel_obj_gap", "fit_vs_ref"),
    scales={s: dict(v, cpu_solvers=["auto", "newton", "liblinear"], min_rounds=5)
            for s, v in _ENGINE_ROWS.items()},
    description="LinearSVM solvers vs LinearSVC on ijcnn1 (squared hinge, C=1): time, accuracy, primal objective"))
register(Case(
    "solvers_batched", run_solvers_batched, figure=None, columns=("device", "speedup", "n_sv", "converged"),
    scales={s: dict(v, problems=p, rows=r)
            for (s, v), (p, r) in zip(_ENGINE_ROWS.items(), [(2, 150), (5, 2_000), (5, 5_000)])},
    description="batched SMO: disjoint ijcnn1 subsets in one solve_batched call vs sequential SVC fits"))


# --------------------------------------------------------------------------- RBF kernel blocks
def _copy_bandwidth(ctx: Context, nbytes: int) -> float:
    """Bytes read + written per second by a device-to-device (host: memory-to-memory) copy."""
    from gpuksvm.array import backend as bk

    xp = bk.get_namespace(ctx.device)
    a = xp.ones(nbytes // 4, dtype=np.float32)
    b = xp.empty_like(a)
    return 2 * a.nbytes / measure(lambda: xp.copyto(b, a), device=ctx.device, repeats=5, warmup=1).median_s


def run_kernels_rbf(ctx: Context) -> Iterator[Record]:
    """RBF kernel blocks (float32, γ=0.5) over (n, k, d): seconds, TFLOP/s and the output-write floor."""
    from gpuksvm.array import backend as bk
    from gpuksvm.kernels.kernel import Kernel, kernel_block

    from .kernels import CPU_SIZES, GPU_SIZES, _plain_cupy_rbf

    dev, xp = ctx.device, bk.get_namespace(ctx.device)
    kern, dtype = Kernel("rbf", gamma=0.5), np.float32
    bw = _copy_bandwidth(ctx, ctx.params["copy_bytes"] or (2**30 if dev.is_gpu else 256 * 2**20))
    ctx.log(f"  measured copy bandwidth {bw / 1e9:.1f} GB/s")
    rng = np.random.default_rng(0)
    for n, k, d in (GPU_SIZES if dev.is_gpu else CPU_SIZES)[ctx.scale]:
        X = bk.to_device((rng.normal(size=(n, d)) / np.sqrt(d)).astype(dtype), dev)   # float32 (NEP 50)
        Z = bk.to_device((rng.normal(size=(k, d)) / np.sqrt(d)).astype(dtype), dev)
        out = xp.empty((n, k), dtype=dtype)
        floor_s = n * k * np.dtype(dtype).itemsize / bw
        if dev.is_gpu:
            variants = [("cupy-plain", lambda: _plain_cupy_rbf(xp, X, Z, kern.gamma)),
                        ("gemm+epilogue", lambda: kernel_block(X, Z, kern, out=out, method="gemm"))]
            if d <= 64:
                variants.append(("tiled", lambda: kernel_block(X, Z, kern, out=out, method="tiled")))
        else:
            variants = [("numpy-blas", lambda: kernel_block(X, Z, kern, out=out))]
        first = None
        for name, fn in variants:
            t = measure(fn, device=dev, repeats=ctx.repeats, warmup=1)
            first = first or t.median_s
            extra = {"block_s": t.median_s, "block_times_s": t.times_s, "TFLOP/s": 2.0 * n * k * d / t.median_s / 1e12,
                     "x_write_floor": t.median_s / floor_s, "speedup_vs_first": first / t.median_s,
                     "bandwidth_GBps": bw / 1e9}
            ctx.log(f"  {name:14s} n={n} k={k} d={d}: {t.median_s:.4g} s, {extra['TFLOP/s']:.3g} TFLOP/s, "
                    f"{extra['x_write_floor']:.3g}x the write floor")
            yield ctx.record(method=name, dataset="normal(0, 1/d), float32",
                             params={"n": n, "k": k, "d": d, "gamma": kern.gamma}, extra=extra)
        del X, Z, out, variants
        if dev.is_gpu:
            bk.free_gpu_cache()


register(Case(
    "kernels_rbf", run_kernels_rbf, figure=None,
    columns=("block_s", "TFLOP/s", "x_write_floor", "speedup_vs_first", "bandwidth_GBps"),
    scales={"tiny": {"copy_bytes": 2**20, "repeats": 3}, "small": {"copy_bytes": None, "repeats": 3},
            "paper": {"copy_bytes": None, "repeats": 3}},
    description="RBF kernel-block throughput of the block variants over (n, k, d), against the write floor"))


# --------------------------------------------------------------------------- OK-FEB kernel approximation
def _nystrom_features(X: np.ndarray, Z: np.ndarray, kernel: Any, rank: int | None = None) -> np.ndarray:
    """Nyström map K(X,Z)·U_r Λ_r^{-1/2} (full rank k, or the best rank-r part of K_ZZ)."""
    from gpuksvm.kernels.kernel import kernel_block

    w, U = np.linalg.eigh(kernel_block(Z, None, kernel))
    keep = w > 1e-10 * w.max()
    w, U = w[keep], U[:, keep]
    if rank is not None and rank < len(w):
        w, U = w[-rank:], U[:, -rank:]
    return kernel_block(X, Z, kernel) @ (U / np.sqrt(w))


def run_okfeb_approx(ctx: Context) -> Iterator[Record]:
    """The OK-FEB paper's Fig. 6: mean over windows of ‖K − ZZᵀ‖_F/‖K‖_F against k stored vectors.

    OK-FEB (budget B = k, rank r = k/2 and r = k) runs over the stream in
    windows of ``window`` rows; each window is scored with the model *after*
    it has processed that window (what a tracker offers for the data it just
    saw — the paper's moving-window mismatch).  Both budget-maintenance rules
    run on both streams: β = 1 (drop the stored row of smallest norm, the
    paper's stationary choice) and β = 0.5 (favour recent rows, its tracking
    choice); ``final_error`` scores the final β = 1 model over the whole stream.
    Nyström uses k landmarks of the *whole* stream (an offline advantage):
    random rows (mean over ``draws`` draws) or k-means centres, with its full
    rank-k map and with the best rank-k/2 part (the same rank as OK-FEB
    r = k/2, the paper's comparison).  OK-FEB settings: no censoring (every
    row may enter S), λ = 1e-6, μ = 1 (constant).  The OK-FEB r = k records
    carry ``le_nystrom_random``: whether OK-FEB at r = k (the better β) is at
    most random Nyström's error with the same k stored rows.
    """
    from gpuksvm.array import backend as bk
    from gpuksvm.datasets import make_two_spheres, sphere_to_spheroid_stream
    from gpuksvm.estimators.okfeb import OKFEB, windowed_kernel_error
    from gpuksvm.kernels.kernel import Kernel
    from gpuksvm.solvers.nystrom.kmeans import kmeans

    p, dev = ctx.params, ctx.device
    n, win = p["n"], p["window"]
    streams = {"two_spheres": (make_two_spheres(n, noise=0.05, random_state=0)[0], 1.0),
               "tracking": (sphere_to_spheroid_stream(n, change_at=n // 2, noise=0.01, random_state=0), 0.5)}
    for name, (X, gamma) in streams.items():
        kern = Kernel("rbf", gamma)
        for k in p["ks"]:
            recs = {}
            for r in sorted({max(k // 2, 2), k}):
                tag = "k" if r == k else "k/2"
                for beta in (1.0, 0.5):
                    fe = OKFEB(gamma=gamma, rank=r, n_landmarks=k, censor=0.0, forget=beta, step_size=1.0,
                               reg=1e-6, output="kernel", device=str(dev), random_state=0)
                    errs = []
                    for s in range(0, n, win):
                        Xw = bk.to_device(X[s:s + win], dev)
                        fe.partial_fit(Xw)
                        errs.append(windowed_kernel_error(X[s:s + win], bk.to_host(fe.transform(Xw)), kern, win))
                    extra = {"kernel_error": float(np.mean(errs))}
                    if beta == 1.0:
                        extra["final_error"] = float(fe.kernel_approximation_error(bk.to_device(X, dev), win))
                    recs[f"OK-FEB r={tag} β={beta:g}"] = ({"k": k, "rank": r, "beta": beta}, extra)
            draws = [X[np.random.RandomState(seed).choice(n, k, replace=False)] for seed in range(p["draws"])]
            Zk = bk.to_host(kmeans(X, k, n_iter=10, random_state=0, device="cpu").centers)
            for rank, tag in ((None, ""), (k // 2, " rank k/2")):
                recs["Nyström random" + tag] = ({"k": k, "rank": rank or k, "draws": p["draws"]}, {
                    "kernel_error": float(np.mean([windowed_kernel_error(X, _nystrom_features(X, Z, kern, rank),
                                                                         kern, win) for Z in draws]))})
                recs["Nyström k-means" + tag] = ({"k": k, "rank": rank or k}, {
                    "kernel_error": float(windowed_kernel_error(X, _nystrom_features(X, Zk, kern, rank), kern, win))})
            best = min(recs["OK-FEB r=k β=1"][1]["kernel_error"], recs["OK-FEB r=k β=0.5"][1]["kernel_error"])
            for key in ("OK-FEB r=k β=1", "OK-FEB r=k β=0.5"):
                recs[key][1]["le_nystrom_random"] = best <= recs["Nyström random"][1]["kernel_error"]
            ctx.log(f"  {name} k={k}: " + ", ".join(f"{m} {e['kernel_error']:.4f}" for m, (_, e) in recs.items()))
            for method, (prm, extra) in recs.items():
                yield ctx.record(method=method, dataset=name, params=dict(prm, gamma=gamma, n=n, window=win),
                                 n_train=n, extra=extra)


register(Case(
    "okfeb_approx", run_okfeb_approx, figure=None, columns=("kernel_error", "final_error", "le_nystrom_random"),
    scales={"tiny": {"n": 1000, "ks": [10], "window": 500, "draws": 5},
            "small": {"n": 6000, "ks": [10, 20, 40, 80], "window": 500, "draws": 5},
            "paper": {"n": 20_000, "ks": [10, 20, 40, 80, 160], "window": 500, "draws": 5}},
    description="OK-FEB (β=1, 0.5; r=k/2, k) vs Nyström (random, k-means) kernel error vs stored vectors k"))


# --------------------------------------------------------------------------- SVI vs the exact SVM
def _svi_row(ctx: Context, name: str, label: str, dev: Any, make: Any, X, y, Xt, yt, params: dict,
             ref_fit_repeats: int | None) -> Record:
    """One model of ``svi_vs_svc``: timed fit and predict, accuracy, SVs and SVI's diagnostics."""
    from gpuksvm.array import backend as bk

    d = gpuksvm.resolve_device(dev)
    Xd, Xtd = (bk.to_device(X, d), bk.to_device(Xt, d)) if d.is_gpu else (X, Xt)
    warm = 1 if d.is_gpu else 0
    base = dict(method=label, dataset=name, params=dict(params), n_train=int(X.shape[0]), n_test=int(Xt.shape[0]))
    try:
        reps = ref_fit_repeats if ref_fit_repeats and label.startswith("SVC") else ctx.repeats
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")    # kept in the record (SVI's fallback and cap)
            fit = measure(lambda: make().fit(Xd, y), device=d, repeats=reps, warmup=warm)
        model = fit.result
        pred = measure(lambda: model.predict(Xtd), device=d, repeats=ctx.repeats, warmup=warm)
    except Exception as exc:  # noqa: BLE001 - a failing engine must not hide the others
        return ctx.record(**base, extra={"device": str(d), "error": repr(exc)})
    yp = to_host(pred.result)
    sv = getattr(model, "support_", None)
    extra = {"device": str(d), "n_sv": int(to_host(sv).size) if sv is not None else -1,
             "warnings": sorted({f"{w.category.__name__}: {w.message}" for w in caught
                                 if w.category.__module__.startswith("gpuksvm")})}
    if label.startswith("SVC") and model.classes_.size == 2:
        # SVC's decision values through SVI's own prediction path (kernel_matvec against its SVs):
        # the predict-time ratio at equal cost per kernel entry, to set against the SV ratio
        from gpuksvm.kernels.kernel import Kernel, kernel_matvec

        kern = Kernel("rbf", gamma=float(model._gamma))
        svs = bk.to_device(model.support_vectors_, d) if d.is_gpu else model.support_vectors_
        coef = np.ascontiguousarray(model.dual_coef_[0], dtype=np.float64)
        same = measure(lambda: kernel_matvec(Xtd, svs, coef, kern) + model.intercept_[0], device=d,
                       repeats=ctx.repeats, warmup=warm)
        extra["predict_same_path_s"] = same.median_s
        extra["predict_same_path_agreement"] = float(np.mean((to_host(same.result) > 0) == (yp == model.classes_[1])))
    if label.startswith("SVI"):
        extra.update(stages_s={k: float(v) for k, v in model.fit_times_.items()},
                     margin=[{k: v for k, v in info.items() if k in ("n_rows", "subset_rate", "n_candidates",
                                                                      "n_selected", "guard", "exact")}
                             for info in model.sub_models_],
                     checks=[info.get("check") for info in model.sub_models_], margin_tol=model.margin_tol,
                     n_problems=int(model.solved_exactly_.size), solved_exactly=int(model.solved_exactly_.sum()),
                     margin_capped=int(model.margin_capped_.sum()))
    rec = ctx.record(**base, fit_s=fit.median_s, fit_times_s=fit.times_s, predict_s=pred.median_s,
                     accuracy=accuracy(yp, yt), extra=extra)
    exact = f" exact={extra['solved_exactly']}/{extra['n_problems']}" if "solved_exactly" in extra else ""
    ctx.log(f"  {name:11s} {label:14s} acc={rec.accuracy:.4f} fit={rec.fit_s:.3g}s predict={rec.predict_s:.3g}s "
            f"n_sv={extra['n_sv']}{exact}")
    return rec


def run_svi_vs_svc(ctx: Context) -> Iterator[Record]:
    """SVI (three settings) against SVC and KernelSVC on the same rows, per data set (``bench/svi.py``)."""
    from . import svi as S

    p = ctx.params
    for name in p["datasets"]:
        X, y, Xt, yt = S.load(name, ctx.scale, p["seed"])
        params = S.cv_params(name, X, y) if name in S.CV_GRID else S.PARAMS[name]
        recs = [_svi_row(ctx, name, label, dev, make, X, y, Xt, yt, params, p["ref_fit_repeats"])
                for label, dev, make in S._models(params, _device_arg(ctx), p["seed"], tuple(p["models"]))]
        ref = next((r for r in recs if r.method.startswith("SVC") and r.fit_s), None)
        for r in recs:
            if ref is None or not r.fit_s:
                continue
            r.extra.update(fit_speedup_vs_SVC=ref.fit_s / r.fit_s, predict_ratio_vs_SVC=r.predict_s / ref.predict_s,
                           sv_ratio_vs_SVC=r.extra["n_sv"] / ref.extra["n_sv"] if ref.extra["n_sv"] > 0
                           else float("nan"))
            if "predict_same_path_s" in ref.extra:
                r.extra["predict_ratio_same_path"] = r.predict_s / ref.extra["predict_same_path_s"]
            if r.method.startswith("SVI"):   # the targets, against this run's SVC
                gap = 100 * (ref.accuracy - r.accuracy)
                r.extra.update(accuracy_gap_pp=gap, fewer_svs=r.extra["n_sv"] < ref.extra["n_sv"],
                               fit_3x_faster=r.extra["fit_speedup_vs_SVC"] >= 3.0)
                if name == "ijcnn1" and ctx.scale == "paper":
                    r.extra["target_acc_98.3"] = r.accuracy >= 0.983
                if name in ("digits", "ijcnn1_tiny", "adult"):
                    r.extra["target_within_0.5pt"] = gap <= 0.5
        yield from recs


_SVI_DATASETS = ["ijcnn1", "ijcnn1_tiny", "adult", "digits", "two_sines"]
_SVI_MODELS = ["SVC", "KernelSVC", "SVI", "SVI-M10", "SVI-paper"]
register(Case(
    "svi_vs_svc", run_svi_vs_svc,
    columns=("n_sv", "solved_exactly", "fit_speedup_vs_SVC", "predict_ratio_vs_SVC", "sv_ratio_vs_SVC", "error"),
    scales={"tiny": {"datasets": ["two_sines"], "models": ["SVC", "SVI"], "seed": 0, "ref_fit_repeats": None},
            "small": {"datasets": _SVI_DATASETS, "models": _SVI_MODELS, "seed": 0, "ref_fit_repeats": None,
                      "repeats": 3},
            "paper": {"datasets": _SVI_DATASETS, "models": _SVI_MODELS, "seed": 0, "ref_fit_repeats": 1,
                      "repeats": 1}},
    description="SVI (defaults, M=10, the paper's) vs SVC and KernelSVC on the same rows, several data sets"))


# --------------------------------------------------------------------------- studies
def _study_module(name: str):
    """``bench/studies/<name>.py`` imported by path (it is also a script)."""
    spec = importlib.util.spec_from_file_location(f"bench_study_{name}", HERE / "studies" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    saved = list(sys.path)
    try:
        spec.loader.exec_module(mod)
    finally:  # the scripts put bench/ first on the path, where bench/dask.py would shadow dask
        sys.path[:] = saved
    return mod


def _data_scale(ctx: Context) -> str:
    """The studies' own data sizes: tiny runs use ijcnn1_tiny with the small-scale loader."""
    return "small" if ctx.scale == "tiny" else ctx.scale


def run_svi_subset_rows(ctx: Context) -> Iterator[Record]:
    """SVI's accuracy against the rows per sub-SVM r (the study behind ``min_subset_rows``)."""
    mod = _study_module("svi_subset_rows")
    p = ctx.params
    for name, sizes in p["grid"].items():
        res = mod.study(name, _data_scale(ctx), _device_arg(ctx), sizes, p["seeds"])
        base = {"n_train": res["n_train"], "n_test": res["n_test"]}
        yield ctx.record(method="SVC (sklearn)", dataset=name, params=dict(res["params"]),
                         fit_s=res["svc"]["fit_s"], accuracy=res["svc"]["accuracy"],
                         extra={"n_sv": res["svc"]["n_sv"]}, **base)
        for row in res["rows"]:
            yield ctx.record(method="SVI", dataset=name, params=dict(res["params"], rows_per_sub_svm=row[
                "rows_per_sub_svm"], seed=row["seed"]), fit_s=row["fit_s"], fit_times_s=[row["fit_s"]],
                accuracy=row["accuracy"], extra={k: v for k, v in row.items() if k not in (
                    "dataset", "rows_per_sub_svm", "seed", "accuracy", "fit_s")}, **base)


register(Case(
    "svi_subset_rows", run_svi_subset_rows, kind="study", figure="acc_vs_param:rows_per_sub_svm",
    scales={"tiny": {"grid": {"ijcnn1_tiny": [100, 200]}, "seeds": [0]},
            "small": {"grid": {"ijcnn1": [200, 500, 1000, 2000], "adult": [200, 500, 800, 1600],
                               "two_sines": [50, 100, 200, 400], "board": [200, 500, 1000], "digits": [20, 40]},
                      "seeds": [0, 1]},
            "paper": {"grid": {"ijcnn1": [500, 1000, 2000, 5000], "adult": [1000, 2000, 3256, 6000],
                               "two_sines": [200, 500, 1000, 2000, 4000], "board": [1000, 2000, 4000],
                               "digits": [20, 40]}, "seeds": [0, 1]}},
    description="study: SVI accuracy and ensemble check vs rows per sub-SVM, next to SVC"))


def run_svi_margin_tol(ctx: Context) -> Iterator[Record]:
    """SVI's accuracy and margin SVs against the margin band τ (the study behind ``margin_tol``)."""
    mod = _study_module("svi_margin_tol")
    p = ctx.params
    results = []
    for name in p["datasets"]:
        res = mod.study(name, _data_scale(ctx), _device_arg(ctx), p["taus"], p["seeds"])
        results.append(res)
        base = {"n_train": res["n_train"], "n_test": res["n_test"]}
        yield ctx.record(method="SVC (sklearn)", dataset=name, params=dict(res["params"]),
                         fit_s=res["svc"]["fit_s"], accuracy=res["svc"]["accuracy"],
                         extra={"n_sv": res["svc"]["n_sv"]}, **base)
        for row in res["rows"] + res["oracle"]:
            method = "SVI on SVC's decision values (oracle)" if row["seed"] == "oracle" else "SVI"
            yield ctx.record(method=method, dataset=name, params=dict(res["params"], tau=row["tau"],
                                                                       seed=row["seed"]),
                             predict_s=row["predict_s"], accuracy=row["accuracy"],
                             extra={k: v for k, v in row.items() if k not in (
                                 "dataset", "tau", "seed", "accuracy", "predict_s")}, **base)
    # the study's finding: the default τ by its stated criterion, over every data set of the run
    choice = mod.choose_default(results)
    ctx.log(f"  chosen margin_tol: {choice['chosen']} (current default {choice['current_default']})")
    yield ctx.record(method="criterion: chosen margin_tol", dataset=",".join(p["datasets"]),
                     params={"tau": choice["chosen"]}, extra=choice)


register(Case(
    "svi_margin_tol", run_svi_margin_tol, kind="study", figure="acc_vs_param:tau",
    scales={"tiny": {"datasets": ["ijcnn1_tiny"], "taus": [0.1, 0.2], "seeds": [0]},
            "small": {"datasets": ["ijcnn1", "adult", "two_sines", "digits", "digits_x5"],
                      "taus": [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0], "seeds": [0, 1, 2]},
            "paper": {"datasets": ["ijcnn1", "adult", "two_sines", "digits", "digits_x5"],
                      "taus": [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0], "seeds": [0, 1, 2]}},
    description="study: SVI accuracy and margin SVs vs the margin band τ, with the exact-SVM oracle"))


# --------------------------------------------------------------------------- memory
register(_memory.CASE)   # bench/memory.py: peak RSS of every estimator × budget, against the bound


# --------------------------------------------------------------------------- whole scripts
# The benchmark scripts with several sections each (``bench/<name>.py --only ...``): run whole,
# they write their own ``bench/results/<name>.json``; the harness records that they ran.
SCRIPTS = {
    "llsvm": ("LLSVM sections: ijcnn1 vs k, noisy checkerboard, multi-class, out of core",
              ("small", "paper")),
    "cvm": ("CVM sections: (γ, C, tol) selection, checkerboard vs n, adult, noisy checkerboard",
            ("small", "paper")),
    "okfeb": ("OK-FEB sections: online learning, defaults, SVC comparison, throughput", ("small", "paper")),
    "dask": ("distributed LLSVM on Dask: strong scaling and overhead", ("small", "paper")),
}


def _script_runner(name: str):
    def run(ctx: Context) -> Iterator[Record]:
        res = run_script(HERE / f"{name}.py", ["--scale", ctx.scale, "--device",
                                              "gpu" if ctx.device.is_gpu else "cpu"])
        if res["status"] != "ok":
            raise RuntimeError(f"bench/{name}.py: {res['status']}\n{res['traceback'] or ''}")
        yield ctx.record(method=f"bench/{name}.py", dataset="(sections)",
                         extra={"status": res["status"], "seconds": res["seconds"],
                                "results_json": str(RESULTS / f"{name}.json")})
    run.__doc__ = f"``bench/{name}.py`` run whole at the case's scale."
    return run


for _name, (_desc, _scales) in SCRIPTS.items():
    register(Case(_name, _script_runner(_name), scales={s: {} for s in _scales}, description=_desc,
                  kind="script", figure=None))


# the train-and-tune case (bench/tune.py) registers itself
from . import tune  # noqa: E402,F401
