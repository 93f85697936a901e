"""Benchmarks: ``python -m protocol.bench decision|spa ...`` (docs/formulas.md, "Command lines").

Each sub-command lives in its own module (``protocol._bench_<name>``) exposing
``add_arguments(parser)`` and ``run(args) -> dict``; this module only dispatches and prints.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

SUBCOMMANDS = {
    "decision": "protocol._bench_decision",
    "spa": "protocol._bench_spa",
    "separability": "protocol.separability",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        modules[name] = module
        p = sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(p)
        p.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = modules[args.command].run(args)
    if args.json:
        print(json.dumps(result))
    else:
        width = max(len(k) for k in result)
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
