"""The braille plot: where values, limits, gaps, peaks, marks and labels land in the cells."""

from __future__ import annotations

from cuzktui.braille_plot import AXIS, Plot, Row, Series, rasterise, y_label
from cuzktui.units import GiB

BRAILLE = range(0x2800, 0x2900)
# Unicode's braille dots: bit -> (column, row) in the cell.
DOT_OF_BIT = {
    0x01: (0, 0),
    0x02: (0, 1),
    0x04: (0, 2),
    0x40: (0, 3),
    0x08: (1, 0),
    0x10: (1, 1),
    0x20: (1, 2),
    0x80: (1, 3),
}


def cells(row: Row) -> list[tuple[str, int]]:
    return [(ch, owner) for text, owner in row for ch in text]


def plot_cells(plot: Plot) -> list[list[tuple[str, int]]]:
    """The plot area's cells, row by row: the y labels' column and the x axis's row left out."""
    label_width = len(y_label(plot.y_max, plot.y_unit)) + 1
    return [cells(row)[label_width:] for row in rasterise(plot)[:-1]]


def dots(plot: Plot, owner: int | None = None) -> set[tuple[int, int]]:
    """Every braille dot drawn (of ``owner`` only when given), as (dot column, dot row) from the top left."""
    out = set()
    for y, row in enumerate(plot_cells(plot)):
        for x, (ch, cell_owner) in enumerate(row):
            if ord(ch) in BRAILLE and (owner is None or cell_owner == owner):
                bits = ord(ch) - 0x2800
                out |= {(2 * x + dx, 4 * y + dy) for bit, (dx, dy) in DOT_OF_BIT.items() if bits & bit}
    return out


def series(*points: tuple[float, float], marker: str = "*") -> Series:
    return Series(tuple(points), marker)


def steady(t0: int, t1: int, value: float, every: int = 1) -> tuple[tuple[float, float], ...]:
    return tuple((float(t), value) for t in range(t0, t1 + 1, every))


def test_a_value_at_the_top_is_the_top_row_and_zero_the_bottom_one() -> None:
    plot = Plot((series((0.0, 8.0), (100.0, 0.0)),), 0, 100, 8.0, width=22, height=6)
    drawn = dots(plot)
    left = [row for column, row in drawn if column == 0]
    right = [row for column, row in drawn if column == max(c for c, _ in drawn)]
    assert left == [0]  # 8 of 8: the top dot row
    assert right == [4 * 5 - 1]  # 0: the lowest dot row of the 5 plot rows


def test_a_limit_is_a_horizontal_line_on_its_value_across_the_samples() -> None:
    plot = Plot((Series(steady(0, 300, 6.0), "="),), 0, 300, 8.0, width=42, height=9)
    drawn = dots(plot)
    rows = {row for _, row in drawn}
    assert rows == {round((8.0 - 6.0) / 8.0 * (4 * 8 - 1))}
    assert {column for column, _ in drawn} == set(range(2 * 40))  # every dot column of the window


def test_a_line_is_unbroken_even_where_it_is_steep() -> None:
    plot = Plot((series((0.0, 0.0), (10.0, 0.0), (11.0, 8.0), (20.0, 8.0)),), 0, 20, 8.0, width=22, height=6)
    drawn = dots(plot)
    jump = [row for column, row in drawn if column == round(11 / 20 * 39)]
    assert sorted(jump) == list(range(0, 20))  # a whole column of dots from the bottom to the top


def test_a_gap_in_the_samples_is_a_gap() -> None:
    samples = steady(0, 100, 4.0) + steady(200, 300, 4.0)
    plot = Plot((Series(samples, "*"),), 0, 300, 8.0, width=62, height=6)
    columns = {column for column, _ in dots(plot)}
    gap = {c for c in range(2 * 60) if 100 / 300 * 119 + 1 < c < 200 / 300 * 119 - 1}
    assert gap and not columns & gap
    assert columns - gap == set(range(2 * 60)) - gap


def test_samples_sparser_than_the_columns_are_joined_when_evenly_spaced() -> None:
    # One sample every 10 s over 300 s and 120 dot columns: four columns apart, but no gap.
    plot = Plot((Series(steady(0, 300, 4.0, every=10), "*"),), 0, 300, 8.0, width=62, height=6)
    assert {column for column, _ in dots(plot)} == set(range(2 * 60))


