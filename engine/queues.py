"""A closable async priority queue: the scheduler, synthesis and GPU queues of the pipeline."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ClosableQueue(Generic[T]):
    """Pops the smallest key first (ties in push order). After :meth:`close`, waiting and
    future ``get`` calls return None, which is how workers learn about shutdown."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, T]] = []
        self._order = itertools.count()
        self._getters: deque[asyncio.Future[None]] = deque()
        self.closed = False

    def __len__(self) -> int:
        return len(self._heap)

    def items(self) -> list[T]:
        return [entry[2] for entry in self._heap]

    def push(self, key: Any, item: T) -> None:
        heapq.heappush(self._heap, (key, next(self._order), item))
        self._wake_one()

    def put(self, key: Any, item: T) -> T | None:
        """Inserts at ``key`` like a BTreeMap insert: an item already queued at an equal key is
        replaced and returned (upstream engine.rs ``PriorityWorkQueue::push`` drops it)."""
        for index, (queued_key, order, queued) in enumerate(self._heap):
            if queued_key == key:
                self._heap[index] = (queued_key, order, item)
                self._wake_one()
                return queued
        self.push(key, item)
        return None

    async def get(self) -> T | None:
        while not self._heap and not self.closed:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                # Pass a wake-up we may have consumed on to the next waiter.
                if getter.done() and not getter.cancelled() and self._heap:
                    self._wake_one()
                raise
        if self.closed:
            return None
        return heapq.heappop(self._heap)[2]

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def close(self) -> None:
        self.closed = True
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
