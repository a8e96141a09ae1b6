"""The ``gpuksvm`` command line, in the LIBSVM / ThunderSVM habit.

::

    gpuksvm train [-m method] [-t kernel] [-c C] [-g gamma] [-d degree] [-r coef0]
                  [-k landmarks] [-e tol] [--device D] [--seed S] [--set name=value ...]
                  train_file [model_file]
    gpuksvm predict [--device D] test_file model_file output_file   (output_file "-": stdout)
    gpuksvm info [--json] model_file
    gpuksvm demo [options]            (see ``gpuksvm demo --help``)
    gpuksvm doctor [--expect-gpu]     (see :mod:`gpuksvm.cli.doctor`)

``train`` reads an SVMlight/LIBSVM file (plain, ``.bz2`` or ``.gz``), fits the
chosen method and writes a model file (:mod:`gpuksvm.persistence.io`; default name
``<train_file>.model``).  ``predict`` writes one predicted label per line and
prints ``Accuracy = 98.1% (981/1000) (classification)`` like ``svm-predict``
(mean squared error and squared correlation for regressors).  An output file
``-``, or a path that is the process's own standard output (``/dev/stdout``,
``/proc/self/fd/1``), writes the labels to standard output directly, and the
accuracy goes to standard error.  ``info`` prints what a model file holds —
validated against the closed model schema, without reading its arrays or
running anything from it; every string from the file is printed with its
control characters escaped (:func:`gpuksvm.cli.contract.printable`), so a file
cannot send terminal escape sequences.

Errors: every failure is one line ``gpuksvm <command>: error: <message>`` on
stderr and exit status 1, never a traceback — a malformed data file names the
file and the line; the model and output paths are checked before any work: an
output that is the same file as an input (through symbolic or hard links;
``os.stat``'s device and inode) is refused, and so is one that exists and is
not a regular file (a folder, device, FIFO or socket: writes go to a
temporary file renamed over the target, which would replace it); sizes beyond
the machine's memory are refused before allocating; a model whose predictions
are not finite writes nothing; a model file that loads but cannot predict is
reported as a damaged file.  ``train`` stores the training
file's SVMlight index base in the model; ``predict`` reads the test file with
that base (a file that contradicts it is refused, one that looks one-based for
a zero-based model gets a warning).

Methods (``-m``): the ``cli`` names of :data:`gpuksvm.registry.METHODS` —
``linear``, ``svc`` (exact kernel SVM), ``llsvm`` (default), ``cvm``,
``one-class-cvm``, ``svi``, ``okfeb`` (classifier) and ``okfeb-regressor``.
Options a method does not have are rejected; any other estimator parameter
can be set with ``--set name=value`` (the value is read as a Python literal
when it parses as one, else as a string).
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gpuksvm import registry
from gpuksvm.array import backend as bk
from gpuksvm.cli import demo
from gpuksvm.persistence import io
from gpuksvm.cli.contract import CLIError, parse_literal, printable, run_command
from gpuksvm.datasets import data_line_numbers, find_malformed_line, read_svmlight
from gpuksvm.cli.doctor import __doc__ as doctor_doc
from gpuksvm.cli.doctor import main as doctor_main
from gpuksvm.data.files import file_kind, same_file
from gpuksvm.estimators.params import check_params, is_unset
from gpuksvm.array.validation import check_allocation, physical_memory

__all__ = ["METHODS", "main", "make_estimator", "estimator_class", "parse_kernel"]

#: CLI method name -> estimator class name in the ``gpuksvm`` namespace (from :mod:`gpuksvm.registry`)
METHODS = {m.cli[0]: m.name for m in registry.METHODS if m.cli}
#: the method ``train`` fits without ``-m``
DEFAULT_METHOD = "llsvm"

# LIBSVM's -t numbers
_KERNEL_CODES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid"}

# option -> the estimator parameter it sets (one name in every estimator: gpuksvm.estimators.params)
_OPTION_PARAMS = {
    "kernel": "kernel",
    "C": "C",
    "gamma": "gamma",
    "degree": "degree",
    "coef0": "coef0",
    "landmarks": "n_landmarks",
    "tol": "tol",
    "device": "device",
    "seed": "random_state",
    "verbose": "verbose",
}
_OPTION_FLAGS = {"kernel": "-t", "C": "-c", "gamma": "-g", "degree": "-d", "coef0": "-r",
                 "landmarks": "-k", "tol": "-e", "device": "--device", "seed": "--seed",
                 "verbose": "-v"}


def estimator_class(method: str) -> type:
    """The estimator class of a CLI method name (``llsvm``, ``svc``, ...)."""
    found = registry.cli_method(method)
    if found is None:
        raise CLIError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    return found.load()


def parse_kernel(value: str) -> str:
    """``-t`` accepts LIBSVM's numbers (0 linear, 1 poly, 2 rbf, 3 sigmoid) or names."""
    v = str(value).strip().lower()
    return _KERNEL_CODES.get(v, v)


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

    The parameters a method accepts are its constructor's (``get_params``, declared
    once in :mod:`gpuksvm.estimators.params`), so the command line and the Python
    API share one list, one set of names and one validation.
    """
    cls = estimator_class(method)
    est = cls()
    # the options a method has are its declared parameters (gpuksvm.estimators.params); the ones kept one
    # release under an old name (default DEPRECATED) still work (the estimator warns) but are not offered
    accepted = set(est.get_params(deep=False))
    names = {name for name in accepted if not is_unset(getattr(est, name))}
    params: dict[str, Any] = {}
    for opt, value in (options or {}).items():
        if value is None:
            continue
        name = _OPTION_PARAMS[opt]
        if name not in names:
            if opt == "kernel" and value == "linear" and cls.__name__ == "LinearSVM":
                continue
            raise CLIError(f"method {method!r} ({cls.__name__}) has no parameter for "
                           f"{_OPTION_FLAGS[opt]} ({name})")
        params[name] = value
    for name, value in (extra or {}).items():
        if name not in accepted:
            raise CLIError(f"{cls.__name__} has no parameter {name!r}; its parameters are: "
                           f"{', '.join(sorted(names))}")
        params[name] = value
    return est.set_params(**params)


def _read_data(path: str, *, n_features: int | None = None, zero_based: bool | str = "auto"):
    """(dense X, y, zero_based) of an SVMlight file; every problem is a CLIError naming the file."""



    try:
        data = read_svmlight(path, n_features, zero_based=zero_based)
    except (FileNotFoundError, ValueError) as exc:
        raise CLIError(str(exc))
    X = data.X
    if X.shape[0] == 0:
        raise CLIError(f"{path}: no data rows")
    try:
        check_allocation(X.shape[0] * X.shape[1] * 8,
                         f"{path}: the dense {X.shape[0]} x {X.shape[1]} data matrix (its width is "
                         f"the largest feature index{_largest_index_line(path, X)})")
    except ValueError as exc:
        raise CLIError(str(exc))
    return X.toarray(), data.y, data.zero_based


def _largest_index_line(path: str, X: Any) -> str:
    """", at line L" for the first line holding the largest feature index, when X is too wide."""



    total = physical_memory()
    if total is None or X.shape[0] * X.shape[1] * 8 <= total:
        return ""
    hits = np.flatnonzero(X.indices == X.shape[1] - 1)
    if not hits.size:
        return ""
    row = int(X.indptr.searchsorted(hits[0], side="right") - 1)
    line = data_line_numbers(Path(path), {row}).get(row)
    return f", {X.shape[1]}, at line {line}" if line else ""


def _kind(model: Any) -> str | None:
    """The registry's kind of a model's final estimator (None: not a registered method)."""
    found = registry.find(type(_final_estimator(model)).__name__)
    return None if found is None else found.kind


def _is_regressor(model: Any) -> bool:
    return _kind(model) == "regressor"


def _is_outlier_detector(model: Any) -> bool:
    return _kind(model) == "outlier_detector"


def _final_estimator(model: Any) -> Any:
    steps = getattr(model, "steps", None)
    return steps[-1][1] if steps else model


#: the predict output that means standard output
STDOUT = "-"


def _is_stdout(path: str) -> bool:
    """``-``, or a path naming the process's own standard output (``/dev/stdout``, ...)."""
    return path == STDOUT or same_file(path, 1)


