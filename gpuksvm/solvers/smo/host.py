"""The host engines of the C-SVC dual: LIBSVM, and our own two-variable SMO.

``method="libsvm"``
    scikit-learn's LIBSVM (CPU): one problem (:func:`_solve_libsvm`), or the
    one-vs-one problems of a labelled set in one LIBSVM call, scikit-learn
    SVC's own (:func:`_solve_ovo_libsvm`).
``method="smo"``
    Our own two-variable SMO on the host (:func:`solve_smo_host`): WSS 2, a
    kernel-row LRU cache within ``cache_bytes``, optional shrinking (LIBSVM's
    rule, with the gradient reconstructed for the shrunk rows before the final
    check).

The dual, its notation and the shared pieces: :mod:`gpuksvm.solvers.svc_dual`;
the dispatch, batching and parallel threads: :mod:`gpuksvm.solvers.smo.engines`.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from itertools import combinations
from typing import Any

import numpy as np
import scipy.sparse as sp

from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC

from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.svc_dual import (
    PRECOMPUTED,
    SMOResult,
    box_bounds,
    intercept_from_F,
    is_precomputed,
    kernel_diagonal,
    kernel_rows,
    make_smo_result,
    objective_from_F,
    problem_data,
    dual_objective,
    svc_max_iter_message,
)

__all__ = ["solve_smo_host"]

_TAU = 1e-12


class _StatusSVC(SVC):
    """scikit-learn's SVC that leaves its ConvergenceWarning to the caller.

    Whether LIBSVM converged is its ``fit_status_`` (1: stopped at
    ``max_iter``, its only early stop).  SVC itself warns from
    ``_warn_from_fit_status``; silencing that warning with
    ``warnings.catch_warnings`` is not thread-safe (it swaps process-wide
    state: in the parallel batch a finished thread's capture replaced the
    caller's, and warnings raised after the batch, e.g. SVI's
    ExactFallbackWarning, went missing), so the hook is a no-op here and
    :func:`_libsvm_fit` warns itself when asked.
    """

    def _warn_from_fit_status(self) -> None:
        pass


def _libsvm_fit(Xs: Any, labels: np.ndarray, kernel: Kernel | str, C: float, tol: float,
                max_iter: int | None, w: np.ndarray | None, cache_bytes: int | None, warn: bool,
                class_weight: dict | None = None) -> tuple[Any, bool]:
    """scikit-learn's SVC (LIBSVM) fitted on host data; returns it and whether it converged
    (``fit_status_``).  ``warn``: a ConvergenceWarning with SVC's message when ``max_iter``
    stopped it (else the caller reports it)."""
    precomputed = is_precomputed(kernel)
    if not precomputed and kernel.degree != int(kernel.degree):
        raise ValueError(f"LIBSVM needs an integer polynomial degree, got degree={kernel.degree!r}")
    if sp.issparse(Xs) and (Xs.indices.dtype != np.int32 or Xs.indptr.dtype != np.int32):
        Xs = sp.csr_matrix((Xs.data, Xs.indices.astype(np.int32), Xs.indptr.astype(np.int32)),
                           shape=Xs.shape)  # LIBSVM takes 32-bit indices only
    cache_mb = 200.0 if cache_bytes is None else max(float(cache_bytes) / 2**20, 1.0)
    params = ({"kernel": PRECOMPUTED} if precomputed else
              {"kernel": kernel.name, "gamma": kernel.gamma, "degree": int(kernel.degree),
               "coef0": kernel.coef0})
    svc = _StatusSVC(C=C, tol=tol, max_iter=-1 if max_iter is None else max_iter, cache_size=cache_mb,
                     shrinking=True, class_weight=class_weight, **params)
    svc.fit(Xs, labels, sample_weight=w)
    converged = int(svc.fit_status_) == 0
    if warn and not converged:
        warnings.warn(svc_max_iter_message(max_iter), ConvergenceWarning, stacklevel=4)
    return svc, converged


def _libsvm_result(Xs: Any, S: np.ndarray, sv_local: np.ndarray, coef: np.ndarray, intercept: float,
                   kernel: Kernel | str, n_iter: int, converged: bool) -> SMOResult:
    """An SMOResult from LIBSVM's coefficients of one binary problem on the rows S (Xs = its data)."""
    keep = coef != 0
    sv_local, coef = sv_local[keep], coef[keep]
    order = np.argsort(sv_local, kind="stable")
    sv_local, coef = sv_local[order], coef[order]
    # LIBSVM's only early stop is max_iter (fit_status_ 1)
    return SMOResult(support=S[sv_local], dual_coef=coef, intercept=float(intercept),
                     objective=dual_objective(Xs, sv_local, coef, kernel), n_iter=int(n_iter),
                     converged=converged, solver="libsvm", max_iter_reached=not converged)


