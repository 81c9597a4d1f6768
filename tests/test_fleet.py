"""The fleet's headless core: hosts file, per-box figures, rates, prices, staleness, sorting, sources."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from cuzktui.fleet import Box, BoxView, FleetError, FleetMonitor, Reading, load_hosts, row_cells, sort_views
from cuzktui.fleet_sources import EndpointSource, PrometheusSource, reading_from_text
from cuzktui.metrics import MetricsExporter
from tests.test_metrics import GiB, a_box_that_was_oom_killed


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class ScriptedSource:
    """Answers each box by name from ``answers`` (a Reading factory or an error text)."""

    def __init__(self) -> None:
        self.answers: dict[str, Reading | str] = {}

    def fetch_all(self, boxes: Sequence[Box], now: float) -> dict[str, Reading | str]:
        return {b.name: self.answers.get(b.name, "no answer") for b in boxes}


def reading(t: float, completed: float, rss: float = 100 * GiB) -> Reading:
    return Reading(t, True, completed=completed, rss_bytes=rss, limit_bytes=200 * GiB, oom_kills=0)


def test_hosts_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        "[[box]]\n"
        'name = "h200-a"\n'
        'metrics = "10.0.0.5:9920"\n'
        "price_per_hour = 2.5\n"
        'attach = "ssh -t h200-a cuzk-tui attach 127.0.0.1:9820"\n'
        "[[box]]\n"
        'instance = "10.0.0.6:9920"\n'
    )
    a, b = load_hosts(hosts)
    assert a == Box("h200-a", "http://10.0.0.5:9920/metrics", "10.0.0.5:9920", 2.5,
                    ("ssh", "-t", "h200-a", "cuzk-tui", "attach", "127.0.0.1:9820"))  # fmt: skip
    assert b == Box("10.0.0.6:9920", None, "10.0.0.6:9920")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no \\[\\[box\\]\\]"),
        ('[[box]]\nname = "x"\n', "give metrics"),
        ('[[box]]\nmetrics = "h:1"\nprice_per_hour = "cheap"\n', "price_per_hour"),
        ('[[box]]\nmetrics = "h:1"\nattach = 3\n', "attach"),
        ("[[box]\n", "hosts.toml"),
    ],
)
def test_a_bad_hosts_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(text)
    with pytest.raises(FleetError, match=message):
        load_hosts(hosts)


def test_an_unreachable_box_keeps_its_last_figures_marked_stale_and_the_others_stay_live() -> None:
    clock, source = Clock(), ScriptedSource()
    boxes = [Box("a", price_per_hour=3.0), Box("b", price_per_hour=3.0)]
    monitor = FleetMonitor(boxes, source, clock=clock)
    for minute in range(3):
        clock.t = 1000.0 + 60 * minute
        source.answers = {"a": reading(clock.t, 2 * minute), "b": reading(clock.t, minute, rss=150 * GiB)}
        monitor.poll()
    clock.t += 60
    source.answers = {"a": "timed out", "b": reading(clock.t, 3, rss=160 * GiB)}
    a, b = monitor.poll()
    assert a.state == "unreachable" and a.error == "timed out"
    assert a.stale_s == 60
    assert a.reading is not None and a.reading.rss_bytes == 100 * GiB  # the last good figures
    assert a.proofs_per_hour == pytest.approx(120.0)  # 2 proofs a minute, as last known
    assert b.state == "up" and b.stale_s is None
    assert b.reading is not None and b.reading.rss_bytes == 160 * GiB
    assert b.proofs_per_hour == pytest.approx(60.0)
    assert b.price_per_proof == pytest.approx(0.05)  # $3/h at 60 proofs/h
    assert row_cells(a)[1] == "unreachable (stale 1m)"
    assert row_cells(a)[-1] == "timed out"
    assert monitor.open_command(a) == "a: no attach command in the hosts file"


def test_a_box_never_reached_is_unreachable_and_cannot_be_opened() -> None:
    source = ScriptedSource()
    monitor = FleetMonitor([Box("a", attach=("true",))], source, clock=Clock())
    assert monitor.views[0].state == "not seen yet", "before the first poll"
    (a,) = monitor.poll()
    assert a.state == "unreachable" and a.reading is None and a.stale_s is None and a.error == "no answer"
    assert row_cells(a)[1] == "unreachable"
    assert monitor.open_command(a) == "a is unreachable: its dashboard cannot be opened now"


def test_the_rate_starts_again_when_the_recorder_restarts_and_the_window_slides() -> None:
    clock, source = Clock(), ScriptedSource()
    monitor = FleetMonitor([Box("a")], source, clock=clock, window_s=600)
    for minute, completed in enumerate([10, 20, 30, 1, 2]):  # the recorder restarted after 30
        clock.t = 1000.0 + 60 * minute
        source.answers = {"a": reading(clock.t, completed)}
        (a,) = monitor.poll()
    assert a.proofs_per_hour == pytest.approx(60.0)
    for minute in range(5, 30):  # then a steady 6 per hour: the old minutes leave the 10 minute window
        clock.t = 1000.0 + 60 * minute
        source.answers = {"a": reading(clock.t, 2 + (minute - 4) * 0.1)}
        (a,) = monitor.poll()
    assert a.proofs_per_hour == pytest.approx(6.0)


def test_sorting_puts_unknown_figures_last() -> None:
    def view(name: str, rate: float | None, price: float | None = 1.0) -> BoxView:
        return BoxView(Box(name, price_per_hour=price), "up", reading(0.0, 0), rate, "", None)

    views = [view("a", 10.0), view("b", None), view("c", 30.0), view("d", 20.0, price=None)]
    assert [v.box.name for v in sort_views(views, "proofs_per_hour", descending=True)] == ["c", "d", "a", "b"]
    assert [v.box.name for v in sort_views(views, "price_per_proof")] == ["c", "a", "b", "d"]
    with pytest.raises(FleetError):
        sort_views(views, "colour")


def test_a_recorders_exposition_reads_back_as_its_figures() -> None:
    exporter = MetricsExporter()
    exporter.refresh(a_box_that_was_oom_killed())
    text = generate_latest(exporter.registry).decode()
    r = reading_from_text(text, 5.0)
    assert r.daemon_up and r.rss_bytes == 120 * GiB and r.limit_bytes == 256 * GiB and r.oom_kills == 1
    assert r.gpu_used_bytes == 30 * GiB and r.gpu_total_bytes == 141 * GiB
    assert r.last_error == "exited (oom_kill): memory.oom_control oom_kill 1"


def test_an_endpoint_that_fails_is_answered_with_the_reason() -> None:
    def get(url: str, timeout: float) -> bytes:
        raise ConnectionRefusedError(111, "Connection refused")

    result = EndpointSource(get=get).fetch_all([Box("a", "http://127.0.0.1:1/metrics")], 0.0)
    assert result == {"a": "[Errno 111] Connection refused"}


def _api(result: list[tuple[dict[str, str], float]]) -> bytes:
    items = [{"metric": labels, "value": [0, str(value)]} for labels, value in result]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": items}}).encode()


def test_prometheus_answers_per_instance_and_a_target_it_cannot_scrape_is_unreachable() -> None:
    answers = {
        "up{": [({"instance": "a:1", "job": "cuzk"}, 1.0), ({"instance": "b:1", "job": "cuzk"}, 0.0)],
        "cuzk_daemon_up": [({"instance": "a:1"}, 1.0)],
        "rate(": [({"instance": "a:1"}, 42.0)],
        "cuzk_daemon_rss_bytes": [({"instance": "a:1"}, float(100 * GiB))],
        "cuzk_daemon_last_error_info": [({"instance": "a:1", "error": "exited (oom_kill)"}, 1.0)],
    }

    def get(url: str, timeout: float) -> bytes:
        from urllib.parse import parse_qs, urlsplit

        expr = parse_qs(urlsplit(url).query)["query"][0]
        for needle, result in answers.items():
            if needle in expr:
                return _api(result)
        return _api([])

    source = PrometheusSource("http://prom:9090/", get=get)
    boxes = source.discover()
    assert [b.name for b in boxes] == ["a:1", "b:1"]
    result = source.fetch_all(boxes, 7.0)
    a, b = result["a:1"], result["b:1"]
    assert isinstance(a, Reading)
    assert a.daemon_up and a.proofs_per_hour == 42.0 and a.rss_bytes == 100 * GiB
    assert a.last_error == "exited (oom_kill)"
    assert b == "Prometheus cannot scrape it (up == 0)"


def test_prometheus_down_makes_every_box_unreachable_with_the_reason() -> None:
    def get(url: str, timeout: float) -> bytes:
        raise TimeoutError("timed out")

    result = PrometheusSource("http://prom:9090", get=get).fetch_all([Box("a", instance="a:1")], 0.0)
    assert result == {"a": "Prometheus at http://prom:9090: timed out"}
