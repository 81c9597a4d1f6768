"""Replay of a recorded session directory or a raw daemon log, as a read-only controller.

A replay opens on the loaded whole (the full waterfall, like a viewer opening a file). Playing
starts again from the beginning and moves a time cursor forward at ``speed`` × real time,
feeding the events up to the cursor through a fresh :class:`SessionModel` — exactly the path
live events take, so every screen works unchanged.

No event is kept: the load models the source as it reads it (:class:`session.SessionReading`), and
playing reads it again, lazily, up to the cursor. A week of log costs its model in memory, not a
million event objects.

Seeking does not read from the start: while loading, every 1/KEYFRAMES of the log's bytes the model and
the state of the reading are kept as a :class:`Keyframe` (pickled and compressed, so a few MB in all),
and a seek restores the latest one at or before its time and reads on from there: at most one stretch
of log, whatever the time.
"""

from __future__ import annotations

import asyncio
import bisect
import pickle
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from . import collector
from . import events as ev
from .config import ConfigError, load_config
from .controller import ControllerError, Identity, ReadOnlyControls, ReplayClock
from .local import LocalQueries
from .model import SessionModel
from .session import Progress, SessionReading, SessionSource, SourceError, resolve_source, resume_reading
from .session_layout import config_versions
from .units import format_size

# A load keeps a keyframe each 1/KEYFRAMES of the log, none closer than KEYFRAME_MIN_BYTES (reading that
# much costs a few tenths of a second). Pickling the model costs about 2 % of reading what it models, so
# the keyframes of one load cost about KEYFRAMES / 2 × 2 % of it (measured: 8, 10 %; 16, 20 %): a seek
# reads at most 1/8 of the log. Loads resumed from a checkpoint add keyframes for what was appended;
# beyond 2 × KEYFRAMES the one whose going leaves the shortest stretch goes (never the first or the latest).
KEYFRAMES: Final = 8
KEYFRAME_MIN_BYTES: Final = 4 << 20


@dataclass(frozen=True, slots=True)
class Keyframe:
    """The model and the reading at one point of a load: ``t``, the time of the last event applied."""

    t: float
    state: bytes  # zlib (level 1: a sixth of the pickle's size for an eighth of its time) of the pickle

    @classmethod
    def take(cls, t: float, reading: SessionReading, model: SessionModel) -> Keyframe:
        with collector.paused():
            return cls(t, zlib.compress(pickle.dumps((reading, model), pickle.HIGHEST_PROTOCOL), 1))

    def restore(self) -> tuple[SessionReading, SessionModel]:
        """A reading that goes on from this point (its events after it) and the model of the events before."""
        with collector.paused():
            reading, model = pickle.loads(zlib.decompress(self.state))
        return reading, model


def _keep(keyframes: list[Keyframe], keyframe: Keyframe) -> None:
    """Add ``keyframe`` (the latest); past 2 × KEYFRAMES, drop the one between the two closest neighbours,
    so that a log regrown over many replays stays covered evenly (halving from the latest left the first
    nine tenths of such a log to one keyframe)."""
    keyframes.append(keyframe)
    if len(keyframes) > 2 * KEYFRAMES:
        del keyframes[min(range(1, len(keyframes) - 1), key=lambda i: keyframes[i + 1].t - keyframes[i - 1].t)]


# A load's result: the model, the span of the events' times, the keyframes.
_Loaded = tuple[SessionModel, tuple[float, float] | None, list[Keyframe]]


def progress_bar(done: int, total: int, width: int = 30) -> str:
    """``[#######-------]  45%  54 MiB of 120 MiB``: a loading replay's progress as one line of text."""
    share = done / total if total > 0 else 1.0
    filled = round(share * width)
    return f"[{'#' * filled}{'-' * (width - filled)}] {share:4.0%}  {format_size(done)} of {format_size(total)}"


