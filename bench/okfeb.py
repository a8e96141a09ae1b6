"""OK-FEB benchmarks (issue 7; paper Figs. 1, 5, 9 and the throughput target; Fig. 6 is the
``okfeb_approx`` case).

Sections (``--only`` picks a subset, comma separated):

``online``
    Online classification on adult and ijcnn1 and online regression on abalone:
    test accuracy / RMSE against the number of training rows streamed, and run
    time.  OK-FEB (r=50, B=150, default censoring) + Pegasos / regularized LMS
    against the budgeted baseline random Fourier features (D = B = 150) + the
    same online learner, and an offline reference (scikit-learn SVC /
    KernelRidge on the first ``--offline-rows`` training rows).  The training
    streams are the train files in a fixed random order (small scale: the first
    20,000 rows, test on the first 5,000 test rows); abalone has no test file
    and is split 75/25 at random (seed 0) and scaled to [0, 1].
    Beside them, scikit-learn's ``SGDClassifier`` / ``SGDRegressor`` (``partial_fit``,
    the same chunks) on ``RBFSampler`` (D = 150 random features) and on
    ``Nystroem`` features (150 landmarks drawn from the first chunk): the same
    budget of 150 stored vectors / features.
``defaults``
    The estimators' defaults (``fit``, rank 50, budget 150, γ = 1/d) on every
    shared data set — ijcnn1 and adult (classification), abalone (regression)
    — and scikit-learn's digits, standardized, with the rows as given and
    sorted by label: OKFEBClassifier against the majority class, scikit-learn's
    LinearSVC and gpuksvm's LinearSVM, and ``SGDClassifier`` on RBFSampler /
    Nystroem features with the same budget (OKFEBRegressor against the mean,
    Ridge and ``SGDRegressor``); the same-pass learner (``solver="online"``)
    for reference.  Each OK-FEB row says whether it beat the majority class /
    mean and the linear model, and whether it warned (BudgetTooSmallWarning).
``svc``
    On adult and ijcnn1 (standardized, the whole train files, tested on the
    test files): scikit-learn's ``SVC`` with γ and C chosen by 3-fold
    cross-validation (``GridSearchCV`` over γ ∈ {0.3, 1, 3}/d × C ∈ {1, 10}
    on ``--cv-rows`` stratified training rows), refitted on all training
    rows; in the same run, with that γ: OKFEBClassifier (defaults otherwise:
    rank 50, budget 150), ``SGDClassifier`` on ``RBFSampler`` (random Fourier
    features, D = 150) and on ``Nystroem`` (150 landmarks), and the majority
    class and LinearSVM.  Each OK-FEB row says whether it beat the majority
    class and whether it warned (BudgetTooSmallWarning).
``throughput``
    Samples/s of ``partial_fit`` (r=50, B=150, d=22 ijcnn1 rows): per-sample
    updates at three censoring targets, the mini-batch variant and float32
    (wall and CPU time), ``transform`` rows/s, and the peak traced host memory
    per 10,000-row block over a long stream (100,000 rows small / 1,000,000
    paper).  ``--against REF`` also times ``gpuksvm/estimators/okfeb.py`` of the git
    revision REF in the same process, alternating run by run with the current
    code (the shared box's load changes by the minute: only ratios measured
    this way compare two versions).

    python bench/okfeb.py [--scale small|paper] [--device auto|cpu|gpu] [--only online,defaults]
                          [--against REF] [--cv-rows N]

CPU timings on the shared 2-core development box are taken under contention
(other jobs run beside them); the JSON records the machine and device.
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _timing import machine_info, print_table, time_call, write_json  # noqa: E402

from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.datasets import load_dataset  # noqa: E402
from gpuksvm.estimators.linear_svm import LinearSVM  # noqa: E402
from gpuksvm.estimators.okfeb import (
    OKFEB,
    BudgetTooSmallWarning,
    OKFEBClassifier,
    OKFEBRegressor,
)
from gpuksvm.solvers.linear.online import Pegasos, RandomFourierFeatures, RegularizedLMS  # noqa: E402

SECTIONS = ("online", "defaults", "svc", "throughput")
BUDGET = 150    # stored vectors of OK-FEB = random features / landmarks of the scikit-learn baselines


# --------------------------------------------------------------------------- online learning
ONLINE = {
    # name: (task, online γ, Pegasos λ / LMS step, offline γ, offline C / KRR alpha)
    # ijcnn1: γ = 2 (the offline optimum) leaves r = 50 features with a 0.4 LS error that
    # carry no class information (a linear SVM on them predicts the majority class);
    # γ = 0.5 gives an LS error of 0.1 and usable features, so the online learners use it.
    "adult": ("classification", 0.05, 1e-4, 0.05, 1.0),
    "ijcnn1": ("classification", 0.5, 1e-5, 2.0, 32.0),
    "abalone": ("regression", 0.5, 0.1, 0.5, 1e-2),
}


def _scale01(X: np.ndarray, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (X - lo) / span, (Xt - lo) / span


def bench_online(dev: bk.Device, scale: str, offline_rows: int) -> list[dict]:
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import SGDClassifier, SGDRegressor
    from sklearn.svm import SVC

    rows = []
    for name, (task, gamma, lr, off_gamma, off) in ONLINE.items():
        X, y = load_dataset(name, "train")
        rs = np.random.RandomState(0)
        if name == "abalone":                     # no test file: a fixed 75/25 split
            p = rs.permutation(X.shape[0])
            cut = int(0.75 * X.shape[0])
            X, y, Xt, yt = X[p[:cut]], y[p[:cut]], X[p[cut:]], y[p[cut:]]
            X, Xt = _scale01(X, Xt)
        else:
            Xt, yt = load_dataset(name, "test")
            p = rs.permutation(X.shape[0])        # the stream in a fixed random order
            X, y = X[p], y[p]
        if scale == "small":
            X, y = X[:20000], y[:20000]
            Xt, yt = Xt[:5000], yt[:5000]
        n = X.shape[0]
        chunk = max(n // 8, 200)
        Xd, Xtd = bk.to_device(X, dev), bk.to_device(Xt, dev)
        if task == "classification":
            ok = OKFEBClassifier(gamma=gamma, rank=50, n_landmarks=150, alpha=lr, device=str(dev), random_state=0)
            rff = RandomFourierFeatures(X.shape[1], 150, gamma=gamma, random_state=0)
            lin = Pegasos(150, 1, lam=lr)
            score = lambda pred: float(np.mean(pred == yt))  # noqa: E731
        else:
            ok = OKFEBRegressor(gamma=gamma, rank=50, n_landmarks=150, learning_rate=lr, device=str(dev),
                                random_state=0)
            rff = RandomFourierFeatures(X.shape[1], 150, gamma=gamma, random_state=0)
            lin = RegularizedLMS(150, step=lr, alpha=1e-4)
            score = lambda pred: float(np.sqrt(np.mean((pred - yt) ** 2)))  # noqa: E731
        # scikit-learn: SGD on RBFSampler / Nystroem features of the same budget, the same chunks
        sk_maps = {"sgd_rff": RBFSampler(gamma=gamma, n_components=BUDGET, random_state=0).fit(X[:1]),
                   "sgd_nystroem": Nystroem(gamma=gamma, n_components=BUDGET, random_state=0).fit(X[:chunk])}
        sk_models = {k: (SGDClassifier(alpha=lr, random_state=0) if task == "classification"
                         else SGDRegressor(random_state=0)) for k in sk_maps}
        sk_time = dict.fromkeys(sk_maps, 0.0)
        t_ok = t_rff = 0.0
        for s in range(0, n, chunk):
            e = min(s + chunk, n)
            t0 = time.perf_counter()
            if task == "classification":
                ok.partial_fit(Xd[s:e], y[s:e], classes=np.array([-1.0, 1.0]))
            else:
                ok.partial_fit(Xd[s:e], y[s:e])
            t_ok += time.perf_counter() - t0
            t0 = time.perf_counter()
            F = rff.transform(X[s:e])
            if task == "classification":
                lin.partial_fit(F, np.where(y[s:e] > 0, 1.0, -1.0)[:, None])
            else:
                lin.partial_fit(F, y[s:e])
            t_rff += time.perf_counter() - t0
            p_ok = bk.to_host(ok.predict(Xtd))
            Ft = rff.transform(Xt)
            p_rff = (np.where(lin.decision_function(Ft)[:, 0] > 0, 1.0, -1.0) if task == "classification"
                     else lin.predict(Ft))
            row = {"dataset": name, "task": task, "seen": e, "okfeb": score(p_ok), "okfeb_s": t_ok,
                   "rff_sgd": score(p_rff), "rff_sgd_s": t_rff,
                   "okfeb_censor_rate": ok.extractor_.censor_rate_}
            for k, mp in sk_maps.items():
                t0 = time.perf_counter()
                if task == "classification":
                    sk_models[k].partial_fit(mp.transform(X[s:e]), y[s:e], classes=np.array([-1.0, 1.0]))
                else:
                    sk_models[k].partial_fit(mp.transform(X[s:e]), y[s:e])
                sk_time[k] += time.perf_counter() - t0
                row[k] = score(sk_models[k].predict(mp.transform(Xt)))
                row[k + "_s"] = sk_time[k]
            rows.append(row)
            print(f"  {name} seen={e}: OK-FEB {row['okfeb']:.4f} ({t_ok:.1f}s, censored "
                  f"{row['okfeb_censor_rate']:.2f})  RFF+online {row['rff_sgd']:.4f} ({t_rff:.1f}s)  "
                  f"sklearn SGD on RBFSampler {row['sgd_rff']:.4f} ({sk_time['sgd_rff']:.1f}s), on Nystroem "
                  f"{row['sgd_nystroem']:.4f} ({sk_time['sgd_nystroem']:.1f}s)", flush=True)
        m = min(n, offline_rows)
        t0 = time.perf_counter()
        if task == "classification":
            ref = SVC(C=off, gamma=off_gamma).fit(X[:m], y[:m])
        else:
            ref = KernelRidge(alpha=off, kernel="rbf", gamma=off_gamma).fit(X[:m], y[:m])
        t_ref = time.perf_counter() - t0
        rows.append({"dataset": name, "task": task, "seen": m, "offline": score(ref.predict(Xt)),
                     "offline_s": t_ref, "offline_method": type(ref).__name__})
        print(f"  {name}: offline {type(ref).__name__} on {m} rows {rows[-1]['offline']:.4f} ({t_ref:.1f}s)",
              flush=True)
    print_table(rows, ["dataset", "seen", "okfeb", "okfeb_s", "rff_sgd", "rff_sgd_s", "sgd_rff", "sgd_rff_s",
                       "sgd_nystroem", "sgd_nystroem_s", "offline", "offline_s"])
    return rows


# --------------------------------------------------------------------------- defaults
def _defaults_data(name: str) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(task, X, y, Xt, yt) standardized on the training rows; abalone 75/25 and digits 70/30
    (stratified) split at random with seed 0 (no test files)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if name == "digits":
        X, y = load_digits(return_X_y=True)
        X, Xt, y, yt = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
        task = "classification"
    elif name == "abalone":
        X, y = load_dataset(name, "train")
        X, Xt, y, yt = train_test_split(X, y, test_size=0.25, random_state=0)
        task = "regression"
    else:
        X, y = load_dataset(name, "train")
        Xt, yt = load_dataset(name, "test")
        task = "classification"
    sc = StandardScaler().fit(X)
    return task, sc.transform(X), y, sc.transform(Xt), yt


def _timed(fn) -> tuple[Any, float, list]:
    """fn(), its wall seconds, and the BudgetTooSmallWarnings it issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BudgetTooSmallWarning)
        t0 = time.perf_counter()
        out = fn()
        secs = time.perf_counter() - t0
    return out, secs, [w for w in caught if issubclass(w.category, BudgetTooSmallWarning)]


