"""Shared fixtures: a running cuzk-engine, engine configs, and the memory-cgroup skip rule.

``engine_config_text(**sections)`` builds a small engine config (fast ``time_scale``, one GPU);
``running_engine`` starts ``cuzk-engine`` on a unix socket in the test's tmp_path and waits until
it answers GetStatus; ``memory_cgroup_or_skip()`` skips a test with the reason when this machine
cannot create memory cgroups. Every process and cgroup made here is removed at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from cuzktui import proofinputs
from cuzktui.client import ClientError, DaemonClient
from cuzktui.supervisor import engine_program

# Fast enough for tests on two shared cores, slow enough that phases still overlap.
TEST_TIME_SCALE = 0.003
ENGINE_READY_TIMEOUT_S = 60.0

# The suite runs on pytest-xdist workers (pyproject's addopts): syrupy's unused-snapshot check across them.
pytest_plugins = ("tests.xdist_snapshots",)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: twice the cores this process may use. Most of the suite's wall time is
    tests waiting (on an engine at a time scale, a daemon starting, a screen settling), not computing:
    a second worker per core runs while the first waits (CONTRIBUTING.md has the measurements)."""
    return 2 * len(os.sched_getaffinity(0))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first in every worker's share. xdist's worksteal hands each of n workers an
    n-th of the collection in order, then moves tests from the end of the longest queue to a worker
    that ran out: a long test met late runs alone at the end while the others have finished. So the
    order is n shares, each the slow tests dealt to it followed by its part of the rest, in order."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    rest = [item for item in items if item.get_closest_marker("slow") is None]
    cuts = [len(items) * k // workers for k in range(workers + 1)]
    shares: list[list[pytest.Item]] = [slow[k::workers] for k in range(workers)]
    for k, share in enumerate(shares):
        take = max(cuts[k + 1] - cuts[k] - len(share), 0)
        share.extend(rest[:take])
        del rest[:take]
    items[:] = [item for share in shares for item in share] + rest


@functools.cache
def small_c1(miner_id: int = 1000, sector_num: int = 1) -> bytes:
    """A structurally complete C1 wrapper of the generator's compact shape (about 1 MB)."""
    return proofinputs.generate_c1(miner_id=miner_id, sector_num=sector_num, size=0)


def post_vanilla() -> list[bytes]:
    """One PoSt sector proof (one challenge: the engine checks the framing, not the count)."""
    return [proofinputs.generate_post_vanilla(1, 1)]


@pytest.fixture(autouse=True)
def _private_model_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's model checkpoints (cuzktui.model_cache: report, export, replay) go to a directory of its
    own, never the user's ~/.cache nor another test's (a test never resumes what another one stored)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


def engine_available() -> bool:
    return importlib.util.find_spec("engine.__main__") is not None


def require_engine() -> None:
    if not engine_available():
        pytest.skip("cuzk-engine (engine/__main__.py) is not in this tree yet")


def engine_config_text(sections: Mapping[str, Mapping[str, Any]] | None = None, **kwargs: Any) -> str:
    """An engine config: test defaults (``[engine] time_scale``, one GPU) overridden per section.

    ``engine_config_text({"pipeline": {"max_parallel_synthesis": 4}})`` or the same as keywords.
    """
    merged: dict[str, dict[str, Any]] = {"engine": {"time_scale": TEST_TIME_SCALE, "gpus": 1}}
    for section, values in {**(sections or {}), **kwargs}.items():
        merged.setdefault(section, {}).update(values)
    return tomlkit.dumps(merged)


def alive(pid: int) -> bool:
    """Whether a process still runs; a zombie not yet reaped by its parent counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def fast_engine_config(socket_dir: Path, gpus: int = 1) -> str:
    """A whole engine config, fast and small enough for UI tests, with explicit addresses and budget,
    emulating ``gpus`` GPUs (each with the default ``gpu_workers_per_device``, 2)."""
    from cuzktui.supervisor import free_loopback_port

    return (
        "[daemon]\n"
        f'listen = "unix://{socket_dir / "cuzk.sock"}"\n'
        f'status_listen = "127.0.0.1:{free_loopback_port()}"\n'
        "[memory]\n"
        'total_budget = "400GiB"\n'
        "[engine]\n"
        "time_scale = 0.0005\n"
        "memory_scale = 0.0000152587890625\n"  # 1/65536
        f"gpus = {gpus}\n"
    )


async def start_apply_stop(config: Path, session_dir: Path) -> None:
    """A live session on the engine: start it with ``config``, wait until ready, apply one knob (which
    saves the chosen config), stop the daemon. Issue 10 point 7 checks what this reads and writes."""
    from cuzktui.live import LiveController, LiveOptions

    controller = LiveController(LiveOptions(program=engine_program(), config_file=config, session_dir=session_dir))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ENGINE_READY_TIMEOUT_S
    try:
        await controller.start()
        while controller.model.daemon.phase != "ready":
            assert loop.time() < deadline, "the engine never became ready"
            await controller.poll()
            await asyncio.sleep(0.05)
        await controller.apply_config({"pipeline.max_parallel_synthesis": 3})
    finally:
        await controller.shutdown(stop_daemon=True)


def memory_cgroup_or_skip() -> None:
    """Skip unless a memory cgroup can be created and removed here (root, v1 or v2 memory controller)."""
    from cuzktui.system import CgroupError, MemoryCgroup

    try:
        probe = MemoryCgroup.create(f"cuzk-tui-probe-{os.getpid()}", 64 << 20)
    except CgroupError as error:
        pytest.skip(f"memory cgroups are not writable here: {error}")
    probe.remove()


def kernel_log_or_skip() -> None:
    """Skip unless this user may read the kernel log with dmesg (root, or kernel.dmesg_restrict = 0), where
    the kernel says which process it OOM-killed."""
    try:
        done = subprocess.run(["dmesg"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"the kernel log is not readable here: {error}")
    if done.returncode != 0:
        pytest.skip(f"the kernel log is not readable here: {done.stderr.decode(errors='replace').strip()}")


@dataclass(frozen=True)
class EngineHandle:
    address: str
    config_path: Path
    log_path: Path
    proc: subprocess.Popen[bytes]


async def wait_until_serving(address: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll GetStatus until it answers (the readiness rule of docs/daemon-interface.md §0.6)."""
    deadline = time.monotonic() + timeout
    async with DaemonClient(address) as client:
        while True:
            try:
                await client.get_status(timeout=2)
                return
            except ClientError:
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"the engine exited with status {proc.returncode} before serving") from None
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.05)


