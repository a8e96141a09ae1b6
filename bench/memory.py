"""Peak host memory of every estimator's fit and predict against the memory budget, and the bound.

Each point runs in a fresh Python process (``python -m bench.memory --child SPEC``) that imports
the library and the estimator's module and loads (or generates) the data first; the figures are
growths of Linux's VmHWM above that point (reset through ``/proc/self/clear_refs``,
:class:`gpuksvm.cli.demo.PeakMemory`): exact, and the same on a loaded machine.  ``fit`` and
``predict`` of the test rows are measured separately, each from its own reset.

The bound (:func:`bound_bytes`, the one definition the tests use too) that every fit and predict
is held to::

    peak growth ≤ budget + the inputs' own size + the fitted model's size + the result's size
                  + CONSTANT_BYTES

* budget: ``cpu_memory_budget`` (:func:`gpuksvm.set_config`; default 512 MiB);
* the inputs: the caller's arrays (``X``, ``y`` for fit, ``X`` for predict), ``nbytes``;
* the model: every array reachable from the fitted estimator's attributes that is not a
  view of an input (:func:`model_nbytes`); for predict the model is already resident, so 0;
* the result: the array predict returns (for fit: none);
* :data:`CONSTANT_BYTES`: the interpreter's and libraries' own growth over a first fit and
  predict (code and modules imported on first use, OpenBLAS's thread buffers, glibc's arena),
  measured as the largest growth of a trivial fit or predict plus that of a first large matrix
  product (``--constant``).

Grid (``--scale``): every estimator of the registry's demo (``LinearSVM``, ``KernelSVC``,
``LLSVM`` with ``n_landmarks=1000``, ``CVM``, ``SVI``, ``OKFEBClassifier``, at the demo's
parameters) × budget {default, 256 MB, 64 MB} × data {``ijcnn1``: its 49,990 training rows,
predicting its 91,701 test rows; ``synthetic``: 22 features, an XOR of two of them and noise
(:func:`synthetic`), fitted on 20,000 rows (``KernelSVC`` took 93 s there on a loaded
2-core CPU; 1M rows are out of a CPU benchmark's reach), predicting 1,000,000 rows (176 MB as
float64)}.  ``small`` (< 3 minutes on a 2-core box): ijcnn1's 10,000
training rows, all its test rows, budgets default and 64 MB (``--datasets synthetic``: 10,000 /
200,000 rows); ``tiny``: synthetic 2,000 / 5,000 rows, budgets default and 64 MB, ``LLSVM``
with 100 landmarks.  Fit times are relative to the same estimator's default-budget
fit of the same run (times on a shared machine: the load average is printed).

``--device emulated`` runs on the emulated GPU of ``tests/gpuemu`` (slow: tiny scale) and adds
the peak of the stand-in CuPy's memory pool where the stand-in reports its bytes.

    python -m bench memory --scale small --device cpu      # the registered case: records + table
    python -m bench.memory --scale paper                   # the table only
    python -m bench.memory --scale paper --datasets ijcnn1 --budgets 200MB   # one budget
    python -m bench.memory --constant                      # re-measure CONSTANT_BYTES

``--search GRID`` measures a cross-validated search instead (:func:`search_child`: a
:class:`gpuksvm.model_selection.GridSearchCV` over the JSON grid, 5 folds, refit included) per
estimator × data set (``--rows`` random rows) × budget × ``--n-jobs``, each in a fresh process,
against the same bound with the refitted best model as the model::

    python -m bench.memory --search '{"gamma": [1, 2], "C": [1, 8, 64]}' --estimators LLSVM \
        --datasets ijcnn1 --rows 20000 --budgets 200MB --n-jobs 1,-1

``--dask`` measures a fit on a Dask array (:func:`dask_child`: one worker process, one thread,
the budget set on the driver only: the tasks carry it) and reports the worker's VmHWM growth
and the driver's::

    python -m bench.memory --dask --estimators LLSVM,CVM --datasets ijcnn1 --budgets default,200MB
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):          # run as a file: the repository root, not bench/, goes first
    sys.path[0] = str(ROOT)

from bench.harness import Case, Context, Record, load_average  # noqa: E402
from gpuksvm import registry  # noqa: E402
from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.cli.demo import PeakMemory  # noqa: E402
from gpuksvm.datasets import load_dataset, subsample  # noqa: E402
from gpuksvm.model_selection import GridSearchCV  # noqa: E402
from gpuksvm.scaleout.runtime import on_workers  # noqa: E402

MB = 1e6

#: The interpreter's and libraries' own growth over a first fit and predict, in bytes: 24 MB.
#: Measured (``python -m bench.memory --constant``; 2-core x86-64 box, Python 3.11, NumPy 2 with
#: scipy-openblas 0.3.31): the largest VmHWM growth of a fit on 200 synthetic rows was 6.9 MB
#: (LLSVM; its predict 0.1 MB, the largest predict 0.5 MB), and OpenBLAS's buffers, touched by the
#: first large matrix product of a process, 7.5 MB: 14.4 MB, plus 9.6 MB for the C heap's
#: fragmentation (glibc's arenas).
CONSTANT_BYTES = 24_000_000

ESTIMATORS = ("LinearSVM", "KernelSVC", "LLSVM", "CVM", "SVI", "OKFEBClassifier")
BUDGETS = ("default", "256MB", "64MB")
DATASETS = ("ijcnn1", "synthetic")
#: rows (train, test) per data set and scale (None: all of the file's rows)
ROWS = {"tiny": {"ijcnn1": (2000, 5000), "synthetic": (2000, 5000)},
        "small": {"ijcnn1": (10000, None), "synthetic": (10000, 200000)},
        "paper": {"ijcnn1": (None, None), "synthetic": (20000, 1000000)}}
#: the grid at each scale (the registered case ``memory`` runs these); each point is a fresh
#: process (about 5 s of imports on a loaded 2-core box), so ``small`` runs two budgets on ijcnn1
SCALES = {"tiny": {"datasets": ["synthetic"], "budgets": ["default", "64MB"]},
          "small": {"datasets": ["ijcnn1"], "budgets": ["default", "64MB"]},
          "paper": {"datasets": list(DATASETS), "budgets": list(BUDGETS)}}


# --------------------------------------------------------------------------- the bound
def bound_bytes(budget: int, inputs: int, model: int = 0, result: int = 0,
                constant: int = CONSTANT_BYTES) -> int:
    """The most a fit or predict may grow the process's peak resident memory by, in bytes.

    ``budget`` + ``inputs`` (the caller's arrays) + ``model`` (the fitted model's arrays;
    0 for predict, whose model is resident before it starts) + ``result`` (the returned
    array) + ``constant`` (:data:`CONSTANT_BYTES`).
    """
    return int(budget) + int(inputs) + int(model) + int(result) + int(constant)


def _root(a: np.ndarray) -> tuple[int, int]:
    """(identity, bytes) of the array that owns ``a``'s memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return id(a.base if a.base is not None else a), int(a.nbytes)


