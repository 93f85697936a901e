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
import re
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


CALLERS = ("annotation", "evalapp", "scripts", "tests")


def _reaches_a_reexport(path: Path, module: str) -> list[str]:
    """Where ``path`` takes a name other than a module from the ``selectors`` or ``services``
    package itself (``from annotation.services import study_import``, ``selectors.counted_judgements``)."""
    modules = {layer: {p.stem for p in (REPO / "annotation" / layer).glob("*.py")} - {"__init__"} for layer in LAYERS}
    tree = ast.parse(path.read_text(), str(path))
    bound, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(module, path, node)
            for alias in node.names:
                layer = source.removeprefix("annotation.") if source in ("annotation.selectors", "annotation.services") \
                    else alias.name if source == "annotation" and alias.name in LAYERS else None
                if layer is None:
                    continue
                if source == "annotation":
                    bound[alias.asname or alias.name] = layer
                elif alias.name not in modules[layer]:
                    found.append(f"{module}:{node.lineno} imports {alias.name} from {source}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("annotation.selectors", "annotation.services") and alias.asname:
                    bound[alias.asname] = alias.name.removeprefix("annotation.")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound \
                and node.attr not in modules[bound[node.value.id]]:
            found.append(f"{module}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_the_layers_packages_reexport_nothing():
    """``annotation/selectors/__init__.py`` and ``annotation/services/__init__.py`` import their
    modules and nothing else, and no module or test takes a read or a write from the package:
    each names the module that holds it (issue 40: 31 ``selectors.x()`` calls hid it)."""
    for layer in LAYERS:
        init = REPO / "annotation" / layer / "__init__.py"
        modules = {p.stem for p in init.parent.glob("*.py")} - {"__init__"}
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            assert isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None \
                and {a.name for a in node.names} <= modules, f"{init.relative_to(REPO)}:{node.lineno} is not an import of its modules"
    offenders = [line for top in CALLERS for path in sorted((REPO / top).rglob("*.py"))
                 if "migrations" not in path.parts for line in _reaches_a_reexport(path, _module_name(path))]
    assert offenders == [], "\n".join(offenders)


def test_no_text_names_a_read_or_a_write_by_the_package():
    """Code in a string (a child process's script), a comment or a template names the module as
    well: ``services.studies.study_import``, never ``services.study_import`` (the AST check above
    cannot see into strings)."""
    names = {layer: {node.name for path in (REPO / "annotation" / layer).glob("*.py")
                     for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)} for layer in LAYERS}
    pattern = re.compile(r"\b(services|selectors)\.([a-z_]+)\b")
    paths = [p for top in CALLERS for p in sorted((REPO / top).rglob("*.py"))
             if "migrations" not in p.parts and p.name != "test_import_layers.py"]
    paths += sorted((REPO / "templates").rglob("*.html"))
    offenders = [f"{path.relative_to(REPO)}:{number}: {match.group(0)}"
                 for path in paths for number, line in enumerate(path.read_text().splitlines(), start=1)
                 for match in pattern.finditer(line) if match.group(2) in names[match.group(1)]]
    assert offenders == [], "\n".join(offenders)


def test_the_reexport_check_finds_a_package_name(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from annotation.services import study_import\nfrom annotation import selectors\n"
                     "from ..selectors import counted_judgements\n"
                     "selectors.counted_judgements\nselectors.serving.hit_display\n")
    assert _reaches_a_reexport(probe, "annotation.probe") == [
        "annotation.probe:1 imports study_import from annotation.services",
        "annotation.probe:4 selectors.counted_judgements"]
    assert _reaches_a_reexport(probe, "annotation.views.probe") == [
        "annotation.views.probe:1 imports study_import from annotation.services",
        "annotation.views.probe:3 imports counted_judgements from annotation.selectors",
        "annotation.views.probe:4 selectors.counted_judgements"]
