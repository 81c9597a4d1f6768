"""One line of cuzk daemon output -> one typed event (docs/daemon-interface.md §4).

:func:`parse_line` never raises: a line it does not recognise, or one cut short, becomes a
:class:`~cuzktui.events.PlainLine`. Order of the checks follows the traffic: TIMELINE lines are
the bulk of a busy log, so they are recognised first by a prefix test and split with
``str.split`` (no regex). A human (tracing) line's head (timestamp, level, spans, target) is read by
one match of its common shape, anything unusual by fixed positions and scans; its fields by one
regex split.

Field values are split on `` key=`` boundaries (§4.2): a Display'd value may contain spaces,
so for the lines whose values are free text (errors, PCE summary) only the keys that line
is known to carry start a new field. Double-quoted values are unescaped Rust Debug strings.

:class:`LineSplitter` turns the byte chunks of a tailed file into complete lines.
"""

from __future__ import annotations

import calendar
import codecs
import itertools
import re
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from sys import intern
from typing import Final, Literal

from . import daemon_messages as M
from .events import (
    BatchMemberDelivered,
    BatchSplit,
    BudgetInitialized,
    BudgetStall,
    CuzkTiming,
    DaemonReady,
    DaemonStarting,
    EngineShutdown,
    EngineStarted,
    Eviction,
    FatalErrorLine,
    FinTiming,
    GpuTiming,
    JobQueued,
    LogEvent,
    LogRecord,
    MonolithicProcessing,
    NttTiming,
    PartitionSynthesized,
    PceActivity,
    PipelineConfigured,
    PlainLine,
    ProofAssembled,
    ProofFailedLine,
    SelfCheck,
    Span,
    SrsLoaded,
    SrsLoadStarted,
    Stream,
    TimelineEvent,
)

__all__ = [
    "PIECED_TIMELINE_REACH",
    "LineSplitter",
    "event_line_starts",
    "format_timestamp",
    "is_inert",
    "lazy_line_starts",
    "may_be_timeline_rest",
    "parse_line",
    "pieced_timeline_lines",
    "rejoin_timeline",
    "split_pieced_timeline",
    "strip_ansi",
    "timing_events",
]

# A run of SGR codes as one match (a coloured line's codes come in pairs: reset, then the next colour): fewer
# pieces to join than one match a code, and the same text left.
_ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*+m(?:\x1b\[[0-9;]*+m)*+")
# A field boundary: one space, an identifier, '='. Dotted keys come from `log` records. The identifier is
# possessive: '=' is no word character, so a word that is no key is given up at once, not letter by letter.
_KEY_RE: Final = re.compile(r" ([A-Za-z_][\w.]*+)=")
_ESCAPE_RE: Final = re.compile(r"\\(u\{[0-9a-fA-F]{1,6}\}|.)", re.DOTALL)
_SIMPLE_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
_LEVELS: Final = frozenset({"TRACE", "DEBUG", "INFO", "WARN", "ERROR"})
# A whitespace-separated ``key=digits`` token of a C++ timing line (``key=digits`` + ``ms`` for
# CUZK_NTT_H); a token with any other value is no figure. One C-level scan finds them all. Timing keys
# are interned: the waterfall keeps ~36 of them per partition for thousands of jobs (a replay's RSS).
_TIMING_VALUE_RE: Final = re.compile(r"(?<!\S)([^\s=]*)=([0-9]+)(?!\S)")
_NTT_VALUE_RE: Final = re.compile(r"(?<!\S)([^\s=]*)=([0-9]+)ms(?!\S)")
_TS_PREFIX_RE: Final = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)\Z")
# "YYYY-MM-DDTHH:MM:SS.ffffffZ" then one space then the 5-character level.
_TS_LEN: Final = 27
_LEVEL_END: Final = _TS_LEN + 7


def strip_ansi(line: str) -> str:
    """The line without SGR colour codes (free when there is no ESC in it)."""
    return _ANSI_RE.sub("", line) if "\x1b" in line else line


# Cached: the same few worker, partition and count texts recur on most lines.
@lru_cache(maxsize=1024)
def _uint(text: str | None) -> int | None:
    """A non-negative decimal integer, or None (``str.isdigit`` alone accepts '²')."""
    if text is not None and text.isascii() and text.isdigit():
        return int(text)
    return None


@lru_cache(maxsize=1024)
def _option_int(text: str | None) -> int | None:
    """``Some(6)`` / ``6`` -> 6; ``None`` or anything else -> None."""
    if text is not None and text.startswith("Some(") and text.endswith(")"):
        text = text[5:-1]
    return _uint(text)


# --------------------------------------------------------------------------------------------
# TIMELINE
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _timeline_detail(text: str) -> tuple[dict[str, str], int | None, int | None, bool]:
    """(fields, partition, worker, monolithic) of a TIMELINE detail. Cached: ``partition=3`` and
    ``worker=1,partition=3`` are four of a partition's six lines, so most details are split once; the
    events that carry one share its dict (events are never changed)."""
    detail: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            detail[key] = value
    partition = _uint(detail.get("partition"))
    # A monolithic job's events carry no partition index (§4.3); a complete detail without one
    # says so. A cut-off detail ("partit") carries no key at all and stays undecided.
    monolithic = partition is None and "partition" not in detail and bool(detail)
    return detail, partition, _uint(detail.get("worker")), monolithic


