"""Plots for fitted models and benchmark curves (matplotlib, an optional dependency).

* :func:`plot_decision_boundary` — a 2-D decision function with its boundary,
  the ±1 margins and the points a model keeps marked: support vectors
  (KernelSVC, SVI's margin SVs), CVM core vectors, LLSVM landmarks;
* :func:`plot_error_vs_k` — test error against the number of landmarks (LLSVM
  paper, Fig. 3), optionally with training time on a second axis;
* :func:`plot_time_vs_n` — training time against the training-set size (CVM
  paper, Fig. 2), log–log;
* :func:`plot_accuracy_vs_time` — accuracy against training time, one point
  per method (the benchmark report);
* :func:`plot_tracking_error` — an error over time with an optional change
  point (OK-FEB paper, Figs. 4–5).

Every function takes an optional ``ax`` and returns the matplotlib ``Axes``.
Without matplotlib they raise an :class:`ImportError` that says how to install it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gpuksvm import registry
from gpuksvm.array import backend as bk

__all__ = ["plot_decision_boundary", "plot_error_vs_k", "plot_time_vs_n",
           "plot_accuracy_vs_time", "plot_tracking_error", "model_points"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("gpuksvm.plot needs matplotlib, an optional dependency: "
                          "pip install matplotlib  (or pip install 'gpuksvm[notebooks]')") from exc
    return plt


def _axes(ax: Any):
    if ax is not None:
        return ax
    plt = _pyplot()
    _fig, ax = plt.subplots(figsize=(6, 4.5))
    return ax


def _host(a: Any) -> np.ndarray | None:
    return None if a is None else np.asarray(bk.to_host(a))


def model_points(model: Any) -> dict[str, np.ndarray]:
    """The points a fitted model keeps, by role: ``support``, ``core``, ``landmarks``.

    Looks for ``landmarks_`` (LLSVM), ``support_vectors_`` (the core vectors of
    CVM, the support vectors of SVI and KernelSVC: the method's ``points`` in
    :mod:`gpuksvm.registry`) and ``stored_vectors_`` (OK-FEB); the ones present
    are returned as host arrays.
    """
    method = registry.find(type(model).__name__)
    out: dict[str, np.ndarray] = {}
    Z = getattr(model, "landmarks_", None)
    if Z is not None:
        out["landmarks"] = _host(Z)
    SV = getattr(model, "support_vectors_", None)
    if SV is not None:
        out[method.points if method is not None else "support"] = _host(SV)
    stored = getattr(model, "stored_vectors_", None)
    if stored is not None and "support" not in out:
        out["support"] = _host(stored)
    return out


_MARKS = {
    "support": dict(s=70, facecolors="none", edgecolors="k", linewidths=1.2, label="support vectors"),
    "core": dict(s=80, facecolors="none", edgecolors="tab:green", linewidths=1.5, marker="s",
                 label="core vectors"),
    "landmarks": dict(s=60, c="k", marker="x", linewidths=1.5, label="landmarks"),
}


def plot_decision_boundary(model: Any, X: Any, y: Any = None, *, ax: Any = None,
                           resolution: int = 150, margins: bool = True,
                           marks: str | Sequence[str] | dict | None = "auto",
                           padding: float = 0.05, title: str | None = None, max_points: int = 5000,
                           random_state: int = 0):
    """Decision function of a fitted 2-feature model, with its kept points marked.

    Parameters
    ----------
    model : fitted estimator with ``decision_function`` (or ``predict``) on 2 features
    X : (n, 2) array
        Points to draw (and to set the plot range).
    y : (n,) array, optional
        Their labels (colours).
    resolution : int
        Grid points per axis.
    margins : bool
        Draw the ``f = ±1`` levels as dashed lines (decision functions only).
    marks : "auto", list of roles, dict or None
        Which kept points to mark: ``"auto"`` = all of :func:`model_points`;
        a list such as ``["support"]``; a dict ``{role: points}`` of your own;
        ``None`` for none.
    max_points : int
        Draw at most this many of ``X`` (a random subset).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = _axes(ax)
    X = _host(X)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"plot_decision_boundary needs 2 features, X has shape {X.shape}")
    y = _host(y)
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    lo, hi = lo - padding * span, hi + padding * span
    g0, g1 = np.meshgrid(np.linspace(lo[0], hi[0], resolution), np.linspace(lo[1], hi[1], resolution))
    grid = np.column_stack([g0.ravel(), g1.ravel()])
    if hasattr(model, "decision_function"):
        f = _host(model.decision_function(grid))
        if f.ndim > 1:
            f = f.max(axis=1)
        f = f.reshape(g0.shape)
        lim = float(np.nanmax(np.abs(f))) or 1.0
        ax.contourf(g0, g1, f, levels=np.linspace(-lim, lim, 21), cmap="RdBu", alpha=0.5)
        ax.contour(g0, g1, f, levels=[0.0], colors="k", linewidths=1.5)
        if margins and f.min() < 1 and f.max() > -1:
            ax.contour(g0, g1, f, levels=[-1.0, 1.0], colors="k", linewidths=0.8, linestyles="--")
    else:
        pred = _host(model.predict(grid)).reshape(g0.shape)
        classes, codes = np.unique(pred, return_inverse=True)
        ax.contourf(g0, g1, codes.reshape(g0.shape), levels=np.arange(len(classes) + 1) - 0.5,
                    cmap="RdBu", alpha=0.5)
    idx = np.arange(X.shape[0])
    if X.shape[0] > max_points:
        idx = np.sort(np.random.default_rng(random_state).choice(X.shape[0], max_points, replace=False))
    if y is not None:
        ax.scatter(X[idx, 0], X[idx, 1], c=y[idx], cmap="RdBu", s=8, edgecolors="none", alpha=0.9)
    else:
        ax.scatter(X[idx, 0], X[idx, 1], c="0.3", s=8, edgecolors="none")
    if marks is not None:
        found = model_points(model) if not isinstance(marks, dict) else {k: _host(v) for k, v in marks.items()}
        roles = found.keys() if marks == "auto" or isinstance(marks, dict) else marks
        for role in roles:
            P = found.get(role)
            if P is None:
                if marks != "auto":
                    raise ValueError(f"{type(model).__name__} keeps no {role!r} points")
                continue
            style = dict(_MARKS.get(role, dict(s=50, marker="o", label=role)))
            style["label"] = f"{style['label']} ({len(P)})"
            ax.scatter(P[:, 0], P[:, 1], **style)
        if found:
            ax.legend(loc="best", fontsize=8)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_xlabel("x₁")
    ax.set_ylabel("x₂")
    ax.set_title(title if title is not None else type(model).__name__)
    return ax


