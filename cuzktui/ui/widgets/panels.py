"""Text panels of the dashboard: daemon identity and state, pipeline now, next-knob hints, notices.

Each panel is a pure function ``model -> Content`` (Textual content, whose ``$variables``
follow the theme) and a :class:`Panel` widget that repaints only when its content really
changed. Times come from the model (``model.last_t`` is "now"), never from the wall clock, so a replayed or faked
model always shows the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from textual.content import Content
from textual.widgets import Static

from ... import events as ev
from ...advice import knob_hints
from ...controller import Identity
from ...diagnosis import client_view
from ...figures import (
    bench_per_hour,
    clock_label,
    not_proving,
    planned_stop,
    proof_counts,
    session_rate,
    start_failed_since_exit,
)
from ...model import SessionModel
from ...units import format_duration as duration
from ...units import format_size

_MODE_BADGE = {
    "engine": "EMULATOR",
    "real": "REAL DAEMON",
    "attached": "ATTACHED",
    "replay": "REPLAY",
}

_CAUSE_TEXT = {
    "oom_kill": "killed by the kernel OOM killer",
    "signal": "killed by a signal",
    "stopped": "stopped by the tool",
    "error": "exited with an error",
    "clean": "exited cleanly",
    "unknown": "exited for an unknown reason",
}


class Panel(Static):
    """A text panel that repaints only when its content changes."""

    DEFAULT_CSS = """
    Panel {
        height: auto;
        padding: 0 1;
    }
    """

    _shown: Content | None = None

    def show(self, content: Content) -> None:
        if self._shown is None or not content.is_same(self._shown):
            # The panel's height follows its lines: an unwrapped panel whose line count stayed needs
            # no layout pass of the screen (most polls change a figure, not the number of lines).
            same_height = (
                self._shown is not None
                and self.styles.text_wrap == "nowrap"
                and content.plain.count("\n") == self._shown.plain.count("\n")
            )
            self._shown = content
            self.update(content, layout=not same_height)


Part = str | tuple[str, str]


def daemon_content(model: SessionModel, identity: Identity) -> Content:
    """Who the daemon is and what state it is in; a dead daemon's diagnosis stands out."""
    d = model.daemon
    now = model.last_t
    parts: list[Part] = [(f" {_MODE_BADGE[identity.mode]} ", "reverse bold"), (f" {identity.title}\n", "bold")]
    if d.phase == "none":
        parts.append(("no daemon launched yet", "dim"))
        return Content.assemble(*parts)
    state_style = {"starting": "bold $warning", "ready": "bold $success", "dead": "bold $error"}
    facts = []
    if d.pid is not None:
        facts.append(f"pid {d.pid}")
    elif d.mode == "attached":
        facts.append("pid unknown")  # the socket's owner is not this user's to see, and no --pid
    uptime = model.daemon_uptime()
    if uptime is not None and d.silent is None:
        facts.append(f"up {duration(uptime)}")
    if d.runs > 1:
        facts.append(f"run {d.runs}")
    if d.startup_s is not None:
        facts.append(f"started in {d.startup_s:.0f}s")
    if d.silent is not None and d.phase != "dead":
        # An attached daemon gone quiet: said first; everything below is the last state it showed.
        since = f" for {duration(now - d.silent.t)}" if now is not None else ""
        parts += [(" NOT ANSWERING ", "bold reverse $error"), f"  {' · '.join(facts)}\n"]
        parts.append((f"  {d.silent.detail}; silent{since} — showing the last state\n", "$error"))
    elif (stopped := not_proving(model)) is not None:
        # It answers, so it would read as ready: what matters is that nothing it takes will be proved.
        at = d.engine_shutdown.ts if d.engine_shutdown is not None else None
        since = f" for {duration(now - at)}" if now is not None and at is not None else ""
        parts += [(f" NOT PROVING{since} ", "bold reverse $error"), f"  {' · '.join(facts)}\n"]
        parts.append((f"  {stopped}\n", "$error"))
    elif (planned := planned_stop(model)) is not None:
        # The TUI restarts its daemon to apply a config, gives it to a benchmark or a knob search, or takes it
        # back: planned, not a death.
        parts += [(planned[0], "bold $accent"), "  " + " · ".join(facts) + "\n"]
    else:
        parts += [(d.phase.upper(), state_style[d.phase]), "  " + " · ".join(facts) + "\n"]
    if d.phase == "dead" and d.exit is not None:
        # The diagnosis first: on a short terminal it is what must stay visible. An exit the
        # operator asked for is reported, not alarmed about.
        expected = d.exit.cause in ("stopped", "clean")
        headline = _exit_headline(d.exit, restart_failed=start_failed_since_exit(model))
        parts += [(f" {headline} ", "bold" if expected else "bold reverse $error"), "\n"]
        if d.exit.root_cause:
            # Right under the headline: the panel is a few lines high, and this is what to act on.
            why = d.exit.root_cause.splitlines()
            parts += [(f"  {'why: ' if i == 0 else '     '}{line}\n", "bold $error") for i, line in enumerate(why)]
        parts += [(f"  · {line}\n", "dim" if expected else "$error") for line in d.exit.evidence]
        if not expected:
            # The clients' texts, so operators can match their logs: none of them names the cause.
            parts += [(f"  clients saw · {line}\n", "dim") for line in client_view(d.exit.cause)]
        report = d.exit.error_report or d.fatal_error
        if report:
            parts.append((f"  {report.strip()}\n", "italic"))
    where = [f"listen {d.listen}"] if d.listen else []
    if d.config_path:
        version = f" v{model.configs[-1].version}" if model.configs else ""
        where.append(f"config {d.config_path}{version}")
    if where:
        parts.append(" · ".join(where) + "\n")
    sizes = []
    if d.budget_total_gib is not None:
        sizes.append(f"budget {d.budget_total_gib} GiB")
    if d.memory_limit_bytes is not None:
        sizes.append(f"limit {format_size(model.nominal(d.memory_limit_bytes))}")
    counts = [
        f"{n} {what}" for n, what in ((d.synth_worker_count, "synth"), (d.gpu_worker_count, "GPU")) if n is not None
    ]
    if counts:
        sizes.append(" + ".join(counts) + " workers")
    if sizes:
        parts.append(" · ".join(sizes) + "\n")
    if d.phase == "starting":
        if d.srs_loading:
            since = f" ({duration(now - d.launched_t)} since launch)" if now and d.launched_t else ""
            parts.append((f"loading SRS {d.srs_loading}…{since}\n", "$warning"))
        else:
            parts.append(("waiting for the gRPC port…\n", "$warning"))
    elif d.srs_loaded:
        parts.append((f"SRS loaded: {', '.join(d.srs_loaded)}\n", "dim"))
    return Content.assemble(*parts).rstrip()


