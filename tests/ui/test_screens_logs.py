"""Logs screen: keys for level filter, search and follow, on a generated daemon log."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from cuzktui.ui.screens.logs import LogsScreen
from cuzktui.ui.widgets.logview import Level, LogView
from tests.ui.fakes import FakeController, ScreenApp
from tests.ui.test_screens_logview import human, write_log


def make_app(session_dir: Path) -> ScreenApp:
    return ScreenApp(lambda: LogsScreen(FakeController(session_dir=session_dir)), "logs")


async def test_keys_filter_search_and_follow(tmp_path: Path) -> None:
    write_log(tmp_path / "daemon.log", 300)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        view = app.screen.query_one(LogView)
        assert view.line_count == 300 and view.follow
        await pilot.press("i", "d", "t")  # hide INFO, DEBUG, TIMELINE: errors and warnings remain
        assert view.levels_shown == {Level.ERROR, Level.WARN}
        status = str(app.screen.query_one("#logs-status", Static).render())
        assert "of 300 lines" in status
        assert "levels shown: ERROR WARN hidden: INFO DEBUG TIMELINE" in status
        await pilot.press("slash", *"message 29", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not view.follow  # a match takes the view away from the tail
        first = view._cursor
        assert first is not None and view._line_text(first).split()[1] in ("WARN", "ERROR")
        await pilot.press("n")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view._cursor is not None and view._cursor > first
        await pilot.press("N")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view._cursor == first
        await pilot.press("f")
        assert view.follow


async def test_refresh_picks_up_growth(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    write_log(log, 10)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        with log.open("a") as f:
            f.write(human(10, "ERROR", "pipeline stalled"))
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        screen.refresh_from_model()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.view.line_count == 11


def test_snapshot_logs(snap_compare: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(tmp_path / "daemon.log", 120)
    monkeypatch.chdir(tmp_path)  # the status line shows the path: keep it free of the tmp path

    async def search(pilot: object) -> None:
        app = pilot.app  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]
        await pilot.press("d", "slash", *"message 4", "enter")  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(make_app(Path(".")), terminal_size=(120, 40), run_before=search)  # type: ignore[operator]


def test_an_attached_sessions_logs_are_its_copy_of_the_log_it_followed(tmp_path: Path) -> None:
    from cuzktui import events as ev
    from cuzktui.model import SessionModel
    from cuzktui.ui.screens.logs import log_path_of

    model = SessionModel()  # attached with --log: the launch names the file the daemon writes
    model.apply(ev.DaemonLaunched(1.0, "attached", 7, (), None, "unix:///s", "/var/log/cuzk.log"))
    controller = FakeController(model, mode="attached", session_dir=tmp_path)
    assert log_path_of(controller) == Path("/var/log/cuzk.log"), "a session recorded before copies were made"
    write_log(tmp_path / "daemon.log", 3)
    # What the session keeps, in live and in replay alike (the file itself rotates, or is gone).
    assert log_path_of(controller) == tmp_path / "daemon.log"
