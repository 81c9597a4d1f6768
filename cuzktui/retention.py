"""Session retention for a recorder that runs for weeks (``cuzk-tui record --keep 7d``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from .session import SessionInfo, list_sessions

_UNITS: Final = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class AgeError(ValueError):
    pass


def parse_age(text: str) -> float:
    """Seconds of ``7d``, ``12h``, ``30m``, ``90s`` or a bare number of seconds."""
    stripped = text.strip()
    scale = _UNITS.get(stripped[-1:], 1)
    number = stripped[:-1] if stripped[-1:] in _UNITS else stripped
    try:
        value = float(number)
    except ValueError:
        raise AgeError(f"{text!r} is not an age: use a number followed by d, h, m or s (e.g. 7d)") from None
    if not value > 0:
        raise AgeError(f"{text!r}: the age must be positive")
    return value * scale


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
