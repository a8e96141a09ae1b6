"""The benchmark harness: a registry of cases, one timing helper and one result schema.

A *case* (:class:`Case`) is a named benchmark: what it runs (a function of a
:class:`Context`) and its parameters at each scale (``tiny`` for tests,
``small`` for a CPU box, ``paper`` for the papers' sizes).  Running a case
yields :class:`Record` objects, one per fitted model, with fixed field names;
:func:`write_records` appends them as JSON lines to
``bench/results/records.jsonl`` and ``bench/report.py`` reads them back with
:func:`read_records`, without guessing column names.

Timing (:func:`measure`) is wall-clock time around the call, with the device
synchronised before the clock stops on a GPU, median of ``repeats`` after
``warmup`` untimed calls.  The machine's load average is recorded before and
after each run (:func:`host_facts`, :func:`quiet_note`): on a shared machine
the times are comparable within one run only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import importlib.util
import io
import json
import os
import platform
import statistics
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

SCALES = ("tiny", "small", "paper")
DEVICES = ("auto", "cpu", "gpu")
RESULTS = Path(os.environ.get("GPUKSVM_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
RECORDS_FILE = "records.jsonl"


# --------------------------------------------------------------------------- schema
@dataclass
class Record:
    """One fitted model of one benchmark run: the single result schema.

    Attributes
    ----------
    case : str
        The registered case that produced the record.
    method : str
        The method as the figures label it (``"LLSVM"``, ``"SVC (sklearn)"``).
    dataset : str
        Data set name (``"ijcnn1"``, ``"checkerboard"``).
    scale, device : str
        The scale the case ran at and the device it resolved to (``"cpu"``, ``"cuda:0"``).
    params : dict
        The parameters that distinguish this record from its siblings (γ, C, k, n, seed ...).
    fit_s, predict_s : float or None
        Median wall time of ``fit`` and of ``predict`` on the test rows, seconds.
    accuracy : float or None
        Test accuracy in [0, 1].
    objective : float or None
        The solver's objective or duality gap where the case reports one.
    n_train, n_test : int or None
        Training and test rows.
    fit_times_s : list of float
        Every timed fit (the median is ``fit_s``).
    extra : dict
        Case-specific scalars (support vectors, stop reason, check statistics).
    timestamp : str
        UTC time the record was made, ISO 8601.
    host : dict
        Machine facts (:func:`host_facts`): CPU count, platform, GPU name, load averages.
    run_id : str
        Identifier shared by every record of one ``python -m bench`` invocation.
    """

    case: str
    method: str
    dataset: str
    scale: str
    device: str
    params: dict = field(default_factory=dict)
    fit_s: float | None = None
    predict_s: float | None = None
    accuracy: float | None = None
    objective: float | None = None
    n_train: int | None = None
    n_test: int | None = None
    fit_times_s: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    timestamp: str = ""
    host: dict = field(default_factory=dict)
    run_id: str = ""

    def to_json(self) -> str:
        """The record as one JSON line (NumPy scalars converted)."""
        return json.dumps(dataclasses.asdict(self), default=_json_default, sort_keys=False)

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        """A record from a parsed JSON line; unknown fields are an error, missing ones default."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"not a benchmark record: unknown fields {sorted(unknown)}")
        return cls(**d)


FIELDS = tuple(f.name for f in dataclasses.fields(Record))


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def write_records(records: Iterable[Record], path: Path | None = None) -> Path:
    """Append records as JSON lines to ``path`` (default ``bench/results/records.jsonl``)."""
    path = Path(path) if path is not None else RESULTS / RECORDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for r in records:
            fh.write(r.to_json() + "\n")
    return path


