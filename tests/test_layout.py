"""The test tree's own rules: a test module imports shared builders from the module of
tests/builders/ that holds them (or fixtures from conftest), never from another test module, so
one can move or go alone."""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BUILDERS = TESTS / "builders"


def _imports(path: Path):
    """(line, module, names) of each import in ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or "", [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, module, _ in _imports(path):
            parts = module.split(".")
            if parts[0] == "tests" and (parts[-1].startswith("test_") or parts[-1] == "conftest"):
                offenders.append(f"{path.relative_to(TESTS)}:{line} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_builders_are_imported_from_the_module_that_holds_them():
    """``from tests.builders.crowd import start_worker``: the import says where a builder lives.
    The package re-exports nothing, and the old drawer (tests/factories.py) is gone for good."""
    modules = {p.stem for p in BUILDERS.glob("*.py")} - {"__init__"}
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, module, names in _imports(path):
            if module == "tests.factories" or module.startswith("tests.factories."):
                offenders.append(f"{path.relative_to(TESTS)}:{line} imports {module}")
            elif module == "tests.builders":
                where = f"{path.relative_to(TESTS)}:{line}"
                offenders += [f"{where} imports {name} from the package" for name in names or ["tests.builders"]]
            elif module.startswith("tests.builders.") and module.split(".")[2] not in modules:
                offenders.append(f"{path.relative_to(TESTS)}:{line} imports {module}, no such builders module")
    assert not (TESTS / "factories.py").exists(), "builders go in tests/builders/<capability>.py"
    assert not offenders, "\n".join(offenders)


def test_builders_hold_no_tests_and_no_names_in_the_package():
    """A builders module builds; its tests live in a test module. The package's __init__ holds only
    its index (a docstring), so every name is reached through its module."""
    init = ast.parse((BUILDERS / "__init__.py").read_text())
    assert all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in init.body)
    tests = [f"{path.name}:{node.name}" for path in sorted(BUILDERS.glob("*.py"))
             for node in ast.parse(path.read_text()).body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.lower().startswith("test")]
    assert tests == []
