"""The ``gpuksvm`` command line, in the LIBSVM / ThunderSVM habit.

::

    gpuksvm train [-m method] [-t kernel] [-c C] [-g gamma] [-d degree] [-r coef0]
                  [-k landmarks] [-e tol] [--device D] [--seed S] [--set name=value ...]
                  train_file [model_file]
    gpuksvm predict [--device D] test_file model_file output_file
    gpuksvm info [--json] model_file
    gpuksvm demo [options]            (see ``gpuksvm demo --help``)

``train`` reads an SVMlight/LIBSVM file (plain, ``.bz2`` or ``.gz``), fits the
chosen method and writes a model file (:mod:`gpuksvm.io`; default name
``<train_file>.model``).  ``predict`` writes one predicted label per line and
prints ``Accuracy = 98.1% (981/1000) (classification)`` like ``svm-predict``
(mean squared error and squared correlation for regressors).  ``info`` prints
what a model file holds without running anything from it.  A malformed data
file gives an error naming the file and the line.

Methods (``-m``): ``llsvm`` (default), ``svc`` (exact kernel SVM), ``linear``,
``cvm``, ``one-class-cvm``, ``svi``, ``okfeb`` (classifier) and
``okfeb-regressor``.  Options a method does not have are rejected; any other
estimator parameter can be set with ``--set name=value`` (the value is read as
a Python literal when it parses as one, else as a string).
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["METHODS", "main", "make_estimator", "estimator_class", "parse_kernel"]

#: CLI method name -> estimator class name in the ``gpuksvm`` namespace
METHODS = {
    "llsvm": "LLSVM",
    "svc": "KernelSVC",
    "linear": "LinearSVM",
    "cvm": "CVM",
    "one-class-cvm": "OneClassCVM",
    "svi": "SVI",
    "okfeb": "OKFEBClassifier",
    "okfeb-regressor": "OKFEBRegressor",
}
_METHOD_ALIASES = {"kernelsvc": "svc", "ksvc": "svc", "exact": "svc", "linearsvm": "linear",
                   "okfeb-classifier": "okfeb", "oneclass-cvm": "one-class-cvm"}

# LIBSVM's -t numbers
_KERNEL_CODES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid"}

# option -> candidate estimator parameter names, first present wins
_OPTION_PARAMS = {
    "kernel": ("kernel",),
    "C": ("C",),
    "gamma": ("gamma",),
    "degree": ("degree",),
    "coef0": ("coef0",),
    "landmarks": ("n_landmarks", "budget"),
    "tol": ("tol", "eps"),
    "device": ("device",),
    "seed": ("random_state",),
    "verbose": ("verbose",),
}
_OPTION_FLAGS = {"kernel": "-t", "C": "-c", "gamma": "-g", "degree": "-d", "coef0": "-r",
                 "landmarks": "-k", "tol": "-e", "device": "--device", "seed": "--seed",
                 "verbose": "-v"}


class CLIError(Exception):
    """A user error on the command line (printed without a traceback)."""


def estimator_class(method: str) -> type:
    """The estimator class of a CLI method name (``llsvm``, ``svc``, ...)."""
    key = method.strip().lower().replace("_", "-")
    key = _METHOD_ALIASES.get(key, key)
    if key not in METHODS:
        raise CLIError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    import gpuksvm

    try:
        return getattr(gpuksvm, METHODS[key])
    except (ImportError, AttributeError) as exc:
        raise CLIError(f"method {key!r} ({METHODS[key]}) is not available in this installation: {exc}")


def parse_kernel(value: str) -> str:
    """``-t`` accepts LIBSVM's numbers (0 linear, 1 poly, 2 rbf, 3 sigmoid) or names."""
    v = str(value).strip().lower()
    return _KERNEL_CODES.get(v, v)


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _number(text: str) -> Any:
    """A float, or a string such as ``scale`` / ``auto`` / ``mean_dist`` for gamma."""
    try:
        return float(text)
    except ValueError:
        return text


def make_estimator(method: str, *, options: dict[str, Any] | None = None,
                   extra: dict[str, Any] | None = None) -> Any:
    """Build an estimator from CLI-style options.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS` (or an alias).
    options : dict
        CLI option names (``kernel``, ``C``, ``gamma``, ``degree``, ``coef0``,
        ``landmarks``, ``tol``, ``device``, ``seed``, ``verbose``) to values; ``None``
        values are ignored.  An option the method has no parameter for raises.
    extra : dict
        Estimator parameters set verbatim (``--set name=value``).
    """
    cls = estimator_class(method)
    est = cls()
    names = set(est.get_params(deep=False))
    params: dict[str, Any] = {}
    for opt, value in (options or {}).items():
        if value is None:
            continue
        cands = [p for p in _OPTION_PARAMS[opt] if p in names]
        if not cands:
            if opt == "kernel" and value == "linear" and cls.__name__ == "LinearSVM":
                continue
            raise CLIError(f"method {method!r} ({cls.__name__}) has no parameter for "
                           f"{_OPTION_FLAGS[opt]} ({'/'.join(_OPTION_PARAMS[opt])})")
        params[cands[0]] = value
    for name, value in (extra or {}).items():
        if name not in names:
            raise CLIError(f"{cls.__name__} has no parameter {name!r}; its parameters are: "
                           f"{', '.join(sorted(names))}")
        params[name] = value
    return est.set_params(**params)


