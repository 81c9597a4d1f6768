"""Issue 10 scenario 1, the headline failure, through the TUI (pilot) on a real LiveController:
the engine as a 256 GiB box (1/256 of its bytes real) in a 1 GiB memory cgroup on a 512 GiB host,
``total_budget = "auto"`` and aggressive synthesis, 12 PoRep at concurrency 6 from the Bench screen.

The auto budget takes the host's RAM, the daemon is OOM-killed, the kill is diagnosed with the
kernel's evidence, the runner lowers the budget and finishes 12/12, and the session holds every
event up to the kill and after it. The harness (app, pilot, waits, teardown: live_app) is test_live_engine's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.live import LiveOptions
from cuzktui.session import iter_session_events, read_session, resolve_source
from cuzktui.supervisor import engine_program
from tests.conftest import TEST_TIME_SCALE, memory_cgroup_or_skip, require_engine
from tests.ui.test_live_engine import Live, live_app
from tests.ui.test_live_engine import short_dir as short_dir  # the fixture, by name (a redundant alias re-exports it)

pytestmark = pytest.mark.slow

GiB = 1 << 30


@pytest.fixture
async def box(tmp_path: Path, short_dir: Path) -> AsyncIterator[Live]:
    require_engine()
    memory_cgroup_or_skip()
    config_file = tmp_path / "box.toml"
    config_file.write_text(
        f'[daemon]\nlisten = "unix://{short_dir / "cuzk.sock"}"\n'
        '[memory]\ntotal_budget = "auto"\n'
        "[pipeline]\nmax_parallel_synthesis = 18\n"
        f'[engine]\nmem_total = "512GiB"\ntime_scale = {TEST_TIME_SCALE}\ngpus = 1\n'
    )
    options = LiveOptions(
        program=engine_program(),
        config_file=config_file,
        session_dir=tmp_path / "session",
        sample_interval=0.5,
        memory_limit=GiB,
    )
    async with live_app(options, config_file) as running:
        yield running


async def test_the_auto_budget_oom_kill_is_diagnosed_the_budget_lowered_and_12_of_12_complete(box: Live) -> None:
    model = box.controller.model
    await box.until_ready()
    # Bench screen, 12 at concurrency 6: run_bench waits for 12 completed, 0 failed, the daemon back.
    await box.run_bench(count=12, concurrency=6)
    bench = model.bench
    assert bench is not None and bench.restarts, "the auto budget was expected to be OOM-killed"
    restart = bench.restarts[0]
    assert restart.reason == "oom_kill" and any("oom_kill" in e for e in restart.evidence)
    assert restart.explanation.startswith('total_budget = "auto" took MemTotal')
    assert restart.total_budget.endswith("GiB")
    assert model.oom_kills, "the dashboard's OOM count"

    # The session: the daemon's lines before the kill, the kill's diagnosis, the restart, the rest.
    events = list(iter_session_events(box.session_dir))
    (kill, *_) = [e for e in events if isinstance(e, ev.DaemonExited) and e.cause == "oom_kill"]
    at = events.index(kill)
    assert any(isinstance(e, ev.TimelineEvent) for e in events[:at])
    assert any(isinstance(e, ev.BenchRestart) for e in events[at:])
    assert any(isinstance(e, ev.TimelineEvent) for e in events[events.index(restart) :])
    finished = [e for e in events if isinstance(e, ev.ProofFinished)]
    assert len(finished) == 12 and {e.status for e in finished} == {"COMPLETED"}
    assert read_session(resolve_source(box.session_dir)).damage == ()
    # The lowered budget is the config version the runner restarted with.
    versions = sorted((box.session_dir / "config").glob("v*.toml"))
    assert any(f'total_budget = "{restart.total_budget}"' in v.read_text() for v in versions)
