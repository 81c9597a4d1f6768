"""Issue 10's terminal faults in a real terminal (tmux, the harness of tests/test_e2e_tmux.py):
the SSH connection drops mid-benchmark (2) and the TUI is SIGKILLed mid-benchmark (3).

In both the daemon and the benchmark runner live in process sessions of their own and go on;
what differs is what the TUI could write down before it went.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.session import read_session, resolve_source
from tests.conftest import alive
from tests.test_e2e_tmux import BENCH_S, CUZK_TUI, E2E
from tests.test_e2e_tmux import e2e as e2e  # the fixture, by name (a redundant alias re-exports it)

pytestmark = pytest.mark.slow

PROOFS = 12


def _start_a_slow_benchmark(e2e: E2E) -> int:
    """The TUI as the pane's own process, running PROOFS proofs slowly (seconds each); its pid once under way."""
    e2e.config.write_text(e2e.config.read_text().replace("time_scale = 0.0005", "time_scale = 0.01"))
    tmux = e2e.tmux
    tmux.start(
        [str(CUZK_TUI), "--engine", "--config", str(e2e.config), "--session", str(e2e.session),
         "--run-bench", f"porep:{PROOFS}:2"]
    )  # fmt: skip
    tmux.keys("4")
    tmux.wait_for(lambda s: f"porep × {PROOFS}, concurrency 2" in s, "the benchmark under way", BENCH_S)
    tmux.wait_for(lambda s: " COMPLETED " in s, "a first proof completed", BENCH_S)
    return int(tmux.pane("#{pane_pid}"))


def _wait_gone(pid: int, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"{what} (pid {pid}) still runs after {timeout:.0f} s"
        time.sleep(0.1)


def _finished(session: Path) -> list[ev.ProofFinished]:
    return [e for _, e in read_session(resolve_source(session)).events if isinstance(e, ev.ProofFinished)]


def test_an_ssh_drop_leaves_runner_and_daemon_running_and_the_attach_line_shows_it_all(e2e: E2E) -> None:
    tui = _start_a_slow_benchmark(e2e)
    # The connection drops: tmux closes the terminal, the TUI gets SIGHUP and loses its terminal.
    e2e.tmux.kill_server()
    _wait_gone(tui, "the TUI after SIGHUP")
    left = json.loads((e2e.session / "meta.json").read_text())["left_running"]
    runner = json.loads((e2e.session / "meta.json").read_text())["bench_pid"]
    assert alive(runner), "the benchmark runner went down with the terminal"
    assert any("benchmark" in item for item in left["items"])

    # A new terminal and the recorded attach line: the same session, the benchmark to its end.
    e2e.tmux.start([str(CUZK_TUI), *shlex.split(left["attach"])[1:]])
    e2e.tmux.keys("4")
    e2e.tmux.wait_for(
        lambda s: f"completed {PROOFS} · failed 0" in s, "the benchmark's result after re-attaching", BENCH_S
    )
    e2e.tmux.keys("2")  # the waterfall holds every proof, from before the drop and after it
    e2e.tmux.wait_for(lambda s: "porep" in s, "the waterfall", 30)
    assert len(_finished(e2e.session)) == PROOFS
    _wait_gone(runner, "the benchmark runner after its last proof")


def test_a_sigkilled_tui_leaves_a_session_that_replays_to_the_kill_and_nothing_torn(e2e: E2E) -> None:
    tui = _start_a_slow_benchmark(e2e)
    os.kill(tui, signal.SIGKILL)
    _wait_gone(tui, "the SIGKILLed TUI")
    recorded = read_session(resolve_source(e2e.session))
    assert recorded.damage == (), recorded.damage
    assert any(isinstance(e, ev.ProofFinished) for _, e in recorded.events)  # what was done by the kill
    # Every line of the event file is whole JSON (one write per event), at most the last one pending.
    lines = (e2e.session / "events.jsonl").read_bytes().split(b"\n")
    for line in lines[:-1]:
        json.loads(line)
    # Nobody is left to stop them: the runner and its daemon go on, recorded in the same session.
    runner = json.loads((e2e.session / "meta.json").read_text())["bench_pid"]
    assert alive(runner)
    deadline = time.monotonic() + BENCH_S
    while len(_finished(e2e.session)) < PROOFS:
        assert time.monotonic() < deadline, "the runner did not finish the benchmark after the TUI died"
        time.sleep(0.5)
