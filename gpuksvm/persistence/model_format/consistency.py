"""Consistency checks across a model's attributes, beyond each attribute's own :class:`Spec`.

Each ``check_*`` function takes the rebuilt object, the named dimensions bound by its
attributes (:class:`~gpuksvm.persistence.model_format.specs.Dims`) and its path in the tree, and
raises :class:`~gpuksvm.persistence.model_format.specs.ModelFormatError` for a model that would
not predict, or would predict non-finite values, on finite input of the range it was
fitted on: numbers of binary problems, classes and weight rows that disagree, counts
that do not add up, kernel-specific attributes with a kernel that has no use for them,
kernel values that overflow on the stored rows, matrices that must be positive definite
and are not, widths that differ along a Pipeline.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from sklearn.preprocessing import StandardScaler

from gpuksvm import registry
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.multiclass import binary_problems
from gpuksvm.solvers.linear.online import Pegasos
from gpuksvm.persistence.model_format.specs import Dims, check_rows, check_values, format_error, value_bound

__all__ = ["MAX_DEGREE", "SCALE_FLOOR", "check_kernel", "check_working_dtype", "check_linear", "check_llsvm", "check_cvm", "check_svc", "check_svi",
           "check_subspace", "check_okfeb", "check_learner", "check_record", "check_scaler",
           "check_pipeline_widths"]

#: largest polynomial degree a model file may hold
MAX_DEGREE = 100
#: smallest StandardScaler scale: √ of the smallest normal float64 variance (dividing by less
#: turns the scaled rows of moderate input into inf)
SCALE_FLOOR = float(np.sqrt(np.finfo(np.float64).tiny))


def n_outputs(n_classes: int) -> int:
    """Weight rows of a one-vs-rest linear model: one for two classes, else one per class."""
    return 1 if n_classes == 2 else n_classes


def _max_sq_norm(rows: Any) -> float:
    if sp.issparse(rows):
        sq = np.asarray(rows.multiply(rows).sum(axis=1), dtype=np.float64).ravel()
    else:
        r = np.asarray(rows, dtype=np.float64)
        sq = np.einsum("ij,ij->i", r, r) if r.ndim == 2 else np.zeros(0)
    return float(sq.max()) if sq.size else 0.0


def check_kernel(kernel: Any, rows: Any, path: str) -> None:
    """A kernel's declared range: a whole polynomial degree at most :data:`MAX_DEGREE`, and kernel
    values on the stored ``rows`` (support vectors, landmarks) within :func:`value_bound` of
    their dtype (by :meth:`Kernel.max_diag` and Cauchy–Schwarz: every κ(x, z) with x, z of
    the stored rows' norms)."""
    if type(kernel) is not Kernel:
        return
    if kernel.name == "poly" and kernel.degree > MAX_DEGREE:
        raise format_error(f"{path}.kernel", f"polynomial degree {kernel.degree:g} is above {MAX_DEGREE}")
    if not isinstance(rows, np.ndarray) and not sp.issparse(rows):
        return      # an ArrayInfo stand-in: no values to check
    bound = value_bound(rows.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        top = kernel.max_diag(_max_sq_norm(rows))
    if not top <= bound:
        raise format_error(f"{path}.kernel", f"kernel values on the stored rows reach {top:.3g}, beyond "
                           f"{bound:.3g} in {np.dtype(rows.dtype).name}")


def check_working_dtype(est: Any, rows: str, values: tuple[str, ...], path: str) -> None:
    """Arrays a prediction computes with in the dtype of the stored ``rows`` (the model's working
    dtype, which the input is cast to): the rows in its working range, the ``values`` within its
    :func:`value_bound` (a float64 array of a float32 model is cast to float32)."""
    R = getattr(est, rows, None)
    if R is None or not hasattr(R, "dtype") or np.dtype(R.dtype).kind != "f":
        return
    dt = np.dtype(R.dtype)
    if dt == np.float64:
        return      # each array was checked in its own dtype, none narrower than float64
    check_rows(R, f"{path}.{rows}", dtype=dt)
    for name in values:
        check_values(getattr(est, name, None), f"{path}.{name}", dtype=dt)


def _problems_for(est: Any, dims: Dims, path: str, scheme: str) -> None:
    """The number of binary problems agrees with the classes and the multi-class scheme."""
    k = dims.get("n_classes")
    p = dims.get("n_problems")
    if k is None or p is None:
        return
    want = 1 if k == 2 else (k * (k - 1) // 2 if scheme == "ovo" else k)
    if p != want:
        raise format_error(path, f"{p} binary problems for {k} classes ({scheme}); expected {want}")
    problems = getattr(est, "problems_", None)
    if problems is not None and list(problems) != binary_problems(k, scheme):
        # the fit's problems for these classes and scheme, in its order: the decision columns
        raise format_error(f"{path}.problems_", f"are not the {scheme} problems of {k} classes")


def _platt(est: Any, dims: Dims, path: str, per: str, holder: Any = None) -> None:
    """``probA_``/``probB_`` (of ``holder``, by default ``est``): there when ``probability=True``
    (``predict_proba`` uses them), one coefficient per binary problem (dimension ``per``)."""
    holder = est if holder is None else holder
    if getattr(est, "probability", False) is True and not (hasattr(holder, "probA_") and hasattr(holder, "probB_")):
        raise format_error(path, "probability=True but the model has no Platt coefficients probA_/probB_")
    n, want = dims.get("n_platt"), dims.get(per)
    if n is not None and want is not None and n != want:
        raise format_error(path, f"probA_/probB_ hold {n} coefficients for {want} binary problems")


def check_linear(est: Any, dims: Dims, path: str) -> None:
    k, m = dims.get("n_classes"), dims.get("n_outputs")
    if k is not None and m is not None and m != n_outputs(k):
        raise format_error(path, f"{m} weight rows for {k} classes")
    _platt(est, dims, path, "n_outputs")


def check_llsvm(est: Any, dims: Dims, path: str) -> None:
    svm = getattr(est, "svm_", None)
    if svm is not None:
        if getattr(svm, "n_features_in_", None) not in (None, dims.get("k")):
            raise format_error(f"{path}.svm_", "its input width differs from the number of landmarks")
        if hasattr(svm, "coef_") and hasattr(est, "coef_") and svm.coef_.shape != est.coef_.shape:
            raise format_error(f"{path}.svm_", "its weights differ in shape from the model's")
        inner, outer = getattr(svm, "classes_", None), getattr(est, "classes_", None)
        if inner is not None and outer is not None and not (
                np.asarray(inner).dtype == np.asarray(outer).dtype and np.array_equal(inner, outer)):
            raise format_error(f"{path}.svm_.classes_", "the labels differ from the model's classes_")
    check_kernel(getattr(est, "kernel_", None), getattr(est, "landmarks_", None), path)
    # the input is cast to map_'s dtype; the landmarks meet it there
    M = getattr(est, "map_", None)
    L = getattr(est, "landmarks_", None)
    if M is not None and L is not None and np.dtype(M.dtype) != np.dtype(L.dtype):
        raise format_error(f"{path}.landmarks_", f"dtype {np.dtype(L.dtype).name} differs from map_'s "
                           f"{np.dtype(M.dtype).name}")
    check_working_dtype(est, "landmarks_", ("map_", "dual_coef_", "coef_", "intercept_"), path)
    k, m = dims.get("n_classes"), dims.get("n_outputs")
    if k is not None and m is not None and m != n_outputs(k):
        raise format_error(path, f"{m} weight rows for {k} classes")
    if svm is not None:
        _platt(est, Dims(), path, "n_outputs", holder=svm)


def check_cvm(est: Any, dims: Dims, path: str) -> None:
    method = registry.find(type(est).__name__)
    one_class = (method is not None and method.kind == "outlier_detector") or not hasattr(est, "classes_")
    if one_class:
        if dims.get("n_problems") not in (None, 1):
            raise format_error(path, "a one-class model has exactly one problem")
    else:
        _problems_for(est, dims, path, getattr(est, "multi_class", "ovo"))
    kernel = getattr(est, "kernel_", None)
    if kernel is not None:
        scaled = bool(est.normalize) and kernel.constant_diag is None
        if (getattr(est, "_sv_scale", None) is not None) != scaled:
            raise format_error(f"{path}._sv_scale", "is stored exactly for a normalized kernel without a "
                               f"constant diagonal (normalize={est.normalize!r}, kernel {kernel.name!r})")
    check_kernel(kernel, getattr(est, "support_vectors_", None), path)
    check_working_dtype(est, "support_vectors_", ("dual_coef_", "intercept_", "_sv_scale", "rho_"), path)


def _n_support(est: Any, dims: Dims, path: str) -> None:
    ns = getattr(est, "n_support_", None)
    if isinstance(ns, np.ndarray) and dims.get("n_sv") is not None:
        if sum(int(x) for x in ns) != dims.get("n_sv"):
            raise format_error(f"{path}.n_support_", "does not add up to the number of support vectors")


def check_svc(est: Any, dims: Dims, path: str) -> None:
    _problems_for(est, dims, path, "ovo")
    sv = getattr(est, "support_vectors_", None)
    if sv is not None:
        want = ((0, 0) if getattr(est, "kernel_", None) == "precomputed"
                else (dims.get("n_sv"), dims.get("n_features_in_")))
        if any(w is not None and got != w for got, w in zip(sv.shape, want)):
            raise format_error(f"{path}.support_vectors_", f"shape {tuple(sv.shape)}, expected "
                               f"{tuple('?' if w is None else w for w in want)}")
    k, r = dims.get("n_classes"), dims.get("n_dual_rows")
    if k is not None and r is not None and r != max(k - 1, 1):
        raise format_error(path, f"dual_coef_ has {r} rows for {k} classes")
    _n_support(est, dims, path)
    _platt(est, dims, path, "n_problems")
    check_kernel(getattr(est, "kernel_", None), sv, path)
    check_working_dtype(est, "support_vectors_", ("dual_coef_", "intercept_"), path)


def check_svi(est: Any, dims: Dims, path: str) -> None:
    _problems_for(est, dims, path, getattr(est, "multi_class", "ovo"))
    _n_support(est, dims, path)
    _platt(est, dims, path, "n_problems")
    check_kernel(getattr(est, "kernel_", None), getattr(est, "support_vectors_", None), path)
    check_working_dtype(est, "support_vectors_", ("dual_coef_", "intercept_"), path)


def check_subspace(st: Any, dims: Dims, path: str) -> None:
    cap, m = dims.get("cap"), dims.get("m")
    if cap is not None and m is not None and m > cap:
        raise format_error(path, f"{m} stored vectors but buffers for {cap}")
    dt = getattr(st, "dtype", None)
    if dt is not None:
        for name in ("S", "sn", "A", "K", "ra", "Pbuf", "P", "C", "L"):
            a = getattr(st, name, None)
            if a is not None and np.dtype(a.dtype) != dt:
                raise format_error(f"{path}.{name}", f"dtype {np.dtype(a.dtype).name} differs from the "
                                   f"state's {dt.name}")
    S, sn = getattr(st, "S", None), getattr(st, "sn", None)
    if isinstance(S, np.ndarray) and isinstance(sn, np.ndarray) and m is not None:
        # the kernels read ‖s‖² from sn: a wrong one turns exp(−γ‖x − s‖²) into exp(+…)
        true = np.einsum("ij,ij->i", S[:m].astype(np.float64), S[:m].astype(np.float64))
        if not np.allclose(sn[:m].astype(np.float64), true, rtol=1e-3, atol=1e-6 * (1.0 + float(true.max(initial=0)))):
            raise format_error(f"{path}.sn", "differs from the squared norms of the stored vectors S")
    check_kernel(getattr(st, "kernel", None), S[:m] if isinstance(S, np.ndarray) and m is not None else S,
                 path)


def check_okfeb(est: Any, dims: Dims, path: str) -> None:
    st = getattr(est, "subspace_", None)
    if st is None:
        return
    if st.A.shape[1] != est.rank:
        raise format_error(f"{path}.subspace_", f"rank {st.A.shape[1]} but the model's rank is {est.rank}")
    d = dims.get("n_features_in_")
    if d is not None and st.S.shape[1] != d:
        raise format_error(f"{path}.subspace_", f"stored vectors of width {st.S.shape[1]} for {d} features")
    C = st.C
    if isinstance(C, np.ndarray):
        # transform factors C + λI in float64 (OnlineSubspace.feature_map), partial_fit in the
        # working dtype through the stored factor L
        C64 = C.astype(np.float64)
        if not np.allclose(C64, C64.T, rtol=1e-4, atol=1e-8 * (1.0 + float(np.abs(C64).max(initial=0)))):
            raise format_error(f"{path}.subspace_.C", "is not symmetric")
        try:
            sla.cholesky(C64 + float(est.reg) * np.eye(C64.shape[0]), lower=True)
        except (np.linalg.LinAlgError, ValueError):
            raise format_error(f"{path}.subspace_.C", f"C + reg·I is not positive definite "
                               f"(reg={est.reg!r})") from None
        L = st.L
        if isinstance(L, np.ndarray) and (np.triu(L, 1).any() or not (np.diag(L) > 0).all()):
            raise format_error(f"{path}.subspace_.L", "is not a Cholesky factor (lower triangular, "
                               "positive diagonal)")


def check_learner(est: Any, dims: Dims, path: str) -> None:
    fe, lr = getattr(est, "extractor_", None), getattr(est, "_learner", None)
    if fe is not None and lr is not None and lr.n_features != fe.rank:
        raise format_error(f"{path}._learner", f"{lr.n_features} weights for {fe.rank} OK-FEB features")
    if fe is not None and getattr(fe, "n_features_in_", None) not in (None, dims.get("n_features_in_")):
        raise format_error(f"{path}.extractor_", "its input width differs from the model's")
    if fe is not None and lr is not None and not hasattr(fe, "subspace_"):
        raise format_error(f"{path}.extractor_", "a fitted model's feature extractor is not fitted")
    k = dims.get("n_classes")
    if k is not None and isinstance(lr, Pegasos) and lr.G.shape[1] != n_outputs(k):
        raise format_error(f"{path}._learner", f"{lr.G.shape[1]} outputs for {k} classes")


def check_record(est: Any, dims: Dims, path: str) -> None:
    """An online learner: one weight per feature (+ intercept), weights within range."""
    w = est.G if isinstance(est, Pegasos) else est.w
    if w.shape[0] != est.n_features + int(est.fit_intercept):
        raise format_error(path, f"{w.shape[0]} weights for {est.n_features} features")
    if isinstance(est, Pegasos) and isinstance(w, np.ndarray) and w.size:
        # the weights used are G / (λ max(t, 1))
        top = float(np.abs(w).max()) / (est.lam * max(est.t, 1))
        if not top <= value_bound(w.dtype):
            raise format_error(path, f"weights G/(lam·t) reach {top:.3g} (lam={est.lam!r}, t={est.t})")


def check_scaler(est: Any, dims: Dims, path: str) -> None:
    """StandardScaler: the statistics its parameters use are there, and ``scale_`` is what
    scikit-learn's fit makes of ``var_``: √var_, or 1 for a constant feature."""
    if est.with_mean and getattr(est, "mean_", None) is None:
        raise format_error(f"{path}.mean_", "is None but with_mean=True")
    scale, var = getattr(est, "scale_", None), getattr(est, "var_", None)
    if est.with_std and (scale is None or var is None):
        raise format_error(f"{path}.scale_", "is None but with_std=True")
    if isinstance(scale, np.ndarray) and isinstance(var, np.ndarray):
        root = np.sqrt(var.astype(np.float64))
        s = scale.astype(np.float64)
        ok = (s == 1.0) | np.isclose(s, root, rtol=1e-6, atol=0.0)
        if not ok.all() or not (s >= SCALE_FLOOR).all():
            raise format_error(f"{path}.scale_", f"is not √var_ (or 1 for a constant feature) of at least "
                               f"{SCALE_FLOOR:.3g}")


def _output_width(step: Any) -> int | None:
    """Columns a fitted intermediate Pipeline step passes on (None: not a known transformer)."""
    if type(step) is StandardScaler:
        return getattr(step, "n_features_in_", None)
    if hasattr(step, "subspace_"):                      # OKFEB
        return int(step.rank)
    if hasattr(step, "map_"):                           # LLSVM's kernel map
        return int(step.map_.shape[1])
    return None


def check_pipeline_widths(steps: list) -> None:
    """Steps all fitted or all unfitted; each fitted step takes the width the step before gives."""
    ests = [(name, est) for name, est in steps if est not in (None, "passthrough")]
    fitted = [hasattr(est, "n_features_in_") for _, est in ests]
    if any(fitted) and not all(fitted):
        raise format_error("Pipeline", "some steps are fitted and others not")
    width = None
    for name, est in ests:
        n_in = getattr(est, "n_features_in_", None)
        if width is not None and n_in is not None and n_in != width:
            raise format_error(f"Pipeline.{name}", f"takes {n_in} features but the step before gives {width}")
        width = _output_width(est)
