"""A daemon's own log, copied into its session as it grows and as logrotate rotates it.

An attached daemon (``attach --log FILE``, ``record --attach --log FILE``) writes a log of its own,
which logrotate renames or truncates and a wiped box loses. So the session keeps what was followed:
each live poll copies what the file gained into the session's ``daemon.log`` (:class:`LogCopy`), and
the live follower reads that copy exactly as it reads a launched daemon's log: live, replay, report
and export read one file (docs/architecture.md). A journald log comes through journalctl's output,
appended to the same file an entry at a time, its cursor recorded beside it (:class:`JournalCopy`).

Where a copy starts: in a new session, at the current daemon run's ``cuzk-daemon starting`` line
(its TIMELINE offsets count from that run's engine start, so the copy needs the run's first lines,
as ``--journal`` reads the unit since the run's start), else at the file's start (a file rotated
since the run began). Continuing a session that already holds a copy, right after the last line it
holds when the file still has that line (else the file is newer than the copy: from its start); a
journal's copy, after the entry whose cursor it recorded.

Rotation, noticed at each look (each poll):

* rename and create (logrotate's default): the renamed file stays open here and is read to its end,
  then the new file at the path from its start. A writer that keeps writing to the renamed file (a
  daemon that never reopens its log) is followed there until the new file gets a line.
* copytruncate: the file shrinks below what was read, or its bytes before the read position are no
  longer the ones copied (truncated and grown again between two looks). What it had gained since the
  last look is taken from logrotate's copy beside it (``FILE.1``, ``FILE-20260501``: the one whose bytes
  at that position are the ones copied last), then the file is read from its start. A writer without
  O_APPEND goes on at its old offset after a truncate, leaving a hole of NUL bytes: skipped.

What can be lost: a line written between logrotate's copy and its truncate is in neither file (logrotate
itself loses it: its documentation says so); with ``compress`` and no ``delaycompress``, or ``olddir``,
the copy is not beside the file in plain text when it is looked for, so what the file gained since the
last look (at most one poll's worth) is lost, and said; a file rotated twice between two looks loses the
middle one. Nothing that is in a file when it is looked at is lost or copied twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from . import daemon_messages as M
from .events import DaemonStarting
from .logparse import parse_line, strip_ansi
from .session import open_private_append, write_private
from .session_layout import JOURNAL_CURSOR

COPY_CHUNK: Final = 1 << 20
# The bytes before the read position compared at each look: a file truncated and grown past it again
# between two looks has other bytes there (daemon lines carry microsecond timestamps).
_CHECKED: Final = 64
_SEARCH_BLOCK: Final = 4 << 20
_LINE_LOOK: Final = 64 << 10  # how far around a match a line's ends are looked for
# logrotate's compressed copies: not readable as text, so never where lost lines are looked for.
_COMPRESSED: Final = frozenset({".gz", ".xz", ".bz2", ".zst", ".lz4", ".lzma", ".Z"})
_COPIES_LOOKED_AT: Final = 16
# A rolled-over session begins with the current run's first lines (its start, engine start, workers),
# up to its first job's line and at most this much.
PREAMBLE_MAX: Final = 256 << 10
# A journal copy ends between writing a batch and recording its cursor with at most a batch past the record:
# more than this past it was not written by the copy, and is not compared with the entries that follow.
_WRITTEN_PAST_MARK_MAX: Final = 4 << 20


@dataclass(frozen=True, slots=True)
class CopyNote:
    """Something that happened to the copied log, for a notice; ``lost``: lines may be missing from the copy."""

    text: str
    lost: bool = False


@dataclass(slots=True)
class _Source:
    """One log file held open: where it was read to, and the last bytes read (to notice a truncate)."""

    fd: int
    identity: tuple[int, int]
    offset: int
    tail: bytes = b""
    hole: bool = False  # just truncated: NUL bytes a writer without O_APPEND leaves are skipped

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def waiting(self) -> int:
        """Bytes not read yet up to the file's last newline (all of them after a truncate)."""
        size = self.size()
        if size < self.offset:
            return size
        rest = os.pread(self.fd, min(size - self.offset, COPY_CHUNK), self.offset)
        return size - self.offset if len(rest) == COPY_CHUNK else rest.rfind(b"\n") + 1

    def truncated(self) -> bool:
        if self.size() < self.offset:
            return True
        start = self.offset - len(self.tail)
        return bool(self.tail) and os.pread(self.fd, len(self.tail), start) != self.tail


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _line_around(fd: int, pos: int, size: int) -> tuple[int, bytes]:
    """The start and the bytes (without newline) of the line of the file around offset ``pos``."""
    low, high = max(0, pos - _LINE_LOOK), min(size, pos + _LINE_LOOK)
    window = os.pread(fd, high - low, low)
    at = pos - low
    begin = window.rfind(b"\n", 0, at) + 1
    end = window.find(b"\n", at)
    return low + begin, window[begin : len(window) if end == -1 else end]


