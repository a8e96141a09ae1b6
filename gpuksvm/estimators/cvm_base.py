"""What CVM and OneClassCVM share: parameters, the call into the core-set algorithm, the stored model.

The estimators are in :mod:`gpuksvm.estimators.cvm` (the method, its equations and the
measured defaults are described there); the algorithm is
:func:`gpuksvm.solvers.cvm.meb.fit_core_set`.
"""
from __future__ import annotations

import time
import warnings
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin
from gpuksvm.kernels.kernel import Kernel, kernel_matvec
from gpuksvm.solvers.multiclass import binary_problems, problem_rows
from gpuksvm.estimators.params import DEVICE_PARAMS, KERNEL_PARAMS, count, deprecated, is_unset, positive
from gpuksvm.solvers.progress import report
from gpuksvm.solvers.cvm.meb import CoreSetResult, fit_core_set
from gpuksvm.solvers.cvm.scan import kernel_scale, make_scanner
from gpuksvm.solvers.row_order import RowHasher, smallest_keys
from gpuksvm.solvers.svc_dual import svc_max_iter_message

__all__ = ["CVMBase"]


_OUTLIER_SLACK_FACTOR = 3.0     # one-class: an outlier's slack exceeds this × the median SV slack
_THRESHOLD_KKT = 1e-4           # one-class: the core-set QP is finished to a KKT gap ≤ this·ρ (OneClassCVM)


def _row_order(X: Any, y: np.ndarray | None, rs: np.random.RandomState) -> np.ndarray:
    """The rows of ``X`` sorted by a seeded hash of their contents (and their labels ``y``).

    The core-set loop draws its samples, and breaks its ties, by position in
    this order (:func:`gpuksvm.solvers.cvm.meb.fit_core_set`), so the same rows in
    any order give the same model.  A distributed row source hashes its
    chunks where they are (``__gpuksvm_row_keys__``).
    """
    hasher = RowHasher(X.shape[1], rs)
    hook = getattr(X, "__gpuksvm_row_keys__", None)
    return smallest_keys(hook(hasher) if hook is not None else hasher.keys(X), None, y)


def _outlier_threshold(res: CoreSetResult, C: float) -> float:
    """The one-class outlier threshold ρ − τ, τ = 3·median(αⱼ/C) over the support vectors.

    ρ itself would flag every support vector (each has slack ξⱼ = αⱼ/C > 0);
    see :class:`OneClassCVM` for the rule and its measurements.
    """
    a_sv = res.alpha[res.alpha > 0]
    tau = _OUTLIER_SLACK_FACTOR * float(np.median(a_sv)) / C if a_sv.size else 0.0
    return float(res.rho) - tau


