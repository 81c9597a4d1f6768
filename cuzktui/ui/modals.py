"""The app's modal dialogs: a yes/no confirmation, the quit question and a screen's help."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ConfirmModal(ModalScreen[bool]):
    """Ask before something that cannot be taken back (a restart drops the loaded SRS)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    DEFAULT_CSS = """
    ConfirmModal {
        align: center middle;
        & > Vertical {
            width: 80; height: auto; max-height: 80%;
            border: thick $warning; background: $surface; padding: 1 2;
        }
        #confirm-question { text-style: bold; margin-bottom: 1; }
        #confirm-buttons { height: auto; align-horizontal: right; margin-top: 1; }
        #confirm-buttons Button { margin-left: 2; }
    }
    """

    def __init__(self, question: str, detail: RenderableType = "", yes: str = "Yes (y)", no: str = "No (n)") -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.yes = yes
        self.no = no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="confirm-question", markup=False)
            yield Static(self.detail, id="confirm-detail")
            with Horizontal(id="confirm-buttons"):
                yield Button(self.no, id="confirm-no")
                yield Button(self.yes, id="confirm-yes", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class QuitScreen(ModalScreen[bool | None]):
    """Asks whether to stop the daemon / benchmark or leave them running; dismisses with the choice."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "choose(True)", "Stop and quit"),
        Binding("l", "choose(False)", "Leave running"),
        Binding("escape", "choose(None)", "Cancel"),
    ]

    def __init__(self, running: list[str], attach: str) -> None:
        super().__init__()
        self.running = running
        self.attach = attach

    def compose(self) -> ComposeResult:
        attach = self.attach or "cuzk-tui attach <address>"
        # A column, not a grid: a grid sizes an auto row spanning columns by one column's width, which
        # left a long attach command's dialog taller than the screen (its top scrolled away).
        with Vertical(id="quit-dialog"):
            yield Label(
                Text.assemble(
                    ("Still running: ", "bold"),
                    "; ".join(self.running),
                    "\n\nStop them, or leave them running and re-attach later with\n  ",
                    (attach, "bold"),
                ),
                id="quit-question",
            )
            with Horizontal(id="quit-buttons"):
                # Plain Text: "[s]" would otherwise be read as markup and vanish.
                yield Button(Text("Stop and quit [s]"), variant="error", id="quit-stop")
                yield Button(Text("Leave running [l]"), variant="primary", id="quit-leave")
                yield Button(Text("Cancel [esc]"), id="quit-cancel")

    def action_choose(self, choice: bool | None) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        choices: dict[str | None, bool | None] = {"quit-stop": True, "quit-leave": False}
        self.dismiss(choices.get(event.button.id))


class HelpScreen(ModalScreen[None]):
    """A text too long for where it came from, scrollable, Escape closes: a screen's help (what it shows,
    its keys, what its colours and glyphs mean) or one notice in full."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "Close")]

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
        & > VerticalScroll {
            width: 90%; max-width: 100; height: auto; max-height: 90%;
            border: thick $primary; background: $surface; padding: 1 2;
        }
    }
    """

    def __init__(self, text: Text | Content) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, id="help-text")
