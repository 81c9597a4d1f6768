"""The OpenMetrics endpoint (``--metrics ADDR``): the session model and the daemon's own figures.

The real daemon has no HTTP ``/metrics``: its Prometheus text is the gRPC ``GetMetrics`` reply
(cuzk-server/src/service.rs ``get_metrics``: proof counters, queue depth, running jobs, GPU workers,
uptime, a duration summary over a ring buffer). That text is passed through under its own names.
Beside it goes what the daemon cannot say, read from the :class:`SessionModel` that the recorded
session feeds: process-tree RSS, cgroup usage / limit / OOM kills, the budget, SRS / PCE resident,
phase durations as histograms, GPU memory and utilisation, daemon up / restarts / exit causes.

Names follow Prometheus conventions: one ``cuzk_`` prefix, base units (bytes, seconds, ratios),
``_total`` counters, no job ids as labels. Memory figures of the engine are in the bytes of the box it
emulates (the model's nominal bytes), so they compare with its budget as a real box's would.

Thread safety: the model is only touched on the event loop (:meth:`MetricsExporter.refresh`, which
builds an immutable :class:`MetricsSnapshot`); prometheus_client's server thread only reads the latest
snapshot, swapped in by one reference assignment.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from threading import Thread
from typing import Final
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from .client import ClientError, DaemonClient
from .daemon_facts import BY_DISPLAY
from .model import Series, SessionModel
from .timeline import Timeline

# Phase durations of real proofs run from well under a second (a GPU queue wait) to many minutes
# (a PoRep partition's synthesis on a busy box).
PHASE_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0)
PHASES: Final = ("scheduler_wait", "budget_wait", "synthesis", "gpu_queue_wait", "gpu")
# The job outcomes counted (timeline.JobStatus less running), each with what its help text adds.
_OUTCOME_HELP: Final = {
    "completed": "",
    "failed": "",
    "incomplete": " (cut off by the daemon's exit)",
    "lost": " (replaced in the daemon's monolithic GPU queue: their callers are never answered)",
}
_ERROR_TEXT_MAX: Final = 200


class MetricsAddressError(ValueError):
    pass


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (loopback) as (host, port); IPv6 as ``[::1]:PORT``."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise MetricsAddressError(f"--metrics {text!r}: expected HOST:PORT, :PORT or PORT (1-65535)")
    return host, int(port_text)


def exposure_warning(host: str) -> str | None:
    """A warning when the endpoint is reachable beyond this machine (it has no authentication)."""
    beyond = f"--metrics listens on {host}: make sure only your Prometheus reaches it"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None if host == "localhost" else beyond
    if address.is_loopback:
        return None
    if address.is_unspecified:
        return (
            f"--metrics listens on {host} (every interface): anyone who reaches this box reads its figures; "
            "prefer loopback and an SSH tunnel, or a firewall that admits only your Prometheus"
        )
    return beyond


@dataclass(slots=True)
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(PHASE_BUCKETS))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float | None) -> None:
        if value is None or value < 0 or math.isnan(value):
            return  # a phase the log did not close, or clocks that disagree: not a duration
        self.n += 1
        self.total += value
        for i, bound in enumerate(PHASE_BUCKETS):
            if value <= bound:
                self.counts[i] += 1

    def frozen(self) -> tuple[tuple[tuple[str, float], ...], float]:
        """Cumulative buckets ending with +Inf, and the sum."""
        buckets = tuple((_bound(b), float(c)) for b, c in zip(PHASE_BUCKETS, self.counts, strict=True))
        return (*buckets, ("+Inf", float(self.n))), self.total


def _bound(value: float) -> str:
    return repr(float(value))


class FinishedJobs:
    """What the log says of every finished job, each counted once: outcomes by kind and phase histograms.

    Counted from the recorded log, not from the daemon's counters, so it spans daemon restarts (an OOM
    kill sets GetMetrics back to zero) and a benchmark runner's daemon. Phases per job: the scheduler
    wait (scheduler.rs enqueued -> dequeued) and the budget wait (engine.rs budget-gated dispatch ->
    first synthesis); per partition: synthesis, the GPU queue wait and the GPU prove.
    """

    def __init__(self) -> None:
        self._phases = {phase: _Histogram() for phase in PHASES}
        self._outcomes: Counter[tuple[str, str]] = Counter()
        self._seen: set[tuple[int, str]] = set()

    def observe(self, timeline: Timeline) -> None:
        finished: set[tuple[int, str]] = set()
        for job in timeline.jobs():
            if job.status == "running":
                continue
            finished.add(job.key)
            if job.key in self._seen:
                continue
            facts = BY_DISPLAY.get(job.kind or "")
            kind = facts.metric_label if facts is not None else (job.kind or "unknown")
            self._outcomes[(job.status, kind)] += 1
            self._phases["scheduler_wait"].observe(job.scheduler_wait_s)
            self._phases["budget_wait"].observe(job.budget_wait_s)
            for p in job.partitions.values():
                self._phases["synthesis"].observe(p.synth_s)
                self._phases["gpu_queue_wait"].observe(p.queue_wait_s)
                self._phases["gpu"].observe(p.gpu_s)
        # The timeline drops old finished jobs; those never come back, so forgetting them is safe.
        self._seen = finished

    def outcomes(self) -> tuple[tuple[str, str, int], ...]:
        return tuple((status, kind, n) for (status, kind), n in sorted(self._outcomes.items()))

    def phases(self) -> tuple[tuple[str, tuple[tuple[tuple[str, float], ...], float]], ...]:
        return tuple((phase, histogram.frozen()) for phase, histogram in self._phases.items())


def parse_daemon_metrics(text: str) -> list[Metric]:
    """The GetMetrics text as OpenMetrics families: families that share a name are merged.

    service.rs writes ``cuzk_proofs_completed_total`` (all kinds) and ``cuzk_proofs_completed`` (per
    ``proof_kind``) as two counter families; OpenMetrics names both ``cuzk_proofs_completed`` with
    ``_total`` samples, so they become one family: the series without a label is the daemon's total.
    """
    merged: dict[str, Metric] = {}
    for family in text_string_to_metric_families(text):
        known = merged.get(family.name)
        if known is None:
            merged[family.name] = family
        elif known.type == family.type:
            known.samples.extend(family.samples)
    return list(merged.values())


@dataclass(frozen=True, slots=True)
class GpuFigures:
    index: int
    name: str
    used_bytes: float | None
    total_bytes: float | None
    utilization_ratio: float | None


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Everything one scrape returns, computed on the event loop."""

    mode: str = ""
    daemon_up: bool = False
    launches: int = 0
    exits: tuple[tuple[str, int], ...] = ()
    last_error: str = ""
    rss_bytes: float | None = None
    cgroup_usage_bytes: float | None = None
    cgroup_limit_bytes: float | None = None
    oom_kills: int = 0
    budget_total_bytes: float | None = None
    budget_used_bytes: float | None = None
    srs_resident_bytes: float | None = None
    pce_resident_bytes: float | None = None
    evictions: int = 0
    budget_stalls: int = 0
    gpus: tuple[GpuFigures, ...] = ()
    jobs_by_kind: tuple[tuple[str, str, int], ...] = ()  # (status, kind, count) of finished jobs
    phases: tuple[tuple[str, tuple[tuple[tuple[str, float], ...], float]], ...] = ()
    daemon: tuple[Metric, ...] = ()


