"""The line every screen shows at the top: the status first (state, replay position, speed), then the title.

Textual's Header centres "title — subtitle", so on a narrow terminal the status (the part that changes)
was the part cut off. Here the status comes first and is never cut; the title (who we talk to, a path
that can be long) takes what room is left and ends in an ellipsis.

NARROW_WIDTH and follow_width: the width below which a screen takes its narrow layout. KeysFooter: the keys
line every screen shows at the bottom.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalGroup
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Select, Static
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

NARROW_WIDTH = 110
"""Below this many columns (an 80x24 terminal) the form screens stack what they place side by side."""


def follow_width(screen: Screen[None], width: int, compact: str = "") -> bool:
    """Give ``screen`` the ``-narrow`` class below NARROW_WIDTH (its CSS lays it out for that); True when narrow.
    The fields ``compact`` selects lose their borders while narrow, so a form leaves the screen its rows.

    Set from on_resize rather than Textual's HORIZONTAL_BREAKPOINTS, whose ClassVar-in-a-union annotation
    mypy --strict rejects when a screen overrides it.
    """
    narrow = width < NARROW_WIDTH
    screen.set_class(narrow, "-narrow")
    if compact:
        for field in screen.query(compact):
            if isinstance(field, Input | Select):
                field.compact = narrow
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


SCREEN_KEYS = Binding.Group("Screens", compact=True)
"""The group of the keys that switch screens: named one by one where the keys line has room, else together."""

PINNED_KEYS: Final = frozenset({"quit", "help", "leave-field"})
"""Ids of the bindings the keys line keeps in view at its right end at every width (the others are cut)."""

_Key = tuple[Binding, bool, str]  # a binding shown, whether it is enabled, its tooltip


def _key_cells(key: str, description: str, compact: bool) -> int:
    """A FooterKey's cells: Footer's CSS pads the key and the description by one cell each, and a compact
    footer keeps one cell between keys instead."""
    return cell_len(key) + cell_len(description) + (2 if compact else 3)


def _line_items(keys: list[tuple[str, str, bool, bool]], compact: bool, grouped: bool) -> list[int]:
    """The cells of each item left of the right end, in order: a key, or (``grouped``) the screen keys as one
    item where the first of them is: close together, then the group's name (KeyGroup's and FooterLabel's
    margins)."""
    items: list[int] = []
    group_at: int | None = None
    for key, description, pinned, screen in keys:
        if pinned:
            continue
        if grouped and screen:
            if group_at is None:
                group_at = len(items)
                items.append(cell_len(SCREEN_KEYS.description) + (2 if compact else 3))
            items[group_at] += cell_len(key)
        else:
            items.append(_key_cells(key, description, compact))
    return items


# From the roomiest to the tightest, (compact, grouped, palette): the first that fits whole is taken.
_LAYOUTS: Final = ((False, False, True), (True, False, True), (True, True, True), (True, True, False))


def keys_layout(keys: list[tuple[str, str, bool, bool]], width: int) -> tuple[bool, bool, bool, int]:
    """How the keys line shows ``keys`` ((key, description, kept at the right end, a screen key), in order) in
    ``width`` cells: (compact, screen keys grouped, the palette's key shown, how many items left of the right
    end are shown). The roomiest layout that fits whole; else the tightest, with the items that fit whole."""
    for compact, grouped, palette in _LAYOUTS:
        # The right end: the keys kept there after a border, the palette's key (with its border and padding).
        kept = [_key_cells(key, description, compact) for key, description, pinned, _ in keys if pinned]
        right = sum(kept) + (1 if kept else 0)
        if palette:
            right += _key_cells("^p", "palette", compact) + (1 if compact else 2)
        items = _line_items(keys, compact, grouped)
        if sum(items) + right <= width:
            return compact, grouped, palette, len(items)
    # Nothing fits whole: a key cut in the middle ("t Ti", a lone "1") says nothing; the keys left out are
    # still bound, and listed by help and the palette.
    shown = sum(1 for total in itertools.accumulate(items) if total <= width - right)
    return compact, grouped, palette, shown


class KeysFooter(Footer):
    """Textual's Footer, laid out for the terminal's width and rebuilt only when what it shows changed.

    Quitting and help (or, in a field, how to leave it: ``PINNED_KEYS``) stay in view at the right end at
    every width; the screen keys (``SCREEN_KEYS``) are named where there is room, else shown together, and a
    narrow terminal gets the compact style. On an 80-column terminal the line used to stop at "5 Memcheck".

    Footer recomposes on every bindings refresh (each screen switch, each focus change): a dozen new
    FooterKey widgets whose styles are computed anew, ~0.25 s of CPU a screen switch here (issue 11),
    for the same keys as before.
    """

    DEFAULT_CSS = """
    KeysFooter #pinned-keys { dock: right; width: auto; height: 1; border-left: vkey $foreground 20%; }
    """

    _keys: tuple[object, ...] | None = None

    def _shown(self, screen: Screen[Any]) -> list[_Key]:
        """The keys to show, the first binding of each action, in the screen's order."""
        keys: dict[str, _Key] = {}
        for _node, binding, enabled, tooltip in screen.active_bindings.values():
            if binding.show and binding.action not in keys:
                keys[binding.action] = (binding, enabled, tooltip)
        return list(keys.values())

    def _layout(self, keys: list[_Key]) -> tuple[bool, bool, bool, int]:
        cells = [
            (self.app.get_key_display(b), b.description, b.id in PINNED_KEYS, b.group is SCREEN_KEYS)
            for b, _, _ in keys
        ]
        compact, grouped, palette, shown = keys_layout(cells, self.app.size.width)
        return compact, grouped, palette and self.show_command_palette, shown

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        keys = self._shown(self.screen)
        compact, grouped, palette, shown = self._layout(keys)
        self.set_reactive(Footer.compact, compact)
        self.set_class(compact, "-compact")
        pinned = [key for key in keys if key[0].id in PINNED_KEYS]
        group = [key for key in keys if grouped and key[0].group is SCREEN_KEYS]
        items = [key for key in keys if key not in pinned and (key not in group or key is group[0])]
        for key in items[:shown]:
            if key in group:
                # The screen keys side by side (each still a key to click), then what they are, once.
                with KeyGroup(classes="-compact"):
                    for binding, enabled, tooltip in group:
                        yield self._footer_key(binding, enabled, tooltip or binding.description, "", "-grouped")
                yield FooterLabel(SCREEN_KEYS.description)
            else:
                binding, enabled, tooltip = key
                yield self._footer_key(binding, enabled, tooltip, binding.description, "")
        right_end = [
            self._footer_key(binding, enabled, tooltip, binding.description, "") for binding, enabled, tooltip in pinned
        ]
        # Left out where nothing else fits (ctrl+p still opens it; help lists it).
        palette_key = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if palette and self.app.ENABLE_COMMAND_PALETTE and palette_key is not None:
            _node, binding, enabled, _tooltip = palette_key
            right_end.append(
                self._footer_key(binding, enabled, binding.tooltip, binding.description, "-command-palette")
            )
        if pinned:
            # One container at the right end (docked widgets overlap each other, they do not line up).
            with HorizontalGroup(id="pinned-keys"):
                yield from right_end
        else:
            yield from right_end  # the palette's key alone, docked right by Footer's CSS

    def _footer_key(self, binding: Binding, enabled: bool, tooltip: str, description: str, classes: str) -> FooterKey:
        key = FooterKey(
            binding.key,
            self.app.get_key_display(binding),
            description,
            binding.action,
            disabled=not enabled,
            tooltip=tooltip,
            classes=classes,
        )
        return key.data_bind(compact=Footer.compact)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        keys = (
            self._layout(self._shown(screen)),
            *((key, a.binding, a.enabled, a.tooltip) for key, a in screen.active_bindings.items()),
        )
        if screen is self.screen and keys == self._keys:
            return
        if screen is self.screen and self.is_attached and screen.app.app_focus:
            self._keys = keys  # what the recompose Footer asks for now shows
        super().bindings_changed(screen)

    def on_resize(self) -> None:
        # The layout follows the width: a terminal resized from 120 to 80 columns groups the screen keys.
        self.bindings_changed(self.screen)
