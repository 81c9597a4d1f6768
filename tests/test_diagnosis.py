"""The OOM's root cause and what clients saw: budget arithmetic, the verdict, the exit diagnosis."""

from __future__ import annotations

import pytest

from cuzktui import events as ev
from cuzktui.controller import Identity
from cuzktui.diagnosis import (
    CURIO_SAW,
    CUZK_BENCH_SAW,
    BudgetFacts,
    KillEvidence,
    KillEvidenceLog,
    budget_root_cause,
    client_view,
    one_line,
    oom_verdict,
)
from cuzktui.model import SessionModel
from cuzktui.planner import cgroup_aware_budget
from cuzktui.supervisor import classify_exit, gather_budget_facts
from cuzktui.ui.widgets.panels import daemon_content

GiB = 1 << 30


def _facts(setting: str, *, mem_total: int = 512 * GiB, limit: int | None = 256 * GiB) -> BudgetFacts:
    return BudgetFacts.from_config(
        total_budget=setting, safety_margin="5GiB", mem_total=mem_total, mem_total_source="the host's RAM",
        cgroup_limit=limit,
    )  # fmt: skip


def test_auto_takes_memtotal_minus_the_margin_and_ignores_the_cgroup() -> None:
    facts = _facts("auto")
    assert facts.resolved == 507 * GiB and facts.limit == 256 * GiB
    root = budget_root_cause(facts, suggested=182 * GiB)
    assert root is not None and one_line(root) == (
        'total_budget = "auto" took MemTotal (the host\'s RAM, 512 GiB) − safety_margin (5 GiB) = 507 GiB, '
        'above this cgroup\'s limit of 256 GiB; set total_budget = "182GiB"'
    )
    assert max(len(line) for line in root.splitlines()) <= 48, "each clause fits a dashboard panel"


def test_an_explicit_budget_above_the_limit_is_said_and_one_within_it_is_not_a_root_cause() -> None:
    assert one_line(budget_root_cause(_facts("300GiB")) or "") == (
        'total_budget = "300GiB" (300 GiB) is above this cgroup\'s limit of 256 GiB'
    )
    assert budget_root_cause(_facts("200GiB")) is None
    # Not exactly "auto" (upstream compares the string): read as a size, with the daemon's fallback.
    assert _facts("Auto").resolved != 507 * GiB


def test_without_a_cgroup_the_limit_is_the_hosts_ram_and_auto_fits_it() -> None:
    facts = _facts("auto", limit=None)
    assert (facts.limit, facts.limit_source) == (512 * GiB, "the host's RAM")
    assert budget_root_cause(facts) is None


# (reserved, partitions in flight, outside the budget when idle) at the last reading before the kill
FIRST_WAVE = KillEvidence(240 * GiB, 13, 10 * GiB)


@pytest.mark.parametrize(
    ("setting", "evidence", "cause", "lower_to"),
    [
        ("auto", None, "budget_above_limit", "182GiB"),  # no reading: the planner's budget
        # 13 partitions of 16 GiB beside 10 GiB outside, SRS + PCE and the margin: 10 fit (69.7 + 140 GiB).
        ("auto", FIRST_WAVE, "budget_above_limit", "210GiB"),
        ("251GiB", FIRST_WAVE, "partitions_outgrew_limit", "210GiB"),
        ("251GiB", KillEvidence(240 * GiB, 13, None), "partitions_outgrew_limit", "224GiB"),  # outside taken as 0
        ("200GiB", KillEvidence(190 * GiB, 8, 40 * GiB), "partitions_outgrew_limit", "182GiB"),  # 17.2 GiB each
        ("200GiB", KillEvidence(120 * GiB, 3, 40 * GiB), "outside_budget", None),  # 46 GiB each: not partitions
        ("200GiB", KillEvidence(72 * GiB, 2, 180 * GiB), "outside_budget", None),  # not one partition fits
        ("210GiB", FIRST_WAVE, "outside_budget", None),  # already admits no more than what fits
        ("200GiB", None, "budget_above_allowance", "182GiB"),
        ("200GiB", KillEvidence(44 * GiB, 0, 10 * GiB), "budget_above_allowance", "182GiB"),  # none in flight
        ("182GiB", None, "outside_budget", None),
    ],
)
def test_the_verdict_lowers_the_budget_only_when_the_evidence_blames_it(
    setting: str, evidence: KillEvidence | None, cause: str, lower_to: str | None
) -> None:
    allowance = 182 * GiB
    verdict = oom_verdict(_facts(setting), allowance=allowance, evidence=evidence, kind="porep")
    assert (verdict.cause, verdict.lower_to) == (cause, lower_to)
    assert verdict.explanation


def test_a_second_kill_lowers_the_budget_below_the_reservations_that_were_killed() -> None:
    # Partitions that fill the limit at exactly a synthesized partition's size: each kill admits fewer.
    budget, partitions = 251 * GiB, 13
    for _ in range(3):
        evidence = KillEvidence(int(69.7 * GiB) + partitions * 14 * GiB, partitions, 10 * GiB)
        verdict = oom_verdict(_facts(f"{budget // GiB}GiB"), allowance=182 * GiB, evidence=evidence, kind="porep")
        assert verdict.lower_to is not None
        budget = int(verdict.lower_to.removesuffix("GiB")) * GiB
        assert budget < evidence.reserved
        partitions = (budget - int(69.7 * GiB)) // (14 * GiB)
    assert partitions >= 8, "each kill takes off the partitions that did not fit, not down to a floor"


