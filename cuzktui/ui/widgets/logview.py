"""A virtualised view of the raw daemon log: any size, only visible lines read.

The shape follows Toolong: a ``ScrollView`` whose ``render_line(y)`` returns a ``Strip``. The
file is never loaded; a thread worker scans it for line starts (and sniffs each line's level on
the way, so the level filter needs no second pass), posting batches that the UI thread appends
to compact arrays (9 bytes a line: 1 M lines ≈ 9 MB). Rendering seeks to the few visible lines;
decoded text and rendered strips sit in LRU caches. Growth is picked up by :meth:`LogView.poll`,
which the screen calls from its ``refresh_from_model`` — so a growing log is re-indexed at the
app's poll rate (~1 Hz) and not at all while the screen is hidden.
"""

from __future__ import annotations

import mmap
import os
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import BinaryIO, ClassVar, Final

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import Worker, get_current_worker


class Level(IntEnum):
    """What the level filter toggles; TRACE folds into DEBUG, CUZK_TIMING into TIMELINE."""

    ERROR = 0
    WARN = 1
    INFO = 2
    DEBUG = 3
    TIMELINE = 4


ALL_LEVELS: Final = frozenset(Level)
SCAN_CHUNK: Final = 4 << 20
# A batch is posted at least every this many lines so a huge file appears progressively.
BATCH_LINES: Final = 200_000
# Longer lines are cut for display: a runaway line must not cost a frame.
MAX_LINE_BYTES: Final = 8192
SEARCH_WINDOW: Final = 8 << 20

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Control characters left after the colour codes go: Rich counts them zero cells wide, but a terminal acts
# on them (a newline moves the cursor down, and the rest of the row keeps what was drawn there before).
# Shown as ``cat -v`` does (^X; a C1 control as U+FFFD), each takes the cells it is counted for.
_CONTROLS: Final = {c: f"^{chr(c ^ 0x40)}" for c in (*range(0x20), 0x7F)} | {c: "\ufffd" for c in range(0x80, 0xA0)}
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z")
_LEVEL_WORDS: Final = ((b"ERROR", Level.ERROR), (b"WARN", Level.WARN), (b"INFO", Level.INFO), (b"DEBUG", Level.DEBUG))


def sniff_level(line: bytes, previous: Level) -> Level:
    """A line's level from its first bytes, without parsing it.

    Human lines start with a timestamp (possibly inside an ANSI dim code) followed by the level
    word; the stderr lines (TIMELINE, CUZK_TIMING) have fixed prefixes; the fatal report and
    panics are errors; anything else (``Caused by:``, a wrapped message) continues the line
    before it and takes its level.
    """
    if line.startswith((b"TIMELINE,", b"CUZK_TIMING")):
        return Level.TIMELINE
    head = line[:64]
    if head[:1].isdigit() or head.startswith(b"\x1b["):
        for word, level in _LEVEL_WORDS:
            if word in head:
                return level
        if b"TRACE" in head:
            return Level.DEBUG
    if line.startswith((b"Error:", b"thread '")):
        return Level.ERROR
    return previous


@dataclass(frozen=True, slots=True)
class ScanBatch:
    """Line starts and levels for ``[start, end)`` of the file."""

    start: int
    end: int
    offsets: array[int]
    levels: bytes
    # The last line had no newline yet (the daemon may be mid-write): re-scan it next time.
    open_tail: bool
    longest: int


def scan_lines(path: Path, start: int, previous: Level) -> Iterator[ScanBatch]:
    """Index the file from byte ``start`` to its current end, in batches."""
    with path.open("rb") as f:
        f.seek(start)
        pos = start
        batch_start = start
        offsets: array[int] = array("q")
        levels = bytearray()
        longest = 0
        carry = b""
        level = previous
        while chunk := f.read(SCAN_CHUNK):
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            for line in lines:
                offsets.append(pos)
                level = sniff_level(line, level)
                levels.append(level)
                pos += len(line) + 1
                longest = max(longest, len(line))
            if len(offsets) >= BATCH_LINES:
                yield ScanBatch(batch_start, pos, offsets, bytes(levels), False, longest)
                batch_start, offsets, levels, longest = pos, array("q"), bytearray(), 0
        open_tail = bool(carry)
        if open_tail:
            offsets.append(pos)
            levels.append(sniff_level(carry, level))
            longest = max(longest, len(carry))
            pos += len(carry)
        if offsets or pos != batch_start:
            yield ScanBatch(batch_start, pos, offsets, bytes(levels), open_tail, longest)