def _last(series: Series) -> float | None:
    point = series.last()
    return point[1] if point is not None else None


def _last_error(model: SessionModel) -> str:
    """The current run's fatal error line, else the session's last unclean exit (it outlives the restart
    that followed it: a box that was OOM-killed an hour ago says so)."""
    if model.daemon.fatal_error:
        return model.daemon.fatal_error[:_ERROR_TEXT_MAX]
    for _, exit in reversed(model.exits):
        if exit.cause not in ("clean", "stopped"):
            evidence = f": {exit.evidence[0]}" if exit.evidence else ""
            return f"exited ({exit.cause}){evidence}"[:_ERROR_TEXT_MAX]
    return ""


def snapshot_of(
    model: SessionModel,
    jobs: FinishedJobs,
    daemon: list[Metric],
) -> MetricsSnapshot:
    d = model.daemon
    running = d.phase in ("starting", "ready")
    status = model.status
    gpus = tuple(
        GpuFigures(
            g.index,
            g.name,
            _last(g.used),
            float(g.total_bytes) if g.total_bytes is not None else None,
            None if (u := _last(g.utilization)) is None else u / 100.0,
        )
        for g in sorted(model.gpus.values(), key=lambda g: g.index)
    )
    exits = Counter(exit.cause for _, exit in model.exits)
    return MetricsSnapshot(
        mode=d.mode or "",
        daemon_up=d.phase == "ready" and d.silent is None,
        launches=d.runs,
        exits=tuple(sorted(exits.items())),
        last_error=_last_error(model),
        # A dead daemon has no RSS: the last figure before it died would read as a live one.
        rss_bytes=_last(model.rss) if running else None,
        cgroup_usage_bytes=_last(model.cgroup_usage) if running else None,
        cgroup_limit_bytes=_last(model.cgroup_limit),
        oom_kills=len(model.oom_kills),
        budget_total_bytes=_last(model.budget_total) if running else None,
        budget_used_bytes=_last(model.budget_used) if running else None,
        srs_resident_bytes=status.srs_resident_bytes if status is not None and running else None,
        pce_resident_bytes=status.pce_resident_bytes if status is not None and running else None,
        evictions=len(model.evictions),
        budget_stalls=len(model.budget_stalls),
        gpus=gpus,
        jobs_by_kind=jobs.outcomes(),
        phases=jobs.phases(),
        daemon=tuple(daemon) if d.phase == "ready" else (),
    )


