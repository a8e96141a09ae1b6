"""Underflow is a range error too: values too small for the working dtype are refused.

The twin of the overflow checks of ``validation.check_working_range``: a
nonzero value below the working dtype's smallest normal number, or training
data whose largest value has a square below it (every kernel distance and
Gram product 0: a constant model), is refused with a message naming the
dtype and the fix; ``gamma="scale"`` refuses a variance that underflowed
instead of using 1.  A parameter whose reciprocal overflows float64 is
refused under the name the user set (OK-FEB's ``alpha``, Pegasos' ``lam``).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpuksvm.estimators.cvm import CVM
from gpuksvm.datasets import make_checkerboard
from gpuksvm.estimators.kernel_svc import KernelSVC
from gpuksvm.kernels.kernel import resolve_gamma
from gpuksvm.estimators.llsvm import LLSVM
from gpuksvm.estimators.okfeb import OKFEBClassifier
from gpuksvm.solvers.linear.online import Pegasos
from gpuksvm.array.validation import WorkingRangeError, WorkingUnderflowError, check_working_range


@pytest.fixture(scope="module")
def board():
    return make_checkerboard(300, grid=2, random_state=0)


@pytest.mark.parametrize("make", [lambda: CVM(device="cpu", random_state=0),
                                  lambda: KernelSVC(device="cpu"),
                                  lambda: CVM(gamma=2.0, device="cpu", random_state=0),
                                  lambda: KernelSVC(gamma=2.0, device="cpu")],
                         ids=["CVM-scale", "KernelSVC-scale", "CVM-gamma", "KernelSVC-gamma"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_values_whose_squares_underflow_float64_are_refused(board, make, sparse):
    X, y = board
    Xs = X * 1e-200
    with pytest.raises(WorkingUnderflowError, match=r"smallest normal float64.*Scale the features") as err:
        make().fit(sp.csr_matrix(Xs) if sparse else Xs, y)
    assert "large values" not in str(err.value)          # not SVC's overflow sentence
    assert isinstance(err.value, WorkingRangeError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("scale", [1e-30, 1e-40, 1e-46])
def test_llsvm_float32_refuses_values_it_cannot_hold(board, scale):
    X, y = board
    est = LLSVM(n_landmarks=20, device="cpu", random_state=0)
    with pytest.raises(WorkingUnderflowError, match=r"float32.*dtype='float64'"):
        est.fit(X * scale, y)
    assert not hasattr(est, "classes_")


def test_a_subnormal_value_is_refused_in_float32_and_kept_in_float64(board):
    X, y = board
    X = X.copy()
    X[3, 1] = 1e-40                         # normal in float64, subnormal in float32
    with pytest.raises(WorkingUnderflowError, match=r"as small as 1e-40.*float32"):
        LLSVM(n_landmarks=20, device="cpu", random_state=0).fit(X, y)
    clf = LLSVM(n_landmarks=20, device="cpu", random_state=0, dtype="float64").fit(X, y)
    assert clf.score(X, y) > 0.8
    with pytest.raises(WorkingUnderflowError, match="subnormal"):
        check_working_range(np.array([[1.0, 5e-320]]), np.float64)


def test_predicting_rows_close_to_zero_is_not_an_underflow(board):
    X, y = board
    clf = KernelSVC(device="cpu").fit(X, y)
    assert clf.predict(X[:5] * 1e-200).shape == (5,)


def test_gamma_scale_refuses_a_variance_that_underflowed():
    X = np.random.default_rng(0).normal(size=(40, 3))
    for A in (X * 1e-200, sp.csr_matrix(X * 1e-200), X * 1e-155):
        with pytest.raises(ValueError, match=r"gamma='scale' needs Var\(X\).*not constant"):
            resolve_gamma("scale", A)
    with pytest.raises(ValueError, match="gamma='mean_dist' needs the mean squared distance"):
        resolve_gamma("mean_dist", X * 1e-200)
    # scikit-learn's rule for a constant X (variance exactly 0, nothing underflowed) stays
    assert resolve_gamma("scale", np.full((5, 2), 3.0)) == 1.0
    assert resolve_gamma("scale", sp.csr_matrix((5, 2))) == 1.0
    assert resolve_gamma("mean_dist", np.ones((5, 2))) == 1.0


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize("alpha", [1e-320, 5e-324, 1e-310])
def test_okfeb_classifier_names_alpha_when_its_reciprocal_overflows(board, method, alpha):
    X, y = board
    clf = OKFEBClassifier(alpha=alpha, rank=5, n_landmarks=10, device="cpu", random_state=0)
    with pytest.raises(ValueError, match=r"^alpha=.* is too small.*1/alpha overflows") as err:
        getattr(clf, method)(X, y)
    assert "C must" not in str(err.value)
    assert not hasattr(clf, "classes_")


def test_okfeb_classifier_partial_fit_small_alpha_stays_finite(board):
    X, y = board
    clf = OKFEBClassifier(alpha=1e-300, rank=5, n_landmarks=10, device="cpu", random_state=0)
    assert np.isfinite(clf.partial_fit(X, y).decision_function(X)).all()


@pytest.mark.parametrize("lam", [0.0, 5e-324, 1e-310, float("nan")])
def test_pegasos_refuses_a_lam_whose_reciprocal_overflows(lam):
    with pytest.raises(ValueError, match="lam must be a positive normal float64"):
        Pegasos(3, 1, lam=lam)
