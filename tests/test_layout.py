"""The test tree's own rule: a test module imports shared builders from tests.factories (or
fixtures from conftest), never from another test module, so one can move or go alone."""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for module in modules:
                parts = module.split(".")
                if parts[0] == "tests" and (parts[-1].startswith("test_") or parts[-1] == "conftest"):
                    offenders.append(f"{path.relative_to(TESTS)}:{node.lineno} imports {module}")
    assert not offenders, "\n".join(offenders)
