"""gpuksvm — scalable kernel SVMs on CuPy with a NumPy twin.

Methods: :class:`LLSVM` (low-rank linearization), :class:`CVM` (core vector
machine), :class:`SVI` (support vector identification), :class:`OKFEB` (online
kernel features on a budget), and the engines :class:`LinearSVM` and
:class:`KernelSVC`; cross-validated search in :mod:`gpuksvm.model_selection`
(``gpuksvm.model_selection``, imported on first use).  See ``README.md`` and
``SPEC.md``.
"""
from __future__ import annotations

from importlib import import_module

from gpuksvm import _moved, registry
from gpuksvm._version import __version__
from gpuksvm.array.backend import (
    Device,
    DeviceUnavailableError,
    GpuUnavailableWarning,
    MemoryBudgetError,
    config_context,
    cuda_available,
    get_config,
    resolve_device,
    set_config,
)
from gpuksvm.cli.doctor import doctor  # the function (shadows the module's name in this namespace)
from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_diag, kernel_matvec, make_kernel


_moved.install()

# the estimators (gpuksvm.registry) and save/load are imported lazily, on first use, so
# `import gpuksvm` stays fast and a module missing from a partial install does not break the others
_LAZY = {
    **registry.public_names(),
    "save": "gpuksvm.persistence.io",
    "load": "gpuksvm.persistence.io",
}


#: subpackages reachable as attributes of ``gpuksvm`` (imported on first use)
_SUBPACKAGES = ("model_selection",)


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return import_module(f"gpuksvm.{name}")
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gpuksvm' has no attribute {name!r}")


__all__ = ["__version__", "Device", "DeviceUnavailableError", "GpuUnavailableWarning", "Kernel", "MemoryBudgetError", "config_context",
           "cuda_available", "doctor",
           "get_config", "kernel_block", "kernel_diag", "kernel_matvec", "make_kernel",
           "resolve_device", "set_config", *_LAZY]
