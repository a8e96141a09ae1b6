"""LLSVM's fit (SPEC §1; TNNLS Algorithms 1 and 2) as one orchestration over seams.

The steps are the same wherever the rows live:

1. a random sample of the rows (drawn by their contents, :mod:`gpuksvm.solvers.row_order`);
2. the kernel, with γ resolved on the rows the source holds;
3. landmarks Z from the sample, the maps M = U Λ^{-1/2} of every kernel from one
   batched eigendecomposition (:func:`~gpuksvm.solvers.nystrom.maps.nystrom_maps`), LLSVM2's
   supervised spectrum on the same labelled subset for every kernel;
4. the features F = K(X, Z) M per kernel, and the linear SVM on F per C.

Two seams say where the work happens:

* :class:`LLSVMRows` — where the rows come from: :class:`ArrayRows` (in memory),
  :class:`BlockRows` (out of core, one block at a time); the Dask rows of
  :mod:`gpuksvm.scaleout.llsvm` plug in the same way.  A source hands back either
  the features for a linear SVM (:class:`FeatureProblem`) or a Newton oracle over them
  (:class:`NewtonProblem`, solved here by :func:`~gpuksvm.solvers.linear.newton.newton_solve`).
* :class:`LinearStage` — the linear SVM that trains on features or wraps a Newton
  solution (the caller's: the estimator layer supplies its LinearSVM).

:func:`fit_llsvm_solution` fits one model, :func:`fit_llsvm_path` a γ × C grid sharing
the landmarks; both return :class:`LLSVMResult`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.array.blas_threads import one_blas_thread
from gpuksvm.array.validation import max_row_sq_norm
from gpuksvm.data.blocks import LinearMapBlockSource, as_block_source, check_block
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.solvers.linear.newton import NewtonOracle, newton_solve
from gpuksvm.solvers.linear.problem import LinearSolution
from gpuksvm.solvers.nystrom.kmeans import RowReservoir
from gpuksvm.solvers.nystrom.maps import (
    MapParams,
    NystromMap,
    apply_spectrum,
    nystrom_maps,
    sample_rows_for_map,
    select_landmarks,
)

__all__ = ["LinearSpec", "LinearStage", "FeatureProblem", "NewtonProblem", "LLSVMRows", "ArrayRows",
           "BlockRows", "LLSVMResult", "fit_llsvm_solution", "fit_llsvm_path", "kernel_row_source",
           "in_memory_bytes"]

KernelSpec = Kernel | Callable[[Any], Kernel]


def in_memory_bytes(n_rows: int, k: int, itemsize: int) -> int:
    """Bytes a fit on ``n_rows`` rows needs to hold its features F in memory: F and the Newton
    solver's scratch, 2 × n_rows × k of the working dtype (:meth:`ArrayRows.features` streams
    F's kernel blocks where this does not fit the memory budget)."""
    return 2 * int(n_rows) * int(k) * int(itemsize)


@dataclass(frozen=True)
class LinearSpec:
    """The linear SVM trained on the features: the parameters a row source needs when it
    sets up the problem itself (the Dask Newton oracle), and that a :class:`LinearStage` fits.

    ``intercept_scaling`` None: no constant column (no intercept).
    """

    C: float
    loss: str = "squared_hinge"
    class_weight: Any = None
    tol: float = 1e-4
    max_iter: int = 1000
    intercept_scaling: float | None = 1.0
    probability: bool = False


class LinearStage(Protocol):
    """The linear SVM on the features (supplied by the caller, e.g. the estimator's LinearSVM).

    The returned model is fitted and exposes ``coef_`` (n_outputs, k), ``intercept_``,
    ``classes_`` and ``n_iter_``.
    """

    def fit(self, spec: LinearSpec, X: Any, y: Any = None, sample_weight: Any = None) -> Any:
        """Train on features ``X`` (an array, or a block source of feature blocks)."""

    def from_newton(self, spec: LinearSpec, solution: LinearSolution, classes: np.ndarray, n_features: int,
                    engine: str, device: bk.Device, dtype: Any, log_scale: float, n_passes: int) -> Any:
        """The fitted model of a Newton solution found over a row source's oracle."""

    # optional: ``release()``, called once the models of one map are fitted, drops what the stage
    # keeps of that map's features (e.g. their validation), before the next map's features are formed


