"""Bench screen: Start/Cancel with the form's inputs, the results table with a restart row, summary."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import DataTable, Input, ProgressBar, Select, Static

from cuzktui import events as ev
from cuzktui.controller import BenchRequest, ControllerError
from cuzktui.model import SessionModel
from cuzktui.ui.screens.bench import BenchScreen, proof_row, restart_row, summary
from cuzktui.ui.theme import Palette
from cuzktui.ui.widgets.panels import pipeline_content
from cuzktui.ui.widgets.tables import WrappingTable
from tests.ui.conftest import last_column_shown, paused_until
from tests.ui.fakes import T0, FakeController, ScreenApp, bench_events, current_screen


def make_app(fake: FakeController) -> ScreenApp:
    return ScreenApp(lambda: BenchScreen(fake), "bench")


def cells(table: DataTable[object], row: int) -> list[str]:
    return [str(cell) for cell in table.get_row_at(row)]


async def test_start_sends_the_form_and_cancel_cancels() -> None:
    fake = FakeController()
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, BenchScreen)
        screen.query_one("#bench-kind", Select).value = "snap"
        screen.query_one("#bench-count", Input).value = "6"
        screen.query_one("#bench-concurrency", Input).value = "3"
        screen.query_one("#bench-oom", Input).value = "1"
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert fake.benches == [BenchRequest("snap", 6, 3, None, 1)]
        await pilot.press("ctrl+x")
        await app.workers.wait_for_complete()
        assert fake.cancelled == 1


async def test_invalid_inputs_start_nothing() -> None:
    fake = FakeController()
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        current_screen(app, BenchScreen).query_one("#bench-count", Input).value = "0"
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert fake.benches == []
        assert any("count must be" in str(n.message) for n in app._notifications)


class RefusingController(FakeController):
    """Refuses a benchmark as the live controller refuses one whose input cannot be read."""

    async def start_bench(self, request: BenchRequest) -> None:
        if request.input_path is not None:
            raise ControllerError(f"input file {request.input_path}: no such file (the daemon was left as it was)")
        await super().start_bench(request)


async def test_a_refused_start_is_said_on_the_screen_until_a_start_goes_through() -> None:
    """A refused start left "No benchmark yet" and a toast; the reason stays on the Bench screen."""
    fake = RefusingController()
    app = make_app(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = current_screen(app, BenchScreen)
        screen.query_one("#bench-input", Input).value = "/srv/c1/porep-c1.jsn"
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        error = screen.query_one("#bench-error", Static)
        assert error.display and error.region.height >= 1
        said = str(error.render())
        assert "benchmark did not start: input file /srv/c1/porep-c1.jsn: no such file" in said
        assert "the daemon was left as it was" in said and fake.benches == []
        screen.query_one("#bench-input", Input).value = ""
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not error.display and len(fake.benches) == 1


async def test_a_runners_failure_is_said_on_the_screen_in_its_words_until_a_benchmark_starts() -> None:
    """A runner that failed after the hand-over left only a notice cut to the dashboard's width
    (`benchmark runner finished (exit 2); relaunchi…`): its own error stays on the Bench screen, whole,
    until a later benchmark starts."""
    fake = FakeController()
    fake.model.apply_all(bench_events())
    error = "the daemon died (exited 101): panicked at engine.rs\nthread 'main' panicked: no GPU visible"
    fake.model.apply(ev.BenchRunnerFailed(T0 + 300, 1, error))
    app = make_app(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = current_screen(app, BenchScreen)
        await pilot.pause()
        shown = screen.query_one("#bench-error", Static)
        assert shown.display and shown.region.height >= 2  # both of its lines
        lines = [strip.text for strip in app.screen._compositor.render_strips()][shown.region.y : shown.region.bottom]
        said = " ".join(" ".join(lines).split())
        assert said == f"benchmark failed (exit 1): {' '.join(error.split())}"
        # A later result of the same benchmark, a start refused: the runner's failure is still there.
        fake.model.apply(ev.Notice(T0 + 301, "info", "benchmark runner finished (exit 1); relaunching the daemon"))
        screen.refresh_from_model()
        assert shown.display and "no GPU visible" in str(shown.render())
        # A start that goes through: the failure is past, and a new benchmark's start says so for good.
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(fake.benches) == 1 and not shown.display
        fake.model.apply(ev.BenchStarted(T0 + 400, "b2", "porep", 10, 2, 3))
        screen.refresh_from_model()
        assert not shown.display and fake.model.bench_failure is None
    assert any("benchmark failed (exit 1): the daemon died" in n.text for n in fake.model.notices)


async def test_results_table_grows_incrementally_with_the_restart_where_it_happened() -> None:
    fake = FakeController()
    events = bench_events()
    fake.model.apply_all(events[:4])  # started, two submitted, the first proof back
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, BenchScreen)
        table = screen.query_one(DataTable)
        assert table.row_count == 1
        assert cells(table, 0)[:3] == ["1", "porep-1", "COMPLETED"]
        assert cells(table, 0)[3:8] == ["31.2", "29.4", "37.0", "88.4", "94.0"]
        fake.model.apply_all(events[4:])
        screen.refresh_from_model()
        await pilot.pause()
        assert table.row_count == 4
        assert cells(table, 1)[2] == "LOST"
        restart = cells(table, 2)
        assert restart[1] == "restart 1"
        assert "OOM-killed" in restart[8] and "total_budget lowered to 150GiB" in restart[8]
        assert "2 resubmitted" in restart[8]
        assert cells(table, 3)[1] == "porep-3"
        progress = screen.query_one(ProgressBar)
        assert (progress.progress, progress.total) == (3, 4)
        # Nothing new: the table is left alone.
        screen.refresh_from_model()
        assert table.row_count == 4
        fake.model.apply(ev.BenchFinished(T0 + 230, "b1", 2, 1, 230.0, 31.3, "completed"))
        screen.refresh_from_model()
        text = str(screen.query_one("#bench-summary", Static).render())
        assert "completed 2 · failed 1 (1 lost: no answer) · total time 230.0s" in text
        assert "31.3 proofs/hour" in text


def oom_bench_events() -> list[ev.Event]:
    """bench_events with the engine's job ids and a restart that says why the budget was lowered."""
    events: list[ev.Event] = []
    for event in bench_events():
        if isinstance(event, ev.ProofSubmitted | ev.ProofFinished):
            event = dataclasses.replace(event, job_id=event.job_id.replace("porep-", "porep-1000-4711"))
        elif isinstance(event, ev.BenchRestart):
            event = dataclasses.replace(
                event,
                explanation="reservations that fit total_budget (200 GiB) did not fit the cgroup limit (256 GiB) "
                "beside the memory outside the budget was 158 GiB (RSS − reservations in use)",
            )
        events.append(event)
    return events


