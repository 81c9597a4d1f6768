"""``cuzk-tui config check|show|set FILE``: validate, list and change a daemon config from a shell.

Exit codes: 0 fine; 1 the file is missing or corrupt, has errors, or a value given is invalid;
2 a malformed ``SECTION.KEY=VALUE`` or an unknown knob (a usage error, like argparse's).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import tomlkit

from ..config import ConfigDocument, ConfigError, load_config, save_atomic
from ..knob_rules import parse_cli_value, validate_value
from ..knobs import KNOBS, KNOBS_BY_NAME, Knob, KnobValueError, Severity, Status, TomlValue, unknown_knob_message

_STATUS_TEXT = {
    Status.ACTIVE: "active",
    Status.DEPRECATED: "deprecated (ignored by the daemon)",
    Status.INERT: "inert (ignored by the daemon)",
    Status.ENGINE_ONLY: "engine-only",
}


def run_config(args: argparse.Namespace) -> int:
    if args.config_command == "set":
        return _set(args.file, args.assignments)
    try:
        doc = load_config(args.file)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.config_command == "check":
        return _check(args.file, doc)
    return _show(args.file, doc, as_json=args.json)


def _check(file: str, doc: ConfigDocument) -> int:
    problems = doc.problems()
    for p in problems:
        print(f"{file}: {p.severity.value}: {p}")
    if not problems:
        print(f"{file}: ok")
    return 1 if any(p.severity is Severity.ERROR for p in problems) else 0


def _format(value: TomlValue | None) -> str:
    return "-" if value is None else tomlkit.item(value).as_string()


def _show(file: str, doc: ConfigDocument, *, as_json: bool) -> int:
    effective = doc.effective()
    unknown = doc.unknown_keys()
    if as_json:
        knobs: list[dict[str, Any]] = [
            {
                "name": k.name,
                "section": k.section,
                "key": k.key,
                "type": k.type.value,
                "units": k.units,
                "value": effective[k.name],
                "default": k.default,
                "set": doc.is_set(k.section, k.key),
                "status": k.status.value,
                "ignored_by_daemon": k.ignored_by_daemon,
                "restart_required": k.restart_required,
            }
            for k in KNOBS
        ]
        print(json.dumps({"file": file, "knobs": knobs, "unknown_keys": unknown}, indent=2))
        return 0
    rows = [("KNOB", "VALUE", "DEFAULT", "IN FILE", "STATUS")]
    rows += [
        (
            k.name,
            _format(effective[k.name]),
            _format(k.default),
            "set" if doc.is_set(k.section, k.key) else "",
            _STATUS_TEXT[k.status],
        )
        for k in KNOBS
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)), row[4], sep="  ")
    if unknown:
        print(f"\nunknown keys (ignored by the daemon): {', '.join(unknown)}")
    return 0


def _parse_assignments(assignments: list[str]) -> tuple[int, list[tuple[Knob, TomlValue]]]:
    """(exit code so far, parsed assignments); every bad one is reported, not just the first."""
    code = 0
    parsed: list[tuple[Knob, TomlValue]] = []
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        name = name.strip()
        if not sep or "." not in name:
            print(f"config set: {assignment!r}: expected SECTION.KEY=VALUE", file=sys.stderr)
            code = 2
            continue
        if name not in KNOBS_BY_NAME:
            print(f"config set: {unknown_knob_message(name)}", file=sys.stderr)
            code = 2
            continue
        k = KNOBS_BY_NAME[name]
        try:
            value = parse_cli_value(k, text)
        except KnobValueError as exc:
            print(f"config set: {exc}", file=sys.stderr)
            code = max(code, 1)
            continue
        for problem in validate_value(k, value):
            print(f"config set: {problem.severity.value}: {problem}", file=sys.stderr)
            if problem.severity is Severity.ERROR:
                code = max(code, 1)
        parsed.append((k, value))
    return code, parsed


def _set(file: str, assignments: list[str]) -> int:
    code, parsed = _parse_assignments(assignments)
    if code:
        print(f"config set: nothing written to {file}", file=sys.stderr)
        return code
    try:
        doc = load_config(file)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    before = doc.effective()
    for k, value in parsed:
        doc.set(k.section, k.key, value)
    try:
        save_atomic(doc, file)
    except OSError as exc:
        print(f"{file}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for k, value in parsed:
        print(f"{file}: {k.name} = {_format(value)} (was {_format(before[k.name])})")
    print("the daemon reads its config only at start: restart it to apply", file=sys.stderr)
    return 0
