"""The fitted-model surface that makes a kernel classifier a drop-in for scikit-learn's SVC.

Shared by :class:`~gpuksvm.KernelSVC`, :class:`~gpuksvm.SVI` and
:class:`~gpuksvm.CVM`.
Their fitted model is a set of binary problems p = 0 … P−1, each a kernel
expansion over the rows ``support_vectors_``::

    f_p(x) = Σ_k W[k, p] κ(sv_k, x) + intercept_[p]                               (1)

whose coefficient matrix W the estimator reads, at every call, from its public
``dual_coef_`` (:meth:`SVCSurfaceMixin._problem_coef`: LIBSVM's one-vs-one
layout for KernelSVC, one row per problem for SVI).  No other copy of the
model exists, so editing ``dual_coef_`` or ``intercept_`` after ``fit``
changes the predictions, as in scikit-learn.

:class:`SVCSurfaceMixin` gives

* ``decision_function`` and ``predict`` with SVC's rules: binary, f > 0 →
  ``classes_[1]`` and f = 0 → ``classes_[1]`` too (LIBSVM's vote on its
  internal value −f); one-vs-one, LIBSVM's vote (a pairwise 0 votes for the
  second class of the pair, the lowest class index wins a tie of votes) or,
  with ``break_ties=True``, the arg-max of the one-vs-rest shaped decision
  function (:mod:`gpuksvm.solvers.multiclass`); ``break_ties=True`` with
  ``decision_function_shape="ovo"`` is refused as in SVC;
* ties: a value computed as exactly 0 votes as in LIBSVM (above).  A tie in
  exact arithmetic that the floating-point sum leaves as rounding noise
  (±1e-18) votes by the sign of that noise, in LIBSVM as here, and that sign
  depends on the order of summation, so such votes are not reproducible
  between the two.  (Measured on mirror-symmetric training sets, test points
  on the mirror: 20–38% of those votes differ from SVC's; setting values
  within the rounding error to 0 first gave 24–37%, so it is not done.)
* ``coef_`` for a linear kernel: wᵀ_p = Σ_k W[k, p] sv_k, one row per problem,
  read-only, SciPy-sparse after a fit on sparse X (as SVC);
* the prediction input rules of SVC: sparse X after a fit on dense X is
  refused; ``kernel="precomputed"`` takes K(X_test, X_train) (columns
  ``support_`` are used); a callable kernel gets X as given (any sequence of
  samples) and the training samples ``X_fit_``, of whose columns ``support_``
  are used;
* ``_platt_problems`` / ``_binary_decisions`` for
  :class:`~gpuksvm.estimators.calibration.ProbabilityMixin`;

and the functions :func:`sparse_like` (``dual_coef_`` as CSR after a sparse
fit), :func:`warn_unconverged` (one ``ConvergenceWarning`` with SVC's message
when solvers stopped early; defined in :mod:`gpuksvm.solvers.svc_dual`, which the
solvers share) and :func:`callable_gram` (a user kernel's output,
checked).

Adopting it (e.g. CVM)
----------------------
Put ``SVCSurfaceMixin`` after ``DeviceMixin`` and before ``ProbabilityMixin``
in the bases; fit ``kernel_``, ``classes_``, ``support_``,
``support_vectors_``, ``dual_coef_`` (through :func:`sparse_like`) and
``intercept_``; implement :meth:`~SVCSurfaceMixin._problem_coef` (W of (1),
checked against the other attributes) and, if not one-vs-one with an
SVC-shaped decision function, :meth:`~SVCSurfaceMixin._multiclass_scheme` /
:meth:`~SVCSurfaceMixin._decision_shape`; call :func:`warn_unconverged` with
the solvers' ``converged`` / ``max_iter_reached`` at the end of ``fit``; drop the estimator's own
``decision_function``/``predict``.  A model whose f_p is not (1) (CVM's
normalized kernel, its ρ-scaled one-vs-rest values) overrides
:meth:`~SVCSurfaceMixin._decision_rows` (validated rows and the function from a block of them to
their values) and keeps the rest.

``predict`` and ``decision_function`` work in row blocks sized from the memory budget
(:meth:`~SVCSurfaceMixin._map_decisions`): the (n, n_problems) decision values of all rows are
never held at once, and ``decision_function`` holds nothing of the size of its output beside it.
A fold model of a cross-validated search that holds its decision values on its held-out rows
(:class:`~gpuksvm.solvers.smo.svc.HeldOutDecisions`, the host estimator's ``_held_out``) answers
rows with the same bytes from them, while its ``dual_coef_`` and ``intercept_`` are the arrays
they were computed from.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel, kernel_matvec
from gpuksvm.solvers.multiclass import (binary_predict, binary_problems, decision_block_rows, ovo_predict,
                                        ovr_decision_function)
from gpuksvm.scaleout.dispatch import dask_dispatch
from gpuksvm.array.blas_threads import host_blas_threads
from gpuksvm.array.validation import content_key
from gpuksvm.solvers.svc_dual import PRECOMPUTED, warn_unconverged

__all__ = ["SVCSurfaceMixin", "DecisionRows", "add_intercepts", "sparse_like", "warn_unconverged", "callable_gram",
           "NOT_FINITE_MESSAGE",
           "is_precomputed", "is_user_callable", "n_samples_of", "shape_of"]

#: scikit-learn's SVC message when the solution overflows (tests match it)
NOT_FINITE_MESSAGE = ("The dual coefficients or intercepts are not finite. The input data may "
                      "contain large values and need to be preprocessed.")


def is_precomputed(kernel: Any) -> bool:
    return isinstance(kernel, str) and kernel == PRECOMPUTED


def is_user_callable(kernel: Any) -> bool:
    """A Python function as kernel (a :class:`~gpuksvm.kernels.kernel.Kernel` is callable too, but not this)."""
    return callable(kernel) and not isinstance(kernel, Kernel)


def n_samples_of(X: Any) -> int:
    return int(X.shape[0]) if hasattr(X, "shape") else len(X)


def shape_of(a: Any) -> tuple:
    """The shape of an array of any kind (NumPy, CuPy, sparse) or of a nested sequence."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def sparse_like(M: np.ndarray, sparse: bool) -> Any:
    """``M`` as a CSR matrix when the model was fitted on sparse X (SVC's convention), else as is."""
    return sp.csr_matrix(M) if sparse else M


