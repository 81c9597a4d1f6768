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
import mmap
from collections.abc import Awaitable, Callable
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.units import GiB

from . import tracing
from .tracing import Logger

PAGE: Final = mmap.PAGESIZE


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


class Block:
    """Real resident memory standing for ``nominal`` bytes of the modelled daemon."""

    def __init__(self, arena: Arena, nominal: int, mapping: mmap.mmap | None) -> None:
        self._arena = arena
        self.nominal = nominal
        self._mapping = mapping

    def free(self) -> None:
        if self._mapping is None and self.nominal == 0:
            return
        if self._mapping is not None:
            self._mapping.close()  # munmap: the pages go back to the kernel at once
            self._mapping = None
        self._arena._freed(self.nominal)
        self.nominal = 0


class Arena:
    def __init__(self, memory_scale: float) -> None:
        self.scale = memory_scale
        self.nominal_in_use = 0
        self.peak_nominal = 0

    def real_bytes(self, nominal: int) -> int:
        real = int(nominal * self.scale)
        return 0 if real <= 0 else -(-real // PAGE) * PAGE

    def _map(self, size: int) -> mmap.mmap:
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
        mapping = mmap.mmap(-1, size, flags=flags)
        if not hasattr(mmap, "MAP_POPULATE"):
            mapping[::PAGE] = b"\x01" * (-(-size // PAGE))
        return mapping

    async def alloc(self, nominal: int) -> Block:
        """Maps and faults in the pages off the event loop (mmap releases the GIL while populating)."""
        size = self.real_bytes(nominal)
        mapping = await asyncio.to_thread(self._map, size) if size else None
        self.nominal_in_use += nominal
        self.peak_nominal = max(self.peak_nominal, self.nominal_in_use)
        return Block(self, nominal, mapping)

    def _freed(self, nominal: int) -> None:
        self.nominal_in_use -= nominal
