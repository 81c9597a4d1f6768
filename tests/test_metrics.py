"""The OpenMetrics endpoint's content, headless: the model's figures and the daemon's passed-through text."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cuzktui import events as ev
from cuzktui.logparse import parse_line
from cuzktui.metrics import MetricsExporter, exposure_warning, parse_metrics_address
from cuzktui.model import SessionModel
from cuzktui.retention import AgeError, expired, parse_age
from cuzktui.session import SessionInfo

GiB = 1 << 30


def daemon_text(completed: int, uptime: int) -> str:
    """GetMetrics text in service.rs ``get_metrics``'s format strings (one PoRep kind, a duration window)."""
    return (
        "# HELP cuzk_proofs_completed_total Total proofs completed\n"
        "# TYPE cuzk_proofs_completed_total counter\n"
        f"cuzk_proofs_completed_total {completed}\n"
        "# HELP cuzk_proofs_failed_total Total proofs failed\n"
        "# TYPE cuzk_proofs_failed_total counter\n"
        "cuzk_proofs_failed_total 0\n"
        "# HELP cuzk_uptime_seconds Daemon uptime\n"
        "# TYPE cuzk_uptime_seconds gauge\n"
        f"cuzk_uptime_seconds {uptime}\n"
        "# HELP cuzk_queue_depth Current queue depth\n"
        "# TYPE cuzk_queue_depth gauge\n"
        "cuzk_queue_depth 1\n"
        "# HELP cuzk_proofs_completed Per proof-kind completions\n"
        "# TYPE cuzk_proofs_completed counter\n"
        f'cuzk_proofs_completed{{proof_kind="porep_c2"}} {completed}\n'
        "# HELP cuzk_proofs_failed Per proof-kind failures\n"
        "# TYPE cuzk_proofs_failed counter\n"
        "# HELP cuzk_proof_duration_seconds Proof duration\n"
        "# TYPE cuzk_proof_duration_seconds summary\n"
        f'cuzk_proof_duration_seconds_count{{proof_kind="porep_c2"}} {completed}\n'
        f'cuzk_proof_duration_seconds_sum{{proof_kind="porep_c2"}} {completed * 61.5:.3f}\n'
        "# HELP cuzk_running_jobs Currently running proofs\n"
        "# TYPE cuzk_running_jobs gauge\n"
        "cuzk_running_jobs 1\n"
        "# HELP cuzk_gpu_workers Number of GPU workers\n"
        "# TYPE cuzk_gpu_workers gauge\n"
        "cuzk_gpu_workers 2\n"
    )


def launched(t: float, pid: int) -> ev.DaemonLaunched:
    return ev.DaemonLaunched(
        t, "real", pid, ("cuzk-daemon",), "/etc/cuzk.toml", "127.0.0.1:9820", None,
        status_url="http://127.0.0.1:9821/status", cgroup_path="/sys/fs/cgroup/memory/cuzk",
        memory_limit_bytes=256 * GiB,
    )  # fmt: skip


def status(t: float) -> ev.StatusSnapshot:
    return ev.StatusSnapshot(
        t, 12.0, 200 * GiB, 60 * GiB, 2, 1, 2, 3, 4, 0, srs_resident_bytes=45 * GiB, pce_resident_bytes=26 * GiB
    )


