"""A job's outcome on screen, in the daemon's words (issue 24.4): the waterfall's details, a lost job's mark, the
Logs screen's job filter and the dashboard's notices.

The log is one a pipeline daemon writes (engine.rs, scheduler.rs format strings): winpost-a is replaced in the
monolithic GPU queue by winpost-b (PriorityWorkQueue keys both (0, 0)) and never answered; winpost-c fails in the
dispatcher's span with no job id (a build without cuda-supraseal); winpost-d waits in the GPU queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from cuzktui.session import load_session
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.screens.logs import LogsScreen
from cuzktui.ui.widgets.logview import LogView
from cuzktui.ui.widgets.waterfall import WaterfallView, job_detail, partition_detail, phase_intervals
from tests.ui.conftest import settle
from tests.ui.fakes import FakeController, ScreenApp, current_screen
from tests.ui.test_snapshots import SnapCompare

NO_CUDA = "pipeline mode requires cuda-supraseal feature"


def _stamp(second: float) -> str:
    return f"2026-05-01T07:00:{second:09.6f}Z"


def _scheduler(second: float, what: str, job: str) -> str:
    return f"{_stamp(second)}  INFO cuzk_core::scheduler: job {what} job_id={job} proof_kind=winning-post"


LINES = [
    f"{_stamp(0)}  INFO cuzk_daemon: cuzk-daemon starting",
    f"{_stamp(1)}  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true",
    f"{_stamp(1.1)}  INFO cuzk_daemon: cuzk-daemon ready, serving on 127.0.0.1:9820",
    *(_scheduler(1.2, "enqueued", job) for job in ("winpost-a", "winpost-b", "winpost-c", "winpost-d", "winpost-a1")),
    _scheduler(1.3, "dequeued for proving", "winpost-a"),
    "TIMELINE,400,SYNTH_START,winpost-a,kind=winning-post",
    "TIMELINE,900,SYNTH_END,winpost-a,synth_ms=500",
    "TIMELINE,900,GPU_QUEUE,winpost-a,monolithic",
    _scheduler(2.0, "dequeued for proving", "winpost-b"),
    "TIMELINE,1000,SYNTH_START,winpost-b,kind=winning-post",
    "TIMELINE,1500,SYNTH_END,winpost-b,synth_ms=500",
    "TIMELINE,1500,GPU_QUEUE,winpost-b,monolithic",
    "TIMELINE,1600,GPU_PICKUP,winpost-b,worker=0",
    "TIMELINE,1600,GPU_START,winpost-b,worker=0",
    _scheduler(2.7, "dequeued for proving", "winpost-c"),
    f"{_stamp(2.7)} ERROR synth_single{{proof_kind=winning-post}}: cuzk_core::engine: {NO_CUDA}",
    "TIMELINE,2400,GPU_END,winpost-b,worker=0,gpu_ms=800",
    f"{_stamp(3.5)}  INFO cuzk_core::engine: proof completed successfully (pipeline) proof_len=192 total_ms=1500",
    _scheduler(3.6, "dequeued for proving", "winpost-d"),
    "TIMELINE,2700,SYNTH_START,winpost-d,kind=winning-post",
    "TIMELINE,3200,SYNTH_END,winpost-d,synth_ms=500",
    "TIMELINE,3200,GPU_QUEUE,winpost-d,monolithic",
]


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the Logs screen's status line shows the path: keep it free of the tmp path
    path = Path("daemon.log")
    path.write_text("\n".join(LINES) + "\n")
    return path


def _controller(log: Path) -> FakeController:
    _, model = load_session(log)
    return FakeController(model, session_dir=log.parent)


def test_a_lost_job_stops_waiting_when_it_was_replaced_and_its_details_say_why(log: Path) -> None:
    model = _controller(log).model
    jobs = {job.job_id: job for job in model.timeline.jobs()}
    lost, waiting = jobs["winpost-a"], jobs["winpost-d"]
    assert (lost.status, waiting.status) == ("lost", "running")
    replaced_at = jobs["winpost-b"].partitions[0].gpu_queue
    # Its GPU-queue wait ends when winpost-b took its place, in the failure colour, however late "now" is;
    # the job still waiting runs on to now.
    for now in (10.0, 100.0):
        end = model.timeline.time_span()[0] + now  # type: ignore[index]
        *_, last = phase_intervals(lost.partitions[0], model.timeline.open_end(lost.partitions[0], end))
        assert last[1:] == (replaced_at, "failed")
        assert phase_intervals(waiting.partitions[0], end)[-1][1:] == (end, "queue")
    text = partition_detail(lost.partitions[0], 0.0).plain
    assert "outcome     LOST  replaced in the monolithic GPU queue by winpost-b" in text
    failed = job_detail(jobs["winpost-c"]).plain
    assert f"outcome     FAILED  {NO_CUDA}" in failed and "scheduler" in failed


async def _open_failed_job(pilot: Pilot[None]) -> None:
    await settle(pilot)
    await pilot.press("2")
    await pilot.pause()
    view = pilot.app.screen.query_one(WaterfallView)
    target = next(i for i, row in enumerate(view.rows) if row.kind == "job" and row.label == "winpost-c")
    while view.selected != target:
        await pilot.press("down")
    await pilot.press("enter")
    await pilot.pause()


async def test_the_waterfall_opens_a_job_that_failed_before_any_phase(log: Path) -> None:
    app = CuzkApp(_controller(log), poll_interval=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_failed_job(pilot)
        detail = str(app.screen.query_one("#waterfall-detail", Static).render())
        assert "winpost-c" in detail and f"FAILED  {NO_CUDA}" in detail


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_snapshot_waterfall_with_a_lost_and_a_failed_job(
    snap_compare: SnapCompare, log: Path, size: tuple[int, int]
) -> None:
    assert snap_compare(CuzkApp(_controller(log), poll_interval=1000), terminal_size=size, run_before=_open_failed_job)


def test_snapshot_dashboard_notices_in_the_daemons_words(snap_compare: SnapCompare, log: Path) -> None:
    controller = _controller(log)
    texts = [n.text for n in controller.model.notices]
    assert f"failed: {NO_CUDA} (job winpost-c)" in texts
    lost = "lost: replaced in the monolithic GPU queue by winpost-b: upstream's PriorityWorkQueue keys every"
    assert any(t.startswith(lost) and t.endswith("(job winpost-a)") for t in texts)

    async def dashboard(pilot: Pilot[None]) -> None:
        await settle(pilot)

    assert snap_compare(CuzkApp(controller, poll_interval=1000), terminal_size=(120, 40), run_before=dashboard)


async def _filter_job(pilot: Pilot[None], job: str = "winpost-c") -> None:
    await settle(pilot)
    await pilot.press("j", *job, "enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_the_logs_job_filter_keeps_the_jobs_lines_and_its_failure_line_without_its_id(log: Path) -> None:
    app = ScreenApp(lambda: LogsScreen(_controller(log)), "logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await _filter_job(pilot)
        screen = current_screen(app, LogsScreen)
        view = screen.query_one(LogView)
        shown = [view._line_text(view._row_to_line(row)) for row in range(view.row_count)]
        assert shown == [
            _scheduler(1.2, "enqueued", "winpost-c"),
            _scheduler(2.7, "dequeued for proving", "winpost-c"),
            f"{_stamp(2.7)} ERROR synth_single{{proof_kind=winning-post}}: cuzk_core::engine: {NO_CUDA}",
        ]
        outcome = str(screen.query_one("#logs-job-outcome", Static).render())
        assert outcome.startswith(f"job winpost-c: FAILED — {NO_CUDA}")
        assert f"3 of {len(LINES)} lines (job winpost-c)" in str(screen.query_one("#logs-status", Static).render())
        # "winpost-a" is a whole id: no other job's lines, and the lost job says why it never ends.
        await pilot.press("j", *("backspace",) * 9, *"winpost-a", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.row_count == 5  # queued, dequeued, SYNTH_START, SYNTH_END, GPU_QUEUE: not winpost-a1's
        outcome = str(screen.query_one("#logs-job-outcome", Static).render())
        assert outcome.startswith("job winpost-a: LOST — replaced in the monolithic GPU queue by winpost-b")
        # Growth is matched as it is indexed.
        with log.open("a") as out:
            out.write("TIMELINE,9000,GPU_PICKUP,winpost-a,worker=0\nTIMELINE,9000,GPU_PICKUP,winpost-d,worker=0\n")
        screen.refresh_from_model()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.row_count == 6
        # An empty id shows every job's lines again.
        await pilot.press("j", *("backspace",) * 9, "enter")
        await pilot.pause()
        assert view.row_count == view.line_count == len(LINES) + 2
        assert not screen.query_one("#logs-job-outcome", Static).has_class("-open")


def test_snapshot_logs_filtered_to_a_failed_job(snap_compare: SnapCompare, log: Path) -> None:
    app = ScreenApp(lambda: LogsScreen(_controller(log)), "logs")
    assert snap_compare(app, terminal_size=(80, 24), run_before=_filter_job)
