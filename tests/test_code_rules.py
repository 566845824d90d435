"""Rules about the code itself, read from its source: autodiff/'s modules import one
another in one direction, and nothing calls a private API of NumPy or Python."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AUTODIFF = ROOT / "autodiff"
# The one import that goes back up: Tensor.backward calls into backprop, as torch's does.
ALLOWED_BACK = {("tensor", "backprop")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(AUTODIFF).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def _runtime_imports(tree: ast.AST) -> list[ast.ImportFrom | ast.Import]:
    """Every import statement, in functions too, except those under `if TYPE_CHECKING:`,
    which only a type checker runs."""
    found: list[ast.ImportFrom | ast.Import] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _imported(path: Path, statement: ast.ImportFrom | ast.Import) -> list[str]:
    """The autodiff modules an import statement in `path` loads (by _module_name)."""
    package = _module_name(path).split(".") if path.name == "__init__.py" else _module_name(path).split(".")[:-1]
    package = [p for p in package if p != "__init__"]
    if isinstance(statement, ast.Import):
        names = [a.name for a in statement.names]
        return [n.removeprefix("gradcalc.autodiff.") for n in names if n.startswith("gradcalc.autodiff.")]
    if statement.level == 0:
        if not (statement.module or "").startswith("gradcalc.autodiff"):
            return []
        base = (statement.module or "").split(".")[2:]
    else:
        base = package[: len(package) - (statement.level - 1)] + (statement.module.split(".") if statement.module else [])
    modules = []
    for alias in statement.names:  # `from . import limits` imports a module; `from .x import y` a name of x
        candidate = [*base, alias.name]
        is_module = (AUTODIFF.joinpath(*candidate).with_suffix(".py").exists() or AUTODIFF.joinpath(*candidate).is_dir())
        modules.append(".".join(candidate) if is_module else ".".join(base) or "__init__")
    return modules


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(AUTODIFF.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {m for s in _runtime_imports(tree) for m in _imported(path, s) if m != name} - {"__init__"}
    return graph


def test_autodiff_modules_import_in_one_direction():
    graph = import_graph()
    for edge in ALLOWED_BACK:
        graph[edge[0]].discard(edge[1])
    # Depth-first search for a cycle; report it as a path.
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            assert cycle is None, "autodiff imports in a circle: " + " -> ".join(cycle)


def test_the_import_graph_sees_function_local_imports():
    # The exception above is a function-local import: the reader must find it.
    assert "backprop" in import_graph()["tensor"]


# A private name of NumPy (np.vdot._implementation, np.core._...) or a private module of
# Python's (_thread, _collections_abc ...); the engine uses only public APIs, which keep working
# across versions.
PRIVATE = re.compile(r"\b(?:np|numpy)\.(?:\w+\.)*_[a-z]\w*|_implementation\b|^\s*(?:import|from)\s+_[a-z]\w*", re.MULTILINE)
GENERATED = {"parser/standalone.py", "parser/prebuilt.py", "parser/larktree.py"}


def test_no_private_numpy_or_python_api_is_used():
    found = []
    for folder in ("autodiff", "parser", "cli"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in GENERATED:
                continue
            for match in PRIVATE.finditer(path.read_text()):
                line = path.read_text().count("\n", 0, match.start()) + 1
                found.append(f"{relative}:{line}: {match.group().strip()}")
    assert found == []
