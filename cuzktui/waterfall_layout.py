"""The waterfall's arithmetic, headless: which time range it shows, which interval each column of a
row shows, and what each daemon-run separator says.

* :func:`clamp_window` keeps the shown range inside the session: never before its first event (the
  axis would print times before 0 without a sign), never past the live edge (panning into nothing).
* :func:`column_owners` picks, per column, the interval covering most of it, then gives every
  interval that won no column one of its own: on a long session fitted to the width a 2 s GPU-queue
  wait is a fraction of a cell and would vanish, so a proof would look as if it never waited.
* :func:`run_boundary` says why a daemon run began (how the one before it ended), from the exits and
  the benchmark and config events the model keeps; only a failure is drawn as one.
* :class:`WaterfallRows` counts the rows (a separator per daemon run after the first, per job a row and
  one per partition, or one per GPU worker) without building them: a long session has 11,000 rows of
  which a frame shows ~40, so a :class:`Row` is built only when the view asks for its index.

The UI (cuzktui/ui/widgets/waterfall.py) draws what these return and decides nothing of it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import le
from typing import Literal, overload

from .model import SessionModel
from .timeline import Job, Partition, Segment, Timeline, run_number

Span = tuple[float, float, object]  # (start, end, what it is: the layout never reads the last)


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
    cost columns x holds. Columns before the next span starts are skipped: a partition's phases fill a
    few columns of a row. Spans one after the other (a worker's holds) that outnumber the columns are
    found by bisection instead (:func:`_sequential_dominants`)."""
    starts = [span[0] for span in spans]
    if len(spans) > columns:
        ends = [span[1] for span in spans]
        # Each span of no negative length, ending by the next one's start: both lists sorted.
        if all(map(le, starts, ends)) and all(map(le, ends, starts[1:])):
            return _sequential_dominants(starts, ends, start, step, columns)
    order = sorted(range(len(spans)), key=starts.__getitem__)
    hits: list[int | None] = []
    active: list[int] = []
    taken = 0
    column = 0
    while column < columns:
        a = start + column * step
        b = start + (column + 1) * step
        while taken < len(order) and spans[order[taken]][0] < b:
            active.append(order[taken])
            taken += 1
        # Gone for good: a span ended by a (a only grows), an instant before a.
        active = [i for i in active if spans[i][1] > a or spans[i][0] == spans[i][1] >= a]
        if not active and step > 0:
            # Empty up to the column before the one the next span starts in (a column short of it, so
            # that rounding cannot skip where it begins).
            following = spans[order[taken]][0] if taken < len(order) else start + columns * step
            resume = min(columns, max(column + 1, int((following - start) / step) - 1))
            hits += [None] * (resume - column)
            column = resume
            continue
        best, best_overlap, instant = None, 0.0, None
        for i in sorted(active):
            s, e, _ = spans[i]
            overlap = min(e, b) - max(s, a)
            if overlap > best_overlap:
                best, best_overlap = i, overlap
            elif instant is None and s == e and a <= s:
                instant = i
        hits.append(best if best is not None else instant)
        column += 1
    return hits


