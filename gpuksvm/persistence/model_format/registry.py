"""The closed registry: every class a model file may hold, what it holds, and its checks.

One :class:`Entry` per class: its declared fitted attributes (name →
:class:`~gpuksvm.persistence.model_format.specs.Spec`), the attributes a fitted model must
have, the class's own parameter checks, and the consistency checks across
attributes beyond the named dimensions.  :data:`REGISTRY` maps the key a file
names a class by to its entry.

The estimators are the methods of :mod:`gpuksvm.registry` — their classes and the
keys files name them by (``format_name``) come from there — each with its
declaration in :data:`METHOD_SPECS`; the state records they hold (solver states,
scikit-learn's ``Pipeline`` and ``StandardScaler``) are listed here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from gpuksvm import registry
from gpuksvm.array import backend as bk
from gpuksvm.estimators.params import check_params
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.okfeb.subspace import OnlineSubspace
from gpuksvm.solvers.linear.online import Pegasos, RegularizedLMS
from gpuksvm.persistence.model_format.consistency import (
    check_cvm,
    check_learner,
    check_linear,
    check_llsvm,
    check_okfeb,
    check_pipeline_widths,
    check_record,
    check_scaler,
    check_subspace,
    check_svc,
    check_svi,
)
from gpuksvm.persistence.model_format.specs import (
    INT64_RANGE,
    Arr,
    Bool,
    DeviceSpec,
    Dims,
    DictOf,
    DTypeSpec,
    Either,
    Float,
    Info,
    Instance,
    Int,
    Labels,
    ListOf,
    ModelFormatError,
    Opt,
    SparseOrArr,
    Spec,
    Str,
    Strings,
    TupleOf,
    is_array,
    value_bound,
)

__all__ = ["Entry", "REGISTRY", "METHOD_SPECS", "entry_for"]


# shorthands of the declarations below
INT_1D, FLOAT_1D = Arr("iu", ndim=1, low=0), Arr("f", ndim=1)
#: a float array whose values are a fit summary (may hold inf/NaN; not used to predict)
SUMMARY_1D = Arr("f", ndim=1, finite=False)
KERNEL = Instance(Kernel)
PROBLEMS = ListOf(TupleOf(Int(low=0), Opt(Int(low=0))), dim="n_problems")
#: a stored scalar that meets the arrays of a prediction (in float32 at worst)
BOUNDED = Float(low=-value_bound(np.float32), high=value_bound(np.float32))


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
        """How format version 1 named the class (``module:QualName``, with the module path the class
        had when version 1 was written: the format name's, e.g. ``gpuksvm.llsvm:LLSVM``; scikit-learn's
        classes by their own module)."""
        if self.name.startswith("gpuksvm."):
            module, _, qualname = self.name.rpartition(".")
            return f"{module}:{qualname}"
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


def _common(extra: dict[str, Spec]) -> dict[str, Spec]:
    """Attributes every gpuksvm estimator may have, plus its own."""
    out = {"n_features_in_": Int(low=1, high=INT64_RANGE[1], dim="n_features_in_"),
           "feature_names_in_": Strings(("n_features_in_",)),
           "_fitted_on": DeviceSpec(),
           "dask_info_": Info(),
           # what the memory budget made smaller than asked (None: nothing)
           "memory_fallback_": Opt(Str())}
    out.update(extra)
    return out


def _check_device_and_dtype(est: Any) -> None:
    """The ``device`` and ``dtype`` parameters every gpuksvm estimator has."""
    try:
        bk.resolve_device(est.device)
    except bk.DeviceUnavailableError:
        pass      # a valid device name; the model runs on the CPU here
    bk.resolve_dtype(est.dtype, bk.CPU)


def _own_checks(est: Any) -> None:
    """A gpuksvm estimator's parameter checks: device, dtype and its declared parameters."""
    _check_device_and_dtype(est)
    check_params(est)


def _method_class(name: str) -> type:
    """The class of the :mod:`gpuksvm.registry` method ``name``."""
    return registry.method(name).load()


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
    check_pipeline_widths(est.steps)


_PROBA = {"probA_": Arr("f", ("n_platt",)), "probB_": Arr("f", ("n_platt",))}

