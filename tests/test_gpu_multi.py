"""Real GPUs, one or several: NVML device discovery, per-process GPU memory and memcheck, against nvidia-smi.

GPU-only: every test skips with the reason on a machine without NVML, nvidia-smi or (for the
per-process tests) libcuda; the assertions that need two GPUs skip on a machine with one. The module
needs only the standard library, psutil and nvidia-ml-py (no torch, no venv, no conftest), so a GPU
box's bare python3 runs it from the repository root:

    PYTHONPATH=. python3 -m pytest --noconftest -o addopts="" tests/test_gpu_multi.py -s

Each test prints its figures beside nvidia-smi's (lines starting ``[gpu-multi]``) for the record.
A helper process allocates a different amount on each GPU through libcuda (ctypes: cuInit,
cuDevicePrimaryCtxRetain, cuMemAlloc), so the per-GPU attribution can be checked: the same amount
everywhere could not tell a swapped or summed figure from a right one.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuzktui.events import GpuSample
from cuzktui.samplers import GpuSampler
from cuzktui.units import MiB

REPO = Path(__file__).resolve().parent.parent
HELPER_READY_TIMEOUT_S = 120.0  # cuInit and one context per GPU take seconds on a busy box
STEADY_TIMEOUT_S = 30.0
# A primary context costs the same on identical GPUs, so per-GPU figures differ by the allocations
# up to this much (different GPU models, or a driver that grows a context's pools, may exceed it).
CONTEXT_SPREAD = 64 * MiB


def nvml_problem() -> str | None:
    """Why NVML cannot be used here (tests/test_samplers.py asks too), or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as exc:
        return f"NVML not usable here: {exc}"
    return None


def _gpu_problem() -> str | None:
    problem = nvml_problem()
    if problem is None and shutil.which("nvidia-smi") is None:
        problem = "nvidia-smi is not on PATH (nothing to compare the sampler with)"
    return problem


_NO_GPU = _gpu_problem()
pytestmark = pytest.mark.skipif(_NO_GPU is not None, reason=_NO_GPU or "")


def say(text: str) -> None:
    print(f"[gpu-multi] {text}", flush=True)


@dataclass(frozen=True, slots=True)
class SmiGpu:
    index: int
    uuid: str
    name: str
    total_mib: int
    used_mib: int


