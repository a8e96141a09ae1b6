"""The estimator registry: one declarative table of gpuksvm's methods.

Each :class:`Method` names a public estimator class by its module path — a
string: this module imports no other ``gpuksvm`` module, and a class is
imported only when :meth:`Method.load` is called — and says where the class
takes part:

* ``gpuksvm.<name>``: the package's lazily imported public names
  (:mod:`gpuksvm`);
* ``cli``: the ``gpuksvm train -m`` names, the first one shown, the others
  accepted (:mod:`gpuksvm.cli.commands`); ``kind`` says whether the command line
  fits it on ``(X, y)`` or on ``X`` alone and how it scores predictions;
* ``format_name``: the key a model file names the class by
  (:mod:`gpuksvm.persistence.model_format.registry` pairs it with the class's
  declared fitted attributes).  Format names are identifiers of the file
  format: once files have been written with one, it never changes, wherever
  the class's module lives;
* ``demo``: its row of ``gpuksvm demo`` (:mod:`gpuksvm.cli.demo`);
* ``zoo`` and ``check_params``: the small fitted models every estimator test
  runs (``tests/_estimator_zoo.py``) and the parameter sets of scikit-learn's
  estimator checks (``tests/test_common.py``);
* ``points``: what :func:`gpuksvm.plot.model_points` calls the rows of the
  model's ``support_vectors_``.

Adding a method: its estimator module, its solver, one :class:`Method` here
and its fitted-attribute declaration in the model-file registry (see
``CONTRIBUTING.md``).

Examples
--------
>>> from gpuksvm import registry
>>> registry.cli_method("ksvc").name
'KernelSVC'
>>> registry.method("LLSVM").format_name
'gpuksvm.llsvm.LLSVM'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from types import MappingProxyType
from typing import Any, Mapping

__all__ = ["Method", "Demo", "ZooCase", "METHODS", "KINDS", "TASKS", "method", "find", "cli_method",
           "cli_names", "demo_methods", "public_names"]

#: what a method's estimator is: how it is fitted and scored
KINDS = ("classifier", "regressor", "outlier_detector", "transformer")
#: the data a test-zoo model is fitted on (``tests/_estimator_zoo.py``'s ``zoo_data``)
TASKS = ("binary", "multiclass", "blocks", "one_class", "transform", "regression")


def _frozen(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(params or {}))


@dataclass(frozen=True)
class Demo:
    """A method's row of ``gpuksvm demo``.

    Attributes
    ----------
    label : str
        The row's name (and the ``--methods`` / ``--set LABEL.PARAM=...`` key).
    params : mapping
        Constructor parameters (the demo adds ``device`` and ``random_state``).
    tiny_params : mapping
        Parameters overriding ``params`` in ``--tiny`` runs.
    """

    label: str
    params: Mapping[str, Any] = field(default_factory=dict)
    tiny_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen(self.params))
        object.__setattr__(self, "tiny_params", _frozen(self.tiny_params))


@dataclass(frozen=True)
class ZooCase:
    """One small fitted model of the test zoo.

    Attributes
    ----------
    name : str
        The test id (unique across the registry).
    task : str
        One of :data:`TASKS`: the data it is fitted on (``"blocks"``: a binary
        problem fitted out of core on a list of ``(X_block, y_block)`` pairs).
    params : mapping
        Constructor parameters (the zoo adds ``device`` and ``random_state``).
    """

    name: str
    task: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"zoo case {self.name!r}: task must be one of {TASKS}, got {self.task!r}")
        object.__setattr__(self, "params", _frozen(self.params))


@dataclass(frozen=True)
class Method:
    """One public estimator class and every place it takes part.

    Attributes
    ----------
    name : str
        The public name, ``gpuksvm.<name>`` (and the class's name).
    module : str
        The module that defines the class (imported by :meth:`load` only).
    format_name : str
        The key model files name the class by (never changes).
    kind : str
        One of :data:`KINDS`.
    cli : tuple of str
        ``gpuksvm train -m`` names: the first is shown, the others are accepted
        (empty: not offered on the command line).
    demo : Demo or None
        Its row of ``gpuksvm demo`` (None: not in the demo).
    zoo : tuple of ZooCase
        Its models in the test zoo.
    check_params : tuple of mapping
        Parameter sets scikit-learn's estimator checks run it with.
    points : str
        What the rows of its ``support_vectors_`` are called in plots:
        ``"support"`` (support vectors) or ``"core"`` (core vectors).
    """

    name: str
    module: str
    format_name: str
    kind: str
    cli: tuple[str, ...] = ()
    demo: Demo | None = None
    zoo: tuple[ZooCase, ...] = ()
    check_params: tuple[Mapping[str, Any], ...] = ({},)
    points: str = "support"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.points not in ("support", "core"):
            raise ValueError(f"{self.name}: points must be 'support' or 'core', got {self.points!r}")
        object.__setattr__(self, "check_params", tuple(_frozen(p) for p in self.check_params))

    def load(self) -> type:
        """The estimator class (imports its module)."""
        return getattr(import_module(self.module), self.name)


_CHECKERBOARD = {"gamma": 2.0, "C": 10.0}
_IJCNN1 = {"kernel": "rbf", "gamma": 2.0, "C": 32.0}      # the LLSVM paper's setting (SPEC §7)

#: every public estimator, in the order the demo, the command line and the documentation list them
METHODS: tuple[Method, ...] = (
    Method("LinearSVM", "gpuksvm.estimators.linear_svm", "gpuksvm.linear_svm.LinearSVM", "classifier",
           cli=("linear", "linearsvm"),
           demo=Demo("linear", {"C": 1.0}),
           zoo=(ZooCase("linear", "binary", {"C": 1.0}),
                ZooCase("linear_blocks", "blocks", {"C": 1.0}),
                ZooCase("linear_multiclass", "multiclass", {"C": 1.0})),
           check_params=({}, {"loss": "hinge", "tol": 1e-6, "random_state": 0})),
    Method("KernelSVC", "gpuksvm.estimators.kernel_svc", "gpuksvm.kernel_svc.KernelSVC", "classifier",
           cli=("svc", "kernelsvc", "ksvc", "exact"),
           demo=Demo("svc", _IJCNN1),
           zoo=(ZooCase("svc", "binary", _CHECKERBOARD),)),
    Method("LLSVM", "gpuksvm.estimators.llsvm", "gpuksvm.llsvm.LLSVM", "classifier",
           cli=("llsvm",),
           demo=Demo("llsvm", {**_IJCNN1, "n_landmarks": 1000}, {"n_landmarks": 100}),
           zoo=(ZooCase("llsvm", "binary", {**_CHECKERBOARD, "n_landmarks": 20}),
                ZooCase("llsvm_blocks", "blocks", {**_CHECKERBOARD, "n_landmarks": 20}),
                ZooCase("llsvm_multiclass", "multiclass", {**_CHECKERBOARD, "n_landmarks": 20})),
           check_params=({"n_landmarks": 20, "random_state": 0, "dtype": "float64"},
                         {"n_landmarks": 20, "random_state": 0})),
    Method("CVM", "gpuksvm.estimators.cvm", "gpuksvm.cvm.CVM", "classifier",
           cli=("cvm",),
           demo=Demo("cvm", _IJCNN1),
           zoo=(ZooCase("cvm", "binary", _CHECKERBOARD),
                ZooCase("cvm_multiclass", "multiclass", _CHECKERBOARD)),
           check_params=({"random_state": 0},), points="core"),
    Method("OneClassCVM", "gpuksvm.estimators.cvm", "gpuksvm.cvm.OneClassCVM", "outlier_detector",
           cli=("one-class-cvm", "oneclass-cvm"),
           zoo=(ZooCase("one_class_cvm", "one_class", {"gamma": 2.0}),),
           check_params=({"random_state": 0},), points="core"),
    Method("SVI", "gpuksvm.estimators.svi", "gpuksvm.svi.SVI", "classifier",
           cli=("svi",),
           # γ = 0.5, C = 512 (bench/svi.py): 98.3% with half of SVC's SVs; at γ = 2, C = 32 its
           # sub-SVMs on 5,000 rows find a wide margin band (97.9%, more SVs than SVC)
           demo=Demo("svi", {"kernel": "rbf", "gamma": 0.5, "C": 512.0}),
           zoo=(ZooCase("svi", "binary", _CHECKERBOARD),
                ZooCase("svi_multiclass", "multiclass", _CHECKERBOARD)),
           check_params=({"random_state": 0},)),
    Method("OKFEB", "gpuksvm.estimators.okfeb", "gpuksvm.okfeb.OKFEB", "transformer",
           zoo=(ZooCase("okfeb", "transform", {"gamma": 2.0}),),
           check_params=({"rank": 4, "n_landmarks": 10},)),
    Method("OKFEBClassifier", "gpuksvm.estimators.okfeb", "gpuksvm.okfeb.OKFEBClassifier", "classifier",
           cli=("okfeb", "okfeb-classifier"),
           # at γ = 2 its r = 50 tracked features leave an LS error of 0.4 and carry no class
           # information (90.4%, majority class 90.5%: the fit warns, BudgetTooSmallWarning);
           # γ = 0.5 tracks the kernel well (bench/okfeb.py); one pass, the linear SVM solved exactly
           demo=Demo("okfeb", {"kernel": "rbf", "gamma": 0.5, "alpha": 1e-5}),
           zoo=(ZooCase("okfeb_classifier", "binary", {"gamma": 2.0}),),
           check_params=({"rank": 4, "n_landmarks": 10},)),
    Method("OKFEBRegressor", "gpuksvm.estimators.okfeb", "gpuksvm.okfeb.OKFEBRegressor", "regressor",
           cli=("okfeb-regressor",),
           zoo=(ZooCase("okfeb_regressor", "regression", {"gamma": 2.0}),),
           check_params=({"rank": 4, "n_landmarks": 10},)),
)

_BY_NAME = {m.name: m for m in METHODS}
_BY_CLI = {alias: m for m in METHODS for alias in m.cli}


def _check_table(methods: tuple[Method, ...]) -> None:
    """Names, CLI names, format names, demo labels and zoo cases are unique."""
    for what, keys in (("name", [m.name for m in methods]),
                       ("CLI name", [a for m in methods for a in m.cli]),
                       ("format name", [m.format_name for m in methods]),
                       ("demo label", [m.demo.label for m in methods if m.demo]),
                       ("zoo case", [c.name for m in methods for c in m.zoo])):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"gpuksvm.registry: {what}s used twice: {twice}")


_check_table(METHODS)


def method(name: str) -> Method:
    """The method whose public name is ``name`` (a KeyError naming the choices otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no gpuksvm method {name!r}; the methods are: {', '.join(_BY_NAME)}") from None


def find(name: str) -> Method | None:
    """The method whose public name is ``name``, or None (a class that is not a registered method)."""
    return _BY_NAME.get(name)


def cli_method(name: str) -> Method | None:
    """The method a ``gpuksvm train -m`` name means (case, ``_`` / ``-`` ignored), or None."""
    return _BY_CLI.get(name.strip().lower().replace("_", "-"))


def cli_names() -> tuple[str, ...]:
    """The command line's method names, as shown (one per method that has one)."""
    return tuple(m.cli[0] for m in METHODS if m.cli)


def demo_methods() -> tuple[Method, ...]:
    """The methods in ``gpuksvm demo``, in their table's order."""
    return tuple(m for m in METHODS if m.demo is not None)


def public_names() -> dict[str, str]:
    """Public estimator name → the module defining it (the package's lazy imports)."""
    return {m.name: m.module for m in METHODS}
