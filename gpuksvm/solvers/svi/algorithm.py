"""SVI — kernel SVM training by support vector identification: the algorithm (SPEC §3).

Mao, Fu, Wu & Hu, "Fast Kernel SVM Training via Support Vector Identification"
(papers/svi-support-vector-identification.txt), Algorithm 1, per binary problem:

1. draw M (``n_subsets``) disjoint random subsets of rate θ (``subset_rate``);
2. train a kernel SVM (hinge loss, same C and kernel) on each subset — all the
   sub-SVMs of all problems are one call of :func:`gpuksvm.solvers.smo.engines.solve_batched`;
3. average the M decision values over the problem's rows, eq. (1):
   f̄(x) = (1/M) Σ_m f_m(x) — kernel mat-vecs against the union of the
   sub-models' support vectors, never an n×SV matrix;
4. keep the "margin support vectors", the rows with y·f̄(x) ≈ 1, here
   ``|y f̄ − 1| ≤ margin_tol`` with the guards of
   :func:`~gpuksvm.solvers.svi.steps.select_margin_rows`;
5. β and b in closed form from eqs. (5)–(9) on those s rows:
   β = (I/(2C) + ΠK)⁻¹ Πy  (eq. 9),   b = (1/s) 1ᵀ(y − Kβ)  (eq. 7);
6. predict sign(Σ_j β_j κ(x, x_j) + b).

What the paper leaves open, each with the measured reason.  The figures come
from ``bench/studies/svi_subset_rows.py --scale paper --device cpu``
(``bench/results/svi_subset_rows.json``, 2026-11-23, the 2-core development
CPU): for each data set and each sub-SVM size r (M = 5, two seeds) the
paper's closed-form model, scored against scikit-learn's SVC on the same rows
in the same run, and the check below computed without acting on it.

**Subsets sized from the problem** (:func:`~gpuksvm.solvers.svi.steps.plan_problem`).
The sub-SVMs must be large enough to locate the margin, whatever θ·n gives.
Points below SVC by sub-SVM size:

=================  =========  =========  =========  =========  ==========
data set           ≤ 500      1,000      2,000      3,256–6K   check
=================  =========  =========  =========  =========  ==========
ijcnn1 (50K)       3.3–3.5    1.5–1.7    0.8–0.9    0.2        fails < 5K
adult (32K)        —          1.6–1.9    1.4        0.8–1.1    fails all
two-sine (20K)     0.0–0.55   −0.1–0.1   −0.1–0.1   0.0–0.1    passes ≥ 2K
checkerboard 10 %  —          1.1–3.1    0.2–0.9    0.3–0.4    fails all
digits pairs       2.7–5.7    —          —          —          see below
=================  =========  =========  =========  =========  ==========

(digits: sub-SVMs of 20–40 rows, its one-vs-one pairs have ≈ 240;
checkerboard: 4×4, 20,000 rows with 10 % of the labels flipped, clean test
set, γ = 20, C = 10.)  Below 2,000 rows every set but the smooth two-sine
missed SVC by more than 0.5 point; so every sub-SVM gets at least
``min_subset_rows`` = :data:`DEFAULT_MIN_SUBSET_ROWS` rows (θ is raised for
the problem, up to 1/M), and a problem with fewer than
``n_subsets · min_subset_rows`` = 10,000 rows is solved by the exact SVM: the
ensemble could not be accurate there, and the exact SVM is cheap (SVC on the
2,000 ``demo --tiny`` ijcnn1 rows: 0.05 s, ``bench/results/svi.json``).

**The ensemble check** (:func:`~gpuksvm.solvers.svi.steps.ensemble_check`).
Sub-SVMs of 2,000 rows are not always enough (ijcnn1 above), and on adult the
least-squares step (5) on margin rows loses to the ensemble itself whatever
the size (the "oracle" of ``bench/studies/svi_margin_tol.py``, steps 4–5 on SVC's own
decision values, is 0.5–0.7 point below SVC).  On up to
:data:`~gpuksvm.solvers.svi.steps.CHECK_MAX_ROWS` rows of the problem, each
scored only by the sub-models that did not train on it, the check measures:

* the sub-models' pairwise disagreement D (signs of f_m on rows neither
  model saw): ijcnn1 3.1 % with 5,000-row sub-SVMs (0.2 point below SVC),
  4.6 % with 2,000 (0.8–0.9 below), 5.9–7.3 % below that; two-sine 2.1–3.0 %
  from 2,000 rows; adult 3.8–5.3 %; checkerboard 5.9–11.6 %.  It asks
  D ≤ :data:`MAX_SUBMODEL_DISAGREEMENT` (4 %).  Label noise raises D: on the
  checkerboard with 4,000-row sub-SVMs SVI is within 0.4 point and the check
  still fails — a false alarm that costs the exact SVM's time, not accuracy;
* the closed-form model's accuracy against the sub-models' leave-subset-out
  average on the same rows, margin rows excluded: a loss of −0.4 to +0.02
  point on ijcnn1, two-sine and the checkerboard, +0.22 to +1.1 on adult.  It
  asks for a loss of at most :data:`MAX_HELD_OUT_LOSS` (0.1 point).

Adult fails on both at every size measured, each alone close to its
threshold at some seed.  The check is no substitute for the size floor: on
digits' pairs with 20–40-row sub-SVMs it passed 26–35 of the 45 pairs while
SVI is 2.7–5.7 points below SVC (easy pairs, sub-models that agree).  A
problem that fails is solved by the exact SVM (LIBSVM on the CPU, the batched
working-set SMO on a GPU — the engine of :class:`gpuksvm.KernelSVC`), with an
:class:`ExactFallbackWarning`; ``sub_models_[p]["check"]`` keeps the figures.

**The margin cap** (``max_margin_sv``).  The s×s solve costs O(s³); when more
rows than the cap lie in the band, the closest ones are kept, which changes
the model (adult, 5,657 band rows capped at 5,000) — a :class:`MarginCapWarning`
says so.

**Row order.**  The subsets are drawn from the rows put in an order that does
not depend on the order given (a seeded hash of each row's contents, seeded by
``random_state``: :func:`~gpuksvm.solvers.svi.steps.row_order_keys`), then
shuffled by ``random_state``; every solver sees its rows in that order.  The same rows in any order and the
same seed give the same model (LIBSVM files are often sorted by label).

Multi-class problems are split one-vs-one or one-vs-rest
(:func:`gpuksvm.solvers.multiclass.binary_problems`); every problem is sized, checked
and, if needed, solved exactly on its own.
"""
from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, Sequence

