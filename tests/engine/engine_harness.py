"""Helpers to run `cuzk-engine` as a subprocess with a config written for the test (no shell), and for
in-process engines (requests, polling waits, shared scenes)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from cuzktui.daemon_facts import ProofKind
from cuzktui.logfilter import EnvFilter
from cuzktui.proto import proving_pb2 as pb
from cuzktui.proto import proving_pb2_grpc
from cuzktui.supervisor import free_loopback_port
from engine.jobs import JobResult, ProofRequest
from engine.pipeline import Engine
from engine.tracing import Logger
from tests.conftest import post_vanilla, small_c1

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Fast and small: 29 s of synthesis becomes ~15 ms, 20 GiB of partition memory 320 KiB.
FAST = {"time_scale": 0.0005, "memory_scale": 1 / 65536}
READY_TIMEOUT_S = 15.0


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    lines = []
    for section, keys in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {toml_value(value)}" for key, value in keys.items())
    path.write_text("\n".join(lines) + "\n")
    return path


def engine_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *args]


@dataclass
class RunningEngine:
    proc: subprocess.Popen[bytes]
    target: str  # gRPC target
    stdout_path: Path
    stderr_path: Path
    status_port: int | None = None
    channels: list[grpc.Channel] = field(default_factory=list)

    def stub(self) -> Any:
        channel = grpc.insecure_channel(
            self.target,
            options=[("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20)],
        )
        self.channels.append(channel)
        return proving_pb2_grpc.ProvingEngineStub(channel)

    def stdout(self) -> str:
        return ANSI.sub("", self.stdout_path.read_text())

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_for_line(self, needle: str, timeout: float = 10.0, stream: str = "stdout") -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stdout() if stream == "stdout" else self.stderr()
            if needle in text:
                return text
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"{needle!r} not seen on {stream} within {timeout}s; rc={self.proc.poll()}")

    def stop(self) -> None:
        for channel in self.channels:
            channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_engine(
    tmp_path: Path,
    sections: dict[str, dict[str, Any]],
    *,
    unix: bool = False,
    status: bool = False,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
) -> RunningEngine:
    sections = {k: dict(v) for k, v in sections.items()}
    engine_keys = sections.setdefault("engine", {})
    for key, value in FAST.items():
        engine_keys.setdefault(key, value)
    if unix:
        sock = tmp_path / "sock" / "cuzk.sock"
        listen = f"unix://{sock}"
        target = f"unix://{sock}"
    else:
        listen = f"127.0.0.1:{free_loopback_port()}"
        target = listen
    daemon = sections.setdefault("daemon", {})
    daemon["listen"] = listen
    status_port = None
    if status:
        status_port = free_loopback_port()
        daemon["status_listen"] = f"127.0.0.1:{status_port}"
    config = write_config(tmp_path / "cuzk.toml", sections)
    full_env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"}
    full_env.update({"NO_COLOR": "1", **(env or {})})
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            engine_command("-c", str(config), *(args or [])),
            stdout=stdout,
            stderr=stderr,
            env=full_env,
            cwd=Path(__file__).resolve().parents[2],
        )
    running = RunningEngine(proc, target, out, err, status_port)
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=READY_TIMEOUT_S)
    except grpc.FutureTimeoutError:
        running.stop()
        raise AssertionError(f"engine did not serve; stderr:\n{running.stderr()}") from None
    finally:
        channel.close()
    return running


class Captured:
    """A Logger writing plain INFO lines into a file the test reads back (in-process engines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.log = Logger(EnvFilter.parse("info", lossy=False), colour=False, out_fd=self.fd, err_fd=self.fd)

    def close(self) -> None:
        os.close(self.fd)

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines()

    def messages(self, needle: str) -> list[str]:
        return [line for line in self.lines() if needle in line]


def porep_request(request_id: str, payload: bytes | None = None) -> pb.SubmitProofRequest:
    return pb.SubmitProofRequest(
        request_id=request_id,
        proof_kind=pb.POREP_SEAL_COMMIT,
        sector_size=34359738368,
        vanilla_proof=small_c1() if payload is None else payload,
        sector_number=1,
        miner_id=1000,
    )


def winning_request(request_id: str) -> pb.SubmitProofRequest:
    """A WinningPoSt request with zero randomness (a BLS12-381 scalar, so upstream accepts it)."""
    return pb.SubmitProofRequest(
        request_id=request_id, proof_kind=pb.WINNING_POST, vanilla_proofs=post_vanilla(), randomness=bytes(32)
    )


Factory = Callable[..., Awaitable[Engine]]


def porep(request_id: str) -> ProofRequest:
    return ProofRequest(
        request_id, ProofKind.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), miner_id=1000, sector_number=1
    )


def post(request_id: str, kind: ProofKind = ProofKind.WINNING_POST) -> ProofRequest:
    return ProofRequest(request_id, kind, vanilla_proofs=post_vanilla(), randomness=bytes(32), registered_proof=3)


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Polls the engine's state (never a fixed sleep) with a generous deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def overtake_in_the_gpu_queue(
    e: Engine, captured: Captured
) -> tuple[asyncio.Future[JobResult], asyncio.Future[JobResult], asyncio.Future[JobResult]]:
    """Monolithic jobs share the GPU queue key (0, 0) (engine.rs, the monolithic path's queue): with
    winning-a held on the GPU, winning-b queued behind it is replaced by winning-c and never answered.
    Returns the three waiters with the GPU let go."""
    worker = e.workers[0]
    async with e.gpu_locks[0]:  # the GPU stays busy with the first job until the scene is set
        first = e.prove(post("winning-a"))
        await until(lambda: worker.job is not None, "the first job on the GPU")
        dropped = e.prove(post("winning-b"))
        await until(lambda: len(e.gpu_queue) == 1, "the second job in the GPU queue")
        last = e.prove(post("winning-c"))
        await until(lambda: any(",GPU_QUEUE,winning-c," in line for line in captured.lines()), "winning-c queued")
        assert len(e.gpu_queue) == 1  # same key (0, 0): winning-c took winning-b's place
    return first, dropped, last
