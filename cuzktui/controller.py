"""What the UI may ask of the core: the controller protocol.

The UI holds one controller. It reads ``controller.model`` (a :class:`SessionModel`) and calls
the methods below; it never touches the supervisor, the samplers or the session files itself.
A live controller launches or attaches to a daemon and records a session; a replay controller
plays a recorded session (or a raw daemon log) through the very same model and is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .model import SessionModel
from .proofinputs import RequestParams

if TYPE_CHECKING:
    # Types only: the UI imports this module, and these live beside system, cgroup and file code
    # the UI must not load (the import contracts in pyproject.toml ignore type-checking imports).
    from .comparison import SessionSummary
    from .planner import MemcheckReport
    from .session import SessionInfo
    from .system import ProbeProgress, ProbeResult


class ControllerError(Exception):
    """An operator request that cannot be carried out (live or replay); the message says why."""


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """A benchmark: what the Bench screen (or ``--run-bench``) asks the controller for, and what the
    headless runner (``cuzk-tui bench``, :class:`cuzktui.bench.BenchRunner`) runs."""

    kind: str  # porep | snap | wpost | winning
    count: int
    concurrency: int
    input_path: str | None = None
    oom_retries: int = 3
    # Beside the input, as cuzk-bench batch's flags give it.
    params: RequestParams = field(default_factory=RequestParams)


@dataclass(frozen=True, slots=True)
class TuneRequest:
    """A knob search (``cuzk-tui tune``'s options): ``count`` proofs of ``kind`` per trial, starting at
    benchmark ``concurrency``, at most ``trials`` benchmarks within ``time_budget`` (``2h``, ``90m``)."""

    kind: str
    count: int
    concurrency: int
    trials: int = 12
    time_budget: str = "2h"
    price_per_hour: float | None = None
    input_path: str | None = None
    params: RequestParams = field(default_factory=RequestParams)  # each trial's requests, as bench's


@dataclass(frozen=True, slots=True)
class TuneTrialRow:
    """One trial as the Tune screen shows it (cuzktui.tune computes every figure)."""

    index: int
    status: str  # completed | oom | failed | stopped | skipped | running
    changes: tuple[str, ...]  # "name = value" of the knobs that differ from the starting config
    proofs_per_hour: float | None  # None: not measured (skipped, or still running)
    peak_rss_bytes: int | None  # the box's bytes; a skipped trial's is the model's prediction
    predicted: bool  # the peak is the model's prediction, not a measurement
    limit_bytes: int | None
    peak_share: float | None  # peak ÷ limit: the share of the limit the peak took
    oom_kills: int
    price_per_proof: float | None
    completed: int  # proofs completed (so far, while running)
    note: str  # the OOM evidence in brief, the early stop, why it was skipped, whose run it repeats
    spread: float | None = None  # ± relative, from the trial's own completions (None: not measured)


@dataclass(frozen=True, slots=True)
class TuneBest:
    """The config that beat the starting one beyond the noise, and what applying it changes in the
    running config."""

    index: int  # its first trial
    proofs_per_hour: float  # the mean of its runs
    speedup: float | None  # × the starting config's rate (None: the start did not complete)
    peak_share: float | None  # the best trial's peak ÷ limit
    concurrency: int  # the benchmark concurrency it was measured at (not a daemon knob)
    changes: tuple[tuple[str, Any], ...]  # ("section.key", value) that differ from the running config
    check_errors: tuple[str, ...]  # what ``cuzk-tui config check`` calls an error in the result


TuneState = Literal["running", "finished", "cancelled", "failed"]


@dataclass(frozen=True, slots=True)
class TuneSnapshot:
    """A knob search's progress: what the Tune screen draws."""

    state: TuneState
    kind: str
    count: int
    directory: Path  # tune.json and each trial's session (``cuzk-tui tune --resume DIR`` continues it)
    limit_bytes: int  # the box's memory limit, in the box's bytes
    time_basis: str  # whose clock proofs/hour is in
    trials_run: int
    max_trials: int
    trials: tuple[TuneTrialRow, ...]  # in order; a running trial last
    best: TuneBest | None
    message: str = ""  # why it ended (converged, trial limit, time budget, cancelled, the error)
    tier: str | None = None  # upstream's documented figures for a box of this RAM
    verdict: str = ""  # whether a config beat the starting one beyond the noise, in words
    left_alone: str | None = None  # the knobs the search does not vary in the daemon's mode, and why


class PollBackoff:
    """When the next poll runs after failures, and what to tell the operator about them.

    A poll that fails every second would raise a notification every second and hammer a sick
    daemon; instead the delay doubles per consecutive failure up to ``ceiling``, the first failure
    is said once (with the retry policy), and the first success after failures is said once too.
    """

    def __init__(self, interval: float, ceiling: float = 30.0) -> None:
        self.interval = interval
        self.ceiling = max(ceiling, interval)
        self.failures = 0  # consecutive failed polls

    def delay(self) -> float:
        """Seconds until the next poll."""
        if self.failures == 0:
            return self.interval
        return min(self.ceiling, self.interval * 2.0 ** min(self.failures, 32))

    def failed(self, error: BaseException) -> str | None:
        """Count a failed poll; the message to show, only for the first of a run of failures."""
        self.failures += 1
        if self.failures > 1:
            return None
        return f"poll failed: {error}; retrying, less often while it fails (up to every {self.ceiling:g} s)"

    def succeeded(self) -> str | None:
        """Count a good poll; the message to show, only when it ends a run of failures."""
        failures, self.failures = self.failures, 0
        if failures == 0:
            return None
        return f"poll recovered after {failures} failed attempt{'s' if failures > 1 else ''}"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the UI is talking to, for the header and the dashboard's identity panel."""

    mode: Literal["engine", "real", "attached", "replay"]
    title: str  # e.g. "cuzk-engine (embedded emulator)" or "cuzk-daemon /usr/local/bin/cuzk-daemon"
    session_dir: Path | None


class Controller(Protocol):
    model: SessionModel

    @property
    def identity(self) -> Identity: ...

    @property
    def read_only(self) -> bool:
        """True in replay: no daemon control, no benchmarks, no config changes."""
        ...

    async def start(self) -> None:
        """Launch or attach to the daemon (live) or load the source (replay)."""

    async def poll(self) -> bool:
        """Fold new events into the model; True when the model changed. Called about once a second."""
        ...

    def log_backlog(self) -> int:
        """Bytes of the daemon's log written but not read yet (a live poll catching up on a flood); 0 when
        none. The app polls again at once while it is not 0, and says it on the status line."""
        ...

    def config_values(self) -> dict[str, Any]:
        """The running config's effective knob values, keyed "section.key"."""
        ...

    def config_path(self) -> Path | None: ...

    async def apply_config(self, changes: Mapping[str, Any]) -> None:
        """Validate, save a new config version, drain, restart the daemon with it."""

    async def start_bench(self, request: BenchRequest) -> None: ...

    async def cancel_bench(self) -> None: ...

    async def stop_daemon(self) -> None: ...

    def daemon_running(self) -> bool: ...

    def bench_running(self) -> bool: ...

    async def shutdown(self, stop_daemon: bool) -> None:
        """Leave: stop the daemon and a running benchmark, or leave both running for a later attach."""

    @property
    def clock(self) -> ReplayClock | None:
        """The replay controls (a time cursor and a speed); None for a live controller."""
        ...

    def reattach_hint(self) -> str:
        """The command that watches a daemon left running ("" when there is none to re-attach to)."""
        ...

    def running_config_source(self) -> str | None:
        """Where the running config (``config_values``) came from, for the Knobs screen; None: unknown
        (attached without ``--config``); "": nothing to add to the config path."""
        ...

    def drain_in_flight(self) -> list[str] | None:
        """While an apply waits for work in flight: that work, one line each (which job, doing what, for
        how long, known from where); None when no drain is going on."""
        ...

    def restart_anyway(self) -> None:
        """Stop waiting for the drain and restart now, killing the work in flight (and saying so)."""

    def left_running(self) -> list[str]:
        """What keeps running if the operator leaves now without stopping anything, in words."""
        ...

    def farewell(self) -> str:
        """What to print on the terminal once the app has exited (what was left running, the attach line)."""
        ...

    def hung_up(self) -> None:
        """The terminal hung up (an SSH drop): record what keeps running and how to attach again, at once
        and without the event loop, which may be stuck writing to the vanished terminal."""
        ...

    async def start_tune(self, request: TuneRequest) -> None:
        """Start a knob search: each trial a benchmark on this controller's daemon program, recorded as a
        session; ControllerError where none can run (replay, attached daemon, a benchmark running)."""

    async def cancel_tune(self) -> None:
        """Stop the search; the trial cut short is not recorded (a resumed search runs it again)."""

    def tune_snapshot(self) -> TuneSnapshot | None:
        """The search's progress, the last search's result once it ended; None before any search."""
        ...

    def memcheck_report(self) -> MemcheckReport:
        """What this machine gives the daemon, for the running config. Blocking: call it from a thread."""
        ...

    def memprobe(self, on_progress: ProbeProgress) -> ProbeResult:
        """What a child process can really allocate on this machine, reporting as it goes (30-60 s on
        a large box, memory taken from everything else meanwhile). Blocking: call it from a thread."""
        ...

    def list_sessions(self, root: Path | None = None) -> list[SessionInfo]:
        """The recorded sessions under ``root`` (default: the sessions directory). Blocking."""
        ...

    def summarize_session(self, info: SessionInfo) -> SessionSummary:
        """One recorded session's figures for a comparison. Blocking."""
        ...


class ReplayClock(Protocol):
    """Extra controls a replay controller offers: a time cursor and a playback speed."""

    cursor_t: float | None
    speed: float
    playing: bool

    @property
    def span(self) -> tuple[float, float] | None:
        """First and last event times of the whole replay (None when it is empty)."""
        ...

    def seek(self, t: float) -> None: ...

    def play(self, speed: float) -> None: ...

    def pause(self) -> None: ...


class ReadOnlyControls:
    """The controller methods of one that controls nothing: no daemon to stop, no benchmark to run, no
    config to apply, nothing left running on leaving. A replay is exactly this; a test double starts
    from it and overrides what it records."""

    @property
    def read_only(self) -> bool:
        return True

    async def apply_config(self, changes: Mapping[str, Any]) -> None:
        raise ControllerError("a replay is read-only")

    async def start_bench(self, request: BenchRequest) -> None:
        raise ControllerError("a replay is read-only")

    async def cancel_bench(self) -> None:
        return None

    async def start_tune(self, request: TuneRequest) -> None:
        raise ControllerError("a replay is read-only: a knob search runs benchmarks (cuzk-tui tune, or the live TUI)")

    async def cancel_tune(self) -> None:
        return None

    def tune_snapshot(self) -> TuneSnapshot | None:
        return None

    def log_backlog(self) -> int:
        return 0

    async def stop_daemon(self) -> None:
        return None

    def daemon_running(self) -> bool:
        return False

    def bench_running(self) -> bool:
        return False

    async def shutdown(self, stop_daemon: bool) -> None:
        return None

    def reattach_hint(self) -> str:
        return ""

    def left_running(self) -> list[str]:
        return []

    def drain_in_flight(self) -> list[str] | None:
        return None

    def restart_anyway(self) -> None:
        return None

    def running_config_source(self) -> str | None:
        return ""

    def farewell(self) -> str:
        return ""

    def hung_up(self) -> None:
        return None  # nothing runs that would need a record of how to attach again
