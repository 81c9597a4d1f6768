"""What an attached session keeps (issue 23): the log file it followed, copied into the session through
logrotate's rotations, so that replay, report and export show every job the live screen showed; without
a log, the jobs /status showed, said to be coarser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.cli import main
from cuzktui.live import AttachTarget, LiveController, LiveOptions
from cuzktui.model import SessionModel
from cuzktui.report import build_report
from cuzktui.session import iter_session_events, load_session
from tests.test_attach import STAND_IN_CURSOR, polled_until, stand_in_journalctl
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


def statuses(model: SessionModel) -> list[tuple[str, str]]:
    return [(job.job_id, job.status) for job in model.timeline.jobs()]


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
    trace = tmp_path / "trace.json"
    assert main(["export", str(session), "-o", str(trace), "--no-cache"]) == 0
    slices = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X" and "job" in e["args"]]
    assert sorted({e["args"]["job"] for e in slices}) == wanted, "every job's phases in the export"


def under_way(n: int) -> bytes:
    """Job ``n``'s first partition synthesizing: under way when the session rolls over."""
    return (partitioned_job(f"porep-1000-{n}", 1000 * n, partitions=1)[0] + "\n").encode()


def finished(n: int, second: float) -> bytes:
    rest = partitioned_job(f"porep-1000-{n}", 1000 * n, partitions=1)[1:]
    return ("\n".join([*rest, assembled(second, f"porep-1000-{n}")]) + "\n").encode()


async def test_a_recording_rolled_over_to_a_new_session_loses_no_line_and_each_session_stands_alone(
    tmp_path: Path,
) -> None:
    log = tmp_path / "cuzk.log"
    run = ("\n".join(startup()) + "\n").encode()
    log.write_bytes(run + jobs_done(1, 2, 10.0) + under_way(3))
    first = tmp_path / "first"
    target = AttachTarget(f"unix://{tmp_path}/nothing.sock", log_path=str(log))
    controller = LiveController(LiveOptions(program=None, attach=target, session_dir=first))
    await controller.start()
    try:
        await polled_until(controller, lambda: controller.model.daemon.silent is not None, "nothing answers")
        second = await controller.roll_over(tmp_path / "sessions")
        with log.open("ab") as daemon:
            daemon.write(finished(3, 20.0) + jobs_done(4, 2, 30.0))
        await controller.poll()
        live = [(job.job_id, job.status) for job in controller.model.timeline.jobs()]
        synth_end_live = controller.model.timeline.jobs()[2].partitions[0].synth_end
    finally:
        await controller.shutdown(stop_daemon=False)
    every = [f"porep-1000-{n}" for n in range(1, 6)]
    assert completed(live) == every and len(live) == len(every), "the live model saw no switch"

    # Every line of the run is in exactly one of the two sessions; the second begins with the run's start.
    old_log, new_log = (first / "daemon.log").read_bytes(), (second / "daemon.log").read_bytes()
    assert new_log.startswith(run) and old_log + new_log.removeprefix(run) == log.read_bytes()
    _, old = load_session(first, cache=False)
    assert [(j["job_id"], j["status"], j["reason"]) for j in build_report(old, "first")["jobs"]] == [
        ("porep-1000-1", "completed", ""), ("porep-1000-2", "completed", ""),
        ("porep-1000-3", "incomplete", "still in synthesis when the recording ends"),
    ]  # fmt: skip
    _, new = load_session(second, cache=False)
    assert completed([(j.job_id, j.status) for j in new.timeline.jobs()]) == every[2:]
    # Anchored by the run's engine start: job 3's end of synthesis at the wall time the live screen showed.
    (job3,) = [j for j in new.timeline.jobs() if j.job_id == "porep-1000-3"]
    assert job3.partitions[0].synth_end == synth_end_live
    assert new.daemon.mode == "attached" and new.daemon.silent is not None, "the attach and its state carried"
    assert json.loads((second / "meta.json").read_text())["continues"] == str(first)