import numpy as np
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.multiclass import binary_problems
from gpuksvm.solvers.progress import report
from gpuksvm.solvers.row_order import RowHasher
from gpuksvm.array.blas_threads import one_blas_thread
from gpuksvm.solvers.smo.engines import DEFAULT_CACHE_BYTES, solve_batched
from gpuksvm.solvers.smo.path import GridJob, GridProblem, solve_grids
from gpuksvm.solvers.svc_dual import SMOResult, warn_unconverged
from gpuksvm.solvers.svi.steps import (
    CHECK_MAX_ROWS,
    DEFAULT_MARGIN_TOL,
    DEFAULT_MAX_MARGIN_SV,
    DEFAULT_MIN_MARGIN_SV,
    DEFAULT_MIN_SUBSET_ROWS,
    MAX_HELD_OUT_LOSS,
    MAX_SUBMODEL_DISAGREEMENT,
    check_rows,
    class_orders,
    ensemble_check,
    margin_solve_dtype,
    max_margin_rows,
    problem_subsets,
    select_margin_rows,
    solve_margin_problem,
    stack_margin_models,
    stack_submodels,
    submodel_values,
)

__all__ = ["SVIParams", "SVIEnsemble", "SVIResult", "SVIRows", "ArrayRows", "ExactFallbackWarning", "MarginCapWarning",
           "SVIPlan", "MarginCandidates", "plan_problems", "solve_record", "solver_summary", "solver_runs",
           "assemble", "build_ensemble", "ensemble_stage", "check_problem", "margin_stage", "fit", "DEFAULT_MARGIN_TOL",
           "DEFAULT_MAX_MARGIN_SV", "DEFAULT_MIN_MARGIN_SV", "DEFAULT_MIN_SUBSET_ROWS",
           "MAX_SUBMODEL_DISAGREEMENT", "MAX_HELD_OUT_LOSS", "CHECK_MAX_ROWS", "exact_paths", "SolvedRows"]

#: When no binary problem has more margin SVs than this, the CPU solves of
#: step 5 run with one BLAS thread: threaded BLAS on s ≲ 500 only adds hand-off
#: costs (10× slower on a busy 2-core CPU, measured on digits' 45 pairs).
_SERIAL_BLAS_MAX_S = 512

#: Share of the CPU memory budget the kernel caches of SVI's SMO calls may hold (their default
#: 200 MB within it; the engine splits it among parallel solves).  The exact fallback runs after
#: the ensemble, whose freed blocks the process still holds.  Measured (VmHWM growth of the fit,
#: budget 64 MB, the exact fallback taken): 10,000 synthetic rows 110 MB with the engine's
#: half-budget cache, 90 MB with a quarter; 20,000 rows (bound 93 MB) 124 MB with half, 97 MB
#: with a quarter, 85 MB with an eighth (fit 414 vs 458 s, a loaded 2-core CPU).
SVI_CACHE_BUDGET_SHARE = 0.125


class ExactFallbackWarning(UserWarning):
    """SVI solved binary problems with the exact SVM instead of its ensemble."""


class MarginCapWarning(UserWarning):
    """``max_margin_sv`` cut the margin band of a binary problem (the model changed)."""


