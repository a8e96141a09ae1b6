"""The ``gpuksvm`` command line: LIBSVM-style ``train`` / ``predict`` / ``info``
(:mod:`~gpuksvm.cli.commands`), ``demo`` and ``doctor``; :func:`main` runs it."""
from gpuksvm.cli.commands import main

__all__ = ["main"]
