"""gpuksvm's GPU path on a machine without a GPU (test infrastructure, not shipped).

* :mod:`gpuemu.nvrtc` — the real NVRTC compiler (pip ``nvidia-cuda-nvrtc``) via ctypes;
* :mod:`gpuemu.build` / :mod:`gpuemu.launcher` — the CUDA sources built for the CPU
  (``gpuemu.h``: one fiber per CUDA thread) and launched as CuPy launches them;
* ``gpuemu/fake/cupy`` — a NumPy-backed stand-in for the CuPy API gpuksvm uses,
  strict where CuPy is strict; every device operation goes through
  :func:`gpuemu.dispatch.dispatch`, where :mod:`gpuemu.dispatch` hooks observe it.

``tests/conftest.py`` picks the mode: a real GPU when CuPy finds one, else this
emulation (needs g++), else the ``gpu`` tests skip with the reason.
"""
