"""The CUDA sources through CuPy's own compile path, and CuPy's kernel-cache key.

``tests/test_cuda_sources.py`` calls NVRTC directly with the options CuPy appends; here the
real CuPy (``tests/realcupy.py``, a subprocess, no GPU) does what ``cupy.RawModule(code=,
options=gpuksvm's options)`` does, called by the library's
:func:`gpuksvm.array.gpu_probe.compile_for_arch` (what ``gpuksvm doctor`` runs without a device):
``compile_with_cache`` assembles the options (CCCL, CuPy's and the CUDA headers' include dirs),
``_compile_module_with_cache`` adds ``-ftz=true`` and ``-arch=sm_XX``, computes the
kernel-cache key and compiles with NVRTC.  Only the final ``Module.load`` (which needs a
driver) is not reached, and nothing is written to CuPy's kernel cache.  Skipped, with the
reason, without the real CuPy.
"""
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

import realcupy
from gpuksvm.array import cuda_sources as _cuda

ARCHS = (75, 80, 90)   # Turing, Ampere, Hopper


def _job(path, arch, options=None):
    return {"name": path.name, "arch": arch, "code": path.read_text(),
            "options": list(_cuda.nvrtc_options(path.parent) if options is None else options)}


def _compile(jobs: list, timeout: float) -> dict:
    """The real CuPy's ``compile`` answer for ``jobs``, asked of two processes at once (half the
    jobs each; the results in the jobs' order): one process compiled the twelve of
    :func:`compiled` in 15.7 s, two in 9 s (a quiet 2-core machine)."""
    half = (len(jobs) + 1) // 2
    with ThreadPoolExecutor(2) as pool:     # each ask waits on its own subprocess
        parts = list(pool.map(lambda part: realcupy.ask("compile", {"jobs": part}, timeout=timeout),
                              (jobs[:half], jobs[half:])))
    return dict(parts[0], results=[r for p in parts for r in p["results"]],
                cache_written=sorted({f for p in parts for f in p["cache_written"]}))


@pytest.fixture(scope="module")
def compiled():
    realcupy.require()
    return _compile([_job(src, arch) for src in _cuda.cuda_sources() for arch in ARCHS], timeout=900)


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
@pytest.mark.parametrize("src", _cuda.cuda_sources(), ids=lambda p: p.name)
def test_compiles_through_cupys_path(compiled, src, arch):
    res = next(r for r in compiled["results"] if r["source"] == src.name and r["arch"] == arch)
    assert res["ok"], f"CuPy {compiled['_real']['version']} sm_{arch}, {src.name}:\n{res.get('log')}"
    assert res["elf"] and res["cubin_bytes"] > 0           # a cubin for sm_XX, as RawModule loads it
    opts = res["options"]
    assert f"-I{_cuda.cuda_source_dir()}" in opts and "-std=c++14" in opts
    assert any(o.startswith("-I") and o.endswith("/cupy/_core/include") for o in opts), opts   # CuPy's headers
    assert sum(o.startswith("-I") for o in opts) >= 5, opts    # CCCL (3), CuPy's, the CUDA headers, ours


def test_nothing_written_to_the_kernel_cache(compiled):
    assert compiled["cache_written"] == []


def test_cache_key_differs_per_arch_and_source(compiled):
    keys = [(r["source"], r["arch"], r["key"]) for r in compiled["results"]]
    assert len({k for *_, k in keys}) == len(keys)


def test_cache_key_follows_the_headers(tmp_path):
    """A change to common.cuh alone gives another CuPy cache key (the options carry its digest);
    without the digest CuPy's key would stay the same and a stale cached binary would run."""
    realcupy.require()
    src_dir = tmp_path / "kernels_cuda"
    shutil.copytree(_cuda.cuda_source_dir(), src_dir)
    src = src_dir / "kernel_matvec.cu"
    before = _job(src, 80)
    bare = [o for o in before["options"] if not o.startswith("-DGPUKSVM_HEADERS=")]
    header = src_dir / "common.cuh"
    header.write_text(header.read_text() + "\n// a changed header\n")
    after = _job(src, 80)
    assert after["code"] == before["code"]
    res = _compile([before, after, dict(before, options=bare), dict(after, options=bare)], timeout=600)["results"]
    assert all(r["ok"] for r in res), res
    assert res[0]["key"] != res[1]["key"]
    assert res[2]["key"] == res[3]["key"]     # CuPy itself does not read the header into its key
