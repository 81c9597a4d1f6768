"""Replay of a recorded session directory or a raw daemon log, as a read-only controller.

A replay opens on the loaded whole (the full waterfall, like a viewer opening a file). Playing
starts again from the beginning and moves a time cursor forward at ``speed`` × real time,
feeding the events up to the cursor through a fresh :class:`SessionModel` — exactly the path
live events take, so every screen works unchanged.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import events as ev
from .config import ConfigError, load_config
from .controller import ControllerError, Identity, ReadOnlyControls, ReplayClock
from .local import LocalQueries
from .model import SessionModel
from .session import Progress, SessionSource, SourceError, read_session, resolve_source
from .session_layout import config_versions
from .units import format_size


def load_events(source: SessionSource, progress: Progress | None = None) -> list[tuple[float, ev.Event]]:
    """Every event of a session directory or raw log with its time, in replay order (the one reader)."""
    try:
        return read_session(source, progress=progress).events
    except SourceError as error:
        raise ControllerError(str(error)) from error
    except OSError as error:
        raise ControllerError(f"{source.path}: {error.strerror or error}") from error


def progress_bar(done: int, total: int, width: int = 30) -> str:
    """``[#######-------]  45%  54 MiB of 120 MiB``: a loading replay's progress as one line of text."""
    share = done / total if total > 0 else 1.0
    filled = round(share * width)
    return f"[{'#' * filled}{'-' * (width - filled)}] {share:4.0%}  {format_size(done)} of {format_size(total)}"


class ReplayController(ReadOnlyControls, LocalQueries):
    """A read-only controller over recorded events with a time cursor (implements ReplayClock)."""

    def __init__(self, source: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
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
        self._events: list[tuple[float, ev.Event]] = []
        self._loaded = False
        self._times: list[float] = []
        self._fed = 0  # events of self._events already applied to self.model
        self._wall_at_cursor: float | None = None

    @property
    def identity(self) -> Identity:
        return Identity("replay", f"replay of {self.source}", self._directory)

    def load(self, progress: Progress | None = None) -> None:
        """Read the source now (ControllerError when it is neither a session nor a daemon log), so
        a command line can refuse a bad file before the TUI opens, showing ``progress`` meanwhile;
        ``start`` then reuses it."""
        self._events = self._read(progress)
        self._loaded = True

    def _read(self, progress: Progress | None = None) -> list[tuple[float, ev.Event]]:
        if self._resolved is None:
            raise ControllerError(self._refusal)
        return load_events(self._resolved, progress)

    async def start(self) -> None:
        if not self._loaded:
            self._events = await asyncio.to_thread(self._read)
            self._loaded = True
        self._times = [t for t, _ in self._events]
        self._rebuild(len(self._events))
        self.cursor_t = self._times[-1] if self._times else None

    def _rebuild(self, upto: int) -> None:
        self.model = SessionModel(log_source=self._log_source)
        self._fed = 0
        self._feed(upto)

    def _feed(self, upto: int) -> bool:
        changed = False
        for _, event in self._events[self._fed : upto]:
            changed = self.model.apply(event) or changed
        self._fed = max(self._fed, upto)
        return changed

    @property
    def span(self) -> tuple[float, float] | None:
        return (self._times[0], self._times[-1]) if self._times else None

    def seek(self, t: float) -> None:
        """Show the session as it was at time ``t``."""
        upto = bisect.bisect_right(self._times, t)
        if upto < self._fed:
            self._rebuild(upto)
        else:
            self._feed(upto)
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
        changed = self._feed(bisect.bisect_right(self._times, target))
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