def _parse_timeline(line: str) -> LogEvent:
    parts = line.split(",", 4)
    if len(parts) < 5:
        return PlainLine(line)
    _, offset_text, event, job_id, detail_text = parts
    if not (offset_text.isascii() and offset_text.isdigit()) or not event or not job_id:
        return PlainLine(line)
    if detail_text == "monolithic":
        return TimelineEvent(int(offset_text), event, job_id, {}, None, None, True)
    return TimelineEvent(int(offset_text), event, job_id, *_timeline_detail(detail_text))


# engine.rs timeline_event writes TIMELINE with eprintln!, one write to stderr per piece of its format
# ("TIMELINE,", the offset, ",", …, the detail, "\n"), while tracing writes each line whole to stdout. With both
# streams on one file a tracing line can land between two pieces: "TIMELINE,157180,GPU_PICKUP,<job>," then a
# whole tracing line on the same line, then the rest ("worker=1") alone on a later one.
_PIECE_STAMP_END: Final = re.compile(rb"\.[0-9]{6}Z")
_PIECE_STAMP_HEAD: Final = re.compile(rb"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
_PIECE_SGR: Final = re.compile(rb"(?:\x1b\[[0-9;]*m)+\Z")
_STAMP_HEAD_LEN: Final = len("2026-05-01T07:00:00")
# What starts a line the daemon writes whole: a tracing line (maybe coloured), TIMELINE, the C++ timings.
_WHOLE_LINE_START: Final = re.compile(
    rb"(?:\x1b\[[0-9;]*m)*(?:[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.|TIMELINE,|CUZK_)"
)
# A TIMELINE line after a newline that may hold a tracing line (a '.': none of its own pieces has one); the
# literal first lets the search skip to each at C speed.
_PIECED_CANDIDATE: Final = re.compile(rb"\nTIMELINE,[^\n.]*+\.")
# How many lines after a pieced TIMELINE line its rest is looked for: the writes that can come between are a
# few other threads' whole lines.
PIECED_TIMELINE_REACH: Final = 16


def split_pieced_timeline(raw: bytes) -> tuple[bytes, bytes] | None:
    """(the TIMELINE pieces written before it, the tracing line) of a TIMELINE line a tracing line was
    written into; None for any other line. The rest of the TIMELINE line comes on a later line
    (:func:`rejoin_timeline`)."""
    if not raw.startswith(b"TIMELINE,") or b"." not in raw:
        return None
    for m in _PIECE_STAMP_END.finditer(raw):
        stamp = m.start() - _STAMP_HEAD_LEN
        if stamp >= len(b"TIMELINE,") and _PIECE_STAMP_HEAD.fullmatch(raw, stamp, m.start()):
            colour = _PIECE_SGR.search(raw, len(b"TIMELINE,"), stamp)  # a coloured line's codes before its stamp
            cut = colour.start() if colour is not None else stamp
            return raw[:cut], raw[cut:]
    return None


def may_be_timeline_rest(raw: bytes) -> bool:
    """Whether ``raw`` can be the rest of a pieced TIMELINE line: not a line the daemon writes whole."""
    return _WHOLE_LINE_START.match(raw) is None


def rejoin_timeline(head: bytes, rest: bytes) -> bytes | None:
    """The TIMELINE line ``head`` + ``rest`` when it is a whole one (every field, a detail of ``key=value``
    items or ``monolithic``); None when ``rest`` is no rest of it."""
    line = head + rest
    event = _parse_timeline(line.decode("utf-8", "replace"))
    if not isinstance(event, TimelineEvent):
        return None
    detail = line.split(b",", 4)[4]
    if detail != b"monolithic" and not all(b"=" in item for item in detail.split(b",")):
        return None
    return line


def pieced_timeline_lines(block: bytes, starts: list[int], wanted: int = 0) -> tuple[list[int], int]:
    """``starts`` (line starts in ``block``, in order) with the rest of each pieced TIMELINE line added (the
    first line after it that the daemon did not write whole, within PIECED_TIMELINE_REACH lines), so that a
    reader that skips lines still reads the rest; and how many lines of the next block to search still, for a
    pieced line whose rest was not in this one. ``wanted`` is that count from the block before. Free for a
    block without a TIMELINE line holding a '.' when nothing is wanted."""
    added: list[int] = []
    if wanted:
        found, wanted = _timeline_rest(block, 0, wanted)
        added += found
    candidates = (m.start() + 1 for m in _PIECED_CANDIDATE.finditer(block))
    for start in itertools.chain([0] if block.startswith(b"TIMELINE,") else [], candidates):
        end = block.find(b"\n", start)
        if end == -1 or split_pieced_timeline(block[start:end]) is None:
            continue
        found, wanted = _timeline_rest(block, end + 1, PIECED_TIMELINE_REACH)
        added += found
    return (sorted({*starts, *added}) if added else starts), wanted


def _timeline_rest(block: bytes, pos: int, reach: int) -> tuple[list[int], int]:
    """([the start of the first line from ``pos`` that may be a TIMELINE rest], 0), or ([], the lines still to
    search in the next block) when none of the next ``reach`` lines is."""
    while reach and pos < len(block):
        end = block.find(b"\n", pos)
        end = len(block) if end == -1 else end
        if may_be_timeline_rest(block[pos:end]):
            return [pos], 0
        reach -= 1
        pos = end + 1
    return [], reach


# --------------------------------------------------------------------------------------------
# CUZK_TIMING
# --------------------------------------------------------------------------------------------


def _parse_cuzk_timing(line: str) -> LogEvent:
    text = line[len("CUZK_TIMING:") :].strip()
    values = {intern(key): int(value) for key, value in _TIMING_VALUE_RE.findall(text)}
    gpu: int | None = None
    # "... on gpu G": the only lines that name the GPU ordinal. gpu_tid is a thread index
    # inside one prove call (§4.4), not a GPU, so it stays in ``values``.
    _, sep, tail = text.rpartition(" on gpu ")
    if sep:
        gpu = _uint(tail.strip())
    return CuzkTiming(values, gpu, text)


def _parse_ntt_h(line: str) -> LogEvent:
    """``CUZK_NTT_H: d_b_alloc=3ms ntt_kernels=41ms … total=97ms`` (groth16_ntt_h.cu): values end in ``ms``."""
    values = {intern(key): int(value) for key, value in _NTT_VALUE_RE.findall(line[len("CUZK_NTT_H:") :])}
    return NttTiming(values) if values else PlainLine(line)


# --------------------------------------------------------------------------------------------
# Human (tracing) lines
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _minute_epoch(prefix: str) -> int | None:
    """Unix seconds of a "YYYY-MM-DDTHH:MM" UTC prefix (one calendar computation per minute)."""
    m = _TS_PREFIX_RE.match(prefix)
    if m is None:
        return None
    year, month, day, hour, minute = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60):
        return None
    try:
        return calendar.timegm((year, month, day, hour, minute, 0, 0, 0, 0))
    except (ValueError, OverflowError):
        return None


