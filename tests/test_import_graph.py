"""The package's module import graph (issue 16): no circle, no hidden import.

Built from the source with ``ast`` (nothing imported): an edge A → B for every
``import`` of a ``gpuksvm`` module B in module A.  A circle would make the
import order matter and is what function-local imports used to hide, so those
are refused too (imports of optional third-party packages — cupy, dask,
psutil, matplotlib — may stay inside functions, where they are only needed).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpuksvm"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported gpuksvm module, line, inside a function or class body) for every import in ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, nested) for a in child.names if a.name in mods)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - (child.level - 1)]
                    base = ".".join(base + ([child.module] if child.module else []))
                else:
                    base = child.module or ""
                targets = [f"{base}.{a.name}" for a in child.names if f"{base}.{a.name}" in mods]
                if not targets and base in mods:
                    targets = [base]
                out.extend((t, child.lineno, nested) for t in targets)
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return [(t, line, nested) for t, line, nested in out if t != name]


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    local = []
    for name, path in mods.items():
        for target, line, nested in _imports(name, path, mods):
            edges[name].add(target)
            if nested:
                local.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} inside a function")
    return edges, local


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_the_package_import_graph_has_no_circle():
    edges, _ = _graph()
    assert len(edges) > 40 and sum(map(len, edges.values())) > 100   # the walk saw the package
    assert _circles(edges) == []


def test_no_gpuksvm_module_is_imported_inside_a_function():
    _, local = _graph()
    assert local == []


def test_the_circle_finder_finds_circles():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("layer", ["gpuksvm.solvers", "gpuksvm.scaleout"])
def test_algorithm_layers_never_import_an_estimator(layer):
    """The solver and Dask layers sit below the estimators: they take arrays and parameters."""
    estimators = {"gpuksvm.estimators.llsvm", "gpuksvm.estimators.linear_svm", "gpuksvm.estimators.kernel_svc", "gpuksvm.estimators.cvm", "gpuksvm.estimators.svi",
                  "gpuksvm.estimators.okfeb", "gpuksvm.estimators.calibration", "gpuksvm.cli.commands", "gpuksvm.cli.demo"}
    edges, _ = _graph()
    bad = {m: sorted(t & estimators) for m, t in edges.items() if m.startswith(layer) and t & estimators}
    assert bad == {}


def _cupy_imports(path: Path) -> list[int]:
    """Lines of ``path`` that import cupy or cupyx (at any depth, ``importlib`` by literal name too)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [] if node.level else [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            names = [str(node.args[0].value)] if called in ("import_module", "__import__") else []
        else:
            continue
        if any(n.split(".")[0] in ("cupy", "cupyx") for n in names):
            lines.append(node.lineno)
    return lines


def test_only_the_array_layer_imports_cupy():
    """Device branches live in gpuksvm/array: no other module imports cupy (it asks the array layer)."""
    array = PACKAGE / "array"
    found = {f"{path.relative_to(PACKAGE.parent)}:{line}"
             for path in PACKAGE.rglob("*.py") if array not in path.parents
             for line in _cupy_imports(path)}
    assert found == set()
    assert _cupy_imports(array / "backend.py"), "the array layer is where cupy is imported"


def test_the_cupy_import_finder_finds_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n\ndef f():\n    import cupyx.scipy.sparse as csp\n    from cupy import asarray\n"
                   "    return importlib.import_module('cupy')\n", encoding="utf-8")
    assert _cupy_imports(src) == [4, 5, 6]
