"""``cuzk-tui memcheck`` and ``memprobe`` through the CLI contract (never allocating gigabytes)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cuzktui import cli
from cuzktui.commands import memcheck
from cuzktui.system import CgroupError, MemoryCgroup, ProbeResult

MiB = 1 << 20


def test_memcheck_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["memcheck"]) == 0
    out = capsys.readouterr().out
    for words in ("effective RAM", "host MemTotal", 'budget "auto"', "recommended knobs:", "[memory] total_budget"):
        assert words in out


def test_memcheck_json_is_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["memcheck", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["effective_ram_bytes"] <= data["host_mem_total_bytes"]
    assert data["auto_budget_bytes"] == data["host_mem_total_bytes"] - 5 * 1024 * MiB
    assert isinstance(data["warnings"], list) and isinstance(data["gpu_state"], str)


def test_memcheck_judges_the_given_configs_margin_and_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cuzk.toml"
    path.write_text('[memory]\ntotal_budget = "64GiB"\nsafety_margin = "7GiB"\n')
    assert cli.main(["memcheck", "--json", "--config", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["safety_margin_bytes"] == 7 * 1024 * MiB
    assert data["auto_budget_bytes"] == max(0, data["host_mem_total_bytes"] - 7 * 1024 * MiB)
    assert any('configured total_budget "64GiB": 64 GiB can never prove WindowPoSt' in w for w in data["warnings"])


def test_memcheck_failure_is_a_message_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", "/proc/meminfo")

    monkeypatch.setattr(memcheck, "memcheck_for", broken)
    assert cli.main(["memcheck", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "memcheck: cannot read" in captured.err and "/proc/meminfo" in captured.err


def test_memcheck_warns_about_a_config_listening_on_every_interface(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "cuzk.toml"
    config.write_text('[daemon]\nlisten = "0.0.0.0:9820"\n')
    assert cli.main(["memcheck", "--config", str(config)]) == 0
    assert "0.0.0.0:9820" in capsys.readouterr().out
    assert cli.main(["memcheck", "--config", str(tmp_path / "missing.toml")]) == 1
    assert "missing.toml" in capsys.readouterr().err


_KILLED = ProbeResult(
    allocated_bytes=240 * MiB,
    target_bytes=1024 * MiB,
    limit_source="given limit",
    chunk_bytes=16 * MiB,
    reached_target=False,
    killed=True,
    returncode=-9,
    evidence="/sys/fs/cgroup/memory/x: oom_kill 1\nMemory cgroup out of memory: Killed process 42 (python)",
    elapsed_s=0.4,
)


def test_memprobe_text_and_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(memcheck, "memprobe", lambda **_: _KILLED)
    assert cli.main(["memprobe"]) == 0
    out = capsys.readouterr().out
    assert "allocated    240 MiB in 16 MiB chunks" in out
    assert "was OOM-killed" in out
    assert "Killed process 42" in out
    assert cli.main(["memprobe", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == _KILLED.to_json()


def test_memprobe_failure_is_exit_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(**_: object) -> ProbeResult:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(memcheck, "memprobe", broken)
    assert cli.main(["memprobe", "--json"]) == 1
    assert "memprobe:" in capsys.readouterr().err


@pytest.mark.cgroup
def test_memprobe_command_inside_a_small_cgroup() -> None:
    # Inside 256 MiB the 1 GiB chunks and 2 GiB safety distance leave no room: nothing is allocated.
    try:
        group = MemoryCgroup.create(f"cuzktui-cli-{uuid.uuid4().hex[:8]}", 256 * MiB)
    except CgroupError as exc:
        pytest.skip(f"no writable memory cgroup: {exc}")
    try:
        command = [sys.executable, "-m", "cuzktui.cgexec", str(group.path), "--"]
        command += [sys.executable, "-m", "cuzktui.cli", "memprobe", "--json"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    finally:
        group.remove()
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["allocated_bytes"] == 0 and data["target_bytes"] == 0
    assert data["reached_target"] is True
    assert group.path.name in data["limit_source"]