@dataclass(frozen=True)
class FeatureProblem:
    """Features for :meth:`LinearStage.fit`: an array F with labels and sample weights, or a
    block source of feature blocks (``y`` None)."""

    X: Any
    y: Any = None
    sample_weight: Any = None


@dataclass(frozen=True)
class NewtonProblem:
    """A Newton oracle over the features (:class:`~gpuksvm.solvers.linear.newton.NewtonOracle`)
    and what its solution means: the classes of its one-vs-rest problems, the cost scale
    (:func:`~gpuksvm.solvers.cost_scaling.extreme_cost_scale`), the engine's name; a callback
    after every Newton step, and ``report(solution) -> dict`` for the diagnostics."""

    oracle: NewtonOracle
    classes: np.ndarray
    log_scale: float
    engine: str
    callback: Callable[[dict], None] | None = None
    report: Callable[[LinearSolution], dict] | None = None


class LLSVMRows:
    """Where LLSVM's training rows come from (the data seam of :func:`fit_llsvm_path`).

    The orchestration calls, in this order: :meth:`open` (validation passes, refusals),
    :meth:`sample`, :meth:`kernel`, then :meth:`features` once per map and
    :meth:`problem` once per (map, C).  ``n_features`` is known after :meth:`sample`.
    """

    n_features: int | None = None
    #: whether the last :meth:`features` streams kernel blocks instead of holding F (the budget's switch)
    streamed: bool = False

    def open(self, spec: LinearSpec) -> None:
        """Check the rows and refuse what this source cannot train (default: nothing to do)."""

    def sample(self, params: MapParams, rs: np.random.RandomState, device: bk.Device,
               dtype: np.dtype) -> tuple[Any, np.ndarray]:
        """The random sample (rows on ``device`` in ``dtype``, host labels) of
        :meth:`~gpuksvm.solvers.nystrom.maps.MapParams.sample_size` rows."""
        raise NotImplementedError

    def kernel(self, resolve: Callable[[Any], Kernel]) -> Kernel:
        """``resolve(rows)`` on the rows this source resolves γ on."""
        raise NotImplementedError

    def features(self, nmap: NystromMap, spec: LinearSpec) -> Any:
        """The features F = K(X, Z) M of the rows (a handle :meth:`problem` understands)."""
        raise NotImplementedError

    def problem(self, features: Any, spec: LinearSpec) -> FeatureProblem | NewtonProblem:
        """The linear SVM's problem on ``features`` with the costs of ``spec``."""
        raise NotImplementedError


