"""LLSVM on Dask (SPEC §1, Algorithm 1): landmarks from a sample, Newton by map-reduce.

:class:`DaskRows` is the Dask row source of LLSVM's one fit
(:func:`gpuksvm.solvers.nystrom.llsvm.fit_llsvm_path`): Z and M = U Λ^{-1/2} are
built on the driver from the same random sample as
the single-process fit; F = K(X, Z) M is formed per chunk on the workers (and
kept there, ``persist``); the single-process primal Newton solver
(:func:`gpuksvm.solvers.linear.newton.newton_solve`, same stopping rule and exact
line search) runs over a map-reduce oracle: every pass returns only the k×k
F_Iᵀ F_I, the k-vector gradient terms and the loss per binary problem (summed
in a tree on the workers), each line-search step two numbers per problem.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterator

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.nystrom.llsvm import LinearSpec, LLSVMRows, NewtonProblem
from gpuksvm.solvers.nystrom.maps import MapParams, NystromMap, feature_map
from gpuksvm.solvers.cost_scaling import extreme_cost_scale, scaled_costs
from gpuksvm.solvers.linear.problem import ovr_targets
from gpuksvm.solvers.linear.newton import ReducedOracle, line_derivatives
from gpuksvm.solvers.row_order import RowHasher, merge_smallest, smallest_keys
from gpuksvm.array.validation import class_weight_vector, max_row_sq_norm
from gpuksvm.scaleout.common import (
    RemoteRows,
    check_finite_and_classes,
    client_or_default,
    delayed_chunks,
    host_chunks,
    on_device_of,
    persist,
)
from gpuksvm.scaleout.runtime import (
    DistributedFitError,
    Ledger,
    compute,
    n_workers,
    on_workers,
    require_dask,
    row_chunked,
    scheduler_context,
    tree_reduce,
)

__all__ = ["fit_llsvm", "DaskRows"]


def _chunk_sample(Xb: Any, yb: Any, start: int, hasher: RowHasher, size: int | None) -> tuple:
    """(keys, labels, positions) of the ``size`` rows of one chunk with the smallest content hash
    keys (:class:`~gpuksvm.solvers.row_order.RowHasher`), merged by
    :func:`~gpuksvm.solvers.row_order.merge_smallest` into the single-process fit's sample."""
    keys = hasher.keys(Xb)
    yb = np.asarray(bk.to_host(yb)).ravel()
    positions = start + np.arange(keys.shape[0], dtype=np.int64)
    keep = smallest_keys(keys, size, yb, positions)
    return keys[keep], yb[keep], positions[keep]


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
        Z = on_device_of(self.landmarks, Xb)
        M = on_device_of(self.map, Xb)
        Xb = Xb.astype(self.dtype, copy=False)
        F = feature_map(Xb, Z, M.astype(self.dtype, copy=False), self.kernel)
        if self.intercept_scaling is None:
            return F
        ones = xp.full((F.shape[0], 1), self.intercept_scaling, dtype=self.dtype)
        return xp.concatenate([F, ones], axis=1)

    def row_bytes(self) -> int:
        """Scratch bytes of one row mapped: its input row in ``dtype``, its kernel row against
        the k landmarks, its feature row (and the copy that appends the intercept column)."""
        k, p = self.map.shape
        copies = 1 if self.intercept_scaling is None else 2
        return (self.landmarks.shape[1] + k + copies * (p + 1)) * self.dtype.itemsize


def _features_block(Xb: Any, fmap: _FeatureMap) -> Any:
    return fmap(Xb)


