"""Many proving boxes at once (``cuzk-tui fleet``): what each box's recorder says, as one table.

Figures come (through :mod:`cuzktui.fleet_sources`) either from a Prometheus server's HTTP API
(``--prometheus URL``: the recorders are its ``job``'s targets) or from each box's own endpoint
(``--hosts FILE``: ``cuzk-tui record --metrics``).
The hosts file also gives each box its price (``price_per_hour``, for the price per proof) and how to
open its own dashboard (``attach``: a command, typically through an SSH tunnel).

A box that stops answering never stalls the view: every box is fetched in parallel with a short
timeout, and one that fails keeps its last good figures, marked stale with the time since and the
error. Everything here runs without a terminal; the Textual app (``cuzktui.ui.fleet_app``) only
renders :func:`row_cells` of :meth:`FleetMonitor.poll`'s views.
"""

from __future__ import annotations

import math
import shlex
import time
import tomllib
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from .units import format_duration, format_size

RATE_WINDOW_S: Final = 3600.0  # proofs/hour over the last hour, as the alert rule's recording rule
SORT_KEYS: Final = ("name", "state", "proofs_per_hour", "price_per_proof", "memory", "oom_kills")
COLUMNS: Final = ("box", "state", "proofs/h", "$/proof", "RSS / limit", "OOM kills", "GPU memory", "last error")

BoxState = Literal["up", "daemon down", "unreachable", "not seen yet"]


class FleetError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Box:
    name: str
    metrics_url: str | None = None  # the recorder's endpoint (--hosts)
    instance: str | None = None  # its Prometheus ``instance`` label (--prometheus)
    price_per_hour: float | None = None
    attach: tuple[str, ...] = ()  # argv that opens this box's own dashboard


@dataclass(frozen=True, slots=True)
class Reading:
    """One successful fetch of one box's figures."""

    t: float
    daemon_up: bool
    completed: float | None = None  # jobs completed, all kinds (a counter)
    proofs_per_hour: float | None = None  # when the source computes the rate itself (PromQL)
    rss_bytes: float | None = None
    limit_bytes: float | None = None
    oom_kills: float | None = None
    gpu_used_bytes: float | None = None
    gpu_total_bytes: float | None = None
    last_error: str = ""


@dataclass(frozen=True, slots=True)
class BoxView:
    box: Box
    state: BoxState
    reading: Reading | None  # the last good one (kept while the box is unreachable)
    proofs_per_hour: float | None
    error: str  # why the last fetch failed ("" when it did not)
    stale_s: float | None  # seconds since the last good reading, while unreachable

    @property
    def price_per_proof(self) -> float | None:
        price, rate = self.box.price_per_hour, self.proofs_per_hour
        if price is None or rate is None or rate <= 0:
            return None
        return price / rate

    @property
    def memory_ratio(self) -> float | None:
        r = self.reading
        if r is None or r.rss_bytes is None or not r.limit_bytes:
            return None
        return r.rss_bytes / r.limit_bytes

    @property
    def reachable(self) -> bool:
        return self.state in ("up", "daemon down")


# -- the hosts file -------------------------------------------------------------------------