def scrape(exporter: MetricsExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Sample name and labels -> value, as Prometheus would read the OpenMetrics exposition."""
    text = generate_openmetrics(exporter.registry).decode()  # type: ignore[no-untyped-call]
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)  # type: ignore[no-untyped-call]
        for s in family.samples
    }


def a_box_that_was_oom_killed() -> SessionModel:
    model = SessionModel()
    model.apply_all(
        [
            launched(100.0, 10),
            ev.DaemonReadyObserved(101.0, 10, 1.0),
            ev.MemorySample(102.0, 250 * GiB, 251 * GiB, 256 * GiB),
            ev.DaemonExited(103.0, 10, -9, 9, "oom_kill", ("memory.oom_control oom_kill 1",)),
            launched(104.0, 11),
            ev.DaemonReadyObserved(105.0, 11, 1.0),
            ev.MemorySample(106.0, 120 * GiB, 121 * GiB, 256 * GiB),
            status(106.5),
            ev.GpuSample(106.0, 0, "NVIDIA H200", 30 * GiB, 141 * GiB, 87.0),
        ]
    )
    return model


def test_the_model_gives_memory_gpu_and_lifecycle_in_base_units() -> None:
    exporter = MetricsExporter()
    exporter.refresh(a_box_that_was_oom_killed())
    got = scrape(exporter)
    assert got[("cuzk_daemon_up", ())] == 1
    assert got[("cuzk_daemon_restarts_total", ())] == 1
    assert got[("cuzk_daemon_exits_total", (("cause", "oom_kill"),))] == 1
    assert got[("cuzk_oom_kills_total", ())] == 1
    # The latest figures of the current run, not the peak of the killed one.
    assert got[("cuzk_daemon_rss_bytes", ())] == 120 * GiB
    assert got[("cuzk_cgroup_memory_usage_bytes", ())] == 121 * GiB
    assert got[("cuzk_cgroup_memory_limit_bytes", ())] == 256 * GiB
    assert got[("cuzk_budget_total_bytes", ())] == 200 * GiB
    assert got[("cuzk_budget_used_bytes", ())] == 60 * GiB
    assert got[("cuzk_srs_resident_bytes", ())] == 45 * GiB
    assert got[("cuzk_pce_resident_bytes", ())] == 26 * GiB
    assert got[("cuzk_gpu_memory_used_bytes", (("gpu", "0"),))] == 30 * GiB
    assert got[("cuzk_gpu_memory_total_bytes", (("gpu", "0"),))] == 141 * GiB
    assert got[("cuzk_gpu_utilization_ratio", (("gpu", "0"),))] == pytest.approx(0.87)
    assert got[("cuzk_daemon_last_error_info", (("error", "exited (oom_kill): memory.oom_control oom_kill 1"),))] == 1


def test_jobs_lost_in_the_monolithic_gpu_queue_are_counted_by_kind() -> None:
    # engine.rs PriorityWorkQueue keys every monolithic job (0, 0): winpost-a, queued before winpost-b was, is
    # replaced by it and never picked up.
    model = SessionModel()
    lines = [
        "2026-05-01T07:00:01.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true",
        *(f"TIMELINE,{t},SYNTH_START,{job},kind=winning-post" for t, job in ((10, "winpost-a"), (20, "winpost-b"))),
        "TIMELINE,15,GPU_QUEUE,winpost-a,monolithic",
        "TIMELINE,25,GPU_QUEUE,winpost-b,monolithic",
        "TIMELINE,30,GPU_PICKUP,winpost-b,worker=0",
        "TIMELINE,30,GPU_START,winpost-b,worker=0",
        "TIMELINE,830,GPU_END,winpost-b,worker=0,gpu_ms=800",
        "2026-05-01T07:00:01.900000Z  INFO cuzk_core::engine: proof completed successfully (pipeline) proof_len=192",
    ]
    model.apply_all([parse_line(line) for line in lines])
    exporter = MetricsExporter()
    exporter.refresh(model)
    exporter.refresh(model)  # a job is counted once, however many scrapes see it
    got = scrape(exporter)
    assert got[("cuzk_jobs_lost_total", (("proof_kind", "winning_post"),))] == 1
    assert got[("cuzk_jobs_completed_total", (("proof_kind", "winning_post"),))] == 1
    assert ("cuzk_jobs_incomplete_total", (("proof_kind", "winning_post"),)) not in got


def test_a_dead_daemon_reports_down_and_no_stale_memory_or_daemon_figures() -> None:
    model = a_box_that_was_oom_killed()
    exporter = MetricsExporter()
    exporter.daemon_text(daemon_text(3, 40))
    model.apply(ev.DaemonExited(110.0, 11, -9, 9, "oom_kill", ("memory.oom_control oom_kill 2",)))
    exporter.refresh(model)
    got = scrape(exporter)
    assert got[("cuzk_daemon_up", ())] == 0
    assert got[("cuzk_oom_kills_total", ())] == 2
    assert ("cuzk_daemon_rss_bytes", ()) not in got
    assert ("cuzk_uptime_seconds", ()) not in got
    assert got[("cuzk_cgroup_memory_limit_bytes", ())] == 256 * GiB  # the limit stays what it was


def test_the_daemons_getmetrics_text_is_passed_through_under_its_names() -> None:
    exporter = MetricsExporter()
    exporter.daemon_text(daemon_text(3, 40))
    exporter.refresh(a_box_that_was_oom_killed())
    got = scrape(exporter)
    assert got[("cuzk_proofs_completed_total", ())] == 3
    assert got[("cuzk_proofs_completed_total", (("proof_kind", "porep_c2"),))] == 3
    assert got[("cuzk_uptime_seconds", ())] == 40
    assert got[("cuzk_queue_depth", ())] == 1
    assert got[("cuzk_proof_duration_seconds_count", (("proof_kind", "porep_c2"),))] == 3
    assert got[("cuzk_proof_duration_seconds_sum", (("proof_kind", "porep_c2"),))] == pytest.approx(184.5)
    exporter.daemon_text(None)  # the daemon stopped answering GetMetrics: its figures go
    exporter.refresh(a_box_that_was_oom_killed())
    assert ("cuzk_uptime_seconds", ()) not in scrape(exporter)


def test_not_prometheus_text_from_the_daemon_is_dropped() -> None:
    exporter = MetricsExporter()
    exporter.daemon_text("cuzk_uptime_seconds {not a number\n")
    exporter.refresh(a_box_that_was_oom_killed())
    assert ("cuzk_uptime_seconds", ()) not in scrape(exporter)
    assert scrape(exporter)[("cuzk_daemon_up", ())] == 1


def test_no_label_carries_a_job_id() -> None:
    exporter = MetricsExporter()
    exporter.daemon_text(daemon_text(3, 40))
    exporter.refresh(a_box_that_was_oom_killed())
    names = {name for (name, labels) in scrape(exporter) for name, _ in labels}
    assert names <= {"cause", "error", "gpu", "le", "mode", "phase", "proof_kind"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) is not installed")
def test_promtool_finds_nothing_to_lint() -> None:
    exporter = MetricsExporter()
    exporter.daemon_text(daemon_text(3, 40))
    exporter.refresh(a_box_that_was_oom_killed())
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=generate_latest(exporter.registry), capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert result.stdout.decode().strip() == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [("9920", ("127.0.0.1", 9920)), (":9920", ("127.0.0.1", 9920)), ("0.0.0.0:80", ("0.0.0.0", 80)),
     ("[::1]:9920", ("::1", 9920))],
)  # fmt: skip
def test_metrics_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_metrics_address(text) == expected


@pytest.mark.parametrize("text", ["host:", "host:0", "127.0.0.1:65536", "x"])
def test_a_bad_metrics_address_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--metrics"):
        parse_metrics_address(text)


def test_listening_beyond_loopback_is_warned_about() -> None:
    assert exposure_warning("127.0.0.1") is None
    assert exposure_warning("::1") is None
    assert exposure_warning("localhost") is None
    warning = exposure_warning("0.0.0.0")
    assert warning is not None and "every interface" in warning
    assert exposure_warning("10.0.0.5") is not None


def test_retention_keeps_young_sessions_and_the_current_one(tmp_path: Path) -> None:
    now = time.time()

    def info(name: str, age_s: float) -> SessionInfo:
        return SessionInfo(tmp_path / name, name, now - age_s, "engine", 0, 0)

    infos = [info("old", 8 * 86400), info("young", 3600), info("current", 30 * 86400)]
    assert [i.path.name for i in expired(infos, parse_age("7d"), now, [tmp_path / "current"])] == ["old"]
    assert parse_age("12h") == 43200
    assert parse_age("90") == 90
    with pytest.raises(AgeError):
        parse_age("soon")
    with pytest.raises(AgeError):
        parse_age("0d")


def test_the_dashboard_and_the_rules_name_only_metrics_the_recorder_serves() -> None:
    root = Path(__file__).resolve().parent.parent
    exporter = MetricsExporter()
    exporter.daemon_text(daemon_text(3, 40))
    exporter.refresh(a_box_that_was_oom_killed())
    suffixes = {"counter": ["_total"], "info": ["_info"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    served = {f.name + end for f in exporter.registry.collect() for end in suffixes.get(f.type, ["", "_count", "_sum"])}
    rules = (root / "contrib" / "prometheus" / "cuzk.rules.yml").read_text()
    recorded = set(re.findall(r"record: (\S+)", rules))
    dashboard = json.loads((root / "contrib" / "grafana" / "cuzk.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    expressions += [a["expr"] for a in dashboard["annotations"]["list"]]
    expressions.append(dashboard["templating"]["list"][1]["query"])
    named = {n for text in [*expressions, rules] for n in re.findall(r"\b(?:instance:)?cuzk_[a-z0-9_:]+", text)}
    assert named, "no metric names found"
    assert named - served - recorded == set()
    assert recorded <= {n for text in expressions for n in re.findall(r"instance:cuzk_[a-z0-9_:]+", text)}


def test_prune_removes_only_expired_sessions(tmp_path: Path) -> None:
    from cuzktui.retention import prune_sessions
    from cuzktui.session import SessionWriter

    old = SessionWriter.create("old", root=tmp_path)
    old.write_meta({"created": time.time() - 10 * 86400})
    young = SessionWriter.create("young", root=tmp_path)
    spared = SessionWriter.create("recording", root=tmp_path)
    spared.write_meta({"created": time.time() - 30 * 86400})
    removed = prune_sessions(tmp_path, parse_age("7d"), time.time(), [spared.path])
    assert removed == [old.path]
    assert not old.path.exists() and young.path.exists() and spared.path.exists()


def test_the_endpoint_serves_openmetrics_on_request_and_frees_its_port_when_closed() -> None:
    import urllib.request

    from cuzktui.supervisor import free_loopback_port

    port = free_loopback_port()
    exporter = MetricsExporter()
    exporter.refresh(a_box_that_was_oom_killed())
    exporter.serve("127.0.0.1", port)
    try:
        accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=accept)
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            body = response.read().decode()
        assert "cuzk_oom_kills_total 1.0" in body and body.endswith("# EOF\n")
    finally:
        exporter.close()
    again = MetricsExporter()
    again.serve("127.0.0.1", port)  # would raise "address in use" had the first kept it
    again.close()
