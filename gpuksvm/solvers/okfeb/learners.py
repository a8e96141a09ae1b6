"""The linear learners on OK-FEB features: row order, exact solves, and the capacity check.

:class:`gpuksvm.OKFEBClassifier` / :class:`gpuksvm.OKFEBRegressor` put a linear
model on the r features q of an OK-FEB extractor (paper §VI: a linear SVM on
features whose inner products approximate κ, eq. (35)/(37), approximates the
kernel SVM; Pegasos and regularized LMS train it online, §VII-D).  What the
paper leaves open, with the measured reason for each choice.  Figures: rank
50, budget 150, γ = 1/d ("scale") on standardized data, test accuracy (test
files; digits a stratified 70/30 split, abalone 75/25), scikit-learn's
LinearSVC / Ridge as the linear model; ``bench/okfeb.py --device cpu --only
defaults --against 192effc`` (``bench/results/okfeb.json``; the 2-core
development CPU).

**Row order** (:func:`stream_order`).  The extractor is an online tracker: it
follows the rows in the order they come, and the learner trained in the
same pass sees the classes one after the other when the file is sorted by
label (LIBSVM files often are).  Streamed in the order given and trained in
the same pass, sorted rows give a model that predicts the last class (the
benchmark's ``--against 192effc`` runs such a version in the same run):
digits 10.0 % (majority 10.2 %), adult 23.6 % (majority 76.4 %), ijcnn1
9.5 % (majority 90.5 %), abalone RMSE 11.6 (the mean: 3.24).  ``fit``
therefore streams the rows in an order that depends on the rows and
``random_state`` only — sorted by a seeded hash of each row's contents
(:func:`~gpuksvm.solvers.svi.steps.row_order_keys`, SVI's rule; equal rows by
their targets), then permuted — so the same rows in any order give the same
model.  ``partial_fit`` is a stream and keeps the order it is given.

**How ``fit`` trains the learner** (``solver="exact"``, the default).  With all
rows at hand, the extractor streams them once (Alg. 4), then the linear
model is solved exactly on the features of every row under the *final*
extractor: the L2-loss linear SVM by primal Newton
(:func:`~gpuksvm.solvers.linear.newton_memory.newton_squared_hinge`, C = 1/(α n), the
Pegasos objective's scale) for the classifier, ridge regression in closed
form ((1/n)Σ(y − qᵀw − b)² + α‖w‖²) for the regressor.  The same-pass learner
(``solver="online"``, what ``partial_fit`` does) trains on the features each
row met on arrival, from a subspace that keeps moving (constant step, budget
replacements) — weights fitted to coordinates the final model no longer
uses — and one Pegasos / LMS pass is far from its optimum.  Rows shuffled,
online → exact: digits 89.6 → 95.6 %, adult 84.1 → 84.3 %, ijcnn1 92.9 →
92.7 %, abalone RMSE 2.28 → 2.12, for ≤ 0.2 s more.  The exact solve leaves
the Pegasos / LMS state at its solution, so a later ``partial_fit``
continues from it.

**Features**: q, as the paper.  Its scale follows the arbitrary scale of A
(ΦA·q is defined up to an invertible r × r map), so the learner's α has no
fixed meaning; the whitened z = L⁻¹Aᵀk (zᵢᵀzⱼ = qᵢᵀ(C + λI)qⱼ ≈ κ(xᵢ, xⱼ),
the kernel's scale) was measured instead: the same within 0.2 point with
the exact solve, worse online (digits 85.0 % against 89.6 %; the online
benchmark's adult stream 76 % against 83 %).

**The capacity check** (:func:`capacity_check`).  A budget of B stored rows
and r features cannot represent every data set: on adult (123 features) the
rank-50 features lose to a linear SVM on the raw features (84.3 % against
84.9 %) at every γ tried (0.1/d … 3/d); rank 150 with budget 450 too (84.7 %)
and Nyström with 150 landmarks (83.9–84.4 %).  After ``fit`` the check
scores, by 2-fold cross-validation on up to :data:`CHECK_ROWS` rows drawn at
random, the same exact learner on the OK-FEB features, on the raw features,
and a constant (the training fold's majority class / mean), and the fitted
model itself on those rows.  When the features do not beat both references
it warns (:class:`BudgetTooSmallWarning`) and the estimator's
``budget_too_small_`` is True; when the features pass but the fitted model
does not beat the better reference (the same-pass learner: 89.6 % on digits
where LinearSVC has 95.0 %) it warns too and ``capacity_check_["model_below"]``
says so; ``capacity_check_`` keeps the scores.  The check costs four linear
solves on at most 2,000 rows each (0.01–0.3 s in the figures above).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from gpuksvm.array import backend as bk
from gpuksvm.solvers.linear.newton_memory import newton_squared_hinge
from gpuksvm.solvers.svi.steps import row_order_keys

__all__ = ["BudgetTooSmallWarning", "CHECK_ROWS", "stream_order", "exact_classifier", "exact_ridge",
           "capacity_check", "warn_if_too_small"]

#: rows of the capacity check's sample (two folds of half as many)
CHECK_ROWS = 4000


class BudgetTooSmallWarning(UserWarning):
    """OK-FEB's budget/rank gives features that do not beat a linear model or a constant."""


