"""Launch, watch, drain, stop and restart the daemon, and say why it exited.

The daemon (the real ``cuzk-daemon`` or the embedded ``cuzk-engine``) is started

* with ``-c <session>/config/vNNN.toml -l <listen>``;
* with stdout and stderr both on the session's ``daemon.log`` (O_APPEND): never a pipe the TUI
  must drain, so a stalled or vanished TUI can never block the daemon's writes;
* in a process session of its own (``start_new_session``), so an SSH hang-up of the TUI does
  not take a running benchmark down with it;
* with ``NO_COLOR=1`` (the real daemon colours its logs even into files, docs/daemon-interface.md §0.2);
* optionally inside a fresh v1/v2 memory cgroup of a given size (root only), joined through
  ``python -m cuzktui.cgexec`` before the daemon is exec'ed, so the pid we watch is the daemon.

Readiness is the first successful ``GetStatus``: the daemon logs "ready" before it binds TCP
(docs/daemon-interface.md §0.6). Stopping is SIGTERM (SIGINT only stops the real daemon's workers, §2), then
SIGKILL after a grace period. Exits are classified into :class:`events.DaemonExited` with the
evidence behind the diagnosis: an OOM kill (SIGKILL while the cgroup's ``oom_kill`` counter went
up, or the kernel log names the pid), another signal, a non-zero exit with its ``Error:`` report
from the tail of daemon.log, or a clean exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from . import events as ev
from .client import (
    STATUS_TIMEOUT_S,
    ClientError,
    DaemonClient,
    StatusError,
    engine_box_pid,
    engine_memory_scale,
    engine_time_scale,
    fetch_status_json,
)
from .config import ConfigDocument, ConfigError
from .daemon_config import read_config
from .diagnosis import BudgetFacts, budget_root_cause
from .log_copy import JournalCopy, journal_resume
from .logfilter import launch_environment
from .logparse import strip_ansi
from .planner import cgroup_aware_budget
from .proto import proving_pb2 as pb
from .samplers import listener_pid
from .session import LogFollower, SessionWriter
from .system import CgroupError, MemoryCgroup, host_mem_total, kernel_oom_evidence

DEFAULT_START_TIMEOUT_S: Final = 600.0
DEFAULT_STOP_GRACE_S: Final = 10.0
# An attached daemon is probed this often; silent this long (gRPC and /status), it is said to be silent.
LIVENESS_INTERVAL_S: Final = 1.0
SILENT_AFTER_S: Final = 3.0
# An answer from a daemon whose uptime says it started this much later than the run watched is the next
# run (GetStatus's uptime_seconds is whole seconds, service.rs: its start time wobbles by a second).
RESTARTED_AFTER_S: Final = 2.0
_POLL_S: Final = 0.1
# Once journalctl has ended, the copy of its output has this long to write the rest of the pipe.
JOURNAL_COPY_END_S: Final = 10.0
# How much of daemon.log's tail is searched for a fatal report.
_REPORT_TAIL_BYTES: Final = 64 * 1024
# The planned stops (DaemonExited.handover), as the dashboard says them: the TUI hands its daemon to a
# benchmark runner or a knob search, which launch their own (live.py); a runner stops its daemon when its
# benchmark is over, and the TUI that started it launches its own again (commands/bench.py). An apply's
# restart is the other planned stop (events.restarting_to_apply: it names the config version).
HANDED_TO_BENCHMARK: Final = "handed over to the benchmark runner"
HANDED_TO_TUNE: Final = "handed over to the knob search (Tune, 8)"
BENCHMARK_OVER: Final = "handed back: the benchmark is over"

EventSink = Callable[[ev.ObservedEvent], None]


class SupervisorError(Exception):
    """A lifecycle step that cannot be done (no process to stop, cgroup not available, …)."""


class DaemonStartError(SupervisorError):
    """The daemon did not become ready; ``exit`` is its diagnosis when it died on the way."""

    def __init__(self, message: str, exit: ev.DaemonExited | None = None) -> None:
        super().__init__(message)
        self.exit = exit


@dataclass(frozen=True, slots=True)
class DaemonProgram:
    """How to run a daemon: ``argv`` comes before ``-c CONFIG -l LISTEN``."""

    mode: Literal["real", "engine"]
    argv: tuple[str, ...]


def engine_program() -> DaemonProgram:
    """``cuzk-engine`` of this environment (beside sys.executable), else ``python -m engine``."""
    script = Path(sys.executable).parent / "cuzk-engine"
    if os.access(script, os.X_OK):
        return DaemonProgram("engine", (str(script),))
    return DaemonProgram("engine", (sys.executable, "-m", "engine"))


def find_real_daemon(path: str | None = None) -> DaemonProgram | None:
    """The real daemon: ``path`` if given, else ``cuzk-daemon`` or ``cuzk`` on PATH."""
    if path is not None:
        return DaemonProgram("real", (path,))
    for name in ("cuzk-daemon", "cuzk"):
        found = shutil.which(name)
        if found is not None:
            return DaemonProgram("real", (found,))
    return None


def program_problem(program: DaemonProgram) -> str | None:
    """Why ``program`` cannot be run (its binary missing or not executable), else None: said before
    anything else is done, since nothing else matters while there is no daemon to launch."""
    name = program.argv[0]
    if shutil.which(name) is not None:
        return None
    path = Path(name)
    if os.sep not in name:
        return f"the daemon binary {name!r} is not on PATH ({os.environ.get('PATH', '')})"
    if not path.exists():
        return f"the daemon binary {name} does not exist"
    if path.is_dir():
        return f"the daemon binary {name} is a directory"
    return f"the daemon binary {name} is not executable (chmod +x it, or name another with --daemon)"


def choose_program(engine: bool = False, daemon_path: str | None = None) -> DaemonProgram:
    """The daemon a command should run: explicit choice, else a real one on PATH, else the engine."""
    if engine:
        return engine_program()
    return find_real_daemon(daemon_path) or engine_program()


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def extract_error_report(log_tail: str) -> str | None:
    """The last fatal report in a log tail: from the last ``Error:`` line (or panic) to the end."""
    lines = log_tail.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if line.startswith("Error: ") or (line.startswith("thread '") and " panicked at " in line):
            return "\n".join(lines[index:]).strip()
    return None


def classify_exit(
    *,
    t: float,
    pid: int | None,
    returncode: int | None,
    oom_kills_before: int | None = None,
    oom_kills_after: int | None = None,
    cgroup_path: str | None = None,
    sent_signals: Sequence[int] = (),
    log_tail: str = "",
    kernel_evidence: str | None = None,
    budget: BudgetFacts | None = None,
) -> ev.DaemonExited:
    """Diagnose one exit from its status and the evidence gathered around it; an OOM kill by a
    budget above the memory limit gets that root cause, with the budget to set instead."""
    exit = _classify(
        t=t, pid=pid, returncode=returncode, oom_kills_before=oom_kills_before, oom_kills_after=oom_kills_after,
        cgroup_path=cgroup_path, sent_signals=sent_signals, log_tail=log_tail, kernel_evidence=kernel_evidence,
    )  # fmt: skip
    if exit.cause != "oom_kill" or budget is None:
        return exit
    root = budget_root_cause(budget, suggested=cgroup_aware_budget(budget.limit))
    return dataclasses.replace(exit, root_cause=root)


def gather_budget_facts(
    config_text: str, mode: ev.DaemonMode, real_limit: int | None, host_mem_total_bytes: int | None = None
) -> BudgetFacts:
    """The budget a launched daemon runs with and the memory it lives in, in the daemon's units.

    "auto" reads MemTotal (cuzk-core memory.rs detect_system_memory): the host's for a real daemon;
    for the engine ``[engine] mem_total`` (the emulated box), as engine/state.py budget_total resolves
    it. The limit is the cgroup's (÷ memory_scale for the engine).
    """
    document = ConfigDocument.parse(config_text)
    engine = read_config(config_text).engine
    scale = engine.memory_scale if mode == "engine" else 1.0
    if mode == "engine":
        mem_total, source = engine.mem_total, "the emulated box's RAM, [engine] mem_total"
    else:
        mem_total = host_mem_total_bytes if host_mem_total_bytes is not None else host_mem_total()
        source = "the host's RAM"
    return BudgetFacts.from_config(
        total_budget=str(document.get("memory", "total_budget")),
        safety_margin=str(document.get("memory", "safety_margin")),
        mem_total=mem_total,
        mem_total_source=source,
        cgroup_limit=int(real_limit / scale) if real_limit is not None else None,
    )


def _classify(
    *,
    t: float,
    pid: int | None,
    returncode: int | None,
    oom_kills_before: int | None,
    oom_kills_after: int | None,
    cgroup_path: str | None,
    sent_signals: Sequence[int],
    log_tail: str,
    kernel_evidence: str | None,
) -> ev.DaemonExited:
    report = extract_error_report(log_tail)
    if returncode is None:
        if kernel_evidence is not None:
            return ev.DaemonExited(t, pid, None, None, "oom_kill", (kernel_evidence,), report)
        return ev.DaemonExited(
            t, pid, None, None, "unknown", ("the exit status of a process we did not start is unknown",), report
        )
    if returncode < 0:
        number = -returncode
        name = signal_name(number)
        evidence = [f"killed by {name} (exit status {128 + number} in a shell)"]
        if number == signal.SIGKILL:
            rose = oom_kills_before is not None and oom_kills_after is not None and oom_kills_after > oom_kills_before
            if rose:
                # The count first: where evidence is shown shortened, the path is what may be cut.
                evidence.append(f"memory cgroup oom_kill {oom_kills_before} → {oom_kills_after} ({cgroup_path})")
            if kernel_evidence is not None:
                evidence.append(kernel_evidence)
            if rose or kernel_evidence is not None:
                return ev.DaemonExited(t, pid, returncode, number, "oom_kill", tuple(evidence), report)
            if oom_kills_before is not None and oom_kills_after is not None:
                evidence.append(f"memory cgroup oom_kill unchanged at {oom_kills_after} ({cgroup_path})")
        if number in sent_signals:
            evidence.append(f"{name} was sent by the supervisor")
            # Asked to stop and stopped: an operator's decision, not a failure to diagnose.
            return ev.DaemonExited(t, pid, returncode, number, "stopped", tuple(evidence), report)
        return ev.DaemonExited(t, pid, returncode, number, "signal", tuple(evidence), report)
    if returncode > 0:
        evidence = [f"exit status {returncode}"]
        if report is not None:
            evidence.append(report.splitlines()[0])
        else:
            evidence.append("no Error: report at the end of daemon.log")
        return ev.DaemonExited(t, pid, returncode, None, "error", tuple(evidence), report)
    return ev.DaemonExited(t, pid, 0, None, "clean", ("exit status 0",), report)


_EPHEMERAL_RANGE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")


# sockaddr_un holds 108 bytes with the terminator; keep well clear of it.
_MAX_SOCKET_PATH: Final = 100


def private_listen_address(directory: Path) -> str:
    """A listen address only this tool uses: a unix socket in ``directory`` (a session, 0700), else
    loopback TCP where that path would be too long for a socket."""
    socket_path = directory.resolve() / "daemon.sock"
    if len(str(socket_path)) <= _MAX_SOCKET_PATH:
        return f"unix://{socket_path}"
    return f"127.0.0.1:{free_loopback_port()}"


def free_loopback_port(*, rng: random.Random | None = None, attempts: int = 200) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (for a daemon's private endpoints).

    The port is handed to another process, which binds it later. A port the kernel picks
    (bind to 0) comes from the ephemeral range, where every outgoing connection in between
    may take it; one below that range is only ever taken by a process that asks for it.
    """
    chooser = rng or random.SystemRandom()
    try:
        low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    low = max(low, 2048)
    for _ in range(attempts):
        port = chooser.randrange(1024 + (low - 1024) // 2, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a crowded range: take the kernel's
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def _progress_text(event: ev.Event) -> str | None:
    """A startup progress line for the notable log events (SRS / PCE loads and startup steps)."""
    if isinstance(event, ev.DaemonStarting):
        return "daemon starting"
    if isinstance(event, ev.EngineStarted):
        return "engine started"
    if isinstance(event, ev.SrsLoadStarted):
        size = f" ({event.file_size_gib} GiB)" if event.file_size_gib is not None else ""
        return f"loading SRS {event.circuit_id}{size}"
    if isinstance(event, ev.SrsLoaded):
        return f"SRS {event.circuit_id} loaded"
    if isinstance(event, ev.PceActivity):
        return f"PCE {event.phase.replace('_', ' ')} {event.circuit_id or ''}".rstrip()
    if isinstance(event, ev.DaemonReady):
        return f"daemon says ready on {event.address}; waiting for it to answer GetStatus"
    if isinstance(event, ev.FatalErrorLine):
        return f"Error: {event.context}"
    return None


class _ExitWatch:
    """Resolves when a pid exits: a pidfd read by the event loop, or polling where pidfds are missing."""

    def __init__(self, pid: int, reap: Callable[[], int | None] | None) -> None:
        self._pid = pid
        self._reap = reap
        self.done: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._fd: int | None = None
        self._task: asyncio.Task[None] | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._task = asyncio.ensure_future(self._poll())
            return
        asyncio.get_running_loop().add_reader(self._fd, self._on_readable)

    def _returncode(self) -> int | None:
        return self._reap() if self._reap is not None else None

    def _gone(self) -> bool:
        if self._reap is not None:
            return self._reap() is not None
        try:
            os.kill(self._pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def _on_readable(self) -> None:
        self.close()
        if not self.done.done():
            self.done.set_result(self._returncode())

    async def _poll(self) -> None:
        while not self._gone():
            await asyncio.sleep(_POLL_S)
        if not self.done.done():
            self.done.set_result(self._returncode())

    def close(self) -> None:
        if self._fd is not None:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()


class Supervisor:
    """Owns one daemon at a time (or watches an attached one) and reports every step as an event.

    Events go to the session's events.jsonl and to ``on_event``; ``on_progress`` receives short
    startup progress texts taken from the daemon's log while waiting for readiness.
    """

    def __init__(
        self,
        session: SessionWriter,
        program: DaemonProgram | None,
        *,
        listen: str | None = None,
        on_event: EventSink | None = None,
        on_progress: Callable[[str], None] | None = None,
        memory_limit: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_grace: float = DEFAULT_STOP_GRACE_S,
        env: Mapping[str, str] | None = None,
        no_color: bool = True,
    ) -> None:
        self.session = session
        self.program = program
        self.listen = listen
        self.status_url: str | None = None
        self.log_path: Path | None = session.daemon_log_path if program is not None else None
        self.memory_limit = memory_limit
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self._on_event = on_event
        self._on_progress = on_progress
        self._env = dict(os.environ if env is None else env)
        if no_color:
            self._env["NO_COLOR"] = "1"
        self.cgroup: MemoryCgroup | None = None
        self.pid: int | None = None
        # The engine's [engine] memory_scale (real bytes per byte of the box it emulates), launched or attached
        # to (its /status says it); None for a real daemon. An engine's RSS is its box's (DaemonRecorder).
        self.memory_scale: float | None = None
        # Its [engine] time_scale (real seconds per second of the box), the same way; None for a real daemon,
        # whose figures are in wall time.
        self.time_scale: float | None = None
        # An attached engine's box process (its /status says it): the kernel names it, not the engine, when
        # it OOM-kills the box. A launched engine's is among the pids of the cgroup the tool made.
        self._box_pid: int | None = None
        # When the record of the daemon run watched now began: its launch, an attach, a restart followed, a
        # session rolled over (the recorder records GetStatus's counts again from then).
        self.run_began: float | None = None
        self.config_version: int | None = None
        self.config_path: Path | None = None
        self.last_exit: ev.DaemonExited | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._watch: _ExitWatch | None = None
        self._exit_task: asyncio.Task[ev.DaemonExited] | None = None
        self._client: DaemonClient | None = None
        self._launch_offset = 0
        self._oom_before: int | None = None
        # The processes in the daemon's memory cgroup once it served (an engine's box, engine/box.py; the
        # daemon itself under cgexec): the kernel's OOM lines name the process killed, which for an engine is
        # its box, not the pid watched.
        self._cgroup_pids: tuple[int, ...] = ()
        self._sent_signals: list[int] = []
        self.liveness_interval = LIVENESS_INTERVAL_S
        self._liveness_task: asyncio.Task[None] | None = None
        # The liveness probe's last GetStatus answer (monotonic time, answer): the recorder's samples of an
        # attached daemon take it instead of asking again in the same second (recent_status).
        self._probed: tuple[float, pb.GetStatusResponse] | None = None
        self._journal_unit: str | None = None
        self._journal: subprocess.Popen[bytes] | None = None
        self._journal_copy: JournalCopy | None = None
        # An attached daemon's log file copied into the session (the live controller's LogCopy): the run's lines
        # are read from the copy, brought up to date by awaiting this first (after a rename-and-create the file
        # at the path no longer holds them).
        self._log_copied: Callable[[], Awaitable[None]] | None = None
        self._config_text: str | None = None  # the running config, for the exit's root cause
        self._handover: str | None = None  # the planned stop under way (stop's ``handover``)

    # -- events ---------------------------------------------------------------------------

    def _emit(self, event: ev.ObservedEvent) -> None:
        self.session.append_event(event)
        if self._on_event is not None:
            self._on_event(event)

    # -- state ----------------------------------------------------------------------------

    @property
    def client(self) -> DaemonClient:
        """A client for the current daemon run (a new channel per run, so no reconnect backoff carries over)."""
        if self._client is None:
            if self.listen is None:
                raise SupervisorError("no daemon address yet")
            self._client = DaemonClient(self.listen)
        return self._client

    @property
    def running(self) -> bool:
        return self._exit_task is not None and not self._exit_task.done()

    @property
    def mode(self) -> ev.DaemonMode:
        return self.program.mode if self.program is not None else "attached"

    async def exited(self) -> ev.DaemonExited:
        """Wait for the current daemon run to end and return its diagnosis."""
        if self._exit_task is None:
            if self.last_exit is None:
                raise SupervisorError("no daemon has been started")
            return self.last_exit
        return await asyncio.shield(self._exit_task)

    # -- start ----------------------------------------------------------------------------

    def _ensure_cgroup(self) -> MemoryCgroup:
        if self.cgroup is None:
            assert self.memory_limit is not None
            name = f"cuzk-tui-{self.session.path.name}-{os.getpid()}"
            try:
                self.cgroup = MemoryCgroup.create(name, self.memory_limit)
            except CgroupError as error:
                raise SupervisorError(
                    f"cannot run the daemon under a {self.memory_limit}-byte memory limit: {error}"
                ) from error
            self.session.write_meta({"cgroup": {"path": str(self.cgroup.path), "limit_bytes": self.memory_limit}})
        return self.cgroup

    async def start(self, config_text: str, changes: Sequence[str] = ()) -> ev.DaemonReadyObserved:
        """Store ``config_text`` as the next config version, launch the daemon with it and wait for readiness.

        ``changes`` describes what differs from the previous version (recorded in ConfigApplied).
        Raises DaemonStartError (with the exit diagnosis) when the daemon dies or stays silent.
        """
        if self.program is None:
            raise SupervisorError("an attached daemon cannot be started by the tool")
        if self.running:
            raise SupervisorError(f"the daemon (pid {self.pid}) is still running")
        launched = read_config(config_text)
        self.listen = self.listen or launched.listen_address
        if self.listen is None:
            raise SupervisorError("no listen address: give one or set [daemon].listen in the config")
        self.status_url = launched.status_address
        version, path = self.session.add_config_version(config_text)
        self._config_text = config_text
        self.config_version, self.config_path = version, path
        argv = [*self.program.argv, "-c", str(path), "-l", self.listen]
        cgroup_path: str | None = None
        if self.memory_limit is not None:
            cgroup = self._ensure_cgroup()
            cgroup_path = str(cgroup.path)
            self._oom_before = cgroup.oom_kill_count()
            if self.program.mode == "engine":
                # Only the emulated box's memory goes into the cgroup; the engine and the proof
                # inputs it receives stay outside, whoever sends them (engine/box.py).
                argv = [*argv, "--box-cgroup", cgroup_path]
            else:
                argv = [sys.executable, "-m", "cuzktui.cgexec", cgroup_path, "--", *argv]
        env, rust_log_warning = launch_environment(self._env, launched.log_level)
        if rust_log_warning is not None:
            self._emit(ev.Notice(time.time(), "warning", rust_log_warning))
        await self._reset_client()
        log_fd = self.session.open_daemon_log()
        try:
            self._launch_offset = os.fstat(log_fd).st_size
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                env=env,
                start_new_session=True,
                cwd=self.session.path,
            )
        finally:
            os.close(log_fd)
        self.pid = self._proc.pid
        engine = self.program.mode == "engine"
        self.memory_scale = launched.engine.memory_scale if engine else None
        self.time_scale = launched.engine.time_scale if engine else None
        self._cgroup_pids = ()
        self._box_pid = None
        self._sent_signals = []
        self._handover = None
        launched_t = self.run_began = time.time()
        self._emit(
            ev.DaemonLaunched(
                t=launched_t,
                mode=self.program.mode,
                pid=self.pid,
                command=tuple(argv),
                config_path=str(path),
                listen=self.listen,
                log_path=str(self.session.daemon_log_path),
                status_url=self.status_url,
                cgroup_path=cgroup_path,
                memory_limit_bytes=self.memory_limit,
                memory_scale=self.memory_scale,
                time_scale=self.time_scale,
            )
        )
        self._watch = _ExitWatch(self.pid, self._proc.poll)
        self._exit_task = asyncio.ensure_future(self._observe_exit(self._watch))
        ready = await self._wait_ready(launched_t)
        self._emit(ev.ConfigApplied(t=time.time(), version=version, path=str(path), changes=tuple(changes)))
        return ready

    async def attach(
        self,
        address: str,
        *,
        status_url: str | None = None,
        log_path: str | None = None,
        pid: int | None = None,
        journal_unit: str | None = None,
        log_copied: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Watch a daemon that is already running (started by systemd, say), from now on.

        Its pid is ``pid``, else the owner of the listening socket when this user may see it; with a
        pid its death is seen at once (a pidfd). Without one, and for a hung daemon, the liveness
        watch probes GetStatus and /status every ``liveness_interval`` seconds and records
        :class:`events.DaemonLiveness` when both stay silent (or nothing listens at the address), and
        again when it answers. The address is followed past the daemon's end: a daemon answering there
        again (systemd's ``Restart=``) is its next run (:meth:`_follow_restart`). ``journal_unit``: the
        log is read through journalctl into daemon.log. ``log_copied``: ``log_path`` is copied into daemon.log
        by the caller, and awaiting it brings the copy up to date; the run's lines are read there.
        """
        self.program = None
        self.listen, self.status_url = address, status_url
        self.pid = pid if pid is not None else listener_pid(address)
        if journal_unit is not None:
            self._journal_unit = journal_unit
            self.log_path = self.session.daemon_log_path
        else:
            self.log_path = Path(log_path) if log_path is not None else None
            self._log_copied = log_copied if log_path is not None else None
        await self._reset_client()
        await self._read_emulated_box()
        await self._attached_run(time.time())
        self._liveness_task = asyncio.ensure_future(self._watch_liveness())

    async def _read_emulated_box(self) -> None:
        """An attached daemon's memory_scale, time_scale and box pid when its /status says it is cuzk-engine
        (``emulated_box``), so its memory is charted as the box it emulates, its times are the box's and an
        OOM kill of its box finds the kernel's lines; None for the real daemon, or a /status not answering
        (its memory is then the process tree's and its times wall time, as a real daemon's)."""
        document: dict[str, Any] = {}
        if self.status_url is not None:
            with contextlib.suppress(StatusError, OSError, TimeoutError):
                document = (
                    await fetch_status_json(self.status_url, timeout=min(STATUS_TIMEOUT_S, self.liveness_interval * 2))
                    or {}
                )
        self.memory_scale = engine_memory_scale(document)
        self.time_scale = engine_time_scale(document)
        self._box_pid = engine_box_pid(document)

    async def _attached_run(self, t: float) -> None:
        """Record the attached daemon's run watched from ``t`` on (``self.pid``, when known, is watched)."""
        # A fatal report can only come from lines written from now on.
        await self._catch_up_log()
        self._launch_offset = 0
        log = self._run_log
        if log is not None:
            with contextlib.suppress(OSError):
                self._launch_offset = log.stat().st_size
        self._emit(self._attached(t))
        self._exit_task = None
        if self.pid is not None:
            self._watch = _ExitWatch(self.pid, None)
            self._exit_task = asyncio.ensure_future(self._observe_exit(self._watch))

    def _attached(self, t: float) -> ev.DaemonLaunched:
        """What opens an attached daemon's record in a session (from ``t``, the run's counts recorded anew)."""
        assert self.listen is not None
        self.run_began = t
        log_path = str(self.log_path) if self.log_path is not None else None
        return ev.DaemonLaunched(
            t, "attached", self.pid, (), None, self.listen, log_path, self.status_url,
            memory_scale=self.memory_scale, time_scale=self.time_scale,
        )  # fmt: skip

    def record_into(self, session: SessionWriter) -> None:
        """Record an attached daemon into ``session`` from now on (``record --keep`` rolls its session over):
        it begins as an attach does, with the daemon's DaemonLaunched; the journal's next line goes to its
        daemon.log. A launched daemon writes its own log into its session, which cannot move."""
        if self.program is not None:
            raise SupervisorError("a daemon this tool launched writes its log into its session: it cannot move")
        self.session = session
        if self._journal_unit is not None:
            self.log_path = session.daemon_log_path
        if self._journal_unit is not None or self._log_copied is not None:
            self._launch_offset = 0  # the new daemon.log: the run's first lines, then what comes next
        if self._journal_copy is not None:
            self._journal_copy.retarget(session.daemon_log_path)
        self._emit(self._attached(time.time()))

    async def _probe(self) -> tuple[bool, float | None, str | None]:
        """One liveness probe: (True, the daemon's uptime in seconds if it says, None) when GetStatus or
        /status answers, else (False, None, why)."""
        try:
            status = await self.client.get_status(timeout=min(STATUS_TIMEOUT_S, self.liveness_interval * 2))
        except ClientError as error:
            grpc_says = f"GetStatus: {error.status_text or error}"
        else:
            self._probed = (time.monotonic(), status)
            return True, float(status.uptime_seconds), None
        if self.status_url is None:
            return False, None, grpc_says
        try:
            document = await fetch_status_json(self.status_url, timeout=self.liveness_interval * 2)
        except (StatusError, OSError, TimeoutError) as error:
            return False, None, f"{grpc_says}; /status: {error or type(error).__name__}"
        if document is None:
            return False, None, f"{grpc_says}; /status: connection refused"
        uptime = document.get("uptime_secs")
        return True, (float(uptime) if isinstance(uptime, int | float) else None), None

    async def _watch_liveness(self) -> None:
        """Probe an attached daemon until closed; record readiness, silence, its end and the next run at its
        address (see :meth:`attach`)."""
        ready = False
        began: float | None = None  # when the run watched now started, by its uptime
        last_answer: float | None = None
        silent_since: float | None = None
        said_silent = False
        while True:
            answered, uptime, why = await self._probe()
            now = time.time()
            exited = self._exit_task is not None and self._exit_task.done()
            if answered:
                started = now - uptime if uptime is not None else None
                restarted = began is not None and started is not None and started - began > RESTARTED_AFTER_S
                if not ready:
                    ready = True
                    self._start_journal(uptime)
                    self._emit(ev.DaemonReadyObserved(t=now, pid=self.pid, startup_s=0.0, uptime_s=uptime))
                elif exited or restarted:
                    await self._follow_restart(now, uptime, last_answer)
                elif said_silent:
                    self._emit(ev.DaemonLiveness(now, True, "answers again", uptime))
                if started is not None and (began is None or exited or restarted):
                    began = started
                silent_since, said_silent, last_answer = None, False, now
            elif not exited:  # a death seen (the pidfd) needs no word on the silence that follows it
                silent_since = now if silent_since is None else silent_since
                # Before the first answer, nothing there is said at once; a known daemon gets a grace.
                due = not ready or now - silent_since >= SILENT_AFTER_S
                if due and not said_silent:
                    said_silent = True
                    if not ready:
                        self._start_journal(None)  # the log may tell why it does not answer
                    what = f"nothing answers at {self.listen}" if not ready else "the daemon stopped answering"
                    self._emit(ev.DaemonLiveness(now, False, f"{what} ({why})"))
            if exited:
                await asyncio.sleep(self.liveness_interval)  # watching the address for the next run
            else:
                await self._sleep_or_exit(self.liveness_interval)

    async def _follow_restart(self, now: float, uptime: float | None, last_answer: float | None) -> None:
        """A daemon answers at the attached address as a new run: the one watched was restarted (systemd's
        ``Restart=``, an operator). Its end, if not seen, is recorded as unseen; the new run is attached to
        as :meth:`attach` does, its pid the socket's owner when this user may see it, else unknown."""
        if self._exit_task is None or not self._exit_task.done():
            if self._exit_task is None:
                evidence = ["its end was not seen (no pid to watch)"]
            else:  # the pid watched still runs, yet another daemon serves the address: that one is watched now
                evidence = [f"pid {self.pid} still runs, but no longer serves {self.listen}"]
                self._exit_task.cancel()
                if self._watch is not None:
                    self._watch.close()
            if last_answer is not None:
                evidence.append(f"it last answered at {time.strftime('%H:%M:%S', time.localtime(last_answer))}")
            up = f", up {uptime:.0f} s" if uptime is not None else ""
            self.last_exit = ev.DaemonExited(
                last_answer or now, self.pid, None, None, "unknown",
                (*evidence, f"a new daemon run answers at {self.listen}{up}"),
            )  # fmt: skip
            self._emit(self.last_exit)
        self.pid = await asyncio.to_thread(listener_pid, self.listen or "")
        await self._read_emulated_box()
        await self._attached_run(now)
        self._emit(ev.DaemonReadyObserved(t=now, pid=self.pid, startup_s=0.0, uptime_s=uptime))
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown: the socket's owner is not this user's to see"
        said = f"the daemon at {self.listen} was restarted: a new run answers there ({pid})"
        self._emit(ev.Notice(now, "info", said))

    def _start_journal(self, uptime: float | None) -> None:
        """``journalctl -f -u UNIT``'s messages appended to daemon.log: right after the last entry it holds when
        the session is continued, else from this daemon run's start when its uptime is known, else its last
        lines. As JSON through a pipe, an entry at a time with its cursor (log_copy.JournalCopy): a continued
        session reads no entry twice, one that rolls over (:meth:`record_into`) takes the next entry, and
        journalctl ends with this process however it ends (its next write breaks the pipe) instead of
        appending to the session for ever."""
        if self._journal_unit is None or self._journal is not None:
            return
        resume = journal_resume(self.session.daemon_log_path)
        if resume is not None:
            since = ["--after-cursor", resume.cursor]
        elif uptime is not None:
            since = ["--since", f"@{int(time.time() - uptime)}"]
        else:
            since = ["--lines", "1000"]
        # MESSAGE only: the cursor comes with it (journalctl(1) --output-fields; systemd 236 and later).
        argv = ["journalctl", "-o", "json", "--output-fields=MESSAGE", "--all", "-f", "-u", self._journal_unit, *since]
        try:
            journal = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        except OSError as error:
            self._emit(ev.Notice(time.time(), "error", f"cannot read the journal ({shlex.join(argv)}): {error}"))
            return
        assert journal.stdout is not None
        self._journal = journal
        self._journal_copy = JournalCopy(os.dup(journal.stdout.fileno()), self.session.daemon_log_path, resume)
        journal.stdout.close()

    def recent_status(self, max_age: float) -> pb.GetStatusResponse | None:
        """The liveness probe's GetStatus answer if it is at most ``max_age`` seconds old (None: ask)."""
        if self._probed is None or time.monotonic() - self._probed[0] > max_age:
            return None
        return self._probed[1]

    async def _reset_client(self) -> None:
        self._probed = None  # a new daemon run's figures come from a new answer
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _wait_ready(self, launched_t: float) -> ev.DaemonReadyObserved:
        deadline = time.monotonic() + self.start_timeout
        follower = self._progress_follower()
        while True:
            if follower is not None and self._on_progress is not None:
                for event in follower.poll():
                    text = _progress_text(event)
                    if text is not None:
                        self._on_progress(text)
            if self._exit_task is not None and self._exit_task.done():
                exit = self._exit_task.result()
                detail = exit.error_report or "; ".join(exit.evidence)
                raise DaemonStartError(f"the daemon exited before it was ready ({exit.cause}): {detail}", exit)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DaemonStartError(
                    f"the daemon did not answer GetStatus within {self.start_timeout:.0f} s; {self._log_tail_said()}"
                )
            with contextlib.suppress(ClientError):
                await self.client.get_status(timeout=min(2.0, remaining))
                if self.cgroup is not None:  # an engine's box joined it before the engine served
                    with contextlib.suppress(OSError):
                        self._cgroup_pids = tuple(self.cgroup.pids())
                ready = ev.DaemonReadyObserved(t=time.time(), pid=self.pid, startup_s=time.time() - launched_t)
                self._emit(ready)
                return ready
            await self._sleep_or_exit(_POLL_S)

    def _progress_follower(self) -> LogFollower | None:
        return self.run_log_follower()

    def run_log_follower(self, *, skip_inert: bool = False) -> LogFollower | None:
        """A reader of the current daemon run's log, from its launch (or attach) on; None without a log."""
        log = self._run_log
        if log is None:
            return None
        return LogFollower(log, self._launch_offset, skip_inert=skip_inert, details=not skip_inert)

    @property
    def _run_log(self) -> Path | None:
        """The file the daemon's lines are read from: the session's copy of an attached daemon's log file (see
        ``log_copied``), else :attr:`log_path` (the session's daemon.log but for an attached file not copied)."""
        return self.session.daemon_log_path if self._log_copied is not None else self.log_path

    async def _catch_up_log(self) -> None:
        """Bring the session's copy of the attached daemon's log file up to date. Shielded: the copy runs in a
        thread under the caller's lock, which a cancelled wait would let go of while it still writes."""
        if self._log_copied is not None:
            await asyncio.shield(self._log_copied())

    async def _sleep_or_exit(self, seconds: float) -> None:
        if self._exit_task is None:
            await asyncio.sleep(seconds)
            return
        await asyncio.wait([self._exit_task], timeout=seconds)

    async def _observe_exit(self, watch: _ExitWatch) -> ev.DaemonExited:
        returncode = await watch.done
        ended_t = time.time()  # the end's time, not the evidence's: a restarted daemon may log meanwhile
        watch.close()
        oom_after = self.cgroup.oom_kill_count() if self.cgroup is not None and self.program is not None else None
        kernel = None
        if (returncode is None or returncode == -signal.SIGKILL) and self.pid is not None:
            box = () if self._box_pid is None else (self._box_pid,)
            kernel = await asyncio.to_thread(kernel_oom_evidence, {self.pid, *self._cgroup_pids, *box})
        await self._catch_up_log()  # the daemon's last lines, a fatal report among them
        exit = classify_exit(
            t=ended_t,
            pid=self.pid,
            returncode=returncode,
            oom_kills_before=self._oom_before if oom_after is not None else None,
            oom_kills_after=oom_after,
            cgroup_path=str(self.cgroup.path) if self.cgroup is not None else None,
            sent_signals=self._sent_signals,
            log_tail=self._log_tail(),
            kernel_evidence=kernel,
            budget=self._budget_facts(),
        )
        if exit.cause == "stopped" and self._handover is not None:
            exit = dataclasses.replace(exit, handover=self._handover)
        self.last_exit = exit
        self._emit(exit)
        return exit

    def _budget_facts(self) -> BudgetFacts | None:
        """The running config's budget facts (a launched daemon's only: an attached one's config is unknown)."""
        if self.program is None or self._config_text is None:
            return None
        with contextlib.suppress(ConfigError, ValueError, OSError, KeyError):
            return gather_budget_facts(self._config_text, self.program.mode, self.memory_limit)
        return None

    def _log_tail_said(self, lines: int = 5) -> str:
        """The last lines the daemon wrote since its launch, for a message (a hung start's only evidence)."""
        tail = [strip_ansi(line) for line in self._log_tail().splitlines() if line.strip()][-lines:]
        if not tail:
            return f"it wrote nothing to {self.log_path}" if self.log_path is not None else "its log is unknown"
        return f"the last lines of {self.log_path}:\n" + "\n".join(tail)

    def _log_tail(self) -> str:
        log = self._run_log
        if log is None:
            return ""
        try:
            with log.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                start = max(self._launch_offset, size - _REPORT_TAIL_BYTES)
                f.seek(start)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # -- drain / stop / restart -----------------------------------------------------------

    async def _daemon_in_flight(self, known: Sequence[InFlight], finished: Collection[str]) -> list[InFlight]:
        """What the daemon itself says is in flight (/status when enabled, and GetStatus), beside ``known``."""
        document = None
        if self.status_url is not None:
            with contextlib.suppress(StatusError, OSError, TimeoutError):
                document = await fetch_status_json(self.status_url)
        status = await self.client.get_status()
        queued = sum(q.pending for q in status.queues)
        running = tuple(g.current_job_id for g in status.gpus if g.current_job_id)
        return merge_in_flight(known, document, queued, running, finished)

    async def drain(
        self,
        timeout: float,
        known: Callable[[], Awaitable[tuple[Sequence[InFlight], Collection[str]]]] | None = None,
        *,
        on_round: Callable[[list[InFlight]], None] | None = None,
        force: asyncio.Event | None = None,
    ) -> bool:
        """Wait until nothing is in flight twice in a row; True when drained, False when ``force`` was set.

        ``known()`` is what the session knows: the work in flight (the log's open jobs, the caller's
        own outstanding Prove calls) and the ids of jobs the log saw finish. That is the reliable
        half: upstream's /status never forgets a failed partition and GetStatus sees only the
        scheduler's queue (see :func:`merge_in_flight`). ``on_round`` receives each round's list (to
        show it); setting ``force`` restarts anyway. Raises TimeoutError naming the work still there.
        """
        deadline = time.monotonic() + timeout
        idle_in_a_row = 0
        while idle_in_a_row < 2:
            if force is not None and force.is_set():
                return False
            if self._exit_task is not None and self._exit_task.done():
                raise SupervisorError("the daemon exited while draining")
            work = await self._daemon_in_flight(*(await known() if known is not None else ((), ())))
            if on_round is not None:
                on_round(work)
            if time.monotonic() > deadline:
                still = "; ".join(item.describe() for item in work)
                raise TimeoutError(f"still in flight after {timeout:.0f} s: {still}")
            idle_in_a_row = idle_in_a_row + 1 if not work else 0
            if idle_in_a_row < 2:
                waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(asyncio.sleep(0.2))]
                if force is not None:
                    waits.append(asyncio.ensure_future(force.wait()))
                _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
        return True

    def send_signal(self, number: int) -> None:
        if self.pid is None or not self.running:
            raise SupervisorError("no daemon process to signal")
        self._sent_signals.append(number)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, number)

    async def stop(self, grace: float | None = None, handover: str | None = None) -> ev.DaemonExited:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit diagnosis, which names the
        ``handover`` this stop is (HANDED_TO_BENCHMARK, …) when the daemon ended as asked."""
        if self._exit_task is None or self._exit_task.done():
            if self.last_exit is not None:
                return self.last_exit
            raise SupervisorError("no daemon process to stop (attached without a pid?)")
        self._handover = handover
        self.send_signal(signal.SIGTERM)
        done, _ = await asyncio.wait([self._exit_task], timeout=self.stop_grace if grace is None else grace)
        if not done:
            self.send_signal(signal.SIGKILL)
        return await self.exited()

    async def stop_to_apply(self) -> ev.DaemonExited:
        """Stop the daemon to start it again with the next config version: a planned stop (restarting_to_apply)."""
        return await self.stop(handover=ev.restarting_to_apply(self.session.next_config_version()))

    async def restart(self, config_text: str, changes: Sequence[str] = ()) -> ev.DaemonReadyObserved:
        """Stop the daemon (if running), then start it with a new config version and wait for readiness."""
        if self.running:
            await self.stop_to_apply()
        return await self.start(config_text, changes)

    async def close(self, stop: bool = True, handover: str | None = None) -> None:
        """Release what the supervisor holds; with ``stop`` the daemon is stopped (as ``handover``, see
        :meth:`stop`) and its cgroup removed."""
        if stop and self.running and self.pid is not None and self.program is not None:
            await self.stop(handover=handover)
        if self._liveness_task is not None:
            self._liveness_task.cancel()
            await asyncio.gather(self._liveness_task, return_exceptions=True)
            self._liveness_task = None
        if self._journal is not None:
            self._journal.terminate()
            await asyncio.to_thread(self._journal.wait)
            self._journal = None
        if self._journal_copy is not None:
            await asyncio.to_thread(self._journal_copy.join, JOURNAL_COPY_END_S)
            self._journal_copy = None
        await self._reset_client()
        if self._watch is not None and not self.running:
            self._watch.close()
        if self.cgroup is not None and not self.running:
            with contextlib.suppress(CgroupError, OSError):
                # Emptying a group can take seconds of polling: off the event loop.
                await asyncio.to_thread(self.cgroup.remove)
            self.cgroup = None


@dataclass(frozen=True, slots=True)
class InFlight:
    """One piece of work a restart would kill: a job (``job_id``) or a count (``job_id`` "")."""

    job_id: str
    state: str  # what it is doing, e.g. "2 synthesizing, 1 on the GPU, 3/10 done"
    age_s: float | None  # how long it has been in flight, when known
    source: str  # where we know it from: "log", "/status", "GetStatus", "our Prove calls"

    def describe(self) -> str:
        age = f" for {_age_text(self.age_s)}" if self.age_s is not None else ""
        head = f"{self.job_id}: " if self.job_id else ""
        return f"{head}{self.state}{age} ({self.source})"


def _age_text(seconds: float) -> str:
    whole = max(0, int(seconds))
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"


# /status partition states that mean work is still going on (status.rs PartitionPhase::as_str).
_LIVE_PARTITION_STATES: Final = ("pending", "synthesizing", "synth_done", "gpu")


def merge_in_flight(
    known: Sequence[InFlight],
    document: dict[str, Any] | None,
    queued: int,
    gpu_jobs: Sequence[str] = (),
    finished: Collection[str] = (),
) -> list[InFlight]:
    """Everything in flight: ``known`` (from the session), then what the daemon adds that it does not list.

    Upstream's answers are inputs, never the verdict, because each is wrong in a known way:

    * /status (status.rs StatusTracker): a failed partition gets ``partition_failed`` only, so
      ``synthesis.active`` is never lowered and the job never gets ``job_completed``, which the
      30 s clean-up in ``snapshot`` needs: it stays in ``pipelines`` forever. So ``synthesis.active``
      is not read at all, and a /status job counts only while one of its partitions is in a live
      state, none failed, and the session does not list it already (``known``) or know it as
      ``finished`` (its log ended it).
      Monolithic PoSt work never reaches the tracker: only the log shows it.
    * GetStatus (engine.rs get_status): ``queues`` holds requests the scheduler has not dispatched
      yet, and reports nothing of partitions synthesising, so it reads idle while they run without
      status_listen; its pending requests still count (``queued``), as do GPU workers' current jobs.
    """
    items = list(known)
    seen = {item.job_id for item in known if item.job_id} | set(finished)
    if document is not None:
        try:
            for job in document["pipelines"]:
                job_id = str(job["job_id"])
                live = [p["state"] for p in job["partitions"] if p["state"] in _LIVE_PARTITION_STATES]
                if not live or job_id in seen or any(p["state"] == "failed" for p in job["partitions"]):
                    continue
                seen.add(job_id)
                done = int(job["partitions_done"])
                counts = ", ".join(f"{live.count(state)} {state}" for state in _LIVE_PARTITION_STATES if state in live)
                age = job.get("started_secs_ago")
                items.append(
                    InFlight(
                        job_id,
                        f"{counts}, {done}/{job['total_partitions']} done",
                        float(age) if isinstance(age, int | float) else None,
                        "/status",
                    )
                )
            queued = max(queued, int(document["counters"]["queue_depth"]))
        except (KeyError, TypeError, ValueError) as error:
            raise StatusError(f"unexpected /status document: {error}") from error
    for job_id in gpu_jobs:
        if job_id not in seen:
            seen.add(job_id)
            items.append(InFlight(job_id, "on a GPU", None, "GetStatus"))
    if queued:
        items.append(InFlight("", f"{queued} request{'s' if queued != 1 else ''} waiting in the scheduler queue",
                              None, "GetStatus"))  # fmt: skip
    return items
