"""The emulated box's memory in a memory cgroup of its own: ``cuzk-engine --box-cgroup DIR``.

At memory_scale 1/256 every real byte the model holds stands for 256 bytes of the box the engine
emulates, and a memory cgroup of the box's size ÷ 256 makes the kernel's OOM kill real. What the
engine's process holds besides the model's memory does not scale: gRPC's copy of a 60 MB C1 in
flight (~62 GiB of the box if it were charged), the interpreter (~40 MB, 10 GiB). A real box does
not notice either. So with a box cgroup the model's memory (the arena, engine/memory.py) lives in a
helper process, the box, and only the box is in the cgroup; the engine (the gRPC front end, the
input reader, the model's bookkeeping) stays where it was started, whoever the client.

The box is this file run by path (``python -S -I``, standard library only). Once its interpreter is
loaded it joins the cgroup (the pages it touched until then stay charged where they were), maps the
real daemon's own process cost (the engine passes ``DAEMON_PROCESS_RSS`` in real bytes), answers
"ready", then maps and unmaps blocks as the engine asks over a socket, faulting every page in
(``MAP_POPULATE``) so the cgroup is charged at once. When the kernel OOM-kills it, the engine kills
itself with SIGKILL: the daemon it stands for dies that death, with the cgroup's ``oom_kill``
counter as the evidence. It dies with the engine (``PR_SET_PDEATHSIG``, and the end of its socket).

Messages, engine → box: ``A`` id size (map, answered with the id once resident), ``F`` id 0 (unmap).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Final

PAGE: Final = mmap.PAGESIZE
_REQUEST: Final = struct.Struct("<cQQ")  # op, block id, size
_ANSWER: Final = struct.Struct("<Q")  # the block id now resident
_PR_SET_PDEATHSIG: Final = 1


def populated(size: int) -> mmap.mmap:
    """``size`` bytes of anonymous memory, every page resident (and charged to the memory cgroup)."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    mapping = mmap.mmap(-1, size, flags=flags)
    if not hasattr(mmap, "MAP_POPULATE"):
        mapping[::PAGE] = b"\x01" * (-(-size // PAGE))
    return mapping


class BoxError(RuntimeError):
    """The box could not start (its cgroup refused it); the message says why."""


class BoxMemory:
    """The engine's side: blocks mapped in the box process (the arena's memory, engine/memory.py)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cgroup: Path, pid: int) -> None:
        self._reader = reader
        self._writer = writer
        self.cgroup = cgroup
        self.pid = pid  # the process the kernel names when it OOM-kills the box
        self._ids = iter(range(1, 1 << 62))
        self._mapped: dict[int, asyncio.Future[None]] = {}
        self._watch: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, cgroup: Path, process_bytes: int) -> BoxMemory:
        """Starts the box in ``cgroup`` holding ``process_bytes``; BoxError when it cannot join it.

        Called from the event loop's thread: the box's PR_SET_PDEATHSIG follows the thread that
        started it, which lives as long as the engine."""
        ours, theirs = socket.socketpair()
        argv = [sys.executable, "-S", "-I", __file__, str(theirs.fileno()), str(cgroup), str(process_bytes)]
        proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        try:
            (length,) = _ANSWER.unpack(await reader.readexactly(_ANSWER.size))
            if length:
                raise BoxError((await reader.readexactly(length)).decode(errors="replace"))
        except (BoxError, asyncio.IncompleteReadError) as error:
            writer.close()
            status = await asyncio.to_thread(proc.wait)
            if isinstance(error, BoxError):
                raise
            raise BoxError(f"the box process exited as it started (status {status})") from None
        box = cls(reader, writer, cgroup, proc.pid)
        box._watch = asyncio.get_running_loop().create_task(box._answers())
        return box

    async def map(self, size: int) -> int:
        block = next(self._ids)
        mapped = asyncio.get_running_loop().create_future()
        self._mapped[block] = mapped
        self._writer.write(_REQUEST.pack(b"A", block, size))
        await mapped
        return block

    def unmap(self, block: object) -> None:
        assert isinstance(block, int)
        self._writer.write(_REQUEST.pack(b"F", block, 0))

    async def _answers(self) -> None:
        try:
            while True:
                (block,) = _ANSWER.unpack(await self._reader.readexactly(_ANSWER.size))
                self._mapped.pop(block).set_result(None)
        except (asyncio.IncompleteReadError, ConnectionError):
            # The box is gone: OOM-killed in its cgroup (nothing else ends it while the engine
            # lives). The daemon it stands for dies the same death.
            os.kill(os.getpid(), signal.SIGKILL)


# -- the box process ------------------------------------------------------------------------------


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            raise ConnectionResetError("the engine's socket ended")
        data += part
    return data


def _box(fd: int, cgroup: str, process_bytes: int) -> None:
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine handles SIGINT; a terminal's reaches both
    sock = socket.socket(fileno=fd)
    try:
        Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    except OSError as error:
        reason = f"cannot join the memory cgroup {cgroup}: {error.strerror or error}".encode()
        sock.sendall(_ANSWER.pack(len(reason)) + reason)
        return
    blocks = {0: populated(process_bytes)} if process_bytes else {}
    sock.sendall(_ANSWER.pack(0))
    while True:
        op, block, size = _REQUEST.unpack(_receive_exactly(sock, _REQUEST.size))
        if op == b"A":
            blocks[block] = populated(size)
            sock.sendall(_ANSWER.pack(block))
        else:
            blocks.pop(block).close()


if __name__ == "__main__":
    with contextlib.suppress(ConnectionError):  # the engine is gone
        _box(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
