"""The estimators' parameters, declared once: one vocabulary, one validation, one CLI.

Every estimator declares its parameters in ``_parameter_constraints``
(scikit-learn's mechanism: :mod:`sklearn.utils._param_validation`), built from
the shared pieces below so that one concept has one name, one type and one
range everywhere:

============================  ==================================================
``kernel``, ``gamma``,        the kernel (:func:`gpuksvm.kernels.kernel.make_kernel`);
``degree``, ``coef0``         ``degree`` an int ≥ 0 and ``coef0`` a finite float
                              (default 0.0, as scikit-learn's SVC) in every
                              estimator
``C``                         the cost, a finite float > 0
``tol``, ``max_iter``         the stopping tolerance (> 0) and the iteration
                              cap; ``max_iter=-1`` is "no limit" wherever a cap
                              can be lifted (SVC's spelling)
``n_landmarks``               the number of stored landmark vectors (LLSVM's k)
``multi_class``               the training scheme for more than two classes
                              (``"ovo"`` / ``"ovr"``);
``decision_function_shape``   the shape of an OvO model's decision values
``class_weight``              ``None``, ``"balanced"`` or a dict
``device``, ``dtype``,        where and in which precision a fit runs, its seed
``random_state``, ``verbose`` and its progress output
============================  ==================================================

:meth:`ParamsMixin._check_params` runs scikit-learn's validation of the
declarations, then two rules scikit-learn does not have (a numeric parameter
is never a bool, and an integer fits in 64 bits), then the class's own
cross-parameter rules (``_check_param_relations``).  Renamed parameters keep
their old name for one release (``_renamed_parameters``, a FutureWarning).
The command line (:mod:`gpuksvm.cli.commands`) reads the same declarations to know
which options a method has.
"""
from __future__ import annotations

import inspect
import re
import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import (Hidden, Interval, InvalidParameterError, Options, StrOptions,
                                             validate_parameter_constraints)

from gpuksvm.array.backend import Device
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.array.validation import check_int_width, check_param

__all__ = ["ParamsMixin", "DEPRECATED", "deprecated", "is_unset", "check_params", "renamed_parameters", "grid_values",
           "positive_floats",
           "positive", "non_negative", "count", "KERNEL_PARAMS", "DEVICE_PARAMS", "CLASS_WEIGHT",
           "MAX_ITER_OR_NO_LIMIT", "InvalidParameterError", "parameter_entries", "shared_parameter_doc"]

#: default of a parameter kept one release under an old name (it takes effect only when set)
DEPRECATED = "deprecated"

_INT64_MAX = 2 ** 63 - 1


def positive(kind: type = Real) -> Interval:
    """A finite number > 0 (an int > 0 for ``kind=Integral``)."""
    if kind is Integral:
        return Interval(Integral, 1, _INT64_MAX, closed="both")
    return Interval(Real, 0, np.inf, closed="neither")


def non_negative(kind: type = Real) -> Interval:
    """A finite number ≥ 0."""
    if kind is Integral:
        return Interval(Integral, 0, _INT64_MAX, closed="both")
    return Interval(Real, 0, np.inf, closed="left")


def count(low: int) -> Interval:
    """An int ≥ ``low``."""
    return Interval(Integral, low, _INT64_MAX, closed="both")


FINITE = Interval(Real, -np.inf, np.inf, closed="neither")

#: the kernel vocabulary (KernelSVC adds "precomputed" and callables)
KERNEL_PARAMS: dict[str, list] = {
    "kernel": [StrOptions({"rbf", "poly", "linear", "sigmoid"}), Kernel],
    "gamma": [StrOptions({"scale", "auto", "mean_dist"}), Interval(Real, 0, np.inf, closed="left")],
    # an int, as scikit-learn's SVC; an integral float is accepted for one release (FutureWarning)
    "degree": [non_negative(Integral), Hidden(Interval(Real, 0, np.inf, closed="left"))],
    "coef0": [FINITE],
}

