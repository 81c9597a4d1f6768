"""``cuzk-tui tune`` on a real daemon's inputs: it takes every request option ``bench`` takes (one
definition, the same defaults and files beside ``--input``, which may hold a bare hex value), checks them
as bench does before any trial, and stops at the first trial that fails for a reason no knob changes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui import proofinputs as pi
from cuzktui.bench import BenchUsageError, build_requests
from cuzktui.cli import REQUEST_INPUT_OPTIONS, build_parser, main
from cuzktui.commands.bench import request_params
from cuzktui.session import iter_session_events
from cuzktui.tune import (
    Box,
    Knobs,
    Search,
    SearchBlocked,
    TrialOutcome,
    knob_independent,
    load_state,
    run_search,
    trial_result,
)
from cuzktui.units import GiB
from tests.conftest import require_engine

ROOT = Path(__file__).resolve().parent.parent
RANDOMNESS = bytes(range(1, 33))
ALL_REQUEST_FLAGS = [
    "--input", "in.json", "--miner-id", "1234", "--sector-num", "7", "--registered-proof", "10",
    "--randomness", RANDOMNESS.hex(), "--comm-r-old", "11" * 32, "--comm-r-new", "22" * 32,
    "--comm-d-new", "33" * 32, "--synthetic-size", "1MB",
]  # fmt: skip


# --------------------------------------------------------------------------------------------
# 1. The same request options as bench
# --------------------------------------------------------------------------------------------


def _request_options(command: str) -> dict[str, tuple[str, ...]]:
    """Each request option's spellings, as the command's parser declares them."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = sub.choices[command]._actions
    return {a.dest: tuple(a.option_strings) for a in actions if a.dest in REQUEST_INPUT_OPTIONS}


def test_tune_takes_every_request_option_bench_takes_with_the_same_defaults() -> None:
    assert _request_options("tune") == _request_options("bench") and len(_request_options("bench")) == len(
        REQUEST_INPUT_OPTIONS
    )
    parser = build_parser()
    for argv in ([], ALL_REQUEST_FLAGS):
        bench, tune = parser.parse_args(["bench", *argv]), parser.parse_args(["tune", *argv])
        assert {n: getattr(bench, n) for n in REQUEST_INPUT_OPTIONS} == {
            n: getattr(tune, n) for n in REQUEST_INPUT_OPTIONS
        }
        assert request_params(bench) == request_params(tune)
    params = request_params(parser.parse_args(["tune", *ALL_REQUEST_FLAGS]))
    assert (params.miner_id, params.sector_num, params.registered_proof, params.randomness) == (1234, 7, 10, RANDOMNESS)
    # What each trial's benchmark is given rebuilds the very same requests' values.
    again = parser.parse_args(["bench", "--headless", *params.flags()])
    assert request_params(again) == params


def _wpost_input(directory: Path) -> Path:
    path = directory / "window-vanilla.json"
    path.write_bytes(pi.vanilla_json([pi.generate_post_vanilla(1, pi.WINDOW_CHALLENGES_PER_SECTOR)]))
    return path


@pytest.mark.parametrize("written", [RANDOMNESS.hex(), f"  {RANDOMNESS.hex()}\n\n", f"--randomness {RANDOMNESS.hex()}"])
def test_the_randomness_beside_the_input_may_be_a_bare_hex_value(tmp_path: Path, written: str) -> None:
    path = _wpost_input(tmp_path)
    (tmp_path / pi.POST_RANDOMNESS_FILE).write_text(written)
    (request,) = build_requests("wpost", 1, input_path=path, bench_id="b")
    assert request.randomness == RANDOMNESS
    # A flag still wins over the file.
    (flagged,) = build_requests(
        "wpost", 1, input_path=path, bench_id="b", params=pi.RequestParams(randomness=b"\1" * 32)
    )
    assert flagged.randomness == b"\1" * 32


@pytest.mark.parametrize(
    ("name", "written", "message"),
    [
        (pi.POST_RANDOMNESS_FILE, "not hex", "invalid hex for --randomness"),
        (pi.POST_RANDOMNESS_FILE, "abcd", "randomness must be exactly 32 bytes, got 2"),
        (pi.POST_RANDOMNESS_FILE, f"{RANDOMNESS.hex()}\n{RANDOMNESS.hex()}\n", "no --randomness line, nor a bare"),
        # Three values cannot be told apart without their flags.
        (pi.SNAP_COMMS_FILE, "11" * 32, "no --comm-r-old line"),
    ],
)
def test_a_file_beside_the_input_that_is_not_its_value_is_bad_usage_naming_it(
    tmp_path: Path, name: str, written: str, message: str
) -> None:
    path = _wpost_input(tmp_path)
    (tmp_path / name).write_text(written)
    kind = "snap" if name == pi.SNAP_COMMS_FILE else "wpost"
    with pytest.raises(BenchUsageError, match=message) as caught:
        build_requests(kind, 1, input_path=path, bench_id="b")
    assert str(tmp_path / name) in str(caught.value)


