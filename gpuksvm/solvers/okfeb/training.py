"""OK-FEB's passes over the rows, and the learners' fit on its features.

The operations the estimators of :mod:`gpuksvm.estimators.okfeb` run on an
:class:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace` (the extractor's state):

* :func:`new_subspace` — an empty state for rows like X (its buffers' size checked);
* :func:`rows_on_device` — rows as the state computes with them (dense, its device and dtype);
* :func:`stream_rows` — rows through the online algorithm, in the order given;
* :func:`fit_passes` — ``fit``'s passes over all rows, in the order of
  :func:`~gpuksvm.solvers.okfeb.learners.stream_order`;
* :func:`transform_rows` — the outputs of rows under the current state;
  :func:`map_outputs` — a function of them, in row blocks of the memory budget
  (out-of-memory retries as one warning, :class:`~gpuksvm.array.backend.FallbackCollector`);
* :func:`fit_learner` — the epoch loop of :class:`~gpuksvm.OKFEBClassifier` and
  :class:`~gpuksvm.OKFEBRegressor`: the extractor's passes and the linear
  learner (solved exactly on the final features, or online in the same pass),
  then the capacity check (:func:`~gpuksvm.solvers.okfeb.learners.capacity_check`);
  returns an :class:`OKFEBLearnerResult`.  :func:`fit_learners` — the same for several
  learners (:class:`Learner`) on one extractor, its passes run once (a search over the
  learners' settings).

Why the rows are streamed in that order, how the learner is trained and what
the capacity check measures: :mod:`gpuksvm.solvers.okfeb.learners`.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.array.backend import take_rows
from gpuksvm.array.validation import check_allocation
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.okfeb.learners import CHECK_ROWS, capacity_check, stream_order
from gpuksvm.solvers.okfeb.stream import SubspaceParams
from gpuksvm.solvers.okfeb.subspace import OnlineSubspace
from gpuksvm.solvers.progress import progress

__all__ = ["OKFEBLearnerResult", "new_subspace", "rows_on_device", "stream_rows", "fit_passes",
           "transform_rows", "map_outputs", "Learner", "fit_learner", "fit_learners", "dense_rows"]


@dataclass(frozen=True)
class OKFEBLearnerResult:
    """What :func:`fit_learner` leaves besides the extractor's state and the learner's weights.

    Attributes
    ----------
    order : (n,) the order of the last pass (rows of X)
    capacity_check : dict, :func:`~gpuksvm.solvers.okfeb.learners.capacity_check`'s scores,
        with ``seconds`` (its time)
    memory_fallback : ``"feature_blocks"`` when a block of the final features (``solver="exact"``)
        ran out of device memory and was retried smaller (one ``MemoryFallbackWarning``), else None
    """

    order: np.ndarray
    capacity_check: dict
    memory_fallback: str | None = None

    @property
    def budget_too_small(self) -> bool:
        """Whether the features failed the capacity check."""
        return bool(self.capacity_check["too_small"])


def dense_rows(X: Any, dt: Any) -> Any:
    """OK-FEB stores and streams dense rows: SciPy/CuPy sparse input is densified (size checked)."""
    if not bk.is_sparse(X):
        return X
    check_allocation(X.shape[0] * X.shape[1] * np.dtype(dt).itemsize,
                     f"densifying the sparse {X.shape[0]} x {X.shape[1]} input for OK-FEB")
    return X.toarray()


def new_subspace(X: Any, kernel: Kernel, params: SubspaceParams, device: bk.Device, dtype: Any,
                 random_state: Any) -> OnlineSubspace:
    """An empty state for rows like X (X's width), its buffers' size checked first."""
    d, cap, r = X.shape[1], params.capacity, params.rank
    check_allocation((cap * (d + 2 * r + (cap if params.mode != "batch" else 0) + 4) + 3 * r ** 2)
                     * np.dtype(dtype).itemsize,
                     f"OK-FEB's buffers for n_landmarks={params.budget}, rank={params.rank}, "
                     f"batch_size={params.batch_size} and {d} features")
    return OnlineSubspace(kernel, d, params, device, dtype, check_random_state(random_state))


def rows_on_device(X: Any, subspace: OnlineSubspace) -> Any:
    """The rows of X as the state computes with them: dense, on its device, in its dtype."""
    return bk.to_device(dense_rows(X, subspace.dtype), subspace.device, subspace.dtype)


def stream_rows(subspace: OnlineSubspace, Xd: Any, params: SubspaceParams, output: str | None) -> Any:
    """Stream device rows through the online algorithm, in the order given (prequential outputs,
    or None; a progress bar with ``params.verbose``)."""
    bar = progress(total=Xd.shape[0], desc="OK-FEB", verbose=params.verbose) if params.verbose else None
    try:
        return subspace.stream(Xd, params, output, bar)
    finally:
        if bar is not None:
            bar.close()


def fit_passes(subspace: OnlineSubspace, X: Any, Xd: Any, params: SubspaceParams, *, n_passes: int,
               random_state: Any, shuffle: bool, targets: np.ndarray | None = None) -> np.ndarray:
    """``fit``'s passes: all rows of X (``Xd`` on the state's device) ``n_passes`` times, each in
    the order of :func:`stream_order` when ``shuffle`` (ties of equal rows broken by ``targets``),
    through the online algorithm or Alg. 1 (``params.mode == "batch"``).  The state's row
    indices then refer to the rows of X.  Returns the order of the last pass."""
    n = X.shape[0]
    rs = check_random_state(random_state)
    orders = [stream_order(X, rs, targets) if shuffle else np.arange(n) for _ in range(n_passes)]
    for order in orders:
        rows = take_rows(Xd, order) if shuffle else Xd
        if params.mode == "batch":
            subspace.fit_batch(rows, params, progress(range(int(params.max_iter)), desc="Alg. 1",
                                                      verbose=params.verbose))
        else:
            stream_rows(subspace, rows, params, output=None)
    subspace.relabel_rows(np.concatenate(orders))
    return orders[-1]


def transform_rows(subspace: OnlineSubspace, X: Any, output: str, reg: float, *,
                   float64: bool = False) -> np.ndarray:
    """Host outputs (``output``: "features" or "kernel") of the rows of X under the current state,
    in the working dtype (``float64=True``: float64)."""
    return bk.to_host(subspace.transform(rows_on_device(X, subspace), output, reg, float64=float64))


def map_outputs(subspace: OnlineSubspace, X: Any, output: str, reg: float,
                fn: Callable[[np.ndarray], np.ndarray], *, float64: bool = False) -> np.ndarray:
    """``fn`` of the host outputs of the rows of X (:func:`transform_rows`), in row blocks, results
    concatenated: the outputs of all rows are never held at once (a million rows' float64
    features of a 150-vector state are 1.2 GB), on the host or on the device.

    A block is sized from ``cpu_memory_budget`` (its kernel block, its outputs in float64 and
    the working dtype, the row itself) and from the device's budget
    (:meth:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace.output_block_rows`; the rows are
    brought to the device one block at a time); a block that runs out of device memory is
    retried with smaller blocks (:func:`~gpuksvm.array.backend.map_row_blocks`; one
    ``MemoryFallbackWarning`` for all blocks, :class:`~gpuksvm.array.backend.FallbackCollector`).
    ``fn`` maps (b, q) outputs to (b, ...) results, row for row.
    """
    n = X.shape[0]
    if n == 0:
        return fn(transform_rows(subspace, X, output, reg, float64=float64))
    m = max(int(subspace.m), 1)
    step = bk.plan_rows(n, (3 * m + X.shape[1]) * 8, bk.CPU, min_rows=64)
    if subspace.device.is_gpu:
        step = min(step, subspace.output_block_rows(n, X.shape[1]))
    parts: list = []

    def run(s: int, e: int) -> None:
        parts.append(np.asarray(fn(transform_rows(subspace, X[s:e], output, reg, float64=float64))))

    with bk.FallbackCollector():
        bk.map_row_blocks(run, n, step, what="OK-FEB features")
    return np.concatenate(parts)


def _same(F: np.ndarray) -> np.ndarray:
    """The outputs themselves (:func:`map_outputs` collecting them)."""
    return F


@dataclass(frozen=True)
class Learner:
    """One linear learner trained on an extractor's features (:func:`fit_learners`).

    Attributes
    ----------
    alpha : its regularization (the capacity check's references use the same)
    step : ``step(Z, targets)``, one online step on a pass's prequential features
    solve_exact : ``solve_exact(Z, targets, n)``, the exact solve on every row's final features
    model_output : the fitted model's class indices / predictions from host features
    """

    alpha: float
    step: Callable[[Any, np.ndarray], None]
    solve_exact: Callable[[np.ndarray, np.ndarray, int], None]
    model_output: Callable[[np.ndarray], np.ndarray]


def fit_learner(X: Any, targets: np.ndarray, subspace: OnlineSubspace, params: SubspaceParams, *,
                solver: str, n_epochs: int, shuffle: bool, random_state: Any, output: str, reg: float,
                task: str, alpha: float, step: Callable[[Any, np.ndarray], None],
                solve_exact: Callable[[np.ndarray, np.ndarray, int], None],
                model_output: Callable[[np.ndarray], np.ndarray]) -> OKFEBLearnerResult:
    """The fit of a linear learner on OK-FEB features: the epoch loop and the capacity check.

    Parameters
    ----------
    X : (n, d) validated rows; targets : (n, k) ±1 one-vs-rest targets or (n,) values
    subspace : a new state (:func:`new_subspace`); params : its settings
    solver : "exact" — the extractor's ``n_epochs`` passes (:func:`fit_passes`), then
        ``solve_exact(Z, targets, n)`` on every row's features under the final state, in the
        last pass's order; "online" — ``n_epochs`` passes in which each row's prequential
        features train the learner (``step(Z, targets)``) in the same pass
    shuffle, random_state : the rows' order (:func:`stream_order`) and the check's sample
    output, reg : the extractor's outputs (the learner's features)
    task, alpha : as :func:`~gpuksvm.solvers.okfeb.learners.capacity_check`
    model_output : the fitted model's class indices / predictions from host features

    Returns
    -------
    OKFEBLearnerResult
    """
    return fit_learners(X, targets, subspace, params, [Learner(alpha, step, solve_exact, model_output)],
                        solver=solver, n_epochs=n_epochs, shuffle=shuffle, random_state=random_state,
                        output=output, reg=reg, task=task)[0]


def fit_learners(X: Any, targets: np.ndarray, subspace: OnlineSubspace, params: SubspaceParams,
                 learners: Sequence[Learner], *, solver: str, n_epochs: int, shuffle: bool, random_state: Any,
                 output: str, reg: float, task: str) -> list[OKFEBLearnerResult]:
    """:func:`fit_learner` for several learners on one extractor: its passes run once.

    The extractor does not depend on the learner (it streams the rows in an order drawn from
    ``random_state`` and the rows, and the learner only reads its features), so every learner
    gets what it would get from a fit of its own with the same ``random_state``: with
    ``solver="exact"`` the same final features, with ``"online"`` the same prequential features
    of every pass.  The capacity check runs per learner (it depends on its ``alpha`` and its
    model), each from the generator state a fit of its own would have (a copy, for a
    ``RandomState`` given); the features of its sample rows are computed once when the learners
    draw the same rows.

    Returns
    -------
    list of OKFEBLearnerResult, one per learner, in order
    """
    # one warning for the fit's features and its checks, whichever thread fits (FallbackCollector)
    with bk.FallbackCollector():
        n = X.shape[0]
        retried = bk.FallbackCollector()
        if solver == "exact":
            Xd = rows_on_device(X, subspace)
            order = fit_passes(subspace, X, Xd, params, n_passes=int(n_epochs), random_state=random_state,
                               shuffle=shuffle, targets=targets)
            with retried:
                Z = map_outputs(subspace, Xd, output, reg, _same, float64=True)
            Z, ordered = Z[order], targets[order]
            for learner in learners:
                learner.solve_exact(Z, ordered, n)
            del Z
        else:
            rs = check_random_state(random_state)
            orders = []
            for _ in range(int(n_epochs)):
                order = stream_order(X, rs, targets) if shuffle else np.arange(n)
                orders.append(order)
                Q = bk.to_host(stream_rows(subspace, rows_on_device(take_rows(X, order) if shuffle else X,
                                                                    subspace), params, output))
                for learner in learners:
                    learner.step(Q, targets[order])
            subspace.relabel_rows(np.concatenate(orders))
            Xd = None
        samples = _CheckSamples(X, Xd, subspace, output, reg)
        checks = [_capacity(samples, targets, order, task=task, alpha=learner.alpha, shuffle=shuffle,
                            random_state=_copied(random_state), model_output=learner.model_output)
                  for learner in learners]
        fallback = "feature_blocks" if retried.retried else None
        return [OKFEBLearnerResult(order=order, capacity_check=check, memory_fallback=fallback) for check in checks]


def _copied(random_state: Any) -> Any:
    """The random_state a fit of its own would start its capacity check from: a copy of a
    ``RandomState`` (each learner's check draws from the state the passes left), else the seed."""
    return copy.deepcopy(random_state) if isinstance(random_state, np.random.RandomState) else random_state


class _CheckSamples:
    """The capacity check's sample rows and their features (both as the check reads them), computed
    once per set of rows."""

    def __init__(self, X: Any, Xd: Any, subspace: OnlineSubspace, output: str, reg: float) -> None:
        self.X, self.Xd, self.subspace, self.output, self.reg = X, Xd, subspace, output, reg
        self._key: bytes | None = None
        self._value: tuple | None = None

    def of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
        """(the rows' float64 features, their features in the working dtype as float64 — what the
        model reads —, the raw rows on the host)."""
        key = np.ascontiguousarray(rows).tobytes()
        if key != self._key:
            sample = take_rows(self.X if self.Xd is None else self.Xd, rows)
            Z = map_outputs(self.subspace, sample, self.output, self.reg, _same, float64=True)
            F = Z if np.dtype(self.subspace.dtype) == np.float64 else map_outputs(
                self.subspace, sample, self.output, self.reg, lambda B: np.asarray(B, dtype=np.float64))
            self._key, self._value = key, (Z, F, bk.to_host(take_rows(self.X, rows)))
        return self._value


def _capacity(samples: _CheckSamples, targets: np.ndarray, order: np.ndarray, *, task: str, alpha: float,
              shuffle: bool, random_state: Any, model_output: Callable[[np.ndarray], np.ndarray]) -> dict:
    """:func:`capacity_check` on up to :data:`CHECK_ROWS` rows, with its time in ``seconds``."""
    t0 = time.perf_counter()
    n = samples.X.shape[0]
    rs = check_random_state(random_state)
    m = min(n, CHECK_ROWS)
    # a random sample, in an arrangement that does not depend on the order given (the
    # stream order is a random permutation of an order fixed by the rows); shuffle=False:
    # drawn by position
    rows = order[:m] if shuffle else rs.choice(n, m, replace=False)
    Z, F, Xraw = samples.of(rows)
    check = capacity_check(task, Z, Xraw, targets[rows], model_output(F), alpha, rs)
    check["seconds"] = time.perf_counter() - t0
    return check
