"""Distributed LLSVM on Dask: strong scaling and overhead (issue 9).

Sections
--------
``scaling``
    Strong scaling of :func:`gpuksvm.scaleout.llsvm.fit_llsvm` on the noisy 4×4
    checkerboard (20% flipped training labels, clean test set) with a CPU
    ``LocalCluster`` of 1 and 2 worker processes (1 thread each; Dask sets
    OMP/MKL/OpenBLAS threads to 1 in its workers), against the in-process
    ``LLSVM.fit`` limited to one BLAS thread (same k, γ, C, random_state).
    The data are persisted on the workers before the clock starts (a user's
    data already live on the cluster).  ``--scale paper``: 800,000 rows,
    k = 200; ``--scale small``: 100,000 rows, k = 100.
``gpu``
    On a GPU machine: the same fit in-process on one GPU (``LLSVM(device=
    "gpu")``) against the same work through Dask on one GPU worker with
    CuPy-backed chunks (``dask_cuda.LocalCUDACluster`` when installed, else a
    1-worker ``LocalCluster``) — the price of the distributed machinery.

Reported per run: seconds (median of ``--repeats`` after one warm-up for the
GPU; CPU runs are single timed fits after a warm-up fit on a small subset),
speed-up over 1 worker, the CPU seconds each worker process spent during the
timed fit (``worker_cpu_s``: how evenly the work split and how much it cost,
independent of what else loads the machine; on an idle machine with one core
per worker the wall time approaches the largest of them), Newton passes
(each returns the k×k statistics) and line-search passes (two numbers per
problem each: the exact line search of the single-process solver),
bytes brought back to the driver, test accuracy, and the largest |decision
difference| to the in-process model.

    python bench/dask.py [--scale small|paper] [--device auto|cpu|gpu] [--workers 1,2]

CPU timings on the shared 2-core development box are noisy (other jobs run
beside them, and two workers on two cores leave nothing for the driver and
the scheduler); the JSON records the machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# this file is named like the `dask` package: keep its own folder off sys.path
# (python puts a script's folder first) so `import dask` finds the real package
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
if getattr(sys.modules.get("dask"), "__file__", None) == str(Path(__file__).resolve()):
    del sys.modules["dask"]


def _load_timing():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_timing", _HERE / "_timing.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_t = _load_timing()
machine_info, print_table, time_call, write_json = _t.machine_info, _t.print_table, _t.time_call, _t.write_json

from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.datasets import make_checkerboard  # noqa: E402

SCALES = {"small": {"n": 100_000, "k": 100, "chunk": 12_500},
          "paper": {"n": 800_000, "k": 200, "chunk": 50_000}}
GAMMA, C = 30.0, 10.0


def _params(k: int, device: str, dtype: Any = None) -> dict:
    return dict(gamma=GAMMA, C=C, n_landmarks=k, device=device, dtype=dtype, random_state=0,
                tol=1e-4, max_iter=100)


def _data(n: int):
    X, y = make_checkerboard(n, flip=0.2, random_state=0)
    Xt, yt = make_checkerboard(50_000, flip=0.0, random_state=1)
    return X, y, Xt, yt


def _in_process(X, y, k: int, device: str, threads: int | None):
    from threadpoolctl import threadpool_limits

    from gpuksvm.estimators.llsvm import LLSVM

    est = LLSVM(**_params(k, device))
    t0 = time.perf_counter()
    if threads is None:
        est.fit(X, y)
    else:
        with threadpool_limits(limits=threads):
            est.fit(X, y)
    return est, time.perf_counter() - t0


def _cluster(n_workers: int, gpu: bool):
    from distributed import Client, LocalCluster

    if gpu:
        try:
            from dask_cuda import LocalCUDACluster

            lc = LocalCUDACluster(n_workers=n_workers, dashboard_address=None)
            return lc, Client(lc), "LocalCUDACluster"
        except ImportError:
            pass
    lc = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=0)
    return lc, Client(lc), "LocalCluster"


def _dask_fit(client, X, y, k: int, chunk: int, device: str, gpu_chunks: bool):
    import warnings

    import dask.array as da
    from distributed import wait

    from gpuksvm import scaleout as gd
    from gpuksvm.estimators.llsvm import LLSVM

    Xd = da.from_array(X, chunks=(chunk, X.shape[1]))
    if gpu_chunks:
        import cupy

        Xd = Xd.map_blocks(cupy.asarray, dtype=X.dtype, meta=cupy.empty((0, 0), dtype=X.dtype))
    yd = da.from_array(y, chunks=chunk)
    with warnings.catch_warnings():   # the bench's in-memory data enter through the graph once
        warnings.filterwarnings("ignore", message="Sending large graph")
        Xd, yd = client.persist([Xd, yd])
        wait([Xd, yd])
    # warm-up on a slice: imports and first-call costs on the workers
    gd.fit_llsvm(LLSVM(**_params(min(k, 20), device)), Xd[:4000], yd[:4000], client=client)
    est = LLSVM(**_params(k, device))
    cpu0 = client.run(time.process_time)   # CPU seconds of every worker process
    t0 = time.perf_counter()
    gd.fit_llsvm(est, Xd, yd, client=client)
    if gpu_chunks:
        bk.synchronize("cuda")
    seconds = time.perf_counter() - t0
    cpu1 = client.run(time.process_time)
    est.bench_busy_s_ = sorted((cpu1[w] - cpu0[w] for w in cpu1 if w in cpu0), reverse=True)
    return est, seconds


def _row(label: str, est, seconds: float, Xt, yt, ref_dec, base: float | None) -> dict:
    dec = np.asarray(bk.to_host(est.decision_function(Xt)), dtype=np.float64)
    acc = float(np.mean(np.where(dec > 0, est.classes_[1], est.classes_[0]) == yt))
    info = getattr(est, "dask_info_", {})
    busy = getattr(est, "bench_busy_s_", None)
    return {"run": label, "seconds": seconds,
            "worker_cpu_s": "/".join(f"{b:.1f}" for b in busy) if busy else "",
            "speedup_vs_1w": (base / seconds) if base else float("nan"),
            "newton_passes": sum(1 for p in info.get("passes", []) if p[0] == "newton") or "",
            "line_search_passes": sum(1 for p in info.get("passes", []) if p[0] == "line search") or "",
            "max_bytes_to_driver": info.get("max_result_bytes", ""),
            "test_acc": acc,
            "max_abs_dec_diff": float(np.max(np.abs(dec - ref_dec))) if ref_dec is not None else 0.0}


def run_scaling(scale: str, workers: list[int]) -> list[dict]:
    cfg = SCALES[scale]
    X, y, Xt, yt = _data(cfg["n"])
    ref, t_ref = _in_process(X, y, cfg["k"], "cpu", threads=1)
    ref_dec = np.asarray(ref.decision_function(Xt), dtype=np.float64)
    rows = [_row("in-process, 1 BLAS thread", ref, t_ref, Xt, yt, None, None)]
    base = None
    for w in workers:
        lc, client, kind = _cluster(w, gpu=False)
        try:
            est, t = _dask_fit(client, X, y, cfg["k"], cfg["chunk"], "cpu", gpu_chunks=False)
        finally:
            client.close()
            lc.close()
        base = t if base is None else base
        rows.append(_row(f"dask {kind}, {w} CPU worker(s)", est, t, Xt, yt, ref_dec, base))
    for r in rows:
        r.update(n=cfg["n"], k=cfg["k"])
    return rows


def run_gpu(scale: str, repeats: int) -> list[dict]:
    cfg = SCALES[scale]
    k = 1000 if scale == "paper" else 500
    X, y, Xt, yt = _data(cfg["n"])
    from gpuksvm.estimators.llsvm import LLSVM

    dev = bk.resolve_device("gpu")
    Xg, yg = bk.to_device(X, dev, np.float32), y
    LLSVM(**_params(min(k, 50), "gpu")).fit(Xg[:4000], yg[:4000])  # warm-up
    res = time_call(lambda: LLSVM(**_params(k, "gpu")).fit(Xg, yg), device=dev, repeats=repeats)
    ref = res["result"]
    ref_dec = np.asarray(bk.to_host(ref.decision_function(Xt)), dtype=np.float64)
    rows = [_row("in-process, 1 GPU", ref, res["median_s"], Xt, yt, None, None)]
    lc, client, kind = _cluster(1, gpu=True)
    try:
        times, est = [], None
        for _ in range(repeats):
            est, t = _dask_fit(client, X.astype(np.float32), y, k, cfg["chunk"], "gpu", gpu_chunks=True)
            times.append(t)
    finally:
        client.close()
        lc.close()
    row = _row(f"dask {kind}, 1 GPU worker, CuPy chunks", est, float(np.median(times)), Xt, yt,
               ref_dec, None)
    row["overhead_vs_in_process"] = row["seconds"] / res["median_s"]
    rows.append(row)
    for r in rows:
        r.update(n=cfg["n"], k=k)
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="small", choices=sorted(SCALES))
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--workers", default="1,2", help="CPU worker counts for the scaling run")
    ap.add_argument("--repeats", type=int, default=3, help="GPU repeats")
    ap.add_argument("--only", default="", help="comma separated: scaling,gpu")
    ap.add_argument("--n", type=int, default=None, help="override the number of training rows")
    ap.add_argument("--k", type=int, default=None, help="override the number of landmarks")
    args = ap.parse_args(argv)
    if args.n or args.k:
        SCALES[args.scale] = dict(SCALES[args.scale])
        if args.n:
            SCALES[args.scale]["n"] = args.n
            SCALES[args.scale]["chunk"] = max(1000, args.n // 8)
        if args.k:
            SCALES[args.scale]["k"] = args.k
    only = {s for s in args.only.split(",") if s}
    dev = bk.resolve_device(args.device)
    out: dict = {"machine": machine_info(dev), "scale": args.scale, "gamma": GAMMA, "C": C,
                 "cpu_count": os.cpu_count()}
    cols = ["run", "n", "k", "seconds", "speedup_vs_1w", "worker_cpu_s", "newton_passes", "line_search_passes",
            "max_bytes_to_driver",
            "test_acc", "max_abs_dec_diff"]
    if not only or "scaling" in only:
        workers = [int(w) for w in args.workers.split(",") if w]
        rows = run_scaling(args.scale, workers)
        print(f"# strong scaling, distributed LLSVM, noisy checkerboard (flip 0.2), γ={GAMMA}, C={C}")
        print_table(rows, cols)
        out["scaling"] = rows
    if (not only or "gpu" in only) and dev.is_gpu:
        rows = run_gpu(args.scale, args.repeats)
        print("# one GPU in-process vs the same fit through Dask (1 GPU worker)")
        print_table(rows, cols + ["overhead_vs_in_process"])
        out["gpu"] = rows
    elif "gpu" in only:
        print("# gpu section skipped: no CUDA device")
    path = write_json("dask", out)
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
