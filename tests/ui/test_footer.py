"""KeysFooter: the keys line is rebuilt when the keys it shows change, and only then; quitting and help (or how
to leave a field) are in view on every screen at every width."""

from __future__ import annotations

from typing import ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input
from textual.widgets._footer import FooterKey

from cuzktui.ui.app import SCREENS, CuzkApp
from cuzktui.ui.widgets.header import KeysFooter
from tests.ui.fakes import FakeController, FixedBoxController, Timed, build_model
from tests.ui.test_app import make_app


class _Toggling(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "go", "Go"), Binding("y", "stay", "Stay")]
    allowed = True

    def compose(self) -> ComposeResult:
        yield KeysFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.allowed if action == "go" else True

    def action_stay(self) -> None:
        self.refresh_bindings()  # asks the footer again with the same keys


class _OneScreen(App[None]):
    def on_mount(self) -> None:
        self.push_screen(_Toggling())


def _shown(screen: Screen[None]) -> list[str]:
    return [key.description for key in screen.query(FooterKey)]


async def test_the_footer_is_rebuilt_when_its_keys_change_and_kept_when_they_do_not() -> None:
    app = _OneScreen()
    async with app.run_test() as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, _Toggling) and _shown(screen)[:2] == ["Go", "Stay"]
        before = list(screen.query(FooterKey))
        await pilot.press("y")
        await pilot.pause()
        assert list(screen.query(FooterKey)) == before  # the same widgets: nothing was rebuilt
        screen.allowed = False
        screen.refresh_bindings()
        await pilot.pause()
        assert _shown(screen)[:1] == ["Stay"]


async def test_switching_back_to_a_screen_keeps_its_footer(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        knobs = app.screen
        keys = list(knobs.query(FooterKey))
        assert "show('dashboard')" in [key.action for key in keys]
        await pilot.press("1", "3")
        await pilot.pause()
        assert app.screen is knobs and list(knobs.query(FooterKey)) == keys


def _keys_line(app: App[None]) -> str:
    return app.screen._compositor.render_strips()[-1].text


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_quit_and_help_are_in_view_on_every_screen(events: list[Timed], size: tuple[int, int]) -> None:
    """At 80 columns the keys line stopped at "5 Memcheck" (at 120 it ended "? He▏"): quitting and help were
    out of view. They keep the right end, whatever the screen's own keys need."""
    app = CuzkApp(FixedBoxController(build_model(events)), poll_interval=1000)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        for _mode, key, label, _screen in SCREENS:
            await pilot.press(key)
            await pilot.pause()
            line = _keys_line(app)
            assert line.rstrip().endswith(("q Quit ? Help ▏^p palette", "q Quit ? Help")), (label, line)
            # The keys left of the right end are whole: none runs under it (a lone "1", "t Ti").
            right_end = app.screen.query_one("#pinned-keys").region.x
            for footer_key in app.screen.query_one(KeysFooter).query(FooterKey):
                if footer_key.parent is not None and footer_key.parent.id != "pinned-keys":
                    assert footer_key.region.right < right_end, (label, footer_key.key, line)
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"


async def test_a_field_with_the_focus_says_that_escape_leaves_it(events: list[Timed]) -> None:
    """Number keys, q and ? type into a field: while one has the focus the keys line says how to leave it,
    where quitting and help were, and Escape does leave it."""
    app = CuzkApp(FixedBoxController(build_model(events)), poll_interval=1000)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("4")
        await pilot.pause()
        app.screen.query_one("#bench-count", Input).focus()
        await pilot.pause()
        line = _keys_line(app)
        assert "esc Leave field" in line and "q Quit" not in line, line
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is None
        assert "q Quit ? Help" in _keys_line(app) and "Leave field" not in _keys_line(app)
