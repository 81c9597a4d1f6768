"""Session retention for a recorder that runs for weeks (``cuzk-tui record --keep 7d``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from .session import SessionInfo, list_sessions
from .units import UnitError, parse_duration


class AgeError(ValueError):
    pass


def parse_age(text: str) -> float:
    """Seconds of ``7d``, ``12h``, ``30m``, ``90s`` or a bare number of seconds (units.parse_duration)."""
    try:
        value = parse_duration(text, hours=True)
    except UnitError as error:
        raise AgeError(str(error)) from None
    if not value > 0:
        raise AgeError(f"{text!r}: the age must be positive")
    return float(value)


def expired(infos: Iterable[SessionInfo], keep_s: float, now: float, spare: Iterable[Path] = ()) -> list[SessionInfo]:
    """The sessions created more than ``keep_s`` before ``now``, except those in ``spare``."""
    kept = {path.resolve() for path in spare}
    return [info for info in infos if now - info.created > keep_s and info.path.resolve() not in kept]


def prune_sessions(root: Path | None, keep_s: float, now: float, spare: Iterable[Path] = ()) -> list[Path]:
    """Delete the expired sessions under ``root`` (default: the sessions directory); the paths removed."""
    removed = []
    for info in expired(list_sessions(root), keep_s, now, spare):
        shutil.rmtree(info.path, ignore_errors=True)
        removed.append(info.path)
    return removed