def callable_gram(kernel: Any, A: Any, B: Any) -> np.ndarray:
    """K(A, B) of a user kernel function, as a checked host float64 (len(A), len(B)) array."""
    K = kernel(A, B)
    if sp.issparse(K) or bk.is_sparse(K):
        K = bk.to_host(K).toarray()
    K = np.asarray(bk.to_host(K), dtype=np.float64)
    expected = (n_samples_of(A), n_samples_of(B))
    if K.shape != expected:
        raise ValueError(f"the kernel function returned an array of shape {K.shape}; expected "
                         f"{expected} (rows of its first argument × rows of its second)")
    if not np.isfinite(K).all():
        raise ValueError("the kernel function returned NaN or infinity")
    return K


class DecisionRows(NamedTuple):
    """Prediction input ready for the decision values of :meth:`SVCSurfaceMixin._decision_rows`.

    ``rows``: validated rows (on the fitted device, in the compute dtype), or X as given for a
    kernel function; ``kind``: the caller's array kind; ``values``: rows (all or a block of
    them) → (b, n_problems) host float64 decision values; ``sliceable``: whether ``values`` may
    be given row blocks ``rows[s:e]`` (not the sequence a kernel function gets whole).
    """

    rows: Any
    kind: str
    values: Callable[[Any], np.ndarray]
    sliceable: bool = True


def add_intercepts(raw: Any, b: np.ndarray) -> np.ndarray:
    """Host float64 ``raw + b[None, :]`` of (n, P) device values, with no copy beyond the one
    to the host and float64 (a host float64 ``raw`` gets ``b`` added in place: callers pass
    their own temporary)."""
    D = np.asarray(bk.to_host(raw), dtype=np.float64)
    D += b[None, :]
    return D


def _same(D: np.ndarray) -> np.ndarray:
    return D


