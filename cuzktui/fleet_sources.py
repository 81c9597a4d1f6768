"""Where the fleet's figures come from: each box's ``/metrics`` or a Prometheus server's HTTP API.

Both fetch in parallel with a timeout and never raise: a box that cannot be had is answered with
the reason, which :class:`cuzktui.fleet.FleetMonitor` shows beside its last good figures.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

from .fleet import Box, Reading

FETCH_TIMEOUT_S: Final = 3.0


# -- sources --------------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Prometheus's API and a recorder's endpoint never redirect: a redirect (off loopback, say, to a
    host the operator never named) is refused as an error naming where it pointed, not followed."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} not followed", headers, fp)


_OPENER: Final = urllib.request.build_opener(_NoRedirects())


def _http_get(url: str, timeout: float) -> bytes:
    with _OPENER.open(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def _describe(error: BaseException) -> str:
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        return str(error.reason)
    return str(error) or type(error).__name__


# Summed over their labels (kinds, GPUs) into one figure per box.
_SUMMED: Final = frozenset({"cuzk_jobs_completed_total", "cuzk_gpu_memory_used_bytes", "cuzk_gpu_memory_total_bytes"})


def reading_from_text(text: str, now: float) -> Reading:
    """One box's figures from its recorder's exposition (the names of :mod:`cuzktui.metrics`)."""
    values: dict[str, float] = {}
    sums: dict[str, float] = {}
    error = ""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _SUMMED:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
            elif sample.name == "cuzk_daemon_last_error_info":
                error = sample.labels.get("error", "")
            elif not sample.labels:
                values[sample.name] = sample.value
    return Reading(
        t=now,
        daemon_up=values.get("cuzk_daemon_up") == 1,
        completed=sums.get("cuzk_jobs_completed_total", 0.0),
        rss_bytes=values.get("cuzk_daemon_rss_bytes"),
        limit_bytes=values.get("cuzk_cgroup_memory_limit_bytes"),
        oom_kills=values.get("cuzk_oom_kills_total"),
        gpu_used_bytes=sums.get("cuzk_gpu_memory_used_bytes"),
        gpu_total_bytes=sums.get("cuzk_gpu_memory_total_bytes"),
        last_error=error,
    )


class EndpointSource:
    """Each box's own ``/metrics`` (``--hosts``), fetched in parallel."""

    def __init__(self, timeout: float = FETCH_TIMEOUT_S, get: Callable[[str, float], bytes] = _http_get) -> None:
        self.timeout = timeout
        self._get = get

    def _one(self, box: Box, now: float) -> Reading | str:
        if box.metrics_url is None:
            return "no metrics URL in the hosts file"
        try:
            return reading_from_text(self._get(box.metrics_url, self.timeout).decode("utf-8", "replace"), now)
        except (OSError, ValueError) as error:
            return _describe(error)

    def fetch_all(self, boxes: Sequence[Box], now: float) -> dict[str, Reading | str]:
        if not boxes:
            return {}
        with ThreadPoolExecutor(max_workers=min(len(boxes), 32)) as pool:
            results = list(pool.map(lambda box: self._one(box, now), boxes))
        return {box.name: result for box, result in zip(boxes, results, strict=True)}


# PromQL per figure, each returning one series per ``instance``.
_QUERIES: Final = {
    "up": 'up{job="%(job)s"}',
    "daemon_up": 'max by (instance) (cuzk_daemon_up{job="%(job)s"})',
    "completed": 'sum by (instance) (cuzk_jobs_completed_total{job="%(job)s"})',
    "proofs_per_hour": 'sum by (instance) (rate(cuzk_jobs_completed_total{job="%(job)s"}[1h])) * 3600',
    "rss_bytes": 'max by (instance) (cuzk_daemon_rss_bytes{job="%(job)s"})',
    "limit_bytes": 'max by (instance) (cuzk_cgroup_memory_limit_bytes{job="%(job)s"})',
    "oom_kills": 'max by (instance) (cuzk_oom_kills_total{job="%(job)s"})',
    "gpu_used_bytes": 'sum by (instance) (cuzk_gpu_memory_used_bytes{job="%(job)s"})',
    "gpu_total_bytes": 'sum by (instance) (cuzk_gpu_memory_total_bytes{job="%(job)s"})',
    "last_error": 'cuzk_daemon_last_error_info{job="%(job)s"}',
}


class PrometheusSource:
    """A Prometheus server's HTTP API (``--prometheus URL``): one query per figure for the whole fleet."""

    def __init__(
        self,
        url: str,
        job: str = "cuzk",
        timeout: float = FETCH_TIMEOUT_S,
        get: Callable[[str, float], bytes] = _http_get,
    ) -> None:
        self.url = url.rstrip("/")
        self.job = job
        self.timeout = timeout
        self._get = get

    def _query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        body = json.loads(self._get(url, self.timeout))
        if body.get("status") != "success":
            raise ValueError(f"Prometheus: {body.get('error', 'query failed')}")
        return [(item["metric"], float(item["value"][1])) for item in body["data"]["result"]]

    def discover(self) -> list[Box]:
        """The job's targets as boxes (named by their instance), when no hosts file names them."""
        targets = self._query(self._expr("up"))
        return [Box(name=labels["instance"], instance=labels["instance"]) for labels, _ in targets]

    def _expr(self, figure: str) -> str:
        return _QUERIES[figure] % {"job": self.job}

    def fetch_all(self, boxes: Sequence[Box], now: float) -> dict[str, Reading | str]:
        try:
            with ThreadPoolExecutor(max_workers=len(_QUERIES)) as pool:
                answers = dict(zip(_QUERIES, pool.map(lambda f: self._query(self._expr(f)), _QUERIES), strict=True))
        except (OSError, ValueError, KeyError) as error:
            reason = f"Prometheus at {self.url}: {_describe(error)}"
            return {box.name: reason for box in boxes}
        by_instance: dict[str, dict[str, float]] = {}
        errors: dict[str, str] = {}
        for figure, series in answers.items():
            for labels, value in series:
                instance = labels.get("instance", "")
                by_instance.setdefault(instance, {})[figure] = value
                if figure == "last_error":
                    errors[instance] = labels.get("error", "")
        results: dict[str, Reading | str] = {}
        for box in boxes:
            figures = by_instance.get(box.instance or box.name, {})
            if figures.get("up") != 1:
                results[box.name] = "Prometheus cannot scrape it (up == 0)" if "up" in figures else "not a target"
                continue
            results[box.name] = Reading(
                t=now,
                daemon_up=figures.get("daemon_up") == 1,
                completed=figures.get("completed"),
                proofs_per_hour=figures.get("proofs_per_hour"),
                rss_bytes=figures.get("rss_bytes"),
                limit_bytes=figures.get("limit_bytes"),
                oom_kills=figures.get("oom_kills"),
                gpu_used_bytes=figures.get("gpu_used_bytes"),
                gpu_total_bytes=figures.get("gpu_total_bytes"),
                last_error=errors.get(box.instance or box.name, ""),
            )
        return results