#: where a fit runs, in which precision, its seed and its progress output
DEVICE_PARAMS: dict[str, list] = {
    "device": [str, Device],
    "dtype": [None, StrOptions({"float32", "float64"}), Options(type, {np.float32, np.float64}),
              np.dtype],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}

CLASS_WEIGHT = [StrOptions({"balanced"}), dict, None]

#: an iteration cap, or -1 for none (scikit-learn SVC's spelling)
MAX_ITER_OR_NO_LIMIT = [count(1), Options(Integral, {-1})]


def deprecated(constraints: list) -> list:
    """Constraints of a parameter kept one release under an old name: unset (:data:`DEPRECATED`),
    or a value the ``constraints`` accept (for a renamed one: the new name's constraints)."""
    return [Hidden(StrOptions({DEPRECATED})), *constraints]


def is_unset(value: Any) -> bool:
    """Whether a deprecated parameter was left at :data:`DEPRECATED` (its default)."""
    return isinstance(value, str) and value == DEPRECATED


_DOC_SECTION = re.compile(r"^[ \t]*([A-Z][A-Za-z ]*)\n[ \t]*-{3,}[ \t]*$", re.M)


def _parameters_span(doc: str) -> tuple[int, int] | None:
    """(start, stop) of the entries of the numpydoc "Parameters" section of ``doc``, or None."""
    heads = list(_DOC_SECTION.finditer(doc))
    head = next((m for m in heads if m.group(1) == "Parameters"), None)
    if head is None:
        return None
    start = head.end() + 1
    return start, next((m.start() for m in heads if m.start() > head.end()), len(doc))


def parameter_entries(doc: str) -> dict[str, str]:
    """The entries of the numpydoc "Parameters" section of ``doc``: name → the entry's text.

    An entry is its ``name : type, default=value`` line and the description
    lines under it, as indented in ``doc``, ending with a newline; a line that
    names several parameters (``tol, max_iter : ...``) gives each of them that
    text.

    Examples
    --------
    >>> doc = '''Title.
    ...
    ...     Parameters
    ...     ----------
    ...     C : float, default=1.0
    ...         The cost.
    ...     kernel : {"rbf", "linear"}, default="rbf"
    ...
    ...     Examples
    ...     --------
    ... '''
    >>> entries = parameter_entries(doc)
    >>> list(entries)
    ['C', 'kernel']
    >>> print(entries["C"], end="")
        C : float, default=1.0
            The cost.
    """
    span = _parameters_span(doc)
    lines = [line for line in doc[span[0]:span[1]].splitlines() if line.strip()] if span else []
    if not lines:
        return {}
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    groups: list[tuple[list[str], list[str]]] = []
    for line in lines:
        if len(line) - len(line.lstrip()) == indent:
            groups.append(([name.strip() for name in line.strip().partition(" : ")[0].split(",")], []))
        groups[-1][1].append(line)
    return {name: "\n".join(text) + "\n" for names, text in groups for name in names}


def shared_parameter_doc(cls: type, *sources: type) -> str:
    """``cls.__doc__`` with every parameter of ``cls.__init__`` in its Parameters section.

    A parameter takes ``cls``'s own entry when its docstring has one, else the
    entry of the first of ``sources`` whose docstring has it (the estimators
    that share parameters with another describe them once, in the other's
    docstring); the entries follow the signature's order.  A parameter that no
    docstring describes is left out (``tests/test_docstrings.py`` reports it).
    Without docstrings (``python -OO``) it returns ``cls.__doc__`` as it is.
    """
    doc = cls.__doc__
    span = _parameters_span(doc) if doc else None
    if span is None:
        return doc
    own = parameter_entries(doc)
    shared = [parameter_entries(source.__doc__ or "") for source in sources]
    entries = []
    for name in list(inspect.signature(cls.__init__).parameters)[1:]:
        entry = next((found[name] for found in (own, *shared) if name in found), None)
        if entry is not None:
            entries.append(entry)
    return doc[:span[0]] + "".join(entries) + "\n" + doc[span[1]:]


