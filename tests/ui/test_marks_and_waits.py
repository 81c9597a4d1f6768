"""What the dashboard and the waterfall draw from evictions, budget stalls and pre-synthesis waits."""

from __future__ import annotations

from cuzktui import events as ev
from cuzktui.model import SessionModel
from cuzktui.ui.screens.dashboard import memory_spec
from cuzktui.ui.widgets.waterfall import partition_detail

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
