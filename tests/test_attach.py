"""Attaching to a daemon that runs already (under systemd, the TUI started later over SSH): liveness,
its uptime, its pid and memory, journald, "leave running" and continuing the session it left."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui.cli import build_parser
from cuzktui.client import DaemonClient, status_hostport
from cuzktui.commands.tui import UsageError, attach_options, invoked_as
from cuzktui.live import AttachTarget, LiveController, LiveOptions, find_detached_session
from cuzktui.model import SessionModel
from cuzktui.samplers import listener_pid
from cuzktui.session import SessionWriter, iter_session_events
from cuzktui.supervisor import HANDED_TO_BENCHMARK, RESTARTED_AFTER_S, Supervisor, engine_program
from tests.conftest import EngineHandle, alive, fast_engine_config, require_engine

DEADLINE_S = 30.0


async def until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def polled_until(
    controller: LiveController, condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S
) -> None:
    """Poll the controller (as the app does) until ``condition`` holds for its model."""
    deadline = time.monotonic() + timeout
    await controller.poll()
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
        await controller.poll()


def recorded(session: Path) -> list[ev.Event]:
    return list(iter_session_events(session))


def of_type(session: Path, cls: type[ev.Event]) -> list[ev.Event]:
    return [e for e in recorded(session) if isinstance(e, cls)]


async def launched_engine(tmp_path: Path, more_toml: str = "") -> LiveController:
    """A LiveController that launched a fast engine (config ``tmp_path/cuzk.toml``, with ``more_toml``
    after it; session ``tmp_path/session``), once the session records it ready; stopped again when it
    never is."""
    require_engine()
    config = tmp_path / "cuzk.toml"
    config.write_text(fast_engine_config(tmp_path) + more_toml)
    session = tmp_path / "session"
    controller = LiveController(LiveOptions(program=engine_program(), config_file=config, session_dir=session))
    await controller.start()
    try:
        await until(lambda: bool(of_type(session, ev.DaemonReadyObserved)), "readiness", 60)
    except BaseException:
        await controller.shutdown(stop_daemon=True)
        raise
    return controller


async def attached(tmp_path: Path, address: str, **target: object) -> Supervisor:
    supervisor = Supervisor(SessionWriter(tmp_path / "session"), None)
    supervisor.liveness_interval = 0.2
    await supervisor.attach(address, **target)  # type: ignore[arg-type]
    return supervisor


# -- the daemon's facts -----------------------------------------------------------------------


def test_up_is_the_daemons_uptime_not_the_time_since_attaching() -> None:
    model = SessionModel()
    model.apply(ev.DaemonLaunched(1000.0, "attached", None, (), None, "127.0.0.1:9820", None))
    model.apply(ev.DaemonReadyObserved(1000.5, None, 0.0, uptime_s=3600.0))  # GetStatus uptime_seconds
    model.apply(ev.Notice(1006.5, "info", "six seconds later"))
    assert model.daemon_uptime() == pytest.approx(3606.0)
    # A /status poll of this run is fresher: its uptime_secs wins.
    model.apply(ev.StatusSnapshot(1010.0, 7200.0, 0, 0, 0, 0, 1, 0, 0, 0))
    model.apply(ev.Notice(1012.0, "info", "two seconds later"))
    assert model.daemon_uptime() == pytest.approx(7202.0)


def test_a_daemon_we_launched_is_up_since_its_launch_not_its_readiness() -> None:
    model = SessionModel()
    model.apply(ev.DaemonLaunched(1000.0, "engine", 42, ("cuzk-engine",), None, "unix:///s", None))
    model.apply(ev.DaemonReadyObserved(1030.0, 42, 30.0))
    model.apply(ev.Notice(1040.0, "info", "later"))
    assert model.daemon_uptime() == pytest.approx(40.0)


def test_silence_is_shown_and_the_last_state_kept_until_the_daemon_answers_again() -> None:
    from cuzktui.controller import Identity
    from cuzktui.ui.widgets.panels import daemon_content

    model = SessionModel()
    model.apply(ev.DaemonLaunched(1000.0, "attached", 77, (), None, "127.0.0.1:9820", None))
    model.apply(ev.DaemonReadyObserved(1000.5, 77, 0.0, uptime_s=60.0))
    model.apply(ev.StatusSnapshot(1001.0, 60.5, 100, 40, 3, 1, 2, 1, 5, 0))
    model.apply(ev.DaemonLiveness(1010.0, False, "the daemon stopped answering (GetStatus: DEADLINE_EXCEEDED)"))
    model.apply(ev.Notice(1014.0, "info", "later"))
    text = daemon_content(model, Identity("attached", "attached to 127.0.0.1:9820", None)).plain
    assert "NOT ANSWERING" in text and "DEADLINE_EXCEEDED" in text and "silent for 4s" in text
    assert model.status is not None and model.status.synthesizing == 3, "the last state stays"
    model.apply(ev.DaemonLiveness(1015.0, True, "answers again", 75.0))
    text = daemon_content(model, Identity("attached", "attached to 127.0.0.1:9820", None)).plain
    assert "NOT ANSWERING" not in text and "READY" in text


def test_an_attached_daemon_whose_pid_is_not_visible_says_so() -> None:
    from cuzktui.controller import Identity
    from cuzktui.ui.widgets.panels import daemon_content

    model = SessionModel()
    model.apply(ev.DaemonLaunched(1000.0, "attached", None, (), None, "unix:///run/curio/cuzk.sock", None))
    model.apply(ev.DaemonReadyObserved(1000.5, None, 0.0, uptime_s=60.0))
    text = daemon_content(model, Identity("attached", "attached to unix:///run/curio/cuzk.sock", None)).plain
    assert "READY  pid unknown · up 1m" in text


# -- against the engine ---------------------------------------------------------------------------


async def test_an_address_where_nothing_listens_is_said_within_seconds(tmp_path: Path) -> None:
    address = f"unix://{tmp_path}/nobody.sock"
    supervisor = await attached(tmp_path, address)
    try:
        await until(lambda: bool(of_type(tmp_path / "session", ev.DaemonLiveness)), "a liveness verdict", 10)
        (verdict,) = of_type(tmp_path / "session", ev.DaemonLiveness)
        assert isinstance(verdict, ev.DaemonLiveness) and not verdict.answering
        assert verdict.detail.startswith(f"nothing answers at {address}")
        assert not of_type(tmp_path / "session", ev.DaemonReadyObserved)
    finally:
        await supervisor.close(stop=False)


async def test_the_socket_owner_is_the_pid_its_memory_is_sampled_and_its_death_seen_at_once(
    tmp_path: Path, running_engine: EngineHandle
) -> None:
    from cuzktui.recording import DaemonRecorder

    assert listener_pid(running_engine.address) == running_engine.proc.pid
    supervisor = await attached(tmp_path, running_engine.address)
    recorder = DaemonRecorder(supervisor, supervisor.session.append_event, interval=0.2)
    recorder.start()
    session = tmp_path / "session"
    try:
        await until(lambda: bool(of_type(session, ev.DaemonReadyObserved)), "readiness")
        (ready,) = of_type(session, ev.DaemonReadyObserved)
        assert isinstance(ready, ev.DaemonReadyObserved) and ready.pid == running_engine.proc.pid
        assert ready.uptime_s is not None
        await until(
            lambda: any(isinstance(e, ev.MemorySample) and e.rss_bytes for e in recorded(session)), "an RSS sample"
        )
        sample = next(e for e in recorded(session) if isinstance(e, ev.MemorySample) and e.rss_bytes)
        assert isinstance(sample, ev.MemorySample) and sample.cgroup_usage_bytes is not None  # /proc/PID/cgroup
        running_engine.proc.send_signal(signal.SIGKILL)
        started = time.monotonic()
        await until(lambda: bool(of_type(session, ev.DaemonExited)), "the exit", 10)
        assert time.monotonic() - started < 5
        (exit,) = of_type(session, ev.DaemonExited)
        assert isinstance(exit, ev.DaemonExited) and exit.pid == running_engine.proc.pid
    finally:
        await recorder.stop()
        await supervisor.close(stop=False)


async def test_the_recorder_takes_the_liveness_probes_fresh_answer_instead_of_asking_again(
    tmp_path: Path, fake_daemon: tuple[str, object]
) -> None:
    from cuzktui.recording import DaemonRecorder

    address, _ = fake_daemon  # its GetStatus says how many GetStatus calls it has answered
    supervisor = Supervisor(SessionWriter(tmp_path / "session"), None)
    supervisor.liveness_interval = 3600.0  # one probe during the test
    await supervisor.attach(address)
    recorder = DaemonRecorder(supervisor, supervisor.session.append_event, interval=3600.0)
    session = tmp_path / "session"
    try:
        await until(lambda: bool(of_type(session, ev.DaemonReadyObserved)), "readiness")
        recorder.start()
        await until(lambda: bool(of_type(session, ev.DaemonProofCounts)), "the proof counts")
        (counts,) = of_type(session, ev.DaemonProofCounts)
        assert isinstance(counts, ev.DaemonProofCounts) and counts.completed == 1  # the probe's own answer
    finally:
        await recorder.stop()
        await supervisor.close(stop=False)


@pytest.mark.parametrize("pid_visible", [True, False], ids=["pid", "no-pid"])
async def test_an_engine_attached_to_is_charted_as_its_box_not_its_process_tree(
    tmp_path: Path, start_engine: Any, monkeypatch: pytest.MonkeyPatch, pid_visible: bool
) -> None:
    """An engine's memory is its box's (its /status ``emulated_box``) whatever watches it: attached, as
    when launched, the chart reads the daemon's own process (DAEMON_PROCESS_RSS) at idle in the box's
    bytes, not its interpreter and input reader (~65 MB, 16 GiB × 256) nor the host's cgroup × 256; with
    no pid to watch, the box is still charted. Its times are the box's too (its time_scale, said there
    as well: the waterfall's axis and details, the rate). The session says both scales, so its replay
    reads the same."""
    from cuzktui.daemon_facts import DAEMON_PROCESS_RSS
    from cuzktui.session import load_session
    from cuzktui.supervisor import free_loopback_port
    from tests.conftest import TEST_TIME_SCALE, engine_config_text

    if not pid_visible:
        monkeypatch.setattr("cuzktui.supervisor.listener_pid", lambda address: None)
    status = f"127.0.0.1:{free_loopback_port()}"
    engine: EngineHandle = await start_engine(engine_config_text(daemon={"status_listen": status}))
    target = AttachTarget(engine.address, status_url=status)
    options = LiveOptions(program=None, session_dir=tmp_path / "session", attach=target, sample_interval=0.2)
    controller = LiveController(options)
    await controller.start()
    model = controller.model
    try:
        await polled_until(controller, lambda: model.rss.last() is not None, "an RSS sample")
        assert model.daemon.memory_scale == 1 / 256 and model.daemon.pid == (engine.proc.pid if pid_visible else None)
        assert model.daemon.time_scale == TEST_TIME_SCALE
        rss = model.rss.last()
        assert rss is not None and rss[1] == pytest.approx(DAEMON_PROCESS_RSS, rel=0.01)
        assert model.cgroup_usage.last() is None and model.cgroup_limit.last() is None
    finally:
        await controller.shutdown(stop_daemon=False)
    _, replayed = load_session(tmp_path / "session", cache=False)
    replayed_rss = replayed.rss.last()
    assert replayed_rss is not None and replayed_rss[1] == pytest.approx(DAEMON_PROCESS_RSS, rel=0.01)
    assert replayed.daemon.time_scale == TEST_TIME_SCALE


async def test_a_hung_daemon_is_said_to_stop_answering_and_to_answer_again(
    tmp_path: Path, running_engine: EngineHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No pid (another user's daemon, no --pid): only the probes can tell.
    monkeypatch.setattr("cuzktui.supervisor.listener_pid", lambda address: None)
    supervisor = await attached(tmp_path, running_engine.address)
    session = tmp_path / "session"

    def verdicts() -> list[bool]:
        return [e.answering for e in of_type(session, ev.DaemonLiveness) if isinstance(e, ev.DaemonLiveness)]

    try:
        await until(lambda: bool(of_type(session, ev.DaemonReadyObserved)), "readiness")
        running_engine.proc.send_signal(signal.SIGSTOP)
        await until(lambda: verdicts() == [False], "the silence", 20)
        silent = of_type(session, ev.DaemonLiveness)[0]
        assert isinstance(silent, ev.DaemonLiveness) and "stopped answering" in silent.detail
        running_engine.proc.send_signal(signal.SIGCONT)
        await until(lambda: verdicts() == [False, True], "the answer after the silence", 20)
    finally:
        running_engine.proc.send_signal(signal.SIGCONT)
        await supervisor.close(stop=False)


def restart_engine(engine: EngineHandle, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A new engine on ``engine``'s address, config and log, as systemd's ``Restart=`` starts one (killed by
    the caller's ``started`` clean-up)."""
    with engine.log_path.open("ab") as out:
        proc = subprocess.Popen(
            [*engine_program().argv, "-c", str(engine.config_path), "-l", engine.address],
            stdout=out, stderr=out, stdin=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"},
            start_new_session=True,
        )  # fmt: skip
    started.append(proc)
    return proc


