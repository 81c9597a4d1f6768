"""The checks of knob values the daemon itself never makes, over the table of :mod:`cuzktui.knobs`.

Two kinds of check happen here. *Type* checks mirror the daemon's serde deserializer
(cuzk-core/src/config.rs), which refuses to start on a wrong TOML type or a negative number for an
unsigned field. *Value* checks go further than the daemon: its size, duration and log-filter
parsers never fail, they silently fall back to something else (``"1.5GiB"`` becomes 50 GiB), so we
report those as errors and say what the daemon would have done. Cross-knob rules (budget floors,
knobs the monolithic path ignores) come last. Unknown keys are only informational, because the
daemon ignores them without a word — which is exactly why a typo deserves a mention.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Collection, Mapping
from typing import Any, Final

from .daemon_address import Address, parse_address
from .daemon_facts import KINDS, POREP_BATCH_RESERVATION, KindFacts, ProofKind
from .knobs import (
    LEVELS,
    SECTIONS,
    Knob,
    KnobType,
    KnobValueError,
    Problem,
    Severity,
    Status,
    TomlValue,
    bound_text,
    knobs_by_section,
    toml_type_name,
)
from .units import UnitError, format_size, parse_duration, parse_size

_STRING_TYPES: Final = frozenset(
    {
        KnobType.STRING,
        KnobType.PATH,
        KnobType.ADDRESS,
        KnobType.HOST_PORT,
        KnobType.SIZE,
        KnobType.BUDGET,
        KnobType.DURATION,
        KnobType.LEVEL,
    }
)


def _expected_type(k: Knob) -> str:
    if k.type in _STRING_TYPES:
        return "a string"
    return {
        KnobType.INT: "an integer",
        KnobType.FLOAT: "a number",
        KnobType.BOOL: "true or false",
        KnobType.INT_LIST: "an array of integers",
        KnobType.STRING_LIST: "an array of strings",
    }[k.type]


def _has_type(k: Knob, value: object) -> bool:
    if k.type in _STRING_TYPES:
        return isinstance(value, str)
    if k.type is KnobType.BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):  # bool is an int in Python, never in TOML
        return False
    if k.type is KnobType.INT:
        return isinstance(value, int)
    if k.type is KnobType.FLOAT:
        return isinstance(value, int | float)
    item_type = int if k.type is KnobType.INT_LIST else str
    return isinstance(value, list) and all(isinstance(v, item_type) and not isinstance(v, bool) for v in value)


def _check_range(k: Knob, number: float, what: str) -> str | None:
    if math.isnan(number) or math.isinf(number):
        return f"must be a finite number, got {number}"
    low, high = k.minimum, k.maximum
    too_low = low is not None and (number <= low if k.minimum_exclusive else number < low)
    if too_low or (high is not None and number > high):
        return f"must be {what} {k.describe_range()}, got {bound_text(number)}"
    return None


def type_problem(k: Knob, value: object) -> str | None:
    """What the daemon's deserializer (or the engine's) would refuse: wrong type, negative unsigned."""
    if not _has_type(k, value):
        return f"must be {_expected_type(k)}, got {toml_type_name(value)} {value!r}"
    if k.type is KnobType.INT_LIST and isinstance(value, list) and k.minimum is not None:
        outside = [v for v in value if v < k.minimum or (k.maximum is not None and v > k.maximum)]
        if outside:
            return f"must hold integers {k.describe_range()}, got {outside[0]}"
    if k.type in (KnobType.INT, KnobType.FLOAT) and isinstance(value, int | float):
        return _check_range(k, value, "an integer" if k.type is KnobType.INT else "a number")
    return None


def _address_problems(k: Knob, text: str) -> list[Problem]:
    address = parse_address(text)
    if address is not None and address.socket_path is not None:
        path = address.socket_path
        if not path:
            return [Problem(Severity.ERROR, k.name, f"{text!r} names no socket path; use unix:///path/to/cuzk.sock")]
        if not path.startswith("/"):
            return [
                Problem(
                    Severity.WARNING,
                    k.name,
                    f"{text!r}: the socket path {path!r} is relative to the daemon's working directory; "
                    "use three slashes for an absolute path",
                )
            ]
        return []
    if address is None or not address.is_socket_literal:
        return [
            Problem(
                Severity.ERROR,
                k.name,
                f"{text!r} — the daemon needs a literal IP address with a port (127.0.0.1:9820, [::1]:9820) "
                "or unix:///path",
            )
        ]
    return _exposure(k, address)


def _host_port_problems(k: Knob, text: str) -> list[Problem]:
    if text == "":
        return []
    address = parse_address(text)
    if address is None or address.is_unix or not address.host:
        return [Problem(Severity.ERROR, k.name, f'{text!r} — needs host:port (e.g. 127.0.0.1:9821), or "" to disable')]
    return _exposure(k, address)


def _exposure(k: Knob, address: Address) -> list[Problem]:
    if address.every_interface:
        return [
            Problem(
                Severity.WARNING,
                k.name,
                f"listens on every interface ({address.host}): anyone who can reach the port can use it; "
                "there is no auth",
            )
        ]
    return []


def _level_problems(k: Knob, text: str) -> list[Problem]:
    directives = [d.strip() for d in text.split(",") if d.strip()]
    has_default_level = any(_is_level(d) for d in directives)
    problems: list[Problem] = []
    for directive in directives:
        _target, sep, level = directive.rpartition("=")
        if sep and not _is_level(level):
            message = f"{directive!r}: {level!r} is not a level ({', '.join(LEVELS)}); the daemon drops it"
            problems.append(Problem(Severity.ERROR, k.name, message))
        elif not sep and not _is_level(directive):
            # A bare word is a target name to EnvFilter (every level of it is logged). Legitimate next
            # to a default level; on its own it silences everything else, which is rarely meant.
            consequence = "every level of that target" if has_default_level else "only that target, nothing else"
            message = (
                f"{directive!r} is not a level ({', '.join(LEVELS)}): the daemon reads it as a target and logs "
                f"{consequence}"
            )
            problems.append(Problem(Severity.INFO if has_default_level else Severity.WARNING, k.name, message))
    return problems


def _is_level(text: str) -> bool:
    # tracing's LevelFilter also accepts the numbers 0 (off) to 5 (trace), any case.
    return text.lower() in LEVELS or text in {"0", "1", "2", "3", "4", "5"}


def _budget_problems(k: Knob, text: str) -> list[Problem]:
    if text == "auto":
        return []
    try:
        parse_size(text)
    except UnitError as exc:
        hint = " (write exactly 'auto', lower case)" if text.strip().lower() == "auto" else ""
        return [Problem(Severity.ERROR, k.name, f"{exc}{hint}")]
    return []  # whether the size can prove anything depends on pipeline.enabled: see budget_problems


def _floor_text(kind: KindFacts) -> str:
    return (
        f"{kind.title} {format_size(kind.budget_floor)} (SRS {format_size(kind.srs_bytes)} + "
        f"{format_size(kind.full_reservation)} per partition)"
    )


def budget_floor_problem(budget_bytes: int) -> Problem | None:
    """What a pipeline-mode budget of ``budget_bytes`` can never prove (:attr:`KindFacts.budget_floor`).

    Below every kind's floor nothing is ever proved: an error, because the dispatcher's acquire
    (memory.rs MemoryBudget::acquire) then waits forever and says nothing unless a single request
    exceeds the whole budget. Below some floors the kinds that can never be proved are named.
    """
    kinds = sorted(KINDS.values(), key=lambda kind: kind.budget_floor)
    stuck = [kind for kind in kinds if budget_bytes < kind.budget_floor]
    if not stuck:
        return None
    size = format_size(budget_bytes)
    floors = "; ".join(_floor_text(kind) for kind in stuck)
    why = (
        "the SRS stays charged to the budget while it is in use and every partition then needs its "
        "reservation, so the dispatcher would wait for memory forever, silently"
    )
    if len(stuck) == len(kinds):
        return Problem(
            Severity.ERROR, "memory.total_budget", f"{size} is below every proof kind's floor ({floors}): {why}"
        )
    names = ", ".join(kind.title for kind in stuck)
    return Problem(Severity.WARNING, "memory.total_budget", f"{size} can never prove {names} (floors: {floors}): {why}")


# Knobs read only by the partitioned pipeline: with pipeline.enabled = false they change nothing
# (engine.rs Engine::start: the synthesis workers, the dispatch pacer, and the batch dispatcher with its
# batch collector and synthesis_concurrency semaphore exist only in pipeline mode; the GPU worker count
# per device is forced to 1 outside it; the monolithic workers take each request straight from the
# scheduler and prove it without reserving any budget, which only the pipeline's dispatch, its SRS
# manager and a PreloadSRS call charge; safety_margin is read only to resolve an "auto" total_budget,
# config.rs MemoryConfig::resolve_total_budget).
MONOLITHIC_INERT: Final[Mapping[str, str]] = {
    "memory.total_budget": "monolithic mode reserves no budget (only a PreloadSRS call charges it)",
    "pipeline.max_parallel_synthesis": "monolithic mode has no partition synthesis workers",
    "pipeline.max_gpu_queue_depth": "monolithic mode has no dispatch pacer",
    "gpus.gpu_workers_per_device": "monolithic mode runs exactly 1 GPU worker per device",
    "scheduler.max_batch_size": "monolithic mode proves one request at a time (batches are the pipeline's)",
    "scheduler.max_batch_wait_ms": "monolithic mode has no batch collector to wait in",
    "pipeline.synthesis_concurrency": "each monolithic GPU worker synthesizes its own proof (no dispatcher to size)",
    "memory.safety_margin": "it only sizes an 'auto' total_budget, which monolithic mode reserves nothing from",
}


# engine.rs process_batch without the cuda-supraseal feature fails every pipeline job; the same build's
# monolithic path proves on the CPU, which cuzk-engine does not model, so it refuses that pairing.
CUDA_NEEDS_PIPELINE: Final = "engine.cuda = false is modelled in pipeline mode only"
CUDA_NEEDS_PIPELINE_WHY: Final = (
    "a daemon built without cuda-supraseal proves monolithic jobs on the CPU, which cuzk-engine does not model: "
    "set pipeline.enabled = true, or engine.cuda = true"
)


def monolithic(values: Mapping[str, Any]) -> bool:
    """Whether these effective values run the daemon in monolithic mode (``pipeline.enabled = false``)."""
    return values.get("pipeline.enabled", True) is False


def inert_knobs(values: Mapping[str, Any]) -> Mapping[str, str]:
    """The knobs that change nothing in the mode these effective values run the daemon in, each with
    why: :data:`MONOLITHIC_INERT` in monolithic mode, none in pipeline mode. ``config check``, the
    Knobs screen and ``cuzk-tui tune`` (which leaves them alone) read this one rule."""
    return MONOLITHIC_INERT if monolithic(values) else {}


def budget_problems(values: Mapping[str, Any], present: Collection[str]) -> list[Problem]:
    """Problems that depend on several knobs: budget floors (pipeline mode only: the monolithic path
    reserves no budget), the knobs monolithic mode ignores (for the names in ``present``) and an engine
    without CUDA in monolithic mode, which cuzk-engine refuses at start.

    ``values`` maps ``"section.key"`` to effective values (unset ones may be missing: defaults apply);
    an ``"auto"`` budget depends on the machine and is judged by memcheck.
    """
    inert = inert_knobs(values)
    if inert:
        problems = [
            Problem(Severity.WARNING, name, f"has no effect with pipeline.enabled = false: {why}")
            for name, why in inert.items()
            if name in present
        ]
        if values.get("engine.cuda", True) is False:
            problems.append(Problem(Severity.ERROR, "engine.cuda", f"{CUDA_NEEDS_PIPELINE}: {CUDA_NEEDS_PIPELINE_WHY}"))
        return problems
    budget = values.get("memory.total_budget", "auto")
    if not isinstance(budget, str) or budget == "auto":
        return []
    try:
        size = parse_size(budget)
    except UnitError:
        return []  # reported as the value's own error
    problems = [p for p in (budget_floor_problem(size),) if p is not None]
    batch = values.get("scheduler.max_batch_size", 1)
    porep = KINDS[ProofKind.POREP_SEAL_COMMIT]
    batch_floor = porep.srs_bytes + POREP_BATCH_RESERVATION
    if isinstance(batch, int) and batch > 1 and porep.budget_floor <= size < batch_floor:
        problems.append(
            Problem(
                Severity.WARNING,
                "scheduler.max_batch_size",
                f"a PoRep batch reserves a flat {format_size(POREP_BATCH_RESERVATION)} besides the "
                f"{format_size(porep.srs_bytes)} SRS: total_budget {format_size(size)} is below "
                f"{format_size(batch_floor)}, so a batch of 2 or more would wait for memory forever",
            )
        )
    return problems


def _value_problems(k: Knob, value: object) -> list[Problem]:
    """Checks beyond the type, for knobs whose value matters."""
    if not isinstance(value, str):
        return []
    try:
        if k.type is KnobType.SIZE:
            parse_size(value)
        elif k.type is KnobType.DURATION:
            parse_duration(value)
    except UnitError as exc:
        return [Problem(Severity.ERROR, k.name, str(exc))]
    if k.type is KnobType.BUDGET:
        return _budget_problems(k, value)
    if k.type is KnobType.ADDRESS:
        return _address_problems(k, value)
    if k.type is KnobType.HOST_PORT:
        return _host_port_problems(k, value)
    if k.type is KnobType.LEVEL:
        return _level_problems(k, value)
    if k.type is KnobType.PATH and not value.strip():
        return [Problem(Severity.ERROR, k.name, "must name a directory, got an empty string")]
    return []


def validate_value(k: Knob, value: object) -> list[Problem]:
    """Problems with one knob's value, each message naming the knob and what is allowed."""
    wrong_type = type_problem(k, value)
    if wrong_type is not None:
        return [Problem(Severity.ERROR, k.name, wrong_type)]
    if k.status is Status.DEPRECATED:
        return [Problem(Severity.WARNING, k.name, "deprecated: the daemon warns about it at start and ignores it")]
    if k.status is Status.INERT:
        return [Problem(Severity.WARNING, k.name, "has no effect: the daemon parses it but never uses it")]
    return _value_problems(k, value)


