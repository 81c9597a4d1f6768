"""The line every screen shows at the top: the status first (state, replay position, speed), then the title.

Textual's Header centres "title — subtitle", so on a narrow terminal the status (the part that changes)
was the part cut off. Here the status comes first and is never cut; the title (who we talk to, a path
that can be long) takes what room is left and ends in an ellipsis.

NARROW_WIDTH and follow_width: the width below which a screen takes its narrow layout. KeysFooter: the keys
line every screen shows at the bottom.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

NARROW_WIDTH = 110
"""Below this many columns (an 80x24 terminal) the form screens stack what they place side by side."""


def follow_width(screen: Screen[None], width: int) -> bool:
    """Give ``screen`` the ``-narrow`` class below NARROW_WIDTH (its CSS lays it out for that); True when narrow.

    Set from on_resize rather than Textual's HORIZONTAL_BREAKPOINTS, whose ClassVar-in-a-union annotation
    mypy --strict rejects when a screen overrides it.
    """
    narrow = width < NARROW_WIDTH
    screen.set_class(narrow, "-narrow")
    return narrow


class StatusHeader(Static):
    """The app's ``sub_title`` (the status line, :func:`cuzktui.figures.status_line`) and ``title``."""

    DEFAULT_CSS = """
    StatusHeader {
        dock: top;
        width: 100%;
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $foreground;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def on_mount(self) -> None:
        self.watch(self.app, "title", self._redraw)
        self.watch(self.app, "sub_title", self._redraw)

    def _redraw(self, _value: str) -> None:
        status = self.app.sub_title
        alarm = status.startswith(("DEAD", "NOT ANSWERING", "NOT STARTED"))
        self.update(
            Content.assemble(
                (f" {status} ", "bold reverse $error" if alarm else "bold"),
                ("  ", ""),
                (self.app.title, "$text-muted"),
            )
        )


def screen_header(app: App[object]) -> StatusHeader:
    return StatusHeader(id="status-header")


class KeysFooter(Footer):
    """Textual's Footer, rebuilt only when the keys it would show changed.

    Footer recomposes on every bindings refresh (each screen switch, each focus change): a dozen new
    FooterKey widgets whose styles are computed anew, ~0.25 s of CPU a screen switch here (issue 11),
    for the same keys as before.
    """

    _keys: tuple[object, ...] | None = None

    def bindings_changed(self, screen: Screen[Any]) -> None:
        keys = tuple((key, a.binding, a.enabled, a.tooltip) for key, a in screen.active_bindings.items())
        if screen is self.screen and keys == self._keys:
            return
        if screen is self.screen and self.is_attached and screen.app.app_focus:
            self._keys = keys  # what the recompose Footer asks for now shows
        super().bindings_changed(screen)
