"""Timing helpers shared by the benchmark scripts.

GPU code is timed with CUDA events after a warm-up (median of repeats); CPU code
with ``time.perf_counter``.  Peak host memory: :class:`gpuksvm.cli.demo.PeakMemory`.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from gpuksvm.array import backend as bk

# where write_json puts results: bench/results, or $GPUKSVM_BENCH_RESULTS (tests, emulated runs)
RESULTS = Path(os.environ.get("GPUKSVM_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")


def time_call(fn: Callable[[], Any], *, device: Any = "cpu", repeats: int = 3, warmup: int = 1) -> dict:
    """Median wall time of ``fn()`` (CUDA events on a GPU) and its last result."""
    dev = bk.resolve_device(device)
    times = []
    result = None
    for _ in range(warmup):
        result = fn()
    if dev.is_gpu:
        import cupy

        for _ in range(repeats):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            result = fn()
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "times_s": times, "result": result}


def machine_info(device: Any) -> dict:
    dev = bk.resolve_device(device)
    info = {"device": str(dev), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version()}
    if dev.is_gpu:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(dev.index)
        info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return info


def write_json(name: str, payload: dict, *, sections: Sequence[str] = ()) -> Path:
    """Write ``bench/results/<name>.json``.

    With ``sections`` (all the sections a script has), the sections of an
    existing file that ``payload`` lacks are kept when that file is for the
    same device and scale, so that runs of single sections (``--only``)
    accumulate into one result file.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    if sections and path.exists() and not set(sections) <= set(payload):
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {}
        if old.get("device") == payload.get("device") and old.get("scale") == payload.get("scale"):
            payload = {**{k: v for k, v in old.items() if k in sections}, **payload}
    path.write_text(json.dumps(payload, indent=2, default=float))
    return path


def print_table(rows: list[dict], columns: list[str]) -> None:
    """Print rows as an aligned plain-text table."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
