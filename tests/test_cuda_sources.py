"""Every CUDA source compiles with the real NVRTC and CuPy's options, and ships with the package.

NVRTC is what ``cupy.RawModule`` compiles with on a GPU machine; here it comes
from the pip package ``nvidia-cuda-nvrtc`` (a ``test`` extra) and needs no
GPU.  ``nvcc -ptx`` is not used: it includes math.h implicitly and so passed
a ``smo.cu`` that NVRTC refuses (``INFINITY`` undefined, issue 13).
"""
import subprocess
import sys
import zipfile

import pytest

from gpuemu import nvrtc
from gpuksvm.array import cuda_sources as _cuda

SOURCES = _cuda.cuda_sources()
ARCHS = (75, 80, 90)   # Turing, Ampere, Hopper


def test_sources_found():
    names = {p.name for p in SOURCES}
    assert {"kernel_block.cu", "kernel_matvec.cu", "cvm.cu", "smo.cu"} <= names


@pytest.fixture(scope="module")
def nvrtc_lib():
    try:
        nvrtc.load()
    except nvrtc.NvrtcUnavailable as exc:
        pytest.skip(f"NVRTC compile check not run: {exc}")
    return nvrtc


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_nvrtc_compiles_with_cupy_options(nvrtc_lib, src, arch):
    code = src.read_text()
    res = nvrtc_lib.compile_source(code, src.name, nvrtc_lib.cupy_options(_cuda.nvrtc_options(), arch))
    assert res.ok, f"NVRTC {nvrtc_lib.version()} sm_{arch}, {src.name}:\n{res.log}"
    assert res.lowered and not res.missing_kernels(), res.lowered


def test_nvrtc_check_can_fail(nvrtc_lib):
    """The check is not vacuous: a source using a math.h macro fails as on a GPU machine."""
    code = 'extern "C" __global__ void k(float* x) { x[0] = -INFINITY; }\n'
    res = nvrtc_lib.compile_source(code, "bad.cu", nvrtc_lib.cupy_options(_cuda.nvrtc_options(), 80))
    assert not res.ok and "INFINITY" in res.log


def _kernel_value_call_pragmas(code: str) -> list[str]:
    """The loop pragma governing each gk_kernel_value call of a source (the last one above it)."""
    pragmas, found = [], []
    for line in code.splitlines():
        text = line.strip()
        if text.startswith("#pragma unroll"):
            pragmas.append(text)
        elif "gk_kernel_value<" in text and "__device__" not in text:
            found.append(pragmas[-1] if pragmas else "")
    return found


@pytest.mark.parametrize("name", ["kernel_matvec.cu", "cvm.cu"])
def test_kernel_value_is_evaluated_in_a_rolled_loop(name):
    # Unrolled over the tile's rows, every call inlines one copy of the
    # kernel-value switch (exp, pow, tanh) per row and dtype, which multiplied
    # the NVRTC compile time of these sources about tenfold.  Both take the tile's
    # kernel values through common.cuh's gk_tile_values.
    code = next(p for p in SOURCES if p.name == name).read_text()
    assert "gk_tile_values<" in code and not _kernel_value_call_pragmas(code), name
    header = (_cuda.cuda_source_dir() / "common.cuh").read_text()
    helper = header[header.index("__device__ __forceinline__ void gk_tile_values("):]
    pragmas = _kernel_value_call_pragmas(helper[:helper.index("\n}\n")])
    assert pragmas == ["#pragma unroll 1"], pragmas


def test_loader_reports_missing_cuda():
    from gpuksvm.array import backend as bk
    if bk.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(Exception):
        _cuda.get_function("kernel_block", "kernel_epilogue_f32")


@pytest.mark.slow
def test_wheel_contains_cuda_sources_and_data(tmp_path):
    root = _cuda.cuda_source_dir().parent
    if not (root / "pyproject.toml").exists():
        pytest.skip("not running from a source checkout")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", str(root), "--no-deps",
                          "--no-build-isolation", "-w", str(tmp_path), "-q"],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0 and "No module named" in res.stderr:
        pytest.skip(f"cannot build here: {res.stderr[-200:]}")
    assert res.returncode == 0, res.stderr
    wheel = next(tmp_path.glob("gpuksvm-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for src in SOURCES:
        assert f"gpuksvm/kernels_cuda/{src.name}" in names
    assert "gpuksvm/kernels_cuda/common.cuh" in names
    assert "gpuksvm/data/ijcnn1.trn.bz2" in names
