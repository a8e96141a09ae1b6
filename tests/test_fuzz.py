"""Fuzzing the model-file loader and the SVMlight readers.

Random and mutated headers, members and bytes of real model files must give
:class:`gpuksvm.persistence.io.ModelFormatError` or load a valid model (one of the
registry's classes, which then predicts) — never another exception, and never
a side effect: a canary file must survive, no file may appear or vanish, and
no file descriptor may stay open.  The SVMlight readers must return arrays or
raise a ValueError naming the file.

The structure-aware mode (``-k structure``) takes genuine saved models of every
registered class, changes values inside the JSON header (numbers to NaN, inf,
huge, negative or zero; strings, lists for scalars, array references to other
members) and inside the array members (NaN, inf, 3e38, zeros, other dtypes and
shapes), and recomputes the checksums so that the file passes the integrity
checks: such a file must be refused with ModelFormatError, or load and give
finite decision values, predictions, probabilities and transforms on finite
input.

CI runs a bounded, derandomized number of examples per test (``GPUKSVM_FUZZ_EXAMPLES``,
default 60; the structure-aware test runs ``STRUCTURE_FACTOR`` times as many).  For a
larger run::

    GPUKSVM_FUZZ_EXAMPLES=3000 GPUKSVM_FUZZ_REPORT=fuzz.json .venv/bin/pytest tests/test_fuzz.py -q -s

which prints (and writes as JSON) the counts of examples tried, refused, loaded
and any other outcome.
"""
from __future__ import annotations

import contextlib
import copy
import io as _pyio
import json
import os
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpuksvm import CVM, LLSVM, OKFEB, SVI, KernelSVC, LinearSVM, OKFEBClassifier, OKFEBRegressor, OneClassCVM
from gpuksvm.persistence import io
from gpuksvm.data.blocks import SVMLightBlockSource
from gpuksvm.cli import main as cli_main
from gpuksvm.datasets import load_svmlight, read_svmlight
from gpuksvm.persistence.model_format import REGISTRY, entry_for

from _model_files import members as _members, rewritten, zipped as _zip

N_EXAMPLES = int(os.environ.get("GPUKSVM_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=N_EXAMPLES, deadline=None, database=None,
                derandomize="GPUKSVM_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture,
                                       HealthCheck.filter_too_much])
DATA = Path(__file__).parent / "data"
STATS: Counter = Counter()


