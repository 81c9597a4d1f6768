"""Bench screen (stub: the full screen lands shortly)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Static

from ...controller import Controller


class BenchScreen(Screen[None]):
    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller

    def compose(self) -> ComposeResult:
        yield Static("Bench")
        yield Footer()

    def refresh_from_model(self) -> None:
        """Called by the app after each poll while this screen is visible."""
