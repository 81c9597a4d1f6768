"""The header every screen shows: the app title (who we talk to) and the status line (state, replay)."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Header


def screen_header(app: App[object]) -> Header:
    # Textual's default icon is a glyph a plain-ASCII terminal may not have.
    return Header(icon="*" if getattr(app, "ascii_only", False) else None)
