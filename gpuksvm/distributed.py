"""Distributed training and prediction on Dask (issue 9: beyond one machine).

The estimators accept a ``dask.array`` (NumPy- or CuPy-backed chunks) and
train without ever gathering the data on one worker.  Each method is split
into what must see all rows — done chunk-wise on the workers, only small
summaries travel — and the small problem that stays on the driver:

LLSVM (:func:`fit_llsvm`, SPEC §1)
    landmarks Z from a sample (the same rows, k-means and random state as the
    single-process fit), M = U Λ^{-1/2} on the driver; Z and M are broadcast
    once; F = K(X, Z) M is computed per chunk on the workers (and kept there,
    ``persist``); the single-process primal Newton solver
    (:func:`gpuksvm.solvers.linear.newton_solve`, same stopping rule and
    exact line search) runs over a map-reduce oracle: every pass returns only
    the k×k F_Iᵀ F_I, the k-vector gradient terms and the loss per binary
    problem (summed in a tree on the workers), each line-search step two
    numbers per problem; the driver does the Cholesky solve.
SVI (:func:`fit_svi`, SPEC §3)
    the M sub-SVMs are trained on different workers in parallel (each gets
    only its θn rows); the averaged decision values and the margin selection
    are computed chunk-wise (each chunk returns only its best margin
    candidates); the s×s closed-form solve runs as one task on one worker.
CVM (:func:`fit_cvm`, SPEC §2)
    every chunk returns its local furthest point (exact scan); with sampling,
    only the sampled rows are fetched; the core-set QP stays on the driver.
Prediction (:func:`predict`, :func:`decision_function`, :func:`transform`, …)
    maps the fitted estimator's own method over the row chunks and returns a
    dask array (lazy; nothing is computed until the caller asks).

Works with or without ``distributed``: pass ``client=`` (a
``distributed.Client``), or the default scheduler is used (the active client
if one exists).  ``dask_cuda`` is optional: with one worker per GPU
(``dask_cuda.LocalCUDACluster``) and CuPy-backed chunks, every map function
runs on the chunk's device through :mod:`gpuksvm.backend` namespaces.

Worker loss: Dask re-runs the tasks of a lost worker and recomputes lost
chunks from their lineage, so a fit survives a worker restart with the same
result; every reduction also counts the rows it summed and the fit stops with
:class:`~gpuksvm._dask.DistributedFitError` if a pass did not see every row
exactly once, so a model is never computed from partial data.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import backend as bk
from . import linalg
from ._dask import (DistributedFitError, Ledger, compute, is_dask_collection, require_dask,
                    row_chunked, scheduler_context, tree_reduce)
from .kernels import Kernel, make_kernel
from .linear_svm import extreme_cost_scale, scaled_costs
from .llsvm import feature_map, nystrom_maps
from .multiclass import problem_rows
from .solvers.linear import ReducedOracle, line_derivatives, newton_solve, ovr_targets
from .solvers.smo import solve_batched
from .solvers.svi import assemble, plan_problems, solve_record, solver_summary
from .solvers.svi_steps import (average_submodels, check_rows, ensemble_check, order_directions,
                                project_rows, select_margin_rows, solve_margin_problem, stack_submodels,
                                submodel_values)
from .validation import class_weight_vector, encode_classes, max_row_sq_norm

__all__ = ["is_dask_collection", "DistributedFitError", "fit_llsvm", "fit_svi", "fit_cvm",
           "predict", "decision_function", "transform", "predict_proba", "predict_log_proba",
           "score_samples"]


# =========================================================================== helpers
class _Rows:
    """Row access to a dask array that gathers only the rows asked for.

    Lets the single-process helpers of the estimators (landmark sampling,
    LLSVM2's labelled subset) run unchanged on a dask array: ``rows[idx]``
    fetches just those rows; converting the whole array is allowed only when
    it has at most ``max_rows`` rows (a sample that *is* the data set).
    """

    def __init__(self, X: Any, *, client: Any, ledger: Ledger, max_rows: int, label: str):
        self._X = X
        self._client = client
        self._ledger = ledger
        self._max_rows = int(max_rows)
        self._label = label
        self.shape = tuple(int(s) for s in X.shape)
        self.ndim = X.ndim
        self.dtype = X.dtype
        self._held: list = []

    def _fetch(self, key: Any) -> np.ndarray:
        (out,) = compute(self._X[key], client=self._client, ledger=self._ledger, label=self._label)
        return np.asarray(bk.to_host(out))

    def __getitem__(self, idx: Any) -> np.ndarray:
        if bk.is_gpu_array(idx):
            idx = bk.to_host(idx)
        if isinstance(idx, (list, np.ndarray)):
            idx = np.asarray(idx)
            order = np.argsort(idx, kind="stable")
            if np.all(order == np.arange(order.size)):
                return self._fetch(idx)
            got = self._fetch(idx[order])  # dask gathers sorted rows fastest
            out = np.empty_like(got)
            out[order] = got
            return out
        return self._fetch(idx)

    def __len__(self) -> int:
        return self.shape[0]

    def _persist(self, A: Any) -> Any:
        """Persist a small per-row dask array (labels, masks) on the workers for this fit."""
        A = self._client.persist(A) if self._client is not None else A.persist()
        self._held.append(A)
        return A

    def _release(self) -> None:
        self._held.clear()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.shape[0] > self._max_rows:
            raise DistributedFitError(
                f"refusing to gather all {self.shape[0]} rows on the driver "
                f"(limit {self._max_rows}); this is a bug in the distributed fit")
        out = self._fetch(slice(None))
        return out.astype(dtype, copy=False) if dtype is not None else out


def _host_chunks(A: Any) -> Any:
    """The same dask array with host (NumPy) chunks (for small reductions on the driver)."""
    _, da = require_dask()
    if bk.array_kind(getattr(A, "_meta", np.empty(0))) == "numpy":
        return A
    return A.map_blocks(bk.to_host, dtype=A.dtype, meta=np.empty((0,) * A.ndim, dtype=A.dtype))


def _persist(client: Any, *arrays: Any) -> list:
    """Load the chunks into worker memory once (a lazy ``from_array`` would ship them every pass)."""
    arrays = [a for a in arrays]
    todo = [i for i, a in enumerate(arrays) if a is not None]
    if not todo:
        return arrays
    got = (client.persist([arrays[i] for i in todo]) if client is not None
           else require_dask()[0].persist(*[arrays[i] for i in todo]))
    for i, a in zip(todo, got):
        arrays[i] = a
    return arrays


def _check_finite_and_classes(X: Any, y: Any, *, client: Any, ledger: Ledger) -> np.ndarray:
    """One pass: NaN/inf in X → ValueError; returns the sorted labels (host)."""
    _, da = require_dask()
    # reduced on the chunks' own device; only one boolean comes back
    finite = da.isfinite(X).all() if X.dtype.kind == "f" else da.asarray(True)
    if y is None:
        (ok,) = compute(finite, client=client, ledger=ledger, label="validate")
        labels = None
    else:
        ok, labels = compute(finite, da.unique(_host_chunks(y)), client=client, ledger=ledger,
                             label="validate")
    if not bool(bk.to_host(ok)):
        raise ValueError("Input X contains NaN or infinity.")
    return labels


def _set_n_features(est: Any, d: int) -> None:
    est.n_features_in_ = int(d)
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_


def _client_or_default(client: Any) -> Any:
    """The given client, else the active distributed client, else None (local scheduler)."""
    if client is not None:
        return client
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _on_device_of(A: Any, like: Any) -> Any:
    """``A`` (host or device array) on the device (and namespace) of the chunk ``like``."""
    if bk.is_gpu_array(like):
        return bk.to_device(A, bk.device_of(like))
    return bk.to_host(A)


def _record_info(est: Any, ledger: Ledger, client: Any, extra: dict) -> None:
    from ._dask import n_workers

    info = {"n_workers": n_workers(client), **ledger.as_dict(), **extra}
    est.dask_info_ = info


# =========================================================================== LLSVM
@dataclass(frozen=True)
class _FeatureMap:
    """F = [K(X, Z) M, s·1] on a chunk's device (shipped once per graph)."""

    landmarks: np.ndarray
    map: np.ndarray
    kernel: Kernel
    dtype: np.dtype
    intercept_scaling: float | None

    def __call__(self, Xb: Any) -> Any:
        xp = bk.namespace_of(Xb)
        Z = _on_device_of(self.landmarks, Xb)
        M = _on_device_of(self.map, Xb)
        Xb = Xb.astype(self.dtype, copy=False)
        F = feature_map(Xb, Z, M.astype(self.dtype, copy=False), self.kernel)
        if self.intercept_scaling is None:
            return F
        ones = xp.full((F.shape[0], 1), self.intercept_scaling, dtype=self.dtype)
        return xp.concatenate([F, ones], axis=1)


def _features_block(Xb: Any, fmap: _FeatureMap) -> Any:
    return fmap(Xb)


def _row_costs(yb: np.ndarray, swb: np.ndarray | None, spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """Targets Y (m, P) in {−1, +1} and costs c (m, P) of a chunk (host): the
    one-vs-rest rules of :func:`~gpuksvm.solvers.linear.ovr_targets` (the
    single-process fit's), times C, extreme costs scaled as in memory
    (:func:`~gpuksvm.linear_svm.scaled_costs`)."""
    classes = spec["classes"]
    idx = np.searchsorted(classes, np.asarray(bk.to_host(yb)).ravel())
    sw = None if swb is None else np.asarray(bk.to_host(swb), dtype=np.float64).ravel()
    Y, S = ovr_targets(idx, classes.shape[0], class_weight=spec["class_weight"], sample_weight=sw)
    C, S = scaled_costs(spec["C"], S, spec["log_scale"])
    return Y, C * S


def _sqhinge_stats(Fb: Any, yb: Any, swb: Any, W: np.ndarray, spec: dict,
                   fmap: _FeatureMap | None) -> dict:
    """Loss, gradient and Hessian sums of one chunk (runs on a worker, chunk's device)."""
    if fmap is not None:  # features not cached: recompute this chunk's F
        Fb = fmap(Fb)
    xp = bk.namespace_of(Fb)
    Y, cost = _row_costs(yb, swb, spec)
    Wd = xp.asarray(W, dtype=Fb.dtype)
    O = Fb @ Wd                                        # outputs wᵀfᵢ
    Yd = xp.asarray(Y, dtype=Fb.dtype)
    cd = xp.asarray(cost, dtype=Fb.dtype)
    active = (Yd * O) < 1                              # I = {i: yᵢ wᵀfᵢ < 1}
    R = xp.where(active, O - Yd, 0)                    # residuals on I
    loss = xp.sum(cd * R * R, axis=0, dtype=np.float64)
    grad = (Fb.T @ (cd * R)).astype(np.float64)
    P = W.shape[1]
    p = Fb.shape[1]
    hess = np.zeros((P, p, p))
    for j in np.flatnonzero(spec["active"]):        # problems that still need a Hessian
        sel = xp.flatnonzero(active[:, j])
        Fi = Fb[sel]
        hess[j] = bk.to_host((Fi * cd[sel, j][:, None]).T @ Fi)  # F_Iᵀ diag(c) F_I
    return {"n": int(Fb.shape[0]), "loss": np.asarray(bk.to_host(loss), dtype=np.float64),
            "grad": np.asarray(bk.to_host(grad), dtype=np.float64), "hess": hess}


def _sqhinge_line(Fb: Any, yb: Any, swb: Any, WPt: tuple, spec: dict, fmap: _FeatureMap | None) -> dict:
    """L'(t), L''(t) of one chunk along W + tP (the exact line search; runs on a worker)."""
    if fmap is not None:
        Fb = fmap(Fb)
    xp = bk.namespace_of(Fb)
    W, P, t = WPt
    Y, cost = _row_costs(yb, swb, spec)
    o = Fb @ xp.asarray(W, dtype=Fb.dtype)
    z = Fb @ xp.asarray(P, dtype=Fb.dtype)
    d1, d2 = line_derivatives(o.astype(np.float64), z.astype(np.float64), xp.asarray(Y), xp.asarray(cost),
                          xp.asarray(t, dtype=np.float64))
    return {"n": int(Fb.shape[0]), "d1": np.asarray(bk.to_host(d1)), "d2": np.asarray(bk.to_host(d2))}


def _sum_stats(parts: list) -> dict:
    out = {key: (val.copy() if isinstance(val, np.ndarray) else val) for key, val in parts[0].items()}
    for st in parts[1:]:
        for key, val in st.items():
            out[key] = out[key] + val
    return out


def _delayed_chunks(A: Any) -> list:
    return list(A.to_delayed().ravel())


def _unsupported(est: Any, checks: dict) -> None:
    for name, (bad, why) in checks.items():
        if bad:
            raise ValueError(f"{type(est).__name__} with a dask array: {name} {why}")


def fit_llsvm(estimator: Any, X: Any, y: Any, sample_weight: Any = None, *, client: Any = None,
              cache_features: bool | str = "auto", callback: Callable[[dict], None] | None = None) -> Any:
    """Fit an :class:`~gpuksvm.llsvm.LLSVM` on a dask array without gathering the data.

    Steps (SPEC §1, Algorithm 1, distributed):

    1. one validation pass (finite values, labels) and γ resolved over all rows;
    2. landmarks Z exactly as the single-process fit draws them (k-means on the
       same random ``kmeans_sample`` rows, or random rows, with the same
       ``random_state``) — only those sampled rows are gathered; LLSVM2's
       labelled subset likewise;
    3. M = U Λ^{-1/2} on the driver; (Z, M) broadcast once to the workers;
    4. F = [K(X, Z) M, 1] per chunk on the workers, kept in worker memory
       (``cache_features``) or recomputed in every pass;
    5. the squared-hinge linear SVM on F by the single-process Newton solver
       (:func:`gpuksvm.solvers.linear.newton_solve` over a
       :class:`~gpuksvm.solvers.linear.ReducedOracle`: the same stopping rule
       and exact line search), one map-reduce pass per step returning only
       (k+1)×(k+1) and (k+1)-vectors per binary problem (one-vs-rest for more
       than two classes), and one returning two numbers per problem for each
       line-search step.  Class weights come from
       :func:`gpuksvm.validation.class_weight_vector` with the class counts
       weighted by ``sample_weight``, as in memory.

    The result equals the single-process fit (same ``random_state``) up to
    the linear solver's tolerance: both minimize the same strongly convex
    problem on the same features.

    Parameters
    ----------
    estimator : LLSVM (its parameters are used; it is fitted in place)
    X : dask array (n, d), NumPy or CuPy chunks
    y : dask array or array-like (n,)
    sample_weight : dask array or array-like (n,), optional
    client : distributed.Client, optional (default: the active client, or the
        local scheduler)
    cache_features : bool or "auto"
        Keep F (n × (k+1)) in worker memory between passes ("auto": when it
        is at most 4× the bytes of X per worker on average, or fits the
        default CPU budget times the number of workers).
    callback : callable(dict), optional
        Called after every Newton step (see :func:`gpuksvm.solvers.linear.newton_solve`).

    Returns
    -------
    estimator, fitted; ``estimator.dask_info_`` records the passes, the bytes
    each brought back to the driver, the Newton steps and timings.

    Notes
    -----
    Only the squared hinge loss (the primal Newton map-reduce) is supported;
    ``loss="hinge"`` and ``probability=True`` raise ``ValueError``.
    """
    dask, da = require_dask()

    est = estimator
    est._check_params()
    _unsupported(est, {
        "loss": (est.loss != "squared_hinge",
                 "must be 'squared_hinge' (the distributed solver is primal Newton map-reduce)"),
        "probability": (bool(est.probability), "=True is not supported (fit Platt scaling on a sample)"),
    })
    client = _client_or_default(client)
    ledger = Ledger()
    times: dict = {}
    t0 = time.perf_counter()
    X, y = row_chunked(X, y)
    sw = None
    if sample_weight is not None:
        _, sw = row_chunked(X, sample_weight)
    X, y, sw = _persist(client, X, y, sw)
    n, d = (int(s) for s in X.shape)
    classes = _check_finite_and_classes(X, y, client=client, ledger=ledger)
    if classes.shape[0] < 2:
        raise ValueError(f"The number of classes has to be greater than one; got {classes.shape[0]} class")
    _set_n_features(est, d)
    dev = est._device()
    dt = bk.resolve_dtype(est.dtype, dev)
    rs = check_random_state(est.random_state)
    with scheduler_context(client):
        kern = est._kernel_for(_host_chunks(X))
    size = est._sample_size()
    sample_cap = max(int(size or 0), int(est.n_landmarks), int(est.n_labeled), 20000)
    if size is None and n > sample_cap:
        raise ValueError(f"kmeans_sample=None would run k-means on all {n} rows on the driver; "
                         "with a dask array set kmeans_sample (e.g. 20000)")
    # the single-process fit's random sample (same random_state): only those rows travel
    idx = est._sample_indices(n, rs)
    idx = np.arange(n) if idx is None else idx
    Xs = _Rows(X, client=client, ledger=ledger, max_rows=sample_cap, label="sample rows")[idx]
    ys = _Rows(y, client=client, ledger=ledger, max_rows=sample_cap, label="sample labels")[idx]
    Xs = bk.to_device(Xs, dev, dt)
    nmap, _ = est._build_map(Xs, np.asarray(ys).ravel(), kern, dev, dt, rs)
    times["landmarks"] = time.perf_counter() - t0
    times["map"] = 0.0

    # the linear SVM on F = [K(X,Z)M, s] (LinearSVM: fit_intercept, intercept_scaling)
    t0 = time.perf_counter()
    svm = est._linear_svm()
    scaling = float(getattr(svm, "intercept_scaling", 1.0)) if getattr(svm, "fit_intercept", True) else None
    fmap = _FeatureMap(np.asarray(bk.to_host(nmap.landmarks)), np.asarray(bk.to_host(nmap.map)),
                       nmap.kernel, np.dtype(dt), scaling)
    k = fmap.map.shape[1]
    p = k + (0 if scaling is None else 1)
    fmap_d = dask.delayed(fmap, pure=True)
    meta = getattr(X, "_meta", np.empty((0, 0)))
    xp_meta = bk.namespace_of(meta)
    F = X.map_blocks(_features_block, fmap_d, chunks=(X.chunks[0], (p,)), dtype=dt,
                     meta=xp_meta.empty((0, 0), dtype=dt))
    if cache_features == "auto":
        from ._dask import n_workers

        f_bytes = n * p * np.dtype(dt).itemsize
        cache = f_bytes <= max(4 * X.nbytes, bk.get_config()["cpu_memory_budget"] * n_workers(client))
    else:
        cache = bool(cache_features)
    if cache:
        (F,) = _persist(client, F)
    src = F if cache else X
    times["features"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_problems = 1 if classes.shape[0] == 2 else classes.shape[0]     # one-vs-rest
    counts, weighted, sw_max = _class_counts(classes, y, sw, client=client, ledger=ledger)
    cw = class_weight_vector(est.class_weight, classes, weighted)
    # extreme costs as in memory, with max‖F̃ᵢ‖² bounded from max‖xᵢ‖² (no pass forming F)
    sq_norm = 0.0 if kern.constant_diag is not None else _max_row_sq_norm(X, client=client, ledger=ledger)
    top = sw_max * (1.0 if cw is None else float(cw.max()))
    r = nmap.feature_sq_norm_bound(sq_norm) + (scaling or 0.0) ** 2
    log_scale = extreme_cost_scale(float(est.C), top, n, r, owner=type(est).__name__)
    spec = {"classes": classes, "C": float(est.C), "class_weight": cw, "log_scale": log_scale}
    fm_arg = None if cache else fmap_d
    src_chunks = _delayed_chunks(src)
    y_chunks = _delayed_chunks(y)
    sw_chunks = _delayed_chunks(sw) if sw is not None else [None] * len(y_chunks)
    stats_fn = dask.delayed(_sqhinge_stats, pure=True)
    line_fn = dask.delayed(_sqhinge_line, pure=True)

    def reduce(fn, arg, extra, label):
        parts = [fn(fb, yb, wb, arg, extra, fm_arg) for fb, yb, wb in zip(src_chunks, y_chunks, sw_chunks)]
        (st,) = compute(tree_reduce(parts, _sum_stats), client=client, ledger=ledger, label=label)
        if st["n"] != n:
            raise DistributedFitError(f"a Newton pass summed {st['n']} rows instead of {n}; "
                                      "the cluster lost data and no model was produced")
        return st

    def stats(W: np.ndarray, active: np.ndarray) -> dict:
        return reduce(stats_fn, dask.delayed(W, pure=True), dask.delayed({**spec, "active": active}, pure=True),
                      "newton")

    def line_stats(W: np.ndarray, P: np.ndarray, t: np.ndarray) -> tuple:
        st = reduce(line_fn, dask.delayed((W, P, t), pure=True), dask.delayed(spec, pure=True), "line search")
        return st["d1"], st["d2"]

    npos = counts[1:2] if n_problems == 1 else counts
    oracle = ReducedOracle(stats, line_stats, dim=p, m=n_problems, npos=npos, n=n, scale=scaling,
                           dtype=dt)
    sol = newton_solve(oracle, tol=float(est.tol), max_iter=int(est.max_iter), callback=callback)
    times["svm"] = time.perf_counter() - t0
    svm._from_solution(sol, classes, k, "newton-dask", dev, dt, log_scale)
    svm.n_passes_ = int(sol.info["n_passes"])
    est._set_fitted(nmap, svm, dev, dt, times)
    _record_info(est, ledger, client, {"newton_iter": sol.n_iter, "newton_converged": sol.converged,
                                       "n_passes": sol.info["n_passes"],
                                       "cache_features": cache, "n_chunks": len(y_chunks),
                                       "state_bytes_per_problem": (p * p + p + 1) * 8})
    return est


def _class_counts(classes: np.ndarray, y: Any, sw: Any, *, client: Any,
                  ledger: Ledger) -> tuple[np.ndarray, np.ndarray, float]:
    """Rows per class, their summed sample weights (the counts of
    :func:`gpuksvm.validation.class_counts`, so "balanced" weights them as in memory) and
    the largest sample weight, in one pass; negative or non-finite weights are refused."""
    _, da = require_dask()
    yh = _host_chunks(y)
    parts = [da.sum(yh == c) for c in classes]
    if sw is not None:
        swh = _host_chunks(sw)
        parts += [da.sum(da.where(yh == c, swh, 0.0)) for c in classes]
        parts += [da.min(swh), da.max(swh)]
    got = np.asarray(compute(*parts, client=client, ledger=ledger, label="class counts"), dtype=np.float64)
    m = classes.shape[0]
    if sw is None:
        return got[:m], got[:m], 1.0
    lo, hi = got[-2], got[-1]
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0:
        raise ValueError(f"sample_weight must be finite and non-negative, got values in [{lo:g}, {hi:g}]")
    return got[:m], got[m:2 * m], float(hi)


def _block_max_sq_norm(Xb: Any) -> np.ndarray:
    return np.asarray([max_row_sq_norm(Xb)])


def _max_row_sq_norm(X: Any, *, client: Any, ledger: Ledger) -> float:
    """max‖xᵢ‖² over the chunks of X (one pass; one number comes back)."""
    _, da = require_dask()
    parts = X.map_blocks(_block_max_sq_norm, chunks=((1,) * X.numblocks[0],), drop_axis=1,
                         dtype=np.float64, meta=np.empty((0,)))
    (best,) = compute(parts.max(), client=client, ledger=ledger, label="row norms")
    return float(bk.to_host(best))


# =========================================================================== prediction
_MOVED: dict = {}


def _estimator_for_chunk(est: Any, Xb: Any) -> Any:
    """The estimator with its fitted arrays on the chunk's device (cached per worker process)."""
    if not bk.is_gpu_array(Xb) or not hasattr(est, "_fitted_device"):
        return est
    dev = bk.device_of(Xb)
    if est._fitted_device() == dev:
        return est
    key = (id(est), str(dev))
    hit = _MOVED.get(key)
    if hit is None or hit[0] is not est:
        if len(_MOVED) > 16:
            _MOVED.clear()
        hit = (est, est._moved_copy(dev))
        _MOVED[key] = hit
    return hit[1]


def _apply_block(Xb: Any, est: Any, method: str) -> Any:
    out = getattr(_estimator_for_chunk(est, Xb), method)(Xb)
    if bk.is_gpu_array(Xb) and not bk.is_gpu_array(out):
        out = bk.to_device(np.asarray(out), bk.device_of(Xb))
    return out


def map_method(estimator: Any, X: Any, method: str) -> Any:
    """``estimator.<method>`` applied to every row chunk of a dask array → dask array.

    The fitted estimator is shipped once per worker; each chunk's result has
    the chunk's rows (1-D or 2-D, as the method returns on a NumPy array) and
    stays in the chunk's array kind (NumPy or CuPy).
    """
    dask, da = require_dask()
    X, _ = row_chunked(X)
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and X.shape[1] != expected:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} "
                         f"is expecting {expected} features as input.")
    probe = np.asarray(bk.to_host(getattr(estimator, method)(np.zeros((1, X.shape[1])))))
    meta_mod = bk.namespace_of(getattr(X, "_meta", np.empty(0)))
    meta = meta_mod.empty((0,) * probe.ndim, dtype=probe.dtype) if probe.dtype != object \
        else np.empty((0,) * probe.ndim, dtype=object)
    est_d = dask.delayed(estimator, pure=True)
    if probe.ndim == 1:
        return X.map_blocks(_apply_block, est_d, method, chunks=(X.chunks[0],), drop_axis=1,
                            dtype=probe.dtype, meta=meta)
    return X.map_blocks(_apply_block, est_d, method, chunks=(X.chunks[0], probe.shape[1:]),
                        dtype=probe.dtype, meta=meta)


def _lazy_method(method: str, doc: str) -> Callable[[Any, Any], Any]:
    """A module-level ``f(estimator, X)`` = lazy ``estimator.<method>`` over a dask array."""

    def apply(estimator: Any, X: Any) -> Any:
        check_is_fitted(estimator)
        return map_method(estimator, X, method)

    apply.__name__ = apply.__qualname__ = method
    apply.__doc__ = doc
    return apply


predict = _lazy_method("predict", "Lazy ``estimator.predict`` over a dask array (a dask array of labels).")
decision_function = _lazy_method("decision_function", "Lazy ``estimator.decision_function`` over a dask array.")
transform = _lazy_method("transform",
                         "Lazy ``estimator.transform`` over a dask array (LLSVM: F = K(X, Z) M per chunk).")
predict_proba = _lazy_method("predict_proba", "Lazy ``estimator.predict_proba`` over a dask array.")
predict_log_proba = _lazy_method("predict_log_proba", "Lazy ``estimator.predict_log_proba`` over a dask array.")
score_samples = _lazy_method("score_samples",
                             "Lazy ``estimator.score_samples`` over a dask array (one-class models).")


# =========================================================================== SVI
def _svi_device(chunk: Any, device: Any, dtype: Any) -> tuple[bk.Device, np.dtype]:
    """Where a worker computes: the chunk's GPU, else the estimator's device setting."""
    dev = bk.device_of(chunk) if bk.is_gpu_array(chunk) else bk.resolve_device(device)
    return dev, bk.resolve_dtype(dtype, dev)


def _svi_sub_svm(Xs: Any, ys: np.ndarray, kernel: Kernel, C: float, opts: dict) -> dict:
    """One SMO problem on one worker: a sub-SVM (SVI step 2) or a problem's exact SVM,
    as :func:`~gpuksvm.solvers.svi.solve_record` (support indices local to ``Xs``); its
    convergence is reported once per fit, on the client (:func:`~gpuksvm.solvers.svi.assemble`)."""
    dev, dt = _svi_device(Xs, opts["device"], opts["dtype"])
    Xs = bk.to_device(Xs, dev, dt)
    (r,) = solve_batched(Xs, ys, [np.arange(Xs.shape[0], dtype=np.int64)], kernel, C,
                         tol=opts["tol"], max_iter=opts["max_iter"], device=dev, dtype=dt, n_jobs=1,
                         warn_convergence=False)
    return solve_record(r)


def _svi_keys(Xb: Any, V: np.ndarray) -> np.ndarray:
    """The row-order keys of one chunk (:func:`gpuksvm.solvers.svi_steps.project_rows`)."""
    return project_rows(Xb, V)


def _svi_ensemble(XU: Any, W: np.ndarray, bbar: np.ndarray) -> dict:
    """The averaged sub-model (union of SVs, coefficient matrix), built on a worker."""
    return {"XU": np.asarray(bk.to_host(XU)), "W": W, "bbar": bbar}


def _svi_candidates(Xb: Any, yb: Any, start: int, ens: dict, spec: dict) -> list:
    """Averaged decision values (eq. 1) of one chunk and its best margin candidates (step 4).

    Per binary problem the chunk returns the rows that can be selected by
    :func:`gpuksvm.solvers.svi_steps.select_margin_rows` on all rows: its ``L``
    rows closest to the margin (L = rows in the band, capped at ``max_sv``, at
    least ``min_sv``) and the closest ``min_sv // 2`` of each class, with counts.
    """
    dev, dt = _svi_device(Xb, spec["device"], spec["dtype"])
    Xd = bk.to_device(Xb, dev, dt)
    P = len(spec["problems"])
    F = submodel_values(Xd, None, bk.to_device(ens["XU"], dev, dt), ens["W"], ens["bbar"],
                        spec["kernel"], dt).reshape(Xb.shape[0], P)
    yidx = np.searchsorted(spec["classes"], np.asarray(bk.to_host(yb)).ravel())
    tol, min_sv, max_sv = spec["margin_tol"], spec["min_sv"], spec["max_sv"]
    per_class = max(1, int(min_sv) // 2)
    out = []
    for p, (pos, neg) in enumerate(spec["problems"]):
        rows, yp = problem_rows(yidx, pos, neg)
        margin = yp * F[rows, p]
        dist = np.abs(margin - 1.0)
        order = np.argsort(dist, kind="stable")
        n_band = int(np.count_nonzero(dist <= tol))
        take = n_band if max_sv is None else min(n_band, int(max_sv))
        take = max(take, int(min_sv))
        keep = np.zeros(rows.shape[0], dtype=bool)
        keep[order[:take]] = True
        for label in (-1.0, 1.0):
            keep[order[yp[order] == label][:per_class]] = True
        cand = np.flatnonzero(keep)
        out.append({"rows": start + rows[cand], "margin": margin[cand], "y": yp[cand],
                    "n_band": n_band, "n_correct": int(np.count_nonzero(margin > 0)),
                    "n_rows": int(rows.shape[0])})
    return out


def _svi_solve(Xs: Any, ys: np.ndarray, kernel: Kernel, C: float, opts: dict) -> tuple[np.ndarray, float]:
    """The s×s closed-form solve of SVI step 5 (eq. 7, 9) on one worker."""
    dev, dt = _svi_device(Xs, opts["device"], opts["dtype"])
    return solve_margin_problem(bk.to_device(Xs, dev, dt), ys, kernel, C, dt)


def _svi_check(XH: Any, XU: Any, W: np.ndarray, b_sub: np.ndarray, XM: Any, beta: np.ndarray,
               b: float, inside: np.ndarray, yH: np.ndarray, is_margin: np.ndarray, kernel: Kernel,
               opts: dict) -> dict:
    """The ensemble check of one problem on one worker (:func:`gpuksvm.solvers.svi_steps.ensemble_check`):
    its sub-models and its closed-form model scored on the check rows ``XH``."""
    dev, dt = _svi_device(XH, opts["device"], opts["dtype"])
    XH = bk.to_device(XH, dev, dt)
    F = submodel_values(XH, None, bk.to_device(XU, dev, dt), W, b_sub, kernel, dt)
    f = submodel_values(XH, None, bk.to_device(XM, dev, dt), beta[:, None], np.array([b]), kernel, dt)
    return ensemble_check(F, inside, yH, f[:, 0], is_margin)


def _svi_exact_tasks(X: Any, problems: list, which: list, rows: list, labels: list, rank: np.ndarray,
                     sub_fn: Any, kern_d: Any, C: float, opts: dict) -> tuple[list, list]:
    """Exact-SVM tasks of the problems ``which`` (their rows in the order-independent
    order, gathered on one worker each) and those row orders."""
    tasks, orders = [], []
    for p in which:
        at = np.argsort(rank[rows[p]], kind="stable")
        S = rows[p][at]
        tasks.append(sub_fn(X[S], labels[p][at], kern_d, C, opts))
        orders.append(S)
    return tasks, orders


def fit_svi(estimator: Any, X: Any, y: Any, *, client: Any = None) -> Any:
    """Fit an :class:`~gpuksvm.svi.SVI` on a dask array (SPEC §3, distributed).

    The same algorithm as the single-process fit (:mod:`gpuksvm.solvers.svi`,
    sharing its steps), without gathering X:

    1. one pass validates X and finds the classes; the labels and two row-order
       keys per row (three numbers per row, never the features) are gathered to
       draw the same subsets as the single-process fit (same ``random_state``);
    2. every sub-SVM is one task: its rows are gathered on the worker that
       trains it, so the sub-SVMs train on different workers in parallel; a
       problem too small for an ensemble is one exact-SVM task;
    3. the averaged decision values f̄ (eq. 1) are computed chunk-wise against
       the union of the sub-models' SVs (shipped once to every worker);
    4. every chunk returns only its best margin candidates; the driver merges
       them with :func:`~gpuksvm.solvers.svi_steps.select_margin_rows` — the
       same rows as a selection over all rows;
    5. each problem's s×s closed-form solve (eq. 9) runs as one task;
    6. each problem's ensemble check runs as one task on its check rows
       (≤ 10,000); a problem that fails gets an exact-SVM task (its rows
       gathered on one worker).

    Parameters
    ----------
    estimator : SVI (fitted in place)
    X : dask array (n, d); y : dask array or array-like (n,)
    client : distributed.Client, optional

    Returns
    -------
    estimator, fitted; ``estimator.dask_info_`` records the passes and bytes.

    Notes
    -----
    ``probability=True`` raises ``ValueError`` (the Platt cross-validation
    would refit on every fold; fit the probabilities on an in-memory sample).
    """
    dask, da = require_dask()
    est = estimator
    est._check_params()
    _unsupported(est, {
        "probability": (bool(est.probability), "=True is not supported (fit Platt scaling on a sample)"),
    })
    params = est._solver_params()
    client = _client_or_default(client)
    ledger = Ledger()
    times: dict = {}
    t0 = time.perf_counter()
    X, y = row_chunked(X, y)
    X, y = _persist(client, X, y)
    n, d = (int(s) for s in X.shape)
    _check_finite_and_classes(X, None, client=client, ledger=ledger)
    rs = check_random_state(params.random_state)   # the draws of the single-process fit, in order
    V = order_directions(d, rs)
    keys_fn = dask.delayed(_svi_keys, pure=True)
    y_host, keys = compute(_host_chunks(y), [keys_fn(xb, V) for xb in _delayed_chunks(X)],
                           client=client, ledger=ledger, label="labels and row-order keys")
    y_host = np.asarray(y_host).ravel()
    keys = np.concatenate(keys)
    classes, yidx = encode_classes(y_host)
    _set_n_features(est, d)
    dev = est._device()
    dt = bk.resolve_dtype(est.dtype, dev)
    with scheduler_context(client):
        kernel = make_kernel(est.kernel, est.gamma, est.degree, est.coef0, _host_chunks(X))
    C = params.C
    plan = plan_problems(yidx, keys, params, rs)
    orders, rank, problems = plan.orders, plan.rank, plan.problems
    rows, labels, subsets, sub_info = plan.rows, plan.labels, plan.subsets, plan.sub_info
    ens_p = [p for p in range(len(problems)) if subsets[p]]
    small_p = [p for p in range(len(problems)) if not subsets[p]]
    times["subsets"] = time.perf_counter() - t0

    # step 2: every sub-SVM and every exact problem is an independent task
    t0 = time.perf_counter()
    opts = {"device": est.device, "dtype": est.dtype, "tol": params.tol, "max_iter": params.max_iter}
    sub_fn = dask.delayed(_svi_sub_svm, pure=True)
    kern_d = dask.delayed(kernel, pure=True)
    yfull = np.zeros(n)
    sub_tasks, sub_rows = [], []
    for p in ens_p:
        yfull[rows[p]] = labels[p]
        ranked = [S[np.argsort(rank[S], kind="stable")] for S in subsets[p]]
        sub_rows.append(ranked)
        sub_tasks.append([sub_fn(X[S], yfull[S], kern_d, C, opts) for S in ranked])
    ex_tasks, ex_rows = _svi_exact_tasks(X, problems, small_p, rows, labels, rank, sub_fn, kern_d, C, opts)
    results, ex_results = compute(sub_tasks, ex_tasks, client=client, ledger=ledger, label="sub-SVMs")
    exact = dict()
    for p, r, S in zip(small_p, ex_results, ex_rows):
        r["support"] = S[r["support"]]
        exact[p] = r
        sub_info[p].update(solver_summary([r]), n_support=[])
    models = []
    for p, res, ranked in zip(ens_p, results, sub_rows):
        for r, S in zip(res, ranked):
            r["support"] = S[r["support"]]          # local → global row indices
        sub_info[p].update(solver_summary(res), n_support=[int(r["support"].size) for r in res])
        models.append([(r["support"], r["dual_coef"], r["intercept"]) for r in res])
    times["sub_svms"] = time.perf_counter() - t0

    # step 3: f̄ (eq. 1) chunk-wise against the union of the sub-models' SVs
    t0 = time.perf_counter()
    margin_rows: list = [None] * len(problems)
    betas: list = [None] * len(problems)
    intercepts: list = [0.0] * len(problems)
    spec = {"problems": [problems[p] for p in ens_p], "classes": classes, "kernel": kernel,
            "device": est.device, "dtype": est.dtype, "margin_tol": params.margin_tol,
            "min_sv": params.min_margin_sv, "max_sv": params.max_margin_sv}
    if ens_p:
        union, W, bbar = average_submodels(models)
        ens = dask.delayed(_svi_ensemble, pure=True)(X[union], W, bbar)
        spec_d = dask.delayed(spec, pure=True)
        starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
        cand_fn = dask.delayed(_svi_candidates, pure=True)
        parts = [cand_fn(xb, yb, int(s0), ens, spec_d)
                 for xb, yb, s0 in zip(_delayed_chunks(X), _delayed_chunks(y), starts)]
        (chunk_cands,) = compute(parts, client=client, ledger=ledger, label="margin candidates")
    times["ensemble"] = time.perf_counter() - t0

    # steps 4-5: merge the candidates, one s×s solve per problem on a worker
    t0 = time.perf_counter()
    solve_fn = dask.delayed(_svi_solve, pure=True)
    solves = []
    for k, p in enumerate(ens_p):
        cs = [c[k] for c in chunk_cands]
        if sum(c["n_rows"] for c in cs) != rows[p].shape[0]:
            raise DistributedFitError("the margin pass did not see every row of a binary problem")
        cand_rows = np.concatenate([c["rows"] for c in cs])
        margin = np.concatenate([c["margin"] for c in cs])
        yp = np.concatenate([c["y"] for c in cs])
        sel, info = select_margin_rows(margin, yp, params.margin_tol, min_sv=params.min_margin_sv,
                                       max_sv=params.max_margin_sv)
        info["n_candidates"] = int(sum(c["n_band"] for c in cs))
        sub_info[p].update(info)
        sub_info[p]["ensemble_train_accuracy"] = float(sum(c["n_correct"] for c in cs)
                                                       / max(sum(c["n_rows"] for c in cs), 1))
        order = np.argsort(cand_rows[sel], kind="stable")   # ascending rows, as in memory
        glob = cand_rows[sel][order]
        margin_rows[p] = glob
        solves.append(solve_fn(X[glob], yp[sel][order], kern_d, C, opts))
    (solved,) = compute(solves, client=client, ledger=ledger, label="closed-form solves")
    for p, (beta, b) in zip(ens_p, solved):
        betas[p], intercepts[p] = beta, b
    times["solve"] = time.perf_counter() - t0

    # the check of every ensemble, one task each on its check rows; failures
    # get the exact SVM (one task each)
    t0 = time.perf_counter()
    if params.ensemble_check and ens_p:
        check_fn = dask.delayed(_svi_check, pure=True)
        checks = []
        for k, p in enumerate(ens_p):
            h = check_rows(rows[p], orders)
            U, Wp, bp = stack_submodels(models[k])
            inside = np.stack([np.isin(h, S) for S in subsets[p]], axis=1)
            yH = labels[p][np.searchsorted(rows[p], h)]
            checks.append(check_fn(X[h], X[U], Wp, bp, X[margin_rows[p]], betas[p], intercepts[p],
                                   inside, yH, np.isin(h, margin_rows[p]), kern_d, opts))
        (checked,) = compute(checks, client=client, ledger=ledger, label="ensemble checks")
        for p, result in zip(ens_p, checked):
            sub_info[p]["check"] = result
            if not result["passed"]:
                sub_info[p]["exact"] = "check"
        failed = [p for p in ens_p if sub_info[p].get("exact") == "check"]
        if failed:
            ex_tasks, ex_rows = _svi_exact_tasks(X, problems, failed, rows, labels, rank, sub_fn, kern_d,
                                                 C, opts)
            (ex_results,) = compute(ex_tasks, client=client, ledger=ledger, label="exact fallback")
            for p, r, S in zip(failed, ex_results, ex_rows):
                r["support"] = S[r["support"]]
                exact[p] = r
                sub_info[p]["exact_solver"] = solver_summary([r])
    times["check"] = time.perf_counter() - t0
    for p, r in exact.items():
        margin_rows[p], betas[p], intercepts[p] = r["support"], r["dual_coef"], r["intercept"]

    model = assemble(problems, subsets, sub_info, margin_rows, betas, intercepts, params, times)
    (sv,) = compute(X[model.support], client=client, ledger=ledger, label="support vectors")
    est._set_model(model, classes, yidx, kernel, np.asarray(bk.to_host(sv)), dev, dt)
    _record_info(est, ledger, client, {"n_chunks": X.numblocks[0],
                                       "n_union_sv": int(union.size) if ens_p else 0})
    return est


# =========================================================================== CVM
def _cvm_chunk_min(Xb: Any, yb: Any, xsb: Any, mb: Any, start: int, st: dict) -> tuple:
    """Furthest-point candidate of one chunk: min of s (eq. 12–13), its row and index."""
    from .solvers.meb import candidate_scores

    xp = bk.namespace_of(Xb)
    dt = st["dtype"]
    m = Xb.shape[0]
    if m == 0:
        return np.inf, -1, None
    Xb = xp.asarray(Xb, dtype=dt)
    self_term = xp.zeros(m, dtype=dt)
    core, vals = st["core"], st["self"]
    here = (core >= start) & (core < start + m)
    if here.any():
        self_term[xp.asarray(core[here] - start)] = xp.asarray(vals[here], dtype=dt)
    s = candidate_scores(Xb, _on_device_of(st["Z"], Xb).astype(dt, copy=False),
                         _on_device_of(st["coef"], Xb).astype(dt, copy=False), st["kernel"],
                         b=st["b"], y=None if yb is None else xp.asarray(yb, dtype=dt),
                         self_term=self_term, xscale=None if xsb is None else xp.asarray(xsb, dtype=dt))
    if mb is not None:
        s = xp.where(xp.asarray(mb), s, xp.inf)
    k = int(xp.argmin(s))
    return float(s[k]), int(start + k), np.asarray(bk.to_host(Xb[k]))


def _make_dask_scanner(rows: "_Rows", y: Any, kernel: Kernel, xscale: Any, C: float,
                       dtype: Any, device: Any = None, capacity: int = 64):
    """A furthest-point scanner over a dask array (same interface as ``meb.make_scanner``)."""
    from .solvers.meb import HostScanner

    class _DaskScanner(HostScanner):
        """HostScanner whose rows live in dask chunks on the workers.

        ``exact_min`` is a map-reduce: every chunk returns its own minimum of
        s (its local furthest point, eq. 13) and that row; the driver keeps
        the smallest (ties to the smallest row index, as the host scan).  The
        sampled search (``group_min``) fetches only the sampled rows.  Fetched
        rows are cached so adding the found point to the core set costs no
        extra pass.
        """

        xp = np

        def __init__(self) -> None:
            super().__init__(rows, y, kernel, None if xscale is None else np.asarray(xscale),
                             C, dtype, capacity)
            _, da = require_dask()
            X = rows._X
            self._cache: dict = {}
            self._chunks = X.chunks[0]
            self._starts = np.concatenate([[0], np.cumsum(self._chunks)[:-1]]).astype(np.int64)
            self._masks: dict = {}
            per_row = []
            for vec in (self.y, self.xscale):
                per_row.append(None if vec is None else
                               rows._persist(da.from_array(np.asarray(vec, dtype=self.dtype),
                                                           chunks=(self._chunks,))))
            self._y_d, self._xs_d = per_row

        def rows(self, idx: Any):
            idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
            missing = np.unique(idx[[int(i) not in self._cache for i in idx]])
            if missing.size:
                got = self.X[missing]
                if len(self._cache) + missing.size > 8192:
                    self._cache.clear()
                for i, r in zip(missing, got):
                    self._cache[int(i)] = r
            out = np.stack([self._cache[int(i)] for i in idx]) if idx.size else \
                np.empty((0, self.d))
            return np.asarray(out, dtype=self.dtype).reshape(-1, self.d)

        def _mask(self, idx: np.ndarray):
            key = (id(idx), idx.shape[0])
            if key not in self._masks:
                _, da = require_dask()
                mask = np.zeros(self.n, dtype=bool)
                mask[idx] = True
                self._masks = {key: (idx, rows._persist(da.from_array(mask, chunks=(self._chunks,))))}
            return self._masks[key][1]

        def exact_min(self, idx: np.ndarray | None, coef: Any, b: float) -> tuple[float, int]:
            dask, _ = require_dask()
            core = np.asarray(self.core_idx, dtype=np.int64)
            st = dask.delayed({"Z": np.asarray(self.Z), "coef": np.asarray(bk.to_host(coef)),
                               "b": float(b), "core": core,
                               "self": np.asarray(self.self_term[core]), "kernel": self.kernel,
                               "dtype": self.dtype}, pure=True)
            fn = dask.delayed(_cvm_chunk_min, pure=True)
            cols = [_delayed_chunks(rows._X)]
            for extra in (self._y_d, self._xs_d, None if idx is None else self._mask(idx)):
                cols.append(_delayed_chunks(extra) if extra is not None else [None] * len(cols[0]))
            parts = [fn(xb, yb, xs, mb, int(s0), st)
                     for xb, yb, xs, mb, s0 in zip(*cols, self._starts)]
            (res,) = compute(parts, client=rows._client, ledger=rows._ledger, label="furthest point")
            best, besti = np.inf, -1
            for s, i, row in res:       # chunks in row order: strict < keeps the first minimum
                if s < best:
                    best, besti = s, i
                    self._cache[int(i)] = row
            return best, besti

    return _DaskScanner()


def fit_cvm(estimator: Any, X: Any, y: Any = None, *, client: Any = None) -> Any:
    """Fit a :class:`~gpuksvm.cvm.CVM` or :class:`~gpuksvm.cvm.OneClassCVM` on a dask array.

    The core-set loop is the estimator's own (same initial pair, annealing,
    warm-started simplex SMO on the driver, same random draws); only the
    furthest-point search touches the data:

    * exact search (``sample_size=None``, or small problems): every chunk
      returns its local furthest candidate (min of eq. 13's s and that row);
      the driver keeps the best — one pass per core vector added;
    * sampled search: the ``sample_size`` sampled rows of each try are fetched
      (the same rows the single-process fit samples), scored on the driver.

    Per-row scalars (labels, and 1/√κ(x,x) with ``normalize=True``) are
    gathered once; the features never are.  The result equals the
    single-process fit with the same ``random_state``.

    Parameters
    ----------
    estimator : CVM or OneClassCVM (fitted in place)
    X : dask array (n, d); y : labels (ignored for the one-class task)
    client : distributed.Client, optional

    Returns
    -------
    estimator, fitted; ``estimator.dask_info_`` records the passes and bytes.
    """
    require_dask()
    from .solvers.meb import kernel_scale

    est = estimator
    est._check_params()
    one_class = getattr(est, "_task", "") == "one_class" or getattr(est, "task", "") == "one_class"
    client = _client_or_default(client)
    ledger = Ledger()
    rs = check_random_state(est.random_state)
    X, y = row_chunked(X, None if one_class else y)
    X, y = _persist(client, X, y)
    n, d = (int(s) for s in X.shape)
    _check_finite_and_classes(X, None, client=client, ledger=ledger)
    _set_n_features(est, d)
    dev = est._device()
    dt = bk.resolve_dtype(est.dtype, dev)
    Xh = _host_chunks(X)
    with scheduler_context(client):
        kernel = est._make_kernel(Xh)
    xscale = None
    if est.normalize and kernel.constant_diag is None:
        _, da = require_dask()
        xs = Xh.map_blocks(lambda b: kernel_scale(np.asarray(b, dtype=dt), kernel, True),
                           drop_axis=1, dtype=dt, meta=np.empty((0,), dtype=dt))
        (xscale,) = compute(xs, client=client, ledger=ledger, label="kernel scales")
        xscale = np.asarray(xscale, dtype=dt)
    rows = _Rows(X, client=client, ledger=ledger, max_rows=0, label="rows")
    rows.__gpuksvm_scanner__ = lambda *a, **k: _make_dask_scanner(rows, *a, **k)
    t0 = time.perf_counter()
    yi = None
    if not one_class:
        (y_host,) = compute(_host_chunks(y), client=client, ledger=ledger, label="labels")
        est.classes_, yi = encode_classes(np.asarray(y_host).ravel())
    est._fit_rows(rows, yi, kernel, xscale, dev, dt, rs)
    _record_info(est, ledger, client, {"n_chunks": len(X.chunks[0]), "seconds": time.perf_counter() - t0})
    rows._release()
    return est
