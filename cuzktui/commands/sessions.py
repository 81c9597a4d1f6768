"""``cuzk-tui sessions``: the recorded sessions as a table."""

from __future__ import annotations

import argparse
import time

from ..session import SessionInfo, list_sessions, sessions_root
from ..units import format_size


def format_sessions(infos: list[SessionInfo]) -> str:
    header = ("CREATED", "MODE", "PROOFS", "SIZE", "SESSION")
    rows = [
        (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.created)),
            info.mode,
            info.proofs_text,
            format_size(info.size_bytes),
            str(info.path),
        )
        for info in infos
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]])
        for row in (header, *rows)
    )


def run_sessions(args: argparse.Namespace) -> int:
    infos = list_sessions()
    if not infos:
        print(f"no sessions under {sessions_root()}")
        return 0
    print(format_sessions(infos))
    return 0
