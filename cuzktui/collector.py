"""The cyclic garbage collector around work that makes hundreds of thousands of objects and no cycles.

The collector's passes are triggered by how many objects are made, and each walks every object still
young; over a model being unpickled or a trace being written they find nothing to free and took from a
fifth to a half of that work's time (measured here: model_cache, export).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Final


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off inside (objects are still freed when their last reference goes), as it was after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def to_oldest_generation() -> None:
    """Move every object the collector tracks (those just made) into its oldest generation at once: the
    young generations' passes would otherwise walk all of them, one generation after the other, to free
    nothing. Objects frozen by someone else (``gc.freeze``) stay frozen: then this does nothing."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


# How often a long-running app's frozen objects are walked again for cycles (QuietCollections): a dashboard
# left cyclic garbage of ~370 objects a second here, which the collector's own rule (a quarter more survivors
# than the oldest generation's ~75,000) collected about every 50 s.
FULL_COLLECTION_EVERY_S: Final = 60.0
# Behind a flooding log the app is never quiet; its frozen garbage is still collected, this many times later.
BUSY_STRETCH: Final = 4


class QuietCollections:
    """Full collections at a long-running app's quiet moments instead of whenever a quarter more objects
    survived than its oldest generation holds. Reading a flooding log, about one object a line survives
    into that generation, and a model of ~2,000 proofs is ~140,000 tracked objects: the collector walked
    all of them every few seconds, 100-250 ms a time, and a key pressed then waited for it (benchmarks/
    run_all.py --only flood). Here what survived a poll is frozen (the collector no longer walks it;
    reference counting still frees it), and the frozen objects are collected together again at the first
    poll that is not behind the log FULL_COLLECTION_EVERY_S after the last such collection (BUSY_STRETCH
    times that however busy): cyclic garbage waits at most that long, one walk at a moment of no flood."""

    def __init__(self, every_s: float = FULL_COLLECTION_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._every_s = every_s
        self._clock = clock
        self._collected_at = clock()

    def after_poll(self, behind: bool) -> bool:
        """Freeze what the poll left; first collect everything frozen when that is due (True then)."""
        now = self._clock()
        due = now - self._collected_at >= self._every_s * (BUSY_STRETCH if behind else 1)
        if due:
            gc.unfreeze()
            gc.collect()
            self._collected_at = now
        gc.freeze()
        return due

    def close(self) -> None:
        """Hand the frozen objects back to the collector (the app is ending)."""
        gc.unfreeze()


def collect_everything() -> None:
    """A full collection that walks frozen objects too (QuietCollections'), which stay frozen after: for
    work that has just dropped a whole model (its jobs and partitions refer to one another, so only the
    collector frees them) and must not hold two until the next quiet poll."""
    frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    gc.collect()
    if frozen:
        gc.freeze()
