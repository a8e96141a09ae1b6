"""KernelSVC — the exact C-SVC (hinge loss) engine, on GPU and CPU.

The dual of every binary problem is solved by :mod:`gpuksvm.solvers.smo`:

* ``solver="libsvm"`` — scikit-learn's LIBSVM (CPU; the default there, the
  fastest CPU engine for a single problem);
* ``solver="smo"`` — our own two-variable SMO with second-order working-set
  selection (Fan, Chen & Lin 2005), a kernel-row cache of ``cache_size`` MB
  and optional shrinking (CPU);
* ``solver="working_set"`` — the batched ThunderSVM-style working-set solver:
  one CUDA thread block per problem solves its working-set subproblem, so all
  one-vs-one pairs train in the same launches (GPU; its NumPy twin on CPU);
* ``solver="auto"`` — ``working_set`` on a GPU, ``libsvm`` on the CPU.

``solver_`` records which engine ran.  Multi-class problems are one-vs-one,
with LIBSVM's conventions for ``support_``, ``support_vectors_``,
``dual_coef_``, ``intercept_`` and ``n_support_`` (so the fitted attributes can
be compared with :class:`sklearn.svm.SVC` entry by entry).  ``probability=True``
adds Platt scaling with internal 5-fold CV (:mod:`gpuksvm.calibration`).

Scaling: like every SMO solver, iteration counts grow quickly on unscaled
features (large γ·‖x‖²) — standardize X first (e.g. ``StandardScaler``).
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import check_is_fitted

from . import backend as bk
from .base import DeviceMixin
from .calibration import ProbabilityMixin
from .kernels import kernel_matvec, make_kernel
from .solvers._blas import host_busy, one_blas_thread
from .multiclass import binary_problems, ovo_votes, ovr_decision_function, problem_rows
from .solvers.smo import solve_batched
from .validation import (check_choice, check_class_weights, check_param, check_sample_weight,
                         encode_classes, validate_X_y)

__all__ = ["KernelSVC"]

SOLVERS = ("auto", "libsvm", "smo", "working_set")


class KernelSVC(DeviceMixin, ProbabilityMixin, ClassifierMixin, BaseEstimator):
    """Exact kernel C-SVC (hinge loss), one-vs-one for multi-class.

    Parameters
    ----------
    C : float, default=1.0
        Box constraint of the dual (0 ≤ αᵢ ≤ C·wᵢ).
    kernel : {"rbf", "poly", "linear", "sigmoid"} or Kernel, default="rbf"
    gamma : "scale", "auto", "mean_dist" or float, default="scale"
    degree : int, default=3
    coef0 : float, default=0.0
    tol : float, default=1e-3
        Stopping tolerance on the optimality gap m(α) − M(α) (LIBSVM's eps).
    max_iter : int, default=-1
        Cap on iterations (two-variable steps; working-set solver: outer
        rounds) per binary problem; -1 for none.
    cache_size : float, default=200
        Kernel-row cache in MB (``solver="libsvm"`` and ``"smo"``).
    shrinking : bool, default=True
        Shrinking heuristic (``"smo"``; LIBSVM always shrinks here).
    class_weight : dict, "balanced" or None
        Cᵢ = C · class_weight[yᵢ] · sample_weightᵢ.
    probability : bool, default=False
        Enable :meth:`predict_proba` (Platt scaling, 5-fold internal CV).
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        Shape of :meth:`decision_function` for more than two classes.
    solver : {"auto", "libsvm", "smo", "working_set"}, default="auto"
    device : str, default="auto"
    dtype : float32, float64 or None
        Compute dtype (default float32 on GPU, float64 on CPU).
    random_state : int, RandomState or None
        Seeds the probability cross-validation folds.
    verbose : int, default=0
        When positive, ``fit`` prints a one-line summary (solver, SVs, iterations).

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    support_ : ndarray of int64 (n_SV,)
        Indices of the support vectors in the training set, grouped by class.
    support_vectors_ : array (n_SV, n_features)
    n_support_ : ndarray of int32 (n_classes,)
    dual_coef_ : ndarray (n_classes − 1, n_SV)
        yᵢαᵢ in LIBSVM's one-vs-one layout (binary: oriented so that
        decision > 0 means ``classes_[1]``, as in scikit-learn).
    intercept_ : ndarray (n_classes·(n_classes−1)/2,)
    n_iter_ : ndarray of int (n_pairs,)
    objective_ : ndarray (n_pairs,)
        Dual objective ½αᵀQα − eᵀα of every binary problem.
    converged_ : ndarray of bool (n_pairs,)
    solver_ : str
        Engine that ran: "libsvm", "smo", "working_set-cpu" or "working_set-cuda".
    probA_, probB_ : ndarray
        Platt sigmoid parameters per pair (``probability=True``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import KernelSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = KernelSVC(C=10.0, gamma=1.0, device="cpu").fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    def __init__(self, C: float = 1.0, kernel: Any = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, tol: float = 1e-3, max_iter: int = -1, cache_size: float = 200,
                 shrinking: bool = True, class_weight: Any = None, probability: bool = False,
                 decision_function_shape: str = "ovr", solver: str = "auto", device: str = "auto",
                 dtype: Any = None, random_state: Any = None, verbose: int = 0) -> None:
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.class_weight = class_weight
        self.probability = probability
        self.decision_function_shape = decision_function_shape
        self.solver = solver
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    def _check_params(self) -> None:
        check_param("C", self.C, Real, low=0.0, closed="neither")
        check_param("tol", self.tol, Real, low=0.0, closed="neither")
        check_param("coef0", self.coef0, Real)
        check_param("degree", self.degree, Real, low=0.0)
        check_param("cache_size", self.cache_size, Real, low=0.0, closed="neither")
        check_param("max_iter", self.max_iter, Integral)
        if self.max_iter == 0 or self.max_iter < -1:
            raise ValueError(f"max_iter must be -1 or a positive integer, got {self.max_iter!r}")
        check_choice("decision_function_shape", self.decision_function_shape, ("ovr", "ovo"))
        check_choice("solver", self.solver, SOLVERS)
        check_choice("shrinking", self.shrinking, (True, False))
        check_choice("probability", self.probability, (True, False))
        if not (self.class_weight is None or self.class_weight == "balanced"
                or isinstance(self.class_weight, dict)):
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {self.class_weight!r}")

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "KernelSVC":
        """Fit the C-SVC (one-vs-one for more than two classes).

        Parameters
        ----------
        X : array-like or sparse matrix (CPU), shape (n_samples, n_features)
        y : array-like (n_samples,)
        sample_weight : array-like (n_samples,), optional
            Per-sample weights: Cᵢ = C·wᵢ.

        Returns
        -------
        self
        """
        self._check_params()
        X, y, _kind = validate_X_y(self, X, y)
        classes, yidx = encode_classes(y)
        n = X.shape[0]
        w = check_sample_weight(sample_weight, X) if sample_weight is not None else np.ones(n)
        if self.class_weight is not None:
            cw = compute_class_weight(self.class_weight, classes=classes, y=y)
            w = w * cw[yidx]
        check_class_weights(classes, yidx, w)
        weighted = not np.all(w == 1.0)
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        if not dev.is_gpu and bk.is_gpu_array(X):
            X = bk.to_host(X)  # device="cpu" asked for explicitly: compute on the host
        kern = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X)
        if dev.is_gpu:
            Xd = bk.to_device(X.toarray() if bk.is_sparse(X) and not bk.is_gpu_array(X) else X, dev, dt)
        else:
            Xd = X
        K = classes.shape[0]
        # binary: classes_[1] is the positive class (decision > 0 → classes_[1]);
        # LIBSVM's one-vs-one: in pair (i, j), i < j, class i is +1
        subsets, labels = zip(*(problem_rows(yidx, i, j) for i, j in binary_problems(K, "ovo")))
        # rows of zero weight have Cᵢ = 0: α stays 0, so they are left out
        masks = [w[S] > 0 for S in subsets]
        keep = [S[m] for S, m in zip(subsets, masks)]
        labels = [lab[m] for lab, m in zip(labels, masks)]
        results = solve_batched(Xd, labels, keep, kern, float(self.C), tol=float(self.tol),
                                max_iter=None if self.max_iter == -1 else int(self.max_iter),
                                device=dev, dtype=dt, sample_weight=w if weighted else None,
                                method=self.solver, shrinking=bool(self.shrinking),
                                cache_bytes=int(float(self.cache_size) * 2**20))
        self.kernel_ = kern
        self.classes_ = classes
        self._build_model(X, Xd, yidx, results, dev, dt)
        self.solver_ = results[0].solver
        self.n_iter_ = np.array([r.n_iter for r in results], dtype=np.int64)
        self.objective_ = np.array([r.objective for r in results])
        self.converged_ = np.array([r.converged for r in results])
        self.shape_fit_ = X.shape
        self._set_fitted_device(dev)
        if self.verbose:
            print(f"KernelSVC: solver={self.solver_}, {len(results)} binary problem(s), "
                  f"{self.support_.size} SVs, iterations={self.n_iter_.tolist()}, "
                  f"converged={bool(self.converged_.all())}")
        if self.probability:
            self._fit_probability(X, y, sample_weight=w if weighted else None)
        return self

    def _build_model(self, X, Xd, yidx, results, dev, dt) -> None:
        K = self.classes_.shape[0]
        coefs = [(np.asarray(r.support, dtype=np.int64),
                  np.asarray(bk.to_host(r.dual_coef), dtype=np.float64).ravel()) for r in results]
        union = np.unique(np.concatenate([s for s, _ in coefs])) if coefs else np.zeros(0, np.int64)
        # group by class, ascending index within a class (LIBSVM's order)
        order = np.lexsort((union, yidx[union]))
        sv = union[order]
        pos = np.empty(yidx.shape[0], dtype=np.int64)
        pos[sv] = np.arange(sv.size)
        n_sv = sv.size
        W = np.zeros((n_sv, len(results)))      # coefficient of each SV in each problem
        for p, (s, c) in enumerate(coefs):
            W[pos[s], p] = c
        dual = np.zeros((max(K - 1, 1), n_sv))
        if K == 2:
            dual[0] = W[:, 0]
        else:
            cls = yidx[sv]
            for p, (i, j) in enumerate(binary_problems(K, "ovo")):
                # LIBSVM layout: SVs of class i in row j−1, SVs of class j in row i
                mi, mj = cls == i, cls == j
                dual[j - 1, mi] = W[mi, p]
                dual[i, mj] = W[mj, p]
        self.support_ = sv
        self.n_support_ = np.bincount(yidx[sv], minlength=K).astype(np.int32)
        self.dual_coef_ = dual
        self.intercept_ = np.array([r.intercept for r in results])
        self._pair_coef = W
        if dev.is_gpu:
            self.support_vectors_ = Xd[bk.to_device(sv, dev)]
            self._pair_coef = bk.to_device(W.astype(dt), dev)
        else:
            self.support_vectors_ = X[sv]

    # ------------------------------------------------------------------ predict
    def _raw_pairs(self, X: Any) -> tuple[np.ndarray, str]:
        """Host (n, n_problems) pairwise decision values and the caller's array kind."""
        check_is_fitted(self, "support_vectors_")
        dev = self._fitted_device()
        dt = self._pair_coef.dtype if dev.is_gpu else np.dtype(np.float64)
        Xd, kind = self._validated_input(X, dt)
        n_pairs = self.intercept_.shape[0]
        if self.support_vectors_.shape[0] == 0:
            D = np.zeros((Xd.shape[0], n_pairs))
        else:
            # on a busy host BLAS worker threads only spin (gpuksvm.solvers._blas)
            with one_blas_thread(not dev.is_gpu and host_busy()):
                D = kernel_matvec(Xd, self.support_vectors_, self._pair_coef, self.kernel_, dtype=dt)
            D = np.asarray(bk.to_host(D), dtype=np.float64).reshape(Xd.shape[0], n_pairs)
        return D + np.asarray(bk.to_host(self.intercept_))[None, :], kind

    def decision_function(self, X: Any):
        """Decision values.

        Binary: (n,), positive → ``classes_[1]``.  Multi-class: (n, K) one-vs-
        rest shape (votes plus squashed confidences) or the raw (n, K(K−1)/2)
        one-vs-one values with ``decision_function_shape="ovo"`` (pair (i, j):
        positive → class i).
        """
        D, kind = self._raw_pairs(X)
        if self.classes_.shape[0] == 2:
            out = D[:, 0]
        elif self.decision_function_shape == "ovr":
            out = ovr_decision_function(D, self.classes_.shape[0])
        else:
            out = D
        return bk.as_kind(out, kind)

    def predict(self, X: Any):
        """Class labels (binary: sign of the decision; multi-class: one-vs-one voting,
        ties to the lowest class index as in LIBSVM)."""
        D, kind = self._raw_pairs(X)
        K = self.classes_.shape[0]
        if K == 2:
            idx = (D[:, 0] > 0).astype(np.int64)
        else:
            idx = np.argmax(ovo_votes(D, K), axis=1)
        return bk.as_kind(self.classes_[idx], kind)

    # ------------------------------------------------------------------ probability hooks
    def _platt_problems(self):
        K = self.classes_.shape[0]
        return ("binary" if K == 2 else "ovo"), binary_problems(K, "ovo")

    def _binary_decisions(self, X: Any) -> np.ndarray:
        return self._raw_pairs(X)[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
