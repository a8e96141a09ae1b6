"""``gpuksvm demo``: every method on the bundled ijcnn1 data, one table.

Trains every method that has a ``demo`` row in :mod:`gpuksvm.registry` — a
linear baseline (:class:`~gpuksvm.LinearSVM`), the exact kernel SVM
(:class:`~gpuksvm.KernelSVC`), :class:`~gpuksvm.LLSVM`, :class:`~gpuksvm.CVM`,
:class:`~gpuksvm.SVI` and :class:`~gpuksvm.OKFEBClassifier` — on ijcnn1 (49,990 training / 91,701 test
rows, 22 features, bundled with the package), on the GPU when CuPy and a CUDA
device answer, else on the CPU, and prints one table: method, device, fit and
predict seconds, test accuracy, model size (#SV, core set, landmarks or budget)
and peak memory.

Sizes: the full training and test sets by default, on a GPU and on the CPU
alike (the whole demo takes 30–40 s on a 2-core CPU); ``--n-train`` and
``--n-test`` draw random subsets, ``--tiny`` runs a seconds-long smoke test on
2,000 / 2,000 rows.  The exact kernel SVM is O(n²): ``--svc-max-train N``
trains it, on the CPU, on N of the training rows drawn at random (seeded by
``--seed``: the same rows on every run; not the file's first N rows, which
are far from a sample of ijcnn1) and the ``n train`` column shows N.

Peak memory is the growth of the process's peak resident set size during
fit + predict, measured exactly with Linux's ``VmHWM`` (reset through
``/proc/self/clear_refs`` before each method); elsewhere the RSS is sampled
every 5 ms with psutil, and without psutil ``tracemalloc`` counts the Python
and NumPy allocations.  The column header says which was used.  On a GPU the
peak of CuPy's memory pool is shown as well.  Timings are single runs
(wall clock, device synchronized); the first GPU call of a method includes
compiling its CUDA kernels (cached on disk afterwards), which a warm-up of the
shared kernels before the table keeps small.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import tracemalloc
from typing import Any, Callable, Sequence

import numpy as np

from gpuksvm import registry
from gpuksvm.array import backend as bk
from gpuksvm.array import linalg
from gpuksvm.datasets import load_dataset, subsample
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.cli.contract import CLIError, parse_literal, run_command

__all__ = ["DEMO_METHODS", "METHOD_LABELS", "run_demo", "format_table", "model_size",
           "PeakMemory", "add_arguments", "run_from_args", "main"]


#: the demo's rows, in order: the registry's methods with a ``demo`` entry (parameters for ijcnn1,
#: whose features are already in [-1, 1])
DEMO_METHODS: tuple[registry.Method, ...] = registry.demo_methods()
METHOD_LABELS = tuple(m.demo.label for m in DEMO_METHODS)

#: estimator classes loaded so far, by name (filled on first use; a test may substitute one)
_ESTIMATORS: dict[str, type] = {}


def _estimator_class(name: str) -> type:
    if name not in _ESTIMATORS:
        _ESTIMATORS[name] = registry.method(name).load()
    return _ESTIMATORS[name]


# --------------------------------------------------------------------------- memory
def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _can_reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return _proc_status("VmHWM") is not None
    except OSError:
        return False


class PeakMemory:
    """Context manager measuring the peak host-memory growth of a block of code.

    ``how`` is ``"vmhwm"`` (Linux peak RSS, exact), ``"rss"`` (psutil RSS
    sampled every 5 ms), ``"tracemalloc"`` (Python/NumPy allocations) or
    ``"auto"`` (the first available in that order).  After the block,
    ``peak_bytes`` holds the growth over the starting value and ``gpu_bytes``
    the peak of CuPy's memory pool when a GPU was used.
    """

    def __init__(self, how: str = "auto", *, gpu: bool = False) -> None:
        if how == "auto":
            how = "vmhwm" if _can_reset_hwm() else ("rss" if _has_psutil() else "tracemalloc")
        if how not in ("vmhwm", "rss", "tracemalloc"):
            raise ValueError(f"memory measure must be auto, vmhwm, rss or tracemalloc, got {how!r}")
        self.how = how
        self.gpu = gpu
        self.peak_bytes = 0
        self.gpu_bytes: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def label(self) -> str:
        return {"vmhwm": "peak RSS Δ (VmHWM)", "rss": "peak RSS Δ (psutil, sampled)",
                "tracemalloc": "peak alloc (tracemalloc)"}[self.how]

    def _poll(self) -> None:
        import psutil

        proc = psutil.Process()
        pool = None
        if self.gpu:
            pool = bk.get_namespace("cuda").get_default_memory_pool()
        while not self._stop.is_set():
            if self.how == "rss":
                self._max_rss = max(self._max_rss, proc.memory_info().rss)
            if pool is not None:
                self._max_gpu = max(self._max_gpu, pool.used_bytes())
            self._stop.wait(0.005)

    def __enter__(self) -> "PeakMemory":
        self._max_gpu = 0
        if self.how in ("vmhwm", "rss"):
            bk.release_free_heap()
        if self.how == "vmhwm":
            _can_reset_hwm()
            self._base = _proc_status("VmRSS") or 0
        elif self.how == "rss":
            import psutil

            self._base = self._max_rss = psutil.Process().memory_info().rss
        else:
            tracemalloc.start()
            self._base = tracemalloc.get_traced_memory()[0]
        if self.gpu:
            self._gpu_base = bk.get_namespace("cuda").get_default_memory_pool().used_bytes()
        if self.how == "rss" or self.gpu:
            if self.how == "rss" and not _has_psutil():
                raise RuntimeError("psutil is needed for the sampled RSS measure")
            self._thread = threading.Thread(target=self._poll_safe, daemon=True)
            self._thread.start()
        return self

    def _poll_safe(self) -> None:
        try:
            if self.how == "rss" or _has_psutil():
                self._poll()
            else:  # GPU pool sampling without psutil
                pool = bk.get_namespace("cuda").get_default_memory_pool()
                while not self._stop.is_set():
                    self._max_gpu = max(self._max_gpu, pool.used_bytes())
                    self._stop.wait(0.005)
        except Exception:  # noqa: BLE001 - a failed sampler must not break the demo
            pass

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.how == "vmhwm":
            self.peak_bytes = max((_proc_status("VmHWM") or 0) - self._base, 0)
        elif self.how == "rss":
            import psutil

            self.peak_bytes = max(max(self._max_rss, psutil.Process().memory_info().rss) - self._base, 0)
        else:
            self.peak_bytes = max(tracemalloc.get_traced_memory()[1] - self._base, 0)
            tracemalloc.stop()
        if self.gpu:
            used = bk.get_namespace("cuda").get_default_memory_pool().used_bytes()
            self.gpu_bytes = max(self._max_gpu, used) - self._gpu_base


def _has_psutil() -> bool:
    try:
        import psutil  # noqa: F401

        return True
    except ImportError:
        return False


# --------------------------------------------------------------------------- model size
def model_size(model: Any) -> tuple[int | None, str]:
    """(count, description) of what a fitted model keeps, read from its fitted attributes.

    Landmarks (``landmarks_``), core vectors (``core_set_``: one array per
    binary problem), the vectors an OK-FEB budget stores (``n_stored_``, of the
    model or its ``extractor_``), support vectors (``n_support_``,
    ``support_vectors_``) or, for a linear model, its weights (``coef_``).
    """
    Z = getattr(model, "landmarks_", None)
    if Z is not None:
        return int(Z.shape[0]), f"{int(Z.shape[0])} landmarks"
    core = getattr(model, "core_set_", None)
    if core is not None:
        n = int(sum(len(c) for c in core))
        return n, f"{n} core vectors"
    fe = getattr(model, "extractor_", model)      # the classifier's OKFEB, or an OKFEB
    if hasattr(fe, "n_stored_"):
        n = int(fe.n_stored_)
        return n, f"{n} stored vectors"
    if hasattr(model, "n_support_"):
        n = int(np.sum(bk.to_host(model.n_support_)))
        return n, f"{n} SVs"
    SV = getattr(model, "support_vectors_", None)
    if SV is not None:
        return int(SV.shape[0]), f"{int(SV.shape[0])} SVs"
    coef = getattr(model, "coef_", None)
    if coef is not None:
        n = int(np.prod(coef.shape[1:])) if coef.ndim > 1 else int(coef.shape[0])
        return n, f"{n} weights"
    return None, "-"


# --------------------------------------------------------------------------- running
def _warm_up(device: bk.Device) -> float:
    """Initialise CuPy, cuBLAS/cuSOLVER and the shared kernels before timing."""
    if not device.is_gpu:
        return 0.0
    t0 = time.perf_counter()
    xp = bk.get_namespace(device)
    with device.activate():
        A = xp.asarray(np.random.default_rng(0).standard_normal((256, 22)), dtype=xp.float32)
        K = kernel_block(A, A, Kernel("rbf", gamma=0.5))
        linalg.eigh(K + xp.eye(256, dtype=K.dtype))
        bk.synchronize(device)
    return time.perf_counter() - t0


def _parse_n(value: str) -> int | None | str:
    if str(value).lower() == "default":
        return "default"
    if str(value).lower() in ("all", "full", "none"):
        return None
    n = int(value)
    if n < 2:
        raise argparse.ArgumentTypeError(f"need at least 2 rows, got {value!r}")
    return n


def run_demo(*, methods: Sequence[str] | None = None, device: str = "auto",
             n_train: int | None | str = "default", n_test: int | None | str = "default",
             svc_max_train: int | None = None, tiny: bool = False, memory: str = "auto",
             progress: bool = True, random_state: int = 0,
             overrides: dict[str, dict] | None = None,
             log: Callable[[str], None] | None = None) -> dict:
    """Run the demo and return its results (what ``--json`` prints).

    Parameters
    ----------
    methods : list of str, optional
        Labels from :data:`METHOD_LABELS` (default: all).
    device : str
        ``auto`` (GPU when present), ``cpu`` or ``gpu``.
    n_train, n_test : int, None or "default"
        Rows drawn at random from the training / test file; ``None`` = all;
        ``"default"`` = all (``tiny``: 2,000 / 2,000).
    svc_max_train : int or None
        Cap on the exact kernel SVM's training rows on the CPU (None: no cap):
        that many of the training rows, drawn at random without replacement
        (kept in file order) by a generator seeded with ``random_state``.
    tiny : bool
        Small sizes and parameters for a smoke run of a few seconds.
    memory : str
        How peak memory is measured (see :class:`PeakMemory`).
    overrides : dict
        ``{label: {param: value}}`` applied on top of the built-in parameters.

    Returns
    -------
    dict
        ``{"dataset", "device", "n_train", "n_test", "memory_measure",
        "warmup_s", "rows": [...]}``; each row has ``method``, ``estimator``,
        ``device``, ``n_train``, ``fit_s``, ``predict_s``, ``accuracy``,
        ``size``, ``size_desc``, ``peak_mem_mb`` (and ``gpu_mem_mb``) or ``error``.
    """

    dev = bk.resolve_device(device)
    chosen = list(METHOD_LABELS if not methods else methods)
    unknown = [m for m in chosen if m not in METHOD_LABELS]
    if unknown:
        raise ValueError(f"unknown demo method(s) {unknown}; choose from {list(METHOD_LABELS)}")
    default_n = 2000 if tiny else None
    n_train = default_n if n_train == "default" else n_train
    n_test = default_n if n_test == "default" else n_test
    rng = np.random.default_rng(random_state)
    X, y = load_dataset("ijcnn1", "train")
    X, y = subsample(X, y, n_train, rng)
    Xt, yt = load_dataset("ijcnn1", "test")
    Xt, yt = subsample(Xt, yt, n_test, rng)
    warm = _warm_up(dev)
    measure = PeakMemory(memory).how
    result = {"dataset": "ijcnn1", "device": str(dev), "n_train": int(X.shape[0]),
              "n_test": int(Xt.shape[0]), "n_features": int(X.shape[1]),
              "memory_measure": PeakMemory(measure).label, "warmup_s": warm, "rows": []}

    todo = [m for m in DEMO_METHODS if m.demo.label in chosen]
    bar = _progress_bar(todo, progress)
    for spec in bar:
        if hasattr(bar, "set_description"):
            bar.set_description(f"{spec.demo.label:>6}")
        elif log is not None:
            log(f"[{len(result['rows']) + 1}/{len(todo)}] {spec.demo.label} ...")
        row = {"method": spec.demo.label, "estimator": spec.name, "device": str(dev)}
        try:
            cls = _estimator_class(spec.name)
            params = dict(spec.demo.params)
            if tiny:
                params.update(spec.demo.tiny_params)
            params.update((overrides or {}).get(spec.demo.label, {}))
            names = cls().get_params(deep=False)
            if "device" in names:
                params["device"] = str(dev) if dev.is_gpu else "cpu"
            if "random_state" in names:
                params.setdefault("random_state", random_state)
            est = cls(**params)
            Xf, yf = X, y
            if not dev.is_gpu and spec.name == "KernelSVC" and svc_max_train is not None:
                # a random sample (its own seeded stream: the same rows whatever else runs)
                Xf, yf = subsample(X, y, svc_max_train, np.random.default_rng([random_state, 1]))
            row["n_train"] = int(Xf.shape[0])
            with PeakMemory(measure, gpu=dev.is_gpu) as mem:
                t0 = time.perf_counter()
                est.fit(Xf, yf)
                bk.synchronize(dev)
                t1 = time.perf_counter()
                pred = np.asarray(bk.to_host(est.predict(Xt)))
                t2 = time.perf_counter()
            row.update(fit_s=t1 - t0, predict_s=t2 - t1, accuracy=float(np.mean(pred == yt)),
                       peak_mem_mb=mem.peak_bytes / 2**20)
            if mem.gpu_bytes is not None:
                row["gpu_mem_mb"] = mem.gpu_bytes / 2**20
            row["size"], row["size_desc"] = model_size(est)
            row["fitted_device"] = getattr(est, "fitted_device_", str(dev))
        except Exception as exc:  # noqa: BLE001 - one failing method must not hide the others
            row["error"] = f"{type(exc).__name__}: {exc}"
        result["rows"].append(row)
    return result


def _progress_bar(items: list, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return items
    return tqdm(items, desc="demo", unit="method", file=sys.stderr, leave=False)


def format_table(result: dict) -> str:
    """The demo's plain-text table."""
    gpu = any("gpu_mem_mb" in r for r in result["rows"])
    cols = ["method", "device", "n train", "fit s", "predict s", "test acc %", "model size",
            "peak mem MB"] + (["GPU mem MB"] if gpu else [])
    lines = []
    for r in result["rows"]:
        if "error" in r:
            lines.append([r["method"], r["device"], str(r.get("n_train", "")), "-", "-", "-",
                          "-", "-"] + (["-"] if gpu else []) + [f"ERROR {r['error']}"])
            continue
        cells = [r["method"], r["device"], str(r["n_train"]), f"{r['fit_s']:.3f}",
                 f"{r['predict_s']:.3f}", f"{100 * r['accuracy']:.2f}", r["size_desc"],
                 f"{r['peak_mem_mb']:.1f}"]
        if gpu:
            cells.append(f"{r.get('gpu_mem_mb', 0.0):.1f}")
        lines.append(cells)
    widths = [max([len(c)] + [len(row[i]) for row in lines]) for i, c in enumerate(cols)]
    out = [f"ijcnn1: {result['n_train']} training rows (subsets marked in 'n train'), "
           f"{result['n_test']} test rows, {result['n_features']} features; device {result['device']}"
           + (f" (GPU warm-up {result['warmup_s']:.1f} s, not in the table)" if result["warmup_s"] else ""),
           "  ".join(c.ljust(w) for c, w in zip(cols, widths)),
           "  ".join("-" * w for w in widths)]
    for row in lines:
        body = "  ".join(v.ljust(w) for v, w in zip(row, widths))
        if len(row) > len(cols):
            body += "  " + row[-1]
        out.append(body.rstrip())
    out.append(f"peak mem = {result['memory_measure']} during fit + predict"
               + ("; GPU mem = peak of CuPy's memory pool" if gpu else ""))
    return "\n".join(out)


