"""Which span each column of a waterfall row shows, at any number of spans."""

from __future__ import annotations

import random

from cuzktui.waterfall_layout import column_owners, dominants


def test_each_column_shows_the_interval_covering_most_of_it() -> None:
    intervals = [(0.0, 2.6, "synth"), (2.6, 2.6, "queue"), (2.6, 6.0, "gpu"), (7.5, 7.5, "queue")]
    # Columns of 1 s from 0: synthesis keeps column 2 (0.6 s of it against 0.4 s on the GPU), the
    # instant pickup shows nowhere beside them; column 6 is empty; column 7 has only an instant.
    assert dominants(intervals, 0.0, 1.0, 9) == [0, 0, 0, 2, 2, 2, None, 3, None]


def test_a_tie_goes_to_the_first_interval_and_a_lone_instant_still_shows() -> None:
    assert dominants([(0.0, 0.5, "a"), (0.5, 1.0, "b")], 0.0, 1.0, 1) == [0]
    assert dominants([(3.0, 3.0, "x"), (3.2, 3.2, "y")], 3.0, 1.0, 2) == [0, None]


def test_a_lane_of_thousands_of_holds_is_drawn_hold_by_hold() -> None:
    holds = [(float(n), n + 0.9, "busy") for n in range(5000)]
    hits = dominants(holds, 0.0, 1.0, 5000)
    assert hits == list(range(5000))


def test_a_lane_of_thousands_of_holds_fitted_to_the_width_shows_a_hold_a_column_in_order() -> None:
    holds = [(3.0 * n, 3.0 * n + 2.9, "hold") for n in range(5000)]
    owners = [o for o in column_owners(holds, 0.0, 15000 / 96, 96) if o is not None]
    assert len(owners) == 96 and owners == sorted(owners) and len(set(owners)) == 96


def test_a_hold_that_won_no_column_takes_the_nearest_empty_one_after_its_neighbour() -> None:
    # Columns of 10 s: the 1 s hold at 55 s loses column 5 to the hold before it (8 s of it), then
    # takes column 6, the empty one nearest its middle between its neighbours' cells.
    holds = [(0.0, 58.0, "a"), (55.0, 56.0, "b"), (80.0, 100.0, "c")]
    assert column_owners(holds, 0.0, 10.0, 10) == [0, 0, 0, 0, 0, 0, 1, None, 2, 2]


def test_holds_one_after_the_other_show_what_the_sweep_over_any_spans_shows() -> None:
    # 3,000 holds of a worker (some instants, some back to back) fitted to 96 columns take the
    # bisection path; the same holds followed by one out of order (and out of the window, so it shows
    # nowhere) take the general sweep. Each column must show the same hold either way.
    rng = random.Random(11)
    holds, t = [], 0.0
    for _ in range(3000):
        length = rng.choice([0.0, rng.uniform(0.1, 4.0), rng.uniform(4.0, 30.0)])
        holds.append((t, t + length, "hold"))
        t += length + rng.choice([0.0, rng.uniform(0.0, 5.0)])
    for start, columns in ((0.0, 96), (t / 3, 96), (t / 2, 7)):
        step = (t - start) / columns
        sequential = dominants(holds, start, step, columns)
        swept = dominants([*holds, (-100.0, -50.0, "elsewhere")], start, step, columns)
        assert sequential == swept and None not in sequential[: columns - 1]
        assert column_owners(holds, start, step, columns) == column_owners(
            [*holds, (-100.0, -50.0, "elsewhere")], start, step, columns
        )
