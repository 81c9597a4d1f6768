"""logparse's fast path for human lines (one match reads the common head: stamp, level, spans, target) against
the general path it stands in for: the same event for every line of a large, varied corpus.

The reference is the same parse_line with the fast path's pattern replaced by one that never matches, so every
line goes through the general path (fixed positions and scans, every odd case decided)."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.ingest import _colour, synthetic_log
from cuzktui import daemon_messages as M
from cuzktui import logparse
from cuzktui.events import FinTiming, LogEvent, LogRecord, PlainLine, Span
from cuzktui.logfilter import EnvFilter
from cuzktui.logparse import parse_line, strip_ansi
from engine import tracing
from engine.tracing import Logger, Quoted

FIXTURE = Path(__file__).parent / "data" / "timeline_restart.log"
_NEVER: re.Pattern[str] = re.compile(r"(?!)")
T0 = calendar.timegm((2026, 5, 1, 7, 0, 0))


def _general(lines: Iterable[str]) -> list[LogEvent]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logparse, "_HUMAN_HEAD", _NEVER)
        return [parse_line(line) for line in lines]


def _fast_path_takes(line: str) -> bool:
    return logparse._HUMAN_HEAD.match(strip_ansi(line)) is not None


def _assert_same_events(lines: list[str]) -> None:
    fast = [parse_line(line) for line in lines]
    for line, got, expected in zip(lines, fast, _general(lines), strict=True):
        assert got == expected, line


def _engine_lines(path: Path, colour: bool) -> list[str]:
    """Lines the engine's tracing renderer writes, with Debug-quoted values that need escapes."""
    with path.open("w") as out:
        log = Logger(EnvFilter.parse("trace", lossy=False), colour=colour, out_fd=out.fileno(), err_fd=out.fileno())
        partition = tracing.Span("synthesize_partition", (("job_id", Quoted('porep "a" b')), ("partition", 6)))
        worker = tracing.Span("gpu_worker", (("worker_id", 1), ("job_id", "porep-b"), ("partition", "Some(2)")))
        log.info("cuzk_core::engine", M.JOB_ENQUEUED, ("job_id", "porep-a"), ("queue_position", 0))
        log.info(
            "cuzk_core::pipeline",
            "partition synthesis complete",
            ("synth_ms", 44601),
            ("is_pinned", False),
            span=(partition,),
        )
        log.info(
            "cuzk_core::engine",
            "GPU_TIMING prove_start returned",
            ("worker_id", 1),
            ("total_pre_prove_ms", 2990),
            ("note", Quoted("a b=c {d}: e")),
            span=(partition, worker),
        )
        log.info("cuzk_core::engine", "FIN_TIMING finalizer partition", ("finish_ms", 871), span=(worker,))
        log.error(
            "cuzk_core::engine",
            "partition synthesis failed",
            ("job_id", "porep-c"),
            ("partition", 3),
            ("error", "out of memory: partition=4 job_id=x"),
        )
        log.warn(
            "cuzk_daemon", "esc \x1b here", ("size_gib", 3.5), ("gpus", "[0, 1]"), ("path", Quoted("C:\\x\ty\nz\x01"))
        )
        log.debug("cuzk_core::memory", "budget acquired", ("name", Quoted('ünï "quoted" \\ back')))
        log.event(
            "TRACE",
            "cuzk_core::srs",
            "SRS loaded successfully",
            (("circuit_id", Quoted("porep-32g")), ("elapsed_ms", 9)),
        )
        log.info(
            "cuzk_core::engine", M.PROOF_ASSEMBLED, ("job_id", "porep-a"), ("proof_len", 1920), ("total_ms", 60000)
        )
    return path.read_text("utf-8").splitlines()


def test_every_corpus_line_gives_the_general_paths_event(tmp_path: Path) -> None:
    synthetic = list(synthetic_log(3))
    lines = [
        *FIXTURE.read_text().splitlines(),
        *synthetic,
        # Every human line of the synthetic log coloured (it colours every other job's only).
        *(_colour(line) for line in synthetic if line[:1].isdigit()),
        *_engine_lines(tmp_path / "plain.log", colour=False),
        *_engine_lines(tmp_path / "ansi.log", colour=True),
    ]
    _assert_same_events(lines)
    # The test has teeth: most human lines take the fast path, and they become events and records.
    human = [line for line in lines if strip_ansi(line)[:1].isdigit()]
    assert sum(map(_fast_path_takes, human)) > 0.95 * len(human) > 800
    assert {type(event).__name__ for event in map(parse_line, human)} >= {
        "GpuTiming",
        "FinTiming",
        "PartitionSynthesized",
        "JobQueued",
        "ProofAssembled",
        "ProofFailedLine",
        "LogRecord",
    }


