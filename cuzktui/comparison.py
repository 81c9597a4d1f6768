"""A recorded session's figures for a comparison, folded from its events (headless, blocking).

Tuning is a sequence of experiments: the Sessions screen sets two of these side by side.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import events as ev
from .config import ConfigDocument, ConfigError, load_config
from .daemon_facts import nominal_bytes
from .session import SessionInfo, iter_session_events, read_meta
from .session_layout import config_versions
from .units import UnitError, parse_size

# The kernel's line for an OOM-killed process (mm/oom_kill.c __oom_kill_process): its RSS at the kill,
# the spike that samples a second apart miss.
_KILLED_RSS = re.compile(r"Killed process \d+ .*?anon-rss:(\d+)kB, file-rss:(\d+)kB(?:, shmem-rss:(\d+)kB)?")


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """The figures a comparison shows, folded from a session's recorded events."""

    path: Path
    label: str
    created: float
    completed: int
    failed: int
    proofs_per_hour: float | None
    time_scale: float | None  # an engine's: its rate is in the emulated box's time
    oom_kills: int
    restarts: int
    # The highest memory the session is known to have reached, in the emulated box's units for an
    # engine (like the dashboard): the samples, the kernel's RSS of an OOM-killed daemon, the cgroup's
    # high-water mark; ``peak_source`` says which. ``peak_at_least``: an OOM kill in the cgroup with
    # no figure of its own, so the memory reached the limit (the peak is the limit, or more).
    peak_rss_bytes: float | None
    peak_source: str
    peak_at_least: bool
    limit_bytes: float | None
    box_ram_bytes: float | None  # the RAM of the box (an engine's emulated mem_total, else the host's)
    config: ConfigDocument | None
    config_name: str

    @property
    def title(self) -> str:
        """The session's column heading: when, which label, which config (labels repeat: "engine")."""
        when = datetime.fromtimestamp(self.created, UTC).strftime("%Y-%m-%d %H:%M")
        return f"{when} · {self.label} · {self.config_name}"

    @property
    def over_box_ram(self) -> bool:
        """The peak passed the box's RAM: the real box would have run out of memory (or swapped)."""
        return (
            self.peak_rss_bytes is not None
            and self.box_ram_bytes is not None
            and (self.peak_rss_bytes > self.box_ram_bytes)
        )


def killed_rss_bytes(evidence: tuple[str, ...]) -> int | None:
    """The RSS (anon + file + shmem) the kernel reported for the process it OOM-killed, in bytes."""
    sizes = [sum(int(kb or 0) for kb in found.groups()) * 1024 for e in evidence for found in _KILLED_RSS.finditer(e)]
    return max(sizes) if sizes else None


def summarize(info: SessionInfo) -> SessionSummary:
    """Read one session (blocking: run it in a worker)."""
    completed = failed = oom = restarts = 0
    per_hour: float | None = None
    time_scale: float | None = None
    peak: float | None = None
    source = "sampled every second"
    reached_limit = False
    limit: float | None = None
    scale: float | None = None  # the running engine's memory_scale

    def higher(value: float, why: str) -> None:
        nonlocal peak, source
        if peak is None or value > peak:
            peak, source = value, why

    # Only observed events carry these figures; skipping the daemon log keeps this fast.
    for event in iter_session_events(info.path, log_path=os.devnull):
        if isinstance(event, ev.ProofFinished):
            if event.status == "COMPLETED":
                completed += 1
            else:
                failed += 1
        elif isinstance(event, ev.BenchFinished):
            per_hour, time_scale = event.proofs_per_hour, event.time_scale
        elif isinstance(event, ev.BenchRestart):
            restarts += 1
        elif isinstance(event, ev.DaemonExited) and event.cause == "oom_kill":
            oom += 1
            killed = killed_rss_bytes(event.evidence)
            if killed is not None:
                higher(nominal_bytes(killed, scale), "the kernel's RSS at the OOM kill")
            else:
                reached_limit = True
        elif isinstance(event, ev.MemorySample):
            if event.rss_bytes is not None:
                higher(nominal_bytes(event.rss_bytes, scale), "sampled every second")
            if event.cgroup_limit_bytes is not None:
                sampled = nominal_bytes(event.cgroup_limit_bytes, scale)
                limit = sampled if limit is None else min(limit, sampled)
        elif isinstance(event, ev.DaemonLaunched):
            scale = event.memory_scale
            if per_hour is None:
                time_scale = event.time_scale
            if event.memory_limit_bytes is not None:
                launched = nominal_bytes(event.memory_limit_bytes, scale)
                limit = launched if limit is None else min(limit, launched)
    meta = read_meta(info.path)
    high_water = meta.get("cgroup_peak_bytes")
    if isinstance(high_water, int) and high_water > 0:
        higher(nominal_bytes(high_water, scale), "the cgroup's high-water mark")
    at_least = reached_limit and limit is not None and (peak is None or peak < limit)
    if at_least and limit is not None:
        peak, source = limit, "an OOM kill at the cgroup limit (the samples missed the spike)"
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
        info.path, info.label, info.created, completed, failed, per_hour, time_scale, oom, restarts,
        peak, source, at_least, limit, _box_ram(config, scale, meta), config, config_name,
    )  # fmt: skip


def _box_ram(config: ConfigDocument | None, scale: float | None, meta: dict[str, Any]) -> float | None:
    """The box's RAM: an engine's emulated ``[engine] mem_total`` (its memcheck may describe the host
    a headless bench ran on), a real daemon's host MemTotal from the session's memcheck."""
    if scale is not None:
        mem_total = config.effective().get("engine.mem_total") if config is not None else None
        try:
            return float(parse_size(mem_total)) if isinstance(mem_total, str) else None
        except UnitError:
            return None
    memcheck = meta.get("memcheck")
    total = memcheck.get("host_mem_total_bytes") if isinstance(memcheck, dict) else None
    return float(total) if isinstance(total, int) and total > 0 else None
