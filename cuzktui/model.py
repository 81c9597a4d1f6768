"""The session model: everything the UI shows, built only from typed events.

``SessionModel.apply`` is the single entry point for live sources and for replay alike; the UI
reads the model (never the sources) and redraws a part only when that part's version moved.

Memory is bounded for sessions of any length: time series keep at most ``SERIES_CAPACITY``
points and, when full, merge neighbouring points (keeping the larger value, so peaks such as the
moment before an OOM kill survive) — the whole session stays visible at a coarser resolution;
notices and benchmark results are capped deques; the timeline caps its own retained jobs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, cast

from . import events as ev
from .daemon_facts import nominal_bytes
from .status_timeline import StatusTimeline
from .timeline import DEFAULT_MAX_JOBS, Timeline, lost_reason

SERIES_CAPACITY: Final = 4096
NOTICE_CAPACITY: Final = 500
RESULT_CAPACITY: Final = 10_000


class Series:
    """A bounded (t, value) series that halves its resolution instead of forgetting its start."""

    __slots__ = ("_capacity", "_pending", "_points", "_stride")

    def __init__(self, capacity: int = SERIES_CAPACITY) -> None:
        if capacity < 4:
            raise ValueError("capacity must be at least 4")
        self._capacity = capacity
        self._points: list[tuple[float, float]] = []
        # After each compaction a stored point stands for `_stride` raw samples; incoming samples
        # are folded into `_pending` until a full stride has arrived.
        self._stride = 1
        self._pending: tuple[float, float, int] | None = None

    def append(self, t: float, value: float) -> None:
        if self._stride > 1:
            if self._pending is None:
                self._pending = (t, value, 1)
            else:
                t0, v0, n = self._pending
                self._pending = (t0, max(v0, value), n + 1)
            assert self._pending is not None
            if self._pending[2] < self._stride:
                return
            t, value, _ = self._pending
            self._pending = None
        self._points.append((t, value))
        if len(self._points) >= self._capacity:
            self._compact()

    def _compact(self) -> None:
        merged = [
            (self._points[i][0], max(self._points[i][1], self._points[i + 1][1]))
            for i in range(0, len(self._points) - 1, 2)
        ]
        if len(self._points) % 2:
            merged.append(self._points[-1])
        self._points = merged
        self._stride *= 2

    def points(self) -> list[tuple[float, float]]:
        """All points, oldest first, including a partly filled stride."""
        if self._pending is None:
            return list(self._points)
        t, value, _ = self._pending
        return [*self._points, (t, value)]

    def last(self) -> tuple[float, float] | None:
        if self._pending is not None:
            return self._pending[0], self._pending[1]
        return self._points[-1] if self._points else None

    def peak(self) -> float | None:
        values = [v for _, v in self.points()]
        return max(values) if values else None

    def __len__(self) -> int:
        return len(self._points) + (1 if self._pending is not None else 0)


DaemonPhase = Literal["none", "starting", "ready", "dead"]


@dataclass(slots=True)
class DaemonState:
    """What the dashboard's identity panel shows about the current daemon run."""

    phase: DaemonPhase = "none"
    mode: ev.DaemonMode | None = None
    pid: int | None = None
    command: tuple[str, ...] = ()
    listen: str = ""
    config_path: str | None = None
    log_path: str | None = None
    status_url: str | None = None
    memory_limit_bytes: int | None = None
    cgroup_path: str | None = None  # the memory cgroup the tool made for it
    memory_scale: float | None = None  # the engine's real bytes per nominal byte
    time_scale: float | None = None  # the engine's real seconds per modelled second
    launched_t: float | None = None
    ready_t: float | None = None
    startup_s: float | None = None
    srs_loading: str | None = None  # circuit id of an SRS load in progress
    srs_loaded: tuple[str, ...] = ()
    budget_total_gib: int | None = None
    synth_worker_count: int | None = None
    gpu_worker_count: int | None = None
    exit: ev.DaemonExited | None = None
    fatal_error: str | None = None
    # The daemon's runs so far, as its log shows them (its ``cuzk-daemon starting`` lines, main.rs), else
    # the runs the tool saw begin (launches, attaches, a restart on the attached address): SessionModel.runs.
    runs: int = 0
    uptime_s: float | None = None  # the daemon's own uptime when it first answered (GetStatus)
    silent: ev.DaemonLiveness | None = None  # an attached daemon not answering now (the last state is kept)
    # A SIGINT stopped this run's engine (main.rs, engine.rs Engine::shutdown): it answers, and never proves.
    engine_shutdown: ev.EngineShutdown | None = None
    start_error: ev.StartFailed | None = None  # the last launch or attach failed (a later launch clears it)