_LINEAR_FITTED = _common({
    "classes_": Labels(),
    "coef_": Arr("f", ("n_outputs", "n_features_in_")),
    "intercept_": Arr("f", ("n_outputs",)),
    "objective_": Arr("f", ("n_outputs",), finite=False),
    "n_iter_": Int(low=0),
    "converged_": Bool(),
    "solver_": Str(("newton", "newton-cg", "dual_cd", "dcd", "liblinear", "liblinear-primal", "sbm",
                    "newton-stream", "newton-dask")),
    "cost_scale_": Float(low=0.0, finite=False),
    "n_passes_": Int(low=0),
    "dual_coef_": Opt(Arr("f", (None, "n_outputs"))),
    **_PROBA,
})

_CVM_STOP = Str(("converged", "max_iter", "max_core_size", "stalled"))
#: per search iteration of :func:`gpuksvm.solvers.cvm.meb.fit_core_set` (1-D, one entry each)
_CVM_HISTORY = DictOf(("m", "search_kernel", "qp_kernel", "qp_steps", "added", "seconds"),
                      Arr("iuf", ndim=1, finite=False))
_CVM_FITTED = _common({
    "classes_": Labels(),
    "kernel_": KERNEL,
    "problems_": PROBLEMS,
    "support_": Arr("iu", ("n_sv",), low=0),
    "support_vectors_": Arr("f", ("n_sv", "n_features_in_"), rows=True),
    "dual_coef_": Arr("f", ("n_problems", "n_sv")),
    "_sv_scale": Opt(Arr("f", ("n_sv",), low=0.0, low_open=True)),
    "n_support_total_": Int(low=0, dim="n_sv"),
    "intercept_": Arr("f", ("n_problems",)),
    "core_set_": ListOf(INT_1D, dim="n_problems"),
    "alpha_": ListOf(FLOAT_1D, dim="n_problems"),
    "radius_": Arr("f", ("n_problems",), finite=False),
    "rho_": Arr("f", ("n_problems",)),
    "n_iter_": Arr("iu", ("n_problems",), low=0),
    "stop_reason_": ListOf(_CVM_STOP, dim="n_problems"),
    "duality_gap_": Arr("f", ("n_problems",), finite=False),
    "history_": ListOf(_CVM_HISTORY, dim="n_problems"),
    "search_": Str(),
    "kappa_tilde_": Float(finite=False),
    "n_smo_steps_": Arr("iu", ("n_problems",), low=0),
    "core_set_size_": Arr("iu", ("n_problems",), low=0),
    "offset_": BOUNDED,
    "fit_times_": Info(),
})
#: per-problem attributes that a binary or one-class CVM stored as one value in older files
_CVM_PER_PROBLEM_ARRAYS = {"radius_": np.float64, "n_iter_": np.int64, "duality_gap_": np.float64,
                           "n_smo_steps_": np.int64, "core_set_size_": np.int64}
_CVM_PER_PROBLEM_LISTS = {"core_set_": is_array, "alpha_": is_array,
                          "stop_reason_": lambda v: type(v) is str, "history_": lambda v: type(v) is dict}


def _cvm_one_problem_as_lists(values: dict) -> dict:
    """Decoded CVM attributes of a file written before CVM stored per-problem arrays → their shapes now.

    Such files hold a single binary or one-class problem's ``n_iter_`` etc. as
    a number and its ``core_set_`` etc. as the bare object; they become
    arrays of shape (1,) and lists of one entry, the shapes a fit gives now.
    Files with several problems already had them.  A number that the array's
    dtype cannot hold (an int64 count given as 1e300, NaN or inf) is refused.
    """
    out = dict(values)
    for k, dtype in _CVM_PER_PROBLEM_ARRAYS.items():
        v = out.get(k)
        if type(v) not in (int, float):
            continue
        if np.dtype(dtype).kind == "i" and not (type(v) is int or (math.isfinite(v) and v == int(v))):
            raise ModelFormatError(f"{k}: {v!r} is not a whole number")
        if np.dtype(dtype).kind == "i" and not INT64_RANGE[0] <= int(v) <= INT64_RANGE[1]:
            raise ModelFormatError(f"{k}: {v!r} does not fit in 64 bits")
        out[k] = np.array([int(v) if np.dtype(dtype).kind == "i" else v], dtype=dtype)
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
    "S": Arr("f", ("cap", "n_features"), rows=True),
    "sn": Arr("f", ("cap",), low=0.0),
    "A": Arr("f", ("cap", "rank")),
    "K": Opt(Arr("f", ("cap", "cap"))),
    "ra": Arr("f", ("cap",)),
    "Pbuf": Opt(Arr("f", ("cap", "rank"))),
    "rec": Arr("f", ("cap",)),
    "sidx": Arr("iu", ("cap",)),
    "m": Int(low=0, dim="m"),
    "n_seen": Int(low=0),
    "n_updates": Int(low=0),
    "err_sum": Float(finite=False),
    "n_censored": Int(low=0),
    "ema": Opt(Float(finite=False)),
    "theta": Float(finite=False),
    "censor_threshold": Float(finite=False),
    "objective_history": ListOf(Float(finite=False)),
    "n_iter": Int(low=0),
    "last_errors": SUMMARY_1D,
    "P": Arr("f", ("m", "rank")),
    "C": Arr("f", ("rank", "rank")),
    "L": Arr("f", ("rank", "rank")),
}

