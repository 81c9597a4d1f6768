"""The cyclic garbage collector around work that makes hundreds of thousands of objects and no cycles.

The collector's passes are triggered by how many objects are made, and each walks every object still
young; over a model being unpickled or a trace being written they find nothing to free and took from a
fifth to a half of that work's time (measured here: model_cache, export).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


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