def _sequential_dominants(
    starts: list[float], ends: list[float], start: float, step: float, columns: int
) -> list[int | None]:
    """:func:`dominants` of spans one after the other: those touching a column are a range of indices,
    and all but its first and last lie inside the column, covering their whole length, so the longest
    of them is found by ``max`` over a slice rather than a Python loop over thousands of holds."""
    lengths = [e - s for s, e in zip(starts, ends, strict=True)]
    hits: list[int | None] = []
    for column in range(columns):
        a = start + column * step
        b = start + (column + 1) * step
        first, stop = bisect_left(ends, a), bisect_left(starts, b)
        best: int | None = None
        best_overlap = 0.0
        if stop > first:
            # The first and the last may stick out of the column; those between lie wholly inside it.
            edge = min(ends[first], b) - max(starts[first], a)
            if edge > best_overlap:
                best, best_overlap = first, edge
            if stop - first > 2:
                inner = max(lengths[first + 1 : stop - 1])
                if inner > best_overlap:
                    best, best_overlap = lengths.index(inner, first + 1, stop - 1), inner
            if stop - first > 1:
                edge = min(ends[stop - 1], b) - max(starts[stop - 1], a)
                if edge > best_overlap:
                    best = stop - 1
        if best is None:  # nothing but instants (and spans that end at a): the first instant
            best = next((i for i in range(first, stop) if starts[i] == ends[i]), None)
        hits.append(best)
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
    neighbours: _Neighbours | None = None  # built when a span that won no column looks for one
    # No empty column and no span with a cell to spare: a span that won none stays hidden (every
    # hold of a dense lane fitted to the width), no need to look for one. Both counted as cells change
    # hands, not looked for after each.
    empty = owners.count(None)
    spare = sum(1 for n in counts.values() if n > 1)
    stuck = not empty and not spare
    i = 0
    while i < len(spans) and not stuck:
        s, e, _ = spans[i]
        if counts[i] or e <= s or e <= start or s >= end:
            i += 1
            continue
        middle = min(columns - 1, max(0, int(((s + e) / 2 - start) / step)))
        # The last cell of the spans before this one, the first cell of the spans after it.
        neighbours = neighbours or _Neighbours(owners)
        left, right = neighbours.around(i)
        column = _nearest_free(owners, left, right, middle)
        if column is None:  # else a neighbour's edge cell it can spare, the nearer (the first on a tie)
            shared = [c for c in (left, right) if 0 <= c < columns and counts[owners[c] or 0] > 1]
            column = min(shared, key=lambda c: abs(c - middle)) if shared else None
        if column is not None:
            taken = owners[column]
            if taken is None:
                empty -= 1
            else:
                counts[taken] -= 1
                if counts[taken] == 1:  # it had one to spare, no more
                    spare -= 1
            owners[column] = i
            counts[i] = 1
            neighbours = None
            stuck = not empty and not spare
        elif neighbours.ordered:
            # Every span up to the next owner has these same two neighbours, so no more room: a fitted
            # lane has ~50 holds a column, and looking for room for each of them cost a frame.
            following = owners[right] if right < columns else None
            i = following if following is not None else len(spans)
            continue
        i += 1
    return owners


def _nearest_free(owners: list[int | None], left: int, right: int, middle: int) -> int | None:
    """The empty column strictly between ``left`` and ``right`` nearest ``middle``, the first on a tie:
    looked for outwards from ``middle``, as a fitted row is mostly empty and the nearest is close."""
    centre = min(max(middle, left + 1), right - 1)
    for distance in range(right - left):
        for column in (centre - distance, centre + distance):
            if left < column < right and owners[column] is None:
                return column
    return None


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
        self.ordered = all(a <= b for a, b in zip(self._keys, self._keys[1:], strict=False))

    def around(self, i: int) -> tuple[int, int]:
        """(the last column owned by a span before ``i`` or -1, the first owned by one after it or
        the column count)."""
        owned, columns = self._owned, len(self._owners)
        if self.ordered:
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


