"""Real memory: with its box in a 1 GiB v1 memory cgroup (``--box-cgroup``), an engine at memory_scale
1/256 is a 256 GiB box.

With ``total_budget = "auto"`` (MemTotal, not the cgroup limit — like the daemon) and 18 parallel
syntheses, the measured RSS (69 GiB + 20 GiB per partition) outgrows the container and the kernel
OOM-kills the engine; with an explicit budget well below the limit the same load completes. The
inputs the engine receives are not the box's: a cgroup far smaller than they are holds only the box.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from cuzktui.proofinputs import generate_c1
from cuzktui.proto import proving_pb2 as pb
from tests.engine.engine_harness import porep_request

V1_MEMORY = Path("/sys/fs/cgroup/memory")
LIMIT = 1 << 30


def _procs(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


@pytest.fixture
def memory_cgroups() -> Iterator[Callable[[int], Path]]:
    """Makes v1 memory cgroups of a given limit; each is emptied and removed at teardown."""
    if not (V1_MEMORY / "cgroup.procs").exists():
        pytest.skip("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
    made: list[Path] = []

    def make(limit: int) -> Path:
        group = V1_MEMORY / f"cuzk-engine-test-{os.getpid()}-{time.monotonic_ns()}"
        try:
            group.mkdir()
            made.append(group)
            (group / "memory.limit_in_bytes").write_text(str(limit))
        except OSError as err:
            pytest.skip(f"cannot create a v1 memory cgroup here: {err}")
        return group

    yield make
    for group in made:
        for pid in _procs(group):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _procs(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        group.rmdir()


@pytest.fixture
def memory_cgroup(memory_cgroups: Callable[[int], Path]) -> Path:
    return memory_cgroups(LIMIT)


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
            # The seed's box: 256 GiB of RAM (the cgroup) where "auto" reads a 512 GiB host's MemTotal.
            "engine": {"memory_scale": 1 / 256, "time_scale": 0.01, "mem_total": "512GiB"},
        },
        args=["--box-cgroup", str(group)],
    )
    assert engine.proc.pid not in _procs(group) and len(_procs(group)) == 1  # its box alone
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


@pytest.mark.cgroup
def test_the_inputs_in_flight_stay_out_of_the_box(engine_factory: Any, memory_cgroups: Callable[[int], Path]) -> None:
    """Four 30 MB C1s at once from a plain client cost the engine's process hundreds of MB (gRPC's
    copies, the reader's), more than this 64 MiB cgroup; its box holds only the model's memory."""
    group = memory_cgroups(64 << 20)
    engine = engine_factory(
        {"memory": {"total_budget": "150GiB"}, "engine": {"memory_scale": 1 / 65536}},
        args=["--box-cgroup", str(group)],
    )
    stub = engine.stub()
    c1 = generate_c1(miner_id=1000, sector_num=1, size=30_000_000)
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda n: stub.Prove(pb.ProveRequest(submit=porep_request(f"porep-1000-{n}", c1)), timeout=90).result,
                range(4),
            )
        )
    assert [r.status for r in results] == [pb.AwaitProofResponse.COMPLETED] * 4
    assert _oom_kills(group) == 0 and engine.proc.poll() is None
    # The box: the daemon's process (191 MiB) and the model (~100 GiB at its peak) at 1/65536.
    assert int((group / "memory.max_usage_in_bytes").read_text()) < 16 << 20
