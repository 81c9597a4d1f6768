"""End to end in a real terminal: ``cuzk-tui --engine --run-bench porep:3:2`` inside tmux at 120x40.

The installed console script runs in a detached tmux session on a private server (``tmux -S`` on a
socket in the test's own directory, so no other tmux server is touched and no socket file is left in
tmux's shared directory, which tmux never removes; ``-f`` a config of our own so no user config applies).
The test reads the screen with ``capture-pane``, switches to the Bench screen, finds the
benchmark's summary, quits with ``q`` and chooses "stop" in the dialog; the TUI must exit with
status 0 and leave no daemon behind. Another run leaves a benchmark running, pastes the printed
attach line and finds the benchmark on the Bench screen (at once, then its results), and the
session's waterfall separator calls the runner's daemon run a benchmark hand-over. The tmux server is killed in teardown
whatever happens.
Textual draws on stderr, so nothing is redirected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.client import DaemonClient
from cuzktui.config import ConfigDocument
from cuzktui.daemon_address import DAEMON_DEFAULT_LISTEN
from cuzktui.report import build_report
from cuzktui.session import iter_session_events, load_session
from cuzktui.supervisor import engine_program
from cuzktui.waterfall_layout import RunBoundary, run_boundary
from tests.conftest import alive, fast_engine_config, standin_daemon_on_path, wait_until_serving
from tests.engine.engine_harness import porep_request

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed: no real terminal to drive"),
]

CUZK_TUI = Path(sys.executable).with_name("cuzk-tui")
WIDTH, HEIGHT = 120, 40
BENCH_S = 120.0


def recorded_pids(session: Path) -> list[int]:
    """Every process the session says was started: daemons (DaemonLaunched) and benchmark runners."""
    if not (session / "events.jsonl").exists():
        return []
    pids: list[int] = []
    for e in iter_session_events(session):
        if isinstance(e, ev.DaemonLaunched) and e.pid:
            pids.append(e.pid)
        elif isinstance(e, ev.Notice) and e.text.startswith("benchmark started (runner pid "):
            pids.append(int(e.text.removeprefix("benchmark started (runner pid ").split(")")[0]))
    return pids


def daemon_pids(session: Path) -> list[int]:
    return [e.pid for e in iter_session_events(session) if isinstance(e, ev.DaemonLaunched) and e.pid]


@dataclass
class Tmux:
    """One private tmux server (``-S``, its own config) with one session, named ``server``, running the TUI."""

    server: str
    socket: Path
    conf: Path

    def run(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def start(self, argv: list[str]) -> None:
        self.run("new-session", "-d", "-s", self.server, "-x", str(WIDTH), "-y", str(HEIGHT), *argv)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.server)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.server, *keys)

    def pane(self, fmt: str) -> str:
        return self.run("display-message", "-p", "-t", self.server, fmt).strip()

    def kill_server(self, timeout: float = 10) -> None:
        """End the server (a dropped connection) and wait until its process is gone: ``kill-server``
        returns while the server still tears down, and a new session started then on the same socket
        reaches the dying server ("server exited unexpectedly")."""
        pid = int(self.pane("#{pid}"))
        self.run("kill-server")
        deadline = time.monotonic() + timeout
        while alive(pid):
            assert time.monotonic() < deadline, f"tmux server {pid} runs {timeout:.0f} s after kill-server"
            time.sleep(0.05)

    def wait_for(self, condition: Callable[[str], bool], what: str, timeout: float) -> str:
        """Poll the screen until ``condition(screen)``; fail with the last screen after ``timeout``."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(RuntimeError):
                text = self.screen()
                if condition(text):
                    return text
            time.sleep(0.2)
        raise AssertionError(f"not within {timeout:.0f} s: {what}; the screen was:\n{text}")