# --------------------------------------------------------------------------- CLI glue
def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Options of ``gpuksvm demo``."""
    ap.add_argument("--device", default="auto", help="auto (default: GPU if present), cpu or gpu")
    ap.add_argument("--methods", default=",".join(METHOD_LABELS),
                    help=f"comma-separated subset of {','.join(METHOD_LABELS)}")
    ap.add_argument("--n-train", type=_parse_n, default="default",
                    help="training rows drawn from the 49,990 (number or 'all', the default)")
    ap.add_argument("--n-test", type=_parse_n, default="default",
                    help="test rows drawn from the 91,701 (number or 'all'; default as --n-train)")
    ap.add_argument("--svc-max-train", type=_parse_n, default=None,
                    help="on the CPU, train the exact kernel SVM on this many training rows drawn "
                         "at random (seeded by --seed; default: all)")
    ap.add_argument("--tiny", action="store_true", help="small sizes for a smoke run (seconds)")
    ap.add_argument("--set", action="append", metavar="METHOD.PARAM=VALUE", default=[],
                    help="override a parameter, e.g. --set llsvm.n_landmarks=1000 (repeatable)")
    ap.add_argument("--memory", default="auto", choices=["auto", "vmhwm", "rss", "tracemalloc"],
                    help="how peak memory is measured (default: VmHWM on Linux)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (subsets and estimators)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead")


def _parse_overrides(items: Sequence[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in items:
        key, sep, value = item.partition("=")
        label, dot, param = key.strip().partition(".")
        if not sep or not dot or not param:
            raise ValueError(f"--set expects METHOD.PARAM=VALUE, got {item!r}")
        out.setdefault(label, {})[param] = parse_literal(value.strip())
    return out


def run_from_args(args: argparse.Namespace) -> int:
    try:
        overrides = _parse_overrides(args.set)
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        result = run_demo(methods=methods, device=args.device, n_train=args.n_train,
                          n_test=args.n_test, svc_max_train=args.svc_max_train, tiny=args.tiny,
                          memory=args.memory, progress=not args.no_progress and not args.json,
                          random_state=args.seed, overrides=overrides,
                          log=lambda s: print(s, file=sys.stderr))
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if args.json:
        print(json.dumps(result, indent=2, default=float))
    else:
        print(format_table(result))
    return 1 if any("error" in r for r in result["rows"]) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpuksvm.cli.demo`` — same as ``gpuksvm demo``."""
    ap = argparse.ArgumentParser(prog="gpuksvm demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    args = ap.parse_args(sys.argv[1:] if argv is None else list(argv))
    return run_command("gpuksvm demo", run_from_args, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