def _refuse_overwriting_inputs(output: str, what: str, inputs: dict[str, str], *,
                               to_stdout: bool = False) -> None:
    """A CLIError when the output (a path, or standard output) is one of the input files."""
    out = 1 if to_stdout else output
    shown = "standard output" if to_stdout else f"the {what} file {output}"
    for role, path in inputs.items():
        if same_file(out, path):
            link = "" if to_stdout or os.path.abspath(output) == os.path.abspath(path) else \
                " (the same file, through a link)"
            raise CLIError(f"{shown} is the {role} {path}{link}: writing the {what} there would destroy "
                           f"the {role}; nothing was written. Give another {what} file")


def _os_reason(exc: OSError) -> str:
    """What the system said (``strerror``) rather than a library's wording about another file kind."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__
    return str(exc)


def _check_writable(path: str, what: str, example: str) -> None:
    """A clear CLIError now (before any work) if the ``what`` cannot be written to ``path``.

    Refuses a target that exists and is not a regular file (folder, device,
    FIFO, socket: the atomic write would replace it), a missing folder, and a
    folder where no file can be created.
    """
    where = f"cannot write the {what} to {path}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None                                   # a new file (or a link to one)
    except OSError as exc:                          # a symlink loop, a file used as a folder, ...
        raise CLIError(f"{where}: {_os_reason(exc)}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise CLIError(f"{where}: it is {file_kind(st.st_mode)}, not a regular file; "
                       f"give a file name such as {example}")
    folder = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{where}: the folder {folder} does not exist")
    try:
        io.check_writable(path)
    except OSError as exc:
        raise CLIError(f"{where}: {_os_reason(exc)}") from None


# --------------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:

    extra = {}
    for item in args.set or []:
        if "=" not in item:
            raise CLIError(f"--set expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        extra[k.strip()] = parse_literal(v.strip())
    options = {"kernel": parse_kernel(args.kernel) if args.kernel is not None else None,
               "C": args.C, "gamma": _number(args.gamma) if args.gamma is not None else None,
               "degree": args.degree, "coef0": args.coef0, "landmarks": args.landmarks,
               "tol": args.tol, "device": args.device, "seed": args.seed,
               "verbose": 1 if args.verbose else None}
    est = make_estimator(args.method, options=options, extra=extra)
    try:  # bad parameter values are reported before the data are read
        check_params(est)
    except ValueError as exc:
        raise CLIError(f"{type(est).__name__}: {exc}")
    model_file = args.model_file or (Path(args.train_file).name + ".model")
    if model_file == STDOUT:
        raise CLIError("train writes the model to a file, not to standard output ('-' is for "
                       "predict's labels); give a file name such as model.npz")
    # before hours of training, not after
    _refuse_overwriting_inputs(model_file, "model", {"training file": args.train_file})
    _check_writable(model_file, "model file", "model.npz")
    X, y, zero_based = _read_data(args.train_file)
    t0 = time.perf_counter()
    try:
        if _is_outlier_detector(est):
            est.fit(X)
        else:
            est.fit(X, y)
    except (ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError) as exc:
        raise CLIError(f"training {type(est).__name__} on {args.train_file} failed: {exc}")
    fit_s = time.perf_counter() - t0
    try:
        io.save(est, model_file, metadata={"svmlight_zero_based": bool(zero_based),
                                           "svmlight_n_features": int(X.shape[1])})
    except OSError as exc:
        raise CLIError(f"cannot write the model file to {model_file}: {_os_reason(exc)}") from None
    if not args.quiet:
        dev = getattr(est, "fitted_device_", "cpu")
        print(f"trained {type(est).__name__} on {X.shape[0]} rows x {X.shape[1]} features "
              f"({dev}) in {fit_s:.3f} s; model written to {model_file}")
    return 0


def _test_data(path: str, model: Any, meta: dict):
    """Read a test file with the training file's index base (a mismatch is refused or warned)."""


    n_features = getattr(_final_estimator(model), "n_features_in_", None)
    if n_features is None:
        n_features = getattr(model, "n_features_in_", None)
    trained_zb = meta.get("svmlight_zero_based")
    if trained_zb is None:
        return _read_data(path, n_features=n_features)[:2]
    try:
        X, y, _ = _read_data(path, n_features=n_features, zero_based=bool(trained_zb))
    except CLIError as exc:
        base = "zero-based (index 0 = first column)" if trained_zb else "one-based (LIBSVM's convention)"
        raise CLIError(f"{exc}; the model was trained on a {base} SVMlight file")
    if trained_zb and n_features and not X[:, 0].any() and find_malformed_line(
            path, zero_based=False) is None:
        warnings.warn(f"{path} never uses feature index 0, but the model was trained on a zero-based "
                      "file (index 0 = first column); if this file is one-based, every column is "
                      "shifted by one and the predictions are wrong", UserWarning, stacklevel=2)
    return X, y


