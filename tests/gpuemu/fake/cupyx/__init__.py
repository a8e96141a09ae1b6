"""cupyx of the gpuksvm test stand-in: scipy.sparse and scipy.linalg."""
import contextlib

from . import scipy  # noqa: F401


def errstate(**kwargs):
    return contextlib.nullcontext()
