"""The benchmark report: tables and figures of ONE run, read from the record schema.

    python bench/report.py                    # the latest run in bench/results/records.jsonl
    python bench/report.py --run-id 20261126T174018Z-d80ea6
    python -m bench --all --scale small --report      # run, then report that run

Reads :class:`bench.harness.Record` lines (fixed field names; nothing is
guessed) and keeps the records of one ``run_id``, so a figure never mixes
runs of different days or loads.  Writes ``REPORT.md`` beside the figures:

* ``<case>_<dataset>_acc_vs_time.png``: test accuracy against fit time, one
  marker per method and a legend (points of one method joined in the order of
  the parameter they sweep);
* ``<case>_<dataset>_time_vs_<param>.png`` where a case sweeps the rows (fit time against n);
* ``<case>_<dataset>_acc_vs_<param>.png`` for studies: accuracy against the
  studied parameter, one marker per method, references (records without the
  parameter, e.g. SVC) as dashed lines;
* ``all_<dataset>_acc_vs_time.png``: every case of the run on that data set.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)  # run as a script: bench/dask.py must not shadow the dask package (an importer keeps its path)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cases as _cases  # noqa: E402,F401  (registers the cases: their figure kinds)
from bench.harness import REGISTRY, RESULTS, Record, read_records, run_script  # noqa: E402

HERE = ROOT / "bench"

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def run_benchmark(name: str, scale: str, device: str, *, echo: bool = True) -> dict:
    """``bench/<name>.py``'s ``main(["--scale", scale, "--device", device])`` run in this process
    (for ``bench/gpu_suite.py``): ``{"name", "status", "seconds", "stdout", "traceback"}``."""
    return run_script(HERE / f"{name}.py", ["--scale", scale, "--device", device], echo=echo)


# --------------------------------------------------------------------------- selection
def select_run(records: list[Record], run_id: str | None = None) -> list[Record]:
    """The records of ``run_id`` (default: the run of the last record in the file)."""
    if not records:
        return []
    rid = run_id or records[-1].run_id
    chosen = [r for r in records if r.run_id == rid]
    if not chosen:
        raise SystemExit(f"no records of run {rid!r}; runs: {sorted({r.run_id for r in records})}")
    return chosen


def by_key(records: Iterable[Record], *keys: str) -> dict[tuple, list[Record]]:
    """Records grouped by the values of the given fields, in first-seen order."""
    out: dict[tuple, list[Record]] = {}
    for r in records:
        out.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
    return out


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _sweep_key(r: Record) -> tuple:
    return tuple(sorted((k, v) for k, v in r.params.items() if _num(v)))


# --------------------------------------------------------------------------- figures
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(methods: list[str]) -> dict[str, dict]:
    import matplotlib

    colors = matplotlib.colormaps["tab10"].colors
    return {m: {"marker": MARKERS[i % len(MARKERS)], "color": colors[i % len(colors)]}
            for i, m in enumerate(methods)}


def _legend(ax: Any, n: int) -> None:
    if n > 6:  # outside the axes: never over the points
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize=8, loc="best")


def _save(plt: Any, fig: Any, ax: Any, title: str, n_labels: int, path: Path) -> Path:
    """Grid, title and legend, then write the PNG and close the figure."""
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=9)
    _legend(ax, n_labels)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _title(run: list[Record], what: str) -> str:
    r = run[0]
    return f"{what}\n{r.scale} scale, {r.device}{(' (' + r.host['gpu'] + ')') if r.host.get('gpu') else ''}, " \
           f"run {r.run_id}"


def plot_acc_vs_time(records: list[Record], path: Path, title: str, label_of=lambda r: r.method) -> Path | None:
    """Accuracy (%) against fit time (log), one marker per label, joined within a label."""
    pts = [r for r in records if _num(r.fit_s) and r.fit_s > 0 and _num(r.accuracy)]
    if not pts:
        return None
    plt = _pyplot()
    groups: dict[str, list[Record]] = {}
    for r in pts:
        groups.setdefault(label_of(r), []).append(r)
    style = _style(list(groups))
    fig, ax = plt.subplots(figsize=(7.5 if len(groups) > 6 else 6.4, 4.4))
    for label, rs in groups.items():
        rs = sorted(rs, key=_sweep_key)
        ax.plot([r.fit_s for r in rs], [100 * r.accuracy for r in rs], linestyle="-" if len(rs) > 1 else "none",
                linewidth=0.8, markersize=6, label=label, **style[label])
    _log_x(ax)
    ax.set_xlabel("fit time (s, log scale)")
    ax.set_ylabel("test accuracy (%)")
    return _save(plt, fig, ax, title, len(groups), path)


def plot_acc_vs_param(records: list[Record], param: str, path: Path, title: str) -> Path | None:
    """Accuracy (%) against ``params[param]``: one marker per method (every seed a point, the mean
    a line); records without the parameter are drawn as dashed reference lines."""
    swept = [r for r in records if _num(r.params.get(param)) and _num(r.accuracy)]
    if not swept:
        return None
    refs = [r for r in records if param not in r.params and _num(r.accuracy)]
    plt = _pyplot()
    groups = by_key(swept, "method")
    style = _style([m for (m,) in groups] + [r.method for r in refs])
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for (method,), rs in groups.items():
        xs = sorted({r.params[param] for r in rs})
        means = [100 * sum(r.accuracy for r in rs if r.params[param] == x) /
                 sum(1 for r in rs if r.params[param] == x) for x in xs]
        st = style[method]
        ax.plot([r.params[param] for r in rs], [100 * r.accuracy for r in rs], linestyle="none", alpha=0.5,
                marker=st["marker"], color=st["color"])
        ax.plot(xs, means, linewidth=1.0, label=f"{method} (points: seeds, line: mean)", **st)
    for r in refs:
        ax.axhline(100 * r.accuracy, linestyle="--", linewidth=1.0, color=style[r.method]["color"],
                   label=f"{r.method}: {100 * r.accuracy:.2f}%")
    ax.set_xlabel(param)
    ax.set_ylabel("test accuracy (%)")
    if min(r.params[param] for r in swept) > 0 and \
            max(r.params[param] for r in swept) / min(r.params[param] for r in swept) > 20:
        _log_x(ax)
    return _save(plt, fig, ax, title, len(groups) + len(refs), path)


def plot_time_vs_param(records: list[Record], param: str, path: Path, title: str) -> Path | None:
    """Fit time against ``params[param]`` (log-log), one marker per method, joined within a method."""
    pts = [r for r in records if _num(r.params.get(param)) and r.params[param] > 0 and _num(r.fit_s)
           and r.fit_s > 0]
    if not pts:
        return None
    plt = _pyplot()
    groups = by_key(pts, "method")
    style = _style([m for (m,) in groups])
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for (method,), rs in groups.items():
        rs = sorted(rs, key=lambda r: r.params[param])
        ax.plot([r.params[param] for r in rs], [r.fit_s for r in rs], linestyle="-" if len(rs) > 1 else "none",
                linewidth=0.8, markersize=6, label=method, **style[method])
    _log_x(ax)
    ax.set_yscale("log")
    ax.set_xlabel(f"{param} (log scale)")
    ax.set_ylabel("fit time (s, log scale)")
    return _save(plt, fig, ax, title, len(groups), path)


def _log_x(ax: Any) -> None:
    """A log x axis labelled 0.01, 0.02, 0.05, 0.1 ... (no crowded minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1000 else f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _all_label(records: list[Record]):
    """Labels for a figure across cases: the case only where a method comes from several, the
    training rows only where they differ."""
    cases_of: dict[str, set] = {}
    for r in records:
        cases_of.setdefault(r.method, set()).add(r.case)
    several_n = len({r.n_train for r in records}) > 1

    def label(r: Record) -> str:
        parts = [r.case] if len(cases_of[r.method]) > 1 else []
        if several_n and r.n_train is not None:
            parts.append(f"n={r.n_train:,}")
        return f"{r.method} ({', '.join(parts)})" if parts else r.method

    return label


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s).strip("_") or "x"


