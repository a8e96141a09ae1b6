"""Peak host memory of an in-memory LLSVM fit and predict, in total and stage by stage.

Each measurement runs in a fresh Python process that imports the library and
loads the data first; the figures are growths above that point.

``peak``
    Linux VmHWM (the resident-set high-water mark, reset by writing ``5`` to
    ``/proc/self/clear_refs``; :class:`gpuksvm.cli.demo.PeakMemory`) over ``fit``,
    and reset again over ``predict`` of the test rows: exact, and
    no tracing overhead.  Also the feature matrix F's size (n × k in the
    working dtype), the inputs' size, the fit's objective and time.
``stages``
    Where the fit's peak comes from: :mod:`tracemalloc` (NumPy reports its
    buffers to it) with the library's stage functions wrapped; each row is
    the peak of the traced memory while the stage ran, above the traced
    memory when the fit (or predict) started.  Nested stages are indented.
    Tracing slows Python-level code; the figures are bytes, not times.

    python -m bench.memory_llsvm [--dataset ijcnn1] [--n-landmarks 1000] [--device cpu] [--budget 200MB]
                                 [--spectrum supervised]
                                 [--save-decision D.npy] [--json out.json]

``--synthetic N`` uses N training and N/2 test rows of ``bench/memory.py``'s 22-feature
synthetic problem instead of a dataset file (no data directory needed).  The whole-fit peak of
every estimator under every budget, against the bound: ``bench/memory.py``, whose loaders,
fit/predict meter and child runner this script uses.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):          # run as a file: the repository root, not bench/, goes first
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.memory import MB, load_data, peak_fit_predict, run_module  # noqa: E402
from gpuksvm.array import backend as bk  # noqa: E402

# (module, attribute[, method]) of the stages the ``stages`` child wraps; missing ones are skipped
STAGES = [
    ("gpuksvm.estimators.llsvm", "LLSVM", "fit"),
    ("gpuksvm.estimators.llsvm", "validate_X_y"),
    ("gpuksvm.estimators.llsvm", "sample_rows_for_map"),
    ("gpuksvm.estimators.llsvm", "build_map"),
    ("gpuksvm.solvers.nystrom.maps", "NystromMap", "transform"),
    ("gpuksvm.estimators.linear_svm", "LinearSVM", "fit"),
    ("gpuksvm.estimators.linear_svm", "validate_X_y"),
    ("gpuksvm.estimators.linear_svm", "max_row_sq_norm"),
    ("gpuksvm.estimators.linear_svm", "newton_squared_hinge"),
    ("gpuksvm.solvers.linear.newton_memory", "newton_solve"),
    ("gpuksvm.solvers.linear.newton_memory", "DesignOracle", "evaluate"),
    ("gpuksvm.solvers.linear.newton_memory", "DesignOracle", "grad0_norm"),
    ("gpuksvm.solvers.linear.newton_memory", "DesignOracle", "direction"),
    ("gpuksvm.solvers.linear.newton_memory", "DesignOracle", "line_start"),
    ("gpuksvm.solvers.linear.newton_memory", "DesignOracle", "line_minimize"),
    ("gpuksvm.solvers.linear.newton_memory", "DesignOracle", "line_accept"),
    ("gpuksvm.solvers.linear.problem", "Design", "signed_gram"),
    ("gpuksvm.estimators.llsvm", "LLSVM", "decision_function"),
    ("gpuksvm.estimators.llsvm", "kernel_matvec"),
]


def _load(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    if args.synthetic:
        return load_data("synthetic", int(args.synthetic), int(args.synthetic) // 2)
    return load_data(args.dataset, None, None)


def _estimator(args: argparse.Namespace) -> Any:
    from gpuksvm import LLSVM, set_config

    if args.budget:
        set_config(cpu_memory_budget=args.budget)
    return LLSVM(n_landmarks=args.n_landmarks, spectrum=args.spectrum, device=args.device, random_state=0)


# --------------------------------------------------------------------------- children
def child_peak(args: argparse.Namespace) -> dict:
    """Fit, then predict, each under its own reset VmHWM (:class:`gpuksvm.cli.demo.PeakMemory`)."""
    X, y, Xt, yt = _load(args)
    est = _estimator(args)
    m = peak_fit_predict(est, X, y, Xt)
    if args.save_decision:
        np.save(args.save_decision, np.asarray(est.decision_function(Xt)))
    k = int(est.n_landmarks_)
    itemsize = np.dtype(est.map_.dtype).itemsize
    return {"n": int(X.shape[0]), "n_test": int(Xt.shape[0]), "k": k, "dtype": str(est.map_.dtype),
            "F_MB": X.shape[0] * k * itemsize / MB, "inputs_MB": (X.nbytes + y.nbytes) / MB,
            "test_inputs_MB": Xt.nbytes / MB,
            "fit_peak_MB": m["fit"].peak_bytes / MB, "predict_peak_MB": m["predict"].peak_bytes / MB,
            "fit_s": m["fit_s"], "objective": [float(v) for v in est.svm_.objective_],
            "n_iter": int(est.n_iter_), "solver": est.svm_.solver_, "streamed": est.memory_fallback_ == "streamed_features",
            "accuracy": float(np.mean(np.asarray(m["pred"]) == yt))}


class _TracedMeter:
    """Bytes NumPy and Python hold (:mod:`tracemalloc`)."""

    name = "traced"

    def start(self) -> None:
        tracemalloc.start()

    def stop(self) -> None:
        tracemalloc.stop()

    def current(self) -> int:
        return tracemalloc.get_traced_memory()[0]

    def peak(self) -> int:
        return tracemalloc.get_traced_memory()[1]

    def reset_peak(self) -> None:
        tracemalloc.reset_peak()

    def settle(self) -> None:
        pass


class _ResidentMeter:
    """The process's resident set: VmRSS, and VmHWM reset through ``/proc/self/clear_refs``."""

    name = "resident"

    def start(self) -> None:
        self.settle()

    def settle(self) -> None:
        """Free heap blocks go back to the system (as :class:`gpuksvm.cli.demo.PeakMemory` does), so
        a stage that reuses them still shows its growth."""
        bk.release_free_heap()

    def stop(self) -> None:
        pass

    def current(self) -> int:
        from gpuksvm.cli.demo import _proc_status

        return _proc_status("VmRSS") or 0

    def peak(self) -> int:
        from gpuksvm.cli.demo import _proc_status

        return _proc_status("VmHWM") or 0

    def reset_peak(self) -> None:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")


