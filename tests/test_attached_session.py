"""What an attached session keeps (issue 23): the log file it followed, copied into the session through
logrotate's rotations, so that replay, report and export show every job the live screen showed; without
a log, the jobs /status showed, said to be coarser."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from cuzktui.live import AttachTarget, LiveController, LiveOptions
from cuzktui.report import build_report
from cuzktui.session import load_session
from tests.test_report import assembled, partitioned_job, startup

DONE_PER_STEP = 2


def jobs_done(first: int, count: int, second: float) -> bytes:
    """``count`` completed two-partition jobs, numbered from ``first``, assembled at ``second`` (under a minute)."""
    lines: list[str] = []
    for n in range(first, first + count):
        lines += partitioned_job(f"porep-1000-{n}", 1000 * n)
        lines.append(assembled(second, f"porep-1000-{n}"))
    return ("\n".join(lines) + "\n").encode()


def completed(model_jobs: Sequence[tuple[str, str]]) -> list[str]:
    return sorted(job for job, status in model_jobs if status == "completed")


async def test_an_attached_sessions_replay_and_report_show_every_job_the_live_screen_showed_through_rotations(
    tmp_path: Path,
) -> None:
    (tmp_path / "var").mkdir()
    log = tmp_path / "var" / "cuzk.log"
    # An earlier daemon run in the same file (systemd appends): not this run, so not copied.
    earlier = "\n".join([*startup(), *partitioned_job("porep-0-1", 1000)]) + "\n"
    log.write_bytes(earlier.encode() + ("\n".join(startup()) + "\n").encode() + jobs_done(1, DONE_PER_STEP, 10.0))
    session = tmp_path / "session"
    target = AttachTarget(f"unix://{tmp_path}/nothing.sock", log_path=str(log))
    controller = LiveController(LiveOptions(program=None, attach=target, session_dir=session))
    await controller.start()
    writer = os.open(log, os.O_WRONLY | os.O_APPEND)  # the daemon's stdout (systemd's append:)
    try:
        await controller.poll()
        # copytruncate: what the file gained since the last poll is only in logrotate's copy by the next one.
        os.write(writer, jobs_done(3, DONE_PER_STEP, 20.0))
        shutil.copyfile(log, log.with_name("cuzk.log.1"))
        os.truncate(log, 0)
        os.write(writer, jobs_done(5, DONE_PER_STEP, 30.0))
        await controller.poll()
        # rename and create: the daemon writes on into the renamed file until it reopens its log.
        log.rename(log.with_name("cuzk.log.2"))
        log.touch()
        os.write(writer, jobs_done(7, DONE_PER_STEP, 40.0))
        await controller.poll()
        os.close(writer)
        writer = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.write(writer, jobs_done(9, DONE_PER_STEP, 50.0))
        await controller.poll()
        live = [(job.job_id, job.status) for job in controller.model.timeline.jobs()]
        said = [notice.text for notice in controller.model.notices]
    finally:
        os.close(writer)
        await controller.shutdown(stop_daemon=False)
    wanted = sorted(f"porep-1000-{n}" for n in range(1, 11))
    assert completed(live) == wanted and len(live) == len(wanted), live
    assert any("was truncated (copytruncate)" in text and "cuzk.log.1" in text for text in said), said
    assert any("was rotated (renamed)" in text for text in said), said

    loaded, model = load_session(session, cache=False)
    assert [(job.job_id, job.status) for job in model.timeline.jobs()] == live
    report = build_report(model, str(session))
    assert completed([(j["job_id"], j["status"]) for j in report["jobs"]]) == wanted
    assert report["daemon_runs"] == 1 and report["job_source"] == "log"
    assert loaded.source.log_path == session / "daemon.log"
    assert "porep-0-1" not in (session / "daemon.log").read_text()