def make_figures(run: list[Record], out: Path) -> dict[str, list[Path]]:
    """Every figure of one run: {case (or "all"): [paths]}."""
    try:
        _pyplot()
    except ImportError:
        print("matplotlib is not installed: the report has tables only", file=sys.stderr)
        return {}
    out.mkdir(parents=True, exist_ok=True)
    figs: dict[str, list[Path]] = {}
    for (case, dataset), rs in by_key(run, "case", "dataset").items():
        kinds = REGISTRY[case].figure if case in REGISTRY else "acc_vs_time"
        for kind in (kinds or "").split(","):
            if kind.startswith("acc_vs_param:"):
                param = kind.split(":", 1)[1]
                p = plot_acc_vs_param(rs, param, out / f"{case}_{_slug(dataset)}_acc_vs_{_slug(param)}.png",
                                      _title(run, f"{case}: {dataset}, test accuracy vs {param}"))
            elif kind.startswith("time_vs_param:"):
                param = kind.split(":", 1)[1]
                p = plot_time_vs_param(rs, param, out / f"{case}_{_slug(dataset)}_time_vs_{_slug(param)}.png",
                                       _title(run, f"{case}: {dataset}, fit time vs {param}"))
            elif kind == "acc_vs_time":
                p = plot_acc_vs_time(rs, out / f"{case}_{_slug(dataset)}_acc_vs_time.png",
                                     _title(run, f"{case}: {dataset}, test accuracy vs fit time"))
            else:
                continue
            if p:
                figs.setdefault(case, []).append(p)
    timed = [r for r in run if REGISTRY.get(r.case) is None
             or "acc_vs_time" in (REGISTRY[r.case].figure or "").split(",")]
    for (dataset,), rs in by_key(timed, "dataset").items():
        cases = {r.case for r in rs}
        if len(cases) < 2:
            continue
        p = plot_acc_vs_time(rs, out / f"all_{_slug(dataset)}_acc_vs_time.png",
                             _title(run, f"{dataset}: every case of the run, test accuracy vs fit time"),
                             label_of=_all_label(rs))
        if p:
            figs.setdefault("all", []).append(p)
    return figs