def bench_defaults(dev: bk.Device, scale: str, against: str | None = None) -> list[dict]:
    """The defaults on every shared data set and digits, rows as given and sorted by label.

    Score: test accuracy (classification) or RMSE (regression; lower is
    better).  γ = 1/d for the scikit-learn feature maps too (OK-FEB's
    "scale" on standardized data).  An OK-FEB row passes (``ok``) when it
    beats both the constant (majority class / training mean) and the linear
    model (scikit-learn's LinearSVC / Ridge), or when it warned that its
    budget is too small for the data.  With ``against`` (a git revision) the
    defaults of that revision's estimators run too (``@REF`` rows).
    """
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import Ridge, SGDClassifier, SGDRegressor
    from sklearn.svm import LinearSVC

    ref = _okfeb_at(against) if against else None
    rows = []
    for name in ("ijcnn1", "adult", "abalone", "digits"):
        task, X, y, Xt, yt = _defaults_data(name)
        clf = task == "classification"
        if clf:
            score = lambda pred: float(np.mean(pred == yt))  # noqa: E731
            better = lambda a, b: a > b  # noqa: E731
            labels, counts = np.unique(y, return_counts=True)
            const = score(np.full(yt.shape, labels[np.argmax(counts)]))
        else:
            score = lambda pred: float(np.sqrt(np.mean((pred - yt) ** 2)))  # noqa: E731
            better = lambda a, b: a < b  # noqa: E731
            const = score(np.full(yt.shape, float(np.mean(y))))
        base = {"dataset": name, "task": task, "n_train": int(X.shape[0]), "n_features": int(X.shape[1]),
                "metric": "accuracy" if clf else "rmse"}
        rows.append({**base, "order": "-", "method": "majority" if clf else "mean", "score": const, "seconds": 0.0})
        lin_model, t_lin, _ = _timed(lambda: (LinearSVC(random_state=0) if clf else Ridge(alpha=1.0)).fit(X, y))
        lin = score(lin_model.predict(Xt))
        rows.append({**base, "order": "-", "method": "sklearn LinearSVC" if clf else "sklearn Ridge",
                     "score": lin, "seconds": t_lin})
        if clf:
            m, secs, _ = _timed(lambda: LinearSVM(device=str(dev)).fit(X, y))
            rows.append({**base, "order": "-", "method": "gpuksvm LinearSVM",
                         "score": score(bk.to_host(m.predict(Xt))), "seconds": secs})
        g = 1.0 / X.shape[1]
        for label, make_map in (("RBFSampler", lambda: RBFSampler(gamma=g, n_components=BUDGET, random_state=0)),
                                ("Nystroem", lambda: Nystroem(gamma=g, n_components=BUDGET, random_state=0))):
            def sk_fit(make_map=make_map):
                mp = make_map().fit(X)
                sgd = (SGDClassifier(random_state=0) if clf else SGDRegressor(random_state=0)).fit(mp.transform(X), y)
                return mp, sgd
            (mp, sgd), secs, _ = _timed(sk_fit)
            rows.append({**base, "order": "-", "method": f"sklearn SGD on {label}({BUDGET})",
                         "score": score(sgd.predict(mp.transform(Xt))), "seconds": secs})
        Est = OKFEBClassifier if clf else OKFEBRegressor
        for order_name in ("given", "label_sorted"):
            p = np.arange(len(y)) if order_name == "given" else np.argsort(y, kind="stable")
            variants = [("", lambda: Est(device=str(dev), random_state=0)),
                        (" (solver='online')", lambda: Est(solver="online", device=str(dev), random_state=0))]
            if ref is not None:
                RefEst = ref.OKFEBClassifier if clf else ref.OKFEBRegressor
                variants.append((f" @{against}", lambda: RefEst(device=str(dev), random_state=0)))
            for suffix, make in variants:
                model, secs, warned = _timed(lambda: make().fit(X[p], y[p]))
                sc = score(bk.to_host(model.predict(Xt)))
                row = {**base, "order": order_name, "method": f"OKFEB{'Classifier' if clf else 'Regressor'}"
                       + suffix, "score": sc, "seconds": secs,
                       "beats_constant": better(sc, const), "beats_linear": better(sc, lin),
                       "warned": bool(warned), "budget_too_small_": bool(getattr(model, "budget_too_small_", False)),
                       "capacity_check_": getattr(model, "capacity_check_", None)}
                row["ok"] = bool((row["beats_constant"] and row["beats_linear"]) or row["warned"])
                rows.append(row)
        for r in rows:
            if r["dataset"] == name:
                extra = (f"  beats constant {r['beats_constant']}, linear {r['beats_linear']}, warned "
                         f"{r['warned']} -> ok {r['ok']}" if "ok" in r else "")
                print(f"  {name} [{r['order']}] {r['method']}: {r['metric']} {r['score']:.4f} "
                      f"({r['seconds']:.2f}s){extra}", flush=True)
    print_table(rows, ["dataset", "order", "method", "metric", "score", "seconds", "beats_constant",
                       "beats_linear", "warned", "ok"])
    return rows


