"""``python -m bench``: list, run and report the registered benchmark cases."""
from __future__ import annotations

import argparse
import sys
import time
import traceback

from . import cases as _cases  # noqa: F401  (registers the cases)
from .harness import DEVICES, REGISTRY, RECORDS_FILE, SCALES, new_run_id, run_case, write_records


def _resolve(device: str):
    import gpuksvm

    return gpuksvm.resolve_device("cuda" if device == "gpu" else device)


def list_cases() -> str:
    """One line per registered case: name, kind, scales and description."""
    width = max(len(n) for n in REGISTRY)
    return "\n".join(f"{c.name:{width}s}  {c.kind:9s}  [{','.join(c.scales)}]  {c.description}"
                     for c in REGISTRY.values())


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("names", nargs="*", metavar="NAME", help="registered cases to run (see --list)")
    ap.add_argument("--list", action="store_true", help="list the registered cases and exit")
    ap.add_argument("--all", action="store_true",
                    help="run every benchmark and script case that has --scale (studies: name them)")
    ap.add_argument("--scale", default="small", choices=SCALES)
    ap.add_argument("--device", default="auto", choices=DEVICES)
    ap.add_argument("--repeats", type=int, default=None, help="timed fits per point (default: the case's)")
    ap.add_argument("--out", default=None, help=f"JSON-lines file to append to (default bench/results/{RECORDS_FILE})")
    ap.add_argument("--report", action="store_true", help="write bench/results/REPORT.md and figures for this run")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.list:
        print(list_cases())
        return 0
    names = list(args.names)
    if args.all:
        names += [c.name for c in REGISTRY.values()
                  if c.kind in ("benchmark", "script") and args.scale in c.scales and c.name not in names]
    if not names:
        ap.error("name a case (python -m bench --list), or --all")
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        ap.error(f"no case named {unknown}; registered: {sorted(REGISTRY)}")
    missing = [n for n in names if args.scale not in REGISTRY[n].scales]
    if missing:
        ap.error(f"cases {missing} have no scale {args.scale!r}")
    device = _resolve(args.device)
    run_id = new_run_id()
    print(f"run {run_id}: {', '.join(names)} at scale {args.scale} on {device}", flush=True)
    failed = []
    path = None
    for name in names:
        print(f"=== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            records = list(run_case(REGISTRY[name], scale=args.scale, device=device, run_id=run_id,
                                    repeats=args.repeats))
        except Exception:  # noqa: BLE001 - report it and go on with the next case
            traceback.print_exc()
            failed.append(name)
            continue
        path = write_records(records, args.out)
        note = records[0].host.get("quiet", "") if records else ""
        print(f"    {len(records)} records, {time.perf_counter() - t0:.1f} s ({note}) -> {path}", flush=True)
    if args.report:
        from .report import main as report_main

        report_main(["--run-id", run_id] + (["--records", args.out] if args.out else []))
    print(f"run_id {run_id}" + (f"; FAILED: {failed}" if failed else ""))
    return 1 if failed else 0


def run_as_script(name: str, cases: tuple[str, ...], argv: list[str] | None) -> int:
    """Run ``cases`` with ``argv``'s options for ``bench/<name>.py`` (what ``bench/gpu_suite.py`` calls).

    The records go to ``<results>/<name>.jsonl`` (replaced) and, as one JSON
    document, to ``<results>/<name>.json``, where the suite collects its
    results; ``<results>`` is ``$GPUKSVM_BENCH_RESULTS`` when set at the call.
    """
    import json
    import os
    from pathlib import Path

    from .harness import RESULTS, read_records

    results = Path(os.environ.get("GPUKSVM_BENCH_RESULTS") or RESULTS)
    out = results / f"{name}.jsonl"
    out.unlink(missing_ok=True)
    rc = main([*cases, *(sys.argv[1:] if argv is None else argv), "--out", str(out)])
    records = [json.loads(r.to_json()) for r in read_records(out)]
    (results / f"{name}.json").write_text(json.dumps({"cases": list(cases), "records": records}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
