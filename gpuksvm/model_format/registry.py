"""The closed registry: every class a model file may hold, what it holds, and its checks.

One :class:`Entry` per class: its declared fitted attributes (name →
:class:`~gpuksvm.model_format.specs.Spec`), the attributes a fitted model must
have, the class's own parameter checks, and the consistency checks across
attributes beyond the named dimensions.  :data:`REGISTRY` maps the key a file
names a class by to its entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from .. import backend as bk
from ..cvm import CVM, OneClassCVM
from ..kernel_svc import KernelSVC
from ..kernels import Kernel
from ..linear_svm import LinearSVM
from ..llsvm import LLSVM
from ..okfeb import OKFEB, OKFEBClassifier, OKFEBRegressor
from ..solvers.okfeb import OnlineSubspace
from ..solvers.online import Pegasos, RegularizedLMS
from ..svi import SVI
from .specs import (INT64_RANGE, Arr, Bool, DeviceSpec, Dims, DictOf, DTypeSpec, Either, Float, Info, Instance,
                    Int, ListOf, ModelFormatError, Opt, SparseOrArr, Spec, Str, Strings, TupleOf, format_error,
                    is_array)

__all__ = ["Entry", "REGISTRY", "entry_for"]


# shorthands of the declarations below
def _labels(dim: str = "n_classes") -> Spec:
    return Either(Arr("biufU", (dim,)), Strings((dim,)), what="class labels")


INT_1D, FLOAT_1D = Arr("iu", ndim=1), Arr("f", ndim=1)
KERNEL = Instance(Kernel)
PROBLEMS = ListOf(TupleOf(Int(low=0), Opt(Int(low=0))), dim="n_problems")


@dataclass
class Entry:
    """One class a model file may hold.

    Attributes
    ----------
    name : the key a file names it by
    cls : the class (compared by identity when saving)
    fitted : declared attribute name → Spec (for ``kind="record"``: every attribute)
    kind : "estimator" (constructor parameters + fitted attributes) or "record"
        (a plain state holder rebuilt from its declared attributes only)
    required : attributes a fitted model of this class must have
    validate : the class's own parameter checks, run on the rebuilt object
    check : consistency checks across attributes (beyond the named dimensions)
    transient : attributes not stored, recreated on load (caches)
    upgrade : rewrites the ``fitted`` JSON object of a file written before the class's
        attributes changed (pure JSON → JSON: renames and regrouping, nothing is built)
    upgrade_decoded : the post-load normalization step: rewrites the decoded attribute
        values (name → value, before they are checked against ``fitted``) of a file written
        before an attribute changed shape in a way JSON cannot express (a number that is
        now an array); builds nothing but NumPy arrays and lists
    """

    name: str
    cls: type
    fitted: dict[str, Spec]
    kind: str = "estimator"
    required: tuple = ()
    validate: Callable[[Any], None] | None = None
    check: Callable[[Any, Dims, str], None] | None = None
    transient: dict[str, Callable[[], Any]] = field(default_factory=dict)
    upgrade: Callable[[dict], dict] | None = None
    upgrade_decoded: Callable[[dict], dict] | None = None

    @property
    def v1_name(self) -> str:
        """How format version 1 named the class (``module:QualName``)."""
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


def _common(extra: dict[str, Spec]) -> dict[str, Spec]:
    """Attributes every gpuksvm estimator may have, plus its own."""
    out = {"n_features_in_": Int(low=1, high=INT64_RANGE[1], dim="n_features_in_"),
           "feature_names_in_": Strings(("n_features_in_",)),
           "_fitted_on": DeviceSpec(),
           "dask_info_": Info()}
    out.update(extra)
    return out


def _check_device_and_dtype(est: Any) -> None:
    """The ``device`` and ``dtype`` parameters every gpuksvm estimator has."""
    try:
        bk.resolve_device(est.device)
    except bk.DeviceUnavailableError:
        pass      # a valid device name; the model runs on the CPU here
    bk.resolve_dtype(est.dtype, bk.CPU)


def _own_checks(*methods: str) -> Callable[[Any], None]:
    def run(est: Any) -> None:
        _check_device_and_dtype(est)
        for m in methods:
            getattr(est, m)()
    return run


def _n_outputs(n_classes: int) -> int:
    return 1 if n_classes == 2 else n_classes


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
    if problems is not None:
        for i, (a, b) in enumerate(problems):
            if a >= k or (b is not None and b >= k):
                raise format_error(f"{path}.problems_[{i}]", f"class index out of range for {k} classes")


def _check_linear(est: Any, dims: Dims, path: str) -> None:
    k, m = dims.get("n_classes"), dims.get("n_outputs")
    if k is not None and m is not None and m != _n_outputs(k):
        raise format_error(path, f"{m} weight rows for {k} classes")
    if dims.get("n_platt") not in (None, m):
        raise format_error(path, "probA_/probB_ do not match the binary problems")


def _check_llsvm(est: Any, dims: Dims, path: str) -> None:
    svm = getattr(est, "svm_", None)
    if svm is not None:
        if getattr(svm, "n_features_in_", None) not in (None, dims.get("k")):
            raise format_error(f"{path}.svm_", "its input width differs from the number of landmarks")
        if hasattr(svm, "coef_") and hasattr(est, "coef_") and svm.coef_.shape != est.coef_.shape:
            raise format_error(f"{path}.svm_", "its weights differ in shape from the model's")
    _check_linear(est, dims, path)


def _check_cvm(est: Any, dims: Dims, path: str) -> None:
    one_class = type(est) is OneClassCVM or getattr(est, "task", None) == "one_class"
    if one_class:
        if dims.get("n_problems") not in (None, 1):
            raise format_error(path, "a one-class model has exactly one problem")
    else:
        _problems_for(est, dims, path, getattr(est, "multi_class", "ovo"))


def _check_svc(est: Any, dims: Dims, path: str) -> None:
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
    ns = getattr(est, "n_support_", None)
    if isinstance(ns, np.ndarray) and dims.get("n_sv") is not None and int(ns.sum()) != dims.get("n_sv"):
        raise format_error(f"{path}.n_support_", "does not add up to the number of support vectors")


def _check_svi(est: Any, dims: Dims, path: str) -> None:
    _problems_for(est, dims, path, getattr(est, "multi_class", "ovo"))


def _check_subspace(st: Any, dims: Dims, path: str) -> None:
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


def _check_okfeb(est: Any, dims: Dims, path: str) -> None:
    st = getattr(est, "subspace_", None)
    if st is None:
        return
    if st.A.shape[1] != est.rank:
        raise format_error(f"{path}.subspace_", f"rank {st.A.shape[1]} but the model's rank is {est.rank}")
    d = dims.get("n_features_in_")
    if d is not None and st.S.shape[1] != d:
        raise format_error(f"{path}.subspace_", f"stored vectors of width {st.S.shape[1]} for {d} features")


#: OK-FEB's fitted state before it moved into OnlineSubspace (format 1, and format 2 files
#: written until then): estimator attribute → OnlineSubspace attribute
_OKFEB_LEGACY = {"kernel_": "kernel", "_dt": "dtype", "_rs": "rng", "_S": "S", "_sn": "sn", "_A": "A",
                 "_K": "K", "_ra": "ra", "_Pbuf": "Pbuf", "_rec": "rec", "_sidx": "sidx", "_m": "m",
                 "n_seen_": "n_seen", "n_updates_": "n_updates", "_err_sum": "err_sum",
                 "_n_censored": "n_censored", "_ema": "ema", "_theta": "theta",
                 "censor_threshold_": "censor_threshold", "objective_history_": "objective_history",
                 "n_iter_": "n_iter", "last_errors_": "last_errors", "_P": "P", "_C": "C", "_L": "L"}
_OKFEB_LEGACY_DROPPED = ("_cache",)      # a cache, rebuilt on use


def _okfeb_upgrade(fitted: dict) -> dict:
    """An OKFEB ``fitted`` object with the legacy flat state → one with a ``subspace_`` record node."""
    if "subspace_" in fitted or not any(k in fitted for k in _OKFEB_LEGACY):
        return fitted
    out = {k: v for k, v in fitted.items() if k not in _OKFEB_LEGACY and k not in _OKFEB_LEGACY_DROPPED}
    out["subspace_"] = {"estimator": "gpuksvm.solvers.okfeb.OnlineSubspace",
                        "fitted": {new: fitted[old] for old, new in _OKFEB_LEGACY.items() if old in fitted}}
    return out


def _check_learner(est: Any, dims: Dims, path: str) -> None:
    fe, lr = getattr(est, "extractor_", None), getattr(est, "_learner", None)
    if fe is not None and lr is not None and lr.n_features != fe.rank:
        raise format_error(f"{path}._learner", f"{lr.n_features} weights for {fe.rank} OK-FEB features")
    if fe is not None and getattr(fe, "n_features_in_", None) not in (None, dims.get("n_features_in_")):
        raise format_error(f"{path}.extractor_", "its input width differs from the model's")
    k = dims.get("n_classes")
    if k is not None and isinstance(lr, Pegasos) and lr.G.shape[1] != _n_outputs(k):
        raise format_error(f"{path}._learner", f"{lr.G.shape[1]} outputs for {k} classes")


def _check_record_width(est: Any, dims: Dims, path: str) -> None:
    w = est.G if isinstance(est, Pegasos) else est.w
    if w.shape[0] != est.n_features + int(est.fit_intercept):
        raise format_error(path, f"{w.shape[0]} weights for {est.n_features} features")


def _check_pipeline(est: Pipeline) -> None:
    est._validate_params()
    if est.memory is not None:
        raise ModelFormatError("Pipeline.memory must be None in a model file")
    for i, step in enumerate(est.steps):
        if not (type(step) is tuple and len(step) == 2 and type(step[0]) is str):
            raise ModelFormatError(f"Pipeline.steps[{i}] must be a (name, estimator) pair")
        if not (step[1] in (None, "passthrough") or type(step[1]) in _BY_CLASS):
            raise ModelFormatError(f"Pipeline.steps[{i}] is not a registered estimator")
    est._validate_steps()


_PROBA = {"probA_": Arr("f", ("n_platt",)), "probB_": Arr("f", ("n_platt",))}

_LINEAR_FITTED = _common({
    "classes_": _labels(),
    "coef_": Arr("f", ("n_outputs", "n_features_in_")),
    "intercept_": Arr("f", ("n_outputs",)),
    "objective_": Arr("f", ("n_outputs",)),
    "n_iter_": Int(low=0),
    "converged_": Bool(),
    "solver_": Str(("newton", "newton-cg", "dual_cd", "dcd", "liblinear", "liblinear-primal", "sbm",
                    "newton-stream", "newton-dask")),
    "cost_scale_": Float(low=0.0),
    "n_passes_": Int(low=0),
    "dual_coef_": Opt(Arr("f", (None, "n_outputs"))),
    **_PROBA,
})

_CVM_STOP = Str(("converged", "max_iter", "max_core_size", "stalled"))
#: per search iteration of :func:`gpuksvm.solvers.meb.fit_core_set` (1-D, one entry each)
_CVM_HISTORY = DictOf(("m", "search_kernel", "qp_kernel", "qp_steps", "added", "seconds"),
                      Arr("iuf", ndim=1))
_CVM_FITTED = _common({
    "classes_": _labels(),
    "kernel_": KERNEL,
    "problems_": PROBLEMS,
    "support_": Arr("iu", ("n_sv",)),
    "support_vectors_": Arr("f", ("n_sv", "n_features_in_")),
    "dual_coef_": Arr("f", ("n_problems", "n_sv")),
    "_sv_scale": Opt(Arr("f", ("n_sv",))),
    "n_support_total_": Int(low=0, dim="n_sv"),
    "intercept_": Arr("f", ("n_problems",)),
    "core_set_": ListOf(INT_1D, dim="n_problems"),
    "alpha_": ListOf(FLOAT_1D, dim="n_problems"),
    "radius_": Arr("f", ("n_problems",)),
    "rho_": Arr("f", ("n_problems",)),
    "n_iter_": Arr("iu", ("n_problems",)),
    "stop_reason_": ListOf(_CVM_STOP, dim="n_problems"),
    "duality_gap_": Arr("f", ("n_problems",)),
    "history_": ListOf(_CVM_HISTORY, dim="n_problems"),
    "search_": Str(),
    "kappa_tilde_": Float(),
    "n_smo_steps_": Arr("iu", ("n_problems",)),
    "core_set_size_": Arr("iu", ("n_problems",)),
    "offset_": Float(),
    "fit_times_": Info(),
})
#: per-problem attributes that a binary or one-class CVM stored as one value before issue 16
_CVM_PER_PROBLEM_ARRAYS = {"radius_": np.float64, "n_iter_": np.int64, "duality_gap_": np.float64,
                           "n_smo_steps_": np.int64, "core_set_size_": np.int64}
_CVM_PER_PROBLEM_LISTS = {"core_set_": is_array, "alpha_": is_array,
                          "stop_reason_": lambda v: type(v) is str, "history_": lambda v: type(v) is dict}


def _cvm_one_problem_as_lists(values: dict) -> dict:
    """Decoded CVM attributes of a file written before issue 16 → per-problem shapes.

    Such files hold a single binary or one-class problem's ``n_iter_`` etc. as
    a number and its ``core_set_`` etc. as the bare object; they become
    arrays of shape (1,) and lists of one entry, the shapes a fit gives now.
    Files with several problems already had them.
    """
    out = dict(values)
    for k, dtype in _CVM_PER_PROBLEM_ARRAYS.items():
        if type(out.get(k)) in (int, float):
            out[k] = np.array([out[k]], dtype=dtype)
    for k, is_one in _CVM_PER_PROBLEM_LISTS.items():
        if k in out and is_one(out[k]):
            out[k] = [out[k]]
    return out


_CVM_REQUIRED = ("kernel_", "support_vectors_", "dual_coef_", "intercept_", "_sv_scale",
                 "n_features_in_", "rho_")

_OKFEB_FITTED = _common({"subspace_": Instance(OnlineSubspace)})
_OKFEB_REQUIRED = ("subspace_", "n_features_in_", "_fitted_on")

_SUBSPACE_FITTED = {
    "kernel": KERNEL,
    "dtype": DTypeSpec(),
    "rng": Instance(np.random.RandomState),
    "S": Arr("f", ("cap", "n_features")),
    "sn": Arr("f", ("cap",)),
    "A": Arr("f", ("cap", "rank")),
    "K": Opt(Arr("f", ("cap", "cap"))),
    "ra": Arr("f", ("cap",)),
    "Pbuf": Opt(Arr("f", ("cap", "rank"))),
    "rec": Arr("f", ("cap",)),
    "sidx": Arr("iu", ("cap",)),
    "m": Int(low=0, dim="m"),
    "n_seen": Int(low=0),
    "n_updates": Int(low=0),
    "err_sum": Float(),
    "n_censored": Int(low=0),
    "ema": Opt(Float()),
    "theta": Float(),
    "censor_threshold": Float(),
    "objective_history": ListOf(Float()),
    "n_iter": Int(low=0),
    "last_errors": FLOAT_1D,
    "P": Arr("f", ("m", "rank")),
    "C": Arr("f", ("rank", "rank")),
    "L": Arr("f", ("rank", "rank")),
}

_CAPACITY = {"capacity_check_": Info(), "budget_too_small_": Bool()}

_SVM_SHAPES = {
    "support_": Arr("iu", ("n_sv",)),
    "support_vectors_": SparseOrArr(("n_sv", "n_features_in_")),
    "intercept_": Arr("f", ("n_problems",)),
    "n_support_": Arr("iu", ("n_classes",)),
}

_ENTRIES = [
    Entry("gpuksvm.linear_svm.LinearSVM", LinearSVM, _LINEAR_FITTED,
          required=("classes_", "coef_", "intercept_", "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_linear),
    Entry("gpuksvm.llsvm.LLSVM", LLSVM, _common({
        "classes_": _labels(),
        "kernel_": KERNEL,
        "landmarks_": Arr("f", ("k", "n_features_in_")),
        "n_landmarks_": Int(low=1, dim="k"),
        "eigvals_": Arr("f", ("k",)),
        "spectrum_": Arr("f", ("k",)),
        "map_": Arr("f", ("k", "k")),
        "svm_": Instance(LinearSVM),
        "coef_": Arr("f", ("n_outputs", "k")),
        "intercept_": Arr("f", ("n_outputs",)),
        "dual_coef_": Arr("f", ("n_outputs", "k")),
        "n_iter_": Int(low=0),
        "_n_features_out": Int(low=1, dim="k"),
        "fit_times_": Info(),
    }), required=("classes_", "kernel_", "landmarks_", "map_", "svm_", "dual_coef_", "intercept_",
                  "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_llsvm),
    Entry("gpuksvm.cvm.CVM", CVM, _CVM_FITTED, required=_CVM_REQUIRED + ("classes_",),
          validate=_own_checks("_check_params"), check=_check_cvm,
          upgrade_decoded=_cvm_one_problem_as_lists),
    Entry("gpuksvm.cvm.OneClassCVM", OneClassCVM, _CVM_FITTED, required=_CVM_REQUIRED + ("offset_",),
          validate=_own_checks("_check_params"), check=_check_cvm,
          upgrade_decoded=_cvm_one_problem_as_lists),
    Entry("gpuksvm.kernel_svc.KernelSVC", KernelSVC, _common({
        **_SVM_SHAPES,
        # (0, 0) for kernel="precomputed", as SVC's (checked in _check_svc)
        "support_vectors_": SparseOrArr((None, None)),
        "classes_": _labels(),
        "kernel_": Either(KERNEL, Str(("precomputed",))),
        "dual_coef_": SparseOrArr(("n_dual_rows", "n_sv")),
        "solver_": Str(),
        "n_iter_": Arr("iu", ("n_problems",)),
        "objective_": Arr("f", ("n_problems",)),
        "converged_": Arr("b", ("n_problems",)),
        "shape_fit_": TupleOf(Int(low=0), Int(low=0)),
        **_PROBA,
    }), required=("classes_", "kernel_", "support_vectors_", "dual_coef_", "intercept_",
                  "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_svc),
    Entry("gpuksvm.svi.SVI", SVI, _common({
        **_SVM_SHAPES,
        "classes_": _labels(),
        "kernel_": KERNEL,
        "problems_": PROBLEMS,
        "subsets_": ListOf(ListOf(INT_1D)),
        "sub_models_": ListOf(Info()),
        "margin_support_": ListOf(INT_1D),
        "dual_coef_": SparseOrArr(("n_problems", "n_sv")),
        "n_iter_": Arr("iu", ("n_problems",)),
        "solved_exactly_": Arr("b", ("n_problems",)),
        "margin_capped_": Arr("b", ("n_problems",)),
        "converged_": Arr("b", ("n_problems",)),
        "fit_times_": Info(),
        **_PROBA,
    }), required=("classes_", "kernel_", "support_vectors_", "dual_coef_", "intercept_",
                  "problems_", "n_features_in_"),
          validate=_own_checks("_check_params"), check=_check_svi,
          upgrade=lambda fitted: {("fit_times_" if k == "fit_time_" else k): v for k, v in fitted.items()}),
    Entry("gpuksvm.okfeb.OKFEB", OKFEB, _OKFEB_FITTED, required=_OKFEB_REQUIRED,
          validate=_own_checks("_check_params"), check=_check_okfeb, upgrade=_okfeb_upgrade),
    Entry("gpuksvm.solvers.okfeb.OnlineSubspace", OnlineSubspace, _SUBSPACE_FITTED, kind="record",
          required=tuple(_SUBSPACE_FITTED), check=_check_subspace, transient={"_cache": dict}),
    Entry("gpuksvm.okfeb.OKFEBClassifier", OKFEBClassifier, _common({
        "classes_": _labels(),
        "extractor_": Instance(OKFEB),
        "_learner": Instance(Pegasos),
        **_CAPACITY,
    }), required=("classes_", "extractor_", "_learner", "n_features_in_"),
          validate=_own_checks("_check_params"),
          check=_check_learner),
    Entry("gpuksvm.okfeb.OKFEBRegressor", OKFEBRegressor, _common({
        "extractor_": Instance(OKFEB),
        "_learner": Instance(RegularizedLMS),
        **_CAPACITY,
    }), required=("extractor_", "_learner", "n_features_in_"),
          validate=_own_checks("_check_params"),
          check=_check_learner),
    Entry("gpuksvm.solvers.online.Pegasos", Pegasos, {
        "lam": Float(low=5e-324), "fit_intercept": Bool(), "n_features": Int(low=0),
        "G": Arr("f", (None, None), ndim=2), "t": Int(low=0),
    }, kind="record", required=("lam", "fit_intercept", "n_features", "G", "t"),
          check=_check_record_width),
    Entry("gpuksvm.solvers.online.RegularizedLMS", RegularizedLMS, {
        "step": Float(low=5e-324), "alpha": Float(low=0.0), "normalized": Bool(),
        "fit_intercept": Bool(), "n_features": Int(low=0), "w": FLOAT_1D, "t": Int(low=0),
    }, kind="record", required=("step", "alpha", "normalized", "fit_intercept", "n_features", "w",
                                "t"),
          check=_check_record_width),
    Entry("sklearn.pipeline.Pipeline", Pipeline, {}, validate=_check_pipeline),
    Entry("sklearn.preprocessing.StandardScaler", StandardScaler, {
        "n_features_in_": Int(low=1, high=INT64_RANGE[1], dim="n_features_in_"),
        "feature_names_in_": Strings(("n_features_in_",)),
        "n_samples_seen_": Either(Int(low=0), Float(low=0.0), Arr("iuf", ("n_features_in_",))),
        "mean_": Opt(Arr("f", ("n_features_in_",))),
        "var_": Opt(Arr("f", ("n_features_in_",))),
        "scale_": Opt(Arr("f", ("n_features_in_",))),
    }, required=("n_features_in_", "n_samples_seen_", "mean_", "var_", "scale_"),
          validate=lambda est: est._validate_params()),
]

#: registry key → Entry: every class a model file may hold
REGISTRY: dict[str, Entry] = {e.name: e for e in _ENTRIES}
_BY_CLASS: dict[type, Entry] = {e.cls: e for e in _ENTRIES}
BY_V1_NAME: dict[str, Entry] = {e.v1_name: e for e in _ENTRIES}


def entry_for(obj: Any) -> Entry | None:
    """The registry entry of ``obj``'s exact class (None for anything else)."""
    return _BY_CLASS.get(type(obj))

