"""``cuzk-tui memcheck`` and ``cuzk-tui memprobe``: what memory this machine really gives the daemon."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..planner import memcheck_for
from ..system import memprobe
from ..units import format_size


def run_memcheck(args: argparse.Namespace) -> int:
    config: dict[str, Any] = {}
    if getattr(args, "config", None):
        # Imported here: without --config memcheck needs no TOML writer (tomlkit), so it runs on a
        # GPU box's bare python3 with the repository on PYTHONPATH (tests/test_gpu_multi.py).
        from ..config import ConfigError, load_config

        try:
            config = load_config(args.config).effective()
        except ConfigError as exc:
            print(f"memcheck: {exc}", file=sys.stderr)
            return 1
    try:
        report = memcheck_for(config, engine=False)
    except (OSError, ValueError, KeyError) as exc:
        print(f"memcheck: cannot read this machine's memory facts: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report.to_json()) if args.json else report.render())
    return 0


def run_memprobe(args: argparse.Namespace) -> int:
    if not args.json:
        print("memprobe: allocating 1 GiB chunks in a child process…", file=sys.stderr, flush=True)
    try:
        result = memprobe()
    except (OSError, ValueError) as exc:
        print(f"memprobe: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    outcome = (
        "reached the target"
        if result.reached_target
        else "was OOM-killed"
        if result.killed
        else f"stopped early (exit status {result.returncode})"
    )
    print(f"allocated    {format_size(result.allocated_bytes)} in {format_size(result.chunk_bytes)} chunks")
    print(f"target       {format_size(result.target_bytes)} ({result.limit_source}, less the safety distance)")
    print(f"outcome      the child {outcome} after {result.elapsed_s:.1f} s")
    if result.evidence:
        print("evidence     " + result.evidence.replace("\n", "\n             "))
    return 0