def model_nbytes(est: Any, exclude: tuple = ()) -> int:
    """Bytes of every NumPy array reachable from ``est``'s attributes (each buffer once).

    Follows attributes of objects, dataclasses, lists, tuples and dicts; arrays that are views
    of the ``exclude`` arrays (the inputs, counted as inputs) are not counted.
    """
    seen_buffers = {_root(a)[0] for a in exclude if isinstance(a, np.ndarray)}
    seen: set[int] = set()
    total = 0
    stack = [est]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type, type(None), ModuleType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            root, nbytes = _root(obj)
            if root not in seen_buffers:
                seen_buffers.add(root)
                total += nbytes
            continue
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__") and not callable(obj) or hasattr(obj, "__dataclass_fields__"):
            stack.extend(vars(obj).values())
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
    return total


# --------------------------------------------------------------------------- the child
def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of 22 features (ijcnn1's width): an XOR of x₀, x₁ ~ U(-1, 1) with 5% of the
    labels flipped, and 20 features of N(0, 0.1²) noise; y in {-1, 1}.  At the demo's γ = 2
    the RBF kernel separates it (the kernel methods score 0.90–0.95; the linear SVM 0.5)."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, 22))
    X[:, :2] = rng.uniform(-1.0, 1.0, size=(n, 2))
    X[:, 2:] = 0.1 * rng.normal(size=(n, 20))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    y[rng.random(n) < 0.05] *= -1
    return X, y


def load_data(dataset: str, n_train: int | None, n_test: int | None) -> tuple[Any, Any, Any, Any]:
    """Training and test rows: an ijcnn1 subsample (seed 0) or the synthetic set (seeds 0, 1)."""
    if dataset == "synthetic":
        return (*synthetic(int(n_train), 0), *synthetic(int(n_test), 1))
    rng = np.random.default_rng(0)
    X, y = subsample(*load_dataset(dataset, "train"), n_train, rng)
    Xt, yt = subsample(*load_dataset(dataset, "test"), n_test, rng)
    return X, y, Xt, yt


def estimator_params(name: str, scale: str, params: str = "demo") -> dict:
    """The registry's demo parameters of ``name`` (its ``tiny_params`` at tiny scale; none for a
    method without a demo), or with
    ``params="defaults"`` the constructor's defaults (``LLSVM``: its demo's ``n_landmarks``)."""
    demo = registry.method(name).demo
    if demo is None:        # a method without a demo (the OKFEB transformer): its defaults
        return {}
    chosen = {**demo.params, **(demo.tiny_params if scale == "tiny" else {})}
    if params == "defaults":
        chosen = {k: v for k, v in chosen.items() if k == "n_landmarks"}
    return chosen


def _pool_peak(pool_meter: Any) -> float | None:
    b = getattr(pool_meter, "gpu_bytes", None)
    return None if not b else b / MB


def peak_fit_predict(est: Any, X: Any, y: Any, Xt: Any, *, gpu: bool = False) -> dict:
    """``est.fit(X, y)`` then ``est.predict(Xt)``, each under its own reset VmHWM
    (:class:`gpuksvm.cli.demo.PeakMemory`): their meters, wall times and the predictions."""
    t0 = time.perf_counter()
    with PeakMemory("vmhwm", gpu=gpu) as fit_mem:
        est.fit(X, y)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with PeakMemory("vmhwm", gpu=gpu) as pred_mem:
        pred = est.predict(Xt)
    return {"fit": fit_mem, "predict": pred_mem, "fit_s": fit_s, "predict_s": time.perf_counter() - t0,
            "pred": pred}


def child(spec: dict) -> dict:
    """Fit and predict one estimator under one budget; each measured from a reset VmHWM."""
    X, y, Xt, yt = load_data(spec["dataset"], spec["n_train"], spec["n_test"])
    cls = registry.method(spec["estimator"]).load()
    emulated = spec["device"] == "emulated"
    ctx: Any = contextlib.nullcontext()
    if emulated:
        sys.path.insert(0, str(ROOT / "tests"))
        import gpuemu

        gpuemu.prebuild()
        ctx = gpuemu.emulated_gpu()
    if spec["budget"] != "default":
        bk.set_config(cpu_memory_budget=spec["budget"])
    out: dict = {}
    with ctx, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        device = "cuda" if emulated else spec["device"]
        est = cls(**spec["params"], device=device, random_state=0)
        budget = bk.get_config()["cpu_memory_budget"]
        m = peak_fit_predict(est, X, y, Xt, gpu=emulated)
        fit_mem, pred_mem, fit_s, predict_s, pred = m["fit"], m["predict"], m["fit_s"], m["predict_s"], m["pred"]
        if spec.get("decision"):
            with PeakMemory("vmhwm", gpu=emulated) as dec_mem:
                dec = est.decision_function(Xt)
            out.update(decision_peak=dec_mem.peak_bytes,
                       decision_bound=bound_bytes(budget, Xt.nbytes, 0, bk.to_host(dec).nbytes))
            del dec
        pred = bk.to_host(pred)
        model = model_nbytes(est, exclude=(X, y))
        inputs, test_inputs, result = X.nbytes + y.nbytes, Xt.nbytes, pred.nbytes
        out.update(
            fit_peak=fit_mem.peak_bytes, predict_peak=pred_mem.peak_bytes, budget_bytes=budget,
            inputs=inputs, test_inputs=test_inputs, model=model, result=result,
            fit_bound=bound_bytes(budget, inputs, model), predict_bound=bound_bytes(budget, test_inputs, 0, result),
            fit_s=fit_s, predict_s=predict_s, accuracy=float(np.mean(pred == yt)),
            n_train=int(X.shape[0]), n_test=int(Xt.shape[0]),
            gpu_fit_peak_MB=_pool_peak(fit_mem), gpu_predict_peak_MB=_pool_peak(pred_mem),
            warnings=sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught}))
    return out