_CAPACITY = {"capacity_check_": Info(), "budget_too_small_": Bool()}

_SVM_SHAPES = {
    "support_": Arr("iu", ("n_sv",), low=0),
    "support_vectors_": SparseOrArr(("n_sv", "n_features_in_"), rows=True),
    "intercept_": Arr("f", ("n_problems",)),
    "n_support_": Arr("iu", ("n_classes",), low=0),
}

#: :mod:`gpuksvm.registry` method name → its declaration (the :class:`Entry` fields besides the
#: name, the class and ``validate``, which are the registry's and the estimators' parameter checks)
METHOD_SPECS: dict[str, dict[str, Any]] = {
    "LinearSVM": dict(fitted=_LINEAR_FITTED, required=("classes_", "coef_", "intercept_", "n_features_in_"),
                      check=check_linear),
    "LLSVM": dict(fitted=_common({
        "classes_": Labels(),
        "kernel_": KERNEL,
        "landmarks_": Arr("f", ("k", "n_features_in_"), rows=True),
        "n_landmarks_": Int(low=1, dim="k"),
        "eigvals_": Arr("f", ("k",), finite=False),
        "spectrum_": Arr("f", ("k",), finite=False),
        "map_": Arr("f", ("k", "k")),
        "svm_": Instance(_method_class("LinearSVM")),
        "coef_": Arr("f", ("n_outputs", "k")),
        "intercept_": Arr("f", ("n_outputs",)),
        "dual_coef_": Arr("f", ("n_outputs", "k")),
        "n_iter_": Int(low=0),
        "_n_features_out": Int(low=1, dim="k"),
        "fit_times_": Info(),
    }), required=("classes_", "kernel_", "landmarks_", "map_", "svm_", "dual_coef_", "intercept_",
                  "n_features_in_"), check=check_llsvm),
    "CVM": dict(fitted=_CVM_FITTED, required=_CVM_REQUIRED + ("classes_",), check=check_cvm,
                upgrade_decoded=_cvm_one_problem_as_lists),
    "OneClassCVM": dict(fitted=_CVM_FITTED, required=_CVM_REQUIRED + ("offset_",), check=check_cvm,
                        upgrade_decoded=_cvm_one_problem_as_lists),
    "KernelSVC": dict(fitted=_common({
        **_SVM_SHAPES,
        # (0, 0) for kernel="precomputed", as SVC's (checked in _check_svc)
        "support_vectors_": SparseOrArr((None, None), rows=True),
        "classes_": Labels(),
        "kernel_": Either(KERNEL, Str(("precomputed",))),
        "dual_coef_": SparseOrArr(("n_dual_rows", "n_sv")),
        "solver_": Str(),
        "n_iter_": Arr("iu", ("n_problems",), low=0),
        "objective_": Arr("f", ("n_problems",), finite=False),
        "converged_": Arr("b", ("n_problems",)),
        "shape_fit_": TupleOf(Int(low=0), Int(low=0)),
        **_PROBA,
    }), required=("classes_", "kernel_", "support_vectors_", "dual_coef_", "intercept_",
                  "n_features_in_"), check=check_svc),
    "SVI": dict(fitted=_common({
        **_SVM_SHAPES,
        "classes_": Labels(),
        "kernel_": KERNEL,
        "problems_": PROBLEMS,
        "subsets_": ListOf(ListOf(INT_1D)),
        "sub_models_": ListOf(Info()),
        "margin_support_": ListOf(INT_1D),
        "dual_coef_": SparseOrArr(("n_problems", "n_sv")),
        "n_iter_": Arr("iu", ("n_problems",), low=0),
        "solved_exactly_": Arr("b", ("n_problems",)),
        "margin_capped_": Arr("b", ("n_problems",)),
        "converged_": Arr("b", ("n_problems",)),
        "fit_times_": Info(),
        **_PROBA,
    }), required=("classes_", "kernel_", "support_vectors_", "dual_coef_", "intercept_",
                  "problems_", "n_features_in_"), check=check_svi,
        upgrade=lambda fitted: {("fit_times_" if k == "fit_time_" else k): v for k, v in fitted.items()}),
    "OKFEB": dict(fitted=_OKFEB_FITTED, required=_OKFEB_REQUIRED, check=check_okfeb, upgrade=_okfeb_upgrade),
    "OKFEBClassifier": dict(fitted=_common({
        "classes_": Labels(),
        "extractor_": Instance(_method_class("OKFEB")),
        "_learner": Instance(Pegasos),
        **_CAPACITY,
    }), required=("classes_", "extractor_", "_learner", "n_features_in_"), check=check_learner),
    "OKFEBRegressor": dict(fitted=_common({
        "extractor_": Instance(_method_class("OKFEB")),
        "_learner": Instance(RegularizedLMS),
        **_CAPACITY,
    }), required=("extractor_", "_learner", "n_features_in_"), check=check_learner),
}