async def test_a_daemon_restarted_on_the_attached_address_without_a_pid_is_its_next_run_and_the_counts_go_on(
    tmp_path: Path, running_engine: EngineHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd's Restart= after a SIGKILL, for a daemon attached by address whose socket owner this user
    cannot see (no pid, no log): nothing says it died; the address answering again with a younger uptime is
    run 2. GetStatus's counts are all the session has: they go on from the first run's. (With a pid, and a
    log: tests/test_e2e_tmux.py::test_attached_a_restart_is_run_2_and_a_sigint_is_said.)"""
    from cuzktui.figures import proof_counts
    from tests.engine.engine_harness import porep_request

    monkeypatch.setattr("cuzktui.supervisor.listener_pid", lambda address: None)
    target = AttachTarget(running_engine.address)
    options = LiveOptions(program=None, session_dir=tmp_path / "session", attach=target, sample_interval=0.2)
    controller = LiveController(options)
    started: list[subprocess.Popen[bytes]] = []
    await controller.start()
    model = controller.model
    try:
        assert controller.supervisor is not None
        controller.supervisor.liveness_interval = 0.2
        await polled_until(controller, lambda: model.daemon.phase == "ready", "readiness")
        async with DaemonClient(running_engine.address) as client:
            for n in range(2):
                await client.prove(porep_request(f"porep-1000-{n}"), timeout=60)
        await polled_until(controller, lambda: proof_counts(model).completed == 2, "run 1's two proofs")
        # A successor is told by its uptime: run 1 must outlive that reading's uncertainty.
        await polled_until(
            controller, lambda: (model.daemon_uptime() or 0.0) > RESTARTED_AFTER_S + 2, "run 1 up for a while"
        )
        running_engine.proc.send_signal(signal.SIGKILL)
        running_engine.proc.wait(10)
        restart_engine(running_engine, started)
        await polled_until(
            controller, lambda: model.daemon.phase == "ready" and model.daemon.runs == 2, "the next run ready"
        )
        assert model.daemon.pid is None
        ((_, exit),) = model.exits
        assert exit.cause == "unknown" and "its end was not seen (no pid to watch)" in exit.evidence
        async with DaemonClient(running_engine.address) as client:
            await client.prove(porep_request("porep-1000-9"), timeout=60)
        await polled_until(controller, lambda: proof_counts(model).completed == 3, "the later proof, counted on")
        assert proof_counts(model).run_completed == 1
        said = [n.text for n in model.notices]
        assert any("was restarted: a new run answers there (pid unknown" in text for text in said), said
    finally:
        await controller.shutdown(stop_daemon=False)
        for proc in started:
            proc.kill()
            proc.wait(30)


JOURNAL_LINES = (
    "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true",
    "TIMELINE,1200,SYNTH_START,porep-1000-17,partition=0",
    "TIMELINE,41200,SYNTH_END,porep-1000-17,partition=0,synth_ms=40000",
)


STAND_IN_CURSOR = "s=stand-in;i="  # then the entry's index, from 0


def stand_in_journalctl(directory: Path, journal: Path, argv_file: Path) -> None:
    """A ``journalctl`` in ``directory``: it writes its arguments to ``argv_file`` and follows ``journal`` (what
    journald holds of the unit, a message a line) as ``journalctl -o json -f`` does, each entry with its cursor,
    a message that is not UTF-8 as its bytes' values; ``--after-cursor`` starts after that entry."""
    body = f"""\
import json, os, sys, time
args = sys.argv[1:]
with open({str(argv_file)!r}, "w") as out:
    out.write("".join(arg + "\\n" for arg in args))
after = -1
if "--after-cursor" in args:
    after = int(args[args.index("--after-cursor") + 1].removeprefix({STAND_IN_CURSOR!r}))
index = 0
with open({str(journal)!r}, "rb") as entries:
    while True:
        line = entries.readline()
        if not line.endswith(b"\\n"):  # journald's end for now: follow it (-f)
            entries.seek(-len(line), os.SEEK_CUR)
            time.sleep(0.01)
            continue
        if index > after:
            message = line[:-1]
            try:
                value = message.decode()
            except UnicodeDecodeError:
                value = list(message)
            print(json.dumps({{"__CURSOR": {STAND_IN_CURSOR!r} + str(index), "MESSAGE": value}}), flush=True)
        index += 1
"""
    script = directory / "journalctl"
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


async def test_the_log_is_read_from_journald_with_an_argument_list(
    tmp_path: Path, running_engine: EngineHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_file = tmp_path / "journalctl-argv"
    entries = tmp_path / "journal"
    entries.write_text("".join(line + "\n" for line in JOURNAL_LINES))
    stand_in_journalctl(bin_dir, entries, argv_file)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    controller = LiveController(
        LiveOptions(
            program=None,
            session_dir=tmp_path / "session",
            attach=AttachTarget(running_engine.address, journal_unit="cuzk.service"),
        )
    )
    await controller.start()
    try:
        await polled_until(
            controller, lambda: argv_file.exists() and controller.model.daemon.phase == "ready", "journalctl started"
        )
        assert not controller.daemon_running(), "an attached daemon is not ours: quitting asks nothing"
        args = argv_file.read_text().split("\n")[:-1]
        assert args[:8] == ["-o", "json", "--output-fields=MESSAGE", "--all", "-f", "-u", "cuzk.service", "--since"]
        assert args[8].startswith("@") and int(args[8][1:]) <= time.time()  # this daemon run's start
        await polled_until(controller, lambda: bool(controller.model.timeline.jobs()), "the journal's TIMELINE lines")
        (job,) = controller.model.timeline.jobs()
        assert job.job_id == "porep-1000-17" and job.partitions[0].synth_ms == 40000
    finally:
        await controller.shutdown(stop_daemon=False)
    journal = controller.supervisor._journal if controller.supervisor is not None else None
    assert journal is None, "the journalctl process is ended with the attach"


# -- leave running, and come back ------------------------------------------------------------------


async def test_leave_running_says_what_keeps_running_and_one_attach_line_continues_the_session(
    tmp_path: Path,
) -> None:
    first = await launched_engine(tmp_path)
    config, session = tmp_path / "cuzk.toml", tmp_path / "session"
    pid: int | None = None
    try:
        assert first.supervisor is not None
        pid = first.supervisor.pid
        assert first.left_running() == [f"the daemon (pid {pid}, listening on {first.supervisor.listen})"]
        await first.shutdown(stop_daemon=False)
        assert pid is not None and alive(pid)
        lines = first.farewell().splitlines()
        assert lines[:2] == [
            "cuzk-tui: left running:",
            f"  - the daemon (pid {pid}, listening on unix://{tmp_path}/cuzk.sock)",
        ]
        attach_line = lines[-1]
        assert attach_line.startswith("cuzk-tui attach ") and "\n" not in attach_line
        meta = json.loads((session / "meta.json").read_text())
        assert meta["left_running"]["attach"] == attach_line

        # The printed line, pasted: it attaches to the same daemon and continues the same session.
        args = build_parser().parse_args(shlex.split(attach_line)[1:])
        options = attach_options(args)
        assert options.session_dir == session and options.config_file == config
        second = LiveController(options)
        await second.start()
        try:
            await until(lambda: second.supervisor is not None and second.supervisor.pid == pid, "the socket owner")
            d = second.model
            await polled_until(
                second, lambda: d.daemon.mode == "attached" and d.daemon.phase == "ready", "the re-attach ready"
            )
            # The session goes on (its launch, then this attach) with the same daemon run its log shows.
            assert len(of_type(session, ev.DaemonLaunched)) == 2
            assert second.model.daemon.runs == 1 and len(second.model.timeline.segments) == 1
            assert second.running_config_source() is not None and str(config) in str(second.running_config_source())
        finally:
            await second.shutdown(stop_daemon=False)
    finally:
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_attach_line_runs_this_program_as_a_shell_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's install leaves cuzk-tui in .venv/bin, where PATH does not look: the printed `cuzk-tui
    attach …` said "command not found" when pasted. The line starts with what runs this program again."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "cuzk-tui"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    elsewhere = tmp_path / "usr-bin"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    # Run as the README says (.venv/bin/cuzk-tui), not on PATH: its absolute path.
    assert invoked_as("venv/bin/cuzk-tui", str(python), str(elsewhere)) == (str(script),)
    # On PATH: its name. Another cuzk-tui first on PATH is not this one: the path again.
    assert invoked_as(str(script), str(python), str(bin_dir)) == ("cuzk-tui",)
    (elsewhere / "cuzk-tui").write_text("#!/bin/sh\n")
    (elsewhere / "cuzk-tui").chmod(0o755)
    assert invoked_as(str(script), str(python), f"{elsewhere}:{bin_dir}") == (str(script),)
    # python -m cuzktui.cli: this interpreter (the venv's link, not what it points to) and the module.
    module = str(Path("cuzktui/cli.py").resolve())
    assert invoked_as(module, str(python), str(elsewhere)) == (str(python), "-m", "cuzktui.cli")

    # The line: that program, and the status endpoint as a URL (host:port alone read as a file name to a newcomer).
    target = AttachTarget("127.0.0.1:9820", "127.0.0.1:9821")
    controller = LiveController(LiveOptions(program=None, attach=target, command=(str(script),)))
    controller.model.apply(
        ev.DaemonLaunched(1000.0, "attached", None, (), None, "127.0.0.1:9820", None, status_url="127.0.0.1:9821")
    )
    line = controller.reattach_hint()
    assert line == f"{script} attach 127.0.0.1:9820 --status-url http://127.0.0.1:9821/status"
    args = build_parser().parse_args(shlex.split(line)[1:])
    assert status_hostport(args.status_url) == ("127.0.0.1", 9821)


def test_attach_finds_the_session_whose_benchmark_still_runs(tmp_path: Path) -> None:
    def session(name: str, listen: str, bench_pid: int) -> Path:
        path = tmp_path / name
        SessionWriter.create(directory=path).write_meta(
            {"left_running": {"listen": listen, "attach": "…"}, "bench_pid": bench_pid}
        )
        return path

    gone = 2**22 + 17  # above pid_max's default: no such process
    session("a-finished", "unix:///run/cuzk.sock", gone)
    running = session("b-running", "unix:///run/cuzk.sock", os.getpid())
    session("c-elsewhere", "127.0.0.1:9820", os.getpid())
    assert find_detached_session("unix:///run/cuzk.sock", tmp_path) == running
    assert find_detached_session("127.0.0.1:9999", tmp_path) is None


def test_attach_arguments_keep_the_global_options_and_refuse_two_logs() -> None:
    args = build_parser().parse_args(["--session", "/s", "attach", "127.0.0.1:9820", "--pid", "42"])
    options = attach_options(args)
    assert options.session_dir == Path("/s") and options.attach is not None and options.attach.pid == 42
    both = build_parser().parse_args(["attach", "127.0.0.1:9820", "--log", "/var/log/cuzk.log", "--journal", "cuzk"])
    with pytest.raises(UsageError, match="--log and --journal"):
        attach_options(both)


async def test_without_a_log_the_waterfall_comes_from_status_polls(tmp_path: Path, start_engine: Any) -> None:
    from cuzktui.supervisor import free_loopback_port
    from tests.conftest import engine_config_text
    from tests.engine.engine_harness import porep_request

    status = f"127.0.0.1:{free_loopback_port()}"
    # Slow enough (0.05 s per modelled second) that polls each second see partitions in several states.
    engine: EngineHandle = await start_engine(
        engine_config_text(engine={"time_scale": 0.05}, daemon={"status_listen": status})
    )
    controller = LiveController(
        LiveOptions(
            program=None,
            session_dir=tmp_path / "session",
            attach=AttachTarget(engine.address, status_url=status),
            sample_interval=0.2,
        )
    )
    await controller.start()
    try:
        model = controller.model
        await polled_until(controller, lambda: model.daemon.phase == "ready", "readiness")
        assert controller.supervisor is not None
        await controller.supervisor.client.submit_proof(porep_request("porep-1000-1"))
        await polled_until(
            controller,
            lambda: any(j.status == "completed" for j in model.timeline.jobs()),
            "the job completed, from /status alone",
        )
        (job,) = model.timeline.jobs()
        assert job.job_id == "porep-1000-1" and job.partitions
        assert all(p.synth_start is not None and p.gpu_end is not None for p in job.partitions.values())
    finally:
        await controller.shutdown(stop_daemon=False)
    # The session keeps them: its replay and report show the job the live screen showed, and say whence.
    from cuzktui.report import STATUS_JOBS, build_report, render_text
    from cuzktui.session import load_session

    _, replayed = load_session(tmp_path / "session", cache=False)
    assert [(j.job_id, j.status) for j in replayed.timeline.jobs()] == [("porep-1000-1", "completed")]
    report = build_report(replayed, "session")
    assert report["job_source"] == "status" and report["counts"]["completed"] == 1
    assert STATUS_JOBS in render_text(report)


async def test_a_benchmark_left_running_shows_after_re_attaching_with_the_printed_line(tmp_path: Path) -> None:
    from cuzktui.controller import BenchRequest

    first = await launched_engine(tmp_path)
    second: LiveController | None = None
    try:
        await first.start_bench(BenchRequest("porep", 3, 1))
        runner = first._bench_proc
        assert runner is not None
        # The TUI's daemon, stopped for the runner: a hand-over, not a death (issue 27 point 10).
        (handed,) = of_type(tmp_path / "session", ev.DaemonExited)
        assert isinstance(handed, ev.DaemonExited) and handed.handover == HANDED_TO_BENCHMARK
        await first.shutdown(stop_daemon=False)
        assert runner.poll() is None, "the runner keeps going after the TUI left"
        lines = first.farewell().splitlines()
        assert any(f"the benchmark runner (pid {runner.pid})" in line for line in lines)
        assert any("stops that daemon when the benchmark ends" in line for line in lines)

        second = LiveController(attach_options(build_parser().parse_args(shlex.split(lines[-1])[1:])))
        await second.start()
        model = second.model
        await polled_until(
            second,
            lambda: model.bench is not None and model.bench.finished is not None,
            "the detached benchmark's results on the re-attached Bench screen",
        )
        assert model.bench is not None and model.bench.kind == "porep" and model.bench.count == 3
        assert len(model.bench.results) == 3
    finally:
        if second is not None:
            await second.shutdown(stop_daemon=False)
        proc = first._bench_proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


# -- issue 17 point 2: /status ignores monolithic work ------------------------------------------------


async def test_monolithic_failures_are_counted_from_get_status_and_the_log_never_from_status(tmp_path: Path) -> None:
    from cuzktui.figures import proof_counts
    from cuzktui.proto import proving_pb2 as pb
    from cuzktui.report import build_report
    from cuzktui.session import load_session
    from cuzktui.ui.widgets.panels import pipeline_content
    from tests.engine.engine_harness import porep_request

    controller = await launched_engine(tmp_path, "[pipeline]\nenabled = false\n")
    model = controller.model
    try:
        assert controller.supervisor is not None and controller.supervisor.status_url is not None
        client = controller.supervisor.client
        for n in range(3):  # an empty C1: the monolithic prover fails each (engine.rs process_monolithic_result)
            answer = await client.prove(porep_request(f"mono-bad-{n}", payload=b""), timeout=60)
            assert answer.status == pb.AwaitProofResponse.FAILED
        await polled_until(
            controller,
            lambda: model.daemon_counts is not None and model.daemon_counts.failed == 3,
            "GetStatus's three failures recorded",
        )
        assert model.daemon_counts is not None
        counted_t = model.daemon_counts.t
        await polled_until(
            controller, lambda: model.status is not None and model.status.t > counted_t, "a /status poll after them"
        )
        # Upstream's quirk, imitated by the engine: status.rs never saw the monolithic jobs.
        assert model.status is not None and model.status.status_json_failed == 0
        assert proof_counts(model).failed == 3
        assert "0 done · 3 failed" in pipeline_content(model).plain
    finally:
        await controller.shutdown(stop_daemon=True)
    session = tmp_path / "session"
    records = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    counts = [r for r in records if r["type"] == "DaemonProofCounts"]
    assert counts and counts[-1]["failed"] == 3 and counts[-1]["completed"] == 0
    snapshots = [r for r in records if r["type"] == "StatusSnapshot"]
    assert snapshots and not any("total_failed" in r or "total_completed" in r for r in snapshots)
    _, replayed = load_session(session)
    assert proof_counts(replayed).failed == 3
    assert build_report(replayed, str(session))["counts"]["failed"] == 3