def follow_journal(tmp_path: Path, journal: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``journalctl`` on PATH that follows ``journal`` (what journald holds of the unit, a message a
    line); the file its arguments are written to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_file = tmp_path / "journalctl-argv"
    stand_in_journalctl(bin_dir, journal, argv_file)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return argv_file


async def test_a_journal_followed_into_a_rolled_over_session_goes_on_at_the_next_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "journal"  # what journald holds of the unit
    run = ("\n".join(startup()) + "\n").encode()
    journal.write_bytes(run + jobs_done(1, 2, 10.0))
    follow_journal(tmp_path, journal, monkeypatch)
    first = tmp_path / "first"
    target = AttachTarget(f"unix://{tmp_path}/nothing.sock", journal_unit="cuzk.service")
    controller = LiveController(LiveOptions(program=None, attach=target, session_dir=first))
    await controller.start()
    model = controller.model
    try:
        await polled_until(controller, lambda: len(completed(statuses(model))) == 2, "the journal's first jobs")
        second = await controller.roll_over(tmp_path / "sessions")
        with journal.open("ab") as journald:
            journald.write(jobs_done(3, 2, 20.0))
        await polled_until(controller, lambda: len(completed(statuses(model))) == 4, "the journal's next jobs")
    finally:
        await controller.shutdown(stop_daemon=False)
    old_log, new_log = (first / "daemon.log").read_bytes(), (second / "daemon.log").read_bytes()
    assert new_log.startswith(run) and old_log + new_log.removeprefix(run) == journal.read_bytes()
    _, new = load_session(second, cache=False)
    assert completed(statuses(new)) == ["porep-1000-3", "porep-1000-4"]


FATAL_REPORT = b'Error: failed to open the SRS "/var/tmp/filecoin-proof-parameters"\n\nCaused by:\n    No such file\n'


async def test_an_attached_daemons_fatal_report_is_read_from_the_sessions_copy_after_its_log_was_renamed(
    tmp_path: Path,
) -> None:
    """The exit's diagnosis reads the daemon's last lines from what live reads (the session's copy): after
    logrotate's rename-and-create, the file at the path is the new, empty one, and the daemon (which never
    reopens its log) writes its fatal report into the renamed file."""
    log = tmp_path / "cuzk.log"
    log.write_bytes(("\n".join(startup()) + "\n").encode() + jobs_done(1, DONE_PER_STEP, 10.0))
    writes_then_fails = (
        "import os, sys\n"
        f"fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND)\n"
        "sys.stdin.readline()\n"
        f"os.write(fd, {FATAL_REPORT!r})\n"
        "sys.exit(1)\n"
    )
    daemon = subprocess.Popen([sys.executable, "-c", writes_then_fails], stdin=subprocess.PIPE)
    session = tmp_path / "session"
    target = AttachTarget(f"unix://{tmp_path}/nothing.sock", log_path=str(log), pid=daemon.pid)
    controller = LiveController(LiveOptions(program=None, attach=target, session_dir=session))
    await controller.start()
    try:
        model = controller.model

        def attached() -> bool:  # its end watched and its last lines read from now on; the run's jobs copied
            return model.daemon.pid == daemon.pid and len(completed(statuses(model))) == DONE_PER_STEP

        await polled_until(controller, attached, "the attach and the run's jobs")
        log.rename(log.with_name("cuzk.log.1"))
        log.touch()
        assert daemon.stdin is not None
        daemon.stdin.write(b"fail now\n")
        daemon.stdin.close()
        await polled_until(controller, lambda: model.daemon.phase == "dead", "the daemon's end")
    finally:
        await controller.shutdown(stop_daemon=False)
        daemon.kill()
        daemon.wait(30)
    exit = model.daemon.exit
    assert exit is not None and exit.pid == daemon.pid
    assert exit.error_report == FATAL_REPORT.decode().strip(), exit
    (recorded,) = [e for e in iter_session_events(session) if isinstance(e, ev.DaemonExited)]
    assert recorded.error_report == exit.error_report


async def test_a_session_continued_with_the_journal_reads_no_entry_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attached with --journal, left, and attached again into the same session (the printed attach line): the
    copy goes on after the last entry the session holds (journalctl --after-cursor), also after a TUI that
    ended between writing entries and recording their cursor: none is written twice."""
    journal = tmp_path / "journal"
    journal.write_bytes(("\n".join(startup()) + "\n").encode() + jobs_done(1, 2, 10.0))
    argv_file = follow_journal(tmp_path, journal, monkeypatch)
    session = tmp_path / "session"
    target = AttachTarget(f"unix://{tmp_path}/nothing.sock", journal_unit="cuzk.service")

    async def watch(jobs: int) -> list[str]:
        """Attach into the session until its model has ``jobs`` completed jobs; journalctl's arguments."""
        controller = LiveController(LiveOptions(program=None, attach=target, session_dir=session))
        await controller.start()
        try:
            await polled_until(controller, lambda: len(completed(statuses(controller.model))) == jobs, f"{jobs} jobs")
        finally:
            await controller.shutdown(stop_daemon=False)
        return argv_file.read_text().splitlines()

    await watch(2)
    copied = session / "daemon.log"
    assert copied.read_bytes() == journal.read_bytes()
    entries = journal.read_bytes().count(b"\n")
    marked = (session / "journal.cursor").read_bytes()
    with journal.open("ab") as journald:  # the daemon goes on while nobody watches
        journald.write(jobs_done(3, 2, 20.0))
    args = await watch(4)
    assert args[args.index("--after-cursor") + 1] == f"{STAND_IN_CURSOR}{entries - 1}"
    assert copied.read_bytes() == journal.read_bytes()
    # As if the TUI had been killed after writing jobs 3 and 4 into the session, before recording their cursor.
    (session / "journal.cursor").write_bytes(marked)
    with journal.open("ab") as journald:
        journald.write(jobs_done(5, 2, 30.0))
    await watch(6)
    assert copied.read_bytes() == journal.read_bytes()
    _, model = load_session(session, cache=False)
    assert completed(statuses(model)) == [f"porep-1000-{n}" for n in range(1, 7)] and model.runs() == 1