def _gauge(name: str, doc: str, value: float | None) -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(name, doc, value=value)


def families(s: MetricsSnapshot) -> Iterator[Metric]:
    """The metric families of one snapshot, the daemon's own first."""
    yield from s.daemon
    info = InfoMetricFamily("cuzk_recorder", "What the recorder watches (engine, real or attached)")
    info.add_metric([], {"mode": s.mode or "none"})
    yield info
    yield GaugeMetricFamily("cuzk_daemon_up", "1 while the daemon answers, else 0", value=int(s.daemon_up))
    restarts = "Daemon launches after the first (config changes, OOM recoveries, benchmark hand-overs)"
    yield CounterMetricFamily("cuzk_daemon_restarts", restarts, value=max(s.launches - 1, 0))
    exits = CounterMetricFamily("cuzk_daemon_exits", "Daemon exits by cause", labels=["cause"])
    for cause, n in s.exits:
        exits.add_metric([cause], n)
    yield exits
    error = InfoMetricFamily("cuzk_daemon_last_error", "The daemon's last fatal error or unclean exit")
    if s.last_error:
        error.add_metric([], {"error": s.last_error})
    yield error
    yield from _gauge("cuzk_daemon_rss_bytes", "Resident memory of the daemon's process tree", s.rss_bytes)
    yield from _gauge("cuzk_cgroup_memory_usage_bytes", "Usage of the daemon's memory cgroup", s.cgroup_usage_bytes)
    yield from _gauge("cuzk_cgroup_memory_limit_bytes", "Limit of the daemon's memory cgroup", s.cgroup_limit_bytes)
    yield CounterMetricFamily("cuzk_oom_kills", "Daemon runs ended by the kernel's OOM killer", value=s.oom_kills)
    yield from _gauge("cuzk_budget_total_bytes", "The daemon's memory budget (/status)", s.budget_total_bytes)
    yield from _gauge("cuzk_budget_used_bytes", "Memory budget reserved now (/status)", s.budget_used_bytes)
    yield from _gauge("cuzk_srs_resident_bytes", "SRS parameters held in memory (/status)", s.srs_resident_bytes)
    yield from _gauge("cuzk_pce_resident_bytes", "Pre-compiled circuits held in memory (/status)", s.pce_resident_bytes)
    yield CounterMetricFamily("cuzk_evictions", "SRS / PCE evictions the log reported", value=s.evictions)
    yield CounterMetricFamily(
        "cuzk_budget_stalls", "Reservations larger than the whole budget (they block forever)", value=s.budget_stalls
    )
    used = GaugeMetricFamily("cuzk_gpu_memory_used_bytes", "GPU memory in use", labels=["gpu"])
    total = GaugeMetricFamily("cuzk_gpu_memory_total_bytes", "GPU memory size", labels=["gpu"])
    util = GaugeMetricFamily("cuzk_gpu_utilization_ratio", "GPU busy fraction (NVML)", labels=["gpu"])
    for g in s.gpus:
        for gauge, reading in ((used, g.used_bytes), (total, g.total_bytes), (util, g.utilization_ratio)):
            if reading is not None:
                gauge.add_metric([str(g.index)], reading)
    yield from (used, total, util)
    for outcome, why in _OUTCOME_HELP.items():
        counter = CounterMetricFamily(
            f"cuzk_jobs_{outcome}",
            f"Jobs {outcome} by kind, from the recorded log, across daemon restarts{why}",
            labels=["proof_kind"],
        )
        for status, kind, count in s.jobs_by_kind:
            if status == outcome:
                counter.add_metric([kind], count)
        yield counter
    histogram = HistogramMetricFamily(
        "cuzk_phase_duration_seconds", "Durations of finished jobs' phases", labels=["phase"]
    )
    for phase, (buckets, total_s) in s.phases:
        histogram.add_metric([phase], list(buckets), total_s)
    yield histogram