def test_tune_refuses_inputs_bench_would_refuse_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The H200 session: a bare line that is not the randomness stopped every trial at once.
    path = _wpost_input(tmp_path)
    (tmp_path / pi.POST_RANDOMNESS_FILE).write_text("0x" + RANDOMNESS.hex())
    search = tmp_path / "search"
    argv = ["tune", "--engine", "--kind", "wpost", "--input", str(path), "--resume", str(search)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"cuzk-tui tune: {tmp_path / pi.POST_RANDOMNESS_FILE}: invalid hex for --randomness" in err
    assert not search.exists()
    assert main([*argv[:-2], "--randomness", "abcd", "--resume", str(search)]) == 2
    assert "randomness must be exactly 32 bytes, got 2" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# 2. A failure no knob changes stops the search
# --------------------------------------------------------------------------------------------


def _summary(*proofs: tuple[str, str], error: str = "") -> dict[str, Any]:
    return {"error": error, "proofs": [{"job_id": f"j{i}", "status": s, "error": e} for i, (s, e) in enumerate(proofs)]}


OK = ("COMPLETED", "")


PARAMS_MISSING = "SRS param file not found for WinningPost32G: /var/tmp/filecoin-proof-parameters/v28-x.params"
NOT_32G = "pipelined synthesis currently supports only 32 GiB sectors, got 2048 bytes"
BUDGET = "insufficient memory budget for SRS porep-32g (44 GiB), available: 9 GiB, total: 50 GiB"
SELF_CHECK = "PoRep proof self-check failed: pipeline single-sector proof did not verify"


@pytest.mark.parametrize(
    ("proofs", "blocked"),
    [
        # Upstream's texts for the request, its proof type, a parameter file, the daemon's build.
        ((("FAILED", "synthesis failed: invalid registered proof for WindowPoSt"), OK), True),
        ((("FAILED", "unknown RegisteredPoStProof value: 99"),), True),
        ((("FAILED", "C1 parse failed: failed to parse C1 output wrapper JSON"),), True),
        ((("FAILED", "randomness must be exactly 32 bytes, got 0"),), True),
        ((("FAILED", f"synthesis failed: {PARAMS_MISSING}"),), True),
        ((("FAILED", f"C1 parse failed: {NOT_32G}"),), True),
        ((("FAILED", "pipeline mode requires cuda-supraseal"),), True),
        # A monolithic prover's call and the self-check hide their cause: every proof failing is the input.
        ((("FAILED", "seal_commit_phase2 failed"),) * 3, True),
        ((("FAILED", "seal_commit_phase2 failed"), OK, OK), False),
        ((("FAILED", SELF_CHECK),) * 2, True),
        ((("FAILED", SELF_CHECK), OK), False),
        # What a knob changes: the budget, the GPU's memory, a job the daemon lost, an unknown text.
        ((("FAILED", f"C1 parse failed: {BUDGET}"),), False),
        ((("FAILED", "partition 3 GPU prove failed: CUDA error: out of memory"),), False),
        ((("LOST", "replaced in the GPU queue by wdpost-1000-0-[0 0 0 0 0 0 0 0]-2 (key (0, 0))"), OK), False),
        ((("FAILED", "something new"),), False),
    ],
)
def test_a_failure_stops_the_search_only_when_no_knob_changes_it(
    proofs: tuple[tuple[str, str], ...], blocked: bool
) -> None:
    summary = _summary(*proofs, error=f"{sum(1 for s, _ in proofs if s != 'COMPLETED')} of {len(proofs)} proofs failed")
    status, note, blocker = trial_result(1, summary, stopped=False, oom_kills=0)
    assert status == "failed" and (blocker is not None) == blocked
    assert (blocker is not None) == (knob_independent(summary["proofs"]) is not None)
    reason = next(e for s, e in proofs if s != "COMPLETED")
    assert reason in note  # the daemon's words, whichever way it goes


def test_a_lost_job_fails_its_trial_with_the_reason_and_the_search_goes_on() -> None:
    lost = "replaced in the GPU queue by winpost-1000-00000000-3"
    summary = _summary(OK, ("LOST", lost), ("LOST", lost), error="2 of 3 proofs failed")
    assert trial_result(1, summary, stopped=False, oom_kills=0) == (
        "failed", f"2 of 3 proofs failed; 2 × lost: {lost}", None,
    )  # fmt: skip


def test_the_other_endings_of_a_trial() -> None:
    done = _summary(OK, OK)
    assert trial_result(0, done, stopped=False, oom_kills=0) == ("completed", "", None)
    assert trial_result(1, _summary(error="the daemon died (oom_kill)"), stopped=False, oom_kills=1)[:2] == (
        "oom", "the daemon died (oom_kill)",
    )  # fmt: skip
    assert trial_result(1, done, stopped=True, oom_kills=0)[0] == "stopped"
    # The bench refused its inputs (exit 2): no trial with other knobs would get further.
    refused = {"error": "cuzk-tui bench: /in/post-randomness.txt: no --randomness line"}
    assert trial_result(2, refused, stopped=False, oom_kills=0)[2] == refused["error"]


def test_the_search_stops_at_the_first_trial_no_knob_can_help_and_leaves_it_unrecorded() -> None:
    box = Box(256 * GiB, 96, 1)
    start = Knobs(196, 7, 1, 0, 0, 1, 2)
    search = Search("wpost", 4, box, start)
    reason = "synthesis failed: invalid registered proof for WindowPoSt"
    calls: list[int] = []

    def runner(
        index: int, config_text: str, concurrency: int, stop_when: Callable[[Sequence[float]], bool]
    ) -> TrialOutcome:
        calls.append(index)
        if index == 1:
            return TrialOutcome("completed", 50.0, 4, 10.0, 100 * GiB, 256 * GiB, 0, (2.0, 4.0, 6.0, 8.0), "s1")
        status, note, blocker = trial_result(1, _summary(("FAILED", reason)), stopped=False, oom_kills=0)
        return TrialOutcome(status, 0.0, 0, 1.0, None, None, 0, (), f"s{index}", note, blocker)

    recorded: list[int] = []
    with pytest.raises(SearchBlocked) as caught:
        run_search(search, runner, lambda knobs: "", max_trials=8, on_trial=lambda t: recorded.append(t.index))
    assert calls == [1, 2] and recorded == [1] and [t.index for t in search.trials] == [1]
    assert caught.value.index == 2 and caught.value.reason == reason and "s2" in str(caught.value)
    assert "no knob changes" in str(caught.value)


# --------------------------------------------------------------------------------------------
# On the engine
# --------------------------------------------------------------------------------------------


def _tune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "tune", "--engine", "--json", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


def _job_ids(session: Path) -> list[str]:
    return [e.job_id for e in iter_session_events(session) if isinstance(e, ev.ProofSubmitted)]


def test_each_trial_proves_with_tune_s_request_options_and_the_files_beside_the_input(tmp_path: Path) -> None:
    require_engine()
    path = _wpost_input(tmp_path)
    (tmp_path / pi.POST_RANDOMNESS_FILE).write_text(RANDOMNESS.hex() + "\n")  # a bare value, as on the H200
    state = tmp_path / "search"
    common = ("--kind", "wpost", "--count", "2", "--concurrency", "1", "--resume", str(state))
    first = _tune("--input", str(path), "--miner-id", "1234", "--trials", "1", *common)
    assert first.returncode in (0, 1), first.stderr[-3000:]
    # A resumed search proves the same requests without being told the options again.
    second = _tune("--trials", "2", "--resume", str(state))
    assert second.returncode in (0, 1), second.stderr[-3000:]
    trials = json.loads(second.stdout)["trials"]
    assert [t["status"] for t in trials] == ["completed", "completed"], trials
    # Go's rendering of the first 8 randomness bytes, as Curio names a WindowPoSt request.
    expected = f"wdpost-1234-0-[{' '.join(str(b) for b in RANDOMNESS[:8])}]"
    for trial in trials:
        ids = _job_ids(Path(trial["session"]))
        assert ids and all(i.startswith(expected) for i in ids), ids
    _, args = load_state(state)
    assert "--miner-id" in args["request"] and args["input"] == str(path)


def test_a_refused_registered_proof_stops_the_search_at_its_first_trial(tmp_path: Path) -> None:
    require_engine()
    path = _wpost_input(tmp_path)
    state = tmp_path / "search"
    proc = _tune("--kind", "wpost", "--input", str(path), "--registered-proof", "99", "--count", "2",
                 "--concurrency", "1", "--trials", "4", "--resume", str(state))  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stdout == ""
    assert "trial 1 failed for a reason no knob changes" in proc.stderr
    assert "invalid registered proof for WindowPoSt" in proc.stderr
    assert sorted(p.name for p in state.iterdir() if p.is_dir()) == ["trial-01"]  # one benchmark, not four
    search, _ = load_state(state)
    assert search.trials == []  # not recorded: a resume runs it again