class _Tracer:
    """Wraps the stage functions; records each call's peak above the start of fit (or predict).

    Nested stages: a stage's peak is also its caller's, so the meter's peak is reset at each
    entry and exit and the callers keep the largest value seen while they ran.
    """

    def __init__(self, meter: Any) -> None:
        self.meter = meter
        self.rows: list[dict] = []     # one per stage name, in first-call order
        self._by_name: dict[str, dict] = {}
        self._stack: list[dict] = []   # frames: {"max": peak seen so far while the stage ran}
        self.origin = 0

    def begin(self) -> None:
        self.rows, self._by_name = [], {}
        self.meter.settle()
        self.origin = self.meter.current()
        self.meter.reset_peak()

    def wrap(self, name: str, fn: Any) -> Any:
        tracer, meter = self, self.meter

        def wrapped(*a: Any, **kw: Any) -> Any:
            cur, peak = meter.current(), meter.peak()
            if tracer._stack:
                tracer._stack[-1]["max"] = max(tracer._stack[-1]["max"], peak)
            row = tracer._by_name.get(name)
            if row is None:
                row = tracer._by_name[name] = {"stage": name, "depth": len(tracer._stack), "calls": 0,
                                               "peak_MB": 0.0}
                tracer.rows.append(row)
            meter.reset_peak()
            tracer._stack.append({"max": cur})
            try:
                return fn(*a, **kw)
            finally:
                frame = tracer._stack.pop()
                top = max(frame["max"], meter.peak())
                if tracer._stack:
                    tracer._stack[-1]["max"] = max(tracer._stack[-1]["max"], top)
                row["calls"] += 1
                row["peak_MB"] = max(row["peak_MB"], (top - tracer.origin) / MB)
                meter.reset_peak()

        return wrapped

    def install(self) -> None:
        for entry in STAGES:
            mod = importlib.import_module(entry[0])
            owner = getattr(mod, entry[1], None)
            if owner is None:
                continue
            if len(entry) == 3:
                fn = owner.__dict__.get(entry[2]) if isinstance(owner, type) else None
                if fn is None:
                    continue
                setattr(owner, entry[2], self.wrap(f"{entry[1]}.{entry[2]}", fn))
            else:
                setattr(mod, entry[1], self.wrap(f"{entry[1]} ({entry[0].rsplit('.', 1)[-1]})", owner))


