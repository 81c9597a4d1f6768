from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuzktui.units import GiB, MiB, UnitError, daemon_duration, daemon_size, format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("14GiB", 14 * GiB),
        (" 512 MiB ", 512 * MiB),
        ("5GB", 5 * 10**9),
        ("7MB", 7 * 10**6),
        ("1024", 1024),
        # Rust's u64 parser (config.rs parse_size) accepts one leading "+".
        ("+5GiB", 5 * GiB),
        ("+1024", 1024),
    ],
)
def test_valid_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected == daemon_size(text)


@pytest.mark.parametrize(
    ("text", "daemon_reads"),
    [
        ("1.5GiB", 50 * GiB),
        ("5gib", 50 * GiB),
        ("1TiB", 50 * GiB),
        ("x MiB", 0),
        ("-1GiB", 50 * GiB),
        ("++5GiB", 50 * GiB),
        ("+GiB", 50 * GiB),
        ("+ 5GiB", 50 * GiB),
        # Above u64::MAX the parse overflows and the fallback applies.
        (f"{2**64}GiB", 50 * GiB),
        (str(2**64), 50 * GiB),
    ],
)
def test_sizes_the_daemon_would_silently_misread_are_rejected(text: str, daemon_reads: int) -> None:
    assert daemon_size(text) == daemon_reads
    with pytest.raises(UnitError, match="daemon would read it"):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300), ("30s", 30), ("45", 45), ("+2m", 120), ("+7", 7), ("7 m", 420), (" 30 s ", 30)]
)
def test_valid_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds == daemon_duration(text)
    assert parse_duration(text, hours=True) == seconds  # the tool's own flags read them alike


@pytest.mark.parametrize(("text", "seconds"), [("2h", 7200), ("1 h", 3600), ("0h", 0)])
def test_hours_are_for_the_tools_own_flags_only(text: str, seconds: int) -> None:
    assert parse_duration(text, hours=True) == seconds
    with pytest.raises(UnitError, match="daemon would read it as 300 s"):
        parse_duration(text)  # a config knob: the daemon reads "2h" as 300 s


@pytest.mark.parametrize(("text", "seconds"), [("7d", 604800), ("1 d", 86400)])
def test_days_are_for_the_tools_own_flags_only(text: str, seconds: int) -> None:
    assert parse_duration(text, hours=True) == seconds
    with pytest.raises(UnitError, match=f"daemon would read it as {daemon_duration(text)} s"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["2 hours", "1.5h", "h", "-1h", "1.5d"])
def test_durations_with_hours_still_refuse_what_is_not_one(text: str) -> None:
    with pytest.raises(UnitError, match="'h' \\(hours\\)"):
        parse_duration(text, hours=True)


@pytest.mark.parametrize(("text", "daemon_reads"), [("10ms", 300), ("1h", 300), ("5min", 300), ("xm", 300)])
def test_bad_durations(text: str, daemon_reads: int) -> None:
    assert daemon_duration(text) == daemon_reads
    with pytest.raises(UnitError):
        parse_duration(text)


@given(st.text())
def test_daemon_readers_never_raise(text: str) -> None:
    assert daemon_size(text) >= 0
    assert daemon_duration(text) >= 0


def test_format_size() -> None:
    assert format_size(14 * GiB) == "14 GiB"
    assert format_size(1.5 * GiB) == "1.5 GiB"
    assert format_size(900) == "900 B"