def _load_data(path: str, n_features: int | None = None):
    from .datasets import load_svmlight

    try:
        X, y = load_svmlight(path, n_features=n_features, dense=True)
    except FileNotFoundError as exc:
        raise CLIError(str(exc))
    except ValueError as exc:
        msg = str(exc)
        if n_features is not None and "n_features" in msg:
            raise CLIError(f"{path}: the file has feature indices beyond the model's "
                           f"{n_features} features ({msg})")
        raise CLIError(msg)
    if X.shape[0] == 0:
        raise CLIError(f"{path}: no data rows")
    return X, y


def _is_regressor(model: Any) -> bool:
    return getattr(model, "_estimator_type", None) == "regressor" or \
        type(model).__name__.endswith("Regressor")


def _is_outlier_detector(model: Any) -> bool:
    return type(model).__name__.startswith("OneClass")


# --------------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:
    from . import io

    extra = {}
    for item in args.set or []:
        if "=" not in item:
            raise CLIError(f"--set expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        extra[k.strip()] = _parse_value(v.strip())
    options = {"kernel": parse_kernel(args.kernel) if args.kernel is not None else None,
               "C": args.C, "gamma": _number(args.gamma) if args.gamma is not None else None,
               "degree": args.degree, "coef0": args.coef0, "landmarks": args.landmarks,
               "tol": args.tol, "device": args.device, "seed": args.seed,
               "verbose": 1 if args.verbose else None}
    est = make_estimator(args.method, options=options, extra=extra)
    X, y = _load_data(args.train_file)
    t0 = time.perf_counter()
    try:
        if _is_outlier_detector(est):
            est.fit(X)
        else:
            est.fit(X, y)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"training {type(est).__name__} on {args.train_file} failed: {exc}")
    fit_s = time.perf_counter() - t0
    model_file = args.model_file or (Path(args.train_file).name + ".model")
    io.save(est, model_file)
    if not args.quiet:
        dev = getattr(est, "fitted_device_", "cpu")
        print(f"trained {type(est).__name__} on {X.shape[0]} rows x {X.shape[1]} features "
              f"({dev}) in {fit_s:.3f} s; model written to {model_file}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from . import io

    try:
        model = io.load(args.model_file, device=args.device)
    except (FileNotFoundError, io.ModelFormatError) as exc:
        raise CLIError(str(exc))
    X, y = _load_data(args.test_file, n_features=getattr(model, "n_features_in_", None))
    pred = np.asarray(model.predict(X))
    out = Path(args.output_file)
    lines = [_fmt_label(v) for v in pred.reshape(-1)]
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text("\n".join(lines) + ("\n" if lines else ""))
    tmp.replace(out)
    if args.quiet:
        return 0
    if _is_regressor(model):
        err = float(np.mean((pred - y) ** 2))
        r = np.corrcoef(pred, y)[0, 1] if np.std(pred) > 0 and np.std(y) > 0 else float("nan")
        print(f"Mean squared error = {err:g} (regression)")
        print(f"Squared correlation coefficient = {r * r:g} (regression)")
    else:
        if _is_outlier_detector(model):
            y = np.where(y > 0, 1, -1)
        correct = int(np.sum(pred == y))
        print(f"Accuracy = {100.0 * correct / len(y):.4g}% ({correct}/{len(y)}) (classification)")
    return 0


def _fmt_label(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    return str(v)


def cmd_info(args: argparse.Namespace) -> int:
    from . import io

    try:
        header = io.read_header(args.model_file)
    except (FileNotFoundError, io.ModelFormatError) as exc:
        raise CLIError(str(exc))
    tree = header["tree"]
    state = tree.get("state", {}) if isinstance(tree, dict) else {}
    fitted = {k: _describe(v, header["arrays"]) for k, v in state.items()
              if k.endswith("_") and not k.startswith("_")}
    info = {"file": str(args.model_file), "class": header.get("class"),
            "format_version": header.get("format_version"),
            "gpuksvm_version": header.get("gpuksvm_version"), "created": header.get("created"),
            "fitted_device": header.get("fitted_device"), "params": header.get("params", {}),
            "fitted": fitted,
            "array_bytes": int(sum(int(np.prod(s["shape"])) * np.dtype(s["dtype"]).itemsize
                                   for s in header["arrays"].values()))}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['file']}: {info['class']}")
    print(f"  format version {info['format_version']}, written by gpuksvm {info['gpuksvm_version']} "
          f"on {info['created']}, fitted on {info['fitted_device']}")
    print(f"  {len(header['arrays'])} arrays, {info['array_bytes'] / 2**20:.3g} MiB")
    print("  parameters:")
    for k, v in info["params"].items():
        print(f"    {k} = {v}")
    if fitted:
        print("  fitted attributes:")
        for k, v in fitted.items():
            print(f"    {k}: {v}")
    else:
        print("  (not fitted)")
    return 0


def _describe(node: dict, arrays: dict) -> str:
    """A one-line description of an encoded value (for ``info``)."""
    t = node.get("t")
    if t == "array":
        spec = arrays.get(node.get("ref"), {})
        return f"array {tuple(spec.get('shape', ()))} {np.dtype(spec.get('dtype', 'f8')).name}"
    if t in ("int", "float", "bool", "str"):
        return repr(node.get("v"))
    if t in ("list", "tuple", "set"):
        return f"{t} of {len(node.get('items', []))}"
    if t == "dict":
        return f"dict of {len(node.get('items', []))}"
    if t in ("estimator", "dataclass", "object", "namedtuple"):
        name = str(node.get("cls", "?")).split(":")[-1]
        if t == "dataclass":
            fields = ", ".join(f"{k}={_describe(v, arrays)}" for k, v in node.get("fields", {}).items())
            return f"{name}({fields})"
        return name
    if t == "objarray":
        return f"object array {tuple(node.get('shape', ()))}"
    if t == "sparse":
        return f"sparse {node.get('format')} {tuple(node.get('shape', ()))}"
    if t == "none":
        return "None"
    return str(t)


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gpuksvm", description="Scalable kernel SVMs on the GPU "
                                 "(CuPy) or the CPU (NumPy).",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Run 'gpuksvm COMMAND --help' for a command's options.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    tr = sub.add_parser("train", help="fit a model on an SVMlight file and write a model file",
                        description="Fit a model on an SVMlight/LIBSVM file and write a model file.")
    tr.add_argument("-m", "--method", default="llsvm",
                    help=f"method: {', '.join(METHODS)} (default llsvm)")
    tr.add_argument("-t", "--kernel", help="kernel: 0/linear, 1/poly, 2/rbf, 3/sigmoid")
    tr.add_argument("-c", "--C", dest="C", type=float, help="cost C")
    tr.add_argument("-g", "--gamma", help="gamma: a number, scale, auto or mean_dist")
    tr.add_argument("-d", "--degree", type=float, help="polynomial degree")
    tr.add_argument("-r", "--coef0", type=float, help="coef0 of poly/sigmoid")
    tr.add_argument("-k", "--landmarks", type=int,
                    help="landmarks (LLSVM n_landmarks) or budget (OK-FEB)")
    tr.add_argument("-e", "--tol", type=float, help="stopping tolerance (tol / eps)")
    tr.add_argument("--device", help="auto (default), cpu, gpu or cuda:N")
    tr.add_argument("--seed", type=int, help="random_state")
    tr.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help="any other estimator parameter (repeatable)")
    tr.add_argument("-v", "--verbose", action="store_true", help="progress output")
    tr.add_argument("-q", "--quiet", action="store_true", help="no output")
    tr.add_argument("train_file")
    tr.add_argument("model_file", nargs="?", help="default: <train_file name>.model")
    tr.set_defaults(func=cmd_train)

    pr = sub.add_parser("predict", help="predict an SVMlight file with a model file",
                        description="Predict an SVMlight file; write one label per line; print the "
                                    "accuracy (or MSE for regression).")
    pr.add_argument("--device", help="move the model there before predicting")
    pr.add_argument("-q", "--quiet", action="store_true")
    pr.add_argument("test_file")
    pr.add_argument("model_file")
    pr.add_argument("output_file")
    pr.set_defaults(func=cmd_predict)

    inf = sub.add_parser("info", help="describe a model file", description="Describe a model file "
                         "(class, versions, parameters, fitted attributes) without loading it.")
    inf.add_argument("--json", action="store_true")
    inf.add_argument("model_file")
    inf.set_defaults(func=cmd_info)

    from . import demo

    dm = sub.add_parser("demo", help="train every method on the bundled ijcnn1 data, print one table",
                        description=demo.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_arguments(dm)
    dm.set_defaults(func=demo.run_from_args)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gpuksvm`` / ``python -m gpuksvm``; returns the exit status."""
    ap = build_parser()
    args = ap.parse_args(None if argv is None else list(argv))
    if not getattr(args, "command", None):
        ap.print_help()
        return 2
    from .backend import DeviceUnavailableError

    try:
        return int(args.func(args) or 0)
    except (CLIError, DeviceUnavailableError) as exc:
        print(f"gpuksvm {args.command}: error: {exc}", file=sys.stderr)
        return 1
