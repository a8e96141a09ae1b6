"""Run every benchmark and write ``bench/results/REPORT.md`` with tables and PNG plots.

    python bench/report.py [--scale small|paper] [--device auto|cpu|gpu]
                           [--only llsvm,cvm] [--no-run] [--no-demo]

1. Each ``bench/<name>.py`` (every script with a ``main(argv=None)``, except
   this one, ``gpu_suite.py`` and helpers starting with ``_``) is run in this
   process as ``main(["--scale", S, "--device", D])``; its printed table is
   captured and its ``bench/results/<name>.json`` read back.  A failing
   benchmark is reported (with its traceback) and the others go on.
2. The demo (:mod:`gpuksvm.cli.demo`: every method and the linear / exact kernel
   SVM baselines on ijcnn1) is run at the matching size (``small``: the CPU
   demo sizes; ``paper``: the full training and test sets) and saved as
   ``bench/results/demo.json``.
3. Plots (PNG, beside the report): test error against the number of landmarks,
   training time against n, and accuracy against training time for all
   methods and baselines — drawn from every result table whose columns fit
   (see :func:`find_curves`), with the device in every title.
4. ``REPORT.md``: the machine, device and scale, a run summary, the demo table,
   then one section per benchmark with its tables and plots.

``--no-run`` rebuilds the report from the JSON files already in
``bench/results`` (e.g. those a GPU session brought back).  Timings taken on a
shared machine are noisy: the report says where and when they were taken.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.util
import io
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SKIP = {"report", "gpu_suite"}

for _p in (ROOT, HERE):  # run from a checkout without installing; the bench helpers
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))
from _timing import RESULTS, write_json  # noqa: E402

# column names the plots understand (first match wins)
K_KEYS = ("n_landmarks", "landmarks", "k", "rank", "budget")
N_KEYS = ("n_train", "n", "n_samples", "rows")
TIME_KEYS = ("fit_s", "train_s", "fit_time", "train_time", "time_s", "seconds", "time", "median_s")
ACC_KEYS = ("accuracy", "test_accuracy", "acc", "test_acc")
ERR_KEYS = ("error", "test_error", "err", "error_rate")
LABEL_KEYS = ("method", "estimator", "variant", "solver", "name", "config", "model")
GROUP_KEYS = ("method", "variant", "solver", "landmarks_init", "sample_size", "device", "dataset",
              "dtype", "loss", "config")


# --------------------------------------------------------------------------- running
def discover(only: Iterable[str] | None = None) -> list[str]:
    """Benchmark script names in ``bench/`` (those defining ``main``)."""
    names = []
    for p in sorted(HERE.glob("*.py")):
        name = p.stem
        if name.startswith("_") or name in SKIP:
            continue
        if "def main(" not in p.read_text(errors="replace"):
            continue
        names.append(name)
    if only:
        wanted = [o for o in only if o]
        missing = [o for o in wanted if o not in names]
        if missing:
            raise SystemExit(f"no benchmark named {missing}; have {names}")
        names = [n for n in names if n in wanted]
    return names


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Tee(io.TextIOBase):
    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


def run_benchmark(name: str, scale: str, device: str, *, echo: bool = True) -> dict:
    """Run ``bench/<name>.py``'s ``main`` and return its status, time and printed output."""
    buf = io.StringIO()
    out = _Tee(buf, sys.stdout) if echo else buf
    t0 = time.perf_counter()
    status, tb = "ok", None
    with contextlib.redirect_stdout(out):
        try:
            rc = _load(name).main(["--scale", scale, "--device", device])
            if isinstance(rc, int) and rc != 0:
                status = f"exit {rc}"
        except SystemExit as exc:  # argparse or an explicit exit
            if exc.code not in (0, None):
                status, tb = f"exit {exc.code}", traceback.format_exc()
        except Exception:  # noqa: BLE001 - report it and go on with the next benchmark
            status, tb = "FAILED", traceback.format_exc()
            if echo:
                print(tb, file=sys.stderr)
    return {"name": name, "status": status, "seconds": time.perf_counter() - t0,
            "stdout": buf.getvalue(), "traceback": tb}


def run_demo(scale: str, device: str) -> dict:
    from gpuksvm.cli.demo import format_table, run_demo as _run

    sizes = {"n_train": "default", "n_test": "default"} if scale == "small" else \
        {"n_train": None, "n_test": None, "svc_max_train": None}
    result = _run(device=device, progress=False, **sizes)
    result["table"] = format_table(result)
    write_json("demo", result)
    print(result["table"])
    return result


