"""Build a CUDA source of gpuksvm into a CPU shared library for the emulator (``gpuemu.h``).

For a source (code + its include folders):

1. the source and its ``.cuh`` headers are copied with ``__shared__`` declarations
   rewritten (blocks run one after another, so shared memory is static storage):
       extern __shared__ T name[];  ->  T* name = (T*)gpuemu::S().dyn_smem;
       __shared__ T a[N], b;        ->  static T a[N], b; gpuemu::shared_decl(&a, ...); ...
2. one trampoline per ``extern "C"`` kernel reads every argument from the
   ``void** args`` array with its DECLARED type, as ``cuLaunchKernel`` does
   (signatures parsed by :func:`gpuksvm.array.cuda_sources.kernel_signatures`);
3. ``g++`` builds it with UndefinedBehaviorSanitizer in trap mode (a failed check
   is an illegal instruction that the emulator catches and maps to a line).

Floating point: NVRTC contracts ``a*b + c`` into one fused multiply-add by default
(``-fmad=true``; CuPy does not turn it off), so a kernel's float results depend on
which products are fused.  The emulator contracts too when the CPU has FMA
instructions (``-ffp-contract=fast -mfma``, plus ``-fexpensive-optimizations``,
without which GCC at ``-O1`` fuses nothing); ``GPUEMU_FMA=off`` builds without
contraction, ``=on`` insists on it.  GCC and NVRTC need not fuse the same pairs, so
tests compare emulated floats to their NumPy twins with tolerances, and the GPU tests
pass both ways (``make test-emulated-nofma`` runs them without contraction).  Where
a greedy choice meets near-ties, the pairs decide it: on an NVIDIA H200 the CVM's
exact furthest-point search (float64, 1,000 checkerboard rows) kept 185 core vectors
against the 175 of the NumPy twin and of this emulator, and 175 when compiled with
``--fmad=false`` (``tests/test_cvm.py``, the row-order test).

Libraries are cached by a hash of everything that goes into them, in
``$GPUEMU_CACHE`` (default ``<repo>/.gpuemu-cache``).
"""
from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from gpuksvm.array.cuda_sources import kernel_signatures

HERE = Path(__file__).resolve().parent
HEADER = HERE / "gpuemu.h"
FLAGS = ("-std=c++17", "-fPIC", "-shared", "-O1", "-g", "-w", "-U_FORTIFY_SOURCE",
         "-fsanitize=undefined,bounds", "-fsanitize-undefined-trap-on-error", "-fno-omit-frame-pointer")
FMA_FLAGS = ("-ffp-contract=fast", "-mfma", "-fexpensive-optimizations")
NO_FMA_FLAGS = ("-ffp-contract=off",)

_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+([\w\s]+?)\s+(\w+)\s*\[\s*\]\s*;")
_SHARED = re.compile(r"(?<!extern )__shared__\s+([^;]*?);")
_DECLARATOR = re.compile(r"(\w+)\s*((?:\[[^\]]*\]\s*)*)$")


class BuildError(RuntimeError):
    """g++ is missing or rejected an emulator build."""


def cache_dir() -> Path:
    env = os.environ.get("GPUEMU_CACHE")
    if env:
        return Path(env)
    repo = HERE.parent.parent
    if os.access(repo, os.W_OK):
        return repo / ".gpuemu-cache"
    return Path(tempfile.gettempdir()) / f"gpuemu-cache-{os.getuid()}"


def cpu_has_fma() -> bool:
    """Whether this is an x86-64 CPU with FMA3 instructions (``fma`` in /proc/cpuinfo's flags)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and "fma" in line.partition(":")[2].split() for line in info.splitlines())


def fma_contraction() -> bool:
    """Whether emulator builds fuse multiply-adds as NVRTC does (``GPUEMU_FMA``: auto, on, off)."""
    mode = os.environ.get("GPUEMU_FMA", "auto").lower()
    if mode not in ("auto", "on", "off"):
        raise BuildError(f"GPUEMU_FMA must be auto, on or off, got {mode!r}")
    if mode == "off":
        return False
    if mode == "on" and not cpu_has_fma():
        raise BuildError("GPUEMU_FMA=on, but this CPU has no FMA instructions (x86-64 with FMA3 needed)")
    return cpu_has_fma()


def flags() -> tuple[str, ...]:
    """g++'s flags for an emulator build, FMA contraction as :func:`fma_contraction` says."""
    return FLAGS + (FMA_FLAGS if fma_contraction() else NO_FMA_FLAGS)


