"""LogView: indexing, level sniffing, filter, search and follow on generated logs."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from rich.cells import cell_len
from textual.app import App, ComposeResult

from cuzktui.ui.widgets.logview import ALL_LEVELS, Level, LogView, scan_lines, sniff_level

LEVEL_WORDS = [" INFO", " INFO", "DEBUG", " WARN", "ERROR"]


def human(i: int, level: str = " INFO", message: str = "") -> str:
    return f"2026-05-01T07:00:{i % 60:02d}.{i:06d}Z {level} cuzk_core::engine: {message or f'message {i}'}\n"


def write_log(path: Path, lines: int) -> None:
    with path.open("w") as f:
        for i in range(lines):
            if i % 7 == 3:
                f.write(f"TIMELINE,{i * 10},SYNTH_START,porep-{i // 100},partition={i % 10}\n")
            else:
                f.write(human(i, LEVEL_WORDS[i % 5]))


class LogApp(App[None]):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        yield LogView(self.path)


def test_sniff_level_plain_ansi_and_continuations() -> None:
    assert sniff_level(human(1, "ERROR").encode(), Level.INFO) is Level.ERROR
    assert sniff_level(human(1, " WARN").encode(), Level.INFO) is Level.WARN
    assert sniff_level(human(1, "TRACE").encode(), Level.INFO) is Level.DEBUG
    ansi = b"\x1b[2m2026-05-01T07:00:00.000001Z\x1b[0m \x1b[33m WARN\x1b[0m \x1b[2mcuzk_core\x1b[0m: x"
    assert sniff_level(ansi, Level.INFO) is Level.WARN
    assert sniff_level(b"TIMELINE,12,GPU_START,j,partition=1", Level.ERROR) is Level.TIMELINE
    assert sniff_level(b"CUZK_TIMING: msm=12", Level.ERROR) is Level.TIMELINE
    assert sniff_level(b"Error: engine failed", Level.INFO) is Level.ERROR
    # "Caused by:" continues the fatal report above it.
    assert sniff_level(b"Caused by:", Level.ERROR) is Level.ERROR


def test_scan_marks_an_unterminated_last_line_open(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    path.write_bytes(b"a\nbb\nccc")
    (batch,) = scan_lines(path, 0, Level.INFO)
    assert list(batch.offsets) == [0, 2, 5]
    assert batch.open_tail and batch.end == 8


async def test_indexes_and_follows_a_growing_file(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    write_log(path, 100)
    app = LogApp(path)
    async with app.run_test(size=(100, 20)) as pilot:
        view = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.line_count == 100
        assert view.follow
        assert view.scroll_y == view.max_scroll_y > 0
        with path.open("a") as f:
            f.write(human(100, "ERROR", "half a li").rstrip("\n"))
        view.poll()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.line_count == 101
        with path.open("a") as f:
            f.write("ne\n" + human(101))
        view.poll()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.line_count == 102
        assert view._line_text(100).endswith("half a line")
        assert view.scroll_y == view.max_scroll_y
        # Reading back stops following; End resumes.
        await pilot.press("pageup")
        assert not view.follow
        await pilot.press("end")
        assert view.follow


async def test_every_row_is_drawn_whole_whatever_the_line_holds(tmp_path: Path) -> None:
    """What a terminal draws of each row is the view's width, no more, no less: the last line came with its
    newline, which moved the cursor down mid-row, and the rest of the row kept a longer line's tail
    (``…:31609l/state/cuzk-tui/sessi``) while the padding landed on the row below; other control characters
    (an OSC title, a NUL) are shown as cat -v shows them instead of being sent."""
    path = tmp_path / "daemon.log"
    with path.open("w") as f:
        for i in range(40):
            f.write(human(i, message=f"config loaded path=/root/.local/state/cuzk-tui/sessions/{i:04d}/cuzk.toml"))
        f.write(human(40, message="\x1b]0;pwned\x07 \x00"))
        f.write("TIMELINE,5168,GPU_START,porep-1000-2,worker=0,partition=8\n")
    app = LogApp(path)

    async def rows_drawn(view: LogView) -> list[str]:
        await app.workers.wait_for_complete()
        await pilot.pause()
        width = view.scrollable_content_region.width
        rows = ["".join(segment.text for segment in view.render_line(y)) for y in range(view.size.height - 1)]
        for row in rows:
            assert not [ch for ch in row if unicodedata.category(ch) == "Cc"], repr(row)
            assert cell_len(row) == width, repr(row)
        return rows

    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        rows = await rows_drawn(view)
        assert rows[-1].rstrip() == "TIMELINE,5168,GPU_START,porep-1000-2,worker=0,partition=8"
        assert rows[-2].startswith("2026-05-01T07:00:40.000040Z  INFO cuzk_core::engine: ^[]0;pwned^G ^@")
        view.scroll_to(x=20, animate=False, immediate=True)  # the long lines' ends, as the operator saw them
        assert (await rows_drawn(view))[-1].rstrip() == "ART,porep-1000-2,worker=0,partition=8"
        with path.open("a") as f:  # the once-last line, followed by more, is drawn (and cached) whole too
            f.write(human(41))
        view.poll()
        rows = await rows_drawn(view)
        assert rows[-2].rstrip() == "ART,porep-1000-2,worker=0,partition=8"


async def test_level_filter_hides_lines(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    write_log(path, 70)
    app = LogApp(path)
    async with app.run_test(size=(100, 20)) as pilot:
        view = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()
        view.set_levels(frozenset({Level.ERROR}))
        errors = [i for i in range(70) if i % 7 != 3 and i % 5 == 4]
        assert view.row_count == len(errors)
        assert [view._row_to_line(r) for r in range(view.row_count)] == errors
        view.set_levels(ALL_LEVELS)
        assert view.row_count == 70


async def test_search_forward_backward_and_within_the_filter(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    write_log(path, 200)
    app = LogApp(path)
    async with app.run_test(size=(100, 20)) as pilot:
        view = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()

        async def search(needle: str, forward: bool = True) -> int | None:
            view.search(needle, forward)
            await app.workers.wait_for_complete()
            await pilot.pause()
            return view._cursor

        view.follow = False
        await pilot.press("home")
        assert await search("MESSAGE 1") == 1  # case-insensitive, from the top of the view
        assert await search("message 1") == 11  # line 10 is a TIMELINE line
        assert await search("message 1", forward=False) == 1
        assert not view.follow
        view.set_levels(frozenset({Level.WARN}))
        assert await search("message 1") == 13  # 10, 11, 12 are not WARN lines
        assert await search("no such text") == 13  # not found: the match stays
        view.set_levels(ALL_LEVELS)
        assert await search("message 198") == 198
        assert await search("message 19") == 19  # past the end: wraps to the top
        assert await search("message 198", forward=False) == 198  # before the start: wraps to the end


async def test_search_in_a_log_truncated_to_nothing_reports_no_match_and_the_app_lives(tmp_path: Path) -> None:
    """A daemon restarted onto a fresh log: its old index meets an empty file (mmap refuses those)."""
    path = tmp_path / "daemon.log"
    write_log(path, 50)
    app = LogApp(path)
    found: list[LogView.SearchDone] = []
    async with app.run_test(
        size=(100, 20), message_hook=lambda m: found.append(m) if isinstance(m, LogView.SearchDone) else None
    ) as pilot:
        view = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()
        path.write_bytes(b"")  # truncated after indexing, before the next poll sees it
        view.search("message 3")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.is_running
        assert found and {(m.line, m.error) for m in found} == {(None, None)}  # seen as it bubbles up
        found.clear()
        path.unlink()  # and gone altogether: the failure is reported, not raised
        view.search("message 4")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.is_running
        assert found[-1].line is None and found[-1].error is not None and "search failed" in found[-1].error
