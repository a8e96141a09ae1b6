"""CUDA C++ sources of gpuksvm, loaded at run time by :mod:`gpuksvm.array.cuda_sources`.

This folder sits at the repository root as ``kernels_cuda/`` and is installed
as the package data ``gpuksvm.kernels_cuda``.
"""
