"""The names inside a session directory, and its config versions: one spelling for every reader.

Kept apart from :mod:`cuzktui.session` (which reads and writes the files) so that the UI can name
a session's files without importing the recorder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

DAEMON_LOG: Final = "daemon.log"
EVENTS_FILE: Final = "events.jsonl"
META_FILE: Final = "meta.json"
CONFIG_DIR: Final = "config"
JOURNAL_CURSOR: Final = "journal.cursor"


def config_versions(directory: Path) -> list[Path]:
    """The config versions of a session (``config/vNNN.toml``), oldest first."""
    return sorted((directory / CONFIG_DIR).glob("v[0-9][0-9][0-9]*.toml"))
