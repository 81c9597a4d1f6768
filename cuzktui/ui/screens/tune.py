"""Tune screen: search the knobs for the most proofs per hour that never OOM (cuzk-tui tune).

Each trial is a real benchmark with one set of knobs, recorded as a session of its own; the search
starts from memcheck's recommendation and climbs from the best trial, skipping what its model of
peak RSS predicts over the limit, and varies only the knobs that act in the daemon's mode. The table
shows every trial as it runs (the knobs it changed, proofs/hour and its spread, peak RSS against the
limit, OOM kills, price per proof); the scatter sets proofs/hour against peak RSS, with the memory
limit as a line, so the best is read next to its headroom. A best is one that beat the starting config
beyond the noise; it is applied (after config check and a confirmation) by the same drain and restart
as Knobs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Collapsible, Input, Label, Select, Static

from ...controller import Controller, TuneRequest, TuneSnapshot, TuneTrialRow
from ...daemon_facts import CLI_KINDS
from ...units import GiB, format_size
from ..modals import ConfirmModal
from ..theme import Palette
from ..widgets.charts import Chart, ChartSpec, Line, nice_ceiling
from ..widgets.header import KeysFooter, follow_width, screen_header
from ..widgets.tables import WrappingTable
from .bench import RequestFields, form_number, form_request_params, input_column
from .knobs import apply_and_say, show_value

# (label, field id, default): cuzk-tui tune's defaults (cli.py); a blank price shows no price per proof.
FIELDS = (
    ("count", "count", "12"),
    ("concurrency", "concurrency", "6"),
    ("trials", "trials", "12"),
    ("time budget", "budget", "2h"),
    ("$ per hour", "price", ""),
)
INTEGERS = ("count", "concurrency", "trials")
REQUEST_TITLE = "request fields (miner id, randomness …): blank = from the input file"
COLUMNS = (
    "#", "status", "proofs/h", "±", "peak GiB", "limit", "peak/limit", "OOM", "$/proof", "knobs changed · note",
)  # fmt: skip
# What a trial changed and its note wrap in the room the other columns leave; never narrower than this.
NOTE_MIN_WIDTH = 30
# A trial's status in the waterfall's colours (the theme's: the terminal's own red was 4.1:1 on the dark theme).
_STATUS_COLOR = {"completed": ("phase-gpu", False), "oom": ("phase-failed", True), "failed": ("phase-failed", False)}
_STATUS_STYLE = {"running": "bold", "skipped": "dim"}


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GiB:.0f}"


def trial_cells(row: TuneTrialRow, best: int | None, palette: Palette) -> tuple[str | Text, ...]:
    """One trial's cells; a skipped trial's peak is the model's prediction (~), the best is starred."""
    peak = f"~{_gib(row.peak_rss_bytes)}" if row.predicted else _gib(row.peak_rss_bytes)
    # The tuned keys are unique without their sections: shorter rows, fewer wrapped lines.
    what = ", ".join(change.split(".", 1)[-1] for change in row.changes) or "(starting config)"
    color = _STATUS_COLOR.get(row.status)
    return (
        f"{row.index}{'*' if row.index == best else ''}",
        Text(row.status, style=palette.fg(*color) if color is not None else _STATUS_STYLE.get(row.status, "")),
        "-" if row.proofs_per_hour is None else f"{row.proofs_per_hour:.1f}",
        "-" if row.spread is None else f"{row.spread:.1%}",
        peak,
        _gib(row.limit_bytes),
        "-" if row.peak_share is None else f"{row.peak_share:.0%}",
        str(row.oom_kills),
        "-" if row.price_per_proof is None else f"{row.price_per_proof:.3f}",
        f"{what} — {row.note}" if row.note else what,
    )


