"""The package's module import graph (issue 16): no circle, no hidden import.

Built from the source with ``ast`` (nothing imported): an edge A → B for every
``import`` of a ``gpuksvm`` module B in module A.  A circle would make the
import order matter and is what function-local imports used to hide, so those
are refused too (imports of optional third-party packages — cupy, dask,
psutil, matplotlib — may stay inside functions, where they are only needed).
"""
from __future__ import annotations

import ast
import subprocess
import sys
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


# --------------------------------------------------------------------------- the layers
#: the layers, bottom first: a module imports only from its own layer and the layers below
LAYERS = ("array", "data", "kernels", "solvers", "scaleout", "estimators", "model_selection", "persistence", "cli")
#: modules directly under gpuksvm/ and the layer they belong to (None: above every layer, imported by none)
TOP_LEVEL = {"gpuksvm._version": "array",      # the version string: every layer may read it
             "gpuksvm.datasets": "data",       # SVMlight files and the papers' generators
             "gpuksvm.plot": "cli",            # a user's tool over fitted models
             "gpuksvm": None, "gpuksvm.__main__": None, "gpuksvm._moved": None}
#: the estimator registry is a table of names (module paths as strings): it imports no gpuksvm module,
#: and only these layers read it
REGISTRY = "gpuksvm.registry"
REGISTRY_READERS = ("persistence", "cli")


def _layer(module: str) -> str | None:
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        src = _layer(source)
        for target in sorted(targets):
            if source == REGISTRY:
                bad.append(f"{source} imports {target}: the registry imports no gpuksvm module")
            elif target == REGISTRY:
                if not (src is None or src in REGISTRY_READERS):
                    bad.append(f"{source} ({src}) reads the registry: only {REGISTRY_READERS} and the top do")
            elif _layer(target) is None:
                if src is not None:
                    bad.append(f"{source} imports {target}, which is above every layer")
            elif src is not None and LAYERS.index(_layer(target)) > LAYERS.index(src):
                bad.append(f"{source} ({src}) imports {target} ({_layer(target)}), a layer above")
    return bad


#: imports that go up a layer today, each to be removed by moving code to its layer (never add one)
KNOWN_LAYER_VIOLATIONS: set[str] = set()


def test_every_module_is_in_a_layer():
    mods = _modules()
    unplaced = sorted(m for m in mods if m != REGISTRY and m not in TOP_LEVEL and _layer(m) is None)
    assert unplaced == []


def test_imports_only_go_down_the_layers():
    """array < data < kernels < solvers < scaleout < estimators < persistence < cli."""
    edges, _ = _graph()
    now = set(_layer_violations(edges))
    assert sorted(now - KNOWN_LAYER_VIOLATIONS) == [], "new imports up the layers"
    assert sorted(KNOWN_LAYER_VIOLATIONS - now) == [], "gone: remove them from KNOWN_LAYER_VIOLATIONS"


def test_the_layer_check_sees_an_upward_import():
    assert _layer_violations({"gpuksvm.solvers.x": {"gpuksvm.estimators.y"}, "gpuksvm.estimators.y": set()})
    assert not _layer_violations({"gpuksvm.estimators.y": {"gpuksvm.solvers.x"}, "gpuksvm.solvers.x": set()})
    assert _layer_violations({"gpuksvm.solvers.x": {REGISTRY}, REGISTRY: set()})
    assert _layer_violations({REGISTRY: {"gpuksvm.estimators.y"}, "gpuksvm.estimators.y": set()})


MAX_TOP_LEVEL_MODULES = 8


def test_few_modules_directly_under_the_package():
    """The package is laid out by layer: directly under gpuksvm/ only the entry points and small tables."""
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_import_gpuksvm_loads_no_estimator():
    """``import gpuksvm`` (which reads the registry) loads no estimator, solver, Dask or persistence module."""
    code = "import sys, gpuksvm, gpuksvm.registry; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    loaded = {m.split(".")[1] for m in out if m.startswith("gpuksvm.")}
    assert REGISTRY in out
    assert loaded & {"estimators", "solvers", "scaleout", "persistence"} == set()


# --------------------------------------------------------------------------- private members
def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _defined_privates(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, classes, module and class variables, and
    the attributes its methods set on ``self`` / ``cls``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Name, ast.arg)):
            out.add(node.id if isinstance(node, ast.Name) else node.arg)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            out.add(node.attr)
    return {n for n in out if _is_private(n)}


