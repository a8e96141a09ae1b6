"""cupyx.scipy.linalg on SciPy (the solvers gpuksvm uses)."""
import scipy.linalg as _sla

from cupy import _call


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=False):
    return _call("linalg.solve_triangular",
                 lambda A, B: _sla.solve_triangular(A, B, trans=trans, lower=lower, unit_diagonal=unit_diagonal,
                                                    check_finite=False), (a, b), {}, kind="linalg")


def lu_factor(a, overwrite_a=False, check_finite=True):
    return _call("linalg.lu_factor", lambda A: _sla.lu_factor(A, check_finite=False), (a,), {}, kind="linalg")


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    return _call("linalg.lu_solve", lambda lu, piv, B: _sla.lu_solve((lu, piv), B, trans=trans, check_finite=False),
                 (lu_and_piv[0], lu_and_piv[1], b), {}, kind="linalg")
