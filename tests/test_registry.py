"""The estimator registry: one table that the package, the CLI, the model files, the demo and the
tests read."""
from __future__ import annotations

import dataclasses

import pytest

import gpuksvm
from gpuksvm import registry
from gpuksvm.cli import demo
from gpuksvm.cli.commands import METHODS as CLI_METHODS, estimator_class
from gpuksvm.persistence.model_format import REGISTRY
from gpuksvm.persistence.model_format.registry import METHOD_SPECS


def test_every_method_loads_its_public_class():
    for m in registry.METHODS:
        cls = m.load()
        assert cls.__name__ == m.name and cls.__module__ == m.module
        assert getattr(gpuksvm, m.name) is cls and m.name in gpuksvm.__all__


def test_model_files_name_the_registry_methods_by_their_format_names():
    assert set(METHOD_SPECS) == {m.name for m in registry.METHODS}
    for m in registry.METHODS:
        assert REGISTRY[m.format_name].cls is m.load()
    # format identifiers of files already written: never the modules' present paths
    assert registry.method("LLSVM").format_name == "gpuksvm.llsvm.LLSVM"
    assert registry.method("OneClassCVM").format_name == "gpuksvm.cvm.OneClassCVM"


def test_cli_names_and_aliases():
    assert CLI_METHODS == {m.cli[0]: m.name for m in registry.METHODS if m.cli}
    assert registry.cli_names() == tuple(CLI_METHODS)
    for alias, name in [("KSVC", "KernelSVC"), ("exact", "KernelSVC"), ("okfeb_classifier", "OKFEBClassifier"),
                        (" LinearSVM ", "LinearSVM"), ("oneclass-cvm", "OneClassCVM")]:
        assert registry.cli_method(alias).name == name
        assert estimator_class(alias).__name__ == name
    assert registry.cli_method("okfeb-transformer") is None


def test_demo_rows_come_from_the_registry():
    assert demo.DEMO_METHODS == registry.demo_methods()
    assert demo.METHOD_LABELS == ("linear", "svc", "llsvm", "cvm", "svi", "okfeb")


def test_lookups():
    assert registry.find("Pipeline") is None
    with pytest.raises(KeyError, match="no gpuksvm method 'SVC'.*LLSVM"):
        registry.method("SVC")
    assert registry.public_names()["OKFEB"] == "gpuksvm.estimators.okfeb"


def test_entries_are_checked():
    with pytest.raises(ValueError, match="kind must be one of"):
        registry.Method("X", "m", "f", "clusterer")
    with pytest.raises(ValueError, match="task must be one of"):
        registry.ZooCase("x", "ranking")
    m = registry.method("CVM")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "Y"
    with pytest.raises(TypeError):
        m.demo.params["C"] = 1.0          # a read-only mapping
    twin = dataclasses.replace(registry.method("SVI"), name="SVI2", format_name="gpuksvm.svi2.SVI2", zoo=())
    with pytest.raises(ValueError, match=r"CLI names used twice: \['svi'\]"):
        registry._check_table(registry.METHODS + (twin,))