def test_a_one_sample_peak_and_dip_survive_a_long_window() -> None:
    samples = [(float(t), 4.0) for t in range(3600)]
    samples[1000] = (1000.0, 8.0)  # the sample before an OOM kill
    samples[2000] = (2000.0, 0.0)
    plot = Plot((Series(tuple(samples), "*"),), 0, 3600, 8.0, width=42, height=6)
    rows = {row for _, row in dots(plot)}
    assert 0 in rows and 4 * 5 - 1 in rows


def test_each_cell_belongs_to_its_series_and_a_shared_cell_to_the_last_drawn() -> None:
    low = Series(steady(0, 100, 2.0), "a")
    high = Series(steady(0, 100, 6.0), "b")
    near = Series(steady(0, 100, 2.0 + 0.1), "c")  # the same cell row as ``low``
    plot = Plot((low, high, near), 0, 100, 8.0, width=22, height=3)
    assert dots(plot, owner=1) and not dots(plot, owner=0)  # ``low`` is under ``near`` in every cell
    assert dots(plot, owner=2) == dots(Plot((low, near), 0, 100, 8.0, width=22, height=3), owner=1)


def test_a_mark_is_a_vertical_line_under_the_series() -> None:
    plot = Plot((Series(steady(0, 100, 4.0), "*"),), 0, 100, 8.0, width=22, height=6, marks=((), (50.0,)))
    rows = plot_cells(plot)
    column = round(50 / 100 * 39) // 2
    assert {row[column] for row in rows if row[column][0] == "│"} == {("│", 2)}  # the second group's owner
    assert sum(row[column][0] == "│" for row in rows) == len(rows) - 1  # the series' cell is not overdrawn


def test_scatter_points_are_their_markers_unjoined() -> None:
    trials = Series(((10.0, 2.0), (90.0, 6.0)), "o", scatter=True)
    rows = plot_cells(Plot((trials,), 0, 100, 8.0, width=22, height=6, x_unit="GiB"))
    drawn = [(x, y) for y, row in enumerate(rows) for x, (ch, _) in enumerate(row) if ch != " "]
    assert len(drawn) == 2 and all(rows[y][x] == ("o", 0) for x, y in drawn)


def test_plain_mode_draws_each_series_with_its_marker_in_ascii() -> None:
    plot = Plot(
        (Series(steady(0, 100, 2.0), "*"), Series(steady(0, 100, 6.0), "=")),
        0,
        100,
        8.0,
        width=22,
        height=6,
        plain=True,
        marks=((50.0,),),
    )
    text = "\n".join("".join(t for t, _ in row) for row in rasterise(plot))
    assert text.isascii()
    assert {ch for row in plot_cells(plot) for ch, _ in row} == {" ", "*", "=", "|"}


def test_sizes_label_the_y_axis_and_elapsed_time_the_x_axis() -> None:
    plot = Plot((Series(steady(1000, 1300, 40.0), "*"),), 1000.0, 1300.0, 80.0, width=40, height=9, y_unit="GiB")
    rows = rasterise(plot)
    assert all(sum(len(text) for text, _ in row) == 40 for row in rows)
    labels = ["".join(t for t, _ in row)[:7] for row in rows[:-1]]
    assert labels[0] == "80 GiB " and labels[-1] == "     0 " and "40 GiB " in labels
    assert y_label(0.5, "GiB") == "512 MiB" and y_label(50, "%") == "50%"
    axis = "".join(t for t, _ in rows[-1])
    assert axis.split() == ["0s", "2m30s", "5m"] and axis.endswith("5m") and axis[7:9] == "0s"
    assert rows[-1][0][1] == AXIS


def test_a_numeric_x_axis_says_its_unit_at_the_end() -> None:
    plot = Plot((Series(((0.0, 1.0), (300.0, 1.0)), "*"),), 0, 300, 8.0, width=40, height=5, x_unit="GiB")
    assert "".join(t for t, _ in rasterise(plot)[-1]).split() == ["0", "150", "300", "GiB"]


def test_no_room_no_plot() -> None:
    assert rasterise(Plot((Series(steady(0, 10, 1.0), "*"),), 0, 10, 8.0, width=3, height=5)) == ()
    assert rasterise(Plot((Series(steady(0, 10, 1.0), "*"),), 0, 10, 8.0, width=30, height=1)) == ()


def test_values_beyond_the_axis_are_clipped_to_its_ends() -> None:
    plot = Plot((series((0.0, 100 * GiB), (50.0, -1.0), (100.0, 4.0)),), 0, 100, 8.0, width=22, height=6)
    assert {row for _, row in dots(plot)} >= {0, 4 * 5 - 1}