_STAMPS = (
    "2026-05-01T07:00:00.412907Z",
    "2026-05-01T07:00:60.000000Z",  # a leap second
    "2026-05-01T07:00:61.000000Z",
    "2026-13-01T07:00:00.000000Z",
    "2026-02-30T07:59:59.999999Z",
    "\uff12\uff10\uff12\uff16-05-01T07:00:00.000000Z",  # full-width digits: int() reads them, [0-9] does not
    "2026-05-01T07:00:0\u0663.000000Z",
    "2026-05-01T07:00:00.00000Z",
    "2026-05-01 07:00:00.000000Z",
)
_LEVELS = (" INFO", " WARN", "ERROR", "DEBUG", "TRACE", "INFO ", "  INFO", "info ", " INF", "WARN", " WARN ")
_SPANS = (
    "",
    "a{b=1}: ",
    'synthesize_partition{job_id="porep-1" partition=3}: ',
    "a{}:b{c=d}: ",
    "{x=1}: ",
    'a{b="}: "}: ',
    'a{b="q\\"}"}: ',
    "a{b=1} ",
    "a b{c}: ",
    "a{b=1}:",
    "a{b=1}: c{d}: ",
    "é{x=1}: ",
    "a{b}c}: ",
    "a{b=1}}: ",
    "a{b=1}: : ",
    "gpu_worker{worker_id=0 partition=Some(1)}: ",
)
_TARGETS = ("cuzk_core::engine", "", "a b", "a{b", "t", "cuzk_core::engine:", "ü::x", ":", "a:b")
_MESSAGES = (
    M.JOB_ENQUEUED,
    M.PROOF_ASSEMBLED,
    "partition synthesis complete, pushing to GPU queue",
    "GPU_TIMING hot_path pre-prove overhead",
    "FIN_TIMING finalizer partition",
    "partition synthesis failed",
    "background PCE extraction failed",
    "background PCE extraction starting",
    "PCE extraction complete",
    M.READY_PREFIX + "/run/cuzk.sock",
    "plain message",
    "a: b",
    "",
    "x=1",
)
_KEYS = ("job_id", "partition", "worker_id", "synth_ms", "error", "a.b", "x_ms", "total_ms", "_k", "9bad", "circuit_id")
_VALUES = (
    "1",
    "Some(3)",
    "None",
    '"quoted value"',
    '"esc \\" q"',
    '"uni\\u{1F600} \\u{110000}"',
    '"tab\\tnl\\n\\\\"',
    "a=b",
    "{x}",
    "}: ",
    "ü",
    "",
    '"open',
    "²",
    "٣",
    "two words",
    '"a}: b"',
    '"x" y',
)


@st.composite
def _human_lines(draw: st.DrawFn) -> str:
    def piece(choices: tuple[str, ...]) -> str:
        """One of ``choices``, or now and then any short text."""
        index = draw(st.integers(0, len(choices)))
        return choices[index] if index < len(choices) else draw(st.text(max_size=6))

    fields = draw(
        st.lists(st.tuples(st.sampled_from(_KEYS), st.sampled_from(_VALUES) | st.text(max_size=6)), max_size=5)
    )
    separator = draw(st.sampled_from((" ", " ", " ", "", "  ")))
    head = f"{piece(_STAMPS)}{separator}{piece(_LEVELS)} {piece(_SPANS)}{piece(_TARGETS)}: "
    return head + piece(_MESSAGES) + "".join(f" {key}={value}" for key, value in fields)


@settings(max_examples=600, deadline=None)
@given(st.lists(_human_lines(), min_size=1, max_size=8))
def test_generated_edge_cases_give_the_general_paths_event(lines: list[str]) -> None:
    _assert_same_events(lines)


def test_fixed_lines_of_the_generators_pieces_on_each_path() -> None:
    timing = f"{_STAMPS[0]}  INFO {_SPANS[2]}t: FIN_TIMING finalizer partition worker_id=0 x_ms=1"
    assert _fast_path_takes(timing) and isinstance(parse_line(timing), FinTiming)
    # Spans end at the first "}: ", even inside a quoted value: the rest is target and message.
    quoted = f"{_STAMPS[0]}  INFO {_SPANS[5]}t: m"
    assert _fast_path_takes(quoted)
    assert parse_line(quoted) == LogRecord(T0 + 0.412907, "INFO", '"}', "t: m", (Span("a", {"b": '"'}),), {})
    wide = f"{_STAMPS[5]}  INFO t: m k=v"  # only the general path reads full-width digits
    assert not _fast_path_takes(wide) and parse_line(wide) == LogRecord(T0, "INFO", "t", "m", (), {"k": "v"})
    leap = f"{_STAMPS[2]}  INFO t: m"
    assert _fast_path_takes(leap) and parse_line(leap) == PlainLine(leap)
    for line in (timing, quoted, wide, leap):
        assert parse_line(line) == _general([line])[0]


_ONE_CODE: re.Pattern[str] = re.compile(r"\x1b\[[0-9;]*m")


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.sampled_from(("\x1b[", "\x1b[0m", "\x1b[32m", "\x1b[1;2m", "\x1b", "[", "m", "0", ";", "a", " ", "é")))
)
def test_strip_ansi_removes_exactly_each_colour_code(pieces: list[str]) -> None:
    # strip_ansi removes runs of codes in one match: the text left is that of removing them one by one.
    text = "".join(pieces)
    assert strip_ansi(text) == _ONE_CODE.sub("", text)
