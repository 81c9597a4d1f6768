"""The live controller's pure parts: its first engine config, machine profiles, refusals."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path

import psutil
import pytest

from cuzktui import live as live_module
from cuzktui.config import ConfigDocument
from cuzktui.controller import BenchRequest, ControllerError, TuneRequest
from cuzktui.daemon_address import DAEMON_DEFAULT_LISTEN
from cuzktui.daemon_facts import DAEMON_PROCESS_RSS
from cuzktui.knobs import Severity
from cuzktui.live import (
    AttachTarget,
    LiveController,
    LiveOptions,
    default_config,
    profile_memory_limit,
    with_profile,
)
from cuzktui.supervisor import DaemonProgram, choose_program
from cuzktui.units import GiB
from tests.conftest import engine_config_text, memory_cgroup_or_skip, require_engine, standin_daemon_on_path
from tests.test_attach import launched_engine, polled_until, until


def test_a_first_config_is_valid_loopback_only_and_an_engine_reads_the_default_box(tmp_path: Path) -> None:
    doc = ConfigDocument.parse(default_config(tmp_path))
    assert not [p for p in doc.problems() if p.severity is not Severity.INFO]
    # Written in the file (not commented out): the daemon would otherwise serve on /run/curio/cuzk.sock.
    assert doc.is_set("daemon", "listen") and doc.get("daemon", "listen") == f"unix://{tmp_path.resolve()}/daemon.sock"
    assert str(doc.get("daemon", "status_listen")).startswith("127.0.0.1:")
    # The box comes from the knob's default, as for cuzk-engine -c FILE, bench and tune: not from this file.
    assert not doc.is_set("engine", "mem_total") and doc.get("engine", "mem_total") == "256GiB"
    assert ConfigDocument.parse(with_profile(default_config(tmp_path), 512)).get("engine", "mem_total") == "512GiB"


def test_a_profile_sets_the_emulated_ram_unless_the_config_already_does() -> None:
    doc = ConfigDocument.parse(with_profile("# mine\n[pipeline]\nmax_parallel_synthesis = 4\n", 512))
    assert doc.get("engine", "mem_total") == "512GiB" and doc.get("pipeline", "max_parallel_synthesis") == 4
    assert doc.text().startswith("# mine\n")
    explicit = '[engine]\nmem_total = "128GiB"\n'
    assert with_profile(explicit, 512) == explicit


def test_a_profile_is_a_cgroup_of_the_box_size_in_real_bytes() -> None:
    assert profile_memory_limit(256, 1 / 256) == GiB
    assert profile_memory_limit(128, 1 / 256) == GiB // 2


async def test_an_attached_daemon_cannot_be_reconfigured_or_benchmarked() -> None:
    controller = LiveController(LiveOptions(program=None, attach=AttachTarget("127.0.0.1:1")))
    with pytest.raises(ControllerError, match="attached"):
        await controller.apply_config({"pipeline.max_parallel_synthesis": 4})
    with pytest.raises(ControllerError, match="launches"):
        await controller.start_bench(BenchRequest("porep", 1, 1))


async def test_a_benchmark_whose_input_cannot_be_read_leaves_the_daemon_alone(tmp_path: Path) -> None:
    """A mistyped input path on the Bench screen, ctrl+s twice: the daemon went from run 1 to run 3, handed to
    a runner that refused the path each time. The input is checked first, as the runner checks it; the daemon
    runs on, and nothing is written for a benchmark that never starts."""
    controller = await launched_engine(tmp_path)
    try:
        supervisor = controller.supervisor
        assert supervisor is not None and supervisor.running
        pid = supervisor.pid
        missing = str(tmp_path / "nope.json")
        for _ in range(2):
            with pytest.raises(ControllerError, match=r"input file .*nope\.json: no such file \(the daemon was left"):
                await controller.start_bench(BenchRequest("porep", 3, 1, missing))
        not_c1 = tmp_path / "c1.json"
        not_c1.write_text("[1, 2]")
        with pytest.raises(ControllerError, match=r"c1\.json: .*\(the daemon was left as it was\)"):
            await controller.start_bench(BenchRequest("porep", 3, 1, str(not_c1)))
        with pytest.raises(ControllerError, match=r"nope\.json: no such file"):  # a knob search hands it over too
            await controller.start_tune(TuneRequest("porep", 2, 1, 2, "10m", None, missing))
        await controller.poll()
        assert supervisor.running and supervisor.pid == pid
        assert controller.model.daemon.runs == 1 and not controller.bench_running()
        assert not (tmp_path / "session" / "bench-config.toml").exists()
    finally:
        await controller.shutdown(stop_daemon=True)


async def test_a_runner_that_fails_after_the_hand_over_is_said_in_its_own_words(tmp_path: Path) -> None:
    """A C1 the daemon cannot parse passes the checks made before the hand-over (what is inside is the
    daemon's to parse): the runner's proof fails and it exits 1, which the TUI said only as "benchmark
    runner finished (exit 1)". The runner's own error is recorded, from its output, for the Bench screen;
    the daemon comes back; a benchmark the operator cancels is no failure, and its start ends the last one's."""
    controller = await launched_engine(tmp_path)
    model = controller.model
    try:
        c1 = tmp_path / "c1.json"
        c1.write_text("{}")
        await controller.start_bench(BenchRequest("porep", 1, 1, str(c1)))
        await polled_until(controller, lambda: model.bench_failure is not None, "the runner's failure", 120)
        failure = model.bench_failure
        assert failure is not None and (failure.returncode, failure.error) == (1, "1 of 1 proofs failed")
        assert failure.text == "benchmark failed (exit 1): 1 of 1 proofs failed"
        assert model.bench is not None and [r.status for r in model.bench.results] == ["FAILED"]
        supervisor = controller.supervisor
        assert supervisor is not None
        await polled_until(controller, lambda: supervisor.running and model.daemon.runs == 3, "the daemon back", 120)

        await controller.start_bench(BenchRequest("porep", 50, 1))
        await polled_until(controller, lambda: model.bench_failure is None, "the next benchmark's start", 120)
        await controller.cancel_bench()
        await polled_until(controller, lambda: not controller.bench_running(), "the cancelled runner's end", 120)
        await controller.poll()  # the runner reaped
        assert any("benchmark runner finished (exit 1)" in n.text for n in list(model.notices)[-2:])
        assert model.bench_failure is None
    finally:
        await controller.shutdown(stop_daemon=True)


async def test_a_profile_runs_the_engine_as_that_box_inside_a_real_memory_cgroup(tmp_path: Path) -> None:
    from cuzktui.supervisor import engine_program
    from cuzktui.system import read_cgroup_memory

    require_engine()
    memory_cgroup_or_skip()
    config = tmp_path / "cuzk.toml"
    config.write_text(
        engine_config_text(daemon={"listen": f"unix://{tmp_path}/d.sock"}, engine={"mem_total": "256GiB"})
    )
    controller = LiveController(
        LiveOptions(program=engine_program(), config_file=config, session_dir=tmp_path / "s", profile_gib=256)
    )
    try:
        await controller.start()
        deadline = asyncio.get_running_loop().time() + 60
        while controller.model.daemon.phase != "ready":
            assert asyncio.get_running_loop().time() < deadline, "the engine never became ready"
            assert controller.model.daemon.phase != "dead", controller.model.daemon.exit
            await controller.poll()
            await asyncio.sleep(0.05)
        supervisor = controller.supervisor
        assert supervisor is not None and supervisor.cgroup is not None and supervisor.pid is not None
        # The engine's box (its child) holds the model's memory there; the engine stays outside.
        box = supervisor.cgroup.pids()
        children = {p.pid for p in psutil.Process(supervisor.pid).children()}
        assert supervisor.pid not in box and len(box) == 1 and set(box) <= children
        assert read_cgroup_memory(supervisor.cgroup.path).limit_bytes == GiB  # 256 GiB at 1/256
        last_limit = controller.model.cgroup_limit.last()
        assert last_limit is not None
        assert last_limit[1] == 256 * GiB  # shown as the emulated box
        # Its RSS is the box's (the engine's /status, which the tool turned on): the daemon's own
        # process, the model holding nothing yet; not the engine's interpreter × 256 (~10 GiB).
        while (rss := controller.model.rss.last()) is None:
            assert asyncio.get_running_loop().time() < deadline, "no RSS sample"
            await controller.poll()
            await asyncio.sleep(0.05)
        assert rss[1] == pytest.approx(DAEMON_PROCESS_RSS, rel=0.01)
        cgroup_path = supervisor.cgroup.path
    finally:
        await controller.shutdown(stop_daemon=True)
    assert not controller.daemon_running()
    assert not cgroup_path.exists(), "the cgroup is removed with the daemon"


async def test_a_corrupt_config_launches_nothing_and_says_how_to_fix_it(tmp_path: Path) -> None:
    from cuzktui.supervisor import engine_program

    config = tmp_path / "cuzk.toml"
    config.write_text("[pipeline\nmax_parallel_synthesis = 3\n")
    controller = LiveController(LiveOptions(program=engine_program(), config_file=config, session_dir=tmp_path / "s"))
    try:
        with pytest.raises(ControllerError, match=r"cuzk\.toml:1:.*config check"):
            await controller.start()
        await controller.poll()
        # Kept for the dashboard in full, not only raised (a toast vanishes).
        failed = controller.model.daemon.start_error
        assert failed is not None and "config check" in failed.text and "cuzk.toml:1" in failed.text
        assert config.read_text() == "[pipeline\nmax_parallel_synthesis = 3\n", "the file is untouched"
        with pytest.raises(ControllerError, match="no daemon was launched"):
            await controller.apply_config({"pipeline.max_parallel_synthesis": 4})
        assert not controller.daemon_running()
    finally:
        await controller.shutdown(stop_daemon=True)


@pytest.mark.parametrize("how", ["missing", "not-executable", "not-on-path"])
async def test_a_missing_daemon_binary_is_reported_before_anything_else(tmp_path: Path, how: str) -> None:
    binary = tmp_path / "bin" / "cuzk-daemon"
    if how == "not-executable":
        binary.parent.mkdir()
        binary.write_text("#!/bin/sh\n")
    name = "cuzk-daemon-nowhere" if how == "not-on-path" else str(binary)
    config = tmp_path / "cuzk.toml"
    config.write_text("[pipeline\n")  # corrupt as well: the binary is still what is said
    session = tmp_path / "s"
    controller = LiveController(
        LiveOptions(program=DaemonProgram("real", (name,)), config_file=config, session_dir=session)
    )
    expected = {"missing": "does not exist", "not-executable": "not executable", "not-on-path": "not on PATH"}[how]
    with pytest.raises(ControllerError, match=expected):
        await controller.start()
    failed = controller.model.daemon.start_error
    assert failed is not None and name in failed.text and expected in failed.text
    assert "nothing was launched" in failed.text
    assert not session.exists(), "no session, no memcheck, no config notices before the binary is there"
    assert not controller.model.notices
    await controller.shutdown(stop_daemon=True)


async def _until_ready(controller: LiveController) -> None:
    deadline = asyncio.get_running_loop().time() + 60
    while controller.model.daemon.phase != "ready":
        assert asyncio.get_running_loop().time() < deadline, "the daemon never became ready"
        assert controller.model.daemon.phase != "dead", controller.model.daemon.exit
        await controller.poll()
        await asyncio.sleep(0.05)


def _notices(controller: LiveController) -> list[str]:
    return [n.text for n in controller.model.notices]


@pytest.mark.parametrize("config_given", [False, True], ids=["no-config", "missing-config-file"])
async def test_first_run_with_cuzk_daemon_on_path_launches_on_a_private_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_given: bool
) -> None:
    require_engine()
    monkeypatch.setenv("PATH", f"{standin_daemon_on_path(tmp_path / 'bin')}:{os.environ['PATH']}")
    program = choose_program()
    assert program.mode == "real" and program.argv[0] == str(tmp_path / "bin" / "cuzk-daemon")
    config = tmp_path / "cuzk.toml" if config_given else None
    controller = LiveController(LiveOptions(program=program, config_file=config, session_dir=tmp_path / "s"))
    try:
        await controller.start()
        await _until_ready(controller)
        supervisor = controller.supervisor
        assert supervisor is not None and supervisor.listen is not None
        assert supervisor.listen != DAEMON_DEFAULT_LISTEN
        assert (await supervisor.client.get_status()).uptime_seconds >= 0
        # The address is on record in the config written (the file, or the session's version).
        written = config if config is not None else supervisor.config_path
        assert written is not None
        assert ConfigDocument.parse(written.read_text()).get("daemon", "listen") == supervisor.listen
        assert controller.model.daemon.listen == supervisor.listen
        (said,) = [n for n in _notices(controller) if n.startswith("the daemon serves on ")]
        assert said.startswith(f"the daemon serves on {supervisor.listen}, a private socket of this session")
        assert (f"wrote a new config to {config} with it" in said) is config_given
    finally:
        await controller.shutdown(stop_daemon=True)
    assert not controller.daemon_running()


