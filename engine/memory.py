"""The memory budget (reservations, docs/daemon-interface.md §6.3–6.5) and the real memory behind the model.

Two different things, as in the daemon:

* :class:`Budget` is the daemon's admission control: nominal bytes reserved before work starts
  and released in steps. It is a cap on *reservations*, not on RSS.
* :class:`Arena` holds real, touched memory (``nominal × memory_scale`` bytes per block, mapped
  with MAP_POPULATE so every page is resident and charged to the memory cgroup at once) sized by
  the *measured* RSS figures, which exceed the reservations. That gap is what gets a daemon whose
  budget equals its container limit OOM-killed, and the engine reproduces it for real.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import mmap
from collections.abc import Awaitable, Callable
from typing import Protocol

from cuzktui import daemon_messages as msg
from cuzktui.units import GiB

from . import tracing
from .box import PAGE, populated
from .tracing import Logger


def gib(n: int) -> int:
    """Integer GiB (floor), as the daemon's `*_gib` fields print."""
    return n // GiB


class Reservation:
    """A budget reservation that is released in parts (abc at prove start, the rest at finalize)."""

    def __init__(self, budget: Budget, amount: int) -> None:
        self._budget = budget
        self.amount = amount

    def release(self, amount: int | None = None) -> None:
        part = self.amount if amount is None else min(amount, self.amount)
        if part <= 0:
            return
        self.amount -= part
        self._budget._give_back(part)
        if amount is not None:
            self._budget.log.debug(
                tracing.MEMORY,
                msg.PARTIAL_RELEASE,
                ("released_gib", gib(part)),
                ("remaining_gib", gib(self.amount)),
            )


Evictor = Callable[[int], Awaitable[int]]


class Budget:
    def __init__(self, total: int, log: Logger) -> None:
        self.total = total
        self.used = 0
        self.log = log
        self.evictor: Evictor | None = None
        self._changed = asyncio.Condition()

    @property
    def available(self) -> int:
        return max(0, self.total - self.used)

    def try_acquire(self, amount: int) -> Reservation | None:
        if self.used + amount > self.total:
            return None
        self.used += amount
        self.log.debug(
            tracing.MEMORY,
            msg.BUDGET_ACQUIRED,
            ("amount_gib", gib(amount)),
            ("used_gib", gib(self.used)),
            ("total_gib", gib(self.total)),
        )
        return Reservation(self, amount)

    async def acquire(self, amount: int) -> Reservation:
        """Blocks until the amount fits, asking the evictor for room first (docs/daemon-interface.md §6.5).

        As memory.rs ``MemoryBudget::acquire``: the WARN comes with every oversized acquire, the
        evictor is asked for the whole amount (not the shortfall), and the wait is logged at each
        retry."""
        if amount > self.total:
            self.log.warn(
                tracing.MEMORY,
                msg.ACQUIRE_EXCEEDS_BUDGET,
                ("amount_gib", gib(amount)),
                ("total_gib", gib(self.total)),
            )
        while True:
            reservation = self.try_acquire(amount)
            if reservation is not None:
                return reservation
            if self.evictor is not None:
                freed = await self.evictor(amount)
                if freed > 0:
                    self.log.debug(
                        tracing.MEMORY,
                        msg.EVICTOR_FREED,
                        ("freed_gib", gib(freed)),
                        ("needed_gib", gib(amount)),
                    )
                    continue
            self.log.debug(
                tracing.MEMORY,
                msg.WAITING_FOR_BUDGET,
                ("needed_gib", gib(amount)),
                ("available_gib", gib(self.available)),
                ("total_gib", gib(self.total)),
            )
            async with self._changed:
                await self._changed.wait()

    def _give_back(self, amount: int) -> None:
        self.used -= amount
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def real_bytes(nominal: int, memory_scale: float) -> int:
    """The whole pages of real memory that stand for ``nominal`` bytes of the box."""
    real = int(nominal * memory_scale)
    return 0 if real <= 0 else -(-real // PAGE) * PAGE


class Memory(Protocol):
    """Where the arena's real memory is mapped: this process (:class:`LocalMemory`), or the box process
    in a memory cgroup of its own (:class:`engine.box.BoxMemory`)."""

    @property
    def pid(self) -> int | None:
        """The process holding the mapped memory when it is not this one: the one the kernel names when
        it OOM-kills the box."""

    async def map(self, size: int) -> object:
        """``size`` bytes, every page resident; the handle to unmap them with."""

    def unmap(self, mapping: object) -> None: ...


class LocalMemory:
    @property
    def pid(self) -> None:
        """This process holds it."""

    async def map(self, size: int) -> object:
        """Off the event loop (mmap releases the GIL while populating)."""
        return await asyncio.to_thread(populated, size)

    def unmap(self, mapping: object) -> None:
        """munmap on a thread: the kernel takes milliseconds to take back a block of tens of MB, which
        the event loop (and GetStatus with it) would wait for."""
        assert isinstance(mapping, mmap.mmap)
        try:
            asyncio.get_running_loop().run_in_executor(None, mapping.close)
        except RuntimeError:  # no loop (a test's teardown): here and now
            mapping.close()


class Block:
    """Real resident memory standing for ``nominal`` bytes of the modelled daemon."""

    def __init__(self, arena: Arena, nominal: int, mapping: object | None) -> None:
        self._arena = arena
        self.nominal = nominal
        self._mapping = mapping

    def free(self) -> None:
        if self._mapping is None and self.nominal == 0:
            return
        if self._mapping is not None:
            self._arena.memory.unmap(self._mapping)
            self._mapping = None
        self._arena._freed(self.nominal)
        self.nominal = 0


class Arena:
    def __init__(self, memory_scale: float, memory: Memory | None = None) -> None:
        self.scale = memory_scale
        self.memory: Memory = memory if memory is not None else LocalMemory()
        self.nominal_in_use = 0
        self.peak_nominal = 0

    def real_bytes(self, nominal: int) -> int:
        return real_bytes(nominal, self.scale)

    async def alloc(self, nominal: int) -> Block:
        size = self.real_bytes(nominal)
        mapping = await self.memory.map(size) if size else None
        self.nominal_in_use += nominal
        self.peak_nominal = max(self.peak_nominal, self.nominal_in_use)
        return Block(self, nominal, mapping)

    def _freed(self, nominal: int) -> None:
        self.nominal_in_use -= nominal


def malloc_trim() -> Callable[[], object]:
    """glibc's ``malloc_trim(0)``; a no-op where the C library has none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except AttributeError:
        return lambda: None
    return functools.partial(trim, 0)


class InputsHeld:
    """Counts the proof inputs this process holds (a gRPC request being handled, a payload being
    read) and, once it holds none, hands the heap they freed back to the kernel.

    glibc keeps freed memory in its arenas: gRPC's receive buffers of a 60 MB C1 (tens of MB in
    small pieces, in its own threads' arenas) stayed resident after the request, round after
    round (1 GB after 24 rejected 64 MB inputs). ``malloc_trim`` (a C call that lets other threads
    run) gives it back; it runs on a thread when the last held input is released."""

    def __init__(self, trim: Callable[[], object] | None = None) -> None:
        self.count = 0
        self._trim = trim if trim is not None else malloc_trim()

    def hold(self) -> None:
        self.count += 1

    def release(self) -> None:
        self.count -= 1
        if self.count == 0:
            asyncio.get_running_loop().run_in_executor(None, self._trim)
