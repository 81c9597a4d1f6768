"""``python -m cuzktui.cgexec CGROUP_DIR -- PROGRAM ARGS...``: run a program inside a cgroup.

The process writes its own pid into the group's ``cgroup.procs`` and then replaces itself with
the program (``os.execvp``), so the program is inside the group from its first allocation and
keeps this pid: the supervisor's ``Popen`` handle, its exit status (137 after an OOM kill) and
its signals all belong to the program itself. No shell and no ``preexec_fn`` (which is unsafe in
a threaded parent) are involved.

Exit status when the program could not be started: 125 (bad usage or the cgroup refused the
pid), 126 (found but not executable), 127 (not found), as ``env`` and the shells do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

USAGE = "usage: python -m cuzktui.cgexec CGROUP_DIR -- PROGRAM [ARGS...]"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        print(USAGE, file=sys.stderr)
        return 125
    group, program = Path(args[0]), args[2:]
    try:
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as exc:
        print(f"cgexec: cannot join cgroup {group}: {exc.strerror or exc}", file=sys.stderr)
        return 125
    try:
        os.execvp(program[0], program)
    except FileNotFoundError:
        print(f"cgexec: {program[0]}: not found", file=sys.stderr)
        return 127
    except OSError as exc:
        print(f"cgexec: {program[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126


if __name__ == "__main__":
    sys.exit(main())
