"""``cuzk-tui tune``: search the knobs for the most proofs per hour that never OOM.

The search starts from memcheck's recommendation (:func:`cuzktui.planner.recommend`) and climbs
from the best trial so far, one knob at a time, over the knobs that decide throughput and peak
memory. It learns as trials come in: :class:`RssModel` fits peak RSS against the partitions a
config lets run at once (the daemon's worker rule, daemon_facts.worker_cap, and the budget's
admission, planner.partitions_in_budget), starting from upstream's measured 69 GiB + 20 GiB per
partition; a candidate it predicts above the memory limit, or at least as large as one that was
OOM-killed, is skipped without a run. A candidate as good as the best on that model goes first.

Only knobs that act in the daemon's mode are searched: the others (knob_rules.inert_knobs, the rule the
Knobs screen marks them by: in monolithic mode the budget, the synthesis workers, the pacer's depth, the
GPU workers per device and batching) keep the starting config's values in every trial, and are never
written. A trial that fails for a reason no knob can change (the input, a parameter file, the proof type,
the daemon's build: :func:`knob_independent`, from upstream's job error texts) stops the search at once
(:class:`SearchBlocked`); an OOM kill, a budget the daemon refused, a lost job or any other failure only
ends its trial. A config beats the start only beyond the noise (:meth:`Search.verdict`): each trial's
spread from its own completions, and the start and the candidate best run again to measure it.

Each trial is a real benchmark, ``cuzk-tui bench --headless`` (cuzktui.bench) in a process of its
own, recorded as a session inside the search directory with ``--oom-retries 0``: an OOM kill ends
that trial with the supervisor's evidence, and the search goes on. A trial clearly slower than the
best (its k-th proof later than 1.5 × the best's k-th, from a third of the proofs on) is stopped
early. After every trial the search state is saved (``tune.json``), so ``--resume DIR`` continues.

Engine figures are the modelled box's (the bench converts with ``[engine] time_scale``); peak RSS
and the limit are in the box's bytes (real ÷ ``[engine] memory_scale``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from . import daemon_messages as msg
from . import events as ev
from . import knob_rules
from .config import ConfigDocument, save_atomic
from .controller import TuneBest, TuneTrialRow
from .daemon_facts import (
    BY_CLI_NAME,
    DEFAULT_SAFETY_MARGIN,
    DOCUMENTED_TIERS,
    MEASURED_BASE_RSS,
    MEASURED_RSS_PER_PARTITION,
    PARTITION_BUDGET_UNIT,
    POREP_BATCH_RESERVATION,
    worker_cap,
)
from .knobs import Severity, TomlValue
from .planner import MemcheckReport, memcheck_for, partitions_in_budget
from .session import iter_observed, read_meta
from .units import GiB, UnitError, format_size, parse_size

# The tuned knobs, in the order the search tries their neighbours. ``scheduler.max_batch_size`` is
# the daemon's key (config.rs SchedulerConfig) for what issue 13 calls batching.max_batch_size.
KNOB_NAMES: Final = (
    "memory.total_budget",
    "pipeline.max_parallel_synthesis",
    "gpus.gpu_workers_per_device",
    "pipeline.max_gpu_queue_depth",
    "gpus.gpu_threads",
    "scheduler.max_batch_size",
    "concurrency",
)
# A trial whose k-th proof comes later than this × the best trial's k-th is clearly worse.
EARLY_STOP_FACTOR: Final = 1.5
# A trial's spread is this many standard errors of its rate (about 95 % of repeated runs fall within).
SPREAD_SE: Final = 2.0
# Weight of upstream's measured model against each observed peak (a pseudo-observation count).
PRIOR_WEIGHT: Final = 1.0
STATE_FILE: Final = "tune.json"
TrialStatus = Literal["completed", "oom", "failed", "stopped", "skipped"]


@dataclass(frozen=True, slots=True, order=True)
class Knobs:
    """One point of the search space (the budget in whole GiB, as the config writes it)."""

    total_budget_gib: int
    max_parallel_synthesis: int
    gpu_workers_per_device: int
    max_gpu_queue_depth: int
    gpu_threads: int
    max_batch_size: int
    concurrency: int

    def values(self) -> dict[str, TomlValue]:
        """The config values (``"section.key"`` → TOML value); concurrency is the benchmark's, not a knob."""
        return {
            "memory.total_budget": f"{self.total_budget_gib}GiB",
            "pipeline.max_parallel_synthesis": self.max_parallel_synthesis,
            "gpus.gpu_workers_per_device": self.gpu_workers_per_device,
            "pipeline.max_gpu_queue_depth": self.max_gpu_queue_depth,
            "gpus.gpu_threads": self.gpu_threads,
            "scheduler.max_batch_size": self.max_batch_size,
        }

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    def changes(self, base: Knobs) -> list[str]:
        """``name = value`` of each knob that differs from ``base``."""
        mine = {**self.values(), "concurrency": self.concurrency}
        theirs = {**base.values(), "concurrency": base.concurrency}
        return [f"{name} = {json.dumps(mine[name])}" for name in KNOB_NAMES if mine[name] != theirs[name]]

    def pinned(self, base: Knobs, names: Collection[str]) -> Knobs:
        """These knobs with the ones ``names`` lists (config names) at ``base``'s values."""
        return dataclasses.replace(self, **{FIELD_OF[name]: getattr(base, FIELD_OF[name]) for name in names})


# Each tuned knob's field of :class:`Knobs`.
FIELD_OF: Final = dict(zip(KNOB_NAMES, (f.name for f in dataclasses.fields(Knobs)), strict=True))


def partitions_at_once(knobs: Knobs, kind: str, monolithic_workers: int = 0) -> int:
    """How many partitions these knobs let synthesize at once: the synthesis workers (engine.rs: max(2,
    min(budget / 14 GiB, max_parallel))), what the budget admits beside the kind's SRS and PCE, and what
    the benchmark keeps in flight (concurrency × the kind's partitions), whichever is smallest. In
    monolithic mode (``monolithic_workers``, one per GPU) each worker proves a whole proof at once."""
    if monolithic_workers:
        return partitions_held(knobs, kind, monolithic_workers)
    budget = knobs.total_budget_gib * GiB
    workers = worker_cap(budget, knobs.max_parallel_synthesis).workers
    return max(0, min(workers, partitions_held(knobs, kind)))


