"""Knobs screen: generated fields, inline validation, diff, Apply with confirmation, Revert, fill."""

from __future__ import annotations

from textual.widgets import Input, Static, Switch

from cuzktui import events as ev
from cuzktui.figures import apply_stage
from cuzktui.knobs import KNOBS
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.modals import ConfirmModal
from cuzktui.ui.screens.knobs import KnobField, KnobsScreen
from tests.ui.conftest import paused_until
from tests.ui.fakes import T0, FakeController, ScreenApp, current_screen

RUNNING = {"memory.total_budget": "200GiB", "pipeline.max_parallel_synthesis": 12}


def make_app(fake: FakeController) -> ScreenApp:
    return ScreenApp(lambda: KnobsScreen(fake), "knobs")


async def test_a_field_for_every_knob_with_running_values_and_marks() -> None:
    fake = FakeController(config=RUNNING)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)):
        screen = current_screen(app, KnobsScreen)
        assert [f.knob.name for f in screen.fields] == [k.name for k in KNOBS]
        assert screen.field("memory.total_budget").query_one(Input).value == "200GiB"
        assert screen.field("scheduler.sort_by_type").query_one(Switch).value is True
        summary = screen.field("synthesis.partition_workers").query_one(".knob--summary", Static)
        assert "ignored by the daemon" in str(summary.render())
        summary = screen.field("engine.memory_scale").query_one(".knob--summary", Static)
        assert "ENGINE ONLY" in str(summary.render())
        assert screen.changes() == {}


async def test_invalid_value_shows_the_reason_as_typed_and_blocks_apply() -> None:
    fake = FakeController(config=RUNNING)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        field = screen.field("memory.total_budget")
        field.query_one(Input).value = "1.5GiB"
        await pilot.pause()
        problem = field.query_one(".knob--problem", Static)
        assert problem.has_class("-error")
        assert "1.5GiB" in str(problem.render())
        assert field.has_error
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, ConfirmModal)
        assert fake.applied == []
        field.query_one(Input).value = "150GiB"
        await pilot.pause()
        assert not problem.has_class("-error")


async def test_budget_floors_and_monolithic_mode_show_as_config_check_says() -> None:
    fake = FakeController(config=RUNNING)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        budget = screen.field("memory.total_budget")
        problem = budget.query_one(".knob--problem", Static)
        budget.query_one(Input).value = "64GiB"
        await pilot.pause()
        assert problem.has_class("-warning") and "can never prove WindowPoSt" in str(problem.render())
        budget.query_one(Input).value = "512MiB"
        await pilot.pause()
        assert problem.has_class("-error") and "below every proof kind's floor" in str(problem.render())
        # Monolithic mode reserves no budget: the floor goes, the budget and the pipeline-only knobs are
        # marked inert.
        screen.field("pipeline.enabled").query_one(Switch).value = False
        await pilot.pause()
        assert not problem.has_class("-error") and "floor" not in str(problem.render())
        for name in ("memory.total_budget", "pipeline.max_parallel_synthesis", "pipeline.max_gpu_queue_depth",
                     "gpus.gpu_workers_per_device", "scheduler.max_batch_size"):  # fmt: skip
            line = screen.field(name).query_one(".knob--problem", Static)
            assert "no effect with pipeline.enabled = false" in str(line.render())