def status_text(snap: TuneSnapshot, palette: Palette) -> Text:
    """Where the search is, the best so far and what applying it changes, and where it is recorded."""
    text = Text()
    alarm = palette.fg("phase-failed", bold=True)
    state = {"running": "searching", "finished": "search finished", "cancelled": "search cancelled"}
    text.append(state.get(snap.state, "search failed"), style=alarm if snap.state == "failed" else "bold")
    text.append(
        f" · {snap.kind} × {snap.count} per trial · {snap.trials_run} of {snap.max_trials} trials run · limit "
        f"{format_size(snap.limit_bytes)} · proofs/hour in {snap.time_basis}"
    )
    if snap.message:
        text.append(f"\n{snap.message}")
    if snap.left_alone:
        text.append(f"\n{snap.left_alone}", style="dim")
    best = snap.best
    if best is None:
        text.append(f"\n{snap.verdict or 'no best yet: no trial has finished'}")
    else:
        text.append(f"\nbest: trial {best.index}, ")
        text.append(f"{best.proofs_per_hour:.1f} proofs/hour", style="bold")
        if best.speedup is not None:
            text.append(f" ({best.speedup:.2f}× the starting config)")
        share = "-" if best.peak_share is None else f"{best.peak_share:.0%}"
        text.append(f", peak RSS {share} of the limit, at benchmark concurrency {best.concurrency}; ")
        if best.check_errors:
            text.append("fails config check: " + "; ".join(best.check_errors), style=alarm)
        elif not best.changes:
            text.append("the running config already has its knobs")
        else:
            text.append(f"passes config check; a applies {len(best.changes)} change(s)")
        if snap.verdict:
            text.append(f"\n{snap.verdict}", style="dim")
    if snap.tier is not None:
        text.append(f"\n{snap.tier}", style="dim")
    text.append(f"\ntrials in {snap.directory}", style="dim")
    return text


def scatter_spec(snap: TuneSnapshot) -> ChartSpec:
    """Proofs/hour against peak RSS (GiB of the box): completed trials, the best, OOM-killed trials at 0,
    and the memory limit as a vertical line."""
    limit = snap.limit_bytes / GiB
    measured = [r for r in snap.trials if r.peak_rss_bytes is not None and not r.predicted]
    done = tuple(
        (r.peak_rss_bytes / GiB, r.proofs_per_hour)
        for r in measured
        if r.status == "completed" and r.peak_rss_bytes is not None and r.proofs_per_hour is not None
    )
    killed = tuple((r.peak_rss_bytes / GiB, 0.0) for r in measured if r.status == "oom" and r.peak_rss_bytes)
    x_max = nice_ceiling(max([limit, *(x for x, _ in done + killed)]) * 1.05)
    y_max = max([1.0, *(y for _, y in done)]) * 1.1
    lines = [Line("completed", "phase-gpu", done, "o", scatter=True)]
    best = snap.best
    if best is not None:
        row = next((r for r in measured if r.index == best.index and r.peak_rss_bytes), None)
        if row is not None and row.peak_rss_bytes is not None:
            point = ((row.peak_rss_bytes / GiB, best.proofs_per_hour),)
            lines.append(Line("best", "mem-budget", point, "*", f"{best.proofs_per_hour:.1f}/h", scatter=True))
    lines.append(Line("OOM-killed", "mem-oom", killed, "x", scatter=True))
    lines.append(Line("limit", "mem-limit", ((limit, 0.0), (limit, y_max)), "|", format_size(snap.limit_bytes)))
    return ChartSpec(
        title="proofs/hour against peak RSS",
        lines=tuple(lines),
        t0=0.0,
        t1=x_max,
        y_max=y_max,
        unit="proofs/h",
        x_unit="GiB",
        empty="no trial has finished yet",
    )


class StatusBox(VerticalScroll):
    """The status, scrolled where it may not take all its lines (narrow): focusable only then, so the
    keys reach what is out of view and a status that fits is no stop on the way to the table."""

    def allow_focus(self) -> bool:
        return self.max_scroll_y > 0


class TuneScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "start", "Start search", priority=True),
        Binding("ctrl+x", "cancel", "Cancel search", priority=True),
        Binding("a", "apply_best", "Apply best"),
    ]

    DEFAULT_CSS = """
    TuneScreen {
        #tune-form { height: auto; padding: 0 1; }
        #tune-form > Vertical { width: 13; height: auto; margin-right: 1; }
        #tune-form > #tune-kind-col { width: 18; }
        #tune-form > #tune-input-col { width: 1fr; margin-right: 0; }
        #tune-form Label { color: $text-muted; }
        /* One line while folded, as the form's rows are: no rule above it, no padding below. */
        #tune-request-options { border-top: none; padding: 0; background: $background; }
        #tune-request-options > CollapsibleTitle { color: $text-muted; padding: 0 1; }
        #tune-request-options > Contents { padding: 0; }
        #tune-status-box { height: auto; }
        #tune-status { height: auto; padding: 0 1; margin-top: 1; }
        #tune-table { height: 3fr; min-height: 3; }
        #tune-scatter { height: 2fr; min-height: 5; }
    }
    /* Narrow (header.NARROW_WIDTH: 80x24), the fields lose their borders (follow_width makes them compact)
       and the input file takes a row of its own: beside the six others it had no room, nor had "$ per hour".
       The status scrolls past 9 lines (the search's verdict, the knobs left alone, the tier, the directory):
       longer, it pushed the table and the scatter off the screen. */
    TuneScreen.-narrow {
        #tune-form {
            layout: grid; grid-size: 6; grid-columns: 14 12 12 12 12 1fr; grid-gutter: 0 1; grid-rows: auto;
        }
        #tune-form > Vertical, #tune-form > #tune-kind-col { width: 1fr; margin-right: 0; }
        #tune-form > #tune-input-col { column-span: 6; }
        #tune-request > Vertical { width: 10; }
        #tune-status-box { max-height: 9; }
        #tune-status { margin-top: 0; }
    }
    """

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self._shown: TuneSnapshot | None = None
        self._rows: list[TuneTrialRow] = []

    def compose(self) -> ComposeResult:
        disabled = self.controller.read_only
        yield screen_header(self.app)
        with Horizontal(id="tune-form"):
            with Vertical(id="tune-kind-col"):
                yield Label("kind")
                yield Select(
                    [(k, k) for k in CLI_KINDS], value="porep", allow_blank=False, id="tune-kind", disabled=disabled
                )
            for label, name, value in FIELDS:
                with Vertical():
                    yield Label(label)
                    yield Input(
                        value,
                        type="integer" if name in INTEGERS else "number" if name == "price" else "text",
                        id=f"tune-{name}",
                        disabled=disabled,
                    )
            yield input_column("tune", self.controller, disabled)
        # Folded: most searches take their request from the input file, and the table and scatter need the rows.
        with Collapsible(title=REQUEST_TITLE, collapsed=True, id="tune-request-options"):
            yield RequestFields("tune", disabled, id="tune-request")
        with StatusBox(id="tune-status-box"):
            yield Static(
                "No search yet: set the form and press ctrl+s. Each trial is a benchmark on this daemon's program "
                "with other knobs; the daemon is handed over for the search and relaunched after it.",
                id="tune-status",
            )
        yield WrappingTable(*COLUMNS, min_width=NOTE_MIN_WIDTH, id="tune-table", zebra_stripes=True)
        yield Chart(ascii_only=bool(getattr(self.app, "ascii_only", False)), id="tune-scatter")
        yield KeysFooter()

    def on_resize(self, event: events.Resize) -> None:
        follow_width(self, event.size.width, compact="#tune-form Input, #tune-form Select, #tune-request Input")

    def on_mount(self) -> None:
        # A search runs in the controller, not in the model the app's poll follows: look once a second
        # while this screen is shown (nothing is drawn unless the snapshot changed).
        self.set_interval(1.0, self._tick)
        self.refresh_from_model()

    def _tick(self) -> None:
        if self.is_current:
            self.refresh_from_model()

    # ---- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Hidden from the footer in a replay, which runs nothing.
        return not (action in ("start", "cancel", "apply_best") and self.controller.read_only)

    def request(self) -> TuneRequest | None:
        """The search the form describes; None (after saying why) when it is not valid."""
        count = form_number(self, "tune-count", "count", 1)
        concurrency = form_number(self, "tune-concurrency", "concurrency", 1)
        trials = form_number(self, "tune-trials", "trials", 1)
        if count is None or concurrency is None or trials is None:
            return None
        price_text = self.query_one("#tune-price", Input).value.strip()
        try:
            price = float(price_text) if price_text else None
        except ValueError:
            price = -1.0
        if price is not None and price < 0:
            self.notify(f"$ per hour must be a number ≥ 0, got {price_text!r}", severity="error")
            return None
        path = self.query_one("#tune-input", Input).value.strip() or None
        if path is None and self.controller.identity.mode != "engine":
            self.notify("the real daemon needs an input file to prove", severity="error")
            return None
        params = form_request_params(self, "tune-request")
        if params is None:
            return None
        budget = self.query_one("#tune-budget", Input).value.strip()
        kind = str(self.query_one("#tune-kind", Select).value)
        return TuneRequest(kind, count, concurrency, trials, budget, price, path, params)

    def action_start(self) -> None:
        snap = self.controller.tune_snapshot()
        if snap is not None and snap.state == "running":
            self.notify("a search is already running (ctrl+x cancels it)", severity="warning")
            return
        request = self.request()
        if request is not None:
            self.set_focus(None)  # the number keys switch screens again
            self.run_worker(self._start(request), group="tune-control")

    async def _start(self, request: TuneRequest) -> None:
        try:
            await self.controller.start_tune(request)
        except Exception as exc:
            self.notify(f"search did not start: {exc}", title="Tune", severity="error", timeout=15)
        self.refresh_from_model()

    def action_cancel(self) -> None:
        snap = self.controller.tune_snapshot()
        if snap is None or snap.state != "running":
            self.notify("no search is running")
            return
        self.run_worker(self.controller.cancel_tune(), group="tune-control")
        self.notify("cancelling: the trial running now is stopped and not recorded", title="Tune")

    def action_apply_best(self) -> None:
        snap = self.controller.tune_snapshot()
        best = snap.best if snap is not None else None
        if snap is None or best is None:
            why = snap.verdict if snap is not None and snap.verdict else "no trial has finished"
            self.notify(f"no best config to apply: {why}")
            return
        if snap.state == "running":
            self.notify("the search owns the daemon: cancel it (ctrl+x) or wait, then apply", severity="warning")
            return
        if best.check_errors:
            # What `cuzk-tui config check` would refuse is never saved (LiveController.apply_config refuses it too).
            self.notify("the best config fails config check: " + "; ".join(best.check_errors), severity="error")
            return
        if not best.changes:
            self.notify(f"the running config already has trial {best.index}'s knobs")
            return
        running = self.controller.config_values()
        detail = Text()
        for name, value in best.changes:
            detail.append(f"{name}: {show_value(running.get(name))} → {show_value(value)}\n")
        detail.append(f"Measured at benchmark concurrency {best.concurrency} (not a daemon knob).\n")
        detail.append("The daemon reloads its SRS on the next proof (tens of seconds).", style="dim")
        changes: dict[str, Any] = dict(best.changes)

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._apply(changes), group="tune-apply", exclusive=True)

        question = f"Apply trial {best.index}'s config: save, drain and restart the daemon?"
        self.app.push_screen(ConfirmModal(question, detail), confirmed)

    async def _apply(self, changes: dict[str, Any]) -> None:
        await apply_and_say(self, self.controller, changes, "Tune")
        self._shown = None  # the best's changes are against the new running config now
        self.refresh_from_model()

    # ---- snapshot → widgets -------------------------------------------------------------

    def refresh_from_model(self) -> None:
        snap = self.controller.tune_snapshot()
        if snap is None or snap == self._shown:
            return
        self._shown = snap
        self.query_one("#tune-status", Static).update(status_text(snap, Palette.for_app(self.app)))
        self._show_rows(snap)
        self.query_one("#tune-scatter", Chart).show(scatter_spec(snap))

    def _show_rows(self, snap: TuneSnapshot) -> None:
        """Only the rows that changed since the last draw (the running trial's, a new trial's)."""
        table = self.query_one("#tune-table", WrappingTable)
        rows = list(snap.trials)
        same = 0
        while same < min(len(rows), len(self._rows)) and rows[same] == self._rows[same]:
            same += 1
        for row in self._rows[same:]:
            table.remove_row(str(row.index))
        best = snap.best.index if snap.best is not None else None
        palette = Palette.for_app(self.app)
        for row in rows[same:]:
            table.add_row(*trial_cells(row, best, palette), key=str(row.index))
        first = table.ordered_columns[0].key
        for row in rows[:same]:  # the star follows the best
            table.update_cell(str(row.index), first, trial_cells(row, best, palette)[0])
        self._rows = rows
        if rows[same:]:
            table.move_cursor(row=table.row_count - 1)
