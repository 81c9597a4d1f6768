"""Fakes for every UI test: a fixed session, a fake controller, a one-screen app, fixed data.

:func:`scenario` builds one fixed event stream (no clock anywhere): a cuzk-engine launched under
a 64 GiB cgroup limit with a 58 GiB budget, PoRep jobs of 4 partitions flowing through 4
synthesis workers and 2 GPU workers, RSS climbing into an OOM kill, a restart, the resubmitted
job completing in the second daemon run, GPU samples, GPU_TIMING / CUZK_TIMING lines and a few
notices. The benchmark script reuses it (``sample_every=1``) as a live feed. :class:`ScreenApp`
pushes one screen on a plain app (the screens' own tests), with :func:`bench_events` and
:func:`memcheck_report` as their data. No clock anywhere: snapshots stay the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from textual.app import App
from textual.screen import Screen

from cuzktui import events as ev
from cuzktui.config import ConfigDocument
from cuzktui.controller import (
    BenchRequest,
    ControllerError,
    Identity,
    ReadOnlyControls,
    ReplayClock,
    TuneRequest,
    TuneSnapshot,
)
from cuzktui.local import LocalQueries
from cuzktui.model import SessionModel
from cuzktui.planner import MemcheckReport, make_report
from cuzktui.samplers import GpuDevice
from cuzktui.system import CgroupMemory
from cuzktui.ui.theme import variable_defaults
from cuzktui.units import GiB

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
OOM_AT = 140.0  # seconds after T0
RESTART_AT = 145.0
END_AT = 300.0
PARTITIONS = 4
SYNTH_S = 40.0
GPU_S = 9.0

Timed = tuple[float, ev.Event]


def _jobs(origin: float, start: float, job_ids: list[str], stop: float) -> list[Timed]:
    """TIMELINE events of jobs started every 36 s from ``start``; ``origin`` is the engine start.

    Times are seconds after T0.

    Partitions of a job synthesize together (4 workers); the 2 GPU workers take them in order.
    Events after ``stop`` are not emitted (the daemon died or the session ends there).
    """
    events: list[Timed] = []
    gpu_free = [start, start]
    t_job = start

    def emit(t: float, name: str, job: str, partition: int, worker: int | None = None, **extra: str) -> None:
        if t > stop:
            return
        detail = {"partition": str(partition), **extra}
        if worker is not None:
            detail = {"worker": str(worker), **detail}
        offset = round((t - origin) * 1000)
        events.append((T0 + t, ev.TimelineEvent(offset, name, job, detail, partition=partition, worker=worker)))

    for job in job_ids:
        for p in range(PARTITIONS):
            synth_start = t_job + p * 0.5
            synth_end = synth_start + SYNTH_S + 2 * p
            emit(synth_start, "SYNTH_START", job, p)
            emit(synth_end, "SYNTH_END", job, p, synth_ms=str(round((synth_end - synth_start) * 1000)))
            emit(synth_end, "GPU_QUEUE", job, p)
            worker = 0 if gpu_free[0] <= gpu_free[1] else 1
            pickup = max(synth_end, gpu_free[worker])
            emit(pickup, "GPU_PICKUP", job, p, worker)
            emit(pickup, "GPU_START", job, p, worker)
            end = pickup + GPU_S
            emit(end, "GPU_END", job, p, worker, gpu_ms=str(round(GPU_S * 1000)))
            gpu_free[worker] = end
        last_end = max(gpu_free)
        if last_end <= stop:
            events.append(
                (
                    T0 + last_end,
                    ev.ProofAssembled(T0 + last_end, job, 1920, round((last_end - t_job) * 1000), None, None),
                )
            )
        t_job += SYNTH_S * 0.9
    return events


def scenario(sample_every: float = 5.0, end_at: float = END_AT) -> list[Timed]:
    """The whole fixed session, sorted by time: (time, event) pairs."""
    limit = 64 * GiB
    out: list[Timed] = []

    def at(t: float, event: ev.Event) -> None:
        out.append((T0 + t, event))

    def launch(t: float, pid: int) -> None:
        at(
            t,
            ev.DaemonLaunched(
                T0 + t,
                "engine",
                pid,
                ("cuzk-engine", "-c", "/srv/cuzk/cuzk.toml"),
                "/srv/cuzk/cuzk.toml",
                "127.0.0.1:9820",
                "/srv/cuzk/session/daemon.log",
                memory_limit_bytes=limit,
            ),
        )
        at(t + 0.5, ev.DaemonStarting(T0 + t + 0.5))
        at(t + 1, ev.EngineStarted(T0 + t + 1, True))
        at(t + 1, ev.BudgetInitialized(T0 + t + 1, 58))
        at(t + 1, ev.PipelineConfigured(T0 + t + 1, 4, 4, 2))
        at(t + 2, ev.SrsLoadStarted(T0 + t + 2, "porep-32g", "/data/zk/params/v28-porep.params", 44))
        at(t + 12, ev.SrsLoaded(T0 + t + 12, "porep-32g", 10_000, 44, 14))
        at(t + 13, ev.DaemonReadyObserved(T0 + t + 13, pid, 13.0))

    launch(0.0, 4242)
    at(14, ev.Notice(T0 + 14, "info", "benchmark porep x5 at concurrency 2 started"))
    at(14, ev.BenchStarted(T0 + 14, "b1", "porep", 5, 2, 3))
    first_run = _jobs(1.0, 15.0, ["porep-1000-1", "porep-1000-2", "porep-1000-3"], OOM_AT)
    out += [(t, e) for t, e in first_run]
    # One partition's GPU breakdown: while porep-1000-1 p0 is the only one on a GPU.
    at(56.0, ev.CuzkTiming({"pre_lock_cpu_ms": 210, "mutex_wait_ms": 0}, gpu=0))
    at(56.5, ev.CuzkTiming({"mutex_held_ms": 4120, "total_start_fn_ms": 4380}, gpu=0))
    at(
        61.0,
        ev.GpuTiming(
            T0 + 61, "spawn_blocking prove_start", 0, 0, None, {"spawn_to_enter_ms": 0, "prove_start_ms": 4402}
        ),
    )
    at(OOM_AT - 20, ev.Notice(T0 + OOM_AT - 20, "warning", "RSS at 95% of the cgroup limit"))
    at(
        OOM_AT,
        ev.DaemonExited(
            T0 + OOM_AT,
            4242,
            -9,
            9,
            "oom_kill",
            ("exit status 137 (SIGKILL)", "memory.oom_control: oom_kill 1"),
            None,
        ),
    )
    at(OOM_AT, ev.Notice(T0 + OOM_AT, "error", "daemon OOM-killed: restarting with the same config"))
    at(OOM_AT + 1, ev.BenchRestart(T0 + OOM_AT + 1, "b1", 1, "oom_kill", ("exit status 137",), "58GiB", 2))
    launch(RESTART_AT, 4343)
    second_run = _jobs(RESTART_AT + 1, RESTART_AT + 15, ["porep-1000-3", "porep-1000-4", "porep-1000-5"], end_at)
    out += second_run
    for t, event in first_run + second_run:
        if isinstance(event, ev.ProofAssembled):
            out.append((t, ev.ProofFinished(t, "b1", event.job_id or "", "porep", "COMPLETED", total_ms=60_000)))

    t = 0.0
    while t <= end_at:
        alive = t < OOM_AT or t >= RESTART_AT
        since = t if t < OOM_AT else t - RESTART_AT
        rss = (46 + min(since, OOM_AT) * 0.12) * GiB if alive else 0.5 * GiB
        at(t, ev.MemorySample(T0 + t, int(rss), int(rss + 1.5 * GiB), limit, 58 * GiB, int(min(rss, 58 * GiB))))
        busy = alive and since > 40
        at(
            t,
            ev.GpuSample(
                T0 + t, 0, "NVIDIA RTX 5070 Ti", int((9 if busy else 4.2) * GiB), 16 * GiB, 92.0 if busy else 0.0
            ),
        )
        t += sample_every
    out.sort(key=lambda item: item[0])
    return out


def build_model(events: list[Timed], until: float | None = None) -> SessionModel:
    """A model fed with the scenario up to ``until`` seconds after T0 (everything by default)."""
    model = SessionModel()
    for t, event in events:
        if until is not None and t > T0 + until:
            break
        model.apply(event)
    return model


class FakeController(ReadOnlyControls, LocalQueries):
    """A controller over a model (a fresh one by default) that records what the UI asks for.

    Tests flip its running flags, inject failures (``start_error``, ``poll_error``,
    ``apply_error``), move the model mid-apply (``on_apply``), or hand it a ``feed`` that each
    poll applies ``feed_step`` seconds of. ``running`` None: the daemon runs while the model says
    it is ready.
    """

    def __init__(
        self,
        model: SessionModel | None = None,
        *,
        mode: str | None = None,
        title: str = "cuzk-engine (embedded emulator)",
        running: bool | None = None,
        feed: list[Timed] | None = None,
        feed_step: float = 1.0,
        session_dir: Path | None = None,
        read_only: bool = False,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model if model is not None else SessionModel()
        mode = mode or ("replay" if read_only else "engine")
        self._identity = Identity(mode, title, session_dir)  # type: ignore[arg-type]
        self._read_only = read_only
        self.daemon_is_running = running
        self.bench_is_running = False
        doc = ConfigDocument()
        for name, value in (config or {}).items():
            section, _, key = name.partition(".")
            doc.set(section, key, value)
        self.values: dict[str, Any] = doc.effective()
        self.applied: list[dict[str, Any]] = []
        self.benches: list[BenchRequest] = []
        self.cancelled = 0
        self.tunes: list[TuneRequest] = []
        self.tune_cancels = 0
        self.tune: TuneSnapshot | None = None  # what tune_snapshot() answers
        self.start_error: Exception | None = None
        self.poll_error: Exception | None = None
        self.apply_error: Exception | None = None
        self.on_apply: Callable[[FakeController], None] | None = None
        self.polls = 0
        self.shutdowns: list[bool] = []
        # A live feed: each poll applies the next ``feed_step`` seconds of ``feed``.
        self._feed = list(feed or [])
        self._feed_step = feed_step
        self._feed_t = self._feed[0][0] if self._feed else 0.0

    @property
    def identity(self) -> Identity:
        return self._identity

    @property
    def read_only(self) -> bool:
        return self._read_only

    async def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error

    async def poll(self) -> bool:
        self.polls += 1
        if self.poll_error is not None:
            raise self.poll_error
        changed = False
        self._feed_t += self._feed_step
        while self._feed and self._feed[0][0] <= self._feed_t:
            changed = self.model.apply(self._feed.pop(0)[1]) or changed
        return changed

    def config_values(self) -> dict[str, Any]:
        return dict(self.values)

    def config_path(self) -> Path | None:
        return Path("/etc/cuzk/cuzk.toml")

    async def apply_config(self, changes: Mapping[str, Any]) -> None:
        if self.on_apply is not None:
            self.on_apply(self)
        if self.apply_error is not None:
            raise self.apply_error
        self.applied.append(dict(changes))
        self.values.update(changes)

    async def start_bench(self, request: BenchRequest) -> None:
        self.benches.append(request)
        self.bench_is_running = True

    async def cancel_bench(self) -> None:
        self.cancelled += 1
        self.bench_is_running = False

    async def start_tune(self, request: TuneRequest) -> None:
        if self.read_only:
            raise ControllerError("a replay is read-only")
        self.tunes.append(request)

    async def cancel_tune(self) -> None:
        self.tune_cancels += 1

    def tune_snapshot(self) -> TuneSnapshot | None:
        return self.tune

    async def stop_daemon(self) -> None:
        self.daemon_is_running = False

    def daemon_running(self) -> bool:
        if self.daemon_is_running is None:
            return self.model.daemon.phase == "ready"
        return self.daemon_is_running

    def bench_running(self) -> bool:
        return self.bench_is_running

    async def shutdown(self, stop_daemon: bool) -> None:
        self.shutdowns.append(stop_daemon)

    @property
    def clock(self) -> ReplayClock | None:
        return None

    def reattach_hint(self) -> str:
        listen = self.model.daemon.listen
        return f"cuzk-tui attach {listen}" if listen else ""


class FixedBoxController(FakeController):
    """A FakeController whose Memcheck reads the fixed box (:func:`memcheck_report`), not this machine."""

    def memcheck_report(self) -> MemcheckReport:
        return memcheck_report()


class FakeReplay(FakeController):
    """A read-only controller with a replay clock that never moves on its own."""

    def __init__(self, model: SessionModel) -> None:
        super().__init__(model, title="replay of /srv/cuzk/session", running=False, read_only=True)
        self.cursor_t: float | None = model.last_t
        self.speed = 10.0
        self.playing = False

    @property
    def clock(self) -> ReplayClock | None:
        return self

    @property
    def span(self) -> tuple[float, float] | None:
        first, last = self.model.first_t, self.model.last_t
        return (first, last) if first is not None and last is not None else None

    def seek(self, t: float) -> None:
        self.cursor_t = t

    def play(self, speed: float) -> None:
        self.speed = speed
        self.playing = True

    def pause(self) -> None:
        self.playing = False


_S = TypeVar("_S", bound=Screen[None])


def current_screen(app: App[None], cls: type[_S]) -> _S:
    """The app's screen, which must be a ``cls``."""
    screen = app.screen
    assert isinstance(screen, cls), f"{type(screen).__name__} shown, not {cls.__name__}"
    return screen


