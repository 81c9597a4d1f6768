from __future__ import annotations

import json

import pytest

from cuzktui import events as ev


def test_observed_event_round_trips_through_json() -> None:
    original = ev.DaemonExited(t=1.5, pid=42, returncode=-9, signal=9, cause="oom_kill", evidence=("oom_kill 0 -> 1",))
    restored = ev.from_record(json.loads(json.dumps(ev.to_record(original))))
    assert restored == original


@pytest.mark.parametrize(
    "record",
    [
        [],
        {"type": "Nope"},
        {"type": "MemorySample"},
        {"type": "MemorySample", "t": "x", "rss_bytes": 1},
        {"type": "DaemonExited", "t": 1, "pid": 1, "returncode": 0, "signal": None, "cause": "bogus"},
    ],
)
def test_bad_records_are_rejected_with_a_reason(record: object) -> None:
    with pytest.raises(ev.RecordError):
        ev.from_record(record)
