"""The CUDA side of the batched working-set SMO: launches of ``kernels_cuda/smo.cu``.

Each function here has a NumPy twin in :mod:`gpuksvm.solvers.smo.working_set`
(its test oracle; ``tests/test_emu_kernels.py`` compares them on the emulated
GPU): :func:`_solve_subproblems_cuda` ↔
:func:`~gpuksvm.solvers.smo.working_set.solve_subproblems_host` and
:func:`_round_keys_cuda` ↔ :func:`~gpuksvm.solvers.smo.working_set.round_keys_host`.
"""
from __future__ import annotations

import numpy as np

from gpuksvm.array import cuda_sources as _cuda
from gpuksvm.array import backend as bk


def _solve_subproblems_cuda(Kww, yw, Cw, aw, Fw, active, tol: float, max_inner: int):
    """One launch: one thread block per problem (kernels_cuda/smo.cu)."""
    xp = bk.namespace_of(Kww)
    P, ws = yw.shape
    dt = Kww.dtype
    # one thread per working-set row, a power-of-two block (the reductions halve it), >= one warp
    threads = max(32, 1 << (int(ws) - 1).bit_length())
    if threads > 1024:
        raise ValueError(f"working set of {ws} rows: the subproblem kernel takes at most 1024")
    alpha = xp.array(aw, dtype=dt, order="C", copy=True)
    n_inner = xp.zeros(P, dtype=xp.int32)
    gap0 = xp.zeros(P, dtype=dt)
    shared = threads * (dt.itemsize + 4)   # (value, index) per thread
    dev = [xp.ascontiguousarray(a, dtype=dt) for a in (Kww, yw, Cw, Fw)]
    _cuda.launch("smo", f"smo_subproblem_{'f32' if dt == np.float32 else 'f64'}", (P,), (threads,),
                 (dev[0], dev[1], dev[2], alpha, dev[3], xp.asarray(active, dtype=xp.int32),
                  ws, tol, max_inner, n_inner, gap0), shared_mem=shared)
    return alpha, n_inner, gap0


_RK_BLOCK = 256              # SMO_RK_BLOCK of smo.cu
_RK_CHUNK = 4 * _RK_BLOCK    # rows per block of smo_round_keys


def _round_keys_cuda(yv, Cvv, alpha, F, widx_keep):
    """:func:`~gpuksvm.solvers.smo.working_set.round_keys_host` on the GPU: two launches
    (``kernels_cuda/smo.cu``), no host round trip."""
    xp = bk.namespace_of(F)
    P, n1 = F.shape
    sfx = "f32" if F.dtype == np.float32 else "f64"
    n_chunks = -(-n1 // _RK_CHUNK)
    su, sl = xp.empty_like(F), xp.empty_like(F)
    part = xp.empty((P, n_chunks, 5), dtype=xp.float64)
    stats = xp.empty((P, 4), dtype=xp.float64)
    keep = xp.ascontiguousarray(widx_keep, dtype=xp.int64) if widx_keep.shape[1] else None
    _cuda.launch("smo", f"smo_round_keys_{sfx}", (n_chunks, P), (_RK_BLOCK,),
                 (yv, Cvv, alpha, F, n1, _RK_CHUNK, su, sl, part))
    _cuda.launch("smo", f"smo_round_finish_{sfx}", (P,), (_RK_BLOCK,),
                 (n1, n_chunks, keep, int(widx_keep.shape[1]), su, sl, part, stats))
    return su, sl, stats