class SVCSurfaceMixin:
    """decision_function, predict, coef_ and the input rules of scikit-learn's SVC.

    See the module docstring for what the host estimator provides.
    """

    # ------------------------------------------------------------------ hooks
    def _problem_coef(self) -> Any:
        """W of eq. (1), (n_SV, n_problems), on any device; checked against the model."""
        raise NotImplementedError

    def _multiclass_scheme(self) -> str:
        """``"ovo"`` or ``"ovr"``: what the binary problems are for more than two classes."""
        return "ovo"

    def _decision_shape(self) -> str:
        """Shape of ``decision_function`` for one-vs-one problems: ``"ovr"`` or ``"ovo"``."""
        return getattr(self, "decision_function_shape", "ovr")

    # ------------------------------------------------------------------ model
    def _fitted_sparse(self) -> bool:
        return sp.issparse(self.dual_coef_)

    def _compute_dtype(self) -> np.dtype:
        dt = getattr(self.support_vectors_, "dtype", None)
        return np.dtype(dt) if dt is not None and np.dtype(dt).kind == "f" else np.dtype(np.float64)

    def _decision_rows(self, X: Any) -> DecisionRows:
        """X validated for the decision values of eq. (1), and the function from a block of those
        rows to their (b, n_problems) host float64 values f_p(x) (the model read once)."""
        check_is_fitted(self, "dual_coef_")
        kern = self.kernel_
        b = np.asarray(bk.to_host(self.intercept_), dtype=np.float64).ravel()
        W = self._problem_coef()
        n_sv, P = W.shape
        if is_user_callable(kern):
            # test × train, as SVC evaluates a kernel function (then the columns support_); X is
            # any sequence of samples, passed whole to the function
            Wh = np.asarray(bk.to_host(W), dtype=np.float64)
            return DecisionRows(X, bk.array_kind(X), lambda rows: add_intercepts(
                callable_gram(kern, rows, self.X_fit_)[:, self.support_] @ Wh, b), sliceable=False)
        dev = self._fitted_device()
        dt = self._compute_dtype()
        Xd, kind = self._validated_input(X, dt, refuse_sparse=not self._fitted_sparse())
        Wd = bk.to_device(W, dev, dt)

        def values(rows: Any) -> np.ndarray:
            n = rows.shape[0]
            if is_precomputed(kern):
                raw = rows[:, bk.device_index(rows, self.support_)] @ Wd
            elif n_sv == 0:
                return np.broadcast_to(b, (n, P)).copy()
            else:
                raw = kernel_matvec(rows, self.support_vectors_, Wd, kern, dtype=dt)
            return add_intercepts(raw.reshape(n, P), b)

        return DecisionRows(Xd, kind, values)

    def _problem_decisions(self, X: Any) -> tuple[np.ndarray, str]:
        """(n, n_problems) host float64 values f_p(x) of eq. (1) and the caller's array kind."""
        rows = self._decision_rows(X)
        with host_blas_threads(self._fitted_device()):
            return rows.values(rows.rows), rows.kind

    def _kept_decisions(self, rows: Any) -> np.ndarray | None:
        """The (n, n_problems) decision values the solver computed for rows with these contents
        (:class:`~gpuksvm.solvers.smo.svc.HeldOutDecisions`: a cross-validated search's held-out
        fold, rows the search validated), while ``dual_coef_`` and ``intercept_`` are still the
        arrays they were computed from; else None."""
        kept = self.__dict__.get("_held_out")
        if kept is None:
            return None
        held, dual, b = kept
        if self.dual_coef_ is not dual or self.intercept_ is not b or held.key is None:
            return None
        return held.values if content_key(rows) == held.key else None

    def _map_decisions(self, X: Any, width: int, dtype: Any, fn: Callable[[np.ndarray], np.ndarray], *,
                       work: int = 0) -> tuple[np.ndarray, str]:
        """``fn`` of the decision values of the rows of X, in row blocks: (n, width) (``width``
        0: (n,)) host results of ``dtype``, and the caller's array kind (``work``: float64
        values of ``fn``'s work arrays per row beyond those of the vote).

        The (n, n_problems) decision values of all rows are never held at once (one-vs-one on 10
        classes: 45 float64 per row, 360 MB for a million rows): blocks of rows are sized so that
        their decision values and ``fn``'s work arrays take a quarter of the host budget
        (:func:`~gpuksvm.solvers.multiclass.decision_block_rows`), which leaves the kernel
        blocks of :func:`~gpuksvm.kernels.kernel.kernel_matvec` within each block half of the
        rest.  A kernel function's Gram matrix (``kernel`` callable) is computed for all rows
        at once, as the function is given X whole.
        """
        kept = self._kept_decisions(X)
        if kept is not None:    # the bytes of rows the search validated: no second validation
            return np.asarray(fn(kept.copy()), dtype=dtype), bk.array_kind(X)
        rows = self._decision_rows(X)
        n = n_samples_of(rows.rows)
        P = len(self._platt_problems()[1])
        out = np.empty((n, width) if width else (n,), dtype=dtype)
        dev = self._fitted_device()

        def run(s: int, e: int) -> None:
            block = rows.rows if (s, e) == (0, n) else rows.rows[s:e]
            out[s:e] = fn(rows.values(block))

        step = (decision_block_rows(n, P, len(self.classes_), width=width, work=work, device=dev,
                                    itemsize=self._compute_dtype().itemsize) if rows.sliceable else n)
        # on a busy host BLAS worker threads only spin (gpuksvm.array.blas_threads)
        with host_blas_threads(dev):
            bk.map_row_blocks(run, n, max(step, 1), what="decision values")
        return out, rows.kind

    # ------------------------------------------------------------------ public surface
    def _check_break_ties(self) -> None:
        if getattr(self, "break_ties", False) and self._decision_shape() == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")

    @dask_dispatch()
    def decision_function(self, X: Any):
        """Decision values.

        Binary: (n,), positive → ``classes_[1]``.  More classes, one-vs-one:
        (n, n_classes) one-vs-rest shaped scores (votes plus squashed summed
        confidences, :func:`~gpuksvm.solvers.multiclass.ovr_decision_function`) or,
        with ``decision_function_shape="ovo"``, the (n, K(K−1)/2) pairwise
        values (pair (i, j): positive → class i); one-vs-rest problems: the
        (n, n_classes) values of each class's machine.
        """
        check_is_fitted(self)
        K = len(self.classes_)
        if K == 2:
            out, kind = self._map_decisions(X, 0, np.float64, lambda D: D[:, 0])
        elif self._multiclass_scheme() == "ovr" or self._decision_shape() == "ovo":
            out, kind = self._map_decisions(X, len(self._platt_problems()[1]), np.float64, _same)
        else:
            out, kind = self._map_decisions(X, K, np.float64, lambda D: ovr_decision_function(D, K))
        return bk.as_kind(out, kind)

    @dask_dispatch()
    def predict(self, X: Any):
        """Class labels: LIBSVM's vote, or with ``break_ties=True`` the arg-max of
        ``decision_function`` (more than two classes, one-vs-one)."""
        check_is_fitted(self)
        self._check_break_ties()
        K = len(self.classes_)
        if K == 2:
            vote = lambda D: binary_predict(D[:, 0])     # noqa: E731
        elif self._multiclass_scheme() == "ovr":
            vote = lambda D: np.argmax(D, axis=1)        # noqa: E731
        else:
            ties = bool(getattr(self, "break_ties", False))
            vote = lambda D: ovo_predict(D, K, break_ties=ties)   # noqa: E731
        idx, kind = self._map_decisions(X, 0, np.int64, vote)
        return bk.labels_as_kind(self.classes_[idx], kind)

    @property
    def coef_(self):
        """Primal weights of a linear kernel: row p is wᵀ_p = Σ_k W[k, p] sv_k.

        (n_problems, n_features), in the order of ``intercept_``, so that
        ``X @ coef_.T + intercept_`` are the one-vs-one (binary: the)
        decision values.  Read-only (derived from ``dual_coef_`` and
        ``support_vectors_``); SciPy-sparse after a fit on sparse X; on the
        fitted device.  Other kernels: ``AttributeError``.
        """
        check_is_fitted(self, "dual_coef_")
        if not (isinstance(self.kernel_, Kernel) and self.kernel_.name == "linear"):
            raise AttributeError("coef_ is only available when using a linear kernel")
        W = self._problem_coef()
        SV = self.support_vectors_
        if sp.issparse(SV):
            coef = sp.csr_matrix(np.asarray(bk.to_host(W), dtype=np.float64).T) @ SV
        else:
            xp = bk.namespace_of(SV)
            coef = xp.asarray(W, dtype=SV.dtype).T @ SV
            if self._fitted_sparse():
                coef = sp.csr_matrix(bk.to_host(coef))
        if sp.issparse(coef):
            coef = sp.csr_matrix(coef)
            coef.data.flags.writeable = False
        elif isinstance(coef, np.ndarray):
            coef.flags.writeable = False
        return coef

    # ------------------------------------------------------------------ probability hooks
    def _platt_problems(self) -> tuple[str, list[tuple[int, int | None]]]:
        K = len(self.classes_)
        scheme = self._multiclass_scheme()
        return ("binary" if K == 2 else scheme), binary_problems(K, scheme)

    def _binary_decisions(self, X: Any) -> np.ndarray:
        return self._problem_decisions(X)[0]