def _damaged_model(path: str, exc: Exception, when: str) -> CLIError:
    """The error for a model file that passed the loader's checks yet fails ``when``."""
    return CLIError(f"{path}: the model file is damaged or inconsistent: {when} failed "
                    f"({type(exc).__name__}: {exc}); retrain the model (and report it if an "
                    "unmodified file written by gpuksvm does this)")


def _load_model(path: str, device: str | None) -> tuple[Any, dict]:
    """(model, header metadata) of a model file; every problem with the file is a CLIError."""
    try:
        model = io.load(path)
        meta = io.read_header(path).get("metadata", {})
    except (FileNotFoundError, io.ModelFormatError) as exc:
        raise CLIError(str(exc)) from None
    except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError,
            RecursionError) as exc:     # the loader should have said ModelFormatError
        raise _damaged_model(path, exc, "loading") from None
    if device is not None:
        if not hasattr(model, "to_device"):
            raise CLIError(f"--device: a {type(model).__name__} model cannot be moved to a device")
        model.to_device(device)
    return model, meta


def cmd_predict(args: argparse.Namespace) -> int:

    to_stdout = _is_stdout(args.output_file)
    _refuse_overwriting_inputs(args.output_file, "predictions", {"test file": args.test_file,
                                                                 "model file": args.model_file},
                               to_stdout=to_stdout)
    if not to_stdout:
        _check_writable(args.output_file, "predictions", "predictions.txt")
    model, meta = _load_model(args.model_file, args.device)
    X, y = _test_data(args.test_file, model, meta)
    try:
        pred = np.asarray(bk.to_host(model.predict(X)))
    except (ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError) as exc:
        raise CLIError(f"predicting {args.test_file} with {args.model_file} failed: {exc}")
    except (LookupError, AttributeError) as exc:    # an inconsistent model, not the data
        raise _damaged_model(args.model_file, exc, "predicting") from None
    if pred.dtype.kind in "fc" and not np.isfinite(pred).all():
        bad = int(np.flatnonzero(~np.isfinite(pred))[0])
        raise CLIError(f"the model produced non-finite predictions (first at data row {bad + 1} of "
                       f"{args.test_file}); nothing was written. The model is unusable: retrain it "
                       "(for OK-FEB regressors, with a smaller learning_rate)")
    lines = [_fmt_label(v) for v in pred.reshape(-1)]
    _write_predictions(args.output_file, ("\n".join(lines) + ("\n" if lines else "")).encode(),
                       to_stdout)
    if args.quiet:
        return 0
    report = sys.stderr if to_stdout else sys.stdout     # the labels have standard output
    if _is_regressor(model):
        err = float(np.mean((pred - y) ** 2))
        r = np.corrcoef(pred, y)[0, 1] if np.std(pred) > 0 and np.std(y) > 0 else float("nan")
        print(f"Mean squared error = {err:g} (regression)", file=report)
        print(f"Squared correlation coefficient = {r * r:g} (regression)", file=report)
    else:
        if _is_outlier_detector(model):
            y = np.where(y > 0, 1, -1)
        correct = int(np.sum(pred == y))
        print(f"Accuracy = {100.0 * correct / len(y):.4g}% ({correct}/{len(y)}) (classification)",
              file=report)
    return 0


