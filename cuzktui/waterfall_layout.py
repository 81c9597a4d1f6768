"""The waterfall's arithmetic, headless: which time range it shows, which interval each column of a
row shows, and what each daemon-run separator says.

* :func:`clamp_window` keeps the shown range inside the session: never before its first event (the
  axis would print times before 0 without a sign), never past the live edge (panning into nothing).
* :func:`column_owners` picks, per column, the interval covering most of it, then gives every
  interval that won no column one of its own: on a long session fitted to the width a 2 s GPU-queue
  wait is a fraction of a cell and would vanish, so a proof would look as if it never waited.
* :func:`run_boundary` says why a daemon run began (how the one before it ended), from the exits and
  the benchmark and config events the model keeps; only a failure is drawn as one.

The UI (cuzktui/ui/widgets/waterfall.py) draws what these return and decides nothing of it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .model import SessionModel

Span = tuple[float, float, str]


def clamp_window(start: float, end: float, origin: float, latest: float) -> tuple[float, float]:
    """``[start, end]`` moved, never resized, to lie within ``[origin, latest]`` as far as it fits:
    ``origin`` is the session's first event, ``latest`` the live window's right edge. A window longer
    than the session starts at ``origin``."""
    length = end - start
    end = min(end, max(latest, origin + length))
    start = max(origin, end - length)
    return start, start + length


def dominants(spans: Sequence[Span], start: float, step: float, columns: int) -> list[int | None]:
    """Per column [a, a + step) from ``start``: the index of the span covering most of it (the first on
    a tie), else of the first instant span in it (a 0 ms pickup still shows when nothing else does),
    else None.

    One sweep over the spans sorted by start, keeping only those that can still touch a column: a
    worker's lane holds thousands of partitions, and testing each against every column made a line
    cost columns x holds."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    hits: list[int | None] = []
    active: list[int] = []
    taken = 0
    for column in range(columns):
        a = start + column * step
        b = start + (column + 1) * step
        while taken < len(order) and spans[order[taken]][0] < b:
            active.append(order[taken])
            taken += 1
        # Gone for good: a span ended by a (a only grows), an instant before a.
        active = [i for i in active if spans[i][1] > a or spans[i][0] == spans[i][1] >= a]
        best, best_overlap, instant = None, 0.0, None
        for i in sorted(active):
            s, e, _ = spans[i]
            overlap = min(e, b) - max(s, a)
            if overlap > best_overlap:
                best, best_overlap = i, overlap
            elif instant is None and s == e and a <= s:
                instant = i
        hits.append(best if best is not None else instant)
    return hits


def column_owners(
    spans: Sequence[Span], start: float, seconds_per_column: float, columns: int, *, keep_every: bool = True
) -> list[int | None]:
    """Per column of ``[start, start + columns × seconds_per_column)``, the index of the span shown there.

    Each column shows the span covering most of it. With ``keep_every`` (spans in time order that do
    not overlap: a partition's phases, a worker's holds) every span of non-zero length that reaches
    into the window and won no column then takes one: an empty column between its neighbours, else
    the nearer edge cell of a neighbour that keeps at least one other, so the order of the phases is
    kept. Only when its neighbours hold a single cell each does it stay hidden.
    """
    end = start + columns * seconds_per_column
    step = seconds_per_column
    owners = dominants(spans, start, step, columns)
    if not keep_every or columns == 0:
        return owners
    counts = Counter(o for o in owners if o is not None)
    neighbours = _Neighbours(owners)
    # No empty column and no span with a cell to spare: a span that won none stays hidden (every
    # hold of a dense lane fitted to the width), no need to look for one.
    stuck = None not in owners and all(n <= 1 for n in counts.values())
    for i, (s, e, _) in enumerate(spans):
        if stuck or counts[i] or e <= s or e <= start or s >= end:
            continue
        middle = min(columns - 1, max(0, int(((s + e) / 2 - start) / step)))
        # The last cell of the spans before this one, the first cell of the spans after it.
        left, right = neighbours.around(i)
        free = [c for c in range(left + 1, right) if owners[c] is None]
        candidates = sorted(free, key=lambda c: abs(c - middle))
        if not candidates:
            shared = [c for c in (left, right) if 0 <= c < columns and counts[owners[c] or 0] > 1]
            candidates = sorted(shared, key=lambda c: abs(c - middle))
        if candidates:
            column = candidates[0]
            taken = owners[column]
            if taken is not None:
                counts[taken] -= 1
            owners[column] = i
            counts[i] = 1
            neighbours = _Neighbours(owners)
            stuck = None not in owners and all(n <= 1 for n in counts.values())
    return owners


class _Neighbours:
    """Where the spans before and after span ``i`` have their cells, among ``owners`` (column -> span).

    Spans in time order own columns in that order, so the owned cells sorted by column are sorted by
    span too and both neighbours are a bisection away: a fitted lane has thousands of holds that
    won no column, and scanning every column for each of them cost columns x holds. Owners out of
    order (spans that overlap) are scanned."""

    def __init__(self, owners: list[int | None]) -> None:
        self._owners = owners
        self._owned = [(c, o) for c, o in enumerate(owners) if o is not None]
        self._keys = [o for _, o in self._owned]
        self._ordered = all(a <= b for a, b in zip(self._keys, self._keys[1:], strict=False))

    def around(self, i: int) -> tuple[int, int]:
        """(the last column owned by a span before ``i`` or -1, the first owned by one after it or
        the column count)."""
        owned, columns = self._owned, len(self._owners)
        if self._ordered:
            before, after = bisect_left(self._keys, i), bisect_right(self._keys, i)
            return (owned[before - 1][0] if before else -1), (owned[after][0] if after < len(owned) else columns)
        left = max((c for c, o in owned if o < i), default=-1)
        right = min((c for c, o in owned if o > i), default=columns)
        return left, right


@dataclass(frozen=True, slots=True)
class RunBoundary:
    """Why a daemon run began: the label its separator shows, and whether the run before it failed."""

    label: str
    failure: bool


def run_boundary(model: SessionModel, segment: int) -> RunBoundary:
    """How the daemon run before ``segment`` (a timeline segment index ≥ 1) ended, in the words its
    separator shows.

    A kill is a failure (``oom_kill``: the kernel's evidence; ``signal`` / ``error``: a crash). A
    stop this tool made is a hand-over when a benchmark started or finished across it (the Bench
    screen stops the daemon and its runner launches its own, then gives it back: LiveController
    start_bench / _reap_bench), else a restart that applied knobs when the next run's config
    changed something (Supervisor launch's ConfigApplied), else a plain restart.
    """
    exits = {index: exit for index, exit in model.exits if index is not None}
    ended = exits.get(segment - 1)
    if ended is None:
        return RunBoundary("restart", False)
    if ended.cause == "oom_kill":
        return RunBoundary("OOM kill", True)
    if ended.cause in ("signal", "error"):
        return RunBoundary("crash", True)
    if ended.cause == "unknown":
        return RunBoundary("restart (the log does not say why)", False)
    before = exits[segment - 2].t if segment - 2 in exits else float("-inf")
    following = exits[segment].t if segment in exits else float("inf")
    if any(before < t <= following for t in model.bench_edges):
        return RunBoundary("benchmark hand-over", False)
    if any(ended.t < c.t <= following and c.changes for c in model.configs):
        return RunBoundary("restart: knobs applied", False)
    return RunBoundary("restart", False)
