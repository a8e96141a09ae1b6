"""The ``gpuksvm`` command line: LIBSVM-style ``train`` / ``predict`` (:mod:`~gpuksvm.cli.main`),
``demo`` and ``doctor``."""
