"""``cuzk-tui memcheck`` and ``cuzk-tui memprobe``: what memory this machine really gives the daemon."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..planner import memcheck_for
from ..system import memprobe
from .progress import ProgressLine


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
    # 30-60 s on a large box: how far it is, on a terminal only (a pipe gets the result alone), then erased.
    try:
        with ProgressLine("memprobe: ") as progress:
            result = memprobe(on_progress=progress if sys.stderr.isatty() else None)
    except (OSError, ValueError) as exc:
        print(f"memprobe: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    for label, value in result.rows():
        print(f"{label:<12} " + value.replace("\n", "\n" + " " * 13))
    return 0
