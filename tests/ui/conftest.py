"""Fixtures for the app's tests: the fixed scenario, an environment snapshots can trust, and a pilot
that waits until the app has handled everything a key or a change set off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from textual.message_pump import MessagePump
from textual.pilot import Pilot
from textual.widgets import DataTable

from tests.ui.fakes import Timed, scenario

_wait_for_screen = Pilot._wait_for_screen


def _pumps(app: Any) -> Iterator[MessagePump]:
    yield app
    for screen in app.screen_stack:
        yield from screen.walk_children(with_self=True)


async def _wait_until_settled(self: Pilot[Any], timeout: float = 30.0) -> bool:
    """Textual's ``Pilot._wait_for_screen``, repeated until no message is left anywhere.

    Textual's waits for the messages queued when it was called; what their handlers post in turn (an
    Input's Changed bubbling to its field and on to the screen, a screen pushed) is left to
    ``wait_for_idle``, which guesses from CPU time that the app is idle: on a starved core, where the
    process is not scheduled at all, it guesses so at once, and a test asserting what those messages
    do failed now and then with both cores busy (17 such tests in tests/ui, found by making the
    guess return at once). Every ``press``, ``click`` and ``pause`` goes through here.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if not await _wait_for_screen(self, max(deadline - loop.time(), 0.001)):
            return False
        if all(pump.message_queue_size == 0 for pump in _pumps(self.app)):
            return True


Pilot._wait_for_screen = _wait_until_settled  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _colour_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots and palette tests assume colour; a developer's NO_COLOR must not change them."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_COLOR_SYSTEM", raising=False)
    # Rich reads the terminal's colours from TERM/COLORTERM when the app starts, and the palette
    # follows them (16 colours get the ANSI choices): pin a truecolor terminal, not the developer's.
    monkeypatch.setenv("COLORTERM", "truecolor")


@pytest.fixture(scope="session")
def events() -> list[Timed]:
    return scenario()


async def settle(pilot: Pilot[None]) -> None:
    """Wait until the controller's start and first poll finished and the screen drew."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


SettleFn = Callable[[Pilot[None]], Awaitable[None]]


async def paused_until(pilot: Pilot[None], condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Let the app run until ``condition`` holds: what follows a resize (a table's refit) takes a few
    rounds of messages, more on a loaded machine than one pause gives."""
    deadline = time.monotonic() + timeout
    await pilot.pause()
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


async def last_column_shown(pilot: Pilot[None], table: DataTable[Any]) -> str:
    """The text of ``table``'s last column as the screen shows it once the table is scrolled to its right
    end: the column's lines joined, runs of spaces as one. Fails when the column is not wholly in view."""
    table.scroll_to(x=table.max_scroll_x, animate=False, immediate=True)
    await pilot.pause()
    lines = [strip.text for strip in pilot.app.screen._compositor.render_strips()][table.region.y : table.region.bottom]
    label = str(table.ordered_columns[-1].label)
    start = lines[0].rindex(f" {label}") + 1
    width = table.ordered_columns[-1].get_render_width(table) - 2 * table.cell_padding
    assert start + width <= table.scrollable_content_region.right, "the last column is in view"
    return " ".join(" ".join(line[start : start + width] for line in lines[1:]).split())
