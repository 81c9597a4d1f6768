"""The bulk reader behind replay, export and report (event lines found over whole blocks, inert lines
never parsed, session.SessionReading) against the per-line path (parse_line on every line), on logs the
engine wrote imitating upstream, plain and coloured: the same events, the same model."""

from __future__ import annotations

import asyncio

import pytest

from cuzktui.events import CuzkTiming, GpuTiming, PlainLine, TimelineEvent
from cuzktui.export import build_chrome_trace
from cuzktui.logfilter import EnvFilter
from cuzktui.logparse import is_inert, parse_line
from cuzktui.model import SessionModel, model_of
from cuzktui.report import build_report
from cuzktui.session import ALL_JOBS, SessionReading, load_session, resolve_source
from cuzktui.timeline import Partition
from engine.jobs import Status
from engine.tracing import Logger
from tests.engine.engine_harness import Captured, Factory, porep, post


@pytest.mark.parametrize("colour", [False, True], ids=["plain", "ansi"])
async def test_the_bulk_reader_sees_what_the_per_line_path_sees(
    make_engine: Factory, captured: Captured, colour: bool
) -> None:
    # The daemon's default rendering is coloured (tracing-subscriber's ANSI, engine/tracing.py Logger._ansi).
    captured.log = Logger(EnvFilter.parse("info", lossy=False), colour=colour, out_fd=captured.fd, err_fd=captured.fd)
    e = await make_engine()
    results = await asyncio.wait_for(
        asyncio.gather(e.prove(porep("porep-a")), e.prove(porep("porep-b")), e.prove(post("post-c"))), 60
    )
    assert [r.status for r in results] == [Status.COMPLETED] * 3
    lines = captured.path.read_text("utf-8").splitlines()
    assert any("\x1b[" in line for line in lines) is colour

    per_line = [parse_line(line) for line in lines]
    pairs = zip(lines, per_line, strict=True)
    kept = [event for line, event in pairs if type(event) is not PlainLine and not is_inert(line)]
    bulk = [event for _, event in SessionReading(resolve_source(captured.path))]
    assert bulk == kept
    # The test has teeth: the log holds phases and details, and the bulk reader skipped many lines.
    assert sum(isinstance(event, TimelineEvent) for event in bulk) >= 2 * 10 * 6
    assert any(isinstance(event, GpuTiming) for event in bulk) and any(isinstance(event, CuzkTiming) for event in bulk)
    assert len(bulk) < len(lines) * 0.9

    # What it skipped changes nothing: the model of every parsed line gives the same report and trace.
    whole = model_of(per_line, log_source=str(captured.path), max_jobs=ALL_JOBS)
    _, loaded = load_session(captured.path)
    _, phases = load_session(captured.path, details=False)
    source = str(captured.path)
    assert build_report(loaded, source) == build_report(whole, source) == build_report(phases, source)
    assert build_report(whole, source)["counts"]["completed"] == 3
    assert build_chrome_trace(loaded.timeline) == build_chrome_trace(whole.timeline)


@pytest.mark.parametrize("workers", [1, 2], ids=["one-worker", "two-workers"])
async def test_lazy_details_are_the_eager_ones(make_engine: Factory, captured: Captured, workers: int) -> None:
    # A worker's finalizer overlaps its next prove, two workers their proves: the C++ lines read while two
    # partitions are on the GPU belong to neither.
    e = await make_engine(gpu_workers_per_device=workers)
    results = await asyncio.wait_for(asyncio.gather(*(e.prove(porep(f"porep-{n}")) for n in range(3))), 60)
    assert [r.status for r in results] == [Status.COMPLETED] * 3
    _, eager = load_session(captured.path, lazy=False)
    _, lazy = load_session(captured.path)

    def partitions(model: SessionModel) -> list[Partition]:
        return [p for job in model.timeline.jobs() for p in sorted(job.partitions.values(), key=lambda q: q.index)]

    # Loaded, the lazy model holds its partitions' C++ timing lines as places in the log, parsed when looked at.
    assert any(p._unread for p in partitions(lazy))

    def details(p: Partition) -> tuple[object, ...]:
        return (p.job.job_id, p.index, p.gpu_timing, p.fin_timing, p.cuzk_timing, p.ntt_timing, p.is_pinned)

    assert [details(p) for p in partitions(lazy)] == [details(p) for p in partitions(eager)]
    assert any(p.cuzk_timing and p.ntt_timing for p in partitions(eager))
    assert lazy.timeline.unattached_cuzk_timings == eager.timeline.unattached_cuzk_timings
    assert list(lazy.timeline.unattached) == list(eager.timeline.unattached)
    assert eager.timeline.unattached_cuzk_timings > 0  # the path that parses a run at once is taken too