@dataclass(frozen=True)
class SVIParams:
    """The parameters of one SVI fit (the estimator's, validated)."""

    C: float
    n_subsets: int = 5
    subset_rate: float = 0.1
    min_subset_rows: int = DEFAULT_MIN_SUBSET_ROWS
    stratify: bool = True
    margin_tol: float = DEFAULT_MARGIN_TOL
    min_margin_sv: int = DEFAULT_MIN_MARGIN_SV
    max_margin_sv: int | None = DEFAULT_MAX_MARGIN_SV
    multi_class: str = "ovo"
    ensemble_check: bool = True
    tol: float = 1e-3
    max_iter: int | None = None
    random_state: Any = None
    n_jobs: int | None = None
    verbose: int = 0


@dataclass(frozen=True)
class SVIResult:
    """A fitted SVI model (what :func:`fit` returns and the estimator stores).

    Per binary problem (in the order of ``problems``): its subsets, its
    ``sub_info`` (``sub_models_``), its margin rows and intercept; over all
    problems: the union of the margin rows ``support`` (ascending), their
    rows ``support_vectors`` (as the row source gives them), the coefficient
    matrix ``coef`` (n_problems, n_SV), ``n_support`` per class, and the
    solvers' figures.
    """

    problems: list[tuple[int, int | None]]
    subsets: list[list[np.ndarray]]
    sub_info: list[dict]
    margin_rows: list[np.ndarray]
    intercepts: np.ndarray
    support: np.ndarray
    coef: np.ndarray
    solved_exactly: np.ndarray
    margin_capped: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray
    max_iter_reached: np.ndarray
    times: dict = field(default_factory=dict)
    support_vectors: Any = None
    n_support: np.ndarray | None = None
    kernel: Kernel | None = None
    memory_fallback: str | None = None


def solve_record(r: Any) -> dict:
    """One SMO result (:class:`~gpuksvm.solvers.svc_dual.SMOResult`) as host data: ``support``
    (int64), ``dual_coef`` (float64), ``intercept`` and the solver's ``objective``,
    ``n_iter``, ``converged``, ``max_iter_reached``.  Shared by the single-process and
    the Dask fit (where a worker returns it)."""
    return {"support": np.asarray(bk.to_host(r.support), dtype=np.int64).ravel(),
            "dual_coef": np.asarray(bk.to_host(r.dual_coef), dtype=np.float64).ravel(),
            "intercept": float(r.intercept), "objective": float(r.objective), "n_iter": int(r.n_iter),
            "converged": bool(r.converged), "max_iter_reached": bool(r.max_iter_reached)}


def solver_summary(records: list[dict]) -> dict:
    """The solver figures of a problem's SMO solves (:func:`solve_record`) for ``sub_models_``."""
    return {key: [rec[key] for rec in records]
            for key in ("objective", "n_iter", "converged", "max_iter_reached")}


