"""A recorded session's comparison figures, read headless from its files."""

from __future__ import annotations

from pathlib import Path

from cuzktui import events as ev
from cuzktui.comparison import killed_rss_bytes, summarize
from cuzktui.config import build_config
from cuzktui.session import SessionInfo, SessionWriter, read_session_info
from cuzktui.units import GiB

T0 = 1_767_225_600.0


def recorded(path: Path, events: list[ev.ObservedEvent], budgets: list[str]) -> Path:
    writer = SessionWriter(path)
    writer.write_meta({"label": path.name, "created": T0, "mode": "engine"})
    for budget in budgets:
        writer.add_config_version(build_config({"memory.total_budget": budget}))
    for event in events:
        writer.append_event(event)
    writer.close()
    return path


def test_counts_proofs_kills_restarts_and_takes_the_last_config_version(tmp_path: Path) -> None:
    events: list[ev.ObservedEvent] = [
        ev.BenchStarted(T0, "b1", "porep", 3, 1, 3),
        ev.ProofFinished(T0 + 60, "b1", "porep-1", "porep", "COMPLETED"),
        ev.DaemonExited(T0 + 90, 10, None, 9, "oom_kill", ("exit 137",)),
        ev.ProofFinished(T0 + 90, "b1", "porep-2", "porep", "LOST", "broken pipe"),
        ev.BenchRestart(T0 + 91, "b1", 1, "oom_kill", ("exit 137",), "150GiB", 1),
        ev.ProofFinished(T0 + 200, "b1", "porep-2", "porep", "COMPLETED"),
        ev.ProofFinished(T0 + 260, "b1", "porep-3", "porep", "FAILED", "C1 parse failed: x"),
        ev.MemorySample(T0 + 80, 200 * GiB, cgroup_limit_bytes=256 * GiB),
        ev.MemorySample(T0 + 85, 250 * GiB, cgroup_limit_bytes=256 * GiB),
        ev.BenchFinished(T0 + 261, "b1", 2, 1, 261.0, 27.6, "completed"),
    ]
    info = read_session_info(recorded(tmp_path / "s", events, ["200GiB", "150GiB"]))
    assert info is not None
    summary = summarize(info)
    assert (summary.completed, summary.failed) == (2, 2)  # a proof lost with the daemon counts as failed
    assert (summary.oom_kills, summary.restarts, summary.proofs_per_hour) == (1, 1, 27.6)
    # The OOM kill's evidence has no kernel line: the kill says the cgroup reached its limit.
    assert (summary.peak_rss_bytes, summary.limit_bytes, summary.peak_at_least) == (256 * GiB, 256 * GiB, True)
    assert summary.config_name == "v002.toml"
    assert summary.config is not None and summary.config.effective()["memory.total_budget"] == "150GiB"


def test_a_session_without_samples_or_configs_says_so(tmp_path: Path) -> None:
    info = read_session_info(recorded(tmp_path / "empty", [], []))
    assert info is not None
    summary = summarize(info)
    assert (summary.completed, summary.peak_rss_bytes, summary.proofs_per_hour) == (0, None, None)
    assert (summary.config, summary.config_name) == (None, "no config recorded")


KILLED = (
    "Memory cgroup out of memory: Killed process 4242 (cuzk-daemon) total-vm:279920kB, anon-rss:261248kB, "
    "file-rss:6148kB"
)


def test_the_kernel_s_rss_at_an_oom_kill_is_the_peak_when_the_samples_missed_it(tmp_path: Path) -> None:
    assert killed_rss_bytes(("exit 137", KILLED)) == (261248 + 6148) * 1024
    assert killed_rss_bytes(("exit 137", "memory cgroup oom_kill 0 → 1 (/sys/fs/cgroup/memory/x)")) is None
    events: list[ev.ObservedEvent] = [
        ev.DaemonLaunched(T0, "engine", 4242, (), None, "x", None, memory_limit_bytes=GiB, memory_scale=1 / 256),
        ev.MemorySample(T0 + 1, 200 * 1024 * 1024),
        ev.DaemonExited(T0 + 2, 4242, -9, 9, "oom_kill", ("exit 137", KILLED)),
    ]
    summary = summarize(_info(recorded(tmp_path / "s", events, ["auto"])))
    assert summary.peak_rss_bytes == (261248 + 6148) * 1024 * 256  # in the emulated box's bytes
    assert summary.peak_source == "the kernel's RSS at the OOM kill" and not summary.peak_at_least


def test_the_cgroup_high_water_mark_counts_and_the_box_ram_flags_a_peak_above_it(tmp_path: Path) -> None:
    events: list[ev.ObservedEvent] = [ev.MemorySample(T0 + 1, 100 * GiB)]
    path = recorded(tmp_path / "s", events, ["auto"])
    writer = SessionWriter(path)
    writer.write_meta({"cgroup_peak_bytes": 140 * GiB, "memcheck": {"host_mem_total_bytes": 128 * GiB}})
    writer.close()
    summary = summarize(_info(path))
    assert (summary.peak_rss_bytes, summary.peak_source) == (140 * GiB, "the cgroup's high-water mark")
    assert summary.box_ram_bytes == 128 * GiB and summary.over_box_ram
    assert summary.title == "2026-01-01 00:00 · s · v001.toml"


def _info(path: Path) -> SessionInfo:
    info = read_session_info(path)
    assert info is not None
    return info
