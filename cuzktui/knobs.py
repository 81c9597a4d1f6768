"""Every knob of the cuzk daemon's TOML config: the table of names, types, defaults, help and status.

The schema covers the current config generation (docs/daemon-interface.md §3; upstream
cuzk-core/src/config.rs), the older keys operators still copy from the user docs (the daemon
accepts them, warns and ignores them), and the ``[engine]`` section read only by our stand-in
daemon. The Knobs screen, ``cuzk-tui config``, the benchmark's ``--set`` overrides and the engine's
config reader are all driven from :data:`KNOBS`. The checks of values against it (types, sizes,
addresses, cross-knob floors) are :mod:`cuzktui.knob_rules`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from .daemon_address import DAEMON_DEFAULT_LISTEN
from .daemon_facts import DEFAULT_MAX_PARALLEL_SYNTHESIS

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


# The daemon's integer knobs are Rust u32 fields (config.rs): serde refuses the file, and the daemon
# does not start, for a value above this.
U32_MAX: Final = 2**32 - 1
LEVELS: Final = ("off", "error", "warn", "info", "debug", "trace")


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
        low = f"> {bound_text(self.minimum)}" if self.minimum_exclusive else f"≥ {bound_text(self.minimum)}"
        return low if self.maximum is None else f"{low} and ≤ {bound_text(self.maximum)}"


def bound_text(value: float) -> str:
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
        DAEMON_DEFAULT_LISTEN,
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
        "256GiB",
        "RAM of the box the engine emulates",
        "The MemTotal of the box cuzk-engine emulates, which it reads for total_budget = 'auto' as the daemon "
        "reads /proc/meminfo (ignoring any cgroup limit). The default is the same wherever the engine starts "
        "(cuzk-tui --engine, bench, tune, cuzk-engine -c FILE): a 256 GiB proving box with one GPU; "
        "cuzk-tui's --profile sets it for the box it emulates.",
        status=_ENGINE,
        units="bytes",
    ),
    Knob(
        "engine",
        "cuda",
        _T.BOOL,
        True,
        "whether the emulated daemon was built with its CUDA backend",
        "False emulates a daemon built without the cuda-supraseal feature (a CPU-only build): in pipeline mode "
        "every job fails at once with 'pipeline mode requires cuda-supraseal', the log's ERROR naming no job "
        "(engine.rs process_batch). Such a build proves monolithic jobs on the CPU, which cuzk-engine does not "
        "model: with pipeline.enabled = false it refuses to start.",
        status=_ENGINE,
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
