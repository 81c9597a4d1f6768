"""Why a daemon died, said so an operator can act on it: the budget arithmetic behind an OOM kill,
whether lowering ``total_budget`` can help, and what the daemon's clients printed for the death.

Headless and pure (no process, file or terminal access): the supervisor, the benchmark runner and
the Dashboard's exit diagnosis share it. Every size is in the daemon's units (an engine's nominal
bytes: real bytes ÷ ``[engine] memory_scale``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

from . import events as ev
from .daemon_facts import (
    BY_CLI_NAME,
    KINDS,
    MEASURED_RSS_PER_PARTITION,
    PARTITION_BUDGET_UNIT,
    SYNTHESIZED_PARTITION_RSS,
)
from .units import GiB, MiB, daemon_size, format_size

# What each client prints when the daemon dies under a Prove call, observed with the real clients
# against the real daemon and the engine (docs/daemon-interface.md §000). No client can tell an
# OOM kill from a SIGKILL or a SIGTERM: the texts are the same, which is why the tool must say the cause.
# Quoted first, sources in this comment (a dashboard line is cut at the panel's width):
# cuzk-bench/src/main.rs do_prove's "Prove RPC failed" context over tonic's transport error, exit 1
# and no summary; lib/cuzk/client.go Client.Prove's "cuzk Prove RPC: %w" over grpc-go's Unavailable.
CUZK_BENCH_SAW: Final = (
    'cuzk-bench: "Error: Prove RPC failed … transport error" ("… stream closed because of a broken pipe" '
    "while still sending a large C1), exit 1"
)
CURIO_SAW: Final = 'Curio: "rpc error: code = Unavailable desc = error reading from server: EOF"'


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """The budget a daemon ran with and the memory it lived in, for explaining an OOM kill."""

    setting: str  # [memory].total_budget as written: exactly "auto", or a size string
    resolved: int  # what the daemon made of it (cuzk-core config.rs MemoryConfig::resolve_total_budget)
    mem_total: int  # the MemTotal "auto" reads (cuzk-core memory.rs detect_system_memory: /proc/meminfo)
    mem_total_source: str  # whose RAM that is, in words
    safety_margin: int
    limit: int  # the memory the daemon lives in: its cgroup's limit, else the host's RAM
    limit_source: str  # "this cgroup's limit" or "the host's RAM"

    @classmethod
    def from_config(
        cls,
        *,
        total_budget: str,
        safety_margin: str,
        mem_total: int,
        mem_total_source: str,
        cgroup_limit: int | None,
    ) -> BudgetFacts:
        """Resolve the budget as upstream does: exactly ``"auto"`` is MemTotal − safety_margin (the
        cgroup is never consulted); anything else is a size, read with the daemon's fallbacks."""
        margin = daemon_size(safety_margin)
        resolved = max(0, mem_total - margin) if total_budget == "auto" else daemon_size(total_budget)
        if cgroup_limit is not None:
            limit, limit_source = cgroup_limit, "this cgroup's limit"
        else:
            limit, limit_source = mem_total, "the host's RAM"
        return cls(total_budget, resolved, mem_total, mem_total_source, margin, limit, limit_source)


def format_budget(n: int) -> str:
    """A size string the daemon reads exactly (whole GiB, or whole MiB below 1 GiB), rounded down."""
    return f"{n // GiB}GiB" if n >= GiB else f"{max(1, n // MiB)}MiB"


def budget_root_cause(facts: BudgetFacts, suggested: int | None = None) -> str | None:
    """The budget above the memory the daemon lives in, with the arithmetic; None when it is not.

    ``suggested`` is the budget to set instead (the planner's cgroup-aware one), said with the cause.
    The text is one clause per line, so a narrow panel shows every figure; where one line is
    wanted, the lines joined by a space read as one sentence (:func:`one_line`).
    """
    if facts.resolved <= facts.limit:
        return None
    fix = f';\nset total_budget = "{format_budget(suggested)}"' if suggested is not None else ""
    if facts.setting == "auto":
        return (
            f'total_budget = "auto" took MemTotal\n({facts.mem_total_source}, {format_size(facts.mem_total)})\n'
            f"− safety_margin ({format_size(facts.safety_margin)}) = {format_size(facts.resolved)},\nabove "
            f"{facts.limit_source} of {format_size(facts.limit)}{fix}"
        )
    return (
        f'total_budget = "{facts.setting}" ({format_size(facts.resolved)})\nis above '
        f"{facts.limit_source} of {format_size(facts.limit)}{fix}"
    )


def one_line(text: str) -> str:
    """A one-clause-per-line text (:func:`budget_root_cause`) as one line."""
    return " ".join(text.splitlines())


