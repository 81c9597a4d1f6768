"""Every knob of the cuzk daemon's TOML config, with the checks the daemon itself never makes.

The schema covers the current config generation (docs/daemon-interface.md §3), the older keys operators still
copy from the user docs (the daemon accepts them, warns and ignores them), and the ``[engine]``
section read only by our stand-in daemon. The Knobs screen, ``cuzk-tui config`` and the
benchmark's ``--set`` overrides are all driven from :data:`KNOBS`.

Two kinds of check happen here. *Type* checks mirror the daemon's serde deserializer, which
refuses to start on a wrong TOML type or a negative number for an unsigned field. *Value* checks
go further than the daemon: its size, duration and log-filter parsers never fail, they silently
fall back to something else (``"1.5GiB"`` becomes 50 GiB), so we report those as errors and say
what the daemon would have done. Unknown keys are only informational, because the daemon ignores
them without a word — which is exactly why a typo deserves a mention.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from .daemon_facts import DEFAULT_MAX_PARALLEL_SYNTHESIS, KINDS, POREP_BATCH_RESERVATION, KindFacts, ProofKind
from .units import UnitError, format_size, parse_duration, parse_size

# A value as it appears in (or is written to) a TOML file.
TomlValue = str | int | float | bool | list[Any]


class KnobType(Enum):
    """What a knob's value must look like; the value is the name shown to users."""

    STRING = "string"
    PATH = "path"
    ADDRESS = "address"  # gRPC listen address: literal IP:port or unix:///path
    HOST_PORT = "host-port"  # HTTP status address: host:port, host names allowed, "" = off
    SIZE = "size"
    BUDGET = "size-or-auto"
    DURATION = "duration"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    INT_LIST = "list-of-int"
    STRING_LIST = "list-of-string"
    LEVEL = "level"  # tracing EnvFilter directives


class Status(Enum):
    ACTIVE = "active"
    DEPRECATED = "deprecated"  # accepted, warned about at start, ignored
    INERT = "inert"  # parsed, documented, but changes nothing
    ENGINE_ONLY = "engine-only"  # read by cuzk-engine; the real daemon ignores the section


class Severity(Enum):
    ERROR = "error"  # the daemon refuses the file, or silently reads something else
    WARNING = "warning"  # valid, but ignored or risky
    INFO = "info"  # worth a look (unknown keys, settings that cannot matter)


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
# The daemon's integer knobs are Rust u32 fields (config.rs): serde refuses the file, and the daemon
# does not start, for a value above this.
U32_MAX: Final = 2**32 - 1
LEVELS: Final = ("off", "error", "warn", "info", "debug", "trace")
_EXPOSED_HOSTS: Final = frozenset({"0.0.0.0", "::"})


@dataclass(frozen=True, slots=True)
class Knob:
    section: str
    key: str
    type: KnobType
    default: TomlValue | None  # None: the daemon has no value (the key is only read to warn about it)
    summary: str  # one line: a form label, a comment in generated files
    help: str  # what it really does, traps included
    status: Status = Status.ACTIVE
    units: str = ""
    minimum: float | None = None
    maximum: float | None = None
    minimum_exclusive: bool = False
    # The daemon reads its config once at start (docs/daemon-interface.md §0.3), so this is always true; kept as a
    # field so the UI states it per knob rather than assuming it.
    restart_required: bool = True
    # The daemon's exact WARN line at start when the key is set (deprecated keys only); the engine logs it.
    start_warning: str = ""

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"

    @property
    def ignored_by_daemon(self) -> bool:
        return self.status is not Status.ACTIVE

    def describe_range(self) -> str:
        """The allowed values in words, for messages and the form's hint line."""
        if self.minimum is None:
            return ""
        low = f"> {_number(self.minimum)}" if self.minimum_exclusive else f"≥ {_number(self.minimum)}"
        return low if self.maximum is None else f"{low} and ≤ {_number(self.maximum)}"


def _number(value: float) -> str:
    """A bound as written in a config: whole numbers in full (4294967295, not 4.29497e+09)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True, slots=True)
class Problem:
    severity: Severity
    key: str  # "section.key", or a section name for a problem with a whole section
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class KnobValueError(ValueError):
    """A command-line value that cannot become the knob's TOML type; the message names the knob."""


