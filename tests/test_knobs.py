"""The knob schema: it matches the daemon's config (docs/daemon-interface.md §3) and rejects what the
daemon would misread."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuzktui.daemon_facts import KINDS
from cuzktui.knob_rules import (
    CUDA_NEEDS_PIPELINE,
    MONOLITHIC_INERT,
    budget_problems,
    inert_knobs,
    parse_cli_value,
    validate_document,
    validate_value,
)
from cuzktui.knobs import (
    KNOBS,
    KNOBS_BY_NAME,
    SECTIONS,
    Knob,
    KnobType,
    KnobValueError,
    Severity,
    Status,
    knob,
    knobs_by_section,
)
from cuzktui.units import GiB

# docs/daemon-interface.md §3: every key, its status and the daemon's default, exactly.
EXPECTED: dict[str, tuple[Status, Any]] = {
    "daemon.listen": (Status.ACTIVE, "unix:///run/curio/cuzk.sock"),
    "daemon.status_listen": (Status.ACTIVE, ""),
    "memory.total_budget": (Status.ACTIVE, "auto"),
    "memory.safety_margin": (Status.ACTIVE, "5GiB"),
    "memory.eviction_min_idle": (Status.ACTIVE, "5m"),
    "memory.pinned_budget": (Status.DEPRECATED, None),
    "memory.working_memory_budget": (Status.DEPRECATED, None),
    "gpus.devices": (Status.ACTIVE, []),
    "gpus.gpu_threads": (Status.ACTIVE, 0),
    "gpus.gpu_workers_per_device": (Status.ACTIVE, 2),
    "scheduler.max_batch_size": (Status.ACTIVE, 1),
    "scheduler.max_batch_wait_ms": (Status.ACTIVE, 10000),
    "scheduler.sort_by_type": (Status.INERT, True),
    "synthesis.threads": (Status.ACTIVE, 0),
    "synthesis.partition_workers": (Status.DEPRECATED, None),
    "pipeline.enabled": (Status.ACTIVE, True),
    "pipeline.synthesis_lookahead": (Status.INERT, 1),
    "pipeline.synthesis_concurrency": (Status.ACTIVE, 1),
    "pipeline.max_parallel_synthesis": (Status.ACTIVE, 18),
    "pipeline.slot_size": (Status.INERT, 0),
    "pipeline.max_gpu_queue_depth": (Status.ACTIVE, 0),
    "srs.param_cache": (Status.ACTIVE, "/data/zk/params"),
    "srs.preload": (Status.DEPRECATED, None),
    "logging.level": (Status.ACTIVE, "info"),
    "logging.format": (Status.INERT, None),
    "engine.memory_scale": (Status.ENGINE_ONLY, 1 / 256),
    "engine.time_scale": (Status.ENGINE_ONLY, 0.02),
    "engine.gpus": (Status.ENGINE_ONLY, 1),
    "engine.gpu_memory": (Status.ENGINE_ONLY, "80GiB"),
    "engine.cpus": (Status.ENGINE_ONLY, 96),
    "engine.mem_total": (Status.ENGINE_ONLY, "256GiB"),
    "engine.cuda": (Status.ENGINE_ONLY, True),
    "engine.seed": (Status.ENGINE_ONLY, 0),
}


def test_schema_has_exactly_the_daemons_keys_statuses_and_defaults() -> None:
    assert {k.name: (k.status, k.default) for k in KNOBS} == EXPECTED
    assert len(KNOBS_BY_NAME) == len(KNOBS)


def test_every_change_needs_a_restart_and_only_active_knobs_count() -> None:
    assert all(k.restart_required for k in KNOBS)
    assert {k.name for k in KNOBS if not k.ignored_by_daemon} == {
        n for n, (s, _) in EXPECTED.items() if s is Status.ACTIVE
    }


def test_grouping_follows_file_order_and_covers_every_knob() -> None:
    groups = knobs_by_section()
    assert tuple(s for s, _ in groups) == SECTIONS
    assert SECTIONS[:3] == ("daemon", "memory", "gpus") and SECTIONS[-1] == "engine"
    assert tuple(k for _, ks in groups for k in ks) == KNOBS
    assert all(k.section == s for s, ks in groups for k in ks)


def test_lookup_by_name_and_unknown_name_suggests_close_matches() -> None:
    assert knob("pipeline.max_parallel_synthesis").key == "max_parallel_synthesis"
    with pytest.raises(KeyError, match=r"did you mean pipeline\.max_parallel_synthesis"):
        knob("pipeline.max_parallel_synth")


@pytest.mark.parametrize("k", [k for k in KNOBS if k.default is not None], ids=lambda k: k.name)
def test_defaults_pass_validation_without_errors(k: Knob) -> None:
    assert [p for p in validate_value(k, k.default) if p.severity is Severity.ERROR] == []


def test_help_says_what_really_happens() -> None:
    assert "cgroup" in knob("memory.total_budget").help
    # The floors the help quotes are the fact table's (SRS + one partition's reservation).
    for kind in list(KINDS.values())[:3]:
        assert f"{kind.title} {kind.budget_floor // GiB} GiB" in knob("memory.total_budget").help
    assert "0 means 18" in knob("pipeline.max_parallel_synthesis").help
    assert all(k.summary and k.help for k in KNOBS)


# Values that are wrong for *every* knob of a type (type errors, or what the lenient daemon misreads).
INVALID: dict[KnobType, list[Any]] = {
    KnobType.STRING: [5, True, 1.5, ["x"]],
    KnobType.PATH: [5, ""],
    KnobType.ADDRESS: [
        "localhost:9820",
        "127.0.0.1",
        "unix://",
        "::1:9820",
        "[127.0.0.1]:9820",
        "127.0.0.1:99999",
        "",
        9820,
    ],
    KnobType.HOST_PORT: ["localhost", "unix:///run/x.sock", ":9821", "h:port", 9821],
    KnobType.SIZE: ["1.5GiB", "5gib", "1TiB", "-1GiB", "", 5],
    KnobType.BUDGET: ["Auto", "1.5GiB", "lots", 100],
    KnobType.DURATION: ["1h", "10ms", "5min", "", 300],
    KnobType.INT: ["18", 1.5, True, [1]],
    KnobType.FLOAT: ["0.1", True, math.nan, math.inf, [0.5]],
    KnobType.BOOL: ["true", 1, "yes", 0],
    KnobType.INT_LIST: [[-1], ["0"], [True], [1.5], 0, "0,1"],
    KnobType.STRING_LIST: [[1], "a", [True]],
    KnobType.LEVEL: ["info,cuzk=loud", "debug=", 3, ["info"]],
}


def _invalid_cases() -> list[tuple[Knob, Any]]:
    cases = [(k, v) for k in KNOBS for v in INVALID[k.type]]
    # Range violations, from each knob's own bounds.
    for k in KNOBS:
        if k.type is KnobType.INT and k.minimum is not None:
            cases.append((k, int(k.minimum) - 1))
        if k.type in (KnobType.INT, KnobType.INT_LIST) and k.maximum is not None:
            over = int(k.maximum) + 1
            cases.append((k, [0, over] if k.type is KnobType.INT_LIST else over))
        if k.type is KnobType.FLOAT and k.minimum is not None:
            cases.append((k, k.minimum if k.minimum_exclusive else k.minimum - 1))
        if k.type is KnobType.FLOAT and k.maximum is not None:
            cases.append((k, k.maximum + 0.5))
    return cases


def test_invalid_table_covers_every_type() -> None:
    assert set(INVALID) == set(KnobType)
    assert {k.type for k in KNOBS} == set(KnobType)


@pytest.mark.parametrize(("k", "value"), _invalid_cases(), ids=lambda x: x.name if isinstance(x, Knob) else repr(x))
def test_every_invalid_value_of_every_knob_is_an_error_naming_the_knob(k: Knob, value: Any) -> None:
    errors = [p for p in validate_value(k, value) if p.severity is Severity.ERROR]
    assert errors, f"{k.name} accepted {value!r}"
    assert all(str(p).startswith(f"{k.name}: ") for p in errors)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "memory.total_budget",
            "1.5GiB",
            "memory.total_budget: '1.5GiB': only a whole number may stand before 'GiB'; "
            "the daemon would read it as 50 GiB",
        ),
        (
            "pipeline.max_parallel_synthesis",
            -3,
            "pipeline.max_parallel_synthesis: must be an integer ≥ 0 and ≤ 4294967295, got -3",
        ),
        # A u32 field in config.rs: serde refuses 2^32, the daemon does not start.
        (
            "pipeline.max_gpu_queue_depth",
            4294967296,
            "pipeline.max_gpu_queue_depth: must be an integer ≥ 0 and ≤ 4294967295, got 4294967296",
        ),
        ("gpus.devices", [0, 2**32], "gpus.devices: must hold integers ≥ 0 and ≤ 4294967295, got 4294967296"),
        ("engine.memory_scale", 2.0, "engine.memory_scale: must be a number > 0 and ≤ 1, got 2"),
        ("gpus.gpu_threads", "32", "gpus.gpu_threads: must be an integer, got string '32'"),
        ("pipeline.enabled", "false", "pipeline.enabled: must be true or false, got string 'false'"),
    ],
)
def test_messages_name_the_key_the_value_and_what_is_allowed(name: str, value: Any, message: str) -> None:
    assert [str(p) for p in validate_value(knob(name), value)] == [message]


def test_u32_knobs_accept_their_maximum() -> None:
    assert validate_value(knob("pipeline.max_parallel_synthesis"), 4294967295) == []
    assert validate_value(knob("gpus.devices"), [4294967295]) == []


def test_listen_message_explains_the_literal_ip_rule() -> None:
    (problem,) = validate_value(knob("daemon.listen"), "localhost:9820")
    assert str(problem).startswith("daemon.listen: 'localhost:9820' — the daemon needs a literal IP address")
    assert "unix:///path" in problem.message


def test_budget_auto_in_the_wrong_case_is_explained() -> None:
    (problem,) = validate_value(knob("memory.total_budget"), "AUTO")
    assert "write exactly 'auto'" in problem.message and "50 GiB" in problem.message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("daemon.listen", "unix:///run/curio/cuzk.sock"),
        ("daemon.listen", "127.0.0.1:9820"),
        ("daemon.listen", "[::1]:9820"),
        ("daemon.status_listen", ""),
        ("daemon.status_listen", "localhost:9821"),
        ("memory.total_budget", "auto"),
        ("memory.total_budget", "200GiB"),
        ("memory.total_budget", "512 GiB"),
        ("memory.safety_margin", "0"),
        ("memory.eviction_min_idle", "30s"),
        ("memory.eviction_min_idle", "600"),
        ("gpus.devices", [0, 1, 2]),
        ("logging.level", "info,cuzk_core::pipeline=debug"),
        ("logging.level", "WARN"),
        ("engine.time_scale", 1),
        ("engine.seed", 7),
        ("engine.gpus", 0),
        ("engine.mem_total", "64GiB"),
    ],
)
def test_valid_values_raise_nothing(name: str, value: Any) -> None:
    assert validate_value(knob(name), value) == []


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("daemon.listen", "0.0.0.0:9820", "every interface"),
        ("daemon.listen", "[::]:9820", "every interface"),
        ("daemon.status_listen", "0.0.0.0:9821", "every interface"),
        ("daemon.listen", "unix://run/cuzk.sock", "relative"),
        ("logging.level", "verbose", "logs only that target, nothing else"),
        ("synthesis.partition_workers", 12, "deprecated"),
        ("srs.preload", ["porep-32g"], "deprecated"),
        ("memory.pinned_budget", "100GiB", "deprecated"),
        ("pipeline.slot_size", 2, "no effect"),
        ("scheduler.sort_by_type", False, "no effect"),
        ("logging.format", "json", "no effect"),
    ],
)
def test_risky_or_ignored_values_are_warnings(name: str, value: Any, fragment: str) -> None:
    problems = validate_value(knob(name), value)
    assert [p.severity for p in problems] == [Severity.WARNING]
    assert fragment in problems[0].message


def test_a_target_beside_a_default_level_is_only_info() -> None:
    (problem,) = validate_value(knob("logging.level"), "info,cuzk_core")
    assert problem.severity is Severity.INFO and "every level of that target" in problem.message


def test_deprecated_knobs_still_need_the_right_type() -> None:
    # The daemon's deserializer refuses the file before it gets to warn.
    (problem,) = validate_value(knob("synthesis.partition_workers"), "12")
    assert problem.severity is Severity.ERROR


def test_exactly_the_deprecated_knobs_carry_the_daemons_start_warning() -> None:
    warned = {k.name: k.start_warning for k in KNOBS if k.start_warning}
    assert set(warned) == {k.name for k in KNOBS if k.status is Status.DEPRECATED}
    assert all(text.startswith(f"{name} is deprecated — ") for name, text in warned.items())


def test_document_unknown_keys_are_info_with_a_suggestion() -> None:
    problems = validate_document({"memory": {"totl_budget": "1GiB"}, "memroy": {}})
    assert {(p.severity, p.key) for p in problems} == {
        (Severity.INFO, "memory.totl_budget"),
        (Severity.INFO, "memroy"),
    }
    assert all("ignored by the daemon" in p.message and "did you mean" in p.message for p in problems)


def test_document_checks_every_known_key_and_section_shape() -> None:
    doc = {
        "daemon": {"listen": "localhost:1"},
        "gpus": 3,
        "pipeline": {"max_parallel_synthesis": -1, "enabled": True},
    }
    errors = {p.key for p in validate_document(doc) if p.severity is Severity.ERROR}
    assert errors == {"daemon.listen", "gpus", "pipeline.max_parallel_synthesis"}


def test_safety_margin_without_auto_budget_is_pointed_out() -> None:
    (problem,) = validate_document({"memory": {"total_budget": "100GiB", "safety_margin": "10GiB"}})
    assert (problem.severity, problem.key) == (Severity.INFO, "memory.safety_margin")
    assert validate_document({"memory": {"safety_margin": "10GiB"}}) == []


# Floors from the fact table (SRS + one partition's reservation), as upstream charges them.
@pytest.mark.parametrize(
    ("budget", "severity", "fragment"),
    [
        ("500MiB", Severity.ERROR, "below every proof kind's floor"),
        ("30GiB", Severity.WARNING, "can never prove SnapDeals, PoRep, WindowPoSt"),
        ("41GiB", Severity.WARNING, "can never prove SnapDeals, PoRep, WindowPoSt"),
        ("42GiB", Severity.WARNING, "can never prove PoRep, WindowPoSt"),
        ("57GiB", Severity.WARNING, "can never prove PoRep, WindowPoSt"),
        ("58GiB", Severity.WARNING, "can never prove WindowPoSt (floors: WindowPoSt 71 GiB (SRS 57 GiB + 14 GiB"),
        ("70GiB", Severity.WARNING, "can never prove WindowPoSt"),
    ],
)
def test_budgets_below_a_kinds_floor_name_what_can_never_be_proved(
    budget: str, severity: Severity, fragment: str
) -> None:
    (problem,) = validate_document({"memory": {"total_budget": budget}})
    assert problem.key == "memory.total_budget" and problem.severity is severity
    assert fragment in problem.message and "wait for memory forever" in problem.message


def test_floors_follow_srs_plus_one_reservation() -> None:
    assert [k.budget_floor // GiB for k in KINDS.values() if k.budget_floor >= GiB] == [58, 42, 71]
    assert validate_document({"memory": {"total_budget": "71GiB"}}) == []
    assert validate_document({"memory": {"total_budget": "auto"}}) == []  # machine-dependent: memcheck's job


def test_batching_below_the_batch_floor_is_pointed_out() -> None:
    # 44 GiB SRS + a flat 136 GiB batch reservation: 180 GiB.
    (problem,) = validate_document({"memory": {"total_budget": "179GiB"}, "scheduler": {"max_batch_size": 2}})
    assert problem.key == "scheduler.max_batch_size" and "below 180 GiB" in problem.message
    assert validate_document({"memory": {"total_budget": "180GiB"}, "scheduler": {"max_batch_size": 2}}) == []
    assert validate_document({"memory": {"total_budget": "100GiB"}, "scheduler": {"max_batch_size": 1}}) == []


def test_monolithic_mode_reserves_no_budget_and_marks_pipeline_knobs_inert() -> None:
    doc = {
        "memory": {"total_budget": "8GiB"},
        "pipeline": {"enabled": False, "max_parallel_synthesis": 12, "max_gpu_queue_depth": 8},
        "gpus": {"gpu_workers_per_device": 2, "gpu_threads": 8},
    }
    problems = validate_document(doc)
    # The budget's floors are gone (nothing is reserved): what is said of it is that it does nothing.
    assert [(p.key, p.severity) for p in problems] == [
        ("memory.total_budget", Severity.WARNING),
        ("pipeline.max_parallel_synthesis", Severity.WARNING),
        ("pipeline.max_gpu_queue_depth", Severity.WARNING),
        ("gpus.gpu_workers_per_device", Severity.WARNING),
    ]
    assert all("no effect with pipeline.enabled = false" in p.message for p in problems)
    assert "reserves no budget" in problems[0].message and "1 GPU worker per device" in problems[3].message
    assert not any("floor" in p.message for p in problems)
    # Left at their defaults they are not reported by config check; the form asks for all of them.
    assert validate_document({"pipeline": {"enabled": False}}) == []
    assert {p.key for p in budget_problems({"pipeline.enabled": False}, MONOLITHIC_INERT)} == set(MONOLITHIC_INERT)


def test_the_inert_knobs_are_the_monolithic_ones_only_in_monolithic_mode() -> None:
    assert inert_knobs({"pipeline.enabled": False}) == MONOLITHIC_INERT
    assert inert_knobs({"pipeline.enabled": True}) == {} and inert_knobs({}) == {}  # the default is the pipeline
    # The knobs a search would vary and that monolithic mode never reads (engine.rs Engine::start).
    assert {"pipeline.max_parallel_synthesis", "pipeline.max_gpu_queue_depth", "gpus.gpu_workers_per_device",
            "memory.total_budget", "scheduler.max_batch_size"} <= set(MONOLITHIC_INERT)  # fmt: skip
    # The others it never reads: the batch dispatcher's and what sizes an "auto" budget.
    assert {"scheduler.max_batch_wait_ms", "pipeline.synthesis_concurrency", "memory.safety_margin"} <= set(
        MONOLITHIC_INERT
    )
    assert "gpus.gpu_threads" not in MONOLITHIC_INERT  # the C++ prover's thread pool serves both modes


def test_an_engine_without_cuda_is_an_error_in_monolithic_mode_only() -> None:
    # config check and the Knobs screen say before an apply what cuzk-engine refuses at start.
    errors = [p for p in validate_document({"pipeline": {"enabled": False}, "engine": {"cuda": False}})
              if p.severity is Severity.ERROR]  # fmt: skip
    assert [(p.key, p.message.split(":")[0]) for p in errors] == [("engine.cuda", CUDA_NEEDS_PIPELINE)]
    assert validate_document({"engine": {"cuda": False}}) == []  # pipeline mode: every job fails, as upstream's
    assert validate_document({"pipeline": {"enabled": False}, "engine": {"cuda": True}}) == []


def test_empty_document_is_clean() -> None:
    assert validate_document({}) == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("pipeline.max_parallel_synthesis", "18", 18),
        ("pipeline.max_parallel_synthesis", " 1_000 ", 1000),
        ("pipeline.enabled", "true", True),
        ("pipeline.enabled", "false", False),
        ("gpus.devices", "[0,1]", [0, 1]),
        ("gpus.devices", "0, 1", [0, 1]),
        ("gpus.devices", "", []),
        ("srs.preload", "porep-32g,'snap-32g'", ["porep-32g", "snap-32g"]),
        ("srs.preload", '["a"]', ["a"]),
        ("memory.total_budget", "200GiB", "200GiB"),
        ("memory.total_budget", '"200GiB"', "200GiB"),
        ("daemon.listen", "0.0.0.0:9820", "0.0.0.0:9820"),
        ("engine.time_scale", "1", 1.0),
        ("engine.memory_scale", "0.5", 0.5),
    ],
)
def test_cli_values_become_the_knobs_toml_type(name: str, text: str, expected: Any) -> None:
    value = parse_cli_value(knob(name), text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pipeline.max_parallel_synthesis", "eighteen"),
        ("pipeline.max_parallel_synthesis", "1.5"),
        ("pipeline.max_parallel_synthesis", "true"),
        ("pipeline.enabled", "yes"),
        ("pipeline.enabled", "1"),
        ("gpus.devices", "0,x"),
        ("gpus.devices", '["0"]'),
        ("engine.time_scale", "fast"),
        ("memory.total_budget", '"unterminated'),
    ],
)
def test_cli_values_of_the_wrong_type_are_refused_naming_the_knob(name: str, text: str) -> None:
    with pytest.raises(KnobValueError, match=rf"^{re.escape(name)}: must be"):
        parse_cli_value(knob(name), text)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_any_u32_round_trips_through_the_cli(n: int) -> None:
    k = knob("pipeline.max_gpu_queue_depth")
    value = parse_cli_value(k, str(n))
    assert value == n and validate_value(k, value) == []


@given(st.lists(st.integers(min_value=0, max_value=64), max_size=8))
def test_device_lists_round_trip_in_both_spellings(devices: list[int]) -> None:
    k = knob("gpus.devices")
    assert parse_cli_value(k, ",".join(map(str, devices))) == devices
    assert parse_cli_value(k, str(devices)) == devices


@given(st.text(max_size=30).filter(lambda t: not t.strip().startswith(('"', "'"))))
def test_string_knobs_take_the_text_as_written(text: str) -> None:
    # Text that starts with a quote (after whitespace) is read as a TOML string literal instead.
    assert parse_cli_value(knob("srs.param_cache"), text) == text