def stream_order(X: Any, random_state: Any, targets: np.ndarray | None = None) -> np.ndarray:
    """The order ``fit`` streams the rows in: it depends on the rows and ``random_state`` only.

    The rows are sorted by their content hash keys (:func:`row_order_keys`;
    distinct rows tie with probability about 2⁻⁶⁴; equal rows by their ``targets``,
    so that duplicates with different labels come in one order too), then
    permuted by ``random_state``.
    """
    rs = check_random_state(random_state)
    keys = row_order_keys(X, rs)
    by = (keys[:, 1], keys[:, 0])
    if targets is not None:
        t = np.asarray(targets, dtype=np.float64).reshape(X.shape[0], -1)
        by = tuple(t[:, j] for j in range(t.shape[1])) + by
    canonical = np.lexsort(by)
    return canonical[rs.permutation(canonical.shape[0])]


def _with_intercept(coef: np.ndarray, intercept: np.ndarray | None) -> np.ndarray:
    """(dim (+1), m) weights in the layout of the online learners (a constant feature last)."""
    W = np.asarray(bk.to_host(coef), dtype=np.float64).T
    if intercept is None:
        return W
    return np.vstack([W, np.asarray(bk.to_host(intercept), dtype=np.float64)[None, :]])


def exact_classifier(F: Any, Y: np.ndarray, alpha: float, fit_intercept: bool = True) -> np.ndarray:
    """min (α/2)‖w‖² + (1/n)Σ max(0, 1 − y wᵀf̃)² per column of ±1 targets Y (n × m).

    The L2-loss linear SVM with C = 1/(α n) (the Pegasos objective's scale,
    squared hinge), solved by primal Newton; the bias is a constant feature,
    regularized (as Pegasos and LIBLINEAR).  Returns (dim (+1), m) weights.
    """
    n = F.shape[0]
    sol = newton_squared_hinge(F, Y, 1.0 / (float(alpha) * n),
                               intercept_scaling=1.0 if fit_intercept else None, warm_start=False)
    return _with_intercept(sol.coef, sol.intercept if fit_intercept else None)


