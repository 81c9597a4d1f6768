"""``cuzk-tui`` (live), ``cuzk-tui attach`` and ``cuzk-tui replay``: build a controller, run the app."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from ..collector import QuietCollections
from ..controller import BenchRequest, Controller, ControllerError
from ..daemon_facts import CLI_KINDS
from ..live import AttachTarget, LiveController, LiveOptions, find_detached_session
from ..metrics import MetricsAddressError, exposure_warning, parse_metrics_address
from ..replay import ReplayController
from ..supervisor import choose_program
from ..units import UnitError, parse_size
from .progress import ProgressLine


class UsageError(ValueError):
    pass


def parse_run_bench(text: str) -> BenchRequest:
    """``KIND:COUNT:CONCURRENCY`` (e.g. ``porep:3:2``) as a benchmark request."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in CLI_KINDS or not all(p.isdigit() and int(p) > 0 for p in parts[1:]):
        raise UsageError(
            f"--run-bench {text!r}: expected KIND:COUNT:CONCURRENCY with KIND one of {', '.join(CLI_KINDS)} "
            "and positive whole numbers, e.g. porep:3:2"
        )
    return BenchRequest(parts[0], int(parts[1]), int(parts[2]))


def memory_limit_of(args: argparse.Namespace) -> int | None:
    if not getattr(args, "memory_limit", None):
        return None
    try:
        return parse_size(args.memory_limit, knob=False)
    except UnitError as error:
        raise UsageError(f"--memory-limit: {error}") from error


def metrics_address(text: str | None) -> tuple[str, int] | None:
    """``--metrics ADDR`` checked, with a warning on stderr when it listens beyond loopback."""
    if not text:
        return None
    try:
        host, port = parse_metrics_address(text)
    except MetricsAddressError as error:
        raise UsageError(str(error)) from None
    warning = exposure_warning(host)
    if warning:
        print(f"cuzk-tui: warning: {warning}", file=sys.stderr, flush=True)
    return host, port


def invoked_as(argv0: str, executable: str, search_path: str | None = None) -> tuple[str, ...]:
    """This program as another shell runs it again, for the commands it prints (the attach line).

    ``argv0`` as it was run: its bare name when ``search_path`` (PATH by default) finds this same file under
    it, else its absolute path (the README's install leaves it at ``.venv/bin/cuzk-tui``, where PATH does
    not look). A module run (``python -m cuzktui.cli``, argv0 the module's file) is that again with this
    interpreter. Symbolic links are kept: a venv's ``bin/python`` is a link, and the venv is in its path.
    """
    if argv0.endswith(".py"):
        return (*invoked_as(executable, executable, search_path), "-m", "cuzktui.cli")
    if not argv0 or not os.path.exists(argv0):
        return ("cuzk-tui",)
    name = os.path.basename(argv0)
    found = shutil.which(name, path=search_path)
    if found is not None and os.path.samefile(found, argv0):
        return (name,)
    return (os.path.abspath(argv0),)


def _run(controller: Controller, args: argparse.Namespace) -> int:
    from ..ui.app import CuzkApp

    def hung_up(signum: int, _frame: object) -> None:
        # The terminal is gone (an SSH drop): Textual's writes to it fail and its exit blocks on them, so
        # the app is not asked to exit. A Python handler runs even while the loop is blocked: the
        # controller records what keeps running (the attach line continues the session), then we end.
        controller.hung_up()
        os._exit(128 + signum)

    signal.signal(signal.SIGHUP, hung_up)
    collections = QuietCollections()
    command = invoked_as(sys.argv[0], sys.executable)
    app = CuzkApp(controller, ascii_only=bool(args.ascii), theme=args.theme, collections=collections, command=command)
    try:
        app.run(mouse=not args.no_mouse)
    finally:
        collections.close()
    # Printed here, on the terminal the operator returns to, unwrapped: the attach line must paste whole.
    farewell = controller.farewell()
    if farewell:
        print(farewell, flush=True)
    return int(app.return_code or 0)


def _usage_error(error: UsageError) -> int:
    print(f"cuzk-tui: {error}", file=sys.stderr)
    return 2


def tui_options(args: argparse.Namespace) -> LiveOptions:
    """``cuzk-tui`` (live) arguments as live options."""
    run_bench = parse_run_bench(args.run_bench) if args.run_bench else None
    limit = memory_limit_of(args)
    metrics = metrics_address(args.metrics)
    program = choose_program(engine=args.engine, daemon_path=args.daemon)
    if args.profile is not None and program.mode != "engine":
        raise UsageError("--profile emulates a machine on the engine; use --memory-limit for a daemon")
    return LiveOptions(
        program=program,
        config_file=Path(args.config) if args.config else None,
        session_dir=Path(args.session) if args.session else None,
        memory_limit=limit,
        profile_gib=args.profile,
        run_bench=run_bench,
        metrics_address=metrics,
        command=invoked_as(sys.argv[0], sys.executable),
    )


def run_tui(args: argparse.Namespace) -> int:
    try:
        options = tui_options(args)
    except UsageError as error:
        return _usage_error(error)
    return _run(LiveController(options), args)


def attach_options(args: argparse.Namespace) -> LiveOptions:
    """``cuzk-tui attach`` arguments as live options; without ``--session`` a session left running on the
    same address with its benchmark still going is continued (its progress then shows on the Bench screen)."""
    if args.log and args.journal:
        raise UsageError("--log and --journal both name the daemon's log: give one")
    session = Path(args.session) if args.session else find_detached_session(args.address)
    return LiveOptions(
        program=None,
        config_file=Path(args.config) if args.config else None,
        session_dir=session,
        attach=AttachTarget(args.address, args.status_url, args.log, args.journal, args.pid),
        metrics_address=metrics_address(args.metrics),
        command=invoked_as(sys.argv[0], sys.executable),
    )


def run_attach(args: argparse.Namespace) -> int:
    try:
        options = attach_options(args)
    except UsageError as error:
        return _usage_error(error)
    return _run(LiveController(options), args)


def run_replay(args: argparse.Namespace) -> int:
    try:
        controller = ReplayController(Path(args.source), cache=not args.no_cache)
        # A week of log takes seconds to read: say how far it is (on a terminal only), then erase it.
        with ProgressLine("reading ") as progress:
            controller.load(progress if sys.stderr.isatty() else None)
    except ControllerError as error:
        print(f"cuzk-tui replay: {error}", file=sys.stderr)
        return 1
    controller.speed = args.speed
    return _run(controller, args)
