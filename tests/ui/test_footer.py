"""KeysFooter: the keys line is rebuilt when the keys it shows change, and only then."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets._footer import FooterKey

from cuzktui.ui.widgets.header import KeysFooter
from tests.ui.fakes import FakeController, Timed, build_model
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
        assert "Dashboard" in [key.description for key in keys]
        await pilot.press("1", "3")
        await pilot.pause()
        assert app.screen is knobs and list(knobs.query(FooterKey)) == keys
