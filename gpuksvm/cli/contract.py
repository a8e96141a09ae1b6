"""The command-line contract shared by ``gpuksvm <command>`` and ``python -m gpuksvm.cli.demo``.

Every error is one line ``gpuksvm <command>: error: <message>`` on stderr and
exit status 1, never a traceback; warnings are ``gpuksvm <command>: warning:
<message>``.  An error the commands do not expect says so and asks for a bug
report.  Messages are printed through :func:`printable`, so a file name or a
string from a file cannot send control characters (terminal escape
sequences, line breaks) to the terminal.  :func:`parse_literal` reads the
``--set name=value`` values.
"""
from __future__ import annotations

import argparse
import ast
import sys
import unicodedata
import warnings
from typing import Any, Callable

import numpy as np

from gpuksvm.array.backend import DeviceUnavailableError
from gpuksvm.persistence.model_format import ModelFormatError

__all__ = ["CLIError", "parse_literal", "printable", "run_command"]


class CLIError(Exception):
    """A user error on the command line (printed without a traceback)."""


#: Unicode categories shown escaped: controls (C0, DEL, C1), format characters (bidirectional
#: overrides, zero-width), surrogates, private-use and unassigned code points, line/paragraph breaks
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def printable(text: Any) -> str:
    """``str(text)`` with every control or invisible formatting character written as an escape.

    ESC (so any ANSI/VT escape sequence), the other C0 controls, DEL, the C1
    controls (``\\x9b`` is a one-byte CSI), line breaks, bidirectional
    overrides and zero-width characters become ``\\xNN`` / ``\\uNNNN``;
    other text, non-ASCII letters included, is unchanged.
    """
    text = str(text)
    if text.isprintable():      # the common case: nothing to escape (no Cc/Cf/Z*/... character)
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch
                   for ch in text)


def parse_literal(text: str) -> Any:
    """``text`` as a Python literal when it parses as one (``0.5``, ``None``, ``{1: 2.0}``), else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def run_command(prog: str, func: Callable[[argparse.Namespace], Any], args: argparse.Namespace) -> int:
    """Run ``func(args)`` under the contract of the module docstring; returns the exit status."""

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        print(f"{prog}: warning: {printable(message)}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        try:
            return int(func(args) or 0)
        except (CLIError, DeviceUnavailableError, ModelFormatError) as exc:
            msg = str(exc)
        except (OSError, ValueError, TypeError, MemoryError, ArithmeticError,
                np.linalg.LinAlgError) as exc:
            msg = f"{exc}" if str(exc) else type(exc).__name__
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:  # noqa: BLE001 - never a traceback; ask for a report instead
            msg = (f"unexpected {type(exc).__name__}: {exc} (this is a bug in gpuksvm; please report "
                   "it with the command line)")
    print(f"{prog}: error: {printable(msg)}", file=sys.stderr)
    return 1