# --------------------------------------------------------------------------- reading results
def load_results(names: Iterable[str]) -> dict[str, dict]:
    out = {}
    for name in names:
        p = RESULTS / f"{name}.json"
        if p.exists():
            try:
                out[name] = json.loads(p.read_text())
            except json.JSONDecodeError as exc:
                out[name] = {"_error": f"{p.name} does not parse: {exc}"}
    return out


def tables_of(payload: Any, prefix: str = "") -> list[tuple[str, list[dict]]]:
    """Every list of row dicts inside a result payload, with its key path."""
    found: list[tuple[str, list[dict]]] = []
    if isinstance(payload, list) and payload and all(isinstance(r, dict) for r in payload):
        scalar = [r for r in payload if any(not isinstance(v, (dict, list)) for v in r.values())]
        if scalar:
            found.append((prefix or "rows", payload))
            # rows may themselves carry nested tables (e.g. a per-k curve per method)
        for i, r in enumerate(payload):
            for k, v in r.items():
                if isinstance(v, (list, dict)):
                    found += tables_of(v, f"{prefix}[{i}].{k}")
        return found
    if isinstance(payload, dict):
        if prefix and all(not isinstance(v, (list, dict)) for v in payload.values()) \
                and _first(TIME_KEYS, payload) and (_first(ACC_KEYS, payload) or _first(ERR_KEYS, payload)):
            return [(prefix, [payload])]  # a single result row (e.g. a baseline)
        for k, v in payload.items():
            if k in ("machine",):
                continue
            found += tables_of(v, f"{prefix}.{k}" if prefix else k)
    return found


def _first(keys: Iterable[str], row: dict) -> str | None:
    for k in keys:
        if k in row and _is_num(row[k]):
            return k
    return None


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _group_key(rows: list[dict], exclude: set[str]) -> str | None:
    for g in GROUP_KEYS:
        if g in exclude:
            continue
        vals = {str(r.get(g)) for r in rows if g in r}
        if len(vals) > 1:
            return g
    return None


def find_curves(rows: list[dict]) -> list[dict]:
    """Which plots a table supports: error-vs-k, time-vs-n and accuracy-vs-time."""
    if not rows:
        return []
    keys = set().union(*(r.keys() for r in rows))
    sample = {k: next((r[k] for r in rows if k in r), None) for k in keys}
    curves = []
    acc = _first(ACC_KEYS, sample)
    err = _first(ERR_KEYS, sample)
    tkey = _first(TIME_KEYS, sample)
    kkey = _first(K_KEYS, sample)
    nkey = _first(N_KEYS, sample)
    if kkey and (err or acc):
        ks = {r.get(kkey) for r in rows}
        if len(ks) > 1:
            curves.append({"kind": "error_vs_k", "x": kkey, "y": err or acc, "acc": err is None,
                           "time": tkey, "group": _group_key(rows, {kkey})})
    if nkey and tkey:
        ns = {r.get(nkey) for r in rows}
        if len(ns) > 1:
            curves.append({"kind": "time_vs_n", "x": nkey, "y": tkey, "group": _group_key(rows, {nkey})})
    if tkey and (acc or err):
        label = next((k for k in LABEL_KEYS if k in keys), None)
        curves.append({"kind": "acc_vs_time", "x": tkey, "y": acc or err, "acc": acc is not None,
                       "label": label})
    return curves


def _series(rows: list[dict], x: str, y: str, group: str | None):
    groups: dict[str, list[tuple[float, float, dict]]] = {}
    for r in rows:
        if not (_is_num(r.get(x)) and _is_num(r.get(y))):
            continue
        groups.setdefault(str(r.get(group)) if group else "", []).append((r[x], r[y], r))
    for g in groups:
        groups[g].sort(key=lambda t: t[0])
    return groups


def _dataset_of(row: dict, table: str, bench: str) -> str:
    if isinstance(row.get("dataset"), str):
        return row["dataset"]
    from gpuksvm.datasets import DATASETS

    for part in table.replace("[", ".").split("."):
        if part in DATASETS or part in ("checkerboard", "two_sines", "two_spheres", "digits"):
            return part
    return bench


def _acc_points(rows: list[dict], curve: dict, prefix: str = "") -> list[dict]:
    pts = []
    for r in rows:
        t, v = r.get(curve["x"]), r.get(curve["y"])
        if not (_is_num(t) and _is_num(v)) or t <= 0:
            continue
        acc = v if curve["acc"] else 1.0 - v
        if acc > 1.0:  # given in percent
            acc /= 100.0
        parts = [str(r[k]) for k in LABEL_KEYS if k in r][:1]
        if isinstance(r.get("dataset"), str):
            parts.append(r["dataset"])
        for extra in K_KEYS + N_KEYS:
            if extra in r and _is_num(r[extra]):
                parts.append(f"{extra}={r[extra]:g}")
                break
        pts.append({"label": prefix + " ".join(parts), "time": float(t), "accuracy": float(acc)})
    return pts


