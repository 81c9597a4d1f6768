"""The dashboard's notices: every one of them, newest first, one line each; enter opens one whole.

A line is cut to the panel's width (with an ellipsis), so the list is focusable (``n`` on the
dashboard, or a click), grows while it has the focus, scrolls through all the notices the model
keeps, and ``enter`` shows the highlighted one in full in a dialog.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ... import events as ev
from ...model import SessionModel
from ..modals import HelpScreen
from .panels import notice_full, notice_line


class NoticesList(OptionList):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "leave", "Leave the notices")]

    DEFAULT_CSS = """
    NoticesList {
        height: auto;
        border: none;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        &:focus { border: none; }
        /* The highlight underlines the line, each part keeping its colours on the list's background: Textual's
           block cursor put an error's red on its blue, 1.04:1 in the light theme. Unfocused, none is shown. */
        & > .option-list--option-highlighted { color: $foreground; background: transparent; text-style: none; }
        &:focus > .option-list--option-highlighted {
            color: $foreground; background: transparent; text-style: underline;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.notices: list[ev.Notice] = []  # as listed: newest first
        self._first = 0.0
        self._shown: tuple[int, ev.Notice | None, int] | None = None

    def show(self, model: SessionModel) -> None:
        """List the model's notices, newest first; the highlighted notice stays highlighted."""
        newest = model.notices[-1] if model.notices else None
        key = (id(model), newest, len(model.notices))
        if key == self._shown:
            return
        self._shown = key
        highlighted = self.highlighted_notice
        self.notices = list(model.notices)[::-1]
        self._first = model.first_t if model.first_t is not None else (self.notices[-1].t if self.notices else 0.0)
        self.clear_options()
        if not self.notices:
            self.add_option(Option(Content.styled("no notices", "dim"), disabled=True))
            return
        self.add_options(Option(notice_line(notice, self._first)) for notice in self.notices)
        if highlighted is not None and highlighted in self.notices:
            self.highlighted = self.notices.index(highlighted)

    @property
    def highlighted_notice(self) -> ev.Notice | None:
        index = self.highlighted
        return self.notices[index] if index is not None and 0 <= index < len(self.notices) else None

    def on_focus(self) -> None:
        if self.highlighted is None and self.notices:
            self.highlighted = 0  # the newest: enter opens it at once

    def action_leave(self) -> None:
        self.screen.set_focus(None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.notices):
            self.app.push_screen(HelpScreen(notice_full(self.notices[event.option_index], self._first)))
