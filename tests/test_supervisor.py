"""The supervisor: exit diagnosis, and the daemon lifecycle against cuzk-engine."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from cuzktui import events as ev
from cuzktui.bench import build_requests
from cuzktui.client import fetch_status_json
from cuzktui.session import SessionWriter, iter_session_events
from cuzktui.supervisor import (
    HANDED_TO_BENCHMARK,
    DaemonStartError,
    Supervisor,
    classify_exit,
    engine_program,
    extract_error_report,
    free_loopback_port,
)
from cuzktui.system import MemoryCgroup, read_cgroup_memory
from tests.conftest import engine_config_text, kernel_log_or_skip, memory_cgroup_or_skip, require_engine
from tests.engine.engine_harness import winning_request

FATAL = 'Error: failed to load config from "/x/cuzk.toml"\n\nCaused by:\n    TOML parse error at line 1, column 10\n'
GiB = 1 << 30


# -- diagnosis ---------------------------------------------------------------------------------


def test_sigkill_with_the_cgroup_oom_counter_up_is_an_oom_kill() -> None:
    exit = classify_exit(
        t=1.0, pid=5, returncode=-9, oom_kills_before=0, oom_kills_after=1, cgroup_path="/sys/fs/cgroup/memory/g"
    )
    assert (exit.cause, exit.signal) == ("oom_kill", 9)
    assert "memory cgroup oom_kill 0 → 1 (/sys/fs/cgroup/memory/g)" in exit.evidence


def test_a_signal_nobody_here_sent_without_oom_evidence_is_a_plain_signal() -> None:
    exit = classify_exit(t=1.0, pid=5, returncode=-11, oom_kills_before=0, oom_kills_after=0, cgroup_path="/g")
    assert (exit.cause, exit.signal) == ("signal", 11)
    assert exit.evidence[0] == "killed by SIGSEGV (exit status 139 in a shell)"


def test_sigkill_sent_by_the_supervisor_without_oom_evidence_is_a_stop() -> None:
    exit = classify_exit(
        t=1.0, pid=5, returncode=-9, oom_kills_before=2, oom_kills_after=2, cgroup_path="/g", sent_signals=[9]
    )
    assert (exit.cause, exit.signal) == ("stopped", 9)
    assert "SIGKILL was sent by the supervisor" in exit.evidence
    assert any("unchanged" in e for e in exit.evidence)


def test_the_kernel_log_alone_can_prove_an_oom_kill() -> None:
    line = "Out of memory: Killed process 5 (cuzk-daemon) total-vm:1kB"
    exit = classify_exit(t=1.0, pid=5, returncode=-9, kernel_evidence=line)
    assert exit.cause == "oom_kill"
    assert line in exit.evidence


def test_a_non_zero_exit_carries_its_error_report() -> None:
    exit = classify_exit(t=1.0, pid=5, returncode=1, log_tail="INFO something\n" + FATAL)
    assert exit.cause == "error"
    assert exit.error_report == FATAL.strip()
    assert exit.evidence == ("exit status 1", 'Error: failed to load config from "/x/cuzk.toml"')


def test_clean_and_unknown_exits() -> None:
    assert classify_exit(t=1.0, pid=5, returncode=0).cause == "clean"
    assert classify_exit(t=1.0, pid=None, returncode=None).cause == "unknown"


def test_the_last_report_wins_and_panics_count() -> None:
    tail = FATAL + "later\nthread 'main' panicked at src/main.rs:1:1:\nboom\n"
    assert extract_error_report(tail) == "thread 'main' panicked at src/main.rs:1:1:\nboom"
    assert extract_error_report("all fine\n") is None


# -- lifecycle against the engine ------------------------------------------------------------


@pytest.fixture
async def supervised(tmp_path: Path) -> AsyncIterator[tuple[Supervisor, list[ev.ObservedEvent]]]:
    require_engine()
    session = SessionWriter(tmp_path / "session")
    seen: list[ev.ObservedEvent] = []
    supervisor = Supervisor(
        session, engine_program(), listen=f"unix://{tmp_path}/d.sock", on_event=seen.append, start_timeout=60
    )
    try:
        yield supervisor, seen
    finally:
        await supervisor.close(stop=True)
        session.close()


def _config(**pipeline: Any) -> str:
    return engine_config_text(memory={"total_budget": "256GiB"}, pipeline=pipeline)


def _pipelines(session: SessionWriter) -> list[int | None]:
    return [e.synth_worker_count for e in iter_session_events(session.path) if isinstance(e, ev.PipelineConfigured)]


async def test_start_is_ready_when_getstatus_answers_and_every_step_is_recorded(
    supervised: tuple[Supervisor, list[ev.ObservedEvent]],
) -> None:
    supervisor, seen = supervised
    ready = await supervisor.start(_config(max_parallel_synthesis=3))
    assert ready.pid == supervisor.pid
    status = await supervisor.client.get_status()
    assert status.uptime_seconds >= 0
    assert [type(e) for e in seen] == [ev.DaemonLaunched, ev.DaemonReadyObserved, ev.ConfigApplied]
    launched = seen[0]
    assert isinstance(launched, ev.DaemonLaunched)
    assert launched.mode == "engine" and launched.config_path == str(supervisor.session.config_versions()[0])
    recorded = [e for e in iter_session_events(supervisor.session.path) if isinstance(e, type(seen[0]))]
    assert recorded == [launched]
    assert stat.S_IMODE(supervisor.session.daemon_log_path.stat().st_mode) == 0o600
    assert any(isinstance(e, ev.DaemonStarting) for e in iter_session_events(supervisor.session.path))


async def test_an_inherited_rust_log_that_hides_info_is_overridden_and_said(tmp_path: Path) -> None:
    require_engine()
    session = SessionWriter(tmp_path / "session")
    seen: list[ev.ObservedEvent] = []
    env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"} | {"RUST_LOG": "warn"}
    supervisor = Supervisor(
        session, engine_program(), listen=f"unix://{tmp_path}/d.sock", on_event=seen.append, start_timeout=60, env=env
    )
    try:
        await supervisor.start(_config())
    finally:
        await supervisor.close(stop=True)
        session.close()
    (notice,) = [e for e in seen if isinstance(e, ev.Notice)]
    assert notice.level == "warning" and "RUST_LOG='warn'" in notice.text
    # The INFO lines the dashboard reads were written: RUST_LOG=warn would have hidden them.
    assert _pipelines(session) != []


async def test_sigterm_stop_is_classified_as_stopped_by_that_signal(
    supervised: tuple[Supervisor, list[ev.ObservedEvent]],
) -> None:
    supervisor, seen = supervised
    await supervisor.start(_config())
    # A stop that hands the daemon over says so (issue 27 point 10): a planned step, not a death.
    handed = await supervisor.stop(handover=HANDED_TO_BENCHMARK)
    assert (handed.cause, handed.handover) == ("stopped", HANDED_TO_BENCHMARK)
    await supervisor.start(_config())
    exit = await supervisor.stop()
    assert (exit.cause, exit.signal) == ("stopped", signal.SIGTERM)
    assert "SIGTERM was sent by the supervisor" in exit.evidence
    assert seen[-1] == exit
    assert not supervisor.running and exit.handover is None  # the next run's plain stop is none


async def test_restart_applies_a_changed_knob(supervised: tuple[Supervisor, list[ev.ObservedEvent]]) -> None:
    supervisor, seen = supervised
    await supervisor.start(_config(max_parallel_synthesis=3))
    await supervisor.restart(_config(max_parallel_synthesis=5), changes=("pipeline.max_parallel_synthesis 3 → 5",))
    assert _pipelines(supervisor.session) == [3, 5]
    applied = [e for e in seen if isinstance(e, ev.ConfigApplied)]
    assert [a.version for a in applied] == [1, 2]
    assert applied[1].changes == ("pipeline.max_parallel_synthesis 3 → 5",)
    assert "max_parallel_synthesis = 5" in Path(applied[1].path).read_text()
    # One stop, planned: it names the version it restarts to apply (the dashboard says RESTARTING, not DEAD).
    (stopped,) = [e for e in seen if isinstance(e, ev.DaemonExited)]
    assert (stopped.cause, stopped.handover) == ("stopped", "restarting to apply config v2")


async def test_drain_waits_for_work_in_flight(supervised: tuple[Supervisor, list[ev.ObservedEvent]]) -> None:
    supervisor, _ = supervised
    port = free_loopback_port()
    config = engine_config_text(memory={"total_budget": "256GiB"}, daemon={"status_listen": f"127.0.0.1:{port}"})
    await supervisor.start(config)
    await supervisor.drain(timeout=10)  # idle daemon: returns at once
    request = winning_request("winpost-1000-0001020304050607")
    await supervisor.client.submit_proof(request)
    await supervisor.drain(timeout=60)
    document = await fetch_status_json(f"127.0.0.1:{port}")
    assert document is not None
    status = await supervisor.client.get_status()
    assert status.total_proofs_completed + status.total_proofs_failed == 1


async def test_a_bad_config_is_an_error_exit_with_its_report(
    supervised: tuple[Supervisor, list[ev.ObservedEvent]],
) -> None:
    supervisor, seen = supervised
    with pytest.raises(DaemonStartError) as caught:
        await supervisor.start("[pipeline\nmax_parallel_synthesis = 3\n")
    exit = caught.value.exit
    assert exit is not None and exit.cause == "error" and exit.returncode == 1
    assert exit.error_report is not None and exit.error_report.startswith("Error: failed to load config")
    assert "Caused by:" in exit.error_report
    assert seen[-1] == exit
    assert not any(isinstance(e, ev.ConfigApplied) for e in seen)


async def _oom_killed_engine(tmp_path: Path) -> tuple[Supervisor, ev.DaemonExited]:
    """An engine OOM-killed in a 1 GiB memory cgroup (closed: its cgroup removed), and its exit's diagnosis."""
    session = SessionWriter(tmp_path / "session")
    supervisor = Supervisor(
        session, engine_program(), listen=f"unix://{tmp_path}/d.sock", memory_limit=1 * GiB, start_timeout=60
    )
    # A 256 GiB container on a 512 GiB host: "auto" budgets the host's RAM, as the daemon does.
    config = engine_config_text(
        engine={"mem_total": "512GiB"},
        memory={"total_budget": "auto"},
        pipeline={"max_parallel_synthesis": 18},
    )
    try:
        await supervisor.start(config)
        client = supervisor.client
        requests = build_requests("porep", 4, input_path=None, bench_id="oom")
        jobs = [asyncio.ensure_future(client.prove(r, timeout=120)) for r in requests]
        exit = await asyncio.wait_for(supervisor.exited(), timeout=120)
        await asyncio.gather(*jobs, return_exceptions=True)
    finally:
        await supervisor.close(stop=True)
        session.close()
    return supervisor, exit


