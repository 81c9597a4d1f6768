"""Size and duration strings as the cuzk daemon reads them, strictly and leniently.

The daemon's own parser (docs/daemon-interface.md §3.9) never fails: a string it cannot read silently becomes
a fallback (``"1.5GiB"`` is 50 GiB, ``"1h"`` is 300 s). That is a trap for operators, so the
tool and the engine parse *strictly* (:func:`parse_size`, :func:`parse_duration` raise
:class:`UnitError` with the reason), and :func:`daemon_size` / :func:`daemon_duration` say
what the real daemon would make of the same text, so a validator can explain the surprise.
"""

from __future__ import annotations

from typing import Final

KiB: Final = 1 << 10
MiB: Final = 1 << 20
GiB: Final = 1 << 30

# Checked in this order: the first suffix the text ends with wins (so "GiB" before "B"-less forms).
SIZE_SUFFIXES: Final[tuple[tuple[str, int], ...]] = (("GiB", GiB), ("MiB", MiB), ("GB", 10**9), ("MB", 10**6))
# What the daemon falls back to, per suffix, when the number before it does not parse.
_DAEMON_SIZE_FALLBACK: Final[dict[str, int]] = {"GiB": 50 * GiB, "GB": 50 * 10**9, "MiB": 0, "MB": 0}
_DAEMON_BARE_FALLBACK: Final = 50 * GiB
_DAEMON_DURATION_FALLBACK: Final = 300


class UnitError(ValueError):
    """A size or duration string that the strict parser rejects; the message says why."""


def _split_size(text: str) -> tuple[str, str | None, int]:
    """(number part, suffix or None, multiplier) by the daemon's first-matching-suffix rule."""
    stripped = text.strip()
    for suffix, multiplier in SIZE_SUFFIXES:
        if stripped.endswith(suffix):
            return stripped[: -len(suffix)].strip(), suffix, multiplier
    return stripped, None, 1


U64_MAX: Final = 2**64 - 1


def _rust_u64(number: str) -> int | None:
    """``number`` as Rust's ``str::parse::<u64>`` reads it (one optional leading ``+``, ASCII digits, no
    overflow), or None where that parse fails and the daemon's fallback applies (config.rs parse_size /
    parse_duration)."""
    digits = number.removeprefix("+")
    if not (digits.isascii() and digits.isdigit()):
        return None
    value = int(digits)
    return value if value <= U64_MAX else None


def parse_size(text: str, *, knob: bool = True) -> int:
    """Bytes for a size string (``"14GiB"``, ``"512 MiB"``, ``"5GB"``, ``"1073741824"``).

    Only a non-negative integer (a leading ``+`` allowed, as Rust's u64 parser allows it) may stand
    before the suffix, and the suffixes are case-sensitive, exactly as the daemon reads them;
    anything else raises UnitError, saying what the daemon would read a config ``knob`` as (not for
    the tool's own flags, ``--memory-limit``, which no daemon reads).
    """
    number, suffix, multiplier = _split_size(text)
    value = _rust_u64(number)
    if value is not None:
        return value * multiplier
    units = ", ".join(s for s, _ in SIZE_SUFFIXES)
    daemon = f"; the daemon would read it as {format_size(daemon_size(text))}" if knob else ""
    if suffix is None:
        raise UnitError(
            f"{text!r} is not a size: use a whole number of bytes or a whole number followed by one of {units} "
            f"(case-sensitive, e.g. 64GiB){daemon}"
        )
    raise UnitError(f"{text!r}: only a whole number may stand before {suffix!r}{daemon}")


def daemon_size(text: str) -> int:
    """What the real daemon makes of a size string, fallbacks included (never raises)."""
    number, suffix, multiplier = _split_size(text)
    value = _rust_u64(number)
    if value is not None:
        return value * multiplier
    if suffix is None:
        return _DAEMON_BARE_FALLBACK
    return _DAEMON_SIZE_FALLBACK[suffix]


# The tool's own flags' units, longest first; config.rs ``parse_duration`` knows only the last two.
_TOOL_DURATION_SUFFIXES: Final = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def _split_duration(text: str, hours: bool = False) -> tuple[str, int]:
    """(number part, multiplier) as config.rs ``parse_duration`` splits it: a trailing ``m`` or ``s``,
    the number before it trimmed; ``hours`` adds ``h`` and ``d``, which only the tool's own flags take."""
    stripped = text.strip()
    for suffix, multiplier in _TOOL_DURATION_SUFFIXES if hours else _TOOL_DURATION_SUFFIXES[2:]:
        if stripped.endswith(suffix):
            return stripped[:-1].strip(), multiplier
    return stripped, 1


def parse_duration(text: str, *, hours: bool = False) -> int:
    """Seconds for a duration string: ``"5m"`` (minutes), ``"30s"`` (seconds) or a bare integer of seconds,
    and with ``hours`` ``"2h"`` and ``"7d"``: for the tool's own flags (``tune --time-budget``,
    ``record --keep``), never for a config knob, since the daemon reads ``"2h"`` as 300 s."""
    number, multiplier = _split_duration(text, hours)
    value = _rust_u64(number)
    if value is not None:
        return value * multiplier
    if hours:
        raise UnitError(
            f"{text!r} is not a duration: use a whole number followed by 'd' (days), 'h' (hours), 'm' (minutes) "
            "or 's' (seconds), or a bare number of seconds"
        )
    raise UnitError(
        f"{text!r} is not a duration: use a whole number followed by 'm' (minutes) or 's' (seconds), "
        f"or a bare number of seconds; the daemon would read it as {daemon_duration(text)} s"
    )


def daemon_duration(text: str) -> int:
    """What the real daemon makes of a duration string, fallbacks included (never raises)."""
    number, multiplier = _split_duration(text)
    value = _rust_u64(number)
    if value is not None:
        return value * multiplier
    return 5 * 60 if multiplier == 60 else _DAEMON_DURATION_FALLBACK


def format_size(n: int | float) -> str:
    """A short human size in binary units: ``"14 GiB"``, ``"1.5 GiB"``, ``"512 MiB"``, ``"900 B"``."""
    value = float(n)
    for unit, scale in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(value) >= scale:
            scaled = value / scale
            return f"{scaled:.0f} {unit}" if scaled == int(scaled) or abs(scaled) >= 100 else f"{scaled:.1f} {unit}"
    return f"{int(value)} B"


def format_duration(seconds: float) -> str:
    """``90`` → ``1m30s``: a compact, unsigned duration (whole seconds)."""
    total = round(abs(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"