def last_match(fd: int, size: int, needle: bytes, accept: Callable[[int, int, bytes], bool]) -> int | None:
    """The offset of the last occurrence of ``needle`` in the file's first ``size`` bytes that ``accept``
    (its offset, its line's start and the line) takes; None: none. Searched backwards a block at a time."""
    end = size
    while end > 0:
        start = max(0, end - _SEARCH_BLOCK)
        block = os.pread(fd, min(size, end + len(needle) - 1) - start, start)
        found = block.rfind(needle)
        while found != -1:
            line_start, line = _line_around(fd, start + found, size)
            if accept(start + found, line_start, line):
                return start + found
            found = block.rfind(needle, 0, found + len(needle) - 1)
        end = start
    return None


def _is_daemon_start(line: bytes) -> bool:
    return isinstance(parse_line(strip_ansi(line.decode("utf-8", "replace"))), DaemonStarting)


def run_start(fd: int, size: int) -> int | None:
    """The offset of the last ``cuzk-daemon starting`` line of a log: where its current daemon run begins."""
    needle = M.DAEMON_STARTING.encode()
    found = last_match(fd, size, needle, lambda _at, _start, line: _is_daemon_start(line))
    return None if found is None else _line_around(fd, found, size)[0]


def resume_after(fd: int, size: int, copied_line: bytes) -> int | None:
    """Where a copy whose last line is ``copied_line`` (with its newline, if it has one) goes on in the log:
    right after that line's last occurrence at a line start; None when the log does not hold it."""
    found = last_match(fd, size, copied_line, lambda at, line_start, _line: at == line_start)
    return None if found is None else found + len(copied_line)


def last_line(path: Path) -> bytes:
    """The last line of a file, with its newline if it has one (b"": empty or missing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, min(size, _LINE_LOOK), size - min(size, _LINE_LOOK))
    finally:
        os.close(fd)
    return tail[tail.rfind(b"\n", 0, len(tail) - 1) + 1 :]


def _is_job_line(line: bytes) -> bool:
    return line.startswith(b"TIMELINE,") or b"job_id=" in line


def run_preamble(path: Path) -> bytes:
    """The current daemon run's first lines in a log: from its ``cuzk-daemon starting`` line up to its first
    job's line (at most PREAMBLE_MAX bytes, whole lines); b"" when the log does not hold the run's start.

    A session that continues another (``record --keep``) begins with them: its TIMELINE offsets are anchored
    by the run's engine start, and its GPU lanes named by the workers' start lines."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        start = run_start(fd, size)
        if start is None:
            return b""
        data = os.pread(fd, min(PREAMBLE_MAX, size - start), start)
    finally:
        os.close(fd)
    kept = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n") or (kept and _is_job_line(line)):
            break
        kept += len(line)
    return data[:kept]


