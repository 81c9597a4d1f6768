"""The daemon's TOML schema (reference §3) plus the engine-only ``[engine]`` section.

Deliberate difference from the real daemon: a value of the wrong TOML type, a size or duration
the daemon would silently replace by a fallback (reference §3.9), or a negative count is a
fatal error that names the key. Unknown keys and sections are ignored, as in the daemon.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from cuzktui.daemon_facts import DEFAULT_SAFETY_MARGIN
from cuzktui.units import GiB, UnitError, parse_duration, parse_size

DEFAULT_CONFIG_PATH: Final = "/data/zk/cuzk.toml"
DEFAULT_LISTEN: Final = "unix:///run/curio/cuzk.sock"

# (section, key, message) for each deprecated key the daemon accepts and ignores.
DEPRECATED: Final = (
    (
        "memory",
        "pinned_budget",
        "memory.pinned_budget is deprecated — memory is now managed by the unified total_budget",
    ),
    (
        "memory",
        "working_memory_budget",
        "memory.working_memory_budget is deprecated — memory is now managed by the unified total_budget",
    ),
    (
        "synthesis",
        "partition_workers",
        "synthesis.partition_workers is deprecated — concurrency is now managed by the memory budget",
    ),
    ("srs", "preload", "srs.preload is deprecated — SRS is loaded on demand"),
)


class ConfigError(ValueError):
    """A config value the engine refuses; the message starts with the dotted key."""


@dataclass(slots=True)
class EngineSection:
    memory_scale: float = 1 / 256  # real bytes per nominal byte
    time_scale: float = 0.02  # real seconds per modelled second
    gpus: int = 1  # emulated GPUs
    gpu_memory: int = 80 * GiB  # nominal VRAM per emulated GPU
    cpus: int = 96  # emulated host cores (the documented benchmark box)
    mem_total: int | None = None  # emulated MemTotal for total_budget = "auto"; None = /proc/meminfo ÷ memory_scale
    seed: int = 0


@dataclass(slots=True)
class Config:
    listen: str = DEFAULT_LISTEN
    status_listen: str = ""
    total_budget: int | None = None  # None = "auto"
    safety_margin: int = DEFAULT_SAFETY_MARGIN
    eviction_min_idle_s: int = 300
    devices: list[int] = field(default_factory=list)
    gpu_threads: int = 0
    gpu_workers_per_device: int = 2
    max_batch_size: int = 1
    max_batch_wait_ms: int = 10000
    sort_by_type: bool = True
    synthesis_threads: int = 0
    pipeline_enabled: bool = True
    synthesis_lookahead: int = 1
    synthesis_concurrency: int = 1
    max_parallel_synthesis: int = 18
    slot_size: int = 0
    max_gpu_queue_depth: int = 0
    param_cache: str = "/data/zk/params"
    log_level: str = "info"
    engine: EngineSection = field(default_factory=EngineSection)
    deprecated_present: list[str] = field(default_factory=list)  # WARN messages to log at engine creation


T = TypeVar("T")


class _Reader:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def section(self, name: str) -> dict[str, Any]:
        value = self.doc.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a table, found {_type_name(value)}")
        return value

    def get(self, section: str, key: str, convert: Callable[[str, Any], T], default: T) -> T:
        table = self.section(section)
        if key not in table:
            return default
        name = f"{section}.{key}"
        try:
            return convert(name, table[key])
        except UnitError as err:
            raise ConfigError(f"{name}: {err}") from None


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return f"a string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected a string, found {_type_name(value)}")
    return value


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}: expected an integer, found {_type_name(value)}")
    if value < 0:
        raise ConfigError(f"{name}: must not be negative, found {value}")
    return value


def _boolean(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}: expected a boolean, found {_type_name(value)}")
    return value


def _positive_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name}: expected a number, found {_type_name(value)}")
    if not value > 0:
        raise ConfigError(f"{name}: must be greater than 0, found {value}")
    return float(value)


def _size(name: str, value: object) -> int:
    return parse_size(_string(name, value))


def _optional_size(name: str, value: object) -> int | None:
    return _size(name, value)


def _budget(name: str, value: object) -> int | None:
    text = _string(name, value)
    return None if text == "auto" else parse_size(text)


def _duration(name: str, value: object) -> int:
    return parse_duration(_string(name, value))


def _int_list(name: str, value: object) -> list[int]:
    if not isinstance(value, list):
        raise ConfigError(f"{name}: expected an array of integers, found {_type_name(value)}")
    return [_count(f"{name}[{i}]", item) for i, item in enumerate(value)]


def _ignored(name: str, value: object) -> object:
    return value


def parse_config(doc: dict[str, Any]) -> Config:
    r = _Reader(doc)
    c = Config()
    c.listen = r.get("daemon", "listen", _string, c.listen)
    c.status_listen = r.get("daemon", "status_listen", _string, c.status_listen)
    c.total_budget = r.get("memory", "total_budget", _budget, c.total_budget)
    c.safety_margin = r.get("memory", "safety_margin", _size, c.safety_margin)
    c.eviction_min_idle_s = r.get("memory", "eviction_min_idle", _duration, c.eviction_min_idle_s)
    c.devices = r.get("gpus", "devices", _int_list, c.devices)
    c.gpu_threads = r.get("gpus", "gpu_threads", _count, c.gpu_threads)
    c.gpu_workers_per_device = r.get("gpus", "gpu_workers_per_device", _count, c.gpu_workers_per_device)
    c.max_batch_size = r.get("scheduler", "max_batch_size", _count, c.max_batch_size)
    c.max_batch_wait_ms = r.get("scheduler", "max_batch_wait_ms", _count, c.max_batch_wait_ms)
    c.sort_by_type = r.get("scheduler", "sort_by_type", _boolean, c.sort_by_type)
    c.synthesis_threads = r.get("synthesis", "threads", _count, c.synthesis_threads)
    c.pipeline_enabled = r.get("pipeline", "enabled", _boolean, c.pipeline_enabled)
    c.synthesis_lookahead = r.get("pipeline", "synthesis_lookahead", _count, c.synthesis_lookahead)
    c.synthesis_concurrency = r.get("pipeline", "synthesis_concurrency", _count, c.synthesis_concurrency)
    c.max_parallel_synthesis = r.get("pipeline", "max_parallel_synthesis", _count, c.max_parallel_synthesis)
    c.slot_size = r.get("pipeline", "slot_size", _count, c.slot_size)
    c.max_gpu_queue_depth = r.get("pipeline", "max_gpu_queue_depth", _count, c.max_gpu_queue_depth)
    c.param_cache = r.get("srs", "param_cache", _string, c.param_cache)
    c.log_level = r.get("logging", "level", _string, c.log_level)
    r.get("logging", "format", _string, "")  # read but ignored, like the daemon
    # Deprecated keys keep their types checked (the daemon deserialises them) but are ignored.
    deprecated_types: dict[str, Callable[[str, Any], object]] = {
        "pinned_budget": _string,
        "working_memory_budget": _string,
        "partition_workers": _count,
        "preload": _ignored,
    }
    for section, key, message in DEPRECATED:
        if key in r.section(section):
            r.get(section, key, deprecated_types[key], None)
            c.deprecated_present.append(message)
    e = c.engine
    e.memory_scale = r.get("engine", "memory_scale", _positive_float, e.memory_scale)
    if e.memory_scale > 1:
        raise ConfigError(f"engine.memory_scale: must be at most 1, found {e.memory_scale}")
    e.time_scale = r.get("engine", "time_scale", _positive_float, e.time_scale)
    e.gpus = r.get("engine", "gpus", _count, e.gpus)
    e.gpu_memory = r.get("engine", "gpu_memory", _size, e.gpu_memory)
    e.cpus = max(1, r.get("engine", "cpus", _count, e.cpus))
    e.mem_total = r.get("engine", "mem_total", _optional_size, e.mem_total)
    e.seed = r.get("engine", "seed", _count, e.seed)
    return c


def load_config(path: str) -> Config:
    """Defaults when the file does not exist (silently, like the daemon); errors raise.

    Raises OSError for an unreadable file, tomllib.TOMLDecodeError for bad syntax and
    ConfigError for a value the engine refuses.
    """
    file = Path(path)
    if not file.exists():
        return Config()
    with file.open("rb") as handle:
        doc = tomllib.load(handle)
    return parse_config(doc)