# ----------------------------------------------------------------------------- the corpus
def _corpus() -> list[tuple[str, bytes, np.ndarray]]:
    """(name, file bytes, X to predict) of small real model files, versions 2 and 1."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    models = {
        "linear": LinearSVM(device="cpu").fit(X, y),
        "linear3": LinearSVM(solver="dual_cd", device="cpu", random_state=0).fit(X, y3),
        "llsvm": LLSVM(n_landmarks=6, device="cpu", random_state=0).fit(X, y),
        "svc_sparse": KernelSVC(gamma=1.0, probability=True, device="cpu", random_state=0).fit(
            sp.csr_matrix(X), y),
        "cvm": CVM(gamma=1.0, device="cpu", random_state=0).fit(X, y3),
        "ocvm": OneClassCVM(gamma=1.0, device="cpu", random_state=0).fit(X),
        "svi": SVI(gamma=1.0, device="cpu", random_state=0).fit(X, y),
        "okfeb": OKFEBClassifier(rank=3, n_landmarks=6, device="cpu", random_state=0).fit(X, y),
        "pipeline": make_pipeline(StandardScaler(), LinearSVM(device="cpu")).fit(X, y),
        "unfitted": LLSVM(kernel="poly", degree=2, class_weight={0: 2.0, 1: 1.0}),
        "linear_proba": LinearSVM(probability=True, device="cpu", random_state=0).fit(X, y3),
        "llsvm3_f32": LLSVM(n_landmarks=6, dtype="float32", device="cpu", random_state=0).fit(X, y3),
        "svc_dense3": KernelSVC(kernel="poly", degree=2, gamma=0.5, coef0=1.0, device="cpu").fit(X, y3),
        "cvm_poly": CVM(kernel="poly", degree=2, gamma=0.5, coef0=1.0, normalize=True, device="cpu",
                        random_state=0).fit(X, y),
        "svi3": SVI(gamma=1.0, device="cpu", random_state=0).fit(X, y3),
        "okfeb_features": OKFEB(rank=3, n_landmarks=6, device="cpu", random_state=0).fit(X),
        "okfeb_regressor": OKFEBRegressor(rank=3, n_landmarks=6, device="cpu", random_state=0).fit(X, X[:, 0]),
        "scaler": StandardScaler().fit(X),
        "pipeline_okfeb": make_pipeline(StandardScaler(), OKFEB(rank=3, n_landmarks=6, device="cpu",
                                                                random_state=0),
                                        LinearSVM(device="cpu")).fit(X, y),
    }
    out = []
    for name, m in models.items():
        buf = _pyio.BytesIO()
        io.save(m, _path := Path(os.environ.get("TMPDIR", "/tmp")) / f".gpuksvm-fuzz-{os.getpid()}.npz")
        buf.write(_path.read_bytes())
        _path.unlink()
        out.append((name, buf.getvalue(), X))
    for name in ("linear", "llsvm", "okfeb_classifier"):
        out.append((f"v1_{name}", (DATA / f"v1_{name}.npz").read_bytes(), np.load(DATA / "v1_X.npy")))
    return out


CORPUS = _corpus()


# ----------------------------------------------------------------------------- strategies
TAGS = ["float", "tuple", "dict", "items", "array", "strings", "sparse", "kernel", "dtype", "device",
        "random_state", "estimator", "params", "fitted", "t", "cls", "state", "v", "ref", "items",
        "shape", "data", "indices", "indptr", "key", "pos", "has_gauss", "gauss", "name", "gamma"]


def _strings(canary: str) -> st.SearchStrategy:
    return st.one_of(
        st.text(max_size=12),
        st.sampled_from(["gpuksvm.persistence.io:tempfile._TemporaryFileCloser", "tempfile._TemporaryFileCloser",
                         "os:system", "builtins:eval", "subprocess:Popen", "sklearn.svm.SVC",
                         "numpy:load", "a0", "a1", "a99", "../../x", "nan", "inf", "-inf", "float32",
                         "float16", "|O", "<f8", "<U3", "V8", "rbf", "poly", "sigmoid", "cpu", "cuda:7",
                         "object", "estimator", "dataclass", canary, *REGISTRY]))


def _json(canary: str) -> st.SearchStrategy:
    leaf = st.one_of(
        st.none(), st.booleans(),
        st.integers(min_value=-2 ** 70, max_value=2 ** 70),
        st.sampled_from([0, 1, -1, 2 ** 63, 2 ** 63 - 1, -2 ** 63, 10 ** 30, 624, 10 ** 12]),
        st.floats(allow_nan=False, allow_infinity=False),
        _strings(canary))
    return st.recursive(leaf, lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(TAGS), st.text(max_size=6)), kids, max_size=4)),
        max_leaves=10)


def _paths(node, prefix=()):
    """Every (path) to a value inside a JSON tree."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _get(node, path):
    for k in path:
        node = node[k]
    return node


@st.composite
def mutated_header(draw, canary: str):
    name, blob, X = CORPUS[draw(st.integers(0, len(CORPUS) - 1))]
    members = _members(blob)
    header = json.loads(members["header.json"])
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(header))
        path = paths[draw(st.integers(0, len(paths) - 1))]
        op = draw(st.sampled_from(["replace", "replace", "delete", "insert", "copy"]))
        if not path:
            if op == "replace":
                header = draw(_json(canary))
            continue
        parent = _get(header, path[:-1])
        key = path[-1]
        if op == "replace":
            parent[key] = draw(_json(canary))
        elif op == "delete":
            del parent[key]
        elif op == "insert":
            target = _get(header, path)
            if isinstance(target, dict):
                target[draw(st.one_of(st.sampled_from(TAGS), st.text(max_size=6)))] = draw(_json(canary))
            elif isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), draw(_json(canary)))
            else:
                parent[key] = [target, draw(_json(canary))]
        else:   # copy another subtree here (a real node of another kind / class)
            src = paths[draw(st.integers(0, len(paths) - 1))]
            if src and src[:len(path)] != path:
                parent[key] = copy.deepcopy(_get(header, src))
        if not isinstance(header, (dict, list)):
            break
    members["header.json"] = json.dumps(header).encode()
    return name, _zip(members), X