async def test_apply_confirms_then_sends_only_changed_keys() -> None:
    fake = FakeController(config=RUNNING)
    fake.model.apply(ev.DaemonLaunched(T0, "engine", 1, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    stages: list[str] = []
    fake.on_apply = lambda f: stages.append(apply_stage(f.model, 1))
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        screen.field("pipeline.max_parallel_synthesis").query_one(Input).value = "8"
        screen.field("scheduler.sort_by_type").query_one(Switch).value = False
        diff = screen.query_one("#knobs-diff", Static)
        # The edits reach the screen as messages bubbling up from the fields: one pause was not always enough.
        await paused_until(pilot, lambda: "12 → 8" in str(diff.render()), "the form's diff")
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert fake.applied == [{"pipeline.max_parallel_synthesis": 8, "scheduler.sort_by_type": False}]
        assert stages == ["saving the config and draining proofs in flight"]
        # The applied values are the running ones now.
        assert screen.changes() == {}


async def test_after_an_apply_the_keys_switch_screens_instead_of_typing_into_the_field() -> None:
    """ctrl+s, y: the edited field kept the focus, and the next screen keys were typed into it
    ('200GiB15' is not a size). The apply leaves the field; a declined one goes back to it."""
    fake = FakeController(config=RUNNING)
    app = CuzkApp(fake, poll_interval=1000)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("3")
        await pilot.pause()
        editor = current_screen(app, KnobsScreen).field("memory.total_budget").query_one(Input)
        editor.focus()
        editor.value = "180GiB"
        await pilot.pause()
        await pilot.press("ctrl+s", "n")
        await pilot.pause()
        assert app.focused is editor, "declined: still editing"
        await pilot.press("ctrl+s", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert fake.applied == [{"memory.total_budget": "180GiB"}]
        assert not isinstance(app.focused, Input)
        await pilot.press("1")
        await pilot.pause()
        assert type(app.screen).__name__ == "DashboardScreen" and editor.value == "180GiB"


async def test_at_80_columns_the_status_line_says_all_of_what_applying_does() -> None:
    """The line above the form was one row high and cut what an apply does at 80 columns."""
    fake = FakeController(config=RUNNING)
    app = make_app(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = current_screen(app, KnobsScreen)
        screen.field("memory.total_budget").query_one(Input).value = "180GiB"
        await pilot.pause()
        status = screen.query_one("#knobs-status", Static)
        lines = [strip.text for strip in app.screen._compositor.render_strips()][status.region.y : status.region.bottom]
        assert "1 change · apply = save, drain, restart (SRS reloads on the next proof)" in " ".join(
            " ".join(lines).split()
        )


async def test_declined_apply_changes_nothing_and_errors_are_notified() -> None:
    fake = FakeController(config=RUNNING)
    fake.apply_error = RuntimeError("daemon did not come back")
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        screen.field("pipeline.max_parallel_synthesis").query_one(Input).value = "8"
        await pilot.pause()
        await pilot.press("ctrl+s", "n")
        assert fake.applied == [] and not isinstance(app.screen, ConfirmModal)
        await pilot.press("ctrl+s", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("daemon did not come back" in str(n.message) for n in app._notifications)
        assert screen.changes() == {"pipeline.max_parallel_synthesis": 8}


async def test_revert_resets_the_form_and_fill_prefills_without_applying() -> None:
    fake = FakeController(config=RUNNING)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        screen.fill({"memory.total_budget": "150GiB", "gpus.gpu_threads": 32})
        await pilot.pause()
        assert screen.changes() == {"memory.total_budget": "150GiB", "gpus.gpu_threads": 32}
        assert fake.applied == []
        await pilot.press("ctrl+r")
        assert screen.changes() == {}
        assert screen.field("memory.total_budget").query_one(Input).value == "200GiB"


async def test_read_only_disables_fields_and_hides_apply() -> None:
    fake = FakeController(config=RUNNING, read_only=True)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        assert all(e.disabled for f in screen.query(KnobField) for e in f.query("Input, Switch"))
        assert screen.check_action("apply", ()) is False
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, ConfirmModal)


async def test_config_applied_elsewhere_updates_untouched_fields() -> None:
    fake = FakeController(config=RUNNING)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        screen.field("pipeline.max_parallel_synthesis").query_one(Input).value = "10"
        await pilot.pause()
        # A benchmark's OOM recovery lowered the budget and restarted the daemon.
        fake.values["memory.total_budget"] = "150GiB"
        fake.values["pipeline.max_parallel_synthesis"] = 6
        fake.model.apply(ev.ConfigApplied(T0, 2, "/s/config/v002.toml", ("memory.total_budget",)))
        screen.refresh_from_model()
        await pilot.pause()
        assert screen.field("memory.total_budget").query_one(Input).value == "150GiB"
        assert screen.changes() == {"pipeline.max_parallel_synthesis": 10}


def test_snapshot_knobs(snap_compare: object) -> None:
    fake = FakeController(config=RUNNING)

    async def edit(pilot: object) -> None:
        app = pilot.app  # type: ignore[attr-defined]
        screen = current_screen(app, KnobsScreen)
        screen.field("memory.total_budget").query_one(Input).value = "1.5GiB"
        screen.field("pipeline.max_parallel_synthesis").query_one(Input).value = "8"
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(make_app(fake), terminal_size=(120, 40), run_before=edit)  # type: ignore[operator]


async def test_apply_during_a_benchmark_says_the_controller_refuses_and_asks_nothing() -> None:
    fake = FakeController(config=RUNNING)
    fake.bench_is_running = True
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = current_screen(app, KnobsScreen)
        screen.field("pipeline.max_parallel_synthesis").query_one(Input).value = "8"
        await pilot.pause()
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, ConfirmModal) and fake.applied == []
        assert any("nothing is applied until it ends" in str(n.message) for n in app._notifications)


async def test_boolean_knobs_say_true_or_false_and_follow_the_switch() -> None:
    app = make_app(FakeController(config=RUNNING))
    async with app.run_test(size=(120, 40)) as pilot:
        field = current_screen(app, KnobsScreen).field("scheduler.sort_by_type")
        word = field.query_one(".knob--bool", Static)
        assert str(word.render()) == "true"
        field.query_one(Switch).value = False
        await pilot.pause()
        assert str(word.render()) == "false"


async def test_at_80x24_every_value_and_its_help_are_on_screen_width() -> None:
    """Beside the changes panel an 80-column form had room for its labels only: narrow, the changes
    go under the form and each field's value and help get the width (no horizontal scroll)."""
    app = make_app(FakeController(config=RUNNING))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = current_screen(app, KnobsScreen)
        form = screen.query_one("#knobs-form")
        assert form.region.width >= 76 and form.max_scroll_x == 0
        side = screen.query_one("#knobs-side")
        assert side.region.y >= form.region.bottom and side.region.height > 0
        field = screen.field("memory.total_budget")
        editor = field.query_one(Input)
        assert editor.region.width >= 30 and editor.region.right <= 80
        editor.focus()
        await pilot.pause()
        help_line = field.query_one(".knob--help", Static)
        assert help_line.display and help_line.region.width >= 60
        assert field.knob.help in str(help_line.render())
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert not screen.has_class("-narrow") and side.region.x > form.region.right - 1