class ReplayController(ReadOnlyControls, LocalQueries):
    """A read-only controller over recorded events with a time cursor (implements ReplayClock)."""

    def __init__(self, source: Path, clock: Callable[[], float] = time.monotonic, *, cache: bool = True) -> None:
        self.source = source
        self._cache = cache  # False: --no-cache (model_cache)
        # Decided once here; a source that is neither a session nor a log is refused by load/start.
        resolved: SessionSource | None = None
        self._refusal = ""
        try:
            resolved = resolve_source(source)
        except SourceError as error:
            self._refusal = str(error)
        self._resolved = resolved
        self._directory = resolved.directory if resolved is not None else None
        self._log_source = str(resolved.log_path) if resolved is not None and resolved.bare_log else None
        self.model = SessionModel(log_source=self._log_source)
        self.cursor_t: float | None = None
        self.speed = 10.0
        self.playing = False
        self._clock = clock
        self._loaded = False
        self._span: tuple[float, float] | None = None
        self._keyframes: list[Keyframe] = []  # by time
        # The pass that feeds self.model: the events still to read, the one read past the cursor, and
        # the time of the last one applied (None: none yet; a seek before it restores a keyframe).
        self._stream: Iterator[tuple[float, ev.Event]] = iter(())
        self._pending: tuple[float, ev.Event] | None = None
        self._fed_t: float | None = None
        self._wall_at_cursor: float | None = None

    @property
    def identity(self) -> Identity:
        return Identity("replay", f"replay of {self.source}", self._directory)

    def load(self, progress: Progress | None = None) -> None:
        """Read and model the source now (ControllerError when it is neither a session nor a daemon log),
        so a command line can refuse a bad file before the TUI opens, showing ``progress`` meanwhile;
        ``start`` then reuses it."""
        self._take(self._read_whole(progress))

    def _reading(self, progress: Progress | None = None) -> SessionReading:
        if self._resolved is None:
            raise ControllerError(self._refusal)
        # The waterfall's details pane parses a partition's C++ timing lines when it is opened.
        return SessionReading(self._resolved, progress=progress, lazy=True)

    def _read_whole(self, progress: Progress | None = None) -> _Loaded:
        """The model of every event of the source, the span of their times and the keyframes taken on the
        way (the one reader), resumed from a model checkpoint of an earlier replay of it when one holds
        (session.resume_reading): the keyframes go into the checkpoint, so a second replay seeks fast too."""
        model = SessionModel(log_source=self._log_source)
        first: float | None = None
        t = 0.0
        keyframes: list[Keyframe] = []
        reading, resumed = resume_reading(
            self._reading(progress), self._cache, ("replay",), lambda: (model, first, t, keyframes)
        )
        if resumed is not None:
            model, first, t, keyframes = resumed
        reading.keyframe_bytes = max(KEYFRAME_MIN_BYTES, reading.log_size // KEYFRAMES)
        # A keyframe before the first event would equal starting afresh.
        reading.keyframe = lambda: None if first is None else _keep(keyframes, Keyframe.take(t, reading, model))
        try:
            for t, event in reading:
                if first is None:
                    first = t
                model.apply(event)
        except SourceError as error:
            raise ControllerError(str(error)) from error
        except OSError as error:
            raise ControllerError(f"{self.source}: {error.strerror or error}") from error
        return model, None if first is None else (first, t), keyframes

    def _take(self, loaded: _Loaded) -> None:
        self.model, self._span, self._keyframes = loaded
        self._stream, self._pending = iter(()), None
        self._fed_t = self._span[1] if self._span is not None else None
        self._loaded = True

    async def start(self) -> None:
        if not self._loaded:
            self._take(await asyncio.to_thread(self._read_whole))
        self.cursor_t = self._span[1] if self._span is not None else None

    def _restore(self, keyframe: Keyframe | None) -> None:
        """The model and the pass as they were at ``keyframe`` (None: a fresh model and a pass from the start)."""
        self.model = SessionModel(log_source=self._log_source)
        self._stream, self._pending, self._fed_t = iter(()), None, None
        # The old model's jobs and partitions refer to one another, so only the cyclic collector frees
        # them, and a keyframe is unpickled with it paused: uncollected, three seeks on a 1 M-line log
        # held three models (a peak of 191 MB instead of 125). In the app the old model is frozen out
        # of the collector's own walks (collector.QuietCollections).
        collector.collect_everything()
        if keyframe is None:
            self._stream = iter(self._reading())
            return
        reading, self.model = keyframe.restore()
        self._stream, self._fed_t = iter(reading), keyframe.t

    def _feed_until(self, t: float) -> bool:
        """Apply the events placed at or before ``t`` (whether the model changed)."""
        changed = False
        while True:
            item = self._pending if self._pending is not None else next(self._stream, None)
            if item is None:
                return changed
            if item[0] > t:
                self._pending = item
                return changed
            self._pending = None
            changed = self.model.apply(item[1]) or changed
            self._fed_t = item[0]

    @property
    def span(self) -> tuple[float, float] | None:
        return self._span

    def seek(self, t: float) -> None:
        """Show the session as it was at time ``t``: from the latest keyframe at or before it when ``t`` is
        before what was applied, or when that keyframe is after it (reading on would take longer)."""
        fed = self._fed_t
        at = bisect.bisect_right(self._keyframes, t, key=lambda keyframe: keyframe.t)
        keyframe = self._keyframes[at - 1] if at else None
        back = fed is not None and t < fed
        if back or (keyframe is not None and (fed is None or keyframe.t > fed)):
            self._restore(keyframe)
        self._feed_until(t)
        self.cursor_t = t
        self._wall_at_cursor = self._clock()

    def play(self, speed: float) -> None:
        """Play from the start (or resume from the cursor when already inside a playback)."""
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        span = self.span
        if span is None:
            return
        if self.cursor_t is None or self.cursor_t >= span[1]:
            self.seek(span[0])
        self.playing = True
        self._wall_at_cursor = self._clock()

    def pause(self) -> None:
        self.playing = False

    async def poll(self) -> bool:
        span = self.span
        if not self.playing or span is None or self.cursor_t is None or self._wall_at_cursor is None:
            return False
        now = self._clock()
        target = min(span[1], self.cursor_t + (now - self._wall_at_cursor) * self.speed)
        self.cursor_t = target
        self._wall_at_cursor = now
        changed = self._feed_until(target)
        if target >= span[1]:
            self.playing = False
        return changed

    def config_path(self) -> Path | None:
        if self._directory is None:
            return None
        versions = config_versions(self._directory)
        return versions[-1] if versions else None

    def config_values(self) -> dict[str, Any]:
        path = self.config_path()
        if path is None:
            return {}
        try:
            return dict(load_config(path).effective())
        except ConfigError:
            return {}

    @property
    def clock(self) -> ReplayClock | None:
        return self
