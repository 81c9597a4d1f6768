"""The daemon's TOML config read into typed values: one reader for the engine and the tool.

The schema is upstream's (extern/cuzk/cuzk-core/src/config.rs ``Config`` and its sections; the
default config path is cuzk-daemon/src/main.rs's ``-c``) plus the ``[engine]`` section only
cuzk-engine reads. Every key, default, type, range and deprecated key comes from
:mod:`cuzktui.knobs`, so the engine and the tool cannot drift apart: each field below names its
knob, and its default is that knob's default read the way the engine reads a value.

Two readings of one document (:func:`parse_config`):

* strict, the engine's (deliberately stricter than the real daemon): whatever the schema's
  validator (:mod:`cuzktui.knob_rules`) calls an error — a value of the wrong TOML type, a size or
  duration the daemon would silently replace by a fallback (docs/daemon-interface.md §3.9), a
  negative count, an address or log filter the daemon would misread — is a fatal error that names
  the key. The validator's warnings (ignored knobs, listening on every interface) are not.
* lenient, the tool's (:func:`read_config`: what a launched or attached daemon runs with, for
  its addresses, log level and the engine's scales): a value of the wrong type, or a size or
  duration that does not parse, keeps its default; other values are taken as written.

Deprecated keys are type-checked, collected with the daemon's WARN line and ignored; unknown keys
and sections are ignored, as in the daemon.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from .knob_rules import type_problem, validate_value
from .knobs import KNOBS, SECTIONS, Knob, KnobType, Severity, knob, toml_type_name
from .units import UnitError, parse_duration, parse_size

DEFAULT_CONFIG_PATH: Final = "/data/zk/cuzk.toml"
_KNOB: Final = "knob"  # a field's metadata key: the "section.key" it is read from


class DaemonConfigError(ValueError):
    """A config value the strict reading refuses; the message starts with the dotted key."""


def _typed(k: Knob, value: object) -> Any:
    """The engine's value for one knob's TOML value (already validated): sizes in bytes, durations in seconds."""
    if isinstance(value, str):
        if k.type is KnobType.BUDGET:
            return None if value == "auto" else parse_size(value)
        if k.type is KnobType.SIZE:
            return parse_size(value)
        if k.type is KnobType.DURATION:
            return parse_duration(value)
        return value
    if k.type is KnobType.FLOAT and isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return list(value)
    return value  # None for a knob without a default (the inert and deprecated ones)


def _from_knob(name: str) -> Any:
    """A dataclass field read from knob ``name``, defaulting to the schema's default."""
    k = knob(name)
    metadata = {_KNOB: name}
    if isinstance(k.default, list):
        return field(default_factory=lambda: _typed(k, k.default), metadata=metadata)
    return field(default=_typed(k, k.default), metadata=metadata)


@dataclass(slots=True)
class EngineSection:
    memory_scale: float = _from_knob("engine.memory_scale")  # real bytes per nominal byte
    time_scale: float = _from_knob("engine.time_scale")  # real seconds per modelled second
    gpus: int = _from_knob("engine.gpus")  # emulated GPUs
    gpu_memory: int = _from_knob("engine.gpu_memory")  # nominal VRAM per emulated GPU
    cpus: int = _from_knob("engine.cpus")  # emulated host cores (0 is read as 1)
    mem_total: int = _from_knob("engine.mem_total")  # the emulated box's RAM: the MemTotal "auto" reads
    seed: int = _from_knob("engine.seed")
    cuda: bool = _from_knob("engine.cuda")  # built with cuda-supraseal (False: every pipeline job fails)