def _method_entries() -> list[Entry]:
    """One entry per :mod:`gpuksvm.registry` method, with its declaration from :data:`METHOD_SPECS`."""
    names = [m.name for m in registry.METHODS]
    undeclared = [n for n in names if n not in METHOD_SPECS]
    unknown = sorted(set(METHOD_SPECS) - set(names))
    if undeclared or unknown:
        raise RuntimeError(f"gpuksvm.persistence.model_format.registry: METHOD_SPECS must declare exactly "
                           f"the methods of gpuksvm.registry; undeclared: {undeclared}, not methods: {unknown}")
    return [Entry(m.format_name, m.load(), validate=_own_checks, **METHOD_SPECS[m.name])
            for m in registry.METHODS]


#: the state records model files hold inside the estimators, and scikit-learn's wrappers
_RECORDS = [
    Entry("gpuksvm.solvers.okfeb.OnlineSubspace", OnlineSubspace, _SUBSPACE_FITTED, kind="record",
          required=tuple(_SUBSPACE_FITTED), check=check_subspace, transient={"_cache": dict}),
    Entry("gpuksvm.solvers.online.Pegasos", Pegasos, {
        "lam": Float(low=5e-324), "fit_intercept": Bool(), "n_features": Int(low=0),
        "G": Arr("f", (None, None), ndim=2), "t": Int(low=0),
    }, kind="record", required=("lam", "fit_intercept", "n_features", "G", "t"),
          check=check_record),
    Entry("gpuksvm.solvers.online.RegularizedLMS", RegularizedLMS, {
        "step": Float(low=5e-324), "alpha": Float(low=0.0), "normalized": Bool(),
        "fit_intercept": Bool(), "n_features": Int(low=0), "w": FLOAT_1D, "t": Int(low=0),
    }, kind="record", required=("step", "alpha", "normalized", "fit_intercept", "n_features", "w",
                                "t"),
          check=check_record),
    Entry("sklearn.pipeline.Pipeline", Pipeline, {}, validate=_check_pipeline),
    Entry("sklearn.preprocessing.StandardScaler", StandardScaler, {
        "n_features_in_": Int(low=1, high=INT64_RANGE[1], dim="n_features_in_"),
        "feature_names_in_": Strings(("n_features_in_",)),
        "n_samples_seen_": Either(Int(low=0), Float(low=0.0), Arr("iuf", ("n_features_in_",))),
        "mean_": Opt(Arr("f", ("n_features_in_",))),
        "var_": Opt(Arr("f", ("n_features_in_",), low=0.0)),
        "scale_": Opt(Arr("f", ("n_features_in_",), low=0.0, low_open=True)),
    }, required=("n_features_in_", "n_samples_seen_", "mean_", "var_", "scale_"),
          validate=lambda est: est._validate_params(), check=check_scaler),
]
_ENTRIES = _method_entries() + _RECORDS

#: registry key → Entry: every class a model file may hold
REGISTRY: dict[str, Entry] = {e.name: e for e in _ENTRIES}
_BY_CLASS: dict[type, Entry] = {e.cls: e for e in _ENTRIES}
BY_V1_NAME: dict[str, Entry] = {e.v1_name: e for e in _ENTRIES}


def entry_for(obj: Any) -> Entry | None:
    """The registry entry of ``obj``'s exact class (None for anything else)."""
    return _BY_CLASS.get(type(obj))

