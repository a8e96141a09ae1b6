"""SVI on Dask (SPEC §3): sub-SVMs on the workers, margin rows chunk by chunk.

The M sub-SVMs are trained on different workers in parallel (each gets only
its θn rows); the averaged decision values and the margin selection are
computed chunk-wise (each chunk returns only its best margin candidates); the
s×s closed-form solve runs as one task on one worker.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel, make_kernel
from gpuksvm.solvers.smo.engines import solve_batched
from gpuksvm.solvers.svi.algorithm import assemble, plan_problems, solve_record, solver_summary
from gpuksvm.solvers.row_order import RowHasher
from gpuksvm.solvers.svi.steps import (
    average_submodels,
    check_rows,
    ensemble_check,
    select_margin_rows,
    solve_margin_problem,
    stack_submodels,
    submodel_values,
)
from gpuksvm.solvers.multiclass import problem_rows
from gpuksvm.array.validation import encode_classes
from gpuksvm.scaleout.common import (
    check_finite_and_classes,
    client_or_default,
    delayed_chunks,
    host_chunks,
    persist,
    record_info,
    refuse_unsupported,
    set_n_features,
)
from gpuksvm.scaleout.dispatch import distributed_fit
from gpuksvm.scaleout.runtime import (
    DistributedFitError,
    Ledger,
    compute,
    require_dask,
    row_chunked,
    scheduler_context,
)

__all__ = ["fit_svi"]


def _svi_device(chunk: Any, device: Any, dtype: Any) -> tuple[bk.Device, np.dtype]:
    """Where a worker computes: the chunk's GPU, else the estimator's device setting."""
    dev = bk.device_of(chunk) if bk.is_gpu_array(chunk) else bk.resolve_device(device)
    return dev, bk.resolve_dtype(dtype, dev)


def _svi_sub_svm(Xs: Any, ys: np.ndarray, kernel: Kernel, C: float, opts: dict) -> dict:
    """One SMO problem on one worker: a sub-SVM (SVI step 2) or a problem's exact SVM,
    as :func:`~gpuksvm.solvers.svi.algorithm.solve_record` (support indices local to ``Xs``); its
    convergence is reported once per fit, on the client (:func:`~gpuksvm.solvers.svi.algorithm.assemble`)."""
    dev, dt = _svi_device(Xs, opts["device"], opts["dtype"])
    Xs = bk.to_device(Xs, dev, dt)
    (r,) = solve_batched(Xs, ys, [np.arange(Xs.shape[0], dtype=np.int64)], kernel, C,
                         tol=opts["tol"], max_iter=opts["max_iter"], device=dev, dtype=dt, n_jobs=1,
                         warn_convergence=False)
    return solve_record(r)


def _svi_keys(Xb: Any, hasher: RowHasher) -> np.ndarray:
    """The row-order keys of one chunk (:func:`gpuksvm.solvers.svi.steps.row_order_keys`)."""
    return hasher.keys(Xb)


def _svi_ensemble(XU: Any, W: np.ndarray, bbar: np.ndarray) -> dict:
    """The averaged sub-model (union of SVs, coefficient matrix), built on a worker."""
    return {"XU": np.asarray(bk.to_host(XU)), "W": W, "bbar": bbar}


def _svi_candidates(Xb: Any, yb: Any, start: int, ens: dict, spec: dict) -> list:
    """Averaged decision values (eq. 1) of one chunk and its best margin candidates (step 4).

    Per binary problem the chunk returns the rows that can be selected by
    :func:`gpuksvm.solvers.svi.steps.select_margin_rows` on all rows: its ``L``
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
    """The ensemble check of one problem on one worker (:func:`gpuksvm.solvers.svi.steps.ensemble_check`):
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


@distributed_fit
def fit_svi(estimator: Any, X: Any, y: Any, *, client: Any = None) -> Any:
    """Fit an :class:`~gpuksvm.estimators.svi.SVI` on a dask array (SPEC §3, distributed).

    The same algorithm as the single-process fit (:mod:`gpuksvm.solvers.svi.algorithm`,
    sharing its steps), without gathering X:

    1. one pass validates X and finds the classes; the labels and two row-order
       hash keys per row (three numbers per row, never the features) are gathered to
       draw the same subsets as the single-process fit (same ``random_state``);
    2. every sub-SVM is one task: its rows are gathered on the worker that
       trains it, so the sub-SVMs train on different workers in parallel; a
       problem too small for an ensemble is one exact-SVM task;
    3. the averaged decision values f̄ (eq. 1) are computed chunk-wise against
       the union of the sub-models' SVs (shipped once to every worker);
    4. every chunk returns only its best margin candidates; the driver merges
       them with :func:`~gpuksvm.solvers.svi.steps.select_margin_rows` — the
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
    refuse_unsupported(est, {
        "probability": (bool(est.probability), "=True is not supported (fit Platt scaling on a sample)"),
    })
    params = est._solver_params()
    client = client_or_default(client)
    ledger = Ledger()
    times: dict = {}
    t0 = time.perf_counter()
    X, y = row_chunked(X, y)
    X, y = persist(client, X, y)
    n, d = (int(s) for s in X.shape)
    check_finite_and_classes(X, None, client=client, ledger=ledger)
    rs = check_random_state(params.random_state)   # the draws of the single-process fit, in order
    hasher = RowHasher(d, rs)
    keys_fn = dask.delayed(_svi_keys, pure=True)
    y_host, keys = compute(host_chunks(y), [keys_fn(xb, hasher) for xb in delayed_chunks(X)],
                           client=client, ledger=ledger, label="labels and row-order keys")
    y_host = np.asarray(y_host).ravel()
    keys = np.concatenate(keys)
    classes, yidx = encode_classes(y_host)
    set_n_features(est, d)
    dev = est._device()
    dt = bk.resolve_dtype(est.dtype, dev)
    with scheduler_context(client):
        kernel = make_kernel(est.kernel, est.gamma, est.degree, est.coef0, host_chunks(X))
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
                 for xb, yb, s0 in zip(delayed_chunks(X), delayed_chunks(y), starts)]
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
    record_info(est, ledger, client, {"n_chunks": X.numblocks[0],
                                       "n_union_sv": int(union.size) if ens_p else 0})
    return est
