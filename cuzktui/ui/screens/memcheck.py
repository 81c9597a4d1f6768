"""Memcheck screen: what this machine can really give the daemon, and the knobs that follow.

The daemon sizes itself from host RAM and ignores the container's cgroup limit; this screen puts
the two side by side, highlights the traps (budget "auto" above the limit, a small memlock limit,
an exposed listen address) and lists the planner's knob values with their reasoning. "Apply
recommended" only pre-fills the Knobs form: applying stays a deliberate, confirmed step there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import LoadingIndicator, ProgressBar, Static

from ...controller import Controller
from ...units import format_size
from ..messages import ApplyRecommended
from ..modals import ConfirmModal
from ..theme import Palette
from ..widgets.header import KeysFooter, screen_header
from ..widgets.tables import WrappingTable

if TYPE_CHECKING:
    from ...planner import MemcheckReport
    from ...system import ProbeResult

# The planner's reasoning wraps in the room the other columns leave, never narrower than this: narrow enough
# for 80 columns, where the page scrolls down through tall rows rather than sideways.
REASON_MIN_WIDTH = 16


def recommended_values(report: MemcheckReport) -> dict[str, Any]:
    return {f"{r.section}.{r.key}": r.value for r in report.recommendations}


def facts(report: MemcheckReport, palette: Palette) -> Text:
    """The report's figures, one per line, the ones that decide an OOM kill first."""
    styles: dict[str, Style | str] = {
        "effective RAM": "bold",
        'budget "auto"': palette.fg("phase-failed", bold=True) if report.auto_overshoots_cgroup else "",
        "budget recommended": palette.fg("phase-gpu", bold=True),
    }
    rows = [(label, value, styles.get(label, "")) for label, value in report.fact_rows()]
    text = Text()
    for label, value, style in rows:
        text.append(f"{label:<20}", style="dim")
        text.append(value + "\n", style=style)
    text.rstrip()
    return text


class MemcheckScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "apply_recommended", "Apply recommended → Knobs"),
        Binding("r", "rerun", "Re-check"),
        Binding("p", "probe", "Probe memory (30-60 s)"),
    ]

    DEFAULT_CSS = """
    MemcheckScreen {
        #memcheck-body { height: 1fr; padding: 0 1; }
        #memcheck-loading { height: 3; }
        #memcheck-note { color: $text-muted; }
        #memcheck-warnings {
            display: none; border: round $warning; padding: 0 1; color: $text-warning; height: auto;
        }
        #memcheck-warnings.-shown { display: block; }
        .memcheck--title { text-style: bold; margin-top: 1; }
        #memcheck-recommendations { height: auto; }
        #memprobe { display: none; height: auto; }
        #memprobe.-shown { display: block; }
        #memprobe-bar { margin-top: 1; }
    }
    """

    def __init__(self, controller: Controller, report: MemcheckReport | None = None) -> None:
        super().__init__()
        self.controller = controller
        self.report = report
        self._probing = False

    def compose(self) -> ComposeResult:
        yield screen_header(self.app)
        with VerticalScroll(id="memcheck-body"):
            yield LoadingIndicator(id="memcheck-loading")
            if self.controller.read_only:
                yield Static("This is the machine the replay runs on, not the recorded one.", id="memcheck-note")
            elif self.controller.identity.mode == "engine":
                yield Static("The box cuzk-engine emulates, not the host this tool runs on.", id="memcheck-note")
            yield Static(id="memcheck-facts")
            with Vertical(id="memprobe"):
                yield ProgressBar(id="memprobe-bar", show_eta=False)
                yield Static(id="memprobe-status")
            yield Static(id="memcheck-warnings")
            yield Static("Recommended knobs (a: pre-fill the Knobs form)", classes="memcheck--title")
            yield WrappingTable(
                "knob", "recommended", "running", "why", min_width=REASON_MIN_WIDTH, id="memcheck-recommendations"
            )
        yield KeysFooter()

    def on_mount(self) -> None:
        if self.report is not None:
            self._show(self.report)
        else:
            self.action_rerun()

    def action_rerun(self) -> None:
        self.query_one("#memcheck-loading").display = True

        def work() -> None:
            # Blocking reads of /proc, the cgroup tree and NVML: never on the UI loop.
            report = self.controller.memcheck_report()
            self.app.call_from_thread(self._show, report)

        self.run_worker(work, thread=True, exclusive=True, group="memcheck")

    def _show(self, report: MemcheckReport) -> None:
        self.report = report
        self.query_one("#memcheck-loading").display = False
        self.query_one("#memcheck-facts", Static).update(facts(report, Palette.for_app(self.app)))
        warnings = self.query_one("#memcheck-warnings", Static)
        warnings.set_class(bool(report.warnings), "-shown")
        warnings.update(Text("\n".join(f"! {w}" for w in report.warnings)))
        running = self.controller.config_values()
        table = self.query_one("#memcheck-recommendations", WrappingTable)
        table.clear()
        changed = Palette.for_app(self.app).fg("phase-queue")
        for r in report.recommendations:
            name = f"{r.section}.{r.key}"
            current = running.get(name)
            differs = current != r.value
            table.add_row(
                name,
                Text(str(r.value), style="bold" if differs else ""),
                Text(str(current), style=changed if differs else "dim"),
                r.reasoning,
            )

    def action_probe(self) -> None:
        """memprobe from here, after a question: it takes this machine's free memory for 30-60 s."""
        if self._probing:
            self.notify("the memory probe is still running")
            return
        engine = " (this host, not the box cuzk-engine emulates)" if self.controller.identity.mode == "engine" else ""
        detail = Text(
            f"A child process allocates and touches 1 GiB chunks up to the room left on this machine{engine} "
            "(MemAvailable, or the cgroup's limit minus usage) less 2 GiB, to measure what the daemon could "
            "really get. It takes 30-60 s on a large box; a daemon running here has that much less room meanwhile."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._start_probe()

        self.app.push_screen(ConfirmModal("Probe this machine's memory?", detail, yes="Probe (y)"), answered)

    def _start_probe(self) -> None:
        self._probing = True
        self.query_one("#memprobe").add_class("-shown")
        self.call_after_refresh(self.query_one("#memprobe").scroll_visible)  # below the facts at 80x24
        self.query_one("#memprobe-bar", ProgressBar).update(total=None, progress=0)
        self.query_one("#memprobe-status", Static).update(Text("memprobe: starting the child…", style="dim"))

        def progress(allocated: int, target: int) -> None:
            self.app.call_from_thread(self._probe_progress, allocated, target)

        def work() -> None:
            try:
                result = self.controller.memprobe(progress)
            except (OSError, ValueError) as error:
                self.app.call_from_thread(self._probe_failed, error)
            else:
                self.app.call_from_thread(self._probe_done, result)

        self.run_worker(work, thread=True, exclusive=True, group="memprobe")

    def _probe_progress(self, allocated: int, target: int) -> None:
        self.query_one("#memprobe-bar", ProgressBar).update(total=max(target, 1), progress=allocated)
        status = f"memprobe: allocated {format_size(allocated)} of {format_size(target)}…"
        self.query_one("#memprobe-status", Static).update(Text(status))

    def _probe_done(self, result: ProbeResult) -> None:
        self._probing = False
        bar = self.query_one("#memprobe-bar", ProgressBar)
        bar.update(total=max(result.target_bytes, 1), progress=result.allocated_bytes)
        text = Text("memprobe\n", style="bold")
        alarm = Palette.for_app(self.app).fg("phase-failed", bold=True) if result.killed else ""
        for label, value in result.rows():
            text.append(f"{label:<20}", style="dim")
            text.append(value.replace("\n", "\n" + " " * 20) + "\n", style=alarm)
        text.rstrip()
        self.query_one("#memprobe-status", Static).update(text)
        self.call_after_refresh(self.query_one("#memprobe").scroll_visible)

    def _probe_failed(self, error: Exception) -> None:
        self._probing = False
        alarm = Palette.for_app(self.app).fg("phase-failed", bold=True)
        self.query_one("#memprobe-status", Static).update(Text(f"memprobe failed: {error}", style=alarm))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # A replay's Knobs form is read-only: nothing to pre-fill.
        return not (action == "apply_recommended" and self.controller.read_only)

    def action_apply_recommended(self) -> None:
        if self.report is None:
            self.notify("the report is still being computed")
            return
        self.post_message(ApplyRecommended(recommended_values(self.report)))

    def refresh_from_model(self) -> None:
        """Nothing live: the report is a snapshot of the machine (r re-checks)."""
