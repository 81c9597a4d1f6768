"""``cuzk-tui report SESSION_OR_LOG [--json]``: the post-mortem of a session or a bare daemon log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..report import build_report, render_text
from ..session import SourceError, load_session


def run_report(args: argparse.Namespace) -> int:
    try:
        recorded, model = load_session(Path(args.source), details=False)
    except SourceError as error:
        print(f"cuzk-tui report: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(
            f"cuzk-tui report: {error.filename or args.source}: cannot read: {error.strerror or error}", file=sys.stderr
        )
        return 1
    if recorded.damage:
        print(f"cuzk-tui report: {recorded.damage}", file=sys.stderr)
    report = build_report(model, str(recorded.source.path))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        sys.stdout.write(render_text(report))
    return 0
