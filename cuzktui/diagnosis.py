"""Why a daemon died, said so an operator can act on it: the budget arithmetic behind an OOM kill,
whether lowering ``total_budget`` can help, and what the daemon's clients printed for the death.

Headless and pure (no process, file or terminal access): the supervisor, the benchmark runner and
the Dashboard's exit diagnosis share it. Every size is in the daemon's units (an engine's nominal
bytes: real bytes ÷ ``[engine] memory_scale``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from . import events as ev
from .daemon_facts import BY_CLI_NAME, KINDS
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

    cause: Literal["budget_above_limit", "budget_beside_outside", "budget_above_allowance", "outside_budget"]
    explanation: str
    lower_to: str | None  # the total_budget to retry with; None: lowering it would not help


def oom_verdict(facts: BudgetFacts, *, allowance: int, outside: int | None, kind: str) -> OomVerdict:
    """Decide whether the budget caused an OOM kill, from the evidence alone.

    ``allowance`` is the planner's cgroup-aware budget for ``facts.limit`` (its model of the memory
    a daemon needs outside the budget); ``outside`` the memory measured outside the budget before
    the kill (RSS − reservations in use), None when no sample had both. The budget is lowered only
    when it was above the limit, or when reservations that fit it could not fit the cgroup beside
    what was outside it; otherwise the verdict names what did fill the cgroup.
    """
    limit = format_size(facts.limit)
    budget = format_size(facts.resolved)
    root = budget_root_cause(facts, suggested=allowance)
    if root is not None:
        # The planner's budget, not limit − outside: a sample's RSS and its /status budget are read
        # moments apart, so while reservations grow fast "outside" reads far too high.
        return OomVerdict("budget_above_limit", one_line(root), format_budget(allowance))
    if outside is not None:
        room = facts.limit - outside
        measured = f"memory outside the budget was {format_size(outside)} (RSS − reservations in use)"
        if facts.resolved <= room:
            return OomVerdict(
                "outside_budget",
                f"not the budget: total_budget ({budget}) plus the {measured} fit {facts.limit_source} of {limit}; "
                "memory outside the budget (request payloads in flight, the pinned pool, CUDA buffers) filled the "
                "cgroup after the last sample, so lowering total_budget would not help",
                None,
            )
        facts_of_kind = KINDS[BY_CLI_NAME[kind].kind]
        # The SRS and PCE stay charged to the budget while in use; a partition needs its reservation on top.
        floor = facts_of_kind.srs_bytes + facts_of_kind.pce_bytes + facts_of_kind.full_reservation
        if room < floor:
            return OomVerdict(
                "outside_budget",
                f"{measured}, which leaves {format_size(max(0, room))} of {facts.limit_source} ({limit}) for the "
                f"budget: less than one {kind} partition needs ({format_size(floor)}: SRS, PCE and one "
                f"{format_size(facts_of_kind.full_reservation)} reservation), so no total_budget can prove here",
                None,
            )
        return OomVerdict(
            "budget_beside_outside",
            f"reservations that fit total_budget ({budget}) did not fit {facts.limit_source} ({limit}) beside the "
            f"{measured}",
            format_budget(room),
        )
    if facts.resolved > allowance:
        return OomVerdict(
            "budget_above_allowance",
            f"total_budget ({budget}) leaves {format_size(facts.limit - facts.resolved)} of {facts.limit_source} "
            f"({limit}) outside the budget, less than the {format_size(facts.limit - allowance)} a daemon needs "
            "there (pinned pool, payloads, buffers) by the planner's model; no memory sample measured it",
            format_budget(allowance),
        )
    return OomVerdict(
        "outside_budget",
        f"not the budget as far as the evidence goes: total_budget ({budget}) is within {facts.limit_source} "
        f"({limit}) and at or below the cgroup-aware budget ({format_size(allowance)}); no memory sample shows "
        "the reservations filling the cgroup, so lowering total_budget again would be a guess",
        None,
    )


def client_view(cause: ev.ExitCause) -> tuple[str, ...]:
    """What the daemon's clients printed for a death of this cause (nothing for a clean exit): the same
    texts for an OOM kill, a SIGKILL and a SIGTERM."""
    if cause == "clean":
        return ()
    return (CUZK_BENCH_SAW, CURIO_SAW)