@dataclass(slots=True)
class GpuState:
    index: int
    name: str
    source: Literal["nvml", "daemon"]
    total_bytes: int | None = None
    used: Series = field(default_factory=Series)
    daemon_used: Series = field(default_factory=Series)
    utilization: Series = field(default_factory=Series)


@dataclass(slots=True)
class BenchState:
    """The most recent benchmark: its parameters, results as they arrive, restarts and outcome."""

    bench_id: str
    kind: str
    count: int
    concurrency: int
    oom_retries: int
    started_t: float
    submitted: int = 0
    results: deque[ev.ProofFinished] = field(default_factory=lambda: deque(maxlen=RESULT_CAPACITY))
    restarts: list[ev.BenchRestart] = field(default_factory=list)
    finished: ev.BenchFinished | None = None
    time_scale: float | None = None  # an engine run's time_scale: its figures are shown in box time

    def box_ms(self, ms: int) -> int:
        """A duration the daemon reported (or the clock here measured), in the modelled box's time for
        an engine run (real ÷ time_scale), unchanged for a real daemon's."""
        return ms if self.time_scale is None else round(ms / self.time_scale)

    @property
    def time_basis(self) -> str:
        """Which clock the bench figures are on, in words."""
        if self.time_scale is None:
            return "wall clock"
        return f"emulated box time (engine time_scale {self.time_scale:g})"

    @property
    def completed(self) -> int:
        return sum(1 for r in self.results if r.status == "COMPLETED")

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if r.status != "COMPLETED")

    @property
    def lost(self) -> int:
        """Proofs the daemon never answered (it died with them, no OOM retry left): among ``failed``,
        but the daemon's own counts never see them."""
        return sum(1 for r in self.results if r.status == "LOST")


