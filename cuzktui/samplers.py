"""Periodic samples of what the daemon costs: process-tree RSS, cgroup usage, GPU memory.

A sampler's ``sample()`` is a blocking call (psutil, file reads, NVML) that returns the
observed events of one tick and never raises: a dead daemon is an RSS of None, a machine
without NVIDIA GPUs is a :attr:`GpuSampler.state` and no samples. :func:`run_periodic` drives
a sampler from asyncio, in a thread, once per interval, never overlapping itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import psutil

from .daemon_address import parse_address
from .events import GpuSample, MemorySample, ObservedEvent
from .system import CGROUP, PROC, CgroupMemory, memory_cgroup_of, read_cgroup_memory

DEFAULT_INTERVAL: Final = 1.0  # NVML calls are slow; nvitop samples devices at 1 Hz too

Clock = Callable[[], float]
_T = TypeVar("_T")


# --------------------------------------------------------------------------------------------
# Memory: the daemon's process tree and its cgroup
# --------------------------------------------------------------------------------------------


class ProcessTreeSampler:
    """RSS of a process and all its descendants, with its memory cgroup and the daemon's budget.

    ``cgroup_dir`` names the group to read (the one the supervisor made); without it the
    process's own memory cgroup is read each time, so a move into a group is followed.
    The budget comes from the daemon's status endpoint through :meth:`set_budget`.
    """

    def __init__(
        self,
        pid: int,
        *,
        cgroup_dir: Path | None = None,
        proc_root: Path = PROC,
        cgroup_root: Path = CGROUP,
        clock: Clock = time.time,
    ) -> None:
        self.pid = pid
        self._cgroup_dir = cgroup_dir
        self._proc_root = proc_root
        self._cgroup_root = cgroup_root
        self._clock = clock
        self._budget_total: int | None = None
        self._budget_used: int | None = None
        self._reported_rss: int | None = None
        try:
            # Held, not looked up by pid each time: psutil then notices a reused pid.
            self._process: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self._process = None

    def set_budget(self, total_bytes: int | None, used_bytes: int | None) -> None:
        """The latest budget total / used figures (from ``/status``) to put in the next samples."""
        self._budget_total = total_bytes
        self._budget_used = used_bytes

    def set_reported_rss(self, rss_bytes: int | None) -> None:
        """An engine's own figure for its RSS (its /status ``emulated_box``: the box it emulates, in
        real bytes), recorded instead of its process tree's, whose interpreter and proof inputs in
        flight the box does not have. None: the process tree's (the real daemon's RSS)."""
        self._reported_rss = rss_bytes

    def tree_rss(self) -> int | None:
        """Bytes resident in the process and its descendants; None when the process is gone."""
        if self._process is None:
            return None
        try:
            total = self._process.memory_info().rss
            children = self._process.children(recursive=True)
        except psutil.Error:
            return None
        for child in children:
            # A child may exit between listing and reading: it simply no longer counts.
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return total

    def tree_pids(self) -> list[int]:
        """The process and its descendants (empty when it is gone): whose GPU memory is the daemon's."""
        if self._process is None:
            return []
        try:
            return [self._process.pid, *(child.pid for child in self._process.children(recursive=True))]
        except psutil.Error:
            return []

    def cgroup(self) -> CgroupMemory | None:
        if self._cgroup_dir is not None:
            return read_cgroup_memory(self._cgroup_dir) if self._cgroup_dir.is_dir() else None
        return memory_cgroup_of(self.pid, proc_root=self._proc_root, cgroup_root=self._cgroup_root)

    def sample(self) -> list[ObservedEvent]:
        cgroup = self.cgroup()
        rss = self.tree_rss()
        return [
            MemorySample(
                t=self._clock(),
                rss_bytes=rss if rss is None or self._reported_rss is None else self._reported_rss,
                cgroup_usage_bytes=cgroup.usage_bytes if cgroup else None,
                cgroup_limit_bytes=cgroup.limit_bytes if cgroup else None,
                budget_total_bytes=self._budget_total,
                budget_used_bytes=self._budget_used,
            )
        ]