def _module_aliases(tree: ast.AST, module: str, path: Path, mods: dict[str, Path]) -> dict[str, str]:
    """Local name → the gpuksvm module it is bound to by an import."""
    out = {}
    package = _package(module, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in mods:
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            for a in node.names:
                if f"{base}.{a.name}" in mods:
                    out[a.asname or a.name] = f"{base}.{a.name}"
    return out


#: the package held to "only its own private members": the Dask layer plugs into public seams
STRICT = "gpuksvm.scaleout"
#: the package that reads and writes the stored state model files declare, private attributes included
PERSISTENCE = "gpuksvm.persistence"


def _declared_state() -> set[str]:
    """The private attribute names the model format declares (stored or recreated on load)."""
    from gpuksvm.persistence.model_format import REGISTRY

    return {name for entry in REGISTRY.values() for name in (*entry.fitted, *entry.transient)
            if _is_private(name)}


def _private_accesses(mods: dict[str, Path] | None = None,
                      declared: set[str] | None = None) -> list[tuple[str, str, int, str]]:
    """(module, private name, line, what) for every access to another package's private member.

    An access is ``x._name`` (or ``getattr``/``setattr``/``hasattr``/``delattr`` of ``x`` and
    ``"_name"``, or ``from m import _name``) where ``x`` is not ``self`` / ``cls`` and:

    * ``x`` is an imported gpuksvm module of another package (``backend._probe``), or the import
      takes ``_name`` from a module of another package;
    * or ``_name`` is defined in the package (functions, classes, variables, attributes set on
      ``self``) but not in the accessing module's own package: a member of another package's
      object (``est._check_params()`` in ``gpuksvm.scaleout``).

    * or the module is in ``gpuksvm.scaleout`` (:data:`STRICT`), which uses public API only, and
      ``_name`` is not its own (``rows._client`` of a class of another scaleout module, ``client._x``).

    The persistence layer may read the private attributes the model format declares
    (``_sv_scale``, ``_learner``, ...): they are what a model file stores.

    A package is a folder of the layout (``gpuksvm.solvers.cvm``, ``gpuksvm.estimators``, ...).
    Private names only third-party code defines (scikit-learn's ``_validate_params``) are not
    this test's concern.
    """
    mods = _modules() if mods is None else mods
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in mods.items()}
    packages = {m: _package(m, p) for m, p in mods.items()}
    defined_in: dict[str, set[str]] = {}
    for m, tree in trees.items():
        for name in _defined_privates(tree):
            defined_in.setdefault(name, set()).add(packages[m])
    declared = _declared_state() if declared is None else declared
    found = []
    for m, tree in trees.items():
        own = packages[m]
        stored = declared if own.startswith(PERSISTENCE) else set()
        mine = _defined_privates(tree)
        aliases = _module_aliases(tree, m, mods[m], mods)

        def foreign(base: ast.AST, name: str) -> str | None:
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                return None
            if isinstance(base, ast.Name) and base.id in aliases:
                target = aliases[base.id]
                return target if packages[target] != own else None
            owners = defined_in.get(name, set())
            if owners and own not in owners and name not in stored:
                return f"an object of {', '.join(sorted(owners))}"
            if own == STRICT and name not in mine:
                return f"not this module's ({', '.join(sorted(owners)) or 'third-party'})"
            return None

        for node in ast.walk(tree):
            hit = None
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                hit = node.attr, foreign(node.value, node.attr)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2 and \
                    isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) and \
                    _is_private(node.args[1].value):
                hit = node.args[1].value, foreign(node.args[0], node.args[1].value)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    source = aliases.get(a.asname or a.name)
                    if _is_private(a.name) and source is None and node.module in mods and \
                            packages[node.module] != own:
                        found.append((m, a.name, node.lineno, f"imported from {node.module}"))
            if hit is not None and hit[1] is not None:
                found.append((m, hit[0], node.lineno, hit[1]))
    return found


def test_no_module_reaches_into_another_packages_private_members():
    """Across packages only public names: the Dask layer plugs into the solvers' seams and the
    estimators' public API, solvers use each other's public functions."""
    found = sorted(f"{m}:{line}: {name} ({what})" for m, name, line, what in _private_accesses())
    assert found == []


def test_the_private_access_check_sees_one(tmp_path):
    assert _is_private("_check_params") and not _is_private("__init__") and not _is_private("fit")
    tree = ast.parse("class A:\n    def _f(self):\n        self._x = 1\n_y = 2\n")
    assert _defined_privates(tree) == {"_f", "_x", "_y"}
    files = {
        "gpuksvm.estimators.e": "def _helper():\n    pass\nclass E:\n    def _check_params(self):\n"
                                "        self._x = 1\n        return self._helper_of(other=self)\n"
                                "    def _helper_of(self, other):\n        return other._x\n",
        "gpuksvm.scaleout.s": "from gpuksvm.estimators import e\nfrom gpuksvm.scaleout import t\n"
                              "def f(est, rows):\n    est._check_params()\n    e._helper()\n"
                              "    rows._client\n    return getattr(est, '_x')\n",
        "gpuksvm.scaleout.t": "class Rows:\n    def __init__(self):\n        self._client = None\n",
        "gpuksvm.solvers.a": "from gpuksvm.estimators.e import _helper\n",
        "gpuksvm.persistence.p": "def read(est):\n    return est._x, est._check_params\n",
    }
    mods = {}
    for name, text in files.items():
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        mods[name] = path
    found = {(m, name) for m, name, _, _ in _private_accesses(mods, declared={"_x"})}
    assert found == {("gpuksvm.scaleout.s", "_check_params"), ("gpuksvm.scaleout.s", "_helper"),
                     ("gpuksvm.scaleout.s", "_client"), ("gpuksvm.scaleout.s", "_x"),
                     ("gpuksvm.solvers.a", "_helper"), ("gpuksvm.persistence.p", "_check_params")}


def test_every_package_folder_is_installed():
    """pyproject.toml lists the packages one by one (kernels_cuda/ is mapped into the package):
    a package folder missing there would be missing from a built wheel."""
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert folders | {"gpuksvm.kernels_cuda"} == listed


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