def parse_timestamp(text: str) -> float | None:
    """Unix seconds of the daemon's ``2026-05-01T07:00:00.000001Z`` timestamp, or None."""
    if len(text) != _TS_LEN or text[26] != "Z" or text[16] != ":" or text[19] != ".":
        return None
    seconds, micros = text[17:19], text[20:26]
    if not (seconds.isascii() and seconds.isdigit() and micros.isascii() and micros.isdigit()):
        return None
    return _stamp(text[:16], seconds, micros)


def format_timestamp(ts: float) -> str:
    """The daemon's ``2026-05-01T07:00:00.000001Z`` for Unix seconds ``ts`` (parse_timestamp's inverse)."""
    whole, micros = divmod(round(ts * 1_000_000), 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def _stamp(minute: str, seconds: str, micros: str) -> float | None:
    """Unix seconds of a timestamp's parts ("YYYY-MM-DDTHH:MM", "SS", "ffffff", digits already checked); None
    for a minute that is no date or seconds past a leap second."""
    base = _minute_epoch(minute)
    if base is None or int(seconds) > 60:
        return None
    return base + int(seconds) + int(micros) / 1e6


def _quoted_end(text: str, start: int) -> int:
    """Index just past the closing quote of the Debug string opening at ``start``, or -1."""
    i = start + 1
    while True:
        j = text.find('"', i)
        if j == -1:
            return -1
        k = j
        while k - 1 > start and text[k - 1] == "\\":
            k -= 1
        if (j - k) % 2 == 0:
            return j + 1
        i = j + 1


def _unescape_one(m: re.Match[str]) -> str:
    code = m.group(1)
    if code.startswith("u{"):
        value = int(code[2:-1], 16)
        return chr(value) if value <= 0x10FFFF else m.group(0)
    return _SIMPLE_ESCAPES.get(code, m.group(0))


def _unescape(raw: str) -> str:
    return _ESCAPE_RE.sub(_unescape_one, raw) if "\\" in raw else raw


def _value(raw: str) -> str:
    """A field value: a complete Debug string unquoted and unescaped, anything else verbatim."""
    if raw.startswith('"') and len(raw) > 1 and _quoted_end(raw, 0) == len(raw):
        return _unescape(raw[1:-1])
    return raw


def _split_fields(text: str, keys: frozenset[str] | None = None) -> tuple[str, dict[str, str]]:
    """(message, fields) of ``text`` = "<message>[ key=value]*"; ``keys`` limits the boundaries.

    One regex split finds every candidate `` key=``; a candidate is not a boundary (and is
    glued back into the value before it) when the key is not allowed, when it already
    occurred (a key never repeats within one event, so `` error=`` inside an error text is
    text), or when it falls inside a double-quoted value.
    """
    parts = _KEY_RE.split(text)
    message = parts[0]
    if keys is None and '"' not in text:
        # The common line: no Debug string, so every candidate is a boundary unless its key repeats;
        # with no repeat the pairs are the fields as they stand (one dict build, no loop in Python).
        fields = dict(zip(parts[1::2], parts[2::2], strict=True))
        if 2 * len(fields) == len(parts) - 1:
            return message, fields
    fields = {}
    key: str | None = None
    value = ""
    in_quote = False  # the value so far opens a Debug string that has not closed yet
    for i in range(1, len(parts) - 1, 2):
        candidate, piece = parts[i], parts[i + 1]
        if (keys is None or candidate in keys) and candidate != key and candidate not in fields and not in_quote:
            if key is not None:
                fields[key] = _value(value)
            key, value = candidate, piece
            in_quote = piece.startswith('"') and _quoted_end(piece, 0) == -1
            continue
        glued = f" {candidate}={piece}"
        if key is None:
            message += glued
        else:
            value += glued
            # Only the glued text can close the quote (it starts with a space, not a backslash).
            in_quote = in_quote and _quoted_end('"' + glued, 0) == -1
    if key is not None:
        fields[key] = _value(value)
    return message, fields


@lru_cache(maxsize=512)
def _span_block(block: str) -> tuple[Span, ...] | None:
    """The spans of ``a{..}:b{..}`` (None when malformed); cached: a span prefixes many lines.

    Cached Span objects are shared between events, which is safe because events are immutable.
    """
    spans: list[Span] = []
    pos, last = 0, len(block) - 1
    while pos <= last:
        brace = block.find("{", pos)
        if brace == -1 or not block[pos:brace].isidentifier():
            return None
        close = block.find("}:", brace)
        if close == -1:
            close = last
        _, fields = _split_fields(" " + block[brace + 1 : close])
        spans.append(Span(block[pos:brace], fields))
        pos = close + 2
    return tuple(spans)


def _parse_spans(text: str, pos: int) -> tuple[tuple[Span, ...], int]:
    """The ``name{fields}:`` spans at ``pos`` and the index after them (-1: malformed spans).

    Spans end at the first ``}: `` (span values never contain ``}:``, §4.2); a first word
    without ``{`` is the target, not a span.
    """
    brace = text.find("{", pos)
    space = text.find(" ", pos)
    if brace == -1 or (space != -1 and space < brace):
        return (), pos
    end = text.find("}: ", brace)
    if end == -1:
        return (), pos
    spans = _span_block(text[pos : end + 1])
    return ((), -1) if spans is None else (spans, end + 3)


_Builder = Callable[[LogRecord], LogEvent]
PcePhase = Literal["extract_start", "extract_done", "extract_failed", "saved", "cached", "evicted"]


def _field_from(fields: dict[str, str], spans: tuple[Span, ...], key: str) -> str | None:
    """A field of the event, else of the innermost span that has it (job_id lives in spans)."""
    value = fields.get(key)
    if value is not None:
        return value
    for span in reversed(spans):
        value = span.fields.get(key)
        if value is not None:
            return value
    return None


def _ms_values(fields: dict[str, str]) -> dict[str, int]:
    # _uint's test inlined: a worker timing line carries up to ten of these.
    return {intern(k): int(v) for k, v in fields.items() if k.endswith("_ms") and v.isascii() and v.isdigit()}


def _stage_timing(
    kind: type[GpuTiming | FinTiming], ts: float, message: str, spans: tuple[Span, ...], fields: dict[str, str]
) -> GpuTiming | FinTiming:
    """A ``GPU_TIMING <stage>`` / ``FIN_TIMING <stage>`` line, built without its LogRecord (the most common
    notable lines: a partition writes five of them)."""
    worker = _uint(_field_from(fields, spans, "worker_id"))
    partition = _option_int(_field_from(fields, spans, "partition"))
    job = _field_from(fields, spans, "job_id")
    return kind(ts, message[11:], worker, partition, job, _ms_values(fields))


def _daemon_starting(record: LogRecord) -> LogEvent:
    return DaemonStarting(record.ts)


def _engine_shutdown(sigint: bool) -> _Builder:
    return lambda record: EngineShutdown(record.ts, sigint)


def _engine_started(record: LogRecord) -> LogEvent:
    flag = record.fields.get("pipeline_enabled")
    return EngineStarted(record.ts, None if flag is None else flag == "true")


def _budget(record: LogRecord) -> LogEvent:
    gib = _uint(record.fields.get("total_budget_gib"))
    return record if gib is None else BudgetInitialized(record.ts, gib)


def _pipeline(record: LogRecord) -> LogEvent:
    f = record.fields
    # `num_gpus` in this line is the total GPU worker count (§4.6).
    budget_partitions, synth_workers = _uint(f.get("max_partitions_in_budget")), _uint(f.get("synth_worker_count"))
    return PipelineConfigured(record.ts, budget_partitions, synth_workers, _uint(f.get("num_gpus")))


def _srs_loading(record: LogRecord) -> LogEvent:
    f = record.fields
    return SrsLoadStarted(record.ts, f.get("circuit_id", ""), f.get("path", ""), _uint(f.get("file_size_gib")))


def _srs_loaded(record: LogRecord) -> LogEvent:
    f = record.fields
    return SrsLoaded(
        record.ts,
        f.get("circuit_id", ""),
        _uint(f.get("elapsed_ms")),
        _uint(f.get("budget_used_gib")),
        _uint(f.get("budget_available_gib")),
    )


def _partition_synthesized(record: LogRecord) -> LogEvent:
    job = record.fields.get("job_id")
    partition = _uint(record.fields.get("partition"))
    synth_ms = _uint(record.fields.get("synth_ms"))
    if job is None or partition is None or synth_ms is None:
        return record
    return PartitionSynthesized(record.ts, job, partition, synth_ms)


def _assembled(record: LogRecord) -> LogEvent:
    f = record.fields
    return ProofAssembled(
        record.ts,
        _field_from(record.fields, record.spans, "job_id"),
        _uint(f.get("proof_len")),
        _uint(f.get("total_ms")),
        _uint(f.get("synth_ms")),
        _uint(f.get("gpu_ms")),
    )


def _dispatch_span(spans: tuple[Span, ...]) -> Span | None:
    """The synthesis dispatcher's span among ``spans`` (engine.rs process_batch), if the line is in one."""
    return next((span for span in spans if span.name in M.DISPATCH_SPANS), None)


def _failed(record: LogRecord) -> LogEvent:
    if record.level != "ERROR":
        return record
    return ProofFailedLine(
        record.ts,
        record.message,
        record.fields.get("error", ""),
        _field_from(record.fields, record.spans, "job_id"),
        _option_int(_field_from(record.fields, record.spans, "partition")),
        _dispatch_span(record.spans),
    )


def _self_check(passed: bool) -> _Builder:
    def build(record: LogRecord) -> LogEvent:
        return SelfCheck(
            record.ts, _field_from(record.fields, record.spans, "job_id"), passed, record.fields.get("error", "")
        )

    return build


def _batch_split(record: LogRecord) -> LogEvent:
    return BatchSplit(record.ts, _uint(record.fields.get("num_sectors")))


def _batch_member(record: LogRecord) -> LogEvent:
    job = record.fields.get("job_id")
    if job is None:
        return record
    f = record.fields
    return BatchMemberDelivered(record.ts, job, _uint(f.get("sector_idx")), _uint(f.get("total_ms")))


def _monolithic_processing(record: LogRecord) -> LogEvent:
    return MonolithicProcessing(
        record.ts,
        _field_from(record.fields, record.spans, "job_id"),
        _uint(_field_from(record.fields, record.spans, "worker_id")),
        _field_from(record.fields, record.spans, "proof_kind"),
    )


def _queued(stage: Literal["enqueued", "dequeued", "dispatched"]) -> _Builder:
    def build(record: LogRecord) -> LogEvent:
        job = _field_from(record.fields, record.spans, "job_id")
        if job is None:
            return record
        f = record.fields
        return JobQueued(record.ts, stage, job, f.get("proof_kind"), _uint(f.get("queue_position")))

    return build


def _eviction(srs: bool) -> _Builder:
    def build(record: LogRecord) -> LogEvent:
        f = record.fields
        what = f.get("circuit_id" if srs else "entry", "")
        return Eviction(record.ts, what, _uint(f.get("freed_gib")), srs)

    return build


def _budget_stall(record: LogRecord) -> LogEvent:
    f = record.fields
    return BudgetStall(record.ts, _uint(f.get("amount_gib")), _uint(f.get("total_gib")))


def _pce(phase: PcePhase) -> _Builder:
    def build(record: LogRecord) -> LogEvent:
        return PceActivity(record.ts, phase, record.fields.get("circuit_id"), record.fields)

    return build


_FAILURE_MESSAGES: Final = (
    "partition synthesis failed",
    "partition synthesis task panicked",
    "partition GPU proving failed",
    "partition GPU proving task panicked",
    "GPU prove start failed",
    "GPU prove start task panicked",
    "synthesis failed",
    "GPU proving failed",
    M.PROOF_FAILED,
    M.PROVE_FAILED,
    M.PIPELINE_NEEDS_CUDA,
    M.C1_PARSE_FAILED,
    M.SNAP_PARSE_FAILED,
    M.SYNTHESIS_TASK_PANICKED,
    "Phase 7: C1 parse task panicked",
    "proof task panicked",
    "GPU proving task panicked",
    "failed to split batched proofs",
)

# The PoRep self-check verdicts (engine.rs: the partitioned path's "Phase 7", the slotted path's
# "Phase 6", ``process_monolithic_result``'s single-sector and batched paths). The proof line
# before each of them is logged before the check runs.
_SELF_CHECK_SITES: Final = (
    M.SELF_CHECK_PARTITIONED,
    M.SELF_CHECK_SLOTTED,
    M.SELF_CHECK_SINGLE,
    M.SELF_CHECK_BATCHED,
)
_SELF_CHECK_PASSED: Final = tuple(f"{site} PASSED" for site in _SELF_CHECK_SITES)
_SELF_CHECK_FAILED: Final = tuple(
    f"{site} {verdict}{M.SELF_CHECK_REJECTED_SUFFIX}" for site in _SELF_CHECK_SITES for verdict in ("FAILED", "error")
)

# Exact message -> builder. Prefix-matched messages are handled in _classify.
_NOTABLE: Final[dict[str, _Builder]] = {
    M.DAEMON_STARTING: _daemon_starting,
    M.STARTING_ENGINE: _engine_started,
    M.RECEIVED_SIGINT: _engine_shutdown(sigint=True),
    M.SHUTTING_DOWN_ENGINE: _engine_shutdown(sigint=False),
    M.MEMORY_BUDGET_INITIALIZED: _budget,
    "starting pipeline: synthesis task + GPU workers (budget-gated)": _pipeline,
    "loading SRS from disk": _srs_loading,
    "SRS loaded successfully": _srs_loaded,
    "PCE extraction complete": _pce("extract_done"),
    "PCE saved to disk": _pce("saved"),
    "PCE cached": _pce("cached"),
    M.PCE_EVICTED: _pce("evicted"),
    "partition synthesis complete, pushing to GPU queue": _partition_synthesized,
    M.PROOF_ASSEMBLED: _assembled,
    M.PROOF_COMPLETED_PIPELINE: _assembled,
    M.PROOF_COMPLETED_MONOLITHIC: _assembled,
    M.BATCH_SPLITTING: _batch_split,
    M.BATCH_SECTOR_DELIVERED: _batch_member,
    M.PROCESSING_MONOLITHIC: _monolithic_processing,
    M.JOB_ENQUEUED: _queued("enqueued"),
    M.JOB_DEQUEUED: _queued("dequeued"),
    M.DISPATCHING_PARTITIONS: _queued("dispatched"),
    M.DISPATCHING_SNAP_PARTITIONS: _queued("dispatched"),
    M.SRS_EVICTED: _eviction(srs=True),
    M.EVICTED_FOR_MEMORY_PRESSURE: _eviction(srs=False),
    M.ACQUIRE_EXCEEDS_BUDGET: _budget_stall,
    **dict.fromkeys(_FAILURE_MESSAGES, _failed),
    **dict.fromkeys(_SELF_CHECK_PASSED, _self_check(True)),
    **dict.fromkeys(_SELF_CHECK_FAILED, _self_check(False)),
}

# Lines whose values are free text: only these keys start a new field.
_KNOWN_KEYS: Final[dict[str, frozenset[str]]] = {
    **dict.fromkeys(
        (*_FAILURE_MESSAGES, *_SELF_CHECK_FAILED),
        frozenset({"error", "job_id", "partition", "proof_len", "sector", "miner", "sector_idx"}),
    ),
    "PCE extraction complete": frozenset({"circuit_id", "extract_ms", "summary"}),
    "background PCE extraction failed": frozenset({"error"}),
    M.STATUS_HTTP_BIND_FAILED: frozenset({"addr", "error"}),
}


_STAGE_TIMINGS: Final = ("GPU_TIMING ", "FIN_TIMING ")
_PREFIXED_MESSAGES: Final = (M.READY_PREFIX, "background PCE extraction")


def _classify(
    ts: float, level: str, target: str, message: str, spans: tuple[Span, ...], fields: dict[str, str]
) -> LogEvent:
    builder = _NOTABLE.get(message)
    if builder is None and message.startswith(_STAGE_TIMINGS):
        return _stage_timing(GpuTiming if message[0] == "G" else FinTiming, ts, message, spans, fields)
    record = LogRecord(ts, level, target, message, spans, fields)
    if builder is not None:
        return builder(record)
    if level == "ERROR" and spans and _dispatch_span(spans) is not None:
        # Every ERROR of process_batch ends the batch's jobs (engine.rs), texts not known here included.
        return _failed(record)
    if not message.startswith(_PREFIXED_MESSAGES):  # one test for the bulk: a line that is no event
        return record
    if message.startswith(M.READY_PREFIX):
        return DaemonReady(ts, message[len(M.READY_PREFIX) :])
    if message.startswith("background PCE extraction starting"):
        return PceActivity(ts, "extract_start", None, fields)
    if message.startswith("background PCE extraction failed"):
        return PceActivity(ts, "extract_failed", None, fields)
    return record


# The common head of a human line in one match: "<YYYY-MM-DDTHH:MM>:<SS>.<ffffff>Z <level> [<spans>: ]<target>: ".
# It accepts only heads the general path (_general_head) accepts, and reads them the same way: spans are a first
# word with a '{' and end at the first "}: " (atomic: no later one is tried when the target then fails; spelt as
# runs of non-'}' rather than a lazy '.*?', which tries "}: " at every character); the target is the next word,
# ending in ':'. A line it does not match is read by the general path.
_HUMAN_HEAD: Final = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}):([0-9]{2})\.([0-9]{6})Z ( INFO| WARN|ERROR|DEBUG|TRACE) "
    r"(?>([^ {]*\{[^}]*+(?:\}(?!: )[^}]*+)*+\}): )?([^ {]+): "
)
_LEVEL_NAMES: Final = {f"{level:>5}": level for level in _LEVELS}
_Head = tuple[float, str, tuple[Span, ...], str, int]