def start_error_content(model: SessionModel) -> Content | None:
    """Why the daemon was not started, in full (None when the last start did not fail): it stays on the
    dashboard until a later launch, where a toast would vanish and the notices would cut it."""
    failed = model.daemon.start_error
    if failed is None:
        return None
    return Content.assemble((" NOT STARTED ", "bold reverse $error"), " ", (failed.text, "$error"))


def _exit_headline(exit: ev.DaemonExited, *, restart_failed: bool) -> str:
    if exit.handover is not None:
        if restart_failed and exit.handover.startswith(ev.RESTARTING_TO_APPLY):
            # Its restart did not happen: say what the stop was for, and that the start after it failed.
            applying = exit.handover.removeprefix(ev.RESTARTING_TO_APPLY)
            return f"stopped to apply config{applying}; the start after it failed"
        return exit.handover
    how = f"exit {exit.returncode}" if exit.returncode is not None else ""
    if exit.signal is not None:
        how = f"{how}, signal {exit.signal}" if how else f"signal {exit.signal}"
    return _CAUSE_TEXT.get(exit.cause, exit.cause) + (f" ({how})" if how else "")


def pipeline_content(model: SessionModel) -> Content:
    """Pipeline now (from the daemon's /status, else the timeline) and throughput."""
    status = model.status
    d = model.daemon
    if status is not None:
        synth, busy, workers = status.synthesizing, status.gpu_workers_busy, status.gpu_workers_total
        waiting = status.partitions_waiting_gpu
    else:
        now = model.timeline.pipeline_now()
        synth, busy, waiting = now.synthesizing, now.on_gpu, now.waiting_gpu
        workers = d.gpu_worker_count or 0
    synth_cap = f"/{d.synth_worker_count}" if d.synth_worker_count else ""
    parts: list[Part] = [("Now    ", "bold")]
    if d.phase in ("none", "dead"):
        parts.append(("daemon not running", "dim"))
    else:
        parts += [
            (f"synth {synth}{synth_cap}", "$phase-synth"),
            " · ",
            (f"waiting {waiting}", "$phase-queue"),
            " · ",
            (f"GPU {busy}/{workers} busy" if workers else f"GPU {busy} busy", "$phase-gpu"),
        ]
    counts = proof_counts(model)
    parts += [
        ("\nProofs ", "bold"),
        f"{counts.completed} done · ",
        (f"{counts.failed} failed", "bold $error" if counts.failed else ""),
    ]
    if model.timeline.lost:  # never answered: the daemon replaced them in its monolithic GPU queue
        parts.append((f" · {model.timeline.lost} lost in the GPU queue", "bold $error"))
    if model.bench is not None and model.bench.lost:
        parts.append((f" · {model.bench.lost} lost (benchmark, no answer)", "bold $error"))
    rate = session_rate(model)
    if rate is not None:
        parts.append(f" · {rate[0]:.1f}/h (last {duration(rate[1])}, {clock_label(model.daemon.time_scale)})")
    if counts.runs > 1:
        parts.append(f" · run {counts.runs}: {counts.run_completed}")
    bench = model.bench
    if bench is not None:
        parts += [("\nBench  ", "bold"), f"{bench.kind} {bench.completed + bench.failed}/{bench.count}"]
        if bench.restarts:
            n = len(bench.restarts)
            parts.append((f" · {n} restart{'s' if n > 1 else ''}", "$warning"))
        if bench.finished is not None:
            parts.append(f" · {bench.finished.outcome}")
        bench_rate = bench_per_hour(bench, model.last_t)
        if bench_rate is not None:
            parts.append(f" · {bench_rate:.1f}/h {clock_label(bench.time_scale)}")
        parts.append(f" · concurrency {bench.concurrency}")
    return Content.assemble(*parts)


def hints_content(model: SessionModel, config: Mapping[str, Any]) -> Content:
    hints = knob_hints(model, config)
    if not hints:
        return Content.styled("Next knob: nothing stands out", "dim")
    parts: list[Part] = []
    for i, hint in enumerate(hints):
        parts += ["\n" if i else "", ("Next knob: ", "bold $accent"), hint]
    return Content.assemble(*parts)


_NOTICE_STYLES = {"info": "", "warning": "$warning", "error": "bold $error"}


def notice_line(notice: ev.Notice, first: float) -> Content:
    """One notice on one line of the dashboard's list: when (since the session's start) and what."""
    return Content.assemble((f"{duration(notice.t - first):>8} ", "dim"), (notice.text, _NOTICE_STYLES[notice.level]))


def notice_full(notice: ev.Notice, first: float) -> Content:
    """One notice whole, for its own dialog: when (UTC and since the start), how serious, every word."""
    when = datetime.fromtimestamp(notice.t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Content.assemble(
        (f"{notice.level.upper()}", _NOTICE_STYLES[notice.level] or "bold"),
        (f"  {when} · {duration(notice.t - first)} into the session\n\n", "dim"),
        notice.text,
        ("\n\nEscape closes this.", "dim"),
    )