def _npy(draw) -> bytes:
    dtype = draw(st.sampled_from(["<f8", "<f4", "<i8", "<u4", "|b1", "<U3", "|O", "<c16", "|V4", ">f8"]))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    buf = _pyio.BytesIO()
    if dtype == "|O":
        np.lib.format.write_array(buf, np.empty(shape, object), allow_pickle=True)
    else:
        np.lib.format.write_array(buf, np.zeros(shape, dtype=np.dtype(dtype)))
    data = buf.getvalue()
    if draw(st.booleans()):   # lie in the .npy header about the shape
        data = data.replace(repr(shape).encode(), repr(tuple(s * 1000 + 1 for s in shape)).encode(), 1)
    return data


@st.composite
def mutated_members(draw):
    name, blob, X = CORPUS[draw(st.integers(0, len(CORPUS) - 1))]
    members = _members(blob)
    names = sorted(members)
    target = names[draw(st.integers(0, len(names) - 1))]
    op = draw(st.sampled_from(["npy", "bytes", "truncate", "flip", "drop", "extra", "dup-name"]))
    if op == "npy":
        members[target] = _npy(draw)
    elif op == "bytes":
        members[target] = draw(st.binary(max_size=300))
    elif op == "truncate":
        members[target] = members[target][:draw(st.integers(0, max(len(members[target]) - 1, 0)))]
    elif op == "flip":
        data = bytearray(members[target])
        if data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        members[target] = bytes(data)
    elif op == "drop":
        del members[target]
    elif op == "extra":
        members[draw(st.sampled_from(["a999.npy", "../evil.npy", "header.json.bak", "x"]))] = b"\x00" * 10
    else:
        members[f"{target}"] = members[target]
    return name, _zip(members), X


@st.composite
def mutated_bytes(draw):
    name, blob, X = CORPUS[draw(st.integers(0, len(CORPUS) - 1))]
    data = bytearray(blob)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        elif op == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
        else:
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
    return name, bytes(data), X


# ----------------------------------------------------------------------------- the oracle
@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    canary = root / "canary" / "precious.txt"
    canary.parent.mkdir()
    canary.write_text("keep me")
    work = root / "work"
    work.mkdir()
    yield {"canary": canary, "work": work, "model": work / "model.npz"}
    if "GPUKSVM_FUZZ_REPORT" in os.environ:
        Path(os.environ["GPUKSVM_FUZZ_REPORT"]).write_text(json.dumps(dict(STATS), indent=2))
    print(f"\nfuzz statistics: {dict(STATS)}")


def _fds() -> set[str]:
    try:
        return set(os.listdir("/proc/self/fd"))
    except OSError:  # pragma: no cover - not Linux
        return set()


def _predict(model, X):
    """A loaded model is valid: its prediction methods run on data of the right width."""
    width = getattr(model, "n_features_in_", None)
    if width is None and hasattr(model, "steps"):
        width = getattr(model.steps[-1][1], "n_features_in_", None)
    if width is None:
        return     # an unfitted estimator: nothing to predict with
    Xw = np.resize(X, (X.shape[0], width)) if width != X.shape[1] else X
    fn = getattr(model, "predict", None) or model.transform
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            fn(Xw)
        except ValueError as exc:
            # a loaded model may hold parameters that make the input unusable (e.g. a dtype
            # that cannot hold it): that must be said in words, as for any estimator
            STATS["predict-valueerror"] += 1
            assert str(exc), "an empty ValueError"