class CVMBase(DeviceMixin, BaseEstimator):
    """Shared parameter handling, the call into the core-set algorithm and prediction."""

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
        "cache_size": [positive()],
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
        kernel = self._resolved_kernel(X)
        if not kernel.is_psd:
            raise ValueError(f"kernel={kernel.name!r} is not positive semi-definite; the CVM needs a "
                             "PSD kernel (use 'rbf', or 'poly'/'linear' with normalize=True)")
        if kernel.constant_diag is None and not self.normalize:
            raise ValueError(
                f"the CVM needs a kernel with constant κ(x, x) (CVM paper eq. 4); kernel="
                f"{kernel.name!r} has κ(x, x) depending on x. Use kernel='rbf', or pass "
                "normalize=True to use κ(x, z)/sqrt(κ(x, x) κ(z, z)).")
        return kernel

    # ------------------------------------------------------------------ the algorithm
    def _solve(self, X: Any, y: np.ndarray | None, rows: np.ndarray | None, kernel: Kernel,
               xscale: Any, dev: bk.Device, dt: np.dtype, rs: np.random.RandomState) -> CoreSetResult:
        """One MEB problem on the rows ``rows`` (in the order its search draws from) with labels
        ``y`` (None = one-class)."""
        # a distributed row source brings its own furthest-point search (gpuksvm.scaleout.cvm)
        factory = getattr(X, "__gpuksvm_scanner__", None)
        C = float(self.C)
        scanner = (factory(y, kernel, xscale, C, dt, dev) if factory is not None
                   else make_scanner(X, y, kernel, xscale, C, dt, dev))
        return fit_core_set(scanner, y, rows, C=C, tol=float(self.tol), sample_size=self.sample_size,
                            n_tries=int(self.n_tries), max_iter=int(self.max_iter),
                            max_core_size=int(self.max_core_size),
                            cache_bytes=int(float(self.cache_size) * 2**20), shrinking=bool(self.shrinking),
                            rs=rs, finish_kkt=_THRESHOLD_KKT if y is None else None)

    def _prepare(self, X: Any):
        """Device, dtype, kernel, device copy of X, the normalization scales and the seconds it took."""
        t0 = time.perf_counter()
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        Xd = bk.to_device(X, dev, dt)
        kernel = self._make_kernel(Xd)
        xscale = kernel_scale(Xd, kernel, bool(self.normalize))
        return dev, dt, kernel, Xd, xscale, bk.synchronized_clock(dev) - t0

    def _store_model(self, Xd: Any, results: list[CoreSetResult], signed: bool, xscale: Any,
                     dev: bk.Device, dt: np.dtype) -> None:
        """support_ (union of SVs), support_vectors_, dual_coef_ (n_problems × n_SV), intercept_."""
        sv_sets = [r.core[r.alpha > 0] for r in results]
        support = np.unique(np.concatenate(sv_sets)) if sv_sets else np.empty(0, np.int64)
        D = np.zeros((len(results), support.shape[0]))
        for p, r in enumerate(results):
            keep = r.alpha > 0
            coef = r.alpha[keep] * (r.y[keep] if signed else 1.0)
            D[p, np.searchsorted(support, r.core[keep])] = coef
        xp = bk.get_namespace(dev)
        SV = Xd[support]
        if bk.is_sparse(SV):
            SV = SV.toarray()
        self.support_ = support
        self.support_vectors_ = xp.asarray(SV, dtype=dt)
        self.dual_coef_ = D
        self._sv_scale = None if xscale is None else np.asarray(bk.to_host(xscale), np.float64)[support]
        self.n_support_total_ = int(support.shape[0])

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
        dt = self.support_vectors_.dtype
        Xd, kind = self._validated_input(X, dt)
        xp = self._fitted_xp()
        V = self._problem_coef()
        if V.shape[0] == 0:
            return np.zeros((Xd.shape[0], V.shape[1])), kind
        D = kernel_matvec(Xd, self.support_vectors_, xp.asarray(np.ascontiguousarray(V), dtype=dt),
                          self.kernel_, dtype=dt)
        D = np.asarray(bk.to_host(D), dtype=np.float64).reshape(Xd.shape[0], -1)
        if self._sv_scale is not None:
            D *= np.asarray(bk.to_host(kernel_scale(Xd, self.kernel_, True)), np.float64)[:, None]
        return D, kind

    def _fit_rows(self, Xd: Any, yi: np.ndarray | None, kernel: Kernel, xscale: Any, dev: bk.Device,
                  dt: np.dtype, rs: np.random.RandomState, prepare_seconds: float | None = None) -> "CVMBase":
        """The core-set fits on prepared rows and the fitted attributes.

        ``Xd`` is the device array, or a distributed row source
        (:mod:`gpuksvm.scaleout.cvm`); ``yi`` the encoded labels (``classes_``
        already set), or None for the one-class task; ``prepare_seconds`` the
        time :meth:`_prepare` took (``fit_times_["prepare"]``, when given).
        """
        t_start = bk.synchronized_clock(dev)
        self.kernel_ = kernel
        order = _row_order(Xd, yi, rs)
        t_order = bk.synchronized_clock(dev)
        if yi is None:
            res = self._solve(Xd, None, order, kernel, xscale, dev, dt, rs)
            results = [res]
            self._store_model(Xd, results, False, xscale, dev, dt)
            t_solved = bk.synchronized_clock(dev)
            threshold = _outlier_threshold(res, float(self.C))
            self.intercept_ = np.array([-threshold])
            self._set_one_class_fit(threshold)
        else:
            problems = binary_problems(self.classes_.shape[0], self.multi_class)
            results = []
            for p, (ci, cj) in enumerate(problems):
                rows, yp = problem_rows(yi, ci, cj)
                ypm = np.zeros(yi.shape[0])       # ±1 on the problem's rows
                ypm[rows] = yp
                res = self._solve(Xd, ypm, order if cj is None else order[ypm[order] != 0], kernel, xscale,
                                  dev, dt, rs)
                results.append(res)
                report("CVM", f"problem {p + 1}/{len(problems)}: {res.n_iter} iterations, core set "
                       f"{res.core.shape[0]}, stop={res.stop}, gap={res.gap:.3g}, search={res.search}",
                       self.verbose)
            t_solved = bk.synchronized_clock(dev)
            self.problems_ = problems
            self._store_model(Xd, results, True, xscale, dev, dt)
            self.intercept_ = np.array([r.b for r in results])
        self._record(results)
        times = {} if prepare_seconds is None else {"prepare": float(prepare_seconds)}
        times.update(row_order=t_order - t_start, core_sets=t_solved - t_order,
                     model=bk.synchronized_clock(dev) - t_solved)
        self.fit_times_ = times
        self._set_fitted_device(dev)
        early = [(p, r) for p, r in enumerate(results) if r.stop != "converged"]
        if early:
            what = "; ".join(f"{'' if len(results) == 1 else f'problem {p}: '}stopped by {r.stop} at a "
                             f"relative duality gap of {r.gap:.3g} with {r.core.shape[0]} core vectors"
                             for p, r in early)
            # one warning; it starts with SVC's own sentence when max_iter stopped a problem
            head = (svc_max_iter_message(int(self.max_iter)) + " "
                    if any(r.stop == "max_iter" for _, r in early) else "")
            warnings.warn(f"{head}CVM did not reach tol={self.tol:g}: {what}. The model is an approximate "
                          "L2-SVM (see stop_reason_ and duality_gap_); raise max_iter / max_core_size, "
                          "or, when the core set holds most rows (noisy data keep nearly every row as a "
                          "support vector of an L2-SVM), use KernelSVC or LLSVM.",
                          ConvergenceWarning, stacklevel=3)
        return self

    def _record(self, results: list[CoreSetResult]) -> None:
        """The per-problem fitted attributes, one entry per binary problem in the order of
        ``problems_`` (one for a binary or one-class fit), as SVC's ``n_iter_``."""
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
