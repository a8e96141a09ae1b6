"""cupy._core.core.compile_with_cache: CuPy's compile entry point (``RawModule`` calls it).

Real CuPy adds its include paths and ``--std=c++17`` to the options first
(``assemble_cupy_compiler_options``); gpuksvm's sources include only their own headers, so the
stand-in passes the options on as given to :func:`cupy.cuda.compiler._compile_module_with_cache`.
"""
from __future__ import annotations

from ..cuda import compiler


def compile_with_cache(source, options=(), arch=None, prepend_cupy_headers=True, backend="nvrtc",
                       translate_cucomplex=False, enable_cooperative_groups=False, name_expressions=None,
                       log_stream=None, jitify=False):
    if backend != "nvrtc":
        raise ValueError(f"the stand-in compiles with NVRTC only, not {backend!r}")
    return compiler._compile_module_with_cache(source, tuple(options), arch=arch)