# --------------------------------------------------------------------------- svc
def bench_svc(dev: bk.Device, cv_rows: int) -> list[dict]:
    """SVC with cross-validated γ, C against OK-FEB and RFF/Nystroem + SGD at that γ (adult, ijcnn1)."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import SGDClassifier
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
    from sklearn.svm import SVC

    rows = []
    for name in ("adult", "ijcnn1"):
        _, X, y, Xt, yt = _defaults_data(name)
        d = X.shape[1]
        base = {"dataset": name, "n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]), "n_features": int(d)}
        labels, counts = np.unique(y, return_counts=True)
        majority = float(np.mean(yt == labels[np.argmax(counts)]))
        rows.append({**base, "method": "majority", "accuracy": majority, "fit_s": 0.0, "predict_s": 0.0})
        Xcv, _, ycv, _ = train_test_split(X, y, train_size=min(cv_rows, len(y) - 2), stratify=y, random_state=0)
        grid = {"gamma": [f / d for f in (0.3, 1.0, 3.0)], "C": [1.0, 10.0]}
        search, cv_s, _ = _timed(lambda: GridSearchCV(SVC(kernel="rbf"), grid, n_jobs=1,
                                                      cv=StratifiedKFold(3, shuffle=True, random_state=0)
                                                      ).fit(Xcv, ycv))
        gamma, C = float(search.best_params_["gamma"]), float(search.best_params_["C"])
        print(f"  {name}: SVC 3-fold CV on {len(ycv)} rows ({cv_s:.1f}s): gamma={gamma:.4g} "
              f"(= {gamma * d:.2g}/d), C={C:g}, CV accuracy {search.best_score_:.4f}", flush=True)
        cv = {"gamma": gamma, "C": C, "cv_rows": int(len(ycv)), "cv_seconds": cv_s}

        def sk_map(make_map):
            def fit():
                mp = make_map().fit(X)
                return mp, SGDClassifier(random_state=0).fit(mp.transform(X), y)
            return fit

        methods = [
            ("SVC (CV gamma, C)", lambda: SVC(kernel="rbf", gamma=gamma, C=C).fit(X, y), None),
            ("gpuksvm LinearSVM", lambda: LinearSVM(device=str(dev)).fit(X, y), None),
            (f"OKFEBClassifier (CV gamma, rank 50, budget {BUDGET})",
             lambda: OKFEBClassifier(gamma=gamma, device=str(dev), random_state=0).fit(X, y), None),
            ("OKFEBClassifier (defaults, gamma=1/d)",
             lambda: OKFEBClassifier(device=str(dev), random_state=0).fit(X, y), None),
            (f"sklearn SGD on RBFSampler({BUDGET}, CV gamma)",
             sk_map(lambda: RBFSampler(gamma=gamma, n_components=BUDGET, random_state=0)), "map"),
            (f"sklearn SGD on Nystroem({BUDGET}, CV gamma)",
             sk_map(lambda: Nystroem(gamma=gamma, n_components=BUDGET, random_state=0)), "map"),
        ]
        for label, fit, kind in methods:
            model, fit_s, warned = _timed(fit)
            t0 = time.perf_counter()
            pred = model[1].predict(model[0].transform(Xt)) if kind == "map" else model.predict(Xt)
            pred_s = time.perf_counter() - t0
            acc = float(np.mean(bk.to_host(pred) == yt))
            row = {**base, "method": label, "accuracy": acc, "fit_s": fit_s, "predict_s": pred_s,
                   "beats_majority": acc > majority, **cv}
            if label.startswith("OKFEB"):
                row.update(warned=bool(warned), budget_too_small_=bool(model.budget_too_small_),
                           capacity_check_=model.capacity_check_)
            if label.startswith("SVC"):
                row["n_support"] = int(model.support_.shape[0])
            rows.append(row)
            print(f"  {name} {label}: accuracy {acc:.4f} (fit {fit_s:.1f}s, predict {pred_s:.1f}s)"
                  + (f", warned {row['warned']}" if "warned" in row else ""), flush=True)
    svc_fit = {r["dataset"]: r["fit_s"] for r in rows if r["method"].startswith("SVC")}
    for r in rows:
        r["fit_vs_svc"] = r["fit_s"] / svc_fit[r["dataset"]] if r["fit_s"] else 0.0
    print_table(rows, ["dataset", "method", "accuracy", "fit_s", "predict_s", "fit_vs_svc", "beats_majority",
                       "warned"])
    return rows


# --------------------------------------------------------------------------- throughput
def _cpu_and_wall(fn, repeats: int) -> tuple[float, float, Any]:
    """Median wall and process-CPU seconds of ``fn()`` over ``repeats`` runs (no warm-up needed:
    each run builds a fresh model)."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return float(np.median(walls)), float(np.median(cpus)), out