def compiler() -> str | None:
    """The C++ compiler (``$CXX`` or g++), or None when there is none."""
    return shutil.which(os.environ.get("CXX", "g++"))


def rewrite_shared(src: str) -> str:
    """``__shared__`` declarations as static storage, poisoned at each block start."""
    src = _EXTERN_SHARED.sub(lambda m: f"{m.group(1)}* {m.group(2)} = ({m.group(1)}*)gpuemu::S().dyn_smem;", src)

    def static(m: re.Match) -> str:
        decl = " ".join(m.group(1).split())
        first, *rest = [p.strip() for p in decl.split(",")]
        mm = _DECLARATOR.search(first)
        typ = first[: mm.start()].strip()
        names = [mm.group(1)] + [re.match(r"\w+", r).group(0) for r in rest]
        poison = " ".join(f"gpuemu::shared_decl((void*)&{n}, sizeof({n}));" for n in names)
        return f"static {typ} {first[mm.start():]}{''.join(', ' + r for r in rest)}; {poison}"

    return _SHARED.sub(static, src)


def trampolines(code: str, source_name: str) -> str:
    """The translation unit: the source, one launcher per kernel, the C entry points."""
    sigs = kernel_signatures(code)
    lines = ['#include "gpuemu.h"', f'#include "{source_name}"', ""]
    for i, (name, params) in enumerate(sigs.items()):
        decl = lambda p: f"{'const ' if p.const else ''}{p.ctype}{'*' if p.pointer else ''}"  # noqa: E731
        args = ", ".join(f"*({decl(p)}*)a[{j}]" for j, p in enumerate(params))
        lines.append(f"static void gpuemu_k{i}(void** a) {{ {name}({args}); }}")
    table = ", ".join(f"gpuemu_k{i}" for i in range(len(sigs)))
    lines += [
        f"static void (*const gpuemu_table[])(void**) = {{{table}}};",
        'extern "C" int gpuemu_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,',
        "                             unsigned bz, size_t smem, void** args, int order, unsigned seed, int ftz) {",
        "    return gpuemu::launch(gpuemu_table[k], args, dim3(gx, gy, gz), dim3(bx, by, bz), smem, order, seed, ftz);",
        "}",
        'extern "C" const char* gpuemu_report() { return gpuemu::S().report.c_str(); }',
        'extern "C" void gpuemu_fault(int* sig, void** addr, void** pc, int* where) {',
        "    *sig = gpuemu::F().sig; *addr = gpuemu::F().addr; *pc = (void*)gpuemu::F().pc;",
        "    *where = gpuemu::classify(gpuemu::F().addr);",
        "}",
    ]
    return "\n".join(lines) + "\n"


def build(code: str, name: str, include_dirs: list[Path] = ()) -> Path:
    """The emulator library of one CUDA source (built once per content; cached)."""
    cxx = compiler()
    if cxx is None:
        raise BuildError("the emulated GPU needs a C++ compiler: g++ not found (apt-get install g++)")
    headers = sorted({h for d in include_dirs for h in Path(d).glob("*.cuh")}, key=lambda p: p.name)
    cxx_flags = flags()
    h = hashlib.sha256()
    for part in (HEADER.read_bytes(), Path(__file__).read_bytes(), code.encode(), " ".join(cxx_flags).encode(),
                 cxx.encode(), *(p.name.encode() + p.read_bytes() for p in headers)):
        h.update(part)
    out = cache_dir() / f"{Path(name).stem}-{h.hexdigest()[:16]}"
    lib = out / "libkernels.so"
    if lib.exists():
        return lib
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=out.parent))
    try:
        (tmp / name).write_text(rewrite_shared(code))
        for p in headers:
            (tmp / p.name).write_text(rewrite_shared(p.read_text()))
        (tmp / "tu.cpp").write_text(trampolines(code, name))
        res = subprocess.run([cxx, *cxx_flags, f"-I{HERE}", f"-I{tmp}", str(tmp / "tu.cpp"), "-o", str(tmp / lib.name)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildError(f"g++ failed on {name}:\n{res.stderr[-4000:]}")
        try:
            tmp.rename(out)               # atomic: a parallel build of the same content may win
        except OSError:
            if not lib.exists():
                raise
        return lib
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
