"""``cuzk-tui record``: the recorder without a terminal (for systemd, for a fleet of boxes).

It is the TUI's own live controller driven by a loop instead of an app: the same session files
(``replay`` and ``report`` read them), the same benchmark hand-over, the same OpenMetrics endpoint.
Progress and the session's notices go to stderr (the journal, under systemd). SIGTERM, SIGINT and
SIGHUP stop it cleanly: a daemon it launched is stopped, an attached one is left alone.

A recorder runs for weeks. ``--keep AGE`` removes sessions older than AGE, and an attached daemon's
recording goes on in a new session every day (every AGE/2 when that is shorter;
:meth:`LiveController.roll_over`), so its disk use is about AGE of sessions, not one session that
grows for ever; its memory is the model's, bounded whatever the length (model.py). A launched
daemon writes its log into its session, which cannot move: such a session grows with the run.

Exit status: 0 stopped by a signal, 1 the start failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path

from .. import events as ev
from ..controller import ControllerError
from ..live import AttachTarget, LiveController, LiveOptions
from ..retention import AgeError, parse_age, prune_sessions
from ..supervisor import choose_program
from ..units import format_duration
from .tui import UsageError, memory_limit_of, metrics_address, parse_run_bench

# A recorder runs for weeks: expired sessions are removed at start and then hourly.
PRUNE_INTERVAL_S = 3600.0
# An attached recorder with --keep goes on in a new session this often at most (see the module docstring).
ROLL_OVER_MAX_S = 86400.0


def roll_over_every(options: LiveOptions, keep_s: float | None) -> float | None:
    """Seconds between two sessions of a recording (None: one session): with ``--keep`` an attached daemon's
    recording rolls over every day, or every half of --keep when that is less, so sessions expire a piece at
    a time; a session named with ``--session`` is the operator's (never pruned, never left)."""
    if keep_s is None or options.attach is None or options.session_dir is not None:
        return None
    return min(ROLL_OVER_MAX_S, keep_s / 2)


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def record_options(args: argparse.Namespace) -> LiveOptions:
    metrics = metrics_address(args.metrics)
    session = Path(args.session) if args.session else None
    if args.attach:
        if args.engine or args.daemon or args.run_bench or args.profile is not None or args.memory_limit:
            raise UsageError("--attach watches a running daemon: --engine, --daemon, --profile, "
                             "--memory-limit and --run-bench launch one")  # fmt: skip
        if args.log and args.journal:
            raise UsageError("--log and --journal both name the daemon's log: give one")
        return LiveOptions(
            program=None,
            config_file=Path(args.config) if args.config else None,
            session_dir=session,
            attach=AttachTarget(args.attach, args.status_url, args.log, args.journal, args.pid),
            metrics_address=metrics,
        )
    program = choose_program(engine=args.engine, daemon_path=args.daemon)
    if args.profile is not None and program.mode != "engine":
        raise UsageError("--profile emulates a machine on the engine; use --memory-limit for a daemon")
    return LiveOptions(
        program=program,
        config_file=Path(args.config) if args.config else None,
        session_dir=session,
        memory_limit=memory_limit_of(args),
        profile_gib=args.profile,
        run_bench=parse_run_bench(args.run_bench) if args.run_bench else None,
        metrics_address=metrics,
    )


class _NoticePrinter:
    """Prints the session's notices once each (the model keeps a bounded deque of them)."""

    def __init__(self) -> None:
        self._last: ev.Notice | None = None

    def print_new(self, notices: list[ev.Notice]) -> None:
        start = 0
        for i in range(len(notices) - 1, -1, -1):
            if notices[i] is self._last:
                start = i + 1
                break
        for notice in notices[start:]:
            _say(f"{notice.level}: {notice.text}")
        if notices:
            self._last = notices[-1]


async def record(options: LiveOptions, keep_s: float | None) -> int:
    controller = LiveController(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(number, stop.set)
    launched = options.program is not None
    try:
        await controller.start()
    except ControllerError as error:
        print(f"cuzk-tui record: {error}", file=sys.stderr)
        await controller.shutdown(stop_daemon=launched)
        return 1
    session = controller.session
    assert session is not None
    _say(f"recording {controller.identity.title} into {session.path}")
    if options.metrics_address is not None:
        host, port = options.metrics_address
        _say(f"metrics on http://{f'[{host}]' if ':' in host else host}:{port}/metrics")
    printer = _NoticePrinter()
    next_prune = 0.0
    roll_s = roll_over_every(options, keep_s)
    next_roll = None if roll_s is None else time.monotonic() + roll_s
    if roll_s is not None:
        _say(f"a new session every {format_duration(roll_s)}, so that sessions older than --keep can go")
    try:
        while not stop.is_set():
            await controller.poll()
            printer.print_new(list(controller.model.notices))
            if roll_s is not None and next_roll is not None and time.monotonic() >= next_roll:
                next_roll = time.monotonic() + roll_s
                previous = session.path
                try:
                    await controller.roll_over()
                except OSError as error:
                    _say(f"no new session ({error}): recording on in {previous}")
                assert controller.session is not None
                session = controller.session
                if session.path != previous:
                    _say(f"session {previous} recorded; recording on in {session.path}")
            if keep_s is not None and time.monotonic() >= next_prune:
                next_prune = time.monotonic() + PRUNE_INTERVAL_S
                for path in await asyncio.to_thread(prune_sessions, None, keep_s, time.time(), [session.path]):
                    _say(f"removed session {path} (older than --keep)")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), options.sample_interval)
        _say("stopping")
        await controller.poll()
    finally:
        await controller.shutdown(stop_daemon=launched)
    _say(f"session recorded in {session.path}")
    return 0


def run_record(args: argparse.Namespace) -> int:
    try:
        options = record_options(args)
        keep_s = parse_age(args.keep) if args.keep else None
    except (UsageError, AgeError) as error:
        print(f"cuzk-tui record: {error}", file=sys.stderr)
        return 2
    return asyncio.run(record(options, keep_s))
