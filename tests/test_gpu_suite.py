"""bench/gpu_suite.py (the one command for a GPU session) runs: on the emulated GPU at a tiny scale."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GPU_MODE

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.gpu
def test_gpu_suite_runs_emulated_at_tiny_scale(tmp_path):
    if GPU_MODE != "emulated":
        pytest.skip(f"GPU mode is {GPU_MODE}: on a real GPU run bench/gpu_suite.py itself")
    res = subprocess.run([sys.executable, "bench/gpu_suite.py", "--emulated", "--scale", "tiny",
                          "--results", str(tmp_path), "--pytest-args", "tests/test_backend.py -m gpu"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    table = out[out.index("# GPU suite summary"):].splitlines()
    assert "EMULATED" in table[0]
    rows = {line.split()[0]: line for line in table[1:] if line.strip()}
    assert rows["pytest"].endswith("ok")
    for name in ("kernels", "solvers", "svi"):     # the benchmarks with a tiny scale run, and pass
        assert rows[f"bench/{name}.py"].endswith("ok"), rows
    for name in ("llsvm", "cvm", "okfeb", "dask"):
        assert "skipped (no --scale tiny)" in rows[f"bench/{name}.py"]
    assert rows["kernel"].startswith("kernel roofline") and rows["kernel"].endswith("ok"), rows
    measured = json.loads((tmp_path / "kernel_measured.json").read_text())
    assert measured["emulated"] and {(r["kernel"], r["shape"]) for r in measured["rows"]} == {
        (k, f"d={d}") for k in ("kernel_block_tiled_f32", "kernel_epilogue_f32") for d in (2, 22, 64)} | {
        ("kernel_matvec_f32", f"d={d}") for d in (2, 22, 64, 784)} | {
        ("cvm_partial_f32", f"{s} d={d}") for s in ("sampled 413", "exact 1M") for d in (2, 784)}
    assert all(r["measured_s"] > 0 and r["roofline_fraction_predicted"] is not None for r in measured["rows"])
    kern = json.loads((tmp_path / "kernels.json").read_text())   # the kernels_rbf case's records
    assert {r["method"] for r in kern["records"]} == {"cupy-plain", "gemm+epilogue", "tiled"}
    solvers = json.loads((tmp_path / "solvers.json").read_text())
    assert {r["scale"] for r in solvers["records"]} == {"tiny"} and solvers["records"]
    assert not (ROOT / "bench" / "results" / "solvers.jsonl").exists()


@pytest.mark.gpu
def test_gpu_suite_makes_its_results_folder(tmp_path):
    """Only the kernel table, into a folder that is not there yet (on an H200 the table was lost to
    a FileNotFoundError: no benchmark had made the folder before it)."""
    if GPU_MODE != "emulated":
        pytest.skip(f"GPU mode is {GPU_MODE}: on a real GPU run bench/gpu_suite.py itself")
    folder = tmp_path / "new" / "results"
    res = subprocess.run([sys.executable, "bench/gpu_suite.py", "--emulated", "--scale", "tiny", "--skip-tests",
                          "--only", "", "--results", str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    measured = json.loads((folder / "kernel_measured.json").read_text())
    assert measured["rows"] and measured["device"] == "emulated GPU"
