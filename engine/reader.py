"""The input reader: a process of the engine's own that reads proof inputs (:func:`engine.inputs.summarize`).

Reading a 68 MB C1 costs ~0.25 s of CPU in Python. On threads of the engine's process that work
held the interpreter lock, and the event loop waited for it each time it let it go (every epoll
wait, every munmap of the model's memory): GetStatus took 0.3–3 s while six C1s came in. Upstream
parses on blocking threads of a runtime that has no such lock. The reader is forked from the
engine before the event loop and gRPC start (no threads exist then), so it costs no start-up of
its own; it dies with the engine (``PR_SET_PDEATHSIG``, and the end of its socket), ignores
SIGINT (the engine's own handling decides), and writes nothing to the engine's log.

It reads one request at a time, in order: a header (the request's small fields and the payload's
lengths, pickled) and the payload's bytes, streamed from the gRPC message where they lie; it
answers with the :class:`~engine.inputs.InputSummary`, pickled. The bytes it held are given back
to the kernel after each request.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import pickle
import signal
import socket
import struct
from collections import deque
from typing import Final

from .inputs import InputSummary, Payload, summarize
from .jobs import ProofRequest
from .memory import malloc_trim

_LENGTH: Final = struct.Struct("<Q")
_PR_SET_PDEATHSIG: Final = 1
_RECEIVE_STEP: Final = 1 << 20


class ReaderGone(RuntimeError):
    """The reader process ended (only a bug of the emulator's, or its death with the engine, ends it)."""


def _receive_exactly(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    filled = 0
    while filled < size:
        got = sock.recv_into(view[filled : filled + _RECEIVE_STEP])
        if not got:
            raise ReaderGone("the engine closed the reader's socket")
        filled += got
    return buffer


def _serve(sock: socket.socket) -> None:
    """The reader's loop (in the forked process): request after request until the socket ends."""
    trim = malloc_trim()
    while True:
        (size,) = _LENGTH.unpack(_receive_exactly(sock, _LENGTH.size))
        request, c1_size, blob_sizes = pickle.loads(_receive_exactly(sock, size))
        data = _receive_exactly(sock, c1_size)
        blobs = tuple(memoryview(_receive_exactly(sock, n)) for n in blob_sizes)
        try:
            answer: InputSummary | str = summarize(request, Payload(data, 0, len(data), blobs))
        except Exception as error:  # an emulator bug: the job fails with it, the reader goes on
            answer = f"{type(error).__name__}: {error}"
        del data, blobs
        reply = pickle.dumps(answer)
        sock.sendall(_LENGTH.pack(len(reply)) + reply)
        trim()


def _child(sock: socket.socket, parent: int) -> None:
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the engine died before the line above
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        _serve(sock)
    except BaseException:  # the engine is gone (or the reader broke): leave without a trace in its log
        os._exit(0)


class InputReader:
    """The engine's side of the reader: :meth:`read` sends one request and awaits its summary."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self._sending = asyncio.Lock()
        self._answers: deque[asyncio.Future[InputSummary]] = deque()
        self._receiving: asyncio.Task[None] | None = None

    @classmethod
    def fork(cls) -> InputReader:
        """Forks the reader; call it before any thread exists (before the event loop and gRPC)."""
        parent_end, child_end = socket.socketpair()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            parent_end.close()
            _child(child_end, parent)
            os._exit(0)
        child_end.close()
        parent_end.setblocking(False)
        return cls(parent_end, pid)

    async def read(self, request: ProofRequest, payload: Payload) -> InputSummary:
        loop = asyncio.get_running_loop()
        if self._receiving is None:
            self._receiving = loop.create_task(self._receive())
        answer: asyncio.Future[InputSummary] = loop.create_future()
        view = memoryview(payload.data)[payload.start : payload.end]
        header = pickle.dumps((request, len(view), [len(blob) for blob in payload.blobs]))
        async with self._sending:
            if self._receiving.done():
                raise ReaderGone("the input reader has ended")
            self._answers.append(answer)
            await loop.sock_sendall(self.sock, _LENGTH.pack(len(header)) + header)
            for part in (view, *payload.blobs):
                await loop.sock_sendall(self.sock, part)
        return await answer

    async def _receive(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                (size,) = _LENGTH.unpack(await self._receive_exactly(loop, _LENGTH.size))
                answer = pickle.loads(await self._receive_exactly(loop, size))
                waiter = self._answers.popleft()
                if isinstance(answer, str):
                    waiter.set_exception(RuntimeError(f"input reader: {answer}"))
                else:
                    waiter.set_result(answer)
        except ReaderGone as gone:
            while self._answers:
                self._answers.popleft().set_exception(gone)

    async def _receive_exactly(self, loop: asyncio.AbstractEventLoop, size: int) -> bytes:
        parts: list[bytes] = []
        while size:
            part = await loop.sock_recv(self.sock, min(size, _RECEIVE_STEP))
            if not part:
                raise ReaderGone("the input reader has ended")
            parts.append(part)
            size -= len(part)
        return b"".join(parts)
