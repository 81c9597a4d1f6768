"""Facts about this machine that decide how much memory the daemon really has.

The daemon sizes ``total_budget = "auto"`` from the host's ``MemTotal`` and ignores any cgroup
memory limit (docs/daemon-interface.md §0.4, §6.3), so inside a rented container it plans for RAM it will never
get and is OOM-killed. Everything here reads what the kernel actually enforces: the host's
``/proc/meminfo``, the memory cgroup of a process (v1 or v2, the smallest limit on the path up
to the hierarchy's root), the memlock limit that caps pinned memory, and the CPUs this process
may use. Every reader takes its roots as arguments so the v2 paths, which this machine cannot
exercise, are tested against fixture directories.

:class:`MemoryCgroup` creates and removes the memory cgroup the supervisor runs a daemon in;
:func:`memprobe` measures what a child process can truly allocate; :func:`kernel_oom_evidence`
looks for the kernel's own word that a process was OOM-killed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal

from .units import GiB, format_size

PROC: Final = Path("/proc")
CGROUP: Final = Path("/sys/fs/cgroup")
KMSG: Final = Path("/dev/kmsg")

# cgroup v1 writes "no limit" as LONG_MAX rounded down to the page size (9223372036854771712
# with 4 KiB pages); anything this large is no limit on any real machine.
_V1_UNLIMITED_FLOOR: Final = 1 << 62

CgroupVersion = Literal[1, 2]


class CgroupError(Exception):
    """A memory cgroup could not be created, changed or removed; the message says why."""


# --------------------------------------------------------------------------------------------
# /proc/meminfo
# --------------------------------------------------------------------------------------------


def read_meminfo(proc_root: Path = PROC) -> dict[str, int]:
    """``/proc/meminfo`` as bytes per field (the kernel writes kB, meaning KiB)."""
    fields: dict[str, int] = {}
    for line in (proc_root / "meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name.strip()] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return fields


def host_mem_total(proc_root: Path = PROC) -> int:
    """The host's MemTotal in bytes: what the daemon's ``total_budget = "auto"`` starts from."""
    return read_meminfo(proc_root)["MemTotal"]


# --------------------------------------------------------------------------------------------
# cgroups
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CgroupMemory:
    """The memory cgroup a process is in, and what it enforces.

    ``limit_bytes`` is the effective limit: the smallest on the path from this group up to the
    hierarchy's root (a parent's limit binds the child too); None when nothing limits it.
    """

    version: CgroupVersion
    path: Path
    limit_bytes: int | None
    usage_bytes: int | None
    oom_kills: int | None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _read_keyed(path: Path, key: str) -> int | None:
    """The value of ``key`` in a flat keyed file such as ``memory.events`` or ``memory.oom_control``."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _v2_mount(cgroup_root: Path) -> Path | None:
    """Where the unified (v2) hierarchy is mounted: the root itself, or ``unified/`` on hybrid hosts."""
    for mount in (cgroup_root, cgroup_root / "unified"):
        if (mount / "cgroup.controllers").is_file():
            return mount
    return None


def _v2_controls(mount: Path, controller: str) -> bool:
    try:
        return controller in (mount / "cgroup.controllers").read_text().split()
    except OSError:
        return False


def _v1_mount(cgroup_root: Path, controllers: Sequence[str], controller: str) -> Path | None:
    """A v1 hierarchy is mounted under its controller name or the comma-joined list ("cpu,cpuacct")."""
    for name in (controller, ",".join(controllers)):
        if (cgroup_root / name).is_dir():
            return cgroup_root / name
    return None


