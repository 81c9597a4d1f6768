"""``cuzk-tui bench --headless``: a benchmark in the foreground, progress on stderr, summary on stdout.

Exit status, as ``--help`` says (cuzktui/cli.py BENCH_EXIT_CODES): 0 every proof completed, 1 the
run failed, 2 bad usage (an ``--input`` that cannot be read included). cuzk-bench differs: it exits
0 even when every proof came back FAILED, and 1 only when an RPC failed, printing no summary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import events as ev
from .. import knob_rules, knobs
from ..bench import (
    ERROR_PREFIX,
    BenchRunner,
    BenchSummary,
    BenchUsageError,
    checked_requests,
    format_summary,
    input_warning,
    install_cancel_signals,
    set_config_value,
    with_engine_status,
)
from ..cli import input_flag
from ..config import ConfigError, build_config, load_config_or_default, save_atomic
from ..controller import BenchRequest
from ..daemon_config import read_config
from ..knobs import TomlValue
from ..planner import gather_report
from ..proofinputs import DEFAULT_MINER, RequestParams
from ..proto import proving_pb2 as pb
from ..recording import DaemonRecorder
from ..session import SessionWriter
from ..supervisor import (
    BENCHMARK_OVER,
    DaemonProgram,
    DaemonStartError,
    Supervisor,
    SupervisorError,
    choose_program,
    private_listen_address,
)
from ..units import UnitError, parse_size


@dataclass(frozen=True, slots=True)
class _Plan:
    program: DaemonProgram
    options: BenchRequest
    config_text: str
    memory_limit: int | None
    bench_id: str
    requests: list[pb.SubmitProofRequest]


def _progress(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def parse_override(text: str) -> tuple[str, TomlValue]:
    """("section.key", value) of one ``--set SECTION.KEY=VALUE``, checked against the knob schema."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    section, dot, key = name.partition(".")
    if not sep or not dot or not section or not key:
        raise BenchUsageError(f"--set {text!r}: expected SECTION.KEY=VALUE")
    try:
        knob = knobs.knob(name)
        value = knob_rules.parse_cli_value(knob, raw)
    except KeyError as error:
        raise BenchUsageError(f"--set {text!r}: {error.args[0]}") from None
    except knobs.KnobValueError as error:
        raise BenchUsageError(f"--set {text!r}: {error}") from None
    errors = [p for p in knob_rules.validate_value(knob, value) if p.severity is knobs.Severity.ERROR]
    if errors:
        raise BenchUsageError(f"--set {text!r}: {errors[0]}")
    return name, value


def request_params(args: argparse.Namespace) -> RequestParams:
    """cuzk-bench batch's request flags (BenchUsageError on a bad value)."""
    size = 0
    if args.synthetic_size:
        try:
            size = parse_size(args.synthetic_size, knob=False)
        except UnitError as error:
            raise BenchUsageError(f"--synthetic-size: {error}") from None
    if args.randomness is not None and len(args.randomness) != 32:
        # cuzk-bench's parse_randomness_hex wording.
        raise BenchUsageError(f"randomness must be exactly 32 bytes, got {len(args.randomness)}")
    return RequestParams(
        miner_id=DEFAULT_MINER if args.miner_id is None else args.miner_id,
        sector_num=args.sector_num,
        registered_proof=args.registered_proof,
        randomness=args.randomness,
        comm_r_old=args.comm_r_old,
        comm_r_new=args.comm_r_new,
        comm_d_new=args.comm_d_new,
        synthetic_size=size,
    )


def _plan(args: argparse.Namespace) -> _Plan:
    """Everything the run needs, checked before anything is created (BenchUsageError → exit 2)."""
    if args.count < 1 or args.concurrency < 1 or args.oom_retries < 0:
        raise BenchUsageError("--count and --concurrency must be at least 1, --oom-retries at least 0")
    program = choose_program(engine=args.engine, daemon_path=args.daemon)
    memory_limit = None
    if args.memory_limit:
        try:
            memory_limit = parse_size(args.memory_limit, knob=False)
        except UnitError as error:
            raise BenchUsageError(f"--memory-limit: {error}") from None
        if memory_limit <= 0:
            raise BenchUsageError("--memory-limit must be positive")
    overrides = dict(parse_override(text) for text in args.overrides)
    try:
        if args.config:
            document = load_config_or_default(args.config)
            document.update(overrides)
            config_text = document.text()
        else:
            config_text = build_config(overrides)
    except (ConfigError, ValueError) as error:
        raise BenchUsageError(str(error)) from None
    options = BenchRequest(
        kind=args.kind,
        count=args.count,
        concurrency=args.concurrency,
        input_path=args.input or None,
        oom_retries=args.oom_retries,
        params=request_params(args),
    )
    bench_id = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    # Built here, before any session exists: an --input that is not the kind's input is bad usage
    # (one line, exit 2), never a traceback from inside the run.
    requests = checked_requests(
        options.kind, options.count, real_daemon=program.mode == "real",
        input_path=Path(args.input) if args.input else None, params=options.params, bench_id=bench_id,
        flag=input_flag(args),
    )  # fmt: skip
    return _Plan(program, options, config_text, memory_limit, bench_id, requests)


