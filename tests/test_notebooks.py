"""The notebooks run top to bottom on a CPU and show their plots (nbclient)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "gpuksvm-tests"


@pytest.fixture(scope="module")
def kernel_dirs(tmp_path_factory):
    """A kernel spec that runs *this* interpreter (the venv), whatever `python` is on PATH."""
    base = tmp_path_factory.mktemp("kernels")
    spec = base / KERNEL
    spec.mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "gpuksvm tests", "language": "python", "env": env}))
    return [str(base)]


def test_notebooks_exist():
    names = {p.stem for p in NOTEBOOKS}
    for expected in ("00_quickstart", "01_llsvm_error_vs_k", "02_cvm_time_vs_n", "03_svi_two_sines",
                     "04_okfeb_tracking", "05_gpu_vs_cpu"):
        assert expected in names


def test_notebooks_are_stored_clean():
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{p.name} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_dirs, tmp_path):
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=kernel_dirs))
    client = nbclient.NotebookClient(nb, km=km, timeout=300, allow_errors=False,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert images, f"{path.name} showed no plot"
