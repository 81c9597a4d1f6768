"""Bench screen: run a benchmark, watch its proofs come back, read the cuzk-bench style summary.

The table is the benchmark's story in order: each proof's timings as the daemon reported them
and, where the daemon died, a row saying how (OOM kill and its evidence) and what the recovery
changed — so the number at the bottom (proofs/hour) is read next to what it cost.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, ProgressBar, Select, Static

from ... import events as ev
from ...controller import BenchRequest, Controller
from ...daemon_facts import CLI_KINDS
from ...figures import clock_label
from ...model import BenchState
from ...proofinputs import DEFAULT_MINER, InputError, RequestParams, parse_hex32
from ..theme import Palette
from ..widgets.header import KeysFooter, follow_width, screen_header
from ..widgets.tables import WrappingTable

# Σ: the daemon sums synthesis_ms and gpu_compute_ms over a proof's partitions (engine.rs,
# process_partition_result), so they can exceed the proof's wall time.
SUMMED = "(Σ: summed over partitions)"
COLUMNS = ("#", "job id", "status", "queue s", "synth s Σ", "GPU s Σ", "total s", "wall s", "note")
# The note (a restart's evidence and explanation, a failure's text) wraps in the room left; never narrower.
NOTE_MIN_WIDTH = 30
# The waterfall's colours (ui/theme.py): a completed proof in its GPU green, a failed one in its failure red.
# An alarm is bold so that it stays one where NO_COLOR takes the colour away (Textual's monochrome filter
# turns a plain red into a dark grey that a dark terminal hides).
_STATUS_COLOR = {"COMPLETED": ("phase-gpu", False), "FAILED": ("phase-failed", True), "LOST": ("phase-failed", True)}


# (label, RequestParams field) of the request fields the form offers beside the input file.
REQUEST_NUMBERS = (("miner id", "miner_id"), ("sector", "sector_num"), ("reg. proof", "registered_proof"))
REQUEST_HEX = (
    ("randomness (PoSt)", "randomness"),
    ("comm_r_old", "comm_r_old"),
    ("comm_r_new", "comm_r_new"),
    ("comm_d_new", "comm_d_new"),
)


def seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}"


def proof_row(index: int, result: ev.ProofFinished, bench: BenchState, palette: Palette) -> tuple[str | Text, ...]:
    """One proof; an unanswered one (lost with its daemon, or a failed call) shows no timings, not zeros."""
    timings = (result.queue_wait_ms, result.synthesis_ms, result.gpu_compute_ms, result.total_ms, result.wall_ms)
    cells = tuple(seconds(bench.box_ms(ms)) if result.answered else "—" for ms in timings)
    note = result.error if result.answered else f"no result: {result.error}"
    color = _STATUS_COLOR.get(result.status)
    status = Text(result.status, style=palette.fg(*color) if color is not None else "")
    return (str(index), result.job_id, status, *cells, note)


EVIDENCE_WIDTH = 48


def restart_row(restart: ev.BenchRestart, palette: Palette) -> tuple[str | Text, ...]:
    what = "daemon OOM-killed" if restart.reason == "oom_kill" else f"daemon died ({restart.reason})"
    # The table row is a summary: the first two facts, shortened; the full evidence (kernel log
    # lines included) is on the Dashboard's diagnosis.
    short = [e if len(e) <= EVIDENCE_WIDTH else e[: EVIDENCE_WIDTH - 1] + "…" for e in restart.evidence[:2]]
    evidence = f" ({'; '.join(short)})" if short else ""
    why = f" because {restart.explanation}" if restart.explanation else ""
    note = (
        f"— {what}{evidence} → total_budget lowered to {restart.total_budget}{why}, restarted, "
        f"{restart.resubmitted} resubmitted"
    )
    return (
        "⟲",
        f"restart {restart.attempt}",
        Text(restart.reason.upper().replace("_", " "), style=palette.fg("restart", bold=True)),
        "",
        "",
        "",
        "",
        "",
        note,
    )


def summary(bench: BenchState, now: float | None, palette: Palette) -> Text:
    """The cuzk-bench batch summary: totals, wall and prove times, throughput."""
    done = [r for r in bench.results if r.status == "COMPLETED"]
    finished = bench.finished
    # BenchFinished is already in the bench's time basis; a running bench's elapsed time is converted.
    elapsed = max(0.0, (now or bench.started_t) - bench.started_t)
    wall = finished.wall_s if finished is not None else bench.box_ms(round(elapsed * 1000)) / 1000
    text = Text()
    text.append(f"{bench.kind} × {bench.count}, concurrency {bench.concurrency}", style="bold")
    state = finished.outcome if finished is not None else "running"
    text.append(f" · {state} · times in {bench.time_basis}\n")
    lost = f" ({bench.lost} lost: no answer)" if bench.lost else ""
    text.append(f"completed {bench.completed} · failed {bench.failed}{lost} · total time {wall:.1f}s")
    if finished is not None and finished.killed_s:
        text.append(f" (includes {finished.killed_s:.1f}s in killed daemon runs, {finished.restart_s:.1f}s restarting)")
    if bench.restarts:
        text.append(f" · {len(bench.restarts)} restart(s)", style=palette.fg("restart", bold=True))
    if done:
        walls = [bench.box_ms(r.wall_ms) / 1000 for r in done]
        proves = [bench.box_ms(r.gpu_compute_ms) / 1000 for r in done]
        text.append(f"\nwall time  avg={sum(walls) / len(walls):.1f}s min={min(walls):.1f}s max={max(walls):.1f}s")
        mean = sum(proves) / len(proves)
        text.append(f"\nprove Σ avg={mean:.1f}s min={min(proves):.1f}s max={max(proves):.1f}s")
        text.append(f"  {SUMMED}", style="dim")  # on the same line: the result rows need the height
    per_hour = finished.proofs_per_hour if finished is not None else (len(done) / wall * 3600 if wall > 0 else 0.0)
    text.append("\nthroughput ")
    text.append(f"{per_hour:.1f} proofs/hour", style="bold")
    per_proof = f", {wall / len(done):.1f}s/proof" if done and wall > 0 else ""
    text.append(f" ({clock_label(bench.time_scale)}{per_proof})")
    return text


def noted_row(table: DataTable[str | Text]) -> Text | None:
    """The note of the table's highlighted row, else of its last row with one, after the row's name and
    status (``restart 1 · OOM KILL: daemon OOM-killed …``); None when no row has a note."""
    rows = [table.get_row_at(index) for index in range(table.row_count)]
    highlighted = [rows[table.cursor_row]] if 0 <= table.cursor_row < len(rows) else []
    cells = next((cells for cells in [*highlighted, *reversed(rows)] if str(cells[-1])), None)
    if cells is None:
        return None
    status = cells[2] if isinstance(cells[2], Text) else Text(str(cells[2]))
    return Text.assemble((f"{cells[1]} · ", "bold"), status, f": {str(cells[-1]).removeprefix('— ')}")


def input_column(prefix: str, controller: Controller, disabled: bool) -> Vertical:
    """The input file field (``#PREFIX-input``) of a form that runs benchmarks: optional on the engine,
    which generates inputs, required for the real daemon."""
    optional = controller.identity.mode == "engine"
    return Vertical(
        Label("input file (PoRep: C1 JSON; others: vanilla proofs)"),
        Input(
            placeholder="optional with cuzk-engine" if optional else "required for the real daemon",
            id=f"{prefix}-input",
            disabled=disabled,
        ),
        id=f"{prefix}-input-col",
    )


class RequestFields(Horizontal):
    """The request fields cuzk-bench batch takes as flags (``#PREFIX-miner_id`` …), in a row: blank is the
    value from the input file, else the default. The Bench and Tune screens both send them."""

    DEFAULT_CSS = """
    RequestFields { height: auto; padding: 0 1; }
    RequestFields > Vertical { width: 12; height: auto; margin-right: 1; }
    RequestFields > .hex { width: 1fr; }
    RequestFields Label { color: $text-muted; }
    """

    def __init__(self, prefix: str, disabled: bool, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._prefix = prefix
        self._disabled = disabled

    def compose(self) -> ComposeResult:
        for label, field in REQUEST_NUMBERS:
            with Vertical():
                yield Label(label)
                yield Input(placeholder="auto", type="integer", id=f"{self._prefix}-{field}", disabled=self._disabled)
        for label, field in REQUEST_HEX:
            with Vertical(classes="hex"):
                yield Label(label)
                yield Input(placeholder="32-byte hex", id=f"{self._prefix}-{field}", disabled=self._disabled)

    def params(self) -> RequestParams:
        """The request the fields describe; InputError names the first field that is not valid."""
        numbers: dict[str, int | None] = {}
        for label, field in REQUEST_NUMBERS:
            text = self.query_one(f"#{self._prefix}-{field}", Input).value.strip()
            if text and not text.isdigit():
                raise InputError(f"{label} must be a whole number ≥ 0, got {text!r}")
            numbers[field] = int(text) if text else None
        values: dict[str, bytes | None] = {}
        for _, field in REQUEST_HEX:
            text = self.query_one(f"#{self._prefix}-{field}", Input).value.strip()
            values[field] = parse_hex32(text, field.replace("_", "-")) if text else None
        miner = numbers["miner_id"]
        return RequestParams(
            miner_id=DEFAULT_MINER if miner is None else miner,
            sector_num=numbers["sector_num"],
            registered_proof=numbers["registered_proof"],
            randomness=values["randomness"],
            comm_r_old=values["comm_r_old"],
            comm_r_new=values["comm_r_new"],
            comm_d_new=values["comm_d_new"],
        )


def form_request_params(screen: Screen[None], fields_id: str) -> RequestParams | None:
    """The request of a form's :class:`RequestFields`; None (after saying why) when a field is not valid."""
    try:
        return screen.query_one(f"#{fields_id}", RequestFields).params()
    except InputError as error:
        screen.notify(str(error), severity="error")
        return None


def form_number(screen: Screen[None], widget_id: str, name: str, minimum: int) -> int | None:
    """A form field's whole number; None (after saying why) when it is not one ≥ ``minimum``."""
    text = screen.query_one(f"#{widget_id}", Input).value.strip()
    if not text.lstrip("-").isdigit() or int(text) < minimum:
        screen.notify(f"{name} must be a whole number ≥ {minimum}, got {text!r}", severity="error")
        return None
    return int(text)


class BenchScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "start", "Start", priority=True),
        Binding("ctrl+x", "cancel", "Cancel bench", priority=True),
    ]

    DEFAULT_CSS = """
    BenchScreen {
        #bench-form { height: auto; padding: 0 1; }
        #bench-form > Vertical { width: 14; height: auto; margin-right: 1; }
        #bench-form > #bench-kind-col { width: 18; }
        #bench-form > #bench-input-col { width: 1fr; margin-right: 0; }
        #bench-form Label { color: $text-muted; }
        #bench-progress { height: 1; margin: 1 1 0 1; }
        #bench-summary { height: auto; padding: 0 1; margin-bottom: 1; }
        #bench-error { height: auto; padding: 0 1; color: $text-error; text-style: bold; display: none; }
        #bench-error.-shown { display: block; }
        #bench-results { height: 1fr; }
        #bench-note { height: auto; padding: 0 1; display: none; }
        #bench-note.-shown { display: block; }
    }
    /* Narrow (header.NARROW_WIDTH: 80x24), the fields lose their borders (follow_width makes them
       compact) so the results keep rows to show, and the 32-byte hex fields get the width left. */
    BenchScreen.-narrow {
        #bench-form > Vertical { width: 12; }
        #bench-form > #bench-kind-col { width: 14; }
        #bench-request > Vertical { width: 10; }
        #bench-progress { margin: 0 1; }
    }
    """

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self._bench_id: str | None = None
        self._shown_results = 0
        self._shown_restarts = 0
        self._bench_version = -1
        self._refused: str | None = None  # why the last start was refused (None: it went through)
        self._started_after: ev.BenchRunnerFailed | None = None  # the runner failure a later start followed

    def compose(self) -> ComposeResult:
        disabled = self.controller.read_only
        yield screen_header(self.app)
        with Horizontal(id="bench-form"):
            with Vertical(id="bench-kind-col"):
                yield Label("kind")
                yield Select(
                    [(k, k) for k in CLI_KINDS], value="porep", allow_blank=False, id="bench-kind", disabled=disabled
                )
            for name, value in (("count", "10"), ("concurrency", "2"), ("OOM retries", "3")):
                with Vertical():
                    yield Label(name)
                    yield Input(
                        value,
                        type="integer",
                        id=f"bench-{name.split()[0].lower()}",
                        disabled=disabled,
                    )
            yield input_column("bench", self.controller, disabled)
        yield RequestFields("bench", disabled, id="bench-request")
        # A known total from the start: an indeterminate bar animates, repainting every frame over SSH.
        yield ProgressBar(total=1, show_eta=False, id="bench-progress")
        # Why the last start was refused, or how the last runner failed, until a later start: a toast
        # alone is gone in seconds, and a notice says it cut to the dashboard's width.
        yield Static(id="bench-error")
        yield Static("No benchmark yet: set the inputs and press ctrl+s.", id="bench-summary")
        yield WrappingTable(
            *COLUMNS, min_width=NOTE_MIN_WIDTH, id="bench-results", zebra_stripes=True, one_line_when_cramped=True
        )
        # Where the other columns leave the note no room (80 columns), a row's note is read here, whole.
        yield Static(id="bench-note")
        yield KeysFooter()

    def on_resize(self, event: events.Resize) -> None:
        follow_width(self, event.size.width, compact="#bench-form Input, #bench-form Select, #bench-request Input")

    def on_mount(self) -> None:
        self.watch(self.query_one("#bench-results", WrappingTable), "cramped", self._show_note)
        self.refresh_from_model()

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_note()

    def _show_note(self, _cramped: bool | None = None) -> None:
        """Below a table that leaves the note column no room: the highlighted row's note, else the last
        row's with one (an OOM restart's reasoning, a failure's text), so that it is read without
        scrolling sideways."""
        table = self.query_one("#bench-results", WrappingTable)
        text = noted_row(table) if table.cramped else None
        note = self.query_one("#bench-note", Static)
        note.update(text or "")
        note.set_class(text is not None, "-shown")

    # ---- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Hidden from the footer in a replay, which runs nothing.
        return not (action in ("start", "cancel") and self.controller.read_only)

    def request(self) -> BenchRequest | None:
        """The benchmark the form describes; None (after saying why) when it is not valid."""
        count = form_number(self, "bench-count", "count", 1)
        concurrency = form_number(self, "bench-concurrency", "concurrency", 1)
        retries = form_number(self, "bench-oom", "OOM retries", 0)
        if count is None or concurrency is None or retries is None:
            return None
        kind = self.query_one("#bench-kind", Select).value
        path = self.query_one("#bench-input", Input).value.strip() or None
        if path is None and self.controller.identity.mode != "engine":
            self.notify("the real daemon needs an input file to prove", severity="error")
            return None
        params = form_request_params(self, "bench-request")
        if params is None:
            return None
        return BenchRequest(str(kind), count, concurrency, path, retries, params)

    def action_start(self) -> None:
        if self.controller.bench_running():
            self.notify("a benchmark is already running (ctrl+x cancels it)", severity="warning")
            return
        request = self.request()
        if request is not None:
            # Leave the field: the number keys switch screens again instead of typing into it.
            self.set_focus(None)
            self.run_worker(self._start(request), group="bench-control")

    async def _start(self, request: BenchRequest) -> None:
        try:
            await self.controller.start_bench(request)
        except Exception as exc:
            self._refused = f"benchmark did not start: {exc}"
            self.notify(self._refused, title="Bench", severity="error", timeout=15)
        else:
            self._refused = None
            self._started_after = self.controller.model.bench_failure
        self._show_error()

    def _show_error(self) -> None:
        """Why the last start was refused, else how the last runner failed (its own words), until a
        later start goes through."""
        failure = self.controller.model.bench_failure
        said = self._refused
        if said is None and failure is not None and failure is not self._started_after:
            said = failure.text
        error = self.query_one("#bench-error", Static)
        error.update(Text(said or ""))
        error.set_class(said is not None, "-shown")

    def action_cancel(self) -> None:
        if not self.controller.bench_running():
            self.notify("no benchmark is running")
            return
        self.run_worker(self._cancel(), group="bench-control")

    async def _cancel(self) -> None:
        try:
            await self.controller.cancel_bench()
        except Exception as exc:
            self.notify(f"cancel failed: {exc}", title="Bench", severity="error")

    # ---- model → widgets ----------------------------------------------------------------

    def refresh_from_model(self) -> None:
        model = self.controller.model
        if model.bench_version == self._bench_version:
            return
        self._bench_version = model.bench_version
        self._show_error()
        bench = model.bench
        if bench is None:
            return
        table = self.query_one("#bench-results", WrappingTable)
        if bench.bench_id != self._bench_id:
            table.clear()
            self._bench_id = bench.bench_id
            self._shown_results = self._shown_restarts = 0
        palette = Palette.for_app(self.app)
        self._append_rows(table, bench, palette)
        progress = self.query_one("#bench-progress", ProgressBar)
        progress.update(total=bench.count, progress=bench.completed + bench.failed)
        self.query_one("#bench-summary", Static).update(summary(bench, model.last_t, palette))

    def _append_rows(self, table: WrappingTable, bench: BenchState, palette: Palette) -> None:
        """Only the rows that arrived since the last refresh, proofs and restarts in time order."""
        results = list(bench.results)[self._shown_results :]
        restarts = bench.restarts[self._shown_restarts :]
        items: list[tuple[float, int, ev.ProofFinished | ev.BenchRestart]] = sorted(
            [(r.t, 0, r) for r in results] + [(r.t, 1, r) for r in restarts], key=lambda item: (item[0], item[1])
        )
        for _, _, item in items:
            if isinstance(item, ev.ProofFinished):
                self._shown_results += 1
                table.add_row(*proof_row(self._shown_results, item, bench, palette))
            else:
                self._shown_restarts += 1
                table.add_row(*restart_row(item, palette))
        if items:
            table.move_cursor(row=table.row_count - 1)