def _instance_of(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc


def load_hosts(path: Path) -> list[Box]:
    """``[[box]]`` tables: ``name``, ``metrics`` (URL of ``cuzk-tui record --metrics``) or ``instance``
    (the Prometheus label), ``price_per_hour`` and ``attach`` (a command line or an argument list)."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise FleetError(f"{path}: no such file") from None
    except OSError as error:  # a directory, no permission: said as config files say it (config.load_config)
        raise FleetError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise FleetError(f"{path}: not UTF-8 text (byte {error.start})") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise FleetError(f"{path}: not TOML: {error}") from None
    entries = document.get("box")
    if not isinstance(entries, list) or not entries:
        raise FleetError(f"{path}: no [[box]] tables")
    boxes = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise FleetError(f"{path}: box {n} is not a table")
        metrics = entry.get("metrics")
        instance = entry.get("instance")
        if metrics is not None and not isinstance(metrics, str):
            raise FleetError(f"{path}: box {n}: metrics must be a URL string")
        if metrics is None and not isinstance(instance, str):
            raise FleetError(f"{path}: box {n}: give metrics (a URL) or instance (a Prometheus label)")
        if metrics is not None and "://" not in metrics:
            metrics = f"http://{metrics}/metrics"
        price = entry.get("price_per_hour")
        if price is not None and (isinstance(price, bool) or not isinstance(price, int | float) or price < 0):
            raise FleetError(f"{path}: box {n}: price_per_hour must be a number of $ per hour")
        attach = entry.get("attach", ())
        if isinstance(attach, str):
            attach = shlex.split(attach)
        if not isinstance(attach, list | tuple) or not all(isinstance(a, str) for a in attach):
            raise FleetError(f"{path}: box {n}: attach must be a command line or a list of arguments")
        name = entry.get("name") or instance or (_instance_of(metrics) if metrics else f"box {n}")
        boxes.append(
            Box(
                name=str(name),
                metrics_url=metrics,
                instance=instance if isinstance(instance, str) else (_instance_of(metrics) if metrics else None),
                price_per_hour=float(price) if price is not None else None,
                attach=tuple(attach),
            )
        )
    return boxes


# -- sources (cuzktui.fleet_sources implements them over HTTP) ---------------------------


class Source(Protocol):
    def fetch_all(self, boxes: Sequence[Box], now: float) -> dict[str, Reading | str]:
        """Each box's reading, or why it could not be had, by box name. Must not raise."""
        ...


# -- the monitor ----------------------------------------------------------------------------


class _Rate:
    """Proofs per hour from a counter's readings over a sliding window (a drop means a restart)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, float]] = deque()

    def add(self, t: float, value: float) -> None:
        if self._points and value < self._points[-1][1]:
            self._points.clear()  # the recorder restarted: its counters began again
        self._points.append((t, value))
        while len(self._points) > 2 and self._points[1][0] <= t - self.window_s:
            self._points.popleft()

    def per_hour(self) -> float | None:
        if len(self._points) < 2:
            return None
        (t0, v0), (t1, v1) = self._points[0], self._points[-1]
        return (v1 - v0) * 3600.0 / (t1 - t0) if t1 > t0 else None


class FleetMonitor:
    """Fetches every box through ``source`` and keeps, per box, its last good reading and rate."""

    def __init__(
        self,
        boxes: Iterable[Box],
        source: Source,
        clock: Callable[[], float] = time.time,
        window_s: float = RATE_WINDOW_S,
    ) -> None:
        self.boxes = list(boxes)
        self.source = source
        self._clock = clock
        self._window_s = window_s
        self._last: dict[str, Reading] = {}
        self._rates: dict[str, _Rate] = {}
        self.views: list[BoxView] = [BoxView(b, "not seen yet", None, None, "", None) for b in self.boxes]

    def poll(self) -> list[BoxView]:
        """Fetch every box once (blocking; a few seconds at most) and return the views in box order."""
        now = self._clock()
        results = self.source.fetch_all(self.boxes, now)
        views = []
        for box in self.boxes:
            result = results.get(box.name, "no answer")
            if isinstance(result, Reading):
                self._last[box.name] = result
                rate = self._rates.setdefault(box.name, _Rate(self._window_s))
                if result.completed is not None:
                    rate.add(result.t, result.completed)
                per_hour = result.proofs_per_hour if result.proofs_per_hour is not None else rate.per_hour()
                state: BoxState = "up" if result.daemon_up else "daemon down"
                views.append(BoxView(box, state, result, per_hour, "", None))
                continue
            last = self._last.get(box.name)
            previous = next((v for v in self.views if v.box.name == box.name), None)
            per_hour = previous.proofs_per_hour if previous is not None else None
            if last is None:
                # Asked and did not answer: unreachable, never reached ("not seen yet" is before the first poll).
                views.append(BoxView(box, "unreachable", None, None, result, None))
            else:
                views.append(BoxView(box, "unreachable", last, per_hour, result, now - last.t))
        self.views = views
        return views

    def open_command(self, view: BoxView) -> tuple[str, ...] | str:
        """The command that opens ``view``'s own dashboard, or why it cannot be opened now."""
        if not view.box.attach:
            return f"{view.box.name}: no attach command in the hosts file"
        if not view.reachable:
            return f"{view.box.name} is {view.state}: its dashboard cannot be opened now"
        return view.box.attach


# -- presentation (text only: the UI renders these cells) ------------------------------------


def _sort_value(view: BoxView, key: str) -> tuple[int, float | str]:
    """Sort values with unknowns last."""
    if key == "name":
        return (0, view.box.name)
    if key == "state":
        return (0, ("unreachable", "daemon down", "not seen yet", "up").index(view.state))
    value = {
        "proofs_per_hour": view.proofs_per_hour,
        "price_per_proof": view.price_per_proof,
        "memory": view.memory_ratio,
        "oom_kills": view.reading.oom_kills if view.reading is not None else None,
    }[key]
    return (1, 0.0) if value is None or math.isnan(value) else (0, value)


def sort_views(views: Iterable[BoxView], key: str, descending: bool = False) -> list[BoxView]:
    if key not in SORT_KEYS:
        raise FleetError(f"unknown sort key {key!r}: one of {', '.join(SORT_KEYS)}")
    ordered = sorted(views, key=lambda v: v.box.name)
    known = [v for v in ordered if _sort_value(v, key)[0] == 0]
    unknown = [v for v in ordered if _sort_value(v, key)[0] == 1]
    return sorted(known, key=lambda v: _sort_value(v, key)[1], reverse=descending) + unknown


def _size(value: float | None) -> str:
    return "—" if value is None else format_size(value)


def row_cells(view: BoxView) -> tuple[str, ...]:
    """The table row of one box, in :data:`COLUMNS` order."""
    r = view.reading
    state: str = view.state
    if view.stale_s is not None:
        state = f"{state} (stale {format_duration(view.stale_s)})"
    rate = "—" if view.proofs_per_hour is None else f"{view.proofs_per_hour:.1f}"
    price = view.price_per_proof
    if price is not None:
        cost = f"{price:.3f}"
    elif view.box.price_per_hour is not None and view.proofs_per_hour == 0:
        cost = "no proofs"
    else:
        cost = "—"
    memory = "—"
    if r is not None and (r.rss_bytes is not None or r.limit_bytes is not None):
        memory = f"{_size(r.rss_bytes)} / {_size(r.limit_bytes)}"
        if view.memory_ratio is not None:
            memory += f" ({view.memory_ratio:.0%})"
    ooms = "—" if r is None or r.oom_kills is None else str(int(r.oom_kills))
    gpu = "—"
    if r is not None and (r.gpu_used_bytes or r.gpu_total_bytes):
        gpu = f"{_size(r.gpu_used_bytes)} / {_size(r.gpu_total_bytes)}"
    error = view.error or (r.last_error if r is not None else "")
    return (view.box.name, state, rate, cost, memory, ooms, gpu, error)


def view_record(view: BoxView) -> dict[str, object]:
    """One box as a JSON object (``cuzk-tui fleet --json``)."""
    r = view.reading
    return {
        "box": view.box.name,
        "state": view.state,
        "stale_s": view.stale_s,
        "proofs_per_hour": view.proofs_per_hour,
        "price_per_proof": view.price_per_proof,
        "rss_bytes": r.rss_bytes if r else None,
        "limit_bytes": r.limit_bytes if r else None,
        "oom_kills": r.oom_kills if r else None,
        "gpu_used_bytes": r.gpu_used_bytes if r else None,
        "gpu_total_bytes": r.gpu_total_bytes if r else None,
        "error": view.error or (r.last_error if r else ""),
    }
