"""An attached daemon's log copied into its session (cuzktui.log_copy): where the copy starts, and
logrotate's two ways of rotating it between two looks, driven by the test (no clock, no sleep)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from cuzktui.log_copy import CopyNote, JournalCopy, JournalResume, LogCopy, journal_resume, run_preamble

RUN_START = "2026-05-01T07:00:00.000000Z  INFO cuzk_daemon: cuzk-daemon starting\n"
ENGINE_START = "2026-05-01T07:00:01.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true\n"
WORKER = "2026-05-01T07:00:01.004000Z  INFO cuzk_core::engine: pipeline GPU worker started worker_id=0 gpu=0 sub_id=0\n"


def lines(tag: str, count: int = 3) -> bytes:
    """``count`` distinct daemon-like lines (TIMELINE lines of job ``tag``)."""
    return "".join(f"TIMELINE,{n}000,SYNTH_START,{tag},partition={n}\n" for n in range(count)).encode()


class Writer:
    """A daemon writing its log: O_APPEND (systemd's ``append:``, a shell's ``>>``) unless told otherwise."""

    def __init__(self, path: Path, *, append: bool = True) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
        self.fd = os.open(path, flags, 0o600)
        if not append:
            os.lseek(self.fd, 0, os.SEEK_END)

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    (tmp_path / "var").mkdir()
    return tmp_path / "var" / "cuzk.log"


@pytest.fixture
def copy(tmp_path: Path, log: Path) -> LogCopy:
    return LogCopy(log, tmp_path / "daemon.log")


def copied(copy: LogCopy) -> bytes:
    return copy.destination.read_bytes() if copy.destination.exists() else b""


def test_a_new_copy_starts_at_the_current_daemon_runs_start_and_follows_what_is_appended(
    log: Path, copy: LogCopy
) -> None:
    # Two runs in the file (systemd appends each start); the current run's TIMELINE offsets count from
    # its own engine start, so the copy begins with that run.
    first_run = RUN_START.encode() + ENGINE_START.encode() + lines("old")
    log.write_bytes(first_run + b"\x1b[2m" + RUN_START.encode() + ENGINE_START.encode() + lines("a"))
    assert copy.step() == []
    assert copied(copy) == b"\x1b[2m" + RUN_START.encode() + ENGINE_START.encode() + lines("a")
    writer = Writer(log)
    writer.write(lines("b"))
    copy.step()
    assert copied(copy).endswith(lines("a") + lines("b"))
    assert copy.pending() == 0
    writer.close()


def test_a_log_that_no_longer_holds_its_runs_start_is_copied_from_its_start(log: Path, copy: LogCopy) -> None:
    log.write_bytes(lines("a"))  # rotated since the daemon started: its start is in an older file
    copy.step()
    assert copied(copy) == lines("a")


def test_a_log_that_does_not_exist_yet_is_copied_once_it_does(log: Path, copy: LogCopy) -> None:
    assert copy.step() == [] and copied(copy) == b""
    log.write_bytes(RUN_START.encode() + lines("a"))
    copy.step()
    assert copied(copy) == RUN_START.encode() + lines("a")


def test_continuing_a_session_goes_on_after_the_last_line_it_holds(log: Path, copy: LogCopy) -> None:
    log.write_bytes(RUN_START.encode() + lines("a") + lines("b"))
    copy.destination.write_bytes(RUN_START.encode() + lines("a"))  # an earlier attach copied this much
    copy.step()
    assert copied(copy) == RUN_START.encode() + lines("a") + lines("b")


def test_continuing_after_the_log_was_rotated_copies_the_new_file_whole(log: Path, copy: LogCopy) -> None:
    log.write_bytes(lines("c"))  # the lines the copy ends with went to an older file
    copy.destination.write_bytes(RUN_START.encode() + lines("a"))
    copy.step()
    assert copied(copy) == RUN_START.encode() + lines("a") + lines("c")


def test_rename_and_create_loses_no_line_and_copies_none_twice(log: Path, copy: LogCopy) -> None:
    writer = Writer(log)
    writer.write(RUN_START.encode() + lines("a"))
    copy.step()
    writer.write(lines("b"))  # not looked at yet when the file is renamed
    log.rename(log.with_name("cuzk.log.1"))
    writer.write(lines("c"))  # the daemon has not reopened its log: still the renamed file
    log.touch()  # logrotate's create
    notes = copy.step()
    assert notes == [CopyNote(f"{log} was rotated (renamed): following the new file from its start")]
    writer.write(lines("d"))  # still the old file
    copy.step()
    new_writer = Writer(log)  # the daemon reopens its log (a postrotate signal, a restart)
    new_writer.write(lines("e"))
    copy.step()
    assert copy.step() == []
    assert copied(copy) == RUN_START.encode() + b"".join(lines(tag) for tag in "abcde")
    writer.close()
    new_writer.close()


def test_a_daemon_that_never_reopens_its_log_is_followed_into_the_renamed_file_across_rotations(
    log: Path, copy: LogCopy
) -> None:
    writer = Writer(log)
    writer.write(lines("a"))
    copy.step()
    for day in (1, 2):
        if day == 2:
            log.with_name("cuzk.log.1").rename(log.with_name("cuzk.log.2"))
        log.rename(log.with_name("cuzk.log.1"))
        log.touch()
        writer.write(lines(f"day{day}"))
        copy.step()
    copy.step()
    assert copied(copy) == lines("a") + lines("day1") + lines("day2")
    writer.close()


@pytest.mark.parametrize("grown_past_the_copy", [False, True])
def test_copytruncate_loses_no_line_and_copies_none_twice(log: Path, copy: LogCopy, grown_past_the_copy: bool) -> None:
    writer = Writer(log)
    writer.write(RUN_START.encode() + lines("a"))
    copy.step()
    writer.write(lines("b"))  # gained since the last look: only logrotate's copy still has it
    shutil.copyfile(log, log.with_name("cuzk.log.1"))
    os.truncate(log, 0)
    # Grown past where the copy had read: the size alone no longer tells of the truncate.
    writer.write(lines("c", 40 if grown_past_the_copy else 3))
    notes = copy.step()
    assert copied(copy) == RUN_START.encode() + lines("a") + lines("b") + lines("c", 40 if grown_past_the_copy else 3)
    assert notes == [
        CopyNote(
            f"{log} was truncated (copytruncate): reading it again from its start; the {len(lines('b'))} bytes it "
            f"gained since the last look were taken from {log.with_name('cuzk.log.1')}"
        )
    ]
    writer.write(lines("d"))
    copy.step()
    assert copied(copy).endswith(lines("c", 40 if grown_past_the_copy else 3) + lines("d"))
    writer.close()


def test_copytruncate_whose_copy_is_compressed_at_once_says_what_may_be_lost(log: Path, copy: LogCopy) -> None:
    writer = Writer(log)
    writer.write(lines("a"))
    copy.step()
    writer.write(lines("b"))
    log.with_name("cuzk.log.1.gz").write_bytes(b"\x1f\x8b compressed")  # compress without delaycompress
    os.truncate(log, 0)
    writer.write(lines("c"))
    (note,) = copy.step()
    assert note.lost and "no plain copy of it is beside it" in note.text
    assert copied(copy) == lines("a") + lines("c")  # b went with the truncate; nothing twice
    writer.close()


def test_a_writer_without_o_append_leaves_a_hole_after_copytruncate_that_is_skipped(log: Path, copy: LogCopy) -> None:
    writer = Writer(log, append=False)
    writer.write(lines("a"))
    copy.step()
    shutil.copyfile(log, log.with_name("cuzk.log.1"))
    os.truncate(log, 0)
    writer.write(lines("b"))  # at its old offset: NUL bytes before it
    copy.step()
    assert copied(copy) == lines("a") + lines("b")
    writer.close()


def test_a_limited_step_copies_whole_lines_and_the_rest_next_time(log: Path, copy: LogCopy) -> None:
    log.write_bytes(lines("a", 100))
    copy.step(limit=1000)
    first = copied(copy)
    assert 900 < len(first) <= 1000 and first.endswith(b"\n") and lines("a", 100).startswith(first)
    assert copy.pending() == len(lines("a", 100)) - len(first)
    copy.step()
    assert copied(copy) == lines("a", 100) and copy.pending() == 0


def test_a_line_being_written_is_copied_whole_once_it_ends_even_into_another_session(
    tmp_path: Path, log: Path, copy: LogCopy
) -> None:
    writer = Writer(log)
    writer.write(lines("a") + b"TIMELINE,9000,SYNTH_")
    copy.step()
    assert copied(copy) == lines("a") and copy.pending() == 0, "the unfinished line is no backlog"
    first = copy.destination
    copy.destination = tmp_path / "next-session.log"  # record --keep rolled the session over
    writer.write(b"START,b,partition=0\n")
    copy.step()
    assert first.read_bytes() == lines("a")
    assert copy.destination.read_bytes() == b"TIMELINE,9000,SYNTH_START,b,partition=0\n"
    writer.close()


def test_the_preamble_is_the_current_runs_first_lines_up_to_its_first_job(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    preamble = RUN_START + ENGINE_START + WORKER
    log.write_text(RUN_START + "TIMELINE,5,SYNTH_START,old,partition=0\n" + preamble + lines("a").decode())
    assert run_preamble(log) == preamble.encode()
    log.write_bytes(lines("a"))
    assert run_preamble(log) == b""


def entry(index: int, message: object = None) -> bytes:
    """Entry ``index`` of a unit as a line of ``journalctl -o json --output-fields=MESSAGE`` (no MESSAGE: None)."""
    fields: dict[str, object] = {"__CURSOR": f"s=0;i={index}", "__REALTIME_TIMESTAMP": str(1_777_000_000 + index)}
    if message is not None:
        fields["MESSAGE"] = message
    return (json.dumps(fields) + "\n").encode()


def copied_until(log: Path, index: int) -> JournalResume | None:
    """Wait until the copy into ``log`` has recorded entry ``index`` as its last; where it goes on from then."""
    deadline = time.monotonic() + 30
    while (resume := journal_resume(log)) is None or resume.cursor != f"s=0;i={index}":
        assert time.monotonic() < deadline, f"entry {index} was not copied: {resume}"
        time.sleep(0.01)
    return resume


def test_a_journal_copy_writes_each_message_as_cat_does_records_its_cursor_and_moves_between_two_entries(
    tmp_path: Path,
) -> None:
    read_end, write_end = os.pipe()
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first, second = tmp_path / "one" / "daemon.log", tmp_path / "two" / "daemon.log"
    copy = JournalCopy(read_end, first)
    # A string; bytes that are not printable UTF-8 (an array of their values); a field given twice (-o cat prints
    # the first); an entry without a message (-o cat prints nothing).
    os.write(write_end, entry(0, "a") + entry(1, [98, 27, 255]) + entry(2, ["c", "c again"]) + entry(3))
    assert copied_until(first, 3) == JournalResume("s=0;i=3", b"")
    assert first.read_bytes() == b"a\nb\x1b\xff\nc\n"
    second.write_bytes(b"the run's first lines\n")  # a rolled-over session's preamble, before the copy moves
    under_way = entry(4, "d")
    os.write(write_end, under_way[:12])  # an entry under way when the copy moves goes whole to the new file
    copy.retarget(second)
    assert journal_resume(second) == JournalResume("s=0;i=3", b""), "the preamble comes before the next entry"
    os.write(write_end, under_way[12:] + entry(5, "e")[:-9])  # journalctl ended in the middle of an entry
    os.close(write_end)
    copy.join(30)
    assert first.read_bytes() == b"a\nb\x1b\xff\nc\n"
    assert second.read_bytes() == b"the run's first lines\nd\n"
    assert journal_resume(second) == JournalResume("s=0;i=4", b""), "a cut entry is neither copied nor recorded"


def test_a_continued_journal_copy_writes_none_of_what_the_file_holds_past_its_record(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    read_end, write_end = os.pipe()
    copy = JournalCopy(read_end, log)
    os.write(write_end, entry(0, "a"))
    copied_until(log, 0)
    os.close(write_end)
    copy.join(30)
    # Ended after writing entry 1 and half of entry 2 (a full disk), before recording them.
    with log.open("ab") as out:
        out.write(b"b\nc")
    resume = journal_resume(log)
    assert resume == JournalResume("s=0;i=0", b"b\nc")
    read_end, write_end = os.pipe()  # journalctl --after-cursor s=0;i=0
    copy = JournalCopy(read_end, log, resume)
    os.write(write_end, entry(1, "b") + entry(2, "cc") + entry(3, "d"))
    copied_until(log, 3)
    assert log.read_bytes() == b"a\nb\ncc\nd\n"
    os.close(write_end)
    copy.join(30)
    # Bytes past the record that are not the entries after it were not written by the copy: everything is copied.
    with log.open("ab") as out:
        out.write(b"someone else's line\n")
    read_end, write_end = os.pipe()
    copy = JournalCopy(read_end, log, journal_resume(log))
    os.write(write_end, entry(4, "e"))
    copied_until(log, 4)
    os.close(write_end)
    copy.join(30)
    assert log.read_bytes() == b"a\nb\ncc\nd\nsomeone else's line\ne\n"
