"""A chart repaints only the columns a new spec changed: over SSH a new sample costs a column, not the chart."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region

from cuzktui.ui.widgets.charts import Chart, ChartSpec, Line
from tests.ui.fakes import T0


class _ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Chart(id="chart")


def _spec(points: tuple[tuple[float, float], ...]) -> ChartSpec:
    line = Line("RSS", "mem-rss", points, "*", f"{points[-1][1]:.1f} GiB")
    return ChartSpec("Memory", (line,), T0, T0 + 3600, 64.0, "GiB")


def _recording(chart: Chart, monkeypatch: pytest.MonkeyPatch) -> list[Region | None]:
    """The regions the chart asks to repaint from now on (None: the whole chart)."""
    asked: list[Region | None] = []
    refresh = chart.refresh

    def recorded(*regions: Region, **kwargs: bool) -> Chart:
        asked.extend(regions or [None])
        return refresh(*regions, **kwargs)

    monkeypatch.setattr(chart, "refresh", recorded)
    return asked


async def test_a_sample_that_moves_no_column_repaints_the_legend_only(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _ChartApp()
    async with app.run_test(size=(80, 20)) as pilot:
        chart = app.query_one(Chart)
        first = ((T0, 40.0), (T0 + 100, 42.0))
        chart.show(_spec(first))
        await pilot.pause()
        asked = _recording(chart, monkeypatch)
        # One second later, lower than the column's peak: an hour over ~140 braille columns puts it in
        # the same column, whose highest sample is what is drawn. The legend's value moves, the plot not.
        chart.show(_spec((*first, (T0 + 101, 41.0))))
        assert "41.0 GiB" in chart.render_line(0).text
        assert asked and all(region is not None and region.y == 0 and region.height == 1 for region in asked)


async def test_a_new_peak_repaints_its_column_not_the_chart(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _ChartApp()
    async with app.run_test(size=(80, 20)) as pilot:
        chart = app.query_one(Chart)
        first = tuple((T0 + t, 40.0) for t in range(0, 1200, 10))
        chart.show(_spec(first))
        await pilot.pause()
        before = [chart.render_line(y).text for y in range(chart.size.height)]
        asked = _recording(chart, monkeypatch)
        chart.show(_spec((*first, (T0 + 1200, 60.0))))
        after = [chart.render_line(y).text for y in range(chart.size.height)]
        plot_rows = [y for y in range(1, len(after)) if before[y] != after[y]]
        assert plot_rows, "the new peak is drawn"
        repainted = [region for region in asked if region is not None and region.y in plot_rows]
        assert len(repainted) == len(plot_rows) and None not in asked
        assert all(region.width <= 3 for region in repainted)  # the rise, in the new sample's column


async def test_a_new_theme_repaints_the_chart_in_its_colours() -> None:
    app = _ChartApp()
    async with app.run_test(size=(80, 20)) as pilot:
        app.theme = "textual-dark"
        chart = app.query_one(Chart)
        chart.show(_spec(((T0, 40.0), (T0 + 100, 42.0))))
        await pilot.pause()
        dark = chart.render_line(5)
        app.theme = "textual-light"
        await pilot.pause()
        light = chart.render_line(5)
        assert {s.style.bgcolor for s in light if s.style} == {chart.rich_style.bgcolor}
        assert {s.style.bgcolor for s in dark if s.style} != {chart.rich_style.bgcolor}
