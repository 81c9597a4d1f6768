"""The gRPC client's error translation and the /status poller, against small real servers."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cuzktui.client import (
    DaemonCallError,
    DaemonClient,
    DaemonDied,
    DaemonUnreachable,
    StatusError,
    engine_box_pid,
    engine_memory_scale,
    engine_rss_bytes,
    engine_time_scale,
    fetch_status_json,
    grpc_target,
    poll_status,
    snapshot_from_status,
)
from cuzktui.proto import proving_pb2 as pb
from cuzktui.units import GiB


async def test_calls_reach_the_daemon_and_large_messages_pass(fake_daemon: tuple[str, object]) -> None:
    address, _ = fake_daemon
    async with DaemonClient(address) as client:
        status = await client.get_status()
        assert status.total_proofs_completed == 1  # the fake counts the GetStatus calls it answered
        # Bigger than grpc's 4 MiB default: a PoRep C1 input is ~51-68 MB.
        big = pb.SubmitProofRequest(request_id="big", proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=bytes(70 << 20))
        result = await client.prove(big, timeout=60)
        assert result.status == pb.AwaitProofResponse.COMPLETED
        assert result.total_ms == 70 << 20


async def test_a_grpc_error_becomes_a_call_error_with_its_code(fake_daemon: tuple[str, object]) -> None:
    address, _ = fake_daemon
    async with DaemonClient(address) as client:
        with pytest.raises(DaemonCallError) as caught:
            await client.await_proof("porep-1000-1", timeout=10)
    assert caught.value.code == "NOT_FOUND"
    assert caught.value.message == "job not found: porep-1000-1"
    assert caught.value.rpc == "AwaitProof"


async def test_a_daemon_killed_under_a_call_is_reported_as_died(
    fake_daemon: tuple[str, subprocess.Popen[bytes]],
) -> None:
    address, proc = fake_daemon
    async with DaemonClient(address) as client:
        await client.get_status()
        call = asyncio.ensure_future(
            client.prove(pb.SubmitProofRequest(request_id="hang", proof_kind=pb.POREP_SEAL_COMMIT), timeout=30)
        )
        # The call is in flight once the daemon could have answered a later one.
        await client.get_status()
        proc.send_signal(signal.SIGKILL)
        with pytest.raises(DaemonDied) as caught:
            await call
    assert str(caught.value) == "the daemon died during Prove — see exit diagnosis"
    assert caught.value.rpc == "Prove"
    assert "UNAVAILABLE" in caught.value.status_text


async def test_nothing_listening_is_unreachable(tmp_path: Path) -> None:
    async with DaemonClient(f"unix://{tmp_path}/none.sock") as client:
        with pytest.raises(DaemonUnreachable):
            await client.get_status(timeout=5)


def test_grpc_target_accepts_the_daemon_address_forms() -> None:
    assert grpc_target("127.0.0.1:9820") == "127.0.0.1:9820"
    assert grpc_target("http://127.0.0.1:9820") == "127.0.0.1:9820"
    assert grpc_target("unix:///run/curio/cuzk.sock") == "unix:///run/curio/cuzk.sock"


# The constructed example of docs/daemon-interface.md §5.
STATUS_EXAMPLE = {
    "uptime_secs": 312.55170412,
    "memory": {"total_bytes": 262758924288, "used_bytes": 103079215104, "available_bytes": 159679709184},
    "synthesis": {"max_concurrent": 27, "active": 3},
    "pipelines": [
        {
            "job_id": "porep-1000-17",
            "proof_kind": "porep-c2",
            "started_secs_ago": 61.0,
            "total_partitions": 10,
            "partitions_done": 2,
            "partitions": [
                {"index": 0, "state": "done", "synth_ms": 40211, "gpu_ms": 3702},
                {"index": 1, "state": "gpu", "synth_ms": 40390, "gpu_ms": 1210},
                {"index": 2, "state": "synth_done", "synth_ms": 41002, "gpu_ms": None},
                {"index": 3, "state": "synthesizing", "synth_ms": 20113, "gpu_ms": None},
            ],
        }
    ],
    "gpu_workers": [
        {"worker_id": 0, "gpu_ordinal": 0, "state": "proving", "current_job": "porep-1000-17",
         "current_partition": 1, "busy_secs": 1.2},
        {"worker_id": 1, "gpu_ordinal": 0, "state": "idle", "current_job": None, "current_partition": None,
         "busy_secs": None},
    ],
    "allocations": {"srs": [], "pce": []},
    "counters": {"total_completed": 5, "total_failed": 1, "completed_by_kind": {}, "failed_by_kind": {},
                 "queue_depth": 0},
    "buffers": {"synth_in_flight": 3, "provers_in_flight": 1, "aux_in_flight": 4, "shells_in_flight": 3,
                "pending_handles": 1},
}  # fmt: skip


def test_a_status_document_becomes_a_snapshot() -> None:
    snap = snapshot_from_status(STATUS_EXAMPLE, t=100.0)
    assert (snap.budget_total_bytes, snap.budget_used_bytes) == (262758924288, 103079215104)
    assert snap.synthesizing == 3
    assert (snap.gpu_workers_busy, snap.gpu_workers_total) == (1, 2)
    assert snap.partitions_waiting_gpu == 1
    assert (snap.status_json_completed, snap.status_json_failed) == (5, 1)
    assert snap.uptime_secs == pytest.approx(312.55170412)


def test_an_engines_box_rss_is_read_in_real_bytes_the_daemons_has_none() -> None:
    assert engine_rss_bytes(STATUS_EXAMPLE) is None  # upstream's document
    box = {"ram_bytes": 256 * GiB, "gpus": 1, "memory_scale": 1 / 256, "rss_bytes": 70 * GiB}
    assert (
        engine_rss_bytes({**STATUS_EXAMPLE, "emulated_box": box}) == 70 * GiB // 256
    )  # the model divides by the scale
    assert engine_rss_bytes({**STATUS_EXAMPLE, "emulated_box": {"rss_bytes": "?"}}) is None


def test_an_engine_says_its_scales_the_daemon_and_a_malformed_box_say_none() -> None:
    assert engine_memory_scale(STATUS_EXAMPLE) is None  # upstream's document: a real daemon
    assert engine_time_scale(STATUS_EXAMPLE) is None
    box = {"ram_bytes": 256 * GiB, "gpus": 1, "memory_scale": 1 / 256, "time_scale": 0.02, "rss_bytes": 70 * GiB}
    assert engine_memory_scale({**STATUS_EXAMPLE, "emulated_box": box}) == 1 / 256
    assert engine_time_scale({**STATUS_EXAMPLE, "emulated_box": box}) == 0.02
    for scale in (0, -1, "nan", "inf", None, "?"):
        malformed = {**box, "memory_scale": scale, "time_scale": scale}
        assert engine_memory_scale({**STATUS_EXAMPLE, "emulated_box": malformed}) is None, scale
        assert engine_time_scale({**STATUS_EXAMPLE, "emulated_box": malformed}) is None, scale
        assert engine_rss_bytes({**STATUS_EXAMPLE, "emulated_box": malformed}) is None, scale


def test_an_engine_names_its_box_process_when_it_has_one() -> None:
    box = {"ram_bytes": 256 * GiB, "gpus": 1, "memory_scale": 1 / 256, "time_scale": 0.02, "rss_bytes": 0}
    assert engine_box_pid({**STATUS_EXAMPLE, "emulated_box": {**box, "box_pid": 4242}}) == 4242
    assert engine_box_pid({**STATUS_EXAMPLE, "emulated_box": {**box, "box_pid": None}}) is None  # no --box-cgroup
    assert engine_box_pid(STATUS_EXAMPLE) is None  # upstream's document
    for junk in (0, -1, True, "4242", 4.5):
        assert engine_box_pid({**STATUS_EXAMPLE, "emulated_box": {**box, "box_pid": junk}}) is None, junk


def test_a_document_missing_a_field_names_it() -> None:
    broken = {k: v for k, v in STATUS_EXAMPLE.items() if k != "counters"}
    with pytest.raises(StatusError, match="counters"):
        snapshot_from_status(broken, t=0.0)


async def _http_server(body: bytes, status: str) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await reader.readline()
        answer = body if first.startswith(b"GET /status") else b"404 Not Found\n"
        code = status if first.startswith(b"GET /status") else "404 Not Found"
        writer.write(f"HTTP/1.1 {code}\r\nContent-Length: {len(answer)}\r\nConnection: close\r\n\r\n".encode())
        writer.write(answer)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.fixture
async def status_server() -> AsyncIterator[str]:
    server = await _http_server(json.dumps(STATUS_EXAMPLE, separators=(",", ":")).encode(), "200 OK")
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_the_status_poller_reads_the_endpoint(status_server: str) -> None:
    snap = await poll_status(status_server)
    assert snap is not None
    assert snap.partitions_waiting_gpu == 1
    again = await poll_status(f"http://{status_server}/status")
    assert again is not None
    assert dataclasses.replace(again, t=snap.t) == snap


async def test_connection_refused_is_none_not_an_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    assert await poll_status(f"127.0.0.1:{port}") is None


async def test_an_answer_that_is_not_the_status_json_is_an_error() -> None:
    server = await _http_server(b"<html>", "200 OK")
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(StatusError, match="not JSON"):
            await fetch_status_json(f"127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()
