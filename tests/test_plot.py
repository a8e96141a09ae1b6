"""gpuksvm.plot: every plot draws what it says, and a missing matplotlib is a clear ImportError."""
from __future__ import annotations

import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from gpuksvm import plot  # noqa: E402
from gpuksvm.datasets import make_checkerboard, make_two_sines  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []


def test_decision_boundary_marks_support_vectors():
    X, y = make_two_sines(300, random_state=0)
    svc = SVC(gamma=1.0, C=10.0).fit(X, y)
    ax = plot.plot_decision_boundary(svc, X, y, resolution=40)
    labels = _labels(ax)
    assert labels == [f"support vectors ({len(svc.support_vectors_)})"]
    # the boundary (level 0) and the ±1 margins are drawn as contour sets
    assert len(ax.collections) >= 3
    assert ax.get_title() == "SVC"


def test_decision_boundary_custom_marks_and_predict_only():
    X, y = make_checkerboard(200, grid=2, random_state=0)

    class PredictOnly:
        def predict(self, Z):
            return np.where(Z[:, 0] > 0.5, 1, -1)

    ax = plot.plot_decision_boundary(PredictOnly(), X, y, resolution=30,
                                     marks={"landmarks": X[:5], "core": X[5:9]}, title="t")
    assert _labels(ax) == ["landmarks (5)", "core vectors (4)"]
    with pytest.raises(ValueError, match="keeps no 'landmarks'"):
        plot.plot_decision_boundary(PredictOnly(), X, y, resolution=10, marks=["landmarks"])
    with pytest.raises(ValueError, match="2 features"):
        plot.plot_decision_boundary(PredictOnly(), np.zeros((5, 3)))


def test_model_points_of_gpuksvm_models():
    from gpuksvm.estimators import llsvm

    X, y = make_checkerboard(300, grid=2, random_state=0)
    m = llsvm.LLSVM(n_landmarks=12, gamma=5.0, C=10.0, random_state=0, device="cpu").fit(X, y)
    pts = plot.model_points(m)
    assert pts["landmarks"].shape == (12, 2)
    ax = plot.plot_decision_boundary(m, X, y, resolution=30)
    assert "landmarks (12)" in _labels(ax)


def test_curves():
    ax = plot.plot_error_vs_k([10, 100, 1000], [0.1, 0.05, 0.02], time=[1, 2, 8], label="kmeans")
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), [10, 5, 2])
    assert ax.get_xscale() == "log" and ax.time_axes.get_ylabel() == "training time (s)"
    ax = plot.plot_time_vs_n([1e3, 1e4], [0.5, 0.6], label="cvm")
    assert ax.get_yscale() == "log" and _labels(ax) == ["cvm"]
    ax = plot.plot_accuracy_vs_time([{"label": "a", "time": 1.0, "accuracy": 0.9},
                                     {"label": "b", "time": 3.0, "accuracy": 0.95}])
    assert [t.get_text() for t in ax.texts] == ["a", "b"]
    ax = plot.plot_tracking_error(np.linspace(1, 0, 50), change_at=25, label="beta=1")
    assert _labels(ax) == ["beta=1", "change"]
    with pytest.raises(ValueError, match="same length"):
        plot.plot_error_vs_k([1, 2], [0.1])
    with pytest.raises(ValueError, match="same length"):
        plot.plot_time_vs_n([1, 2], [0.1])


def test_missing_matplotlib_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot.plot_time_vs_n([1, 2], [1, 2])