def partitions_held(knobs: Knobs, kind: str, monolithic_workers: int = 0) -> int:
    """How many partitions' memory these knobs let the daemon hold at once, what peak RSS follows: a
    synthesized partition keeps its reservation while it waits for a GPU, so the budget's admission
    (beside the kind's SRS and PCE), not the worker count, bounds them. With pacing on
    (max_gpu_queue_depth > 0, engine.rs DispatchPacer, a PI controller) dispatch aims at about that many
    synthesized partitions waiting, so the model counts the workers, the depth and the GPU workers: a
    target, not a hard bound, which the fitted model and the OOM rule correct. In monolithic mode
    (``monolithic_workers``: engine.rs runs one per GPU, outside any budget) each worker holds the whole
    proof it is proving, so the proofs in flight up to the workers do."""
    facts = BY_CLI_NAME[kind]
    if monolithic_workers:
        return min(knobs.concurrency, monolithic_workers) * facts.partitions
    budget = knobs.total_budget_gib * GiB
    held = min(partitions_in_budget(budget, facts.kind), knobs.concurrency * facts.partitions)
    if knobs.max_gpu_queue_depth > 0:
        workers = worker_cap(budget, knobs.max_parallel_synthesis).workers
        held = min(held, workers + knobs.max_gpu_queue_depth + knobs.gpu_workers_per_device)
    return max(0, held)


@dataclass(frozen=True, slots=True)
class Box:
    """The machine the search is bounded by, in the box's bytes (memcheck's figures)."""

    limit_bytes: int  # effective RAM: the cgroup limit, else MemTotal
    cpus: int
    gpus: int
    margin_bytes: int = DEFAULT_SAFETY_MARGIN

    @classmethod
    def from_report(cls, report: MemcheckReport) -> Box:
        return cls(report.effective_ram_bytes, report.cpus, max(1, len(report.gpus)), report.safety_margin_bytes)


def start_knobs(report: MemcheckReport, concurrency: int) -> Knobs:
    """memcheck's recommended knobs (planner.recommend), at the requested benchmark concurrency."""
    rec = {f"{r.section}.{r.key}": r.value for r in report.recommendations}

    def integer(name: str) -> int:
        value = rec[name]
        assert isinstance(value, int)
        return value

    return Knobs(
        total_budget_gib=report.recommended_budget_bytes // GiB,
        max_parallel_synthesis=integer("pipeline.max_parallel_synthesis"),
        gpu_workers_per_device=integer("gpus.gpu_workers_per_device"),
        max_gpu_queue_depth=integer("pipeline.max_gpu_queue_depth"),
        gpu_threads=integer("gpus.gpu_threads"),
        max_batch_size=1,
        concurrency=concurrency,
    )


def knobs_of(values: Mapping[str, Any], concurrency: int, auto_bytes: int) -> Knobs | None:
    """The search point of a config's effective values, ``"auto"`` read as ``auto_bytes`` (memcheck's
    MemTotal − safety_margin); None when its budget is not a size the daemon reads."""
    budget = values.get("memory.total_budget")
    if not isinstance(budget, str):
        return None
    try:
        size = auto_bytes if budget == "auto" else parse_size(budget)
    except UnitError:
        return None
    return Knobs(
        size // GiB,
        int(values["pipeline.max_parallel_synthesis"]),
        int(values["gpus.gpu_workers_per_device"]),
        int(values["pipeline.max_gpu_queue_depth"]),
        int(values["gpus.gpu_threads"]),
        int(values["scheduler.max_batch_size"]),
        concurrency,
    )