def plot_error_vs_k(k: Sequence[float], error: Sequence[float], *, time: Sequence[float] | None = None,
                    ax: Any = None, label: str | None = None, percent: bool = True, logx: bool = True,
                    marker: str = "o"):
    """Test error against the number of landmarks k (optionally training time on a twin axis).

    ``error`` is a fraction in [0, 1]; shown in percent when ``percent``.
    Returns the error axes (the time axes is ``ax.time_axes`` when drawn).
    """
    ax = _axes(ax)
    k = np.asarray(k, dtype=float)
    err = np.asarray(error, dtype=float) * (100.0 if percent else 1.0)
    if k.shape != err.shape:
        raise ValueError(f"k and error must have the same length, got {k.shape} and {err.shape}")
    line, = ax.plot(k, err, marker=marker, label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("landmarks k")
    ax.set_ylabel("test error %" if percent else "test error")
    ax.grid(True, which="both", alpha=0.3)
    if time is not None:
        t = np.asarray(time, dtype=float)
        if t.shape != k.shape:
            raise ValueError("time must have the same length as k")
        ax2 = getattr(ax, "time_axes", None) or ax.twinx()
        ax2.plot(k, t, marker="s", linestyle="--", color=line.get_color(), alpha=0.6,
                 label=f"{label} time" if label else "time")
        ax2.set_ylabel("training time (s)")
        ax.time_axes = ax2
    if label:
        ax.legend(loc="best", fontsize=8)
    return ax


def plot_time_vs_n(n: Sequence[float], time: Sequence[float], *, ax: Any = None, label: str | None = None,
                   loglog: bool = True, marker: str = "o"):
    """Training time against training-set size (log–log by default)."""
    ax = _axes(ax)
    n = np.asarray(n, dtype=float)
    t = np.asarray(time, dtype=float)
    if n.shape != t.shape:
        raise ValueError(f"n and time must have the same length, got {n.shape} and {t.shape}")
    ax.plot(n, t, marker=marker, label=label)
    if loglog:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("training rows n")
    ax.set_ylabel("training time (s)")
    ax.grid(True, which="both", alpha=0.3)
    if label:
        ax.legend(loc="best", fontsize=8)
    return ax


def plot_accuracy_vs_time(points: Sequence[dict], *, ax: Any = None, logx: bool = True,
                          title: str | None = None):
    """One labelled point per method: ``{"label", "time", "accuracy"}`` (accuracy a fraction)."""
    ax = _axes(ax)
    for p in points:
        ax.scatter([p["time"]], [100.0 * p["accuracy"]], s=40, label=p["label"])
        ax.annotate(p["label"], (p["time"], 100.0 * p["accuracy"]), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    if logx and points and min(p["time"] for p in points) > 0:
        ax.set_xscale("log")
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test accuracy %")
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    return ax


def plot_tracking_error(error: Sequence[float], *, t: Sequence[float] | None = None,
                        change_at: float | None = None, ax: Any = None, label: str | None = None,
                        logy: bool = False, ylabel: str = "error"):
    """An error over time (e.g. OK-FEB's running fitting error), with the change point marked."""
    ax = _axes(ax)
    err = np.asarray(error, dtype=float)
    t = np.arange(1, len(err) + 1) if t is None else np.asarray(t, dtype=float)
    if t.shape != err.shape:
        raise ValueError("t and error must have the same length")
    ax.plot(t, err, label=label)
    if change_at is not None:
        ax.axvline(change_at, color="k", linestyle=":", linewidth=1, label="change")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("time (samples)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if label or change_at is not None:
        ax.legend(loc="best", fontsize=8)
    return ax