def _row_costs(yb: np.ndarray, swb: np.ndarray | None, spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """Targets Y (m, P) in {−1, +1} and costs c (m, P) of a chunk (host): the
    one-vs-rest rules of :func:`~gpuksvm.solvers.linear.problem.ovr_targets` (the
    single-process fit's), times C, extreme costs scaled as in memory
    (:func:`~gpuksvm.estimators.linear_svm.scaled_costs`)."""
    classes = spec["classes"]
    idx = np.searchsorted(classes, np.asarray(bk.to_host(yb)).ravel())
    sw = None if swb is None else np.asarray(bk.to_host(swb), dtype=np.float64).ravel()
    Y, S = ovr_targets(idx, classes.shape[0], class_weight=spec["class_weight"], sample_weight=sw)
    C, S = scaled_costs(spec["C"], S, spec["log_scale"])
    return Y, C * S


def _pass_blocks(Xb: Any, fmap: _FeatureMap | None, per_row: int, fixed: int, what: str) -> Iterator[tuple]:
    """Row blocks of one chunk sized to the task's memory budget: ``(rows, F_rows)``.

    ``per_row``: the pass's scratch bytes per row, to which recomputing the features adds
    theirs (:meth:`_FeatureMap.row_bytes`); ``fixed``: the bytes the pass holds whatever the
    block (its sums), taken off the budget first.  A chunk larger than the budget is thus
    worked in several blocks instead of exceeding it."""
    m = int(Xb.shape[0])
    dev = bk.device_of(Xb)
    if fmap is not None:
        per_row += fmap.row_bytes()
    rows = max(bk.plan_rows(m, per_row, dev, budget=max(bk.memory_budget(dev) - fixed, 1), what=what), 1)
    for a in range(0, m, rows):
        block = Xb[a:a + rows]
        yield slice(a, a + rows), (block if fmap is None else fmap(block))


def _block_costs(yb: Any, swb: Any, rows: slice, spec: dict) -> tuple[np.ndarray, np.ndarray]:
    return _row_costs(yb[rows], None if swb is None else swb[rows], spec)


def _sqhinge_stats(Fb: Any, yb: Any, swb: Any, W: np.ndarray, spec: dict,
                   fmap: _FeatureMap | None) -> dict:
    """Loss, gradient and Hessian sums of one chunk (runs on a worker, chunk's device), in row
    blocks of the memory budget (``Fb`` are the chunk's rows of X when ``fmap`` recomputes F)."""
    p, P = W.shape
    itemsize = np.dtype(fmap.dtype if fmap is not None else Fb.dtype).itemsize
    loss, grad, hess = np.zeros(P), np.zeros((p, P)), np.zeros((P, p, p))
    todo = np.flatnonzero(spec["active"])           # problems that still need a Hessian
    # per row: outputs, targets, costs, mask, residuals (P each, ≤ 8 bytes), F_I and c·F_I rows
    per_row, fixed = 8 * 8 * P + 3 * p * itemsize, 2 * hess.nbytes // max(P, 1) + hess.nbytes + 2 * grad.nbytes
    for rows, F in _pass_blocks(Fb, fmap, per_row, fixed, "a Newton pass over a chunk"):
        xp = bk.namespace_of(F)
        Y, cost = _block_costs(yb, swb, rows, spec)
        O = F @ xp.asarray(W, dtype=F.dtype)           # outputs wᵀfᵢ
        Yd = xp.asarray(Y, dtype=F.dtype)
        cd = xp.asarray(cost, dtype=F.dtype)
        active = (Yd * O) < 1                          # I = {i: yᵢ wᵀfᵢ < 1}
        R = xp.where(active, O - Yd, 0)                # residuals on I
        loss += np.asarray(bk.to_host(xp.sum(cd * R * R, axis=0, dtype=np.float64)), dtype=np.float64)
        grad += np.asarray(bk.to_host(F.T @ (cd * R)), dtype=np.float64)
        for j in todo:
            sel = xp.flatnonzero(active[:, j])
            Fi = F[sel]
            hess[j] += bk.to_host((Fi * cd[sel, j][:, None]).T @ Fi)  # F_Iᵀ diag(c) F_I
    return {"n": int(Fb.shape[0]), "loss": loss, "grad": grad, "hess": hess}


def _sqhinge_line(Fb: Any, yb: Any, swb: Any, WPt: tuple, spec: dict, fmap: _FeatureMap | None) -> dict:
    """L'(t), L''(t) of one chunk along W + tP (the exact line search; runs on a worker), in row
    blocks of the memory budget."""
    W, P, t = WPt
    n_p = W.shape[1]
    itemsize = np.dtype(fmap.dtype if fmap is not None else Fb.dtype).itemsize
    d1, d2 = np.zeros(n_p), np.zeros(n_p)
    # per row: o, z (P each in F's dtype and in float64), targets, costs and the derivatives' temporaries
    per_row = n_p * (2 * itemsize + 8 * 10)
    for rows, F in _pass_blocks(Fb, fmap, per_row, 4 * W.nbytes, "a line-search pass over a chunk"):
        xp = bk.namespace_of(F)
        Y, cost = _block_costs(yb, swb, rows, spec)
        o = F @ xp.asarray(W, dtype=F.dtype)
        z = F @ xp.asarray(P, dtype=F.dtype)
        b1, b2 = line_derivatives(o.astype(np.float64), z.astype(np.float64), xp.asarray(Y), xp.asarray(cost),
                                  xp.asarray(t, dtype=np.float64))
        d1 += np.asarray(bk.to_host(b1), dtype=np.float64)
        d2 += np.asarray(bk.to_host(b2), dtype=np.float64)
    return {"n": int(Fb.shape[0]), "d1": d1, "d2": d2}


def _sum_stats(parts: list) -> dict:
    out = {key: (val.copy() if isinstance(val, np.ndarray) else val) for key, val in parts[0].items()}
    for st in parts[1:]:
        for key, val in st.items():
            out[key] = out[key] + val
    return out


@dataclass(frozen=True)
class _DaskFeatures:
    """The features on the workers: the persisted F (``fmap`` None), or X with the (delayed)
    feature map that every pass applies per chunk."""

    rows: Any
    fmap: Any
    cached: bool
    nmap: NystromMap
    budget: bk.CallerSettings   # what the Newton passes' tasks run under


class DaskRows(LLSVMRows):
    """LLSVM's rows on Dask (the row source of :func:`~gpuksvm.solvers.nystrom.llsvm.fit_llsvm_path`).

    * :meth:`open`: one validation pass (finite values, labels); only the squared hinge
      (primal Newton map-reduce) is supported, ``probability=True`` is refused;
    * :meth:`kernel`: γ resolved over all rows;
    * :meth:`sample`: the single-process fit's random sample, drawn by the rows' contents
      (two hash keys per row and the labels come back, then only the sampled rows travel);
    * :meth:`features`: F = [K(X, Z) M, s·1] per chunk on the workers, kept in worker memory
      (``cache_features``) or recomputed in every pass;
    * :meth:`problem`: a :class:`~gpuksvm.solvers.linear.newton.ReducedOracle` whose passes
      return only (k+1)×(k+1) and (k+1)-vectors per binary problem (one-vs-rest for more
      than two classes), and two numbers per problem for each line-search step; class
      weights from :func:`gpuksvm.array.validation.class_weight_vector` with the class
      counts weighted by ``sample_weight``, extreme costs scaled as in memory.

    Parameters
    ----------
    X : dask array (n, d), NumPy or CuPy chunks
    y : dask array or array-like (n,)
    sample_weight : dask array or array-like (n,), optional
    client : distributed.Client or None (the local scheduler)
    cache_features : bool or "auto"
    callback : callable(dict), optional — after every Newton step
    """

    def __init__(self, X: Any, y: Any, sample_weight: Any = None, *, client: Any = None,
                 cache_features: bool | str = "auto", callback: Callable[[dict], None] | None = None):
        self.X, self.y, self.sample_weight = X, y, sample_weight
        self.client, self.cache_features, self.callback = client, cache_features, callback
        self.ledger = Ledger()

    def open(self, spec: LinearSpec) -> None:
        dask, _ = require_dask()
        for name, bad, why in (
                ("loss", spec.loss != "squared_hinge",
                 "must be 'squared_hinge' (the distributed solver is primal Newton map-reduce)"),
                ("probability", bool(spec.probability), "=True is not supported (fit Platt scaling on a sample)")):
            if bad:
                raise ValueError(f"LLSVM with a dask array: {name} {why}")
        client, ledger = self.client, self.ledger
        X, y = row_chunked(self.X, self.y)
        sw = None
        if self.sample_weight is not None:
            _, sw = row_chunked(X, self.sample_weight)
        self.X, self.y, self.sample_weight = persist(client, X, y, sw)
        self.n, self.n_features = (int(s) for s in self.X.shape)
        classes = check_finite_and_classes(self.X, self.y, client=client, ledger=ledger)
        if classes.shape[0] < 2:
            raise ValueError(f"The number of classes has to be greater than one; got {classes.shape[0]} class")
        self.classes = classes

    def kernel(self, resolve: Callable[[Any], Kernel]) -> Kernel:
        with scheduler_context(self.client):
            return resolve(host_chunks(self.X))

    def sample(self, params: MapParams, rs: np.random.RandomState, device: bk.Device,
               dtype: np.dtype) -> tuple[Any, np.ndarray]:
        dask, _ = require_dask()
        X, y, n, d = self.X, self.y, self.n, self.n_features
        size = params.sample_size()
        sample_cap = max(int(size or 0), params.n_landmarks, params.n_labeled, 20000)
        if size is None and n > sample_cap:
            raise ValueError(f"kmeans_sample=None would run k-means on all {n} rows on the driver; "
                             "with a dask array set kmeans_sample (e.g. 20000)")
        hasher = RowHasher(d, rs)
        chunk_fn = dask.delayed(on_workers(_chunk_sample), pure=True)
        starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
        parts = [chunk_fn(xb, yb, int(a), hasher, size)
                 for xb, yb, a in zip(delayed_chunks(X), delayed_chunks(y), starts)]
        (sample,) = compute(tree_reduce(parts, partial(merge_smallest, size=size)), client=self.client,
                            ledger=self.ledger, label="sample row keys")
        idx = sample[2]
        Xs = RemoteRows(X, client=self.client, ledger=self.ledger, max_rows=sample_cap, label="sample rows")[idx]
        ys = RemoteRows(y, client=self.client, ledger=self.ledger, max_rows=sample_cap, label="sample labels")[idx]
        self.dtype = np.dtype(dtype)
        return bk.to_device(Xs, device, dtype), np.asarray(ys).ravel()

    def features(self, nmap: NystromMap, spec: LinearSpec) -> "_DaskFeatures":
        dask, _ = require_dask()
        X, dt, scaling = self.X, self.dtype, spec.intercept_scaling
        fmap = _FeatureMap(np.asarray(bk.to_host(nmap.landmarks)), np.asarray(bk.to_host(nmap.map)),
                           nmap.kernel, dt, scaling)
        p = fmap.map.shape[1] + (0 if scaling is None else 1)
        fmap_d = dask.delayed(fmap, pure=True)
        from dask.array.utils import meta_from_array

        F = X.map_blocks(on_workers(_features_block), fmap_d, chunks=(X.chunks[0], (p,)), dtype=dt,
                         meta=bk.namespace_of(meta_from_array(X)).empty((0, 0), dtype=dt))
        budget, gpu = bk.caller_settings(), bk.is_gpu_array(meta_from_array(X))
        share = -(-self.n * p * dt.itemsize // n_workers(self.client))    # F's bytes per worker
        auto = self.cache_features == "auto"
        cache = share <= budget.budget_bytes(gpu) // 2 if auto else bool(self.cache_features)
        if not cache:
            return _DaskFeatures(X, fmap_d, False, nmap, budget)
        (F,) = persist(self.client, F)
        return _DaskFeatures(F, None, True, nmap, budget.less(share, gpu) if auto else budget)

    def problem(self, features: "_DaskFeatures", spec: LinearSpec) -> NewtonProblem:
        dask, _ = require_dask()
        src, fm_arg, cache, nmap = features.rows, features.fmap, features.cached, features.nmap
        client, ledger, classes, n = self.client, self.ledger, self.classes, self.n
        scaling = spec.intercept_scaling
        p = int(nmap.map.shape[1]) + (0 if scaling is None else 1)
        n_problems = 1 if classes.shape[0] == 2 else classes.shape[0]     # one-vs-rest
        counts, weighted, sw_max = _class_counts(classes, self.y, self.sample_weight, client=client, ledger=ledger)
        cw = class_weight_vector(spec.class_weight, classes, weighted)
        # extreme costs as in memory, with max‖F̃ᵢ‖² bounded from max‖xᵢ‖² (no pass forming F)
        sq_norm = 0.0 if nmap.kernel.constant_diag is not None else _max_row_sq_norm(self.X, client=client,
                                                                                      ledger=ledger)
        top = sw_max * (1.0 if cw is None else float(cw.max()))
        r = nmap.feature_sq_norm_bound(sq_norm) + (scaling or 0.0) ** 2
        log_scale = extreme_cost_scale(float(spec.C), top, n, r, owner="LLSVM")
        costs = {"classes": classes, "C": float(spec.C), "class_weight": cw, "log_scale": log_scale}
        src_chunks = delayed_chunks(src)
        y_chunks = delayed_chunks(self.y)
        sw_chunks = delayed_chunks(self.sample_weight) if self.sample_weight is not None else [None] * len(y_chunks)
        stats_fn = dask.delayed(on_workers(_sqhinge_stats, features.budget), pure=True)
        line_fn = dask.delayed(on_workers(_sqhinge_line, features.budget), pure=True)

        def reduce(fn, arg, extra, label):
            parts = [fn(fb, yb, wb, arg, extra, fm_arg) for fb, yb, wb in zip(src_chunks, y_chunks, sw_chunks)]
            (st,) = compute(tree_reduce(parts, _sum_stats), client=client, ledger=ledger, label=label)
            if st["n"] != n:
                raise DistributedFitError(f"a Newton pass summed {st['n']} rows instead of {n}; "
                                          "the cluster lost data and no model was produced")
            return st

        def stats(W: np.ndarray, active: np.ndarray) -> dict:
            return reduce(stats_fn, dask.delayed(W, pure=True),
                          dask.delayed({**costs, "active": active}, pure=True), "newton")

        def line_stats(W: np.ndarray, P: np.ndarray, t: np.ndarray) -> tuple:
            st = reduce(line_fn, dask.delayed((W, P, t), pure=True), dask.delayed(costs, pure=True), "line search")
            return st["d1"], st["d2"]

        def report(sol: Any) -> dict:
            return {"dask": {"n_workers": n_workers(client), **ledger.as_dict(),
                             "newton_iter": sol.n_iter, "newton_converged": sol.converged,
                             "n_passes": sol.info["n_passes"], "cache_features": cache,
                             "n_chunks": len(y_chunks), "state_bytes_per_problem": (p * p + p + 1) * 8}}

        npos = counts[1:2] if n_problems == 1 else counts
        oracle = ReducedOracle(stats, line_stats, dim=p, m=n_problems, npos=npos, n=n, scale=scaling,
                               dtype=self.dtype)
        return NewtonProblem(oracle, classes, log_scale, "newton-dask", callback=self.callback, report=report)


def fit_llsvm(estimator: Any, X: Any, y: Any, sample_weight: Any = None, *, client: Any = None,
              cache_features: bool | str = "auto", callback: Callable[[dict], None] | None = None) -> Any:
    """Fit an :class:`~gpuksvm.estimators.llsvm.LLSVM` on a dask array without gathering the data.

    The estimator's own fit runs on the Dask rows (:class:`DaskRows`): the steps of
    :func:`gpuksvm.solvers.nystrom.llsvm.fit_llsvm_path` (SPEC §1, Algorithm 1), distributed:

    1. one validation pass (finite values, labels) and γ resolved over all rows;
    2. landmarks Z exactly as the single-process fit draws them (k-means on the
       same random ``kmeans_sample`` rows, or random rows, with the same
       ``random_state``) — only those sampled rows are gathered; LLSVM2's
       labelled subset likewise;
    3. M = U Λ^{-1/2} on the driver; (Z, M) broadcast once to the workers;
    4. F = [K(X, Z) M, 1] per chunk on the workers, kept in worker memory
       (``cache_features``) or recomputed in every pass;
    5. the squared-hinge linear SVM on F by the single-process Newton solver
       (:func:`gpuksvm.solvers.linear.newton.newton_solve` over a
       :class:`~gpuksvm.solvers.linear.newton.ReducedOracle`: the same stopping rule
       and exact line search), one map-reduce pass per step returning only
       (k+1)×(k+1) and (k+1)-vectors per binary problem (one-vs-rest for more
       than two classes), and one returning two numbers per problem for each
       line-search step.  Class weights come from
       :func:`gpuksvm.array.validation.class_weight_vector` with the class counts
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
        Keep F (n × (k+1)) in worker memory between passes, or recompute it
        in every pass.  "auto": keep it when its share per worker (F's bytes
        over the number of workers, the chunks taken as evenly spread) is at
        most half of the memory budget of the caller at the fit's start
        (``cpu_memory_budget``; for CuPy chunks ``gpu_memory_budget`` where one
        is set), which every worker gets (:func:`~gpuksvm.scaleout.runtime.on_workers`);
        the Newton passes then run under the rest of it, so F and the passes'
        scratch stay within the budget together; half, so that the passes'
        row blocks stay at least half the size they have without F.
        ``True`` keeps F whatever its size (beside the whole budget).
    callback : callable(dict), optional
        Called after every Newton step (see :func:`gpuksvm.solvers.linear.newton.newton_solve`).

    Returns
    -------
    estimator, fitted; ``estimator.dask_info_`` records the passes, the bytes
    each brought back to the driver, the Newton steps and timings.

    Notes
    -----
    Only the squared hinge loss (the primal Newton map-reduce) is supported;
    ``loss="hinge"`` and ``probability=True`` raise ``ValueError``.
    """
    require_dask()
    rows = DaskRows(X, y, sample_weight, client=client_or_default(client), cache_features=cache_features,
                    callback=callback)
    return estimator.fit(rows)


def _class_counts(classes: np.ndarray, y: Any, sw: Any, *, client: Any,
                  ledger: Ledger) -> tuple[np.ndarray, np.ndarray, float]:
    """Rows per class, their summed sample weights (the counts of
    :func:`gpuksvm.array.validation.class_counts`, so "balanced" weights them as in memory) and
    the largest sample weight, in one pass; negative or non-finite weights are refused."""
    _, da = require_dask()
    yh = host_chunks(y)
    parts = [da.sum(yh == c) for c in classes]
    if sw is not None:
        swh = host_chunks(sw)
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
    parts = X.map_blocks(on_workers(_block_max_sq_norm), chunks=((1,) * X.numblocks[0],), drop_axis=1,
                         dtype=np.float64, meta=np.empty((0,)))
    (best,) = compute(parts.max(), client=client, ledger=ledger, label="row norms")
    return float(bk.to_host(best))
