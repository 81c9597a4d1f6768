"""The waterfall's rows follow the timeline (rebuilt per job, only when that job moved)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from cuzktui import events as ev
from cuzktui.model import SessionModel
from cuzktui.ui.widgets.waterfall import WaterfallView
from tests.ui.fakes import T0


class _ViewApp(App[None]):
    def compose(self) -> ComposeResult:
        yield WaterfallView(id="waterfall")


def _timeline(name: str, job: str, partition: int, offset_ms: int, worker: int | None = None) -> ev.TimelineEvent:
    detail = {"partition": str(partition)} if worker is None else {"worker": str(worker), "partition": str(partition)}
    return ev.TimelineEvent(offset_ms, name, job, detail, partition=partition, worker=worker)


async def test_a_partition_row_names_its_gpu_worker_once_the_log_says_it() -> None:
    model = SessionModel()
    model.apply(ev.EngineStarted(T0, True))
    for job in ("porep-1000-1", "porep-1000-2"):
        for p in range(2):
            model.apply(_timeline("SYNTH_START", job, p, 100 + p))
    app = _ViewApp()
    async with app.run_test(size=(100, 20)):
        view = app.query_one(WaterfallView)
        view.show_model(model)
        assert [row.label for row in view.rows] == ["porep-1000-1", "  p0", "  p1", "porep-1000-2", "  p0", "  p1"]
        model.apply(_timeline("GPU_PICKUP", "porep-1000-2", 1, 900, worker=1))
        view.show_model(model)
        assert [row.label for row in view.rows][-1] == "  p1 w1"
