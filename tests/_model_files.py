"""Reading and rewriting model files in tests: members, arrays, and files that pass the integrity checks.

:func:`rewritten` lets a test change values inside a genuine model file's JSON
header and arrays and recomputes the array table (dtype, shape, SHA-256 as
:mod:`gpuksvm.persistence.archive` computes it), so that what the loader sees is the changed
*content*, not a damaged file.
"""
from __future__ import annotations

import io as _pyio
import json
import zipfile
from typing import Any, Callable

import numpy as np

from gpuksvm.persistence import archive as model_archive


def members(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(_pyio.BytesIO(blob)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def zipped(parts: dict[str, bytes]) -> bytes:
    buf = _pyio.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in parts.items():
            zf.writestr(n, data)
    return buf.getvalue()


def read_npy(data: bytes) -> np.ndarray:
    return np.lib.format.read_array(_pyio.BytesIO(data), allow_pickle=False)


def npy_bytes(a: np.ndarray) -> bytes:
    buf = _pyio.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=False)
    return buf.getvalue()


def rewritten(blob: bytes, edit: Callable[[dict, dict[str, np.ndarray]], Any]) -> bytes:
    """``blob`` after ``edit(header, arrays)`` changed the decoded header and arrays in place
    (arrays may be replaced, added or removed), with the array table and checksums recomputed."""
    parts = members(blob)
    header = json.loads(parts["header.json"])
    arrays = {ref: read_npy(parts[f"{ref}.npy"]) for ref in header["arrays"]}
    edit(header, arrays)
    out = {"header.json": b""}
    header["arrays"] = {}
    for ref, a in arrays.items():
        header["arrays"][ref] = {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": model_archive.sha256(a)}
        out[f"{ref}.npy"] = npy_bytes(a)
    out["header.json"] = json.dumps(header).encode()
    return zipped(out)


def node(header: dict, *path: Any) -> Any:
    """The node at ``path`` below the header's model tree (``"model"``, or ``"tree"`` in version 1)."""
    cur = header["tree" if header["format_version"] == 1 else "model"]
    for k in path:
        cur = cur[k]
    return cur
