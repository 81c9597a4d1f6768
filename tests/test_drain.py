"""Drain before a restart: decided from what the session knows (the log's open jobs, our own calls),
with upstream's /status and GetStatus as inputs, shown while it waits, and skippable ("restart anyway").

The /status bodies follow upstream's status.rs ``StatusSnapshot`` field for field; the log lines follow
upstream's tracing and TIMELINE formats (engine.rs ``timeline_event``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from cuzktui.live import LiveController, LiveOptions, timeline_in_flight
from cuzktui.logparse import parse_line
from cuzktui.supervisor import InFlight, engine_program, merge_in_flight
from cuzktui.timeline import Timeline
from tests.conftest import require_engine
from tests.engine.engine_harness import porep_request
from tests.status_bodies import partition, pipeline, status_body

ENGINE_START = "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true"
RUN_START = 1_777_618_800.0  # 2026-05-01T07:00:00Z


def test_a_failed_job_leaked_by_the_status_tracker_does_not_hold_the_restart() -> None:
    # status.rs partition_failed: synthesis.active is never lowered and the job never leaves pipelines.
    leaked = pipeline("porep-1000-9", [partition(0, "failed"), partition(1, "synthesizing", 900_000)], 900.0)
    body = status_body([leaked], active=2)
    assert merge_in_flight([], body, queued=0) == []
    # Even without a failed partition in the body: the log ended it, so it is not waited for.
    stuck = pipeline("porep-1000-8", [partition(0, "synthesizing", 900_000)], 900.0)
    assert merge_in_flight([], status_body([stuck], active=1), queued=0, finished={"porep-1000-8"}) == []


def test_status_jobs_the_log_has_not_shown_count_with_their_age_and_partition_states() -> None:
    running = pipeline(
        "porep-1000-17",
        [partition(0, "done", 30_000, 3_000), partition(1, "gpu", 30_000, 1_000), partition(2, "synthesizing", 4_000)],
        41.0,
    )
    (item,) = merge_in_flight([], status_body([running], active=1), queued=0)
    assert item == InFlight("porep-1000-17", "1 synthesizing, 1 gpu, 1/3 done", 41.0, "/status")
    assert item.describe() == "porep-1000-17: 1 synthesizing, 1 gpu, 1/3 done for 41s (/status)"


def test_what_the_log_knows_comes_first_and_is_not_listed_twice() -> None:
    from_log = InFlight("porep-1000-17", "partitions: 1 synthesizing", 41.0, "log")
    body = status_body([pipeline("porep-1000-17", [partition(0, "synthesizing", 4_000)])], active=1)
    assert merge_in_flight([from_log], body, queued=0) == [from_log]


def test_without_status_listen_getstatus_queue_and_gpu_jobs_still_count() -> None:
    # engine.rs get_status: the queue holds requests not yet dispatched; nothing of partitions synthesising.
    items = merge_in_flight([], None, queued=2, gpu_jobs=("snap-1000-3",))
    assert [i.describe() for i in items] == [
        "snap-1000-3: on a GPU (GetStatus)",
        "2 requests waiting in the scheduler queue (GetStatus)",
    ]
    # /status's own queue_depth counts as well.
    assert merge_in_flight([], status_body([], queue_depth=1), queued=0)[0].state.startswith("1 request waiting")


def test_the_log_shows_open_jobs_with_their_phases_and_monolithic_post_which_status_never_sees() -> None:
    timeline = Timeline()
    for line in [
        ENGINE_START,
        "TIMELINE,1000,SYNTH_START,porep-1000-17,partition=0",
        "TIMELINE,1000,SYNTH_START,porep-1000-17,partition=1",
        "TIMELINE,31000,SYNTH_END,porep-1000-17,partition=0,synth_ms=30000",
        "TIMELINE,31000,GPU_QUEUE,porep-1000-17,partition=0",
        "TIMELINE,31010,GPU_PICKUP,porep-1000-17,worker=0,partition=0",
        "TIMELINE,31010,GPU_START,porep-1000-17,worker=0,partition=0",
        "TIMELINE,20000,SYNTH_START,winpost-1000-0a1b2c3d4e5f6071,kind=winning-post",
        "TIMELINE,2000,SYNTH_START,porep-1000-9,partition=0",
        "2026-05-01T07:00:05.000000Z ERROR cuzk_core::engine: partition synthesis failed error=failed to allocate: "
        "Cannot allocate memory (os error 12) job_id=porep-1000-9 partition=0",
    ]:
        timeline.apply(parse_line(line))
    open_jobs, finished = timeline_in_flight(timeline, RUN_START + 61.0)
    assert [i.describe() for i in open_jobs] == [
        "porep-1000-17: partitions: 1 synthesizing, 1 on the GPU for 1m00s (log)",
        "winpost-1000-0a1b2c3d4e5f6071: winning-post proof, 1 synthesizing for 41s (log)",
    ]
    assert finished == {"porep-1000-9"}


async def test_apply_shows_the_proof_in_flight_and_restarts_anyway_when_asked(tmp_path: Path) -> None:
    require_engine()
    from tests.conftest import fast_engine_config

    config = tmp_path / "cuzk.toml"
    # Slow enough (0.2 s per modelled second) that the proof is still synthesising during the drain.
    config.write_text(fast_engine_config(tmp_path).replace("time_scale = 0.0005", "time_scale = 0.2"))
    controller = LiveController(
        LiveOptions(program=engine_program(), config_file=config, session_dir=tmp_path / "session")
    )
    await controller.start()

    async def until(condition: Any, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        await controller.poll()
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)
            await controller.poll()

    try:
        await until(lambda: controller.model.daemon.phase == "ready", "the daemon")
        assert controller.supervisor is not None
        await controller.supervisor.client.submit_proof(porep_request("porep-1000-1"))
        await until(lambda: any(j.status == "running" for j in controller.model.timeline.jobs()), "SYNTH_START")
        assert controller.drain_in_flight() is None
        apply = asyncio.create_task(controller.apply_config({"pipeline.max_parallel_synthesis": 3}))
        await until(
            lambda: any(line.startswith("porep-1000-1: ") for line in controller.drain_in_flight() or []),
            "the drain listing the proof",
        )
        assert any(line.endswith("(log)") for line in controller.drain_in_flight() or [])
        controller.restart_anyway()
        await asyncio.wait_for(apply, 60)
        assert controller.drain_in_flight() is None
        await until(lambda: controller.model.daemon.runs == 2 and controller.model.daemon.phase == "ready", "run 2")
        notices = [n.text for n in controller.model.notices]
        assert any(t.startswith("restarting anyway, as asked: killing porep-1000-1: ") for t in notices), notices
        # The apply's stop is planned and names the config version the next run then applies.
        (stopped,) = [exit for _, exit in controller.model.exits]
        assert (stopped.cause, stopped.handover) == ("stopped", "restarting to apply config v2")
        assert [c.version for c in controller.model.configs] == [1, 2]
    finally:
        await controller.shutdown(stop_daemon=True)
