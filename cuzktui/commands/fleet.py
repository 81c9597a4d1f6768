"""``cuzk-tui fleet``: many boxes in one table, from Prometheus or from the boxes' own endpoints.

Exit status: 0 done, 1 Prometheus could not be asked for its targets (or, with ``--json``, a box did
not answer), 2 bad usage (cuzktui/cli.py FLEET_EXIT_CODES).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..fleet import FleetError, FleetMonitor, Source, load_hosts, view_record
from ..fleet_sources import EndpointSource, PrometheusSource


def _monitor(args: argparse.Namespace) -> tuple[FleetMonitor, str]:
    boxes = load_hosts(Path(args.hosts)) if args.hosts else []
    source: Source
    if args.prometheus:
        prometheus = PrometheusSource(args.prometheus, job=args.job, timeout=args.timeout)
        if not boxes:
            boxes = prometheus.discover()
        source, label = prometheus, f"Prometheus {args.prometheus} (job {args.job})"
    else:
        missing = [b.name for b in boxes if b.metrics_url is None]
        if missing:
            raise FleetError(f"{args.hosts}: without --prometheus every box needs a metrics URL: {', '.join(missing)}")
        source, label = EndpointSource(timeout=args.timeout), f"{len(boxes)} boxes from {args.hosts}"
    return FleetMonitor(boxes, source), label


def run_fleet(args: argparse.Namespace) -> int:
    if not args.prometheus and not args.hosts:
        print("cuzk-tui fleet: give --prometheus URL or --hosts FILE (or both)", file=sys.stderr)
        return 2
    try:
        monitor, label = _monitor(args)
    except FleetError as error:
        print(f"cuzk-tui fleet: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"cuzk-tui fleet: could not list the targets: {error}", file=sys.stderr)
        return 1
    if args.json:
        views = monitor.poll()
        print(json.dumps([view_record(v) for v in views], indent=2))
        # One poll for a script: a box that did not answer is a failure it must see.
        return 1 if any(v.state == "unreachable" for v in views) else 0
    from ..ui.fleet_app import FleetApp

    FleetApp(monitor, poll_interval=args.interval, source_label=label).run()
    return 0