# --------------------------------------------------------------------------- plotting
def make_plots(results: dict[str, dict], demo: dict | None, device_note: str) -> dict[str, list[Path]]:
    """Draw the PNGs; returns {section: [paths]}."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: the report has tables only", file=sys.stderr)
        return {}
    from gpuksvm.plot import plot_accuracy_vs_time, plot_error_vs_k, plot_time_vs_n

    plots: dict[str, list[Path]] = {}
    all_points: list[dict] = []
    for name, payload in results.items():
        dev = (payload.get("machine") or {}).get("device", device_note) if isinstance(payload, dict) else device_note
        for tname, rows in tables_of(payload):
            for ci, curve in enumerate(find_curves(rows)):
                fig, ax = plt.subplots(figsize=(6, 4.2))
                title = f"{name}: {tname} ({dev})"
                if curve["kind"] == "error_vs_k":
                    for g, pts in _series(rows, curve["x"], curve["y"], curve["group"]).items():
                        ks = [p[0] for p in pts]
                        vals = [p[1] for p in pts]
                        errs = [1 - (v / 100 if v > 1 else v) for v in vals] if curve["acc"] else \
                            [v / 100 if v > 1 else v for v in vals]
                        plot_error_vs_k(ks, errs, ax=ax, label=g or None)
                elif curve["kind"] == "time_vs_n":
                    for g, pts in _series(rows, curve["x"], curve["y"], curve["group"]).items():
                        plot_time_vs_n([p[0] for p in pts], [p[1] for p in pts], ax=ax, label=g or None)
                else:
                    pts = _acc_points(rows, curve)
                    if not pts:
                        plt.close(fig)
                        continue
                    plot_accuracy_vs_time(pts, ax=ax)
                    for r, p in zip([r for r in rows if _acc_row_ok(r, curve)],
                                    _acc_points(rows, curve, prefix=f"{name}: ")):
                        all_points.append(dict(p, dataset=_dataset_of(r, tname, name)))
                ax.set_title(title, fontsize=9)
                path = RESULTS / f"{name}_{_slug(tname)}_{curve['kind']}_{ci}.png"
                fig.tight_layout()
                fig.savefig(path, dpi=110)
                plt.close(fig)
                plots.setdefault(name, []).append(path)
    if demo and demo.get("rows"):
        pts = [{"label": r["method"], "time": r["fit_s"], "accuracy": r["accuracy"]}
               for r in demo["rows"] if "error" not in r and r.get("fit_s", 0) > 0]
        if pts:
            fig, ax = plt.subplots(figsize=(6, 4.2))
            plot_accuracy_vs_time(pts, ax=ax, title=f"ijcnn1 demo: accuracy vs training time ({demo['device']})")
            path = RESULTS / "demo_acc_vs_time.png"
            fig.tight_layout()
            fig.savefig(path, dpi=110)
            plt.close(fig)
            plots.setdefault("demo", []).append(path)
            all_points = [dict(p, label=f"demo: {p['label']}", dataset="ijcnn1") for p in pts] + all_points
    by_dataset: dict[str, list[dict]] = {}
    for p in all_points:
        by_dataset.setdefault(p["dataset"], []).append(p)
    for ds, pts in sorted(by_dataset.items()):
        if len({p["label"] for p in pts}) < 2:
            continue
        fig, ax = plt.subplots(figsize=(8, 5.5))
        plot_accuracy_vs_time(pts, ax=ax, title=f"{ds}: accuracy vs training time, all methods and "
                                                f"baselines ({device_note})")
        path = RESULTS / f"all_{_slug(ds)}_acc_vs_time.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        plots.setdefault("all", []).append(path)
    return plots


def _acc_row_ok(r: dict, curve: dict) -> bool:
    t, v = r.get(curve["x"]), r.get(curve["y"])
    return _is_num(t) and _is_num(v) and t > 0


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s).strip("_")[:40] or "rows"


# --------------------------------------------------------------------------- markdown
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return f"({len(v)} items)"
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(rows: list[dict], max_rows: int = 60) -> str:
    cols: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in cols and not isinstance(v, (list, dict)):
                cols.append(k)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows[:max_rows]:
        lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |")
    if len(rows) > max_rows:
        lines.append(f"\n({len(rows) - max_rows} more rows in the JSON file)")
    return "\n".join(lines)


def _device_note(device: str) -> str:
    from gpuksvm.array import backend as bk

    try:
        dev = bk.resolve_device(device)
    except (ValueError, bk.DeviceUnavailableError):
        return f"{device} (unavailable)"
    if dev.is_gpu:
        try:
            sys.path.insert(0, str(HERE))
            from _timing import machine_info

            return f"{dev} ({machine_info(dev).get('gpu', 'GPU')})"
        except Exception:  # noqa: BLE001
            return str(dev)
    return "cpu"


def write_report(*, scale: str, device: str, runs: list[dict], results: dict[str, dict],
                 demo: dict | None, plots: dict[str, list[Path]], started: str) -> Path:
    try:
        sys.path.insert(0, str(HERE))
        from _timing import machine_info

        machine = machine_info(device)
    except Exception:  # noqa: BLE001 - e.g. an explicit GPU that is not there
        machine = {"device": device}
    lines = ["# gpuksvm benchmark report", "",
             f"- generated: {started} (UTC), scale `{scale}`, device setting `{device}` "
             f"→ **{_device_note(device)}** (each section names the device its numbers come from)",
             f"- machine: {json.dumps(machine)}",
             "- timings are wall-clock medians as each benchmark defines them; on a shared machine they "
             "are noisy — compare within one report only.", ""]
    if runs:
        lines += ["## Runs", "", "| benchmark | status | seconds |", "|---|---|---|"]
        lines += [f"| {r['name']} | {r['status']} | {r['seconds']:.1f} |" for r in runs]
        lines.append("")
    if "all" in plots:
        lines += ["## Accuracy vs training time (all methods and baselines)", "",
                  *[f"![{p.stem}]({p.name})" for p in plots["all"]], ""]
    if demo:
        lines += ["## Demo: every method on ijcnn1", "", "```", demo.get("table", ""), "```", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots.get("demo", [])] + [""]
    for name, payload in results.items():
        lines += [f"## {name}", ""]
        if isinstance(payload, dict) and "_error" in payload:
            lines += [payload["_error"], ""]
            continue
        dev = payload.get("machine", {}).get("device") if isinstance(payload, dict) else None
        if dev:
            lines += [f"device: {dev}", ""]
        notes = {k: v for k, v in payload.items() if not isinstance(v, (list, dict))} \
            if isinstance(payload, dict) else {}
        if notes:
            lines += ["- " + ", ".join(f"{k}: {_fmt(v)}" for k, v in notes.items()), ""]
        for tname, rows in tables_of(payload):
            lines += [f"### {tname}", "", md_table(rows), ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots.get(name, [])] + [""]
    for r in runs:
        if r.get("traceback"):
            lines += [f"## {r['name']}: failure", "", "```", r["traceback"].strip()[-4000:], "```", ""]
    path = RESULTS / "REPORT.md"
    path.write_text("\n".join(lines))
    return path


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="small", choices=["small", "paper"])
    ap.add_argument("--device", default="auto", help="auto, cpu or gpu (passed to every benchmark)")
    ap.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    ap.add_argument("--no-run", action="store_true", help="only rebuild the report from existing JSON")
    ap.add_argument("--no-demo", action="store_true", help="skip the ijcnn1 demo")
    args = ap.parse_args(argv)
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    RESULTS.mkdir(parents=True, exist_ok=True)
    names = discover(args.only.split(",") if args.only else None)
    runs = []
    if not args.no_run:
        for name in names:
            print(f"=== bench/{name}.py --scale {args.scale} --device {args.device}", flush=True)
            runs.append(run_benchmark(name, args.scale, args.device))
    demo = None
    if not args.no_demo and not args.only:
        if args.no_run and (RESULTS / "demo.json").exists():
            demo = json.loads((RESULTS / "demo.json").read_text())
        elif not args.no_run:
            print("=== demo", flush=True)
            try:
                demo = run_demo(args.scale, args.device)
            except Exception:  # noqa: BLE001
                runs.append({"name": "demo", "status": "FAILED", "seconds": 0.0,
                             "traceback": traceback.format_exc()})
    results = load_results(names)
    plots = make_plots(results, demo, _device_note(args.device))
    path = write_report(scale=args.scale, device=args.device, runs=runs, results=results, demo=demo,
                        plots=plots, started=started)
    print(f"report written to {path}")
    return 0 if all(r["status"] == "ok" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