class SnapshotCollector(Collector):
    """prometheus_client's view of the latest snapshot (read from its server thread)."""

    def __init__(self) -> None:
        self.snapshot = MetricsSnapshot()

    def collect(self) -> Iterator[Metric]:
        return families(self.snapshot)


class MetricsExporter:
    """Turns a model (plus the daemon's GetMetrics text) into snapshots and serves them over HTTP."""

    def __init__(self) -> None:
        self.collector = SnapshotCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._jobs = FinishedJobs()
        self._daemon: list[Metric] = []
        self._server: tuple[WSGIServer, Thread] | None = None

    def daemon_text(self, text: str | None) -> None:
        """The latest GetMetrics reply (None: the daemon did not answer; its figures are dropped)."""
        try:
            self._daemon = parse_daemon_metrics(text) if text else []
        except ValueError:
            self._daemon = []  # not Prometheus text: nothing of it is passed on

    async def follow_daemon(self, model: SessionModel, interval: float) -> None:
        """Ask the model's current daemon for its GetMetrics text every ``interval`` seconds (until
        cancelled). The model, not a supervisor, says which daemon: a benchmark runner's daemon (another
        process, same session) is asked as well as one this process launched or attached to."""
        client: DaemonClient | None = None
        try:
            while True:
                d = model.daemon
                text: str | None = None
                if d.phase == "ready" and d.listen:
                    if client is None or client.address != d.listen:
                        if client is not None:
                            await client.close()
                        client = DaemonClient(d.listen)
                    with contextlib.suppress(ClientError, TimeoutError):
                        text = await client.get_metrics()
                self.daemon_text(text)
                await asyncio.sleep(interval)
        finally:
            if client is not None:
                await client.close()

    def refresh(self, model: SessionModel) -> None:
        self._jobs.observe(model.timeline)
        self.collector.snapshot = snapshot_of(model, self._jobs, self._daemon)

    def serve(self, host: str, port: int) -> None:
        self._server = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            self._server = None