def _general_head(line: str) -> _Head | None:
    """(time, level, spans, target, where the body starts) of a human line read by fixed positions and
    scans, every odd case decided; None when it is no human line."""
    ts = parse_timestamp(line[:_TS_LEN])
    if ts is None or line[_TS_LEN : _TS_LEN + 1] != " " or line[_LEVEL_END - 1 : _LEVEL_END] != " ":
        return None
    level = line[_TS_LEN + 1 : _LEVEL_END - 1].lstrip(" ")
    if level not in _LEVELS:
        return None
    spans, pos = _parse_spans(line, _LEVEL_END)
    if pos < 0:
        return None
    colon = line.find(": ", pos)
    target = line[pos:colon]
    if colon == -1 or not target or " " in target or "{" in target:
        return None
    return ts, level, spans, target, colon + 2


def _head(line: str) -> _Head | None:
    """:func:`_general_head`, with the common shape read by one match."""
    match = _HUMAN_HEAD.match(line)
    if match is None:
        return _general_head(line)
    minute, seconds, micros, level, span_block, target = match.groups()
    ts = _stamp(minute, seconds, micros)
    spans = () if span_block is None else _span_block(span_block)
    if ts is None or spans is None:
        return None
    return ts, _LEVEL_NAMES[level], spans, target, match.end()