def validate_document(doc: Mapping[str, Any]) -> list[Problem]:
    """Problems with a whole parsed config (a plain dict or a tomlkit document), in schema order."""
    problems: list[Problem] = []
    for name, value in doc.items():
        if name not in SECTIONS:
            problems.append(_unknown(name, SECTIONS, "section"))
        elif not isinstance(value, Mapping):
            problems.append(Problem(Severity.ERROR, name, f"must be a table ([{name}]), got {toml_type_name(value)}"))
    for section, knobs in knobs_by_section():
        table = doc.get(section)
        if not isinstance(table, Mapping):
            continue
        keys = [k.key for k in knobs]
        problems.extend(_unknown(f"{section}.{key}", keys, "key") for key in table if key not in keys)
        for k in knobs:
            if k.key in table:
                problems.extend(validate_value(k, table[k.key]))
    values = {f"{section}.{key}": value for section, table in doc.items() if isinstance(table, Mapping)
              for key, value in table.items()}  # fmt: skip
    problems.extend(budget_problems(values, values))
    memory = doc.get("memory")
    if isinstance(memory, Mapping) and "safety_margin" in memory and memory.get("total_budget", "auto") != "auto":
        problems.append(
            Problem(Severity.INFO, "memory.safety_margin", "only used when total_budget is 'auto'; it has no effect")
        )
    return problems


