"""A recorded session's comparison figures, read headless from its files."""

from __future__ import annotations

from pathlib import Path

from cuzktui import events as ev
from cuzktui.comparison import summarize
from cuzktui.config import build_config
from cuzktui.session import SessionWriter, read_session_info
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
    assert (summary.peak_rss_bytes, summary.limit_bytes) == (250 * GiB, 256 * GiB)
    assert summary.config_name == "v002.toml"
    assert summary.config is not None and summary.config.effective()["memory.total_budget"] == "150GiB"


def test_a_session_without_samples_or_configs_says_so(tmp_path: Path) -> None:
    info = read_session_info(recorded(tmp_path / "empty", [], []))
    assert info is not None
    summary = summarize(info)
    assert (summary.completed, summary.peak_rss_bytes, summary.proofs_per_hour) == (0, None, None)
    assert (summary.config, summary.config_name) == (None, "no config recorded")