def _parse_human(line: str) -> LogEvent:
    head = _head(line)
    if head is None:
        return PlainLine(line)
    ts, level, spans, target, start = head
    body = line[start:]
    message, fields = _split_fields(body)
    keys = _KNOWN_KEYS.get(message)
    if keys is None and message.startswith("background PCE extraction failed"):
        keys = _KNOWN_KEYS["background PCE extraction failed"]
    if keys is not None:
        message, fields = _split_fields(body, keys)
    return _classify(ts, level, target, message, spans, fields)


# --------------------------------------------------------------------------------------------
# A cheap test for bulk reading
# --------------------------------------------------------------------------------------------

# Every message an INFO/DEBUG/TRACE line becomes an event for (exactly or as a prefix), by first word.
_EVENT_MESSAGES: Final = (
    *_NOTABLE,
    "GPU_TIMING ",
    "FIN_TIMING ",
    M.READY_PREFIX,
    "background PCE extraction",
    M.PIPELINE_WORKER_STARTED,
    M.MONO_WORKER_STARTED,
    M.PARTITION_SYNTH_COMPLETE,
    M.SNAP_PARTITION_SYNTH_COMPLETE,
)
# The messages that only fill the waterfall's details (timings, is_pinned), never a phase or a status.
_DETAIL_MESSAGES: Final = frozenset(
    {"GPU_TIMING ", "FIN_TIMING ", M.PARTITION_SYNTH_COMPLETE, M.SNAP_PARTITION_SYNTH_COMPLETE}
)


