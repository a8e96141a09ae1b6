"""SVI on Dask (SPEC §3): a row source whose solves and passes run on the workers.

:class:`DaskRows` is the dask implementation of the SVI solver's row source
(:class:`gpuksvm.solvers.svi.algorithm.SVIRows`); the algorithm itself —
the plan, the subsets and their order, the margin selection, the check and
its fallback, the assembly — is :func:`gpuksvm.solvers.svi.algorithm.fit`,
the same as in memory.  The M sub-SVMs are trained on different workers in
parallel (each gets only its θn rows); the averaged decision values and the
margin selection are computed chunk-wise (each chunk returns only its best
margin candidates); each s×s closed-form solve and each ensemble check runs
as one task on one worker.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.smo.engines import solve_batched
from gpuksvm.solvers.svi.algorithm import MarginCandidates, SVIEnsemble, SVIParams, solve_record
from gpuksvm.solvers.row_order import RowHasher
from gpuksvm.solvers.svi.steps import (
    average_submodels,
    check_rows,
    ensemble_check,
    select_margin_rows,
    solve_margin_problem,
    stack_submodels,
    submodel_block_rows,
    submodel_row_bytes,
    submodel_values,
)
from gpuksvm.solvers.multiclass import problem_rows
from gpuksvm.scaleout.common import DaskSource, delayed_chunks
from gpuksvm.scaleout.runtime import DistributedFitError, compute, on_workers, require_dask

__all__ = ["DaskRows", "fit_svi"]


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


#: Values one row of a chunk's margin pass keeps beside its kernel row, besides two per binary
#: problem (its decision value on the host and on the device): its row index, label, margin,
#: distance to the margin, place in the order, and the candidates' concatenation of them.
_CANDIDATE_ROW_VALUES = 10


def _svi_candidates(Xb: Any, yb: Any, start: int, ens: dict, spec: dict) -> list:
    """Averaged decision values (eq. 1) of one chunk and its best margin candidates (step 4).

    Per binary problem the chunk returns the rows that
    :func:`gpuksvm.solvers.svi.steps.select_margin_rows` selects among the chunk's rows (with
    their margins and labels, and the counts): a superset of what it can select on all rows
    (its ``L`` rows closest to the margin, the closest of each class).  The chunk is worked in
    row blocks of the task's memory budget (:func:`~gpuksvm.solvers.svi.steps.submodel_block_rows`,
    the in-memory rule, with this pass's per-row values): each block's rows join the candidates
    kept so far and the rule is applied to them.  That selects the same rows as the rule on the
    whole chunk: a row the rule selects among all the chunk's rows is selected among the rows
    of every run of first blocks that holds it (the rows ahead of it are fewer there), and the
    band counts it caps agree (every row of the band is kept until the cap binds).
    """
    dev, dt = _svi_device(Xb, spec["device"], spec["dtype"])
    XU = bk.to_device(ens["XU"], dev, dt)
    problems = spec["problems"]
    P = len(problems)
    tol, min_sv, max_sv = spec["margin_tol"], spec["min_sv"], spec["max_sv"]
    kept = [(np.empty(0, np.int64), np.empty(0), np.empty(0)) for _ in problems]   # rows, margins, labels
    counts = np.zeros((P, 3), dtype=np.int64)                                       # band, correct, rows
    m = Xb.shape[0]
    per_row = submodel_row_bytes(XU.shape[0], Xb.shape[1], dt) + (2 * P + _CANDIDATE_ROW_VALUES) * 8
    step = submodel_block_rows(m, per_row, dev)
    for s0 in range(0, m, step):
        s1 = min(s0 + step, m)
        F = submodel_values(bk.to_device(Xb[s0:s1], dev, dt), None, XU, ens["W"], ens["bbar"],
                            spec["kernel"], dt).reshape(s1 - s0, P)
        yidx = np.searchsorted(spec["classes"], np.asarray(bk.to_host(yb[s0:s1])).ravel())
        for p, (pos, neg) in enumerate(problems):
            rows, yp = problem_rows(yidx, pos, neg)
            margin = yp * F[rows, p]
            counts[p] += (np.count_nonzero(np.abs(margin - 1.0) <= tol), np.count_nonzero(margin > 0),
                          rows.shape[0])
            r, mg, yy = (np.concatenate([a, b]) for a, b in zip(kept[p], (start + s0 + rows, margin, yp)))
            sel, _ = select_margin_rows(mg, yy, tol, min_sv=min_sv, max_sv=max_sv)
            kept[p] = (r[sel], mg[sel], yy[sel])
    return [{"rows": r, "margin": mg, "y": yy, "n_band": int(c[0]), "n_correct": int(c[1]), "n_rows": int(c[2])}
            for (r, mg, yy), c in zip(kept, counts)]


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


class DaskRows(DaskSource):
    """A dask array as the SVI solver's row source (:class:`~gpuksvm.solvers.svi.algorithm.SVIRows`).

    Built from ``X`` and ``y``: the chunks are aligned by rows and persisted,
    and one pass checks that X is finite (:class:`~gpuksvm.scaleout.common.DaskSource`).
    The labels (:meth:`labels`) and two
    row-order hash keys per row (:meth:`row_keys`) are gathered — three
    numbers per row, never the features — so that the solver draws the same
    subsets as in memory.  :meth:`bind` gives the source the kernel, the
    parameters and the classes before :func:`~gpuksvm.solvers.svi.algorithm.fit`
    runs on it:

    * every SMO problem (sub-SVM, exact SVM) is one task whose rows are
      gathered on the worker that trains it;
    * the averaged decision values f̄ (eq. 1) are computed chunk-wise against
      the union of the sub-models' SVs (shipped once to every worker), and
      every chunk returns only its best margin candidates: the rows that
      :func:`~gpuksvm.solvers.svi.steps.select_margin_rows` can select over
      all rows (so the selection equals the one over all rows);
    * each problem's s×s closed-form solve (eq. 9) and ensemble check (on its
      ≤ 10,000 check rows) is one task.

    Parameters
    ----------
    X : dask array (n, d); y : dask array or array-like (n,)
    client : distributed.Client, optional
    device, dtype : the estimator's settings (a worker with a CuPy chunk computes on its GPU)
    """

    def __init__(self, X: Any, y: Any, *, client: Any = None, device: Any = "auto", dtype: Any = None) -> None:
        super().__init__(X, y, client=client)
        self.device, self.dtype = device, dtype
        self.n_union_sv = 0
        self.kernel: Kernel | None = None
        self.params: SVIParams | None = None
        self.classes: np.ndarray | None = None
        self._n_solves = 0

    def bind(self, kernel: Kernel, params: SVIParams, classes: np.ndarray) -> "DaskRows":
        """The kernel (γ resolved), the fit's parameters and the sorted classes of :meth:`labels`."""
        dask, _ = require_dask()
        self.kernel, self.params, self.classes = kernel, params, np.asarray(classes)
        self._kernel_d = dask.delayed(kernel, pure=True)
        self._opts = {"device": self.device, "dtype": self.dtype, "tol": params.tol,
                      "max_iter": params.max_iter}
        return self

    def _compute(self, tasks: Any, label: str) -> Any:
        (out,) = compute(tasks, client=self.client, ledger=self.ledger, label=label)
        return out

    def row_keys(self, hasher: RowHasher) -> np.ndarray:
        dask, _ = require_dask()
        fn = dask.delayed(on_workers(_svi_keys), pure=True)
        return np.concatenate(self._compute([fn(xb, hasher) for xb in delayed_chunks(self.X)],
                                            "row-order keys"))

    def solve_svms(self, labels: list[np.ndarray], row_sets: list[np.ndarray]) -> list[dict]:
        dask, _ = require_dask()
        fn = dask.delayed(on_workers(_svi_sub_svm), pure=True)
        tasks = [fn(self.X[S], yl, self._kernel_d, float(self.params.C), self._opts)
                 for yl, S in zip(labels, row_sets)]
        out = self._compute(tasks, "sub-SVMs" if self._n_solves == 0 else "exact fallback")
        self._n_solves += 1
        for r, S in zip(out, row_sets):
            r["support"] = S[r["support"]]          # local → global row indices
        return out

    def ensemble_values(self, ens: SVIEnsemble, models: list[list[tuple]]) -> list[Any]:
        """Per ensemble problem, the margin candidates of every chunk (None for a problem
        solved exactly)."""
        dask, _ = require_dask()
        params = self.params
        ens_p = [p for p in range(len(ens.problems)) if models[p]]
        out: list[Any] = [None] * len(ens.problems)
        if not ens_p:
            return out
        union, W, bbar = average_submodels([models[p] for p in ens_p])
        self.n_union_sv = int(union.size)
        spec = {"problems": [ens.problems[p] for p in ens_p], "classes": self.classes, "kernel": self.kernel,
                "device": self.device, "dtype": self.dtype, "margin_tol": params.margin_tol,
                "min_sv": params.min_margin_sv, "max_sv": params.max_margin_sv}
        sub = dask.delayed(on_workers(_svi_ensemble), pure=True)(self.X[union], W, bbar)
        spec_d = dask.delayed(spec, pure=True)
        starts = np.concatenate([[0], np.cumsum(self.X.chunks[0])[:-1]]).astype(np.int64)
        fn = dask.delayed(on_workers(_svi_candidates), pure=True)
        parts = [fn(xb, yb, int(s0), sub, spec_d)
                 for xb, yb, s0 in zip(delayed_chunks(self.X), delayed_chunks(self.y), starts)]
        chunk_cands = self._compute(parts, "margin candidates")
        for k, p in enumerate(ens_p):
            out[p] = [c[k] for c in chunk_cands]
        return out

    def margin_candidates(self, ens: SVIEnsemble, p: int, margin_tol: float) -> MarginCandidates:
        if margin_tol != self.params.margin_tol:
            raise ValueError("the chunks' margin candidates were taken for margin_tol="
                             f"{self.params.margin_tol:g}, not {margin_tol:g}")
        cs = ens.F[p]
        if sum(c["n_rows"] for c in cs) != ens.rows[p].shape[0]:
            raise DistributedFitError("the margin pass did not see every row of a binary problem")
        return MarginCandidates(rows=np.concatenate([c["rows"] for c in cs]),
                                margin=np.concatenate([c["margin"] for c in cs]),
                                y=np.concatenate([c["y"] for c in cs]),
                                n_band=int(sum(c["n_band"] for c in cs)),
                                accuracy=float(sum(c["n_correct"] for c in cs)
                                               / max(sum(c["n_rows"] for c in cs), 1)))

    def solve_margin(self, rows: list[np.ndarray], labels: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
        dask, _ = require_dask()
        fn = dask.delayed(on_workers(_svi_solve), pure=True)
        tasks = [fn(self.X[r], yl, self._kernel_d, float(self.params.C), self._opts) for r, yl in zip(rows, labels)]
        return self._compute(tasks, "closed-form solves")

    def check(self, ens: SVIEnsemble, todo: list[int], margin_rows: list, betas: list,
              intercepts: list) -> list[dict]:
        dask, _ = require_dask()
        fn = dask.delayed(on_workers(_svi_check), pure=True)
        X = self.X
        tasks = []
        for p in todo:
            h = check_rows(ens.rows[p], ens.orders)
            U, Wp, bp = stack_submodels(ens.models[p])
            inside = np.stack([np.isin(h, S) for S in ens.subsets[p]], axis=1)
            yH = ens.labels[p][np.searchsorted(ens.rows[p], h)]
            tasks.append(fn(X[h], X[U], Wp, bp, X[margin_rows[p]], betas[p], intercepts[p], inside, yH,
                            np.isin(h, margin_rows[p]), self._kernel_d, self._opts))
        return self._compute(tasks, "ensemble checks")

    def take(self, idx: np.ndarray) -> np.ndarray:
        return np.asarray(bk.to_host(self._compute(self.X[idx], "support vectors")))

    def info(self, **extra: Any) -> dict:
        return super().info(n_union_sv=self.n_union_sv, **extra)


def fit_svi(estimator: Any, X: Any, y: Any, *, client: Any = None) -> Any:
    """Fit an :class:`~gpuksvm.estimators.svi.SVI` on a dask array (SPEC §3, distributed).

    The same as ``estimator.fit(X, y, client=client)``: the estimator runs
    :func:`gpuksvm.solvers.svi.algorithm.fit` on a :class:`DaskRows` source
    (module docstring), without gathering X.  With the same ``random_state``
    the model equals the single-process fit's.

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
    return estimator.fit(X, y, client=client)
