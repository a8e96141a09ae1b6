"""What CVM and OneClassCVM share: parameters, the data source, the call into the solver, the stored model.

The estimators are in :mod:`gpuksvm.estimators.cvm` (the method, its equations and the
measured defaults are described there); the algorithm is
:func:`gpuksvm.solvers.cvm.algorithm.solve_cvm`.  ``fit`` reads: validate → row source
(:class:`~gpuksvm.solvers.cvm.algorithm.ArrayRows` in memory,
:class:`~gpuksvm.scaleout.cvm.DaskRows` for a dask array) → solver → :meth:`CVMBase._store`.
"""
from __future__ import annotations

import time
import warnings
from numbers import Real
from typing import Any, Callable, Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.array.validation import encode_classes
from gpuksvm.estimators.base import DeviceMixin
from gpuksvm.kernels.kernel import Kernel, kernel_matvec
from gpuksvm.estimators.params import DEVICE_PARAMS, KERNEL_PARAMS, count, deprecated, is_unset, positive
from gpuksvm.scaleout.cvm import DaskRows
from gpuksvm.solvers.cvm.algorithm import ArrayRows, CVMParams, CVMResult, CVMRows, check_kernel, solve_cvm
from gpuksvm.solvers.cvm.scan import kernel_scale
from gpuksvm.solvers.smo.memory import warn_memory_fallback

__all__ = ["CVMBase"]


