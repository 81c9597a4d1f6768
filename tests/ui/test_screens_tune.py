"""Tune screen: the form starts a search, the trials table and the scatter follow the controller's
snapshot, the best config is applied through the confirmation (after config check); replay and
attach refuse a search; and a short real search on the engine, driven from the screen."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Label, Select, Static

from cuzktui import events as ev
from cuzktui.config import ConfigDocument
from cuzktui.controller import ControllerError, TuneBest, TuneRequest, TuneSnapshot, TuneTrialRow
from cuzktui.live import AttachTarget, LiveController, LiveOptions
from cuzktui.replay import ReplayController
from cuzktui.session import iter_session_events
from cuzktui.supervisor import engine_program
from cuzktui.tune import load_state, tier_line
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.modals import ConfirmModal, QuitScreen
from cuzktui.ui.screens.tune import TuneScreen, scatter_spec
from cuzktui.ui.widgets.charts import Chart
from cuzktui.units import GiB
from tests.conftest import fast_engine_config, require_engine
from tests.ui.conftest import settle
from tests.ui.fakes import FakeController, ScreenApp
from tests.ui.test_live_engine import Live, launched_pids, wait_gone

LIMIT = 256 * GiB
BEST_CHANGES = (("memory.total_budget", "196GiB"), ("pipeline.max_parallel_synthesis", 9))


def row(
    index: int, status: str, changes: tuple[str, ...], rate: float | None, peak_gib: int | None, **kw: object
) -> TuneTrialRow:
    peak = None if peak_gib is None else peak_gib * GiB
    fields: dict[str, object] = dict(
        index=index, status=status, changes=changes, proofs_per_hour=rate, peak_rss_bytes=peak, predicted=False,
        limit_bytes=LIMIT, peak_share=None if peak is None else peak / LIMIT, oom_kills=0,
        price_per_proof=None if not rate else 4.0 / rate, completed=12 if status == "completed" else 0, note="",
    )  # fmt: skip
    fields.update(kw)
    return TuneTrialRow(**fields)  # type: ignore[arg-type]


def search_snapshot(state: str = "running", **best: object) -> TuneSnapshot:
    """A 256 GiB box mid-search: the starting config OOM-killed, two completed, one skipped on the model's
    word, one stopped early, the sixth running."""
    budget, synth = 'memory.total_budget = "196GiB"', "pipeline.max_parallel_synthesis = 9"
    rows = (
        row(1, "oom", (), 0.0, 262, oom_kills=1, price_per_proof=None,
            note="OOM-killed: memory cgroup oom_kill 0 → 1"),
        row(2, "completed", (budget,), 36.0, 201, spread=0.031),
        row(3, "completed", (budget, synth), 47.9, 214, spread=0.024),
        row(4, "skipped", (budget, synth, "pipeline.max_gpu_queue_depth = 8"), None, 268, predicted=True,
            peak_share=None, price_per_proof=None, note="predicted peak RSS 268 GiB > limit 256 GiB"),
        row(5, "stopped", (budget, synth, "concurrency = 8"), 0.0, 190, price_per_proof=None, completed=5,
            note="stopped early: slower than 1.5 × the best"),
        row(6, "running", ('memory.total_budget = "224GiB"', synth), None, 230, completed=5,
            note="5 of 12 proofs so far"),
    )  # fmt: skip
    top = TuneBest(3, 47.9, None, 214 / 256, 6, BEST_CHANGES, ())
    return TuneSnapshot(
        state=state,  # type: ignore[arg-type]
        kind="porep",
        count=12,
        directory=Path("/home/op/.local/state/cuzk-tui/sessions/2026-01-01-engine/tune-20260101-000000-porep"),
        limit_bytes=LIMIT,
        time_basis="the modelled box's time (engine time_scale)",
        trials_run=5,
        max_trials=12,
        trials=rows if state == "running" else rows[:-1],
        best=dataclasses.replace(top, **best),  # type: ignore[arg-type]
        message="" if state == "running" else "the 12 trials asked for have run",
        tier=tier_line(LIMIT, "porep"),
        verdict="the starting config did not complete safely (trial 1: oom); trial 3: 47.9 ± 2.4% proofs/hour",
    )


def make_app(fake: FakeController) -> ScreenApp:
    return ScreenApp(lambda: TuneScreen(fake), "tune")


def screen_of(app: ScreenApp | CuzkApp) -> TuneScreen:
    screen = app.screen
    assert isinstance(screen, TuneScreen)
    return screen


def cells(table: DataTable[object], index: int) -> list[str]:
    return [str(cell) for cell in table.get_row_at(index)]


async def test_the_request_fields_unfold_and_go_with_the_search(tmp_path: Path) -> None:
    """A C1 from miner 1234, or a PoSt with its own randomness: the fields bench offers, folded below the
    form (one line) until the operator opens them; what they say goes to every trial, checked first."""
    fake = FakeController()
    app = make_app(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        miner = screen.query_one("#tune-miner_id", Input)
        assert not miner.region  # folded: not on the screen
        await pilot.click("#tune-request-options CollapsibleTitle")
        await settle(pilot)
        assert miner.region, "unfolded, the fields are shown"
        screen.query_one("#tune-kind", Select).value = "wpost"
        miner.value = "1234"
        screen.query_one("#tune-randomness", Input).value = "ab" * 32
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        (request,) = fake.tunes
        assert (request.kind, request.params.miner_id, request.params.randomness) == ("wpost", 1234, bytes([0xAB] * 32))
        assert request.params.flags() == ["--miner-id", "1234", "--randomness", "ab" * 32]
        screen.query_one("#tune-randomness", Input).value = "abcd"  # not 32 bytes: said, nothing started
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert len(fake.tunes) == 1
        assert any("randomness" in n.message for n in app._notifications)


async def test_start_sends_the_form_and_cancel_cancels() -> None:
    fake = FakeController()
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        screen.query_one("#tune-kind", Select).value = "snap"
        for name, value in (("count", "6"), ("concurrency", "3"), ("trials", "4"), ("budget", "90m"), ("price", "2.5")):
            screen.query_one(f"#tune-{name}", Input).value = value
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert fake.tunes == [TuneRequest("snap", 6, 3, 4, "90m", 2.5, None)]
        await pilot.press("ctrl+x")  # nothing runs (the fake's snapshot is None): nothing to cancel
        await app.workers.wait_for_complete()
        assert fake.tune_cancels == 0
        fake.tune = search_snapshot()
        await pilot.press("ctrl+x")
        await app.workers.wait_for_complete()
        assert fake.tune_cancels == 1
        await pilot.press("ctrl+s")  # a second search while one runs is refused before the controller
        await app.workers.wait_for_complete()
        assert len(fake.tunes) == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [("count", "0", "count must be"), ("trials", "0", "trials must be"), ("price", "-1", "$ per hour must be")],
)
async def test_invalid_inputs_start_nothing(name: str, value: str, message: str) -> None:
    fake = FakeController()
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen_of(app).query_one(f"#tune-{name}", Input).value = value
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert fake.tunes == []
        assert any(message in str(n.message) for n in app._notifications)


async def test_the_table_and_the_scatter_follow_the_search_as_trials_end() -> None:
    fake = FakeController()
    fake.tune = search_snapshot()
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        table = screen.query_one(DataTable)
        assert table.row_count == 6
        assert cells(table, 2)[:9] == ["3*", "completed", "47.9", "2.4%", "214", "256", "84%", "0", "0.084"]
        assert [str(column.label) for column in table.columns.values()][6] == "peak/limit"
        assert cells(table, 3)[3:5] == ["-", "~268"] and "predicted peak RSS 268 GiB" in cells(table, 3)[9]
        assert (
            cells(table, 5)[:5] == ["6", "running", "-", "-", "230"] and "5 of 12 proofs so far" in cells(table, 5)[9]
        )
        status = str(screen.query_one("#tune-status", Static).render())
        assert "searching · porep × 12 per trial · 5 of 12 trials run · limit 256 GiB" in status
        assert "best: trial 3, 47.9 proofs/hour, peak RSS 84% of the limit, at benchmark concurrency 6" in status
        assert "passes config check; a applies 2 change(s)" in status
        assert "the starting config did not complete safely (trial 1: oom); trial 3: 47.9 ± 2.4%" in status
        # The running trial completes faster than trial 3: its row is replaced, the star moves.
        done = row(6, "completed", ('memory.total_budget = "224GiB"',), 52.0, 236)
        best = TuneBest(6, 52.0, None, 236 / 256, 6, (("memory.total_budget", "224GiB"),), ())
        fake.tune = dataclasses.replace(fake.tune, trials=(*fake.tune.trials[:-1], done), best=best, trials_run=6)
        screen.refresh_from_model()
        await pilot.pause()
        assert table.row_count == 6
        assert cells(table, 2)[0] == "3" and cells(table, 5)[:3] == ["6*", "completed", "52.0"]
        spec = scatter_spec(fake.tune)
        lines = {line.label: line.points for line in spec.lines}
        assert sorted(lines["completed"]) == [(201.0, 36.0), (214.0, 47.9), (236.0, 52.0)]
        assert lines["best"] == ((236.0, 52.0),)
        assert lines["OOM-killed"] == ((262.0, 0.0),)  # skipped and stopped trials are not points
        assert [x for x, _ in lines["limit"]] == [256.0, 256.0] and spec.x_unit == "GiB"
        chart = screen.query_one(Chart)
        assert any("limit" in chart.render_line(y).text for y in range(chart.size.height))


async def test_no_config_beyond_the_noise_is_said_and_nothing_is_applied() -> None:
    fake = FakeController()
    verdict = "no config beat the starting one: trial 3's 47.9 ± 9.0% against the start's … is within the noise"
    alone = "left alone, as they have no effect with pipeline.enabled = false — pipeline.max_gpu_queue_depth: …"
    fake.tune = dataclasses.replace(search_snapshot("finished"), best=None, verdict=verdict, left_alone=alone)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        status = str(screen_of(app).query_one("#tune-status", Static).render())
        assert verdict in status and alone in status and "best:" not in status
        await pilot.press("a")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmModal) and fake.applied == []
        assert any(f"no best config to apply: {verdict}" in str(n.message) for n in app._notifications)


async def test_at_80x24_every_field_is_on_screen_with_its_label() -> None:
    """At 80 columns "$ per hour" and the input file were past the screen's edge: the fields lose their
    borders and the input file takes a row of its own; the table and the scatter keep rows to show. The
    status (with the verdict, the tier and the directory, 11 lines there) scrolls, every line reachable by
    the keys, rather than pushing the table and the scatter off the screen."""
    fake = FakeController()
    fake.tune = search_snapshot()
    app = make_app(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = screen_of(app)
        for column in screen.query("#tune-form > Vertical"):
            label = str(column.query_one(Label).render())
            field = column.query_one("Input, Select")
            assert field.region.right <= 80 and field.region.width >= 10, label
            assert column.query_one(Label).region.width >= len(label), label
        assert screen.query_one("#tune-table").region.height >= 3
        assert screen.query_one("#tune-scatter").region.bottom <= 23
        box = screen.query_one("#tune-status-box")
        assert box.allow_focus()
        box.focus()
        await pilot.press("end")
        await pilot.wait_for_scheduled_animations()  # the scroll to the end is animated: not a message to wait on
        await pilot.pause()
        lines = [strip.text.strip() for strip in app.screen._compositor.render_strips()]
        shown = lines[box.region.y : box.region.bottom]
        assert f"trials in{fake.tune.directory}" in "".join(shown)
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert not screen.has_class("-narrow") and not any(field.compact for field in screen.query(Input))
        assert not box.allow_focus()  # all of the status in view: no stop on the way to the table


def test_snapshot_tune(snap_compare: object) -> None:
    fake = FakeController()
    fake.tune = search_snapshot()
    app = CuzkApp(fake, poll_interval=1000)  # the app's theme: the chart's colours

    async def show_tune(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("8")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=show_tune)  # type: ignore[operator]


async def test_apply_best_asks_then_applies_its_changes_through_the_controller() -> None:
    fake = FakeController(config={"memory.total_budget": "auto"})
    fake.tune = search_snapshot()
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")  # while the search runs it owns the daemon
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmModal) and fake.applied == []
        fake.tune = search_snapshot("finished")
        await pilot.press("a")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        detail = str(modal.detail)
        assert 'memory.total_budget: "auto" → "196GiB"' in detail and "concurrency 6" in detail
        await pilot.press("y")
        await app.workers.wait_for_complete()
        assert fake.applied == [dict(BEST_CHANGES)]


async def test_a_best_config_that_fails_config_check_is_not_applied() -> None:
    fake = FakeController()
    fake.tune = search_snapshot("finished", check_errors=("memory.total_budget: below the PoRep floor",))
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmModal) and fake.applied == []
        assert any("fails config check" in str(n.message) for n in app._notifications)


async def test_quitting_during_a_search_says_it_stops_and_how_to_resume_it() -> None:
    fake = FakeController(running=False)
    fake.tune = search_snapshot()
    # The program as the operator ran it, not on PATH (the README's install): the resume line pastes whole.
    app = CuzkApp(fake, poll_interval=1000, command=("/home/op/cuzk tui/.venv/bin/cuzk-tui",))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("8", "q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        (item,) = app.screen.running
        resume = f"'/home/op/cuzk tui/.venv/bin/cuzk-tui' tune --resume {fake.tune.directory}"
        assert "a knob search: it stops with the TUI" in item and f"({resume} continues it)" in item


async def test_replay_and_attach_refuse_a_search_saying_why(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    log.write_text("")
    with pytest.raises(ControllerError, match="a replay is read-only"):
        await ReplayController(log).start_tune(TuneRequest("porep", 2, 1))
    attached = LiveController(LiveOptions(program=None, attach=AttachTarget("127.0.0.1:9820")))
    with pytest.raises(ControllerError, match="not on an attached one"):
        await attached.start_tune(TuneRequest("porep", 2, 1))
    assert attached.tune_snapshot() is None
    # The replay screen offers no search at all.
    app = make_app(FakeController(read_only=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert not screen_of(app).check_action("start", ())
        assert all(i.disabled for i in screen_of(app).query(Input))


# --------------------------------------------------------------------------------------------
# A short real search on the engine, from the screen
# --------------------------------------------------------------------------------------------


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cz-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def live(tmp_path: Path, short_dir: Path) -> AsyncIterator[Live]:
    require_engine()
    config_file = tmp_path / "cuzk.toml"
    # A 256 GiB box, at 1/1024 of its bytes: the engine process's own RSS (tens of MB) stays a plausible
    # base in the box's bytes (at the fast config's 1/65536 it alone would be terabytes), and peaks take
    # at most 256 MB here.
    config = ConfigDocument.parse(fast_engine_config(short_dir))
    # Two synthesis workers (engine.rs: max(2, min(budget / 14 GiB, max_parallel))) against memcheck's 7:
    # its recommendation, trial 2, is clearly faster, so there is a best config to apply. At 1/200 of the
    # box's time (not the fast config's 1/2000) the modelled work, not this machine's load, sets the rates.
    config.update(
        {
            "engine.mem_total": "256GiB",
            "engine.memory_scale": 1 / 1024,
            "engine.time_scale": 0.005,
            "pipeline.max_parallel_synthesis": 2,
        }
    )
    config_file.write_text(config.text())
    session_dir = tmp_path / "session"
    options = LiveOptions(
        program=engine_program(), config_file=config_file, session_dir=session_dir, sample_interval=0.5
    )
    controller = LiveController(options)
    app = CuzkApp(controller, poll_interval=0.1)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            yield Live(app, pilot, controller, session_dir, config_file)
    finally:
        with contextlib.suppress(Exception):
            await controller.shutdown(stop_daemon=True)
        # The TUI's daemons and every trial's (each trial's benchmark session records its launches).
        trials = [p for p in session_dir.glob("tune-*/trial-*") if p.is_dir()]
        sessions = [session_dir, *trials] if session_dir.exists() else []
        survivors = wait_gone([pid for s in sessions for pid in launched_pids(s)], 10)
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not survivors, f"daemons left running: {survivors}"


@pytest.mark.slow
async def test_a_short_search_runs_from_the_screen_then_its_best_is_applied(live: Live) -> None:
    app, controller = live.app, live.controller
    model = controller.model
    await live.until_ready()
    await live.show("8", TuneScreen)
    screen = screen_of(app)
    # Four proofs one at a time: four rounds, enough for each trial to measure its own spread well. Four
    # trials: the start, a candidate, and both run again (a config is better only once it is confirmed).
    for name, value in (("count", "4"), ("concurrency", "1"), ("trials", "4")):
        await live.type_into(screen.query_one(f"#tune-{name}", Input), value)
    # A miner's own id, from the request fields (folded until opened): every trial proves with it.
    await live.pilot.click("#tune-request-options CollapsibleTitle")
    await live.type_into(screen.query_one("#tune-miner_id", Input), "1234")
    runs = model.daemon.runs
    await live.pilot.press("ctrl+s")
    await live.leave_field()
    await live.until(lambda: controller.tune_snapshot() is not None, "the search started", 30)
    await live.until(
        lambda: "handed over to the knob search" in app.sub_title, "the header says the daemon is handed over", 30
    )

    def ended() -> bool:
        snap = controller.tune_snapshot()
        return snap is not None and snap.state != "running"

    await live.until(ended, "the 4-trial search ended", 240)
    snap = controller.tune_snapshot()
    assert snap is not None and snap.state == "finished", snap
    ran = [r for r in snap.trials if r.status != "skipped"]
    assert len(ran) == 4 and all(r.status == "completed" for r in ran), snap.trials
    assert all(r.proofs_per_hour and r.peak_rss_bytes for r in ran)
    # Each trial is a benchmark session of its own, and the search is resumable from its directory.
    search, args = load_state(snap.directory)
    assert [t.index for t in search.trials] == [r.index for r in snap.trials] and args["engine"] is True
    assert args["request"] == ["--miner-id", "1234"]  # `tune --resume` proves as this search did
    for r in ran:
        events = list(iter_session_events(snap.directory / f"trial-{r.index:02d}"))
        finished = [e for e in events if isinstance(e, ev.BenchFinished)]
        assert [(e.completed, e.outcome) for e in finished] == [(4, "completed")]
        submitted = {e.job_id for e in events if isinstance(e, ev.ProofSubmitted)}
        assert len(submitted) == 4 and all(job.startswith("porep-1234-") for job in submitted), submitted
    table = screen.query_one(DataTable)
    await live.until(lambda: table.row_count == len(snap.trials), "the table shows every trial", 10)
    # The search gave the daemon back: the TUI relaunched it with the running config.
    await live.until_ready(runs_above=runs)
    assert snap.best is not None and not snap.best.check_errors
    # Pipeline mode: every knob acts; the second trial beat the first beyond the noise, and again when both
    # ran a second time.
    assert snap.left_alone is None and "trials 2 and 4 beat the starting config beyond the noise" in snap.verdict, (
        snap.verdict
    )
    changes = dict(snap.best.changes)
    assert changes, snap.trials
    configs = len(model.configs)
    await live.pilot.press("a")
    await live.until(lambda: isinstance(app.screen, ConfirmModal), "the apply confirmation", 10)
    await live.pilot.press("y")
    await live.until(lambda: len(model.configs) > configs, "the best config applied", 60)
    values = controller.config_values()
    assert {name: values[name] for name in changes} == changes
