"""The "next knob" hints, computed without a terminal from a session model and the running config."""

from __future__ import annotations

from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui.advice import knob_hints
from cuzktui.daemon_facts import worker_cap
from cuzktui.model import SessionModel
from cuzktui.units import GiB

T0 = 1_700_000_000.0


def status(*, synthesizing: int = 0, busy: int = 1, total: int = 2, waiting: int = 0) -> ev.StatusSnapshot:
    return ev.StatusSnapshot(T0 + 5, 60.0, 200 * GiB, 100 * GiB, synthesizing, busy, total, waiting, 0, 0)


def model_of(*events: ev.Event) -> SessionModel:
    model = SessionModel()
    for event in events:
        model.apply(event)
    return model


def near_limit() -> tuple[ev.MemorySample, ...]:
    # RSS at 95 % of a 256 GiB cgroup limit: memory decides what comes next.
    return (
        ev.MemorySample(T0, 100 * GiB, cgroup_limit_bytes=256 * GiB),
        ev.MemorySample(T0 + 1, int(0.95 * 256 * GiB), cgroup_limit_bytes=256 * GiB),
    )


PIPELINE = {"pipeline.enabled": True, "pipeline.max_gpu_queue_depth": 0, "pipeline.max_parallel_synthesis": 18}


def test_worker_count_follows_upstream_formula() -> None:
    # engine.rs: max(2, min(budget / 14 GiB, max_parallel_synthesis)); 0 means 18.
    assert worker_cap(200 * GiB, 12).workers == 12 and not worker_cap(200 * GiB, 12).budget_is_cap
    assert worker_cap(100 * GiB, 18).workers == 7 and worker_cap(100 * GiB, 18).budget_is_cap
    assert worker_cap(400 * GiB, 0).workers == 18
    assert worker_cap(20 * GiB, 18).workers == 2


def test_gpu_bound_and_memory_tight_advises_setting_the_queue_depth_never_lowering_it() -> None:
    model = model_of(*near_limit(), status(busy=2, total=2, waiting=9))
    hints = knob_hints(model, PIPELINE)
    assert any("set pipeline.max_gpu_queue_depth = 8 (0 means no pacing" in h for h in hints)
    assert not any("lower" in h and "max_gpu_queue_depth" in h for h in hints)


def test_with_pacing_already_on_memory_pressure_points_at_synthesis() -> None:
    model = model_of(*near_limit(), status(busy=2, total=2, waiting=9))
    hints = knob_hints(model, {**PIPELINE, "pipeline.max_gpu_queue_depth": 8})
    assert not any("max_gpu_queue_depth" in h for h in hints)
    assert any("lower pipeline.max_parallel_synthesis" in h for h in hints)


def test_gpu_bound_with_room_says_synthesis_is_not_the_limit() -> None:
    (hint,) = knob_hints(model_of(status(busy=2, total=2, waiting=9)), PIPELINE)
    assert "GPU is the bottleneck" in hint and "max_gpu_queue_depth" not in hint


@pytest.mark.parametrize(
    ("budget_gib", "max_parallel", "raise_key", "not_key"),
    [
        # 200 GiB admits 14 workers; 10 is the cap: raise the knob.
        (200, 10, "raise it", "raise memory.total_budget"),
        # 100 GiB admits 7 workers under a cap of 18: the budget is the cap, the knob changes nothing.
        (100, 18, "raise memory.total_budget", "raise it"),
    ],
)
def test_gpu_starved_names_the_bound_that_is_the_cap(
    budget_gib: int, max_parallel: int, raise_key: str, not_key: str
) -> None:
    workers = worker_cap(budget_gib * GiB, max_parallel).workers
    model = model_of(
        ev.BudgetInitialized(T0, budget_gib),
        ev.PipelineConfigured(T0, budget_gib // 14, workers, 2),
        status(synthesizing=workers, busy=0, total=2),
    )
    config: dict[str, Any] = {**PIPELINE, "pipeline.max_parallel_synthesis": max_parallel}
    (hint,) = knob_hints(model, config)
    assert "GPU starved" in hint and "pipeline.max_parallel_synthesis" in hint
    assert raise_key in hint and not_key not in hint


def test_monolithic_mode_gives_no_pipeline_advice() -> None:
    model = model_of(*near_limit(), status(busy=2, total=2, waiting=9))
    assert knob_hints(model, {"pipeline.enabled": False}) == []


def test_oom_kill_names_real_keys() -> None:
    model = model_of(ev.DaemonExited(T0, 42, None, 9, "oom_kill"))
    (hint,) = knob_hints(model, {})
    assert "memory.total_budget" in hint and "pipeline.max_parallel_synthesis" in hint
    assert "synthesis.max_parallel" not in hint
