"""The ``gpuksvm`` command line: LIBSVM-style ``train`` / ``predict`` / ``info``
(:mod:`~gpuksvm.cli.commands`), ``demo`` and ``doctor``; :func:`main` runs it.

``main`` is imported on first use, as the estimators are in :mod:`gpuksvm`: ``import gpuksvm``
loads this package for :func:`gpuksvm.doctor` and must not load the commands' estimators and
model-file registry with it.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        return import_module("gpuksvm.cli.commands").main
    raise AttributeError(f"module 'gpuksvm.cli' has no attribute {name!r}")
