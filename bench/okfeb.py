"""OK-FEB benchmarks (issue 7; paper Figs. 1, 5, 6, 9 and the throughput target).

Sections (``--only`` picks a subset, comma separated):

``approx``
    Kernel-approximation error (mean over windows of 500 rows of
    ‖K − ZZᵀ‖_F/‖K‖_F, paper §VII) against the number k of stored vectors, on
    the two-spheres stream and on the sphere→spheroid tracking stream, OK-FEB
    (β = 1 and 0.5) against Nyström with random (mean of 5 draws) and k-means
    landmarks (see :func:`bench_approx` for the protocol).
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
``throughput``
    Samples/s of ``partial_fit`` (r=50, B=150, d=22 ijcnn1 rows): per-sample
    updates at three censoring targets, the mini-batch variant and float32
    (wall and CPU time), ``transform`` rows/s, and the peak traced host memory
    per 10,000-row block over a long stream (100,000 rows small / 1,000,000
    paper).

    python bench/okfeb.py [--scale small|paper] [--device auto|cpu|gpu] [--only approx,online]

CPU timings on the shared 2-core development box are taken under contention
(other jobs run beside them); the JSON records the machine and device.
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _timing import machine_info, print_table, time_call, write_json  # noqa: E402

from gpuksvm import backend as bk  # noqa: E402
from gpuksvm.cluster import kmeans  # noqa: E402
from gpuksvm.datasets import load_dataset, make_two_spheres, sphere_to_spheroid_stream  # noqa: E402
from gpuksvm.kernels import Kernel, kernel_block  # noqa: E402
from gpuksvm.okfeb import OKFEB, OKFEBClassifier, OKFEBRegressor, windowed_kernel_error  # noqa: E402
from gpuksvm.solvers.online import Pegasos, RandomFourierFeatures, RegularizedLMS  # noqa: E402

SECTIONS = ("approx", "online", "throughput")
WINDOW = 500


N_DRAWS = 5     # random-landmark draws averaged for the Nyström baseline


def _nystrom_features(X: np.ndarray, Z: np.ndarray, kernel: Kernel, rank: int | None = None) -> np.ndarray:
    """Nyström map K(X,Z)·U_r Λ_r^{-1/2} (full rank k, or the best rank-r part of K_ZZ)."""
    Kzz = kernel_block(Z, None, kernel)
    w, U = np.linalg.eigh(Kzz)
    keep = w > 1e-10 * w.max()
    w, U = w[keep], U[:, keep]
    if rank is not None and rank < len(w):
        w, U = w[-rank:], U[:, -rank:]
    return kernel_block(X, Z, kernel) @ (U / np.sqrt(w))


def bench_approx(dev: bk.Device, scale: str) -> list[dict]:
    """Paper Fig. 6: mean over windows of ‖K − ZZᵀ‖_F/‖K‖_F against k stored vectors.

    OK-FEB (budget B = k, rank r = k/2 and r = k) runs over the stream in
    windows of 500 rows; each window is scored with the model *after* it has
    processed that window (what a tracker offers for the data it just saw —
    the paper's moving-window mismatch).  Both budget-maintenance rules are
    run on both streams: β = 1 (drop the stored row of smallest norm, the
    paper's stationary choice) and β = 0.5 (favour recent rows, its tracking
    choice); ``_final`` scores the final β = 1 model over the whole stream.
    Nyström uses k landmarks of the *whole* stream (an offline advantage):
    random rows (mean over ``N_DRAWS`` draws) or k-means centres, with its
    full rank-k map and with the best rank-k/2 part (the same rank as OK-FEB
    r = k/2, the paper's comparison).  OK-FEB settings: no censoring (every
    row may enter S), λ = 1e-6, μ = 1 (constant).

    Each row carries ``okfeb_le_nystrom_random``: whether OK-FEB at r = k (the
    better β) is at most random Nyström's error with the same k stored rows.
    """
    n = 6000 if scale == "small" else 20000
    streams = {
        "two_spheres": (make_two_spheres(n, noise=0.05, random_state=0)[0], 1.0),
        "tracking": (sphere_to_spheroid_stream(n, change_at=n // 2, noise=0.01, random_state=0), 0.5),
    }
    ks = [10, 20, 40, 80] if scale == "small" else [10, 20, 40, 80, 160]
    rows = []
    for name, (X, gamma) in streams.items():
        kern = Kernel("rbf", gamma)
        for k in ks:
            row = {"stream": name, "k": k}
            for r in sorted({max(k // 2, 2), k}):
                tag = "k" if r == k else "k/2"
                for beta in (1.0, 0.5):
                    fe = OKFEB(gamma=gamma, rank=r, budget=k, censor=0.0, forget=beta, step_size=1.0,
                               reg=1e-6, output="kernel", device=str(dev), random_state=0)
                    errs = []
                    for s in range(0, n, WINDOW):
                        Xw = bk.to_device(X[s:s + WINDOW], dev)
                        fe.partial_fit(Xw)
                        errs.append(windowed_kernel_error(X[s:s + WINDOW], bk.to_host(fe.transform(Xw)), kern,
                                                          WINDOW))
                    col = f"okfeb_r{tag}" + ("" if beta == 1.0 else "_beta0.5")
                    row[col] = float(np.mean(errs))
                    if beta == 1.0:
                        row[f"okfeb_r{tag}_final"] = fe.kernel_approximation_error(bk.to_device(X, dev), WINDOW)
            draws = [X[np.random.RandomState(seed).choice(n, k, replace=False)] for seed in range(N_DRAWS)]
            Zk = bk.to_host(kmeans(X, k, n_iter=10, random_state=0, device="cpu").centers)
            row["nystrom_random"] = float(np.mean([windowed_kernel_error(X, _nystrom_features(X, Z, kern), kern,
                                                                         WINDOW) for Z in draws]))
            row["nystrom_kmeans"] = windowed_kernel_error(X, _nystrom_features(X, Zk, kern), kern, WINDOW)
            row["nystrom_random_rk/2"] = float(np.mean([windowed_kernel_error(
                X, _nystrom_features(X, Z, kern, k // 2), kern, WINDOW) for Z in draws]))
            row["nystrom_kmeans_rk/2"] = windowed_kernel_error(X, _nystrom_features(X, Zk, kern, k // 2), kern,
                                                               WINDOW)
            row["okfeb_le_nystrom_random"] = min(row["okfeb_rk"], row["okfeb_rk_beta0.5"]) <= row["nystrom_random"]
            rows.append(row)
            print(f"  {name} k={k}: " + ", ".join(f"{c}={v:.4f}" for c, v in row.items()
                                                   if isinstance(v, float) and not c.endswith("_s")), flush=True)
    print_table(rows, ["stream", "k", "okfeb_rk/2", "okfeb_rk/2_beta0.5", "okfeb_rk", "okfeb_rk_beta0.5",
                       "nystrom_random_rk/2", "nystrom_kmeans_rk/2", "nystrom_random", "nystrom_kmeans",
                       "okfeb_le_nystrom_random"])
    return rows


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
    from sklearn.kernel_ridge import KernelRidge
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
            ok = OKFEBClassifier(gamma=gamma, rank=50, budget=150, alpha=lr, device=str(dev), random_state=0)
            rff = RandomFourierFeatures(X.shape[1], 150, gamma=gamma, random_state=0)
            lin = Pegasos(150, 1, lam=lr)
            score = lambda pred: float(np.mean(pred == yt))  # noqa: E731
        else:
            ok = OKFEBRegressor(gamma=gamma, rank=50, budget=150, learning_rate=lr, device=str(dev),
                                random_state=0)
            rff = RandomFourierFeatures(X.shape[1], 150, gamma=gamma, random_state=0)
            lin = RegularizedLMS(150, step=lr, alpha=1e-4)
            score = lambda pred: float(np.sqrt(np.mean((pred - yt) ** 2)))  # noqa: E731
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
            rows.append(row)
            print(f"  {name} seen={e}: OK-FEB {row['okfeb']:.4f} ({t_ok:.1f}s, censored "
                  f"{row['okfeb_censor_rate']:.2f})  RFF+online {row['rff_sgd']:.4f} ({t_rff:.1f}s)", flush=True)
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
    print_table(rows, ["dataset", "seen", "okfeb", "okfeb_s", "rff_sgd", "rff_sgd_s", "offline", "offline_s"])
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


def bench_throughput(dev: bk.Device, scale: str) -> list[dict]:
    """partial_fit samples/s at r = 50, B = 150 on ijcnn1 rows (d = 22).

    Per-sample updates (batch_size = 1, the paper's rule) at three censoring
    targets, plus the mini-batch variant (b = 8) and float32; wall time and,
    on the CPU, process CPU time (the box is shared: CPU time is what the code
    costs, wall time what it got).  Then ``transform`` rows/s and the peak
    traced host memory per 10,000-row block over a long stream.
    """
    X, _ = load_dataset("ijcnn1", "train")
    n = 20000 if scale == "small" else 49990
    Xd = bk.to_device(np.ascontiguousarray(X[:n]), dev)
    repeats = 3
    configs = [dict(target_censor_rate=rho) for rho in (0.8, 0.9, 0.95)]
    configs += [dict(target_censor_rate=0.8, batch_size=8), dict(target_censor_rate=0.9, batch_size=8),
                dict(target_censor_rate=0.8, dtype=np.float32)]
    rows = []
    fe = None
    for cfg in configs:
        def run(cfg=cfg):
            return OKFEB(gamma=2.0, rank=50, budget=150, device=str(dev), random_state=0, **cfg).partial_fit(Xd)

        if dev.is_gpu:
            r = time_call(run, device=dev, repeats=repeats, warmup=1)
            wall, cpu, fe = r["median_s"], float("nan"), r["result"]
        else:
            wall, cpu, fe = _cpu_and_wall(run, repeats)
        row = {"what": "partial_fit", "batch_size": cfg.get("batch_size", 1),
               "dtype": np.dtype(cfg.get("dtype", fe._dt)).name, "censor_target": cfg["target_censor_rate"],
               "censor_rate": fe.censor_rate_, "updates": fe.n_updates_, "rows": n, "seconds": wall,
               "cpu_seconds": cpu, "samples_per_s": n / wall, "samples_per_cpu_s": n / cpu,
               "ls_error": fe.ls_error_}
        rows.append(row)
        if cfg is configs[0]:      # the default settings: timed below for transform
            fe_default = fe
        print(f"  partial_fit b={row['batch_size']} {row['dtype']} ρ={row['censor_target']}: "
              f"{row['samples_per_s']:.0f} samples/s wall, {row['samples_per_cpu_s']:.0f} per CPU-s "
              f"(censored {fe.censor_rate_:.3f}, {fe.n_updates_} updates, LS error {fe.ls_error_:.4f})",
              flush=True)
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
    fe = OKFEB(gamma=2.0, rank=50, budget=150, target_censor_rate=0.95, device=str(dev), random_state=0)
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
    print_table(rows, ["what", "batch_size", "dtype", "censor_target", "censor_rate", "rows", "seconds",
                       "samples_per_s", "samples_per_cpu_s"])
    return rows


def main(argv: Any = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=("small", "paper"), default="small")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--offline-rows", type=int, default=10000)
    args = ap.parse_args(argv)
    dev = bk.resolve_device(args.device)
    only = [s for s in args.only.split(",") if s]
    for s in only:
        if s not in SECTIONS:
            ap.error(f"unknown section {s!r}; choose from {SECTIONS}")
    out: dict = {"machine": machine_info(dev), "scale": args.scale, "device": str(dev),
                 "note": "CPU timings on a shared, contended 2-core box" if not dev.is_gpu else ""}
    if "approx" in only:
        print("== kernel approximation vs stored vectors ==", flush=True)
        out["approx"] = bench_approx(dev, args.scale)
    if "online" in only:
        print("== online classification / regression ==", flush=True)
        out["online"] = bench_online(dev, args.scale, args.offline_rows)
    if "throughput" in only:
        print("== throughput (r=50, B=150, d=22) ==", flush=True)
        out["throughput"] = bench_throughput(dev, args.scale)
    path = write_json("okfeb", out, sections=SECTIONS)
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