class ArrayRows(LLSVMRows):
    """Rows in memory: validated ``X`` (n, d), labels ``y`` and optional ``sample_weight``.

    γ is resolved on all rows (on the device copy, in the working dtype).  ``warn``: the first
    switch to streamed features warns (a :class:`~gpuksvm.array.backend.MemoryFallbackWarning`);
    False leaves it to the caller, who reads :attr:`streamed` (a search warns once for all its fits).
    """

    def __init__(self, X: Any, y: np.ndarray, sample_weight: Any = None, *, warn: bool = True):
        self.X, self.y, self.sample_weight = X, y, sample_weight
        self.n_features = int(X.shape[1])
        self.warn = bool(warn)
        self._Xd = None
        self._sample = self._stream = None

    def sample(self, params: MapParams, rs: np.random.RandomState, device: bk.Device,
               dtype: np.dtype) -> tuple[Any, np.ndarray]:
        self._Xd = bk.to_device(self.X, device, dtype)
        Xs, ys = sample_rows_for_map(self._Xd, self.y, params, rs)
        self._sample = (bk.to_host(Xs), ys)
        return Xs, ys

    def kernel(self, resolve: Callable[[Any], Kernel]) -> Kernel:
        return resolve(self._Xd)

    def features(self, nmap: NystromMap, spec: LinearSpec) -> Any:
        """F = K(X, Z) M in memory, or, when F and the Newton solver's copy of it (2·n·k values) do
        not fit the memory budget, the kernel blocks streamed per Newton pass as out of core
        (:func:`kernel_row_source`; the same solution).  The first switch warns once."""
        k = int(nmap.landmarks.shape[0])
        dev = bk.device_of(self._Xd)
        need = in_memory_bytes(self.X.shape[0], k, np.dtype(nmap.map.dtype).itemsize)
        budget = bk.memory_budget(dev)
        self.streamed = False
        if need <= budget:
            return nmap.transform(self._Xd)
        if self.sample_weight is not None or spec.loss != "squared_hinge":
            warnings.warn(f"LLSVM: the feature matrix F ({self.X.shape[0]} x {k}) and the solver's scratch need "
                          f"{need / 1e6:.0f} MB, more than the memory budget ({budget / 1e6:.0f} MB), but only "
                          "the squared hinge without sample_weight can stream F: F is kept in memory",
                          UserWarning, stacklevel=2)
            return nmap.transform(self._Xd)
        if self.warn:
            warnings.warn(f"LLSVM: the feature matrix F ({self.X.shape[0]} x {k}) and the Newton solver's "
                          f"scratch need {need / 1e6:.0f} MB, more than the memory budget "
                          f"({budget / 1e6:.0f} MB): the kernel blocks are recomputed in every Newton pass "
                          "(the out-of-core path; the same solution, slower)", bk.MemoryFallbackWarning, stacklevel=2)
            self.warn = False
        self.streamed = True
        if self._stream is None:
            self._stream = (max_row_sq_norm(self.X), self._sample)
        sq_norm, sample = self._stream
        source = as_block_source(self.X, self.y, block_size=_stream_rows(k, dev))
        return kernel_row_source(source, nmap, self.n_features, dev, np.dtype(nmap.map.dtype), sample=sample,
                                 labels=np.asarray(self.y), sq_norm=sq_norm)

    def problem(self, features: Any, spec: LinearSpec) -> FeatureProblem:
        if isinstance(features, LinearMapBlockSource):
            return FeatureProblem(features)
        return FeatureProblem(features, self.y, self.sample_weight)


class BlockRows(LLSVMRows):
    """Rows out of core, read one block at a time (a :class:`~gpuksvm.data.blocks.BlockSource`,
    an SVMlight path, a list of ``(X_block, y_block)`` pairs or a callable).

    One pass reads the labels, max‖x‖² and the random sample (a
    :class:`~gpuksvm.solvers.nystrom.kmeans.RowReservoir`: the rows the in-memory fit draws
    with the same ``random_state``); γ is resolved on the sample.  The features are
    :class:`~gpuksvm.data.blocks.LinearMapBlockSource` blocks K(X_b, Z) M (kernel rows in
    float64: M amplifies their round-off by 1/λ_min), which a streamed solver reads as
    K(X_b, Z) and to whose statistics it applies M.

    Parameters
    ----------
    X, y : block input and its labels (``y`` None for a block source)
    block_size : rows per block when reading a file
    validate : callable (X_sample, y_sample) → (X_sample, y_sample), optional
        The caller's check of the sample (finite values, labels).
    """

    def __init__(self, X: Any, y: Any = None, *, block_size: int = 5000,
                 validate: Callable[[Any, Any], tuple[Any, Any]] | None = None):
        self.source = as_block_source(X, y, block_size=int(block_size))
        self.validate = validate
        self.n_features = getattr(self.source, "n_features", None)

    def sample(self, params: MapParams, rs: np.random.RandomState, device: bk.Device,
               dtype: np.dtype) -> tuple[Any, np.ndarray]:
        reservoir = RowReservoir(params.sample_size(out_of_core=True), rs)
        labels = []
        n_features = self.n_features
        sq_norm = 0.0                   # max‖x‖², for the feature rows' norm bound
        for Xb, yb in self.source:
            if Xb.shape[0] == 0:
                continue
            n_features = int(n_features or Xb.shape[1])
            if Xb.shape[1] != n_features:
                raise ValueError(f"a block has {Xb.shape[1]} features, expected {n_features}")
            yb = np.asarray(bk.to_host(yb)).ravel()
            reservoir.add(bk.to_host(Xb), yb)
            labels.append(yb)
            sq_norm = max(sq_norm, max_row_sq_norm(Xb))
        if not labels:
            raise ValueError("the block source yielded no data")
        _, Xs, ys = reservoir.result()
        if self.validate is not None:
            Xs, ys = self.validate(Xs, ys)
        self.n_features = n_features
        self._device, self._dtype = device, dtype
        self._labels, self._sq_norm, self._sample = np.concatenate(labels), sq_norm, (Xs, ys)
        self._Xsd = bk.to_device(Xs, device, dtype)
        return self._Xsd, ys

    def kernel(self, resolve: Callable[[Any], Kernel]) -> Kernel:
        return resolve(self._Xsd)

    def features(self, nmap: NystromMap, spec: LinearSpec) -> LinearMapBlockSource:
        return kernel_row_source(self.source, nmap, self.n_features, self._device, self._dtype,
                                 sample=self._sample, labels=self._labels, sq_norm=self._sq_norm)

    def problem(self, features: Any, spec: LinearSpec) -> FeatureProblem:
        return FeatureProblem(features)