def find_line(
    path: Path,
    offsets: array[int],
    end: int,
    needle: str,
    from_line: int,
    forward: bool,
    accept: frozenset[int],
    levels: bytes,
) -> int | None:
    """The nearest line after (or before) ``from_line`` containing ``needle`` (case-insensitive)."""
    if end == 0 or not offsets:
        return None
    pattern = re.compile(re.escape(needle.encode()), re.IGNORECASE)
    worker = get_current_worker()
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None  # truncated (rotated, or a new run) since it was indexed: nothing to search
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _search_mapped(mm, pattern, offsets, min(end, len(mm)), from_line, forward, accept, levels, worker)


def _search_mapped(
    mm: mmap.mmap,
    pattern: re.Pattern[bytes],
    offsets: array[int],
    end: int,
    from_line: int,
    forward: bool,
    accept: frozenset[int],
    levels: bytes,
    worker: Worker[None],
) -> int | None:
    """``find_line`` over the mapped file (``end`` no further than the mapping)."""
    count = len(offsets)
    if forward:
        pos = offsets[from_line + 1] if from_line + 1 < count else end
        while pos < end and not worker.is_cancelled:
            match = pattern.search(mm, pos, end)
            if match is None:
                return None
            line = bisect_right(offsets, match.start()) - 1
            if levels[line] in accept:
                return line
            pos = offsets[line + 1] if line + 1 < count else end
        return None
    stop = offsets[from_line] if 0 <= from_line < count else (end if from_line >= count else 0)
    while stop > 0 and not worker.is_cancelled:
        # Search backwards window by window; the last match in a window is the nearest.
        lo = max(0, stop - SEARCH_WINDOW)
        lo = offsets[bisect_right(offsets, lo) - 1] if lo else 0
        last = None
        for match in pattern.finditer(mm, lo, stop):
            line = bisect_right(offsets, match.start()) - 1
            if levels[line] in accept:
                last = line
        if last is not None:
            return last
        stop = lo
    return None


@dataclass(frozen=True, slots=True)
class JobFilter:
    """One job's lines: those naming ``job_id`` (as a whole word), and those holding every text of one of
    ``lines`` (a line that belongs to the job but names none, e.g. its failure line's timestamp and message)."""

    job_id: str
    lines: tuple[tuple[str, ...], ...] = ()


def job_lines(buf: bytes | mmap.mmap, offsets: array[int], first: int, end: int, wanted: JobFilter) -> list[int]:
    """The numbers of the lines from ``first`` on (the file's bytes up to ``end``) that ``wanted`` keeps."""
    if first >= len(offsets):
        return []
    lo = offsets[first]
    found: set[int] = set()
    name = re.compile(rb"(?<![\w-])" + re.escape(wanted.job_id.encode()) + rb"(?![\w-])")
    found.update(bisect_right(offsets, m.start()) - 1 for m in name.finditer(buf, lo, end))
    for texts in wanted.lines:
        head, *rest = (text.encode() for text in texts)
        for m in re.finditer(re.escape(head), buf[lo:end]):
            line = bisect_right(offsets, lo + m.start()) - 1
            stop = offsets[line + 1] if line + 1 < len(offsets) else end
            if all(text in buf[offsets[line] : stop] for text in rest):
                found.add(line)
    return sorted(found)


