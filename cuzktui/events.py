"""The typed events that every source produces and every sink consumes.

There is one stream of events (see docs/architecture.md): the daemon log (parsed line by line by
``logparse``), the samplers, the supervisor, the status poller and the benchmark runner all
produce instances of the classes below, and the session model, the recorder and the UI
consume them. Replay of a recorded session yields exactly the same classes, which is what
makes live and replay indistinguishable to the UI.

Two families:

* **Log events** come from parsing one line of daemon output. They carry the timestamp the
  daemon printed (``ts``, seconds since the Unix epoch) when the line has one; TIMELINE and
  CUZK_TIMING lines have none (TIMELINE has an offset from the engine start instead).
  They are not written to the session's event file: the raw log is recorded and re-parsed.
* **Observed events** are produced by the tool itself (samples, lifecycle, benchmark). They
  always carry ``t``, the wall-clock time (Unix seconds) of the observation, and are
  recorded as JSON Lines through :func:`to_record` / :func:`from_record`.

All events are frozen dataclasses with slots: cheap to create at log rate, and safe to share
between the ingest thread and the UI.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal


class Stream(StrEnum):
    """Which of the daemon's output streams a line came from (unknown for a merged file)."""

    STDOUT = "stdout"
    STDERR = "stderr"
    UNKNOWN = "unknown"


# --------------------------------------------------------------------------------------------
# Log events
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """One tracing span of a human log line, e.g. ``synthesize_partition{job_id="x" partition=3}``."""

    name: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """A ``TIMELINE,<offset_ms>,<EVENT>,<job_id>,<detail>`` line (stderr)."""

    offset_ms: int
    event: str
    job_id: str
    detail: dict[str, str] = field(default_factory=dict)
    partition: int | None = None
    worker: int | None = None
    # A monolithic job (PoSt, batched PoRep) has no partition index in SYNTH_*/GPU_QUEUE.
    monolithic: bool = False


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A tracing-format human line that is not one of the notable lines below."""

    ts: float | None
    level: str
    target: str
    message: str
    spans: tuple[Span, ...] = ()
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuTiming:
    """A ``GPU_TIMING <stage>`` line; ``values`` holds the integer ``*_ms`` fields."""

    ts: float | None
    stage: str
    worker_id: int | None
    partition: int | None
    job_id: str | None
    values: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FinTiming:
    """A ``FIN_TIMING <stage>`` line (finalizer or malloc_trim)."""

    ts: float | None
    stage: str
    worker_id: int | None
    partition: int | None
    job_id: str | None
    values: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CuzkTiming:
    """A ``CUZK_TIMING: ...`` line from the C++ prover (stderr, no timestamp, no job id)."""

    values: dict[str, int]
    gpu: int | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class DaemonStarting:
    """``cuzk-daemon starting``: a new daemon process began writing to the log."""

    ts: float | None


@dataclass(frozen=True, slots=True)
class EngineShutdown:
    """``received SIGINT, shutting down`` (main.rs, its SIGINT handler) or ``shutting down cuzk engine``
    (engine.rs ``Engine::shutdown``, called only from that handler): the engine's dispatchers and workers
    stop, while gRPC and /status keep serving; a proof sent afterwards is enqueued and never proved
    (docs/daemon-interface.md §2). ``sigint``: the handler's own line."""

    ts: float | None
    sigint: bool


@dataclass(frozen=True, slots=True)
class EngineStarted:
    """``starting cuzk engine``: the TIMELINE epoch (offset 0) of this daemon run."""

    ts: float | None
    pipeline_enabled: bool | None = None


@dataclass(frozen=True, slots=True)
class DaemonReady:
    """``cuzk-daemon ready, serving on <address>`` (logged before a TCP bind: not proof of readiness)."""

    ts: float | None
    address: str


@dataclass(frozen=True, slots=True)
class BudgetInitialized:
    """``memory budget initialized total_budget_gib=N``."""

    ts: float | None
    total_budget_gib: int


@dataclass(frozen=True, slots=True)
class PipelineConfigured:
    """``starting pipeline: ...``: the derived pipeline sizes the daemon actually uses."""

    ts: float | None
    max_partitions_in_budget: int | None
    synth_worker_count: int | None
    total_workers: int | None


