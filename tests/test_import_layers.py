"""The project's own modules import one another without a cycle, and without imports inside
functions that exist only to dodge one (docs/architecture.md, "Layers").

Read with ``ast`` (nothing is imported): an edge A -> B for every ``import``/``from ... import``
of a project module in A, at any depth of A's code. ``from package import name`` is an edge to
the submodule ``package.name`` when there is one, else to the package's ``__init__``. A
package's ``__init__`` run before its submodules is not an edge (Python's order, not a
dependency).
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("annotation", "protocol", "evalapp", "scripts")

# Function-level imports of the project's own modules that stay, each with its reason.
# (module, imported module): reason
ALLOWED_LOCAL = {
    # Django's AppConfig.ready(): registrations that need the models loaded (a module-level
    # import in apps.py would import models before the app registry is ready).
    ("annotation.apps", "annotation.checks"): "registers the deployment checks",
    ("annotation.apps", "annotation.tasks"): "registers the Celery tasks annotation/jobs.py finds by name",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            found[_module_name(path)] = path
    return found


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _edges(modules: dict[str, Path]) -> dict[str, set[tuple[str, bool]]]:
    """module -> {(imported module, imported inside a function)}."""
    edges: dict[str, set[tuple[str, bool]]] = {name: set() for name in modules}

    def target(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        local_nodes = {id(inner) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for inner in ast.walk(node)}
        for node in ast.walk(tree):
            local = id(node) in local_nodes
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found = target(alias.name)
                    if found and found != name:
                        edges[name].add((found, local))
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, path, node)
                for alias in node.names:
                    found = target(f"{source}.{alias.name}") if f"{source}.{alias.name}" in modules else target(source)
                    if found and found != name:
                        edges[name].add((found, local))
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle():
    edges = _edges(_modules())
    graph = {name: {other for other, _ in targets} for name, targets in edges.items()}
    assert _cycle(graph) is None, "import cycle: " + " -> ".join(_cycle(graph))


def test_no_function_level_import_of_project_modules_in_annotation():
    """annotation/ imports its own modules and protocol/ at the top; the allowed exceptions say why."""
    edges = _edges(_modules())
    local = sorted((name, other) for name, targets in edges.items() if name.startswith("annotation")
                   for other, is_local in targets if is_local and other.startswith(("annotation", "protocol"))
                   and (name, other) not in ALLOWED_LOCAL)
    assert local == [], f"imports inside functions: {local}"


def test_the_checker_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


VIEW_MODULES = sorted([*(REPO / "annotation").glob("views*.py"), REPO / "annotation" / "api.py"])
LAYERS = ("services", "selectors")


def _reaches_outside_a_module(path: Path) -> list[str]:
    """Where ``path`` reaches a write or a read other than as ``services.<module>.<name>`` or
    ``selectors.<module>.<name>``: a name imported from a layer's module, a layer's module under
    another name, or a name the layer's package re-exports."""
    modules = {layer: {p.stem for p in (REPO / "annotation" / layer).glob("*.py")} - {"__init__"} for layer in LAYERS}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if (node.module or "").split(".")[0] in LAYERS:
                found.append(f"{path.name}:{node.lineno} imports from .{node.module}")
            elif node.module is None:
                found += [f"{path.name}:{node.lineno} imports {a.name} as {a.asname}"
                          for a in node.names if a.name in LAYERS and a.asname]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in LAYERS \
                and node.attr not in modules[node.value.id]:
            found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_views_reach_writes_and_reads_through_their_module():
    """One way for a view to reach a write or a read: ``services.hits.judgement_submit``,
    ``selectors.serving.hit_display`` — the module that holds it, by its own name."""
    assert VIEW_MODULES
    offenders = [line for path in VIEW_MODULES for line in _reaches_outside_a_module(path)]
    assert offenders == [], "\n".join(offenders)