@dataclass
class E2E:
    tmux: Tmux
    config: Path
    session: Path
    rc_file: Path

    def start_tui(self, argv: list[str]) -> None:
        """Run ``argv`` in the pane through a shell that writes its exit status down: tmux does not
        always record the status of a pane's process (``#{pane_dead_status}`` can stay empty after
        the process has ended), so the tests read the file instead."""
        self.tmux.start(["sh", "-c", '"$@"; echo $? > "$0"', str(self.rc_file), *argv])

    def exit_status(self, timeout: float) -> str:
        """The TUI's exit status, once the pane's shell has written it (fail with the screen after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not self.rc_file.exists() or not self.rc_file.read_text().strip():
            assert time.monotonic() < deadline, f"the TUI did not exit; the screen was:\n{self.tmux.screen()}"
            time.sleep(0.2)
        return self.rc_file.read_text().strip()


@pytest.fixture
def e2e(tmp_path: Path) -> Iterator[E2E]:
    """A private tmux server and a fast engine config; teardown kills the server, then any process left."""
    socket_dir = Path(tempfile.mkdtemp(prefix="cz-"))  # short: pytest's tmp_path can pass the 108-byte limit
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g remain-on-exit on\n")  # keep the pane after the TUI exits: its status is read
    config = tmp_path / "cuzk.toml"
    config.write_text(fast_engine_config(socket_dir))
    server = f"cuzk-e2e-{uuid.uuid4().hex[:10]}"
    session = tmp_path / "session"
    tmux = Tmux(server, socket_dir / "tmux", conf)
    try:
        yield E2E(tmux, config, session, tmp_path / "rc")
    finally:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):  # no server left is fine
            tmux.run("kill-server")
        # The daemon and a benchmark runner live in sessions of their own (they outlive a hang-up):
        # whatever a failed test left, stop it by pid.
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in recorded_pids(session)) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in recorded_pids(session):
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(socket_dir, ignore_errors=True)


def test_run_bench_in_tmux_shows_the_summary_and_quit_stops_the_daemon(e2e: E2E) -> None:
    assert CUZK_TUI.exists(), f"the console script is not installed next to {sys.executable}"
    tmux = e2e.tmux
    e2e.start_tui(
        [str(CUZK_TUI), "--engine", "--config", str(e2e.config), "--session", str(e2e.session),
         "--run-bench", "porep:3:2"]
    )  # fmt: skip
    assert tmux.pane("#{window_width}x#{window_height}") == f"{WIDTH}x{HEIGHT}"
    tmux.wait_for(lambda s: "cuzk-engine (embedded emulator)" in s, "the TUI's title", 60)

    # The Bench screen: the benchmark ran to its end and its cuzk-bench style summary is shown.
    tmux.keys("4")
    text = tmux.wait_for(
        lambda s: "completed 3 · failed 0" in s and "proofs/hour" in s, "the summary of 3 completed proofs", BENCH_S
    )
    assert "porep × 3, concurrency 2 · completed" in text
    assert sum(" COMPLETED " in line for line in text.splitlines()) == 3, text
    # The runner has ended and the TUI relaunched its daemon: the status line (first on the top line) says
    # ready again.
    # (The runner's own daemon is "ready" too until the runner stops it: wait for the third launch.)
    tmux.wait_for(
        lambda s: len(daemon_pids(e2e.session)) == 3 and s.splitlines()[0].split()[:1] == ["ready"],
        "the relaunched daemon ready",
        60,
    )
    pids = daemon_pids(e2e.session)
    assert len(pids) == 3  # the TUI's, the runner's, the TUI's again
    assert alive(pids[-1]) and not any(alive(pid) for pid in pids[:-1])

    # Quit: the dialog says the daemon still runs; "s" stops it and the TUI exits cleanly.
    tmux.keys("q")
    tmux.wait_for(lambda s: f"Still running: the daemon (pid {pids[-1]}," in s, "the quit dialog", 30)
    tmux.keys("s")
    assert e2e.exit_status(60) == "0"
    assert [pid for pid in recorded_pids(e2e.session) if alive(pid)] == []


def test_first_launch_with_cuzk_daemon_on_path_and_no_config_serves_and_says_where(e2e: E2E, tmp_path: Path) -> None:
    """The README's first run against a real daemon: ``cuzk-tui`` with ``cuzk-daemon`` on PATH and
    ``--config`` naming a file that does not exist. The stand-in picks its address as the daemon
    does (and refuses the real default); the TUI must launch it on an address it chose, say so on
    screen and in the written config, and reach ready."""
    assert CUZK_TUI.exists(), f"the console script is not installed next to {sys.executable}"
    bin_dir = standin_daemon_on_path(tmp_path / "bin")
    missing = tmp_path / "new" / "cuzk.toml"
    missing.parent.mkdir()
    tmux = e2e.tmux
    e2e.start_tui(
        ["env", f"PATH={bin_dir}:{os.environ['PATH']}", str(CUZK_TUI), "--config", str(missing),
         "--session", str(e2e.session)]
    )  # fmt: skip
    text = tmux.wait_for(lambda s: "REAL DAEMON" in s and "READY" in s, "the real daemon ready", 90)
    listen = str(ConfigDocument.parse(missing.read_text()).get("daemon", "listen"))
    assert listen != DAEMON_DEFAULT_LISTEN
    # The dashboard's daemon panel names the address (cut to the panel's width).
    assert f"listen {listen}"[:30] in text
    (launched,) = [e for e in iter_session_events(e2e.session) if isinstance(e, ev.DaemonLaunched)]
    assert launched.mode == "real" and launched.listen == listen
    said = [e.text for e in iter_session_events(e2e.session) if isinstance(e, ev.Notice)]
    assert (
        f"the daemon serves on {listen}, a private socket of this session; wrote a new config to {missing} with it"
        in said
    )

    tmux.keys("q")
    tmux.wait_for(lambda s: "Stop and quit [s]" in s, "the quit dialog", 30)
    tmux.keys("s")
    assert e2e.exit_status(60) == "0"
    assert [pid for pid in recorded_pids(e2e.session) if alive(pid)] == []


def test_leave_running_prints_one_attach_line_that_shows_the_benchmark_again(e2e: E2E, tmp_path: Path) -> None:
    tmux = e2e.tmux
    # Slow enough (seconds per proof) that the benchmark is still running when the TUI leaves.
    e2e.config.write_text(e2e.config.read_text().replace("time_scale = 0.0005", "time_scale = 0.02"))
    e2e.start_tui(
        [str(CUZK_TUI), "--engine", "--config", str(e2e.config), "--session", str(e2e.session),
         "--run-bench", "porep:20:1"]
    )  # fmt: skip
    tmux.wait_for(lambda s: "cuzk-engine (embedded emulator)" in s, "the TUI's title", 60)
    tmux.keys("4")
    tmux.wait_for(lambda s: "porep × 20, concurrency 1" in s, "the benchmark under way", BENCH_S)

    # Leave: the dialog says what keeps running; the terminal gets one attach line, whole.
    tmux.keys("q")
    # The dialog wraps its text: look for words, not a whole phrase.
    tmux.wait_for(lambda s: "Leave running [l]" in s and "runner" in s, "the quit dialog naming the runner", 30)
    tmux.keys("l")
    rc = e2e.exit_status(60)
    # -J undoes the terminal's own wrapping; -S - includes what scrolled into the pane's history.
    joined = tmux.run("capture-pane", "-p", "-J", "-S", "-", "-t", tmux.server)
    assert rc == "0", joined[:1000]
    lines = [line.rstrip() for line in joined.splitlines()]
    assert "cuzk-tui: left running:" in lines, joined[:1000]
    # The program as the pane's shell finds it: its name on PATH, else its path (a venv's bin is often not on PATH).
    on_path = shutil.which("cuzk-tui")
    program = "cuzk-tui" if on_path is not None and os.path.samefile(on_path, CUZK_TUI) else str(CUZK_TUI)
    (attach,) = [line for line in lines if line.startswith(f"{shlex.quote(program)} attach ")]
    assert len(attach) > WIDTH, "long enough that only an unwrapped line pastes whole"
    assert json.loads((e2e.session / "meta.json").read_text())["left_running"]["attach"] == attach

    # Paste it, whole: the same session, with the benchmark's progress and results on the Bench screen.
    tmux.run("respawn-pane", "-k", "-t", tmux.server, *shlex.split(attach))
    tmux.wait_for(lambda s: "attached to" in s, "the attached TUI", 60)
    tmux.keys("4")
    # At once the benchmark it left, never "No benchmark yet"; then its results as it ends.
    shown = tmux.wait_for(lambda s: "porep × 20, concurrency 1" in s, "the detached benchmark on the Bench screen", 30)
    assert "No benchmark yet" not in shown, shown
    tmux.wait_for(
        lambda s: "completed 20 · failed 0" in s, "the detached benchmark's results after re-attaching", BENCH_S
    )
    # The session tells the hand-over for what it was: the runner's daemon run is no failure.
    _, model = load_session(e2e.session)
    assert [run_boundary(model, s.index) for s in model.timeline.segments[1:]] == [
        RunBoundary("benchmark hand-over", False)
    ]
    tmux.keys("q")
    with contextlib.suppress(AssertionError):
        tmux.wait_for(lambda s: "Still running" in s, "the quit dialog", 5)
        tmux.keys("s")


def _engine_on(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """cuzk-engine with ``config`` (its own address), appending to ``log``: as systemd runs the daemon."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [*engine_program().argv, "-c", str(config)], stdout=out, stderr=out, stdin=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"}, start_new_session=True,
        )  # fmt: skip