# --------------------------------------------------------------------------- markdown
COLUMNS = ("method", "dataset", "params", "n_train", "n_test", "fit_s", "predict_s", "accuracy", "objective")


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    return str(v).replace("|", "\\|")


def md_table(records: list[Record], extra: tuple = ()) -> str:
    """The records as a Markdown table: the fixed :data:`COLUMNS`, then the ``extra`` keys named."""
    lines = ["| " + " | ".join(COLUMNS + tuple(extra)) + " |", "|" + "---|" * (len(COLUMNS) + len(extra))]
    for r in records:
        cells = [_fmt(getattr(r, c)) for c in COLUMNS] + [_fmt(r.extra.get(k)) for k in extra]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(run: list[Record], figs: dict[str, list[Path]], path: Path) -> Path:
    """``REPORT.md`` for one run: the machine, then per case its table and figures."""
    first = run[0]
    host = {k: v for k, v in first.host.items() if k not in ("load_before", "load_after", "quiet")}
    lines = ["# gpuksvm benchmark report", "",
             f"- run `{first.run_id}`, scale `{first.scale}`, device **{first.device}**"
             f"{' (' + first.host['gpu'] + ')' if first.host.get('gpu') else ''}",
             f"- machine: {json.dumps(host)}",
             "- times: wall clock, median of the timed fits (`fit_times_s` in the records); on a shared "
             "machine compare within one run only.", ""]
    lines += ["| case | records | machine during the case |", "|---|---|---|"]
    for (case,), rs in by_key(run, "case").items():
        lines.append(f"| {case} | {len(rs)} | {rs[0].host.get('quiet', '')} |")
    lines.append("")
    if figs.get("all"):
        lines += ["## Every case, accuracy vs fit time", "", *[f"![{p.stem}]({p.name})" for p in figs["all"]], ""]
    for (case,), rs in by_key(run, "case").items():
        desc = REGISTRY[case].description if case in REGISTRY else ""
        lines += [f"## {case}", "", desc, "", md_table(rs, REGISTRY[case].columns if case in REGISTRY else ()), ""]
        lines += [f"![{p.stem}]({p.name})" for p in figs.get(case, [])] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", default=None, help="JSON-lines file (default bench/results/records.jsonl)")
    ap.add_argument("--run-id", default=None, help="the run to report (default: the latest in the file)")
    ap.add_argument("--out-dir", default=None, help="where REPORT.md and the figures go (default bench/results)")
    args = ap.parse_args(argv)
    out = Path(args.out_dir) if args.out_dir else RESULTS
    run = select_run(read_records(Path(args.records) if args.records else None), args.run_id)
    if not run:
        raise SystemExit("no benchmark records: run `python -m bench NAME` first")
    figs = make_figures(run, out)
    path = write_report(run, figs, out / "REPORT.md")
    print(f"report of run {run[0].run_id} written to {path}")
    for ps in figs.values():
        for p in ps:
            print(f"  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
