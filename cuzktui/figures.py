"""Figures derived from the session model that the screens show: "now", throughput, proof counts.

Headless and pure: each is a function of the model (its times come from the model, ``model.last_t``
being "now", never from the wall clock), so a replayed or faked model always gives the same figures
and they are tested without a terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from . import events as ev
from .logparse import format_timestamp
from .model import BenchState, SessionModel
from .timeline import Job, Timeline, lost_reason
from .units import format_duration

if TYPE_CHECKING:
    from .controller import ReplayClock

RATE_WINDOW_S = 600.0


def job_outcome(job: Job) -> tuple[str, str] | None:
    """("FAILED", the daemon's failure text) or ("LOST", why its caller is never answered) of a job that
    failed or was lost; None for any other job."""
    if job.status == "failed":
        return "FAILED", job.error or "(the daemon gave no reason)"
    if job.status == "lost":
        return "LOST", lost_reason(job)
    return None


def find_job(model: SessionModel, job_id: str) -> Job | None:
    """The latest daemon run's job of that id (a benchmark resubmits ids after a restart)."""
    return max((job for job in model.timeline.jobs() if job.job_id == job_id), key=lambda j: j.segment, default=None)


def unnamed_job_lines(job: Job) -> tuple[tuple[str, ...], ...]:
    """The lines of a job that do not name it, each as texts that line holds all of: the line that failed it
    when that line names no job (its timestamp and message, Timeline's ``failed_by``)."""
    if job.failed_by is None:
        return ()
    ts, message = job.failed_by
    return ((format_timestamp(ts), message),)


def timeline_now(model: SessionModel) -> float | None:
    """The right end of "live": the model's latest time when the run is anchored to wall time."""
    timeline = model.timeline
    span = timeline.time_span()
    segments = timeline.segments
    if segments and segments[-1].anchored and model.last_t is not None:
        return max(model.last_t, span[1]) if span else model.last_t
    return span[1] if span else None


def waterfall_edge(model: SessionModel) -> float | None:
    """Where a live waterfall's window ends: now while a job is in flight, else the timeline's last event.
    An idle daemon adds nothing to see: a window that grew with the idle time squeezed a finished
    benchmark's bars to a column or two (zoomed, it moved them out of view)."""
    span = model.timeline.time_span()
    if span is not None and not model.timeline.in_flight:
        return span[1]
    return timeline_now(model)


def session_origin(timeline: Timeline, default: float) -> float:
    """Time 0 of the waterfall's axis labels: the first event of the session."""
    span = timeline.time_span()
    return span[0] if span is not None else default


class ProofCounts(NamedTuple):
    completed: int  # the whole session: every daemon run
    failed: int
    runs: int  # the daemon's runs (SessionModel.runs), at least 1
    run_completed: int  # the current run


def proof_counts(model: SessionModel) -> ProofCounts:
    """Proofs of the whole session: the timeline's counts of the earlier daemon runs (with what GetStatus
    counted in them beyond the log, ``model.unlogged_counts``) plus the current run's (its GetStatus
    counts when they are more than the log showed, e.g. attached after it started, or watched without its
    log). A restarted daemon's counts start again from 0: alone they would hide the earlier runs' proofs.
    /status's counters never count: they miss monolithic work (status.rs; see StatusSnapshot)."""
    timeline = model.timeline
    segments = timeline.segments
    run_completed = segments[-1].completed if segments else 0
    run_failed = segments[-1].failed if segments else 0
    reported = model.run_reported()
    if reported is not None:
        run_completed = max(run_completed, reported.completed)
        run_failed = max(run_failed, reported.failed)
    unlogged_completed, unlogged_failed = model.unlogged_counts
    earlier_completed = timeline.completed - (segments[-1].completed if segments else 0) + unlogged_completed
    earlier_failed = timeline.failed - (segments[-1].failed if segments else 0) + unlogged_failed
    return ProofCounts(
        earlier_completed + run_completed, earlier_failed + run_failed, max(1, model.runs()), run_completed
    )


def session_rate(model: SessionModel) -> tuple[float, float] | None:
    """(proofs per hour, over how many seconds): the completions of the last ``RATE_WINDOW_S`` of
    the session, or of all of it when shorter, whichever daemon run they came from (so it agrees
    with the session's count; before any completion or timeline event, None)."""
    span = model.timeline.time_span()
    now = timeline_now(model)
    if span is None or now is None or not model.timeline.completed:
        return None
    window = min(RATE_WINDOW_S, now - span[0])
    rate = model.timeline.proofs_per_hour(window, now) if window > 0 else None
    if rate is None:
        return None
    scale = model.daemon.time_scale
    # An engine's log runs time_scale times faster than the box it models: per box hour, over box seconds.
    return (rate, window) if scale is None else (rate * scale, window / scale)


def clock_label(time_scale: float | None) -> str:
    """Whose clock a rate is on, said beside every rate: an engine's figures are the emulated box's
    (real time ÷ ``time_scale``: the engine runs that much faster than the box it models), a real
    daemon's are wall time."""
    return "wall time" if time_scale is None else "emulated box time"


def bench_per_hour(bench: BenchState, now: float | None) -> float | None:
    """The benchmark's throughput: its own figure once finished, else completed over elapsed (both in
    the modelled box's time for an engine run, as the bench records them)."""
    if bench.finished is not None:
        return bench.finished.proofs_per_hour
    if now is None or now <= bench.started_t or not bench.completed:
        return None
    return bench.completed * 3_600_000.0 / bench.box_ms(round((now - bench.started_t) * 1000))


def not_proving(model: SessionModel) -> str | None:
    """Why a daemon that answers will never prove again, with what to do; None while it proves.

    On SIGINT the daemon (main.rs, engine.rs ``Engine::shutdown``) stops its dispatchers and workers but
    keeps serving gRPC and /status: a proof sent afterwards is enqueued and never answered
    (docs/daemon-interface.md §2). Only a new process proves again.
    """
    d = model.daemon
    if d.engine_shutdown is None or d.phase not in ("starting", "ready"):
        return None
    if d.mode in ("engine", "real"):
        how = "quit with s (stop) and launch it again, or apply a knob change (Knobs, ctrl+s)"
    else:
        how = "under systemd: systemctl restart its unit; else SIGTERM it and start it again"
    # What to do first: a narrow panel cuts the rest.
    return (
        "restart it: a SIGINT stopped its engine; it still answers gRPC and /status and accepts proofs, "
        f"which it will never prove ({how})"
    )


def planned_stop(model: SessionModel) -> tuple[str, str] | None:
    """The planned stop the daemon is in, as (the dashboard's label, what it is): a restart to apply a config,
    or a hand-over to a benchmark or a knob search and back (DaemonExited.handover). None while it runs, after
    any other end, and once the start that was to follow the stop failed: a daemon that is not coming back."""
    d = model.daemon
    exit = d.exit
    if d.phase != "dead" or exit is None or exit.handover is None or start_failed_since_exit(model):
        return None
    return ("RESTARTING" if exit.handover.startswith(ev.RESTARTING_TO_APPLY) else "HANDED OVER"), exit.handover


def start_failed_since_exit(model: SessionModel) -> bool:
    """Whether the tool's last try to start the daemon failed with none running since: never started, or not
    started again after its last exit (a restart to apply a config whose start failed)."""
    d = model.daemon
    if d.start_error is None or d.phase not in ("none", "dead"):
        return False
    return d.exit is None or d.start_error.t >= d.exit.t


def apply_stage(model: SessionModel, runs_before: int) -> str:
    """Where an apply stands, read from the model: the daemon's run counter and phase."""
    daemon = model.daemon
    if daemon.runs > runs_before:
        return "ready" if daemon.phase == "ready" else "restarting: waiting for the daemon to serve"
    if daemon.phase in ("dead", "none"):
        return "restarting"
    return "saving the config and draining proofs in flight"


def status_line(model: SessionModel, clock: ReplayClock | None) -> str:
    """The line every screen shows first: the daemon's state and, in a replay, where the cursor is, the
    speed and the keys that change them (the footer is cut on a narrow terminal; this line never is)."""
    daemon = model.daemon
    state = {"none": "no daemon", "starting": "starting", "ready": "ready", "dead": "DEAD"}[daemon.phase]
    if daemon.phase == "starting" and daemon.srs_loading:
        state = f"starting: loading SRS {daemon.srs_loading}"
    if daemon.silent is not None and daemon.phase != "dead":
        state = "NOT ANSWERING"
    elif not_proving(model) is not None:
        state = "NOT PROVING since a SIGINT: restart it"
    elif (planned := planned_stop(model)) is not None:
        state = planned[1]  # a restart to apply a config, a hand-over either way: never a death
    elif start_failed_since_exit(model):
        state = "NOT STARTED"
    if clock is None:
        return state
    where = "playing" if clock.playing else "paused"
    start, end = clock.span or (model.first_t, model.last_t)
    cursor = clock.cursor_t
    if cursor is not None and start is not None and end is not None:
        where += f" {format_duration(cursor - start)} / {format_duration(end - start)}"
    keys = f"space {'pause' if clock.playing else 'play'}, < > speed"
    return f"{state} · replay {where} x{clock.speed:g} ({keys})"