def child_stages(args: argparse.Namespace) -> dict:
    """The peak of each stage of fit and of decision_function, traced or resident."""
    X, y, Xt, _ = _load(args)
    meter = _TracedMeter() if args.child == "traced" else _ResidentMeter()
    tracer = _Tracer(meter)
    tracer.install()
    est = _estimator(args)
    meter.start()
    tracer.begin()
    est.fit(X, y)
    fit_rows = tracer.rows
    tracer.begin()
    est.decision_function(Xt)
    meter.stop()
    return {"fit": fit_rows, "predict": tracer.rows}


# --------------------------------------------------------------------------- driver
def _run_child(mode: str, argv: list[str]) -> dict:
    return run_module("bench.memory_llsvm", ["--child", mode] + argv)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="ijcnn1")
    ap.add_argument("--synthetic", type=int, default=None, help="rows of a synthetic set instead")
    ap.add_argument("--n-landmarks", type=int, default=1000)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--spectrum", default="nystrom", help='"supervised": LLSVM2')
    ap.add_argument("--budget", default=None, help='set_config(cpu_memory_budget=...), e.g. "200MB"')
    ap.add_argument("--only", default="peak,stages", help="peak, stages or both (comma separated)")
    ap.add_argument("--save-decision", default=None, help="save the test decision values (.npy)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        fn = {"peak": child_peak, "traced": child_stages, "resident": child_stages}[args.child]
        print(json.dumps(fn(args)))
        return 0
    passed = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--json", args.json)]
    only = set(args.only.split(","))
    out: dict = {}
    if "peak" in only:
        r = out["peak"] = _run_child("peak", passed)
        bound = 2 * r["F_MB"] + r["inputs_MB"]
        print(f"{args.synthetic or args.dataset}: n={r['n']:,} k={r['k']} {r['dtype']}  F = {r['F_MB']:.0f} MB, "
              f"inputs {r['inputs_MB']:.1f} MB (2F + inputs = {bound:.0f} MB)")
        print(f"  fit peak growth (VmHWM)      {r['fit_peak_MB']:8.0f} MB  = {r['fit_peak_MB'] / r['F_MB']:.2f} F"
              f"  [{r['solver']}{', streamed' if r['streamed'] else ''}, {r['n_iter']} iterations, objective {r['objective']}, {r['fit_s']:.1f} s]")
        print(f"  predict {r['n_test']:,} rows (VmHWM)  {r['predict_peak_MB']:8.0f} MB"
              f"  [test inputs {r['test_inputs_MB']:.1f} MB, accuracy {r['accuracy']:.4%}]")
    if "stages" in only:
        stage_argv = [a for a in passed if a != "--save-decision" and not a.endswith(".npy")]
        traced, resident = (_run_child(mode, stage_argv) for mode in ("traced", "resident"))
        out["stages"] = {"traced": traced, "resident": resident}
        for part in ("fit", "predict"):
            print(f"  {part}: peak above the start of {part}, per stage (MB; resident: VmHWM reset per "
                  "stage; traced: tracemalloc, separate run)")
            print(f"    {'stage':<44} {'resident':>9} {'traced':>9}  calls")
            res = {row["stage"]: row for row in resident[part]}
            for row in traced[part]:
                rss = res.get(row["stage"], {}).get("peak_MB", float("nan"))
                print(f"    {'  ' * row['depth']}{row['stage']:<{44 - 2 * row['depth']}} {rss:9.1f} "
                      f"{row['peak_MB']:9.1f}  {row['calls']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
