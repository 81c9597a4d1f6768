"""A live session on the engine (start, apply a knob, stop) with every file read of this process traced.

Run by tests/test_reliability.py::test_a_session_reads_only_its_directory_the_chosen_config_and_the_system
as ``python tests/read_trace_session.py CONFIG SESSION_DIR``: an audit hook cannot be removed, so it
lives and dies with this process instead of the test's. The last line of stdout is a JSON list of
``[event, path]`` for every open for reading and every directory listing, relative paths made absolute.
Audit events do not cover ``stat`` (``exists``, ``is_file``): those are not traced.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

READS: list[tuple[str, str]] = []


def _record(event: str, args: tuple[Any, ...]) -> None:
    # The hook runs on every audited call of every thread: it only appends, so that it raises no
    # audit event of its own.
    if event == "open":
        path, _mode, flags = args
        if isinstance(flags, int) and flags & os.O_ACCMODE != os.O_RDONLY:
            return  # a write: test_a_session_writes_only_its_directory_the_chosen_config_and_its_socket
    elif event in ("os.listdir", "os.scandir"):
        path = args[0]
    else:
        return
    if isinstance(path, str | bytes):  # an int is an already open descriptor (os.fdopen, scandir(fd))
        READS.append((event, os.fsdecode(path)))


sys.addaudithook(_record)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for `cuzktui` and `tests`

from tests.conftest import start_apply_stop  # noqa: E402  (imported after the hook: traced)


def main() -> None:
    config, session_dir = (Path(arg) for arg in sys.argv[1:3])
    asyncio.run(start_apply_stop(config, session_dir))
    cwd = os.getcwd()
    print(json.dumps(sorted({(event, os.path.normpath(os.path.join(cwd, path))) for event, path in READS})))


if __name__ == "__main__":
    main()