class LogView(ScrollView, can_focus=True):
    """The daemon log, one terminal row per line, filtered by level, searchable, tail-following."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Bottom", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "logview--error",
        "logview--warn",
        "logview--info",
        "logview--debug",
        "logview--timeline",
        "logview--timestamp",
        "logview--cursor",
        "logview--match",
    }

    DEFAULT_CSS = """
    LogView {
        background: $surface;
        & > .logview--error { color: $text-error; text-style: bold; }
        & > .logview--warn { color: $text-warning; }
        & > .logview--info { color: $text-success; }
        & > .logview--debug { color: $text-muted; }
        & > .logview--timeline { color: $text-accent; }
        & > .logview--timestamp { color: $text-muted; }
        & > .logview--cursor { background: $accent 30%; }
        & > .logview--match { background: $warning 60%; color: $text; }
    }
    """

    follow: reactive[bool] = reactive(True)

    class Updated(Message):
        """Counts, filter, follow or search state changed (for a status line)."""

    class SearchDone(Message):
        def __init__(self, line: int | None, needle: str, *, error: str | None = None) -> None:
            super().__init__()
            self.line = line
            self.needle = needle
            self.error = error

    class _Indexed(Message):
        def __init__(self, batch: ScanBatch) -> None:
            super().__init__()
            self.batch = batch

    class _ScanFinished(Message):
        pass

    class _JobLines(Message):
        def __init__(self, wanted: JobFilter, lines: list[int], count: int) -> None:
            super().__init__()
            self.wanted = wanted
            self.lines = lines
            self.count = count  # the lines searched: those indexed when the search began

    def __init__(self, path: Path | None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path = path
        self.levels_shown: frozenset[Level] = ALL_LEVELS
        self.job_filter: JobFilter | None = None
        # Numbers of the lines the job filter keeps (every level), None without one.
        self._job_lines: array[int] | None = None
        self.needle = ""
        self.indexing = False
        self._offsets: array[int] = array("q")
        self._levels = bytearray()
        self._end = 0
        self._open_tail = False
        self._longest = 0
        # Row -> line number when a filter hides some levels; None shows every line.
        self._rows: array[int] | None = None
        self._cursor: int | None = None  # line number of the current search match
        self._file: BinaryIO | None = None
        self._text_cache: LRUCache[int, str] = LRUCache(1024)
        self._strip_cache: LRUCache[tuple[int, bool, str], Strip] = LRUCache(1024)

    # ---- indexing -------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._offsets)

    @property
    def row_count(self) -> int:
        return len(self._rows) if self._rows is not None else len(self._offsets)

    def on_mount(self) -> None:
        self.poll()

    def on_unmount(self) -> None:
        if self._file is not None:
            self._file.close()

    def poll(self) -> None:
        """Index whatever the file gained since the last scan (one scan at a time)."""
        if self.indexing or self.path is None:
            return
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if size < self._end:
            self._reset()  # truncated or replaced: start over
        if size == self._end:
            return
        start, previous = self._end, Level.INFO
        if self._open_tail:
            self._drop_last_line()
            start = self._end
        if self._levels:
            previous = Level(self._levels[-1])
        self.indexing = True
        self.run_worker(lambda: self._scan(start, previous), thread=True, group="logview-scan", exit_on_error=False)

    def _scan(self, start: int, previous: Level) -> None:
        assert self.path is not None
        worker = get_current_worker()
        try:
            for batch in scan_lines(self.path, start, previous):
                if worker.is_cancelled:
                    return
                self.post_message(self._Indexed(batch))
        except OSError:
            pass  # the file went away; the next poll tries again
        finally:
            self.post_message(self._ScanFinished())

    def on_log_view__indexed(self, message: _Indexed) -> None:
        batch = message.batch
        if batch.start != self._end:
            return  # a stale batch from before a reset
        first = len(self._offsets)
        self._offsets.extend(batch.offsets)
        self._levels.extend(batch.levels)
        self._end = batch.end
        self._open_tail = batch.open_tail
        self._longest = min(max(self._longest, batch.longest), MAX_LINE_BYTES)
        candidates: range | list[int] = range(first, len(self._offsets))
        if self._job_lines is not None and self.job_filter is not None:
            candidates = self._match_job(first)
            self._job_lines.extend(candidates)
        if self._rows is not None:
            shown = self.levels_shown
            self._rows.extend(i for i in candidates if self._levels[i] in shown)
        self._content_changed()

    def _match_job(self, first: int) -> list[int]:
        """The job filter's lines among those from ``first`` on (a batch just indexed: read here, it is small)."""
        assert self.path is not None and self.job_filter is not None
        try:
            with self.path.open("rb") as f:
                f.seek(self._offsets[first] if first < len(self._offsets) else self._end)
                data = f.read(self._end - f.tell())
        except OSError:
            return []
        base = self._end - len(data)
        shifted = array("q", (offset - base for offset in self._offsets[first:]))
        return [first + line for line in job_lines(data, shifted, 0, len(data), self.job_filter)]

    def on_log_view__scan_finished(self, _: _ScanFinished) -> None:
        self.indexing = False
        self.post_message(self.Updated())

    def set_path(self, path: Path | None) -> None:
        """Show another file (a daemon launched after the screen was built)."""
        self.path = path
        self._reset()
        self._content_changed()
        self.poll()

    def _drop_last_line(self) -> None:
        line = len(self._offsets) - 1
        self._end = self._offsets.pop()
        self._levels.pop()
        if self._rows is not None and self._rows and self._rows[-1] == line:
            self._rows.pop()
        if self._job_lines is not None and self._job_lines and self._job_lines[-1] == line:
            self._job_lines.pop()
        self._text_cache.discard(line)
        self._strip_cache.clear()
        self._open_tail = False

    def _reset(self) -> None:
        self._offsets = array("q")
        self._levels = bytearray()
        self._end = 0
        self._open_tail = False
        self._longest = 0
        self._cursor = None
        self._job_lines = None if self.job_filter is None else array("q")
        self._rows = None if self.levels_shown == ALL_LEVELS and self.job_filter is None else array("l")
        self._text_cache.clear()
        self._strip_cache.clear()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _content_changed(self) -> None:
        self.virtual_size = Size(self._longest, self.row_count)
        if self.follow:
            self._scroll_to_tail()
        self.refresh()
        self.post_message(self.Updated())

    # ---- filter, follow, search ---------------------------------------------------------

    def set_levels(self, shown: frozenset[Level]) -> None:
        """Show only lines of these levels (keeps the search match in view if it survives)."""
        self.levels_shown = shown
        self._filter_rows()

    def set_job(self, wanted: JobFilter | None) -> None:
        """Show only one job's lines (None: every job's); they are searched for in a thread."""
        if wanted == self.job_filter:
            return
        self.job_filter = wanted
        if wanted is None:
            self._job_lines = None
            self._filter_rows()
            return
        self._job_lines = array("q")
        self._filter_rows()
        if self.path is None or not self._offsets:
            return
        path, offsets, end = self.path, array("q", self._offsets), self._end

        def work() -> None:
            try:
                with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    lines = job_lines(mm, offsets, 0, min(end, len(mm)), wanted)
            except (OSError, ValueError):
                lines = []  # the file vanished or shrank: the next scan's batches are matched as they come
            self.post_message(self._JobLines(wanted, lines, len(offsets)))

        self.run_worker(work, thread=True, group="logview-job", exclusive=True, exit_on_error=False)

    def on_log_view__job_lines(self, message: _JobLines) -> None:
        if message.wanted != self.job_filter or self._job_lines is None:
            return
        # Lines indexed while the thread searched were matched as their batches came: keep those.
        later = [line for line in self._job_lines if line >= message.count]
        self._job_lines = array("q", [line for line in message.lines if line < len(self._offsets)] + later)
        self._filter_rows()

    def _filter_rows(self) -> None:
        levels, shown, kept = self._levels, self.levels_shown, self._job_lines
        if kept is None and shown == ALL_LEVELS:
            self._rows = None
        else:
            self._rows = array("l", (i for i in (range(len(levels)) if kept is None else kept) if levels[i] in shown))
        self._strip_cache.clear()
        self._content_changed()
        if not self.follow and self._cursor is not None:
            self._scroll_to_line(self._cursor)

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._scroll_to_tail()
        self.post_message(self.Updated())

    def _scroll_to_tail(self) -> None:
        # After the refresh: the scrollbars (and so max_scroll_y) follow the new virtual size.
        self.call_after_refresh(lambda: self.scroll_to(y=self.max_scroll_y, animate=False, force=True))

    # Scrolling back up is the operator reading: stop following until `f` or End.
    def action_scroll_up(self) -> None:
        self.follow = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.follow = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.follow = False
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.follow = False
        super()._on_mouse_scroll_up(event)

    def search(self, needle: str, forward: bool = True) -> None:
        """Find the next (or previous) line with ``needle`` from the current match or view."""
        if not needle or self.path is None or not self._offsets:
            return
        self.needle = needle
        self._strip_cache.clear()
        if self._cursor is not None:
            origin = self._cursor
        else:
            top = self._row_to_line(int(self.scroll_y))
            origin = top - 1 if forward else top
        # The worker owns copies: the UI thread drops and appends index entries while it runs.
        path, offsets, end, levels = self.path, array("q", self._offsets), self._end, bytes(self._levels)
        accept = frozenset(int(level) for level in self.levels_shown)

        def work() -> None:
            try:
                line = find_line(path, offsets, end, needle, origin, forward, accept, levels)
                if line is None:
                    # Wrap around, as less and vim do: from the other end of the file.
                    wrap_origin = -1 if forward else len(offsets)
                    line = find_line(path, offsets, end, needle, wrap_origin, forward, accept, levels)
            except (OSError, ValueError) as exc:  # the file vanished or shrank under the search
                self.post_message(self.SearchDone(None, needle, error=f"search failed: {exc}"))
                return
            self.post_message(self.SearchDone(line, needle))

        self.run_worker(work, thread=True, group="logview-search", exclusive=True, exit_on_error=False)

    def on_log_view_search_done(self, message: SearchDone) -> None:
        if message.needle != self.needle:
            message.stop()
            return
        if message.line is not None:
            self.follow = False
            self._cursor = message.line
            self._strip_cache.clear()
            self._scroll_to_line(message.line)
            self.refresh()
        self.post_message(self.Updated())

    def _row_to_line(self, row: int) -> int:
        if self._rows is None:
            return min(row, len(self._offsets) - 1)
        if not self._rows:
            return 0
        return self._rows[min(row, len(self._rows) - 1)]

    def _line_to_row(self, line: int) -> int:
        return line if self._rows is None else bisect_left(self._rows, line)

    def _scroll_to_line(self, line: int) -> None:
        row = self._line_to_row(line)
        height = self.scrollable_content_region.height
        if not self.scroll_y <= row < self.scroll_y + height:
            self.scroll_to(y=max(0, row - height // 2), animate=False, immediate=True)

    def action_scroll_end(self) -> None:
        self.follow = True

    # ---- rendering ------------------------------------------------------------------------

    def _line_text(self, line: int) -> str:
        text = self._text_cache.get(line)
        if text is None:
            if self._file is None:
                assert self.path is not None
                self._file = self.path.open("rb")
            start = self._offsets[line]
            # A line ends before its newline; only an open tail (the daemon mid-write) has none yet.
            if line + 1 < len(self._offsets):
                stop = self._offsets[line + 1] - 1
            else:
                stop = self._end if self._open_tail else self._end - 1
            self._file.seek(start)
            raw = self._file.read(min(stop - start, MAX_LINE_BYTES))
            text = _ANSI.sub("", raw.decode("utf-8", "replace")).replace("\t", "    ").rstrip("\r")
            text = text.translate(_CONTROLS)
            self._text_cache.set(line, text)
        return text

    def _styled(self, line: int, cursor: bool) -> Strip:
        key = (line, cursor, self.needle)
        strip = self._strip_cache.get(key)
        if strip is not None:
            return strip
        level = Level(self._levels[line])
        text = Text(self._line_text(line), no_wrap=True, end="")
        level_style = self.get_component_rich_style(f"logview--{level.name.lower()}")
        stamp = _TIMESTAMP.match(text.plain)
        if level in (Level.INFO, Level.DEBUG) and stamp is not None:
            # Quiet lines keep default text and colour only their level word.
            text.stylize(self.get_component_rich_style("logview--timestamp"), 0, stamp.end())
            text.stylize(level_style, stamp.end(), stamp.end() + 6)
        else:
            text.stylize(level_style)
        if self.needle:
            text.highlight_words([self.needle], self.get_component_rich_style("logview--match"), case_sensitive=False)
        segments = list(text.render(self.app.console))
        strip = Strip(segments, text.cell_len)
        if cursor:
            strip = strip.apply_style(self.get_component_rich_style("logview--cursor"))
        self._strip_cache.set(key, strip)
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if row >= self.row_count:
            return Strip.blank(width, base)
        line = self._row_to_line(row)
        try:
            strip = self._styled(line, line == self._cursor)
        except OSError:
            strip = Strip([Segment("(log unreadable)", Style(italic=True))])
        return strip.crop_extend(scroll_x, scroll_x + width, None).apply_style(base)

    def clear_caches(self) -> None:
        """Drop rendered strips (after a theme change, whose colours they baked in)."""
        self._strip_cache.clear()
        self.refresh()
