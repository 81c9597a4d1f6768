"""Samplers: process-tree RSS, cgroup figures, NVML absent or faked, and the periodic loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cuzktui.events import GpuSample, MemorySample, ObservedEvent
from cuzktui.samplers import GpuSampler, ProcessTreeSampler, run_periodic
from cuzktui.units import GiB, MiB
from tests.test_gpu_multi import nvml_problem

DATA = Path(__file__).parent / "data" / "cgroup"

# A child holding ~50 MB that starts a grandchild holding ~30 MB; each prints "ready" once its
# memory is touched, and both exit when their stdin closes.
_GRANDCHILD = "import sys; d = b'g' * (30 << 20); print('ready', flush=True); sys.stdin.read()"
_CHILD = f"""
import subprocess, sys
d = b'c' * (50 << 20)
g = subprocess.Popen([sys.executable, '-c', {_GRANDCHILD!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
g.stdout.readline()
print(g.pid, flush=True)
sys.stdin.read()
g.stdin.close()
g.wait()
"""


@pytest.fixture
def tree() -> Iterator[tuple[subprocess.Popen[str], int]]:
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        grandchild = int(child.stdout.readline())
        try:
            yield child, grandchild
        finally:
            child.stdin.close()
            child.wait(timeout=10)


def _memory(events: list[ObservedEvent]) -> MemorySample:
    (event,) = events
    assert isinstance(event, MemorySample)
    return event


def test_rss_counts_the_whole_tree(tree: tuple[subprocess.Popen[str], int]) -> None:
    child, grandchild = tree
    whole = ProcessTreeSampler(child.pid).tree_rss()
    child_only = ProcessTreeSampler(grandchild).tree_rss()
    assert whole is not None and child_only is not None
    assert whole >= 80 * MiB
    assert child_only >= 30 * MiB
    assert whole > child_only + 50 * MiB


def test_dead_process_gives_no_rss_and_no_exception() -> None:
    sampler = ProcessTreeSampler(99_999_999)  # beyond pid_max: never a live process
    assert sampler.tree_rss() is None
    assert _memory(sampler.sample()).rss_bytes is None


def test_an_engines_reported_rss_is_recorded_while_its_process_lives() -> None:
    """The box an engine emulates has neither its interpreter nor its proof inputs in flight: its own
    figure replaces its process tree's, and a dead engine has no RSS whatever it last reported."""
    alive = ProcessTreeSampler(os.getpid())
    alive.set_reported_rss(3 * MiB)
    assert _memory(alive.sample()).rss_bytes == 3 * MiB
    alive.set_reported_rss(None)
    assert (_memory(alive.sample()).rss_bytes or 0) > 20 * MiB  # this test process's own, as for the real daemon
    dead = ProcessTreeSampler(99_999_999)
    dead.set_reported_rss(3 * MiB)
    assert _memory(dead.sample()).rss_bytes is None


def test_process_that_dies_after_the_sampler_started() -> None:
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as child:
        sampler = ProcessTreeSampler(child.pid)
        assert sampler.tree_rss() is not None
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
    assert sampler.tree_rss() is None


@pytest.mark.parametrize(
    ("group", "usage", "limit"),
    [
        (DATA / "v1" / "sys" / "memory" / "docker" / "abc", GiB, 32 * GiB),
        (DATA / "v2" / "sys" / "kubepods" / "pod1" / "ctr", 20 * GiB, 64 * GiB),
    ],
)
def test_given_cgroup_dir_fills_usage_and_limit(group: Path, usage: int, limit: int) -> None:
    sampler = ProcessTreeSampler(99_999_999, cgroup_dir=group, clock=lambda: 1234.5)
    sampler.set_budget(200 * GiB, 70 * GiB)
    sample = _memory(sampler.sample())
    assert sample == MemorySample(
        t=1234.5,
        rss_bytes=None,
        cgroup_usage_bytes=usage,
        cgroup_limit_bytes=limit,
        budget_total_bytes=200 * GiB,
        budget_used_bytes=70 * GiB,
    )


def test_own_cgroup_of_the_process_is_followed() -> None:
    sampler = ProcessTreeSampler(1234, proc_root=DATA / "v1" / "proc", cgroup_root=DATA / "v1" / "sys")
    sample = _memory(sampler.sample())
    assert (sample.cgroup_usage_bytes, sample.cgroup_limit_bytes) == (GiB, 32 * GiB)
    assert (sample.budget_total_bytes, sample.budget_used_bytes) == (None, None)


def test_missing_cgroup_dir_leaves_the_cgroup_fields_empty(tmp_path: Path) -> None:
    sample = _memory(ProcessTreeSampler(99_999_999, cgroup_dir=tmp_path / "gone").sample())
    assert (sample.cgroup_usage_bytes, sample.cgroup_limit_bytes) == (None, None)


# --- NVML -----------------------------------------------------------------------------------


_NO_NVML = nvml_problem()


class _FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def _fake_nvml(init_error: int | None = None, count: int = 2) -> Any:
    """An NVML whose device 1 supports neither memory info nor utilisation."""
    calls: list[str] = []

    def unsupported(handle: int) -> Any:
        if handle == 1:
            raise _FakeNvmlError(3)
        return None

    def init() -> None:
        calls.append("init")
        if init_error is not None:
            raise _FakeNvmlError(init_error)

    def memory(handle: int) -> Any:
        unsupported(handle)
        return SimpleNamespace(total=80 * GiB, used=10 * GiB, free=70 * GiB)

    def rates(handle: int) -> Any:
        unsupported(handle)
        return SimpleNamespace(gpu=87, memory=40)

    return SimpleNamespace(
        NVMLError=_FakeNvmlError,
        NVML_ERROR_LIBRARY_NOT_FOUND=12,
        NVML_ERROR_DRIVER_NOT_LOADED=9,
        NVML_ERROR_NO_PERMISSION=4,
        calls=calls,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200" if h == 0 else "NVIDIA H100",
        nvmlDeviceGetMemoryInfo=memory,
        nvmlDeviceGetUtilizationRates=rates,
    )


@pytest.mark.skipif(_NO_NVML is None, reason="this machine has a working NVML")
def test_without_nvml_the_state_says_why_and_nothing_is_sampled() -> None:
    sampler = GpuSampler()
    assert not sampler.available
    assert sampler.state.startswith("no NVIDIA GPU (")
    assert sampler.sample() == []
    assert sampler.devices == []
    sampler.close()


@pytest.mark.parametrize(
    ("error", "words"),
    [(9, "no NVIDIA GPU (NVML: driver not loaded)"), (12, "no NVIDIA GPU (NVML: library not found")],
)
def test_nvml_init_failures_become_a_state(error: int, words: str) -> None:
    fake = _fake_nvml(init_error=error)
    sampler = GpuSampler(nvml=fake)
    assert sampler.state.startswith(words)
    assert sampler.sample() == []


def test_no_devices_is_a_state_and_nvml_is_shut_down() -> None:
    fake = _fake_nvml(count=0)
    sampler = GpuSampler(nvml=fake)
    assert sampler.state == "no NVIDIA GPU (NVML found no devices)"
    assert fake.calls == ["init", "shutdown"]


def test_unsupported_functions_are_none_per_device() -> None:
    fake = _fake_nvml()
    sampler = GpuSampler(nvml=fake, clock=lambda: 7.0)
    assert sampler.state == "2 NVIDIA GPUs via NVML"
    assert [d.name for d in sampler.devices] == ["NVIDIA H200", "NVIDIA H100"]
    assert sampler.sample() == [
        GpuSample(t=7.0, index=0, name="NVIDIA H200", used_bytes=10 * GiB, total_bytes=80 * GiB, utilization_pct=87.0),
        GpuSample(t=7.0, index=1, name="NVIDIA H100", used_bytes=None, total_bytes=None, utilization_pct=None),
    ]
    sampler.close()
    sampler.close()
    assert fake.calls == ["init", "shutdown"]  # initialised once, shut down once
    assert sampler.sample() == []


@pytest.mark.skipif(_NO_NVML is not None, reason=_NO_NVML or "")
def test_real_gpus_are_sampled() -> None:
    sampler = GpuSampler()
    try:
        assert sampler.available, sampler.state
        samples = sampler.sample()
        assert len(samples) == len(sampler.devices) >= 1
        for sample in samples:
            assert isinstance(sample, GpuSample) and sample.source == "nvml"
            assert sample.name and sample.total_bytes and sample.total_bytes > GiB
            assert sample.used_bytes is not None and 0 <= sample.used_bytes <= sample.total_bytes
    finally:
        sampler.close()


# --- run_periodic ---------------------------------------------------------------------------


async def test_periodic_sampling_never_overlaps_and_emits_on_the_loop() -> None:
    stop = asyncio.Event()
    loop_thread = threading.get_ident()
    active, most_active, emitted = 0, 0, []
    lock = threading.Lock()
    calls = 0

    def sample() -> list[ObservedEvent]:
        nonlocal active, most_active, calls
        with lock:
            active += 1
            most_active = max(most_active, active)
            calls += 1
            n = calls
        threading.Event().wait(0.005)  # a slow sampler, longer than the interval
        with lock:
            active -= 1
        return [MemorySample(t=float(n), rss_bytes=n)]

    def emit(event: ObservedEvent) -> None:
        assert threading.get_ident() == loop_thread
        emitted.append(event)
        if len(emitted) == 5:
            stop.set()

    await asyncio.wait_for(run_periodic(sample, emit, 0.001, stop), 10)
    assert most_active == 1
    assert [e.t for e in emitted] == [1.0, 2.0, 3.0, 4.0, 5.0]


async def test_periodic_stops_promptly_during_a_long_interval() -> None:
    stop = asyncio.Event()
    emitted: list[ObservedEvent] = []

    def emit(event: ObservedEvent) -> None:
        emitted.append(event)
        # Stop while the loop is already waiting out its hour-long interval.
        asyncio.get_running_loop().call_later(0.05, stop.set)

    await asyncio.wait_for(run_periodic(lambda: [MemorySample(t=0.0, rss_bytes=1)], emit, 3600, stop), 10)
    assert len(emitted) == 1


async def test_periodic_does_nothing_when_already_stopped() -> None:
    stop = asyncio.Event()
    stop.set()
    called: list[bool] = []

    def sample() -> list[ObservedEvent]:
        called.append(True)
        return []

    await run_periodic(sample, lambda e: None, 0.01, stop)
    assert called == []


@pytest.mark.skipif(_NO_NVML is not None, reason=_NO_NVML or "")
def test_gpu_memory_allocated_by_another_library_shows_in_the_samples() -> None:
    """Run on a GPU machine: 4 GiB allocated through CUDA appear in the NVML used-memory sample."""
    torch = pytest.importorskip("torch", reason="needs torch to allocate GPU memory")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    sampler = GpuSampler()
    try:
        before = {s.index: s.used_bytes for s in sampler.sample() if isinstance(s, GpuSample)}
        block = torch.empty(4 * GiB, dtype=torch.uint8, device="cuda:0")
        block.fill_(1)
        torch.cuda.synchronize()
        after = {s.index: s.used_bytes for s in sampler.sample() if isinstance(s, GpuSample)}
        del block
        assert before[0] is not None and after[0] is not None
        assert after[0] - before[0] >= 4 * GiB - 64 * MiB
    finally:
        sampler.close()


# --------------------------------------------------------------------------------------------
# Per-process GPU memory: the daemon's own share of a GPU
# --------------------------------------------------------------------------------------------


def _nvml_with_processes(
    compute: dict[str, Any], graphics: list[Any] | None = None, *, not_found: int = 13, not_supported: int = 3
) -> Any:
    """A one-GPU NVML whose process-list entry points are ``compute`` (name suffix -> result or error code)."""
    fake = _fake_nvml(count=1)

    def entry(result: Any) -> Any:
        def call(handle: int) -> Any:
            if isinstance(result, int):
                raise _FakeNvmlError(result)
            return result

        return call

    fake.NVML_ERROR_FUNCTION_NOT_FOUND = not_found
    for suffix, result in compute.items():
        setattr(fake, f"nvmlDeviceGetComputeRunningProcesses{suffix}", entry(result))
    if graphics is not None:
        fake.nvmlDeviceGetGraphicsRunningProcesses = entry(graphics)
    return fake


def _proc(pid: int, used: int | None) -> Any:
    return SimpleNamespace(pid=pid, usedGpuMemory=used)


def _daemon_share(sampler: GpuSampler, pids: list[int]) -> int | None:
    (sample,) = sampler.sample(pids)
    assert isinstance(sample, GpuSample)
    return sample.daemon_used_bytes


def test_the_daemons_share_sums_its_process_tree_beside_other_processes() -> None:
    fake = _nvml_with_processes(
        {"_v3": [_proc(100, 6 * GiB), _proc(101, 1 * GiB), _proc(555, 3 * GiB)]}, graphics=[_proc(100, 6 * GiB)]
    )
    sampler = GpuSampler(nvml=fake, pid_exists=lambda pid: True)
    # 100 holds a compute and a graphics context with the same memory: counted once.
    assert _daemon_share(sampler, [100, 101, 102]) == 7 * GiB
    assert _daemon_share(sampler, [555]) == 3 * GiB
    assert _daemon_share(sampler, [777]) == 0  # listed processes are visible here: the daemon holds none


def test_old_drivers_fall_back_to_older_process_lists() -> None:
    fake = _nvml_with_processes({"_v3": 13, "_v2": [_proc(100, 2 * GiB)]})
    sampler = GpuSampler(nvml=fake, pid_exists=lambda pid: True)
    assert _daemon_share(sampler, [100]) == 2 * GiB
    assert _daemon_share(sampler, [100]) == 2 * GiB  # the working entry point is remembered


def test_no_per_process_support_or_no_figure_is_unknown_not_zero() -> None:
    unsupported = GpuSampler(nvml=_nvml_with_processes({"_v3": 3}), pid_exists=lambda pid: True)
    assert _daemon_share(unsupported, [100]) is None
    wddm = GpuSampler(nvml=_nvml_with_processes({"_v3": [_proc(100, None)]}), pid_exists=lambda pid: True)
    assert _daemon_share(wddm, [100]) is None


def test_pids_of_another_namespace_make_the_share_unknown() -> None:
    """In a container NVML lists the host's pids: none is ours, and that proves nothing."""
    fake = _nvml_with_processes({"_v3": [_proc(48213, 6 * GiB)]})
    sampler = GpuSampler(nvml=fake, pid_exists=lambda pid: False)
    assert _daemon_share(sampler, [100]) is None


def test_without_daemon_pids_no_share_is_claimed() -> None:
    sampler = GpuSampler(nvml=_nvml_with_processes({"_v3": [_proc(100, GiB)]}), pid_exists=lambda pid: True)
    assert _daemon_share(sampler, []) is None


def test_process_tree_pids_include_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sampler = ProcessTreeSampler(os.getpid())
        assert os.getpid() in sampler.tree_pids()
        assert child.pid in sampler.tree_pids()
    finally:
        child.kill()
        child.wait()
    assert ProcessTreeSampler(child.pid).tree_pids() == []


_HOLD_GPU_MEMORY = """
import sys, torch
block = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device="cuda:0")
block.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(_NO_NVML is not None, reason=_NO_NVML or "")
def test_per_process_gpu_memory_tells_the_daemon_from_another_process() -> None:
    """Run on a GPU machine: two processes hold 3 and 2 GiB; the 'daemon' share is its own 3 GiB."""
    pytest.importorskip("torch", reason="needs torch to allocate GPU memory")
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", _HOLD_GPU_MEMORY, str(size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for size in (3 * GiB, 2 * GiB)
    ]
    sampler = GpuSampler()
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        daemon, other = holders
        (sample,) = [s for s in sampler.sample([daemon.pid]) if isinstance(s, GpuSample) and s.index == 0]
        listed = sampler.process_memory(sampler._handles[0])
        print(f"NVML per-process: {listed}; sample: {sample}")
        if sample.daemon_used_bytes is None:
            pytest.skip(f"this driver cannot attribute GPU memory to processes here (list: {listed})")
        assert 3 * GiB <= sample.daemon_used_bytes < 3 * GiB + 1 * GiB
        assert sample.used_bytes is not None and sample.used_bytes >= sample.daemon_used_bytes + 2 * GiB
        (others,) = [s for s in sampler.sample([other.pid]) if isinstance(s, GpuSample) and s.index == 0]
        assert others.daemon_used_bytes is not None and 2 * GiB <= others.daemon_used_bytes < 3 * GiB
    finally:
        sampler.close()
        for holder in holders:
            holder.kill()
            holder.wait()
