"""Module paths of the previous layout keep working for one release (``gpuksvm._moved``).

Each runs in a fresh interpreter: an alias, once imported, stays in ``sys.modules`` for the
rest of a process, so a test in this process would see the second import, not the first.
"""
from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpuksvm
from gpuksvm._moved import MOVED_MODULES


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)


def test_every_previous_path_names_a_present_module_and_none_is_still_a_file():
    package = Path(gpuksvm.__file__).parent
    for old, new in MOVED_MODULES.items():
        assert importlib.util.find_spec(new) is not None, new
        # a previous path that is still a file of its own would be shadowed by the finder
        place = package.joinpath(*old.split(".")[1:])
        assert not place.with_suffix(".py").exists() and not (place / "__init__.py").exists(), old
    assert "gpuksvm.doctor" not in MOVED_MODULES      # that name is the public function


def test_a_previous_path_is_the_same_module_with_a_future_warning():
    out = _run("""
        import warnings
        warnings.simplefilter("error")
        import gpuksvm.estimators.llsvm as present
        try:
            import gpuksvm.llsvm
        except FutureWarning as w:
            assert "gpuksvm.llsvm has moved to gpuksvm.estimators.llsvm" in str(w), w
        else:
            raise AssertionError("no FutureWarning")
        warnings.simplefilter("ignore")
        import gpuksvm.llsvm as old
        from gpuksvm.backend import to_device
        from gpuksvm.array.backend import to_device as present_to_device
        assert old is present and old.LLSVM is present.LLSVM and to_device is present_to_device
        assert present.__spec__.name == "gpuksvm.estimators.llsvm"      # its own spec, not the alias's
        import gpuksvm
        assert callable(gpuksvm.doctor)                                    # not replaced by a module
        import gpuksvm.persistence.model_format.consistency as consistency
        import gpuksvm.model_format.consistency as old_consistency        # below a moved package
        assert old_consistency is consistency
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_pickle_naming_a_previous_path_loads():
    est = gpuksvm.LinearSVM(device="cpu").fit(np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 0, 1, 1])
    data = pickle.dumps(est, protocol=2)      # classes as text: "c<module>\n<name>\n"
    assert b"cgpuksvm.estimators.linear_svm\nLinearSVM\n" in data
    old = data.replace(b"cgpuksvm.estimators.linear_svm\n", b"cgpuksvm.linear_svm\n")
    assert old != data
    out = subprocess.run([sys.executable, "-W", "ignore::FutureWarning", "-c",
                          "import pickle, sys; m = pickle.loads(sys.stdin.buffer.read()); "
                          "print(type(m).__module__, m.predict([[0.0], [3.0]]).tolist())"],
                         input=old, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split() == ["gpuksvm.estimators.linear_svm", "[0,", "1]"]


@pytest.mark.parametrize("argv", [["-m", "gpuksvm.demo", "--help"]])
def test_python_m_a_previous_path_runs_the_present_module(argv):
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "usage" in out.stdout.lower() and "moved to gpuksvm.cli.demo" in out.stderr
