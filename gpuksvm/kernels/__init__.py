"""Kernel functions and memory-aware kernel block operations (SPEC §0): the Python side.

The CUDA sources live in the top-level ``kernels_cuda/`` folder and are loaded by
:mod:`gpuksvm.array.cuda_sources`.
"""
from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_diag, kernel_matvec, make_kernel

__all__ = ["Kernel", "kernel_block", "kernel_diag", "kernel_matvec", "make_kernel"]
