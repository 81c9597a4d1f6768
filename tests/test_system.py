"""Machine facts read from fixture trees: cgroup v1 and v2 limits, MemTotal, CPU quota, OOM evidence."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pytest

from cuzktui import system
from cuzktui.units import GiB

DATA = Path(__file__).parent / "data" / "cgroup"
V1, V2 = DATA / "v1", DATA / "v2"


def test_meminfo_is_read_in_bytes() -> None:
    assert system.host_mem_total(V2 / "proc") == 528280960 * 1024
    assert system.read_meminfo(V2 / "proc")["MemAvailable"] == 510000000 * 1024
    assert "HugePages_Total" in system.read_meminfo(V2 / "proc")


def test_v2_limit_is_the_smallest_on_the_path_to_the_root() -> None:
    cgroup = system.memory_cgroup_of(1234, proc_root=V2 / "proc", cgroup_root=V2 / "sys")
    assert cgroup is not None
    assert cgroup.version == 2
    assert cgroup.path == V2 / "sys" / "kubepods" / "pod1" / "ctr"
    # The container's own memory.max says "max"; its pod's 64 GiB binds it.
    assert cgroup.limit_bytes == 64 * GiB
    assert cgroup.usage_bytes == 20 * GiB
    assert cgroup.oom_kills == 3


def test_v2_group_outside_our_namespace_falls_back_to_the_mount_root() -> None:
    cgroup = system.memory_cgroup_of(77, proc_root=V2 / "proc", cgroup_root=V2 / "sys")
    assert cgroup is not None
    assert cgroup.path == V2 / "sys"
    assert cgroup.limit_bytes is None


def test_v1_limit_usage_and_oom_kills() -> None:
    cgroup = system.memory_cgroup_of(1234, proc_root=V1 / "proc", cgroup_root=V1 / "sys")
    assert cgroup is not None
    assert cgroup.version == 1
    assert cgroup.path == V1 / "sys" / "memory" / "docker" / "abc"
    assert cgroup.limit_bytes == 32 * GiB
    assert cgroup.usage_bytes == GiB
    assert cgroup.oom_kills == 2


def test_v1_huge_limit_means_no_limit() -> None:
    cgroup = system.memory_cgroup_of(99, proc_root=V1 / "proc", cgroup_root=V1 / "sys")
    assert cgroup is not None
    assert cgroup.limit_bytes is None


def test_effective_ram_is_the_smaller_of_memtotal_and_the_cgroup_limit() -> None:
    assert system.effective_ram(1234, proc_root=V1 / "proc", cgroup_root=V1 / "sys") == 32 * GiB
    assert system.effective_ram(99, proc_root=V1 / "proc", cgroup_root=V1 / "sys") == 263790592 * 1024
    assert system.effective_ram(1234, proc_root=V2 / "proc", cgroup_root=V2 / "sys") == 64 * GiB


def test_gone_process_has_no_cgroup() -> None:
    assert system.memory_cgroup_of(5, proc_root=V1 / "proc", cgroup_root=V1 / "sys") is None


def test_no_memory_controller_anywhere(tmp_path: Path) -> None:
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/\n")
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "cgroup.controllers").write_text("cpu pids\n")
    assert system.memory_cgroup_of(1, proc_root=tmp_path / "proc", cgroup_root=tmp_path / "sys") is None


def test_cpu_quota_v1_and_v2() -> None:
    assert system.cpu_quota(1234, proc_root=V1 / "proc", cgroup_root=V1 / "sys") == 2.0
    assert system.cpu_quota(99, proc_root=V1 / "proc", cgroup_root=V1 / "sys") is None
    assert system.cpu_quota(1234, proc_root=V2 / "proc", cgroup_root=V2 / "sys") == 4.0
    assert system.cpu_quota(77, proc_root=V2 / "proc", cgroup_root=V2 / "sys") is None


def test_this_machine_facts_are_consistent() -> None:
    assert system.cpu_count() >= 1
    assert 0 < system.effective_ram() <= system.host_mem_total()
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    assert system.memlock_limit() == (None if soft == resource.RLIM_INFINITY else soft)


def test_kernel_oom_evidence_finds_only_that_pid() -> None:
    kmsg = DATA / "kmsg.txt"
    evidence = system.kernel_oom_evidence((4242,), dmesg=None, kmsg_path=kmsg)
    assert evidence is not None
    lines = evidence.splitlines()
    assert len(lines) == 2
    assert "pid=4242" in lines[0]
    assert "Killed process 4242 (cuzk-daemon)" in lines[1]
    assert system.kernel_oom_evidence((424,), dmesg=None, kmsg_path=kmsg) is None


def test_kernel_oom_evidence_of_an_engine_names_its_box() -> None:
    """An engine's box (engine/box.py) is the process the kernel kills in its cgroup; the engine (5150)
    then kills itself, which the kernel never names."""
    kmsg = DATA / "kmsg.txt"
    assert system.kernel_oom_evidence((5150,), dmesg=None, kmsg_path=kmsg) is None
    evidence = system.kernel_oom_evidence({5150, 5151}, dmesg=None, kmsg_path=kmsg)
    assert evidence is not None
    lines = evidence.splitlines()
    assert len(lines) == 2 and "task=python3,pid=5151," in lines[0]
    assert "Memory cgroup out of memory: Killed process 5151 (python3)" in lines[1]
    assert system.kernel_oom_evidence((), dmesg=None, kmsg_path=kmsg) is None


def test_kernel_oom_evidence_prefers_dmesg_and_never_raises(tmp_path: Path) -> None:
    script = tmp_path / "fake_dmesg.py"
    script.write_text("print('[ 1.0] Memory cgroup out of memory: Killed process 7 (x) total-vm:1kB')\n")
    found = system.kernel_oom_evidence((7,), dmesg=(sys.executable, str(script)), kmsg_path=tmp_path / "none")
    assert found is not None and "Killed process 7 (x)" in found
    # Neither source readable: no evidence, no exception.
    assert system.kernel_oom_evidence((7,), dmesg=("/nonexistent/dmesg",), kmsg_path=tmp_path / "none") is None


def test_memprobe_with_a_given_limit_stops_at_the_safety_distance() -> None:
    mib = 1 << 20
    result = system.memprobe(chunk_bytes=4 * mib, safety_bytes=8 * mib, limit_override=30 * mib)
    assert result.limit_source == "given limit"
    assert result.target_bytes == 22 * mib
    assert result.allocated_bytes == 20 * mib  # five whole 4 MiB chunks fit under 22 MiB
    assert result.reached_target and not result.killed
    assert result.to_json()["allocated_bytes"] == 20 * mib


def test_memprobe_rejects_a_bad_chunk() -> None:
    with pytest.raises(ValueError, match="chunk size"):
        system.memprobe(chunk_bytes=0)