def assemble(problems: list, subsets: list[list[np.ndarray]], sub_info: list[dict],
             margin_rows: list[np.ndarray], betas: list[np.ndarray], intercepts: list[float],
             params: SVIParams, times: dict) -> SVIResult:
    """The fitted model from every problem's rows and coefficients, and the warnings.

    Shared by the single-process and the Dask fit.  ``sub_info[p]["exact"]``
    (None, ``"too_small"``, ``"no_mixed_subset"`` or ``"check"``) says whether
    and why problem p was solved by the exact SVM; ``sub_info[p]["guard"] ==
    "max"`` that ``max_margin_sv`` cut its band.  Either is announced by an
    :class:`ExactFallbackWarning` / :class:`MarginCapWarning`.  A problem whose
    SMO solves (sub-SVMs, exact SVM: ``converged`` of ``sub_info[p]`` and of its
    ``exact_solver``) did not all reach ``tol`` is not ``converged``; any such
    problem gives one ``ConvergenceWarning`` (SVC's message when ``max_iter``
    stopped a solver).
    """
    support, coef = stack_margin_models(margin_rows, betas)
    exact = np.array([info.get("exact") is not None for info in sub_info], dtype=bool)
    capped = np.array([info.get("exact") is None and info.get("guard") == "max" for info in sub_info],
                      dtype=bool)
    P = len(problems)
    if exact.any():
        why = [info["exact"] for info in sub_info]
        parts = []
        n_small = why.count("too_small")
        if n_small:
            parts.append(f"{n_small} have fewer than n_subsets × min_subset_rows = "
                         f"{params.n_subsets * params.min_subset_rows:,} rows (sub-SVMs of fewer than "
                         f"{params.min_subset_rows:,} rows do not find the margin)")
        n_mixed = why.count("no_mixed_subset")
        if n_mixed:
            parts.append(f"{n_mixed} have no subset holding both classes")
        n_check = why.count("check")
        if n_check:
            failed = [info["check"]["failed"] for info in sub_info if info.get("exact") == "check"]
            words = {"disagreement": f"sub-models disagree on more than "
                                     f"{100 * MAX_SUBMODEL_DISAGREEMENT:g} % of held-out rows",
                     "accuracy_loss": f"the closed-form model loses more than "
                                      f"{100 * MAX_HELD_OUT_LOSS:g} point to the ensemble"}
            parts.append(f"{n_check} failed the ensemble check (" + "; ".join(
                f"{sum(code in f for f in failed)}: {text}" for code, text in words.items()
                if any(code in f for f in failed)) + ")")
        warnings.warn(f"SVI solved {int(exact.sum())} of {P} binary problem(s) with the exact SVM "
                      f"instead of the sub-SVM ensemble: {'; '.join(parts)}. The model is the "
                      f"exact SVM's there (its support vectors); see solved_exactly_ and "
                      f"sub_models_[p]['check'].", ExactFallbackWarning, stacklevel=2)
    if capped.any():
        band = [sub_info[p]["n_candidates"] for p in np.flatnonzero(capped)]
        warnings.warn(f"SVI capped the margin set of {int(capped.sum())} of {P} binary problem(s) at "
                      f"max_margin_sv={params.max_margin_sv:,} rows ({min(band):,}–{max(band):,} rows "
                      f"were in the band |y f̄ − 1| ≤ {params.margin_tol:g}): the model differs from "
                      f"the uncapped one; raise max_margin_sv (None: no cap) or lower margin_tol. "
                      f"See margin_capped_.", MarginCapWarning, stacklevel=2)
    n_iter = np.array([max(info.get("exact_solver", info).get("n_iter") or [0]) for info in sub_info],
                      dtype=np.int64)
    solves = [solver_runs(info) for info in sub_info]
    converged = np.array([all(run["converged"]) for run in solves], dtype=bool)
    max_iter_reached = np.array([any(run["max_iter_reached"]) for run in solves], dtype=bool)
    warn_unconverged(converged, max_iter_reached, params.max_iter, params.tol, "SVI")
    return SVIResult(problems=problems, subsets=subsets, sub_info=sub_info, margin_rows=margin_rows,
                    intercepts=np.asarray(intercepts, dtype=np.float64), support=support, coef=coef,
                    solved_exactly=exact, margin_capped=capped, n_iter=n_iter, converged=converged,
                    max_iter_reached=max_iter_reached, times=times)


def solver_runs(info: dict) -> dict:
    """``converged`` and ``max_iter_reached`` of every SMO solve of a problem
    (``sub_models_[p]``): its sub-SVMs or first exact solve, and its exact fallback."""
    extra = info.get("exact_solver", {})
    return {key: list(info.get(key, [])) + list(extra.get(key, []))
            for key in ("converged", "max_iter_reached")}


# --------------------------------------------------------------------------- the algorithm
@dataclass
class SVIPlan:
    """Step 1 of every binary problem (:func:`plan_problems`)."""

    orders: list[np.ndarray]
    rank: np.ndarray
    problems: list[tuple[int, int | None]]
    rows: list[np.ndarray]
    labels: list[np.ndarray]
    subsets: list[list[np.ndarray]]
    sub_info: list[dict]


def plan_problems(yidx: np.ndarray, keys: np.ndarray, params: SVIParams, random_state: Any) -> SVIPlan:
    """The binary problems, their rows and ±1 labels, and their subsets (empty: the
    problem is solved exactly from the start), drawn from the row-order ``keys``
    (:func:`~gpuksvm.solvers.svi.steps.row_order_keys`, drawn from the same
    ``random_state`` first).  ``rank`` is every row's place in the key order.
    Shared by the single-process and the Dask fit."""
    orders = class_orders(yidx, stratify=params.stratify, keys=keys, random_state=random_state)
    rank = np.empty(yidx.shape[0], np.int64)
    rank[np.lexsort((keys[:, 1], keys[:, 0]))] = np.arange(yidx.shape[0])
    problems = binary_problems(int(yidx.max()) + 1, params.multi_class)
    plan = SVIPlan(orders=orders, rank=rank, problems=problems, rows=[], labels=[], subsets=[],
                   sub_info=[])
    for pos, neg in problems:
        r, yp, subs, info = problem_subsets(yidx, orders, pos, neg, n_subsets=params.n_subsets,
                                            subset_rate=params.subset_rate,
                                            min_subset_rows=params.min_subset_rows)
        plan.rows.append(r)
        plan.labels.append(yp)
        plan.subsets.append(subs)
        plan.sub_info.append(info)
    return plan