def _prove(address: str, *job_ids: str) -> None:
    async def prove() -> None:
        async with DaemonClient(address) as client:
            for job_id in job_ids:
                await client.prove(porep_request(job_id), timeout=60)

    asyncio.run(prove())


async def _submit(address: str, job_id: str) -> None:
    async with DaemonClient(address) as client:
        await client.submit_proof(porep_request(job_id))


PROOFS_PER_BATCH = 2


async def _prove_batches(address: str, between: list[Callable[[], None]]) -> list[str]:
    """Batches of PoRep proofs on the engine, ``between`` run after each batch but the last; the job ids."""
    ids: list[str] = []
    async with DaemonClient(address) as client:
        for batch in range(len(between) + 1):
            wanted = [f"porep-1000-{batch * PROOFS_PER_BATCH + n + 1}" for n in range(PROOFS_PER_BATCH)]
            results = await asyncio.gather(*(client.prove(porep_request(job), timeout=BENCH_S) for job in wanted))
            assert all(r.status == r.COMPLETED for r in results), results
            ids += wanted
            if batch < len(between):
                between[batch]()
    return ids


def test_attach_and_record_keep_every_proof_of_a_daemon_whose_log_is_rotated_both_ways(
    e2e: E2E, tmp_path: Path
) -> None:
    """A daemon that logs to a file of its own (systemd's ``StandardOutput=append:``), watched by the TUI
    (``attach --log``) and by a headless recorder (``record --attach --log``) while logrotate rotates the
    file with copytruncate, then by renaming it: both sessions' report, and the attached one's replay,
    list every proof."""
    from cuzktui.replay import ReplayController

    config = ConfigDocument.parse(e2e.config.read_text())
    address, status = str(config.get("daemon", "listen")), f"http://{config.get('daemon', 'status_listen')}/status"
    (tmp_path / "var").mkdir()
    log = tmp_path / "var" / "cuzk.log"
    engine = _engine_on(e2e.config, log)
    recorded_session = tmp_path / "recorded"
    recorder_err = tmp_path / "recorder.err"
    recorder: subprocess.Popen[bytes] | None = None
    try:
        asyncio.run(wait_until_serving(address, 60, engine))
        watch = ["--status-url", status, "--log", str(log)]
        e2e.start_tui([str(CUZK_TUI), "attach", address, *watch, "--session", str(e2e.session)])
        with recorder_err.open("wb") as err:
            recorder = subprocess.Popen(
                [str(CUZK_TUI), "record", "--attach", address, *watch, "--session", str(recorded_session)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        e2e.tmux.wait_for(lambda s: "READY" in s, "the attached daemon ready", 60)
        copy = recorded_session / "daemon.log"
        deadline = time.monotonic() + 60
        while not (copy.exists() and copy.stat().st_size):  # the recorder has the file open before it is rotated
            assert recorder.poll() is None and time.monotonic() < deadline, recorder_err.read_text()
            time.sleep(0.1)

        def copytruncate() -> None:
            # logrotate's own window (a line written between its copy and its truncate is in neither file)
            # is closed here by stopping the daemon: what is tested is that the followers lose nothing else.
            engine.send_signal(signal.SIGSTOP)
            try:
                shutil.copyfile(log, log.with_name("cuzk.log.1"))
                os.truncate(log, 0)
            finally:
                engine.send_signal(signal.SIGCONT)

        def rename_and_create() -> None:
            log.rename(log.with_name("cuzk.log.2"))  # the daemon writes on into the renamed file
            log.touch()

        ids = asyncio.run(_prove_batches(address, [copytruncate, rename_and_create]))
        e2e.tmux.wait_for(lambda s: f"{len(ids)} done" in s, "every proof on the dashboard", 60)
        e2e.tmux.keys("q")
        assert e2e.exit_status(60) == "0"
        recorder.send_signal(signal.SIGTERM)
        assert recorder.wait(timeout=60) == 0, recorder_err.read_text()
    finally:
        if recorder is not None and recorder.poll() is None:
            recorder.kill()
            recorder.wait(timeout=30)
        engine.kill()
        engine.wait(timeout=30)
    for session in (e2e.session, recorded_session):
        said = " ".join(e.text for e in iter_session_events(session) if isinstance(e, ev.Notice))
        assert "was truncated (copytruncate)" in said and "was rotated (renamed)" in said, said
        _, model = load_session(session, cache=False)
        report = build_report(model, str(session))
        assert sorted(j["job_id"] for j in report["jobs"] if j["status"] == "completed") == sorted(ids), session
    replay = ReplayController(e2e.session, cache=False)
    replay.load()
    assert sorted(j.job_id for j in replay.model.timeline.jobs() if j.status == "completed") == sorted(ids)


def test_attached_a_restart_is_run_2_and_a_sigint_is_said(e2e: E2E, tmp_path: Path) -> None:
    """Issue 23 points 3-5 as an operator meets them: ``cuzk-tui attach --pid`` to a daemon on a unix socket,
    proofs, a SIGKILL and a new daemon on the same address (systemd's Restart=) → READY as run 2 within 8 s
    of it serving, the later proof counted on; a SIGINT → NOT PROVING within 5 s of its line. Then the attached
    session's own report and replay list every proof of both runs, and the proof sent after the SIGINT with
    its reason."""
    tmux, log = e2e.tmux, tmp_path / "cuzk.log"
    address = str(ConfigDocument.parse(e2e.config.read_text()).get("daemon", "listen"))
    status = str(ConfigDocument.parse(e2e.config.read_text()).get("daemon", "status_listen"))
    engines = [_engine_on(e2e.config, log)]
    try:
        asyncio.run(wait_until_serving(address, 60, engines[0]))
        e2e.start_tui(
            [str(CUZK_TUI), "--session", str(e2e.session), "attach", address, "--pid", str(engines[0].pid),
             "--log", str(log), "--status-url", f"http://{status}"]
        )  # fmt: skip
        tmux.wait_for(lambda s: "ATTACHED" in s and "READY" in s, "the attached daemon ready", 60)
        _prove(address, "porep-1000-1", "porep-1000-2")
        tmux.wait_for(lambda s: "Proofs 2 done" in s, "run 1's two proofs", 30)

        engines[0].send_signal(signal.SIGKILL)
        engines[0].wait(10)
        tmux.wait_for(lambda s: "DEAD" in s, "the death", 10)
        engines.append(_engine_on(e2e.config, log))
        asyncio.run(wait_until_serving(address, 60, engines[1]))
        serving = time.monotonic()
        shown = tmux.wait_for(
            lambda s: "READY" in s and "run 2" in s and f"pid {engines[1].pid}" in s, "run 2 ready", 30
        )
        assert time.monotonic() - serving < 8, f"run 2 shown {time.monotonic() - serving:.1f} s after it served"
        assert "DEAD" not in shown
        recorded = list(iter_session_events(e2e.session))
        (exit,) = [e for e in recorded if isinstance(e, ev.DaemonExited)]
        assert exit.pid == engines[0].pid and exit.returncode is None  # seen at once; not our child
        relaunched = [e.t for e in recorded if isinstance(e, ev.DaemonLaunched)][-1]
        _prove(address, "porep-1000-3")
        tmux.wait_for(lambda s: "Proofs 3 done" in s, "the later proof, counted on", 30)
        # The memory chart's gap: no sample of the daemon between its death and its next run, samples after.
        rss = [e.t for e in iter_session_events(e2e.session) if isinstance(e, ev.MemorySample) and e.rss_bytes]
        assert not [t for t in rss if exit.t < t < relaunched] and any(t > relaunched for t in rss)

        engines[1].send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while "received SIGINT, shutting down" not in log.read_text():
            assert time.monotonic() < deadline, "the engine never logged the SIGINT"
            time.sleep(0.05)
        logged = time.monotonic()
        shown = tmux.wait_for(lambda s: "NOT PROVING" in s, "NOT PROVING after the SIGINT", 30)
        assert time.monotonic() - logged < 5, f"SIGINT shown {time.monotonic() - logged:.1f} s after its line"
        assert shown.splitlines()[0].strip().startswith("NOT PROVING since a SIGINT: restart it"), shown
        assert "restart it: a SIGINT" in shown and " READY " not in shown

        # A proof sent now is taken and never proved: the report of the log says why it waits.
        asyncio.run(_submit(address, "porep-1000-after"))
        deadline = time.monotonic() + 30
        while "job_id=porep-1000-after" not in log.read_text():
            assert time.monotonic() < deadline, "the engine never enqueued the proof"
            time.sleep(0.05)
        _, model = load_session(log)
        reasons = {job["job_id"]: job["reason"] for job in build_report(model, str(log))["jobs"]}
        assert reasons["porep-1000-after"].startswith("enqueued after the daemon's SIGINT")
        assert model.runs() == 2

        tmux.keys("q")  # an attached daemon is not ours: leaving asks nothing
        assert e2e.exit_status(60) == "0"
        assert all(engine.poll() is None for engine in engines[1:]), "the attached daemon is left alone"
    finally:
        for engine in engines:
            if engine.poll() is None:
                engine.kill()
            engine.wait(30)
    # The attached session itself (its copy of the log, its events) keeps both runs: its report and its replay
    # list every proof across the restart, and the one sent after the SIGINT with why it was never proved.
    from cuzktui.figures import status_line
    from cuzktui.replay import ReplayController

    proved = ["porep-1000-1", "porep-1000-2", "porep-1000-3"]
    _, model = load_session(e2e.session, cache=False)
    replay = ReplayController(e2e.session, cache=False)
    replay.load()
    for read in (model, replay.model):
        report = build_report(read, str(e2e.session))
        assert (report["daemon_runs"], report["restarts"], report["job_source"]) == (2, 1, "log")
        statuses = {job["job_id"]: job["status"] for job in report["jobs"]}
        assert sorted(job for job, status in statuses.items() if status == "completed") == proved, statuses
        (after,) = [job for job in report["jobs"] if job["job_id"] == "porep-1000-after"]
        assert after["status"] == "incomplete" and after["reason"].startswith("enqueued after the daemon's SIGINT")
    assert [(j.job_id, j.segment) for j in replay.model.timeline.jobs() if j.status == "completed"] == [
        ("porep-1000-1", 0), ("porep-1000-2", 0), ("porep-1000-3", 1)
    ]  # fmt: skip
    assert status_line(replay.model, None) == "NOT PROVING since a SIGINT: restart it"