@dataclass(frozen=True, slots=True)
class OomVerdict:
    """What an OOM kill says about the budget: lower it (to ``lower_to``) or stop, and why."""

    cause: Literal["budget_above_limit", "partitions_outgrew_limit", "budget_above_allowance", "outside_budget"]
    explanation: str
    lower_to: str | None  # the total_budget to retry with; None: lowering it would not help


@dataclass(frozen=True, slots=True)
class KillEvidence:
    """The daemon's memory as last seen before an OOM kill, in the daemon's units.

    ``reserved`` and ``partitions`` are its last ``/status`` reading: the budget in use and the
    partitions holding a reservation (synthesizing, synthesized and waiting for a GPU, proving).
    ``outside`` is the least RSS beyond the reservations over the samples read while no partition
    was in flight and nothing was reserved that was not resident (the daemon's own memory); None
    when no such sample was taken. An RSS is never set against a budget reading taken while
    reservations ramp: the two are read up to a second apart, and a wave of partitions reserved in
    a tenth of a second made "outside" read 163 GiB where it was ~10.
    """

    reserved: int
    partitions: int
    outside: int | None
    # SRS and PCE resident at that reading (/status allocations), None where not reported: the rest of
    # ``reserved`` beyond the partitions may be partitions still waiting for a synthesis worker (no RSS yet).
    resident: int | None = None


def resident_reserved(status: ev.StatusSnapshot) -> int | None:
    """SRS and PCE resident at a ``/status`` reading (status.rs allocations); None where not reported."""
    if status.srs_resident_bytes is None and status.pce_resident_bytes is None:
        return None
    return (status.srs_resident_bytes or 0) + (status.pce_resident_bytes or 0)


def partitions_in_flight(status: ev.StatusSnapshot) -> int:
    """Partitions holding a budget reservation at a ``/status`` reading (memory.rs: held from dispatch
    through the GPU's prove start)."""
    return status.synthesizing + status.partitions_waiting_gpu + status.gpu_workers_busy


class KillEvidenceLog:
    """Keeps :class:`KillEvidence` from the recorded samples of the daemon a benchmark runs."""

    def __init__(self, rss_scale: float = 1.0) -> None:
        self._rss_scale = rss_scale  # daemon bytes per RSS byte measured (an engine's 1 / memory_scale)
        self._status: ev.StatusSnapshot | None = None
        self._outside: int | None = None

    def new_daemon(self) -> None:
        """The daemon is being restarted: readings of the last one no longer describe it. ``outside``
        is kept: it is the daemon program's own memory, the same in the next run."""
        self._status = None

    def observe(self, event: ev.ObservedEvent) -> None:
        if isinstance(event, ev.StatusSnapshot):
            self._status = event
        elif isinstance(event, ev.MemorySample) and event.rss_bytes is not None:
            status = self._status
            if status is None or partitions_in_flight(status):
                return
            if status.budget_used_bytes > (resident_reserved(status) or 0):  # an SRS reserved, still loading
                return
            outside = max(0, int(event.rss_bytes * self._rss_scale) - status.budget_used_bytes)
            self._outside = outside if self._outside is None else min(self._outside, outside)

    def evidence(self) -> KillEvidence | None:
        """The evidence now; None before the daemon's first ``/status`` reading."""
        status = self._status
        if status is None:
            return None
        return KillEvidence(
            status.budget_used_bytes, partitions_in_flight(status), self._outside, resident_reserved(status)
        )


def oom_verdict(facts: BudgetFacts, *, allowance: int, evidence: KillEvidence | None, kind: str) -> OomVerdict:
    """Decide whether the budget caused an OOM kill, and the budget the evidence says fits.

    ``allowance`` is the planner's cgroup-aware budget for ``facts.limit`` (its model of the memory a
    daemon needs beside the budget), used only when no reading before the kill showed a partition in
    flight. With one, the partitions held then are weighed against the limit they filled
    (:func:`_weigh_partitions`): the budget is lowered to what fits by that evidence, or left alone
    when those partitions cannot account for the kill.
    """
    if evidence is not None and evidence.partitions > 0:
        return _weigh_partitions(facts, evidence, kind)
    limit = format_size(facts.limit)
    root = budget_root_cause(facts, suggested=allowance)
    if root is not None:
        return OomVerdict("budget_above_limit", one_line(root), format_budget(allowance))
    if facts.resolved > allowance:
        return OomVerdict(
            "budget_above_allowance",
            f"total_budget ({format_size(facts.resolved)}) leaves {format_size(facts.limit - facts.resolved)} of "
            f"{facts.limit_source} ({limit}) outside the budget, less than the "
            f"{format_size(facts.limit - allowance)} a daemon needs there (pinned pool, payloads, buffers) by the "
            "planner's model; no reading before the kill showed the partitions in flight",
            format_budget(allowance),
        )
    return OomVerdict(
        "outside_budget",
        f"not the budget as far as the evidence goes: total_budget ({format_size(facts.resolved)}) is within "
        f"{facts.limit_source} ({limit}) and at or below the cgroup-aware budget ({format_size(allowance)}); no "
        "reading before the kill showed the partitions in flight, so lowering total_budget again would be a guess",
        None,
    )