def _unknown(name: str, known: Any, what: str) -> Problem:
    close = difflib.get_close_matches(name.rpartition(".")[2], known, n=1)
    hint = f" — did you mean {close[0]!r}?" if close else " — typo?"
    return Problem(Severity.INFO, name, f"unknown {what}, ignored by the daemon{hint}")


def parse_cli_value(k: Knob, text: str) -> TomlValue:
    """The TOML value meant by a command-line string: ``"18"`` → 18, ``"true"`` → True, ``"[0,1]"`` or
    ``"0,1"`` → [0, 1]; strings (sizes, addresses …) are taken as written, quotes optional.

    Raises KnobValueError when the text is not of the knob's type; the value is not range-checked
    here (use :func:`validate_value`).
    """
    stripped = text.strip()
    if k.type in _STRING_TYPES:
        return _toml_literal(k, stripped) if stripped[:1] in ('"', "'") else text
    if k.type in (KnobType.INT_LIST, KnobType.STRING_LIST) and not stripped.startswith("["):
        items = [i.strip() for i in stripped.split(",")] if stripped else []
        if k.type is KnobType.STRING_LIST:
            return [_toml_literal(k, i) if i[:1] in ('"', "'") else i for i in items]
        stripped = "[" + stripped + "]"
    value = _toml_literal(k, stripped)
    if k.type is KnobType.FLOAT and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not _has_type(k, value):
        raise KnobValueError(f"{k.name}: must be {_expected_type(k)}, got {text!r}")
    return value


def _toml_literal(k: Knob, text: str) -> TomlValue:
    try:
        value: TomlValue = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        raise KnobValueError(f"{k.name}: must be {_expected_type(k)}, got {text!r}") from None
    return value
