"""A recorded session's figures for a comparison, folded from its events (headless, blocking).

Tuning is a sequence of experiments: the Sessions screen sets two of these side by side.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import events as ev
from .config import ConfigDocument, ConfigError, load_config
from .daemon_facts import nominal_bytes
from .session import SessionInfo, iter_session_events
from .session_layout import config_versions


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """The figures a comparison shows, folded from a session's recorded events."""

    path: Path
    label: str
    completed: int
    failed: int
    proofs_per_hour: float | None
    oom_kills: int
    restarts: int
    peak_rss_bytes: float | None  # an engine's in the emulated box's units, like the dashboard
    limit_bytes: float | None
    config: ConfigDocument | None
    config_name: str


def summarize(info: SessionInfo) -> SessionSummary:
    """Read one session (blocking: run it in a worker)."""
    completed = failed = oom = restarts = 0
    per_hour: float | None = None
    peak: float | None = None
    limit: float | None = None
    scale: float | None = None  # the running engine's memory_scale
    # Only observed events carry these figures; skipping the daemon log keeps this fast.
    for event in iter_session_events(info.path, log_path=os.devnull):
        if isinstance(event, ev.ProofFinished):
            if event.status == "COMPLETED":
                completed += 1
            else:
                failed += 1
        elif isinstance(event, ev.BenchFinished):
            per_hour = event.proofs_per_hour
        elif isinstance(event, ev.BenchRestart):
            restarts += 1
        elif isinstance(event, ev.DaemonExited) and event.cause == "oom_kill":
            oom += 1
        elif isinstance(event, ev.MemorySample):
            if event.rss_bytes is not None:
                peak = max(peak or 0.0, nominal_bytes(event.rss_bytes, scale))
            if event.cgroup_limit_bytes is not None:
                sampled = nominal_bytes(event.cgroup_limit_bytes, scale)
                limit = sampled if limit is None else min(limit, sampled)
        elif isinstance(event, ev.DaemonLaunched):
            scale = event.memory_scale
            if event.memory_limit_bytes is not None:
                launched = nominal_bytes(event.memory_limit_bytes, scale)
                limit = launched if limit is None else min(limit, launched)
    versions = config_versions(info.path)
    config: ConfigDocument | None = None
    config_name = "no config recorded"
    if versions:
        config_name = versions[-1].name
        try:
            config = load_config(versions[-1])
        except ConfigError as exc:
            config_name = f"unreadable: {exc}"
    return SessionSummary(
        info.path, info.label, completed, failed, per_hour, oom, restarts, peak, limit, config, config_name
    )