def _weigh_partitions(facts: BudgetFacts, evidence: KillEvidence, kind: str) -> OomVerdict:
    """The budget the kill's evidence gives: the partitions in flight filled the limit, so each grows to
    at least (limit − outside − the rest reserved) ÷ their number, and never less than a synthesized
    partition (16 GiB for PoRep's 14 reserved, docs/daemon-interface.md §6.2). As many partitions as
    fit the limit at that size, beside the memory outside the budget, SRS and PCE and the safety
    margin, are what the new budget admits: a kill in the first wave of syntheses, when reservations
    are far ahead of the RSS, lowers it by the partitions that did not fit, not to a floor; a second
    kill lowers it again by its own evidence, each time below the reservations that were killed.
    """
    k = KINDS[BY_CLI_NAME[kind].kind]
    share = k.full_reservation / PARTITION_BUDGET_UNIT
    synthesized = int(SYNTHESIZED_PARTITION_RSS * share)
    measured_peak = int(MEASURED_RSS_PER_PARTITION * share)
    n = evidence.partitions
    outside = evidence.outside or 0
    # What else was resident: SRS and PCE as /status reports them, else all that the partitions did not reserve.
    held = evidence.resident if evidence.resident is not None else max(0, evidence.reserved - n * k.full_reservation)
    needed = max(0, facts.limit - outside - held) / n
    limit = f"{facts.limit_source} ({format_size(facts.limit)})"
    seen = (
        f"{n} {k.title} {'partition was' if n == 1 else 'partitions were'} in flight at the last reading "
        "before the kill "
        f"({format_size(evidence.reserved)} reserved of {format_size(facts.resolved)}; "
        + (
            f"{format_size(outside)} outside the budget)"
            if evidence.outside is not None
            else "no quiet sample measured the memory outside the budget)"
        )
    )
    if needed > measured_peak:
        return OomVerdict(
            "outside_budget",
            f"not the budget: {seen}; to fill {limit} each would have held {format_size(needed)} of RSS, more than "
            f"a partition's measured {format_size(measured_peak)}: memory outside the budget (request payloads in "
            "flight, the pinned pool, CUDA buffers) filled the cgroup, so lowering total_budget would not help",
            None,
        )
    grows_to = max(synthesized, needed)
    resident = k.srs_bytes + k.pce_bytes
    room = facts.limit - facts.safety_margin - outside - resident
    fit = int(room // grows_to) if room > 0 else 0
    if fit < 1:
        return OomVerdict(
            "outside_budget",
            f"{seen}; beside it, SRS + PCE ({format_size(resident)}) and the safety margin "
            f"({format_size(facts.safety_margin)}) leave {format_size(max(0, room))} of {limit}: less than the "
            f"{format_size(grows_to)} one partition grows to, so no total_budget can prove here",
            None,
        )
    budget = math.ceil((resident + fit * k.full_reservation) / GiB) * GiB
    if budget >= facts.resolved:
        return OomVerdict(
            "outside_budget",
            f"not the budget: {seen}; total_budget already admits no more than the {fit} partitions that fit, "
            "so lowering it would not help",
            None,
        )
    weighed = (
        f"{seen}; each grows to "
        + (
            f"at least {format_size(needed)} of RSS by the kill's count"
            if needed > synthesized
            else f"{format_size(synthesized)} of RSS once synthesized"
        )
        + f", so {fit} fit {limit} beside SRS + PCE ({format_size(resident)}) and the "
        f"{format_size(facts.safety_margin)} safety margin"
    )
    root = budget_root_cause(facts)
    if root is not None:
        return OomVerdict("budget_above_limit", f"{one_line(root)}; {weighed}", format_budget(budget))
    return OomVerdict("partitions_outgrew_limit", weighed, format_budget(budget))


def client_view(cause: ev.ExitCause) -> tuple[str, ...]:
    """What the daemon's clients printed for a death of this cause (nothing for a clean exit): the same
    texts for an OOM kill, a SIGKILL and a SIGTERM."""
    if cause == "clean":
        return ()
    return (CUZK_BENCH_SAW, CURIO_SAW)