def _solve_libsvm(X: Any, ys: np.ndarray, S: np.ndarray, kernel: Kernel | str, C: float, tol: float,
                  max_iter: int | None, w: np.ndarray | None, cache_bytes: int | None,
                  warn: bool = True) -> SMOResult:
    Xs = problem_data(X, S, kernel)
    svc, converged = _libsvm_fit(Xs, ys, kernel, C, tol, max_iter, None if w is None else w[S],
                                 cache_bytes, warn)
    # scikit-learn's public binary dual_coef_/intercept_ are oriented so f > 0 → +1
    coef = svc.dual_coef_
    coef = np.asarray(coef.toarray() if sp.issparse(coef) else coef, dtype=np.float64).ravel()
    return _libsvm_result(Xs, S, np.asarray(svc.support_, dtype=np.int64), coef, svc.intercept_[0],
                          kernel, np.asarray(svc.n_iter_).ravel()[0], converged)


def _solve_ovo_libsvm(X: Any, yidx: np.ndarray, n_classes: int, kernel: Kernel | str, C: float,
                      tol: float, max_iter: int | None, sample_weight: np.ndarray | None,
                      class_weight: np.ndarray | None, cache_bytes: int | None,
                      warn: bool) -> list[SMOResult]:
    """All one-vs-one pairs in one LIBSVM call (scikit-learn's SVC on the class indices).

    LIBSVM builds the sub-problem of pair (lo, hi) from the rows of lo then
    those of hi, with +1 for lo, and solves the pairs one after the other; its
    one-vs-one layout is unpacked into one result per pair, turned to +1 for
    hi (the convention of :func:`~gpuksvm.solvers.smo.engines.solve_ovo`).
    """
    # LIBSVM drops the rows of sample weight 0 first (and scikit-learn's support_ then counts
    # the remaining rows): drop them here, so that support_ maps back to X's rows
    rows = (np.arange(yidx.shape[0], dtype=np.int64) if sample_weight is None
            else np.flatnonzero(sample_weight > 0))
    Xs = problem_data(X, rows, kernel)
    cw = None if class_weight is None else {c: float(v) for c, v in enumerate(class_weight)}
    svc, converged = _libsvm_fit(Xs, yidx[rows], kernel, C, tol, max_iter,
                                 None if sample_weight is None else sample_weight[rows], cache_bytes,
                                 warn, class_weight=cw)
    sv = np.asarray(svc.support_, dtype=np.int64)
    dual = svc.dual_coef_
    dual = np.asarray(dual.toarray() if sp.issparse(dual) else dual, dtype=np.float64)
    n_iter = np.asarray(svc.n_iter_).ravel()
    cls = yidx[rows[sv]]
    out = []
    for p, (lo, hi) in enumerate(combinations(range(n_classes), 2)):
        if n_classes == 2:  # the public binary orientation is already +1 for class 1
            coef, b = dual[0], float(svc.intercept_[0])
            of_pair = np.arange(sv.size)
        else:  # LIBSVM's layout: SVs of lo in row hi − 1, SVs of hi in row lo; +1 for lo
            of_pair = np.flatnonzero((cls == lo) | (cls == hi))
            coef = -np.where(cls[of_pair] == lo, dual[hi - 1, of_pair], dual[lo, of_pair])
            b = -float(svc.intercept_[p])
        ok = converged or (max_iter is not None and n_iter[p] < max_iter)
        out.append(_libsvm_result(Xs, rows, sv[of_pair], coef, b, kernel, n_iter[p], bool(ok)))
    return out


