"""A fake controller and fixed data for pilot and snapshot tests of the screens."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from textual.app import App
from textual.screen import Screen

from cuzktui import events as ev
from cuzktui.config import ConfigDocument
from cuzktui.controller import BenchRequest, Identity
from cuzktui.model import SessionModel
from cuzktui.planner import MemcheckReport, make_report
from cuzktui.samplers import GpuDevice
from cuzktui.system import CgroupMemory
from cuzktui.units import GiB

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed so snapshots never see a clock


class FakeController:
    """Records what the screens ask for; ``on_apply`` lets a test move the model mid-apply."""

    def __init__(
        self,
        *,
        session_dir: Path | None = None,
        read_only: bool = False,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = SessionModel()
        self._identity = Identity("replay" if read_only else "engine", "cuzk-engine (embedded emulator)", session_dir)
        self._read_only = read_only
        doc = ConfigDocument()
        for name, value in (config or {}).items():
            section, _, key = name.partition(".")
            doc.set(section, key, value)
        self.values: dict[str, Any] = doc.effective()
        self.applied: list[dict[str, Any]] = []
        self.benches: list[BenchRequest] = []
        self.cancelled = 0
        self.apply_error: Exception | None = None
        self.on_apply: Callable[[FakeController], None] | None = None
        self.bench_is_running = False

    @property
    def identity(self) -> Identity:
        return self._identity

    @property
    def read_only(self) -> bool:
        return self._read_only

    async def start(self) -> None:
        pass

    async def poll(self) -> bool:
        return False

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

    async def stop_daemon(self) -> None:
        pass

    def daemon_running(self) -> bool:
        return self.model.daemon.phase == "ready"

    def bench_running(self) -> bool:
        return self.bench_is_running

    async def shutdown(self, stop_daemon: bool) -> None:
        pass


class ScreenApp(App[None]):
    """Pushes one screen built by ``make`` (the real app registers screens by name)."""

    def __init__(self, make: Callable[[], Screen[None]], name: str = "screen") -> None:
        super().__init__()
        self.make = make
        self.screen_name = name

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
