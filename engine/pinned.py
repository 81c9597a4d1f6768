"""The CUDA pinned memory pool (docs/daemon-interface.md §6.6, §6.5 step 1), with real, touched host memory.

In the daemon, partition synthesis writes its a/b/c vectors straight into page-locked buffers
from this pool so the host→device copy at GPU prove start runs at full PCIe speed. The engine
emulates it as follows:

* When: only in the partitioned path, and only once a capacity hint is cached for the circuit,
  i.e. after the first synthesis of that circuit has completed. Every synthesis that starts
  before that (the first wave after start) is unpinned and grows its a/b/c on the heap.
* Checkout: a pinned partition checks out three buffers (a, b, c) of ``num_constraints × 32``
  bytes each (PoRep: 4,168,923,808 bytes = 3.8826 GiB) at synthesis start. Each is the best fit
  among the free buffers (the smallest one that is large enough) or, if none fits, a new
  ``cudaHostAlloc``: real memory mapped and faulted in at once (page-locked memory is resident
  from the moment it is allocated), which takes ``ALLOC_S`` (≈ 1 s) per buffer × ``time_scale``.
* Checkin: the three buffers go back to the free list when the GPU prove-start call returns
  (where the unpinned path frees its heap a/b/c), or when a failed job's partition is dropped.
  Their memory stays resident: the pool never shrinks on its own, so it settles at the largest
  number of a/b/c sets that were ever checked out at once.
* Eviction: when a budget acquisition blocks, the evictor first frees idle (checked-in) buffers,
  smallest first (the code frees the smallest first although its comment says largest,
  docs/daemon-interface.md §11.10), until the shortfall is covered, then turns to SRS/PCE. Freeing pinned
  memory gives no budget back (the pool is not charged to the budget, §6.3), so the blocked
  acquisition retries, fails and calls the evictor again: a blocked acquisition drains the idle
  pool before any SRS or PCE is evicted, as in the daemon.
* Not charged to the budget, and not reported: GetStatus ``pinned_memory_*`` stay 0 (§1.7).
* Allocation failure (the real mapping fails): ``cudaHostAlloc failed`` WARNs, the buffers
  already checked out for that partition go back, and the partition falls back to the heap.

The pinned buffers are real memory in the engine's :class:`~engine.memory.Arena`, so the arena's
peak (and the process' RSS) include the pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.units import GiB

from . import tracing
from .memory import Arena, Block
from .timemodel import Clock
from .tracing import Logger

ALLOC_S: Final = 1.0  # one cudaHostAlloc of a ≈ 4 GiB buffer, modelled seconds
SCALAR_SIZE: Final = 32  # bytes per a/b/c element (a BLS12-381 scalar)
CUDA_ERROR_MEMORY_ALLOCATION: Final = 2


@dataclass(eq=False, slots=True)
class PinnedBuffer:
    size: int
    block: Block


class PinnedPool:
    def __init__(self, arena: Arena, clock: Clock, log: Logger) -> None:
        self.arena = arena
        self.clock = clock
        self.log = log
        self.free: list[PinnedBuffer] = []
        self.total_bytes = 0  # pinned bytes currently owned (free + checked out)
        self.total_allocated = 0  # buffers ever allocated
        self.checked_out = 0

    @property
    def free_bytes(self) -> int:
        return sum(buf.size for buf in self.free)

    async def checkout(self, min_bytes: int) -> PinnedBuffer | None:
        """Best-fit reuse of a free buffer, else a new allocation; None if that fails."""
        fits = [buf for buf in self.free if buf.size >= min_bytes]
        if fits:
            best = min(fits, key=lambda buf: buf.size)
            self.free.remove(best)
            self.checked_out += 1
            self.log.info(
                tracing.PINNED,
                msg.PINNED_REUSE,
                ("size_gib", best.size / GiB),
                ("free_remaining", len(self.free)),
            )
            return best
        return await self._allocate(min_bytes)

    async def _allocate(self, size: int) -> PinnedBuffer | None:
        started = time.monotonic()
        try:
            block = await self.arena.alloc(size)
        except (OSError, MemoryError):
            self.log.warn(
                tracing.PINNED,
                msg.PINNED_ALLOC_FAILED_SHORT,
                ("size_gib", size / GiB),
                ("cuda_err", CUDA_ERROR_MEMORY_ALLOCATION),
            )
            self.log.warn(tracing.PINNED, msg.PINNED_ALLOC_FAILED, ("size_gib", size / GiB))
            return None
        # cudaHostAlloc is slow (the pages are allocated and locked); the mapping's own time counts.
        await self.clock.sleep(ALLOC_S - (time.monotonic() - started) / self.clock.scale)
        self.total_bytes += size
        self.total_allocated += 1
        self.checked_out += 1
        self.log.info(
            tracing.PINNED,
            msg.PINNED_ALLOCATED,
            ("size_gib", size / GiB),
            ("total_buffers", self.total_allocated),
            ("total_gib", self.total_bytes / GiB),
        )
        return PinnedBuffer(size, block)

    def checkin(self, buf: PinnedBuffer) -> None:
        self.checked_out -= 1
        self.log.info(tracing.PINNED, msg.PINNED_CHECKIN, ("size_gib", buf.size / GiB))
        self.free.append(buf)

    async def checkout_abc(self, element_capacity: int) -> list[PinnedBuffer] | None:
        """Three buffers for a/b/c, or None (with the ones already taken returned) on failure."""
        buf_bytes = element_capacity * SCALAR_SIZE
        taken: list[PinnedBuffer] = []
        for _ in range(3):
            buf = await self.checkout(buf_bytes)
            if buf is None:
                for held in taken:
                    self.checkin(held)
                return None
            taken.append(buf)
        return taken

    def shrink(self, target_bytes: int) -> int:
        """Evictor step 1: frees idle buffers, smallest first, until ``target_bytes`` are freed."""
        freed = 0
        self.free.sort(key=lambda buf: buf.size, reverse=True)
        while freed < target_bytes and self.free:
            buf = self.free.pop()
            buf.block.free()
            self.total_bytes -= buf.size
            freed += buf.size
            self.log.info(
                tracing.PINNED,
                msg.PINNED_FREED,
                ("freed_gib", buf.size / GiB),
                ("total_freed_gib", freed / GiB),
            )
        return freed