def positive_floats(name: str, values: Any) -> list[float]:
    """The values of parameter ``name`` in a grid fit as floats, each checked a positive number as
    it is given (a bool or a string is refused, as the estimators' own constraints refuse it)."""
    values = list(values)
    for v in values:
        check_param(name, v, Real, low=0.0, closed="neither")
    return [float(v) for v in values]


def grid_values(gammas: Any, Cs: Any) -> tuple[list[float], list[float]]:
    """The γ and C values of a grid fit (``fit_llsvm_grid``, ``fit_svi_grid``) as floats: both
    non-empty, every value a positive number (:func:`positive_floats`; ValueError otherwise)."""
    gammas, Cs = positive_floats("gamma", gammas), positive_floats("C", Cs)
    if not gammas or not Cs:
        raise ValueError("gammas and Cs must be non-empty")
    return gammas, Cs


def check_params(est: ParamsMixin) -> None:
    """Validate ``est``'s parameters now, as its ``fit`` does first (the command line, model files)."""
    est._check_params()


def renamed_parameters(cls: type) -> dict[str, str]:
    """Old parameter name → new name, for one release, of an estimator class (empty when none)."""
    return dict(getattr(cls, "_renamed_parameters", {}))


class ParamsMixin:
    """``_check_params``: the declared constraints, the 64-bit/bool rules, the class's relations."""

    _parameter_constraints: dict = {}
    #: old parameter name → new name, for one release
    _renamed_parameters: dict = {}

    def _check_params(self) -> None:
        # the declared parameters' values, read directly: get_params inspects the signature (0.2 ms a
        # call; a search validates every fold model it builds)
        validate_parameter_constraints(self._parameter_constraints,
                                       {name: getattr(self, name) for name in self._parameter_constraints},
                                       caller_name=type(self).__name__)
        for name, constraints in self._parameter_constraints.items():
            value = getattr(self, name)
            numeric = [c for c in constraints if isinstance(c, Interval)]
            if not numeric or not isinstance(value, (bool, np.bool_, Integral)):
                continue
            if isinstance(value, (bool, np.bool_)):
                raise InvalidParameterError(f"{type(self).__name__}: {name} must be a number, not a bool; "
                                            f"got {value!r}")
            check_int_width(f"{type(self).__name__}: {name}", value)
        degree = getattr(self, "degree", None)
        if isinstance(degree, (float, np.floating)) and "degree" in self._parameter_constraints:
            if float(degree).is_integer():
                warnings.warn(f"{type(self).__name__}: degree={degree!r} should be an int (as scikit-learn's "
                              "SVC); a float will be refused in the next release", FutureWarning, stacklevel=3)
            else:
                raise InvalidParameterError(f"degree must be a whole number (an int), got {degree!r}: a "
                                            "fractional power of a negative base is not a real number")
        self._resolve_renamed()
        self._check_param_relations()

    def _resolve_renamed(self) -> None:
        """Old names set by the user (``_renamed_parameters``: old → new) warn; setting both is an error."""
        cls = type(self).__name__
        for old, new in self._renamed_parameters.items():
            value = getattr(self, old)
            if is_unset(value):
                continue
            defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
            current = getattr(self, new)
            if not (current is defaults[new] or (type(current) is type(defaults[new]) and current == defaults[new])):
                raise InvalidParameterError(f"{cls}: set {new!r} only ({old!r} is its old name, deprecated); "
                                            f"got both {old}={value!r} and {new}={current!r}")
            warnings.warn(f"{cls}: the parameter {old!r} is now called {new!r}; {old!r} will be removed "
                          "in the next release", FutureWarning, stacklevel=4)

    def _check_param_relations(self) -> None:
        """Rules between parameters (each class its own); the declared ones are checked before."""

    def _param(self, name: str) -> Any:
        """The effective value of parameter ``name``: its old name's value when only that was set."""
        for old, new in self._renamed_parameters.items():
            if new == name and not is_unset(getattr(self, old, DEPRECATED)):
                return getattr(self, old)
        return getattr(self, name)
