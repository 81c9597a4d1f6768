"""A real v1 memory cgroup (root on this machine): create, limit, join, OOM-kill, probe, remove.

Every group is made by the ``group`` fixture, which removes it again even when the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuzktui import cgexec
from cuzktui.system import CgroupError, MemoryCgroup, memprobe

MiB = 1 << 20
LIMIT = 256 * MiB


def _can_make_groups() -> str | None:
    """Why real cgroup tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root"
    try:
        probe = MemoryCgroup.create(f"cuzktui-can-{uuid.uuid4().hex[:8]}", LIMIT)
    except CgroupError as exc:
        return str(exc)
    probe.remove()
    return None


_WHY_NOT = _can_make_groups()
needs_cgroup = pytest.mark.skipif(_WHY_NOT is not None, reason=f"no writable memory cgroup: {_WHY_NOT}")


@pytest.fixture
def group() -> Iterator[MemoryCgroup]:
    made = MemoryCgroup.create(f"cuzktui-test-{uuid.uuid4().hex[:8]}", LIMIT)
    try:
        yield made
    finally:
        made.remove()


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _in_group(made: MemoryCgroup, code: str) -> list[str]:
    return [sys.executable, "-m", "cuzktui.cgexec", str(made.path), "--", *_python(code)]


# Allocate and touch 1 MiB at a time, forever: only the limit ends it.
_HOG = "held = []\nwhile True:\n    held.append(b'x' * (1 << 20))\n"


@pytest.mark.cgroup
@needs_cgroup
def test_create_sets_the_limit_and_remove_deletes_it(group: MemoryCgroup) -> None:
    assert group.path.is_dir()
    assert group.limit_bytes() == LIMIT
    assert group.pids() == []
    assert group.oom_kill_count() == 0
    group.remove()
    assert not group.path.exists()
    group.remove()  # idempotent


@pytest.mark.cgroup
@needs_cgroup
def test_remove_kills_what_is_left_inside(group: MemoryCgroup) -> None:
    # v1 charges a page to the group it is faulted in, and moving a task does not move its
    # charges: the child touches its memory only once it is inside, so usage cannot read 0.
    touch_when_told = (
        "import sys; sys.stdin.readline(); data = b'x' * (8 << 20); print('ready', flush=True); sys.stdin.read()"
    )
    with subprocess.Popen(_python(touch_when_told), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdin is not None and child.stdout is not None
        group.add_pid(child.pid)
        assert group.pids() == [child.pid]
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ready"
        assert (group.usage_bytes() or 0) >= 8 << 20
        group.remove(timeout=5)
        assert child.wait(timeout=5) == -9
    assert not group.path.exists()


@pytest.mark.cgroup
@needs_cgroup
def test_cgexec_runs_the_program_inside_the_group_under_its_own_pid(group: MemoryCgroup) -> None:
    code = "import os; print(os.getpid()); print(open('/proc/self/cgroup').read())"
    with subprocess.Popen(_in_group(group, code), stdout=subprocess.PIPE, text=True) as child:
        out, _ = child.communicate(timeout=30)
    pid_line, cgroups = out.split("\n", 1)
    assert int(pid_line) == child.pid  # exec kept the pid the parent holds
    memory_line = next(line for line in cgroups.splitlines() if ":memory:" in line)
    assert memory_line.endswith("/" + group.path.name)
    assert child.returncode == 0


@pytest.mark.cgroup
@needs_cgroup
def test_over_the_limit_the_kernel_kills_with_sigkill_and_counts_it(group: MemoryCgroup) -> None:
    done = subprocess.run(_in_group(group, _HOG), timeout=60, check=False)
    assert done.returncode == -9
    assert group.oom_kill_count() == 1


@pytest.mark.cgroup
@needs_cgroup
def test_memprobe_inside_the_group_reaches_its_target(group: MemoryCgroup) -> None:
    result = memprobe(chunk_bytes=16 * MiB, safety_bytes=32 * MiB, cgroup=group)
    assert str(group.path) in result.limit_source
    assert result.reached_target and not result.killed
    assert result.target_bytes <= LIMIT - 32 * MiB
    assert result.target_bytes - 16 * MiB < result.allocated_bytes <= result.target_bytes


@pytest.mark.cgroup
@needs_cgroup
def test_memprobe_survives_its_child_being_oom_killed(group: MemoryCgroup) -> None:
    # Told it has 1 GiB, the child runs into the group's 256 MiB limit and is killed.
    result = memprobe(chunk_bytes=16 * MiB, safety_bytes=0, cgroup=group, limit_override=1024 * MiB)
    assert result.killed and not result.reached_target
    assert result.returncode == -9
    assert 0 < result.allocated_bytes < LIMIT
    assert result.evidence is not None and "oom_kill 1" in result.evidence


def test_cgexec_usage_and_missing_program(tmp_path: Path) -> None:
    assert cgexec.main(["only-a-dir"]) == 125
    (tmp_path / "cgroup.procs").write_text("")
    assert cgexec.main([str(tmp_path), "--", "/nonexistent/program"]) == 127
    assert cgexec.main([str(tmp_path / "missing"), "--", "true"]) == 125


def test_create_refuses_bad_names_and_missing_controllers(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="invalid cgroup name"):
        MemoryCgroup.create("a/b", LIMIT)
    with pytest.raises(CgroupError, match="must be positive"):
        MemoryCgroup.create("x", 0)
    if os.geteuid() != 0:
        pytest.skip("the controller check comes after the root check")
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/\n")
    with pytest.raises(CgroupError, match="no memory cgroup controller"):
        MemoryCgroup.create("x", LIMIT, cgroup_root=tmp_path / "sys", proc_root=tmp_path / "proc")


@pytest.mark.cgroup
@needs_cgroup
def test_create_refuses_an_existing_group(group: MemoryCgroup) -> None:
    with pytest.raises(CgroupError, match="already exists"):
        MemoryCgroup.create(group.path.name, LIMIT)


def test_memprobe_reports_its_progress_as_it_allocates() -> None:
    # Told it has 8 MiB (no cgroup, nothing near this machine's limits): the target, then each 2 MiB chunk.
    seen: list[tuple[int, int]] = []
    result = memprobe(
        chunk_bytes=2 * MiB, safety_bytes=0, limit_override=8 * MiB, on_progress=lambda *p: seen.append(p)
    )
    assert result.reached_target and result.allocated_bytes == 8 * MiB
    assert seen == [(0, 8 * MiB), *((n * 2 * MiB, 8 * MiB) for n in range(1, 5))]
    labels = [label for label, _ in result.rows()]
    assert labels == ["allocated", "target", "outcome"] and "reached the target" in result.rows()[2][1]