class SVIRows(Protocol):
    """The training rows and the compute behind them, as :func:`fit` reads them (the seam).

    :func:`fit` holds the whole algorithm (the plan, which rows each solver
    sees and in which order, the margin selection, the check and its
    fallback, the assembly); a row source does the work that touches the rows:

    * :meth:`row_keys` — every row's order key;
    * :meth:`solve_svms` — independent SMO problems (the sub-SVMs, the exact
      SVMs), each on labelled rows, as :func:`solve_record` dicts whose
      ``support`` are row indices;
    * :meth:`ensemble_values` / :meth:`margin_candidates` — step 3 (the
      sub-models' values on the problems' rows) and the rows step 4 selects
      from: every row of the problem, or any superset of the rows the
      selection over every row would keep;
    * :meth:`solve_margin` — step 5's closed-form solves;
    * :meth:`check` — the ensemble check of problems;
    * :meth:`take` — the rows of the support vectors.

    :class:`ArrayRows` is the source of an array in memory;
    :class:`gpuksvm.scaleout.svi.DaskRows` of a dask array (the solves and
    the passes over the rows run on the workers).
    """

    shape: tuple[int, ...]

    def row_keys(self, hasher: RowHasher) -> np.ndarray: ...

    def solve_svms(self, labels: list[np.ndarray], row_sets: list[np.ndarray]) -> list[dict]: ...

    def ensemble_values(self, ens: "SVIEnsemble", models: list[list[tuple]]) -> list[Any]: ...

    def margin_candidates(self, ens: "SVIEnsemble", p: int, margin_tol: float) -> MarginCandidates: ...

    def solve_margin(self, rows: list[np.ndarray], labels: list[np.ndarray]) -> list[tuple[np.ndarray, float]]: ...

    def check(self, ens: "SVIEnsemble", todo: list[int], margin_rows: list, betas: list,
              intercepts: list) -> list[dict]: ...

    def take(self, idx: np.ndarray) -> Any: ...


@dataclass(frozen=True)
class MarginCandidates:
    """The rows step 4 of a problem selects from (ascending), their margins y·f̄ and labels;
    ``n_band`` the problem's rows in the band when the candidates are not all of them
    (else None), ``accuracy`` the ensemble's training accuracy on the problem."""

    rows: np.ndarray
    margin: np.ndarray
    y: np.ndarray
    n_band: int | None
    accuracy: float


@dataclass
class SVIEnsemble(SVIPlan):
    """Steps 1–3 of every binary problem: what :func:`margin_stage` turns into a model.

    The plan (:class:`SVIPlan`), and: the row source; ``models[p]`` the
    sub-models ``(support, dual_coef, intercept)`` of problem p; ``F[p]`` its
    sub-models' values as the source keeps them (:class:`ArrayRows`: the
    (len(rows[p]), M) matrix on the problem's rows; None for a problem solved
    exactly); ``exact[p]`` the exact SVM's solution (:func:`solve_record`) of a
    problem solved exactly from the start (None otherwise).
    """

    source: Any = None
    yidx: np.ndarray | None = None
    kernel: Kernel | None = None
    params: SVIParams | None = None
    models: list[list[tuple]] = field(default_factory=list)
    F: list[Any] = field(default_factory=list)
    exact: list[Any] = field(default_factory=list)
    times: dict = field(default_factory=dict)