class SessionModel:
    """Folds the event stream into the state the screens display.

    ``log_source`` names the daemon log of a bare-log replay: with no supervisor events, the
    daemon's start, readiness and exit are taken from the log itself.
    """

    def __init__(self, timeline: Timeline | None = None, log_source: str | None = None) -> None:
        self.timeline = timeline if timeline is not None else Timeline()
        self._status_timeline = StatusTimeline()
        self.log_source = log_source
        self._observed_lifecycle = False  # a supervisor's DaemonLaunched was seen: it owns the lifecycle
        self.evictions: list[tuple[float | None, ev.Eviction]] = []
        self.budget_stalls: list[ev.BudgetStall] = []
        self.warnings: deque[ev.LogRecord] = deque(maxlen=NOTICE_CAPACITY)  # WARN/ERROR lines of the log
        self._overtaken_seen = 0
        self._failures_seen = 0
        self._warned: set[str] = set()  # WARN/ERROR texts already noticed in this daemon run
        # Every exit, with the timeline's daemon run it ended (None: before any run was seen).
        self.exits: list[tuple[int | None, ev.DaemonExited]] = []
        self.daemon = DaemonState()
        self.rss = Series()
        self.cgroup_usage = Series()
        self.cgroup_limit = Series()
        self.budget_total = Series()
        self.budget_used = Series()
        self.gpus: dict[int, GpuState] = {}
        self.status: ev.StatusSnapshot | None = None
        self.daemon_counts: ev.DaemonProofCounts | None = None  # GetStatus's, the latest
        # Proofs GetStatus counted in daemon runs that have ended, beyond what the log showed of them
        # (completed, failed): a run watched without its log, or attached after it proved. A restart zeroes
        # GetStatus's counts; the session's go on (figures.proof_counts).
        self.unlogged_counts: tuple[int, int] = (0, 0)
        # The daemon's runs (see runs()): how many, what showed the current one ("log": its start line,
        # "tool": a launch or an attach), and whether an exit ended it.
        self._runs = 0
        self._run_shown_by: set[str] = set()
        self._run_ended = False
        self.bench: BenchState | None = None
        self.bench_failure: ev.BenchRunnerFailed | None = None  # the last runner's, until a benchmark starts
        self.notices: deque[ev.Notice] = deque(maxlen=NOTICE_CAPACITY)
        self.oom_kills: list[float] = []
        self.configs: list[ev.ConfigApplied] = []
        # When each benchmark started and finished: a daemon stopped across one was handed over to
        # its runner or back (the waterfall's separators say so: waterfall_layout.run_boundary).
        self.bench_edges: list[float] = []
        self.first_t: float | None = None
        self.last_t: float | None = None
        # One counter per area so each widget redraws only when its own data moved.
        self.version = 0
        self.memory_version = 0
        self.daemon_version = 0
        self.bench_version = 0

    def apply_all(self, events: list[ev.Event]) -> bool:
        changed = False
        for event in events:
            changed = self.apply(event) or changed
        return changed

    def apply(self, event: ev.Event) -> bool:
        """Fold one event into the model; True when anything visible changed."""
        changed = self._apply(event)
        if changed:
            self.version += 1
        return changed

    def _observe_time(self, t: float | None) -> None:
        if t is None:
            return
        if self.first_t is None or t < self.first_t:
            self.first_t = t
        if self.last_t is None or t > self.last_t:
            self.last_t = t

    def _apply(self, event: ev.Event) -> bool:
        kind = type(event)
        if kind in _TIMELINE_ONLY:
            # The bulk of a log (TIMELINE, worker timings): only the waterfall reads them.
            return self.timeline.apply(cast(ev.LogEvent, event))
        if kind in _TIMED_DETAILS:
            # GPU_TIMING / FIN_TIMING, a fifth of a busy log: what _apply_log does for them, without its chain.
            timing = cast(ev.GpuTiming | ev.FinTiming, event)
            self._observe_time(timing.ts)
            changed = self.timeline.apply(timing)
            self._notice_outcomes(timing.ts)
            return changed
        if isinstance(event, ev.MemorySample):
            self._observe_time(event.t)
            self._add_memory(event)
            return True
        if isinstance(event, ev.GpuSample):
            self._observe_time(event.t)
            self._add_gpu(event)
            return True
        if isinstance(event, ev.StatusSnapshot):
            self._observe_time(event.t)
            self.status = event
            if event.srs_resident is not None:
                # /status knows what is resident; the log's "SRS loaded" says only what once was.
                self.daemon.srs_loaded = event.srs_resident
            # A daemon watched without its log: its /status partition states draw the waterfall.
            for derived in self._status_timeline.events(event):
                self.timeline.apply(derived)
            self.budget_total.append(event.t, event.budget_total_bytes)
            self.budget_used.append(event.t, event.budget_used_bytes)
            self.memory_version += 1
            self.daemon_version += 1
            return True
        if isinstance(event, ev.DaemonProofCounts):
            self._observe_time(event.t)
            previous = self.run_reported()
            if previous is not None:
                # GetStatus's counts only grow in a run: lower ones are a successor's, read before its
                # restart was recorded (the recorder and the liveness probe ask on their own clocks).
                event = ev.DaemonProofCounts(
                    event.t, max(event.completed, previous.completed), max(event.failed, previous.failed)
                )
            self.daemon_counts = event
            self.daemon_version += 1
            return True
        if isinstance(event, ev.DaemonLiveness):
            self._observe_time(event.t)
            self.daemon.silent = None if event.answering else event
            self.daemon_version += 1
            return True
        if isinstance(event, ev.DaemonLaunched | ev.DaemonReadyObserved | ev.DaemonExited | ev.ConfigApplied):
            self._observe_time(event.t)
            self._apply_lifecycle(event)
            self.daemon_version += 1
            return True
        if isinstance(event, ev.BenchStarted | ev.ProofSubmitted | ev.ProofFinished | ev.BenchRestart):
            self._observe_time(event.t)
            return self._apply_bench(event)
        if isinstance(event, ev.BenchFinished):
            self._observe_time(event.t)
            self.bench_edges.append(event.t)
            if self.bench is None or self.bench.bench_id != event.bench_id:
                return False
            self.bench.finished = event
            self.bench_version += 1
            return True
        if isinstance(event, ev.BenchRunnerFailed):
            self._observe_time(event.t)
            self.bench_failure = event
            self._notice(event.t, "error", " | ".join(event.text.splitlines()))  # a notice is one line
            self.bench_version += 1
            return True
        if isinstance(event, ev.Notice):
            self._observe_time(event.t)
            self.notices.append(event)
            return True
        if isinstance(event, ev.StartFailed):
            self._observe_time(event.t)
            self.daemon.start_error = event
            self.daemon_version += 1
            return True
        return self._apply_log(event)

    @property
    def jobs_from_status(self) -> bool:
        """The jobs were drawn from /status partition states (a daemon watched without its log: coarser)."""
        return self._status_timeline.drew

    def daemon_uptime(self) -> float | None:
        """The daemon's own uptime at the model's time: the latest /status ``uptime_secs`` of this run, else
        GetStatus ``uptime_seconds`` at readiness, else (a daemon we launched) the time since its launch;
        never the time since we attached."""
        d, now = self.daemon, self.last_t
        if d.phase != "ready" or now is None:
            return None
        status = self.status
        if status is not None and d.launched_t is not None and status.t >= d.launched_t:
            return status.uptime_secs + (now - status.t)
        if d.uptime_s is not None and d.ready_t is not None:
            return d.uptime_s + (now - d.ready_t)
        if d.mode != "attached" and d.launched_t is not None:
            return now - d.launched_t
        return None

    def nominal(self, real_bytes: int) -> float:
        """Real bytes in the units the daemon's budget speaks: an engine's nominal bytes, else as is.

        An engine at memory_scale 1/256 in a 1 GiB cgroup emulates a 256 GiB box; its RSS, cgroup
        usage and limit are shown ×256 so they compare directly with its (nominal) budget.
        """
        return nominal_bytes(real_bytes, self.daemon.memory_scale)

    def _add_memory(self, sample: ev.MemorySample) -> None:
        t = sample.t
        for series, value in (
            (self.rss, sample.rss_bytes),
            (self.cgroup_usage, sample.cgroup_usage_bytes),
            (self.cgroup_limit, sample.cgroup_limit_bytes),
        ):
            if value is not None:
                series.append(t, self.nominal(value))
        # The budget comes from the daemon's /status, already in its own units.
        for series, value in (
            (self.budget_total, sample.budget_total_bytes),
            (self.budget_used, sample.budget_used_bytes),
        ):
            if value is not None:
                series.append(t, value)
        self.memory_version += 1

    def _add_gpu(self, sample: ev.GpuSample) -> None:
        gpu = self.gpus.get(sample.index)
        if gpu is None:
            gpu = self.gpus[sample.index] = GpuState(sample.index, sample.name, sample.source)
        gpu.name = sample.name
        if sample.total_bytes is not None:
            gpu.total_bytes = sample.total_bytes
        if sample.used_bytes is not None:
            gpu.used.append(sample.t, sample.used_bytes)
        if sample.daemon_used_bytes is not None:
            gpu.daemon_used.append(sample.t, sample.daemon_used_bytes)
        if sample.utilization_pct is not None:
            gpu.utilization.append(sample.t, sample.utilization_pct)
        self.memory_version += 1

    def _apply_lifecycle(
        self, event: ev.DaemonLaunched | ev.DaemonReadyObserved | ev.DaemonExited | ev.ConfigApplied
    ) -> None:
        d = self.daemon
        if isinstance(event, ev.DaemonLaunched):
            self._observed_lifecycle = True
            self._warned.clear()
            self._run_begins("tool", same_daemon=event.mode == "attached")
            # A run without a log, or attached to: its /status polls are a new engine's (status_timeline).
            self._status_timeline = StatusTimeline()
            self.daemon = DaemonState(
                phase="starting",
                mode=event.mode,
                pid=event.pid,
                command=event.command,
                listen=event.listen,
                config_path=event.config_path,
                log_path=event.log_path,
                status_url=event.status_url,
                memory_limit_bytes=event.memory_limit_bytes,
                cgroup_path=event.cgroup_path,
                memory_scale=event.memory_scale,
                time_scale=event.time_scale,
                launched_t=event.t,
                runs=self.runs(),
            )
            if event.memory_limit_bytes is not None:
                self.cgroup_limit.append(event.t, self.nominal(event.memory_limit_bytes))
        elif isinstance(event, ev.DaemonReadyObserved):
            d.phase = "ready"
            d.ready_t = event.t
            d.startup_s = event.startup_s
            d.uptime_s = event.uptime_s
            d.silent = None
        elif isinstance(event, ev.DaemonExited):
            self._record_exit(event)
            d.phase = "dead"
            d.exit = event
            if event.cause == "oom_kill":
                self.oom_kills.append(event.t)
                self.memory_version += 1
        else:
            self.configs.append(event)

    def runs(self) -> int:
        """The daemon's runs so far: its starts as its log shows them (``cuzk-daemon starting``, main.rs),
        and the runs the tool saw begin that the log does not show (no log, or not this far back)."""
        return self._runs

    def _run_begins(self, source: str, same_daemon: bool = False) -> None:
        """A daemon run shows itself: a start line of the log (``source`` "log") or a launch or attach (``tool``).
        The two show one run when it has not ended: a real daemon logs its start before its launch is
        recorded, an engine after it; an attach (``same_daemon``) is to the run going on."""
        going_on = self._runs and not self._run_ended
        if going_on and (same_daemon or source not in self._run_shown_by):
            self._run_shown_by.add(source)
            return
        self._runs += 1
        self._run_shown_by, self._run_ended = {source}, False

    def run_reported(self) -> ev.DaemonProofCounts | None:
        """GetStatus's proof counts of the current daemon run, while it runs (None: none read in this run)."""
        counts, d = self.daemon_counts, self.daemon
        if counts is None or d.launched_t is None or counts.t < d.launched_t or d.exit is not None:
            return None
        return counts

    def _record_exit(self, event: ev.DaemonExited) -> None:
        """Tie an exit to the run of the log it ended and keep what GetStatus counted in that run (before
        the model's daemon is marked dead: its counts are read as the running run's)."""
        reported = self.run_reported()
        segments = self.timeline.segments
        run = segments[-1] if segments else None
        if run is not None and run.index and run.daemon_start is not None and run.daemon_start > event.t:
            # The log shows the next run's start already (a daemon restarted on an attached address reached
            # the log before its predecessor's exit was recorded): this exit ended the run before it, and the
            # next one goes on.
            run = segments[run.index - 1]
            if any(index == run.index for index, _ in self.exits):
                run = None
        else:
            self._run_ended = True
            if run is not None and run.ended:
                run = None  # no run of the log was going on (a launch that failed before its first line)
            else:
                self.timeline.daemon_exited(event.t)
        self.exits.append((run.index if run is not None else None, event))
        if reported is not None:
            logged = (run.completed, run.failed) if run is not None else (0, 0)
            completed, failed = self.unlogged_counts
            self.unlogged_counts = (
                completed + max(0, reported.completed - logged[0]),
                failed + max(0, reported.failed - logged[1]),
            )

    def _apply_bench(self, event: ev.BenchStarted | ev.ProofSubmitted | ev.ProofFinished | ev.BenchRestart) -> bool:
        if isinstance(event, ev.BenchStarted):
            self.bench_edges.append(event.t)
            self.bench_failure = None  # a later benchmark started: the last runner's failure is past
            self.bench = BenchState(
                event.bench_id, event.kind, event.count, event.concurrency, event.oom_retries, event.t,
                time_scale=event.time_scale,
            )  # fmt: skip
        elif self.bench is None or self.bench.bench_id != event.bench_id:
            return False
        elif isinstance(event, ev.ProofSubmitted):
            self.bench.submitted += 1
        elif isinstance(event, ev.ProofFinished):
            self.bench.results.append(event)
            if event.status == "FAILED":
                # The RPC result names the job that a failure line without a job id left open.
                self.timeline.fail_job(event.job_id, event.error, event.t)
                self._notice_outcomes(event.t)
        else:
            self.bench.restarts.append(event)
        self.bench_version += 1
        return True

    def _apply_log(self, event: ev.Event) -> bool:
        d = self.daemon
        ts = getattr(event, "ts", None)
        if isinstance(ts, float):
            self._observe_time(ts)
        daemon_changed = True
        if isinstance(event, ev.SrsLoadStarted):
            d.srs_loading = event.circuit_id
        elif isinstance(event, ev.SrsLoaded):
            d.srs_loading = None
            if event.circuit_id not in d.srs_loaded:
                d.srs_loaded = (*d.srs_loaded, event.circuit_id)
        elif isinstance(event, ev.BudgetInitialized):
            d.budget_total_gib = event.total_budget_gib
        elif isinstance(event, ev.PipelineConfigured):
            d.synth_worker_count = event.synth_worker_count
            d.gpu_worker_count = event.total_workers
        elif isinstance(event, ev.FatalErrorLine):
            d.fatal_error = event.context
        elif isinstance(event, ev.EngineShutdown):
            daemon_changed = d.engine_shutdown is None
            if daemon_changed:
                d.engine_shutdown = event
                self._notice(
                    ts,
                    "error",
                    "daemon: received SIGINT: its engine stopped its workers, yet it still answers gRPC and /status "
                    "and accepts proofs it will never prove (they wait forever): restart it",
                )
        elif isinstance(event, ev.Eviction):
            self._on_eviction(event, ts)
        elif isinstance(event, ev.BudgetStall):
            self._on_budget_stall(event)
        elif isinstance(event, ev.DaemonStarting | ev.DaemonReady):
            daemon_changed = self._log_lifecycle(event)
            if isinstance(event, ev.DaemonStarting):
                self._warned.clear()
                self._run_begins("log")  # after _log_lifecycle: a bare log's restart ends the run before
                self.daemon.runs = self.runs()
                self.daemon.engine_shutdown = None  # a new process: its engine proves
                daemon_changed = True
        elif isinstance(event, ev.LogRecord) and event.level in ("WARN", "ERROR"):
            self.warnings.append(event)
            daemon_changed = False
            if event.message not in self._warned:
                # The daemon's own warnings (config.rs, nvidia-smi, …): one notice per text and run.
                self._warned.add(event.message)
                self._notice(ts, "warning" if event.level == "WARN" else "error", f"daemon: {event.message}")
        else:
            daemon_changed = False
        if daemon_changed:
            self.daemon_version += 1
        timeline_changed = self.timeline.apply(cast(ev.LogEvent, event))
        self._notice_outcomes(ts)
        return daemon_changed or timeline_changed

    def _notice(self, t: float | None, level: Literal["info", "warning", "error"], text: str) -> None:
        at = t if t is not None else self.last_t
        self.notices.append(ev.Notice(at if at is not None else 0.0, level, text))

    def _on_eviction(self, event: ev.Eviction, ts: float | None) -> None:
        """An SRS or PCE left memory (srs_manager.rs ``evict``, the engine.rs evictor)."""
        d = self.daemon
        circuit = event.what if event.srs else _srs_entry(event.what)
        if not event.srs and self.evictions:
            last = self.evictions[-1][1]
            if last.srs and last.what == circuit:
                return  # the evictor's own line for the SRS eviction srs_manager.rs just logged
        self.evictions.append((ts if ts is not None else self.last_t, event))
        if circuit is not None and circuit in d.srs_loaded:
            d.srs_loaded = tuple(c for c in d.srs_loaded if c != circuit)
        freed = f", {event.freed_gib} GiB freed" if event.freed_gib is not None else ""
        what = f"SRS {event.what}" if event.srs else event.what
        self._notice(ts, "info", f"evicted {what}{freed}")
        self.memory_version += 1

    def _on_budget_stall(self, event: ev.BudgetStall) -> None:
        """memory.rs warns on every acquire larger than the whole budget; one notice per size suffices."""
        repeated = any(s.amount_gib == event.amount_gib for s in self.budget_stalls)
        self.budget_stalls.append(event)
        self.memory_version += 1
        if not repeated:
            self._notice(
                event.ts,
                "error",
                f"budget stall: a {event.amount_gib} GiB reservation exceeds the {event.total_gib} GiB total "
                "budget and will block forever (raise memory.total_budget)",
            )

    def _notice_outcomes(self, ts: float | None) -> None:
        """A notice for each job the timeline lost since the last call, and for each failure with a text
        not said yet in this daemon run, in the daemon's own words (24 proofs failing for one reason are
        one notice); the reason comes first, so that a notice cut to the dashboard's width still says it."""
        timeline = self.timeline
        for job in timeline.overtaken[self._overtaken_seen :]:
            self._notice(ts, "error", f"lost: {lost_reason(job)} (job {job.job_id})")
        self._overtaken_seen = len(timeline.overtaken)
        new = timeline.failed - self._failures_seen
        if new <= 0:
            return
        self._failures_seen = timeline.failed
        recent = timeline.recent_failures
        for job in list(recent)[max(0, len(recent) - new) :]:
            text = job.error or "failed (the daemon gave no reason)"
            if f"failed: {text}" in self._warned:
                continue
            self._warned.add(f"failed: {text}")
            self._notice(ts, "error", f"failed: {text} (job {job.job_id})")

    def _log_lifecycle(self, event: ev.DaemonStarting | ev.DaemonReady) -> bool:
        """A bare log's daemon runs, as the log shows them; a supervisor's events win when present."""
        if self._observed_lifecycle:
            return False
        d = self.daemon
        if isinstance(event, ev.DaemonStarting):
            if d.phase in ("starting", "ready") and d.exit is None:
                segments = self.timeline.segments
                last_seen = segments[-1].last_time if segments else None
                self.log_ended(
                    last_seen if last_seen is not None else event.ts,
                    "the log shows a new daemon start: the previous run ended without a word",
                )
            self.daemon = DaemonState(phase="starting", log_path=self.log_source, launched_t=event.ts)
        else:
            d.phase = "ready"
            d.listen = event.address
            d.ready_t = event.ts
            if event.ts is not None and d.launched_t is not None:
                d.startup_s = event.ts - d.launched_t
        return True

    def run_ending(self, segment: int) -> str:
        """How daemon run ``segment`` took its unfinished jobs with it, in the words the waterfall shows
        (an OOM kill named as such, not only "incomplete")."""
        cause = next((exit.cause for index, exit in self.exits if index == segment), None)
        if cause == "oom_kill":
            return "killed with the daemon (OOM)"
        if cause == "stopped":
            return "stopped with the daemon"
        if cause in ("signal", "error"):
            return "killed with the daemon (crash)"
        return "incomplete (daemon run ended)"

    def log_ended(self, t: float | None, evidence: str) -> None:
        """A bare log says its daemon died (cut mid-line, or restarted): record the exit as the log shows it."""
        at = t if t is not None else self.last_t
        d = self.daemon
        exited = ev.DaemonExited(
            at if at is not None else 0.0, d.pid, None, None, "unknown", (evidence,), d.fatal_error
        )
        self._record_exit(exited)
        d.phase = "dead"
        d.exit = exited
        self.daemon_version += 1
        self.version += 1


def _srs_entry(label: str) -> str | None:
    """The circuit id of the evictor's ``srs:<circuit>`` entry label (engine.rs evictor); None for PCE."""
    return label[4:] if label.startswith("srs:") else None


def model_of(
    events: Iterable[ev.Event], log_source: str | None = None, max_jobs: int = DEFAULT_MAX_JOBS
) -> SessionModel:
    """The model of a whole recording (replay opens on it; export and report are built from it)."""
    model = SessionModel(Timeline(max_jobs=max_jobs), log_source=log_source)
    for event in events:
        model.apply(event)
    return model


# Log events that carry no printed time and that nothing but the timeline reads.
_TIMELINE_ONLY: Final = frozenset({ev.TimelineEvent, ev.CuzkTiming, ev.NttTiming, ev.DetailLines})
# Log events with a printed time that nothing but the timeline reads.
_TIMED_DETAILS: Final = frozenset({ev.GpuTiming, ev.FinTiming})
