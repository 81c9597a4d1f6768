"""``cuzk-tui export SOURCE -o FILE``: a Chrome trace of a session directory or a raw daemon log.

A regular file is a daemon log (stdout+stderr); a directory is a session: its ``daemon.log``
and its ``events.jsonl`` (samples, lifecycle). Both are read line by line, never whole.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..events import ObservedEvent, RecordError, from_record
from ..export import write_chrome_trace
from ..logparse import parse_line
from ..session import DAEMON_LOG, EVENTS_FILE
from ..timeline import Timeline

# An export shows the whole session: retention far beyond any realistic run.
_EXPORT_MAX_JOBS = 10_000_000


def _fail(message: str) -> int:
    print(f"cuzk-tui export: {message}", file=sys.stderr)
    return 1


def read_log(path: Path, timeline: Timeline) -> int:
    """Feed every line of a daemon log into ``timeline``; the number of lines (OSError propagates)."""
    count = 0
    with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            timeline.apply(parse_line(line))
            count += 1
    return count


def read_observed(path: Path) -> list[ObservedEvent]:
    """The observed events of an events.jsonl, up to its first damaged line (reported on stderr)."""
    events: list[ObservedEvent] = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                events.append(from_record(json.loads(line)))
            except (ValueError, RecordError) as exc:
                print(
                    f"cuzk-tui export: {path}:{number}: damaged event record ({exc}); reading stops here",
                    file=sys.stderr,
                )
                break
    return events


def run_export(args: argparse.Namespace) -> int:
    source, output = Path(args.source), Path(args.output)
    if source.is_dir():
        log, events_file = source / DAEMON_LOG, source / EVENTS_FILE
        if not log.is_file() and not events_file.is_file():
            return _fail(f"{source}: not a session directory (no {DAEMON_LOG} or {EVENTS_FILE})")
    elif source.is_file():
        log, events_file = source, None
    elif source.exists():
        return _fail(f"{source}: not a regular file or a directory")
    else:
        return _fail(f"{source}: no such file or directory")

    timeline = Timeline(max_jobs=_EXPORT_MAX_JOBS)
    observed: list[ObservedEvent] = []
    try:
        lines = read_log(log, timeline) if log.is_file() else 0
        if events_file is not None and events_file.is_file():
            observed = read_observed(events_file)
    except OSError as exc:
        return _fail(f"{exc.filename or source}: cannot read: {exc.strerror or exc}")
    try:
        count = write_chrome_trace(output, timeline, observed)
    except OSError as exc:
        return _fail(f"{output}: cannot write: {exc.strerror or exc}")
    print(
        f"wrote {output}: {count} trace events ({timeline.jobs_seen} jobs, {lines} log lines, "
        f"{len(observed)} observed events)"
    )
    return 0