@dataclass(frozen=True, slots=True)
class SrsLoadStarted:
    """``loading SRS from disk``."""

    ts: float | None
    circuit_id: str
    path: str
    file_size_gib: int | None


@dataclass(frozen=True, slots=True)
class SrsLoaded:
    """``SRS loaded successfully``."""

    ts: float | None
    circuit_id: str
    elapsed_ms: int | None
    budget_used_gib: int | None
    budget_available_gib: int | None


@dataclass(frozen=True, slots=True)
class PceActivity:
    """A PCE extraction / save / cache / evict line; ``phase`` says which."""

    ts: float | None
    phase: Literal["extract_start", "extract_done", "extract_failed", "saved", "cached", "evicted"]
    circuit_id: str | None
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionSynthesized:
    """``partition synthesis complete, pushing to GPU queue``."""

    ts: float | None
    job_id: str
    partition: int
    synth_ms: int


@dataclass(frozen=True, slots=True)
class ProofAssembled:
    """``Phase 7: all partitions complete, proof assembled`` or the monolithic completion line."""

    ts: float | None
    job_id: str | None
    proof_len: int | None
    total_ms: int | None
    synth_ms: int | None
    gpu_ms: int | None


@dataclass(frozen=True, slots=True)
class ProofFailedLine:
    """An ERROR line that reports a failed partition, job or prove call; ``dispatch`` is the synthesis
    dispatcher's span it was logged in (engine.rs process_batch: an ERROR there fails the batch's jobs,
    whatever its text), None outside one."""

    ts: float | None
    message: str
    error: str
    job_id: str | None = None
    partition: int | None = None
    dispatch: Span | None = None


@dataclass(frozen=True, slots=True)
class SelfCheck:
    """A PoRep self-check verdict (engine.rs): ``PASSED`` completes a job whose proof was assembled,
    ``FAILED`` / ``error`` fail it (the assembled line comes *before* the check)."""

    ts: float | None
    job_id: str | None
    passed: bool
    error: str = ""


@dataclass(frozen=True, slots=True)
class BatchSplit:
    """``batched proof completed — splitting results`` (engine.rs ``process_monolithic_result``); no job id."""

    ts: float | None
    num_sectors: int | None


@dataclass(frozen=True, slots=True)
class BatchMemberDelivered:
    """``sector proof delivered from batch``: one member of a batch got its proof (pending its self-check)."""

    ts: float | None
    job_id: str
    sector_idx: int | None
    total_ms: int | None


@dataclass(frozen=True, slots=True)
class MonolithicProcessing:
    """``processing job (monolithic)`` (engine.rs, monolithic worker): the job left the GPU queue."""

    ts: float | None
    job_id: str | None
    worker_id: int | None
    proof_kind: str | None


@dataclass(frozen=True, slots=True)
class JobQueued:
    """``job enqueued`` / ``job dequeued for proving`` (scheduler.rs) and ``dispatching per-partition
    synthesis (budget-gated)`` (engine.rs): the scheduler and budget waits before SYNTH_START."""

    ts: float | None
    stage: Literal["enqueued", "dequeued", "dispatched"]
    job_id: str
    proof_kind: str | None = None
    queue_position: int | None = None


@dataclass(frozen=True, slots=True)
class Eviction:
    """``SRS evicted`` (srs_manager.rs ``evict``) or ``evicted for memory pressure`` (engine.rs evictor)."""

    ts: float | None
    what: str  # the circuit id, or the evictor's entry label ("SRS(porep-32g)", "PCE(...)")
    freed_gib: int | None
    srs: bool  # True for the SRS manager's own line


@dataclass(frozen=True, slots=True)
class BudgetStall:
    """WARN ``acquire request exceeds total budget — will block until possible`` (memory.rs): a hang."""

    ts: float | None
    amount_gib: int | None
    total_gib: int | None


@dataclass(frozen=True, slots=True)
class NttTiming:
    """A ``CUZK_NTT_H: …`` line (groth16_ntt_h.cu, stderr): the H-term NTT/MSM phases, in ms."""

    values: dict[str, int]