def _in_rank_order(rows: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """``rows`` in the order-independent order of :func:`row_order_keys`."""
    return rows[np.argsort(rank[rows], kind="stable")]


def _host_model(rec: dict) -> tuple[np.ndarray, np.ndarray, float]:
    return rec["support"], rec["dual_coef"], rec["intercept"]


class ArrayRows:
    """:class:`SVIRows` of an array in memory: one batched SMO call per stage, kernel mat-vecs.

    ``X`` is the validated input (host or device, NumPy, CuPy or SciPy
    sparse: the order keys and the support vectors), ``Xd`` its copy on the
    compute device in the working dtype.
    """

    def __init__(self, X: Any, Xd: Any, kernel: Kernel, params: SVIParams, device: bk.Device,
                 dtype: Any) -> None:
        self.X, self.Xd, self.kernel, self.params = X, Xd, kernel, params
        self.device, self.dtype = device, np.dtype(dtype)
        self.shape = tuple(int(s) for s in X.shape)

    def row_keys(self, hasher: RowHasher) -> np.ndarray:
        return hasher.keys(self.X)

    def solve_svms(self, labels: list[np.ndarray], row_sets: list[np.ndarray]) -> list[dict]:
        """One batched call of the SMO engine (sub-SVMs and exact problems alike)."""
        if not row_sets:
            return []
        params = self.params
        # one ConvergenceWarning per fit (assemble), not one per solve
        cache = min(DEFAULT_CACHE_BYTES, int(bk.memory_budget(bk.CPU) * SVI_CACHE_BUDGET_SHARE))
        res = solve_batched(self.Xd, labels, row_sets, self.kernel, float(params.C), tol=float(params.tol),
                            max_iter=params.max_iter, device=self.device, dtype=self.dtype,
                            n_jobs=params.n_jobs, warn_convergence=False, cache_bytes=cache)
        return [solve_record(r) for r in res]

    def ensemble_values(self, ens: SVIEnsemble, models: list[list[tuple]]) -> list[Any]:
        """Every sub-model on its problem's rows.  Problems over all rows (binary,
        one-vs-rest) share one kernel mat-vec against the union of their sub-models'
        SVs; each one-vs-one pair has its own (its rows only)."""
        rows = ens.rows
        P = len(ens.problems)
        F: list[np.ndarray | None] = [None] * P
        n = self.shape[0]
        full = [p for p in range(P) if models[p] and rows[p].shape[0] == n]
        groups = ([full] if full else []) + [[p] for p in range(P) if models[p] and rows[p].shape[0] < n]
        dev_of = bk.device_of(self.Xd)
        for group in groups:
            union, W, b = stack_submodels([m for p in group for m in models[p]])
            Xsv = self.Xd[bk.to_device(union, dev_of)]
            vals = submodel_values(self.Xd, None if rows[group[0]].shape[0] == n else rows[group[0]],
                                   Xsv, W, b, self.kernel, self.dtype)
            j = 0
            for p in group:
                F[p] = vals[:, j:j + len(models[p])]
                j += len(models[p])
        return F

    def margin_candidates(self, ens: SVIEnsemble, p: int, margin_tol: float) -> MarginCandidates:
        yp = ens.labels[p]
        margin = yp * ens.F[p].mean(axis=1)
        return MarginCandidates(rows=ens.rows[p], margin=margin, y=yp, n_band=None,
                                accuracy=float(np.mean(margin > 0)))

    def solve_margin(self, rows: list[np.ndarray], labels: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
        """Step 5 of every problem.  Many small systems (one-vs-one): one BLAS thread each."""
        dev_of = bk.device_of(self.Xd)
        small = not self.device.is_gpu and max([r.size for r in rows] or [0]) <= _SERIAL_BLAS_MAX_S
        with one_blas_thread(small):
            return [solve_margin_problem(self.Xd[bk.to_device(r, dev_of)], yl, self.kernel, self.params.C,
                                         self.dtype) for r, yl in zip(rows, labels)]

    def check(self, ens: SVIEnsemble, todo: list[int], margin_rows: list, betas: list,
              intercepts: list) -> list[dict]:
        return [check_problem(ens, p, margin_rows[p], betas[p], intercepts[p]) for p in todo]

    def take(self, idx: np.ndarray) -> Any:
        return self.X[idx]


def exact_paths(X: Any, labels: np.ndarray, kernels: Sequence[Kernel], folds: Sequence[np.ndarray],
                Cs: Sequence[Sequence[float]], *, tol: float, n_jobs: int | None = None) -> list[list[list[dict]]]:
    """The exact SVM of a binary problem (±1 ``labels`` of every row of host ``X``) on the rows
    ``folds[f]`` of X, with ``kernels[k]`` at every C of ``Cs[k]``: ``records[k][f][c]``, as
    :func:`solve_record` dicts whose ``support`` are positions in ``folds[f]`` (rows of
    ``X[folds[f]]``, as a fit on those rows gives).

    All in one :func:`~gpuksvm.solvers.smo.path.solve_grids` call: a kernel's rows of X are
    computed once for every fold and C (the Gram matrix within the memory budget, the compiled
    SMO on its rows), and each C of a fold starts from the solution of the one below it.  Each
    solution is one to ``tol``, as :meth:`ArrayRows.solve_svms`' own is, reached by other steps.
    A fold must hold both labels."""
    yidx = (np.asarray(labels) > 0).astype(np.int64)     # the binary model's values are positive for class 1
    problems = [GridProblem(rows=np.asarray(f, dtype=np.int64), weight=np.ones(len(f))) for f in folds]
    jobs = [GridJob(kernel, problems, [float(c) for c in cs], tol=float(tol)) for kernel, cs in zip(kernels, Cs)]
    solved = solve_grids(X, yidx, np.array([0, 1]), jobs, n_jobs=n_jobs)
    for job in solved:
        if job.error is not None:
            raise job.error
    return [[[solve_record(_binary_result(r)) for r in fold] for fold in job.results] for job in solved]


def _binary_result(model: Any) -> SMOResult:
    """The one problem of a binary :class:`~gpuksvm.solvers.smo.svc.KernelSVCResult` as an
    :class:`~gpuksvm.solvers.svc_dual.SMOResult` (its arrays hold one entry per problem)."""
    return SMOResult(support=model.support, dual_coef=model.dual_coef[0], intercept=float(model.intercept[0]),
                     objective=float(model.objective[0]), n_iter=int(model.n_iter[0]),
                     converged=bool(model.converged[0]), solver=model.solver,
                     max_iter_reached=bool(model.max_iter_reached[0]))


class SolvedRows(ArrayRows):
    """:class:`ArrayRows` whose SMO problems over given row sets are already solved (a search's
    C paths, :func:`exact_paths`): :meth:`solve_svms` returns those records, and solves any other
    call as :class:`ArrayRows` does."""

    def __init__(self, X: Any, Xd: Any, kernel: Kernel, params: SVIParams, device: bk.Device, dtype: Any,
                 solved: dict[bytes, dict]) -> None:
        super().__init__(X, Xd, kernel, params, device, dtype)
        self.solved = solved

    @staticmethod
    def key(rows: np.ndarray, labels: np.ndarray) -> bytes:
        """A labelled row set's key: its rows ascending and their labels (the solvers see the rows in
        another order; one-vs-rest problems share their rows)."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        return rows[order].tobytes() + (np.asarray(labels, dtype=np.float64)[order] > 0).tobytes()

    def solve_svms(self, labels: list[np.ndarray], row_sets: list[np.ndarray]) -> list[dict]:
        keys = [self.key(S, lab) for S, lab in zip(row_sets, labels)]
        if row_sets and all(k in self.solved for k in keys):
            return [self.solved[k] for k in keys]
        return super().solve_svms(labels, row_sets)


def build_ensemble(source: SVIRows, yidx: np.ndarray, kernel: Kernel, params: SVIParams) -> SVIEnsemble:
    """Steps 1–3 of every binary problem on a row source (and the exact solve of the
    problems too small for an ensemble), all SMO problems in one call of the source."""
    times = {}
    t0 = time.perf_counter()
    rs = check_random_state(params.random_state)
    plan = plan_problems(yidx, source.row_keys(RowHasher(source.shape[1], rs)), params, rs)
    rank, problems = plan.rank, plan.problems
    rows, labels, subsets, sub_info = plan.rows, plan.labels, plan.subsets, plan.sub_info
    times["subsets"] = time.perf_counter() - t0

    # step 2: the sub-SVMs of every problem and the exact SVMs of the problems
    # too small for an ensemble, in ONE call; every solver sees its rows in the
    # order-independent order
    t0 = time.perf_counter()
    yfull = [np.zeros(yidx.shape[0]) for _ in problems]
    jobs, owner = [], []
    for p in range(len(problems)):
        yfull[p][rows[p]] = labels[p]
        for S in (subsets[p] or [rows[p]]):
            S = _in_rank_order(S, rank)
            jobs.append((yfull[p][S], S))
            owner.append(p)
    report("SVI", f"{sum(len(s) for s in subsets)} sub-SVMs and {sum(not s for s in subsets)} exact "
           f"problem(s) of {len(problems)} in one batch", params.verbose)
    res_all = source.solve_svms([j[0] for j in jobs], [j[1] for j in jobs])
    owner = np.asarray(owner)
    models, exact = [], []
    for p in range(len(problems)):
        res = [res_all[i] for i in np.flatnonzero(owner == p)]
        sub_info[p].update(solver_summary(res))
        exact.append(res[0] if not subsets[p] else None)
        models.append([_host_model(r) for r in res] if subsets[p] else [])
        sub_info[p]["n_support"] = [int(m[0].size) for m in models[p]]
    times["sub_svms"] = time.perf_counter() - t0

    # step 3: every sub-model on its problem's rows
    t0 = time.perf_counter()
    ens = SVIEnsemble(**{f.name: getattr(plan, f.name) for f in fields(SVIPlan)}, source=source, yidx=yidx,
                      kernel=kernel, params=params, models=models, exact=exact, times=times)
    ens.F = source.ensemble_values(ens, models)
    times["ensemble"] = time.perf_counter() - t0
    return ens


def ensemble_stage(X: Any, Xd: Any, yidx: np.ndarray, kernel: Kernel, params: SVIParams,
                   device: bk.Device, dtype: Any) -> SVIEnsemble:
    """:func:`build_ensemble` on an array in memory (:class:`ArrayRows`).

    ``X`` is the validated input (host or device, for the row-order keys),
    ``Xd`` its copy on the compute device, ``yidx`` the encoded labels.
    """
    return build_ensemble(ArrayRows(X, Xd, kernel, params, device, dtype), yidx, kernel, params)


def check_problem(ens: SVIEnsemble, p: int, margin_rows: np.ndarray, beta: np.ndarray,
                  intercept: float) -> dict:
    """:func:`~gpuksvm.solvers.svi.steps.ensemble_check` of problem ``p`` of an in-memory
    ensemble (:class:`ArrayRows`) for its closed-form model (``margin_rows``, β, b), on
    the problem's check rows."""
    src = ens.source
    rows = ens.rows[p]
    h = check_rows(rows, ens.orders)
    at = np.searchsorted(rows, h)
    inside = np.stack([np.isin(h, S) for S in ens.subsets[p]], axis=1)
    Xd = src.Xd
    XM = Xd[bk.to_device(margin_rows, bk.device_of(Xd))]
    f_model = submodel_values(Xd, h, XM, beta[:, None], np.array([intercept]), ens.kernel, src.dtype)
    return ensemble_check(ens.F[p][at], inside, ens.labels[p][at], f_model[:, 0],
                          np.isin(h, margin_rows))


def margin_stage(ens: SVIEnsemble, margin_tol: float | None = None, *,
                 ensemble_check_on: bool | None = None) -> SVIResult:
    """Steps 4–5 of every problem, the ensemble check and the exact fallback.

    ``margin_tol`` and ``ensemble_check_on`` override the parameters' (so that
    ``bench/studies/svi_margin_tol.py`` can study τ on one in-memory ensemble).
    """
    params = ens.params
    source = ens.source
    tau = params.margin_tol if margin_tol is None else float(margin_tol)
    checking = params.ensemble_check if ensemble_check_on is None else bool(ensemble_check_on)
    sub_info = copy.deepcopy(ens.sub_info)
    times = dict(ens.times)
    P = len(ens.problems)

    t0 = time.perf_counter()
    margin_rows: list[np.ndarray | None] = [None] * P
    labels_sel: list[np.ndarray | None] = [None] * P
    # step 5's s×s system must fit the memory budget, in float32 at least
    budget = bk.memory_budget(getattr(source, "device", bk.CPU))
    mem_cap = max_margin_rows(int(source.shape[1]), budget)
    max_sv = None if params.max_margin_sv is None else int(params.max_margin_sv)
    by_memory = max_sv is None or mem_cap < max_sv
    memory: dict[int, set[str]] = {}          # per problem: what the budget made smaller
    for p in range(P):                               # step 4, every ensemble problem
        if ens.F[p] is None:
            continue
        cand = source.margin_candidates(ens, p, tau)
        sel, info = select_margin_rows(cand.margin, cand.y, tau, min_sv=int(params.min_margin_sv),
                                       max_sv=mem_cap if by_memory else max_sv)
        if by_memory and info["guard"] == "max":
            info["guard"] = "memory"
            memory.setdefault(p, set()).add("margin_rows")
        if margin_solve_dtype(int(sel.shape[0]), int(source.shape[1]), getattr(source, "dtype", np.float64),
                              budget)[1]:
            memory.setdefault(p, set()).add("float32_margin_solve")
        if cand.n_band is not None:
            info["n_candidates"] = int(cand.n_band)
        order = np.argsort(cand.rows[sel], kind="stable")     # ascending rows
        margin_rows[p] = cand.rows[sel][order]
        labels_sel[p] = cand.y[sel][order]
        sub_info[p].update(info)
        sub_info[p]["ensemble_train_accuracy"] = cand.accuracy

    # step 5, every ensemble problem
    betas: list[np.ndarray | None] = [None] * P
    intercepts: list[float] = [0.0] * P
    todo = [p for p in range(P) if margin_rows[p] is not None]
    for p, (beta, b) in zip(todo, source.solve_margin([margin_rows[p] for p in todo],
                                                      [labels_sel[p] for p in todo])):
        betas[p], intercepts[p] = beta, b
    times["solve"] = time.perf_counter() - t0

    # the check: sub-models (leave-subset-out) against the closed-form model on
    # a sample of each problem's rows; failures are solved by the exact SVM
    t0 = time.perf_counter()
    if checking and todo:
        for p, result in zip(todo, source.check(ens, todo, margin_rows, betas, intercepts)):
            sub_info[p]["check"] = result
            if not result["passed"]:
                sub_info[p]["exact"] = "check"
    failed = [p for p in todo if sub_info[p].get("exact") == "check"]
    exact = list(ens.exact)
    if failed:
        yfull = np.zeros(ens.yidx.shape[0])
        jobs = []
        for p in failed:
            yfull[ens.rows[p]] = ens.labels[p]
            S = _in_rank_order(ens.rows[p], ens.rank)
            jobs.append((yfull[S].copy(), S))
        for p, r in zip(failed, source.solve_svms([j[0] for j in jobs], [j[1] for j in jobs])):
            exact[p] = r
            sub_info[p]["exact_solver"] = solver_summary([r])
    times["check"] = time.perf_counter() - t0

    for p in range(P):
        if exact[p] is not None:
            sup, coef, b = _host_model(exact[p])
            margin_rows[p], betas[p], intercepts[p] = sup, coef, b
    result = assemble(ens.problems, ens.subsets, sub_info, margin_rows, betas, intercepts, params, times)
    kept = set().union(*[what for p, what in memory.items() if exact[p] is None])   # closed-form models
    return replace(result, support_vectors=source.take(result.support), kernel=ens.kernel,
                   memory_fallback=", ".join(sorted(kept)) or None,
                   n_support=np.bincount(ens.yidx[result.support],
                                         minlength=int(ens.yidx.max()) + 1).astype(np.int32))


def fit(source: SVIRows, yidx: np.ndarray, kernel: Kernel, params: SVIParams) -> SVIResult:
    """Fit SVI (Algorithm 1 with the sizing, check and fallback of the module docstring).

    Parameters
    ----------
    source : SVIRows
        The training rows: :class:`ArrayRows` (in memory) or a distributed source.
    yidx : (n,) int class indices 0..K−1
    kernel : Kernel with γ resolved
    params : SVIParams

    Returns
    -------
    SVIResult
    """
    return margin_stage(build_ensemble(source, yidx, kernel, params))