async def _run(plan: _Plan, session: SessionWriter) -> BenchSummary | str:
    o = plan.options
    warning = input_warning(plan.requests)
    if warning is not None:
        _progress(f"warning: {warning}")
    supervisor = Supervisor(session, plan.program, memory_limit=plan.memory_limit, on_progress=_progress)
    runner = BenchRunner(
        supervisor, plan.options, plan.config_text, requests=plan.requests, bench_id=plan.bench_id,
        on_progress=_progress,
    )  # fmt: skip
    # Signals cancel from the very start: a runner killed while its daemon starts would leave
    # that daemon (in its own process session) running with nobody to stop it.
    install_cancel_signals(runner)

    def record(event: ev.ObservedEvent) -> None:
        runner.observe(event)  # the samples are the evidence an OOM kill's verdict weighs
        session.append_event(event)

    recorder = DaemonRecorder(supervisor, record)
    recorder.start()
    try:
        _progress(f"starting {' '.join(plan.program.argv)} ({plan.program.mode})")
        start = asyncio.ensure_future(supervisor.start(plan.config_text))
        cancelled = asyncio.ensure_future(runner.wait_cancelled())
        await asyncio.wait({start, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        cancelled.cancel()
        if not start.done():
            start.cancel()
            await asyncio.gather(start, return_exceptions=True)
            message = "benchmark cancelled before the daemon was ready"
            session.append_event(ev.Notice(time.time(), "warning", message))
            return message
        start.result()
        _progress(f"daemon ready (pid {supervisor.pid}); {o.count} × {o.kind} at concurrency {o.concurrency}")
        await recorder.sample_now()
        summary = await runner.run()
        await recorder.sample_now()  # the state at the end, before the daemon is stopped
        return summary
    except (DaemonStartError, SupervisorError) as error:
        return str(error)
    finally:
        await recorder.stop()
        if supervisor.cgroup is not None:
            # Before close removes the group: the run's true peak (cuzk-tui tune weighs it against the limit).
            with contextlib.suppress(OSError):
                session.write_meta({"cgroup_peak_bytes": supervisor.cgroup.peak_bytes()})
        await supervisor.close(stop=True, handover=BENCHMARK_OVER)


def run_bench(args: argparse.Namespace) -> int:
    if not args.headless:
        print(
            f"{ERROR_PREFIX}use --headless here; the TUI's Bench screen runs benchmarks interactively", file=sys.stderr
        )
        return 2
    try:
        plan = _plan(args)
    except BenchUsageError as error:
        print(f"{ERROR_PREFIX}{error}", file=sys.stderr)
        return 2
    if args.config and not Path(args.config).exists():
        save_atomic(plan.config_text, args.config)
    session = SessionWriter.create(label=f"bench-{args.kind}", directory=args.session, mode=plan.program.mode)
    if read_config(plan.config_text).listen_address is None:
        listen = private_listen_address(session.path)
        plan = dataclasses.replace(plan, config_text=set_config_value(plan.config_text, "daemon", "listen", listen))
    plan = dataclasses.replace(plan, config_text=with_engine_status(plan.config_text, plan.program.mode))
    meta: dict[str, object] = {"mode": plan.program.mode, "bench_argv": sys.argv, "bench_pid": os.getpid()}
    if "memcheck" not in session.read_meta():
        # The machine the figures came from (host RAM, cgroup, GPUs) belongs with them.
        with contextlib.suppress(OSError, ValueError):
            meta["memcheck"] = gather_report().to_json()
    session.write_meta(meta)
    try:
        outcome = asyncio.run(_run(plan, session))
    finally:
        session.close()
    if isinstance(outcome, str):
        print(f"{ERROR_PREFIX}{outcome}", file=sys.stderr)
        if args.json:
            print(
                json.dumps(
                    {
                        "completed": 0,
                        "failed": plan.options.count,
                        "proofs_per_hour": 0.0,
                        "restarts": [],
                        "session": str(session.path),
                        "error": outcome,
                    }
                )
            )
        return 1
    print(json.dumps(outcome.to_json()) if args.json else format_summary(outcome))
    if outcome.error:
        print(f"{ERROR_PREFIX}{outcome.error}", file=sys.stderr)
    return 0 if outcome.outcome == "completed" else 1