#: the outputs :func:`outputs_child` measures besides ``predict`` and ``decision_function``
OUTPUTS = ("transform", "predict_proba", "partial_fit")


def outputs_child(spec: dict) -> dict:
    """Fit one estimator (not measured), then each of ``spec["outputs"]`` (of :data:`OUTPUTS`)
    under one budget, each from a reset VmHWM: ``transform`` / ``predict_proba`` of the test rows
    (bound: the budget + the test rows + the result), ``partial_fit`` on the training rows again
    (bound: the budget + the training rows + the model after it).  ``{output: {"peak", "bound"}}``."""
    X, y, Xt, _ = load_data(spec["dataset"], spec["n_train"], spec["n_test"])
    cls = registry.method(spec["estimator"]).load()
    if spec["budget"] != "default":
        bk.set_config(cpu_memory_budget=spec["budget"])
    budget = bk.get_config()["cpu_memory_budget"]
    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(**spec["params"], device="cpu", random_state=0)
        est.fit(X, y)
        for output in spec["outputs"]:
            if output not in OUTPUTS:
                raise ValueError(f"unknown output {output!r}: one of {OUTPUTS}")
            with PeakMemory("vmhwm") as mem:
                result = est.partial_fit(X, y) if output == "partial_fit" else getattr(est, output)(Xt)
            if output == "partial_fit":
                bound = bound_bytes(budget, X.nbytes + y.nbytes, model_nbytes(est, exclude=(X, y)))
            else:
                bound = bound_bytes(budget, Xt.nbytes, 0, bk.to_host(result).nbytes)
            out[output] = {"peak": mem.peak_bytes, "bound": bound}
            del result
    out["budget_bytes"] = budget
    return out