def _by_first_word(messages: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    table: dict[str, tuple[str, ...]] = {}
    for message in messages:
        word = message.split(" ", 1)[0]
        table[word] = (*table.get(word, ()), message)
    return table


_BY_FIRST_WORD: Final = _by_first_word(_EVENT_MESSAGES)
_BY_FIRST_WORD_PHASES: Final = _by_first_word(tuple(m for m in _EVENT_MESSAGES if m not in _DETAIL_MESSAGES))
_QUIET_LEVELS: Final = frozenset({" INFO", "DEBUG", "TRACE"})
# The C++ prover's timing lines: unstamped, the bulk of a busy log's events, and details only.
_TIMING_PREFIXES: Final = ("CUZK_TIMING:", "CUZK_NTT_H:")
_UNSTAMPED_EVENTS: Final = ("TIMELINE,", *_TIMING_PREFIXES, "Error: ")
_UNSTAMPED_PHASE_EVENTS: Final = ("TIMELINE,", "Error: ")


def is_inert(line: str, details: bool = True) -> bool:
    """Whether a log line is certainly no event a model uses: text that is no daemon line, or an
    INFO/DEBUG/TRACE line whose message is none of the notable ones (WARN and ERROR lines are kept).
    ``details`` False also counts the lines that only fill the waterfall's details (GPU_TIMING,
    FIN_TIMING, CUZK_TIMING, CUZK_NTT_H, is_pinned) as inert: they never change a phase or a status.

    It reads only the level and the message's first word, so a post-mortem reader can skip the
    full parse (spans, fields) of the bulk of a large log; :func:`parse_line` decides the rest.
    """
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    if not line[:1].isdigit():
        return not line.startswith(_UNSTAMPED_EVENTS if details else _UNSTAMPED_PHASE_EVENTS)
    if line[_TS_LEN + 1 : _LEVEL_END - 1] not in _QUIET_LEVELS:
        return False
    pos = _LEVEL_END
    brace, space = line.find("{", pos), line.find(" ", pos)
    if brace != -1 and (space == -1 or brace < space):
        end = line.find("}: ", brace)
        if end != -1:
            pos = end + 3
    colon = line.find(": ", pos)
    if colon == -1:
        return True
    body = colon + 2
    word_end = line.find(" ", body)
    word = line[body:word_end] if word_end != -1 else line[body:].rstrip("\r\n")
    candidates = (_BY_FIRST_WORD if details else _BY_FIRST_WORD_PHASES).get(word)
    return candidates is None or not line.startswith(candidates, body)


_SGR: Final = rb"(?:\x1b\[[0-9;]*m)*"


def _either(texts: tuple[str, ...] | list[str]) -> bytes:
    return b"(?:" + b"|".join(re.escape(text.encode()) for text in texts) + b")"


@lru_cache(maxsize=3)
def _event_patterns(
    notable_details: bool, timing_lines: bool
) -> tuple[re.Pattern[bytes], re.Pattern[bytes], tuple[re.Pattern[bytes], ...]]:
    """(an unstamped event prefix at a buffer's start, the same after a newline, the patterns found
    anywhere in a line): with the detail messages of human lines or not, with the C++ timing lines
    or not. Each starts with a literal, which ``re`` finds at memchr speed."""
    unstamped = _UNSTAMPED_EVENTS if timing_lines else _UNSTAMPED_PHASE_EVENTS
    groups = (_BY_FIRST_WORD if notable_details else _BY_FIRST_WORD_PHASES).values()
    notable = sorted({message for group in groups for message in group}, key=len, reverse=True)
    line_start = _SGR + _either(unstamped)
    # A notable message follows the target's ':' and a space, plain or with the colour reset the
    # ANSI rendering puts between them (engine/tracing.py Logger._ansi).
    message = b":" + _SGR + b" " + _either(notable)
    return re.compile(line_start), re.compile(b"\n" + line_start), tuple(map(re.compile, (b"WARN", b"ERROR", message)))


def _line_starts(buf: bytes, at_start: re.Pattern[bytes], after_newline: re.Pattern[bytes]) -> set[int]:
    starts = {0} if at_start.match(buf) else set()
    starts.update(m.start() + 1 for m in after_newline.finditer(buf))
    return starts


def _found_starts(buf: bytes, notable_details: bool, timing_lines: bool) -> set[int]:
    at_start, after_newline, anywhere = _event_patterns(notable_details, timing_lines)
    starts = _line_starts(buf, at_start, after_newline)
    for pattern in anywhere:
        starts.update(buf.rfind(b"\n", 0, m.start()) + 1 for m in pattern.finditer(buf))
    return starts


def event_line_starts(buf: bytes, details: bool = True) -> list[int]:
    """Offsets in ``buf`` (raw log bytes starting at a line's start) of the lines that may be events,
    in order: every line :func:`is_inert` keeps and :func:`parse_line` makes no PlainLine of, and
    a few more (a WARN or ERROR anywhere, a notable message inside a field).

    A bulk reader finds them over whole chunks at C speed and hands only these lines to
    :func:`is_inert` and :func:`parse_line`, which still decide each of them exactly.
    """
    return sorted(_found_starts(buf, details, details))


_TIMING_LINE: Final = _SGR + _either(_TIMING_PREFIXES)
_TIMING_AT_START: Final = re.compile(_TIMING_LINE)
_TIMING_AFTER_NEWLINE: Final = re.compile(b"\n" + _TIMING_LINE)


def lazy_line_starts(buf: bytes) -> tuple[list[int], list[int]]:
    """(:func:`event_line_starts` of ``buf`` without the C++ timing lines, the starts of those timing
    lines), both in order: a reader that keeps the timing lines only as offsets, to be parsed when a
    partition's details are wanted (:func:`timing_events`), never splits them out of the buffer."""
    timing = _line_starts(buf, _TIMING_AT_START, _TIMING_AFTER_NEWLINE)
    return sorted(_found_starts(buf, True, False) - timing), sorted(timing)


def timing_events(text: bytes) -> Iterator[CuzkTiming | NttTiming]:
    """The C++ timing events of the log lines in ``text`` (other lines are passed over), in order."""
    for raw in text.split(b"\n"):
        event = parse_line(raw.decode("utf-8", "replace"))
        if isinstance(event, CuzkTiming | NttTiming):
            yield event


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def parse_line(line: str, stream: Stream = Stream.UNKNOWN) -> LogEvent:
    """The typed event of one line of daemon output (with or without its newline); never raises.

    ``stream`` narrows what a line can be when known: the fatal ``Error:`` report is stderr-only.
    """
    if line.startswith("TIMELINE,"):
        return _parse_timeline(line.rstrip("\r\n"))
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    first = line[:1]
    if first.isdigit():
        return _parse_human(line)
    if line.startswith("CUZK_TIMING:"):
        return _parse_cuzk_timing(line)
    if line.startswith("CUZK_NTT_H:"):
        return _parse_ntt_h(line)
    if line.startswith("TIMELINE,"):  # a TIMELINE line wrapped in colour codes (never seen, cheap)
        return _parse_timeline(line)
    if line.startswith("Error: ") and stream is not Stream.STDOUT:
        return FatalErrorLine(line[7:])
    return PlainLine(line)


# --------------------------------------------------------------------------------------------
# Tailing
# --------------------------------------------------------------------------------------------


class LineSplitter:
    """Complete lines out of byte chunks of a growing file; the unfinished last line is kept.

    Invalid UTF-8 becomes U+FFFD; a multi-byte character split across chunks is joined.
    Lines are returned without their ``\\n`` (and without a ``\\r`` before it).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""

    @property
    def pending(self) -> str:
        """The text received after the last newline (a line still being written)."""
        return self._partial

    def feed(self, chunk: bytes) -> list[str]:
        """The lines completed by ``chunk``, in order."""
        text = self._partial + self._decoder.decode(chunk)
        lines = text.split("\n")
        self._partial = lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    def flush(self) -> str | None:
        """End of input: the unfinished last line (if any), which is then forgotten."""
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        self._decoder.reset()
        return rest or None
