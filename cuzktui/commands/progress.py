"""A long operation's progress bar on one line of the terminal, erased once it is done.

A replay's load draws it before the TUI takes the screen, memprobe before its result: what is left in
the shell afterwards is the result, not a `reading [####] 100%` line per load.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Final, TextIO

from ..replay import progress_bar

# ECMA-48 "erase in line" from the cursor to its end: a shorter text leaves nothing of a longer one.
ERASE_TO_END: Final = "\x1b[K"


class ProgressLine:
    """``progress(done, total)`` redraws ``label`` and the bar in place; leaving the ``with`` erases it."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._label = label
        self._stream = stream if stream is not None else sys.stderr
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        self._stream.write(f"\r{self._label}{progress_bar(done, total)}{ERASE_TO_END}")
        self._stream.flush()
        self._drawn = True

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._drawn:
            self._stream.write(f"\r{ERASE_TO_END}")
            self._stream.flush()