# --------------------------------------------------------------------------------------------
# What the trials teach: peak RSS against the partitions at once
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RssModel:
    """Peak RSS ≈ base + slope × partitions held (:func:`partitions_held`), fitted by weighted least
    squares to the trials' peaks with upstream's measured model (daemon_facts MEASURED_BASE_RSS,
    MEASURED_RSS_PER_PARTITION) as a prior; an OOM kill at p partitions held marks p and above as too much."""

    kind: str
    observations: list[tuple[int, int]] = field(default_factory=list)  # (partitions, peak bytes)
    oom_at: int | None = None  # the fewest partitions at once that were OOM-killed
    monolithic_workers: int = 0  # monolithic mode's workers (partitions_held); 0 in pipeline mode

    def held(self, knobs: Knobs) -> int:
        return partitions_held(knobs, self.kind, self.monolithic_workers)

    def observe(self, knobs: Knobs, peak_bytes: int | None, oom: bool) -> None:
        p = self.held(knobs)
        if oom:
            self.oom_at = p if self.oom_at is None else min(self.oom_at, p)
        elif peak_bytes is not None and peak_bytes > 0:
            self.observations.append((p, peak_bytes))

    def coefficients(self) -> tuple[float, float]:
        """(base, slope) in bytes: the prior's points weighted PRIOR_WEIGHT, each trial's 1."""
        points = [(float(p), float(peak), 1.0) for p, peak in self.observations]
        # The prior as two points of its line, so a single observation shifts the line, two turn it.
        for p in (0.0, 10.0):
            points.append((p, MEASURED_BASE_RSS + MEASURED_RSS_PER_PARTITION * p, PRIOR_WEIGHT / 2))
        w = sum(pt[2] for pt in points)
        mx = sum(x * wt for x, _, wt in points) / w
        my = sum(y * wt for _, y, wt in points) / w
        sxx = sum(wt * (x - mx) ** 2 for x, _, wt in points)
        sxy = sum(wt * (x - mx) * (y - my) for x, y, wt in points)
        slope = max(0.0, sxy / sxx) if sxx > 0 else float(MEASURED_RSS_PER_PARTITION)
        return my - slope * mx, slope

    def predict(self, knobs: Knobs) -> int:
        base, slope = self.coefficients()
        peak = base + slope * self.held(knobs)
        if knobs.max_batch_size > 1 and self.kind == "porep":
            peak = max(peak, base + POREP_BATCH_RESERVATION)  # a batch holds its flat reservation at once
        return int(peak)

    def refusal(self, knobs: Knobs, limit_bytes: int) -> str | None:
        """Why these knobs are not worth a run (predicted over the limit), or None."""
        p = self.held(knobs)
        if self.oom_at is not None and p >= self.oom_at:
            return f"{p} partitions held at once; {self.oom_at} were OOM-killed"
        predicted = self.predict(knobs)
        if predicted > limit_bytes:
            return f"predicted peak RSS {format_size(predicted)} > limit {format_size(limit_bytes)}"
        return None

    def largest_fitting(self, limit_bytes: int, margin_bytes: int) -> int:
        """The most partitions held the model keeps ``margin_bytes`` under the limit."""
        base, slope = self.coefficients()
        room = limit_bytes - margin_bytes - base
        fit = int(room // slope) if slope > 0 else 64
        if self.oom_at is not None:
            fit = min(fit, self.oom_at - 1)
        return max(0, fit)


# --------------------------------------------------------------------------------------------
# Trials
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trial:
    """One trial of the search, as the table shows it and ``tune.json`` keeps it."""

    index: int
    knobs: Knobs
    changes: tuple[str, ...]  # knobs that differ from the starting config
    status: TrialStatus
    proofs_per_hour: float = 0.0  # the modelled box's time for the engine
    peak_rss_bytes: int | None = None  # the box's bytes
    limit_bytes: int | None = None
    oom_kills: int = 0
    predicted_peak_bytes: int | None = None
    completed: int = 0
    wall_s: float = 0.0  # the box's seconds
    session: str | None = None
    note: str = ""  # the OOM evidence, the early stop, why it was skipped
    completion_times: tuple[float, ...] = ()  # real seconds from the start to each proof's end
    repeat_of: int | None = None  # the trial whose knobs this one runs again, to measure the noise

    @property
    def ran(self) -> bool:
        return self.status != "skipped"

    @property
    def measured(self) -> bool:
        """Whether the trial says how its knobs do (skipped and early-stopped ones do not)."""
        return self.status in ("completed", "oom", "failed")

    @property
    def spread(self) -> float | None:
        """How far this trial's rate may be off, from its own completions (:func:`completion_spread`)."""
        if self.status != "completed":
            return None
        return completion_spread(self.completion_times, self.knobs.concurrency)

    @property
    def peak_share(self) -> float | None:
        """The share of the limit the peak RSS took (peak ÷ limit): the closer to 1, the less headroom."""
        if self.peak_rss_bytes is None or not self.limit_bytes:
            return None
        return self.peak_rss_bytes / self.limit_bytes

    def price_per_proof(self, price_per_hour: float | None) -> float | None:
        if price_per_hour is None or self.proofs_per_hour <= 0:
            return None
        return price_per_hour / self.proofs_per_hour

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["knobs"] = self.knobs.as_dict()
        data["changes"] = list(self.changes)
        data["completion_times"] = list(self.completion_times)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trial:
        fields = dict(data)
        fields["knobs"] = Knobs(**fields["knobs"])
        fields["changes"] = tuple(fields["changes"])
        fields["completion_times"] = tuple(fields.get("completion_times", ()))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    """What a trial runner measured."""

    status: TrialStatus
    proofs_per_hour: float
    completed: int
    wall_s: float
    peak_rss_bytes: int | None
    limit_bytes: int | None
    oom_kills: int
    completion_times: tuple[float, ...]
    session: str
    note: str = ""
    # A failure no knob can change (:func:`trial_result`), in the daemon's words: the search stops.
    blocker: str | None = None


class SearchBlocked(Exception):
    """A trial failed for a reason no knob can change: any other trial would fail the same way."""

    def __init__(self, index: int, reason: str, session: str) -> None:
        super().__init__(index, reason, session)
        self.index, self.reason, self.session = index, reason, session

    def __str__(self) -> str:
        return (
            f"trial {self.index} failed for a reason no knob changes, so the search stopped: {self.reason} "
            f"(its session: {self.session}; the trial is not recorded: --resume runs it again, with the options "
            "the search started with)"
        )


class TrialRunner(Protocol):
    def __call__(
        self, index: int, config_text: str, concurrency: int, stop_when: Callable[[Sequence[float]], bool]
    ) -> TrialOutcome:
        """Run one benchmark with this config; ``stop_when(completion times so far)`` True stops it early."""
        ...


def completion_spread(times: Sequence[float], per_round: int) -> float | None:
    """The relative uncertainty (±, SPREAD_SE standard errors) of a rate measured from these completion
    times, the benchmark keeping ``per_round`` proofs in flight: the rate is the mean time of a round of
    that many proofs, and the rounds' times vary. The first round also holds the daemon's warm-up (its
    SRS load), a cost every trial pays rather than a spread: it is left out when three rounds or more
    leave two without it, and kept with only two (an estimate that errs wide). None with fewer than two
    rounds: one round says nothing of its own spread (a repeat of the trial does)."""
    rounds = len(times) // max(1, per_round)
    if rounds < 2:
        return None
    ends = sorted(times)[per_round - 1 :: per_round]
    durations = [end - start for start, end in zip((0.0, *ends), ends, strict=False)]
    if rounds >= 3:
        durations = durations[1:]
    mean = statistics.fmean(durations)
    if mean <= 0:
        return None
    return SPREAD_SE * statistics.stdev(durations) / mean / math.sqrt(len(durations))


def knob_independent(proofs: Sequence[Mapping[str, Any]]) -> str | None:
    """The daemon's reason when a benchmark's proofs failed for something no knob changes (the request,
    a parameter file, the proof type, the daemon's build: daemon_messages KNOB_INDEPENDENT_FAILURES, in
    any failed proof), or when every proof failed with a text that hides its cause (a monolithic
    prover's call, the PoRep self-check): a systematic refusal, not a bad GPU result among good ones.
    None: a knob may change it (an OOM, a budget the daemon refused, a lost job, a GPU error, a text
    not known here)."""
    failed = [str(p.get("error") or "") for p in proofs if p.get("status") == "FAILED"]
    for error in failed:
        if any(text in error for text in msg.KNOB_INDEPENDENT_FAILURES):
            return error
    hidden = (*msg.MONOLITHIC_CALL_FAILED, msg.SELF_CHECK_FAILED)
    if proofs and len(failed) == len(proofs) and all(any(text in e for text in hidden) for e in failed):
        return failed[0]
    return None


def failure_note(summary: Mapping[str, Any]) -> str:
    """A failed benchmark's error with each distinct reason its proofs gave (failed or lost)."""
    reasons: dict[str, int] = {}
    for proof in summary.get("proofs") or ():
        if proof.get("status") in ("FAILED", "LOST"):
            reason = f"{str(proof['status']).lower()}: {proof.get('error') or 'no reason given'}"
            reasons[reason] = reasons.get(reason, 0) + 1
    said = [f"{n} × {reason}" if n > 1 else reason for reason, n in reasons.items()]
    return "; ".join([str(summary.get("error") or ""), *said]).strip("; ")


def trial_result(
    returncode: int, summary: Mapping[str, Any], *, stopped: bool, oom_kills: int
) -> tuple[TrialStatus, str, str | None]:
    """(status, note, blocker) of a trial's benchmark from its exit status and ``--json`` summary
    (cuzktui.bench BenchSummary.to_json). Exit 2 is the bench refusing its inputs; a proof the daemon
    lost (status LOST, with why) fails the trial as any other failure a knob may change does."""
    if stopped:
        return "stopped", f"stopped early: slower than {EARLY_STOP_FACTOR:g} × the best", None
    error = str(summary.get("error") or "")
    if oom_kills:
        return "oom", error, None
    if returncode == 0:
        return "completed", error, None
    if returncode == 2:
        return "failed", error, error or "the benchmark refused its inputs (exit status 2)"
    blocker = knob_independent(summary.get("proofs") or ())
    return "failed", blocker or failure_note(summary), blocker


def early_stop(best: Trial | None, count: int) -> Callable[[Sequence[float]], bool]:
    """True once a trial's k-th proof (k ≥ a third of ``count``) came later than EARLY_STOP_FACTOR ×
    the best trial's k-th; also while it waits for the k-th beyond that time (``times`` then ends
    with the time now, the pending proof's lower bound)."""
    reference = best.completion_times if best is not None and best.status == "completed" else ()
    first = max(1, math.ceil(count / 3))

    def stop(times: Sequence[float]) -> bool:
        for k, t in enumerate(times, 1):
            if k >= first and k <= len(reference) and t > EARLY_STOP_FACTOR * reference[k - 1]:
                return True
        return False

    return stop


# --------------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the machine allows each knob (memcheck's figures, the budget floors)."""

    min_budget_gib: int
    max_budget_gib: int
    max_parallel: int
    max_concurrency: int
    gpu_thread_choices: tuple[int, ...]
    batch_choices: tuple[int, ...]

    @classmethod
    def of(cls, box: Box, kind: str, count: int) -> Bounds:
        facts = BY_CLI_NAME[kind]
        # The kind's floor (knob_rules.budget_floor_problem): its SRS and one reservation, PCE beside them.
        floor = facts.srs_bytes + facts.pce_bytes + facts.full_reservation
        ceiling = max(0, box.limit_bytes - box.margin_bytes)
        batch = (1, 2) if kind == "porep" and ceiling >= facts.srs_bytes + POREP_BATCH_RESERVATION else (1,)
        return cls(
            min_budget_gib=math.ceil(floor / GiB),
            max_budget_gib=max(math.ceil(floor / GiB), ceiling // GiB),
            max_parallel=max(2, box.cpus),
            max_concurrency=max(1, count),
            gpu_thread_choices=(0, 32) if box.cpus > 32 else (0,),
            batch_choices=batch,
        )

    def clamp(self, knobs: Knobs) -> Knobs:
        return dataclasses.replace(
            knobs,
            total_budget_gib=min(self.max_budget_gib, max(self.min_budget_gib, knobs.total_budget_gib)),
            max_parallel_synthesis=min(self.max_parallel, max(1, knobs.max_parallel_synthesis)),
            concurrency=min(self.max_concurrency, max(1, knobs.concurrency)),
        )


def fill_memory(knobs: Knobs, partitions: int, kind: str, bounds: Bounds) -> Knobs:
    """``knobs`` with the budget that holds ``partitions`` beside the kind's SRS and PCE."""
    facts = BY_CLI_NAME[kind]
    budget = math.ceil((facts.srs_bytes + facts.pce_bytes + partitions * facts.full_reservation) / GiB)
    return bounds.clamp(dataclasses.replace(knobs, total_budget_gib=budget))


def neighbours(knobs: Knobs, bounds: Bounds, *, lower: frozenset[str] = frozenset()) -> list[Knobs]:
    """One step along each knob, within the bounds; the budget and the synthesis workers step down only
    when named in ``lower``."""
    unit = PARTITION_BUDGET_UNIT // GiB
    step = max(1, knobs.concurrency // 3)
    moves = [dataclasses.replace(knobs, total_budget_gib=knobs.total_budget_gib + unit)]
    if "total_budget_gib" in lower:
        moves.append(dataclasses.replace(knobs, total_budget_gib=knobs.total_budget_gib - unit))
    moves.append(dataclasses.replace(knobs, max_parallel_synthesis=knobs.max_parallel_synthesis + 1))
    if "max_parallel_synthesis" in lower:
        moves.append(dataclasses.replace(knobs, max_parallel_synthesis=knobs.max_parallel_synthesis - 1))
    moves += [dataclasses.replace(knobs, gpu_workers_per_device=n) for n in (1, 2, 3)]
    moves += [dataclasses.replace(knobs, max_gpu_queue_depth=n) for n in (0, 4, 8)]
    moves += [dataclasses.replace(knobs, gpu_threads=n) for n in bounds.gpu_thread_choices]
    moves += [dataclasses.replace(knobs, max_batch_size=n) for n in bounds.batch_choices]
    moves += [dataclasses.replace(knobs, concurrency=knobs.concurrency + d) for d in (step, -step)]
    out: list[Knobs] = []
    for move in (bounds.clamp(m) for m in moves):
        if move != knobs and move not in out:
            out.append(move)
    return out


def behaviour(knobs: Knobs, kind: str, monolithic_workers: int = 0) -> tuple[int, ...]:
    """What the daemon does with these knobs: two knob sets that synthesize and hold the same partitions
    (a larger max_parallel_synthesis than the budget admits changes nothing) need one trial."""
    at_once = partitions_at_once(knobs, kind, monolithic_workers)
    return (at_once, partitions_held(knobs, kind, monolithic_workers), *dataclasses.astuple(knobs)[2:])


@dataclass(frozen=True, slots=True)
class Measured:
    """One config's rate over its runs (a repeat is a second run) and how far it may be off."""

    runs: tuple[Trial, ...]  # in order; the first is the config's own trial

    @property
    def knobs(self) -> Knobs:
        return self.runs[0].knobs

    @property
    def rate(self) -> float:
        """Mean proofs/hour of the runs."""
        return statistics.fmean(t.proofs_per_hour for t in self.runs)

    @property
    def noise(self) -> float | None:
        """The relative half-width of the rate: the largest of the runs' spreads (from their completions)
        and half the runs' relative range; None when neither was measured (one run of one round)."""
        widths = [t.spread for t in self.runs if t.spread is not None]
        if len(self.runs) > 1 and self.rate > 0:
            rates = [t.proofs_per_hour for t in self.runs]
            widths.append((max(rates) - min(rates)) / 2 / self.rate)
        return max(widths, default=None)

    @property
    def name(self) -> str:
        """``trial 3``, or ``trials 3 and 7`` for a config run again."""
        indices = [str(t.index) for t in self.runs]
        return f"trial {indices[0]}" if len(indices) == 1 else f"trials {', '.join(indices[:-1])} and {indices[-1]}"

    def figure(self, noise: float | None) -> str:
        """``1896.0 ± 2.1%``: the mean rate, and the noise it is weighed with when there is one."""
        return f"{self.rate:.1f}" if noise is None else f"{self.rate:.1f} ± {noise:.1%}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a config beat the starting one beyond the noise, and why, in words."""

    better: Measured | None  # the config that did; None: keep the starting config (or nothing completed)
    start: Measured | None  # the starting config, when it completed every proof safely
    text: str


NO_BETTER: Final = "no config beat the starting one"


def _beats(config: Measured, start: Measured) -> bool:
    """Whether ``config``'s rate less its noise is above the start's plus the start's (both measured)."""
    assert config.noise is not None and start.noise is not None
    return config.rate * (1 - config.noise) > start.rate * (1 + start.noise)


@dataclass(slots=True)
class Search:
    """The search state: the trials so far and what they taught; :meth:`next_knobs` proposes the next."""

    kind: str
    count: int
    box: Box
    start: Knobs  # memcheck's recommendation: the first trial
    baseline: Knobs | None = None  # the starting config's own knobs, tried first when it differs
    trials: list[Trial] = field(default_factory=list)
    # Knobs that change nothing in the daemon's mode (knob_rules.inert_knobs), each with why: every trial
    # keeps the starting config's value of them.
    inert: dict[str, str] = field(default_factory=dict)
    monolithic: bool = False  # pipeline.enabled = false: one worker per GPU proves whole proofs

    @property
    def bounds(self) -> Bounds:
        return Bounds.of(self.box, self.kind, self.count)

    @property
    def reference(self) -> Knobs:
        """The starting config's knobs, which every other config must beat."""
        return self.baseline or self.start

    @property
    def monolithic_workers(self) -> int:
        return self.box.gpus if self.monolithic else 0

    def held(self, knobs: Knobs) -> int:
        return partitions_held(knobs, self.kind, self.monolithic_workers)

    def pinned(self, knobs: Knobs) -> Knobs:
        """``knobs`` with every inert knob at the starting config's value."""
        return knobs.pinned(self.reference, self.inert)

    def model(self) -> RssModel:
        model = RssModel(self.kind, monolithic_workers=self.monolithic_workers)
        for t in self.trials:
            if t.ran and t.status != "failed":
                model.observe(t.knobs, t.peak_rss_bytes, t.status == "oom")
        return model

    def measured(self) -> dict[Knobs, Measured]:
        """Each config that was measured, with all its runs (an early-stopped trial measured nothing)."""
        runs: dict[Knobs, list[Trial]] = {}
        for t in self.trials:
            if t.measured:
                runs.setdefault(t.knobs, []).append(t)
        return {knobs: Measured(tuple(them)) for knobs, them in runs.items()}

    def _safe(self, config: Measured, oom_at: int | None) -> bool:
        """Every run completed every proof without an OOM kill, holding fewer partitions than any trial
        that was OOM-killed (one that passed once at a size that also got killed is on the edge)."""
        done = all(t.status == "completed" and t.oom_kills == 0 for t in config.runs)
        return done and (oom_at is None or self.held(config.knobs) < oom_at)

    def fastest(self) -> Measured | None:
        """The safe config with the highest mean rate."""
        oom_at = self.model().oom_at
        safe = [m for m in self.measured().values() if self._safe(m, oom_at)]
        return max(safe, key=lambda m: m.rate, default=None)

    def best(self) -> Trial | None:
        """The fastest safe config's own trial (the search climbs from it and times the others by it)."""
        fastest = self.fastest()
        return None if fastest is None else fastest.runs[0]

    def verdict(self) -> Verdict:
        """Whether the fastest config beat the starting one beyond the noise: its rate less its noise above
        the start's plus the start's, each noise measured (of its own rounds, or by a repeat), and both run
        again (:meth:`confirmations`). A start that did not complete every proof safely is beaten by any
        config that did."""
        fastest = self.fastest()
        if fastest is None:
            return Verdict(None, None, "no trial completed every proof without an OOM kill")
        start = self.measured().get(self.reference)
        if start is None or not self._safe(start, self.model().oom_at):
            runs = () if start is None else start.runs
            why = ", ".join(f"trial {t.index}: {t.status}" for t in runs) or "not run: predicted over the limit"
            if runs and all(t.status == "completed" for t in runs):
                why = f"{why}, holding as many partitions as an OOM-killed trial"
            rate = f"{fastest.name}: {fastest.figure(fastest.noise)} proofs/hour"
            return Verdict(fastest, None, f"the starting config did not complete safely ({why}); {rate}")
        if fastest.knobs == start.knobs:
            rate = f"{start.name}: {start.figure(start.noise)} proofs/hour"
            return Verdict(None, start, f"{NO_BETTER}: the starting config was the fastest ({rate})")
        mine, theirs = fastest.noise, start.noise
        if mine is None or theirs is None:
            # A spread measured at one concurrency says nothing of another's: neither borrows the other's.
            unmeasured = " and ".join(m.name for m in (fastest, start) if m.noise is None)
            return Verdict(
                None, start,
                f"{NO_BETTER} beyond the noise, which was not measured for {unmeasured}: {fastest.name}'s "
                f"{fastest.figure(mine)} against the start's {start.figure(theirs)} proofs/hour ({start.name}); "
                "a trial needs two rounds of its concurrency's proofs, or a repeat",
            )  # fmt: skip
        figures = f"{fastest.figure(mine)} against the start's {start.figure(theirs)} proofs/hour ({start.name})"
        if not _beats(fastest, start):
            return Verdict(None, start, f"{NO_BETTER}: {fastest.name}'s {figures} is within the noise")
        once = [m.name for m in (start, fastest) if len(m.runs) < 2]
        if once:
            return Verdict(
                None, start,
                f"{NO_BETTER} yet: {fastest.name}'s {figures} is beyond the noise on its own trial, but a config "
                f"is better only once it and the start have run again ({' and '.join(once)} ran once: more "
                "trials leave room for the repeats)",
            )  # fmt: skip
        return Verdict(fastest, start, f"{fastest.name} beat the starting config beyond the noise: {figures}")

    def confirmations(self) -> list[Knobs]:
        """The configs to run again before a verdict can hold: the start and the fastest, each once, unless
        the two measured their own noise and the fastest is within it (running them again cannot make that
        clear)."""
        fastest = self.fastest()
        start = self.measured().get(self.reference)
        if (
            start is None
            or fastest is None
            or fastest.knobs == start.knobs
            or not self._safe(start, self.model().oom_at)
        ):
            return []
        if fastest.noise is not None and start.noise is not None and not _beats(fastest, start):
            return []
        return [m.knobs for m in (start, fastest) if len(m.runs) < 2]

    def candidates(self) -> list[Knobs]:
        """Untried knobs worth a trial, the most promising first: the baseline and memcheck's start, then
        the budget that holds the most partitions the model lets fit, then one step along each knob from
        the best. The budget and the workers step down only where a completed trial went higher than the
        best (the rate has not only grown with them)."""
        best = self.best()
        model = self.model()
        centre = best.knobs if best is not None else self.start
        fit = model.largest_fitting(self.box.limit_bytes, self.box.margin_bytes)
        completed = [t.knobs for t in self.trials if t.status == "completed"]
        lower = frozenset(
            name for name in ("total_budget_gib", "max_parallel_synthesis")
            if best is None or any(getattr(k, name) > getattr(best.knobs, name) for k in completed)
        )  # fmt: skip
        ordered = [k for k in (self.baseline, self.start) if k is not None]
        ordered.append(fill_memory(centre, fit, self.kind, self.bounds))
        ordered += neighbours(centre, self.bounds, lower=lower)
        workers = self.monolithic_workers
        seen = {behaviour(t.knobs, self.kind, workers) for t in self.trials}
        out: list[Knobs] = []
        for k in map(self.pinned, ordered):  # an inert knob's step is no step: the same behaviour
            if behaviour(k, self.kind, workers) not in seen:
                seen.add(behaviour(k, self.kind, workers))
                out.append(k)
        return out

    def next_knobs(self) -> tuple[Knobs, str | None] | None:
        """The next candidate and, when the model says it would not fit, why (a skipped trial); None
        when every neighbour of the best has been tried or skipped: the search has converged. A refused
        candidate holding at least as many partitions as one already skipped is passed over without a
        row of its own (the table says each refusal once)."""
        model = self.model()
        skipped = [self.held(t.knobs) for t in self.trials if t.status == "skipped"]
        for k in self.candidates():
            if k == self.baseline:
                return k, None  # the starting config is measured whatever the model says: it is the reference
            refusal = model.refusal(k, self.box.limit_bytes)
            if refusal is not None and any(held <= self.held(k) for held in skipped):
                continue
            return k, refusal
        return None

    def record(self, trial: Trial) -> None:
        self.trials.append(trial)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "count": self.count,
            "box": dataclasses.asdict(self.box),
            "start": self.start.as_dict(),
            "baseline": None if self.baseline is None else self.baseline.as_dict(),
            "trials": [t.to_json() for t in self.trials],
            "inert": self.inert,
            "monolithic": self.monolithic,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Search:
        return cls(
            kind=data["kind"],
            count=data["count"],
            box=Box(**data["box"]),
            start=Knobs(**data["start"]),
            baseline=None if data["baseline"] is None else Knobs(**data["baseline"]),
            trials=[Trial.from_json(t) for t in data["trials"]],
            inert=dict(data.get("inert") or {}),
            monolithic=bool(data.get("monolithic", False)),
        )


def new_search(
    start_text: str, kind: str, count: int, concurrency: int, *, engine: bool, memory_limit: int | None
) -> tuple[Search, MemcheckReport]:
    """A search of ``count`` proofs of ``kind`` per trial from this config, bounded by memcheck's figures
    (on the engine, the box it emulates). ``memory_limit``: the real bytes of the trials' cgroup, which
    bounds a real daemon's box below this machine's RAM."""
    effective = ConfigDocument.parse(start_text).effective()
    report = memcheck_for(effective, engine=engine, memory_limit_bytes=memory_limit)
    box = Box.from_report(report)
    if not engine and memory_limit is not None:  # memcheck describes this machine; the trials' cgroup is smaller
        box = dataclasses.replace(box, limit_bytes=min(box.limit_bytes, memory_limit))
    baseline = knobs_of(effective, concurrency, report.auto_budget_bytes)
    inert = {name: why for name, why in knob_rules.inert_knobs(effective).items() if name in KNOB_NAMES}
    search = Search(
        kind, count, box, start_knobs(report, concurrency), baseline, inert=inert,
        monolithic=knob_rules.monolithic(effective),
    )  # fmt: skip
    search.start = search.pinned(search.start)  # memcheck's recommendation of what acts in this mode
    return search, report


def left_alone(search: Search, *, reasons: bool = True) -> str | None:
    """Which knobs the search leaves at the starting config's values, and why (each knob's own reason
    too, unless ``reasons`` is False: a screen's one line); None when it varies them all."""
    if not search.inert:
        return None
    if not reasons:
        return f"left alone (no effect with pipeline.enabled = false): {', '.join(search.inert)}"
    why = "; ".join(f"{name}: {reason}" for name, reason in search.inert.items())
    return f"left alone, as they have no effect with pipeline.enabled = false — {why}"


def trial_configs(search: Search, start_text: str) -> Callable[[Knobs], str]:
    """Each trial's config: the starting text exactly as given for the baseline (the reference trial),
    else the starting document with the trial's knobs set (:func:`best_config`)."""
    start_doc = ConfigDocument.parse(start_text)

    def config_for(knobs: Knobs) -> str:
        return start_text if knobs == search.baseline else best_config(start_doc, knobs, search.inert).text()

    return config_for


def time_basis(engine: bool) -> str:
    """Whose clock a search's proofs/hour are in."""
    return "the modelled box's time (engine time_scale)" if engine else "wall-clock time"


def spread_cell(spread: float | None) -> str:
    """A trial's spread as its table shows it: ``±2.1%``, or ``-`` when not measured."""
    return "-" if spread is None else f"±{spread:.1%}"


def trial_what(trial: Trial) -> str:
    """The knobs a trial changed from the starting config, and whose run it repeats."""
    what = ", ".join(trial.changes) or "the starting config"
    return what if trial.repeat_of is None else f"{what}, again (repeat of trial {trial.repeat_of})"


def trial_line(trial: Trial, limit: int) -> str:
    """One line of progress for a finished (or skipped) trial."""
    what = trial_what(trial)
    if not trial.ran:
        return f"trial {trial.index}: skipped ({what}): {trial.note}"
    peak = "-" if trial.peak_rss_bytes is None else format_size(trial.peak_rss_bytes)
    spread = "" if trial.spread is None else f" {spread_cell(trial.spread)}"
    note = f": {brief(trial.note)}" if trial.status not in ("completed", "oom") and trial.note else ""
    return (
        f"trial {trial.index}: {trial.status}, {trial.proofs_per_hour:.1f}{spread} proofs/hour, peak {peak} of "
        f"{format_size(limit)} ({what}){note}"
    )


def save_state(search: Search, directory: Path, args: Mapping[str, Any]) -> None:
    save_atomic(json.dumps({"args": dict(args), "search": search.to_json()}, indent=1), directory / STATE_FILE)


def load_state(directory: Path) -> tuple[Search, dict[str, Any]]:
    data = json.loads((directory / STATE_FILE).read_text())
    return Search.from_json(data["search"]), dict(data["args"])


def _or_cancelled(
    stop: Callable[[Sequence[float]], bool], cancelled: Callable[[], bool]
) -> Callable[[Sequence[float]], bool]:
    return lambda times: cancelled() or stop(times)


def run_search(
    search: Search,
    runner: TrialRunner,
    config_for: Callable[[Knobs], str],
    *,
    max_trials: int,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_trial: Callable[[Trial], None] | None = None,
    on_start: Callable[[int, Knobs], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Search:
    """Run trials until ``max_trials`` have run (skipped ones do not count), the deadline, convergence or
    ``cancelled()``; ``on_start(index, knobs)`` before each benchmark, ``on_trial`` after each trial. A
    cancel stops the benchmark running and leaves it unrecorded, so a resumed search runs it again.

    The last trials run the start and the fastest config again when it beats the start on its own trial
    (:meth:`Search.confirmations`): the search keeps room for them. A trial that fails for a reason no
    knob changes raises :class:`SearchBlocked`, unrecorded too."""
    limit = search.box.limit_bytes

    def ran() -> int:
        return sum(1 for t in search.trials if t.ran)

    def time_left() -> bool:
        return (deadline is None or clock() < deadline) and not cancelled()

    def run(knobs: Knobs, repeat_of: int | None, refusal: str | None) -> bool:
        """Run (or skip) one trial and record it; False when cancelled."""
        index = len(search.trials) + 1
        predicted = search.model().predict(knobs)
        changes = tuple(knobs.changes(search.reference))
        if refusal is not None:
            trial = Trial(index, knobs, changes, "skipped", limit_bytes=limit, predicted_peak_bytes=predicted,
                          note=refusal)  # fmt: skip
        else:
            if on_start is not None:
                on_start(index, knobs)
            # A repeat measures the noise: it runs to the end, however it compares with the best.
            stop = early_stop(search.best(), search.count) if repeat_of is None else early_stop(None, 0)
            outcome = runner(index, config_for(knobs), knobs.concurrency, _or_cancelled(stop, cancelled))
            if cancelled():
                return False
            if outcome.blocker is not None:
                raise SearchBlocked(index, outcome.blocker, outcome.session)
            trial = Trial(
                index, knobs, changes, outcome.status, outcome.proofs_per_hour, outcome.peak_rss_bytes,
                outcome.limit_bytes or limit, outcome.oom_kills, predicted, outcome.completed, outcome.wall_s,
                outcome.session, outcome.note, outcome.completion_times, repeat_of,
            )  # fmt: skip
        search.record(trial)
        if on_trial is not None:
            on_trial(trial)
        return True

    while ran() + len(search.confirmations()) < max_trials and time_left():
        proposal = search.next_knobs()
        if proposal is None or not run(proposal[0], None, proposal[1]):
            break
    while ran() < max_trials and time_left() and (again := search.confirmations()):
        first = next(t.index for t in search.trials if t.knobs == again[0] and t.measured)
        if not run(again[0], first, None):
            break
    return search


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------


def config_changes(base: ConfigDocument, knobs: Knobs, leave: Collection[str] = ()) -> dict[str, TomlValue]:
    """The tuned knobs (``"section.key"`` → value) whose value differs from the document's effective one,
    but for those in ``leave`` (the inert ones: written as the operator wrote them)."""
    effective = base.effective()
    return {name: value for name, value in knobs.values().items() if effective.get(name) != value and name not in leave}


def best_config(base: ConfigDocument, knobs: Knobs, leave: Collection[str] = ()) -> ConfigDocument:
    """The starting document with the tuned knobs set (but those in ``leave``): comments kept, only lines
    whose value changes differ."""
    doc = ConfigDocument.parse(base.text())
    for name, value in config_changes(doc, knobs, leave).items():
        section, key = name.split(".", 1)
        doc.set(section, key, value)
    return doc


def config_errors(doc: ConfigDocument) -> list[str]:
    """What ``cuzk-tui config check`` would call an error in this document."""
    return [str(p) for p in doc.problems() if p.severity is Severity.ERROR]


def tier_line(limit_bytes: int, kind: str) -> str | None:
    """Upstream's documented figures for a box of this RAM (daemon_facts DOCUMENTED_TIERS: s/proof and
    peak RSS, PoRep, measured at 15-20 proofs in flight), to set beside the search's; None off the tiers."""
    tier = next((t for t in DOCUMENTED_TIERS if t.ram_gib * GiB == limit_bytes), None)
    if tier is None or kind != "porep":
        return None
    return (
        f"upstream's {tier.ram_gib} GiB tier: {tier.seconds_per_proof:g} s/proof ({3600 / tier.seconds_per_proof:.1f} "
        f"proofs/hour), peak RSS {tier.peak_rss_gib} GiB, max_parallel_synthesis {tier.max_parallel_synthesis}, "
        f"gpu_workers_per_device {tier.gpu_workers_per_device}"
    )


def brief(note: str) -> str:
    """A trial's note for one table row: the diagnosis's clauses up to the cgroup's OOM counter (the
    kernel's lines stay in tune.json and the trial's session)."""
    clauses = note.splitlines()[0].split("; ") if note else []
    kept = []
    for clause in clauses:
        kept.append(clause)
        if "oom_kill" in clause and "→" in clause:
            break
    return "; ".join(kept)


def _cell_size(n: int | None) -> str:
    return "-" if n is None else f"{n / GiB:.0f}"


def format_table(trials: Sequence[Trial], price_per_hour: float | None, *, time_basis: str) -> str:
    """The trials as a table: knobs changed, proofs/hour and its spread, peak RSS against the limit, OOM
    kills, price."""
    header = f"{'#':>3} {'status':<9}{'proofs/h':>9}{'spread':>8}{'s/proof':>8}{'peak GiB':>9}{'limit':>6}"
    header += f"{'peak/lim':>9}{'OOM':>4}{'$/proof':>9}  knobs changed (from the starting config) / note"
    lines = [
        f"proofs/hour in {time_basis}, spread from each trial's own completions (± {SPREAD_SE:g} standard errors); "
        "peak RSS and limit in GiB of the box (a run's limit is what the kernel enforced); peak/lim = the share of "
        "the limit the peak took (100% = no headroom left)",
        header,
    ]
    for t in trials:
        price = t.price_per_proof(price_per_hour)
        share = "-" if t.peak_share is None else f"{t.peak_share:.0%}"
        peak = _cell_size(t.peak_rss_bytes) if t.ran else f"~{_cell_size(t.predicted_peak_bytes)}"
        rate = f"{t.proofs_per_hour:.1f}" if t.ran else "-"
        per_proof = f"{3600 / t.proofs_per_hour:.1f}" if t.proofs_per_hour > 0 else "-"
        what = trial_what(t) if t.changes or t.repeat_of is not None else "(starting config)"
        note = f" — {brief(t.note)}" if t.note else ""
        lines.append(
            f"{t.index:>3} {t.status:<9}{rate:>9}{spread_cell(t.spread):>8}{per_proof:>8}{peak:>9}"
            f"{_cell_size(t.limit_bytes):>6}{share:>9}{t.oom_kills:>4}"
            f"{'-' if price is None else f'{price:.3f}':>9}  {what}{note}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The search as the TUI's Tune screen shows it (cuzktui.controller's snapshot types)
# --------------------------------------------------------------------------------------------


def trial_row(trial: Trial, price_per_hour: float | None) -> TuneTrialRow:
    """A recorded trial as a row; a skipped one shows the model's predicted peak, no rate."""
    repeat = "" if trial.repeat_of is None else f"repeat of trial {trial.repeat_of}"
    return TuneTrialRow(
        index=trial.index,
        status=trial.status,
        changes=trial.changes,
        proofs_per_hour=trial.proofs_per_hour if trial.ran else None,
        peak_rss_bytes=trial.peak_rss_bytes if trial.ran else trial.predicted_peak_bytes,
        predicted=not trial.ran,
        limit_bytes=trial.limit_bytes,
        peak_share=trial.peak_share,
        oom_kills=trial.oom_kills,
        price_per_proof=trial.price_per_proof(price_per_hour),
        completed=trial.completed,
        note="; ".join(n for n in (repeat, brief(trial.note)) if n),
        spread=trial.spread,
    )


def running_row(search: Search, index: int, knobs: Knobs, figures: SessionFigures | None) -> TuneTrialRow:
    """The trial whose benchmark runs now, with what its session says so far."""
    peak = figures.peak_rss_bytes if figures is not None else None
    done = len(figures.completion_times) if figures is not None else 0
    limit = search.box.limit_bytes
    return TuneTrialRow(
        index=index,
        status="running",
        changes=tuple(knobs.changes(search.baseline or search.start)),
        proofs_per_hour=None,
        peak_rss_bytes=peak,
        predicted=False,
        limit_bytes=limit,
        peak_share=None if peak is None else peak / limit,
        oom_kills=figures.oom_kills if figures is not None else 0,
        price_per_proof=None,
        completed=done,
        note=f"{done} of {search.count} proofs so far",
    )


def best_of(search: Search, running_config: str) -> TuneBest | None:
    """The config that beat the starting one beyond the noise so far (:meth:`Search.verdict`), what
    applying it changes in the running config, and whether the result passes ``config check``."""
    verdict = search.verdict()
    better = verdict.better
    if better is None:
        return None
    doc = ConfigDocument.parse(running_config)
    start = verdict.start
    shares = [t.peak_share for t in better.runs if t.peak_share is not None]
    return TuneBest(
        index=better.runs[0].index,
        proofs_per_hour=better.rate,
        speedup=better.rate / start.rate if start is not None and start.rate > 0 else None,
        peak_share=max(shares, default=None),
        concurrency=better.knobs.concurrency,
        changes=tuple(config_changes(doc, better.knobs, search.inert).items()),
        check_errors=tuple(config_errors(best_config(doc, better.knobs, search.inert))),
    )


# --------------------------------------------------------------------------------------------
# The real trial: a headless benchmark in a process of its own
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionFigures:
    """What a trial's benchmark session says so far."""

    peak_rss_bytes: int | None  # the box's bytes: the highest sampled RSS or cgroup high-water mark
    oom_kills: int
    completion_times: tuple[float, ...]  # real seconds from the first submission to each completed proof
    first_submitted: float | None  # epoch seconds of the first submission


def read_trial_session(session: Path, memory_scale: float) -> SessionFigures:
    """A benchmark session's figures; the peak is the highest of the sampled RSS and the cgroup's
    high-water mark (sampling at 1 s misses short peaks; meta ``cgroup_peak_bytes``)."""
    peak = 0
    ooms = 0
    started: float | None = None
    times: list[float] = []
    for event in iter_observed(session):
        if isinstance(event, ev.MemorySample) and event.rss_bytes:
            peak = max(peak, event.rss_bytes)
        elif isinstance(event, ev.DaemonExited) and event.cause == "oom_kill":
            ooms += 1
        elif isinstance(event, ev.ProofSubmitted) and started is None:
            started = event.t
        elif isinstance(event, ev.ProofFinished) and event.status == "COMPLETED" and started is not None:
            times.append(event.t - started)
    meta = read_meta(session)
    peak = max(peak, int(meta.get("cgroup_peak_bytes") or 0))
    return SessionFigures(int(peak / memory_scale) if peak else None, ooms, tuple(sorted(times)), started)


def _enforced_limit(session: Path, memory_scale: float) -> int | None:
    """The limit the kernel enforced on the trial, in the box's bytes (session meta ``cgroup``, written by
    the supervisor; an engine's inputs in flight are outside its box's cgroup)."""
    cgroup = read_meta(session).get("cgroup")
    if not isinstance(cgroup, dict) or not cgroup.get("limit_bytes"):
        return None
    return int(cgroup["limit_bytes"] / memory_scale)


@dataclass(frozen=True, slots=True)
class BenchTrialRunner:
    """Runs each trial as ``python -m cuzktui.bench --session DIR/trial-NN …`` (``--oom-retries 0``)."""

    directory: Path
    kind: str
    count: int
    program_args: tuple[str, ...]  # ("--engine",) or ("--daemon", PATH)
    memory_limit: int | None  # real bytes of the trial's cgroup
    memory_scale: float  # real bytes per box byte (1 for a real daemon)
    poll_s: float = 0.25

    def session_of(self, index: int) -> Path:
        """Where trial ``index`` records its benchmark session."""
        return self.directory / f"trial-{index:02d}"

    def __call__(
        self, index: int, config_text: str, concurrency: int, stop_when: Callable[[Sequence[float]], bool]
    ) -> TrialOutcome:
        session = self.session_of(index)
        if session.exists():  # an interrupted trial of a resumed search: run it again from scratch
            for path in sorted(session.rglob("*"), reverse=True):
                path.rmdir() if path.is_dir() else path.unlink()
            session.rmdir()
        config = self.directory / f"trial-{index:02d}.toml"
        save_atomic(config_text, config)
        argv = [
            sys.executable, "-m", "cuzktui.bench", "--session", str(session), *self.program_args,
            "--config", str(config), "--kind", self.kind, "--count", str(self.count),
            "--concurrency", str(concurrency), "--oom-retries", "0", "--json",
        ]  # fmt: skip
        if self.memory_limit is not None:
            argv += ["--memory-limit", str(self.memory_limit)]
        log = self.directory / f"trial-{index:02d}.log"
        stopped = False
        with log.open("wb") as stderr:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
            try:
                while proc.poll() is None:
                    try:
                        proc.wait(timeout=self.poll_s)
                    except subprocess.TimeoutExpired:
                        so_far = read_trial_session(session, self.memory_scale)
                        first = so_far.first_submitted
                        # The proof now due is at least as late as now: measured, like the others, from
                        # the first submission (the daemon's start before it is no proof's time).
                        pending = () if first is None else (time.time() - first,)
                        if not stopped and stop_when((*so_far.completion_times, *pending)):
                            stopped = True
                            proc.send_signal(signal.SIGTERM)  # the bench cancels and stops its daemon
                stdout = proc.stdout.read() if proc.stdout is not None else b""
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()
        try:
            summary = json.loads(stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            summary = {"error": log.read_text(errors="replace").strip()[-400:] or f"exit status {proc.returncode}"}
        figures = read_trial_session(session, self.memory_scale)
        status, note, blocker = trial_result(proc.returncode, summary, stopped=stopped, oom_kills=figures.oom_kills)
        limit = _enforced_limit(session, self.memory_scale)
        return TrialOutcome(
            status=status,
            proofs_per_hour=float(summary.get("proofs_per_hour") or 0.0) if status == "completed" else 0.0,
            completed=int(summary.get("completed") or 0),
            wall_s=float(summary.get("wall_s") or 0.0),
            peak_rss_bytes=figures.peak_rss_bytes,
            limit_bytes=limit,
            oom_kills=figures.oom_kills,
            completion_times=figures.completion_times,
            session=str(session),
            note=note,
            blocker=blocker,
        )