def check_file(sandbox: dict, data: bytes, X: np.ndarray) -> None:
    path = sandbox["model"]
    path.write_bytes(data)
    before_fds, before_files = _fds(), sorted(p.name for p in sandbox["work"].iterdir())
    STATS["examples"] += 1
    try:
        model = io.load(path)
    except io.ModelFormatError as exc:
        STATS["refused"] += 1
        assert str(exc).startswith(str(path)), exc
    else:
        STATS["loaded"] += 1
        assert entry_for(model) is not None, type(model)
        _predict(model, X)
        del model
    for fn in (io.describe, io.read_header):
        try:
            fn(path)
        except io.ModelFormatError:
            pass
    out, err = _pyio.StringIO(), _pyio.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["info", str(path)])
    assert rc in (0, 1) and "Traceback" not in err.getvalue()
    if rc == 1:
        assert err.getvalue().startswith("gpuksvm info: error: ")
    # no side effects
    assert sandbox["canary"].read_text() == "keep me"
    assert _fds() == before_fds, "a file descriptor was left open"
    assert sorted(p.name for p in sandbox["work"].iterdir()) == before_files


@FUZZ
@given(case=st.data())
def test_fuzz_mutated_headers(sandbox, case):
    name, data, X = case.draw(mutated_header(str(sandbox["canary"])))
    check_file(sandbox, data, X)


@FUZZ
@given(case=mutated_members())
def test_fuzz_mutated_members(sandbox, case):
    name, data, X = case
    check_file(sandbox, data, X)


@FUZZ
@given(case=mutated_bytes())
def test_fuzz_mutated_bytes(sandbox, case):
    name, data, X = case
    check_file(sandbox, data, X)


@FUZZ
@given(header=st.data())
def test_fuzz_random_headers(sandbox, header):
    """Headers that are random JSON (not mutations of a real one)."""
    value = header.draw(_json(str(sandbox["canary"])))
    doc = {"format": "gpuksvm-model", "format_version": header.draw(st.sampled_from([1, 2])),
           "model": value, "tree": value, "arrays": {}} if header.draw(st.booleans()) else value
    check_file(sandbox, _zip({"header.json": json.dumps(doc).encode()}), CORPUS[0][2])


# ----------------------------------------------------------------------------- SVMlight readers
TOKENS = st.one_of(
    st.sampled_from(["1", "-1", "+1", "0", "2.5", "1e3", "nan", "inf", "1,2", "qid:3", "qid:x", "#",
                     "1:1", "2:0.5", "0:1", "-1:2", "3:nan", "4:inf", "2000000000:1", "1.5:2", "x:1",
                     "1:", ":1", "1:1:1", "5:1e400", "\x00", "\xff"]),
    st.text(alphabet="0123456789:.-+e#xn ", max_size=8))


@st.composite
def svmlight_files(draw):
    if draw(st.booleans()):
        return draw(st.binary(max_size=200))
    lines = draw(st.lists(st.lists(TOKENS, max_size=6), min_size=1, max_size=8))
    return ("\n".join(" ".join(t) for t in lines) + draw(st.sampled_from(["", "\n", "\r\n"]))).encode(
        "utf-8", errors="surrogateescape")


@FUZZ
@given(content=svmlight_files(), suffix=st.sampled_from([".svm", ".svm.gz", ".svm.bz2"]))
def test_fuzz_svmlight_readers(sandbox, content, suffix):
    path = sandbox["work"] / f"data{suffix}"
    path.write_bytes(content)
    before = _fds()
    STATS["svmlight-examples"] += 1
    readers = (lambda: load_svmlight(path), lambda: read_svmlight(path, 4, zero_based=False),
               lambda: list(SVMLightBlockSource(path, block_size=2)),
               lambda: SVMLightBlockSource(path, n_features=3, zero_based=False).labels())
    for read in readers:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                read()
                STATS["svmlight-read"] += 1
            except ValueError as exc:
                STATS["svmlight-refused"] += 1
                assert str(path) in str(exc), exc
    path.unlink()
    assert _fds() == before
    assert sandbox["canary"].read_text() == "keep me"


# ----------------------------------------------------------------------------- structure-aware
#: the structure-aware test runs this many times GPUKSVM_FUZZ_EXAMPLES (its examples are cheap)
STRUCTURE_FACTOR = 5
STRUCTURE = settings(FUZZ, max_examples=N_EXAMPLES * STRUCTURE_FACTOR)
STRUCTURE_CORPUS = [c for c in CORPUS if c[0] != "unfitted"]

