"""collector: the cyclic garbage collector paused, objects just made moved to its oldest generation, and a
long-running app's full collections moved to its quiet polls."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

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


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cyclic_garbage() -> weakref.ref[_Node]:
    """A dropped object that refers to itself (only the cyclic collector frees it), watched by a weak reference."""
    node = _Node()
    node.self = node  # type: ignore[attr-defined]
    return weakref.ref(node)


@pytest.fixture
def quiet() -> Iterator[tuple[collector.QuietCollections, _Clock]]:
    clock = _Clock()
    collections = collector.QuietCollections(every_s=60.0, clock=clock)
    with collector.paused():  # only the calls under test collect
        try:
            yield collections, clock
        finally:
            collections.close()
    assert gc.get_freeze_count() == 0


def test_what_a_poll_left_is_frozen_until_a_quiet_poll_a_period_later_collects_it(
    quiet: tuple[collector.QuietCollections, _Clock],
) -> None:
    collections, clock = quiet
    garbage = _cyclic_garbage()
    assert not collections.after_poll(behind=False)
    gc.collect()  # the collector's own passes no longer walk what the poll left
    assert garbage() is not None
    clock.now += 59.0
    assert not collections.after_poll(behind=False)
    assert garbage() is not None
    clock.now += 1.0
    assert collections.after_poll(behind=False)
    assert garbage() is None
    assert gc.get_freeze_count() > 0  # what is alive is frozen again


def test_behind_a_flooding_log_the_frozen_garbage_waits_longer_but_not_for_ever(
    quiet: tuple[collector.QuietCollections, _Clock],
) -> None:
    collections, clock = quiet
    garbage = _cyclic_garbage()
    collections.after_poll(behind=True)
    clock.now += 60.0 * collector.BUSY_STRETCH - 1
    assert not collections.after_poll(behind=True)
    assert garbage() is not None
    clock.now += 1.0
    assert collections.after_poll(behind=True)
    assert garbage() is None


def test_collect_everything_frees_frozen_garbage_and_keeps_the_living_frozen(
    quiet: tuple[collector.QuietCollections, _Clock],
) -> None:
    collections, _clock = quiet
    garbage = _cyclic_garbage()
    collections.after_poll(behind=False)
    collector.collect_everything()
    assert garbage() is None
    assert gc.get_freeze_count() > 0


def test_collect_everything_leaves_an_unfrozen_process_unfrozen() -> None:
    garbage = _cyclic_garbage()
    collector.collect_everything()
    assert garbage() is None
    assert gc.get_freeze_count() == 0
