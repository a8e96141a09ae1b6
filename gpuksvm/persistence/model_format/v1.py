"""Format version 1: its typed trees rewritten as version-2 trees (pure JSON → JSON)."""
from __future__ import annotations

from typing import Any

from gpuksvm.persistence.model_format.registry import BY_V1_NAME
from gpuksvm.persistence.model_format.specs import MAX_DEPTH, ModelFormatError, format_error

__all__ = ["translate_v1"]

#: how version 1 named :class:`~gpuksvm.kernels.Kernel` (its module path when version 1 was written)
V1_KERNEL_NAME = "gpuksvm.kernels:Kernel"


def translate_v1(node: Any, path: str = "model") -> Any:
    """A format-version-1 typed tree rewritten as a version-2 tree (pure JSON → JSON).

    Version 1 named classes by ``module:QualName`` and had generic ``object``
    nodes.  Only nodes with a version-2 equivalent are translated — classes by
    exact comparison of their name with the registry's classes, never by
    importing anything — and everything else (generic objects, sets, complex
    numbers, bytes, named tuples, other classes) is refused with a
    :class:`ModelFormatError`.  The result then goes through
    :func:`decode_model` like any version-2 file.
    """
    try:
        return _translate(node, path, 0)
    except ModelFormatError:
        raise
    except (ValueError, TypeError, ArithmeticError, KeyError, IndexError, AttributeError) as exc:
        raise format_error(path, f"malformed format-version-1 tree ({type(exc).__name__}: {exc})") from None


def _translate(node: Any, path: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise format_error(path, f"the tree is nested more than {MAX_DEPTH} levels deep")
    if type(node) is not dict or type(node.get("t")) is not str:
        raise format_error(path, "malformed node in a format-version-1 tree")
    t, d = node["t"], depth + 1

    def sub(key: str) -> Any:
        if key not in node:
            raise format_error(path, f"a version-1 {t!r} node lacks {key!r}")
        return node[key]

    def items(key: str) -> list:
        v = sub(key)
        if type(v) is not list:
            raise format_error(path, f"a version-1 {t!r} node holds a list")
        return v

    def table(key: str) -> dict:
        v = sub(key)
        if type(v) is not dict:
            raise format_error(path, f"a version-1 {t!r} node holds a JSON object")
        return v

    if t == "none":
        return None
    if t in ("bool", "int", "str"):
        v = sub("v")
        if type(v) is not {"bool": bool, "int": int, "str": str}[t]:
            raise format_error(path, f"bad version-1 {t} value")
        return v
    if t == "float":
        v = sub("v")
        if type(v) in (int, float):
            try:
                return float(v)
            except OverflowError:
                raise format_error(path, "version-1 float out of range") from None
        if v in ("nan", "inf", "-inf"):
            return {"float": v}
        raise format_error(path, "bad version-1 float")
    if t == "array":
        return {"array": sub("ref")}
    if t == "device":
        return {"device": "cpu"}
    if t == "dtype":
        v = sub("v")
        names = {"<f4": "float32", "<f8": "float64", "float32": "float32", "float64": "float64"}
        if v not in names:
            raise format_error(path, f"version-1 dtype {str(v)[:20]!r} is not float32/float64")
        return {"dtype": names[v]}
    if t == "list":
        return [_translate(x, f"{path}[{i}]", d) for i, x in enumerate(items("items"))]
    if t == "tuple":
        return {"tuple": [_translate(x, f"{path}[{i}]", d) for i, x in enumerate(items("items"))]}
    if t == "dict":
        pairs = []
        for i, kv in enumerate(items("items")):
            if type(kv) is not list or len(kv) != 2:
                raise format_error(path, "bad version-1 dict item")
            pairs.append([_translate(kv[0], f"{path}<key>", d), _translate(kv[1], f"{path}[{i}]", d)])
        if all(type(k) is str for k, _ in pairs):
            return {"dict": {k: v for k, v in pairs}}
        return {"items": pairs}
    if t == "objarray":
        vals = [_translate(x, f"{path}[{i}]", d) for i, x in enumerate(items("items"))]
        if not all(type(s) is str for s in vals):
            raise format_error(path, "version-1 object arrays load only when they hold strings")
        return {"strings": vals}
    if t == "sparse":
        parts = table("parts")
        out = {"sparse": sub("format"), "shape": sub("shape")}
        for k, v in parts.items():
            out[k] = _translate(v, f"{path}.{k}", d)
        return out
    if t == "rng":
        if sub("kind") != "RandomState":
            raise format_error(path, "only numpy RandomState generators load from version-1 files")
        st = _translate(sub("state"), f"{path}.state", d)
        try:
            inner = st["dict"]["state"]["dict"]
            body = {"key": inner["key"], "pos": inner["pos"], "has_gauss": st["dict"]["has_gauss"],
                    "gauss": st["dict"]["gauss"]}
        except (KeyError, TypeError):
            raise format_error(path, "bad version-1 RandomState") from None
        return {"random_state": body}
    if t == "dataclass":
        if sub("cls") != V1_KERNEL_NAME:
            raise format_error(path, f"version-1 dataclass {str(node.get('cls'))[:80]!r} is not allowed")
        fields = {k: _translate(v, f"{path}.{k}", d) for k, v in table("fields").items()}
        return {"kernel": fields}
    if t in ("estimator", "object"):
        entry = BY_V1_NAME.get(sub("cls")) if type(sub("cls")) is str else None
        if entry is None or (t == "object") != (entry.kind == "record"):
            raise format_error(path, f"version-1 {t} node of class {str(node.get('cls'))[:80]!r} is not a "
                        "class gpuksvm model files may hold; refusing the file")
        state = {k: _translate(v, f"{path}.{k}", d) for k, v in table("state").items()
                 if k not in entry.transient}
        out = {"estimator": entry.name, "fitted": state}
        if t == "estimator":
            out["params"] = {k: _translate(v, f"{path}.{k}", d) for k, v in table("params").items()}
        return out
    raise format_error(path, f"version-1 node type {t!r} is not supported by the closed loader; "
                "refusing the file")
