"""What one waterfall frame costs at scale: ``--jobs`` 10-partition PoRep jobs (ingest.synthetic_log),
drawn at 120x40 in a headless app, beside the same frame of an empty waterfall.

A frame is what a poll or a key costs the widget: ``show_model`` (the rows recounted when the timeline
moved) and every visible line rendered (the strip cache invalidated by the new view). Measured for
the first frame of the model (nothing cached), a poll's frame (the timeline moved: its version is
bumped, so every visible row is drawn again), a zoom in (``+``), a pan left (``←``) and ``l`` into the
lanes view after the timeline moved (every worker's holds read again); the best of ``--repeat``, in
CPU time.

    .venv/bin/python benchmarks/waterfall_frame.py [--jobs 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ingest import synthetic_log
from textual.app import App, ComposeResult

from cuzktui.model import SessionModel
from cuzktui.session import load_session
from cuzktui.ui.widgets.waterfall import WaterfallView

SIZE = (120, 40)


class _ViewApp(App[None]):
    def compose(self) -> ComposeResult:
        yield WaterfallView(id="waterfall")


def model_of_jobs(jobs: int) -> SessionModel:
    """The model of a bare log of ``jobs`` PoRep jobs, read as replay reads it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "daemon.log"
        path.write_text("\n".join(synthetic_log(jobs)) + "\n", encoding="utf-8")
        return load_session(path, cache=False)[1]  # a log deleted at once: no checkpoint left behind


def _ms(action: Callable[[], object], repeat: int) -> float:
    """The CPU milliseconds of ``action``, best of ``repeat`` (CPU, not wall: the machine is shared)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        action()
        best = min(best, time.process_time() - started)
    return 1000 * best


async def _frames(model: SessionModel, repeat: int) -> dict[str, float]:
    app = _ViewApp()
    async with app.run_test(size=SIZE):
        view = app.query_one(WaterfallView)

        def paint() -> None:
            # As the compositor asks for a frame: the lines a refresh marked dirty are drawn again.
            view.render_lines(view.size.region)

        def first() -> None:
            # A model never shown: no rows, lines, bars or holds cached.
            view._rows_key, view._strips_key, view._holds = None, None, None
            view._strips.clear()
            view._bars.clear()
            view.show_model(model)
            paint()

        def poll() -> None:
            model.timeline.version += 1  # the timeline moved: rows recounted, every line drawn again
            view.show_model(model)
            paint()

        def zoom() -> None:
            view.action_fit()
            view.action_zoom(1)
            paint()

        def pan() -> None:
            view.action_pan(-1)
            paint()

        def lanes() -> None:
            view.action_toggle_lanes()
            paint()

        def moved_then_lanes() -> float:
            if view.lanes:
                view.action_toggle_lanes()
            model.timeline.version += 1
            return _ms(lanes, 1)

        return {
            "frame": _ms(first, repeat),
            "poll": _ms(poll, repeat),
            "zoom": _ms(zoom, repeat),
            "pan": _ms(pan, repeat),
            "lanes": min(moved_then_lanes() for _ in range(repeat)),
        }


def measure(jobs: int, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """(frame, poll, zoom, pan, lanes) in ms for ``jobs`` jobs, and the same for an empty waterfall."""
    empty = asyncio.run(_frames(SessionModel(), repeat))
    full = asyncio.run(_frames(model_of_jobs(jobs), repeat))
    return full, empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    full, empty = measure(args.jobs, args.repeat)
    for name in full:
        print(f"{name}: {full[name]:.1f} ms with {args.jobs} jobs x 10 partitions, {empty[name]:.1f} ms empty")


if __name__ == "__main__":
    main()
