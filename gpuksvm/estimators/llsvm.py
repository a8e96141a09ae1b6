"""LLSVM and LLSVM2: low-rank linearized kernel SVMs (SPEC §1).

Papers: Zhang, Lan, Wang, Moerchen, "Scaling up kernel SVM on limited
resources: a low-rank linearization approach" (AISTATS 2012) and Lan, Wang,
Zhe, Cheng, Wang, Zhang, "Scaling up kernel SVM on limited resources: a
low-rank linearization approach" (IEEE TNNLS 2018).

Proposition 1 (AISTATS eq. 2–7): a kernel SVM equals a linear SVM on any
factor F with F Fᵀ = K.  The Nyström factor of rank k (TNNLS eq. 10–12) is

    K_zz = U Λ Uᵀ,    M = U Λ^{-1/2}  (k × k),    F = K(X, Z) M  (n × k),

so LLSVM (Algorithm 1) is: pick landmarks Z (k-means centres), build M, train a
linear SVM on F (our :class:`~gpuksvm.estimators.linear_svm.LinearSVM`: dual coordinate
descent or primal Newton; out of core the same Newton solver over streamed
kernel blocks, or SBM for the hinge loss), predict wᵀ(K(x, Z) M) + b.

Out of core (``fit`` on a :class:`~gpuksvm.data.blocks.BlockSource` or a file):
one pass draws the random sample (landmarks, map), then every Newton pass
streams the kernel rows K(X_b, Z) and accumulates only (k+1) × (k+1)
statistics per problem, with M applied to those statistics rather than to the
rows (the n·k² product F = K M is never formed), in float64 (M amplifies the
round-off of the K-space sums by 1/λ_min).  Warm-started on the sample, it
converges to the in-memory solution in a few passes (SBM's passes do not).

Proposition 2 (TNNLS eq. 24–25): the same linear SVM solves the reduced SVM
min ½μᵀK_zzμ + ½b² + CΣξ exactly, with μ = M β.  The fitted ``dual_coef_`` is
μ, and :meth:`LLSVM.decision_function` predicts Σⱼ μⱼ κ(x, zⱼ) + b, which costs
O(kd) per row instead of the O(kd + k²) of the linearized form.

LLSVM2 (TNNLS §IV, eq. 17–23, Algorithm 2) replaces the spectrum Λ⁻¹ by
μ* = max(0, μ₀ − c/(2λ)), with μ₀ = diag(Λ⁻¹),
c = diag(Uᵀ K_Lzᵀ 𝓛 K_Lz U) from a labelled subset L, and 𝓛 = D − A the
Laplacian of A_ij = 1 (same class) / −a (different classes); the map becomes
M' = U diag(μ*)^{1/2}.

**a = 1 by default — the paper's "𝓛 = D − yyᵀ in our case" (§IV).**  With
a = 1 and balanced labels the degree matrix D = diag(yᵢ Σⱼ yⱼ) nearly vanishes
and cⱼ ≈ −(yᵀK_Lz uⱼ)² ≤ 0: eq. (23) *raises* the weight of the eigen-
directions aligned with the labels.  With a small a (e.g. SPEC §1's 0.2)
within-class pairs dominate, cⱼ > 0 and grows like |L|²·λⱼ², so at λ = 1 the
update zeroes the *leading* directions and keeps the noisy small-eigenvalue
ones (μ₀ = 1/λⱼ is largest there).  On an easy 2-D Gaussian problem
(2,000 rows, y = [x₁ + x₂ > 0]; ``tests/test_llsvm.py::
test_supervised_spectrum_on_an_easy_gaussian_problem``) a = 0.2 gives 65.7 % test
accuracy at k = 100 and 47.7 % at k = 10 (3-D, one direction left) while the
Nyström spectrum gives 99.7 % / 99.2 %; a = 1 gives 99.9 % / 99.3 % (2-D, 3-D, k = 10 and 100 all
≥ 99.3 %; 10-D k = 100: 94.2 % vs Nyström 97.9 % at λ = 1, 97.7 % at λ = 1e3).

Conventions (documented choices)
--------------------------------
* The bias is regularized (F augmented with a constant column, as LIBLINEAR
  and as the ½b² of the RSVM problem (24)); the paper's Proposition 1 is
  stated with an unregularized bias.  With ``intercept_scaling = 1`` the
  linearized SVM is exactly the kernel SVM with kernel κ + 1 and no bias.
* Eigenvalues below ``eig_floor · λ_max`` are replaced by that floor (paper:
  "replace diminishing eigenvalues with a small constant").  K_zz and its
  eigendecomposition are computed in float64 for every dtype (k × k: cheap);
  a float32 map is the float64 one rounded.  In float32 the floor is raised
  to eps(float32)·λ_max ≈ 1.2e-7·λ_max: F = K(X, Z) M computed in float32
  carries a round-off of about eps·‖K_x‖/√λ_j in column j, which swamps
  the columns of smaller eigenvalues (measured on the 100K noisy
  checkerboard, k = 1000, float32 F: floor 1e-10 → 96.9 %, 1e-8 → 98.29 %,
  1.2e-7 → 98.34 %, 1.2e-6 → 98.25 %; float64 98.32 %).
* The default ``dtype`` is float32 on the CPU as well as on a GPU (unlike the
  library-wide ``dtype=None`` convention, which ``dtype=None`` still selects):
  the map is a rank-k approximation, and float32 halves the time and memory of
  the n × k feature matrix and of the linear SVM on it.  ``dtype="float64"``
  is the reference (the tests of Propositions 1 and 2 use it).
* k-means runs on ``kmeans_sample`` rows drawn uniformly at random
  (``random_state``), not on the first rows as the paper does ("using the
  first 20,000 data points"): LIBSVM files are often sorted by label, and on
  ijcnn1 sorted by label the first rows (one class) cost k=500 2.7 points
  (98.23 % → 95.56 %).  The rows are drawn by a seeded hash of their contents
  (:mod:`gpuksvm.solvers.row_order`: the rows of smallest hash), so the same
  rows in any order give the same sample and the same landmarks (ijcnn1,
  k=500: 97.96 % in file order, sorted by label and shuffled); the sample is
  the same in memory, out of core (a :class:`~gpuksvm.solvers.nystrom.kmeans.RowReservoir`,
  one pass over the blocks) and on Dask; LLSVM2's labelled subset and random
  landmarks come from it too.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.base import ClassNamePrefixFeaturesOutMixin, clone
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin, fit_context
from gpuksvm.data.blocks import is_block_input
from gpuksvm.estimators.calibration import fold_order_rows, probability_enabled
from gpuksvm.kernels.kernel import Kernel, kernel_matvec
from gpuksvm.estimators.linear_svm import LinearSVM
from gpuksvm.solvers.linear.svm import LinearSVMResult
from gpuksvm.solvers.linear.newton_memory import NewtonPath
from gpuksvm.solvers.nystrom.maps import (
    MapParams,
    NystromMap,
    feature_map,
    kernel_block_rows,
    nystrom_maps,
    spectrum_objective,
    supervised_spectrum,
)
from gpuksvm.solvers.nystrom.llsvm import (
    ArrayRows,
    BlockRows,
    LinearSpec,
    LLSVMResult,
    LLSVMRows,
    fit_llsvm_path,
    fit_llsvm_solution,
)
from gpuksvm.estimators.params import (
    CLASS_WEIGHT,
    DEPRECATED,
    DEVICE_PARAMS,
    KERNEL_PARAMS,
    count,
    deprecated,
    grid_values,
    non_negative,
    positive,
)
from gpuksvm.scaleout.dispatch import dask_dispatch
from gpuksvm.scaleout.llsvm import fit_llsvm
from gpuksvm.array.validation import (
    check_sample_weight,
    encode_classes,
    validate_X_y,
)

__all__ = ["LLSVM", "NystromMap", "nystrom_maps", "supervised_spectrum", "spectrum_objective",
           "fit_llsvm_grid"]


# --------------------------------------------------------------------------- estimator
class LLSVM(DeviceMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClassifierMixin,
            BaseEstimator):
    """Low-rank linearized kernel SVM (LLSVM) and its supervised-spectrum variant (LLSVM2).

    A classifier and a transformer: :meth:`transform` returns the rank-k
    empirical kernel map F = K(X, Z) M (like scikit-learn's ``Nystroem``), and
    the classifier is a linear SVM on F (SPEC §1).

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear"} or Kernel, default="rbf"
    gamma : float or {"scale", "auto", "mean_dist"}, default="scale"
    degree : int, default=3
        Polynomial kernel (γ xᵀz + c₀)^p.
    coef0 : float, default=0.0
        c₀ above (scikit-learn's default; set it for a polynomial kernel).
    n_landmarks : int, default=1000
        k (clipped to the number of training rows, with a warning).
    landmarks : {"kmeans", "random"} or array of shape (k, n_features), default="kmeans"
    kmeans_iter : int, default=5
        Lloyd iterations ("a few", paper).
    kmeans_init : {"k-means++", "random"}, default="k-means++"
    kmeans_sample : int or None, default=20000
        k-means runs on ``max(kmeans_sample, n_landmarks)`` rows drawn at
        random by their contents (``random_state``; the same rows in any row
        order; the paper's 20,000, which it takes from the front of the file);
        None: all rows (out of core: 20,000).
    eig_floor : float, default=1e-10
        Relative eigenvalue floor of K_zz.
    C : float, default=1.0
        SVM cost.
    loss : {"squared_hinge", "hinge"}, default="squared_hinge"
    solver : str, default="auto"
        Passed to :class:`~gpuksvm.estimators.linear_svm.LinearSVM` ("auto" picks).
    spectrum : {"nystrom", "supervised"}, default="nystrom"
        "supervised" is LLSVM2 (eq. 23).
    n_labeled : int, default=100
        Size of the labelled subset L of LLSVM2 (random rows of the k-means
        sample, which then holds at least ``n_labeled`` rows).
    spectrum_reg : float, default=1.0
        λ of LLSVM2 (eq. 18–23), exactly as in eq. (23) (not rescaled).  Its
        useful range depends on the kernel, k and ``n_labeled`` (c grows like
        |L|²·λⱼ², so small λ zeroes the leading directions first; λ → ∞ gives
        back LLSVM); the paper selects it from 1e-5 … 1e5 on validation data —
        do the same (``fit_llsvm_grid`` makes that cheap).
    dissimilar_pair_weight : float, default=1.0
        The weight −a of different-class pairs in LLSVM2's affinity A
        (eq. 17); 1 is the paper's 𝓛 = D − yyᵀ (see the module docstring for
        why smaller values fail).
    class_weight : dict, "balanced" or None, default=None
    tol : float, default=1e-4
        Linear SVM stopping tolerance.
    max_iter : int, default=1000
        Linear SVM iteration cap.
    block_size : int or None, default=None
        Rows per block for out-of-core input; read size of a file.
    probability : bool, default=False
        Platt scaling (``predict_proba``) via the linear SVM.
    device : {"auto", "cpu", "gpu", "cuda:N"}, default="auto"
    dtype : {"float32", "float64"} or None, default="float32"
        Precision of the landmarks, the map, F and the linear SVM, on both
        devices (None: the library's convention, float32 on a GPU and float64
        on the CPU).  float32 is the default on the CPU too: the rank-k map is
        an approximation whose error dwarfs float32 round-off, and float32
        halves the time and memory of F = K(X, Z) M and of the linear SVM
        (ijcnn1, k = 1000, 2 cores: the same test accuracy either way, fit
        about 1.7× faster; 800K noisy checkerboard, k = 1000: 99.02 % vs
        99.08 % in float64, ``bench/llsvm.py --scale paper``).  The only
        modelling difference is the raised eigenvalue floor (module
        docstring), which can matter for very smooth kernels (small γ) at
        large C; use "float64" there, and as the reference.
    random_state : int, RandomState or None, default=None
    verbose : int, default=0
    a : float, default="deprecated"
        Deprecated alias of ``dissimilar_pair_weight`` (a ``FutureWarning``).

    Attributes
    ----------
    classes_ : ndarray of labels
    landmarks_ : (k, n_features) landmarks Z
    eigvals_ : (k,) eigenvalues of K_zz after the floor (ascending)
    spectrum_ : (k,) weights s of M = U diag(s)^{1/2} (1/eigvals_, or μ* for LLSVM2)
    map_ : (k, k) the map M
    coef_ : (n_outputs, k) linear SVM weights β on F
    intercept_ : (n_outputs,)
    dual_coef_ : (n_outputs, k) μ = M β, the RSVM coefficients over the landmarks
        (Proposition 2): decision = K(X, Z) μᵀ + b
    svm_ : the fitted LinearSVM
    n_iter_ : iterations of the linear SVM solver (``svm_.n_iter_``)
    kernel_ : the resolved Kernel
    n_landmarks_ : int
    n_features_in_ : int
    fit_times_ : dict of seconds per stage (landmarks, map, features, svm)
    memory_fallback_ : str or None
        ``"streamed_features"`` when F and the Newton solver's scratch (2·n·k
        values) did not fit ``set_config(cpu_memory_budget=...)`` (or the
        GPU's): the kernel blocks were recomputed in every Newton pass, as out
        of core, to the same solution (one ``MemoryFallbackWarning``); None
        otherwise.  Only the squared hinge without ``sample_weight`` streams; the
        others keep F in memory (with a ``UserWarning``).

    Examples
    --------
    >>> from gpuksvm import LLSVM
    >>> from gpuksvm.datasets import make_checkerboard
    >>> X, y = make_checkerboard(500, random_state=0)
    >>> clf = LLSVM(gamma=30.0, C=10.0, n_landmarks=100, device="cpu", random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    >>> clf.transform(X[:5]).shape
    (5, 100)
    """

    _parameter_constraints: dict = {
        **KERNEL_PARAMS,
        "kernel": [StrOptions({"rbf", "poly", "linear"}), Kernel],
        "n_landmarks": [count(1)],
        "landmarks": [StrOptions({"kmeans", "random"}), "array-like"],
        "kmeans_iter": [count(0)],
        "kmeans_init": [StrOptions({"k-means++", "random"})],
        "kmeans_sample": [None, count(1)],
        "eig_floor": [non_negative()],
        "C": [positive()],
        "loss": [StrOptions({"squared_hinge", "hinge"})],
        "solver": LinearSVM._parameter_constraints["solver"],
        "spectrum": [StrOptions({"nystrom", "supervised"})],
        "n_labeled": [count(2)],
        "spectrum_reg": [positive()],
        "dissimilar_pair_weight": [non_negative()],
        "a": deprecated([non_negative()]),
        "class_weight": CLASS_WEIGHT,
        "tol": [positive()],
        "max_iter": [count(1)],
        "block_size": [None, count(1)],
        "probability": ["boolean"],
        **DEVICE_PARAMS,
    }
    _renamed_parameters = {"a": "dissimilar_pair_weight"}

    def __init__(self, kernel: Any = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, n_landmarks: int = 1000, landmarks: Any = "kmeans",
                 kmeans_iter: int = 5, kmeans_init: str = "k-means++",
                 kmeans_sample: int | None = 20000, eig_floor: float = 1e-10, C: float = 1.0,
                 loss: str = "squared_hinge", solver: str = "auto", spectrum: str = "nystrom",
                 n_labeled: int = 100, spectrum_reg: float = 1.0,
                 dissimilar_pair_weight: float = 1.0,
                 class_weight: Any = None, tol: float = 1e-4, max_iter: int = 1000,
                 block_size: int | None = None, probability: bool = False,
                 device: str = "auto", dtype: Any = "float32", random_state: Any = None,
                 verbose: int = 0, a: Any = DEPRECATED):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.kmeans_iter = kmeans_iter
        self.kmeans_init = kmeans_init
        self.kmeans_sample = kmeans_sample
        self.eig_floor = eig_floor
        self.C = C
        self.loss = loss
        self.solver = solver
        self.spectrum = spectrum
        self.n_labeled = n_labeled
        self.spectrum_reg = spectrum_reg
        self.dissimilar_pair_weight = dissimilar_pair_weight
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.probability = probability
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.a = a

    # ------------------------------------------------------------------ params
    def _check_param_relations(self) -> None:
        if isinstance(self.kernel, Kernel) and not self.kernel.is_psd:
            raise ValueError(f"kernel must be 'rbf', 'poly', 'linear' or a PSD Kernel, got {self.kernel!r}")

    def _linear_svm(self, C: float | None = None):
        return LinearSVM(C=self.C if C is None else C, loss=self.loss, solver=self.solver,
                         fit_intercept=True, intercept_scaling=1.0, class_weight=self.class_weight,
                         tol=self.tol, max_iter=self.max_iter, block_size=self.block_size,
                         probability=self.probability, device=self.device, dtype=self.dtype,
                         random_state=self.random_state, verbose=self.verbose)

    # ------------------------------------------------------------------ pieces
    def _map_params(self) -> MapParams:
        """The parameters of the map, as :func:`gpuksvm.solvers.nystrom.maps.build_map` takes them."""
        return MapParams(n_landmarks=int(self.n_landmarks), landmarks=self.landmarks,
                         kmeans_iter=int(self.kmeans_iter), kmeans_init=self.kmeans_init,
                         kmeans_sample=None if self.kmeans_sample is None else int(self.kmeans_sample),
                         eig_floor=float(self.eig_floor), spectrum=self.spectrum,
                         n_labeled=int(self.n_labeled), spectrum_reg=float(self.spectrum_reg),
                         dissimilar_pair_weight=float(self._param("dissimilar_pair_weight")))

    def _kernel_for(self, X: Any) -> Kernel:
        return self._resolved_kernel(X)

    def _linear_spec(self) -> LinearSpec:
        """The linear SVM on F, as the solver and the row sources take it (intercept: a regularized
        constant column of 1, as :meth:`_linear_svm`)."""
        return LinearSpec(C=float(self.C), loss=self.loss, class_weight=self.class_weight, tol=float(self.tol),
                          max_iter=int(self.max_iter), intercept_scaling=1.0, probability=bool(self.probability))

    def _store(self, result: LLSVMResult) -> "LLSVM":
        """The fitted state (the one writer of every fit path)."""
        self.__dict__.pop("_kernel_rows", None)    # kernel blocks of the previous landmarks
        self.kernel_ = result.kernel
        self.landmarks_ = result.landmarks
        self.n_landmarks_ = int(result.landmarks.shape[0])
        self.eigvals_ = result.eigvals
        self.spectrum_ = result.spectrum
        self.map_ = result.map
        self.svm_ = result.linear_model
        self.classes_ = np.asarray(result.classes)
        self.coef_ = result.coef
        self.intercept_ = result.intercept
        self.dual_coef_ = result.dual_coef
        self.n_iter_ = result.n_iter
        self.n_features_in_ = int(result.n_features)
        self._n_features_out = self.n_landmarks_
        self.fit_times_ = dict(result.fit_times)
        self.memory_fallback_ = "streamed_features" if result.streamed else None
        if "dask" in result.diagnostics:
            self.dask_info_ = dict(result.diagnostics["dask"])
        self._set_fitted_device(result.device)
        return self

    # ------------------------------------------------------------------ fit
    @fit_context(distributed=fit_llsvm)
    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> "LLSVM":
        """Fit on arrays, or out of core on a block source / SVMlight file path.

        Parameters
        ----------
        X : array-like, sparse matrix, ``gpuksvm.data.blocks.BlockSource``, path, callable or
            ``gpuksvm.solvers.nystrom.llsvm.LLSVMRows``
            A block source (or an SVMlight path read ``block_size`` rows at a
            time, default 5,000, or a callable returning an iterator of
            ``(X_block, y_block)``) is trained out of core: landmarks from a
            random sample drawn in one pass, then Newton over the streamed
            kernel blocks (squared hinge) or SBM (hinge)
            (:class:`~gpuksvm.solvers.nystrom.llsvm.BlockRows`).  A row source
            (``LLSVMRows``, e.g. the Dask rows of :func:`gpuksvm.scaleout.llsvm.fit_llsvm`)
            is trained as it provides the rows.
        y : array-like of labels (``None`` for a block source or a row source)
        sample_weight : array-like, optional (arrays only)
        """
        rows = self._rows(X, y, sample_weight)
        dev = self._device()
        # Platt's folds are cut in the order of the input rows' contents, not of the features':
        # F's float32 rounding can depend on a row's place in a GEMM block (OpenBLAS's Haswell
        # kernels), and the folds cut by F then moved the probabilities of 600 checkerboard rows
        # by up to 0.016 between row orders, as much as folds cut in the given order (0.022)
        order_rows = rows.X if self.probability and isinstance(rows, ArrayRows) else None
        result = fit_llsvm_solution(rows, kernel=self._kernel_for, params=self._map_params(),
                                    spec=self._linear_spec(), linear=_LinearSVMStage(self, order_rows=order_rows),
                                    device=dev,
                                    dtype=bk.resolve_dtype(self.dtype, dev), random_state=self.random_state)
        return self._store(result)

    def _rows(self, X: Any, y: Any, sample_weight: Any) -> LLSVMRows:
        """Where the rows come from: a given row source, blocks read one at a time, or arrays."""
        if isinstance(X, LLSVMRows):
            if y is not None or sample_weight is not None:
                raise ValueError("a row source (LLSVMRows) carries its own labels and sample weights")
            if hasattr(self, "feature_names_in_"):     # a row source has no column names
                del self.feature_names_in_
            return X
        if is_block_input(X):
            if sample_weight is not None:
                raise ValueError("sample_weight is not supported with out-of-core (block source) input")
            return BlockRows(X, y, block_size=int(self.block_size or 5000),
                             validate=lambda Xs, ys: validate_X_y(self, Xs, ys)[:2])
        X, y, _ = validate_X_y(self, X, y)
        encode_classes(y)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, X)
        return ArrayRows(X, y, sw)

    # ------------------------------------------------------------------ predict
    def _prepare(self, X: Any) -> tuple[Any, str]:
        check_is_fitted(self, "dual_coef_")
        return self._validated_input(X, np.dtype(self.map_.dtype), keep_sparse=False)

    def _kept_blocks(self, Xd: Any, rows: int) -> dict | None:
        """The kernel blocks K(Xd, Z) the models of one (fold, γ) of :func:`fit_llsvm_grid` share,
        or None (any other model, or rows of more than one block)."""
        memo = self.__dict__.get("_kernel_rows")
        return None if memo is None or Xd.shape[0] > rows else memo.blocks(Xd, self.landmarks_, self)

    @dask_dispatch()
    def transform(self, X: Any) -> Any:
        """The empirical kernel map F = K(X, Z) M, shape (n, k)."""
        Xd, kind = self._prepare(X)
        rows = kernel_block_rows(Xd.shape[0], self.landmarks_, Xd.shape[1], self.map_.dtype, self._fitted_device())
        F = feature_map(Xd, self.landmarks_, self.map_, self.kernel_, block_rows=rows,
                        blocks=self._kept_blocks(Xd, rows))
        return bk.as_kind(F, kind)

    @dask_dispatch()
    def decision_function(self, X: Any) -> Any:
        """Σⱼ μⱼ κ(x, zⱼ) + b (RSVM form, Proposition 2; equal to wᵀ(K(x,Z)M) + b).

        Returns (n,) for two classes, (n, n_classes) for more (one-vs-rest).
        """
        Xd, kind = self._prepare(X)
        rows = kernel_block_rows(Xd.shape[0], self.landmarks_, Xd.shape[1], self.map_.dtype,
                                 self._fitted_device())
        D = kernel_matvec(Xd, self.landmarks_, self.dual_coef_.T, self.kernel_, block_rows=rows,
                          blocks=self._kept_blocks(Xd, rows))
        D = D.reshape(Xd.shape[0], -1) + self.intercept_[None, :]
        if D.shape[1] == 1:
            D = D[:, 0]
        return bk.as_kind(D, kind)

    @dask_dispatch()
    def predict(self, X: Any) -> Any:
        """Class labels, in the caller's kind of array (:func:`gpuksvm.array.backend.labels_as_kind`)."""
        D = bk.to_host(self.decision_function(X))
        idx = (D > 0).astype(np.int64) if D.ndim == 1 else np.argmax(D, axis=1)
        return bk.labels_as_kind(self.classes_[idx], bk.array_kind(X))

    @available_if(probability_enabled)
    @dask_dispatch()
    def predict_proba(self, X: Any) -> Any:
        """Platt-scaled class probabilities (the linear SVM's, on F = K(X, Z) M).

        The sigmoids are fitted by ``svm_`` on 5-fold out-of-fold decision
        values of the linear SVM on the fixed map (:mod:`gpuksvm.estimators.calibration`).
        """
        return self._linear_in_blocks(X, self.svm_.predict_proba)

    @available_if(probability_enabled)
    @dask_dispatch()
    def predict_log_proba(self, X: Any) -> Any:
        """Logarithm of :meth:`predict_proba`."""
        return self._linear_in_blocks(X, self.svm_.predict_log_proba)

    def _linear_in_blocks(self, X: Any, method: Any) -> Any:
        """``method`` of the linear SVM on F = K(X, Z) M, one budget-sized row block of F at a time
        (:func:`~gpuksvm.solvers.nystrom.maps.kernel_block_rows`): F of all rows is never held."""
        Xd, kind = self._prepare(X)
        n = Xd.shape[0]
        rows = kernel_block_rows(n, self.landmarks_, Xd.shape[1], self.map_.dtype, self._fitted_device())
        if n <= rows:       # one block: the kept kernel blocks apply
            parts = [bk.to_host(method(feature_map(Xd, self.landmarks_, self.map_, self.kernel_, block_rows=rows,
                                                   blocks=self._kept_blocks(Xd, rows))))]
        else:
            parts = [bk.to_host(method(feature_map(Xd[a:a + rows], self.landmarks_, self.map_, self.kernel_)))
                     for a in range(0, n, rows)]
        return bk.as_kind(np.concatenate(parts, axis=0), kind)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        if tags.transformer_tags is not None:
            # transform returns F in the compute dtype (float32 by default), whatever X's dtype
            try:
                dt = bk.resolve_dtype(self.dtype, self.device)
            except Exception:  # an invalid dtype/device is reported by fit, not by the tags
                dt = np.dtype(np.float64)
            tags.transformer_tags.preserves_dtype = [np.dtype(dt).name]
        return tags


# --------------------------------------------------------------------------- grid
def fit_llsvm_grid(X: Any, y: Any, *, gammas: Sequence[float], Cs: Sequence[float],
                   estimator: LLSVM | None = None, sample_weight: Any = None,
                   warn_fallback: bool = True) -> list[LLSVM]:
    """Fit LLSVMs over a γ × C grid sharing the landmarks and one batched eigh.

    The landmarks (k-means does not depend on γ) are computed once, the maps of
    all γ come from one batched eigendecomposition (:func:`nystrom_maps`), the
    feature map F is computed once per γ, and only the linear SVM is trained per
    (γ, C), each C after the first starting from the previous C's weights and Newton's Hessian
    Grams (a :class:`~gpuksvm.solvers.linear.newton_memory.NewtonPath`; give ``Cs`` ascending
    for the shortest path) on features validated once.  The models of one γ share the kernel rows K(X, Z) of the rows they
    predict on (recognised by their contents; small blocks only, each kept until every C
    has read it): scoring every C on the same rows computes them once, with the same results.  With ``estimator.spectrum == "supervised"`` each map gets LLSVM2's
    spectrum (the same labelled subset for every γ).

    One γ's features are held at a time (with their validation and Newton's Grams, released
    before the next γ's are formed).  Where F and the Newton solver's scratch do not fit the
    memory budget, that γ's models are fitted as :meth:`LLSVM.fit` does then: over kernel
    blocks streamed per Newton pass, to the same solution (``memory_fallback_ ==
    "streamed_features"``).

    Parameters
    ----------
    X, y : training data (arrays)
    gammas, Cs : sequences of positive numbers
    estimator : LLSVM, optional
        Template for every other parameter (default ``LLSVM()``); its ``gamma``
        and ``C`` are replaced.
    sample_weight : array-like, optional
    warn_fallback : bool, default=True
        Warn (one ``MemoryFallbackWarning``) when the features are streamed; False leaves it to
        the caller, who reads the models' ``memory_fallback_`` (a search warns once for all its fits).

    Returns
    -------
    list of fitted LLSVM, in the order ``[(g, C) for g in gammas for C in Cs]``;
    each has ``gamma`` and ``C`` set to its grid values.

    Examples
    --------
    >>> from gpuksvm.estimators.llsvm import LLSVM, fit_llsvm_grid
    >>> from gpuksvm.datasets import make_checkerboard
    >>> X, y = make_checkerboard(1000, random_state=0)
    >>> models = fit_llsvm_grid(X, y, gammas=[10.0, 30.0], Cs=[1.0, 10.0],
    ...                         estimator=LLSVM(n_landmarks=100, device="cpu", random_state=0))
    >>> len(models)
    4
    """
    base = LLSVM() if estimator is None else estimator
    gammas, Cs = grid_values(gammas, Cs)
    if isinstance(base.kernel, Kernel) or base.kernel == "linear":
        raise ValueError("fit_llsvm_grid needs kernel='rbf' or 'poly' given by name")
    proto = clone(base).set_params(gamma=gammas[0], C=Cs[0])
    proto._check_params()
    X, y, _ = validate_X_y(proto, X, y)
    encode_classes(y)
    sw = None if sample_weight is None else check_sample_weight(sample_weight, X)
    dev = proto._device()
    kerns = [Kernel(base.kernel, gamma=g, degree=base.degree, coef0=base.coef0) for g in gammas]
    results = fit_llsvm_path(ArrayRows(X, y, sw, warn=warn_fallback), kernels=kerns, Cs=Cs, params=proto._map_params(),
                             spec=proto._linear_spec(), linear=_LinearSVMStage(proto, warm_start=True), device=dev,
                             dtype=bk.resolve_dtype(proto.dtype, dev), random_state=proto.random_state)
    models = []
    memos = {g: _KernelRowsMemo(len(Cs)) for g in gammas}
    for (g, c), result in zip([(g, c) for g in gammas for c in Cs], results):
        est = clone(base).set_params(gamma=g, C=c)
        if hasattr(proto, "feature_names_in_"):
            est.feature_names_in_ = proto.feature_names_in_
        models.append(est._store(result))
        est._kernel_rows = memos[g]
    return models


class _KernelRowsMemo:
    """The kernel blocks K(X, Z) the ``members`` models of one γ of :func:`fit_llsvm_grid` predict
    from: they share the landmarks and the kernel, so scoring all C values on the same rows (a
    search's held-out fold) computes K(X, Z) once.  Rows are recognised by their contents (shape,
    dtype and a BLAKE2 digest of the bytes): a copy of the same rows is a hit, rows changed in
    place are not.  Dense host rows only, in one kernel block of at most 1/64 of the memory
    budget (a search holds the memos of all its folds and γ at once: 15 of them in 5 folds × 3 γ
    stay under a quarter of the budget); at most :data:`KEEP` inputs (a search's test and training
    rows), each dropped once every member has read it."""

    KEEP = 2

    def __init__(self, members: int) -> None:
        self.members = int(members)
        self._entries: dict[tuple, tuple[dict, set]] = {}
        self._lock = threading.Lock()

    def blocks(self, X: Any, Z: Any, reader: Any) -> dict | None:
        """The dict of kept blocks of X's rows against the landmarks ``Z`` for ``reader`` (one of
        the members; None: not kept)."""
        if self.members < 2 or not isinstance(X, np.ndarray) or X.ndim != 2:
            return None
        if X.shape[0] * Z.shape[0] * X.dtype.itemsize > bk.memory_budget(bk.device_of(X)) // 64:
            return None
        digest = hashlib.blake2b(np.ascontiguousarray(X).data, digest_size=16).digest()
        key = (id(Z), X.shape, X.dtype.str, digest)
        with self._lock:
            blocks, readers = self._entries.pop(key, None) or ({}, set())
            readers.add(id(reader))
            if len(readers) < self.members:     # kept, the most recent last
                while len(self._entries) >= self.KEEP:
                    self._entries.pop(next(iter(self._entries)))
                self._entries[key] = (blocks, readers)
            return blocks

    def __getstate__(self) -> dict:              # a copy (pickle, deepcopy) starts empty
        return {"members": self.members}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["members"])


class _LinearSVMStage:
    """The linear SVM on LLSVM's features: :class:`~gpuksvm.estimators.linear_svm.LinearSVM` with the
    estimator's parameters and the stage's C (the :class:`~gpuksvm.solvers.nystrom.llsvm.LinearStage`
    of :func:`~gpuksvm.solvers.nystrom.llsvm.fit_llsvm_path`)."""

    def __init__(self, estimator: LLSVM, warm_start: bool = False, order_rows: Any = None):
        self.estimator = estimator
        self.warm_start = warm_start
        # the rows the features were formed from: their contents order the Platt folds
        # (:func:`gpuksvm.estimators.calibration.fold_order_rows`)
        self.order_rows = order_rows
        # the previous C's features, their validation and the Newton solver's state on them
        self._last: tuple[Any, Any, NewtonPath] | None = None

    def fit(self, spec: LinearSpec, X: Any, y: Any = None, sample_weight: Any = None) -> LinearSVM:
        """With ``warm_start``, the features are validated once and the second and later C on them
        start from the previous C's weights and Hessian Grams (a :class:`NewtonPath`; Newton: a
        cold fit's model to the tolerance; the other engines start from zero)."""
        svm = self.estimator._linear_svm(spec.C)
        if not self.warm_start or self.estimator.probability or is_block_input(X):
            with fold_order_rows(svm, self.order_rows):
                return svm.fit(X, y, sample_weight=sample_weight)
        if self._last is None or self._last[0] is not X:
            self._last = None           # the previous features' state goes before the new rows' checks
            self._last = (X, svm._check_rows(X, y, sample_weight), NewtonPath())
        return svm._fit_rows(self._last[1], self._last[2])

    def release(self) -> None:
        """The models of one map are fitted: its features' validation and Newton state go."""
        self._last = None

    def from_newton(self, spec: LinearSpec, solution: Any, classes: np.ndarray, n_features: int, engine: str,
                    device: bk.Device, dtype: Any, log_scale: float, n_passes: int) -> LinearSVM:
        result = LinearSVMResult.from_solution(solution, classes, n_features, engine, device, dtype, log_scale,
                                               n_passes=n_passes)
        return LinearSVM.from_result(result, **self.estimator._linear_svm(spec.C).get_params())
