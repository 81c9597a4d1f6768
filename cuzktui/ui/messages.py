"""Messages the screens post and the app routes (one place, so the app imports no screen for them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message import Message


class ApplyRecommended(Message):
    """Pre-fill the Knobs form with these values (``"section.key"`` → value); the app routes it."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__()
        self.values = values


class OpenReplay(Message):
    """Replay this session directory; the app switches to a replay controller."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path


class KnobEdits(Message):
    """The Knobs form's edits not applied yet (``"section.key"`` names), so quitting can say so."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
