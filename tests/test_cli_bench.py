"""``cuzk-tui bench --headless``: usage errors, a quick engine run, and OOM recovery in a memory cgroup."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.cli import main
from cuzktui.session import iter_session_events
from cuzktui.supervisor import BENCHMARK_OVER
from tests.conftest import TEST_TIME_SCALE, memory_cgroup_or_skip, require_engine

ROOT = Path(__file__).resolve().parent.parent


def _bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, as an operator runs it.

    Past ``timeout`` it gets SIGTERM, which cancels the run and stops its daemon (and cgroup),
    so a hung run leaves nothing behind; the test then fails with what it printed.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "cuzktui.bench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"the bench did not finish within {timeout} s; stderr:\n{err[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "--set", "pipeline.max_parallel_synthesis"], "expected SECTION.KEY=VALUE"),
        (["--engine", "--set", "pipeline.max_paralel_synthesis=4"], "unknown knob"),
        (["--engine", "--set", "pipeline.max_parallel_synthesis=many"], "must be an integer"),
        (["--engine", "--memory-limit", "1.5GiB"], "--memory-limit"),
        (["--daemon", "/usr/bin/true", "--kind", "porep"], "--input is required with the real daemon"),
        (["--engine", "--count", "0"], "--count"),
    ],
)
def test_bad_usage_exits_2_and_creates_no_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    session = tmp_path / "session"
    assert main(["bench", "--headless", "--session", str(session), *args]) == 2
    assert message in capsys.readouterr().err
    assert not session.exists()


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_an_input_or_a_memory_limit_that_cannot_be_is_said_as_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    session = tmp_path / "session"
    # Where each would record: neither may come to exist.
    own = ["--headless", "--session", str(session)] if command == "bench" else ["--resume", str(session)]
    for args, expected in (
        # A directory is not "no such file"; the option is named as it was typed.
        (["--c1", str(tmp_path)], f"--c1 {tmp_path} is a directory: give a C1 output JSON file"),
        (["--kind", "snap", "--vanilla", str(tmp_path / "absent")], f"--vanilla {tmp_path / 'absent'}: no such file"),
        # The tool's own flag: no daemon reads it, so nothing of how one would.
        (["--memory-limit", "lots"], "--memory-limit: 'lots' is not a size: use a whole number of bytes or a"),
    ):
        code = main([command, *own, "--engine", *args])
        err = capsys.readouterr().err
        assert code == 2 and f"cuzk-tui {command}: {expected}" in err, err
        assert "daemon would read" not in err and not session.exists()


@pytest.mark.parametrize(("kind", "content"), [("porep", b"not json at all"), ("porep", b"[1, 2]")])
def test_an_input_that_is_not_the_kinds_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, content: bytes
) -> None:
    bad = tmp_path / "c1.json"
    bad.write_bytes(content)
    session = tmp_path / "session"
    assert (
        main(["bench", "--headless", "--engine", "--kind", kind, "--input", str(bad), "--session", str(session)]) == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(f"cuzk-tui bench: {bad}: not a C1 output JSON") and err.count("\n") == 1, err
    # What is checked before sending is said (a JSON object: Curio's wrapper or a SealCommitPhase1Output).
    assert "checked before sending: a JSON object" in err
    assert "Traceback" not in err and not session.exists()


def test_help_documents_the_exit_codes_beside_cuzk_benchs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 every proof completed; 1 the run failed" in text
    assert "cuzk-bench batch differs: exit 0 even when every proof FAILED, 1 only when an RPC fails" in text


def test_a_quick_engine_bench_prints_the_json_summary(tmp_path: Path) -> None:
    require_engine()
    session = tmp_path / "session"
    done = _bench(
        "--engine", "--kind", "porep", "--count", "3", "--concurrency", "2", "--json", "--session", str(session),
        "--set", f"engine.time_scale={TEST_TIME_SCALE}", "--set", "memory.total_budget=256GiB",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["completed"], summary["failed"], summary["restarts"]) == (3, 0, [])
    assert summary["proofs_per_hour"] > 0
    # Figures in the modelled box's time: the engine ran 1/time_scale times faster than the box.
    assert (summary["time_basis"], summary["time_scale"]) == ("modelled", TEST_TIME_SCALE)
    assert summary["wall_s"] == pytest.approx(summary["real_wall_s"] / TEST_TIME_SCALE, rel=1e-3)
    assert summary["session"] == str(session)
    assert [p["job_id"] for p in summary["proofs"]] == ["porep-1000-1", "porep-1000-2", "porep-1000-3"]
    assert all(p["status"] == "COMPLETED" and p["total_ms"] > 0 for p in summary["proofs"])
    assert "[3/3] COMPLETED" in done.stderr
    config = (session / "config" / "v001.toml").read_text()
    assert f"time_scale = {TEST_TIME_SCALE}" in config and f"unix://{session}" in config
    finished = [e for e in iter_session_events(session) if isinstance(e, ev.ProofFinished)]
    assert len(finished) == 3
    recorded = list(iter_session_events(session))
    samples = [e for e in recorded if isinstance(e, ev.MemorySample)]
    # The box's RSS, from the engine's /status (none before it answers, right after "ready").
    assert [e for e in samples if e.rss_bytes], "the runner samples its daemon's memory"
    assert any(isinstance(e, ev.StatusSnapshot) for e in recorded), "the engine's /status is polled"
    # Its daemon stopped at the end: a planned hand-back, never shown as a death (issue 27 point 10).
    (exit,) = [e for e in recorded if isinstance(e, ev.DaemonExited)]
    assert (exit.cause, exit.handover) == ("stopped", BENCHMARK_OVER)
    meta = json.loads((session / "meta.json").read_text())
    assert meta["mode"] == "engine" and meta["host"]
    assert meta["memcheck"]["effective_ram_bytes"] > 0 and "gpu_state" in meta["memcheck"]


def test_the_text_summary_follows_cuzk_bench(tmp_path: Path) -> None:
    require_engine()
    done = _bench(
        "--engine", "--kind", "winning", "--count", "2", "--session", str(tmp_path / "s"),
        "--set", f"engine.time_scale={TEST_TIME_SCALE}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:4] == ["=== Batch Benchmark ===", "proof type:  winning", "count:       2", "concurrency: 1"]
    # One line cuzk-bench does not print: whose clock the figures are on.
    assert lines[4].startswith("times:       the modelled box's time (engine time_scale ")
    assert lines[6].startswith("  [1/2] COMPLETED — ") and "(prove=" in lines[6]
    assert "=== Batch Summary ===" in lines and "completed:     2" in lines


def test_proofs_the_daemon_loses_in_its_gpu_queue_end_the_run_with_the_reason(tmp_path: Path) -> None:
    # issue 24.1, its command: WinningPoSt at concurrency 8 on one GPU worker, where the engine (as upstream's
    # PriorityWorkQueue, key (0, 0)) replaces queued jobs by later ones and never answers them.
    require_engine()
    session = tmp_path / "s"
    done = _bench(
        "--engine", "--set", "gpus.gpu_workers_per_device=1", "-t", "winning", "-c", "24", "-j", "8",
        "--session", str(session),
    )  # fmt: skip
    lost = [line for line in done.stdout.splitlines() if " LOST — " in line]
    report = subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "report", str(session), "--json"], capture_output=True, text=True
    )
    replaced = [job for job in json.loads(report.stdout)["jobs"] if job["status"] == "lost"]
    # As many as report calls replaced, each with its reason; the run ends by itself and says what to do.
    assert len(lost) == len(replaced)
    assert all("no result: replaced in the monolithic GPU queue by winpost-" in line for line in lost)
    assert all(job["reason"].startswith("replaced in the monolithic GPU queue by ") for job in replaced)
    assert done.returncode == (1 if lost else 0), done.stderr
    if lost:
        assert "set pipeline.enabled = false, until upstream fixes it" in done.stderr
        assert f"completed:     {24 - len(lost)}" in done.stdout


def test_a_failed_proof_says_why_in_the_daemons_words(tmp_path: Path) -> None:
    # issue 27.3: "{}" passes the checks made before sending (a JSON object); the daemon fails it.
    require_engine()
    c1 = tmp_path / "empty.json"
    c1.write_text("{}")
    done = _bench(
        "--engine", "--c1", str(c1), "-c", "1", "--session", str(tmp_path / "s"),
        "--set", f"engine.time_scale={TEST_TIME_SCALE}",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "warning: the C1 does not read as a SealCommitPhase1Output" in done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "[1/1]" in line]
    assert line.startswith("  [1/1] FAILED — ") and "C1 parse failed: " in line and "prove=" not in line
    assert "[1/1] FAILED porep-1000-1-1 — " in done.stderr and "C1 parse failed: " in done.stderr  # the progress


@pytest.mark.cgroup
@pytest.mark.slow
def test_an_oom_kill_in_a_1gib_cgroup_lowers_the_budget_and_every_proof_completes(tmp_path: Path) -> None:
    require_engine()
    memory_cgroup_or_skip()
    session = tmp_path / "session"
    config = tmp_path / "box.toml"
    # A 256 GiB container (1 GiB real at 1/256) on a 512 GiB host, with the daemon's defaults: the
    # "auto" budget reads the host's MemTotal (the classic trap), 18 parallel syntheses.
    config.write_text('[engine]\nmem_total = "512GiB"\n[memory]\ntotal_budget = "auto"\n')
    done = _bench(
        "--engine", "--config", str(config), "--memory-limit", "1GiB", "--kind", "porep", "--count", "12",
        "--concurrency", "6", "--json", "--session", str(session),
        "--set", "pipeline.max_parallel_synthesis=18", "--set", f"engine.time_scale={TEST_TIME_SCALE}",
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["completed"] == 12 and summary["failed"] == 0
    assert summary["restarts"], "expected at least one OOM restart"
    first = summary["restarts"][0]
    assert first["reason"] == "oom_kill"
    assert any("oom_kill" in e for e in first["evidence"])
    assert first["total_budget"].endswith("GiB")
    # The root cause, with the arithmetic and the value set.
    assert first["explanation"].startswith(
        'total_budget = "auto" took MemTotal (the emulated box\'s RAM, [engine] mem_total, 512 GiB) '
        "− safety_margin (5 GiB) = 507 GiB, above this cgroup's limit of 256 GiB"
    )
    assert f"total_budget = {first['total_budget']}" in done.stderr and "daemon OOM-killed: total_budget" in done.stderr
    events = list(iter_session_events(session))
    exits = [e for e in events if isinstance(e, ev.DaemonExited)]
    assert exits[0].cause == "oom_kill"
    assert exits[0].root_cause is not None and exits[0].root_cause.startswith('total_budget = "auto" took MemTotal')
    kill_index = events.index(exits[0])
    # The daemon's own lines up to the kill are in the session, then the restart decision.
    assert any(isinstance(e, ev.TimelineEvent) for e in events[:kill_index])
    assert any(isinstance(e, ev.BenchRestart) for e in events[kill_index:])
    versions = sorted((session / "config").glob("v*.toml"))
    assert len(versions) == 1 + len(summary["restarts"])
    assert f'total_budget = "{first["total_budget"]}"' in versions[1].read_text()
