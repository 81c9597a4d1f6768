"""Small form pieces shared by the screens: a yes/no confirmation modal."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


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