def _okfeb_at(ref: str) -> Any:
    """``gpuksvm/estimators/okfeb.py`` of git revision ``ref``, imported beside the current one (its relative
    imports resolve against the current package: only OK-FEB's own code differs)."""
    root = Path(__file__).resolve().parent.parent
    src = subprocess.run(["git", "show", f"{ref}:gpuksvm/estimators/okfeb.py"], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="okfeb_ref_")) / "okfeb_ref.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("gpuksvm._okfeb_ref", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def bench_throughput(dev: bk.Device, scale: str, against: str | None = None) -> list[dict]:
    """partial_fit samples/s at r = 50, B = 150 on ijcnn1 rows (d = 22).

    Per-sample updates (batch_size = 1, the paper's rule) at three censoring
    targets, plus the mini-batch variant (b = 8) and float32; wall time and,
    on the CPU, process CPU time (the box is shared: CPU time is what the code
    costs, wall time what it got).  Then ``transform`` rows/s and the peak
    traced host memory per 10,000-row block over a long stream.  With
    ``against`` (a git revision) every configuration is also run with that
    revision's OKFEB, alternating run by run (``code`` column; ``ratio`` =
    current / reference samples per CPU second, per wall second on a GPU).
    """
    X, _ = load_dataset("ijcnn1", "train")
    n = 20000 if scale == "small" else 49990
    Xd = bk.to_device(np.ascontiguousarray(X[:n]), dev)
    repeats = 3 if against is None else 5
    configs = [dict(target_censor_rate=rho) for rho in (0.8, 0.9, 0.95)]
    configs += [dict(target_censor_rate=0.8, batch_size=8), dict(target_censor_rate=0.9, batch_size=8),
                dict(target_censor_rate=0.8, dtype=np.float32)]
    impls = {"current": OKFEB}
    if against:
        impls[against] = _okfeb_at(against).OKFEB
    rows = []
    fe_default = None
    for cfg in configs:
        walls: dict = {k: [] for k in impls}
        cpus: dict = {k: [] for k in impls}
        last: dict = {}
        for rep in range(repeats):
            # alternating, and in turn first (the first of a pair measured faster on this box)
            for label, cls in (list(impls.items()) if rep % 2 == 0 else list(impls.items())[::-1]):
                def run(cls=cls, cfg=cfg):
                    return cls(gamma=2.0, rank=50, n_landmarks=150, device=str(dev), random_state=0, **cfg).partial_fit(Xd)

                if dev.is_gpu:
                    r = time_call(run, device=dev, repeats=1, warmup=1)
                    walls[label].append(r["median_s"])
                    cpus[label].append(float("nan"))
                    last[label] = r["result"]
                else:
                    w, c, last[label] = _cpu_and_wall(run, 1)
                    walls[label].append(w)
                    cpus[label].append(c)
        for label in impls:
            fe = last[label]
            wall, cpu = float(np.median(walls[label])), float(np.median(cpus[label]))
            row = {"what": "partial_fit", "code": label, "batch_size": cfg.get("batch_size", 1),
                   "dtype": np.dtype(bk.resolve_dtype(cfg.get("dtype"), dev)).name,
                   "censor_target": cfg["target_censor_rate"],
                   "censor_rate": fe.censor_rate_, "updates": fe.n_updates_, "rows": n, "seconds": wall,
                   "cpu_seconds": cpu, "samples_per_s": n / wall, "samples_per_cpu_s": n / cpu,
                   "ls_error": fe.ls_error_}
            rows.append(row)
            print(f"  [{label}] partial_fit b={row['batch_size']} {row['dtype']} ρ={row['censor_target']}: "
                  f"{row['samples_per_s']:.0f} samples/s wall, {row['samples_per_cpu_s']:.0f} per CPU-s "
                  f"(censored {fe.censor_rate_:.3f}, {fe.n_updates_} updates, LS error {fe.ls_error_:.4f})",
                  flush=True)
        if against:
            cur, ref = rows[-2], rows[-1]
            key = "samples_per_s" if dev.is_gpu else "samples_per_cpu_s"
            cur["ratio"] = cur[key] / ref[key]
            print(f"  current / {against}: {cur['ratio']:.3f} ({key})", flush=True)
        if cfg is configs[0]:      # the default settings: timed below for transform
            fe_default = last["current"]
    fe = fe_default
    Xt, _ = load_dataset("ijcnn1", "test")
    Xtd = bk.to_device(Xt, dev)
    r = time_call(lambda: fe.transform(Xtd), device=dev, repeats=3, warmup=1)
    rows.append({"what": "transform", "rows": Xt.shape[0], "seconds": r["median_s"],
                 "samples_per_s": Xt.shape[0] / r["median_s"]})
    print(f"  transform: {Xt.shape[0] / r['median_s']:.0f} rows/s", flush=True)
    # memory over a long stream: peak traced memory per block must stay flat
    total = 100_000 if scale == "small" else 1_000_000
    block = 10_000
    rng = np.random.default_rng(0)
    fe = OKFEB(gamma=2.0, rank=50, n_landmarks=150, target_censor_rate=0.95, device=str(dev), random_state=0)
    base = X[:block]
    peaks = []
    t0 = time.perf_counter()
    tracemalloc.start()
    for i in range(total // block):
        Xb = bk.to_device(base[rng.permutation(block)], dev)
        tracemalloc.reset_peak()
        fe.partial_fit(Xb)
        peaks.append(tracemalloc.get_traced_memory()[1])
        del Xb
    tracemalloc.stop()
    el = time.perf_counter() - t0
    rows.append({"what": "long_stream", "rows": total, "seconds": el, "samples_per_s": total / el,
                 "peak_first_block_MB": peaks[0] / 2**20, "peak_last_block_MB": peaks[-1] / 2**20,
                 "peak_max_MB": max(peaks) / 2**20, "n_stored": fe.n_stored_})
    print(f"  {total} rows in {el:.1f}s (traced); peak traced memory per block first {peaks[0] / 2**20:.2f} MB, "
          f"last {peaks[-1] / 2**20:.2f} MB, max {max(peaks) / 2**20:.2f} MB", flush=True)
    print_table(rows, ["what", "code", "batch_size", "dtype", "censor_target", "censor_rate", "rows", "seconds",
                       "samples_per_s", "samples_per_cpu_s", "ratio"])
    return rows


def main(argv: Any = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=("small", "paper"), default="small")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--offline-rows", type=int, default=10000)
    ap.add_argument("--cv-rows", type=int, default=4000,
                    help="svc: training rows of SVC's cross-validation of gamma and C")
    ap.add_argument("--against", default=None, metavar="REF",
                    help="throughput: also time gpuksvm/estimators/okfeb.py of git revision REF, alternating; "
                         "defaults: also run that revision's estimators")
    args = ap.parse_args(argv)
    dev = bk.resolve_device(args.device)
    only = [s for s in args.only.split(",") if s]
    for s in only:
        if s not in SECTIONS:
            ap.error(f"unknown section {s!r}; choose from {SECTIONS}")
    out: dict = {"machine": machine_info(dev), "scale": args.scale, "device": str(dev),
                 "note": "CPU timings on a shared, contended 2-core box" if not dev.is_gpu else ""}
    if "online" in only:
        print("== online classification / regression ==", flush=True)
        out["online"] = bench_online(dev, args.scale, args.offline_rows)
    if "defaults" in only:
        print("== defaults on the shared data sets and digits (rank 50, budget 150) ==", flush=True)
        out["defaults"] = bench_defaults(dev, args.scale, args.against)
        if args.against:
            out["defaults_against"] = args.against
    if "svc" in only:
        print("== SVC with cross-validated gamma, C vs OK-FEB and RFF/Nystroem + SGD at that gamma ==", flush=True)
        out["svc"] = bench_svc(dev, args.cv_rows)
    if "throughput" in only:
        print("== throughput (r=50, B=150, d=22) ==", flush=True)
        out["throughput"] = bench_throughput(dev, args.scale, args.against)
        if args.against:
            out["throughput_against"] = args.against
    path = write_json("okfeb", out, sections=SECTIONS)
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
