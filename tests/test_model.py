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


def _attach(t: float, pid: int | None, log: str | None = None) -> ev.DaemonLaunched:
    return ev.DaemonLaunched(t, "attached", pid, (), None, "unix:///run/curio/cuzk.sock", log)


def test_a_daemon_that_logs_its_start_before_the_launch_is_recorded_is_in_its_first_run() -> None:
    """The real daemon (Rust) writes "cuzk-daemon starting" within a millisecond of its exec, before the
    supervisor notes the launch: the log's start and the launch are one run, whatever their order."""
    model = SessionModel()
    model.apply(ev.DaemonStarting(10.0001))
    model.apply(ev.EngineStarted(10.0003, True))
    model.apply(_launch(10.001, 1))
    model.apply(ev.DaemonReadyObserved(t=10.5, pid=1, startup_s=0.5))
    assert (model.daemon.runs, model.runs(), len(model.timeline.segments)) == (1, 1, 1)
    # Its restart is run 2, the launch first (the engine) or its log's start first (the real daemon).
    model.apply(ev.DaemonExited(20.0, 1, -15, 15, "stopped"))
    model.apply(ev.DaemonStarting(21.0001))
    model.apply(_launch(21.001, 2))
    assert model.daemon.runs == 2 and len(model.timeline.segments) == 2
    model.apply(ev.DaemonExited(30.0, 2, -15, 15, "stopped"))
    model.apply(_launch(31.0, 3))
    model.apply(ev.DaemonStarting(31.2))
    assert model.daemon.runs == 3 and len(model.timeline.segments) == 3


def test_attached_the_runs_are_the_starts_its_log_shows_and_one_without_a_log() -> None:
    # The log is read from its start: one daemon start, before the attach was recorded.
    model = SessionModel()
    model.apply(ev.DaemonStarting(5.0))
    model.apply(ev.EngineStarted(5.1, True))
    model.apply(_attach(100.0, 7, "/var/log/cuzk.log"))
    model.apply(ev.DaemonReadyObserved(100.2, 7, 0.0, uptime_s=95.0))
    assert model.daemon.runs == 1
    # A log that shows two earlier starts (systemd restarted it before): the daemon is in its third run.
    model = SessionModel()
    for start in (1.0, 2.0, 3.0):
        model.apply(ev.DaemonStarting(start))
    model.apply(_attach(100.0, 7, "/var/log/cuzk.log"))
    assert model.daemon.runs == 3
    # Without a log: the run attached to.
    model = SessionModel()
    model.apply(_attach(100.0, None))
    model.apply(ev.DaemonReadyObserved(100.2, None, 0.0, uptime_s=95.0))
    assert model.daemon.runs == 1


def test_after_a_restart_on_the_attached_address_counts_go_on_and_the_new_run_is_watched() -> None:
    """Watched without a log: GetStatus's counts are all there is, and the new daemon's start at zero."""
    model = SessionModel()
    model.apply(_attach(100.0, 7))
    model.apply(ev.DaemonReadyObserved(100.2, 7, 0.0, uptime_s=60.0))
    model.apply(ev.DaemonProofCounts(110.0, 5, 1))
    model.apply(ev.DaemonExited(120.0, 7, None, None, "unknown", ("the exit status … is unknown",)))
    assert model.daemon.phase == "dead"
    model.apply(_attach(124.0, 9))
    model.apply(ev.DaemonReadyObserved(124.0, 9, 0.0, uptime_s=1.0))
    model.apply(ev.DaemonProofCounts(124.5, 0, 0))
    assert (model.daemon.phase, model.daemon.pid, model.daemon.runs) == ("ready", 9, 2)
    from cuzktui.figures import proof_counts

    assert proof_counts(model)[:3] == (5, 1, 2)
    model.apply(ev.DaemonProofCounts(130.0, 2, 0))
    assert proof_counts(model) == (7, 1, 2, 2)
    from cuzktui.report import build_report

    report = build_report(model, "an attached session without a log")
    assert (report["daemon_runs"], report["restarts"]) == (2, 1)  # was 0: no log, no segment


def test_an_exit_recorded_after_the_next_runs_log_start_ends_the_run_before_it() -> None:
    """Attached with a log, the restarted daemon's first line can be read before its predecessor's exit
    is recorded: the exit belongs to the run it ended, and the new run goes on."""
    model = SessionModel()
    model.apply(ev.DaemonStarting(5.0))
    model.apply(ev.EngineStarted(5.0, True))
    model.apply(_attach(10.0, 7, "/var/log/cuzk.log"))
    model.apply(ev.DaemonStarting(20.5))  # the new daemon's first line
    model.apply(ev.DaemonExited(20.0, 7, None, None, "unknown"))  # the old one's exit, seen at 20.0
    first, second = model.timeline.segments
    assert first.ended and not second.ended
    assert [index for index, _ in model.exits] == [0]
    model.apply(_attach(21.0, 9, "/var/log/cuzk.log"))  # the supervisor follows the address: the same run 2
    model.apply(ev.DaemonReadyObserved(21.0, 9, 0.0, uptime_s=0.5))
    assert (model.daemon.runs, model.daemon.phase) == (2, "ready")


def test_a_successors_counts_read_before_its_restart_was_recorded_take_nothing_from_the_run_before() -> None:
    """The recorder's GetStatus can reach the new daemon before the liveness probe says it is one (no pid
    to watch): its lower counts belong to no run yet, and the earlier run keeps what it counted."""
    from cuzktui.figures import proof_counts

    model = SessionModel()
    model.apply(_attach(100.0, None))
    model.apply(ev.DaemonReadyObserved(100.2, None, 0.0, uptime_s=60.0))
    model.apply(ev.DaemonProofCounts(110.0, 2, 0))
    model.apply(ev.DaemonProofCounts(121.0, 0, 0))  # the successor's, before its restart is known
    model.apply(ev.DaemonExited(119.0, None, None, None, "unknown", ("its end was not seen (no pid to watch)",)))
    model.apply(_attach(122.0, None))
    model.apply(ev.DaemonReadyObserved(122.0, None, 0.0, uptime_s=1.0))
    model.apply(ev.DaemonProofCounts(123.0, 1, 0))
    assert proof_counts(model) == (3, 0, 2, 1)
