from __future__ import annotations

from cuzktui import events as ev
from cuzktui.model import Series, SessionModel


def test_series_stays_bounded_and_keeps_the_peak() -> None:
    series = Series(capacity=16)
    for i in range(1000):
        series.append(float(i), 500.0 if i == 777 else float(i % 10))
    points = series.points()
    assert len(points) <= 16
    assert points[0][0] == 0.0, "compaction keeps the start of the session visible"
    assert series.peak() == 500.0, "a spike survives compaction"
    assert [t for t, _ in points] == sorted(t for t, _ in points)


def test_series_small_is_exact() -> None:
    series = Series(capacity=8)
    for i in range(5):
        series.append(float(i), float(i * 2))
    assert series.points() == [(float(i), float(i * 2)) for i in range(5)]
    assert series.last() == (4.0, 8.0)


def _launch(t: float, pid: int) -> ev.DaemonLaunched:
    return ev.DaemonLaunched(
        t=t, mode="engine", pid=pid, command=("cuzk-engine",), config_path="c.toml", listen="unix:///x", log_path=None,
        memory_limit_bytes=1 << 30,
    )  # fmt: skip


def test_daemon_lifecycle_and_oom_marks() -> None:
    model = SessionModel()
    assert model.apply(_launch(10.0, 1))
    assert model.daemon.phase == "starting" and model.cgroup_limit.last() == (10.0, float(1 << 30))
    model.apply(ev.DaemonReadyObserved(t=12.0, pid=1, startup_s=2.0))
    assert model.daemon.phase == "ready"
    model.apply(
        ev.DaemonExited(t=20.0, pid=1, returncode=-9, signal=9, cause="oom_kill", evidence=("oom_kill 0 -> 1",))
    )
    assert model.daemon.phase == "dead" and model.daemon.exit is not None
    assert model.oom_kills == [20.0]
    model.apply(_launch(21.0, 2))
    assert model.daemon.phase == "starting" and model.daemon.runs == 2 and model.daemon.exit is None
    assert (model.first_t, model.last_t) == (10.0, 21.0)


def test_bench_events_for_another_bench_are_ignored() -> None:
    model = SessionModel()
    model.apply(ev.BenchStarted(t=1.0, bench_id="b1", kind="porep", count=2, concurrency=1, oom_retries=3))
    finished = ev.ProofFinished(t=2.0, bench_id="b1", job_id="j1", kind="porep", status="COMPLETED", total_ms=5)
    assert model.apply(finished)
    assert not model.apply(ev.ProofFinished(t=2.0, bench_id="other", job_id="j", kind="porep", status="FAILED"))
    assert model.bench is not None and (model.bench.completed, model.bench.failed) == (1, 0)


def test_memory_samples_feed_series_and_bump_version() -> None:
    model = SessionModel()
    before = model.memory_version
    model.apply(ev.MemorySample(t=1.0, rss_bytes=100, cgroup_usage_bytes=120, cgroup_limit_bytes=1000))
    assert model.memory_version > before
    assert model.rss.last() == (1.0, 100.0) and model.cgroup_limit.last() == (1.0, 1000.0)
    assert model.budget_total.last() is None


def test_engine_memory_is_shown_in_nominal_bytes() -> None:
    model = SessionModel()
    launched = ev.DaemonLaunched(
        t=1.0, mode="engine", pid=7, command=(), config_path=None, listen="x", log_path=None,
        memory_limit_bytes=1 << 30, memory_scale=1 / 256,
    )  # fmt: skip
    model.apply(launched)
    assert model.cgroup_limit.last() == (1.0, float(256 << 30))
    model.apply(ev.MemorySample(t=2.0, rss_bytes=1 << 29, budget_total_bytes=200 << 30))
    assert model.rss.last() == (2.0, float(128 << 30))
    assert model.budget_total.last() == (2.0, float(200 << 30)), "the daemon's budget is already nominal"


def test_a_run_ending_names_how_the_daemon_took_its_unfinished_jobs() -> None:
    t = 1_700_000_000.0
    model = SessionModel()
    for event in (
        ev.EngineStarted(t, True),
        ev.TimelineEvent(1000, "SYNTH_START", "porep-1", {"partition": "0"}, 0, None, False),
        ev.DaemonExited(t + 5, 4242, -9, 9, "oom_kill", ("exit status 137 (SIGKILL)",)),
        ev.EngineStarted(t + 10, True),
        ev.TimelineEvent(1000, "SYNTH_START", "porep-2", {"partition": "0"}, 0, None, False),
        ev.DaemonExited(t + 15, 4243, 0, None, "stopped"),
    ):
        model.apply(event)
    assert [job.status for job in model.timeline.jobs()] == ["incomplete", "incomplete"]
    assert model.run_ending(0) == "killed with the daemon (OOM)"
    assert model.run_ending(1) == "stopped with the daemon"
    assert model.run_ending(2) == "incomplete (daemon run ended)"
