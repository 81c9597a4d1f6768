"""collector: the cyclic garbage collector paused, and objects just made moved to its oldest generation."""

from __future__ import annotations

import gc

import pytest

from cuzktui import collector


class _Node:
    """An object the collector tracks."""


def _generation_of(obj: object) -> int | None:
    return next((g for g in range(3) if any(o is obj for o in gc.get_objects(generation=g))), None)


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_turns_the_collector_off_inside_and_back_as_it_was(enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(RuntimeError), collector.paused():
            assert not gc.isenabled()
            raise RuntimeError
        assert gc.isenabled() == enabled
    finally:
        gc.enable()


def test_objects_just_made_go_to_the_oldest_generation_unfrozen() -> None:
    with collector.paused():  # no pass moves it before the call
        node = _Node()
        assert _generation_of(node) == 0
        collector.to_oldest_generation()
    assert _generation_of(node) == 2
    assert gc.get_freeze_count() == 0


def test_objects_someone_froze_stay_frozen() -> None:
    with collector.paused():
        gc.freeze()
        try:
            frozen = gc.get_freeze_count()
            node = _Node()
            collector.to_oldest_generation()
            assert gc.get_freeze_count() == frozen
            assert _generation_of(node) == 0
        finally:
            gc.unfreeze()
