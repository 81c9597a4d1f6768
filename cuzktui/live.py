"""The live controller: a daemon the TUI launched (or attached to), recorded as a session.

Every source writes into the session directory and the model is fed only by following that
directory (:class:`SessionFollower`), exactly as a replay is — so what the operator sees live is
what a replay of the session will show, and a benchmark runner (a separate process that writes
into the same session) appears in the TUI without any extra plumbing.

Ownership of the daemon: the TUI's :class:`Supervisor` owns it, except during a benchmark. A
benchmark runs in its own process (it must survive an SSH drop of the TUI) and needs to restart
the daemon itself after an OOM kill, so starting a benchmark hands the daemon over: the TUI stops
its daemon and the runner launches one with the same config in the same session. When the runner
ends, the TUI launches its daemon again with the session's latest config version — which keeps a
``total_budget`` the OOM recovery had to lower.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from . import events as ev
from .bench import (
    RUNNER_OUTPUT,
    BenchUsageError,
    checked_requests,
    runner_error,
    spawn_bench_process,
    with_engine_status,
)
from .client import ClientError, status_endpoint
from .config import ConfigDocument, ConfigError, build_config, load_config, save_atomic
from .controller import (
    BenchRequest,
    ControllerError,
    Identity,
    ReplayClock,
    TuneBest,
    TuneRequest,
    TuneSnapshot,
    TuneState,
)
from .daemon_address import DAEMON_DEFAULT_LISTEN
from .daemon_config import read_config
from .knobs import Severity
from .local import LocalQueries
from .log_copy import LogCopy, run_preamble
from .metrics import MetricsExporter
from .model import SessionModel
from .planner import memcheck_for
from .proofinputs import RequestParams
from .recording import DaemonRecorder
from .session import SessionFollower, SessionWriter, list_sessions, open_private_append, read_meta
from .supervisor import (
    HANDED_TO_BENCHMARK,
    HANDED_TO_TUNE,
    DaemonProgram,
    DaemonStartError,
    InFlight,
    Supervisor,
    SupervisorError,
    free_loopback_port,
    private_listen_address,
    program_problem,
)
from .system import CgroupError, MemoryCgroup
from .timeline import Partition, Timeline
from .tune import (
    BenchTrialRunner,
    Knobs,
    Search,
    SearchBlocked,
    SessionFigures,
    Trial,
    best_of,
    left_alone,
    new_search,
    read_trial_session,
    run_search,
    running_row,
    save_state,
    tier_line,
    time_basis,
    trial_configs,
    trial_line,
    trial_row,
)
from .units import GiB, UnitError, format_size, parse_duration

DRAIN_TIMEOUT_S = 600.0
# A daemon flooding its log must not starve the UI (issue 11). A poll reads the new log in slices of
# INGEST_SLICE_BYTES (~90 lines), parses and folds them into the model on the UI's event loop for
# INGEST_WORK_S, then pauses as long as that work took: the UI keeps about half of the loop, and a key
# waits for at most one stretch of work. Measured alternatives: parsing in a thread makes every GIL
# hand-off of the loop (each select) wait for the switch interval, which multiplied a key's cost
# several times; a parsing process would hand over events whose unpickling costs the loop as much as
# parsing them. The file is the only buffer: a poll reads no more than it folds in, so a flood it cannot
# keep up with waits on disk (memory stays bounded, no line is dropped) and is caught up on afterwards,
# said on the status line (log_backlog) and in notices.
INGEST_SLICE_BYTES = 16 << 10
INGEST_WORK_S = 0.008  # longer: keys wait longer; shorter: more of the time goes to the pauses' timers
# A poll that is behind returns after this long so the screens are redrawn (as often as when it is not
# behind: the app's poll interval); the app polls again at once.
POLL_BUDGET_S = 1.0
# Behind by more than this many bytes of log at the end of a poll is said in a notice (with its end).
BEHIND_NOTICE_BYTES = 1 << 20
# An attached daemon's log file is copied into the session (log_copy.LogCopy) at most this much a poll, in a
# thread: far more than a daemon writes in one, so the copy runs ahead of what the poll folds in.
COPY_BYTES_PER_POLL = 64 << 20


def _partition_phase(p: Partition) -> str:
    if p.gpu_end is not None:
        return "done"
    if p.gpu_pickup is not None or p.gpu_start is not None:
        return "on the GPU"
    if p.synth_end is not None:
        return "waiting for the GPU"
    if p.synth_start is not None:
        return "synthesizing"
    return "waiting"


def timeline_in_flight(timeline: Timeline, now: float) -> tuple[list[InFlight], set[str]]:
    """The log's view for a drain: the current daemon run's open jobs (what each partition is doing,
    for how long) and the ids of its jobs the log saw finish (so a leaked /status entry is ignored)."""
    segments = timeline.segments
    if not segments:
        return [], set()
    current = segments[-1].index
    open_jobs: list[InFlight] = []
    finished: set[str] = set()
    for job in timeline.jobs():
        if job.segment != current:
            continue
        if job.status != "running":
            finished.add(job.job_id)
            continue
        phases = [_partition_phase(p) for p in job.partitions.values()]
        order = ("synthesizing", "waiting for the GPU", "on the GPU", "waiting", "done")
        counts = ", ".join(f"{phases.count(name)} {name}" for name in order if name in phases)
        what = f"{job.kind or 'monolithic'} proof, {counts}" if job.monolithic else f"partitions: {counts}"
        age = now - job.first_time if job.first_time is not None else None
        open_jobs.append(InFlight(job.job_id, what, age, "log"))
    return open_jobs, finished


@dataclass(frozen=True, slots=True)
class AttachTarget:
    address: str
    status_url: str | None = None
    log_path: str | None = None
    journal_unit: str | None = None  # read the log with journalctl -u UNIT instead of a file
    pid: int | None = None  # the daemon's pid when known; else the owner of the listening socket


def find_detached_session(address: str, root: Path | None = None) -> Path | None:
    """The newest recorded session a TUI left running on ``address`` whose benchmark runner still runs.

    "Leave running" writes ``left_running`` into the session's meta and the runner its ``bench_pid``:
    attaching to that address again continues that session, so the Bench screen shows the benchmark.
    """
    for info in reversed(list_sessions(root)):
        meta = read_meta(info.path)
        left, pid = meta.get("left_running"), meta.get("bench_pid")
        if isinstance(left, dict) and left.get("listen") == address and isinstance(pid, int) and psutil.pid_exists(pid):
            return info.path
    return None


@dataclass(frozen=True, slots=True)
class LiveOptions:
    program: DaemonProgram | None  # None: attach to `attach`
    config_file: Path | None = None
    session_dir: Path | None = None
    attach: AttachTarget | None = None
    memory_limit: int | None = None  # run the daemon in a new memory cgroup of this size
    profile_gib: int | None = None  # on the engine: emulate a box of this much RAM
    run_bench: BenchRequest | None = None
    sample_interval: float = 1.0
    metrics_address: tuple[str, int] | None = None  # serve OpenMetrics here (cuzktui.metrics)
    # This program as a shell runs it again (commands/tui.py invoked_as): the printed attach line starts with it.
    command: tuple[str, ...] = ("cuzk-tui",)


# What a rolled-over session takes from the one it continues (the rest is its own: label, creation time).
_CARRIED_META = frozenset({"memcheck"})


def default_config(session_dir: Path) -> str:
    """A first config for a launch without one: loopback only (a private unix socket in the session,
    written into the file so the address is on record), status endpoint on. Without ``listen`` the
    daemon would serve on its built-in default (/run/curio/cuzk.sock), which this tool leaves to a
    daemon someone else runs. An engine emulates the box ``[engine] mem_total`` says (its default, the
    same wherever the engine starts, or ``--profile``'s, which :func:`with_profile` writes)."""
    return build_config(
        {
            "daemon.listen": private_listen_address(session_dir),
            "daemon.status_listen": f"127.0.0.1:{free_loopback_port()}",
        }
    )


def with_profile(config_text: str, profile_gib: int) -> str:
    """An engine config that emulates a box of ``profile_gib`` GiB ("auto" budgets read it), unless the
    config already says which box it emulates."""
    doc = ConfigDocument.parse(config_text)
    if doc.is_set("engine", "mem_total"):
        return config_text
    doc.set("engine", "mem_total", f"{profile_gib}GiB")
    return doc.text()


def profile_memory_limit(profile_gib: int, memory_scale: float) -> int:
    """Real bytes of the cgroup that makes the engine behave like a box of ``profile_gib`` GiB."""
    return int(profile_gib * GiB * memory_scale)


def _probe_memory_cgroup() -> None:
    """Make and remove a small memory cgroup; CgroupError says why this host cannot."""
    MemoryCgroup.create(f"cuzk-tui-probe-{os.getpid()}", 64 << 20).remove()


@dataclass(slots=True)
class _TuneRun:
    """A knob search the live controller runs in a thread: the search thread appends trials and sets
    ``running``; the event loop reads them for :meth:`LiveController.tune_snapshot`."""

    request: TuneRequest
    search: Search
    runner: BenchTrialRunner
    engine: bool
    cancel: threading.Event = field(default_factory=threading.Event)
    state: TuneState = "running"
    message: str = ""
    running: tuple[int, Knobs] | None = None  # the trial whose benchmark runs now
    figures: SessionFigures | None = None  # what that trial's session says so far
    best: tuple[tuple[str, int], TuneBest | None] | None = None  # keyed by (running config, trials recorded)
    task: asyncio.Task[None] | None = None


def _tune_ending(run: _TuneRun, directory: Path, command: tuple[str, ...]) -> tuple[TuneState, str]:
    """The search's final state and why it ended, in words (``command``: this program, for the resume line)."""
    search = run.search
    ran = sum(1 for t in search.trials if t.ran)
    resume = f"continue with {shlex.join([*command, 'tune', '--resume', str(directory)])}"
    if run.cancel.is_set():
        return "cancelled", f"cancelled after {ran} trial(s); {resume}"
    if search.next_knobs() is None:
        why = f"converged after {ran} trial(s): every neighbour of the best was tried or predicted not to fit"
    elif ran >= run.request.trials:
        why = f"the {run.request.trials} trials asked for have run; {resume}"
    else:
        why = f"the time budget ({run.request.time_budget}) is spent after {ran} trial(s); {resume}"
    return "finished", why


class LiveController(LocalQueries):
    """Drives a live daemon for the UI (implements :class:`cuzktui.controller.Controller`)."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self.model = SessionModel()
        self.session: SessionWriter | None = None
        self.supervisor: Supervisor | None = None
        self._follower: SessionFollower | None = None
        self._config_text: str | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._bench_proc: subprocess.Popen[bytes] | None = None
        self._bench_output_start = 0  # where the running runner's output begins in the session's bench.log
        self._bench_cancelled = False  # its end was asked for: no failure to say
        self._recorder: DaemonRecorder | None = None
        self._launch_lock = asyncio.Lock()
        self._poll_lock = asyncio.Lock()
        self._farewell = ""
        self._unrecorded = 0  # events lost since the session's disk last refused a write
        self._force_restart: asyncio.Event | None = None
        self._in_flight: list[InFlight] = []
        self.exporter: MetricsExporter | None = None
        self._tune: _TuneRun | None = None
        self._closing = False  # shutdown: a search that ends now does not relaunch the daemon
        self._behind_since: tuple[float, int] | None = None  # (when, lines read then) while behind the log
        self._log_copy: LogCopy | None = None  # an attached daemon's log file, copied into the session
        self._copy_error: str | None = None  # why the last copy failed, said once

    # -- identity ------------------------------------------------------------------------

    @property
    def identity(self) -> Identity:
        session_dir = self.session.path if self.session is not None else self.options.session_dir
        program = self.options.program
        if program is None:
            target = self.options.attach.address if self.options.attach else "?"
            return Identity("attached", f"attached to {target}", session_dir)
        if program.mode == "engine":
            profile = f", emulating a {self.options.profile_gib} GiB box" if self.options.profile_gib else ""
            return Identity("engine", f"cuzk-engine (embedded emulator{profile})", session_dir)
        return Identity("real", f"cuzk-daemon {program.argv[0]}", session_dir)

    @property
    def read_only(self) -> bool:
        return False

    # -- start ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Launch or attach; a start that cannot go on is kept on the dashboard in full
        (:class:`~cuzktui.events.StartFailed`) and raised, so a command without the UI says it too."""
        try:
            await self._start()
        except ControllerError as error:
            self._start_failed(str(error))
            raise

    async def _start(self) -> None:
        o = self.options
        # Before anything else (a session, the memcheck, the config's warnings): without the binary
        # none of it leads anywhere, and it would bury the one thing to fix.
        missing = program_problem(o.program) if o.program is not None else None
        if missing is not None:
            raise ControllerError(f"{missing}: nothing was launched")
        if o.metrics_address is not None:  # first: a port in use stops us before anything is launched
            exporter = MetricsExporter()
            try:
                exporter.serve(*o.metrics_address)
            except OSError as error:
                raise ControllerError(f"--metrics {o.metrics_address[0]}:{o.metrics_address[1]}: {error}") from error
            self.exporter = exporter
        mode = o.program.mode if o.program is not None else "attached"
        self.session = SessionWriter.create(label=mode, directory=o.session_dir, mode=mode)
        # The follower reads the session's daemon.log whatever the daemon: a launched one writes it, an attached
        # one's log file or journal is copied into it (so the session keeps what was followed, for replay).
        self._log_copy = self._copy_of(o.attach, self.session)
        self._follower = SessionFollower(self.session.path)
        self._tasks.append(asyncio.create_task(self._record_memcheck()))
        if o.program is None:
            assert o.attach is not None
            self._config_text = self._attached_config()
            self.supervisor = Supervisor(self.session, None, on_progress=self._progress)
            self._tasks.append(asyncio.create_task(self._attach(o.attach)))
        else:
            self._config_text = with_engine_status(self._initial_config(), o.program.mode)
            limit = o.memory_limit
            if o.profile_gib is not None and o.program.mode == "engine":
                self._config_text = with_profile(self._config_text, o.profile_gib)
                if limit is None:
                    limit = await self._profile_limit(o.profile_gib)
            self.supervisor = Supervisor(
                self.session,
                o.program,
                listen=self._listen_address(self._config_text),
                memory_limit=limit,
                on_progress=self._progress,
            )
            self._tasks.append(asyncio.create_task(self._launch(self._config_text, ())))
        self._recorder = DaemonRecorder(self.supervisor, self._record, o.sample_interval)
        self._recorder.start()
        if self.exporter is not None:
            self._tasks.append(asyncio.create_task(self.exporter.follow_daemon(self.model, o.sample_interval)))

    @staticmethod
    def _copy_of(target: AttachTarget | None, session: SessionWriter) -> LogCopy | None:
        """The copy of an attached daemon's log file into the session; None when there is none to make: no
        log file (a journal, /status only), or the file is the session's own (re-attaching to a daemon this
        tool launched, whose log the session already is)."""
        if target is None or target.log_path is None or target.journal_unit is not None:
            return None
        source, destination = Path(target.log_path), session.daemon_log_path
        os.close(open_private_append(destination))  # there from the start: the Logs screen shows the copy
        if source.exists() and source.samefile(destination):
            return None
        return LogCopy(source, destination)

    async def _log_caught_up(self) -> None:
        """Copy all the attached daemon's log file holds into the session now (the supervisor reads the daemon's
        last lines, its exit's fatal report, from the copy; the session keeps the log to the end of the watch)."""
        async with self._poll_lock:
            await self._copy_log(limit=None)

    async def _copy_log(self, limit: int | None = COPY_BYTES_PER_POLL) -> None:
        """Copy what the attached daemon's log file gained into the session, saying its rotations."""
        copy = self._log_copy
        if copy is None:
            return
        try:
            notes = await asyncio.to_thread(copy.step, limit)
        except OSError as error:
            why = f"cannot copy {copy.source} into the session ({error.strerror or error}): the log is not followed"
            if why != self._copy_error:
                self._copy_error = why
                self._notice("error", f"{why} until it can be read and written again")
            return
        if self._copy_error is not None:
            self._copy_error = None
            self._notice("info", f"{copy.source} is copied into the session again")
        for note in notes:
            self._notice("warning" if note.lost else "info", note.text)

    def _initial_config(self) -> str:
        o = self.options
        assert self.session is not None and o.program is not None
        path = o.config_file
        if path is not None and path.exists():
            try:
                doc = load_config(path)
            except ConfigError as error:
                raise ControllerError(
                    f"{error} — nothing was launched and the file is untouched; fix it "
                    f"(cuzk-tui config check {path}) and start again"
                ) from error
            for problem in doc.problems():
                if problem.severity is Severity.ERROR:
                    self._notice("error", f"{path}: {problem}")
                elif problem.severity is Severity.WARNING:
                    self._notice("warning", f"{path}: {problem}")
            return doc.text()
        text = default_config(self.session.path)
        if path is not None:
            save_atomic(text, path)
        listen = read_config(text).listen_address
        written = f"wrote a new config to {path}" if path is not None else "no config given: wrote one in the session"
        self._notice("info", f"the daemon serves on {listen}, a private socket of this session; {written} with it")
        return text

    def _listen_address(self, config_text: str) -> str:
        """Where the launched daemon serves, said on screen: the config's ``listen``, else a private
        socket of this session (the daemon's own default belongs to a daemon someone else runs, and
        an engine must never sit there)."""
        assert self.session is not None and self.options.program is not None
        listen = read_config(config_text).listen_address
        engine = self.options.program.mode == "engine"
        if listen is not None and not (engine and listen == DAEMON_DEFAULT_LISTEN):
            return listen
        private = private_listen_address(self.session.path)
        why = (
            f"the config sets no [daemon].listen, so the daemon would serve on its default {DAEMON_DEFAULT_LISTEN}"
            if listen is None
            else f"cuzk-engine never takes the real daemon's socket {DAEMON_DEFAULT_LISTEN}"
        )
        self._notice("info", f"{why}; launched on {private} instead, a private socket of this session (-l)")
        return private

    def _attached_config(self) -> str | None:
        """The config an attached daemon runs, as far as we can know: the ``--config`` file, read now.

        The daemon reads its config only at start and no RPC returns it, so without the file the
        running config is unknown (the Knobs screen says so rather than showing defaults as running).
        """
        path = self.options.config_file
        if path is None:
            return None
        try:
            return load_config(path).text()
        except (ConfigError, OSError) as error:
            self._notice("warning", f"--config {path}: {error}; the running config is unknown")
            return None

    def running_config_source(self) -> str | None:
        """Where the running config shown on the Knobs screen comes from; None when it is unknown."""
        if self._config_text is None:
            return None
        if self.options.program is None:
            return (
                f"{self.options.config_file} (given with --config; the daemon read it when it started, "
                "so a later edit of the file is not running)"
            )
        return str(self.config_path() or "the config this tool launched the daemon with")

    async def _profile_limit(self, profile_gib: int) -> int | None:
        """The profile's cgroup size, or None (with a notice) where memory cgroups cannot be made."""
        try:
            # In a thread: removing the probe waits (up to seconds) for the kernel to release it.
            await asyncio.to_thread(_probe_memory_cgroup)
        except CgroupError as error:
            self._notice(
                "warning",
                f"emulating a {profile_gib} GiB box without a memory cgroup ({error}): no OOM kill will happen",
            )
            return None
        return profile_memory_limit(profile_gib, read_config(self._config_text or "").engine.memory_scale)

    async def _launch(self, text: str, changes: tuple[str, ...]) -> None:
        assert self.supervisor is not None
        async with self._launch_lock:
            try:
                await self.supervisor.start(text, changes)
            except (DaemonStartError, SupervisorError, OSError) as error:
                self._start_failed(f"the daemon did not start: {error}")
                return
        if self.options.run_bench is not None:
            request, self.options = self.options.run_bench, replace(self.options, run_bench=None)
            await self.start_bench(request)

    async def _attach(self, target: AttachTarget) -> None:
        assert self.supervisor is not None
        try:
            await self.supervisor.attach(
                target.address,
                status_url=target.status_url,
                log_path=target.log_path,
                pid=target.pid,
                journal_unit=target.journal_unit,
                log_copied=self._log_caught_up if self._log_copy is not None else None,
            )
        except (DaemonStartError, SupervisorError, ClientError) as error:
            self._start_failed(f"could not attach to {target.address}: {error}")

    async def _record_memcheck(self) -> None:
        # For the engine, the box it emulates (its RAM, its cgroup): this host's figures do not apply.
        program, supervisor = self.options.program, self.supervisor
        report = await asyncio.to_thread(
            memcheck_for,
            self.config_values(),
            engine=program is not None and program.mode == "engine",
            memory_limit_bytes=supervisor.memory_limit if supervisor is not None else None,
            cgroup_path=str(supervisor.cgroup.path) if supervisor is not None and supervisor.cgroup else None,
        )
        if self.session is not None:
            self.session.write_meta({"memcheck": report.to_json()})
        for warning in report.warnings:
            self._notice("warning", warning)

    def _record(self, event: ev.ObservedEvent) -> None:
        """Append to the session; a full disk (or a file-size limit) loses events, said once, never
        raising into the sampler, the supervisor or the poll, so the daemon is watched on."""
        session = self.session
        if session is None:
            return
        try:
            session.append_event(event)
        except OSError as error:
            self._unrecorded += 1
            if self._unrecorded == 1:
                # The session cannot hold this notice (its file is what fails): the model takes it directly.
                self.model.apply(
                    ev.Notice(
                        time.time(),
                        "error",
                        f"recording stopped: {session.events_path}: {error.strerror or error}; events are lost "
                        "until it can be written again (the daemon is not affected)",
                    )
                )
            return
        if self._unrecorded:
            lost, self._unrecorded = self._unrecorded, 0
            self._record(ev.Notice(time.time(), "warning", f"recording resumed: {lost} event(s) were not recorded"))

    def _notice(self, level: Any, text: str) -> None:
        self._record(ev.Notice(time.time(), level, text))

    def _start_failed(self, text: str) -> None:
        failed = ev.StartFailed(time.time(), text)
        if self.session is None:  # failed before there was a session to record it in
            self.model.apply(failed)
        else:
            self._record(failed)

    def _progress(self, text: str) -> None:
        self._notice("info", text)

    # -- the UI's view -------------------------------------------------------------------

    async def poll(self) -> bool:
        if self._follower is None:
            return False
        self._reap_bench()
        run = self._tune
        if run is not None and run.running is not None:
            # The running trial's own session (its benchmark's), read like the search's early stop reads it.
            running = run.running
            figures = await asyncio.to_thread(
                read_trial_session, run.runner.session_of(running[0]), run.runner.memory_scale
            )
            if run.running == running:
                run.figures = figures
        async with self._poll_lock:  # the app's poll and a drain's both read the follower
            await self._copy_log()
            changed = await self._ingest()
            if self.exporter is not None:
                self.exporter.refresh(self.model)
            return changed

    async def _ingest(self) -> bool:
        """Fold the new events into the model, slice by slice (see INGEST_SLICE_BYTES), until the log is
        read to its end or POLL_BUDGET_S is spent; True when the model changed."""
        follower = self._follower
        assert follower is not None  # poll's guard
        changed = False
        deadline = time.monotonic() + POLL_BUDGET_S
        while True:
            started = time.monotonic()
            while True:
                # Held back: what a later slice's lines could precede, so that the slices merge the log and
                # events.jsonl as one whole read would (the screens never see an event before its past).
                slice_ = follower.iter_keyed(log_limit=INGEST_SLICE_BYTES, hold=True)
                changed = self.model.apply_all([event for _, event in slice_]) or changed
                now, backlog = time.monotonic(), self._unread()
                if not backlog or now - started >= INGEST_WORK_S:
                    break
            if not backlog or now >= deadline:
                break
            await asyncio.sleep(now - started)  # the UI's half of the loop
        # The poll's end lets go of what is held, as a poll that reads everything at once did.
        changed = self.model.apply_all([event for _, event in follower.iter_keyed(log_limit=0)]) or changed
        self._say_backlog(follower, self.log_backlog())
        return changed

    async def roll_over(self, root: Path | None = None) -> Path:
        """Go on recording the attached daemon in a new session under ``root`` (default: the sessions
        directory) and return its path: a recording of weeks (``record --keep``) is then sessions that expire.

        The new session stands alone: its daemon.log begins with the current daemon run's first lines (its
        TIMELINE offsets count from that run's engine start), its events.jsonl with the attach and the
        daemon's state now (ready, silent or dead, its proof counts); then the log's next line and the next
        sample. No line or event is in both sessions or in neither; a job under way at the switch is in both,
        unfinished in the first. The model goes on as it was (the screens and metrics see no switch)."""
        old, supervisor, follower = self.session, self.supervisor, self._follower
        if self.options.program is not None or old is None or supervisor is None or follower is None:
            raise ControllerError("only an attached daemon's recording rolls over to a new session")
        async with self._poll_lock:
            await self._copy_log(limit=None)
            preamble = await asyncio.to_thread(run_preamble, old.daemon_log_path)
            new = SessionWriter.create(label="attached", root=root, mode="attached")
            carried = {key: value for key, value in old.read_meta().items() if key in _CARRIED_META}
            new.write_meta({**carried, "continues": str(old.path)})
            out = open_private_append(new.daemon_log_path)
            try:
                os.write(out, preamble)
            finally:
                os.close(out)
            # From here on (no await until the follower moves) every writer records into the new session.
            self.session = new
            if self._log_copy is not None:
                self._log_copy.destination = new.daemon_log_path
            try:
                supervisor.record_into(new)
            except OSError as error:  # its DaemonLaunched not written: the disk is full, say so and go on
                self._notice("error", f"{new.events_path}: the attach is not recorded ({error.strerror or error})")
            # What the old session got before the switch (the journal's last lines, the last probe), so that
            # the daemon's state carried over is the latest.
            self.model.apply_all([event for _, event in follower.iter_keyed()])
            for event in self._daemon_now(time.time()):
                self._record(event)
            recorded = new.events_path.stat().st_size if new.events_path.exists() else 0
            self._follower = SessionFollower(new.path, offsets=(len(preamble), recorded))
            old.close()
        return new.path

    def _daemon_now(self, t: float) -> list[ev.ObservedEvent]:
        """The attached daemon's state as the model has it now, as events at ``t`` (a rolled-over session's start)."""
        d = self.model.daemon
        events: list[ev.ObservedEvent] = []
        if d.phase == "ready":
            events.append(ev.DaemonReadyObserved(t, d.pid, 0.0, uptime_s=self.model.daemon_uptime()))
        if d.silent is not None:
            events.append(replace(d.silent, t=t))
        if d.phase == "dead" and d.exit is not None:
            events.append(replace(d.exit, t=t))
        if self.model.daemon_counts is not None:
            events.append(replace(self.model.daemon_counts, t=t))
        return events

    def log_backlog(self) -> int:
        """Bytes of the daemon's log written but not read yet: a flood being caught up on."""
        copy = self._log_copy
        return self._unread() + (copy.pending() if copy is not None else 0)

    def _unread(self) -> int:
        """Bytes of the session's daemon.log not folded in yet."""
        follower = self._follower
        if follower is None:
            return 0
        try:
            size = os.stat(follower.log.path).st_size
        except OSError:
            return 0
        return max(0, size - follower.log.offset)

    def _say_backlog(self, follower: SessionFollower, backlog: int) -> None:
        """A notice when the reading falls behind the log by BEHIND_NOTICE_BYTES, and one when it has
        caught up (how much it read meanwhile): no line is skipped, they are read late."""
        if self._behind_since is None and backlog > BEHIND_NOTICE_BYTES:
            self._behind_since = (time.monotonic(), follower.log.lines)
            self._notice(
                "warning",
                f"the daemon's log grows faster than it is read: {format_size(backlog)} behind; "
                "catching up (no line is skipped, the screens show them late)",
            )
        elif self._behind_since is not None and not backlog:
            since, lines = self._behind_since
            self._behind_since = None
            self._notice(
                "info",
                f"caught up with the daemon's log: {follower.log.lines - lines:,} lines read in "
                f"{time.monotonic() - since:.0f} s while behind",
            )

    def config_path(self) -> Path | None:
        if self.options.config_file is not None:
            return self.options.config_file
        s = self.supervisor
        return s.config_path if s is not None else None

    def config_values(self) -> dict[str, Any]:
        if self._config_text is None:
            return {}
        return ConfigDocument.parse(self._config_text).effective()

    def daemon_running(self) -> bool:
        """A daemon this tool launched runs (quitting asks about it); an attached one was never ours to
        stop, so leaving an attach asks nothing."""
        s = self.supervisor
        return s is not None and s.running and s.program is not None

    def bench_running(self) -> bool:
        return self._bench_proc is not None and self._bench_proc.poll() is None

    def _tuning(self) -> bool:
        return self._tune is not None and self._tune.state == "running"

    # -- actions -------------------------------------------------------------------------

    async def apply_config(self, changes: Mapping[str, Any]) -> None:
        """Save, drain, restart: the daemon reads its config only at start (docs/daemon-interface.md §0.3)."""
        if self.options.program is None:
            raise ControllerError("an attached daemon cannot be reconfigured from here: restart it yourself")
        if self.bench_running():
            raise ControllerError("a benchmark is running: cancel it or wait, then apply")
        if self._tuning():
            raise ControllerError("a knob search is running: cancel it or wait, then apply")
        if self.supervisor is None:
            raise ControllerError("no daemon was launched (see the start error)")
        doc = ConfigDocument.parse(self._config_text or "")
        doc.update(dict(changes))
        errors = [str(p) for p in doc.problems() if p.severity is Severity.ERROR]
        if errors:
            raise ControllerError("; ".join(errors))
        text = doc.text()
        if self.options.config_file is not None:
            # Two fsyncs: seconds on a busy disk, so not on the UI's event loop.
            await asyncio.to_thread(save_atomic, text, self.options.config_file)
        self._config_text = text
        s = self.supervisor
        if s.running:
            await self._drain(s)
            await s.stop_to_apply()
        described = tuple(f"{name} = {value!r}" for name, value in changes.items())
        await self._launch(text, described)

    async def _drain(self, s: Supervisor) -> None:
        """Wait for the work a restart would kill, showing it (:meth:`drain_in_flight`) until it is done,
        the operator restarts anyway (:meth:`restart_anyway`) or the drain times out."""
        self._notice("info", "draining: waiting for work in flight before the restart")
        self._force_restart = asyncio.Event()
        self._in_flight = []

        async def known() -> tuple[list[InFlight], set[str]]:
            await self.poll()  # the newest log lines first: the drain decides on what the log says now
            return timeline_in_flight(self.model.timeline, time.time())

        def shown(work: list[InFlight]) -> None:
            self._in_flight = work

        try:
            drained = await s.drain(DRAIN_TIMEOUT_S, known, on_round=shown, force=self._force_restart)
        except (TimeoutError, SupervisorError, ClientError) as error:
            self._notice("warning", f"drain incomplete ({error}); restarting anyway")
        else:
            if not drained:
                killed = "; ".join(item.describe() for item in self._in_flight) or "nothing"
                self._notice("warning", f"restarting anyway, as asked: killing {killed}")
        finally:
            self._force_restart = None
            self._in_flight = []

    def drain_in_flight(self) -> list[str] | None:
        """While an apply drains: what is still in flight, one line each (empty: drained); else None."""
        if self._force_restart is None:
            return None
        return [item.describe() for item in self._in_flight]

    def restart_anyway(self) -> None:
        """Stop waiting for the drain and restart now (the work in flight is killed, and said so)."""
        if self._force_restart is not None:
            self._force_restart.set()

    async def start_bench(self, request: BenchRequest) -> None:
        program = self.options.program
        if program is None:
            raise ControllerError("benchmarks run on a daemon this tool launches (not on an attached one)")
        if self.bench_running():
            raise ControllerError("a benchmark is already running")
        if self._tuning():
            raise ControllerError("a knob search is running its own benchmarks: cancel it or wait")
        s, session = self.supervisor, self.session
        if s is None or session is None:
            raise ControllerError("no daemon was launched (see the start error)")
        await self._check_inputs(request.kind, request.input_path, request.params, program)
        if s.running:
            await s.stop(handover=HANDED_TO_BENCHMARK)  # the runner takes the daemon over (module docstring)
        config_path = session.path / "bench-config.toml"
        await asyncio.to_thread(save_atomic, self._config_text or "", config_path, mode=0o600)
        args = [
            "--config", str(config_path), "--kind", request.kind, "--count", str(request.count),
            "--concurrency", str(request.concurrency), "--oom-retries", str(request.oom_retries),
        ]  # fmt: skip
        args += ["--engine"] if program.mode == "engine" else ["--daemon", program.argv[0]]
        if request.input_path:
            args += ["--input", request.input_path]
        args += request.params.flags()
        if s.memory_limit is not None:
            args += ["--memory-limit", str(s.memory_limit)]
        output = session.path / RUNNER_OUTPUT
        self._bench_output_start = output.stat().st_size if output.exists() else 0
        self._bench_cancelled = False
        self._bench_proc = spawn_bench_process(session.path, args)
        self._notice("info", f"benchmark started (runner pid {self._bench_proc.pid}); it owns the daemon until done")

    @staticmethod
    async def _check_inputs(kind: str, input_path: str | None, params: RequestParams, program: DaemonProgram) -> None:
        """Refuse an input the runner would refuse, with the check ``bench`` and ``tune`` make
        (bench.checked_requests), before the daemon is stopped for it: the runner's refusal came after the
        hand-over, and cost a restart."""
        typed = Path(input_path) if input_path else None
        if typed is None and program.mode == "engine":
            return  # the engine's inputs are generated: nothing to read
        try:
            await asyncio.to_thread(
                checked_requests, kind, 1, real_daemon=program.mode == "real", input_path=typed, params=params,
                bench_id="check", flag="input file",
            )  # fmt: skip
        except BenchUsageError as error:
            raise ControllerError(f"{error} (the daemon was left as it was)") from None

    def _reap_bench(self) -> None:
        """When the runner has ended, give the TUI its daemon back with the latest config version."""
        proc = self._bench_proc
        if proc is None or proc.poll() is None:
            return
        self._bench_proc = None
        session = self.session
        if session is None:
            return
        versions = session.config_versions()
        if versions:
            self._config_text = versions[-1].read_text("utf-8")
        if proc.returncode != 0 and not self._bench_cancelled:
            # Why, in the runner's own words (the Bench screen keeps it): the exit status alone said nothing.
            error = runner_error(session.path / RUNNER_OUTPUT, self._bench_output_start)
            self._record(ev.BenchRunnerFailed(time.time(), proc.returncode, error))
        self._notice("info", f"benchmark runner finished (exit {proc.returncode}); relaunching the daemon")
        self._tasks.append(asyncio.create_task(self._launch(self._config_text or "", ())))

    async def start_tune(self, request: TuneRequest) -> None:
        """Search the knobs as ``cuzk-tui tune`` does (cuzktui.tune), each trial a benchmark of this
        daemon program in a session of its own under ``<session>/tune-…``. Like a benchmark, the search
        takes the daemon over: the TUI's daemon is stopped for the trials and launched again with the
        running config when the search ends (a best config is applied only when the operator says so)."""
        program = self.options.program
        if program is None:
            raise ControllerError(
                "a knob search restarts the daemon with each trial's config, so it runs on a daemon this tool "
                "launches, not on an attached one: run cuzk-tui tune on its box"
            )
        if self.bench_running():
            raise ControllerError("a benchmark is running: cancel it or wait, then tune")
        if self._tuning():
            raise ControllerError("a knob search is already running")
        s, session = self.supervisor, self.session
        if s is None or session is None:
            raise ControllerError("no daemon was launched (see the start error)")
        engine = program.mode == "engine"
        if request.count < 1 or request.concurrency < 1 or request.trials < 1:
            raise ControllerError("count, concurrency and trials must be at least 1")
        # What every trial's benchmark would refuse, said before the daemon is handed over (as tune does).
        await self._check_inputs(request.kind, request.input_path, request.params, program)
        input_path = Path(request.input_path).resolve() if request.input_path else None  # trials run elsewhere
        try:
            budget_s = parse_duration(request.time_budget, hours=True)
        except UnitError as error:
            raise ControllerError(f"time budget: {error}") from None
        start_text = self._config_text or ""
        search, _report = await asyncio.to_thread(
            new_search, start_text, request.kind, request.count, request.concurrency,
            engine=engine, memory_limit=s.memory_limit,
        )  # fmt: skip
        directory = session.path / f"tune-{time.strftime('%Y%m%d-%H%M%S')}-{request.kind}"
        directory.mkdir(mode=0o700)
        start_config = directory / "start.toml"
        await asyncio.to_thread(save_atomic, start_text, start_config, mode=0o600)
        daemon_args = ("--engine",) if engine else ("--daemon", program.argv[0])
        inputs = ("--input", str(input_path)) if input_path is not None else ()
        scale = read_config(start_text).engine.memory_scale if engine else 1.0
        request_flags = request.params.flags()
        runner = BenchTrialRunner(
            directory, request.kind, request.count, (*daemon_args, *inputs, *request_flags), s.memory_limit, scale
        )
        run = _TuneRun(request, search, runner, engine)
        # What `cuzk-tui tune --resume DIR` needs to continue this search (commands/tune.py _arguments).
        resume_args = {
            "kind": request.kind, "count": request.count, "concurrency": request.concurrency, "engine": engine,
            "daemon": None if engine else program.argv[0], "input": request.input_path, "config": str(start_config),
            "profile": None, "memory_limit": None if s.memory_limit is None else str(s.memory_limit),
            "request": request_flags,
        }  # fmt: skip
        if s.running:
            await s.stop(handover=HANDED_TO_TUNE)  # each trial's benchmark launches its own daemon
        self._tune = run
        self._notice("info", f"knob search started: up to {request.trials} trials; trials in {directory}")
        run.task = asyncio.create_task(self._run_tune(run, budget_s, resume_args))
        self._tasks.append(run.task)

    async def _run_tune(self, run: _TuneRun, budget_s: int, resume_args: dict[str, Any]) -> None:
        search, directory = run.search, run.runner.directory
        limit = search.box.limit_bytes

        def started(index: int, knobs: Knobs) -> None:
            run.figures = None
            run.running = (index, knobs)

        loop = asyncio.get_running_loop()

        def finished(trial: Trial) -> None:  # in the search's thread: the session is written from the loop
            run.running = None
            save_state(search, directory, resume_args)
            level = "warning" if trial.status == "oom" else "info"
            loop.call_soon_threadsafe(self._notice, level, f"tune: {trial_line(trial, limit)}")

        config_for = trial_configs(search, self._config_text or "")
        try:
            await asyncio.to_thread(
                run_search, search, run.runner, config_for, max_trials=run.request.trials,
                deadline=time.monotonic() + budget_s, on_trial=finished, on_start=started, cancelled=run.cancel.is_set,
            )  # fmt: skip
            await asyncio.to_thread(save_state, search, directory, resume_args)
        except SearchBlocked as blocked:
            run.state, run.message = "failed", str(blocked)
            self._notice("error", f"tune: {run.message}")
        except (OSError, ValueError, KeyError) as error:
            run.state, run.message = "failed", f"the search stopped: {error}"
            self._notice("error", f"tune: {run.message}")
        else:
            run.state, run.message = _tune_ending(run, directory, self.options.command)
            self._notice("info", f"tune: {run.message}")
        finally:
            run.running = None
            if not self._closing:
                await self._launch(self._config_text or "", ())

    async def cancel_tune(self) -> None:
        run = self._tune
        if run is not None and run.state == "running":
            run.cancel.set()

    def tune_snapshot(self) -> TuneSnapshot | None:
        run = self._tune
        if run is None:
            return None
        search, price = run.search, run.request.price_per_hour
        rows = [trial_row(t, price) for t in list(search.trials)]
        running = run.running
        if running is not None:
            rows.append(running_row(search, running[0], running[1], run.figures))
        key = (self._config_text or "", len(search.trials))
        if run.best is None or run.best[0] != key:
            # Parsing the config is too slow for every redraw: once per recorded trial and running config.
            run.best = (key, best_of(search, key[0]))
        return TuneSnapshot(
            state=run.state,
            kind=search.kind,
            count=search.count,
            directory=run.runner.directory,
            limit_bytes=search.box.limit_bytes,
            time_basis=time_basis(run.engine),
            trials_run=sum(1 for t in search.trials if t.ran),
            max_trials=run.request.trials,
            trials=tuple(rows),
            best=run.best[1],
            message=run.message,
            tier=tier_line(search.box.limit_bytes, search.kind),
            verdict=search.verdict().text if search.trials else "",
            left_alone=left_alone(search, reasons=False),
        )

    async def cancel_bench(self) -> None:
        proc = self._bench_proc
        if proc is not None and proc.poll() is None:
            self._bench_cancelled = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)

    async def stop_daemon(self) -> None:
        s = self.supervisor
        if s is not None and s.running:
            await s.stop()

    async def shutdown(self, stop_daemon: bool) -> None:
        self._closing = True
        run = self._tune
        if run is not None and run.task is not None and not run.task.done():
            # A search lives in this process: its running trial stops its benchmark and daemon first
            # (the runner polls every 0.25 s); its state stays resumable.
            await self.cancel_tune()
            await asyncio.wait([run.task], timeout=DRAIN_TIMEOUT_S)
        if not stop_daemon:
            self._record_left_running()
        if stop_daemon:
            await self.cancel_bench()
            if self._bench_proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    await asyncio.to_thread(self._bench_proc.wait, 30)
        if self._recorder is not None:
            await self._recorder.stop()
        if self._log_copy is not None:
            await self._log_caught_up()
            copy, self._log_copy = self._log_copy, None  # an exit seen from now on reads the copy as it is
            copy.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.supervisor is not None:
            with contextlib.suppress(SupervisorError, ClientError, OSError):
                await self.supervisor.close(stop=stop_daemon)
        if self.exporter is not None:
            self.exporter.close()
        if self.session is not None:
            self.session.close()

    @property
    def clock(self) -> ReplayClock | None:
        return None

    def reattach_hint(self) -> str:
        """The one ``cuzk-tui attach …`` line that watches this daemon again, continuing this session
        (so a benchmark left running shows on the Bench screen); "" before there is an address."""
        s = self.supervisor
        listen = (s.listen if s is not None else None) or self.model.daemon.listen
        if not listen:
            return ""
        parts = [*self.options.command, "attach", listen]
        status_address = (s.status_url if s is not None else None) or self.model.daemon.status_url
        if status_address:
            parts += ["--status-url", status_endpoint(status_address)]
        journal = self.options.attach.journal_unit if self.options.attach is not None else None
        if journal is not None:
            parts += ["--journal", journal]
        elif s is not None and s.log_path is not None:
            parts += ["--log", str(s.log_path)]
        config = self.config_path()
        if config is not None:
            parts += ["--config", str(config)]
        if self.session is not None:
            parts += ["--session", str(self.session.path)]
        return shlex.join(parts)

    def left_running(self) -> list[str]:
        """What keeps running if the operator leaves now without stopping anything, in words."""
        items: list[str] = []
        s, d = self.supervisor, self.model.daemon
        if s is not None and s.running and s.program is not None:
            where = f", listening on {s.listen}" if s.listen else ""
            group = f", in memory cgroup {s.cgroup.path}" if s.cgroup is not None else ""
            items.append(f"the daemon (pid {s.pid}{where}{group})")
        proc = self._bench_proc
        if proc is not None and proc.poll() is None:
            daemon = f" and its daemon (pid {d.pid})" if d.pid is not None and d.phase != "dead" else ""
            # bench.py's runner stops the daemon it launched when the benchmark ends (its finally).
            items.append(
                f"the benchmark runner (pid {proc.pid}){daemon}; the runner stops that daemon when the benchmark ends"
            )
        return items

    def farewell(self) -> str:
        """Printed on the terminal once the app has exited: what was left running, and how to attach again."""
        return self._farewell

    def hung_up(self) -> None:
        self._notice("warning", "the terminal hung up: the daemon and any benchmark are left running")
        self._record_left_running()

    def _record_left_running(self) -> None:
        """Say on the terminal (after the app is gone) and in the session's meta what keeps running."""
        items = self.left_running()
        if not items or self.session is None:
            return
        attach = self.reattach_hint()
        listen = (self.supervisor.listen if self.supervisor is not None else None) or self.model.daemon.listen
        left = {"t": time.time(), "items": items, "attach": attach, "listen": listen}
        self.session.write_meta({"left_running": left})
        self._farewell = "\n".join(
            ["cuzk-tui: left running:", *(f"  - {item}" for item in items), "watch it again with:", attach]
        )