async def test_a_config_without_listen_is_served_on_a_private_socket_and_left_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_engine()
    monkeypatch.setenv("PATH", f"{standin_daemon_on_path(tmp_path / 'bin')}:{os.environ['PATH']}")
    config = tmp_path / "cuzk.toml"
    text = engine_config_text(daemon={"status_listen": ""})
    config.write_text(text)
    controller = LiveController(LiveOptions(program=choose_program(), config_file=config, session_dir=tmp_path / "s"))
    try:
        await controller.start()
        await _until_ready(controller)
        supervisor = controller.supervisor
        assert supervisor is not None and supervisor.listen not in (None, DAEMON_DEFAULT_LISTEN)
        said = [n for n in _notices(controller) if "sets no [daemon].listen" in n]
        assert said and f"launched on {supervisor.listen} instead" in said[0] and DAEMON_DEFAULT_LISTEN in said[0]
    finally:
        await controller.shutdown(stop_daemon=True)
    assert config.read_text() == text


_STARTED = "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true\n"


def _flood_log(path: Path, jobs: int) -> int:
    """A daemon log that grew by ``jobs`` jobs since the last poll, each a stamped line (scheduler.rs
    submit's "job enqueued", a millisecond after the one before) and its TIMELINE line, all of one
    length; that length."""
    lines = [
        f"2026-05-01T07:00:{n // 1000 % 60:02d}.{n % 1000:03d}000Z  INFO cuzk_core::scheduler: job enqueued "
        f"job_id=porep-1000-{n:06d} proof_kind=porep-c2 priority=Normal queue_position=0\n"
        f"TIMELINE,{n:06d},SYNTH_START,porep-1000-{n:06d},partition=0\n"
        for n in range(jobs)
    ]
    path.write_text(_STARTED + "".join(lines), encoding="utf-8")
    return len(lines[0])


