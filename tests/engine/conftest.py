"""The engine_factory fixture: start cuzk-engine subprocesses, stopped (SIGTERM, then SIGKILL) at teardown;
make_engine: in-process engines on the captured log, closed at teardown."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cuzktui.daemon_config import Config
from cuzktui.units import GiB
from engine.pipeline import Engine
from tests.engine.engine_harness import Captured, Factory, RunningEngine, start_engine


@pytest.fixture
def engine_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[RunningEngine] = []

    def factory(sections: dict[str, dict[str, Any]] | None = None, **kwargs: Any) -> RunningEngine:
        sub = tmp_path / f"engine{len(started)}"
        sub.mkdir()
        running = start_engine(sub, sections or {}, **kwargs)
        started.append(running)
        return running

    yield factory
    for running in started:
        running.stop()


@pytest.fixture
def captured(tmp_path: Path) -> Iterator[Captured]:
    out = Captured(tmp_path / "engine.log")
    yield out
    out.close()


@pytest.fixture
async def make_engine(captured: Captured) -> AsyncIterator[Factory]:
    started: list[Engine] = []

    async def factory(time_scale: float = 0.001, **knobs: Any) -> Engine:
        config = Config()
        config.total_budget = 400 * GiB
        config.engine.time_scale = time_scale
        config.engine.memory_scale = 1 / 65536
        config.engine.gpus = 1
        config.gpu_workers_per_device = 1
        for name, value in knobs.items():
            setattr(config, name, value)
        engine = Engine(config, captured.log)
        engine.start()
        started.append(engine)
        return engine

    yield factory
    for engine in started:
        await engine.aclose()