def search_child(spec: dict) -> dict:
    """One cross-validated search (:class:`gpuksvm.model_selection.GridSearchCV`) of one estimator
    under one budget, measured from a reset VmHWM: the growth, its bound (the budget + the inputs +
    the refitted best model + :data:`CONSTANT_BYTES`), the search's time, the fold models that fell
    back to a streamed path (``memory_fallback_``), ``cv_results_``'s scores and ``shared_work``."""
    if spec["dataset"] == "synthetic":
        X, y = synthetic(int(spec["n_train"]), 0)
    else:
        X, y = subsample(*load_dataset(spec["dataset"], "train"), spec["n_train"], np.random.default_rng(0))
    if spec["budget"] != "default":
        bk.set_config(cpu_memory_budget=spec["budget"])
    budget = bk.get_config()["cpu_memory_budget"]
    est = registry.method(spec["estimator"]).load()(**spec["params"], device="cpu", random_state=0)
    search = GridSearchCV(est, spec["grid"], cv=int(spec.get("cv", 5)), n_jobs=spec.get("n_jobs"),
                          refit=bool(spec.get("refit", True)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load = load_average()
        t0 = time.perf_counter()
        with PeakMemory("vmhwm") as mem:
            search.fit(X, y)
        seconds = time.perf_counter() - t0
    best = getattr(search, "best_estimator_", None)
    inputs, model = X.nbytes + y.nbytes, 0 if best is None else model_nbytes(best, exclude=(X, y))
    return {"peak": mem.peak_bytes, "bound": bound_bytes(budget, inputs, model), "budget_bytes": budget,
            "inputs": inputs, "model": model, "search_s": seconds, "load": load, "load_after": load_average(),
            "n_train": int(X.shape[0]), "mean_test_score": [float(v) for v in search.cv_results_["mean_test_score"]],
            "shared_work": [str(v) for v in search.cv_results_["shared_work"]],
            "best_fallback": getattr(best, "memory_fallback_", None),
            "warnings": [f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught]}


def run_search(spec: dict, *, timeout: float | None = None) -> dict:
    """:func:`search_child` in a fresh process (``python -m bench.memory --child``); its result dict."""
    return run_module("bench.memory", ["--child", json.dumps({**spec, "search": True})], timeout=timeout)


def measure_searches(args: argparse.Namespace, grid_: dict) -> list[dict]:
    """``--search``: one fresh process per (estimator, data set, budget, n_jobs), a line each."""
    rows = []
    for name in args.estimators.split(","):
        for ds in (args.datasets or "ijcnn1").split(","):
            for b in (args.budgets or "200MB").split(","):
                for n_jobs in (int(j) for j in args.n_jobs.split(",")):
                    spec = {"estimator": name, "dataset": ds, "budget": b, "n_train": args.rows, "n_jobs": n_jobs,
                            "grid": grid_, "params": estimator_params(name, args.scale, args.params)}
                    r = {**spec, **run_search(spec, timeout=args.timeout)}
                    streamed = sum("streamed" in w for w in r["shared_work"])
                    print(f"{name} {ds} {r['n_train']:,} rows budget {b} n_jobs {n_jobs}: peak growth "
                          f"{r['peak'] / MB:.0f} MB, bound {r['bound'] / MB:.0f} MB "
                          f"({'within' if r['peak'] <= r['bound'] else 'OVER'}), search {r['search_s']:.1f} s, "
                          f"{streamed} candidate(s) streamed F, load {r['load']} -> {r['load_after']}", flush=True)
                    rows.append(r)
    return rows


def _worker_reset() -> int:
    """On a Dask worker: hand the free C heap back, reset VmHWM; the worker's VmRSS."""
    PeakMemory("vmhwm").__enter__()
    return _vm("VmRSS")


def _vm(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))


def dask_child(spec: dict) -> dict:
    """One estimator's fit on a Dask array (the data set's rows in ``chunk``-row chunks) on a
    ``LocalCluster(processes=True, n_workers=1, threads_per_worker=1)``, the budget set on the
    driver only (``set_config``, not put in the worker's environment: its tasks run under the
    driver's budget): the VmHWM growth of the worker process and of the driver over the fit,
    the fit's time, and the budget a task on the worker sees."""
    import dask.array as da
    from distributed import Client, LocalCluster

    X, y = subsample(*load_dataset(spec["dataset"], "train"), spec.get("n_train"), np.random.default_rng(0))
    if spec["budget"] != "default":
        bk.set_config(cpu_memory_budget=spec["budget"])
    chunk = int(spec.get("chunk", 10000))
    with LocalCluster(processes=True, n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        Xd, yd = da.from_array(X, chunks=(chunk, X.shape[1])), da.from_array(y, chunks=chunk)
        est = registry.method(spec["estimator"]).load()(**spec["params"], device="cpu", random_state=0)
        base = list(client.run(_worker_reset).values())[0]
        t0 = time.perf_counter()
        with PeakMemory("vmhwm") as driver:
            est.fit(Xd, yd)
        seconds = time.perf_counter() - t0
        worker_hwm = list(client.run(_vm, "VmHWM").values())[0]
        worker_budget = client.submit(on_workers(bk.memory_budget), "cpu", pure=False).result()
    return {"worker_peak": worker_hwm - base, "driver_peak": driver.peak_bytes, "fit_s": seconds,
            "worker_budget": worker_budget, "budget_bytes": bk.get_config()["cpu_memory_budget"],
            "inputs": X.nbytes + y.nbytes, "chunk_bytes": chunk * X.shape[1] * X.itemsize,
            "model": model_nbytes(est), "n_train": int(X.shape[0]), "load": load_average(),
            "dask_info": {k: v for k, v in getattr(est, "dask_info_", {}).items() if not isinstance(v, dict)}}


def measure_dask(args: argparse.Namespace) -> list[dict]:
    """``--dask``: one fresh process per (estimator, data set, budget), a line each."""
    rows = []
    for name in args.estimators.split(","):
        for ds in (args.datasets or "ijcnn1").split(","):
            for b in (args.budgets or "default,200MB").split(","):
                spec = {"dask": True, "estimator": name, "dataset": ds, "budget": b, "n_train": None,
                        "params": estimator_params(name, args.scale, args.params)}
                try:
                    r = {**spec, **run_module("bench.memory", ["--child", json.dumps(spec)], timeout=args.timeout)}
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"{name} {ds} budget {b}: FAILED {str(exc).strip().splitlines()[-1]}", flush=True)
                    continue
                print(f"{name} {ds} {r['n_train']:,} rows on Dask, budget {b}: worker peak growth "
                      f"{r['worker_peak'] / MB:.0f} MB (its budget {r['worker_budget'] / MB:.0f} MB), driver "
                      f"{r['driver_peak'] / MB:.0f} MB, fit {r['fit_s']:.1f} s, load {r['load']}", flush=True)
                rows.append(r)
    return rows


#: glibc's mmap threshold in the measured processes, fixed at its default (128 KiB).  Left dynamic,
#: glibc raises it when a large block is freed, later large blocks come from the heap, and whether the
#: heap grows in place depends on where the address-space layout put the mappings beside it: the
#: VmHWM growth of one fit was bimodal in fresh processes (LLSVM, 5,000 synthetic rows, budget 16 MB:
#: 35.0–35.3 MB in 9 of 12, 42.7–43.2 MB in 3; 12 of 12 at 35.0–35.2 MB with the layout's
#: randomization off; the NumPy and Python allocations, tracemalloc's peak, 26.73 MB every time).
#: Fixed: 33.1–33.5 MB in 12 of 12.  The fixed threshold is also where glibc starts.
MALLOC_MMAP_THRESHOLD = "131072"


def run_module(module: str, argv: list[str], *, env: dict | None = None, timeout: float | None = None) -> dict:
    """``python -m <module> <argv>`` in a fresh process from the repository root, glibc's mmap
    threshold fixed (:data:`MALLOC_MMAP_THRESHOLD`); the JSON object its last line of output prints
    (a RuntimeError with its error output if it failed)."""
    env = dict(os.environ if env is None else env)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", MALLOC_MMAP_THRESHOLD)
    proc = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{module} {argv} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(spec: dict, *, timeout: float | None = None) -> dict:
    """:func:`child` (:func:`outputs_child` for a spec with ``outputs``) in a fresh process
    (``python -m bench.memory --child``); its result dict."""
    env = dict(os.environ)
    if spec["budget"] != "default":   # worker threads read the budget from the environment
        env["GPUKSVM_CPU_MEMORY_BUDGET"] = str(spec["budget"])
    else:
        env.pop("GPUKSVM_CPU_MEMORY_BUDGET", None)
    return run_module("bench.memory", ["--child", json.dumps(spec)], env=env, timeout=timeout)


# --------------------------------------------------------------------------- the grid
def grid(scale: str, *, estimators: Any = ESTIMATORS, datasets: Any = None, budgets: Any = None,
         device: str = "cpu", params: str = "demo") -> Iterator[dict]:
    """The child specs of one run, the default budget first for each (estimator, data set)."""
    datasets = datasets or SCALES[scale]["datasets"]
    budgets = budgets or SCALES[scale]["budgets"]
    for ds in datasets:
        n_train, n_test = ROWS[scale][ds]
        for name in estimators:
            for b in budgets:
                yield {"estimator": name, "dataset": ds, "budget": b, "n_train": n_train, "n_test": n_test,
                       "params": estimator_params(name, scale, params), "device": device, "scale": scale}


def measure_grid(specs: Any, *, log: Any = print, timeout: float | None = None) -> list[dict]:
    """Run each spec's child (at most ``timeout`` seconds each; a failure is a row with its error);
    each row: the spec, its result and the fit time against the default budget's."""
    rows: list[dict] = []
    for spec in specs:
        try:
            r = run_child(spec, timeout=timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            r = {"error": str(exc).strip().splitlines()[-1]}
        row = {**spec, **r, "load": load_average()}
        ref = next((p for p in rows if p["estimator"] == spec["estimator"] and p["dataset"] == spec["dataset"]
                    and p["budget"] == "default" and "fit_s" in p), None)
        row["fit_vs_default"] = row["fit_s"] / ref["fit_s"] if ref and "fit_s" in row else None
        rows.append(row)
        log(format_row(row))
    return rows


HEADER = (f"{'estimator':<16} {'data':<9} {'budget':>7} {'rows':>17} {'fit MB':>7} {'bound':>6} "
          f"{'pred MB':>7} {'bound':>6} {'fit s':>7} {'×def':>5} {'GPU pool MB':>11}  within")


def format_row(r: dict) -> str:
    """One line of the table (figures in MB = 10⁶ bytes)."""
    head = f"{r['estimator']:<16} {r['dataset']:<9} {r['budget']:>7}"
    if "error" in r:
        return f"{head}  FAILED: {r['error']}"
    rows = f"{r['n_train']:,}/{r['n_test']:,}"
    rel = "" if r.get("fit_vs_default") is None else f"{r['fit_vs_default']:.2f}"
    gpu = [r.get("gpu_fit_peak_MB"), r.get("gpu_predict_peak_MB")]
    gpu_s = "-" if gpu == [None, None] else "/".join("-" if g is None else f"{g:.0f}" for g in gpu)
    ok = r["fit_peak"] <= r["fit_bound"] and r["predict_peak"] <= r["predict_bound"]
    return (f"{head} {rows:>17} {r['fit_peak'] / MB:7.0f} {r['fit_bound'] / MB:6.0f} "
            f"{r['predict_peak'] / MB:7.0f} {r['predict_bound'] / MB:6.0f} {r['fit_s']:7.1f} {rel:>5} "
            f"{gpu_s:>11}  {'yes' if ok else 'NO'}")


def print_table(rows: list[dict], *, log: Any = print) -> None:
    log(HEADER)
    for r in rows:
        log(format_row(r))


def child_blas() -> dict:
    """Growth of the process's first large matrix product beyond its result (OpenBLAS's buffers)."""
    A = np.random.default_rng(0).random((2000, 2000))
    with PeakMemory("vmhwm") as mem:
        C = A @ A
    return {"blas_MB": (mem.peak_bytes - C.nbytes) / MB}


def markdown_table(rows: list[dict]) -> str:
    """The rows as a Markdown table (the README's); a figure over its bound in bold."""
    def cell(peak: int, bound: int) -> str:
        fig = f"{peak / MB:,.0f}"
        return f"**{fig}** / {bound / MB:,.0f}" if peak > bound else f"{fig} / {bound / MB:,.0f}"

    out = ["| estimator | data (train / predicted rows) | budget | fit: peak growth / bound, MB | "
           "predict: peak growth / bound, MB | fit s (× the default budget's) |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| `{r['estimator']}` | {r['dataset']} | {r['budget']} | failed: {r['error']} | | |")
            continue
        rel = "" if r.get("fit_vs_default") is None else f" ({r['fit_vs_default']:.2f}×)"
        out.append(f"| `{r['estimator']}` | {r['dataset']} ({r['n_train']:,} / {r['n_test']:,}) | {r['budget']} | "
                   f"{cell(r['fit_peak'], r['fit_bound'])} | {cell(r['predict_peak'], r['predict_bound'])} | "
                   f"{r['fit_s']:.1f}{rel} |")
    return "\n".join(out)


def measure_constant() -> list[dict]:
    """Growth of a trivial fit and predict (200 synthetic rows, LLSVM with 20 landmarks) per
    estimator, and of a first large matrix product (row ``BLAS``), each in a fresh process."""
    blas = run_module("bench.memory", ["--child", "blas"])["blas_MB"]
    out = [{"estimator": "BLAS", "fit_MB": blas, "predict_MB": 0.0, "model_MB": 0.0}]
    for name in ESTIMATORS:
        params = dict(estimator_params(name, "tiny"), **({"n_landmarks": 20} if name == "LLSVM" else {}))
        r = run_child({"estimator": name, "dataset": "synthetic", "budget": "default", "n_train": 200,
                       "n_test": 200, "params": params, "device": "cpu", "scale": "tiny"})
        out.append({"estimator": name, "fit_MB": r["fit_peak"] / MB, "predict_MB": r["predict_peak"] / MB,
                    "model_MB": r["model"] / MB})
    return out


# --------------------------------------------------------------------------- the registered case
def run_case(ctx: Context) -> Iterator[Record]:
    """The ``memory`` case: the scale's grid, one record per (estimator, data set, budget)."""
    device = "cpu" if not getattr(ctx.device, "is_gpu", False) else "cuda"
    rows = measure_grid(grid(ctx.scale, datasets=ctx.params["datasets"], budgets=ctx.params["budgets"],
                             device=device), log=lambda s: None)
    print_table(rows, log=ctx.log)
    for r in rows:
        if "error" in r:
            yield ctx.record(method=r["estimator"], dataset=r["dataset"], params={"budget": r["budget"]},
                             extra={"error": r["error"]})
            continue
        yield ctx.record(
            method=r["estimator"], dataset=r["dataset"], params={"budget": r["budget"], **r["params"]},
            fit_s=r["fit_s"], fit_times_s=[r["fit_s"]], predict_s=r["predict_s"], accuracy=r["accuracy"],
            n_train=r["n_train"], n_test=r["n_test"],
            extra={"fit_peak_MB": r["fit_peak"] / MB, "fit_bound_MB": r["fit_bound"] / MB,
                   "predict_peak_MB": r["predict_peak"] / MB, "predict_bound_MB": r["predict_bound"] / MB,
                   "budget_MB": r["budget_bytes"] / MB, "inputs_MB": r["inputs"] / MB, "model_MB": r["model"] / MB,
                   "constant_MB": CONSTANT_BYTES / MB, "fit_vs_default": r["fit_vs_default"],
                   "gpu_fit_peak_MB": r["gpu_fit_peak_MB"], "gpu_predict_peak_MB": r["gpu_predict_peak_MB"],
                   "within_bound": r["fit_peak"] <= r["fit_bound"] and r["predict_peak"] <= r["predict_bound"]})


CASE = Case("memory", run_case, scales=SCALES, figure=None,
            columns=("fit_peak_MB", "fit_bound_MB", "predict_peak_MB", "predict_bound_MB", "fit_vs_default",
                     "gpu_fit_peak_MB", "within_bound"),
            description="peak RSS growth of every estimator's fit and predict × budget, against the bound")


# --------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="small", choices=tuple(SCALES))
    ap.add_argument("--device", default="cpu", choices=("cpu", "emulated"))
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--datasets", default=None, help="comma separated (default: the scale's)")
    ap.add_argument("--budgets", default=None, help="comma separated: default, 256MB, ... (default: the scale's)")
    ap.add_argument("--params", default="demo", choices=("demo", "defaults"),
                    help="the registry demo's parameters, or the constructors' defaults")
    ap.add_argument("--constant", action="store_true", help="measure the growth of a trivial fit and predict")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per point (default: none)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--markdown", default=None, metavar="JSON",
                    help="print the rows of a --json file as a Markdown table (nothing is measured)")
    ap.add_argument("--search", default=None, metavar="GRID",
                    help="measure a GridSearchCV over this JSON grid (e.g. '{\"gamma\": [1, 2], \"C\": [1, 8, 64]}') "
                         "of each --estimators, on --rows rows of each --datasets, per --budgets and --n-jobs")
    ap.add_argument("--dask", action="store_true",
                    help="measure each --estimators' fit on a Dask array of each --datasets (all training rows, "
                         "10,000-row chunks) on a 1-worker LocalCluster, per --budgets: the worker's peak")
    ap.add_argument("--rows", type=int, default=20000, help="training rows of a --search (default 20,000)")
    ap.add_argument("--n-jobs", default="1,-1", help="comma separated n_jobs of a --search (default 1,-1)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        spec = None if args.child == "blas" else json.loads(args.child)
        run = child_blas if spec is None else search_child if spec.get("search") else \
            dask_child if spec.get("dask") else outputs_child if spec.get("outputs") else child
        print(json.dumps(run() if spec is None else run(spec)))
        return 0
    if args.markdown:
        print(markdown_table(json.loads(Path(args.markdown).read_text())))
        return 0
    print(f"load average before: {load_average()}", flush=True)
    if args.search:
        rows = measure_searches(args, json.loads(args.search))
    elif args.dask:
        rows = measure_dask(args)
    elif args.constant:
        rows = measure_constant()
        print(f"{'BLAS':<16} first 2000 x 2000 product {rows[0]['fit_MB']:6.1f} MB")
        for r in rows[1:]:
            print(f"{r['estimator']:<16} trivial fit {r['fit_MB']:6.1f} MB  predict {r['predict_MB']:6.1f} MB")
        trivial = max(max(r["fit_MB"], r["predict_MB"]) for r in rows[1:])
        print(f"largest trivial fit or predict {trivial:.1f} MB + BLAS {rows[0]['fit_MB']:.1f} MB = "
              f"{trivial + rows[0]['fit_MB']:.1f} MB; CONSTANT_BYTES = {CONSTANT_BYTES / MB:.0f} MB")
    else:
        split = (lambda s: [v for v in s.split(",") if v] if s else None)
        print(HEADER, flush=True)
        rows = measure_grid(grid(args.scale, estimators=split(args.estimators), datasets=split(args.datasets),
                                 budgets=split(args.budgets), device=args.device, params=args.params),
                            log=lambda s: print(s, flush=True), timeout=args.timeout)
        print(f"MB = 10^6 bytes; bound = budget + inputs + model (fit) / result (predict) + "
              f"{CONSTANT_BYTES / MB:.0f} MB; ×def: fit time / the default budget's")
    print(f"load average after: {load_average()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
