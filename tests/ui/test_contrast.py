"""Every text the app draws in a theme it ships reads at 4.5:1 or more against what it is drawn on (WCAG AA).

The contrast is computed from the colours of the drawn screen, which come from the theme: every screen, a
field with the focus, the dialogs, the panels that open. The light theme drew DEPRECATED in the terminal's
yellow on its near-white fields (1.01:1), placeholders such as "(unset)" at 2.68:1 and "waiting" in an amber
at 3.14:1; dim text was left to each terminal's faint attribute. Textual's ANSI themes (16 colours) are the
terminal's own colours, and a 16-colour terminal shows our themes in its own palette: no contrast can be
computed from the theme for those.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import pytest
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import Input

from cuzktui import events as ev
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.theme import bundled_themes
from cuzktui.ui.widgets.notices import NoticesList
from tests.ui.fakes import T0, FixedBoxController, Timed, build_model
from tests.ui.test_screens_tune import search_snapshot

MINIMUM = 4.5


def luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG 2's relative luminance of an sRGB colour."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = rgb
    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_is_wcags() -> None:
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast((255, 255, 0), (246, 248, 250)) == pytest.approx(1.01, abs=0.01)  # the yellow
    assert contrast((0xBF, 0x87, 0x00), (255, 255, 255)) == pytest.approx(3.14, abs=0.01)  # its amber


def too_faint(pilot: Pilot[None], where: str) -> Iterator[str]:
    """Each run of text on the screen below MINIMUM (or left dim for the terminal to decide), said how. Over a
    dialog only the dialog is read: the screen behind it is faded on purpose."""
    screen = pilot.app.screen
    read = [child.region for child in screen.children] if isinstance(screen, ModalScreen) else [screen.region]
    for y, strip in enumerate(screen._compositor.render_strips()):
        x = 0
        for segment in strip:
            start, x = x, x + segment.cell_length
            # Letters, digits and punctuation are read; box, block and braille glyphs are drawing.
            text = "".join(ch for ch in segment.text if unicodedata.category(ch)[0] in "LNP")
            style = segment.style
            if not text or style is None or not any(region.contains(start, y) for region in read):
                continue
            if style.dim:
                yield f"{where}, row {y}: {segment.text.strip()!r} is dim for the terminal to decide"
                continue
            if style.color is None or style.bgcolor is None:
                yield f"{where}, row {y}: {segment.text.strip()!r} has no colour of the theme"
                continue
            fg, bg = style.color.get_truecolor(), style.bgcolor.get_truecolor()
            ratio = contrast(tuple(fg), tuple(bg))  # type: ignore[arg-type]
            if ratio < MINIMUM:
                yield f"{where}, row {y}: {segment.text.strip()!r} {fg.hex} on {bg.hex} is {ratio:.2f}:1"


@pytest.mark.parametrize("theme", [theme.name for theme in bundled_themes()])
async def test_every_text_of_every_screen_reads_at_4_5_to_1(
    theme: str, events: list[Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FixedBoxController(build_model(events), config={"memory.total_budget": "200GiB"})
    fake.tune = search_snapshot()
    fake.model.apply(ev.Notice(T0 + 300, "error", "a notice, in the error colour of its list"))
    app = CuzkApp(fake, poll_interval=1000, theme=theme)
    faint: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()

        async def look(where: str, *keys: str) -> None:
            await pilot.press(*keys)
            await app.workers.wait_for_complete()
            await pilot.pause()
            faint.extend(too_faint(pilot, where))

        for key, name in zip("12345678", ("dashboard", "waterfall", "knobs", "bench", "memcheck", "logs",
                                           "sessions", "tune"), strict=True):  # fmt: skip
            await look(name, key)
        await look("the notices list", "1", "n")
        notices = app.screen.query_one(NoticesList)
        assert notices.highlighted is not None
        row = app.screen._compositor.render_strips()[notices.region.y + notices.highlighted - int(notices.scroll_y)]
        assert any(s.style is not None and s.style.underline for s in row), "the highlighted notice is marked"
        await look("a partition's details", "escape", "2", "down", "enter")
        await look("the help", "question_mark")
        await look("the quit dialog", "escape", "q")
        await look("a knob being edited", "escape", "3")
        editor = app.screen.query_one(Input)
        editor.focus()
        editor.value = "unix:///run/cuzk.sock"
        await look("a knob being edited", "end")
        await look("the apply's question", "ctrl+s")
    assert not faint, "\n".join(faint)
