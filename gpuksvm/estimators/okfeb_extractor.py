"""The OK-FEB feature extractor :class:`OKFEB` (SPEC §4), and the kernel-approximation error.

Its public home is :mod:`gpuksvm.estimators.okfeb` (``from gpuksvm.estimators.okfeb import OKFEB``),
which holds the classifier and regressor built on it; this module keeps the
transformer in a file of its own.  The algorithm's state is an
:class:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace` (``subspace_``).
"""
from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from gpuksvm.array import backend as bk
from gpuksvm.estimators.base import DeviceMixin, fit_context
from gpuksvm.kernels.kernel import Kernel, kernel_block
from gpuksvm.estimators.params import (
    DEPRECATED,
    DEVICE_PARAMS,
    KERNEL_PARAMS,
    count,
    deprecated,
    non_negative,
    positive,
)
from gpuksvm.solvers.okfeb.subspace import MODES, OUTPUTS, OnlineSubspace, SubspaceParams
from gpuksvm.solvers.okfeb.training import fit_passes, new_subspace, rows_on_device, stream_rows
from gpuksvm.array.validation import validate_X

__all__ = ["OKFEB", "windowed_kernel_error"]


def windowed_kernel_error(X: Any, Z: Any, kernel: Kernel, window: int = 500) -> float:
    """Mean over consecutive windows of ‖K_w − Z_wZ_wᵀ‖_F / ‖K_w‖_F (OK-FEB §VII).

    Parameters
    ----------
    X : (n, d) rows, Z : (n, k) features whose inner products approximate κ
        (OK-FEB ``output="kernel"`` features, or a Nyström map).
    kernel : Kernel
    window : int
        Rows per window; a last partial window shorter than half of it is
        dropped (windows partition the first ⌊n/window⌋·window rows otherwise).

    Returns
    -------
    float
    """
    n = X.shape[0]
    if n == 0:
        raise ValueError("windowed_kernel_error needs at least one row")
    window = int(min(window, n))
    errs = []
    for s in range(0, n, window):
        e = min(s + window, n)
        if e - s < max(2, window // 2) and errs:
            break
        K = kernel_block(X[s:e], None, kernel)
        xp = bk.namespace_of(K)
        Zw = Z[s:e]
        D = K - Zw @ Zw.T
        errs.append(float(xp.linalg.norm(D)) / max(float(xp.linalg.norm(K)), 1e-300))
    return float(np.mean(errs))


class OKFEB(DeviceMixin, TransformerMixin, BaseEstimator):
    """Online kernel feature extraction on a budget (OK-FEB, SPEC §4).

    The algorithm and its state: :class:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace`.

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear", "sigmoid"}, default="rbf"
    gamma : float or {"scale", "auto", "mean_dist"}, default="scale"
        Kernel scale; a string is resolved on the first batch seen (pass a
        number when streaming one row at a time).
    degree : int, default=3
    coef0 : float, default=0.0
        As scikit-learn's SVC (set it for a polynomial kernel).
    rank : int, default=50
        r, the number of features.
    n_landmarks : int, default=150
        B, the budget: the maximum number of stored vectors (mode="budget";
        the paper recommends 1.5–5 × r; named as LLSVM's landmarks).
    reg : float, default=1e-3
        λ > 0 (Frobenius/rank regularization, eq. 3).
    step_size : float, default=0.5
        μ₀ of the SGD step μₜ = μ₀ / t^step_decay.  In the nonparametric rule
        (modes "nonparametric" and "budget") the step is divided by
        max(1, g‖q‖²) for the rows of the existing stored vectors, g the
        Gershgorin bound of λ_max(K_t) — a safeguard against divergence for
        strongly correlated stored vectors (a deviation from the paper's plain
        μₜ that only acts when the plain step is large); new rows take μₜ.
    step_decay : float, default=0.0
        a in μₜ = μ₀/tᵃ: 0 is a constant step (tracking); a ∈ (½, 1] converges.
    censor : float or "auto", default="auto"
        ε: a sample with fitting error eₜ ≤ ε is censored (mode="budget").
    target_censor_rate : float in [0, 1), default=0.8
        ρ aimed at by ``censor="auto"``.
    forget : float in (0, 1], default=1.0
        β of the recency-aware budget maintenance (eq. 26): 1 is the
        minimum-distortion rule (eq. 25), small β tends to FIFO.
    mode : {"budget", "batch", "parametric", "nonparametric"}, default="budget"
        Alg. 4+5, Alg. 1, Alg. 2, Alg. 3.
    batch_size : int, default=1
        Non-censored samples per update (1 = the paper's per-sample rule; see
        the module notes for the mini-batch variant).
    output : {"features", "kernel"}, default="features"
        What ``transform`` returns: q, or z = C^{1/2}q with zᵢᵀzⱼ ≈ κ(xᵢ, xⱼ).
    max_iter : int, default=30
        Alternations of Alg. 1 (mode="batch").
    tol : float, default=1e-7
        Alg. 1 stops when the relative decrease of the cost is below ``tol``.
    shuffle : bool, default=True
        ``fit`` streams the rows in an order that depends on the rows and
        ``random_state`` only (:func:`~gpuksvm.solvers.okfeb.learners.stream_order`):
        the extractor tracks the rows in the order they come, and a file
        sorted by label would leave a subspace of the last class.  ``False``:
        the order given (a stream whose order matters).  ``partial_fit``
        always keeps the order given.
    device : {"auto", "cpu", "gpu", "cuda:N"}, default="auto"
    dtype : {"float32", "float64"} or None, default=None
        None: float32 on a GPU, float64 on the CPU.
    random_state : int, RandomState or None, default=None
    verbose : int, default=0
    budget : int, default="deprecated"
        Deprecated alias of ``n_landmarks`` (a ``FutureWarning``).

    Attributes
    ----------
    subspace_ : OnlineSubspace, the fitted state
    kernel_ : Kernel
    stored_vectors_ : (|S|, d) array, the stored vectors S (on the fit device)
    support_ : (|S|,) int array, the row of X of each stored vector after ``fit``
        (after ``partial_fit``: its 0-based index in the stream of all rows seen)
    A_ : (|S|, r) array
    stored_gram_ : (|S|, |S|) array K_S (online modes)
    recency_ : (|S|,) array of recency factors rᵢ
    n_seen_ : int, samples processed
    n_updates_ : int, samples that updated A (not censored)
    ls_error_ : float, running LS fitting error (1/t)Σ e_τ (errors at arrival)
    censor_rate_ : float, fraction of samples censored
    censor_threshold_ : float, the current ε
    budget_use_ : float, |S| / B
    last_errors_ : (n,) host array, fitting errors at arrival of the rows of the last
        fit/partial_fit call (in the order of X)
    objective_history_ : list of float, Alg. 1 cost per alternation (mode="batch")
    n_iter_ : int, Alg. 1 alternations run (mode="batch"), else 1 (one pass per call)
    n_features_in_ : int

    Examples
    --------
    >>> from gpuksvm import OKFEB
    >>> from gpuksvm.datasets import make_two_spheres
    >>> X, _ = make_two_spheres(500, random_state=0)
    >>> fe = OKFEB(gamma=1.0, rank=10, n_landmarks=30, device="cpu", random_state=0).fit(X)
    >>> fe.transform(X[:5]).shape
    (5, 10)
    >>> len(fe.support_) <= 30
    True
    """

    # its public home (pickles and format-1 model files name it gpuksvm.estimators.okfeb.OKFEB)
    __module__ = "gpuksvm.estimators.okfeb"

    def __init__(self, kernel: str = "rbf", gamma: Any = "scale", degree: int = 3,
                 coef0: float = 0.0, rank: int = 50, n_landmarks: int = 150, reg: float = 1e-3,
                 step_size: float = 0.5, step_decay: float = 0.0, censor: Any = "auto",
                 target_censor_rate: float = 0.8, forget: float = 1.0, mode: str = "budget",
                 batch_size: int = 1, output: str = "features", max_iter: int = 30,
                 tol: float = 1e-7, shuffle: bool = True, device: str = "auto", dtype: Any = None,
                 random_state: Any = None, verbose: int = 0, budget: Any = DEPRECATED) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank = rank
        self.n_landmarks = n_landmarks
        self.reg = reg
        self.step_size = step_size
        self.step_decay = step_decay
        self.censor = censor
        self.target_censor_rate = target_censor_rate
        self.forget = forget
        self.mode = mode
        self.batch_size = batch_size
        self.output = output
        self.max_iter = max_iter
        self.tol = tol
        self.shuffle = shuffle
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.budget = budget

    # ------------------------------------------------------------------ params
    _parameter_constraints: dict = {
        **KERNEL_PARAMS,
        "rank": [count(1)],
        "n_landmarks": [count(1)],
        "budget": deprecated([count(1)]),
        "reg": [positive()],
        "step_size": [positive()],
        "step_decay": [Interval(Real, 0, 1, closed="both")],
        "censor": [StrOptions({"auto"}), non_negative()],
        "target_censor_rate": [Interval(Real, 0, 1, closed="left")],
        "forget": [Interval(Real, 0, 1, closed="right")],
        "mode": [StrOptions(set(MODES))],
        "batch_size": [count(1)],
        "output": [StrOptions(set(OUTPUTS))],
        "max_iter": [count(1)],
        "tol": [non_negative()],
        "shuffle": ["boolean"],
        **DEVICE_PARAMS,
    }
    _renamed_parameters = {"budget": "n_landmarks"}

    def subspace_params(self) -> SubspaceParams:
        """The parameters as the algorithm takes them (:class:`~gpuksvm.solvers.okfeb.stream.SubspaceParams`)."""
        return SubspaceParams(rank=int(self.rank), budget=int(self._param("n_landmarks")), reg=float(self.reg),
                              step_size=float(self.step_size), step_decay=float(self.step_decay),
                              censor=self.censor if self.censor == "auto" else float(self.censor),
                              target_censor_rate=float(self.target_censor_rate), forget=float(self.forget),
                              mode=self.mode, batch_size=int(self.batch_size), max_iter=int(self.max_iter),
                              tol=float(self.tol), verbose=int(self.verbose))

    def _reset(self, X: Any) -> None:
        """Start an empty state for rows like X (X's width, γ from X); the fit context validated the
        parameters."""
        p = self.subspace_params()
        dev = self._device()
        self._set_fitted_device(dev)
        dt = bk.resolve_dtype(self.dtype, dev)
        kernel = self._resolved_kernel(X)
        self.subspace_ = new_subspace(X, kernel, p, dev, dt, self.random_state)

    def start(self, X: Any) -> OnlineSubspace:
        """Start an empty state for the rows X (their width becomes ``n_features_in_``; γ is
        resolved on them) and return it (``subspace_``).

        The first step of every fit; the learners built on OK-FEB call it and then run the passes
        of :mod:`gpuksvm.solvers.okfeb.training` on the state.  The parameters are validated first.
        """
        self._check_params()
        validate_X(self, X, reset=True)
        self._reset(X)
        return self.subspace_

    def _state(self) -> OnlineSubspace:
        check_is_fitted(self, "subspace_")
        return self.subspace_

    # ------------------------------------------------------------------ attributes
    @property
    def kernel_(self) -> Kernel:
        return self._state().kernel

    @property
    def stored_vectors_(self):
        st = self._state()
        return st.S[:st.m]

    @property
    def support_(self) -> np.ndarray:
        st = self._state()
        return np.array(bk.to_host(st.sidx[:st.m]), dtype=np.int64)

    @property
    def A_(self):
        st = self._state()
        return st.A[:st.m]

    @property
    def stored_gram_(self):
        st = self._state()
        if st.K is None:
            raise AttributeError("mode='batch' does not store K_S (it is never formed)")
        return st.K[:st.m, :st.m]

    @property
    def recency_(self) -> np.ndarray:
        st = self._state()
        return np.array(bk.to_host(st.rec[:st.m]), dtype=np.float64)

    @property
    def n_seen_(self) -> int:
        return self._state().n_seen

    @property
    def n_updates_(self) -> int:
        return self._state().n_updates

    @property
    def ls_error_(self) -> float:
        st = self._state()
        return st.err_sum / max(st.n_seen, 1)

    @property
    def censor_rate_(self) -> float:
        st = self._state()
        return st.n_censored / max(st.n_seen, 1)

    @property
    def censor_threshold_(self) -> float:
        return self._state().censor_threshold

    @property
    def budget_use_(self) -> float:
        return self._state().m / float(self._param("n_landmarks"))

    @property
    def n_stored_(self) -> int:
        return int(self._state().m)

    @property
    def last_errors_(self) -> np.ndarray:
        return self._state().last_errors

    @property
    def objective_history_(self) -> list:
        return self._state().objective_history

    @property
    def n_iter_(self) -> int:
        return self._state().n_iter

    # ------------------------------------------------------------------ fitting
    @fit_context()
    def fit(self, X: Any, y: Any = None) -> "OKFEB":
        """Reset, then run one pass of the chosen algorithm over the rows of X (in the order of
        :func:`~gpuksvm.solvers.okfeb.learners.stream_order` when ``shuffle``)."""
        X, _ = validate_X(self, X, reset=True)
        self._reset(X)
        st = self.subspace_
        fit_passes(st, X, rows_on_device(X, st), self.subspace_params(), n_passes=1,
                   random_state=self.random_state, shuffle=bool(self.shuffle))
        return self

    @fit_context(partial=True)
    def partial_fit(self, X: Any, y: Any = None) -> "OKFEB":
        """Process the rows of X, in the order given, as the next part of the stream (online modes)."""
        self.partial_fit_transform(X)
        return self

    @fit_context(partial=True)
    def partial_fit_transform(self, X: Any) -> Any:
        """Process rows as the next part of the stream and return their prequential features.

        Each row's features are those extracted on arrival (before the update it
        may cause) — what a learner trained in the same pass sees.  Returns q
        (``output="features"``), with ``output="kernel"`` the z = C^{1/2}q at
        arrival, C = AᵀK_SA of the state the row met (this costs one r × r
        eigendecomposition per update; features from different states are only
        approximately comparable, since A keeps moving).
        """
        if self.mode == "batch":
            raise ValueError("mode='batch' (Alg. 1) is offline: use fit, or an online mode for partial_fit")
        first = not hasattr(self, "subspace_")
        X, kind = validate_X(self, X, reset=first)
        if first:
            self._reset(X)
        st = self.subspace_
        Q = stream_rows(st, rows_on_device(X, st), self.subspace_params(), self.output)
        return bk.as_kind(Q, kind)

    # ------------------------------------------------------------------ outputs
    def transform(self, X: Any) -> Any:
        """Features of X under the current model: q (eq. 11) or z = C^{1/2}q.

        Batched over rows: one kernel block against S and one product with the
        map of :meth:`~gpuksvm.solvers.okfeb.subspace.OnlineSubspace.feature_map` per row
        block, on the fit device.
        """
        st = self._state()
        X, kind = validate_X(self, X, reset=False)
        return bk.as_kind(st.transform(rows_on_device(X, st), self.output, float(self.reg)), kind)

    def fitting_error(self, X: Any) -> np.ndarray:
        """LS fitting error eₙ = ‖φ(xₙ) − ΦAqₙ‖² of rows under the current model (host array)."""
        st = self._state()
        X, _ = validate_X(self, X, reset=False)
        Xd = rows_on_device(X, st)
        out = np.empty(X.shape[0])
        step = bk.plan_rows(X.shape[0], (st.m + st.rank + X.shape[1]) * 8 * 3, self._fitted_device())
        p = self.subspace_params()

        def run(s: int, e: int) -> None:
            _, err, _ = st.features(Xd[s:e], p)
            out[s:e] = bk.to_host(err)

        bk.map_row_blocks(run, X.shape[0], step, what="OKFEB.fitting_error")
        return out

    def kernel_approximation_error(self, X: Any, window: int = 500) -> float:
        """Mean over windows of ‖K − ZZᵀ‖_F/‖K‖_F with z = C^{1/2}q of the current model."""
        st = self._state()
        X, _ = validate_X(self, X, reset=False)
        Xd = rows_on_device(X, st)
        Z = st.transform(Xd, "kernel", float(self.reg), float64=True)
        return windowed_kernel_error(Xd, Z, st.kernel, window)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        self._state()
        return np.asarray([f"okfeb{i}" for i in range(self.rank)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
