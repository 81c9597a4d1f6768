"""Real memory: inside a 1 GiB v1 memory cgroup, an engine at memory_scale 1/256 is a 256 GiB box.

With ``total_budget = "auto"`` (MemTotal, not the cgroup limit — like the daemon) and 18 parallel
syntheses, the measured RSS (69 GiB + 20 GiB per partition) outgrows the container and the kernel
OOM-kills the engine; with an explicit budget well below the limit the same load completes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from cuzktui.proto import proving_pb2 as pb
from tests.engine.engine_harness import porep_request

V1_MEMORY = Path("/sys/fs/cgroup/memory")
LIMIT = 1 << 30
# Joins the cgroup, then becomes the engine (same pid), so every page the engine touches is charged.
WRAPPER = "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); os.execv(sys.argv[2], sys.argv[2:])"


def _procs(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    if not (V1_MEMORY / "cgroup.procs").exists():
        pytest.skip("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
    group = V1_MEMORY / f"cuzk-engine-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
    except OSError as err:
        if group.exists():
            group.rmdir()
        pytest.skip(f"cannot create a v1 memory cgroup here: {err}")
    try:
        yield group
    finally:
        for pid in _procs(group):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _procs(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        group.rmdir()


def _oom_kills(group: Path) -> int:
    for line in (group / "memory.oom_control").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    raise AssertionError("memory.oom_control has no oom_kill counter")


def _run(engine_factory: Any, group: Path, memory: dict[str, Any], proofs: int) -> tuple[Any, list[Any]]:
    engine = engine_factory(
        {
            "memory": memory,
            "pipeline": {"max_parallel_synthesis": 18},
            "engine": {"memory_scale": 1 / 256, "time_scale": 0.01},
        },
        prefix=[sys.executable, "-c", WRAPPER, str(group / "cgroup.procs")],
    )
    assert engine.proc.pid in _procs(group)
    stub = engine.stub()

    def prove(n: int) -> Any:
        try:
            return stub.Prove(pb.ProveRequest(submit=porep_request(f"porep-1000-{n}")), timeout=90).result
        except grpc.RpcError as err:
            return err

    with ThreadPoolExecutor(proofs) as pool:
        results = list(pool.map(prove, range(proofs)))
    return engine, results


@pytest.mark.cgroup
def test_auto_budget_in_a_small_container_is_oom_killed(engine_factory: Any, memory_cgroup: Path) -> None:
    engine, results = _run(engine_factory, memory_cgroup, {"total_budget": "auto"}, proofs=3)
    assert engine.proc.wait(timeout=60) == -signal.SIGKILL
    assert _oom_kills(memory_cgroup) >= 1
    assert all(isinstance(r, grpc.RpcError) and r.code() == grpc.StatusCode.UNAVAILABLE for r in results)


@pytest.mark.cgroup
def test_explicit_budget_below_the_limit_completes(engine_factory: Any, memory_cgroup: Path) -> None:
    engine, results = _run(engine_factory, memory_cgroup, {"total_budget": "150GiB"}, proofs=3)
    assert [r.status for r in results] == [pb.AwaitProofResponse.COMPLETED] * 3
    assert engine.proc.poll() is None
    assert _oom_kills(memory_cgroup) == 0
    peak = int((memory_cgroup / "memory.max_usage_in_bytes").read_text())
    assert LIMIT // 2 < peak < LIMIT  # real memory followed the model, and stayed inside the container