class _RowCache:
    """LRU cache of kernel rows K(x_i, X_active) within a byte budget."""

    def __init__(self, Xs: Any, kernel: Kernel | str, budget: int) -> None:
        self.Xs = Xs
        self.kernel = kernel
        self.budget = int(budget)
        self.rows: OrderedDict[int, np.ndarray] = OrderedDict()
        self.set_active(np.arange(Xs.shape[0]))

    def set_active(self, active: np.ndarray, keep: np.ndarray | None = None) -> None:
        """Restrict to ``active`` rows; ``keep`` (mask over the old active set) subsets cached rows."""
        self.active = active
        # the active rows gathered once (a precomputed Gram is indexed directly)
        self.Xa = None if is_precomputed(self.kernel) else self.Xs[active]
        if keep is None:
            self.rows.clear()
        else:
            for k in list(self.rows):
                self.rows[k] = self.rows[k][keep]
        self.max_rows = max(2, self.budget // max(active.size * 8, 1))

    def row(self, i: int) -> np.ndarray:
        r = self.rows.get(i)
        if r is not None:
            self.rows.move_to_end(i)
            return r
        r = kernel_rows(self.Xs, slice(i, i + 1), self.active, self.kernel, cols_data=self.Xa)[0]
        self.rows[i] = r
        while len(self.rows) > self.max_rows:
            self.rows.popitem(last=False)
        return r


def solve_smo_host(X: Any, y: np.ndarray, S: np.ndarray, kernel: Kernel | str, C: float, *,
                   tol: float = 1e-3, max_iter: int | None = None,
                   sample_weight: np.ndarray | None = None, cache_bytes: int | None = None,
                   shrinking: bool = True, warn: bool = True) -> SMOResult:
    """Two-variable SMO with WSS 2 (Fan, Chen & Lin 2005), row cache and shrinking, on the host.

    ``y`` are the labels of the rows ``S`` of ``X``.  Shrinking follows
    LIBSVM's rule (Chang & Lin 2011, §5.1): every min(n, 1000) steps a bound
    variable that cannot enter a violating pair (up-only with F < M, or
    low-only with F > m) leaves the active set; F of the shrunk rows is
    reconstructed, F_l = y_l − Σ_k y_kα_k K_lk, when the gap first falls
    below 10·tol and before the final check.  ``warn=False``: no
    ConvergenceWarning (the caller reports ``converged``).
    """
    Xs = problem_data(X, S, kernel)
    ys = np.asarray(y, dtype=np.float64)
    n = ys.size
    Cv = box_bounds(C, None if sample_weight is None else sample_weight[S], n)
    alpha = np.zeros(n)
    F = ys.copy()
    diag = kernel_diagonal(Xs, kernel)
    cache = _RowCache(Xs, kernel, 200 * 2**20 if cache_bytes is None else int(cache_bytes))
    active = np.arange(n)
    period = min(n, 1000)
    counter = period
    unshrunk_once = False
    it = 0
    converged = False

    def reconstruct() -> None:
        nonlocal active
        inactive = np.setdiff1d(np.arange(n), active, assume_unique=True)
        if inactive.size:
            sv = np.flatnonzero(alpha > 0)
            F[inactive] = ys[inactive]
            if sv.size:
                Kb = kernel_rows(Xs, inactive, sv, kernel)
                F[inactive] -= Kb @ (ys[sv] * alpha[sv])
            active = np.arange(n)
            cache.set_active(active)

    while max_iter is None or it < max_iter:
        ya, aa, Ca, Fa = ys[active], alpha[active], Cv[active], F[active]
        up = ((ya > 0) & (aa < Ca)) | ((ya < 0) & (aa > 0))
        low = ((ya < 0) & (aa < Ca)) | ((ya > 0) & (aa > 0))
        Fu = np.where(up, Fa, -np.inf)
        Fl = np.where(low, Fa, np.inf)
        il = int(np.argmax(Fu))
        m, M = Fu[il], float(Fl.min())
        gap = m - M
        if shrinking:
            if not unshrunk_once and gap <= 10 * tol:
                unshrunk_once = True
                if active.size < n:
                    reconstruct()
                    continue
            counter -= 1
            if counter <= 0:
                counter = period
                keep = ~((up & ~low & (Fa < M)) | (low & ~up & (Fa > m)))
                if not keep.all() and keep.sum() >= 2:
                    active = active[keep]
                    cache.set_active(active, keep)
                    continue
        if not gap >= tol:  # also stops when I_up or I_low is empty
            if active.size < n:
                reconstruct()
                continue
            converged = True
            break
        i = int(active[il])
        Ki = cache.row(i)
        b = m - Fa
        eta = np.maximum(diag[i] + diag[active] - 2.0 * Ki, _TAU)  # η floored (FCL05 §4)
        gain = np.where(low & (Fa < m), b * b / eta, -np.inf)       # WSS 2: −b²/a minimal
        jl = int(np.argmax(gain))
        j = int(active[jl])
        Kj = cache.row(j)
        ub_i = Cv[i] - alpha[i] if ys[i] > 0 else alpha[i]
        ub_j = alpha[j] if ys[j] > 0 else Cv[j] - alpha[j]
        t = min(b[jl] / eta[jl], ub_i, ub_j)
        alpha[i] = (Cv[i] if ys[i] > 0 else 0.0) if t == ub_i else alpha[i] + ys[i] * t
        alpha[j] = (0.0 if ys[j] > 0 else Cv[j]) if t == ub_j else alpha[j] - ys[j] * t
        F[active] = Fa - t * (Ki - Kj)
        it += 1
    if active.size < n:
        reconstruct()
    if not converged and warn:
        warnings.warn(f"SMO stopped after max_iter={max_iter} steps before reaching tol={tol}",
                      ConvergenceWarning, stacklevel=3)
    b = intercept_from_F(F, alpha, ys, Cv)
    return make_smo_result(S, alpha, ys, b, objective_from_F(F, alpha, ys), it, converged, "smo",
                        max_iter_reached=not converged)
