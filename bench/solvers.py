"""Engines on ijcnn1: KernelSVC vs scikit-learn SVC, LinearSVM vs LinearSVC, batched SMO.

Three tables (issue 3):

1. kernel SVM, RBF γ=2, C=32: fit / predict seconds, test accuracy, #SV and dual
   objective for scikit-learn ``SVC`` and ``KernelSVC`` with every solver
   available on the device (CPU: libsvm, smo, working_set; GPU: working_set
   in float32 and float64, and libsvm for reference);
2. linear SVM, squared hinge, C=1: ``LinearSVM`` (its auto solver on the
   device, and each of ``--linear-solvers`` on the CPU) vs ``LinearSVC``
   (LIBLINEAR, scikit-learn's defaults), with the primal objective of both;
3. batched training: 5 disjoint problems of 5,000 rows solved by one
   :func:`gpuksvm.solvers.smo.engines.solve_batched` call vs 5 sequential ``SVC`` fits.

    python bench/solvers.py --scale paper            # full ijcnn1 (49,990 / 91,701 rows)
    python bench/solvers.py --scale small --device cpu

Timings are medians over ``--repeats`` rounds in which the reference and
every candidate run in alternation (so that a drifting host load does not
bias their ratios; the linear table always takes at least 5 rounds).  GPU:
CUDA events after a warm-up; CPU: perf_counter.  Results go to
``bench/results/solvers.json`` (``solvers_small.json`` at ``--scale small``)
with the host's load average at start and end:
on a shared 2-core host other jobs slow every engine, multi-threaded BLAS
most of all.

    python bench/solvers.py --scale paper --device cpu --solvers libsvm   # ijcnn1 full, CPU
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import machine_info, print_table, time_call, write_json  # noqa: E402

from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.datasets import load_dataset, subsample  # noqa: E402
from gpuksvm.estimators.kernel_svc import KernelSVC  # noqa: E402
from gpuksvm.estimators.linear_svm import LinearSVM  # noqa: E402
from gpuksvm.kernels.kernel import Kernel  # noqa: E402
from gpuksvm.solvers.smo.engines import solve_batched  # noqa: E402
from gpuksvm.solvers.svc_dual import dual_objective  # noqa: E402

GAMMA, C_KERNEL, C_LINEAR = 2.0, 32.0, 1.0
SIZES = {"tiny": (300, 300), "small": (10_000, 20_000), "paper": (None, None)}   # tiny: gpu_suite's CI run
BATCH = {"tiny": (2, 150), "small": (5, 2_000), "paper": (5, 5_000)}


def _data(scale: str):
    n_tr, n_te = SIZES[scale]
    X, y = load_dataset("ijcnn1", "train")
    Xt, yt = load_dataset("ijcnn1", "test")
    rs = np.random.RandomState(0)
    X, y = subsample(X, y, n_tr, rs)
    Xt, yt = subsample(Xt, yt, n_te, rs)
    return X, y, Xt, yt


def _loadavg():
    """1/5/15-minute load averages: other jobs on the host slow every timing here."""
    try:
        import os

        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _interleaved(cases, repeats):
    """Time several (fit, predict, device) cases round-robin: A B A B … .

    On a shared host the load drifts during a run; timing the reference and
    the candidates in alternation (medians over ``repeats`` rounds) keeps that
    drift out of their ratios.  GPU cases get one untimed warm-up first.
    Returns, per case, (median fit s, median predict s, last model, last prediction).
    """
    for fit, predict, d in cases:
        if d.is_gpu:
            predict(fit())
    fit_t = [[] for _ in cases]
    pred_t = [[] for _ in cases]
    last = [None] * len(cases)
    for _ in range(repeats):
        for i, (fit, predict, d) in enumerate(cases):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rf = time_call(fit, device=d, repeats=1, warmup=0)
            model = rf["result"]
            rp = time_call(lambda: predict(model), device=d, repeats=1, warmup=0)
            fit_t[i].append(rf["median_s"])
            pred_t[i].append(rp["median_s"])
            last[i] = (model, rp["result"])
    return [(float(np.median(f)), float(np.median(p)), m, pr)
            for f, p, (m, pr) in zip(fit_t, pred_t, last)]


def kernel_rows(X, y, Xt, yt, dev, repeats, solvers):
    from sklearn.svm import SVC

    kern = Kernel("rbf", gamma=GAMMA)
    cpu = bk.resolve_device("cpu")
    cases = [(lambda: SVC(C=C_KERNEL, gamma=GAMMA).fit(X, y), lambda m: m.predict(Xt), cpu)]
    variants = []
    if dev.is_gpu:
        variants += [("working_set", dev, np.float32), ("working_set", dev, np.float64)]
    variants += [(s, cpu, np.float64) for s in solvers]
    for solver, d, dt in variants:
        Xd = bk.to_device(X, d, dt) if d.is_gpu else X
        Xtd = bk.to_device(Xt, d, dt) if d.is_gpu else Xt
        cases.append((lambda solver=solver, d=d, dt=dt, Xd=Xd: KernelSVC(
            C=C_KERNEL, gamma=GAMMA, solver=solver, device=str(d), dtype=dt).fit(Xd, y),
            lambda m, Xtd=Xtd: m.predict(Xtd), d))
    timed = _interleaved(cases, repeats)
    t_fit, t_pred, svc, pred = timed[0]
    obj = dual_objective(X, svc.support_, svc.dual_coef_, kern)
    rows = [{"model": "sklearn SVC", "device": "cpu", "solver": "libsvm", "fit_s": t_fit,
             "predict_s": t_pred, "accuracy": float(np.mean(pred == yt)),
             "n_sv": int(svc.support_.size), "objective": obj, "fit_speedup": 1.0,
             "predict_speedup": 1.0}]
    for (solver, d, dt), (f, p, est, pred) in zip(variants, timed[1:]):
        pred = np.asarray(bk.to_host(pred))
        rows.append({"model": "KernelSVC", "device": str(d), "solver": est.solver_,
                     "dtype": np.dtype(dt).name, "fit_s": f, "predict_s": p,
                     "accuracy": float(np.mean(pred == yt)), "n_sv": int(est.support_.size),
                     "objective": float(est.objective_[0]),
                     "rel_obj_gap": abs(float(est.objective_[0]) - obj) / abs(obj),
                     "fit_speedup": t_fit / f, "predict_speedup": t_pred / p})
    return rows


def linear_rows(X, y, Xt, yt, dev, repeats, solvers=("auto",)):
    from sklearn.svm import LinearSVC

    rows = []
    cpu = bk.resolve_device("cpu")

    def primal(w, b):
        m = np.maximum(0.0, 1.0 - y * (X @ w + b))
        return 0.5 * (w @ w + b * b) + C_LINEAR * np.sum(m * m)  # LIBLINEAR: b regularized

    cases = [(lambda: LinearSVC(C=C_LINEAR, loss="squared_hinge", tol=1e-4, max_iter=5000).fit(X, y),
              lambda m: m.predict(Xt), cpu)]
    variants = [("auto", dev)] if not dev.is_gpu else [("auto", dev), ("auto", cpu)]
    variants += [(s, cpu) for s in solvers if s != "auto"]
    for solver, d in variants:
        Xd = bk.to_device(X, d) if d.is_gpu else X
        Xtd = bk.to_device(Xt, d) if d.is_gpu else Xt
        cases.append((lambda solver=solver, d=d, Xd=Xd: LinearSVM(
            C=C_LINEAR, loss="squared_hinge", solver=solver, max_iter=5000, device=str(d),
            random_state=0).fit(Xd, y), lambda m, Xtd=Xtd: m.predict(Xtd), d))
    # the linear fits take well under a second: at least 5 rounds even at --repeats 1
    timed = _interleaved(cases, max(repeats, 5))
    t_fit, t_pred, ref, pred = timed[0]
    obj = primal(ref.coef_.ravel(), float(ref.intercept_[0]))
    rows.append({"model": "sklearn LinearSVC", "device": "cpu", "solver": "liblinear", "fit_s": t_fit,
                 "predict_s": t_pred, "accuracy": float(np.mean(pred == yt)), "objective": obj})
    for (solver, d), (f, p, est, pred) in zip(variants, timed[1:]):
        pred = np.asarray(bk.to_host(pred))
        o = float(np.asarray(est.objective_).ravel()[0])
        rows.append({"model": f"LinearSVM({solver})", "device": str(d), "solver": est.solver_,
                     "fit_s": f, "predict_s": p, "accuracy": float(np.mean(pred == yt)),
                     "objective": o, "rel_obj_gap": abs(o - obj) / abs(obj), "fit_vs_ref": f / t_fit})
    return rows


def batched_rows(X, y, dev, repeats, scale):
    from sklearn.svm import SVC

    n_prob, size = BATCH[scale]
    rs = np.random.RandomState(1)
    perm = rs.permutation(X.shape[0])
    subsets = [np.sort(perm[p * size:(p + 1) * size]) for p in range(n_prob)]
    kern = Kernel("rbf", gamma=GAMMA)
    cpu = bk.resolve_device("cpu")
    rows = []
    cases = [(lambda: [SVC(C=C_KERNEL, gamma=GAMMA).fit(X[S], y[S]) for S in subsets], lambda m: None, cpu)]
    runs = [("libsvm", cpu, None, np.float64)]
    if dev.is_gpu:
        runs = [("working_set", dev, None, np.float32), ("working_set", dev, None, np.float64)] + runs
    for method, d, n_jobs, dt in runs:
        Xd = bk.to_device(X, d, dt) if d.is_gpu else X
        cases.append((lambda method=method, d=d, n_jobs=n_jobs, dt=dt, Xd=Xd: solve_batched(
            Xd, y, subsets, kern, C_KERNEL, device=d, dtype=dt, method=method, n_jobs=n_jobs),
            lambda m: None, d))
    timed = _interleaved(cases, repeats)
    t_seq = timed[0][0]
    rows.append({"method": f"{n_prob} sequential sklearn SVC fits", "device": "cpu", "fit_s": t_seq,
                 "speedup": 1.0})
    for (method, d, n_jobs, dt), (t, _, res, _) in zip(runs, timed[1:]):
        rows.append({"method": f"solve_batched[{res[0].solver}]", "device": str(d),
                     "dtype": np.dtype(dt).name, "fit_s": t, "speedup": t_seq / t,
                     "n_sv": int(sum(r.support.size for r in res)),
                     "converged": all(r.converged for r in res)})
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", choices=("tiny", "small", "paper"), default="small")
    ap.add_argument("--device", default="auto", help="auto | cpu | gpu")
    ap.add_argument("--repeats", type=int, default=None, help="default: 3 small, 1 paper")
    ap.add_argument("--solvers", default="libsvm,smo,working_set",
                    help="comma-separated KernelSVC solvers to time on the CPU")
    ap.add_argument("--linear-solvers", default="auto,newton,liblinear",
                    help="comma-separated LinearSVM solvers to time on the CPU (auto always runs; "
                         "dcd is the slow NumPy twin of the GPU path)")
    ap.add_argument("--skip", default="", help="comma-separated tables to skip: kernel,linear,batched")
    args = ap.parse_args(argv)
    dev = bk.resolve_device("cuda" if args.device == "gpu" else args.device)
    repeats = args.repeats or (3 if args.scale == "small" else 1)
    skip = set(filter(None, args.skip.split(",")))
    t0 = time.perf_counter()
    X, y, Xt, yt = _data(args.scale)
    out = {"machine": machine_info(dev), "scale": args.scale, "repeats": repeats,
           "n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]),
           "params": {"gamma": GAMMA, "C_kernel": C_KERNEL, "C_linear": C_LINEAR},
           "loadavg_start": _loadavg()}
    if "kernel" not in skip:
        rows = kernel_rows(X, y, Xt, yt, dev, repeats, [s for s in args.solvers.split(",") if s])
        print(f"\nKernel SVM on ijcnn1 ({X.shape[0]} train / {Xt.shape[0]} test, RBF γ={GAMMA}, C={C_KERNEL})")
        print_table(rows, ["model", "device", "solver", "fit_s", "predict_s", "accuracy", "n_sv",
                           "objective", "rel_obj_gap", "fit_speedup", "predict_speedup"])
        out["kernel"] = rows
    if "linear" not in skip:
        lin_solvers = [s for s in args.linear_solvers.split(",") if s]
        rows = linear_rows(X, y, Xt, yt, dev, repeats, lin_solvers)
        print(f"\nLinear SVM on ijcnn1 (squared hinge, C={C_LINEAR})")
        print_table(rows, ["model", "device", "solver", "fit_s", "predict_s", "accuracy", "objective",
                           "rel_obj_gap", "fit_vs_ref"])
        out["linear"] = rows
    if "batched" not in skip:
        rows = batched_rows(X, y, dev, repeats, args.scale)
        n_prob, size = BATCH[args.scale]
        print(f"\nBatched training: {n_prob} problems of {size} rows")
        print_table(rows, ["method", "device", "dtype", "fit_s", "speedup", "n_sv", "converged"])
        out["batched"] = rows
    out["total_s"] = time.perf_counter() - t0
    out["loadavg_end"] = _loadavg()
    print(f"\nload average (1, 5, 15 min) at start {out['loadavg_start']}, at end {out['loadavg_end']} "
          f"on {out['machine'].get('cpu_count')} cores")
    path = write_json("solvers" if args.scale == "paper" else f"solvers_{args.scale}", out)
    print(f"\nwrote {path}")
    return out


if __name__ == "__main__":
    main()