async def test_oom_kill_in_a_memory_cgroup_is_diagnosed(tmp_path: Path) -> None:
    require_engine()
    memory_cgroup_or_skip()
    supervisor, exit = await _oom_killed_engine(tmp_path)
    assert (exit.cause, exit.signal) == ("oom_kill", signal.SIGKILL)
    assert any("oom_kill 0 → 1" in e for e in exit.evidence), exit.evidence
    assert supervisor.cgroup is None  # removed at close


async def test_the_kernels_word_on_an_engines_oom_kill_names_its_box(tmp_path: Path) -> None:
    """The kernel kills the engine's box (the one process in its cgroup, engine/box.py), and the engine then
    kills itself: the kernel's lines name the box's pid, which the engine logs, not the engine's."""
    require_engine()
    memory_cgroup_or_skip()
    kernel_log_or_skip()
    supervisor, exit = await _oom_killed_engine(tmp_path)
    logged = re.search(r"held in its own cgroup .*\bbox_pid=(\d+)", supervisor.session.daemon_log_path.read_text())
    assert logged is not None
    box = int(logged[1])
    assert box != exit.pid and exit.cause == "oom_kill"
    assert any(f"Killed process {box} (" in e for e in exit.evidence), exit.evidence
    assert not any(f"Killed process {exit.pid} " in e for e in exit.evidence), "the engine killed itself"