@dataclass(frozen=True, slots=True)
class DetailLines:
    """A run of C++ timing lines (``CUZK_TIMING`` / ``CUZK_NTT_H``) a post-mortem reader left unparsed:
    the log's bytes ``[start, start + len(text))`` (``text``: those bytes, inert lines between them
    included), ``gpu`` the ordinal they name (``… on gpu G``, None for most), and ``reread`` to read a
    range of that log again when a partition's details are wanted (session.LogFollower, lazy details).
    """

    start: int
    text: bytes
    gpu: int | None
    reread: typing.Callable[[int, int], bytes] = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class FatalErrorLine:
    """The first line of a fatal ``Error: <context>`` report (stderr); causes follow as plain lines."""

    context: str


@dataclass(frozen=True, slots=True)
class PlainLine:
    """Anything else: an unknown or truncated line, a ``Caused by:`` line, a panic message."""

    text: str


LogEvent = (
    TimelineEvent
    | LogRecord
    | GpuTiming
    | FinTiming
    | CuzkTiming
    | DaemonStarting
    | EngineStarted
    | EngineShutdown
    | DaemonReady
    | BudgetInitialized
    | PipelineConfigured
    | SrsLoadStarted
    | SrsLoaded
    | PceActivity
    | PartitionSynthesized
    | ProofAssembled
    | ProofFailedLine
    | SelfCheck
    | BatchSplit
    | BatchMemberDelivered
    | MonolithicProcessing
    | JobQueued
    | Eviction
    | BudgetStall
    | NttTiming
    | DetailLines
    | FatalErrorLine
    | PlainLine
)


# --------------------------------------------------------------------------------------------
# Observed events (recorded in the session as JSON Lines)
# --------------------------------------------------------------------------------------------

DaemonMode = Literal["real", "engine", "attached"]
# "stopped": the supervisor asked for the exit (SIGTERM, or SIGKILL after the grace period) and got it.
ExitCause = Literal["oom_kill", "signal", "stopped", "error", "clean", "unknown"]


@dataclass(frozen=True, slots=True)
class DaemonLaunched:
    """The supervisor started (or attached to) a daemon."""

    t: float
    mode: DaemonMode
    pid: int | None
    command: tuple[str, ...]
    config_path: str | None
    listen: str
    log_path: str | None
    status_url: str | None = None
    cgroup_path: str | None = None
    memory_limit_bytes: int | None = None
    # The engine's [engine] memory_scale (real bytes per nominal byte); None for a real daemon.
    # The model shows an engine's memory in nominal bytes so the charts read as the emulated box.
    memory_scale: float | None = None
    # The engine's [engine] time_scale (real seconds per modelled second); None for a real daemon.
    time_scale: float | None = None


@dataclass(frozen=True, slots=True)
class DaemonReadyObserved:
    """The first successful GetStatus after a launch: the daemon really serves."""

    t: float
    pid: int | None
    startup_s: float
    # The daemon's own uptime when it first answered (GetStatus uptime_seconds, service.rs get_status):
    # for an attached daemon, "up" is this, not the time since we attached.
    uptime_s: float | None = None


@dataclass(frozen=True, slots=True)
class DaemonLiveness:
    """An attached daemon stopped answering (gRPC and /status both silent, or nothing listens at its
    address), or answers again; ``detail`` says what was tried and what came back."""

    t: float
    answering: bool
    detail: str
    uptime_s: float | None = None


@dataclass(frozen=True, slots=True)
class DaemonExited:
    """The daemon process ended; ``cause`` is the diagnosis and ``evidence`` why we believe it."""

    t: float
    pid: int | None
    returncode: int | None
    signal: int | None
    cause: ExitCause
    evidence: tuple[str, ...] = ()
    error_report: str | None = None
    # Why, when the evidence says (an OOM kill by a budget above the memory limit): cuzktui.diagnosis.
    root_cause: str | None = None
    # A planned stop, never a death, in the dashboard's words: one that hands the daemon over (supervisor.HANDED_TO_*,
    # BENCHMARK_OVER) or restarts it to apply a config (restarting_to_apply).
    handover: str | None = None


# DaemonExited.handover of the stop that restarts a launched daemon with a new config version (an apply): the
# dashboard says RESTARTING where it says HANDED OVER for a hand-over (figures.planned_stop).
RESTARTING_TO_APPLY: Final = "restarting to apply config"


def restarting_to_apply(version: int) -> str:
    return f"{RESTARTING_TO_APPLY} v{version}"