class LogCopy:
    """Copies a daemon's log file, as it grows and is rotated, into ``destination`` (see the module docstring).

    Not thread-safe: one caller steps it (the live controller's poll, in a thread)."""

    def __init__(self, source: Path, destination: Path) -> None:
        self.source = source
        self.destination = destination
        self._current: _Source | None = None
        self._previous: _Source | None = None  # renamed away, not yet read to its end

    def step(self, limit: int | None = None) -> list[CopyNote]:
        """Copy what the log gained since the last step (at most about ``limit`` bytes; the rest next time),
        following a rotation; what happened to the file, in words, for notices ([] for nothing notable)."""
        notes: list[CopyNote] = []
        out = open_private_append(self.destination)
        try:
            self._step(out, limit, notes)
        finally:
            os.close(out)
        return notes

    def _step(self, out: int, limit: int | None, notes: list[CopyNote]) -> None:
        if self._current is None:
            self._current = self._open(first=True)
            if self._current is None:
                return
        current = self._current
        left = limit
        previous = self._previous
        if previous is not None:
            # Measured first: once the new file has a line, the writer has moved and the old one grows no more.
            moved = current.size() > 0
            copied, at_end = self._drain(previous, out, left)
            left = None if left is None else left - copied
            if not at_end:
                return
            if moved:
                self._let_go(out)
        if current.truncated():
            notes.append(self._recover(current, out))
            current.offset, current.tail, current.hole = 0, b"", True
        _, at_end = self._drain(current, out, left)
        identity = _identity(self.source)
        if not at_end or identity is None or identity == current.identity:
            return
        fresh = self._open(first=False)
        if fresh is None:
            return
        notes.append(CopyNote(f"{self.source} was rotated (renamed): following the new file from its start"))
        if self._previous is not None and current.size() == 0:
            # Rotated again before its writer ever moved: it still writes to the older file, kept.
            os.close(current.fd)
        else:
            self._let_go(out)
            self._previous = current
        self._current = fresh

    def _open(self, *, first: bool) -> _Source | None:
        try:
            fd = os.open(self.source, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        st = os.fstat(fd)
        source = _Source(fd, (st.st_dev, st.st_ino), 0)
        if first:
            source.offset = self._start(fd, st.st_size)
            start = max(0, source.offset - _CHECKED)
            source.tail = os.pread(fd, source.offset - start, start)
        return source

    def _start(self, fd: int, size: int) -> int:
        """Where the first look starts copying (see the module docstring)."""
        copied = last_line(self.destination)
        if copied:
            resumed = resume_after(fd, size, copied)
            return 0 if resumed is None else resumed
        start = run_start(fd, size)
        return 0 if start is None else start

    def _drain(self, source: _Source, out: int, limit: int | None, *, whole: bool = True) -> tuple[int, bool]:
        """Copy ``source`` from where it was read to (at most ``limit`` bytes): whole lines, a line still being
        written waits for the next look, unless ``whole`` is False (a file its writer has left). (Bytes read,
        whether nothing more can be taken now.) Whole lines only, so a copy moved to another session
        (``destination``) between two looks never splits a line between the two."""
        read = 0
        while limit is None or read < limit:
            want = COPY_CHUNK if limit is None else min(COPY_CHUNK, limit - read)
            data = os.pread(source.fd, want, source.offset)
            if whole and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                if cut:
                    data = data[:cut]
                elif len(data) < want:  # the file ends in a line being written (or ends)
                    return read, True
                elif want < COPY_CHUNK:  # a line that reaches past the limit: next time
                    return read, False
                # else a line longer than a chunk: copied in pieces (the follower cuts it so too)
            if not data:
                return read, True
            source.offset += len(data)
            source.tail = (source.tail + data)[-_CHECKED:]
            read += len(data)
            if source.hole:
                data = data.lstrip(b"\0")
                source.hole = not data
            _write_all(out, data)
        return read, source.offset >= source.size()

    def _let_go(self, out: int) -> None:
        """Close the renamed-away file; a last line it left without a newline ended when its writer moved."""
        previous, self._previous = self._previous, None
        if previous is None:
            return
        self._drain(previous, out, None, whole=False)
        if previous.tail and not previous.tail.endswith(b"\n"):
            _write_all(out, b"\n")
        os.close(previous.fd)

    def _recover(self, current: _Source, out: int) -> CopyNote:
        """After a truncate: copy what the file had gained since the last look from logrotate's copy of it."""
        if current.offset == 0 or not current.tail:
            return CopyNote(f"{self.source} was truncated (copytruncate): reading it again from its start")
        for candidate in self._rotated_copies():
            try:
                fd = os.open(candidate, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                kept = _Source(fd, (0, 0), current.offset, current.tail)
                if kept.size() < current.offset or kept.truncated():
                    continue
                taken, _ = self._drain(kept, out, None, whole=False)
            finally:
                os.close(fd)
            if kept.tail and not kept.tail.endswith(b"\n"):
                _write_all(out, b"\n")
            gained = f"; the {taken} bytes it gained since the last look were taken from {candidate}" if taken else ""
            return CopyNote(f"{self.source} was truncated (copytruncate): reading it again from its start{gained}")
        return CopyNote(
            f"{self.source} was truncated (copytruncate) and no plain copy of it is beside it (compressed at once, "
            "or in another directory): what it gained since the last look, if anything, is lost",
            lost=True,
        )

    def _rotated_copies(self) -> list[Path]:
        """logrotate's copies beside the file (``FILE.1``, ``FILE-DATE``), newest first, never compressed ones."""
        name = self.source.name
        found: list[tuple[float, Path]] = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.source.parent):
                if entry.name == name or not entry.name.startswith(name) or Path(entry.name).suffix in _COMPRESSED:
                    continue
                with contextlib.suppress(OSError):
                    if entry.is_file():
                        found.append((entry.stat().st_mtime, Path(entry.path)))
        return [path for _, path in sorted(found, reverse=True)[:_COPIES_LOOKED_AT]]

    def pending(self) -> int:
        """Bytes of the log (the renamed-away file and the current one) not copied yet, but a line still being
        written at its end."""
        waiting = 0
        for source in (self._previous, self._current):
            if source is not None:
                with contextlib.suppress(OSError):
                    waiting += source.waiting()
        if self._current is None:
            with contextlib.suppress(OSError):
                waiting += self.source.stat().st_size
        return waiting

    def close(self) -> None:
        for source in (self._previous, self._current):
            if source is not None:
                os.close(source.fd)
        self._previous = self._current = None


class JournalCopy:
    """journalctl's entries (``-o json``), copied into a file by a thread of their own: each entry's message as
    a line, as ``journalctl -o cat`` prints it.

    After each batch of entries, the cursor of the last one is recorded beside the file (``journal.cursor``,
    with the file's size then): a session continued later goes on right after it (:func:`journal_resume`),
    so no entry is copied twice and none is skipped. JSON gives each entry's cursor with its message, which
    is what makes the record exact: ``--show-cursor`` and ``--cursor-file`` give one only when journalctl
    ends (a follow ended by a signal, or with a SIGKILLed TUI, may never write it), and say where
    journalctl's output ended, not which of its lines reached the file.

    ``retarget`` moves the copy to another file between two entries (a session rolled over): none is split
    between the two files, lost or written twice."""

    def __init__(self, fd: int, destination: Path, resume: JournalResume | None = None) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._destination = destination
        self._out: int | None = open_private_append(destination)
        self._cursor = resume.cursor if resume is not None else None
        self._written = resume.written if resume is not None else b""
        self._thread = threading.Thread(target=self._pump, name="journal copy", daemon=True)
        self._thread.start()

    def retarget(self, destination: Path) -> None:
        fresh = open_private_append(destination)
        with self._lock:
            if self._out is None:  # the output has ended: nothing more comes
                old = fresh
            else:
                self._out, old = fresh, self._out
                self._destination = destination
                self._mark()  # what the new file holds already (a rolled-over session's preamble) precedes it
        os.close(old)

    def _pump(self) -> None:
        partial = b""
        try:
            while data := os.read(self._fd, 1 << 16):
                data = partial + data
                end = data.rfind(b"\n") + 1
                partial = data[end:]
                if end:
                    self._copy(data[:end].splitlines())
        except OSError:
            pass  # the pipe or the file failed: nothing more can be copied
        finally:
            # A line cut at the end holds no whole entry: not copied, nor marked (a continued session takes it).
            with self._lock:
                out, self._out = self._out, None
                assert out is not None
                os.close(out)
            os.close(self._fd)

    def _copy(self, lines: list[bytes]) -> None:
        """Append the messages of one batch of entries, then mark the last entry as copied."""
        messages: list[bytes] = []
        cursor = None
        for line in lines:
            entry = journal_entry(line)
            if entry is None:
                continue
            cursor, message = entry
            if message is not None:
                messages.append(self._unwritten(message + b"\n"))
        if cursor is None:
            return
        with self._lock:
            assert self._out is not None  # only this thread ends it
            _write_all(self._out, b"".join(messages))
            self._cursor = cursor
            self._mark()

    def _unwritten(self, line: bytes) -> bytes:
        """What of an entry's line the file does not hold yet: the file's bytes past the recorded cursor (written,
        their cursor not recorded: the copy ended between the two) are the entries after it, skipped as they
        match; bytes that do not match were not written by this copy, and everything is copied from there."""
        if not self._written:
            return line
        common = min(len(line), len(self._written))
        if line[:common] != self._written[:common]:
            self._written = b""
            return line
        self._written = self._written[common:]
        return line[common:]

    def _mark(self) -> None:
        """Record the last entry copied and the file's size then (see :func:`journal_resume`). Not synced to disk:
        a process that ends does not need it, and a record a crashed machine lost only costs the exactness."""
        if self._cursor is None or self._out is None:
            return
        record = {"cursor": self._cursor, "log_bytes": os.fstat(self._out).st_size}
        with contextlib.suppress(OSError):  # the log copy goes on without its mark
            write_private(_cursor_path(self._destination), json.dumps(record).encode(), durable=False)

    def join(self, timeout: float) -> None:
        """Wait for the rest of the output once the process has ended (its end of the pipe closed)."""
        self._thread.join(timeout)


@dataclass(frozen=True, slots=True)
class JournalResume:
    """Where a journal copy goes on: after the entry ``cursor``; ``written``: the file's bytes past that entry's
    record (entries after it, written before their cursor was recorded: see :meth:`JournalCopy._unwritten`)."""

    cursor: str
    written: bytes


def _cursor_path(destination: Path) -> Path:
    return destination.with_name(JOURNAL_CURSOR)


def journal_resume(destination: Path) -> JournalResume | None:
    """Where copying the journal into ``destination`` goes on: after the last entry it holds, when a journal copy
    recorded it (``journalctl --after-cursor``); None: no record (a new copy starts at the daemon run's start)."""
    try:
        record = json.loads(_cursor_path(destination).read_bytes())
        cursor, recorded = record["cursor"], record["log_bytes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(cursor, str) or not isinstance(recorded, int):
        return None
    written = b""
    with contextlib.suppress(OSError), destination.open("rb") as log:
        size = log.seek(0, os.SEEK_END)
        if recorded < size <= recorded + _WRITTEN_PAST_MARK_MAX:
            log.seek(recorded)
            written = log.read()
    return JournalResume(cursor, written)


def journal_entry(line: bytes) -> tuple[str, bytes | None] | None:
    """(cursor, message) of one line of ``journalctl -o json``; message None: the entry has none (``-o cat``
    prints nothing for it); None: the line is no entry."""
    try:
        entry = json.loads(line)
        cursor = entry["__CURSOR"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(cursor, str):
        return None
    return cursor, _field_bytes(entry.get("MESSAGE"))


def _field_bytes(value: object) -> bytes | None:
    """A field of journalctl's JSON as bytes: a string; an array of byte values (a value that is not printable
    UTF-8: ANSI colours, say); an array of those for a field the entry holds more than once (``-o cat`` prints
    the first); null (over 4096 bytes without ``--all``) or absent: None."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace")
    if isinstance(value, list) and value:
        if all(isinstance(byte, int) and 0 <= byte < 256 for byte in value):
            return bytes(value)
        return _field_bytes(value[0])
    return None