def read_records(path: Path | None = None) -> list[Record]:
    """Every record of a JSON-lines file, in file order (missing file: none)."""
    path = Path(path) if path is not None else RESULTS / RECORDS_FILE
    if not path.exists():
        return []
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(Record.from_dict(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{i}: {exc}") from exc
    return out


def new_run_id() -> str:
    """A sortable run identifier: UTC time and a short random suffix."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- timing
@dataclass
class Timing:
    """What :func:`measure` returns: the median, every time and the last result."""

    median_s: float
    times_s: list
    result: Any


def synchronize(device: Any) -> None:
    """Wait for the GPU's queued work (no-op on the CPU)."""
    if getattr(device, "is_gpu", False):
        import cupy

        cupy.cuda.Device(device.index).synchronize()


def measure(fn: Callable[[], Any], *, device: Any = None, repeats: int = 1, warmup: int = 0) -> Timing:
    """Median wall time of ``fn()`` over ``repeats`` calls after ``warmup`` untimed ones.

    On a GPU the device is synchronised before each clock reading, so the time
    covers the work the call queued.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    result = None
    for _ in range(warmup):
        result = fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return Timing(statistics.median(times), times, result)


def load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def host_facts(device: Any) -> dict:
    """CPU count, platform, Python, the GPU's name (on a GPU) and the 1-minute load average."""
    facts = {"cpu_count": os.cpu_count(), "platform": platform.platform(),
             "python": platform.python_version(), "hostname": platform.node()}
    if getattr(device, "is_gpu", False):
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(device.index)["name"]
        facts["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    return facts


def quiet_note(load_before: list[float] | None, load_after: list[float] | None) -> str:
    """Whether the machine was quiet during a run: its 1-minute load against the CPU count."""
    if not load_before or not load_after:
        return "load average unknown"
    cpus = os.cpu_count() or 1
    peak = max(load_before[0], load_after[0])
    state = "quiet" if peak < 0.5 * cpus else ("busy" if peak > cpus else "shared")
    return f"{state}: 1-min load {load_before[0]:g} -> {load_after[0]:g} on {cpus} CPUs"


def to_host(a: Any) -> np.ndarray:
    """A NumPy copy of a NumPy or CuPy array."""
    return np.asarray(a.get() if hasattr(a, "get") else a)


def accuracy(pred: Any, y: Any) -> float:
    return float(np.mean(to_host(pred) == to_host(y)))


# --------------------------------------------------------------------------- cases
@dataclass
class Context:
    """What a case's function receives: scale, device, its scale's parameters and a record maker."""

    case: "Case"
    scale: str
    device: Any                       # a resolved gpuksvm.Device
    params: dict
    run_id: str
    host: dict
    repeats: int = 1
    warmup: int = 0
    log: Callable[[str], None] = print

    def record(self, *, method: str, dataset: str, **fields: Any) -> Record:
        """A :class:`Record` of this run with the common fields filled in."""
        return Record(case=self.case.name, method=method, dataset=dataset, scale=self.scale,
                      device=str(self.device), timestamp=utc_now(), host=self.host, run_id=self.run_id,
                      **fields)

    def to_device(self, X: Any) -> Any:
        if getattr(self.device, "is_gpu", False):
            import cupy

            with cupy.cuda.Device(self.device.index):
                return cupy.asarray(X)
        return X

    def fit_predict(self, est: Any, X: Any, y: Any, Xt: Any, yt: Any, *, method: str, dataset: str,
                    params: dict, extra: Callable[[Any], dict] | None = None,
                    repeats: int | None = None) -> Record:
        """Time ``est.fit(X, y)`` and ``est.predict(Xt)``, score it and make its record."""
        t = measure(lambda: est.fit(X, y), device=self.device if _on_gpu(X) else None,
                    repeats=repeats or self.repeats, warmup=self.warmup)
        p = measure(lambda: est.predict(Xt), device=self.device if _on_gpu(Xt) else None)
        rec = self.record(method=method, dataset=dataset, params=params, fit_s=t.median_s,
                          fit_times_s=t.times_s, predict_s=p.median_s, accuracy=accuracy(p.result, yt),
                          n_train=int(X.shape[0]), n_test=int(Xt.shape[0]),
                          extra=extra(est) if extra else {})
        self.log(f"  {method:30s} {dataset:12s} {_short(params):40s} acc {rec.accuracy:.4f}  "
                 f"fit {rec.fit_s:.3f}s  predict {rec.predict_s:.3f}s")
        return rec


def _on_gpu(X: Any) -> bool:
    return type(X).__module__.startswith("cupy")


def _short(params: dict) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


@dataclass(frozen=True)
class Case:
    """A registered benchmark.

    Attributes
    ----------
    name : str
        What ``python -m bench NAME`` runs.
    run : callable
        ``run(ctx) -> iterable of Record``.
    scales : dict
        ``{scale: {parameter: value}}``: the case's parameters at each scale it supports.
    description : str
        One line for ``--list``.
    kind : str
        ``"benchmark"`` or ``"study"`` (a one-off parameter study).
    figure : str or None
        The report's figures, comma separated: ``"acc_vs_time"`` (test
        accuracy against fit time, one marker per method),
        ``"acc_vs_param:<name>"`` (accuracy against ``params[<name>]``),
        ``"time_vs_param:<name>"`` (fit time against ``params[<name>]``);
        None: a table only.
    columns : tuple of str
        Keys of the records' ``extra`` that the report's table shows after
        the fixed columns (what a case measures beyond fit time and accuracy).
    """

    name: str
    run: Callable[[Context], Iterable[Record]]
    scales: dict
    description: str
    kind: str = "benchmark"
    figure: str | None = "acc_vs_time"
    columns: tuple = ()


REGISTRY: dict[str, Case] = {}


def register(case: Case) -> Case:
    """Add a case to :data:`REGISTRY` (a second case of the same name is an error)."""
    if case.name in REGISTRY:
        raise ValueError(f"benchmark case {case.name!r} is registered twice")
    bad = set(case.scales) - set(SCALES)
    if bad:
        raise ValueError(f"case {case.name!r}: unknown scales {sorted(bad)}; choose from {SCALES}")
    REGISTRY[case.name] = case
    return case


def run_case(case: Case, *, scale: str, device: Any, run_id: str, repeats: int | None = None,
             log: Callable[[str], None] = print) -> Iterator[Record]:
    """Run one case at one scale; yields its records, each carrying the run's host facts."""
    if scale not in case.scales:
        raise ValueError(f"case {case.name!r} has no scale {scale!r}; it has {sorted(case.scales)}")
    params = dict(case.scales[scale])
    host = host_facts(device)
    before = load_average()
    host["load_before"] = before
    ctx = Context(case=case, scale=scale, device=device, params=params, run_id=run_id, host=host,
                  repeats=repeats or int(params.pop("repeats", 1)),
                  warmup=int(params.pop("warmup", 1 if getattr(device, "is_gpu", False) else 0)), log=log)
    records = list(case.run(ctx))
    after = load_average()
    for r in records:  # the same dict for all: fill in the end of the run
        r.host = dict(r.host, load_after=after, quiet=quiet_note(before, after))
    yield from records


# --------------------------------------------------------------------------- whole scripts
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


def run_script(path: Path, argv: list[str], *, echo: bool = True) -> dict:
    """Run a benchmark script's ``main(argv)`` in this process, its output captured.

    Returns ``{"name", "status", "seconds", "stdout", "traceback"}``; ``status``
    is ``"ok"``, ``"exit N"`` or ``"FAILED"`` (an exception, its traceback kept).
    """
    path = Path(path)
    buf = io.StringIO()
    out = _Tee(buf, sys.stdout) if echo else buf
    t0 = time.perf_counter()
    status, tb = "ok", None
    saved_path = list(sys.path)
    with contextlib.redirect_stdout(out):
        try:
            spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            rc = mod.main(argv)
            if isinstance(rc, int) and rc != 0:
                status = f"exit {rc}"
        except SystemExit as exc:  # argparse or an explicit exit
            if exc.code not in (0, None):
                status, tb = f"exit {exc.code}", traceback.format_exc()
        except Exception:  # noqa: BLE001 - the caller reports it and goes on
            status, tb = "FAILED", traceback.format_exc()
            if echo:
                print(tb, file=sys.stderr)
        finally:  # the scripts put bench/ first on the path, where bench/dask.py would shadow dask
            sys.path[:] = saved_path
    return {"name": path.stem, "status": status, "seconds": time.perf_counter() - t0,
            "stdout": buf.getvalue(), "traceback": tb}