def _status(used: int, synthesizing: int = 0, srs: int = 0) -> ev.StatusSnapshot:
    return ev.StatusSnapshot(1.0, 1.0, 251 * GiB, used, synthesizing, 0, 2, 0, 0, 0, srs_resident_bytes=srs)


def test_the_evidence_sets_an_rss_only_against_a_quiet_reading_of_the_same_daemon() -> None:
    log = KillEvidenceLog(rss_scale=256)  # an engine at 1/256: RSS in the box's units
    assert log.evidence() is None
    log.observe(_status(0))
    log.observe(ev.MemorySample(2.0, 40 * GiB // 256))  # idle: 40 GiB of its own
    log.observe(_status(44 * GiB))  # the SRS reserved, still loading
    log.observe(ev.MemorySample(3.0, 200 * GiB // 256))  # a ramp: not set against that reading
    log.observe(_status(44 * GiB, srs=44 * GiB))  # loaded, no partition
    log.observe(ev.MemorySample(4.0, 94 * GiB // 256))  # 50 GiB beyond: more than the least seen
    log.observe(_status(240 * GiB, synthesizing=13, srs=44 * GiB))
    log.observe(ev.MemorySample(5.0, 250 * GiB // 256))  # partitions in flight: not "outside"
    assert log.evidence() == KillEvidence(240 * GiB, 13, 40 * GiB, resident=44 * GiB)
    log.new_daemon()
    assert log.evidence() is None, "the killed daemon's reading is not the next one's"
    log.observe(_status(0))
    assert log.evidence() == KillEvidence(0, 0, 40 * GiB, resident=0), "its own memory is the program's: it is kept"


def test_the_exit_of_an_oom_kill_by_auto_carries_the_root_cause() -> None:
    facts = _facts("auto")
    exit = classify_exit(
        t=1.0, pid=5, returncode=-9, oom_kills_before=0, oom_kills_after=1, cgroup_path="/g", budget=facts
    )
    assert exit.cause == "oom_kill"
    assert exit.root_cause is not None and exit.root_cause.startswith('total_budget = "auto" took MemTotal')
    assert f'set total_budget = "{cgroup_aware_budget(256 * GiB) // GiB}GiB"' in exit.root_cause
    # The same budget facts on a SIGTERM the tool sent: no OOM, no budget blamed.
    stopped = classify_exit(t=1.0, pid=5, returncode=-15, sent_signals=(15,), budget=facts)
    assert stopped.cause == "stopped" and stopped.root_cause is None
    # An OOM kill with a budget inside the limit: the evidence names no budget cause.
    inside = classify_exit(t=1.0, pid=5, returncode=-9, oom_kills_before=0, oom_kills_after=1, budget=_facts("99GiB"))
    assert inside.root_cause is None


def test_budget_facts_of_an_engine_are_in_the_emulated_boxs_units() -> None:
    config = '[engine]\nmem_total = "512GiB"\nmemory_scale = 0.00390625\n[memory]\ntotal_budget = "auto"\n'
    facts = gather_budget_facts(config, "engine", 1 * GiB, host_mem_total_bytes=8 * GiB)
    assert (facts.mem_total, facts.resolved, facts.limit) == (512 * GiB, 507 * GiB, 256 * GiB)
    assert facts.mem_total_source == "the emulated box's RAM, [engine] mem_total"
    # Without mem_total the engine emulates the default box, whatever this host's RAM (not 8 GiB × 256).
    default = gather_budget_facts("[engine]\nmemory_scale = 0.00390625\n", "engine", None, 8 * GiB)
    assert default.mem_total == 256 * GiB and default.limit == 256 * GiB
    real = gather_budget_facts('[memory]\nsafety_margin = "8GiB"\n', "real", 64 * GiB, host_mem_total_bytes=128 * GiB)
    assert (real.mem_total_source, real.resolved, real.limit) == ("the host's RAM", 120 * GiB, 64 * GiB)


@pytest.mark.parametrize("cause", ["oom_kill", "signal", "stopped", "error", "unknown"])
def test_every_client_sees_the_same_death_whatever_the_cause(cause: ev.ExitCause) -> None:
    assert client_view(cause) == (CUZK_BENCH_SAW, CURIO_SAW)
    assert "stream closed because of a broken pipe" in CUZK_BENCH_SAW
    assert "rpc error: code = Unavailable desc = error reading from server: EOF" in CURIO_SAW


def test_a_clean_exit_has_no_client_view() -> None:
    assert client_view("clean") == ()


def test_the_dashboard_says_the_root_cause_and_what_clients_saw() -> None:
    model = SessionModel()
    model.apply(ev.DaemonLaunched(1.0, "engine", 7, ("cuzk-engine",), None, "unix:///s", None))
    exit = classify_exit(
        t=2.0, pid=7, returncode=-9, oom_kills_before=0, oom_kills_after=1, cgroup_path="/g", budget=_facts("auto")
    )
    model.apply(exit)
    text = daemon_content(model, Identity("engine", "cuzk-engine", None)).plain
    assert exit.root_cause is not None
    assert all(line in text for line in exit.root_cause.splitlines()) and "why: total_budget" in text
    assert f"clients saw · {CURIO_SAW}" in text and f"clients saw · {CUZK_BENCH_SAW}" in text
