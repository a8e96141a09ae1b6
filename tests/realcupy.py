"""The real CuPy for the tests: kept out of the test process, asked in a subprocess.

``make test`` installs the real CuPy (``cupy-cuda13x``, with ``cuda-pathfinder`` and the CUDA
runtime headers) into its own folder, ``.venv/real-cupy`` (``$GPUKSVM_REAL_CUPY`` overrides),
which is never on the test process's ``sys.path``: there ``import cupy`` still fails (or gives the
stand-in), so ``device="auto"`` and every other test see what they saw without it.  The real
CuPy imports without a GPU or a driver; only device calls fail.

Parent side (the tests): :func:`location`, :func:`require` (skips with the reason when the
folder is missing), :func:`ask` (runs this file under the real CuPy and returns its JSON answer),
:class:`CallLog` (the stand-in's calls, recorded through :func:`gpuemu.dispatch.calls_hooked`).

Child side (``python tests/realcupy.py COMMAND`` with the folder, then this checkout, on ``PYTHONPATH``):

* ``names`` — the public names of ``cupy``, ``cupy.linalg``, ``cupy.random`` (and its
  ``RandomState`` / ``Generator``), ``cupy.ndarray``, ``cupyx``, ``cupyx.scipy.linalg``,
  ``cupyx.scipy.sparse`` (and its matrices), and the signatures of their functions and
  methods: ``tests/gpuemu/fake/cupy_api.json`` is this answer (the stand-in refuses a call
  these signatures refuse);
* ``bind`` — each recorded call (qualified name, positional count, keyword names) bound against
  the real function's signature (``inspect.signature``, else the signature line of a Cython
  docstring): the calls real CuPy would refuse;
* ``compile`` — gpuksvm's CUDA sources through CuPy's own option assembly and compile path
  (``cupy._core.core.compile_with_cache``, what ``RawModule`` calls, by the library's
  :func:`gpuksvm.array.gpu_probe.compile_for_arch`) for given architectures, with CuPy's
  kernel-cache key of each and what was written to CuPy's kernel cache (nothing may be).

The machine has none of cuBLAS / cuSOLVER / cuSPARSE / cuRAND (their wheels are large and no
check here runs them): where one is missing, the child puts a placeholder module in place of
CuPy's binding to it before importing ``cupyx.scipy``, so the Python surface (names and
signatures) loads; calling into a placeholder raises.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
API_FILE = TESTS / "gpuemu" / "fake" / "cupy_api.json"
INSTALL_HINT = "make .venv/real-cupy/.installed"


# ============================================================================ parent side
def location() -> tuple[Path | None, str]:
    """(folder holding the real CuPy, "") or (None, why it is not there)."""
    env = os.environ.get("GPUKSVM_REAL_CUPY")
    path = Path(env) if env else ROOT / ".venv" / "real-cupy"
    complete = (path / "cupy" / "__init__.py").exists() and (env or (path / ".installed").exists())
    if not complete:
        return None, (f"the real CuPy is not installed in {path} "
                      f"({INSTALL_HINT}, or set GPUKSVM_REAL_CUPY to a folder holding it)")
    return path, ""


def require() -> Path:
    """The real CuPy's folder; skips the calling test (with the reason) when it is missing."""
    import pytest

    path, reason = location()
    if path is None:
        pytest.skip(f"real-CuPy check not run: {reason}")
    return path


