"""The CUDA extras give a GPU user a GPU: a fresh ``pip install ".[cuda12]"`` / ``".[cuda13]"``
brings CuPy *with* the CUDA libraries it loads, and the real CuPy on a machine without a
driver tells why there is no GPU and what would fix it.  No GPU needed.

Each extra is installed into its own virtual environment, as a user would
(``pip install --only-binary :all: "<repo>[cuda12]"``; the checkout's wheel is
built once first, so that the two installs do not build it in the same
``build/`` folder at once), cached between runs in
``~/.cache/gpuksvm/cuda-venvs/<extra>-<hash>`` (``$GPUKSVM_CUDA_VENV_CACHE``
overrides the folder): the hash covers the extra's requirements, the project's
dependencies, the Python version and the machine, so a change to any of them
installs afresh (and the stale environment is removed).  The NVIDIA wheels
weigh about 3 GB (CUDA 12) and 2 GB (CUDA 13); the two installs run at the same
time.  The real CuPy stays inside these environments: the rest of the suite
never sees it.

The environments' ``gpuksvm`` is this checkout (``PYTHONPATH``), so the doctor
that runs there is the code under test; the copy pip installed only proves that
the extra resolves.  ``GPUKSVM_SKIP_CUDA_INSTALL=1`` skips the module, saying
so, on a machine that cannot reach the package registry.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXTRAS = ("cuda12", "cuda13")
LIBRARIES = ("nvrtc", "cublas", "cusolver", "cusparse", "curand")

pytestmark = pytest.mark.slow

if os.environ.get("GPUKSVM_SKIP_CUDA_INSTALL") == "1":
    pytest.skip("GPUKSVM_SKIP_CUDA_INSTALL=1: the CUDA extras' install is not checked in this run",
                allow_module_level=True)
if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
    pytest.skip(f"CuPy's CUDA wheels are for Linux x86_64/aarch64, not {sys.platform} {platform.machine()}",
                allow_module_level=True)


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def cache_root() -> Path:
    env = os.environ.get("GPUKSVM_CUDA_VENV_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gpuksvm" / "cuda-venvs"


def venv_key(extra: str) -> str:
    """What the environment of ``extra`` depends on, hashed."""
    project = _pyproject()
    what = {"extra": project["optional-dependencies"][extra], "dependencies": project["dependencies"],
            "python": list(sys.version_info[:2]), "machine": platform.machine()}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


@contextlib.contextmanager
def _locked(root: Path):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_wheel(root: Path) -> Path:
    """This checkout's wheel (what ``pip install ".[extra]"`` builds first), in ``root/wheel``."""
    out = root / "wheel"
    shutil.rmtree(out, ignore_errors=True)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-input", "-q", "-w",
                          str(out), str(REPO)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"pip wheel {REPO} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return next(out.glob("gpuksvm-*.whl"))


def ensure_venvs(extras: tuple[str, ...]) -> dict[str, dict]:
    """The cached environment of each extra, installing the missing ones at the same time.

    Returns extra -> {"path", "install_s" (this run's install time, None when cached),
    "recorded" (what the install that made it recorded)}.
    """
    root = cache_root()
    out: dict[str, dict] = {}
    with _locked(root):
        jobs = {}
        wheel = None
        for extra in extras:
            venv = root / f"{extra}-{venv_key(extra)}"
            for stale in root.glob(f"{extra}-*"):
                if stale != venv:
                    shutil.rmtree(stale, ignore_errors=True)
            out[extra] = {"path": venv, "install_s": None}
            if (venv / "gpuksvm-install.json").exists():
                continue
            shutil.rmtree(venv, ignore_errors=True)
            if wheel is None:      # one build of this checkout for all installs (setuptools builds in-tree)
                wheel = _build_wheel(root)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            log = open(venv / "pip-install.log", "w")
            # --no-cache-dir: this folder is the cache (pip's would hold the 5 GB of wheels again);
            # --no-compile: byte-compiling thousands of modules costs minutes of CPU on 2 cores
            cmd = [str(_python(venv)), "-m", "pip", "install", "--no-input", "--progress-bar", "off",
                   "--no-cache-dir", "--no-compile", "--only-binary", ":all:", f"{wheel}[{extra}]"]
            jobs[extra] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=venv), log,
                           time.perf_counter(), cmd)
        failed = []
        for extra, (proc, log, t0, cmd) in jobs.items():
            rc = proc.wait()
            log.close()
            venv = out[extra]["path"]
            seconds = time.perf_counter() - t0
            if rc != 0:
                tail = (venv / "pip-install.log").read_text()[-3000:]
                shutil.rmtree(venv, ignore_errors=True)
                failed.append(f"{' '.join(cmd)} failed (exit {rc}):\n{tail}")
                continue
            out[extra]["install_s"] = seconds
            (venv / "gpuksvm-install.json").write_text(json.dumps(
                {"extra": extra, "seconds": round(seconds, 1), "parallel_with": sorted(jobs),
                 "when": time.strftime("%Y-%m-%d %H:%M:%S")}))
        if failed:
            pytest.fail("\n\n".join(failed))
    for extra in extras:
        out[extra]["recorded"] = json.loads((out[extra]["path"] / "gpuksvm-install.json").read_text())
    return out


@pytest.fixture(scope="module")
def venvs():
    return ensure_venvs(EXTRAS)


def _run(venv: Path, args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUKSVM_DEVICE", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([str(_python(venv)), *args], capture_output=True, text=True, env=env,
                          timeout=300, **kw)


def _gpu_machine() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def _driver_cuda_major() -> int:
    """The CUDA major version the driver supports (nvidia-smi's header 'CUDA Version: 12.4')."""
    text = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
    m = re.search(r"CUDA Version:\s*(\d+)", text)
    return int(m.group(1)) if m else 0


