"""Online linear learners and a budgeted online kernel baseline (SPEC §4, downstream).

These are solver objects (plain state holders, not scikit-learn estimators):
:class:`gpuksvm.estimators.okfeb.OKFEBClassifier` / :class:`~gpuksvm.estimators.okfeb.OKFEBRegressor`
drive them on the features OK-FEB streams out, and the benchmark drives them on
random Fourier features.

* :class:`Pegasos` — Shalev-Shwartz et al. (2011), one sample per step, step
  ηₜ = 1/(λt), one-vs-rest for several classes.  With that step the iterate has
  the closed form wₜ₊₁ = (1/(λt)) Σ_{τ ≤ t, violated} y_τ x_τ, so the state is the
  running sum ``G`` of violating samples and one step costs one dot product
  plus (on a margin violation) one axpy.  The optional projection onto the ball
  of radius 1/√λ is not applied (it is optional in the Pegasos paper).  The bias
  is a constant feature (regularized, as LIBLINEAR).
* :class:`RegularizedLMS` — leaky (ℓ2-regularized) normalized LMS:
  w ← (1 − μα) w + μ (y − wᵀx) x / (δ + ‖x‖²); the intercept is a constant
  feature that is not shrunk.  ``normalized=False`` gives the plain LMS step
  μ (y − wᵀx) x.
* :class:`RandomFourierFeatures` — the budgeted baseline's feature map
  z(x) = √(2/D) cos(Wx + b), W ~ N(0, 2γI), b ~ U[0, 2π) (Rahimi & Recht 2007),
  whose inner products approximate the RBF kernel; with D fixed it is an online
  kernel learner of constant size (D "stored" directions) when followed by
  Pegasos or LMS.

All state lives on the host (NumPy): the per-sample recursions are sequential
and tiny (r + 1 numbers), so a device would only add latency.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpuksvm.array import backend as bk

__all__ = ["Pegasos", "RegularizedLMS", "RandomFourierFeatures"]


def _with_intercept_column(fit_intercept: bool, F: np.ndarray) -> np.ndarray:
    """F with a constant column of ones appended when the model fits an intercept."""
    return np.hstack([F, np.ones((F.shape[0], 1))]) if fit_intercept else F


def _host2d(F: Any) -> np.ndarray:
    F = np.asarray(bk.to_host(F), dtype=np.float64)
    if F.ndim == 1:
        F = F.reshape(1, -1)
    return F


class Pegasos:
    """One-vs-rest Pegasos on streamed feature vectors.

    Parameters
    ----------
    n_features : int
        Length of the feature vectors (without the bias feature).
    n_outputs : int
        1 for a binary problem (targets ±1), else the number of classes (one
        column of ±1 targets per class, one-vs-rest).
    lam : float
        Regularization λ of min (λ/2)‖w‖² + (1/n) Σ max(0, 1 − y wᵀx): a normal
        float64 > 0 (the weights are G/(λt), so 1/λ must be finite).
    fit_intercept : bool
        Append a constant feature 1 (its weight is regularized like the others).

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.linear.online import Pegasos
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> p = Pegasos(2, 1, lam=0.1).partial_fit(X, y[:, None])
    >>> float(np.mean(np.sign(p.decision_function(X)[:, 0]) == y)) > 0.95
    True
    """

    def __init__(self, n_features: int, n_outputs: int = 1, *, lam: float = 1e-4,
                 fit_intercept: bool = True) -> None:
        if not float(lam) >= np.finfo(np.float64).tiny:     # the weights are G / (λ t)
            raise ValueError(f"lam must be a positive normal float64 (at least "
                             f"{np.finfo(np.float64).tiny:.3g}, so that 1/lam is finite), got {lam!r}")
        self.lam = float(lam)
        self.fit_intercept = bool(fit_intercept)
        self.n_features = int(n_features)
        self.G = np.zeros((self.n_features + int(self.fit_intercept), int(n_outputs)))
        self.t = 0

    @property
    def coef(self) -> np.ndarray:
        """Current weights w = G / (λ t), shape (n_features (+1), n_outputs)."""
        return self.G / (self.lam * max(self.t, 1))

    def partial_fit(self, F: Any, Y: Any) -> "Pegasos":
        """One Pegasos step per row of ``F`` with ±1 targets ``Y`` (n, n_outputs)."""
        X = _with_intercept_column(self.fit_intercept, _host2d(F))
        Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
        G, lam = self.G, self.lam
        t = self.t
        for i in range(X.shape[0]):
            x = X[i]
            y = Y[i]
            # margin of w_t = G/(λ(t)) on the new sample: y Gᵀx < λ t  ⟺  y w_tᵀx < 1
            viol = (y * (x @ G)) < lam * t if t > 0 else np.ones(G.shape[1], dtype=bool)
            t += 1
            if viol.all():
                G += np.outer(x, y)
            elif viol.any():
                G[:, viol] += np.outer(x, y[viol])
        self.t = t
        return self

    def set_weights(self, W: Any, t: int) -> "Pegasos":
        """Continue from weights W ((n_features (+1)) × n_outputs) as if t steps had led there
        (G = λ t W): an exact solution, then online steps."""
        W = np.asarray(W, dtype=np.float64).reshape(self.G.shape)
        self.t = max(int(t), 1)
        self.G = W * (self.lam * self.t)
        return self

    def decision_function(self, F: Any) -> np.ndarray:
        return _with_intercept_column(self.fit_intercept, _host2d(F)) @ self.coef


class RegularizedLMS:
    """Leaky normalized LMS regression on streamed feature vectors.

    A step too large for the data makes the weights diverge to inf/NaN without
    a warning; check ``np.isfinite(model.w)`` after :meth:`partial_fit`.

    Parameters
    ----------
    n_features : int
    step : float
        Step μ (normalized: 0 < μ < 2 is stable).
    alpha : float
        Leak / ℓ2 regularization α ≥ 0 (weights shrink by (1 − μα) per step).
    normalized : bool
        Divide the step by δ + ‖x‖² (δ = 1e-8), with x including the bias feature.
    fit_intercept : bool
        Append a constant feature 1 (not shrunk).

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.linear.online import RegularizedLMS
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)); y = X @ [1.0, -2.0, 0.5] + 3.0
    >>> m = RegularizedLMS(3, step=0.5, alpha=0.0).partial_fit(X, y)
    >>> bool(np.abs(m.predict(X) - y).max() < 1e-3)
    True
    """

    def __init__(self, n_features: int, *, step: float = 0.1, alpha: float = 1e-4,
                 normalized: bool = True, fit_intercept: bool = True) -> None:
        if not step > 0:
            raise ValueError(f"step must be > 0, got {step!r}")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        self.step, self.alpha = float(step), float(alpha)
        self.normalized, self.fit_intercept = bool(normalized), bool(fit_intercept)
        self.n_features = int(n_features)
        self.w = np.zeros(self.n_features + int(self.fit_intercept))
        self.t = 0

    def partial_fit(self, F: Any, y: Any) -> "RegularizedLMS":
        X = _with_intercept_column(self.fit_intercept, _host2d(F))
        y = np.asarray(y, dtype=np.float64).ravel()
        w, mu = self.w, self.step
        shrink = np.ones_like(w) * (1.0 - mu * self.alpha)
        if self.fit_intercept:
            shrink[-1] = 1.0
        denom = (np.einsum("ij,ij->i", X, X) + 1e-8) if self.normalized else np.ones(X.shape[0])
        # a step too large for the data diverges to inf/NaN weights: no warnings here, the
        # caller checks np.isfinite(self.w) (OKFEBRegressor turns it into a clear error)
        with np.errstate(over="ignore", invalid="ignore"):
            for i in range(X.shape[0]):
                x = X[i]
                err = y[i] - x @ w
                w *= shrink
                w += (mu * err / denom[i]) * x
        self.t += X.shape[0]
        return self

    def set_weights(self, w: Any, t: int) -> "RegularizedLMS":
        """Continue from weights w (n_features (+1),) after t samples (an exact solution)."""
        self.w = np.array(w, dtype=np.float64).reshape(self.w.shape)
        self.t = int(t)
        return self

    def predict(self, F: Any) -> np.ndarray:
        return _with_intercept_column(self.fit_intercept, _host2d(F)) @ self.w


class RandomFourierFeatures:
    """z(x) = √(2/D) cos(Wx + b) with W ~ N(0, 2γI): E[z(x)ᵀz(x')] = exp(−γ‖x − x'‖²).

    Parameters
    ----------
    n_features_in : int
    n_components : int
        D, the number of random directions (the model's fixed "budget").
    gamma : float
        RBF scale γ.
    random_state : None, int or RandomState

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.solvers.linear.online import RandomFourierFeatures
    >>> rff = RandomFourierFeatures(3, 4000, gamma=0.5, random_state=0)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    >>> Z = rff.transform(x)
    >>> bool(abs(Z[0] @ Z[1] - np.exp(-0.5)) < 0.05)
    True
    """

    def __init__(self, n_features_in: int, n_components: int, *, gamma: float = 1.0,
                 random_state: Any = None) -> None:
        from sklearn.utils import check_random_state

        if n_components < 1:
            raise ValueError(f"n_components must be >= 1, got {n_components!r}")
        if not gamma > 0:
            raise ValueError(f"gamma must be > 0, got {gamma!r}")
        rs = check_random_state(random_state)
        self.W = rs.normal(0.0, np.sqrt(2.0 * gamma), size=(int(n_features_in), int(n_components)))
        self.b = rs.uniform(0.0, 2 * np.pi, size=int(n_components))
        self.scale = np.sqrt(2.0 / n_components)

    def transform(self, X: Any) -> np.ndarray:
        Z = _host2d(X) @ self.W
        Z += self.b
        np.cos(Z, out=Z)
        Z *= self.scale
        return Z
