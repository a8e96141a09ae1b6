"""The C-SVC of a labelled set: its one-vs-one duals solved and assembled in LIBSVM's layout.

:func:`solve_svc` solves every one-vs-one binary problem of the labels
(:func:`gpuksvm.solvers.smo.engines.solve_ovo`; pair (i, j) with +1 for class j)
and returns a :class:`KernelSVCResult`: the support vectors of all problems
grouped by class (ascending row within a class), their coefficients in
LIBSVM's one-vs-one layout — the SVs of class i carry pair (i, j)'s
coefficient in row j − 1, those of class j in row i — and the per-problem
diagnostics.  Two classes: one row, oriented so that decision > 0 means
class 1, as scikit-learn's SVC.  This is the model
:class:`~gpuksvm.estimators.kernel_svc.KernelSVC` stores.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.multiclass import binary_problems
from gpuksvm.solvers.smo.engines import solve_ovo
from gpuksvm.solvers.svc_dual import PRECOMPUTED, SMOResult

__all__ = ["KernelSVCResult", "HeldOutDecisions", "solve_svc", "ovo_model", "pair_coef"]


@dataclass(frozen=True)
class HeldOutDecisions:
    """The decision values f_p(x) of a model's binary problems on particular rows, computed by the
    solver (a cross-validated search's held-out fold, one kernel block for the models of all C
    values of the fold): its predictions and decision values on rows with the same contents read
    them instead of evaluating the kernel again.

    Attributes
    ----------
    key : :func:`~gpuksvm.array.validation.content_key` of the rows
    values : (n, n_problems) host float64 f_p(x) = Σₛ W[s, p] K(x, svₛ) + b_p
    """

    key: tuple
    values: np.ndarray


@dataclass(frozen=True)
class KernelSVCResult:
    """A solved one-vs-one C-SVC.

    Attributes
    ----------
    classes : (K,) sorted class labels
    support : (n_SV,) int64 row indices of the support vectors, grouped by class
    support_vectors : (n_SV, d) those rows of the data solved on (on ``device``); an empty
        (0, 0) array for a precomputed Gram matrix
    n_support : (K,) int32 support vectors per class
    dual_coef : (max(K − 1, 1), n_SV) host float64 yᵢαᵢ in LIBSVM's one-vs-one layout
    intercept : (K(K − 1)/2,) host float64
    n_iter, objective, converged, max_iter_reached : (K(K − 1)/2,) per binary problem
    solver : str, the engine that ran
    device : where the model lives
    memory_fallback : what an out-of-memory error made the solve cut
        (:func:`~gpuksvm.array.backend.fallback_text`; the working-set SMO's kernel-row cache moved
        to host memory, kernel blocks), else None
    held_out : the model's decision values on rows it was not trained on, when the solver
        computed them (:class:`HeldOutDecisions`), else None
    """

    classes: np.ndarray
    support: np.ndarray
    support_vectors: Any
    n_support: np.ndarray
    dual_coef: np.ndarray
    intercept: np.ndarray
    n_iter: np.ndarray
    objective: np.ndarray
    converged: np.ndarray
    max_iter_reached: np.ndarray
    solver: str
    device: bk.Device
    memory_fallback: str | None = None
    held_out: HeldOutDecisions | None = None

    @property
    def finite(self) -> bool:
        """Whether every coefficient and intercept is finite."""
        return bool(np.isfinite(self.intercept).all() and np.isfinite(self.dual_coef).all())


def solve_svc(data: Any, yidx: np.ndarray, classes: np.ndarray, kernel: Kernel | str, C: float, *,
              tol: float = 1e-3, max_iter: int | None = None, device: bk.Device = bk.CPU, dtype: Any = None,
              sample_weight: np.ndarray | None = None, class_weight: np.ndarray | None = None,
              method: str = "auto", shrinking: bool = True, cache_bytes: int = 200 * 2**20) -> KernelSVCResult:
    """Solve the one-vs-one C-SVC of the labelled rows of ``data``.

    Parameters
    ----------
    data : (n, d) rows (on ``device``), or the (n, n) Gram matrix with ``kernel="precomputed"``
    yidx : (n,) class index of each row (into ``classes``)
    classes : (K,) class labels
    kernel : Kernel (γ resolved) or "precomputed"
    C, tol, max_iter, sample_weight, class_weight, method, shrinking, cache_bytes :
        as :func:`gpuksvm.solvers.smo.engines.solve_ovo` (``max_iter`` None: no limit)
    device, dtype : where and in which dtype to solve

    Returns
    -------
    KernelSVCResult (``memory_fallback``: what an out-of-memory error cut, if one did)
    """
    with bk.FallbackCollector() as retried:
        results = solve_ovo(data, yidx, kernel, float(C), n_classes=classes.shape[0], tol=float(tol),
                            max_iter=max_iter, device=device, dtype=dtype, sample_weight=sample_weight,
                            class_weight=class_weight, method=method, shrinking=bool(shrinking),
                            cache_bytes=int(cache_bytes), warn_convergence=False)
    model = ovo_model(results, data, yidx, classes, kernel, device, dtype)
    return replace(model, memory_fallback=bk.fallback_text(retried=retried.cut))


def pair_coef(dual_coef: np.ndarray, n_support: np.ndarray, n_classes: int) -> np.ndarray:
    """(n_SV, K(K − 1)/2) coefficients of each binary problem, unpacked from LIBSVM's one-vs-one
    layout (:func:`ovo_model`'s ``dual_coef``; host float64, shapes as it gives them).

    Pair (i, j): the SVs of class i carry ``dual_coef[j − 1]``, those of class j ``dual_coef[i]``,
    every other SV 0; two classes: ``dual_coef``'s one row."""
    if n_classes == 2:
        return dual_coef.T.copy()
    cls = np.repeat(np.arange(n_classes), n_support)
    W = np.zeros((dual_coef.shape[1], n_classes * (n_classes - 1) // 2))
    for p, (i, j) in enumerate(binary_problems(n_classes, "ovo")):
        of_i, of_j = cls == i, cls == j
        W[of_i, p] = dual_coef[j - 1, of_i]
        W[of_j, p] = dual_coef[i, of_j]
    return W


def ovo_model(results: list[SMOResult], data: Any, yidx: np.ndarray, classes: np.ndarray,
              kernel: Kernel | str, device: bk.Device, dtype: Any) -> KernelSVCResult:
    """The model of solved one-vs-one problems (in :func:`binary_problems` order), in LIBSVM's layout."""
    K = classes.shape[0]
    sign = 1.0 if K == 2 else -1.0  # solve_ovo: +1 for the higher class of each pair
    coefs = [(np.asarray(r.support, dtype=np.int64),
              sign * np.asarray(bk.to_host(r.dual_coef), dtype=np.float64).ravel()) for r in results]
    intercept = sign * np.array([r.intercept for r in results], dtype=np.float64)
    union = np.unique(np.concatenate([s for s, _ in coefs])) if coefs else np.zeros(0, np.int64)
    # group by class, ascending index within a class (LIBSVM's order)
    sv = union[np.lexsort((union, yidx[union]))]
    pos = np.empty(yidx.shape[0], dtype=np.int64)
    pos[sv] = np.arange(sv.size)
    dual = np.zeros((max(K - 1, 1), sv.size))
    cls = yidx[sv]
    for (i, j), (s, c) in zip(binary_problems(K, "ovo"), coefs):
        if K == 2:
            dual[0, pos[s]] = c
        else:
            # LIBSVM layout: SVs of class i in row j−1, SVs of class j in row i
            col = pos[s]
            of_i = cls[col] == i
            dual[j - 1, col[of_i]] = c[of_i]
            dual[i, col[~of_i]] = c[~of_i]
    if isinstance(kernel, str) and kernel == PRECOMPUTED:
        # no feature rows: predictions take the kernel columns ``support``
        support_vectors = bk.get_namespace(device).empty((0, 0), dtype=dtype if device.is_gpu else np.float64)
    else:
        support_vectors = bk.take_rows(data, sv)
    return KernelSVCResult(
        classes=classes, support=sv, support_vectors=support_vectors,
        n_support=np.bincount(cls, minlength=K).astype(np.int32), dual_coef=dual, intercept=intercept,
        n_iter=np.array([r.n_iter for r in results], dtype=np.int64),
        objective=np.array([r.objective for r in results]),
        converged=np.array([r.converged for r in results]),
        max_iter_reached=np.array([r.max_iter_reached for r in results]),
        solver=results[0].solver, device=device)