@pytest.mark.parametrize("width", [80, 120])
async def test_a_restarts_note_keeps_every_character_wherever_it_wraps(width: int) -> None:
    """After an OOM kill the note wrapped at a fixed 44 columns and the terminal's edge cut a character or more
    off each wrapped line (`… outside the budget was 15` / `GiB` where the evidence says 158 GiB): it wraps in
    the room the other columns leave. At 80 columns, with no room beside the timings, the note was read only by
    scrolling the table sideways: it is shown whole below the table, the highlighted row's, else the last
    row's with one, and the table keeps one line a row."""
    fake = FakeController()
    events = oom_bench_events()
    fake.model.apply_all(events)
    (restart,) = [e for e in events if isinstance(e, ev.BenchRestart)]
    note = str(restart_row(restart, Palette.from_variables({}))[-1])
    assert "158 GiB" in note
    app = make_app(fake)
    async with app.run_test(size=(width, 40)) as pilot:
        screen = current_screen(app, BenchScreen)
        table = screen.query_one("#bench-results", WrappingTable)
        below = screen.query_one("#bench-note", Static)
        await paused_until(pilot, lambda: table.cramped == (width < 120), "the table fitted to the width")

        def shown_below() -> str:
            lines = [strip.text for strip in app.screen._compositor.render_strips()]
            return " ".join(" ".join(lines[below.region.y : below.region.bottom]).split())

        if width >= 120:
            assert table.max_scroll_x == 0, "nothing hidden to the right"
            assert not below.display
            assert " ".join(note.split()) in await last_column_shown(pilot, table)
            return
        assert table.scroll_x == 0 and below.display and below.region.right <= width
        assert shown_below() == "restart 1 · OOM KILL: " + " ".join(note.removeprefix("— ").split())
        assert table.region.height - 1 >= table.row_count, "a row a line: every result in view"
        table.focus()
        table.move_cursor(row=1)  # the lost proof: its own note
        await pilot.pause()
        lost = str(table.get_row_at(1)[-1])
        assert shown_below() == f"porep-1000-47112 · LOST: {' '.join(lost.split())}"
        await pilot.resize_terminal(120, 40)
        await paused_until(pilot, lambda: not table.cramped, "the table fitted to 120 columns")
        assert not below.display and " ".join(note.split()) in await last_column_shown(pilot, table)