_T = KnobType
_DEPRECATED = Status.DEPRECATED
_INERT = Status.INERT
_ENGINE = Status.ENGINE_ONLY

KNOBS: Final[tuple[Knob, ...]] = (
    Knob(
        "daemon",
        "listen",
        _T.ADDRESS,
        "unix:///run/curio/cuzk.sock",
        "gRPC address: IP:port or unix:///path",
        "Where the gRPC API listens. Either unix:///absolute/path (the socket's parent directories are created "
        "and a stale socket file is removed) or a literal IP address with a port such as 127.0.0.1:9820 or "
        "[::1]:9820. Host names like localhost:9820 are refused at start. There is no TLS and no authentication, "
        "so 0.0.0.0 or [::] lets anyone who can reach the port submit proofs. The --listen flag overrides it.",
    ),
    Knob(
        "daemon",
        "status_listen",
        _T.HOST_PORT,
        "",
        "HTTP status server host:port; empty = off",
        "Address of the HTTP /status endpoint, the only accurate live view of the pipeline (GetStatus undercounts). "
        "Empty disables it. Host names are allowed here. If it cannot bind, the daemon only logs an error and "
        "keeps running without it. 9821 is the usual port.",
    ),
    Knob(
        "memory",
        "total_budget",
        _T.BUDGET,
        "auto",
        "memory budget for SRS, PCE and partitions",
        "Cap on the memory the daemon reserves for SRS, PCE and partition syntheses; it caps reservations, not "
        "RSS. Exactly 'auto' (lower case) means MemTotal from /proc/meminfo minus safety_margin: inside a "
        "container that is the host's RAM, not the cgroup limit, so set an explicit size under a memory limit. "
        "A size string such as 200GiB is used as is (no margin). Each running PoRep partition reserves 14 GiB, and "
        "the SRS of a kind in use stays charged: below SRS + one partition (PoRep 58 GiB, SnapDeals 42 GiB, "
        "WindowPoSt 71 GiB) that kind is never proved. With pipeline.enabled = false nothing is reserved.",
        units="bytes",
    ),
    Knob(
        "memory",
        "safety_margin",
        _T.SIZE,
        "5GiB",
        "headroom subtracted from RAM when total_budget is auto",
        "Subtracted from MemTotal when total_budget is 'auto'; ignored when total_budget is an explicit size.",
        units="bytes",
    ),
    Knob(
        "memory",
        "eviction_min_idle",
        _T.DURATION,
        "5m",
        "idle time before SRS/PCE may be evicted",
        "How long an SRS or PCE entry must sit unused before a blocked reservation may evict it. Evicting an SRS "
        "means reloading it (tens of seconds) on the next proof of that kind. Written as 5m, 30s or a bare number "
        "of seconds; anything else silently becomes 300 s.",
        units="seconds",
    ),
    Knob(
        "memory",
        "pinned_budget",
        _T.STRING,
        None,
        "old pinned-memory cap (ignored)",
        "From an older config generation: accepted, warned about at start, ignored. The pinned pool is not "
        "charged to any budget.",
        status=_DEPRECATED,
        units="bytes",
        start_warning="memory.pinned_budget is deprecated — memory is now managed by the unified total_budget",
    ),
    Knob(
        "memory",
        "working_memory_budget",
        _T.STRING,
        None,
        "old working-memory cap (ignored)",
        "From an older config generation: accepted, warned about at start, ignored. Use total_budget.",
        status=_DEPRECATED,
        units="bytes",
        start_warning=(
            "memory.working_memory_budget is deprecated — memory is now managed by the unified total_budget"
        ),
    ),
    Knob(
        "gpus",
        "devices",
        _T.INT_LIST,
        [],
        "GPU ordinals to use; empty = all",
        "GPU indices to prove on. Empty means every GPU nvidia-smi lists; if nvidia-smi cannot run the daemon "
        "assumes [0], and if it runs but lists nothing no GPU workers exist and proofs never complete.",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "gpus",
        "gpu_threads",
        _T.INT,
        0,
        "C++ thread pool for CPU-side GPU work; 0 = all CPUs",
        "Size of the C++ pool that runs prep_msm and b_g2_msm (exported as CUZK_GPU_THREADS). 0 keeps every CPU "
        "(or an externally set CUZK_GPU_THREADS). The docs recommend 32 under high concurrency: a smaller pool "
        "also shrinks b_g2_msm's bucket memory (~1.1 GiB to ~192 MB).",
        units="threads",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "gpus",
        "gpu_workers_per_device",
        _T.INT,
        2,
        "GPU worker tasks per GPU (pipeline mode); 0 = 1",
        "Worker tasks per GPU sharing one lock around the CUDA kernels, so one worker's CPU preparation overlaps "
        "another's kernels. Pipeline mode only (legacy mode always uses 1); 0 is treated as 1. About +6 % when "
        "synthesis keeps the GPU busy, nothing when the GPU starves, 3 or more is no better or worse.",
        units="workers",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "scheduler",
        "max_batch_size",
        _T.INT,
        1,
        "same-kind PoRep/SnapDeals requests proved as one batch",
        "Above 1, two or more waiting PoRep requests are proved as one monolithic batch: one GPU call, no "
        "per-partition timeline, and a flat 136 GiB reservation whatever the batch size (it under-reserves, "
        "~360 GiB peak measured for 2). SnapDeals batches of 2 or more are unsafe in this daemon (only the first "
        "request's data is synthesized).",
        units="requests",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "scheduler",
        "max_batch_wait_ms",
        _T.INT,
        10000,
        "how long a partial batch waits for more requests",
        "When batching is on, a lone batchable request waits up to this long for company before it goes through "
        "the normal partitioned path, so it adds that much latency.",
        units="ms",
        minimum=0,
    ),
    Knob(
        "scheduler",
        "sort_by_type",
        _T.BOOL,
        True,
        "documented queue reordering (never read)",
        "Parsed but never read by the daemon; the queue is not reordered.",
        status=_INERT,
    ),
    Knob(
        "synthesis",
        "threads",
        _T.INT,
        0,
        "rayon threads for synthesis; 0 = all CPUs",
        "Size of the rayon pool every synthesis runs on; 0 means all CPUs the process may use (CPU affinity and "
        "cgroup CPU quota respected). The docs suggest splitting cores between this and gpus.gpu_threads.",
        units="threads",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "synthesis",
        "partition_workers",
        _T.INT,
        None,
        "old concurrent-partition setting (ignored)",
        "From an older config generation, still used by the docs' RAM tables: accepted, warned about at start, "
        "ignored. Its job is now done by pipeline.max_parallel_synthesis.",
        status=_DEPRECATED,
        units="partitions",
        minimum=0,
        maximum=U32_MAX,
        start_warning="synthesis.partition_workers is deprecated — concurrency is now managed by the memory budget",
    ),
    Knob(
        "pipeline",
        "enabled",
        _T.BOOL,
        True,
        "partitioned pipeline; false = legacy monolithic mode",
        "True runs the partitioned pipeline (per-partition synthesis and GPU, TIMELINE lines, budgeted SRS). "
        "False is the legacy monolithic mode: no partitions, no TIMELINE, no budget for SRS. Pipeline mode only "
        "supports 32 GiB sectors for PoRep and SnapDeals.",
    ),
    Knob(
        "pipeline",
        "synthesis_lookahead",
        _T.INT,
        1,
        "documented proof lookahead (no effect)",
        "Only used to compute a number that is logged (effective_lookahead); it changes nothing.",
        status=_INERT,
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "pipeline",
        "synthesis_concurrency",
        _T.INT,
        1,
        "concurrent batch-processing tasks; 0 = 1",
        "Number of batch-processing tasks in flight (0 is treated as 1). For partitioned PoRep/SnapDeals a task "
        "only parses the input, loads the SRS if needed and queues partitions, so above 1 it mainly lets the next "
        "job's parsing overlap an SRS load. For monolithic or batched jobs it is the number of whole-proof "
        "syntheses at once, each reserving up to 136 GiB.",
        units="tasks",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "pipeline",
        "max_parallel_synthesis",
        _T.INT,
        DEFAULT_MAX_PARALLEL_SYNTHESIS,
        "max concurrent partition syntheses; 0 = 18",
        "Caps concurrent partition syntheses; 0 means 18. The real number of synthesis workers is "
        "max(2, min(total_budget / 14 GiB, this)). Each running PoRep partition reserves 14 GiB (SnapDeals 9) and "
        "peak RSS grows ~20 GiB per concurrent partition, so this is the knob that decides an OOM kill. Too many "
        "also slow each other down (10-12 was best on a 96-core box, 30 collapsed).",
        units="partitions",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "pipeline",
        "slot_size",
        _T.INT,
        0,
        "documented memory slot size (no effect)",
        "Only logged: the code path that would use it is unreachable. Memory is bounded by total_budget.",
        status=_INERT,
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "pipeline",
        "max_gpu_queue_depth",
        _T.INT,
        0,
        "target synthesized partitions waiting for the GPU; 0 = no pacing",
        "Paces synthesis dispatch (a PI controller) so about this many synthesized partitions wait for the GPU; "
        "each parked PoRep partition holds ~16 GiB of RSS. 0 dispatches as fast as workers and budget allow. "
        "The docs suggest 8 as a start.",
        units="partitions",
        minimum=0,
        maximum=U32_MAX,
    ),
    Knob(
        "srs",
        "param_cache",
        _T.PATH,
        "/data/zk/params",
        "directory with the .params/.vk files",
        "Directory holding the Groth16 .params and .vk files; PCE files (~25 GiB each) are written here too. "
        "Loaded on first use, not at start.",
    ),
    Knob(
        "srs",
        "preload",
        _T.STRING_LIST,
        None,
        "old list of circuits to load at start (ignored)",
        "From an older config generation: accepted, warned about at start, ignored; SRS is loaded on first use "
        "or through the PreloadSRS call.",
        status=_DEPRECATED,
        start_warning="srs.preload is deprecated — SRS is loaded on demand",
    ),
    Knob(
        "logging",
        "level",
        _T.LEVEL,
        "info",
        "log filter, e.g. info or info,cuzk_core::pipeline=debug",
        "A tracing EnvFilter: a level (off, error, warn, info, debug, trace) and/or target=level directives, "
        "comma-separated. RUST_LOG, when set and valid, wins over it, and --log-level overrides it. Bad "
        "directives are dropped with a note; a bare word that is not a level is read as a target name.",
    ),
    Knob(
        "logging",
        "format",
        _T.STRING,
        None,
        "documented log format (never read)",
        "Never read: output is always the human text format, whatever this says.",
        status=_INERT,
    ),
    Knob(
        "engine",
        "memory_scale",
        _T.FLOAT,
        1 / 256,
        "fraction of the real daemon's memory the engine allocates",
        "cuzk-engine allocates this fraction of every size the real daemon would (1/256 turns a 14 GiB partition "
        "into 56 MiB), so an OOM kill can be rehearsed in a small cgroup.",
        status=_ENGINE,
        minimum=0,
        maximum=1,
        minimum_exclusive=True,
    ),
    Knob(
        "engine",
        "time_scale",
        _T.FLOAT,
        0.02,
        "fraction of the real daemon's durations the engine waits",
        "cuzk-engine waits this fraction of each real phase duration (0.02 turns a 29 s partition synthesis into "
        "0.58 s).",
        status=_ENGINE,
        minimum=0,
        minimum_exclusive=True,
    ),
    Knob(
        "engine",
        "gpus",
        _T.INT,
        1,
        "number of GPUs the engine pretends to have",
        "How many GPUs cuzk-engine reports and proves on (the daemon would ask nvidia-smi).",
        status=_ENGINE,
        units="GPUs",
        minimum=0,
    ),
    Knob(
        "engine",
        "gpu_memory",
        _T.SIZE,
        "80GiB",
        "memory of each pretend GPU",
        "The memory each of cuzk-engine's pretend GPUs reports.",
        status=_ENGINE,
        units="bytes",
    ),
    Knob(
        "engine",
        "cpus",
        _T.INT,
        96,
        "number of host cores the engine pretends to have",
        "The core count cuzk-engine models synthesis contention with (96, the documented benchmark box); "
        "0 is treated as 1.",
        status=_ENGINE,
        units="cores",
        minimum=0,
    ),
    Knob(
        "engine",
        "mem_total",
        _T.SIZE,
        None,
        "pretend MemTotal for total_budget = auto",
        "The MemTotal cuzk-engine pretends /proc/meminfo shows when total_budget is 'auto'. Unset: the real "
        "MemTotal divided by memory_scale, which, like the daemon, ignores any cgroup limit.",
        status=_ENGINE,
        units="bytes",
    ),
    Knob(
        "engine",
        "seed",
        _T.INT,
        0,
        "random seed for the engine's timing jitter",
        "Seed for cuzk-engine's random variation, so runs can be repeated exactly.",
        status=_ENGINE,
        minimum=0,
    ),
)

