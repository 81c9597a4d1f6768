"""What the dashboard, the waterfall and the Logs screen draw from evictions, budget stalls,
pre-synthesis waits and a bare log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cuzktui import events as ev
from cuzktui.controller import Identity
from cuzktui.model import SessionModel
from cuzktui.replay import ReplayController
from cuzktui.ui.screens.dashboard import memory_spec
from cuzktui.ui.screens.logs import log_path_of
from cuzktui.ui.widgets.panels import daemon_content
from cuzktui.ui.widgets.waterfall import partition_detail
from tests.ui.fakes import T0, Timed, build_model

T = 1_777_618_800.0  # 2026-05-01T07:00:00Z


def test_evictions_and_budget_stalls_are_marked_on_the_memory_chart() -> None:
    model = SessionModel()
    model.apply(ev.MemorySample(T, 10 << 30))
    model.apply(ev.Eviction(T + 5, "porep-32g", 44, True))
    model.apply(ev.BudgetStall(T + 6, 71, 64))
    model.apply(ev.BudgetStall(T + 7, 71, 64))
    marks = {m.label: m.times for m in memory_spec(model).all_marks()}
    assert marks == {"eviction": (T + 5,), "budget stall": (T + 6, T + 7)}


def test_partition_details_name_the_scheduler_and_budget_waits() -> None:
    model = SessionModel()
    for event in (
        ev.EngineStarted(T, True),
        ev.JobQueued(T + 1, "enqueued", "porep-1", "porep-c2", 0),
        ev.JobQueued(T + 3, "dequeued", "porep-1", "porep-c2"),
        ev.JobQueued(T + 4, "dispatched", "porep-1"),
        ev.TimelineEvent(9000, "SYNTH_START", "porep-1", {"partition": "0"}, 0, None, False),
    ):
        model.apply(event)
    job = model.timeline.jobs()[0]
    text = partition_detail(job.partitions[0], T).plain
    assert "scheduler 2.0s" in text and "memory budget 5.0s" in text


def test_a_bare_log_without_a_start_line_still_opens_on_the_logs_screen(tmp_path: Path) -> None:
    path = tmp_path / "cuzk.log"
    # Attached mid-run: no "cuzk-daemon starting"; scheduler.rs Scheduler::submit's line only.
    path.write_text(
        "2026-05-01T07:00:01.000000Z  INFO cuzk_core::scheduler: job enqueued job_id=porep-1 proof_kind=porep-c2 "
        "priority=Normal queue_position=0\n"
    )
    replay = ReplayController(path)
    asyncio.run(replay.start())
    assert log_path_of(replay) == path


def test_an_oom_killed_partition_says_so_in_its_details(events: list[Timed]) -> None:
    model = build_model(events)
    job = next(j for j in model.timeline.jobs() if j.status == "incomplete")
    p = next(p for p in job.partitions.values() if p.incomplete)
    text = partition_detail(p, T0, model.run_ending(job.segment)).plain
    assert "killed with the daemon (OOM)" in text and "incomplete" not in text


def test_the_limit_the_header_says_is_the_memory_charts() -> None:
    """--profile 256 and a benchmark: the engine's 1 GiB cgroup at 1/256 holds its box alone (the inputs in
    flight stay outside it, engine/box.py), so the header and the chart's limit line both say the box's
    256 GiB, from the launch on. With a cgroup allowance for the inputs they said 256 and 263 GiB."""
    model = SessionModel()
    gib = 1 << 30
    launched = ev.DaemonLaunched(
        T, "engine", 7, ("cuzk-engine", "--box-cgroup", "/sys/fs/cgroup/memory/b"), None, "unix:///s", None,
        memory_limit_bytes=gib, memory_scale=1 / 256,
    )  # fmt: skip
    model.apply(launched)
    model.apply(ev.MemorySample(T + 1, 100 << 20, 90 << 20, gib))
    header = daemon_content(model, Identity("engine", "cuzk-engine", None)).plain
    assert "limit 256 GiB" in header and "inputs in flight" not in header
    (limit,) = [line for line in memory_spec(model).lines if line.label == "limit"]
    assert limit.value == "256 GiB" and {v for _, v in limit.points} == {256.0}, "from the launch on"
