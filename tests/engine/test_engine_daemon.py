"""cuzk-engine as a process, against upstream's cuzk-daemon main.rs and engine.rs: monolithic mode's
lines and startup order, signals, a waiter's deadline over the wire, and where it may listen."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from cuzktui import daemon_messages as msg
from cuzktui.proofinputs import parse_c1_wrapper
from cuzktui.proto import proving_pb2 as pb
from cuzktui.proto import proving_pb2_grpc
from tests.conftest import small_c1
from tests.engine.engine_harness import ANSI, engine_command, porep_request, write_config

MONO = {"pipeline": {"enabled": False}}


def test_monolithic_mode_logs_upstreams_lines_in_upstreams_order(engine_factory: Any) -> None:
    engine = engine_factory(MONO, status=True)
    stub = engine.stub()
    assert stub.Prove(pb.ProveRequest(submit=porep_request("mono-1")), timeout=30).result.status == 1
    failed = stub.Prove(pb.ProveRequest(submit=porep_request("mono-bad", payload=b"")), timeout=30).result
    assert failed.status == pb.AwaitProofResponse.FAILED
    log = engine.wait_for_line(msg.STATUS_HTTP_LISTENING)
    order = [msg.ENGINE_STARTED, msg.LISTENING_TCP, msg.READY_PREFIX, msg.MONO_WORKER_STARTED]
    positions = [log.index(text) for text in order]
    assert positions == sorted(positions)
    assert log.index(msg.STATUS_HTTP_LISTENING) > log.index(msg.READY_PREFIX)

    span = "monolithic_worker{worker_id=0 gpu=0 job_id=mono-1 proof_kind=porep-c2}"
    assert f"INFO {span}: cuzk_core::engine: {msg.PROCESSING_MONOLITHIC}\n" in log
    # prover.rs runs on a blocking thread: its lines carry its own span only.
    prover = 'INFO prove_porep_c2{job_id="mono-1"}: cuzk_core::prover: '
    wrapper = parse_c1_wrapper(small_c1())
    wrapper_fields = f"sector_num=1 sector_size={wrapper.sector_size} phase1_out_b64_len={len(wrapper.phase1_out)}"
    assert f"{prover}{msg.PARSED_C1_WRAPPER} {wrapper_fields}\n" in log
    assert f"{prover}{msg.CALLING_SEAL_COMMIT_PHASE2} sector_id=1 miner_id=1000\n" in log
    assert re.search(rf"{re.escape(prover + msg.POREP_C2_PROOF_COMPLETED)} proof_len=1920 deser_ms=0 prove_ms=\d+", log)
    assert re.search(
        rf"INFO {re.escape(span)}: cuzk_core::engine: {re.escape(msg.PROOF_COMPLETED_MONOLITHIC)} proof_len=1920 "
        r"total_ms=\d+ queue_ms=\d+ deser_ms=0 prove_ms=\d+\n",
        log,
    )
    bad = "monolithic_worker{worker_id=0 gpu=0 job_id=mono-bad proof_kind=porep-c2}"
    assert f"ERROR {bad}: cuzk_core::engine: {msg.PROOF_FAILED} error={failed.error_message}\n" in log
    # No pipeline: no TIMELINE, and nothing on /status.
    assert "TIMELINE," not in engine.stderr()

    # SIGINT: the worker's shutdown lines, and the process goes on answering.
    engine.proc.send_signal(signal.SIGINT)
    log = engine.wait_for_line(f"{msg.MONO_WORKER_STOPPED} worker_id=0")
    assert f"INFO cuzk_core::engine: {msg.MONO_WORKER_SHUTDOWN} worker_id=0\n" in log
    assert stub.GetStatus(pb.GetStatusRequest(), timeout=5).total_proofs_completed == 1
    assert engine.proc.poll() is None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_end_the_process_at_once_without_a_line(engine_factory: Any, signum: int) -> None:
    # Like the daemon (main.rs handles SIGINT alone), the engine keeps the disposition it inherits: under
    # `nohup` or a shell's background job SIGHUP arrives ignored. A service manager starts it with the
    # default one, which this test is about, whoever started the suite.
    inherited = signal.signal(signum, signal.SIG_DFL)
    try:
        engine = engine_factory()
    finally:
        signal.signal(signum, inherited)
    engine.stub().GetStatus(pb.GetStatusRequest(), timeout=5)
    before = engine.stdout()
    engine.proc.send_signal(signum)
    assert engine.proc.wait(timeout=10) == -signum  # a shell reports 128 + signum: 143, 129
    assert engine.stdout() == before


def test_a_waiters_deadline_leaves_the_job_for_the_next_waiter(engine_factory: Any) -> None:
    # Curio's client: a Prove abandoned at its deadline, then the same job awaited again.
    engine = engine_factory({"engine": {"time_scale": 0.05}})
    stub = engine.stub()
    with pytest.raises(grpc.RpcError) as abandoned:
        stub.Prove(pb.ProveRequest(submit=porep_request("porep-1000-5")), timeout=0.2)
    assert abandoned.value.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
    done = stub.AwaitProof(pb.AwaitProofRequest(job_id="porep-1000-5"), timeout=60)
    assert done.status == pb.AwaitProofResponse.COMPLETED and len(done.proof) == 10 * 192


# Issue 16 point 11: never where a production Curio looks for its prover ---------------------------


def _run(tmp_path: Path, config_text: str, *args: str) -> subprocess.Popen[bytes]:
    config = tmp_path / "cuzk.toml"
    config.write_text(config_text)
    env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"}
    env.update({"NO_COLOR": "1", "XDG_RUNTIME_DIR": str(tmp_path)})
    out = (tmp_path / "stdout.log").open("wb")
    try:
        return subprocess.Popen(
            engine_command("-c", str(config), *args),
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
    finally:
        out.close()


def _wait_for(path: Path, needle: str, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        text = ANSI.sub("", path.read_text())
        if needle in text:
            return text
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError(f"{needle!r} not logged; rc={proc.poll()}")


def test_without_a_listen_address_it_serves_on_a_private_socket_it_prints(tmp_path: Path) -> None:
    proc = _run(tmp_path, "[engine]\ntime_scale = 0.0005\n")
    try:
        log = _wait_for(tmp_path / "stdout.log", msg.READY_PREFIX, proc)
        match = re.search(r"serving on a private socket.* listen=unix://(\S+)", log)
        assert match, log
        socket_path = Path(match.group(1))
        assert socket_path.parent.parent == tmp_path and socket_path.parent.stat().st_mode & 0o777 == 0o700
        assert f"{msg.CONFIGURATION_LOADED} listen=unix://{socket_path}" in log
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            stub = proving_pb2_grpc.ProvingEngineStub(channel)
            assert stub.GetStatus(pb.GetStatusRequest(), timeout=10).total_proofs_completed == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)


@pytest.mark.parametrize("where", ["config", "flag"])
def test_the_production_socket_needs_an_explicit_opt_in(tmp_path: Path, where: str) -> None:
    production = "unix:///run/curio/cuzk.sock"
    text = f'[daemon]\nlisten = "{production}"\n' if where == "config" else ""
    proc = _run(tmp_path, text, *(["-l", production] if where == "flag" else []))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.decode().startswith(f"Error: refusing to listen on {production}\n\nCaused by:\n")
    assert "--allow-production-socket" in err.decode()
    assert msg.READY_PREFIX not in (tmp_path / "stdout.log").read_text()


def test_tcp_port_9820_gets_a_warning(tmp_path: Path) -> None:
    write_config(tmp_path / "cuzk.toml", {"daemon": {"listen": "127.0.0.1:9820"}})
    proc = _run(tmp_path, (tmp_path / "cuzk.toml").read_text())
    try:
        log = _wait_for(tmp_path / "stdout.log", msg.LISTENING_TCP, proc)
        assert re.search(r"WARN cuzk_daemon: cuzk-engine: port 9820 is where Curio's docs put the real daemon.*", log)
        assert log.index("port 9820") < log.index(msg.LISTENING_TCP)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
