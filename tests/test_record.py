"""``cuzk-tui record --attach``: a running daemon recorded headless, its GetMetrics served, left running."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cuzktui.supervisor import free_loopback_port
from tests.conftest import alive, engine_config_text
from tests.recorders import wait_for


@pytest.mark.slow
async def test_record_attached_serves_the_daemons_figures_and_leaves_it_running(
    start_engine: Any, tmp_path: Path
) -> None:
    status_port = free_loopback_port()
    engine = await start_engine(engine_config_text(daemon={"status_listen": f"127.0.0.1:{status_port}"}))
    port = free_loopback_port()
    session = tmp_path / "session"
    argv = [sys.executable, "-m", "cuzktui.cli", "record", "--attach", engine.address,
            "--status-url", f"http://127.0.0.1:{status_port}/status", "--log", str(engine.log_path),
            "--session", str(session), "--metrics", f"127.0.0.1:{port}"]  # fmt: skip
    err = tmp_path / "recorder.err"
    with err.open("wb") as out:
        recorder = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out)
    try:

        def scrape() -> str | None:
            assert recorder.poll() is None, err.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    text = response.read().decode()
            except OSError:
                return None
            # The daemon's own uptime (GetMetrics) and the budget (/status) both arrived.
            wanted = ("cuzk_daemon_up 1.0", "cuzk_uptime_seconds ", "cuzk_budget_total_bytes ")
            return text if all(w in text for w in wanted) else None

        text = wait_for("the attached daemon's figures", scrape)
        assert 'cuzk_recorder_info{mode="attached"} 1.0' in text
        recorder.send_signal(signal.SIGTERM)
        assert recorder.wait(timeout=60) == 0, err.read_text()
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait(timeout=30)
    assert alive(engine.proc.pid)  # an attached daemon is not ours to stop
    assert (session / "events.jsonl").exists()
    assert "session recorded in" in err.read_text()


@pytest.mark.slow
def test_record_keep_goes_on_in_a_new_session_that_stands_alone(tmp_path: Path) -> None:
    """``--keep 2s``: a new session every second, each continuing the one before, beginning with the
    daemon run's first lines; the line written after a switch is in the newer session only."""
    from cuzktui.session import list_sessions
    from tests.test_report import startup

    log = tmp_path / "cuzk.log"
    run = "\n".join(startup()) + "\n"
    log.write_text(run)
    root = tmp_path / "state" / "cuzk-tui" / "sessions"
    argv = [sys.executable, "-m", "cuzktui.cli", "record", "--attach", f"unix://{tmp_path}/nothing.sock",
            "--log", str(log), "--keep", "2s"]  # fmt: skip
    err = tmp_path / "recorder.err"
    with err.open("wb") as out:
        recorder = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out,
            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        )  # fmt: skip
    try:
        first = wait_for("the first session", lambda: list_sessions(root) or None, 60)[0].path
        with log.open("a") as daemon:
            daemon.write("TIMELINE,5000,SYNTH_START,porep-1000-1,partition=0\n")
        wait_for("a session after the line", lambda: len(list_sessions(root)) >= 3 or None, 60)
        recorder.send_signal(signal.SIGTERM)
        assert recorder.wait(timeout=60) == 0, err.read_text()
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait(timeout=30)
    sessions = [info.path for info in list_sessions(root)]
    assert sessions[0] == first and "recording on in" in err.read_text()
    for before, after in itertools.pairwise(sessions):
        assert json.loads((after / "meta.json").read_text())["continues"] == str(before)
        assert (after / "daemon.log").read_text().startswith(run)
    holding = [path for path in sessions if "porep-1000-1" in (path / "daemon.log").read_text()]
    assert len(holding) == 1