def exact_ridge(F: Any, y: np.ndarray, alpha: float) -> np.ndarray:
    """min (1/n)Σ(y − wᵀf − b)² + α‖w‖² (b not penalized): [w; b] in closed form.

    Dense or SciPy-sparse F, centred implicitly (sparse F stays sparse); solved
    on the smaller side: the d × d Gram, or the n × n one for wide F.
    """
    n, d = F.shape
    sparse = sp.issparse(F)
    if not sparse:
        F = np.asarray(bk.to_host(F), dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mu = np.asarray(F.mean(axis=0), dtype=np.float64).ravel()
    yc = y - y.mean()
    lam = float(alpha) * n

    def dense(a: Any) -> np.ndarray:
        return np.asarray(a.toarray() if sp.issparse(a) else a, dtype=np.float64)

    if d <= n:      # (FᵀF − n μμᵀ + λI) w = Fᵀyc   (Σ yc = 0)
        G = dense(F.T @ F) - n * np.outer(mu, mu)
        w = np.linalg.solve(G + lam * np.eye(d), np.asarray(F.T @ yc, dtype=np.float64).ravel())
    else:           # w = Fcᵀβ, (FcFcᵀ + λI)β = yc, FcFcᵀ = FFᵀ − (Fμ)1ᵀ − 1(Fμ)ᵀ + (μᵀμ)11ᵀ
        Fmu = np.asarray(F @ mu, dtype=np.float64).ravel()
        G = dense(F @ F.T) - Fmu[:, None] - Fmu[None, :] + float(mu @ mu)
        beta = np.linalg.solve(G + lam * np.eye(n), yc)
        w = np.asarray(F.T @ beta, dtype=np.float64).ravel() - mu * beta.sum()
    return np.concatenate([w, [y.mean() - float(mu @ w)]])


def _decide(D: np.ndarray) -> np.ndarray:
    """Class index per row from decision values (one column: sign; several: arg-max)."""
    return (D[:, 0] > 0).astype(np.int64) if D.shape[1] == 1 else np.argmax(D, axis=1)


def _score(task: str, target: np.ndarray, pred: np.ndarray) -> float:
    """Accuracy (classification: ``target`` are class indices) or R² (pooled over the rows)."""
    if task == "classification":
        return float(np.mean(pred == target))
    ss = float(np.sum((target - target.mean()) ** 2))
    return 1.0 - float(np.sum((target - pred) ** 2)) / max(ss, 1e-300)


def _predict(W: np.ndarray, F: Any) -> np.ndarray:
    D = np.asarray(F @ W[:-1], dtype=np.float64) + W[-1]
    return D


def capacity_check(task: str, Z: np.ndarray, Xraw: Any, targets: np.ndarray, model_pred: np.ndarray,
                   alpha: float, random_state: Any) -> dict:
    """Do the OK-FEB features beat a linear model on the raw features and a constant?

    Parameters
    ----------
    task : "classification" or "regression"
    Z : (m, r) the sample rows' features under the final extractor
    Xraw : (m, d) the same rows as given (dense or SciPy-sparse, host)
    targets : classification: (m, k) ±1 one-vs-rest targets (k = 1 for two classes);
        regression: (m,) values
    model_pred : (m,) the fitted model's class indices / predictions on those rows
    alpha : the learner's regularization (as in the fit)

    Returns
    -------
    dict with ``rows``, ``metric`` ("accuracy" or "r2"), ``features_score``,
    ``linear_score``, ``constant_score`` (2-fold cross-validation), ``model_score``
    (in-sample), ``checked``, ``too_small`` (the features do not beat the better
    of the two references) and ``model_below`` (nor does the fitted model — a
    same-pass learner can fall short of good features); ``reason`` says why.
    """
    m = Z.shape[0]
    metric = "accuracy" if task == "classification" else "r2"
    truth = _decide(targets) if task == "classification" else np.asarray(targets, dtype=np.float64)
    out: dict = {"rows": int(m), "metric": metric, "checked": False, "too_small": False}
    folds = np.array_split(check_random_state(random_state).permutation(m), 2)
    if m < 20 or min(len(f) for f in folds) < 10:
        out["reason"] = f"not checked: {m} rows are too few to cross-validate"
        return out
    if task == "classification":
        for f in folds:
            tr = np.setdiff1d(np.arange(m), f)
            if any(np.all(targets[tr, j] == targets[tr[0], j]) for j in range(targets.shape[1])):
                out["reason"] = "not checked: a training fold lacks a class"
                return out
    pred = {"features": np.empty(m) if task == "regression" else np.empty(m, dtype=np.int64),
            "linear": np.empty(m) if task == "regression" else np.empty(m, dtype=np.int64),
            "constant": np.empty(m) if task == "regression" else np.empty(m, dtype=np.int64)}
    Xraw = Xraw.tocsr() if sp.issparse(Xraw) else np.asarray(Xraw, dtype=np.float64)
    for f in folds:
        tr = np.setdiff1d(np.arange(m), f)
        for name, F in (("features", Z), ("linear", Xraw)):
            if task == "classification":
                W = exact_classifier(F[tr], targets[tr], alpha)
                pred[name][f] = _decide(_predict(W, F[f]))
            else:
                w = exact_ridge(F[tr], targets[tr], alpha)
                pred[name][f] = _predict(w[:, None], F[f])[:, 0]
        if task == "classification":       # the training fold's majority class
            positives = (targets[tr] > 0).sum(axis=0)
            pred["constant"][f] = int(2 * positives[0] >= len(tr)) if targets.shape[1] == 1 \
                else int(np.argmax(positives))
        else:
            pred["constant"][f] = float(np.mean(targets[tr]))
    for name in pred:
        out[f"{name}_score"] = _score(task, truth, pred[name])
    out["model_score"] = _score(task, truth, model_pred)
    out["checked"] = True
    ref = max(out["linear_score"], out["constant_score"])
    reasons = []
    if out["features_score"] <= ref:
        which = "a linear model on the raw features" if out["linear_score"] >= out["constant_score"] \
            else "a constant predictor"
        reasons.append(f"the OK-FEB features score {out['features_score']:.4f} ({metric}, 2-fold CV on "
                       f"{m} rows), not above {which} ({ref:.4f})")
    out["too_small"] = bool(reasons)
    out["model_below"] = out["model_score"] <= ref
    if out["model_below"]:
        which = "a linear model on the raw features" if out["linear_score"] > out["constant_score"] \
            else "a constant predictor"
        reasons.append(f"the fitted model scores {out['model_score']:.4f} on those rows, not above "
                       f"{which} ({ref:.4f})")
    out["reason"] = "; ".join(reasons) if reasons else "passed"
    return out


def warn_if_too_small(check: dict, name: str, rank: int, budget: int, solver: str,
                      stacklevel: int = 2) -> None:
    """The :class:`BudgetTooSmallWarning` for a failed :func:`capacity_check`."""
    if check.get("too_small"):
        advice = ("Raise rank and n_landmarks (the budget), or use a linear model (LinearSVM) if the data needs no "
                  "kernel")
    elif check.get("model_below"):
        advice = ("The features are good enough: the linear model on them is not"
                  + ("; use solver='exact'" if solver == "online" else ""))
    else:
        return
    warnings.warn(f"{name} (rank={rank}, n_landmarks={budget}) is out of its depth on this data: "
                  f"{check['reason']}. {advice}; see capacity_check_.",
                  BudgetTooSmallWarning, stacklevel=stacklevel)
