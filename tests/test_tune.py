"""``cuzk-tui tune``: the search (against a simulated box, no terminal), resume, the best config, and
a short real search on the engine as a 256 GiB box in a memory cgroup."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.cli import main
from cuzktui.config import ConfigDocument, build_config
from cuzktui.daemon_facts import MEASURED_BASE_RSS, MEASURED_RSS_PER_PARTITION
from cuzktui.planner import make_report
from cuzktui.session import SessionWriter, iter_session_events
from cuzktui.tune import (
    BenchTrialRunner,
    Box,
    Knobs,
    Search,
    Trial,
    TrialOutcome,
    best_config,
    config_errors,
    early_stop,
    format_table,
    load_state,
    partitions_at_once,
    partitions_held,
    read_trial_session,
    run_search,
    save_state,
    start_knobs,
)
from cuzktui.units import GiB
from tests.conftest import TEST_TIME_SCALE, memory_cgroup_or_skip, require_engine

ROOT = Path(__file__).resolve().parent.parent


def _report(ram_gib: int, cpus: int = 96) -> object:
    return make_report(
        host_mem_total_bytes=ram_gib * GiB, cgroup=None, memlock_bytes=None, cpus=cpus, cpu_quota=None,
        gpus=(), gpu_state="none",
    )  # fmt: skip


class SimulatedBox:
    """A box whose peak RSS follows ``base + slope × partitions`` (not upstream's figures, so the search
    must learn them) and whose rate grows with partitions at once until ``saturation``; a peak over
    ``limit`` is an OOM kill. Records every config it ran."""

    def __init__(self, limit: int, base: int, slope: int, saturation: int = 11) -> None:
        self.limit, self.base, self.slope, self.saturation = limit, base, slope, saturation
        self.ran: list[Knobs] = []

    def knobs_of(self, config_text: str, concurrency: int) -> Knobs:
        values = ConfigDocument.parse(config_text).effective()
        budget = str(values["memory.total_budget"])
        return Knobs(
            int(budget.removesuffix("GiB")) if budget != "auto" else 10_000,
            int(values["pipeline.max_parallel_synthesis"]), int(values["gpus.gpu_workers_per_device"]),
            int(values["pipeline.max_gpu_queue_depth"]), int(values["gpus.gpu_threads"]),
            int(values["scheduler.max_batch_size"]), concurrency,
        )  # fmt: skip

    def __call__(
        self, index: int, config_text: str, concurrency: int, stop_when: Callable[[Sequence[float]], bool]
    ) -> TrialOutcome:
        knobs = self.knobs_of(config_text, concurrency)
        self.ran.append(knobs)
        p = partitions_at_once(knobs, "porep")
        peak = self.base + self.slope * partitions_held(knobs, "porep")
        if peak > self.limit:
            return TrialOutcome("oom", 0.0, 0, 10.0, self.limit, self.limit, 1, (), f"s{index}", "OOM-killed")
        rate = 10.0 * min(p, self.saturation) + knobs.gpu_workers_per_device
        times = tuple(3600 / rate * k for k in range(1, 13))
        return TrialOutcome("completed", rate, 12, times[-1], peak, self.limit, 0, times, f"s{index}")


def _search(box: SimulatedBox, ram_gib: int = 256) -> Search:
    report = _report(ram_gib)
    baseline = dataclasses.replace(start_knobs(report, 6), total_budget_gib=251, max_parallel_synthesis=0)  # type: ignore[arg-type]
    return Search("porep", 12, Box.from_report(report), start_knobs(report, 6), baseline)  # type: ignore[arg-type]


def _config_for(knobs: Knobs) -> str:
    return build_config(knobs.values())


def test_an_oom_kill_ends_only_its_trial_and_nothing_at_least_as_large_runs_again() -> None:
    # Steeper than upstream's 20 GiB per partition: memcheck's start (7 partitions) already fails.
    box = SimulatedBox(limit=256 * GiB, base=69 * GiB, slope=28 * GiB)
    search = run_search(_search(box), box, _config_for, max_trials=8)
    ran = [t for t in search.trials if t.ran]
    assert [t.knobs for t in ran] == box.ran
    assert [t.status for t in ran[:2]] == ["oom", "oom"]  # the starting "auto" budget, then memcheck's start
    for i, trial in enumerate(ran):
        for earlier in ran[:i]:
            if earlier.status == "oom":
                assert partitions_held(trial.knobs, "porep") < partitions_held(earlier.knobs, "porep")
    best = search.best()
    assert best is not None and best.oom_kills == 0 and best.peak_rss_bytes is not None
    assert best.peak_rss_bytes <= 256 * GiB


def test_the_model_skips_a_trial_it_predicts_over_the_limit_and_finds_the_most_that_fit() -> None:
    box = SimulatedBox(limit=256 * GiB, base=MEASURED_BASE_RSS, slope=MEASURED_RSS_PER_PARTITION)
    search = run_search(_search(box), box, _config_for, max_trials=10)
    skipped = [t for t in search.trials if t.status == "skipped"]
    assert skipped and all("predicted peak RSS" in t.note or "OOM-killed" in t.note for t in skipped)
    assert all(t.knobs not in box.ran for t in skipped)
    # The most partitions that fit 256 GiB at 69 + 20 per partition: 9 (249 GiB).
    best = search.best()
    assert best is not None
    assert partitions_at_once(best.knobs, "porep") == 9
    assert best.proofs_per_hour > search.trials[1].proofs_per_hour  # better than memcheck's start
    assert sum(1 for t in search.trials if t.ran) <= 10


def test_a_search_resumes_where_it_stopped_without_running_a_trial_twice(tmp_path: Path) -> None:
    box = SimulatedBox(limit=256 * GiB, base=MEASURED_BASE_RSS, slope=MEASURED_RSS_PER_PARTITION)
    first = run_search(_search(box), box, _config_for, max_trials=3)
    save_state(first, tmp_path, {"kind": "porep"})
    resumed, args = load_state(tmp_path)
    assert args == {"kind": "porep"} and resumed.trials == first.trials
    run_search(resumed, box, _config_for, max_trials=6)
    assert sum(1 for t in resumed.trials if t.ran) == 6 and len(box.ran) == 6
    assert len(set(box.ran)) == len(box.ran)  # no knobs measured twice


def test_a_cancelled_search_stops_its_running_trial_and_leaves_it_for_a_resume() -> None:
    box = SimulatedBox(limit=256 * GiB, base=MEASURED_BASE_RSS, slope=MEASURED_RSS_PER_PARTITION)
    cancel: list[bool] = []
    told_to_stop: list[bool] = []

    def cancelled_in_the_third_run(
        index: int, config_text: str, concurrency: int, stop_when: Callable[[Sequence[float]], bool]
    ) -> TrialOutcome:
        outcome = box(index, config_text, concurrency, stop_when)
        if len(box.ran) == 3:
            cancel.append(True)  # the operator cancels while it runs: the runner is told to stop
            told_to_stop.append(stop_when(()))
        return outcome

    started: list[int] = []
    search = run_search(
        _search(box), cancelled_in_the_third_run, _config_for, max_trials=8,
        on_start=lambda index, _knobs: started.append(index), cancelled=lambda: bool(cancel),
    )  # fmt: skip
    assert told_to_stop == [True] and len(started) == 3
    # The third run was cut short: not recorded, so a resumed search runs it again.
    assert [t.index for t in search.trials if t.ran] == started[:2] and search.trials[-1].index < started[2]
    run_search(search, box, _config_for, max_trials=3)
    third = [t for t in search.trials if t.ran][2]
    assert third.index == started[2] and third.knobs == box.ran[2] == box.ran[3]


def test_a_trial_clearly_slower_than_the_best_is_stopped() -> None:
    best = Trial(1, Knobs(196, 7, 1, 0, 0, 1, 6), (), "completed", 50.0, completion_times=tuple(range(10, 130, 10)))
    stop = early_stop(best, 12)
    assert not stop([30.0, 60.0, 61.0, 59.0])  # a slow start; the 4th within 1.5 × the best's 40 s
    assert stop([30.0, 60.0, 61.0, 59.0, 100.0])  # the 5th at 100 s, after 1.5 × the best's 50 s
    assert not stop([12.0, 25.0, 33.0, 44.0, 56.0, 70.0])  # a little slower is not clearly worse
    assert not early_stop(None, 12)([1000.0])  # nothing to compare with


def test_the_best_config_keeps_comments_and_differs_only_in_changed_lines() -> None:
    text = (
        '# my box\n[memory]\n# hand-set\ntotal_budget = "auto"\n\n[gpus]\ngpu_workers_per_device = 1  # one\n'
        "\n[engine]\ntime_scale = 0.01\n"
    )
    knobs = Knobs(196, 9, 1, 0, 0, 1, 6)
    doc = best_config(ConfigDocument.parse(text), knobs)
    before, after = text.splitlines(), doc.text().splitlines()
    assert "# my box" in after and "# hand-set" in after and "gpu_workers_per_device = 1  # one" in after
    removed = [line for line in before if line not in after]
    assert removed == ['total_budget = "auto"']
    added = [line for line in after if line not in before]
    assert added == ['total_budget = "196GiB"', "[pipeline]", "max_parallel_synthesis = 9"]  # a table of its own
    assert config_errors(doc) == []


def test_the_table_shows_changes_rate_and_spread_peak_against_limit_ooms_and_price() -> None:
    start = Knobs(251, 0, 2, 0, 0, 1, 6)
    tuned = Knobs(196, 9, 1, 0, 0, 1, 6)
    # Two rounds of 6 proofs, 100 s and 110 s: a spread of 2 × stdev / mean / √2 = 2 × 7.07 / 105 / 1.414.
    times = (*[100.0] * 6, *[210.0] * 6)
    trials = [
        Trial(1, start, (), "oom", 0.0, 262 * GiB, 256 * GiB, 1, note="OOM-killed (memory cgroup oom_kill 0 → 1)"),
        Trial(2, tuned, tuple(tuned.changes(start)), "completed", 60.0, 230 * GiB, 256 * GiB, completion_times=times),
        Trial(3, tuned, tuple(tuned.changes(start)), "completed", 61.0, 231 * GiB, 256 * GiB, repeat_of=2),
    ]
    table = format_table(trials, 12.0, time_basis="the modelled box's time").splitlines()
    assert "OOM-killed" in table[2] and "(starting config)" in table[2] and table[2].split()[3] == "-"
    row = table[3].split()
    assert row[:10] == ["2", "completed", "60.0", "±9.5%", "60.0", "230", "256", "90%", "0", "0.200"]
    # Named for what it is: the share of the limit the peak took (a bigger number is less headroom).
    assert table[1].split()[8] == "peak/lim" and "peak/lim = the share of the limit the peak took" in table[0]
    assert 'memory.total_budget = "196GiB",' in table[3] and "pipeline.max_parallel_synthesis = 9" in table[3]
    assert table[4].split()[3] == "-" and "(repeat of trial 2)" in table[4]  # one round: no spread of its own


@pytest.mark.slow
def test_a_short_search_on_the_engine_as_a_256_gib_box_beats_the_starting_config(tmp_path: Path) -> None:
    require_engine()
    memory_cgroup_or_skip()
    config = tmp_path / "start.toml"
    # A container's classic trap, certain to OOM: the host shows 512 GiB, the cgroup (--profile) gives 256.
    config.write_text(f'# the operator\'s file\n[engine]\ntime_scale = {TEST_TIME_SCALE}\nmem_total = "512GiB"\n')
    out = tmp_path / "best.toml"
    state = tmp_path / "search"
    state.mkdir()

    def tune(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cuzktui.cli", "tune", "--json", "--resume", str(state), *args],
            capture_output=True, text=True, cwd=ROOT, timeout=300,
        )  # fmt: skip

    # Two trials, then the search resumed from its directory for a third: the first two are not run again.
    first = tune("--engine", "--config", str(config), "--profile", "256", "--count", "6", "--concurrency", "6",
                 "--trials", "2")  # fmt: skip
    assert first.returncode in (0, 1), first.stderr[-3000:]
    before = json.loads(first.stdout)["trials"]
    assert sum(1 for t in before if t["status"] != "skipped") == 2
    proc = tune("--trials", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    trials = result["trials"]
    assert trials[: len(before)] == before and sum(1 for t in trials if t["status"] != "skipped") == 3
    assert trials[0]["changes"] == [] and trials[0]["status"] == "oom"  # "auto" = 507 GiB in a 256 GiB cgroup
    best = trials[result["best"] - 1]
    assert best["status"] == "completed" and best["oom_kills"] == 0
    assert best["proofs_per_hour"] > trials[0]["proofs_per_hour"]
    assert 0 < result["best_peak_share"] < 1
    # Each trial is a benchmark session; its cgroup's high-water mark is on record (bench meta).
    meta = json.loads((Path(best["session"]) / "meta.json").read_text())
    assert meta["cgroup_peak_bytes"] > 0
    check = subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "config", "check", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert check.returncode == 0, check.stdout
    assert out.read_text().startswith(config.read_text())  # the operator's lines as they were; changes added


def test_a_trials_figures_come_from_its_session_past_a_torn_line_and_the_cgroup_high_water_mark(
    tmp_path: Path,
) -> None:
    session = SessionWriter(tmp_path / "trial")
    t0 = 1777618800.0
    session.append_event(ev.ProofSubmitted(t0, "b", "porep-1000-1", "porep"))
    session.append_event(ev.MemorySample(t0 + 1, 3 * GiB // 256))
    with session.events_path.open("ab") as f:
        f.write(b'{"type":"MemorySample","t":1777618802.0,"rss_b')  # torn by a full disk, then appended to
    session.append_event(ev.DaemonExited(t0 + 3, 7, -9, 9, "oom_kill", ()))
    session.append_event(ev.ProofFinished(t0 + 10, "b", "porep-1000-1", "porep", "COMPLETED"))
    session.write_meta({"cgroup_peak_bytes": 4 * GiB // 256})
    figures = read_trial_session(session.path, 1 / 256)
    assert (figures.peak_rss_bytes, figures.oom_kills) == (4 * GiB, 1)
    assert figures.completion_times == (10.0,) and figures.first_submitted == t0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--daemon", "/usr/bin/true"], "--input is required with the real daemon"),
        (["--daemon", "/usr/bin/true", "--profile", "256"], "--profile emulates a machine on the engine"),
        (["--engine", "--time-budget", "2 hours"], "--time-budget"),
        (["--engine", "--trials", "0"], "--trials"),
    ],
)
def test_bad_usage_exits_2_and_runs_no_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["tune", "--resume", str(tmp_path / "search"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "search").exists()


def test_a_trial_told_to_stop_is_cancelled_and_its_daemon_stopped(tmp_path: Path) -> None:
    require_engine()
    memory_cgroup_or_skip()
    runner = BenchTrialRunner(tmp_path, "porep", 6, ("--engine",), 1 << 30, 1 / 256)
    config = build_config({"engine.time_scale": 0.02, "engine.mem_total": "256GiB", "memory.total_budget": "196GiB"})
    polls: list[Sequence[float]] = []

    def stop_when(times: Sequence[float]) -> bool:
        polls.append(times)
        return len(times) >= 1  # once the first proof is submitted (the pending one counts)

    outcome = runner(1, config, 6, stop_when)
    assert outcome.status == "stopped" and outcome.proofs_per_hour == 0.0
    assert outcome.completed < 6 and "stopped early" in outcome.note
    exits = [e for e in iter_session_events(outcome.session) if isinstance(e, ev.DaemonExited)]
    assert [e.cause for e in exits] == ["stopped"]  # the bench stopped its daemon on the way out
    assert json.loads((Path(outcome.session) / "meta.json").read_text())["cgroup_peak_bytes"] > 0


def test_a_trial_whose_daemon_lost_proofs_in_its_gpu_queue_failed_and_says_why(tmp_path: Path) -> None:
    # issue 24.1: the trial's bench ends by itself (it no longer waits for a proof the daemon's log shows lost)
    # and the search reads its failure and reason from the bench's summary.
    require_engine()
    runner = BenchTrialRunner(tmp_path, "winning", 24, ("--engine",), None, 1.0)
    config = build_config({"gpus.gpu_workers_per_device": 1})
    outcome = runner(1, config, 8, lambda times: False)
    events = list(iter_session_events(outcome.session))
    lost = [e for e in events if isinstance(e, ev.ProofFinished) and e.status == "LOST"]
    assert outcome.status == ("failed" if lost else "completed"), outcome.note
    if lost:
        assert outcome.note.startswith(f"{len(lost)} of 24 proofs lost: the daemon replaced them")
        assert "set pipeline.enabled = false, until upstream fixes it" in outcome.note
        assert outcome.proofs_per_hour == 0.0 and outcome.completed == 24 - len(lost)