def ask(command: str, payload: Any = None, *, timeout: float = 300) -> Any:
    """Run ``command`` of this file under the real CuPy in a subprocess; its JSON answer."""
    path, reason = location()
    if path is None:
        raise RuntimeError(reason)
    # this checkout's gpuksvm after the real CuPy (the compile check runs the library's own function)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(path), str(ROOT))),
               CUPY_CACHE_DIR=str(ROOT / ".venv" / "real-cupy-cache"))
    env.pop("CUDA_PATH", None)
    res = subprocess.run([sys.executable, str(Path(__file__)), command], input=json.dumps(payload),
                         capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    if res.returncode != 0:
        raise RuntimeError(f"real-CuPy subprocess {command!r} failed (exit {res.returncode}):\n"
                           f"{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def write_api_file() -> Path:
    """Rewrite ``cupy_api.json`` from the installed real CuPy (after a CuPy upgrade):
    ``.venv/bin/python -c "import sys; sys.path.insert(0, 'tests'); import realcupy; realcupy.write_api_file()"``."""
    answer = ask("names")
    answer.pop("_real")
    sections = []                       # one name, or one function's signature, per line
    for key, value in sorted(answer.items()):
        items = ([f"{json.dumps(q)}: {json.dumps(v)}" for q, v in sorted(value.items())] if isinstance(value, dict)
                 else [json.dumps(n) for n in value])
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        sections.append(f"{json.dumps(key)}: {opening}\n" + ",\n".join(items) + f"\n{closing}")
    API_FILE.write_text("{\n" + ",\n".join(sections) + "\n}\n")
    assert json.loads(API_FILE.read_text()) == answer
    return API_FILE


def arg_kind(v: Any) -> str:
    """What an argument is, in a word (device array, NumPy array, scalar, ...)."""
    mod = type(v).__module__.split(".")[0]
    if mod in ("cupy", "cupyx") and hasattr(v, "shape"):
        return "sparse" if "sparse" in type(v).__module__ else "device"
    if v is None:
        return "None"
    if isinstance(v, (bool, int, float, complex)):
        return type(v).__name__
    name = type(v).__name__
    if mod == "numpy":
        return "numpy." + ("ndarray" if name == "ndarray" else "dtype" if "dtype" in name.lower() else "scalar")
    if isinstance(v, type):
        return "type"
    if isinstance(v, (tuple, list)):
        return name
    return name


class CallLog:
    """Distinct calls into the stand-in: (qualname, positional count, keyword names) -> count,
    with the kinds of arguments seen.  Use as a :func:`gpuemu.dispatch.calls_hooked` hook."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.kinds: dict[tuple, set] = {}

    def __call__(self, qualname: str, args: tuple, kwargs: dict) -> None:
        key = (qualname, len(args), tuple(sorted(kwargs)))
        self.calls[key] += 1
        kinds = tuple(arg_kind(a) for a in args) + tuple(f"{k}={arg_kind(v)}" for k, v in sorted(kwargs.items()))
        self.kinds.setdefault(key, set()).add(" ".join(kinds))

    def payload(self) -> list[dict]:
        return [{"qualname": q, "npos": n, "keywords": list(kw), "count": c,
                 "kinds": sorted(self.kinds.get((q, n, kw), ()))}
                for (q, n, kw), c in sorted(self.calls.items())]

    def merge(self, payload: list[dict]) -> None:
        """Add another process's :meth:`payload` (a test worker's calls, gathered by the controller)."""
        for row in payload:
            key = (row["qualname"], row["npos"], tuple(row["keywords"]))
            self.calls[key] += row["count"]
            self.kinds.setdefault(key, set()).update(row["kinds"])

    def check(self) -> dict:
        """Bind every distinct call against the real CuPy: {"checked", "mismatches", "unbound"}."""
        return ask("bind", self.payload())


def describe_mismatches(result: dict) -> str:
    return "\n".join(f"  {m['call']}: {m['error']} (kinds: {'; '.join(m['kinds'][:3])})"
                     for m in result["mismatches"])


# ============================================================================ child side
_LIBS = ("cublas", "cusolver", "cusparse", "curand")


def _import_real_cupy() -> dict:
    """Import the real CuPy (placeholders for missing CUDA math libraries); what was replaced."""
    import types

    import cupy_backends.cuda.libs as libs
    from cuda import pathfinder

    class _Placeholder(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Unavailable(f"{self.__name__}.{name}")

    class _Unavailable:
        def __init__(self, what: str) -> None:
            self.what = what

        def __call__(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError(f"{self.what}: the CUDA library is not installed in the check environment")

    replaced = []
    for lib in _LIBS:
        try:
            pathfinder.load_nvidia_dynamic_lib(lib)
        except pathfinder.DynamicLibNotFoundError:
            mod = _Placeholder(f"cupy_backends.cuda.libs.{lib}")
            sys.modules[mod.__name__] = mod
            setattr(libs, lib, mod)
            replaced.append(lib)
    import cupy
    import cupy.linalg  # noqa: F401
    import cupy.random  # noqa: F401
    import cupyx
    import cupyx.scipy.linalg  # noqa: F401
    import cupyx.scipy.sparse  # noqa: F401
    if getattr(cupy, "GPUEMU", False):
        raise SystemExit("the stand-in was imported instead of the real CuPy")
    return {"version": cupy.__version__, "placeholders": replaced, "file": cupy.__file__,
            "cupyx": cupyx.__file__}


def _public(obj: Any) -> list[str]:
    """Public names of a module or class; for a Python class also the attributes its
    ``__init__`` methods assign (``self.data = ...``: instance names ``dir`` does not show)."""
    import inspect
    import re

    names = {n for n in dir(obj) if not n.startswith("_")}
    if isinstance(obj, type):
        for klass in obj.__mro__:
            init = vars(klass).get("__init__")
            if inspect.isfunction(init):
                names |= set(re.findall(r"self\.([a-zA-Z]\w*)\s*=", inspect.getsource(init)))
    return sorted(names)


def _api_names() -> dict:
    import cupy
    import cupyx
    import cupyx.scipy.linalg
    import cupyx.scipy.sparse

    return {"cupy": _public(cupy), "cupy.linalg": _public(cupy.linalg), "cupy.random": _public(cupy.random),
            "cupy.random.RandomState": _public(cupy.random.RandomState),
            "cupy.random.Generator": _public(cupy.random.Generator),
            "cupy.ndarray": _public(cupy.ndarray), "cupyx": _public(cupyx),
            "cupyx.scipy.linalg": _public(cupyx.scipy.linalg), "cupyx.scipy.sparse": _public(cupyx.scipy.sparse),
            "cupyx.scipy.sparse.csr_matrix": _public(cupyx.scipy.sparse.csr_matrix),
            "cupyx.scipy.sparse.csc_matrix": _public(cupyx.scipy.sparse.csc_matrix),
            "cupyx.scipy.sparse.coo_matrix": _public(cupyx.scipy.sparse.coo_matrix)}


#: the sections of ``_api_names`` whose callables get a signature in the answer
_SIGNED = ("cupy", "cupy.linalg", "cupy.random", "cupy.ndarray", "cupyx", "cupyx.scipy.linalg",
           "cupyx.scipy.sparse")


def _api_signatures(names: dict) -> dict:
    """qualname -> [[parameter, kind, has default], ...] of every function and method (not
    classes) of the sections in :data:`_SIGNED` whose signature can be read."""
    import inspect

    out = {}
    for section in _SIGNED:
        owner = _resolve(section)
        for name in names[section]:
            obj = getattr(owner, name, None)
            if obj is None or isinstance(obj, type) or not callable(obj):
                continue
            sig = _signature(obj)
            if sig is not None:
                out[f"{section}.{name}"] = [[p.name, p.kind.name, p.default is not inspect.Parameter.empty]
                                            for p in sig.parameters.values()]
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def _doc_signature(obj: Any):
    """The signature on the first line of a Cython docstring (``f(self, a, str b=None, *, c=1)``)."""
    import inspect
    import re

    doc = (getattr(obj, "__doc__", None) or "").lstrip()
    # the first line names the function as defined (cupy.abs is the ufunc "absolute")
    m = re.match(r"[\w.]+\((.*?)\)\s*(->.*)?$", doc.split("\n", 1)[0])
    if m is None:
        return None
    P = inspect.Parameter
    kind, params = P.POSITIONAL_OR_KEYWORD, []
    for part in _split_top(m.group(1).replace("\\", "")):
        if part == "/":
            params = [p.replace(kind=P.POSITIONAL_ONLY) for p in params]
            continue
        if part == "*":
            kind = P.KEYWORD_ONLY
            continue
        if part.startswith("**"):
            params.append(P(part[2:].split()[-1], P.VAR_KEYWORD))
            continue
        if part.startswith("*"):
            params.append(P(part[1:].split()[-1], P.VAR_POSITIONAL))
            kind = P.KEYWORD_ONLY
            continue
        head, eq, _default = part.partition("=")
        pname = re.findall(r"\w+", head)[-1]          # "str code" -> code (Cython types)
        params.append(P(pname, kind, default=None if eq else P.empty))
    return inspect.Signature(params)


def _resolve(qualname: str) -> Any:
    import importlib

    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(qualname)


def _signature(obj: Any):
    import inspect

    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        pass
    return _doc_signature(obj)


def _bind(calls: list[dict]) -> dict:
    mismatches, unbound, signatures = [], [], {}
    for c in calls:
        q = c["qualname"]
        text = f"{q}({', '.join(['_'] * c['npos'] + [f'{k}=_' for k in c['keywords']])})"
        try:
            obj = _resolve(q)
        except (ImportError, AttributeError) as exc:
            mismatches.append({"call": text, "error": f"real CuPy has no {q} ({exc})", "kinds": c["kinds"]})
            continue
        sig = _signature(obj)
        if sig is None:
            unbound.append(text)
            continue
        signatures[q] = str(sig)
        try:
            sig.bind(*([None] * c["npos"]), **{k: None for k in c["keywords"]})
        except TypeError as exc:
            mismatches.append({"call": text, "error": f"{exc}; real signature {q}{sig}", "kinds": c["kinds"]})
    return {"checked": len(calls), "mismatches": mismatches, "unbound": unbound, "signatures": signatures}


def _compile(payload: dict) -> dict:
    """Compile each source with CuPy's own path for each arch; CuPy's cache key and cubin size.

    :func:`gpuksvm.array.gpu_probe.compile_for_arch` (what ``gpuksvm doctor`` runs without a device)
    calls ``cupy._core.core.compile_with_cache``, what ``RawModule(code=, options=)`` calls: it
    assembles the options (CCCL and CuPy include dirs, the CUDA headers found by cuda.pathfinder,
    ``--std=c++17`` unless given; reported here with ``assemble_cupy_compiler_options``) and goes
    into ``cuda.compiler._compile_module_with_cache`` (adds ``-ftz=true``, computes the cache key,
    compiles with NVRTC and ``-arch=sm_XX``), stopping before ``Module.load`` (which needs a
    driver).  The files it added to ``CUPY_CACHE_DIR`` are reported: there must be none.
    """
    from cupy._core import core
    from cupy.cuda import compiler

    from gpuksvm.array import gpu_probe as _gpu_probe

    cache = Path(os.environ["CUPY_CACHE_DIR"])

    def cached() -> set:
        return {str(p.relative_to(cache)) for p in cache.rglob("*")} if cache.exists() else set()

    before, out = cached(), []
    for job in payload["jobs"]:
        options = tuple(job["options"])
        entry = {"source": job["name"], "arch": job["arch"], "options": list(core.assemble_cupy_compiler_options(options))}
        try:
            build = _gpu_probe.compile_for_arch(job["code"], options, job["arch"])
        except compiler.CompileException as exc:
            entry.update(ok=False, log=str(exc))
        else:
            entry.update(ok=True, key=build.cache_key, cubin_bytes=len(build.binary), elf=build.binary[:4] == b"\x7fELF")
        out.append(entry)
    return {"results": out, "nvrtc": list(compiler._get_nvrtc_version()), "cache_written": sorted(cached() - before)}


def _main(command: str) -> None:
    payload = json.loads(sys.stdin.read() or "null")
    info = _import_real_cupy()
    if command == "names":
        answer: Any = _api_names()
        answer["signatures"] = _api_signatures(answer)
    elif command == "info":
        answer = info
    elif command == "bind":
        answer = _bind(payload)
    elif command == "compile":
        answer = _compile(payload)
    else:
        raise SystemExit(f"unknown command {command!r}")
    if isinstance(answer, dict):
        answer = dict(answer, _real=info)
    print(json.dumps(answer, sort_keys=True))


if __name__ == "__main__":
    _main(sys.argv[1])
