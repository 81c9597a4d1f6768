"""``cuzk-tui export SOURCE -o FILE``: a Chrome trace of a session directory or a raw daemon log.

The source is read by the one reader replay and report use (:func:`session.load_session`), so the
trace shows the same jobs with the same final states (an OOM-killed job is cut at the kill).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..export import write_chrome_trace
from ..session import SourceError, load_session


def _fail(message: str) -> int:
    print(f"cuzk-tui export: {message}", file=sys.stderr)
    return 1


def run_export(args: argparse.Namespace) -> int:
    source, output = Path(args.source), Path(args.output)
    try:
        # Every partition's details go into the trace: parsed as read (lazily, each would be read twice).
        recorded, model = load_session(source, cache=not args.no_cache, lazy=False)
    except SourceError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{exc.filename or source}: cannot read: {exc.strerror or exc}")
    for problem in recorded.damage:
        print(f"cuzk-tui export: {problem}", file=sys.stderr)
    observed = recorded.observed
    try:
        count = write_chrome_trace(output, model.timeline, observed)
    except OSError as exc:
        return _fail(f"{output}: cannot write: {exc.strerror or exc}")
    print(
        f"wrote {output}: {count} trace events ({model.timeline.jobs_seen} jobs, {recorded.log_lines} log lines, "
        f"{len(observed)} observed events)"
    )
    return 0