class CVMBase(DeviceMixin, BaseEstimator):
    """Shared parameter handling, the row sources, the call into the solver, the stored model and prediction."""

    _task = "classification"

    # ------------------------------------------------------------------ params
    _parameter_constraints: dict = {
        **KERNEL_PARAMS,
        "C": [positive()],
        "tol": [positive()],
        "sample_size": [None, count(1)],
        "n_tries": [count(1)],
        "max_iter": [count(1)],
        "max_core_size": [count(2)],
        "cache_size": [None, positive()],
        "shrinking": ["boolean"],
        "normalize": ["boolean"],
        **DEVICE_PARAMS,
        # kept one release, no effect (a FutureWarning says so)
        "eps": deprecated([Interval(Real, 0, 1, closed="neither")]),
        "eps_schedule": deprecated([StrOptions({"anneal", "fixed"})]),
        "inner_solver": deprecated([StrOptions({"active_set", "smo"})]),
    }

    def _check_param_relations(self) -> None:
        if not is_unset(self.eps):
            warnings.warn("eps (the (1+ε) ball of the old stop rule) is deprecated and has no effect; "
                          "the CVM stops on the L2-SVM's relative duality gap `tol`. eps will be "
                          "removed in the next release.", FutureWarning, stacklevel=4)
        if not is_unset(self.eps_schedule):
            warnings.warn("eps_schedule is deprecated and has no effect (the stop rule is the duality "
                          "gap `tol`); it will be removed in the next release.", FutureWarning, stacklevel=4)
        if not is_unset(self.inner_solver):
            warnings.warn("inner_solver is deprecated and has no effect: the core-set QP picks SMO or "
                          "the active set itself (gpuksvm.solvers.cvm.simplex_qp); it will be removed in "
                          "the next release.", FutureWarning, stacklevel=4)

    def _make_kernel(self, X: Any) -> Kernel:
        return check_kernel(self._resolved_kernel(X), bool(self.normalize))

    def _cvm_params(self) -> CVMParams:
        """The validated parameters as :func:`~gpuksvm.solvers.cvm.algorithm.solve_cvm` takes them."""
        return CVMParams(C=float(self.C), tol=float(self.tol), sample_size=self.sample_size,
                         n_tries=int(self.n_tries), max_iter=int(self.max_iter),
                         max_core_size=int(self.max_core_size),
                         cache_size=None if self.cache_size is None else float(self.cache_size),
                         shrinking=bool(self.shrinking), multi_class=getattr(self, "multi_class", "ovo"),
                         verbose=int(self.verbose))

    def _one_class(self) -> bool:
        return self._task == "one_class" or getattr(self, "task", "") == "one_class"

    def _fit_dask(self, X: Any, y: Any = None, *, client: Any = None) -> "CVMBase":
        """``fit`` on a dask array: the solver on a :class:`~gpuksvm.scaleout.cvm.DaskRows` source.

        The rows stay in their chunks: the source validates them in one pass,
        resolves γ and the kernel scales chunk-wise, gathers the labels and
        the rows' order keys, and scans them on the workers.  ``dask_info_``
        records the passes and the bytes that came back.
        """
        one_class = self._one_class()
        rs = check_random_state(self.random_state)
        rows = DaskRows(X, None if one_class else y, client=client)
        self.n_features_in_ = rows.shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        kernel = rows.evaluate(self._make_kernel)
        xscale = rows.kernel_scale(kernel, bool(self.normalize), dt)
        t0 = time.perf_counter()
        classes, yi = (None, None) if one_class else encode_classes(rows.labels())
        result = self._solve(rows, classes, yi, kernel, xscale, dev, dt, rs)
        info = rows.info(seconds=time.perf_counter() - t0)
        self._store(result, dev, classes=classes, dask_info=info)
        rows.release()
        return self

    def _problem_coef(self) -> np.ndarray:
        """(n_SV, n_problems) host W with f_p(x) = Σ_k W[k, p] κ(sv_k, x) r(x) + b_p.

        W = ``dual_coef_``ᵀ, times r(sv_k) = 1/√κ(sv_k, sv_k) per row with
        ``normalize=True`` (r(x) the same scale of the input row; 1 for a
        kernel of constant diagonal).  Checked against the other attributes.
        """
        D = np.asarray(bk.to_host(self.dual_coef_), dtype=np.float64)
        n_sv = self.support_vectors_.shape[0]
        n_problems = np.shape(self.rho_)[0]
        if D.shape != (n_problems, n_sv) or np.shape(self.intercept_) != (n_problems,):
            raise ValueError(f"The fitted model of {type(self).__name__} was altered: dual_coef_ {D.shape}, "
                             f"intercept_ {np.shape(self.intercept_)}, rho_ ({n_problems},), {n_sv} "
                             "support vectors")
        W = D.T
        if self._sv_scale is not None:
            W = W * np.asarray(bk.to_host(self._sv_scale), dtype=np.float64)[:, None]
        return W

    def _kernel_expansion(self, X: Any) -> tuple[np.ndarray, str]:
        """(n, n_problems) host values Σᵢ coefᵢ κₙ(xᵢ, x) of the stored expansion."""
        check_is_fitted(self, "dual_coef_")
        Xd, kind = self._validated_input(X, self.support_vectors_.dtype)
        return self._expansion_values()(Xd), kind

    def _expansion_values(self) -> Callable[[Any], np.ndarray]:
        """The function from validated rows (all or a block of them) to their (b, n_problems) host
        float64 values Σᵢ coefᵢ κₙ(xᵢ, x) of the stored expansion (the model read once)."""
        dt = self.support_vectors_.dtype
        xp = self._fitted_xp()
        V = self._problem_coef()
        Vd = xp.asarray(np.ascontiguousarray(V), dtype=dt)

        def values(Xd: Any) -> np.ndarray:
            if V.shape[0] == 0:
                return np.zeros((Xd.shape[0], V.shape[1]))
            D = kernel_matvec(Xd, self.support_vectors_, Vd, self.kernel_, dtype=dt)
            D = np.asarray(bk.to_host(D), dtype=np.float64).reshape(Xd.shape[0], -1)
            if self._sv_scale is not None:
                D *= np.asarray(bk.to_host(kernel_scale(Xd, self.kernel_, True)), np.float64)[:, None]
            return D

        return values

    def _fit_array(self, X: Any, classes: np.ndarray | None, yi: np.ndarray | None,
                   starts: Sequence | None = None) -> "CVMBase":
        """``fit`` on validated in-memory rows ``X`` with the classes and encoded labels (None: one-class),
        each binary problem from the initial pair or from ``starts[p]`` (core rows and α)."""
        t0 = time.perf_counter()
        setup = self._fit_setup(X, kernel=False)      # device, dtype, random state, X on the device
        kernel = self._make_kernel(setup.X)           # γ on the device copy, as before
        xscale = kernel_scale(setup.X, kernel, bool(self.normalize))
        seconds = bk.synchronized_clock(setup.device) - t0
        result = self._solve(ArrayRows(setup.X), classes, yi, kernel, xscale, setup.device, setup.dtype,
                             setup.random_state, starts)
        self._store(result, setup.device, classes=classes, times={"prepare": float(seconds)})
        return self

    def _solve(self, rows: CVMRows, classes: np.ndarray | None, yi: np.ndarray | None, kernel: Kernel,
               xscale: Any, dev: bk.Device, dt: np.dtype, rs: np.random.RandomState,
               starts: Sequence | None = None) -> CVMResult:
        return solve_cvm(rows, yi, n_classes=0 if classes is None else len(classes), kernel=kernel,
                         xscale=xscale, params=self._cvm_params(), device=dev, dtype=dt, random_state=rs,
                         starts=starts)

    def _store(self, result: CVMResult, dev: bk.Device, *, classes: np.ndarray | None = None,
               times: dict | None = None, dask_info: dict | None = None) -> None:
        """The fitted attributes from the solver's result (the one writer of the fitted model).

        Per-problem attributes have one entry per binary problem in the order
        of ``problems_`` (one for a binary or one-class fit), as SVC's ``n_iter_``.
        """
        results = result.core_sets
        self.kernel_ = result.kernel
        if result.threshold is None:
            self.classes_ = classes
            self.problems_ = result.problems
        else:
            self._set_one_class_fit(result.threshold)
        self.support_ = result.support
        self.support_vectors_ = result.support_vectors
        self.dual_coef_ = result.dual_coef
        self._sv_scale = result.sv_scale
        self.n_support_total_ = int(result.support.shape[0])
        self.intercept_ = result.intercept
        self.core_set_ = [r.core for r in results]
        self.alpha_ = [r.alpha for r in results]
        self.radius_ = np.sqrt(np.maximum(np.array([r.radius2 for r in results], dtype=np.float64), 0.0))
        self.rho_ = np.array([r.rho for r in results], dtype=np.float64)
        self.n_iter_ = np.array([r.n_iter for r in results], dtype=np.int64)
        self.stop_reason_ = [r.stop for r in results]
        self.duality_gap_ = np.array([r.gap for r in results], dtype=np.float64)
        self.search_ = results[0].search
        self.kappa_tilde_ = float(results[0].kappa_t)
        self.n_smo_steps_ = np.array([r.n_smo_steps for r in results], dtype=np.int64)
        self.core_set_size_ = np.array([r.core.shape[0] for r in results], dtype=np.int64)
        self.history_ = [r.history for r in results]
        self.fit_times_ = {**(times or {}), **result.times}
        self.memory_fallback_ = result.memory_fallback
        if result.memory_fallback and "kernel_cache" in result.memory_fallback:   # an OOM retry warned itself
            warn_memory_fallback(type(self).__name__, f"the core-set QP's K̃ row cache was cut from "
                                 f"cache_size={float(self.cache_size):g} MB to half the budget",
                                 stacklevel=5)
        if dask_info is not None:
            self.dask_info_ = dask_info
        self._set_fitted_device(dev)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def fit_cvm(estimator: CVMBase, X: Any, y: Any = None, *, client: Any = None) -> CVMBase:
    """The Dask route of ``CVM.fit`` and ``OneClassCVM.fit`` (:func:`~gpuksvm.scaleout.dispatch.dask_dispatch`):
    :meth:`CVMBase._fit_dask`; :func:`gpuksvm.scaleout.cvm.fit_cvm` describes it."""
    return estimator._fit_dask(X, y, client=client)