@dataclass(slots=True)
class Config:
    listen: str = _from_knob("daemon.listen")
    status_listen: str = _from_knob("daemon.status_listen")
    total_budget: int | None = _from_knob("memory.total_budget")  # None = "auto"
    safety_margin: int = _from_knob("memory.safety_margin")
    eviction_min_idle_s: int = _from_knob("memory.eviction_min_idle")
    devices: list[int] = _from_knob("gpus.devices")  # noqa: RUF009 (a Field with a default_factory)
    gpu_threads: int = _from_knob("gpus.gpu_threads")
    gpu_workers_per_device: int = _from_knob("gpus.gpu_workers_per_device")
    max_batch_size: int = _from_knob("scheduler.max_batch_size")
    max_batch_wait_ms: int = _from_knob("scheduler.max_batch_wait_ms")
    sort_by_type: bool = _from_knob("scheduler.sort_by_type")
    synthesis_threads: int = _from_knob("synthesis.threads")
    pipeline_enabled: bool = _from_knob("pipeline.enabled")
    synthesis_lookahead: int = _from_knob("pipeline.synthesis_lookahead")
    synthesis_concurrency: int = _from_knob("pipeline.synthesis_concurrency")
    max_parallel_synthesis: int = _from_knob("pipeline.max_parallel_synthesis")
    slot_size: int = _from_knob("pipeline.slot_size")
    max_gpu_queue_depth: int = _from_knob("pipeline.max_gpu_queue_depth")
    param_cache: str = _from_knob("srs.param_cache")
    log_level: str = _from_knob("logging.level")
    engine: EngineSection = field(default_factory=EngineSection)
    deprecated_present: list[str] = field(default_factory=list)  # WARN messages to log at engine creation
    # [daemon].listen given in the file: the engine never serves on the default unasked.
    listen_set: bool = field(default=False, compare=False)

    @property
    def listen_address(self) -> str | None:
        """The ``[daemon].listen`` the file sets; None where it sets none (the daemon's default applies)."""
        return self.listen if self.listen_set and self.listen else None

    @property
    def status_address(self) -> str | None:
        """``[daemon].status_listen``; None when the /status endpoint is off."""
        return self.status_listen or None

    @property
    def emulated_gpus(self) -> list[int]:
        """The GPU ordinals cuzk-engine emulates: ``gpus.devices`` when set (engine.rs
        detect_gpu_ordinals takes that list as given), else 0 … ``[engine] gpus`` − 1."""
        return self.devices or list(range(self.engine.gpus))


def _knob_fields() -> dict[str, str]:
    """Knob name → the Config attribute it is read into (``"engine.seed"`` for the nested section)."""
    paths: dict[str, str] = {}
    for prefix, cls in (("", Config), ("engine.", EngineSection)):
        for f in fields(cls):
            if _KNOB in f.metadata:
                paths[f.metadata[_KNOB]] = prefix + f.name
    return paths


# Knobs missing here are only validated: deprecated keys (warned about) and logging.format (never read).
KNOB_FIELDS: Final[Mapping[str, str]] = _knob_fields()


def _tables(doc: Mapping[str, Any], *, strict: bool) -> dict[str, Mapping[str, Any]]:
    tables: dict[str, Mapping[str, Any]] = {}
    for section in SECTIONS:
        value = doc.get(section, {})
        if not isinstance(value, Mapping):
            if strict:
                message = f"{section}: must be a table ([{section}]), got {toml_type_name(value)} {value!r}"
                raise DaemonConfigError(message)
            value = {}
        tables[section] = value
    return tables


def _accepted(k: Knob, value: object, *, strict: bool) -> bool:
    """Whether the reading takes the value; the strict one raises for a value the schema calls an error."""
    if strict:
        errors = [p for p in validate_value(k, value) if p.severity is Severity.ERROR]
        if errors:
            raise DaemonConfigError(str(errors[0]))
        return True
    if type_problem(k, value) is not None:
        return False
    try:
        _typed(k, value)
    except UnitError:
        return False
    return True


def parse_config(doc: Mapping[str, Any], *, strict: bool = True) -> Config:
    """The Config of a parsed TOML document (the module docstring says what each reading refuses)."""
    tables = _tables(doc, strict=strict)
    config = Config()
    for k in KNOBS:
        table = tables[k.section]
        if k.key not in table or not _accepted(k, table[k.key], strict=strict):
            continue
        value = table[k.key]
        if k.start_warning:
            config.deprecated_present.append(k.start_warning)
        if k.name == "daemon.listen":
            config.listen_set = True
        path = KNOB_FIELDS.get(k.name)
        if path is not None:
            holder, _, attr = path.rpartition(".")
            setattr(getattr(config, holder) if holder else config, attr, _typed(k, value))
    config.engine.cpus = max(1, config.engine.cpus)
    return config


def load_config(path: str) -> Config:
    """The engine's reading of its ``-c`` file: defaults when the file does not exist (silently, like
    the daemon); errors raise.

    Raises OSError for an unreadable file, tomllib.TOMLDecodeError for bad syntax and
    DaemonConfigError for a value the engine refuses.
    """
    file = Path(path)
    if not file.exists():
        return Config()
    with file.open("rb") as handle:
        doc = tomllib.load(handle)
    return parse_config(doc)


def read_config(text: str) -> Config:
    """The tool's reading of a config text (lenient). A text that is not TOML reads as the defaults:
    the daemon refuses it at start, and the tool's config checks say so where it is edited."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return Config()
    return parse_config(doc, strict=False)


def config_from_values(values: Mapping[str, Any]) -> Config:
    """The tool's (lenient) reading of effective knob values keyed ``"section.key"`` (a controller's
    ``config_values()``)."""
    doc: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        section, _, key = name.partition(".")
        doc.setdefault(section, {})[key] = value
    return parse_config(doc, strict=False)
