"""A real Prometheus server scrapes ``cuzk-tui record --engine --metrics``; promtool lints and tests the rules.

Needs Debian's ``prometheus`` package (``prometheus`` and ``promtool``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cuzktui.fleet import Reading
from cuzktui.fleet_sources import PrometheusSource
from cuzktui.supervisor import free_loopback_port
from tests.conftest import require_engine
from tests.recorders import Recorder, recorders, wait_for

__all__ = ["recorders"]  # the fixture, imported for this module's tests

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "contrib" / "prometheus" / "cuzk.rules.yml"
RULE_TESTS = ROOT / "contrib" / "prometheus" / "cuzk.rules.test.yml"
DASHBOARD = ROOT / "contrib" / "grafana" / "cuzk.json"

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) is not installed"
)


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/-/ready", timeout=5) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, object]]:
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        result: list[dict[str, object]] = body["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single sample of an instant query, or None while the query returns nothing."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, result
        sample = result[0]["value"]
        assert isinstance(sample, list)
        return float(sample[1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[list[str]], Prometheus]]:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus (Debian's prometheus package) is not installed")
    procs: list[subprocess.Popen[bytes]] = []

    def start(targets: list[str]) -> Prometheus:
        directory = tmp_path / "prometheus"
        directory.mkdir()
        config = directory / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: [{json.dumps(str(RULES))}]\n"
            "scrape_configs:\n"
            "  - job_name: cuzk\n"
            f"    static_configs: [{{targets: {json.dumps(targets)}}}]\n"
        )
        port = free_loopback_port()
        with (directory / "prometheus.log").open("wb") as log:
            proc = subprocess.Popen(
                ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )  # fmt: skip
        procs.append(proc)
        server = Prometheus(port)
        wait_for("prometheus to be ready", lambda: proc.poll() is not None or server.ready())
        assert proc.poll() is None, (directory / "prometheus.log").read_text()
        return server

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.slow
def test_prometheus_scrapes_a_recorded_benchmark(
    recorders: Callable[..., Recorder], prometheus: Callable[[list[str]], Prometheus], tmp_path: Path
) -> None:
    require_engine()
    box = recorders("box", "--run-bench", "porep:2:2")
    wait_for("the recorder's metrics endpoint", lambda: box.proc.poll() is not None or box.scrape() is not None)
    assert box.proc.poll() is None, box.stderr()
    server = prometheus([f"127.0.0.1:{box.port}"])

    assert wait_for("up == 1", lambda: server.value('up{job="cuzk"}') == 1)
    rss = wait_for("the daemon's RSS", lambda: server.value("cuzk_daemon_rss_bytes"))
    assert rss > 0
    completed = 'cuzk_jobs_completed_total{proof_kind="porep_c2"}'
    assert wait_for("2 completed PoRep proofs", lambda: server.value(completed) == 2, timeout=180)
    # The benchmark runner stops its daemon when done and the recorder launches its own again.
    assert wait_for("the daemon up again after the benchmark", lambda: server.value("cuzk_daemon_up") == 1)
    assert wait_for("the daemon's own figures", lambda: server.value("cuzk_gpu_workers")) >= 1
    # The daemon's own proof counter (all kinds: the series without a proof_kind label) is passed through:
    # 2 from the benchmark runner's daemon, or 0 from the recorder's own, launched again after it.
    own = 'cuzk_proofs_completed_total{proof_kind=""}'
    assert wait_for("the daemon's proof counter", lambda: server.value(own)) in (0.0, 2.0)
    assert server.value('cuzk_phase_duration_seconds_count{phase="gpu"}') is not None
    # The rules load in a real server (the CuzkOomKilled alert exists and has not fired).
    assert server.query('ALERTS{alertname="CuzkOomKilled"}') == []

    # The fleet view reads the same figures through the server's HTTP API.
    fleet = PrometheusSource(server.base)
    (target,) = fleet.discover()
    assert target.instance == f"127.0.0.1:{box.port}"
    reading = fleet.fetch_all([target], 0.0)[target.name]
    assert isinstance(reading, Reading), reading
    assert reading.daemon_up and reading.completed == 2 and reading.rss_bytes is not None and reading.rss_bytes > 0

    # Every query of the Grafana dashboard is PromQL the server accepts (Grafana's variables filled in).
    dashboard = json.loads(DASHBOARD.read_text())
    grafana = {"$instance": ".*", "$__rate_interval": "1m", "$__range": "1h"}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in grafana.items():
                expr = expr.replace(variable, value)
            server.query(expr)  # asserts status "success"

    scraped = box.scrape()
    assert scraped is not None
    lint = subprocess.run(["promtool", "check", "metrics"], input=scraped.encode(), capture_output=True, timeout=60)
    assert lint.returncode == 0 and lint.stdout.decode().strip() == "", lint.stdout.decode() + lint.stderr.decode()

    # SIGTERM stops it cleanly, and what it recorded is an ordinary session: report reads it.
    box.proc.send_signal(signal.SIGTERM)
    assert box.proc.wait(timeout=90) == 0, box.stderr()
    for pid in box.daemon_pids():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    report = subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "report", str(box.session), "--json"], capture_output=True, timeout=120
    )
    assert report.returncode == 0, report.stderr.decode()
    assert "porep" in report.stdout.decode()


@needs_promtool
def test_promtool_unit_tests_of_the_alert_rules_pass() -> None:
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    result = subprocess.run(["promtool", "test", "rules", str(RULE_TESTS)], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert "SUCCESS" in result.stdout.decode()
