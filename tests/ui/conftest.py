"""Fixtures for the app's tests: the fixed scenario, and an environment snapshots can trust."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from tests.ui.fakes import Timed, scenario


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
