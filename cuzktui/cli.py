"""The ``cuzk-tui`` command line: the TUI by default, and headless subcommands.

The argument surface is a contract (scripts and later checks use it), so it is declared here
in one place; each subcommand's work lives in ``cuzktui.commands.<name>`` and is imported only
when that subcommand runs, so ``cuzk-tui memcheck`` never loads Textual.

Exit codes: 0 success, 1 the run failed, 2 bad usage (argparse's own code for usage errors).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .daemon_facts import CLI_KINDS, CUZK_BENCH_KINDS


def cuzk_bench_kind(text: str) -> str:
    """A proof type as ``cuzk-bench -t`` takes it (cuzk-bench main.rs ``proof_kind_from_str``), or ours."""
    name = CUZK_BENCH_KINDS.get(text.lower())
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown proof type: {text}. Use: porep, snap, wpost, winning")
    return name


class _SpelledInput(argparse.Action):
    """``--input`` under whichever of its names was typed (``--c1``, ``--vanilla``), kept so an error
    about the file names the option as the user wrote it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.input_flag = option_string


def input_flag(args: argparse.Namespace) -> str:
    """The name ``--input`` was given under (``--input`` when it was not given at all)."""
    return getattr(args, "input_flag", None) or "--input"


def hex_bytes(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid hex: {text!r}") from None


# Beside cuzk-bench's, whose habits operators bring (cuzk-bench/src/main.rs: main returns the first
# "Prove RPC failed" error, so a dead daemon is exit 1 with no summary; FAILED proofs are exit 0).
BENCH_EXIT_CODES = (
    "exit status: 0 every proof completed; 1 the run failed (a proof FAILED or was lost, the daemon died and "
    "was not restarted, or the OOM retries ran out); 2 bad usage (an option, or an --input that cannot be "
    "read as the kind's input). cuzk-bench batch differs: exit 0 even when every proof FAILED, 1 only when an "
    "RPC fails (a dead daemon), and then no summary."
)


FLEET_EXIT_CODES = (
    "exit status: 0 done; 1 Prometheus could not be asked for its targets, or with --json a box did not "
    "answer (its state is unreachable); 2 bad usage (an option, or a hosts file that cannot be read)."
)


def _add_daemon_choice(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--engine", action="store_true", help="use the embedded cuzk-engine even if cuzk-daemon is installed"
    )
    which.add_argument("--daemon", metavar="PATH", help="path of a real cuzk-daemon binary")
    parser.add_argument("--config", metavar="FILE", help="daemon config TOML (written if missing)")


# The options a benchmark's requests are built from (commands/bench.py request_params): bench and tune
# take the same ones, each trial's benchmark being given tune's. The files beside --input are read by
# cuzktui/bench.py (post_randomness, snap_commitments): a "--flag HEX" line, or the one bare hex value.
REQUEST_INPUT_OPTIONS = (
    "input", "miner_id", "sector_num", "registered_proof", "randomness", "comm_r_old", "comm_r_new", "comm_d_new",
    "synthetic_size",
)  # fmt: skip


def _add_request_inputs(parser: argparse.ArgumentParser) -> None:
    """cuzk-bench batch's request flags (cuzk-bench main.rs Commands::Batch), defaults from the input."""
    parser.add_argument(
        "--input", "--c1", "--vanilla", action=_SpelledInput, metavar="FILE",
        help="C1 output JSON (porep: Curio's wrapper or a bare SealCommitPhase1Output object; only that shape is "
        "checked before sending, the daemon parses the rest) or vanilla proof file (needed by a real daemon)",
    )  # fmt: skip
    parser.add_argument("--miner-id", type=int, metavar="ID", help="the requests' miner id (default 1000)")
    parser.add_argument("--sector-num", type=int, metavar="N", help="sector number (default: the C1's SectorNum)")
    parser.add_argument(
        "--registered-proof", type=int, metavar="N", help="Go abi proof type (default: Curio's for 32 GiB)"
    )
    for name, what in (
        (
            "randomness",
            "PoSt randomness (default: post-randomness.txt beside --input, its value alone or "
            "a --randomness line; else zeros)",
        ),
        ("comm-r-old", "SnapDeals comm_r_old (default: snap-comms.txt beside --input)"),
        ("comm-r-new", "SnapDeals comm_r_new"),
        ("comm-d-new", "SnapDeals comm_d_new"),
    ):
        parser.add_argument(f"--{name}", type=hex_bytes, metavar="HEX", help=what)
    parser.add_argument(
        "--synthetic-size", metavar="SIZE", help="size of each generated C1 without --input (e.g. 60MB, a real one's)"
    )


def _add_metrics(parser: argparse.ArgumentParser, **kwargs: object) -> None:
    parser.add_argument(
        "--metrics",
        metavar="ADDR",
        help="serve OpenMetrics for Prometheus at HOST:PORT (or PORT: loopback), e.g. 127.0.0.1:9920",
        **kwargs,  # type: ignore[arg-type]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuzk-tui",
        description="Terminal cockpit for the cuzk proving daemon (or its embedded stand-in, cuzk-engine).",
    )
    _add_daemon_choice(parser)
    parser.add_argument(
        "--run-bench",
        metavar="KIND:COUNT:CONCURRENCY",
        help="start the daemon and this benchmark at once, e.g. porep:3:2",
    )
    parser.add_argument("--session", metavar="DIR", help="record into this session directory")
    parser.add_argument(
        "--profile",
        type=int,
        metavar="GIB",
        help="on the engine, emulate a box of this much RAM (128, 256, 512 …) inside a real memory cgroup",
    )
    parser.add_argument("--memory-limit", metavar="SIZE", help="run the daemon in a new memory cgroup of this size")
    _add_metrics(parser)
    parser.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    parser.add_argument("--ascii", action="store_true", help="draw without braille or box glyphs")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (see themes/; ansi-dark for 16 colours)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    attach = sub.add_parser("attach", help="watch a daemon that is already running")
    attach.add_argument("address", help="gRPC address: host:port or unix:///path")
    attach.add_argument("--status-url", metavar="URL", help="the daemon's HTTP status URL, if enabled")
    attach.add_argument("--log", metavar="FILE", help="the daemon's log file to follow")
    attach.add_argument("--journal", metavar="UNIT", help="follow the daemon's log in journald (journalctl -f -u UNIT)")
    attach.add_argument(
        "--pid", type=int, metavar="PID", help="the daemon's pid (default: the owner of the listening socket)"
    )
    # SUPPRESS: the top-level --config / --session (before "attach") must not be reset by these defaults.
    attach.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="the config file the daemon was started with (else the Knobs screen says the running config is unknown)",
    )
    attach.add_argument(
        "--session", metavar="DIR", default=argparse.SUPPRESS, help="record into (or continue) this session directory"
    )

    _add_metrics(attach, default=argparse.SUPPRESS)

    record = sub.add_parser("record", help="record a daemon without a terminal (systemd), optionally with metrics")
    _add_daemon_choice(record)
    record.add_argument("--profile", type=int, metavar="GIB", help="on the engine, emulate a box of this much RAM")
    record.add_argument("--memory-limit", metavar="SIZE", help="run the daemon in a new memory cgroup of this size")
    record.add_argument("--run-bench", metavar="KIND:COUNT:CONCURRENCY", help="start this benchmark once ready")
    record.add_argument("--attach", metavar="ADDRESS", help="record a running daemon (host:port or unix:///path)")
    record.add_argument("--status-url", metavar="URL", help="with --attach: the daemon's HTTP status URL")
    record.add_argument("--log", metavar="FILE", help="with --attach: the daemon's log file to follow")
    record.add_argument("--journal", metavar="UNIT", help="with --attach: follow the daemon's log in journald")
    record.add_argument("--pid", type=int, metavar="PID", help="with --attach: the daemon's pid")
    record.add_argument("--session", metavar="DIR", help="record into this session directory")
    record.add_argument(
        "--keep", metavar="AGE", help="delete recorded sessions older than AGE (7d, 12h) at start and hourly"
    )
    _add_metrics(record)

    fleet = sub.add_parser(
        "fleet",
        help="many boxes in one table (from Prometheus or the boxes' --metrics endpoints)",
        epilog=FLEET_EXIT_CODES,
    )
    fleet.add_argument("--prometheus", metavar="URL", help="a Prometheus server that scrapes the boxes' recorders")
    fleet.add_argument("--job", default="cuzk", help="the recorders' job name in Prometheus (default cuzk)")
    fleet.add_argument(
        "--hosts", metavar="FILE", help="TOML [[box]] tables: name, metrics or instance, price_per_hour, attach"
    )
    fleet.add_argument("--interval", type=float, default=5.0, metavar="S", help="seconds between polls (default 5)")
    fleet.add_argument("--timeout", type=float, default=3.0, metavar="S", help="per-box fetch timeout (default 3)")
    fleet.add_argument("--json", action="store_true", help="poll once and print the boxes as JSON")

    replay = sub.add_parser("replay", help="open a recorded session or a raw daemon log")
    replay.add_argument("source", help="a session directory or a daemon log file")
    replay.add_argument("--speed", type=float, default=10.0, help="playback speed factor (default 10)")
    replay.add_argument(
        "--no-cache",
        action="store_true",
        help="read the whole source, neither resuming from nor storing a model checkpoint (also CUZK_TUI_CACHE=off)",
    )

    memcheck = sub.add_parser("memcheck", help="report the memory this machine really gives the daemon")
    memcheck.add_argument("--json", action="store_true", help="print one JSON object")
    memcheck.add_argument("--config", metavar="FILE", help="also check this daemon config's listen addresses")
    memprobe = sub.add_parser("memprobe", help="allocate 1 GiB chunks in a child to measure usable memory")
    memprobe.add_argument("--json", action="store_true", help="print one JSON object")

    bench = sub.add_parser("bench", help="run a benchmark of N proofs at concurrency C", epilog=BENCH_EXIT_CODES)
    bench.add_argument("--headless", action="store_true", help="no TUI: progress on stderr, summary on stdout")
    _add_daemon_choice(bench)
    bench.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable)",
    )
    # cuzk-bench batch's spellings are accepted beside ours (cuzk-bench main.rs Commands::Batch).
    bench.add_argument("--kind", "-t", "--type", type=cuzk_bench_kind, choices=CLI_KINDS, default="porep")
    bench.add_argument("--count", "-c", type=int, default=3, metavar="N")
    bench.add_argument("--concurrency", "-j", type=int, default=1, metavar="C")
    _add_request_inputs(bench)
    bench.add_argument("--memory-limit", metavar="SIZE", help="run the daemon in a new memory cgroup of this size")
    bench.add_argument("--oom-retries", type=int, default=3, metavar="N")
    bench.add_argument("--session", metavar="DIR", help="record into this session directory")
    bench.add_argument("--json", action="store_true", help="print the summary as one JSON object")

    tune = sub.add_parser(
        "tune",
        help="search the knobs for the most proofs per hour that never OOM (a benchmark per trial)",
        epilog=(
            "exit status: 0 a config beat the starting one beyond the noise (and passes config check); 1 none did; "
            "2 bad usage: an option, an input bench would refuse, or a trial that failed for a reason no knob "
            "changes (the input, a parameter file, the proof type, the daemon's build)."
        ),
    )
    _add_daemon_choice(tune)
    tune.add_argument("--kind", "-t", "--type", type=cuzk_bench_kind, choices=CLI_KINDS, default="porep")
    tune.add_argument("--count", "-c", type=int, default=12, metavar="N", help="proofs per trial (default 12)")
    tune.add_argument(
        "--concurrency", "-j", type=int, default=6, metavar="C", help="starting benchmark concurrency (default 6)"
    )
    tune.add_argument("--profile", type=int, metavar="GIB", help="on the engine, emulate a box of this much RAM")
    _add_request_inputs(tune)  # each trial's benchmark is given these, and reads the files beside --input
    tune.add_argument("--memory-limit", metavar="SIZE", help="the trials' memory cgroup size (default: the profile's)")
    tune.add_argument("--trials", type=int, default=12, metavar="K", help="at most K benchmarks (default 12)")
    tune.add_argument("--time-budget", default="2h", metavar="DURATION", help="stop starting trials after this (2h)")
    tune.add_argument("--price-per-hour", type=float, metavar="X", help="the box's price per hour, for price per proof")
    tune.add_argument(
        "--out", metavar="FILE", help="write the best config here, if one beat the start (the file's comments kept)"
    )
    tune.add_argument("--json", action="store_true", help="print the trials and the best as one JSON object")
    tune.add_argument(
        "--resume", metavar="DIR", help="continue the search recorded in DIR (its tune.json), or start one there"
    )

    export = sub.add_parser("export", help="write a Chrome trace (Perfetto) of a session or a daemon log")
    export.add_argument("source", help="a session directory or a daemon log file")
    export.add_argument("-o", "--output", required=True, metavar="FILE")
    export.add_argument(
        "--no-cache",
        action="store_true",
        help="read the whole source, neither resuming from nor storing a model checkpoint (also CUZK_TUI_CACHE=off)",
    )

    report = sub.add_parser("report", help="post-mortem of a session or a daemon log: every job and why it ended")
    report.add_argument("source", help="a session directory or a daemon log file")
    report.add_argument("--json", action="store_true", help="print one JSON object")
    report.add_argument(
        "--no-cache",
        action="store_true",
        help="read the whole source, neither resuming from nor storing a model checkpoint (also CUZK_TUI_CACHE=off)",
    )

    sub.add_parser("sessions", help="list recorded sessions")

    config = sub.add_parser("config", help="check, show or change a daemon config file")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = config_sub.add_parser("check", help="validate every knob")
    check.add_argument("file")
    show = config_sub.add_parser("show", help="every knob with its value, default and status")
    show.add_argument("file")
    show.add_argument("--json", action="store_true")
    set_ = config_sub.add_parser("set", help="validate and save SECTION.KEY=VALUE changes atomically")
    set_.add_argument("file")
    set_.add_argument("assignments", nargs="+", metavar="SECTION.KEY=VALUE")
    return parser


# command -> (module under cuzktui.commands, function)
_HANDLERS = {
    None: ("tui", "run_tui"),
    "attach": ("tui", "run_attach"),
    "replay": ("tui", "run_replay"),
    "record": ("record", "run_record"),
    "fleet": ("fleet", "run_fleet"),
    "memcheck": ("memcheck", "run_memcheck"),
    "memprobe": ("memcheck", "run_memprobe"),
    "bench": ("bench", "run_bench"),
    "tune": ("tune", "run_tune"),
    "export": ("export", "run_export"),
    "report": ("report", "run_report"),
    "sessions": ("sessions", "run_sessions"),
    "config": ("config", "run_config"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module_name, func_name = _HANDLERS[args.command]
    module = importlib.import_module(f"cuzktui.commands.{module_name}")
    handler = getattr(module, func_name)
    try:
        code = handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
