"""``cuzk-tui tune``: the knob search of cuzktui.tune from the command line.

Progress on stderr, the trial table (or ``--json``) on stdout. Exit status: 0 a best config was
found (and written with ``--out``), 1 no trial completed without an OOM kill, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..config import ConfigDocument, ConfigError, build_config, load_config_or_default, save_atomic
from ..daemon_config import read_config
from ..live import profile_memory_limit, with_profile
from ..session import sessions_root
from ..supervisor import choose_program
from ..tune import (
    STATE_FILE,
    BenchTrialRunner,
    Search,
    Trial,
    best_config,
    config_errors,
    format_table,
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
    """What a resumed search must run with: the options that decide its trials."""
    names = ("kind", "count", "concurrency", "engine", "daemon", "input", "config", "profile", "memory_limit")
    return {name: getattr(args, name) for name in names}


def run_tune(args: argparse.Namespace) -> int:
    try:
        return _tune(args)
    except TuneUsageError as error:
        print(f"cuzk-tui tune: {error}", file=sys.stderr)
        return 2


def _tune(args: argparse.Namespace) -> int:
    resume = Path(args.resume) if args.resume else None
    loaded: Search | None = None
    if resume is not None and (resume / STATE_FILE).is_file():
        loaded, saved = load_state(resume)
        for name, value in saved.items():  # the search continues as it started
            setattr(args, name, value)
    if args.count < 1 or args.concurrency < 1 or args.trials < 1:
        raise TuneUsageError("--count, --concurrency and --trials must be at least 1")
    deadline = time.monotonic() + parse_time_budget(args.time_budget)
    program = choose_program(engine=args.engine, daemon_path=args.daemon)
    engine = program.mode == "engine"
    if args.profile is not None and not engine:
        raise TuneUsageError("--profile emulates a machine on the engine; use --memory-limit for a daemon")
    if not engine and not args.input:
        which = "a C1 output JSON" if args.kind == "porep" else "a vanilla proof file"
        raise TuneUsageError(f"--input is required with the real daemon ({which} for {args.kind})")
    if args.input and not Path(args.input).is_file():
        raise TuneUsageError(f"--input {args.input}: no such file")
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
            limit = parse_size(args.memory_limit)
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
    daemon_args = ("--engine",) if engine else ("--daemon", program.argv[0])
    inputs = ("--input", str(Path(args.input).resolve())) if args.input else ()
    runner = BenchTrialRunner(directory, args.kind, args.count, (*daemon_args, *inputs), limit, scale)
    config_for = trial_configs(search, start_text)
    run_search(search, runner, config_for, max_trials=args.trials, deadline=deadline, on_trial=on_trial)
    save_state(search, directory, saved_args)
    return _result(args, search, base, directory, time_basis(engine))


def _result(args: argparse.Namespace, search: Search, base: ConfigDocument, directory: Path, basis: str) -> int:
    best = search.best()
    start_trial = search.trials[0] if search.trials else None
    out_errors: list[str] = []
    if best is not None and args.out:
        doc = best_config(base, best.knobs)
        save_atomic(doc, args.out)
        out_errors = config_errors(doc)
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
                        {**t.to_json(), "margin": t.margin, "price_per_proof": t.price_per_proof(args.price_per_hour)}
                        for t in search.trials
                    ],
                    "best": None if best is None else best.index,
                    "best_margin": None if best is None else best.margin,
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
        if best is None:
            print("no trial completed every proof without an OOM kill")
        else:
            margin = "-" if best.margin is None else f"{best.margin:.2f}"
            gain = ""
            if start_trial is not None and start_trial.proofs_per_hour > 0:
                gain = f", {best.proofs_per_hour / start_trial.proofs_per_hour:.2f}× the starting config"
            print(
                f"best: trial {best.index}, {best.proofs_per_hour:.1f} proofs/hour{gain}; margin (peak RSS / "
                f"limit) {margin}; changes: {', '.join(best.changes) or 'none'}"
            )
            if args.out:
                check = "passes config check" if not out_errors else "config check: " + "; ".join(out_errors)
                print(f"wrote {args.out} ({check}); run the benchmark at concurrency {best.knobs.concurrency}")
        print(f"search state: {directory} (continue with --resume {directory})")
    return 0 if best is not None and not out_errors else 1