async def _attached(tmp_path: Path, log: Path) -> LiveController:
    """A controller attached to ``log`` (no daemon answers), once its attach is in the session's events.jsonl:
    until a record there is read, every log line could still be preceded by one and the live merge holds
    them all back (SessionFollower._holding), which the start's tasks leave to chance on a busy core."""
    target = AttachTarget(f"unix://{tmp_path}/nothing.sock", log_path=str(log))
    controller = LiveController(LiveOptions(program=None, attach=target, session_dir=tmp_path / "s"))
    await controller.start()
    events = tmp_path / "s" / "events.jsonl"
    await until(lambda: events.exists() and b'"DaemonLaunched"' in events.read_bytes(), "the attach recorded")
    return controller


async def test_a_flood_of_log_lines_ends_whole_in_the_model_read_and_folded_a_slice_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every line of a flood reaches the model; between two slices of it the event loop runs other work
    (a key), each slice folds in at most INGEST_SLICE_BYTES of lines, and the log is read hardly further
    than what was folded in (the file is the buffer: memory does not grow with the flood)."""
    slice_bytes = 4096
    monkeypatch.setattr(live_module, "INGEST_SLICE_BYTES", slice_bytes)
    monkeypatch.setattr(live_module, "INGEST_WORK_S", 0.0)  # a pause after every slice
    log = tmp_path / "daemon.log"
    jobs = 600
    length = _flood_log(log, jobs)
    controller = await _attached(tmp_path, log)
    try:
        seen: list[tuple[int, int]] = []  # (jobs in the model, bytes of the log read), each time others ran
        while True:
            poll = asyncio.create_task(controller.poll())
            while not poll.done():
                seen.append((len(controller.model.timeline.jobs()), log.stat().st_size - controller.log_backlog()))
                await asyncio.sleep(0)
            await poll
            if not controller.log_backlog():
                break
        assert len(controller.model.timeline.jobs()) == jobs
        counts = [n for n, _read in seen]
        assert len(set(counts)) > (jobs * length) // slice_bytes  # others ran between every two slices
        assert max(b - a for a, b in itertools.pairwise(counts)) <= slice_bytes // length + 1
        for folded, read in seen:  # read ahead of the model: the job a later line could precede, and a part
            assert read - len(_STARTED) - folded * length < 2 * length
    finally:
        await controller.shutdown(stop_daemon=False)


async def test_falling_behind_a_flood_is_said_and_so_is_catching_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll that cannot read the whole flood leaves the rest on disk (log_backlog says how much) and a
    notice says the reading is behind; the poll that reads the last line says it caught up, and how many
    lines it read meanwhile."""
    slice_bytes = 4096
    monkeypatch.setattr(live_module, "INGEST_SLICE_BYTES", slice_bytes)
    monkeypatch.setattr(live_module, "INGEST_WORK_S", 0.0)
    monkeypatch.setattr(live_module, "POLL_BUDGET_S", 0.0)  # one slice a poll
    monkeypatch.setattr(live_module, "BEHIND_NOTICE_BYTES", 1024)
    log = tmp_path / "daemon.log"
    jobs = 500
    _flood_log(log, jobs)
    controller = await _attached(tmp_path, log)
    try:
        await controller.poll()
        size = log.stat().st_size
        assert controller.log_backlog() == size - slice_bytes
        polls = 1
        while controller.log_backlog():
            await controller.poll()
            polls += 1
        assert polls == -(-size // slice_bytes)
        await controller.poll()  # the notices the last polls recorded in the session
        assert len(controller.model.timeline.jobs()) == jobs
        behind = [n for n in _notices(controller) if n.startswith("the daemon's log grows faster than it is read")]
        caught_up = [n for n in _notices(controller) if n.startswith("caught up with the daemon's log")]
        read_late = 2 * jobs + 1 - log.read_bytes()[:slice_bytes].count(b"\n")
        assert len(behind) == 1 and "no line is skipped" in behind[0]
        assert len(caught_up) == 1 and f" {read_late:,} lines read in " in caught_up[0]
    finally:
        await controller.shutdown(stop_daemon=False)
