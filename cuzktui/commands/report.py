"""``cuzk-tui report SESSION_OR_LOG [--json]``: the post-mortem of a session or a bare daemon log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..model import SessionModel
from ..report import build_report, render_text
from ..session import SourceError, load_session
from ..session_layout import config_versions


def _time_scale(model: SessionModel, directory: Path | None) -> float | None:
    """The engine's ``[engine] time_scale``: its run's own (launched, or attached and said by its /status),
    else the session's last config version's (a session recorded before its runs said it); None: not known."""
    if model.daemon.time_scale is not None:
        return model.daemon.time_scale
    versions = config_versions(directory) if directory is not None else []
    if not versions:
        return None
    from ..config import ConfigError, load_config  # here: a bare log's report needs none of the config's modules

    try:
        value = load_config(versions[-1]).effective().get("engine.time_scale")
    except ConfigError:
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_report(args: argparse.Namespace) -> int:
    try:
        recorded, model = load_session(Path(args.source), details=False, cache=not args.no_cache)
    except SourceError as error:
        print(f"cuzk-tui report: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(
            f"cuzk-tui report: {error.filename or args.source}: cannot read: {error.strerror or error}", file=sys.stderr
        )
        return 1
    for problem in recorded.damage:
        print(f"cuzk-tui report: {problem}", file=sys.stderr)
    report = build_report(model, str(recorded.source.path), _time_scale(model, recorded.source.directory))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        sys.stdout.write(render_text(report))
    return 0
