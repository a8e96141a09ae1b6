"""Python objects → a model file's JSON tree and arrays (only what the decoder accepts).

The node kinds written are those of :mod:`gpuksvm.persistence.model_format`; a class is
written only if :func:`~gpuksvm.persistence.model_format.registry.entry_for` finds it, with
only its declared attributes.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.persistence.model_format.registry import entry_for
from gpuksvm.persistence.model_format.specs import ARRAY_DTYPE_RE, FLOAT_DTYPES, INT64_RANGE, MAX_DEPTH

__all__ = ["encode_model"]


_SCALAR_TYPES = (type(None), bool, int, float, str)


class _Writer:
    """Python objects → JSON tree + arrays (only what :func:`~gpuksvm.persistence.model_format.decode.decode_model` accepts)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.fitted_device = "cpu"

    def _store(self, a: Any, path: str) -> dict:
        if bk.is_gpu_array(a):
            self.fitted_device = str(bk.device_of(a))
        host = np.ascontiguousarray(bk.to_host(a))
        if not ARRAY_DTYPE_RE.match(host.dtype.str):
            raise TypeError(f"cannot save {path}: arrays of dtype {host.dtype} are not supported by "
                            f"the gpuksvm model format (use pickle/joblib)")
        ref = f"a{len(self.arrays)}"
        self.arrays[ref] = host
        return {"array": ref}

    def value(self, v: Any, path: str, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise TypeError(f"cannot save {path}: nesting deeper than {MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(v, (np.bool_, np.integer, np.floating)) and not isinstance(v, np.ndarray):
            v = v.item()
        if type(v) is float and not math.isfinite(v):
            return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        if type(v) is int and not INT64_RANGE[0] <= v <= INT64_RANGE[1]:
            raise TypeError(f"cannot save {path}: integer {v} does not fit in 64 bits")
        if type(v) in _SCALAR_TYPES:
            return v
        if type(v) is Kernel:
            return {"kernel": {"name": v.name, "gamma": v.gamma, "degree": v.degree, "coef0": v.coef0}}
        if isinstance(v, bk.Device):
            if v.is_gpu:
                self.fitted_device = str(v)
            return {"device": "cpu"}
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            dt = np.dtype(v)
            if dt not in FLOAT_DTYPES:
                raise TypeError(f"cannot save {path}: dtype {dt} (only float32/float64)")
            return {"dtype": dt.name}
        if type(v) is np.random.RandomState:
            name, key, pos, has_gauss, gauss = v.get_state(legacy=True)
            return {"random_state": {"key": self._store(key, path), "pos": int(pos),
                                     "has_gauss": int(has_gauss), "gauss": float(gauss)}}
        if bk.is_sparse(v):
            host = bk.to_host(v)
            fmt = host.format if host.format in ("csr", "csc", "coo") else "csr"
            host = host.asformat(fmt)
            parts = ({"row": host.row, "col": host.col} if fmt == "coo"
                     else {"indices": host.indices, "indptr": host.indptr})
            parts["data"] = host.data
            node = {"sparse": fmt, "shape": [int(s) for s in host.shape]}
            node.update({k: self._store(a, path) for k, a in parts.items()})
            return node
        if bk.is_array(v):
            if v.dtype == object:
                if v.ndim == 1 and all(type(s) is str for s in v):
                    return {"strings": list(v)}
                raise TypeError(f"cannot save {path}: object arrays hold only strings in the "
                                "gpuksvm model format (use pickle/joblib)")
            return self._store(v, path)
        if type(v) is list:
            return [self.value(x, f"{path}[{i}]", d) for i, x in enumerate(v)]
        if type(v) is tuple:
            return {"tuple": [self.value(x, f"{path}[{i}]", d) for i, x in enumerate(v)]}
        if type(v) is dict:
            if all(type(k) is str for k in v):
                return {"dict": {k: self.value(x, f"{path}[{k!r}]", d) for k, x in v.items()}}
            items = []
            for k, x in v.items():
                if isinstance(k, (np.integer, np.floating, np.bool_)):
                    k = k.item()
                if type(k) not in (bool, int, float, str):
                    raise TypeError(f"cannot save {path}: dict key {k!r} (only numbers and strings)")
                items.append([self.value(k, path, d), self.value(x, f"{path}[{k!r}]", d)])
            return {"items": items}
        if entry_for(v) is not None:
            return self.estimator(v, path, d)
        raise TypeError(f"cannot save {path}: objects of type {type(v).__module__}."
                        f"{type(v).__qualname__} are not supported by the gpuksvm model format "
                        f"(use pickle/joblib)")

    def estimator(self, obj: Any, path: str, depth: int = 0) -> dict:
        entry = entry_for(obj)
        if entry is None:
            raise TypeError(f"cannot save {path}: {type(obj).__module__}.{type(obj).__qualname__} is "
                            "not a class the gpuksvm model format holds (gpuksvm estimators, and "
                            "scikit-learn's Pipeline and StandardScaler around them); use "
                            "pickle/joblib for other objects")
        state = dict(vars(obj))
        params: dict = {}
        if entry.kind == "estimator":
            for k in type(obj)._get_param_names():
                v = getattr(obj, k)
                params[k] = self.value(v, f"{path}.{k}", depth)
                state.pop(k, None)
        fitted = {}
        for k, v in state.items():
            if k in entry.transient:
                continue
            if k not in entry.fitted:
                raise TypeError(f"cannot save {path}: attribute {k!r} of {type(obj).__name__} is not "
                                f"declared in the model-file schema (gpuksvm/persistence/model_format/registry.py)")
            fitted[k] = self.value(v, f"{path}.{k}", depth)
        node = {"estimator": entry.name, "fitted": fitted}
        if entry.kind == "estimator":
            node["params"] = params
        return node


def encode_model(model: Any) -> tuple[dict, dict[str, np.ndarray], str]:
    """(JSON tree, arrays, fitted device) of ``model``; TypeError for what the format cannot hold."""
    w = _Writer()
    tree = w.estimator(model, type(model).__name__)
    return tree, w.arrays, w.fitted_device