RowKind = Literal["segment", "job", "partition", "lane"]


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the waterfall below its time axis."""

    kind: RowKind
    label: str
    segment: Segment | None = None
    job: Job | None = None
    partition: Partition | None = None
    worker: int | None = None
    failure: bool = False  # a separator after a run that failed (an OOM kill, a crash)


def lane_order(timeline: Timeline) -> list[int]:
    """The workers with lanes, grouped by the GPU they prove on (by ordinal), those of no known GPU last."""
    gpus = {w: timeline.worker_gpu(w) for w in timeline.workers()}
    return sorted(gpus, key=lambda w: (gpus[w] is None, gpus[w] or 0, w))


def lane_label(timeline: Timeline, worker: int) -> str:
    gpu = timeline.worker_gpu(worker)
    return f"worker {worker}" if gpu is None else f"GPU{gpu} worker {worker}"


# A block of consecutive rows: a daemon run's separator (1 row), a job (its row, then one per
# partition) or a GPU worker's lane (1 row).
_Block = Segment | Job | int


class WaterfallRows(Sequence[Row]):
    """The rows of the partitions view (``lanes`` False) or of the lanes view of ``model``, in order.

    Partitions: per daemon run, a separator before every run but the first (saying why it began:
    :func:`run_boundary`), then its jobs in the timeline's order, each a row followed by one per
    partition in index order. Lanes: one row per GPU worker (:func:`lane_order`).

    Only the size of each block of rows is taken at construction, with their prefix sums; the row at
    an index is found by bisection and built when asked for (the view keeps the lines it drew, not the
    rows), so a frame costs the rows it shows, not the session's. A timeline that moved needs a new
    instance."""

    def __init__(self, model: SessionModel, *, lanes: bool, ascii_only: bool) -> None:
        self._model = model
        self._ascii_only = ascii_only
        timeline = model.timeline
        blocks: list[_Block] = []
        starts = [0]
        if lanes:
            blocks += lane_order(timeline)
            starts += range(1, len(blocks) + 1)
        else:
            by_segment: dict[int, list[Job]] = {}
            for job in timeline.jobs():
                by_segment.setdefault(job.segment, []).append(job)
            for segment in timeline.segments:
                if segment.index > 0:
                    blocks.append(segment)
                    starts.append(starts[-1] + 1)
                for job in by_segment.get(segment.index, ()):
                    blocks.append(job)
                    starts.append(starts[-1] + 1 + len(job.partitions))
        self._blocks = blocks
        self._starts = starts  # the index of each block's first row, then the row count

    def __len__(self) -> int:
        return self._starts[-1]

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        block = bisect_right(self._starts, index) - 1
        return self._build(self._blocks[block], index - self._starts[block])

    def __iter__(self) -> Iterator[Row]:
        for i in range(len(self)):
            yield self[i]

    def _build(self, block: _Block, offset: int) -> Row:
        timeline = self._model.timeline
        if isinstance(block, int):
            return Row("lane", lane_label(timeline, block), worker=block)
        if isinstance(block, Segment):
            boundary = run_boundary(self._model, block.index)
            dot = "-" if self._ascii_only else "·"
            label = f"daemon run {run_number(block.index)} {dot} {boundary.label}"
            return Row("segment", label, segment=block, failure=boundary.failure)
        segment = timeline.segments[block.segment]
        if offset == 0:
            return Row("job", block.job_id, segment=segment, job=block)
        p = block.partitions[sorted(block.partitions)[offset - 1]]
        worker = f" w{p.worker}" if p.worker is not None else ""
        return Row("partition", f"  p{p.index}{worker}", segment=segment, job=block, partition=p)

    def _selectable(self, block: int) -> range:
        """The rows of a block that can be selected: a job's partitions (its own row when it has none: a job
        that ended before any synthesis has only its outcome to show), a lane; not a separator."""
        first, stop = self._starts[block], self._starts[block + 1]
        kind = self._blocks[block]
        if isinstance(kind, Segment):
            return range(first, first)
        return range(first + 1, stop) if isinstance(kind, Job) and kind.partitions else range(first, stop)

    def step(self, selected: int | None, step: int) -> int | None:
        """The selectable row after ``selected`` (``step`` > 0) or before it; from no selection the
        first or the last; ``selected`` itself when there is none further; None when none at all."""
        if step > 0:
            block = 0 if selected is None else max(0, bisect_right(self._starts, selected) - 1)
            for b in range(block, len(self._blocks)):
                rows = self._selectable(b)
                after = rows[bisect_right(rows, selected) :] if selected is not None else rows
                if after:
                    return after[0]
        else:
            last = len(self._blocks) - 1
            block = last if selected is None else min(last, bisect_right(self._starts, selected) - 1)
            for b in range(block, -1, -1):
                rows = self._selectable(b)
                before = rows[: bisect_left(rows, selected)] if selected is not None else rows
                if before:
                    return before[-1]
        return selected if any(self._selectable(b) for b in range(len(self._blocks))) else None
