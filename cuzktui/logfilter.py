"""tracing-subscriber's EnvFilter as the daemon applies it (cuzk-daemon main.rs: ``RUST_LOG`` when set
and valid, else ``--log-level`` / ``[logging].level``, parsed leniently).

The engine filters its own lines with it; the tool uses it to tell whether an inherited ``RUST_LOG``
would hide the INFO lines the dashboard is built from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

LEVELS: Final = ("ERROR", "WARN", "INFO", "DEBUG", "TRACE")
_RANK: Final = {name: i for i, name in enumerate(LEVELS)}  # lower = more severe
_OFF: Final = -1


class FilterError(ValueError):
    """A directive string that EnvFilter would reject."""


def _parse_level(text: str) -> int:
    lowered = text.strip().lower()
    if lowered == "off":
        return _OFF
    if lowered == "warning":
        return _RANK["WARN"]
    for name, rank in _RANK.items():
        if lowered == name.lower():
            return rank
    raise FilterError(f"invalid level `{text}`")


@dataclass(frozen=True, slots=True)
class EnvFilter:
    """The subset of tracing-subscriber's EnvFilter the daemon's users write: ``level`` and
    ``target=level`` directives, comma separated; the longest matching target prefix wins."""

    default: int | None
    targets: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, spec: str, *, lossy: bool, on_ignored: Callable[[str], None] | None = None) -> EnvFilter:
        """Strict parsing raises FilterError; lossy parsing drops bad directives, passing EnvFilter's
        ``ignoring …`` note (the daemon writes it on stderr) to ``on_ignored``."""
        default: int | None = None
        targets: list[tuple[str, int]] = []
        for raw in spec.split(","):
            directive = raw.strip()
            if not directive:
                continue
            try:
                if "=" in directive:
                    target, _, level = directive.partition("=")
                    if not target or "[" in target or " " in target:
                        raise FilterError(f"invalid target `{target}`")
                    targets.append((target, _parse_level(level)))
                else:
                    try:
                        default = _parse_level(directive)
                    except FilterError:
                        if not directive.replace("::", "").replace("_", "").replace("-", "").isalnum():
                            raise
                        targets.append((directive, _RANK["TRACE"]))  # a bare target enables everything
            except FilterError as err:
                if not lossy:
                    raise
                if on_ignored is not None:
                    on_ignored(f"ignoring `{directive}`: {err}\n")
        targets.sort(key=lambda item: len(item[0]), reverse=True)
        return cls(default, tuple(targets))

    def enabled(self, level: str, target: str) -> bool:
        rank = _RANK[level]
        for prefix, allowed in self.targets:
            if target.startswith(prefix):
                return rank <= allowed
        return self.default is not None and rank <= self.default


# The targets whose INFO lines the dashboard is built from: startup and readiness (cuzk_daemon),
# job lifecycle and pipeline sizing (engine, scheduler, service), budget and SRS (memory,
# srs_manager), partitions (pipeline).
DASHBOARD_TARGETS: Final = (
    "cuzk_daemon",
    "cuzk_core::engine",
    "cuzk_core::pipeline",
    "cuzk_core::scheduler",
    "cuzk_core::srs_manager",
    "cuzk_core::memory",
    "cuzk_server::service",
)


def hidden_dashboard_targets(rust_log: str) -> list[str]:
    """The dashboard's targets whose INFO lines a ``RUST_LOG`` value hides; none for a value the
    daemon rejects (it then falls back to the configured level). An empty value is valid and
    enables nothing."""
    try:
        log_filter = EnvFilter.parse(rust_log, lossy=False)
    except FilterError:
        return []
    return [target for target in DASHBOARD_TARGETS if not log_filter.enabled("INFO", target)]


def launch_environment(env: Mapping[str, str], logging_level: str) -> tuple[dict[str, str], str | None]:
    """The environment for a daemon we launch, and a warning when it had to change.

    An inherited ``RUST_LOG`` overrides ``[logging].level`` and ``--log-level`` (main.rs); when it
    would hide the INFO lines the dashboard reads, the daemon gets ``RUST_LOG`` set to the
    configured level instead, so what the config says is what runs.
    """
    inherited = env.get("RUST_LOG")
    if inherited is None:
        return dict(env), None
    hidden = hidden_dashboard_targets(inherited)
    if not hidden:
        return dict(env), None
    warning = (
        f"RUST_LOG={inherited!r} in this environment overrides logging.level and would hide the INFO lines "
        f"the dashboard reads ({', '.join(hidden)}); the daemon is launched with RUST_LOG={logging_level!r} "
        "(the config's logging.level)"
    )
    return {**env, "RUST_LOG": logging_level}, warning