#: values a header number, string or list is replaced by
HEADER_VALUES = [{"float": "nan"}, {"float": "inf"}, {"float": "-inf"}, 1e300, -1e300, 3e38, 1e20, -1e20,
                 0, 0.0, -1, -1.0, 1, 2, 5e-324, 1e-300, 2 ** 63 - 1, 2 ** 40, -(2 ** 31), 10 ** 400, True,
                 False, None, "", "rbf", "poly", "linear", "sigmoid", "float32", "ovr", "ovo", [], [0], [1.0],
                 {"tuple": []}, {"strings": [""]}, {"strings": ["a", "a"]}, {"device": "cpu"},
                 {"dtype": "float32"}]
#: values an array member's entries are overwritten with
ARRAY_VALUES = [np.nan, np.inf, -np.inf, 3e38, -3e38, 1e300, 1e20, 1e-320, 0.0, -1.0, 2.0 ** 62, -(2 ** 31)]
ARRAY_DTYPES = ["<f8", "<f4", "<i8", "<i4", "<u1", "|b1", "<U0", "<U3"]


def _header_leaves(node, prefix=()):
    """Paths to every value below ``node`` that is not a dict (numbers, strings, lists, None)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _header_leaves(v, prefix + (k,))
    else:
        yield prefix
        if isinstance(node, list):
            for i, v in enumerate(node):
                yield from _header_leaves(v, prefix + (i,))


def _array_refs(node, prefix=()):
    """Paths to every {"array": ref} node (version 2) or {"t": "array", "ref": ref} (version 1)."""
    if isinstance(node, dict):
        if type(node.get("array")) is str or (node.get("t") == "array" and "ref" in node):
            yield prefix
        for k, v in node.items():
            yield from _array_refs(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _array_refs(v, prefix + (i,))


def _overwrite(a: np.ndarray, value, where: str, draw) -> np.ndarray:
    """``a`` with ``value`` written at every entry, one entry, or every other entry (cast as NumPy
    would, with overflow to inf for floats and wrapping for integers)."""
    out = a.copy()
    if out.size == 0:
        return out
    flat = out.reshape(-1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if out.dtype.kind == "f":
            v = np.array(value, dtype=np.float64).astype(out.dtype)
        elif out.dtype.kind in "iu":
            v = np.array(value if np.isfinite(value) else -1, dtype=np.float64).astype(np.int64).astype(out.dtype)
        elif out.dtype.kind == "b":
            v = not bool(flat[0])
        else:
            v = str(value)[:max(out.dtype.itemsize // 4, 0)]
        if where == "all":
            flat[:] = v
        elif where == "one":
            flat[draw(st.integers(0, flat.size - 1))] = v
        else:
            flat[::2] = v
    return out


def _reshaped(a: np.ndarray, how: str) -> np.ndarray:
    if how == "drop-row" and a.ndim >= 1 and a.shape[0]:
        return a[:-1]
    if how == "drop-col" and a.ndim >= 2 and a.shape[-1]:
        return a[..., :-1]
    if how == "transpose":
        return np.ascontiguousarray(a.T)
    if how == "flat":
        return a.reshape(-1)
    return a[None]


def _recast(a: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dtype.startswith("<U"):
            return np.full(a.shape, "", dtype=dtype) if dtype == "<U0" else a.astype(str).astype(dtype)
        if a.dtype.kind == "U":
            return np.zeros(a.shape, dtype=dtype)
        if a.dtype.kind == "f" and np.dtype(dtype).kind in "iu":
            a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
        return a.astype(dtype)


@st.composite
def structured_file(draw):
    """A genuine model file with values changed inside its header and arrays, checksums recomputed."""
    name, blob, X = STRUCTURE_CORPUS[draw(st.integers(0, len(STRUCTURE_CORPUS) - 1))]
    ops = []

    def edit(header: dict, arrays: dict) -> None:
        tree = header["tree" if header["format_version"] == 1 else "model"]
        for _ in range(draw(st.integers(1, 3))):
            op = draw(st.sampled_from(["header-value", "header-value", "array-ref", "array-values",
                                       "array-values", "array-dtype", "array-shape"]))
            ops.append(op)
            if op == "header-value":
                paths = list(_header_leaves(tree))
                path = paths[draw(st.integers(0, len(paths) - 1))]
                parent = _get(tree, path[:-1])
                old = parent[path[-1]]
                choice = draw(st.sampled_from(["value", "value", "scale", "wrap", "unwrap"]))
                if choice == "scale" and type(old) in (int, float):
                    new = old * draw(st.sampled_from([-1, 0, 10 ** 6, 10 ** 30, 10 ** -30])) + \
                        draw(st.sampled_from([0, 1, -1]))
                elif choice == "wrap":
                    new = [old]
                elif choice == "unwrap" and isinstance(old, list) and old:
                    new = old[0]
                else:
                    new = copy.deepcopy(draw(st.sampled_from(HEADER_VALUES)))
                parent[path[-1]] = new
            elif op == "array-ref":
                refs = list(_array_refs(tree))
                if refs:
                    ref_node = _get(tree, refs[draw(st.integers(0, len(refs) - 1))])
                    # another member, or the same member behind two attributes
                    ref_node["array" if "array" in ref_node else "ref"] = draw(st.sampled_from(sorted(arrays)))
            else:
                ref = draw(st.sampled_from(sorted(arrays)))
                a = arrays[ref]
                if op == "array-values":
                    arrays[ref] = _overwrite(a, draw(st.sampled_from(ARRAY_VALUES)),
                                             draw(st.sampled_from(["all", "one", "half"])), draw)
                elif op == "array-dtype":
                    arrays[ref] = _recast(a, draw(st.sampled_from(ARRAY_DTYPES)))
                else:
                    arrays[ref] = _reshaped(a, draw(st.sampled_from(["drop-row", "drop-col", "transpose",
                                                                     "flat", "add-axis"])))

    return name, ops, rewritten(blob, edit), X


def _width(model) -> int | None:
    width = getattr(model, "n_features_in_", None)
    if width is None and hasattr(model, "steps"):
        width = getattr(model.steps[0][1], "n_features_in_", None)
    return width


def _outputs(model, X: np.ndarray) -> dict:
    """Every output a loaded model gives on finite ``X``: name → array."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in ("decision_function", "predict", "predict_proba", "transform", "score_samples"):
            if hasattr(model, method):
                out[method] = np.asarray(getattr(model, method)(X))
    return out