@dataclass(frozen=True, slots=True)
class ConfigApplied:
    """A config version was written and the daemon (re)started with it."""

    t: float
    version: int
    path: str
    changes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemorySample:
    """One memory sample: daemon process-tree RSS, cgroup usage/limit, the daemon's budget."""

    t: float
    rss_bytes: int | None
    cgroup_usage_bytes: int | None = None
    cgroup_limit_bytes: int | None = None
    budget_total_bytes: int | None = None
    budget_used_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU's memory and utilisation; ``source`` says whether NVML or the daemon reported it."""

    t: float
    index: int
    name: str
    used_bytes: int | None
    total_bytes: int | None
    utilization_pct: float | None = None
    source: Literal["nvml", "daemon"] = "nvml"
    # The daemon's own share of ``used_bytes`` (its process tree, from NVML's per-process list);
    # None where NVML cannot attribute memory to processes (unsupported, or another PID namespace).
    daemon_used_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """A summary of one HTTP ``/status`` poll (the live pipeline view the daemon exposes)."""

    t: float
    uptime_secs: float
    budget_total_bytes: int
    budget_used_bytes: int
    synthesizing: int
    gpu_workers_busy: int
    gpu_workers_total: int
    partitions_waiting_gpu: int
    # /status "counters" total_completed / total_failed, kept under names that say whose they are:
    # status.rs counts partitioned jobs only (monolithic work never reaches it: after 3 monolithic
    # failures it says 0) and a restart zeroes it. Never the proof counts: those are GetStatus's
    # (DaemonProofCounts) and the log's. Sessions recorded before the rename call them
    # total_completed / total_failed (read through _RENAMED_FIELDS).
    status_json_completed: int
    status_json_failed: int
    # Per partition, "job_id<TAB>index<TAB>state<TAB>synth_ms<TAB>gpu_ms<TAB>worker" (empty fields: none):
    # recorded only for a daemon watched without its log, whose waterfall is drawn from them.
    partitions: tuple[str, ...] = ()
    # Per GPU worker, "worker_id<TAB>gpu_ordinal" (status.rs GpuWorkerSnapshot), recorded with ``partitions``:
    # which GPU each lane of that waterfall is on.
    worker_gpus: tuple[str, ...] = ()
    # The circuit ids of ``allocations.srs`` (status.rs): the SRS really resident now (None: not reported).
    srs_resident: tuple[str, ...] | None = None
    # /status "allocations" (status.rs): bytes of SRS and PCE entries held now; None where not reported.
    srs_resident_bytes: int | None = None
    pce_resident_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class DaemonProofCounts:
    """The running daemon's own proof counts: GetStatus ``total_proofs_completed`` /
    ``total_proofs_failed`` (cuzk-server service.rs get_status, from engine.rs's job tracker, which
    every path reaches, monolithic and batched included). A restart zeroes them. Recorded when they
    change."""

    t: float
    completed: int
    failed: int


@dataclass(frozen=True, slots=True)
class BenchStarted:
    t: float
    bench_id: str
    kind: str
    count: int
    concurrency: int
    oom_retries: int
    # The engine's [engine] time_scale (real seconds per modelled second); None for a real daemon.
    time_scale: float | None = None


@dataclass(frozen=True, slots=True)
class ProofSubmitted:
    t: float
    bench_id: str
    job_id: str
    kind: str


@dataclass(frozen=True, slots=True)
class ProofFinished:
    """One benchmark proof came back (from AwaitProofResponse / ProveResponse) or was lost."""

    t: float
    bench_id: str
    job_id: str
    kind: str
    status: Literal["COMPLETED", "FAILED", "LOST"]
    error: str = ""
    queue_wait_ms: int = 0
    synthesis_ms: int = 0
    gpu_compute_ms: int = 0
    total_ms: int = 0
    wall_ms: int = 0
    # False when no result came back (the call failed, or the proof was lost with its daemon): the
    # timings above are then absent, not zero.
    answered: bool = True


@dataclass(frozen=True, slots=True)
class BenchRestart:
    """The benchmark restarted the daemon after it died (OOM recovery)."""

    t: float
    bench_id: str
    attempt: int
    reason: ExitCause
    evidence: tuple[str, ...]
    total_budget: str
    resubmitted: int
    explanation: str = ""  # why the budget was the cause (cuzktui.diagnosis.oom_verdict)


