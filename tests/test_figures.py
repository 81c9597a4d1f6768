"""The figures the panels and the waterfall show, computed headless from a constructed model."""

from __future__ import annotations

from cuzktui import events as ev
from cuzktui.figures import (
    RATE_WINDOW_S,
    apply_stage,
    bench_per_hour,
    proof_counts,
    session_origin,
    session_rate,
    status_line,
    timeline_now,
)
from cuzktui.model import SessionModel
from cuzktui.supervisor import HANDED_TO_BENCHMARK
from cuzktui.units import format_duration

T0 = 1_767_225_600.0


def one_job(model: SessionModel, start: float, job: str, gpu_s: float = 10.0) -> float:
    """An anchored run (engine start at ``start``) proving one single-partition job; returns its end."""
    model.apply(ev.DaemonStarting(start))
    model.apply(ev.EngineStarted(start, True))
    for offset_s, name in ((1, "SYNTH_START"), (5, "SYNTH_END"), (5, "GPU_QUEUE"), (6, "GPU_START")):
        model.apply(ev.TimelineEvent(offset_s * 1000, name, job, {"partition": "0"}, partition=0, worker=0))
    end = start + 6 + gpu_s
    model.apply(ev.TimelineEvent(round((end - start) * 1000), "GPU_END", job, {"partition": "0"}, 0, 0))
    model.apply(ev.ProofAssembled(end, job, 1920, 15_000, None, None))
    return end


def test_an_empty_session_has_no_now_no_rate_and_its_origin_is_the_default() -> None:
    model = SessionModel()
    assert timeline_now(model) is None
    assert session_rate(model) is None
    assert session_origin(model.timeline, 42.0) == 42.0
    assert proof_counts(model) == (0, 0, 1, 0)


def test_now_follows_the_model_clock_past_the_last_timeline_event_of_an_anchored_run() -> None:
    model = SessionModel()
    end = one_job(model, T0, "j1")
    assert timeline_now(model) == end
    model.apply(ev.MemorySample(end + 30, 1 << 30))  # a later sample moves the model's "now"
    assert timeline_now(model) == end + 30
    assert session_origin(model.timeline, 0.0) == T0


def test_counts_add_earlier_runs_to_the_current_runs_get_status_counts_which_restart_from_zero() -> None:
    model = SessionModel()
    one_job(model, T0, "j1")
    # The first run's GetStatus counted more than its log showed (the log was read from later on): a
    # restart zeroes GetStatus's counts, never the session's.
    model.apply(ev.DaemonProofCounts(T0 + 50, 7, 2))
    assert proof_counts(model)[:2] == (7, 2)
    one_job(model, T0 + 100, "j2")
    counts = proof_counts(model)
    assert (counts.completed, counts.failed, counts.runs, counts.run_completed) == (8, 2, 2, 1)
    # The second run's GetStatus has counted three (say, attached late): the session says 7 + 3.
    model.apply(ev.DaemonProofCounts(T0 + 130, 3, 1))
    counts = proof_counts(model)
    assert (counts.completed, counts.failed, counts.run_completed) == (10, 3, 3)


def test_the_status_endpoints_counters_are_never_the_proof_counts() -> None:
    model = SessionModel()
    one_job(model, T0, "j1")
    # status.rs counts partitioned jobs only: what it says, higher or lower, changes nothing.
    model.apply(ev.StatusSnapshot(T0 + 30, 30.0, 0, 0, 0, 0, 1, 0, 9, 9))
    counts = proof_counts(model)
    assert (counts.completed, counts.failed) == (1, 0)


def test_the_session_rate_is_over_the_session_when_shorter_than_the_window() -> None:
    model = SessionModel()
    end = one_job(model, T0, "j1")
    rate = session_rate(model)
    assert rate is not None
    per_hour, window = rate
    assert window == end - T0 < RATE_WINDOW_S
    assert per_hour == 3600.0 / window


def test_bench_throughput_is_its_own_figure_once_finished_else_completed_over_elapsed() -> None:
    model = SessionModel()
    model.apply(ev.BenchStarted(T0, "b1", "porep", 4, 2, 3))
    model.apply(ev.ProofFinished(T0 + 900, "b1", "j1", "porep", "COMPLETED"))
    bench = model.bench
    assert bench is not None
    assert bench_per_hour(bench, None) is None
    assert bench_per_hour(bench, T0) is None
    assert bench_per_hour(bench, T0 + 1800) == 2.0
    model.apply(ev.BenchFinished(T0 + 2000, "b1", 4, 0, 2000.0, 7.2, "completed"))
    assert bench_per_hour(bench, T0 + 1800) == 7.2