def _stream_rows(k: int, device: bk.Device) -> int:
    """Rows per streamed kernel block: four float64 rows of k values each (the kernel row, the
    copy the Gram product scales, the undecided row the line search keeps and the solver's
    scratch) within what the memory budget leaves beside the streamed Newton solver's three
    (k + 1)² float64 arrays (its Gram, a transient, the line search's speculative Gram), at
    most 4,096 and at least 256 (or what the whole budget holds: a budget below one row is an
    error).  Measured on ijcnn1 (49,990 rows, k = 1,000, budget 64 MB): the fit's VmHWM growth
    with blocks of 2,000 rows (a third of the budget per row triple, the solver's arrays not
    counted) 108 MB, with these (1,250 rows) 82 MB (the bound: 101 MB)."""
    rows = bk.plan_rows(1 << 30, 4 * k * 8, device, max_rows=4096)
    left = bk.memory_budget(device) - 3 * (k + 1) ** 2 * 8
    return max(min(rows, left // (4 * k * 8)), min(rows, 256))


def kernel_row_source(source: Any, nmap: NystromMap, n_features: int, device: bk.Device, dtype: np.dtype, *,
                      sample: tuple[Any, Any], labels: np.ndarray, sq_norm: float) -> LinearMapBlockSource:
    """The features of ``source``'s rows as :class:`~gpuksvm.data.blocks.LinearMapBlockSource` blocks
    K(X_b, Z) M (kernel rows in float64: M amplifies their round-off by 1/λ_min), which the
    streamed Newton solver reads as K(X_b, Z), applying M to its statistics; ``sample`` (host
    rows, labels) gives its warm start, ``sq_norm`` (max‖x‖²) the feature rows' norm bound."""
    Z64 = nmap.landmarks.astype(np.float64)

    def kernel_rows(Xb: Any) -> Any:
        return kernel_block(check_block(Xb, n_features, device, np.float64), Z64, nmap.kernel, dtype=np.float64)

    k = int(Z64.shape[0])
    bound = nmap.feature_sq_norm_bound(sq_norm)
    return LinearMapBlockSource(source, kernel_rows, nmap.map, sample=sample, labels=labels,
                                max_rows=_stream_rows(k, device), dtype=dtype,
                                row_sq_norm_bound=bound if np.isfinite(bound) else None)


@dataclass(frozen=True)
class LLSVMResult:
    """A fitted LLSVM: the map, the linear SVM on it and the RSVM coefficients (Proposition 2).

    Attributes
    ----------
    kernel : the resolved Kernel
    landmarks : (k, d) Z
    eigvals : (k,) eigenvalues of K_zz after the floor (ascending)
    spectrum : (k,) weights s of M = U diag(s)^{1/2}
    map : (k, k) M
    classes : (n_classes,) labels
    coef : (n_outputs, k) linear SVM weights β on F (device, working dtype)
    intercept : (n_outputs,)
    dual_coef : (n_outputs, k) μ = M β: decision = K(X, Z) μᵀ + b
    linear_model : the fitted linear SVM (what the :class:`LinearStage` returned)
    n_iter : iterations of the linear solver
    n_features : input width d
    device : where the arrays live
    fit_times : seconds per stage (landmarks, map, features, svm)
    diagnostics : the source's report (``"dask"``: passes, bytes, Newton steps)
    streamed : whether the features were streamed per Newton pass because F did not fit the
        memory budget (:meth:`ArrayRows.features`)
    """

    kernel: Kernel
    landmarks: Any
    eigvals: Any
    spectrum: Any
    map: Any
    classes: np.ndarray
    coef: Any
    intercept: Any
    dual_coef: Any
    linear_model: Any
    n_iter: Any
    n_features: int
    device: bk.Device
    fit_times: dict = field(default_factory=dict)
    diagnostics: dict = field(default_factory=dict)
    streamed: bool = False


def _result(nmap: NystromMap, model: Any, n_features: int, dev: bk.Device, dt: np.dtype, times: dict,
            diagnostics: dict, streamed: bool = False) -> LLSVMResult:
    k = int(nmap.landmarks.shape[0])
    coef = bk.to_device(model.coef_, dev, dt).reshape(-1, k)
    intercept = bk.to_device(model.intercept_, dev, dt).reshape(-1)
    return LLSVMResult(kernel=nmap.kernel, landmarks=nmap.landmarks, eigvals=nmap.eigvals,
                       spectrum=nmap.spectrum, map=nmap.map, classes=np.asarray(model.classes_),
                       coef=coef, intercept=intercept, dual_coef=coef @ nmap.map.T, linear_model=model,
                       n_iter=model.n_iter_, n_features=int(n_features), device=dev, fit_times=dict(times),
                       diagnostics=dict(diagnostics), streamed=bool(streamed))


def _train(rows: LLSVMRows, features: Any, spec: LinearSpec, linear: LinearStage, k: int, dev: bk.Device,
           dt: np.dtype) -> tuple[Any, dict]:
    """The linear SVM of one (map, C): the stage's fit on features, or Newton over the source's oracle."""
    problem = rows.problem(features, spec)
    if isinstance(problem, FeatureProblem):
        return linear.fit(spec, problem.X, problem.y, sample_weight=problem.sample_weight), {}
    sol = newton_solve(problem.oracle, tol=float(spec.tol), max_iter=int(spec.max_iter), callback=problem.callback)
    model = linear.from_newton(spec, sol, problem.classes, k, problem.engine, dev, dt, problem.log_scale,
                               n_passes=sol.info["n_passes"])
    return model, ({} if problem.report is None else problem.report(sol))


def fit_llsvm_path(rows: LLSVMRows, *, kernels: Sequence[KernelSpec], Cs: Sequence[float], params: MapParams,
                   spec: LinearSpec, linear: LinearStage, device: bk.Device, dtype: Any,
                   random_state: Any = None) -> list[LLSVMResult]:
    """LLSVMs over a kernel × C grid sharing the sample and the landmarks.

    The landmarks (k-means does not depend on the kernel's γ) are computed once, the maps
    of all kernels come from one batched eigendecomposition, LLSVM2's spectrum uses the
    same labelled subset for every kernel, F is formed once per kernel and only the linear
    SVM runs per (kernel, C).  Fit times: the landmarks and the shared eigendecomposition
    are divided among the results of the stage.

    Parameters
    ----------
    rows : LLSVMRows
        Where the rows come from.
    kernels : sequence of Kernel or callable rows → Kernel
        A callable resolves γ on the rows (``rows.kernel``).
    Cs : sequence of float
        Costs of the linear SVM (``spec`` with its C replaced).
    params : MapParams
        The landmarks, the map and LLSVM2's spectrum.
    spec : LinearSpec
    linear : LinearStage
    device : bk.Device
    dtype : the working dtype (resolved)
    random_state : int, RandomState or None
        Draws the sample, k-means, random landmarks and LLSVM2's labelled subset.

    Returns
    -------
    list of LLSVMResult, in the order ``[(kernel, C) for kernel in kernels for C in Cs]``.

    Notes
    -----
    On the CPU the whole fit runs on one BLAS thread: its NumPy products (k-means, kernel
    blocks, Grams) and SciPy's LAPACK (the Newton steps' Cholesky) are two OpenBLAS
    libraries whose idle threads spin-wait and take the cores from each other.  Measured on
    the 2-core development CPU (load average 1.3–2.2), one LLSVM fit, 1 vs 2 threads:
    100,000 × 22 Gaussian rows, k = 1,000 (F streamed) 9.3–10.4 vs 20.9–21.3 s;
    20,000 × 300, k = 1,000: 3.7–3.8 vs 3.9–4.0 s; the search over ijcnn1 10,000 rows,
    k = 300, γ ∈ {1, 2} × C ∈ {1, 8, 64}, 5 folds: 2.4 vs 4.3–4.5 s.
    """
    with one_blas_thread(not device.is_gpu):
        return _fit_path(rows, kernels, Cs, params, spec, linear, device, dtype, random_state)


def _fit_path(rows: LLSVMRows, kernels: Sequence[KernelSpec], Cs: Sequence[float], params: MapParams,
              spec: LinearSpec, linear: LinearStage, device: bk.Device, dtype: Any,
              random_state: Any) -> list[LLSVMResult]:
    """:func:`fit_llsvm_path`'s steps."""
    dev, dt = device, np.dtype(dtype)
    rs = check_random_state(random_state)
    rows.open(spec)
    t0 = bk.synchronized_clock(dev)
    Xs, ys = rows.sample(params, rs, dev, dt)
    kerns = [k if isinstance(k, Kernel) else rows.kernel(k) for k in kernels]
    Z = select_landmarks(Xs, params, rows.n_features, dev, dt, rs)
    t1 = bk.synchronized_clock(dev)
    maps = nystrom_maps(Z, kerns, eig_floor=float(params.eig_floor), dtype=dt)
    t_eigh = (bk.synchronized_clock(dev) - t1) / len(kerns)
    state = rs.get_state()
    results = []
    release = getattr(linear, "release", None)
    for i in range(len(maps)):
        nmap, maps[i] = maps[i], None
        rs.set_state(state)  # the same labelled subset for every kernel
        t2 = bk.synchronized_clock(dev)
        # the eigenvectors are not needed once the map is final: freed before the features
        nmap = replace(apply_spectrum(nmap, Xs, ys, params, rs), eigvecs=None)
        t3 = bk.synchronized_clock(dev)
        features = rows.features(nmap, spec)
        streamed = rows.streamed
        t4 = bk.synchronized_clock(dev)
        for C in Cs:
            t5 = bk.synchronized_clock(dev)
            model, report = _train(rows, features, replace(spec, C=float(C)), linear,
                                   int(nmap.landmarks.shape[0]), dev, dt)
            times = dict(landmarks=t1 - t0, map=t_eigh + t3 - t2, features=t4 - t3,
                         svm=bk.synchronized_clock(dev) - t5)
            results.append(_result(nmap, model, rows.n_features, dev, dt, times, report, streamed=streamed))
        # one map's features at a time: this map's (and what the stage keeps of them) go before
        # the next map's are formed
        features = None
        if release is not None:
            release()
    return results


def fit_llsvm_solution(rows: LLSVMRows, *, kernel: KernelSpec, params: MapParams, spec: LinearSpec,
                       linear: LinearStage, device: bk.Device, dtype: Any,
                       random_state: Any = None) -> LLSVMResult:
    """One LLSVM (TNNLS Algorithm 1; Algorithm 2 with ``params.spectrum="supervised"``).

    :func:`fit_llsvm_path` with one kernel and one C (``spec.C``); see there for the parameters.
    """
    return fit_llsvm_path(rows, kernels=[kernel], Cs=[spec.C], params=params, spec=spec, linear=linear,
                          device=device, dtype=dtype, random_state=random_state)[0]