async def test_an_attached_engines_box_oom_kill_is_found_in_the_kernels_log(tmp_path: Path, start_engine: Any) -> None:
    """Attached to (started by someone else, in a cgroup the tool did not make), the engine's /status names
    its box process: when the kernel OOM-kills the box, and the engine then kills itself, the exit is an OOM
    kill on the kernel's word about the box, as for an engine the tool launched."""
    memory_cgroup_or_skip()
    kernel_log_or_skip()
    cgroup = MemoryCgroup.create(f"cuzk-tui-attached-box-{os.getpid()}", GiB)
    status = f"127.0.0.1:{free_loopback_port()}"
    supervisor = Supervisor(SessionWriter(tmp_path / "session"), None)
    try:
        config = engine_config_text(
            engine={"mem_total": "512GiB"},
            memory={"total_budget": "auto"},
            pipeline={"max_parallel_synthesis": 18},
            daemon={"status_listen": status},
        )
        engine = await start_engine(config, args=("--box-cgroup", str(cgroup.path)))
        await supervisor.attach(engine.address, status_url=status)
        assert supervisor.pid == engine.proc.pid
        requests = build_requests("porep", 4, input_path=None, bench_id="oom")
        jobs = [asyncio.ensure_future(supervisor.client.prove(r, timeout=120)) for r in requests]
        exit = await asyncio.wait_for(supervisor.exited(), timeout=120)
        await asyncio.gather(*jobs, return_exceptions=True)
    finally:
        await supervisor.close(stop=False)
        supervisor.session.close()
        cgroup.remove()
    logged = re.search(r"held in its own cgroup .*\bbox_pid=(\d+)", engine.log_path.read_text())
    assert logged is not None
    assert exit.cause == "oom_kill" and exit.pid == engine.proc.pid != int(logged[1])
    assert any(f"Killed process {logged[1]} (" in e for e in exit.evidence), exit.evidence


