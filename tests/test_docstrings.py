"""The docstrings: every public name has one, every estimator parameter is documented with its
default (numpydoc ``name : type, default=value``), and the package and README carry no issue
numbers (the history is in CHANGELOG.md).  The estimators and the key functions have examples;
they run in ``make test`` (``pytest --doctest-modules gpuksvm``)."""
import ast
import inspect
import re
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator

import gpuksvm
from gpuksvm.estimators.params import parameter_entries

ROOT = Path(__file__).resolve().parent.parent
ISSUE_REF = re.compile(r"[Ii]ssues? #?[0-9]+")

PUBLIC = {name: getattr(gpuksvm, name) for name in gpuksvm.__all__ if name != "__version__"}
ESTIMATORS = {name: obj for name, obj in PUBLIC.items()
              if inspect.isclass(obj) and issubclass(obj, BaseEstimator)}


def type_line(entry: str) -> str:
    """The text after ``name : `` on the first line of a Parameters entry ('' when it has no type)."""
    return entry.splitlines()[0].partition(" : ")[2]


def documented_default(spec: str):
    """The value after ``default=`` at the end of a type line, as a Python literal."""
    m = re.search(r",\s*default=(.+)$", spec)
    if m is None:
        raise ValueError("no ', default=...' at the end of the type line")
    return ast.literal_eval(m.group(1).strip())


def test_the_parser_reads_numpydoc_entries():
    doc = """Title.

    Parameters
    ----------
    C : float, default=1.0
        Cost.
    kernel : {"rbf", "linear"}, default="rbf"
    tol, gamma : float
        Grouped.

    Attributes
    ----------
    coef_ : array
    """
    entries = parameter_entries(doc)
    assert list(entries) == ["C", "kernel", "tol", "gamma"]
    assert entries["C"] == "    C : float, default=1.0\n        Cost.\n"
    assert documented_default(type_line(entries["C"])) == 1.0
    assert documented_default(type_line(entries["kernel"])) == "rbf"
    assert entries["tol"] == entries["gamma"]
    with pytest.raises(ValueError):
        documented_default(type_line(entries["tol"]))


def test_the_public_estimators_are_found():
    assert {"LinearSVM", "KernelSVC", "LLSVM", "CVM", "OneClassCVM", "SVI", "OKFEB", "OKFEBClassifier",
            "OKFEBRegressor"} <= set(ESTIMATORS)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_has_a_docstring(name):
    obj = PUBLIC[name]
    if inspect.isclass(obj) or callable(obj):
        assert isinstance(obj.__doc__, str) and obj.__doc__.strip(), f"gpuksvm.{name} has no docstring"


#: the public functions whose docstrings carry an example (doctor's output is the machine's own)
WITH_EXAMPLES = sorted(set(ESTIMATORS) | {"make_kernel", "kernel_block", "kernel_diag", "kernel_matvec",
                                          "config_context", "get_config", "set_config", "resolve_device",
                                          "cuda_available", "save", "Kernel"})


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_public_estimators_and_key_functions_have_examples(name):
    doc = PUBLIC[name].__doc__
    assert re.search(r"^\s*Examples\n\s*-{8}\n(.|\n)*>>> ", doc, re.M), f"gpuksvm.{name}: no Examples section"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_parameter_is_documented_with_its_default(name):
    cls = ESTIMATORS[name]
    entries = parameter_entries(cls.__doc__)
    defaults = {p.name: p.default for p in inspect.signature(cls.__init__).parameters.values()
                if p.name != "self"}
    problems = []
    for param in cls().get_params(deep=False):
        if param not in entries:
            problems.append(f"{param}: not in the Parameters section")
            continue
        spec = type_line(entries[param])
        try:
            doc_default = documented_default(spec)
        except (ValueError, SyntaxError) as exc:
            problems.append(f"{param} : {spec!r}: {exc}")
            continue
        if repr(doc_default) != repr(defaults[param]):
            problems.append(f"{param}: documented default={doc_default!r}, the constructor's {defaults[param]!r}")
    extra = set(entries) - set(defaults)
    if extra:
        problems.append(f"documented but not parameters: {sorted(extra)}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_no_issue_numbers_in_the_package_or_readme():
    files = [p for p in (ROOT / "gpuksvm").rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".txt", ".cu",
                                                                                          ".cuh", ".json")]
    files.append(ROOT / "README.md")
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for p in files for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if ISSUE_REF.search(line)]
    assert not hits, "issue numbers belong in CHANGELOG.md, not the product:\n" + "\n".join(hits)
