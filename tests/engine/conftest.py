"""The engine_factory fixture: start cuzk-engine subprocesses, stopped (SIGTERM, then SIGKILL) at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine.engine_harness import Captured, RunningEngine, start_engine


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
