"""``cuzk-tui tune`` trusted: only the knobs that act in the daemon's mode are searched, and a config is
better than the starting one only beyond the noise (each trial's spread from its completions, the start
and the candidate run again). A fake trial runner injects the figures; one short real search on the
engine in monolithic mode, whose trials differ only by noise, ends with no better config."""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cuzktui.config import ConfigDocument
from cuzktui.knob_rules import MONOLITHIC_INERT
from cuzktui.tune import (
    FIELD_OF,
    KNOB_NAMES,
    NO_BETTER,
    Box,
    Knobs,
    Search,
    Trial,
    TrialOutcome,
    completion_spread,
    left_alone,
    new_search,
    run_search,
    trial_configs,
    trial_row,
)
from cuzktui.units import GiB
from tests.conftest import require_engine

ROOT = Path(__file__).resolve().parent.parent
MONOLITHIC = "[pipeline]\nenabled = false\n"
PROOFS = 12

# The inert knobs a search would otherwise vary (the others it never varies in either mode).
TUNED_INERT = {name: why for name, why in MONOLITHIC_INERT.items() if name in KNOB_NAMES}


WARM_UP = 1.5  # the first round's time against the others' (the daemon's SRS load)


def rounds_of(wobble: float, concurrency: int) -> list[float]:
    """The steady rounds' times (in units of their mean) of PROOFS proofs: alternately ``wobble`` under
    and over."""
    return [1 + (wobble if k % 2 else -wobble) for k in range(PROOFS // concurrency - 1)]


def times_of(rate: float, wobble: float, concurrency: int) -> tuple[float, ...]:
    """Completion times of PROOFS proofs at about ``rate`` per hour, in rounds of ``concurrency``: a
    warm-up round, then :func:`rounds_of` (the spread the trial measures of itself)."""
    mean = 3600 / rate * concurrency
    out: list[float] = []
    t = 0.0
    for duration in (WARM_UP, *rounds_of(wobble, concurrency)):
        t += mean * duration
        out += [t] * concurrency
    return tuple(out)


class InjectedRunner:
    """Trials whose rates are injected: ``rate(knobs, run)`` (run: 0 for a config's first trial, 1 for
    its repeat), every round wobbling ±``wobble``. :meth:`config_for` is the search's (trial_configs),
    noting which knobs the next trial runs; every run's knobs and config text are recorded."""

    def __init__(self, search: Search, rate: Callable[[Knobs, int], float], wobble: float = 0.03) -> None:
        self.rate, self.wobble = rate, wobble
        self._configs = trial_configs(search, MONOLITHIC)
        self._next: Knobs | None = None
        self.ran: list[Knobs] = []
        self.configs: list[str] = []

    def config_for(self, knobs: Knobs) -> str:
        self._next = knobs
        return self._configs(knobs)

    def __call__(
        self, index: int, config_text: str, concurrency: int, stop_when: Callable[[Sequence[float]], bool]
    ) -> TrialOutcome:
        knobs = self._next
        assert knobs is not None and knobs.concurrency == concurrency
        run = self.ran.count(knobs)
        self.ran.append(knobs)
        self.configs.append(config_text)
        rate = self.rate(knobs, run)
        times = times_of(rate, self.wobble, concurrency)
        return TrialOutcome("completed", rate, PROOFS, times[-1], 100 * GiB, 6000 * GiB, 0, times, f"s{index}")


def monolithic_search(concurrency: int = 2) -> Search:
    search, _ = new_search(MONOLITHIC, "porep", PROOFS, concurrency, engine=True, memory_limit=None)
    return search


def test_a_monolithic_search_leaves_the_inert_knobs_alone_and_says_why() -> None:
    search = monolithic_search()
    runner = InjectedRunner(search, lambda knobs, run: 100.0)
    run_search(search, runner, runner.config_for, max_trials=6)
    assert search.monolithic and search.inert == dict(TUNED_INERT)
    ran = [t for t in search.trials if t.ran]
    assert len(ran) >= 3, search.trials
    reference = search.reference
    for trial in search.trials:
        for name in TUNED_INERT:
            assert getattr(trial.knobs, FIELD_OF[name]) == getattr(reference, FIELD_OF[name]), (name, trial)
            assert not any(change.startswith(name) for change in trial.changes)
    # Only the knobs that act in monolithic mode moved: the C++ prover's threads and the concurrency.
    assert {c.split(" = ")[0] for t in ran for c in t.changes} <= {"gpus.gpu_threads", "concurrency"}
    # No trial's config writes an inert knob: the daemon gets the operator's values (here, its defaults).
    for text in runner.configs:
        effective = ConfigDocument.parse(text).effective()
        start = ConfigDocument.parse(MONOLITHIC).effective()
        assert all(effective[name] == start[name] for name in MONOLITHIC_INERT), text
    line = left_alone(search)
    assert line is not None and "no effect with pipeline.enabled = false" in line
    assert all(name in line for name in TUNED_INERT) and "reserves no budget" in line
    short = left_alone(search, reasons=False)  # the Tune screen's line
    assert short is not None and all(name in short for name in TUNED_INERT) and "reserves" not in short


def test_a_pipeline_search_varies_the_pipeline_knobs() -> None:
    search, _ = new_search("", "porep", PROOFS, 2, engine=True, memory_limit=None)
    assert not search.monolithic and search.inert == {} and left_alone(search) is None
    moved = {FIELD_OF[c.split(" = ")[0]] for k in search.candidates() for c in k.changes(search.reference)}
    assert {"max_parallel_synthesis", "max_gpu_queue_depth", "gpu_workers_per_device"} <= moved


def test_trials_that_differ_only_by_noise_end_with_no_better_config() -> None:
    # Every config runs at 100/h; each trial is off by up to 2.5 %, its rounds wobble ±3 %.
    offsets = iter([0.0, 0.025, -0.02, 0.015, -0.01, 0.02, 0.0, 0.01])
    search = monolithic_search()
    runner = InjectedRunner(search, lambda knobs, run: 100.0 * (1 + next(offsets)))
    run_search(search, runner, runner.config_for, max_trials=6)
    verdict = search.verdict()
    assert verdict.better is None and verdict.start is not None
    assert verdict.text.startswith(NO_BETTER) and verdict.text.endswith("is within the noise"), verdict.text
    assert search.best() is not None and search.best() is not search.trials[0]  # the fastest was a lucky one
    # Each trial's spread is measured and shown: 2 standard errors of its steady rounds' mean.
    for trial in search.trials:
        steady = rounds_of(0.03, trial.knobs.concurrency)
        expected = 2 * statistics.stdev(steady) / statistics.fmean(steady) / len(steady) ** 0.5
        assert trial.spread == pytest.approx(expected), trial
        assert 0.015 < expected < 0.05 and trial_row(trial, None).spread == trial.spread


def test_a_clearly_faster_config_is_run_again_with_the_start_and_wins_beyond_the_noise() -> None:
    search = monolithic_search()
    runner = InjectedRunner(search, lambda knobs, run: 150.0 if knobs.gpu_threads == 32 else 100.0)
    run_search(search, runner, runner.config_for, max_trials=5)
    repeats = [t for t in search.trials if t.repeat_of is not None]
    assert [t.repeat_of for t in repeats] == [1, 2]  # the start (trial 1), then the candidate (trial 2)
    assert [t.knobs for t in repeats] == [search.trials[0].knobs, search.trials[1].knobs]
    assert sum(1 for t in search.trials if t.ran) == 5  # room was kept for both repeats
    verdict = search.verdict()
    assert verdict.better is not None and verdict.better.knobs.gpu_threads == 32
    assert len(verdict.better.runs) == 2
    assert verdict.text.startswith("trials 2 and 5 beat the starting config beyond the noise: 150.0 ± "), verdict.text
    assert "against the start's 100.0 ± " in verdict.text and "(trials 1 and 4)" in verdict.text


def test_a_config_faster_once_but_not_when_run_again_is_not_better() -> None:
    search = monolithic_search()

    def rate(knobs: Knobs, run: int) -> float:
        if knobs == search.reference:
            return 100.0
        return 112.0 if run == 0 else 96.0  # lucky on its trial, slower than the start on its repeat

    runner = InjectedRunner(search, rate, wobble=0.01)
    run_search(search, runner, runner.config_for, max_trials=4)
    assert [t.repeat_of for t in search.trials[-2:]] == [1, 2]
    verdict = search.verdict()
    # 104 ± 8 % (its runs' half range) against 100 ± 1.9 %: the runs it weighed are named.
    assert verdict.better is None and verdict.text.startswith(f"{NO_BETTER}: trials 2 and 4's 104.0 ± 7.7%")
    assert verdict.text.endswith("(trials 1 and 3) is within the noise"), verdict.text


def test_unmeasured_noise_is_no_evidence_of_a_better_config() -> None:
    # One round per trial (6 proofs at concurrency 6) and no room for repeats: nothing says how noisy.
    search = monolithic_search(concurrency=PROOFS)
    assert completion_spread(times_of(100.0, 0.03, PROOFS), PROOFS) is None
    runner = InjectedRunner(search, lambda knobs, run: 100.0 if knobs == search.reference else 120.0)
    run_search(search, runner, runner.config_for, max_trials=2)
    verdict = search.verdict()
    assert verdict.better is None and "noise, which was not measured" in verdict.text


def test_a_config_with_unmeasured_noise_borrows_none_and_is_run_again() -> None:
    """One round at concurrency 12 measures no spread of its own; the start's (measured at 2) says nothing
    of it. It was called better on the start's noise (an engine search on a busy machine: 10.8 proofs/hour
    of one round against the start's 10.5 ± 0.7 %); now it is run again, and so is the start."""
    search = monolithic_search()
    runner = InjectedRunner(search, lambda knobs, run: 108.0 if knobs.concurrency == PROOFS else 100.0, wobble=0.0035)
    start = search.reference
    one_round = dataclasses.replace(start, concurrency=PROOFS)
    for index, knobs in enumerate((start, one_round), 1):
        runner.config_for(knobs)
        outcome = runner(index, "", knobs.concurrency, lambda times: False)
        changes = tuple(knobs.changes(start))
        rate, times = outcome.proofs_per_hour, outcome.completion_times
        search.record(Trial(index, knobs, changes, "completed", rate, completed=PROOFS, completion_times=times))
    assert search.trials[0].spread is not None and search.trials[1].spread is None
    verdict = search.verdict()
    assert verdict.better is None and "not measured for trial 2" in verdict.text, verdict.text
    assert search.confirmations() == [start, one_round]


def test_a_config_beyond_the_noise_once_is_not_better_until_both_run_again() -> None:
    """The last trial the search may run beats the start beyond the noise: with no trial left to run the
    two again, nothing is better yet (and the text says why)."""
    search = monolithic_search()
    runner = InjectedRunner(search, lambda knobs, run: 150.0 if knobs.gpu_threads == 32 else 100.0)
    run_search(search, runner, runner.config_for, max_trials=2)
    assert [t.repeat_of for t in search.trials] == [None, None]
    verdict = search.verdict()
    assert verdict.better is None and verdict.text.startswith(f"{NO_BETTER} yet: trial 2's 150.0 ± "), verdict.text
    assert "ran once" in verdict.text and search.confirmations() == [search.trials[0].knobs, search.trials[1].knobs]


def test_a_start_that_failed_is_beaten_by_any_config_that_completed() -> None:
    box = Box(256 * GiB, 96, 1)
    start = Knobs(200, 7, 1, 0, 0, 1, 2)
    search = Search("porep", PROOFS, box, start)
    search.record(Trial(1, start, (), "oom", 0.0, 260 * GiB, 256 * GiB, 1))
    other = Knobs(150, 7, 1, 0, 0, 1, 2)
    search.record(Trial(2, other, (), "completed", 90.0, 200 * GiB, 256 * GiB, completion_times=(1.0,)))
    verdict = search.verdict()
    assert verdict.better is not None and verdict.better.knobs == other and verdict.start is None
    assert "starting config did not complete safely (trial 1: oom)" in verdict.text
    assert search.confirmations() == []  # nothing to confirm against a start that failed


def test_completion_spread_is_the_steady_rounds_standard_error() -> None:
    # Rounds of 2 proofs: 30 s with the warm-up, then 10, 12, 8 s. Mean 10, stdev 2: 2 × 2 / 10 / √3.
    times = (29.0, 30.0, 35.0, 40.0, 51.0, 52.0, 59.0, 60.0)
    assert completion_spread(times, 2) == pytest.approx(2 * 2 / 10 / 3**0.5)
    # Two rounds (30 s, 10 s) leave none to spare: both count, and the spread is wide.
    assert completion_spread(times[:4], 2) == pytest.approx(2 * statistics.stdev([30, 10]) / 20 / 2**0.5)
    assert completion_spread(times, 8) is None  # one round of 8
    assert completion_spread((9.0, 12.0, 15.0, 18.0), 1) == 0.0  # a steady trial after its warm-up: no spread


def test_a_short_monolithic_search_on_the_engine_varies_no_inert_knob_and_finds_no_better_config(
    tmp_path: Path,
) -> None:
    require_engine()
    # Monolithic mode on the engine: every knob the search may vary changes nothing there (the engine
    # models neither the C++ prover's threads nor a gain from more than one proof in flight per GPU),
    # so the trials differ only by noise. No memory cgroup: monolithic work reserves no budget. Three
    # trials leave no room to run a candidate and the start again, so whatever the emulator's jitter
    # on a busy machine (a one-round trial was once called better on the start's noise), no config is
    # confirmed better: the noise rules themselves are tested above on injected rates.
    config = tmp_path / "start.toml"
    config.write_text(f"# mine\n{MONOLITHIC}[engine]\ntime_scale = 0.001\n")
    out = tmp_path / "best.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "tune", "--engine", "--config", str(config), "--count", "4",
         "--concurrency", "2", "--trials", "3", "--out", str(out), "--json", "--resume", str(tmp_path / "search")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # no config to write
    result = json.loads(proc.stdout)
    trials = result["trials"]
    assert sum(1 for t in trials if t["status"] != "skipped") == 3, trials
    assert all(t["status"] == "completed" for t in trials), trials
    assert set(result["left_alone"]) == set(TUNED_INERT)
    for t in trials:
        assert not any(c.split(" = ")[0] in MONOLITHIC_INERT for c in t["changes"]), t["changes"]
        if 4 // t["knobs"]["concurrency"] >= 2:  # two rounds or more: the trial measured its own spread
            assert t["spread"] is not None and t["spread"] > 0, t
    assert result["best"] is None and result["verdict"].startswith(NO_BETTER), result["verdict"]
    assert not out.exists()
