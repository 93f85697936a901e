"""The schema says what the API refuses: a drf-spectacular postprocessing hook.

DRF's CharField refuses a NUL character in any string (ProhibitNullCharactersValidator; a
PostgreSQL text cannot hold one), but drf-spectacular does not describe that validator, so a
string with a NUL was schema-valid and still a 400. Every string a client sends (request body
properties and query or path parameters) without a pattern, format or enum of its own gets the
pattern that says so.
"""
from __future__ import annotations

NO_NUL = "^[^\\u0000]*$"


def _refuse_nul(schema: dict) -> None:
    if schema.get("type") == "string" and not ({"pattern", "format", "enum"} & set(schema)):
        schema["pattern"] = NO_NUL


def strings_refuse_nul(result: dict, generator, request, public) -> dict:
    """POSTPROCESSING_HOOKS entry: NO_NUL on every client-sent string without a pattern."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") or name.startswith("Patched"):
            for prop in component.get("properties", {}).values():
                _refuse_nul(prop)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                _refuse_nul(parameter.get("schema", {}))
    return result