def test_apply_stage_reads_the_restart_from_the_run_counter_and_phase() -> None:
    model = SessionModel()
    launched = ev.DaemonLaunched(T0, "engine", 1, ("cuzk-engine",), None, "127.0.0.1:9820", None)
    model.apply(launched)
    runs = model.daemon.runs
    assert apply_stage(model, runs) == "saving the config and draining proofs in flight"
    model.apply(ev.DaemonExited(T0 + 5, 1, 0, None, "stopped", (), None))
    assert apply_stage(model, runs) == "restarting"
    model.apply(ev.DaemonLaunched(T0 + 6, "engine", 2, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    assert apply_stage(model, runs) == "restarting: waiting for the daemon to serve"
    model.apply(ev.DaemonReadyObserved(T0 + 9, 2, 3.0))
    assert apply_stage(model, runs) == "ready"


def test_an_engines_rates_are_per_hour_of_the_box_it_models() -> None:
    model = SessionModel()
    model.apply(ev.DaemonLaunched(T0 - 1, "engine", 7, ("cuzk-engine",), None, "unix:///s", None, time_scale=0.02))
    end = one_job(model, T0, "j1")
    rate = session_rate(model)
    assert rate is not None
    per_hour, window = rate
    # One proof in (end − T0) real seconds is one proof in 50 × as many seconds of the modelled box.
    assert window == (end - T0) * 50
    assert per_hour == 3600.0 / window
    model.apply(ev.BenchStarted(T0, "b1", "porep", 4, 2, 3, time_scale=0.02))
    model.apply(ev.ProofFinished(T0 + 18, "b1", "j1", "porep", "COMPLETED"))
    bench = model.bench
    assert bench is not None
    assert bench_per_hour(bench, T0 + 36) == 2.0  # 36 real seconds are the box's half hour


class Clock:
    """A replay clock at a fixed cursor (cuzktui.controller.ReplayClock)."""

    def __init__(self, cursor_t: float, speed: float, playing: bool) -> None:
        self.cursor_t: float | None = cursor_t
        self.speed = speed
        self.playing = playing

    @property
    def span(self) -> tuple[float, float] | None:
        return (T0, T0 + 300)

    def seek(self, t: float) -> None:
        self.cursor_t = t

    def play(self, speed: float) -> None:
        self.playing, self.speed = True, speed

    def pause(self) -> None:
        self.playing = False


def test_the_status_line_names_a_failed_start_and_a_replay_s_cursor_speed_and_keys() -> None:
    model = SessionModel()
    assert status_line(model, None) == "no daemon"
    model.apply(ev.StartFailed(T0, "the daemon binary /opt/cuzk-daemon does not exist: nothing was launched"))
    assert status_line(model, None) == "NOT STARTED"
    model.apply(ev.DaemonLaunched(T0 + 1, "engine", 7, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    model.apply(ev.DaemonReadyObserved(T0 + 3, 7, 2.0))
    assert status_line(model, None) == "ready"
    at = format_duration(130.0)
    assert status_line(model, Clock(T0 + 130, 20, True)) == (
        f"ready · replay playing {at} / 5m x20 (space pause, < > speed)"
    )
    model.apply(ev.DaemonExited(T0 + 200, 7, -15, 15, "stopped", handover=HANDED_TO_BENCHMARK))
    assert status_line(model, None) == "handed over to the benchmark runner"
    # The runner's own daemon crashing is a death, whoever holds the daemon.
    model.apply(ev.DaemonLaunched(T0 + 201, "engine", 8, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    model.apply(ev.DaemonExited(T0 + 210, 8, -11, 11, "signal"))
    assert status_line(model, None) == "DEAD"


def test_a_restart_to_apply_a_config_is_said_so_not_dead_until_the_start_after_it_fails() -> None:
    from cuzktui.controller import Identity
    from cuzktui.ui.widgets.panels import daemon_content

    model = SessionModel()
    model.apply(ev.DaemonLaunched(T0, "engine", 7, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    model.apply(ev.DaemonReadyObserved(T0 + 1, 7, 1.0))
    evidence = ("killed by SIGTERM (exit status 143 in a shell)", "SIGTERM was sent by the supervisor")
    model.apply(ev.DaemonExited(T0 + 60, 7, -15, 15, "stopped", evidence, handover=ev.restarting_to_apply(2)))
    identity = Identity("engine", "cuzk-engine", None)
    assert status_line(model, None) == "restarting to apply config v2"
    panel = daemon_content(model, identity).plain.splitlines()
    assert panel[1].startswith("RESTARTING  pid 7") and panel[2].strip() == "restarting to apply config v2", panel
    assert "DEAD" not in "\n".join(panel)
    # A start that fails before one is launched leaves no daemon: not started, and the stop no longer "restarting".
    model.apply(ev.StartFailed(T0 + 61, "the daemon did not start: [Errno 2] No such file or directory"))
    assert status_line(model, None) == "NOT STARTED"
    panel = daemon_content(model, identity).plain.splitlines()
    assert panel[1].startswith("DEAD  pid 7"), panel
    assert panel[2].strip() == "stopped to apply config v2; the start after it failed", panel
    # The next launch that serves is the daemon again.
    model.apply(ev.DaemonLaunched(T0 + 90, "engine", 9, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    model.apply(ev.DaemonReadyObserved(T0 + 91, 9, 1.0))
    assert status_line(model, None) == "ready"
