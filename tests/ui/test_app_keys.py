"""Keys a person relies on: leaving a form field, the quit dialog's hints and re-attach command."""

from __future__ import annotations

from textual.widgets import Button, Input

from cuzktui.ui.app import CuzkApp
from cuzktui.ui.modals import QuitScreen
from cuzktui.ui.screens.bench import BenchScreen
from cuzktui.ui.screens.waterfall import WaterfallScreen
from tests.ui.conftest import settle
from tests.ui.fakes import FakeController, build_model


def make_app(fake: FakeController) -> CuzkApp:
    return CuzkApp(fake, poll_interval=1000)


async def test_escape_leaves_a_field_so_number_keys_switch_screens_again() -> None:
    app = make_app(FakeController(build_model([])))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await pilot.pause()
        assert isinstance(app.screen, BenchScreen)
        field = app.screen.query(Input).first()
        field.focus()
        await pilot.pause()
        before = field.value
        await pilot.press("2")
        assert isinstance(app.screen, BenchScreen), "a digit typed into a field stays in the field"
        assert field.value != before
        await pilot.press("escape", "2")
        await pilot.pause()
        assert isinstance(app.screen, WaterfallScreen)


class _Attachable(FakeController):
    def reattach_hint(self) -> str:
        return "cuzk-tui attach unix:///s/cuzk.sock --status-url 127.0.0.1:9821 --log /s/daemon.log"


async def test_quit_dialog_shows_key_hints_and_the_whole_reattach_command() -> None:
    app = make_app(_Attachable(build_model([]), running=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        labels = [str(b.label) for b in app.screen.query(Button)]
        assert labels == ["Stop and quit [s]", "Leave running [l]", "Cancel [esc]"]
        question = str(app.screen.query_one("#quit-question").render())
        assert "--status-url 127.0.0.1:9821 --log /s/daemon.log" in question
        await pilot.press("escape")