def cgroup_dir(
    pid: int | str, controller: str, *, proc_root: Path = PROC, cgroup_root: Path = CGROUP
) -> tuple[CgroupVersion, Path, Path] | None:
    """(version, the group's directory, the hierarchy's mount) for ``controller`` of a process.

    A v1 hierarchy carrying the controller wins over v2 (hybrid hosts keep memory on v1). When the
    path listed in ``/proc/<pid>/cgroup`` does not exist under the mount (a container without
    a cgroup namespace sees its own group as the mount root), the mount root is the group.
    None when the process is gone or no hierarchy carries the controller.
    """
    try:
        lines = (proc_root / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    v2_relative: str | None = None
    for line in lines:
        _, controllers_text, relative = line.split(":", 2)
        if not controllers_text:
            v2_relative = relative
            continue
        controllers = controllers_text.split(",")
        if controller in controllers:
            mount = _v1_mount(cgroup_root, controllers, controller)
            if mount is not None:
                return 1, _resolve(mount, relative), mount
    mount = _v2_mount(cgroup_root)
    if v2_relative is not None and mount is not None and _v2_controls(mount, controller):
        return 2, _resolve(mount, v2_relative), mount
    return None


def _resolve(mount: Path, relative: str) -> Path:
    candidate = mount / relative.lstrip("/")
    return candidate if candidate.is_dir() else mount


def _memory_limit(version: CgroupVersion, path: Path) -> int | None:
    if version == 1:
        value = _read_int(path / "memory.limit_in_bytes")
        return None if value is None or value >= _V1_UNLIMITED_FLOOR else value
    # v2 writes "max" for no limit, which _read_int reads as None.
    return _read_int(path / "memory.max")


def _effective_limit(version: CgroupVersion, path: Path) -> int | None:
    """The smallest limit from ``path`` up to the hierarchy's root.

    The walk stops where the limit file ends: a v2 root has no ``memory.max`` and the directory
    above a v1 mount has no ``memory.limit_in_bytes``.
    """
    limit_file = "memory.limit_in_bytes" if version == 1 else "memory.max"
    limits: list[int] = []
    current = path
    while (current / limit_file).exists():
        limit = _memory_limit(version, current)
        if limit is not None:
            limits.append(limit)
        if current.parent == current:
            break
        current = current.parent
    return min(limits) if limits else None


def cgroup_version_of(path: Path) -> CgroupVersion:
    """Which cgroup version a memory cgroup directory belongs to (by the files it holds)."""
    return 1 if (path / "memory.limit_in_bytes").exists() else 2


def read_cgroup_memory(path: Path, version: CgroupVersion | None = None) -> CgroupMemory:
    """What a memory cgroup directory enforces: effective limit, usage, OOM kills so far."""
    version = cgroup_version_of(path) if version is None else version
    if version == 1:
        usage = _read_int(path / "memory.usage_in_bytes")
        ooms = _read_keyed(path / "memory.oom_control", "oom_kill")
    else:
        usage = _read_int(path / "memory.current")
        ooms = _read_keyed(path / "memory.events", "oom_kill")
    return CgroupMemory(version, path, _effective_limit(version, path), usage, ooms)


def memory_cgroup_of(
    pid: int | str = "self", *, proc_root: Path = PROC, cgroup_root: Path = CGROUP
) -> CgroupMemory | None:
    """The memory cgroup of a process and its effective limit; None without a memory controller."""
    found = cgroup_dir(pid, "memory", proc_root=proc_root, cgroup_root=cgroup_root)
    if found is None:
        return None
    version, path, _ = found
    return read_cgroup_memory(path, version)


def effective_ram(pid: int | str = "self", *, proc_root: Path = PROC, cgroup_root: Path = CGROUP) -> int:
    """The RAM a process can really use: the smaller of MemTotal and its cgroup's effective limit."""
    total = host_mem_total(proc_root)
    cgroup = memory_cgroup_of(pid, proc_root=proc_root, cgroup_root=cgroup_root)
    if cgroup is None or cgroup.limit_bytes is None:
        return total
    return min(total, cgroup.limit_bytes)


# --------------------------------------------------------------------------------------------
# CPUs and memlock
# --------------------------------------------------------------------------------------------


def cpu_count() -> int:
    """CPUs this process may run on (affinity, as the daemon's rayon pool counts them)."""
    return len(os.sched_getaffinity(0))


def cpu_quota(pid: int | str = "self", *, proc_root: Path = PROC, cgroup_root: Path = CGROUP) -> float | None:
    """The cgroup CPU quota in CPUs (e.g. 4.0 for "400000 100000"); None when unlimited or unknown."""
    found = cgroup_dir(pid, "cpu", proc_root=proc_root, cgroup_root=cgroup_root)
    if found is None:
        return None
    version, path, _ = found
    if version == 1:
        quota = _read_signed(path / "cpu.cfs_quota_us")
        period = _read_int(path / "cpu.cfs_period_us")
    else:
        try:
            quota_text, period_text = (path / "cpu.max").read_text().split()
        except (OSError, ValueError):
            return None
        quota = int(quota_text) if quota_text.isdigit() else None
        period = int(period_text) if period_text.isdigit() else None
    if quota is None or quota <= 0 or not period:
        return None
    return quota / period


def _read_signed(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def memlock_limit() -> int | None:
    """The soft RLIMIT_MEMLOCK in bytes (caps CUDA pinned host memory); None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else soft


# --------------------------------------------------------------------------------------------
# A memory cgroup of our own
# --------------------------------------------------------------------------------------------


class MemoryCgroup:
    """A memory cgroup directory: the supervisor runs the daemon in one to impose a limit.

    Swap is disabled in groups we create, so exceeding the limit ends in an OOM kill, as it does
    in the containers we imitate, rather than in minutes of swapping.
    """

    def __init__(self, path: Path, version: CgroupVersion) -> None:
        self.path = path
        self.version: CgroupVersion = version

    @classmethod
    def at(cls, path: Path) -> MemoryCgroup:
        """An existing group (e.g. one left behind by a crashed run, to remove it)."""
        return cls(path, cgroup_version_of(path))

    @classmethod
    def create(cls, name: str, limit_bytes: int, *, cgroup_root: Path = CGROUP, proc_root: Path = PROC) -> MemoryCgroup:
        """A new group ``name`` limited to ``limit_bytes``, nested in our own memory cgroup.

        It is made inside the memory cgroup of this process, so any limit the container already
        imposes still binds it and the host's accounting of us stays whole.
        """
        if not name or "/" in name or name in (".", ".."):
            raise CgroupError(f"invalid cgroup name {name!r}: use one path component")
        if limit_bytes <= 0:
            raise CgroupError(f"memory limit must be positive, got {limit_bytes}")
        if os.geteuid() != 0:
            raise CgroupError("creating a memory cgroup needs root (run as root or without --memory-limit)")
        found = cgroup_dir("self", "memory", proc_root=proc_root, cgroup_root=cgroup_root)
        if found is None:
            raise CgroupError(f"no memory cgroup controller under {cgroup_root} (neither v1 nor v2)")
        version, parent, _ = found
        if version == 2:
            _enable_v2_memory(parent)
        group = cls(parent / name, version)
        try:
            group.path.mkdir()
        except FileExistsError:
            raise CgroupError(f"{group.path} already exists (left by an earlier run? remove it first)") from None
        except OSError as exc:
            raise CgroupError(f"cannot create {group.path}: {exc.strerror}") from None
        try:
            group._set_limit(limit_bytes)
        except OSError as exc:
            group.remove()
            raise CgroupError(f"cannot set the memory limit of {group.path}: {exc.strerror}") from None
        return group

    def _set_limit(self, limit_bytes: int) -> None:
        if self.version == 1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            memsw = self.path / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(str(limit_bytes))
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def add_pid(self, pid: int) -> None:
        try:
            self.procs_file.write_text(str(pid))
        except OSError as exc:
            raise CgroupError(f"cannot move pid {pid} into {self.path}: {exc.strerror}") from None

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in self.procs_file.read_text().split()]
        except FileNotFoundError:
            return []

    def usage_bytes(self) -> int | None:
        return read_cgroup_memory(self.path, self.version).usage_bytes

    def limit_bytes(self) -> int | None:
        return _memory_limit(self.version, self.path)

    def peak_bytes(self) -> int | None:
        """The group's memory high-water mark (v1 memory.max_usage_in_bytes, v2 memory.peak where the
        kernel has it): the peak that samples taken a second apart can miss."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return _read_int(self.path / name)

    def oom_kill_count(self) -> int:
        """OOM kills inside this group so far (0 when the kernel does not count them)."""
        return read_cgroup_memory(self.path, self.version).oom_kills or 0

    def remove(self, timeout: float = 5.0) -> None:
        """SIGKILL whatever still runs in the group, wait for it to empty, rmdir it. Idempotent.

        Everything in a group we created is ours (the daemon and its children), so killing is
        the right end for leftovers; CgroupError when it will not empty within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while self.path.exists():
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise CgroupError(
                        f"cannot remove {self.path}: {exc.strerror} (pids still inside: {self.pids()})"
                    ) from None
            time.sleep(0.02)

    def __repr__(self) -> str:
        return f"MemoryCgroup({str(self.path)!r}, version={self.version})"


def _enable_v2_memory(parent: Path) -> None:
    control = parent / "cgroup.subtree_control"
    try:
        if "memory" in control.read_text().split():
            return
        control.write_text("+memory")
    except OSError as exc:
        raise CgroupError(
            f"cannot enable the v2 memory controller for children of {parent}: {exc.strerror} "
            "(a v2 group with processes of its own cannot delegate controllers)"
        ) from None


# --------------------------------------------------------------------------------------------
# The kernel's word on an OOM kill
# --------------------------------------------------------------------------------------------


def kernel_oom_evidence(
    pids: Collection[int], *, dmesg: Sequence[str] | None = ("dmesg",), kmsg_path: Path = KMSG
) -> str | None:
    """The kernel log lines saying one of ``pids`` was OOM-killed, or None. Best effort; never raises.

    The kernel names the process it killed: the daemon, or the process of its that held the memory (an
    engine's box, engine/box.py). Tries ``dmesg`` first, then reads ``/dev/kmsg`` without blocking (both
    usually need root or ``kernel.dmesg_restrict = 0``).
    """
    if not pids:
        return None
    text = _dmesg_text(dmesg) if dmesg else None
    if text is None:
        text = _kmsg_text(kmsg_path)
    if text is None:
        return None
    pid = "|".join(str(p) for p in sorted(pids))
    killed = re.compile(rf"Killed process (?:{pid})\b|oom-kill:.*\bpid=(?:{pid})\b")
    lines = [line.strip() for line in text.splitlines() if killed.search(line)]
    return "\n".join(lines) if lines else None


def _dmesg_text(command: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=5, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _kmsg_text(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    records: list[str] = []
    try:
        # /dev/kmsg hands out one record per read and EAGAIN at the end of the buffer.
        while True:
            try:
                data = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record was overwritten while we read: skip it
                    continue
                break
            if not data:
                break
            records.append(data.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    return "".join(records)


# --------------------------------------------------------------------------------------------
# memprobe: what a child can truly allocate
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """How much a child process allocated and touched before stopping (or being killed)."""

    allocated_bytes: int
    target_bytes: int
    limit_source: str
    chunk_bytes: int
    reached_target: bool
    killed: bool
    returncode: int | None
    evidence: str | None
    elapsed_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) of the result, for the command's text and the Memcheck screen alike."""
        outcome = (
            "reached the target"
            if self.reached_target
            else "was OOM-killed"
            if self.killed
            else f"stopped early (exit status {self.returncode})"
        )
        rows = [
            ("allocated", f"{format_size(self.allocated_bytes)} in {format_size(self.chunk_bytes)} chunks"),
            ("target", f"{format_size(self.target_bytes)} ({self.limit_source}, less the safety distance)"),
            ("outcome", f"the child {outcome} after {self.elapsed_s:.1f} s"),
        ]
        if self.evidence:
            rows.append(("evidence", self.evidence))
        return rows


# Called as the probe goes: (bytes allocated so far, the target), the target first with 0 allocated.
ProbeProgress = Callable[[int, int], None]


# The child reads its own room (it may be in a cgroup the parent is not in), then allocates
# and touches chunks, reporting each one on stdout so the parent knows the total even if the
# child is killed half way. Writing to every page is what makes the kernel charge it.
_CHILD = """
import sys
from cuzktui.system import _probe_room
chunk, safety, override = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
room, source = _probe_room(override if override >= 0 else None)
target = max(0, room - safety)
print("target", target, source, flush=True)
held = []
while (len(held) + 1) * chunk <= target:
    held.append(b"\\x01" * chunk)
    print("allocated", len(held) * chunk, flush=True)
print("done", flush=True)
"""


def _probe_room(limit_override: int | None = None) -> tuple[int, str]:
    """(bytes this process may still allocate, where that figure comes from)."""
    if limit_override is not None:
        return limit_override, "given limit"
    available = read_meminfo().get("MemAvailable", 0)
    room, source = available, "MemAvailable"
    cgroup = memory_cgroup_of()
    if cgroup is not None and cgroup.limit_bytes is not None and cgroup.usage_bytes is not None:
        cgroup_room = cgroup.limit_bytes - cgroup.usage_bytes
        if cgroup_room < room:
            room, source = cgroup_room, f"cgroup v{cgroup.version} {cgroup.path} limit - usage"
    return room, source


def memprobe(
    chunk_bytes: int = GiB,
    safety_bytes: int = 2 * GiB,
    *,
    cgroup: MemoryCgroup | None = None,
    limit_override: int | None = None,
    timeout: float = 600.0,
    on_progress: ProbeProgress | None = None,
) -> ProbeResult:
    """Allocate ``chunk_bytes`` chunks in a child until within ``safety_bytes`` of the room left.

    The room is the cgroup limit minus usage or MemAvailable, whichever is smaller, as the
    child sees it (``limit_override`` replaces it, for tests and what-ifs). With ``cgroup`` the
    child runs inside that group from its start (through :mod:`cuzktui.cgexec`). The parent
    survives the child's OOM kill and reports it, with the kernel's evidence where readable.
    """
    if chunk_bytes <= 0:
        raise ValueError(f"chunk size must be positive, got {chunk_bytes}")
    override = -1 if limit_override is None else limit_override
    command = [sys.executable, "-c", _CHILD, str(chunk_bytes), str(safety_bytes), str(override)]
    if cgroup is not None:
        command = [sys.executable, "-m", "cuzktui.cgexec", str(cgroup.path), "--", *command]
    ooms_before = cgroup.oom_kill_count() if cgroup is not None else 0
    started = time.monotonic()
    allocated, target, source, done = 0, 0, "unknown", False
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None  # stdout=PIPE
        # A child stuck in reclaim never closes its stdout; the timer ends it so we never hang.
        watchdog = threading.Timer(timeout, child.kill)
        watchdog.start()
        try:
            for line in child.stdout:
                word, *rest = line.split(maxsplit=2)
                if word == "target":
                    target, source = int(rest[0]), rest[1].strip()
                elif word == "allocated":
                    allocated = int(rest[0])
                elif word == "done":
                    done = True
                if on_progress is not None and word in ("target", "allocated"):
                    # 30-60 s on a large box: whoever started it sees how far it is.
                    on_progress(allocated, target)
            returncode = child.wait()
        finally:
            watchdog.cancel()
    killed = returncode == -signal.SIGKILL
    evidence: list[str] = []
    if cgroup is not None and cgroup.oom_kill_count() > ooms_before:
        evidence.append(f"{cgroup.path}: oom_kill {cgroup.oom_kill_count()}")
    if killed:
        kernel = kernel_oom_evidence((child.pid,))
        evidence.append(kernel or f"child {child.pid} was killed by SIGKILL")
    return ProbeResult(
        allocated_bytes=allocated,
        target_bytes=target,
        limit_source=source,
        chunk_bytes=chunk_bytes,
        reached_target=done and returncode == 0,
        killed=killed,
        returncode=returncode,
        evidence="\n".join(evidence) or None,
        elapsed_s=round(time.monotonic() - started, 3),
    )