class ScreenApp(App[None]):
    """Pushes one screen built by ``make`` (the real app registers screens by name)."""

    def __init__(self, make: Callable[[], Screen[None]], name: str = "screen") -> None:
        super().__init__()
        self.make = make
        self.screen_name = name

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)  # the colours the real app draws with (CuzkApp)

    def on_mount(self) -> None:
        self.install_screen(self.make(), self.screen_name)
        self.push_screen(self.screen_name)


def bench_events(bench_id: str = "b1") -> list[ev.Event]:
    """A PoRep benchmark of 4 proofs, concurrency 2, with one OOM kill and a restart in the middle."""
    t = T0
    events: list[ev.Event] = [ev.BenchStarted(t, bench_id, "porep", 4, 2, 3)]
    for i in (1, 2):
        events.append(ev.ProofSubmitted(t + i, bench_id, f"porep-{i}", "porep"))
    events.append(
        ev.ProofFinished(t + 95, bench_id, "porep-1", "porep", "COMPLETED", "", 31_211, 29_400, 36_950, 88_400, 94_000)
    )
    events.append(ev.ProofFinished(t + 120, bench_id, "porep-2", "porep", "LOST", "broken pipe", wall_ms=119_000))
    events.append(
        ev.BenchRestart(
            t + 121, bench_id, 1, "oom_kill", ("exit status 137", "memory.oom_control oom_kill 1"), "150GiB", 2
        )
    )
    events.append(
        ev.ProofFinished(t + 220, bench_id, "porep-3", "porep", "COMPLETED", "", 1_200, 30_100, 37_300, 70_100, 99_000)
    )
    return events


def memcheck_report() -> MemcheckReport:
    """A container with a 256 GiB cgroup limit on a 1 TiB host, one GPU, a small memlock limit."""
    return make_report(
        host_mem_total_bytes=1024 * GiB,
        cgroup=CgroupMemory(1, Path("/docker/abc"), 256 * GiB, 12 * GiB, 0),
        memlock_bytes=64 * 1024 * 1024,
        cpus=64,
        cpu_quota=None,
        gpus=[GpuDevice(0, "NVIDIA RTX 5090", 32 * GiB)],
        gpu_state="nvml",
        listen_addresses=["0.0.0.0:9820"],
    )