def _write_predictions(path: str, data: bytes, to_stdout: bool) -> None:
    """The labels to standard output directly, or atomically to a file."""
    try:
        if to_stdout:
            sys.stdout.flush()
            stream = getattr(sys.stdout, "buffer", None)
            if stream is None:
                sys.stdout.write(data.decode())
            else:
                stream.write(data)
            (stream or sys.stdout).flush()
        else:
            io.write_atomic(path, data)
    except OSError as exc:
        where = "standard output" if to_stdout else path
        raise CLIError(f"cannot write the predictions to {where}: {_os_reason(exc)}") from None


def _fmt_label(v: Any) -> str:
    """A label as written (one per line): numbers as LIBSVM writes them, strings with their
    control characters (line breaks included) escaped."""
    if isinstance(v, (float, np.floating)):
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    return printable(v)


def cmd_info(args: argparse.Namespace) -> int:

    try:
        info = io.describe(args.model_file)
    except (FileNotFoundError, io.ModelFormatError) as exc:
        raise CLIError(str(exc)) from None
    except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError,
            RecursionError) as exc:     # the loader should have said ModelFormatError
        raise _damaged_model(args.model_file, exc, "reading its header") from None
    if args.json:     # JSON escapes every control character (and all non-ASCII) itself
        print(json.dumps(info, indent=2))
        return 0
    lines = [f"{info['file']}: {info['class']}",
             f"  format version {info['format_version']}, written by gpuksvm {info['gpuksvm_version']} "
             f"on {info['created']}, fitted on {info['fitted_device']}",
             f"  {info['n_arrays']} arrays, {info['array_bytes'] / 2**20:.3g} MiB "
             "(validated against the closed model schema; arrays not read)",
             "  parameters:"]
    lines += [f"    {k} = {v}" for k, v in info["params"].items()]
    if info["fitted"]:
        lines.append("  fitted attributes:")
        lines += [f"    {k}: {v}" for k, v in info["fitted"].items()]
        if info["state"]:
            lines.append("  internal state: " + ", ".join(f"{k} ({v})" for k, v in info["state"].items()))
    else:
        lines.append("  (not fitted)")
    lines += [f"  {k} = {v}" for k, v in info["metadata"].items()]
    for line in lines:      # every string comes from the file: no control character reaches the terminal
        print(printable(line))
    return 0


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gpuksvm", description="Scalable kernel SVMs on the GPU "
                                 "(CuPy) or the CPU (NumPy).",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Run 'gpuksvm COMMAND --help' for a command's options.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    tr = sub.add_parser("train", help="fit a model on an SVMlight file and write a model file",
                        description="Fit a model on an SVMlight/LIBSVM file and write a model file.")
    tr.add_argument("-m", "--method", default=DEFAULT_METHOD,
                    help=f"method: {', '.join(METHODS)} (default {DEFAULT_METHOD})")
    tr.add_argument("-t", "--kernel", help="kernel: 0/linear, 1/poly, 2/rbf, 3/sigmoid")
    tr.add_argument("-c", "--C", dest="C", type=float, help="cost C")
    tr.add_argument("-g", "--gamma", help="gamma: a number, scale, auto or mean_dist")
    tr.add_argument("-d", "--degree", type=float, help="polynomial degree")
    tr.add_argument("-r", "--coef0", type=float, help="coef0 of poly/sigmoid")
    tr.add_argument("-k", "--landmarks", type=int,
                    help="landmarks: n_landmarks (LLSVM k, OK-FEB budget B)")
    tr.add_argument("-e", "--tol", type=float, help="stopping tolerance (tol)")
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
    pr.add_argument("output_file", help="where the labels go, one per line ('-': standard output)")
    pr.set_defaults(func=cmd_predict)

    inf = sub.add_parser("info", help="describe a model file", description="Describe a model file "
                         "(class, versions, parameters, fitted attributes) without loading it.")
    inf.add_argument("--json", action="store_true")
    inf.add_argument("model_file")
    inf.set_defaults(func=cmd_info)


    dm = sub.add_parser("demo", help="train every method on the bundled ijcnn1 data, print one table",
                        description=demo.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_arguments(dm)
    dm.set_defaults(func=demo.run_from_args)

    dr = sub.add_parser("doctor", help="check Python, CuPy, the CUDA driver, libraries, devices and kernels",
                        description=doctor_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    dr.add_argument("--expect-gpu", action="store_true",
                    help="exit with status 1 when no GPU can be used")
    dr.set_defaults(func=lambda args: doctor_main(expect_gpu=args.expect_gpu))
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gpuksvm`` / ``python -m gpuksvm``; returns the exit status.

    Every error is one line ``gpuksvm <command>: error: <message>`` on stderr
    and exit status 1 (2 for a bad command line, as argparse does); warnings
    are ``gpuksvm <command>: warning: <message>``.  No traceback is printed: an
    error the CLI does not expect says so and asks for a bug report.
    """
    ap = build_parser()
    args = ap.parse_args(None if argv is None else list(argv))
    if not getattr(args, "command", None):
        ap.print_help()
        return 2

    return run_command(f"gpuksvm {args.command}", args.func, args)