@pytest.fixture
def start_engine(tmp_path: Path) -> Iterator[Any]:
    """A factory: ``await start_engine(config_text, args=(...))`` → a serving EngineHandle (killed at teardown)."""
    require_engine()
    procs: list[subprocess.Popen[bytes]] = []

    async def start(config_text: str | None = None, name: str = "engine", args: Sequence[str] = ()) -> EngineHandle:
        directory = tmp_path / name
        directory.mkdir(mode=0o700)
        config = directory / "cuzk.toml"
        config.write_text(config_text if config_text is not None else engine_config_text())
        log = directory / "daemon.log"
        address = f"unix://{directory}/cuzk.sock"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [*engine_program().argv, "-c", str(config), "-l", address, *args],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "NO_COLOR": "1"},
                start_new_session=True,
            )
        procs.append(proc)
        await wait_until_serving(address, ENGINE_READY_TIMEOUT_S, proc)
        return EngineHandle(address, config, log, proc)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture
async def running_engine(start_engine: Any) -> EngineHandle:
    """One engine with the test defaults, serving on a unix socket."""
    handle: EngineHandle = await start_engine()
    return handle


def standin_daemon_on_path(bin_dir: Path) -> Path:
    """``bin_dir`` holding an executable ``cuzk-daemon`` that behaves as the real one does about its
    address (tests/standin_daemon.py) and serves with cuzk-engine; put ``bin_dir`` first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "cuzk-daemon"
    standin = Path(__file__).with_name("standin_daemon.py")
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{standin}" "$@"\n')
    script.chmod(0o755)
    return bin_dir


# A stand-in daemon: GetStatus answers with total_proofs_completed = how many GetStatus calls it has
# answered (1 for the first: a test sees whether an answer was asked for or reused), AwaitProof on an
# unknown id is NOT_FOUND (as the daemon does), Prove echoes the size of its input and hangs when the
# request id is "hang".
_FAKE_DAEMON = textwrap.dedent(
    """
    import asyncio, sys
    import grpc
    from cuzktui.proto import proving_pb2 as pb, proving_pb2_grpc as pb_grpc

    class Servicer(pb_grpc.ProvingEngineServicer):
        calls = 0
        async def GetStatus(self, request, context):
            Servicer.calls += 1
            return pb.GetStatusResponse(total_proofs_completed=Servicer.calls, uptime_seconds=3)
        async def AwaitProof(self, request, context):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"job not found: {request.job_id}")
        async def Prove(self, request, context):
            if request.submit.request_id == "hang":
                await asyncio.Event().wait()
            return pb.ProveResponse(result=pb.AwaitProofResponse(
                job_id=request.submit.request_id, status=pb.AwaitProofResponse.COMPLETED,
                proof=bytes(192), total_ms=len(request.submit.vanilla_proof)))

    async def main():
        limit = 256 * 1024 * 1024
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                          ("grpc.max_send_message_length", limit)])
        pb_grpc.add_ProvingEngineServicer_to_server(Servicer(), server)
        server.add_insecure_port(sys.argv[1])
        await server.start()
        print("serving", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())
    """
)


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    address = f"unix://{tmp_path}/fake.sock"
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAKE_DAEMON, address], stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"serving\n"
        yield address, proc
    finally:
        proc.kill()
        proc.wait()
