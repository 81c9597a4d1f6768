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


def test_a_status_snapshot_recorded_before_the_counter_rename_still_reads() -> None:
    # As sessions recorded before issue 17 wrote it (client.py snapshot_from_status, /status "counters").
    old = {
        "type": "StatusSnapshot", "t": 100.0, "uptime_secs": 5.0, "budget_total_bytes": 400, "budget_used_bytes": 40,
        "synthesizing": 1, "gpu_workers_busy": 0, "gpu_workers_total": 1, "partitions_waiting_gpu": 0,
        "total_completed": 7, "total_failed": 2,
    }  # fmt: skip
    snapshot = ev.from_record(json.loads(json.dumps(old)))
    assert isinstance(snapshot, ev.StatusSnapshot)
    assert (snapshot.status_json_completed, snapshot.status_json_failed) == (7, 2)
    assert "total_failed" not in ev.to_record(snapshot)


def test_a_launch_recorded_with_a_payload_allowance_still_reads() -> None:
    # As sessions wrote it while bench widened an engine's cgroup for its inputs in flight: the box's cgroup
    # now holds the box alone, and the allowance recorded then is left out.
    old = {
        "type": "DaemonLaunched", "t": 100.0, "mode": "engine", "pid": 7, "command": ["cuzk-engine"],
        "config_path": None, "listen": "unix:///s", "log_path": None, "memory_limit_bytes": 1 << 30,
        "payload_allowance_bytes": 28 << 20, "memory_scale": 1 / 256,
    }  # fmt: skip
    launched = ev.from_record(json.loads(json.dumps(old)))
    assert isinstance(launched, ev.DaemonLaunched)
    assert (launched.memory_limit_bytes, launched.memory_scale) == (1 << 30, 1 / 256)
    assert "payload_allowance_bytes" not in ev.to_record(launched)