def _smi(*args: str) -> list[list[str]]:
    """nvidia-smi's CSV rows (noheader, nounits), each split into stripped fields."""
    out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True)
    assert out.returncode == 0, f"nvidia-smi {' '.join(args)} failed: {out.stderr.strip()}"
    return [[field.strip() for field in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def smi_gpus() -> list[SmiGpu]:
    rows = _smi("--query-gpu=index,uuid,name,memory.total,memory.used")
    return [SmiGpu(int(i), uuid, name, int(total), int(used)) for i, uuid, name, total, used in rows]


def smi_process_mib() -> dict[tuple[int, str], int | None]:
    """(pid, GPU uuid) -> MiB per nvidia-smi's compute-app list (None where it prints [N/A])."""
    found: dict[tuple[int, str], int | None] = {}
    for row in _smi("--query-compute-apps=pid,gpu_uuid,used_memory"):
        if len(row) != 3 or not row[0].isdigit():
            continue  # "No running processes found" and the like
        found[(int(row[0]), row[1])] = int(row[2]) if row[2].isdigit() else None
    return found


def sampler_figures(sampler: GpuSampler, pid: int) -> dict[int, int | None]:
    """Per NVML index, the bytes the sampler attributes to ``pid`` (the tool's path for the daemon's share)."""
    return {s.index: s.daemon_used_bytes for s in sampler.sample([pid]) if isinstance(s, GpuSample)}


def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MiB:.1f} MiB"


# --- the devices -----------------------------------------------------------------------------


def test_the_nvml_sampler_finds_every_gpu_nvidia_smi_lists() -> None:
    gpus = smi_gpus()
    sampler = GpuSampler()
    try:
        samples = {s.index: s for s in sampler.sample() if isinstance(s, GpuSample)}
        state, devices = sampler.state, list(sampler.devices)
    finally:
        sampler.close()
    say(f"sampler state: {state!r}; nvidia-smi lists {len(gpus)} GPU(s)")
    for gpu in gpus:
        device = next((d for d in devices if d.index == gpu.index), None)
        sample = samples.get(gpu.index)
        say(
            f"GPU{gpu.index} {gpu.uuid}: nvidia-smi {gpu.name!r} total {gpu.total_mib} MiB used {gpu.used_mib} MiB | "
            f"sampler {device.name if device else None!r} total {mib(device.total_bytes if device else None)} "
            f"used {mib(sample.used_bytes if sample else None)}"
        )
    assert [d.index for d in devices] == [g.index for g in gpus]
    assert state == f"{len(gpus)} NVIDIA GPU{'s' if len(gpus) != 1 else ''} via NVML"
    for device, gpu in zip(devices, gpus, strict=True):
        assert device.name == gpu.name
        assert device.total_bytes is not None and device.total_bytes // MiB == gpu.total_mib
        sample = samples[gpu.index]
        assert sample.total_bytes == device.total_bytes and sample.used_bytes is not None
        assert 0 <= sample.used_bytes <= sample.total_bytes


def test_memcheck_lists_every_gpu() -> None:
    gpus = smi_gpus()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    command = [sys.executable, "-m", "cuzktui.cli", "memcheck"]
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    as_text = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert as_text.returncode == 0, as_text.stderr
    gpu_line = next(line for line in as_text.stdout.splitlines() if line.startswith("GPUs"))
    say(f"memcheck --json gpu_state {report['gpu_state']!r}, gpus {report['gpus']}")
    say(f"memcheck text: {gpu_line}")
    assert [(g["index"], g["name"], g["total_bytes"] // MiB) for g in report["gpus"]] == [
        (g.index, g.name, g.total_mib) for g in gpus
    ]
    for gpu in gpus:
        assert f"{gpu.index}: {gpu.name} (" in gpu_line


# --- per-process GPU memory ------------------------------------------------------------------

# Runs in its own process: allocates plan[uuid] bytes on each GPU the plan names, says what it
# holds as one JSON line, and keeps it until its stdin closes. The primary context (not cuCtxCreate,
# whose signature changed in CUDA 13) keeps the driver symbols used here the same across versions.
HELPER = r"""
import ctypes, json, sys

cuda = ctypes.CDLL("libcuda.so.1")


def check(result, what):
    if result != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(result, ctypes.byref(name))
        print(json.dumps({"error": f"{what} failed: {result} {(name.value or b'?').decode()}"}), flush=True)
        sys.exit(1)


plan = json.loads(sys.argv[1])
check(cuda.cuInit(0), "cuInit")
count = ctypes.c_int()
check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
held = {}
for ordinal in range(count.value):
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    raw = (ctypes.c_ubyte * 16)()
    check(get_uuid(raw, device), "cuDeviceGetUuid")
    h = bytes(raw).hex()
    uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    size = plan.get(uuid)
    if size is None:
        continue
    context = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    pointer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)), "cuMemAlloc")
    check(cuda.cuMemsetD8_v2(pointer, ctypes.c_ubyte(1), ctypes.c_size_t(size)), "cuMemsetD8")
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    held[uuid] = size
print(json.dumps({"held": held}), flush=True)
sys.stdin.readline()
"""


def _libcuda_problem() -> str | None:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"libcuda.so.1 cannot be loaded: {exc}"
    return None


@contextlib.contextmanager
def allocating_helper(plan: dict[str, int]) -> Iterator[tuple[int, dict[str, int]]]:
    """A process holding plan[uuid] bytes on each GPU: yields (its pid, the bytes it holds per uuid)."""
    problem = _libcuda_problem()
    if problem is not None:
        pytest.skip(problem)
    process = subprocess.Popen(
        [sys.executable, "-c", HELPER, json.dumps(plan)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            ready = selector.select(HELPER_READY_TIMEOUT_S)
        assert ready, f"the CUDA helper said nothing in {HELPER_READY_TIMEOUT_S:.0f} s"
        answer = json.loads(process.stdout.readline() or '{"error": "the helper exited without a word"}')
        assert "error" not in answer, answer.get("error")
        yield process.pid, {str(k): int(v) for k, v in answer["held"].items()}
    finally:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True, slots=True)
class PerGpu:
    gpu: SmiGpu
    held: int  # what the helper allocated there (0: nothing)
    sampler_bytes: int | None  # the sampler's figure for the helper's pid on this GPU
    smi_mib: int | None  # nvidia-smi's for the same pid and GPU (None: not listed)


def measure_helper(pid: int, held: dict[str, int]) -> list[PerGpu]:
    """The sampler's and nvidia-smi's per-process figures at the same moment: a read of nvidia-smi
    between two identical sampler reads (the helper holds still, so the figures settle at once)."""
    gpus = smi_gpus()
    sampler = GpuSampler()
    try:
        deadline = time.monotonic() + STEADY_TIMEOUT_S
        while True:
            before = sampler_figures(sampler, pid)
            smi = smi_process_mib()
            after = sampler_figures(sampler, pid)
            if before == after or time.monotonic() > deadline:
                break
    finally:
        sampler.close()
    assert before == after, f"the sampler's figures did not settle in {STEADY_TIMEOUT_S:.0f} s: {before} / {after}"
    rows = [PerGpu(g, held.get(g.uuid, 0), after[g.index], smi.get((pid, g.uuid))) for g in gpus]
    say(f"nvidia-smi compute apps (pid, GPU uuid): MiB = {smi}")
    for row in rows:
        say(
            f"GPU{row.gpu.index} {row.gpu.uuid}: helper pid {pid} allocated {mib(row.held)}; "
            f"sampler (NVML per-process) {mib(row.sampler_bytes)}; nvidia-smi "
            f"{'not listed' if row.smi_mib is None else f'{row.smi_mib} MiB'}"
        )
    return rows


def _plan(gpus: list[SmiGpu]) -> dict[str, int]:
    """A different amount on each GPU: 1 GiB on GPU0, 1.5 GiB on GPU1, 2 GiB on GPU2 …"""
    return {g.uuid: (2 + g.index) * 512 * MiB for g in gpus}


def _listed_or_skip(rows: list[PerGpu], pid: int) -> None:
    """nvidia-smi cannot list the helper under another PID namespace (a container, gVisor): then the
    sampler must not invent a figure either (daemon_share says unknown, or 0), and nothing is compared."""
    if any(row.smi_mib is not None for row in rows):
        return
    for row in rows:
        assert row.sampler_bytes in (None, 0), f"GPU{row.gpu.index}: sampler claims {row.sampler_bytes} bytes"
    say(f"nvidia-smi lists no compute process with pid {pid}: another PID namespace; nothing to compare")
    pytest.skip(f"nvidia-smi lists no compute process with the helper's pid {pid} (another PID namespace)")


def test_per_process_gpu_memory_matches_nvidia_smi_on_each_gpu() -> None:
    gpus = smi_gpus()
    with allocating_helper(_plan(gpus)) as (pid, held):
        rows = measure_helper(pid, held)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    say(f"helper held {len(held)} of {len(gpus)} GPU(s) (CUDA_VISIBLE_DEVICES={visible})")
    assert held, "the helper allocated on no GPU"
    _listed_or_skip(rows, pid)
    for row in rows:
        if not row.held:
            assert not row.sampler_bytes and row.smi_mib is None, row  # nothing of the helper's there
            continue
        assert row.smi_mib is not None and row.sampler_bytes is not None, row
        # nvidia-smi prints whole MiB of NVML's bytes: equal within that rounding.
        assert abs(row.sampler_bytes - row.smi_mib * MiB) < MiB, row
        assert row.sampler_bytes >= row.held, row  # the allocation plus the context's own


def test_per_process_gpu_memory_tells_the_gpus_apart() -> None:
    gpus = smi_gpus()
    if len(gpus) < 2:
        pytest.skip(f"needs 2 or more GPUs, this machine has {len(gpus)}")
    with allocating_helper(_plan(gpus)) as (pid, held):
        rows = measure_helper(pid, held)
    _listed_or_skip(rows, pid)
    used = [row for row in rows if row.held]
    if len(used) < 2:
        pytest.skip(f"the helper could allocate on {len(used)} GPU(s) only (CUDA_VISIBLE_DEVICES?)")
    first = used[0]
    assert first.sampler_bytes is not None
    for row in used[1:]:
        assert row.sampler_bytes is not None
        # Each GPU shows its own allocation: the differences between GPUs are the allocations' differences.
        spread = (row.sampler_bytes - first.sampler_bytes) - (row.held - first.held)
        say(f"GPU{row.gpu.index} − GPU{first.gpu.index}: figures differ by allocation ± {mib(abs(spread))}")
        assert abs(spread) <= CONTEXT_SPREAD, row