def check_structured(sandbox: dict, data: bytes, X: np.ndarray) -> str:
    """Refused with ModelFormatError, or loaded and every output finite; no side effect."""
    path = sandbox["model"]
    path.write_bytes(data)
    before_fds, before_files = _fds(), sorted(p.name for p in sandbox["work"].iterdir())
    try:
        model = io.load(path)
    except io.ModelFormatError as exc:
        outcome = "refused"
        assert str(exc).startswith(str(path)), exc
    else:
        outcome = "loaded-finite"
        assert entry_for(model) is not None, type(model)
        width = _width(model)
        assert width is not None, "a fitted corpus model loaded unfitted"
        Xw = np.resize(X, (X.shape[0], width)) if width != X.shape[1] else X
        for method, values in _outputs(model, Xw).items():
            if values.dtype.kind in "fc":
                assert np.isfinite(values).all(), f"{method} gives non-finite values"
            if method == "predict" and hasattr(model, "classes_"):
                assert np.isin(values, model.classes_).all(), "predict gives labels outside classes_"
        del model
    assert sandbox["canary"].read_text() == "keep me"
    assert _fds() == before_fds, "a file descriptor was left open"
    assert sorted(p.name for p in sandbox["work"].iterdir()) == before_files
    return outcome


@pytest.mark.parametrize("name", [c[0] for c in STRUCTURE_CORPUS])
def test_structure_corpus_loads_and_predicts_finite(sandbox, name):
    """The genuine files the structure-aware fuzz starts from load and give finite outputs."""
    _, blob, X = next(c for c in STRUCTURE_CORPUS if c[0] == name)
    assert check_structured(sandbox, blob, X) == "loaded-finite"


@STRUCTURE
@given(case=structured_file())
def test_fuzz_structure_aware(sandbox, case):
    name, ops, data, X = case
    STATS["structure-examples"] += 1
    outcome = check_structured(sandbox, data, X)
    STATS[f"structure-{outcome}"] += 1