@dataclass(frozen=True, slots=True)
class BenchFinished:
    """The end of a benchmark. With ``time_scale`` (an engine run) ``wall_s`` and ``proofs_per_hour``
    are in the modelled box's time (real ÷ time_scale), never the emulator's speed."""

    t: float
    bench_id: str
    completed: int
    failed: int
    wall_s: float
    proofs_per_hour: float
    outcome: Literal["completed", "failed", "cancelled"]
    time_scale: float | None = None
    # Of wall_s: time in daemon runs that were killed, and in restarting the daemon.
    killed_s: float = 0.0
    restart_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Notice:
    """A message for the operator (shown in the UI, kept in the session)."""

    t: float
    level: Literal["info", "warning", "error"]
    text: str


@dataclass(frozen=True, slots=True)
class StartFailed:
    """The tool could not launch or attach to the daemon: a missing binary, a config it refuses, no
    listen address, a daemon that died or stayed silent before serving. ``text`` is the whole story
    (the dashboard keeps it on screen in full until a later launch)."""

    t: float
    text: str


@dataclass(frozen=True, slots=True)
class BenchRunnerFailed:
    """A benchmark runner the TUI handed its daemon to ended with a non-zero exit status (a negative one:
    killed by that signal), for a reason not checked before the hand-over; ``error`` is what it wrote of
    it (cuzktui.bench.runner_error), "" when it wrote nothing. The Bench screen keeps it on screen until a
    later benchmark starts."""

    t: float
    returncode: int
    error: str

    @property
    def text(self) -> str:
        how = f"exit {self.returncode}" if self.returncode >= 0 else f"killed by signal {-self.returncode}"
        said = self.error or "it wrote no error (its output is bench.log in the session)"
        return f"benchmark failed ({how}): {said}"


ObservedEvent = (
    DaemonLaunched
    | DaemonReadyObserved
    | DaemonExited
    | DaemonLiveness
    | ConfigApplied
    | MemorySample
    | GpuSample
    | StatusSnapshot
    | DaemonProofCounts
    | BenchStarted
    | ProofSubmitted
    | ProofFinished
    | BenchRestart
    | BenchFinished
    | BenchRunnerFailed
    | Notice
    | StartFailed
)

Event = LogEvent | ObservedEvent

_OBSERVED: Final[dict[str, type[Any]]] = {cls.__name__: cls for cls in typing.get_args(ObservedEvent)}
# Fields recorded under another name by earlier versions: type -> {old name: new name}.
_RENAMED_FIELDS: Final[dict[str, dict[str, str]]] = {
    "StatusSnapshot": {"total_completed": "status_json_completed", "total_failed": "status_json_failed"},
}


def is_observed(event: Event) -> typing.TypeGuard[ObservedEvent]:
    """Whether ``event`` is one the tool observed (recorded in events.jsonl), not a log line."""
    return type(event).__name__ in _OBSERVED


class RecordError(ValueError):
    """A JSON record that is not a valid observed event."""


def to_record(event: ObservedEvent) -> dict[str, Any]:
    """The JSON-ready dict of an observed event, tagged with its type name."""
    record: dict[str, Any] = {"type": type(event).__name__}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        record[f.name] = list(value) if isinstance(value, tuple) else value
    return record


def from_record(record: Any) -> ObservedEvent:
    """Rebuild an observed event from :func:`to_record`'s output; RecordError when it is not one."""
    if not isinstance(record, dict):
        raise RecordError(f"expected a JSON object, got {type(record).__name__}")
    name = record.get("type")
    cls = _OBSERVED.get(name) if isinstance(name, str) else None
    if cls is None:
        raise RecordError(f"unknown event type {name!r}")
    renamed = _RENAMED_FIELDS.get(cls.__name__, {})
    if any(old in record for old in renamed):
        record = {renamed.get(key, key): value for key, value in record.items()}
    hints = _field_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in record:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{name}: missing field {f.name!r}")
            continue
        value = record[f.name]
        if not _matches(value, hints[f.name]):
            raise RecordError(f"{name}.{f.name}: unexpected value {value!r}")
        kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    return typing.cast(ObservedEvent, cls(**kwargs))


_HINT_CACHE: dict[type[Any], dict[str, Any]] = {}


def _field_hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINT_CACHE.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINT_CACHE[cls] = hints
    return hints


def _matches(value: Any, hint: Any) -> bool:
    """A shallow JSON type check of ``value`` against a field's annotation."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if origin is tuple:
        return isinstance(value, list)
    if origin is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True
