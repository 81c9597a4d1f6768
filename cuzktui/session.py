"""Session directories: the recorder, and the one reader used for live following and replay.

A session directory (``user_state_dir("cuzk-tui")/sessions/<YYYYmmdd-HHMMSS>-<label>``, mode
0700, every file 0600) holds:

* ``daemon.log`` — the daemon's stdout and stderr, written by the daemon itself (the supervisor
  hands it the file, opened O_APPEND; several daemon runs follow one another in it); for an attached
  daemon, the copy of its log file or journal from the attach on (cuzktui.log_copy);
* ``config/v001.toml``, ``v002.toml`` … — every config version the daemon was started with;
* ``events.jsonl`` — observed events (:func:`events.to_record`), one JSON object per line, each
  appended with a single ``write`` on an O_APPEND descriptor, so the TUI and a benchmark runner
  in another process can record into the same session without interleaving;
* ``meta.json`` — host, GPUs, cgroup, memcheck report, tool version, creation time, mode; ``continues``:
  the session a recording rolled over from (``record --keep``);
* ``journal.cursor`` — with ``--journal``: the journal cursor of the last entry daemon.log holds, and
  daemon.log's size then, where a continued session's copy goes on (cuzktui.log_copy.JournalCopy).

:class:`SessionFollower` turns the two growing files back into events. The TUI polls it while
a session is live and :func:`iter_session_events` drains it once for replay and export, so live
and replay go through the same parsing and the same merge.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import heapq
import itertools
import json
import os
import platform
import time
import typing
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

from platformdirs import user_state_dir

from . import events as ev
from . import model_cache
from .events import Stream
from .logparse import (
    PIECED_TIMELINE_REACH,
    event_line_starts,
    is_inert,
    lazy_line_starts,
    may_be_timeline_rest,
    parse_line,
    pieced_timeline_lines,
    rejoin_timeline,
    split_pieced_timeline,
    strip_ansi,
)
from .model import SessionModel
from .session_layout import CONFIG_DIR, DAEMON_LOG, EVENTS_FILE, META_FILE, config_versions
from .timeline import Timeline

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
_READ_CHUNK: Final = 1 << 22
# A live poll takes at most this much new log (the rest waits for the next poll) and a line longer
# than _MAX_LINE is cut into pieces: a daemon flooding its log cannot make one poll hold the flood in
# memory or block the UI while it is parsed. Daemon lines are a few hundred bytes; real logs, KB/s.
POLL_LOG_BYTES: Final = 8 << 20
_MAX_LINE: Final = 1 << 20
# Events a holding pass keeps back at most (SessionFollower._holding): a few seconds of a busy session.
_HELD_MAX: Final = 65_536


def sessions_root() -> Path:
    """Where sessions live unless a directory is given explicitly."""
    return Path(user_state_dir("cuzk-tui")) / "sessions"


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cuzk-tui")
    except PackageNotFoundError:
        return "unknown"


def _private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) as 0700 directories; tighten it if it exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)


def open_private_append(path: Path) -> int:
    """An O_APPEND write descriptor on ``path``, created 0600 if missing."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def write_private(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` atomically with a 0600 file holding ``data``; ``durable``: on disk before it replaces
    ``path`` (a crash of the machine keeps the old or the new, never an empty one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class SessionWriter:
    """Records into one session directory (creating it 0700 if needed)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        _private_dir(self.path)
        _private_dir(self.config_dir)
        self._events_fd: int | None = None

    @classmethod
    def create(
        cls,
        label: str = "session",
        *,
        directory: Path | str | None = None,
        root: Path | str | None = None,
        mode: str = "engine",
    ) -> SessionWriter:
        """A new session: ``directory`` if given (may exist), else a fresh timestamped one under ``root``."""
        if directory is not None:
            session = cls(directory)
        else:
            base = Path(root) if root is not None else sessions_root()
            _private_dir(base)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in label) or "session"
            for n in range(1, 1000):
                candidate = base / (f"{stamp}-{safe}" if n == 1 else f"{stamp}-{safe}-{n}")
                try:
                    candidate.mkdir(mode=DIR_MODE)
                except FileExistsError:
                    continue
                break
            else:
                raise FileExistsError(f"no free session directory name under {base}")
            session = cls(candidate)
        if not session.meta_path.exists():
            session.write_meta(
                {
                    "label": label,
                    "mode": mode,
                    "created": time.time(),
                    "created_iso": datetime.now().astimezone().isoformat(timespec="seconds"),
                    "host": platform.node(),
                    "tool_version": tool_version(),
                }
            )
        return session

    @property
    def daemon_log_path(self) -> Path:
        return self.path / DAEMON_LOG

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def meta_path(self) -> Path:
        return self.path / META_FILE

    @property
    def config_dir(self) -> Path:
        return self.path / CONFIG_DIR

    def open_daemon_log(self) -> int:
        """A fresh O_APPEND descriptor on daemon.log for a daemon's stdout and stderr (caller closes)."""
        return open_private_append(self.daemon_log_path)

    def append_event(self, event: ev.ObservedEvent) -> None:
        """Append one event as one JSON line in a single write (safe with other appending processes)."""
        if self._events_fd is None:
            self._events_fd = open_private_append(self.events_path)
        line = json.dumps(ev.to_record(event), ensure_ascii=False, separators=(",", ":")) + "\n"
        os.write(self._events_fd, line.encode("utf-8"))

    def add_config_version(self, text: str) -> tuple[int, Path]:
        """Store the next config version (``config/vNNN.toml``); returns (version, path)."""
        data = text.encode("utf-8")
        version = self.next_config_version()
        while True:
            path = self.config_dir / f"v{version:03d}.toml"
            try:
                # O_EXCL: a second process adding a version at the same time takes the next number.
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
            except FileExistsError:
                version += 1
                continue
            try:
                os.fchmod(fd, FILE_MODE)
                os.write(fd, data)
            finally:
                os.close(fd)
            return version, path

    def next_config_version(self) -> int:
        """The number the next config version takes (unless another process adds one first)."""
        return len(self.config_versions()) + 1

    def config_versions(self) -> list[Path]:
        return config_versions(self.path)

    def read_meta(self) -> dict[str, Any]:
        return read_meta(self.path)

    def write_meta(self, fields: Mapping[str, Any]) -> None:
        """Merge ``fields`` into meta.json (host, gpus, cgroup, memcheck, mode, …), replacing it atomically."""
        meta = self.read_meta()
        meta.update(fields)
        write_private(self.meta_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._events_fd is not None:
            os.close(self._events_fd)
            self._events_fd = None


# --------------------------------------------------------------------------------------------
# Reading a session back
# --------------------------------------------------------------------------------------------

_Keyed = tuple[float, ev.Event]


class _Tail:
    """Whole lines appended to one file since the last read; a partial last line waits for its end."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self._offset = offset
        self._partial = b""
        self.line_number = 0
        self.cut = False  # the file ended without a newline (final read): its writer stopped mid-line
        # Lines of the next block to search for the rest of a pieced TIMELINE line (logparse.pieced_timeline_lines).
        self._rest_wanted = 0

    @property
    def offset(self) -> int:
        """Bytes of the file read so far (a loading reader's progress)."""
        return self._offset

    def _blocks(self, final: bool, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
        """Runs of whole lines appended since the last read, each ending in a newline, with the file
        offset each starts at; with ``final`` also the unterminated last line (``cut``); with ``limit``,
        from at most about that many new bytes (the rest next time)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        taken = 0
        try:
            # A small limit reads no more than asked: a live poll reads a flood in slices (live.py).
            while (size := _READ_CHUNK if limit is None else min(_READ_CHUNK, limit - taken)) > 0 and (
                chunk := os.pread(fd, size, self._offset)
            ):
                base = self._offset - len(self._partial)
                self._offset += len(chunk)
                taken += len(chunk)
                data = self._partial + chunk
                end = data.rfind(b"\n") + 1
                self._partial = data[end:]
                if len(self._partial) > _MAX_LINE:  # no end in sight: its pieces are lines of their own
                    data, end, self._partial = data + b"\n", len(data) + 1, b""
                if end:
                    yield base, data[:end]
        finally:
            os.close(fd)
        if final and self._partial:
            line, self._partial = self._partial, b""
            self.cut = True
            yield self._offset - len(line), line

    def lines(self, final: bool, limit: int | None = None) -> Iterator[bytes]:
        """New whole lines (see _blocks)."""
        for _, block in self._blocks(final, limit):
            parts = block.split(b"\n")
            if not parts[-1]:
                parts.pop()
            for line in parts:
                self.line_number += 1
                yield line

    def _counted(self, final: bool, limit: int | None) -> Iterator[tuple[int, bytes]]:
        for base, block in self._blocks(final, limit):
            self.line_number += block.count(b"\n") + (not block.endswith(b"\n"))
            yield base, block

    def event_lines(self, final: bool, details: bool, limit: int | None = None) -> Iterator[bytes]:
        """Only the lines that may be events (logparse.event_line_starts), found over whole blocks at
        C speed: the bulk of a long log is never split into line objects."""
        for _, block in self._counted(final, limit):
            starts = event_line_starts(block, details)
            starts, self._rest_wanted = pieced_timeline_lines(block, starts, self._rest_wanted)
            for start in starts:
                yield _line_at(block, start)

    def lazy_event_lines(self, final: bool, limit: int | None = None) -> Iterator[bytes | ev.DetailLines]:
        """event_lines, with the C++ timing lines between two of them as one DetailLines each (a line
        naming its GPU alone): the bulk of a busy log's events is found, never parsed."""
        reread = functools.partial(_read_range, self.path)
        for base, block in self._counted(final, limit):
            starts, timing = lazy_line_starts(block)
            starts, self._rest_wanted = pieced_timeline_lines(block, starts, self._rest_wanted)
            done = 0
            for start in starts:
                if done < len(timing) and timing[done] < start:
                    before = bisect.bisect_left(timing, start, done)
                    yield from _detail_runs(base, block, timing[done:before], reread)
                    done = before
                yield _line_at(block, start)
            if done < len(timing):
                yield from _detail_runs(base, block, timing[done:], reread)


def _line_at(block: bytes, start: int) -> bytes:
    end = block.find(b"\n", start)
    return block[start:] if end == -1 else block[start:end]


def _detail_runs(
    base: int, block: bytes, starts: list[int], reread: Callable[[int, int], bytes]
) -> Iterator[ev.DetailLines]:
    """The timing lines at ``starts`` of ``block`` (file offset ``base``) as one run, or line by line when
    one names its GPU (Timeline._single_open_gpu then picks the owner by that GPU)."""
    first, last = starts[0], starts[-1]
    end = block.find(b"\n", last)
    end = len(block) if end == -1 else end
    if block.find(b" on gpu ", first, end) == -1:
        yield ev.DetailLines(base + first, block[first:end], None, reread)
        return
    for start in starts:
        line = _line_at(block, start)
        event = parse_line(line.decode("utf-8", "replace"))
        gpu = event.gpu if isinstance(event, ev.CuzkTiming) else None
        yield ev.DetailLines(base + start, line, gpu, reread)


def _read_range(path: Path, start: int, length: int) -> bytes:
    """``length`` bytes of ``path`` from ``start`` (a partition's timing lines, read again on demand)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, length, start)
    finally:
        os.close(fd)


class LogFollower:
    """A daemon log → log events keyed by time; lines without a timestamp take their predecessor's.

    ``offset`` starts the reading at a byte offset (e.g. where one daemon run began).
    """

    def __init__(
        self, path: Path, offset: int = 0, *, skip_inert: bool = False, details: bool = True, lazy: bool = False
    ) -> None:
        self._tail = _Tail(path, offset)
        self._key = 0.0
        # Post-mortem readers skip lines no model uses without parsing them, and lines that would only
        # become PlainLines (which they drop), without even splitting them out (_Tail.event_lines);
        # ``lazy`` (with both) leaves the C++ timing lines unparsed (DetailLines).
        self._skip_inert = skip_inert
        self._details = details
        self._lazy = lazy and skip_inert and details
        # The first pieces of a TIMELINE line a tracing line was written into, waiting for the rest
        # (logparse.split_pieced_timeline), and how many more lines it waits.
        self._pieced: bytes | None = None
        self._pieced_reach = 0

    def read(self, final: bool, limit: int | None = None) -> Iterator[_Keyed]:
        skip, details = self._skip_inert, self._details
        lines: Iterator[bytes | ev.DetailLines]
        if self._lazy:
            lines = self._tail.lazy_event_lines(final, limit)
        elif skip:
            lines = self._tail.event_lines(final, details, limit)
        else:
            lines = self._tail.lines(final, limit)
        for raw in lines:
            if isinstance(raw, ev.DetailLines):  # unstamped: placed where the line before it was
                yield self._key, raw
                continue
            if self._pieced is not None:
                event, was_rest = self._take_rest(raw)
                if event is not None:
                    yield self._key, event
                if was_rest:
                    continue
            if raw.startswith(b"TIMELINE,"):
                pieces = split_pieced_timeline(raw)
                if pieces is not None:
                    if self._pieced is not None:  # stderr's lock keeps TIMELINE lines apart: never seen
                        yield self._key, parse_line(self._pieced.decode("utf-8", "replace"), Stream.UNKNOWN)
                    # The tracing line is read now; the TIMELINE line once its rest comes.
                    self._pieced, raw = pieces
                    self._pieced_reach = PIECED_TIMELINE_REACH
                elif b"\x1b" not in raw:
                    # The bulk of the events: never inert, no colour to strip, no timestamp of its own.
                    yield self._key, parse_line(raw.decode("utf-8", "replace"), Stream.UNKNOWN)
                    continue
            text = raw.decode("utf-8", "replace").rstrip("\r")
            if skip:
                # Colour stripped once here, not in both is_inert and parse_line (half a coloured log).
                text = strip_ansi(text)
                if is_inert(text, details):
                    continue
            event = parse_line(text, Stream.UNKNOWN)
            ts = getattr(event, "ts", None)
            if isinstance(ts, float) and ts > self._key:
                self._key = ts
            yield self._key, event
        if final and self._pieced is not None:
            # The log ended before the rest came (the daemon died mid-write): the pieces as they stand.
            yield self._key, parse_line(self._pieced.decode("utf-8", "replace"), Stream.UNKNOWN)
            self._pieced = None

    def _take_rest(self, raw: bytes) -> tuple[ev.LogEvent | None, bool]:
        """``raw`` tried as the rest of the waiting TIMELINE pieces: (the whole line's event, True) when it is
        their rest; (the pieces' event alone, False) when it is not and they wait no more (``raw`` is no line
        the daemon writes whole, or they waited PIECED_TIMELINE_REACH lines); (None, False) while they wait."""
        pieces = self._pieced
        assert pieces is not None
        unwhole = may_be_timeline_rest(raw)
        line = rejoin_timeline(pieces, raw.rstrip(b"\r")) if unwhole else None
        if line is not None:
            self._pieced = None
            return parse_line(line.decode("utf-8", "replace"), Stream.UNKNOWN), True
        self._pieced_reach -= 1
        if unwhole or self._pieced_reach <= 0:
            self._pieced = None
            return parse_line(pieces.decode("utf-8", "replace"), Stream.UNKNOWN), False
        return None, False

    def poll(self) -> list[ev.LogEvent]:
        return [typing.cast(ev.LogEvent, event) for _, event in self.read(final=False, limit=POLL_LOG_BYTES)]

    @property
    def lines(self) -> int:
        return self._tail.line_number

    @property
    def path(self) -> Path:
        return self._tail.path

    @property
    def key(self) -> float:
        """The time the last event read was placed at (keys only grow)."""
        return self._key

    @property
    def offset(self) -> int:
        return self._tail.offset

    @property
    def cut_mid_line(self) -> bool:
        return self._tail.cut


# Every record line starts so (to_record puts the type first; append_event writes compact JSON).
_RECORD_START: Final = b'{"type":'


def _glued_record(raw: bytes) -> ev.ObservedEvent | None:
    """The record written after a torn one on the same line, if there is one that reads.

    A write cut short (ENOSPC, a file-size limit) leaves a fragment without its newline; the next
    append then continues that line, so the next whole record follows the fragment."""
    start = raw.find(_RECORD_START, 1)
    while start != -1:
        with contextlib.suppress(ValueError, ev.RecordError):
            return ev.from_record(json.loads(raw[start:]))
        start = raw.find(_RECORD_START, start + 1)
    return None


class _EventsReader:
    """events.jsonl → observed events. A damaged line (a torn write, garbage) is skipped, counted and
    said in a Notice; a whole record glued after a torn one on its line is recovered; reading goes on."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self._tail = _Tail(path, offset)
        self._key = 0.0
        self.damaged = 0  # lines skipped
        self._first_damage = ""

    @property
    def key(self) -> float:
        """The time the last event read was placed at (keys only grow)."""
        return self._key

    @property
    def path(self) -> Path:
        return self._tail.path

    @property
    def offset(self) -> int:
        return self._tail.offset

    @property
    def damage(self) -> str | None:
        """How many lines were skipped and where the first was, for a command's stderr (None: none)."""
        if not self.damaged:
            return None
        lines = "1 damaged line" if self.damaged == 1 else f"{self.damaged} damaged lines"
        return f"{self._tail.path}: {lines} skipped (the first: {self._first_damage}); every other record was read"

    def read(self, final: bool, limit: int | None = None) -> Iterator[_Keyed]:
        for raw in self._tail.lines(final, limit):
            if not raw.strip():
                continue
            try:
                event = ev.from_record(json.loads(raw))
            except (ValueError, ev.RecordError) as error:
                yield from self._skip(raw, error)
                continue
            if event.t > self._key:
                self._key = event.t
            yield self._key, event

    def read_behind(self, ahead: Callable[[], float]) -> Iterator[_Keyed]:
        """The records appended so far, read a slice at a time, the next slice only while this file's key
        is not past ``ahead()`` (the log's, in a pass over a stretch of it): such a pass reads the records
        of that stretch and at most a slice beyond, which is all it holds back (SessionFollower._holding)."""
        while True:
            offset = self._tail.offset
            yield from self.read(False, _READ_CHUNK)
            if self._tail.offset == offset or self._key > ahead():
                return

    def _skip(self, raw: bytes, error: Exception) -> Iterator[_Keyed]:
        line = self._tail.line_number
        self.damaged += 1
        if self.damaged == 1:
            self._first_damage = f"line {line} ({error})"
        glued = _glued_record(raw)
        kept = "; the record written after it on that line was kept" if glued is not None else ""
        text = f"{self._tail.path}: line {line} is damaged ({error}): skipped{kept}"
        yield self._key, ev.Notice(t=self._key, level="error", text=text)
        if glued is not None:
            self._key = max(self._key, glued.t)
            yield self._key, glued


class SessionFollower:
    """New events of a session since the last :meth:`poll`, from daemon.log and events.jsonl.

    Each poll merges the two files' new events by time (log lines by their printed timestamp,
    TIMELINE and other unstamped lines by their predecessor's, observed events by ``t``) while
    keeping each file's own order. ``log_path`` overrides daemon.log (a bare log, or a session recorded
    before an attached daemon's log file was copied into it); ``offsets`` start the reading of daemon.log
    and events.jsonl past what is already modelled (a live session that rolled over).
    """

    def __init__(
        self,
        directory: Path | str,
        log_path: Path | str | None = None,
        *,
        observed: bool = True,
        skip_inert: bool = False,
        details: bool = True,
        lazy: bool = False,
        offsets: tuple[int, int] = (0, 0),
    ) -> None:
        self.path = Path(directory)
        log = Path(log_path) if log_path is not None else self.path / DAEMON_LOG
        self._log = LogFollower(log, offsets[0], skip_inert=skip_inert, details=details, lazy=lazy)
        # ``observed`` False: a bare log, whose directory's events.jsonl (if any) is not its session's.
        self._observed = observed
        self._events = _EventsReader(self.path / EVENTS_FILE if observed else Path(os.devnull), offsets[1])
        # Events read but held back by a holding pass (log's, events.jsonl's), merged into the next
        # pass; None: a holding pass gave up (see _holding), so this state is not one to resume from.
        self._held: tuple[list[_Keyed], list[_Keyed]] | None = ([], [])

    @property
    def log(self) -> LogFollower:
        return self._log

    @property
    def damage(self) -> str | None:
        """How much of events.jsonl was damaged and skipped, if any was."""
        return self._events.damage

    def iter_keyed(self, final: bool = False, log_limit: int | None = None, *, hold: bool = False) -> Iterator[_Keyed]:
        """New events merged by time, each with the time it is placed at (a replay's cursor axis);
        ``final`` also takes an unterminated last line (end of a replay); ``log_limit`` caps the new
        log bytes taken (see POLL_LOG_BYTES). ``hold`` keeps back the events that lines appended later
        could still precede (see _holding), so that a pass resumed later merges as one whole pass would;
        with ``log_limit`` too, events.jsonl is read only about as far as the log's stretch reaches (a
        replay's keyframe passes: a whole file of records beyond it would be more than a pass may hold)."""
        if not self._observed:
            return self._log.read(final, log_limit)
        log = self._log.read(final, log_limit)
        if hold and log_limit is not None and not final:
            events = self._events.read_behind(lambda: self._log.key)
        else:
            events = self._events.read(final)
        if self._held is not None and (self._held[0] or self._held[1]):
            log, events = itertools.chain(self._held[0], log), itertools.chain(self._held[1], events)
            self._held = ([], [])
        merged = heapq.merge(log, events, key=itemgetter(0))
        return self._holding(merged) if hold else merged

    @property
    def files_read(self) -> list[tuple[Path, int]]:
        """Each file read and how many of its bytes were; [] when a later pass from this state would not
        merge as one whole pass would (a holding pass gave up)."""
        if self._held is None:
            return []
        files = [(self._log.path, self._log.offset)]
        return [*files, (self._events.path, self._events.offset)] if self._observed else files

    def _holding(self, merged: Iterator[_Keyed]) -> Iterator[_Keyed]:
        """``merged`` less its events that a later line of either file could still precede (each file's
        keys only grow, so an event placed before both files' last keys is final); those are kept in
        ``_held`` for the next pass. Beyond _HELD_MAX (one file far behind the other) the oldest are
        let go and the state is marked not resumable: what a pass holds stays bounded."""
        log, events = self._log, self._events
        pending: deque[_Keyed] = deque()
        for keyed in merged:
            pending.append(keyed)
            bound = min(log.key, events.key)
            while pending and (pending[0][0] < bound or len(pending) > _HELD_MAX):
                if pending[0][0] >= bound:
                    self._held = None
                yield pending.popleft()
        bound = min(log.key, events.key)
        while pending and pending[0][0] < bound:
            yield pending.popleft()
        if self._held is not None:
            self._held = (
                [keyed for keyed in pending if not ev.is_observed(keyed[1])],
                [keyed for keyed in pending if ev.is_observed(keyed[1])],
            )
        else:
            yield from pending

    def iter_new(self, final: bool = False, log_limit: int | None = None) -> Iterator[ev.Event]:
        """Lazily merged new events (see :meth:`iter_keyed`)."""
        for _, event in self.iter_keyed(final, log_limit):
            yield event

    def poll(self) -> list[ev.Event]:
        return list(self.iter_new(log_limit=POLL_LOG_BYTES))


def iter_observed(directory: Path | str) -> Iterator[ev.ObservedEvent]:
    """The observed events recorded so far in a session's events.jsonl, without its log (a line still
    being written waits; a damaged one is a Notice, see _EventsReader): a running trial's figures."""
    for _, event in _EventsReader(Path(directory) / EVENTS_FILE).read(final=False):
        yield typing.cast(ev.ObservedEvent, event)


def iter_session_events(directory: Path | str, log_path: Path | str | None = None) -> Iterator[ev.Event]:
    """Every event of a recorded session in time order (tests and quick scans)."""
    return SessionFollower(directory, log_path).iter_new(final=True)


# --------------------------------------------------------------------------------------------
# One reader for replay, export and report: a session directory or a bare log, read once
# --------------------------------------------------------------------------------------------


class SourceError(Exception):
    """The source is not a readable session directory or daemon log."""


@dataclass(frozen=True, slots=True)
class SessionSource:
    """What ``SESSION_OR_LOG`` names: a session directory, or a bare daemon log (``directory`` None)."""

    path: Path
    directory: Path | None
    log_path: Path

    @property
    def bare_log(self) -> bool:
        return self.directory is None


def resolve_source(path: Path | str) -> SessionSource:
    """Decide once whether ``path`` is a session directory or a bare daemon log; SourceError if neither."""
    p = Path(path)
    if p.is_dir():
        if not (p / DAEMON_LOG).is_file() and not (p / EVENTS_FILE).is_file():
            raise SourceError(f"{p}: not a session directory (no {DAEMON_LOG} or {EVENTS_FILE})")
        return SessionSource(p, p, p / DAEMON_LOG)
    if p.is_file():
        return SessionSource(p, None, p)
    if p.exists():
        raise SourceError(f"{p}: not a regular file or a directory")
    raise SourceError(f"{p}: no such session directory or log file")


@dataclass(slots=True)
class RecordedSession:
    """Every event of a source, keyed by the time replay places it at (the one read of it)."""

    source: SessionSource
    events: list[_Keyed]
    log_lines: int
    # What of the session could not be read (damaged event lines, meta.json, config versions), one
    # line each for a command's stderr; the model has each as a Notice too.
    damage: tuple[str, ...] = ()


def _unreadable_files(directory: Path) -> list[str]:
    """meta.json and the config versions that do not read, and what is not known without them."""
    # Imported here: only a session directory has config versions, and the config's modules (tomlkit,
    # the knob tables) are a twentieth of a bare log's read-again report.
    from .config import ConfigError, load_config

    problems: list[str] = []
    _, why = _load_meta(directory)
    if why is not None:
        problems.append(
            f"{directory / META_FILE}: unreadable ({why}); the session's host, GPU and cgroup facts are not known"
        )
    for version in config_versions(directory):
        try:
            load_config(version)
        except ConfigError as error:
            problems.append(f"{error}; the knobs of that daemon run are not known")
    return problems


# A loading reader's progress: (log bytes read, log bytes in all), now and then while it reads.
Progress = Callable[[int, int], None]
_PROGRESS_EVERY: Final = 4096  # events between two progress calls (a few MB of a busy log)


class SessionReading:
    """One lazy pass over a source's events (iterate it once): replay, export and report model the events
    as they come and keep none of them, so a week of log costs its model, not every event object.

    ``log_lines`` and ``damage`` are complete once the iteration ends. A bare log has no supervisor to
    say how its daemon ended: a log cut mid-line (the daemon died while writing) or one that ends on the
    fatal ``Error:`` report yields a DaemonExited at its end; one with no daemon line at all raises
    SourceError when the iteration ends. ``progress`` is called first with where the reading starts, then
    as the log is read, last with the whole size.

    ``checkpoint``, when set, is called once inside the iteration: when every event that lines appended
    later could not change has been yielded (and modelled by the consumer), before the end-of-source
    steps (an unterminated last line, the exit inferred from it, the notices of an empty source). The
    reading pickles there, and iterating the unpickled copy later reads only what was appended since:
    the consumer's model saved at that call plus that copy's events equal one whole pass (model_cache).
    ``lazy`` yields the C++ timing lines as DetailLines, which a model keeps as log offsets (the waterfall
    parses a partition's when it is opened, Partition.cuzk_timing).

    ``keyframe``, when set, is called inside the iteration each time about ``keyframe_bytes`` more of the
    log have been read and yielded, at a point where the reading pickles as a checkpoint's does: the
    consumer's model then plus the unpickled copy's events equal one whole pass (replay's keyframes).
    """

    def __init__(
        self, source: SessionSource, details: bool = True, progress: Progress | None = None, *, lazy: bool = False
    ) -> None:
        self.source = source
        self._follower = SessionFollower(
            source.directory or source.log_path.parent,
            log_path=source.log_path,
            observed=not source.bare_log,
            skip_inert=True,
            details=details,
            lazy=lazy,
        )
        self._unreadable = _unreadable_files(source.directory) if source.directory is not None else []
        self.progress = progress
        self.checkpoint: Callable[[], None] | None = None
        self.keyframe: Callable[[], None] | None = None
        self.keyframe_bytes: int | None = None
        # How far the pass is, kept here (not in locals) so that a checkpoint carries it.
        self._fatal: str | None = None
        self._last: _Keyed | None = None
        self._count = 0
        self._unsaid = self._unreadable  # said where the session begins, so a replay shows them from its start

    def __getstate__(self) -> dict[str, Any]:
        # The callbacks belong to the run that reads, not to the state a later run resumes.
        return {**self.__dict__, "progress": None, "checkpoint": None, "keyframe": None}

    @property
    def log_lines(self) -> int:
        return self._follower.log.lines

    @property
    def unreadable(self) -> tuple[str, ...]:
        """The session's files that do not read (meta.json, config versions): a checkpoint stands on them."""
        return tuple(self._unreadable)

    @property
    def damage(self) -> tuple[str, ...]:
        """What could not be read (unreadable meta.json or config versions, damaged event lines)."""
        damaged_events = self._follower.damage
        return (*self._unreadable, *([damaged_events] if damaged_events is not None else []))

    @property
    def log_size(self) -> int:
        """The log's size now (0: none), which a loading reader's progress goes up to."""
        return _size(self.source.log_path)

    @property
    def files_read(self) -> list[tuple[Path, int]]:
        """Each file this reading reads and how many of its bytes it has read (a checkpoint's footing),
        or [] when the state is not one to resume from."""
        return self._follower.files_read

    def __iter__(self) -> Iterator[_Keyed]:
        source, follower = self.source, self._follower
        total = _size(source.log_path)
        if self.progress is not None:  # where it starts: a resumed reading is already most of the way
            self.progress(min(follower.log.offset, total), total)
        if self.checkpoint is None and self.keyframe is None:
            yield from self._take(follower.iter_keyed(final=True), total)
        else:
            yield from self._holding_passes(total)
            if self.checkpoint is not None:
                self.checkpoint()
            yield from self._take(follower.iter_keyed(final=True), total)
        for text in self._unsaid:
            yield 0.0, ev.Notice(0.0, "error", text)
        if self.progress is not None:
            self.progress(total, total)
        fatal, last, log = self._fatal, self._last, follower.log
        if not source.bare_log:
            return
        if last is None:
            raise SourceError(
                f"{source.path}: not a daemon log or a session directory (no line of it is one the daemon writes)"
            )
        if log.cut_mid_line or fatal is not None:
            end = last[0]
            evidence = (
                "the log ends mid-line: the daemon stopped while writing it"
                if log.cut_mid_line
                else "the log ends on the daemon's fatal Error: report"
            )
            cause: ev.ExitCause = "error" if fatal is not None else "unknown"
            yield end, ev.DaemonExited(end, None, None, None, cause, (evidence,), fatal)

    def _holding_passes(self, total: int) -> Iterator[_Keyed]:
        """What a checkpoint or a keyframe may follow: one holding pass, or, with ``keyframe``, one per
        ``keyframe_bytes`` of the log, each followed by a keyframe while the state is one to resume from."""
        follower, keyframe = self._follower, self.keyframe
        stride = self.keyframe_bytes if keyframe is not None else None
        while True:
            before = follower.log.offset
            yield from self._take(follower.iter_keyed(log_limit=stride, hold=True), total)
            if keyframe is None or stride is None or not before < follower.log.offset < total:
                return
            if follower.files_read:
                keyframe()

    def _take(self, keyed_events: Iterator[_Keyed], total: int) -> Iterator[_Keyed]:
        """The events of one pass a consumer sees, keeping the pass's state on the reading."""
        progress, log = self.progress, self._follower.log
        fatal, last, count, unsaid = self._fatal, self._last, self._count, self._unsaid
        for keyed in keyed_events:
            if progress is not None and count % _PROGRESS_EVERY == 0:
                progress(min(log.offset, total), total)
            event = keyed[1]
            if type(event) is ev.PlainLine:  # text no daemon line (a damaged line, a panic's prose)
                continue
            count += 1
            if isinstance(event, ev.FatalErrorLine):
                fatal = event.context
            for text in unsaid:
                yield keyed[0], ev.Notice(keyed[0], "error", text)
            unsaid = []
            last = keyed
            yield keyed
        self._fatal, self._last, self._count, self._unsaid = fatal, last, count, unsaid


def read_session(source: SessionSource, details: bool = True, progress: Progress | None = None) -> RecordedSession:
    """Read a session or a bare log once into a list (see :class:`SessionReading`); OSError propagates,
    SourceError when it is neither."""
    reading = SessionReading(source, details, progress)
    events = list(reading)
    return RecordedSession(source, events, reading.log_lines, reading.damage)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@dataclass(frozen=True, slots=True)
class SessionInfo:
    path: Path
    label: str
    created: float
    mode: str
    proofs_completed: int  # the benchmark proofs it recorded, by outcome (bench.py ProofFinished)
    size_bytes: int
    proofs_failed: int = 0  # answered FAILED, or the call failed
    proofs_lost: int = 0  # never answered: lost with their daemon

    @property
    def proofs_text(self) -> str:
        """Its benchmark proofs by outcome ("12 ok", "10 ok, 2 failed, 1 lost"): a run whose every proof
        failed is not a session with nothing in it."""
        counts = (("ok", self.proofs_completed), ("failed", self.proofs_failed), ("lost", self.proofs_lost))
        shown = [f"{n} {outcome}" for outcome, n in counts if n or outcome == "ok"]
        return ", ".join(shown)


def _proof_outcomes(events_path: Path) -> Counter[str]:
    """How many benchmark proofs ended with each status (COMPLETED, FAILED, LOST)."""
    count: Counter[str] = Counter()
    with contextlib.suppress(FileNotFoundError), events_path.open("rb") as f:
        for raw in f:
            # Cheap prefilter: only ProofFinished lines need decoding.
            if b'"ProofFinished"' not in raw:
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # a damaged line (see _EventsReader): the count goes on past it
            if isinstance(record, dict) and isinstance(record.get("status"), str):
                count[record["status"]] += 1
    return count


def _tree_size(path: Path) -> int:
    total = 0
    for entry in path.rglob("*"):
        with contextlib.suppress(OSError):
            if entry.is_file():
                total += entry.stat().st_size
    return total


def _load_meta(directory: Path) -> tuple[dict[str, Any], str | None]:
    """A session's meta.json as a dict ({} when it is missing or does not read), and why it does not
    read (None: it does, or there is none)."""
    try:
        data = json.loads((directory / META_FILE).read_bytes())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as error:
        return {}, str(error)
    if not isinstance(data, dict):
        return {}, f"a JSON {type(data).__name__}, not an object"
    return data, None


def read_meta(directory: Path) -> dict[str, Any]:
    """A session's meta.json as a dict ({} when it is missing or does not read)."""
    return _load_meta(directory)[0]


def read_session_info(path: Path) -> SessionInfo | None:
    """Summary of one session directory; None when it is not one."""
    if not any((path / name).exists() for name in (META_FILE, EVENTS_FILE, DAEMON_LOG)):
        return None
    meta = read_meta(path)
    created = meta.get("created")
    if not isinstance(created, int | float):
        created = path.stat().st_mtime
    outcomes = _proof_outcomes(path / EVENTS_FILE)
    completed, lost = outcomes.pop("COMPLETED", 0), outcomes.pop("LOST", 0)
    return SessionInfo(
        path=path,
        label=str(meta.get("label", path.name)),
        created=float(created),
        mode=str(meta.get("mode", "unknown")),
        proofs_completed=completed,
        size_bytes=_tree_size(path),
        proofs_failed=sum(outcomes.values()),  # FAILED (any other status is not a success either)
        proofs_lost=lost,
    )


def list_sessions(root: Path | str | None = None) -> list[SessionInfo]:
    """Every session under ``root`` (default: the sessions directory), oldest first."""
    base = Path(root) if root is not None else sessions_root()
    if not base.is_dir():
        return []
    infos = [info for child in base.iterdir() if child.is_dir() and (info := read_session_info(child)) is not None]
    return sorted(infos, key=lambda info: (info.created, info.path.name))


# Post-mortem readers (export, report) keep every job: retention far beyond any realistic run.
ALL_JOBS: Final = 10_000_000


@dataclass(slots=True)
class LoadedSession:
    """What a post-mortem reader keeps of a source besides its model: the observed events (export
    draws their counters and marks), the log's size in lines, and where events.jsonl is damaged."""

    source: SessionSource
    observed: list[ev.ObservedEvent]
    log_lines: int
    damage: tuple[str, ...] = ()  # as RecordedSession's


def load_session(
    path: Path | str,
    max_jobs: int = ALL_JOBS,
    details: bool = True,
    progress: Progress | None = None,
    *,
    cache: bool = True,
    lazy: bool = True,
) -> tuple[LoadedSession, SessionModel]:
    """Resolve, read once and model ``SESSION_OR_LOG``: what replay, export and report all start from.
    The events are modelled as they are read and not kept (only the observed ones, a small share).
    ``details`` False leaves out the per-partition timing lines (the report shows none of them); ``lazy``
    keeps the C++ ones as log offsets, parsed when a partition's are looked at (SessionReading).
    ``cache`` False (``--no-cache``) neither resumes from nor stores a model checkpoint (model_cache)."""
    source = resolve_source(path)
    observed: list[ev.ObservedEvent] = []
    model = SessionModel(Timeline(max_jobs=max_jobs), log_source=str(source.log_path) if source.bare_log else None)
    reading, resumed = resume_reading(
        SessionReading(source, details, progress, lazy=lazy),
        cache,
        ("load_session", details, lazy, max_jobs),
        lambda: (observed, model),
    )
    if resumed is not None:
        observed, model = resumed
    for _, event in reading:
        if ev.is_observed(event):
            observed.append(event)
        model.apply(event)
    return LoadedSession(source, observed, reading.log_lines, reading.damage), model


_State = typing.TypeVar("_State")


def resume_reading(
    reading: SessionReading, cache: bool, consumer: tuple[object, ...], state: Callable[[], _State]
) -> tuple[SessionReading, _State | None]:
    """The model checkpoint of ``consumer`` (a reader and its options) of ``reading``'s source: the reading
    to iterate (the stored one resumed, else ``reading``) armed to store ``state()`` (the consumer's model as
    it is then) at its checkpoint, and the consumer's state stored with it (None: read cold). ``cache``
    False (``--no-cache``), or CUZK_TUI_CACHE=off: ``reading`` as it is, nothing stored (model_cache)."""
    if not model_cache.enabled(cache):
        return reading, None
    source = reading.source
    key = [*consumer, os.path.realpath(source.path)]
    spelt = [str(source.path), str(source.log_path), source.bare_log, *reading.unreadable]
    checkpoints: model_cache.Checkpoints[tuple[SessionReading, _State]] = model_cache.Checkpoints(
        key, [*consumer, *spelt]
    )
    stored = checkpoints.load()
    resumed: _State | None = None
    if stored is not None:
        progress = reading.progress
        reading, resumed = stored
        reading.progress = progress
    armed = reading
    armed.checkpoint = lambda: checkpoints.store(armed.files_read, (armed, state()))
    return reading, resumed