def test_snapshot_bench(snap_compare: object) -> None:
    fake = FakeController()
    fake.model.apply_all(bench_events())
    assert snap_compare(make_app(fake), terminal_size=(120, 40))  # type: ignore[operator]


async def test_the_request_fields_go_with_the_benchmark() -> None:
    fake = FakeController()
    app = make_app(fake)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = current_screen(app, BenchScreen)
        screen.query_one("#bench-miner_id", Input).value = "4242"
        screen.query_one("#bench-sector_num", Input).value = "9"
        screen.query_one("#bench-comm_r_old", Input).value = "ab" * 32
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        (request,) = fake.benches
        params = request.params
        assert (params.miner_id, params.sector_num, params.registered_proof) == (4242, 9, None)
        assert params.comm_r_old == b"\xab" * 32 and params.randomness is None
        assert params.flags() == ["--miner-id", "4242", "--sector-num", "9", "--comm-r-old", "ab" * 32]
        screen.query_one("#bench-randomness", Input).value = "abcd"
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert len(fake.benches) == 1  # a short randomness starts nothing


def test_an_engine_bench_is_shown_in_box_time_and_a_lost_proof_without_timings() -> None:
    model = SessionModel()
    model.apply(ev.BenchStarted(T0, "b9", "porep", 2, 1, 0, time_scale=0.02))
    done = ev.ProofFinished(T0 + 1, "b9", "porep-1000-1", "porep", "COMPLETED", gpu_compute_ms=60, wall_ms=1000)
    lost = ev.ProofFinished(T0 + 2, "b9", "porep-1000-2", "porep", "LOST", "the daemon died", answered=False)
    for event in (done, lost, ev.BenchFinished(T0 + 2, "b9", 1, 1, 100.0, 36.0, "failed", 0.02, 60.0, 10.0)):
        model.apply(event)
    bench = model.bench
    assert bench is not None
    palette = Palette.from_variables({})
    assert [str(c) for c in proof_row(1, done, bench, palette)][3:8] == ["0.0", "0.0", "3.0", "0.0", "50.0"]
    assert [str(c) for c in proof_row(2, lost, bench, palette)][3:] == ["—"] * 5 + ["no result: the daemon died"]
    text = summary(bench, T0 + 2, palette).plain
    assert "times in emulated box time (engine time_scale 0.02)" in text
    assert "total time 100.0s (includes 60.0s in killed daemon runs, 10.0s restarting)" in text
    assert "prove Σ avg=3.0s" in text and "36.0 proofs/hour" in text
    assert "completed 1 · failed 1 (1 lost: no answer)" in text
    assert "0 done · 0 failed · 1 lost (benchmark, no answer)" in pipeline_content(model).plain
    assert "(Σ: summed over partitions)" in text


async def test_at_80x24_the_fields_are_labelled_whole_and_the_results_keep_their_rows() -> None:
    """Bordered fields at 80 columns cut the request labels ("randomne") and left the table three rows:
    narrow, the fields are compact and every label and every result row is on screen."""
    fake = FakeController()
    fake.model.apply_all(bench_events())
    app = make_app(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = current_screen(app, BenchScreen)
        assert screen.has_class("-narrow")
        for label in screen.query("#bench-form Label, #bench-request Label"):
            assert label.region.width >= len(str(label.render())) or label.parent is screen.query_one(
                "#bench-input-col"
            ), str(label.render())
        table = screen.query_one("#bench-results", DataTable)
        assert table.region.bottom <= 23 and table.region.height - 1 >= table.row_count  # header + every row
        assert all(field.compact for field in screen.query(Input))
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert not screen.has_class("-narrow") and not any(field.compact for field in screen.query(Input))