KNOBS_BY_NAME: Final[Mapping[str, Knob]] = {k.name: k for k in KNOBS}
SECTIONS: Final[tuple[str, ...]] = tuple(dict.fromkeys(k.section for k in KNOBS))


def knob(name: str) -> Knob:
    """The knob called ``"section.key"``; KeyError (with close matches) if there is none."""
    try:
        return KNOBS_BY_NAME[name]
    except KeyError:
        raise KeyError(unknown_knob_message(name)) from None


def unknown_knob_message(name: str) -> str:
    close = difflib.get_close_matches(name, KNOBS_BY_NAME, n=3)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return f"{name}: unknown knob{hint}"


def knobs_by_section() -> tuple[tuple[str, tuple[Knob, ...]], ...]:
    """(section, its knobs) in the order a config file lists them."""
    return tuple((s, tuple(k for k in KNOBS if k.section == s)) for s in SECTIONS)


def toml_type_name(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return "date-time"  # the only other TOML type


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
        return f"must be {what} {k.describe_range()}, got {_number(number)}"
    return None


def _type_problem(k: Knob, value: object) -> str | None:
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


def _split_port(text: str) -> tuple[str, bool] | None:
    """(host without brackets, whether it was bracketed) of ``host:port``, or None without a valid port."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        return None
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1], True
    return host, False


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _address_problems(k: Knob, text: str) -> list[Problem]:
    if text.startswith("unix://"):
        path = text.removeprefix("unix://")
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
    parts = _split_port(text)
    # The daemon's socket-address grammar: IPv6 inside brackets, IPv4 without.
    if parts is None or not _is_ip(parts[0]) or (":" in parts[0]) != parts[1]:
        return [
            Problem(
                Severity.ERROR,
                k.name,
                f"{text!r} — the daemon needs a literal IP address with a port (127.0.0.1:9820, [::1]:9820) "
                "or unix:///path",
            )
        ]
    return _exposure(k, parts[0])


def _host_port_problems(k: Knob, text: str) -> list[Problem]:
    if text == "":
        return []
    parts = _split_port(text)
    if parts is None or not parts[0]:
        return [Problem(Severity.ERROR, k.name, f'{text!r} — needs host:port (e.g. 127.0.0.1:9821), or "" to disable')]
    return _exposure(k, parts[0])


def _exposure(k: Knob, host: str) -> list[Problem]:
    if host in _EXPOSED_HOSTS:
        return [
            Problem(
                Severity.WARNING,
                k.name,
                f"listens on every interface ({host}): anyone who can reach the port can use it; there is no auth",
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
# (engine.rs Engine::start: the synthesis workers and the dispatch pacer exist only in pipeline
# mode; the GPU worker count per device is forced to 1 outside it).
MONOLITHIC_INERT: Final[Mapping[str, str]] = {
    "pipeline.max_parallel_synthesis": "monolithic mode has no partition synthesis workers",
    "pipeline.max_gpu_queue_depth": "monolithic mode has no dispatch pacer",
    "gpus.gpu_workers_per_device": "monolithic mode runs exactly 1 GPU worker per device",
}


def budget_problems(values: Mapping[str, Any], present: Collection[str]) -> list[Problem]:
    """Problems that depend on several knobs: budget floors (pipeline mode only: the monolithic path
    reserves no budget) and the knobs monolithic mode ignores (for the names in ``present``).

    ``values`` maps ``"section.key"`` to effective values (unset ones may be missing: defaults apply);
    an ``"auto"`` budget depends on the machine and is judged by memcheck.
    """
    enabled = values.get("pipeline.enabled", True)
    if enabled is False:
        return [
            Problem(Severity.WARNING, name, f"has no effect with pipeline.enabled = false: {why}")
            for name, why in MONOLITHIC_INERT.items()
            if name in present
        ]
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
    type_problem = _type_problem(k, value)
    if type_problem is not None:
        return [Problem(Severity.ERROR, k.name, type_problem)]
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