def test_free_loopback_ports_stay_out_of_the_kernels_ephemeral_range() -> None:
    """Outgoing connections take ephemeral ports: a port handed to a daemon must not be one of them."""
    low, _high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    rng = random.Random(7)
    ports = {free_loopback_port(rng=rng) for _ in range(50)}
    assert all(1024 <= port < low for port in ports)
    assert len(ports) > 40  # spread, so two test processes rarely try the same one


async def test_only_an_engines_box_goes_into_its_memory_cgroup(tmp_path: Path) -> None:
    """The engine and the inputs it receives stay outside the cgroup; its box process holds the
    model's memory inside it (engine/box.py), so the limit is the box's RAM, whoever the client."""
    require_engine()
    memory_cgroup_or_skip()
    session = SessionWriter(tmp_path / "session")
    supervisor = Supervisor(
        session, engine_program(), listen=f"unix://{tmp_path}/d.sock", memory_limit=1 * GiB, start_timeout=60
    )
    try:
        await supervisor.start(engine_config_text(memory={"total_budget": "200GiB"}))
        assert supervisor.cgroup is not None and supervisor.pid is not None
        assert read_cgroup_memory(supervisor.cgroup.path).limit_bytes == GiB
        inside = [int(pid) for pid in (supervisor.cgroup.path / "cgroup.procs").read_text().split()]
        assert supervisor.pid not in inside
        assert [p.pid for p in psutil.Process(supervisor.pid).children() if p.pid in inside] == inside != []
    finally:
        await supervisor.close(stop=True)
        session.close()
    events = list(iter_session_events(session.path))
    launched = next(e for e in events if isinstance(e, ev.DaemonLaunched))
    assert launched.memory_limit_bytes == GiB and "--box-cgroup" in launched.command
    meta = json.loads(session.meta_path.read_text())
    assert meta["cgroup"] == {"path": launched.cgroup_path, "limit_bytes": GiB}
