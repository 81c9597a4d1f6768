"""The waterfall of a daemon watched without its log, from /status per-partition states (status.rs bodies)."""

from __future__ import annotations

from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui.client import snapshot_from_status
from cuzktui.model import SessionModel
from cuzktui.status_timeline import StatusTimeline
from tests.status_bodies import partition, pipeline, status_body


def poll(
    t: float, uptime: float, pipelines: list[dict[str, Any]], holder: tuple[str, int] | None = None
) -> ev.StatusSnapshot:
    body = status_body(pipelines)
    body["uptime_secs"] = uptime
    if holder is not None:
        worker = body["gpu_workers"][0]
        worker.update(state="proving", current_job=holder[0], current_partition=holder[1], busy_secs=0.3)
    return snapshot_from_status(body, t, partitions=True)


def test_status_polls_draw_each_partition_and_finish_jobs() -> None:
    model = SessionModel()
    model.apply(ev.DaemonLaunched(999.0, "attached", None, (), None, "127.0.0.1:9820", None, "127.0.0.1:9821"))
    a, b = "porep-1000-17", "porep-1000-9"
    polls = [
        poll(1000.0, 100.0, [pipeline(a, [partition(0, "synthesizing", 4000), partition(1, "pending")]),
                             pipeline(b, [partition(0, "synthesizing", 100)])]),
        poll(1001.0, 101.0, [pipeline(a, [partition(0, "synth_done", 4500), partition(1, "synthesizing", 500)]),
                             pipeline(b, [partition(0, "failed", 1100)])]),
        poll(1002.0, 102.0, [pipeline(a, [partition(0, "gpu", 4500, 300), partition(1, "synth_done", 1200)])],
             holder=(a, 0)),
        poll(1004.0, 104.0, [pipeline(a, [partition(0, "done", 4500, 1500), partition(1, "done", 1200, 900)])]),
    ]  # fmt: skip
    for snapshot in polls:
        model.apply(snapshot)
    jobs = {job.job_id: job for job in model.timeline.jobs()}
    assert jobs[a].status == "completed" and jobs[b].status == "failed"
    p0, p1 = jobs[a].partitions[0], jobs[a].partitions[1]
    # Seen while running: placed exactly (uptime - synth_ms / gpu_ms on the engine's clock).
    assert (p0.synth_start, p0.synth_end) == (pytest.approx(996.0), pytest.approx(1000.5))
    assert (p0.gpu_start, p0.gpu_end, p0.worker) == (pytest.approx(1001.7), pytest.approx(1003.2), 0)
    assert p0.synth_ms == 4500 and p0.gpu_ms == 1500
    # Its GPU phase seen only once done: placed at the poll that saw it end.
    assert (p1.synth_start, p1.synth_end) == (pytest.approx(1000.5), pytest.approx(1001.7))
    assert (p1.gpu_start, p1.gpu_end) == (pytest.approx(1003.1), pytest.approx(1004.0))
    assert model.timeline.segments[0].anchored


def test_a_job_status_listed_again_after_dropping_it_is_drawn_again_as_its_log_lines_would_be() -> None:
    # status.rs drops a job 30 s after it completed; what was kept of it goes with it (weeks of polls
    # stay bounded), so the id submitted again is drawn anew, not taken for the finished one.
    drawn = StatusTimeline()
    job = "wpost-1000-1"
    polls = [
        poll(1000.0, 100.0, [pipeline(job, [partition(0, "synthesizing", 100)])]),
        poll(1001.0, 101.0, [pipeline(job, [partition(0, "done", 900, 100)])]),
        poll(1040.0, 140.0, []),
        poll(1050.0, 150.0, [pipeline(job, [partition(0, "synthesizing", 200)])]),
    ]
    starts = [
        [e.offset_ms for e in drawn.events(snapshot) if isinstance(e, ev.TimelineEvent) and e.event == "SYNTH_START"]
        for snapshot in polls
    ]
    assert starts == [[99_900], [], [], [149_800]]


def test_a_snapshot_recorded_with_a_log_adds_nothing_to_the_waterfall() -> None:
    model = SessionModel()
    body = status_body([pipeline("porep-1000-17", [partition(0, "synthesizing", 4000)])])
    model.apply(snapshot_from_status(body, 1000.0))  # partitions=False: the log draws the waterfall
    assert model.timeline.jobs() == []
