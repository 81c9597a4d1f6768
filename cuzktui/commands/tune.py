"""``cuzk-tui tune``: the knob search of cuzktui.tune from the command line.

Progress on stderr, the trial table (or ``--json``) on stdout. Exit status: 0 a config beat the
starting one beyond the noise (and was written with ``--out``), 1 none did (or none completed without an
OOM kill), 2 bad usage: an option, an input the benchmark cannot be given, or a trial that failed for a
reason no knob changes (the input, a parameter file, the proof type, the daemon's build).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..bench import BenchUsageError, checked_requests, input_warning
from ..cli import REQUEST_INPUT_OPTIONS, build_parser, input_flag
from ..config import ConfigDocument, ConfigError, build_config, load_config_or_default, save_atomic
from ..daemon_config import read_config
from ..live import profile_memory_limit, with_profile
from ..session import sessions_root
from ..supervisor import choose_program
from ..tune import (
    STATE_FILE,
    BenchTrialRunner,
    Search,
    SearchBlocked,
    Trial,
    best_config,
    config_errors,
    format_table,
    left_alone,
    load_state,
    new_search,
    run_search,
    save_state,
    tier_line,
    time_basis,
    trial_configs,
    trial_line,
)
from ..units import UnitError, format_size, parse_duration, parse_size
from .bench import request_params


class TuneUsageError(ValueError):
    """Bad usage (exit status 2)."""


def parse_time_budget(text: str) -> int:
    """Seconds of ``2h``, ``90m``, ``30s`` or a bare number of seconds."""
    try:
        return parse_duration(text, hours=True)
    except UnitError as error:
        raise TuneUsageError(f"--time-budget: {error}") from None


def _progress(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _arguments(args: argparse.Namespace) -> dict[str, Any]:
    """What a resumed search must run with: the options that decide its trials (the request's as the
    flags that give them: ``request``, read back by :func:`_restore`)."""
    names = ("kind", "count", "concurrency", "engine", "daemon", "input", "config", "profile", "memory_limit")
    return {**{name: getattr(args, name) for name in names}, "request": request_params(args).flags()}


def _restore(args: argparse.Namespace, saved: dict[str, Any]) -> None:
    """The saved options onto ``args``: the search continues as it started."""
    request = build_parser().parse_args(["tune", *saved.pop("request", [])])
    for name in REQUEST_INPUT_OPTIONS:
        setattr(args, name, getattr(request, name))
    for name, value in saved.items():
        setattr(args, name, value)


def run_tune(args: argparse.Namespace) -> int:
    try:
        return _tune(args)
    except (TuneUsageError, BenchUsageError) as error:
        print(f"cuzk-tui tune: {error}", file=sys.stderr)
        return 2


def _tune(args: argparse.Namespace) -> int:
    resume = Path(args.resume) if args.resume else None
    loaded: Search | None = None
    if resume is not None and (resume / STATE_FILE).is_file():
        loaded, saved = load_state(resume)
        _restore(args, saved)
    if args.count < 1 or args.concurrency < 1 or args.trials < 1:
        raise TuneUsageError("--count, --concurrency and --trials must be at least 1")
    deadline = time.monotonic() + parse_time_budget(args.time_budget)
    program = choose_program(engine=args.engine, daemon_path=args.daemon)
    engine = program.mode == "engine"
    if args.profile is not None and not engine:
        raise TuneUsageError("--profile emulates a machine on the engine; use --memory-limit for a daemon")
    # Every trial's benchmark proves these requests: inputs it could never be given end the search
    # before it starts, as they would end bench (the same checks, the same files beside --input).
    params = request_params(args)
    typed = Path(args.input) if args.input else None
    checked = checked_requests(
        args.kind, 1, real_daemon=not engine, input_path=typed, params=params, bench_id="tune-check",
        flag=input_flag(args),
    )  # fmt: skip
    input_path = typed.resolve() if typed is not None else None  # the trials run in their own directories
    warning = input_warning(checked)
    if warning is not None:
        _progress(f"warning: {warning}")
    try:
        base = load_config_or_default(args.config) if args.config else ConfigDocument.parse(build_config({}))
    except (ConfigError, ValueError) as error:
        raise TuneUsageError(str(error)) from None
    if args.config and not Path(args.config).exists():
        save_atomic(base.text(), args.config)  # as --help says, and as bench does: the starting file on disk
    start_text = base.text()
    if args.profile is not None:
        start_text = with_profile(start_text, args.profile)
    scale = read_config(start_text).engine.memory_scale if engine else 1.0
    limit: int | None = None
    if args.memory_limit:
        try:
            limit = parse_size(args.memory_limit, knob=False)
        except UnitError as error:
            raise TuneUsageError(f"--memory-limit: {error}") from None
    elif args.profile is not None:
        limit = profile_memory_limit(args.profile, scale)
    search, report = new_search(start_text, args.kind, args.count, args.concurrency, engine=engine, memory_limit=limit)
    directory = resume or sessions_root() / f"tune-{time.strftime('%Y%m%d-%H%M%S')}-{args.kind}"
    directory.mkdir(parents=True, exist_ok=True)
    search = loaded or search
    if loaded is not None:
        _progress(f"resuming {directory}: {len(loaded.trials)} trials on record")
    saved_args = _arguments(args)

    def on_trial(trial: Trial) -> None:
        save_state(search, directory, saved_args)
        _progress(trial_line(trial, search.box.limit_bytes))

    _progress(
        f"tuning {args.count} × {args.kind} on {report.machine}, limit {format_size(search.box.limit_bytes)}; "
        f"trials in {directory}"
    )
    alone = left_alone(search)
    if alone is not None:
        _progress(alone)
    daemon_args = ("--engine",) if engine else ("--daemon", program.argv[0])
    inputs = ("--input", str(input_path)) if input_path is not None else ()
    runner = BenchTrialRunner(directory, args.kind, args.count, (*daemon_args, *inputs, *params.flags()), limit, scale)
    config_for = trial_configs(search, start_text)
    try:
        run_search(search, runner, config_for, max_trials=args.trials, deadline=deadline, on_trial=on_trial)
    except SearchBlocked as blocked:
        raise TuneUsageError(str(blocked)) from None
    finally:
        save_state(search, directory, saved_args)
    return _result(args, search, base, directory, time_basis(engine))


def _result(args: argparse.Namespace, search: Search, base: ConfigDocument, directory: Path, basis: str) -> int:
    verdict = search.verdict()
    better = verdict.better
    out_errors: list[str] = []
    if better is not None and args.out:
        doc = best_config(base, better.knobs, search.inert)
        save_atomic(doc, args.out)
        out_errors = config_errors(doc)
    shares = [] if better is None else [t.peak_share for t in better.runs if t.peak_share is not None]
    peak_share = max(shares, default=None)
    trials_run = sum(1 for t in search.trials if t.ran)
    if args.json:
        print(
            json.dumps(
                {
                    "directory": str(directory),
                    "time_basis": basis,
                    "limit_bytes": search.box.limit_bytes,
                    "trials_run": trials_run,
                    "trials": [
                        {
                            **t.to_json(),
                            "peak_share": t.peak_share,
                            "spread": t.spread,
                            "price_per_proof": t.price_per_proof(args.price_per_hour),
                        }
                        for t in search.trials
                    ],
                    "best": None if better is None else better.runs[0].index,
                    "best_runs": None if better is None else [t.index for t in better.runs],
                    "best_peak_share": peak_share,
                    "verdict": verdict.text,
                    "left_alone": search.inert,
                    "out": args.out,
                    "out_errors": out_errors,
                    "documented_tier": tier_line(search.box.limit_bytes, search.kind),
                }
            )
        )
    else:
        print(format_table(search.trials, args.price_per_hour, time_basis=basis))
        print(f"trials run: {trials_run} (skipped on the model's word: {len(search.trials) - trials_run})")
        tier = tier_line(search.box.limit_bytes, search.kind)
        if tier is not None:
            print(tier)
        alone = left_alone(search)
        if alone is not None:
            print(alone)
        if better is None:
            print(verdict.text)
            if args.out:
                print(f"{args.out} not written: the starting config stays")
        else:
            start = verdict.start
            gain = "" if start is None or start.rate <= 0 else f", {better.rate / start.rate:.2f}× the starting config"
            shown = "-" if peak_share is None else f"{peak_share:.0%}"
            print(
                f"best: trial {better.runs[0].index}, {better.rate:.1f} proofs/hour{gain}; peak RSS {shown} of the "
                f"limit; changes: {', '.join(better.runs[0].changes) or 'none'}"
            )
            print(verdict.text)
            if args.out:
                check = "passes config check" if not out_errors else "config check: " + "; ".join(out_errors)
                print(f"wrote {args.out} ({check}); run the benchmark at concurrency {better.knobs.concurrency}")
        print(f"search state: {directory} (continue with --resume {directory})")
    return 0 if better is not None and not out_errors else 1