_LOAD = """
import json, sys
from cuda import pathfinder
out = {}
for name in sys.argv[1:]:
    lib = pathfinder.load_nvidia_dynamic_lib(name)
    out[name] = [lib.abs_path, lib.found_via]
import cupy
print(json.dumps({"libs": out, "cupy": cupy.__version__}))
"""


@pytest.mark.parametrize("extra", EXTRAS)
def test_extra_brings_the_cuda_libraries(venvs, extra):
    """cuda.pathfinder loads NVRTC, cuBLAS, cuSOLVER, cuSPARSE and cuRAND from the extra's own wheels."""
    info = venvs[extra]
    venv = info["path"]
    print(f"{extra}: install {info['recorded']['seconds']} s on {info['recorded']['when']} "
          f"({'this run' if info['install_s'] is not None else 'cached'})")
    res = _run(venv, ["-c", _LOAD, *LIBRARIES])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert int(report["cupy"].split(".")[0]) >= 14
    site = (venv / "lib").resolve()
    for name in LIBRARIES:
        path, via = report["libs"][name]
        assert via == "site-packages", (name, path, via)
        assert Path(path).resolve().is_relative_to(site), (name, path)


_WARN = """
import json, warnings
from gpuksvm import backend as bk
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = bk.resolve_device("auto")
    second = bk.resolve_device("auto")
try:
    bk.resolve_device("gpu")
    error = None
except bk.DeviceUnavailableError as exc:
    error = str(exc)
import contextlib, io
from gpuksvm.cli import main
with contextlib.redirect_stdout(io.StringIO()) as text:
    doctor_status = main(["doctor"])
print(json.dumps({"devices": [str(first), str(second)], "error": error, "doctor_status": doctor_status,
                  "doctor": text.getvalue(),
                  "warnings": [[type(w.message).__name__, str(w.message)] for w in caught]}))
"""


@pytest.mark.parametrize("extra", EXTRAS)
def test_real_cupy_without_a_driver(venvs, extra):
    """The real CuPy, no driver: 'auto' runs on the CPU with one warning naming the reason and the fix,
    'gpu' raises DeviceUnavailableError with the same; ``python -m gpuksvm doctor`` finds every library
    in the extra's environment, compiles every CUDA source through CuPy's compile path for sm_75
    without a device, says why there is no GPU and what would fix it, and exits with 0
    (1 with --expect-gpu)."""
    if _gpu_machine():
        pytest.skip("nvidia-smi lists a GPU: this checks the real CuPy on a machine without a driver")
    venv = venvs[extra]["path"]
    # the two processes at once: each compiles every source in its doctor (the pair 6 s, one after
    # the other 12 s, a quiet 2-core machine)
    with ThreadPoolExecutor(2) as pool:
        ran = pool.submit(_run, venv, ["-c", _WARN], cwd=REPO.parent)
        cli = _run(venv, ["-m", "gpuksvm", "doctor", "--expect-gpu"], cwd=REPO.parent)
        res = ran.result()
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["devices"] == ["cpu", "cpu"]
    assert [w[0] for w in out["warnings"]] == ["GpuUnavailableWarning"], out["warnings"]
    for text in (out["warnings"][0][1], out["error"]):
        assert "cudaErrorInsufficientDriver" in text and "driver is not installed" in text, text
        assert "Fix: install the NVIDIA driver" in text, text
    assert out["doctor_status"] == 0, out["doctor"]

    print(cli.stdout)
    assert cli.returncode == 1 and "a GPU was expected" in cli.stderr, cli.stdout + cli.stderr
    assert cli.stdout == out["doctor"]
    lines = cli.stdout.splitlines()
    for label in ("NVRTC", "cuBLAS", "cuSOLVER", "cuSPARSE", "cuRAND"):
        line = next(x for x in lines if x[7:].split()[0] == label)
        assert line.startswith("[ ok ]") and str(venv) in line, line
    assert any(x.startswith("[ ok ] CuPy") and " 14." in x for x in lines)
    assert lines[0].startswith("[ ok ] gpuksvm") and f"({REPO / 'gpuksvm'})" in lines[0]   # this checkout
    assert "[FAIL] CUDA driver" in cli.stdout and "none (no NVIDIA driver" in cli.stdout
    sources = sorted(p.name for p in (REPO / "kernels_cuda").glob("*.cu"))
    assert sources
    for name in sources:
        line = next(x for x in lines if x[7:].split()[:2] == ["compile", name])
        assert line.startswith("[ ok ]") and "compiled for sm_75 without a device" in line, line
    auto = cli.stdout[cli.stdout.index("device='auto'"):]
    assert auto.split()[1] == "cpu:" and "cudaErrorInsufficientDriver" in auto
    assert "fix: install the NVIDIA driver" in auto


@pytest.mark.parametrize("extra", EXTRAS)
def test_doctor_expects_a_gpu_on_a_gpu_machine(venvs, extra):
    """Where nvidia-smi lists a GPU, the extra of a CUDA version the driver supports must give gpuksvm a
    GPU (every check ok); the other one must say that the driver is too old."""
    if not _gpu_machine():
        pytest.skip("no GPU here (nvidia-smi lists none): test_real_cupy_without_a_driver checks this machine")
    cli = _run(venvs[extra]["path"], ["-m", "gpuksvm", "doctor", "--expect-gpu"], cwd=REPO.parent)
    if int(extra[-2:]) <= _driver_cuda_major():
        assert cli.returncode == 0 and "[FAIL]" not in cli.stdout, cli.stdout + cli.stderr
    else:
        assert cli.returncode == 1 and "is older than CuPy's CUDA runtime" in cli.stdout, cli.stdout
