"""The memory chart rebuilds its plotext figure only when what it draws changed."""

from __future__ import annotations

import pytest
from plotext._figure import _figure_class
from textual.app import App, ComposeResult

from cuzktui.ui.widgets import charts
from cuzktui.ui.widgets.charts import Chart, ChartSpec, Line
from tests.ui.fakes import T0


class _ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Chart(id="chart")


def _spec(points: tuple[tuple[float, float], ...]) -> ChartSpec:
    line = Line("RSS", "mem-rss", points, "*", f"{points[-1][1]:.1f} GiB")
    return ChartSpec("Memory GiB", (line,), T0, T0 + 3600, 64.0, "GiB")


async def test_a_sample_that_moves_no_column_reuses_the_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[int] = []

    class Counting(_figure_class):  # type: ignore[misc]
        def build(self) -> str:
            builds.append(1)
            return str(super().build())

    monkeypatch.setattr(charts, "Figure", Counting)
    app = _ChartApp()
    async with app.run_test(size=(80, 20)):
        chart = app.query_one(Chart)
        first = ((T0, 40.0), (T0 + 100, 42.0))
        chart.show(_spec(first))
        chart.render_line(0)
        assert len(builds) == 1
        # One second later, lower than the column's peak: an hour over ~150 braille columns puts it in
        # the same column, whose highest sample is what is drawn. The legend's value moves, the plot not.
        chart.show(_spec((*first, (T0 + 101, 41.0))))
        assert "41.0 GiB" in chart.rendered().plain
        assert len(builds) == 1
        # A new peak in that column is drawn.
        chart.show(_spec((*first, (T0 + 101, 50.0))))
        chart.render_line(0)
        assert len(builds) == 2