def listener_pid(address: str) -> int | None:
    """The pid of the process listening at a daemon address (``unix:///path`` or ``host:port``).

    The memory target of an attached daemon when no ``--pid`` is given (upstream's /status carries
    no pid, status.rs StatusSnapshot). None when nothing listens there or the owner is not visible
    to this user (psutil reads other users' sockets only as root).
    """
    parsed = parse_address(address.strip().removeprefix("http://"))
    if parsed is None:
        return None
    try:
        if parsed.socket_path is not None:
            for conn in psutil.net_connections(kind="unix"):
                if str(conn.laddr) == parsed.socket_path and conn.pid is not None:
                    return int(conn.pid)
            return None
        host, port = parsed.host, parsed.port
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status != psutil.CONN_LISTEN or conn.pid is None or not conn.laddr or conn.laddr.port != port:
                continue
            if conn.laddr.ip in (host, "0.0.0.0", "::") or host in ("", "localhost"):
                return int(conn.pid)
    except (psutil.Error, OSError):
        return None
    return None


# --------------------------------------------------------------------------------------------
# GPUs through NVML
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    name: str
    total_bytes: int | None


def _load_nvml() -> Any:
    import pynvml

    return pynvml


class GpuSampler:
    """Per-GPU memory and utilisation through NVML (``nvidia-ml-py``), initialised once.

    Without a driver, a GPU or the library, :attr:`state` says why (for instance
    ``"no NVIDIA GPU (NVML: driver not loaded)"``) and :meth:`sample` returns nothing. A
    function one device does not support is reported as None for that value, not as a failure.
    Call :meth:`close` to shut NVML down.
    """

    def __init__(
        self, *, nvml: Any = None, clock: Clock = time.time, pid_exists: Callable[[int], bool] = psutil.pid_exists
    ) -> None:
        self._clock = clock
        self._pid_exists = pid_exists
        # Per process-list kind, the NVML entry point this driver has (found on first use).
        self._process_lists: dict[str, Callable[[Any], Any] | None] = {}
        self._nvml: Any = None
        self._handles: list[Any] = []
        self.devices: list[GpuDevice] = []
        self.state = "not started"
        try:
            module = nvml if nvml is not None else _load_nvml()
        except ImportError:
            self.state = "no NVIDIA GPU (nvidia-ml-py is not installed)"
            return
        try:
            module.nvmlInit()
        except module.NVMLError as exc:
            self.state = f"no NVIDIA GPU (NVML: {_nvml_reason(module, exc)})"
            return
        self._nvml = module
        try:
            count = module.nvmlDeviceGetCount()
            self._handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except module.NVMLError as exc:
            self.close()
            self.state = f"no NVIDIA GPU (NVML: {_nvml_reason(module, exc)})"
            return
        if not self._handles:
            self.close()
            self.state = "no NVIDIA GPU (NVML found no devices)"
            return
        for index, handle in enumerate(self._handles):
            name = self._call(module.nvmlDeviceGetName, handle)
            memory = self._call(module.nvmlDeviceGetMemoryInfo, handle)
            self.devices.append(
                GpuDevice(index, _text(name) if name is not None else f"GPU {index}", _int_attr(memory, "total"))
            )
        self.state = f"{len(self.devices)} NVIDIA GPU{'s' if len(self.devices) != 1 else ''} via NVML"

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def _call(self, function: Callable[..., _T], *args: Any) -> _T | None:
        """One NVML call; None when the device does not support it or it fails."""
        try:
            return function(*args)
        except self._nvml.NVMLError:
            return None

    def sample(self, daemon_pids: Collection[int] = ()) -> list[ObservedEvent]:
        """One sample per GPU; with ``daemon_pids`` (the daemon's process tree), its own share too."""
        if self._nvml is None:
            return []
        now = self._clock()
        samples: list[ObservedEvent] = []
        for device, handle in zip(self.devices, self._handles, strict=True):
            memory = self._call(self._nvml.nvmlDeviceGetMemoryInfo, handle)
            rates = self._call(self._nvml.nvmlDeviceGetUtilizationRates, handle)
            utilization = _int_attr(rates, "gpu")
            processes = self.process_memory(handle) if daemon_pids else None
            samples.append(
                GpuSample(
                    t=now,
                    index=device.index,
                    name=device.name,
                    used_bytes=_int_attr(memory, "used"),
                    total_bytes=_int_attr(memory, "total"),
                    utilization_pct=float(utilization) if utilization is not None else None,
                    source="nvml",
                    daemon_used_bytes=daemon_share(processes, daemon_pids, self._pid_exists),
                )
            )
        return samples

    def process_memory(self, handle: Any) -> dict[int, int | None] | None:
        """GPU memory by pid on one device (None: this driver cannot list processes).

        Compute and graphics contexts are both listed (a process may hold either, or both with the
        same memory, hence the max per pid). A used figure NVML cannot give (``None`` from the
        binding, as under Windows WDDM or some vGPUs) stays None.
        """
        found = False
        by_pid: dict[int, int | None] = {}
        for kind in _PROCESS_LIST_KINDS:
            entries = self._process_list(kind, handle)
            if entries is None:
                continue
            found = True
            for entry in entries:
                pid = getattr(entry, "pid", None)
                if not isinstance(pid, int):
                    continue
                used = getattr(entry, "usedGpuMemory", None)
                used = int(used) if isinstance(used, int) else None
                if pid not in by_pid:
                    by_pid[pid] = used
                else:
                    previous = by_pid[pid]
                    by_pid[pid] = None if previous is None or used is None else max(previous, used)
        return by_pid if found else None

    def _process_list(self, kind: str, handle: Any) -> Any:
        """One kind of NVML process list, through the newest entry point the driver has.

        Drivers older than the binding lack ``…_v3`` (NVML_ERROR_FUNCTION_NOT_FOUND): fall back to
        ``_v2`` and then the unversioned call, and remember what worked. Not supported: None.
        """
        assert self._nvml is not None
        if kind in self._process_lists:
            chosen = self._process_lists[kind]
            return self._call(chosen, handle) if chosen is not None else None
        not_found = getattr(self._nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", None)
        for suffix in ("_v3", "_v2", ""):
            function = getattr(self._nvml, f"nvmlDeviceGet{kind}RunningProcesses{suffix}", None)
            if function is None:
                continue
            try:
                entries = function(handle)
            except self._nvml.NVMLError as exc:
                if getattr(exc, "value", None) == not_found:
                    continue
                break  # not supported on this device, or no permission: no attribution
            self._process_lists[kind] = function
            return entries
        self._process_lists[kind] = None
        return None

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None
            self._handles = []
            self.state = "closed"


_PROCESS_LIST_KINDS: Final = ("Compute", "Graphics")


def daemon_share(
    processes: Mapping[int, int | None] | None, daemon_pids: Collection[int], pid_exists: Callable[[int], bool]
) -> int | None:
    """The daemon's bytes on one GPU from NVML's per-process list; None when they cannot be known.

    NVML reports pids of the host's PID namespace. Inside a container those pids are not ours: when
    the GPU has processes and none of their pids exists here, a missing daemon pid proves nothing,
    so the share is unknown rather than 0.
    """
    if processes is None or not daemon_pids:
        return None
    ours = [pid for pid in daemon_pids if pid in processes]
    if ours:
        used = [processes[pid] for pid in ours]
        return None if any(u is None for u in used) else sum(u for u in used if u is not None)
    if processes and not any(pid_exists(pid) for pid in processes):
        return None
    return 0


def _nvml_reason(module: Any, exc: BaseException) -> str:
    """Short words for the NVML failures operators meet; NVML's own text otherwise."""
    value = getattr(exc, "value", None)
    if value == getattr(module, "NVML_ERROR_LIBRARY_NOT_FOUND", None):
        return "library not found, no NVIDIA driver installed"
    if value == getattr(module, "NVML_ERROR_DRIVER_NOT_LOADED", None):
        return "driver not loaded"
    if value == getattr(module, "NVML_ERROR_NO_PERMISSION", None):
        return "no permission to read the GPUs"
    return str(exc) or type(exc).__name__


def _text(value: Any) -> str:
    # Older NVML bindings return bytes for names.
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int_attr(value: Any, name: str) -> int | None:
    field = getattr(value, name, None)
    return int(field) if isinstance(field, int) else None


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


async def run_periodic(
    sample: Callable[[], list[ObservedEvent]],
    emit: Callable[[ObservedEvent], None],
    interval: float,
    stop: asyncio.Event,
) -> None:
    """Call ``sample`` in a thread every ``interval`` seconds and ``emit`` its events, until ``stop``.

    The next call is armed only when the previous one finished (slow NVML or a loaded machine
    stretches the period instead of piling calls up); ``emit`` runs on the event loop.
    """
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        for event in await asyncio.to_thread(sample):
            emit(event)
        remaining = interval - (loop.time() - started)
        if remaining > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), remaining)
        else:
            await asyncio.sleep(0)  # let the loop breathe when sampling takes the whole interval
