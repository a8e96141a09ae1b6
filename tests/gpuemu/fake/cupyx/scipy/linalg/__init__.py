"""cupyx.scipy.linalg on SciPy (the solvers gpuksvm uses)."""
import numpy as _np
import scipy.linalg as _sla

from cupy import _call


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=False):
    """cuBLAS ``trsm`` as CuPy calls it: no singularity check (a zero on the diagonal gives ±inf/NaN,
    where SciPy raises)."""
    def run(A, B):
        if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
            raise ValueError("expected one square matrix or a batch of square matrices")
        if A.shape[:-2] != B.shape[:A.ndim - 2] or B.ndim < A.ndim - 1 or B.shape[A.ndim - 2] != A.shape[-1]:
            raise ValueError("incompatible dimensions")
        dt = A.dtype if A.dtype.char in "fd" else _np.promote_types(A.dtype.char, "f")
        if check_finite and not (_np.isfinite(A).all() and _np.isfinite(B).all()):
            raise ValueError("array must not contain infs or NaNs")
        op = {"N": 0, "T": 1, "C": 2}.get(trans, trans)
        trsm = _sla.get_blas_funcs("trsm", dtype=dt)
        As = A.reshape((-1,) + A.shape[-2:]).astype(dt)
        Bs = B.reshape((As.shape[0], A.shape[-1], -1)).astype(dt)
        X = _np.stack([trsm(1.0, As[i], Bs[i], lower=int(lower), trans_a=int(op), diag=int(unit_diagonal))
                       for i in range(As.shape[0])])
        return X.reshape(B.shape)
    return _call("linalg.solve_triangular", run, (a, b), {}, kind="linalg")


def lu_factor(a, overwrite_a=False, check_finite=True):
    return _call("linalg.lu_factor", lambda A: _sla.lu_factor(A, check_finite=False), (a,), {}, kind="linalg")


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    return _call("linalg.lu_solve", lambda lu, piv, B: _sla.lu_solve((lu, piv), B, trans=trans, check_finite=False),
                 (lu_and_piv[0], lu_and_piv[1], b), {}, kind="linalg")
