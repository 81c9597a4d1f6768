"""Log lines in the exact shapes of the real daemon (docs/daemon-interface.md §4).

Human lines follow tracing-subscriber's "full" format on stdout (ANSI colour unless ``NO_COLOR``
is non-empty); ``TIMELINE,…`` and ``CUZK_TIMING: …`` lines go to stderr. The supervisor sends
both streams into one file opened with O_APPEND, so every line is written with a single
``os.write`` call and never interleaves mid-line with another.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from cuzktui.logfilter import EnvFilter, FilterError

_COLOUR: Final = {"ERROR": "31", "WARN": "33", "INFO": "32", "DEBUG": "34", "TRACE": "35"}

# Targets (Rust module paths) the daemon's lines carry.
DAEMON: Final = "cuzk_daemon"
ENGINE: Final = "cuzk_core::engine"
PIPELINE: Final = "cuzk_core::pipeline"
SCHEDULER: Final = "cuzk_core::scheduler"
SRS: Final = "cuzk_core::srs_manager"
MEMORY: Final = "cuzk_core::memory"
PINNED: Final = "cuzk_core::pinned_pool"
CONFIG: Final = "cuzk_core::config"
SERVICE: Final = "cuzk_server::service"
PROVER: Final = "cuzk_core::prover"
BELLPERSON: Final = "bellperson::groth16::prover::supraseal"
PCE_RECORDING: Final = "cuzk_pce::recording_cs"
PCE_DISK: Final = "cuzk_pce::disk"


class Quoted(str):
    """A ``&str``/``String`` field value: Rust Debug prints it double-quoted with escapes."""


FieldValue = int | float | bool | str
Fields = tuple[tuple[str, FieldValue], ...]


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    fields: Fields = ()


def _write(fd: int, text: str) -> None:
    data = text.encode("utf-8", "backslashreplace")
    try:
        written = os.write(fd, data)
        # A pipe can accept part of a long line; finish it rather than lose the rest.
        while written < len(data):
            data = data[written:]
            written = os.write(fd, data)
    except (BrokenPipeError, BlockingIOError):
        pass


def write_stderr(text: str) -> None:
    _write(sys.stderr.fileno(), text)


def _debug_quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_value(value: FieldValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Quoted):
        return _debug_quote(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def option(value: int | None) -> str:
    """Rust's Debug of ``Option<usize>``: ``Some(6)`` / ``None``."""
    return "None" if value is None else f"Some({value})"


class Logger:
    """Writes the daemon's human, TIMELINE and CUZK_TIMING lines."""

    def __init__(self, log_filter: EnvFilter, *, colour: bool, out_fd: int = 1, err_fd: int = 2) -> None:
        self.filter = log_filter
        self.colour = colour
        self.out_fd = out_fd
        self.err_fd = err_fd
        self._epoch: float | None = None

    @classmethod
    def from_environment(cls, configured: str) -> Logger:
        """RUST_LOG (when set and valid) > ``configured`` (CLI --log-level or [logging].level)."""
        env = os.environ.get("RUST_LOG")
        log_filter: EnvFilter | None = None
        if env is not None:
            try:
                log_filter = EnvFilter.parse(env, lossy=False)
            except FilterError:
                log_filter = None
        if log_filter is None:
            log_filter = EnvFilter.parse(configured, lossy=True, on_ignored=write_stderr)
        return cls(log_filter, colour=not os.environ.get("NO_COLOR"))

    def start_epoch(self) -> None:
        """TIMELINE offsets count from here (the `starting cuzk engine` moment)."""
        self._epoch = time.monotonic()

    def offset_ms(self) -> int:
        return 0 if self._epoch is None else int((time.monotonic() - self._epoch) * 1000)

    def enabled(self, level: str, target: str) -> bool:
        return self.filter.enabled(level, target)

    def event(self, level: str, target: str, message: str, fields: Fields = (), spans: tuple[Span, ...] = ()) -> None:
        if not self.filter.enabled(level, target):
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        message = message.replace("\x1b", "\\x1b")
        if self.colour:
            line = self._ansi(stamp, level, target, message, fields, spans)
        else:
            span_text = "".join(f"{s.name}{{{self._plain_fields(s.fields)}}}:" for s in spans)
            field_text = "".join(f" {k}={format_value(v)}" for k, v in fields)
            line = f"{stamp} {level:>5} {span_text + ' ' if spans else ''}{target}: {message}{field_text}"
        _write(self.out_fd, line + "\n")

    @staticmethod
    def _plain_fields(fields: Fields) -> str:
        return " ".join(f"{k}={format_value(v)}" for k, v in fields)

    @staticmethod
    def _ansi_fields(fields: Fields) -> str:
        return " ".join(f"\x1b[3m{k}\x1b[0m\x1b[2m=\x1b[0m{format_value(v)}" for k, v in fields)

    def _ansi(self, stamp: str, level: str, target: str, message: str, fields: Fields, spans: tuple[Span, ...]) -> str:
        parts = [f"\x1b[2m{stamp}\x1b[0m \x1b[{_COLOUR[level]}m{level:>5}\x1b[0m "]
        for span in spans:
            parts.append(f"\x1b[1m{span.name}\x1b[0m\x1b[1m{{\x1b[0m{self._ansi_fields(span.fields)}\x1b[1m}}\x1b[0m")
            parts.append("\x1b[2m:\x1b[0m")
        if spans:
            parts.append(" ")
        parts.append(f"\x1b[2m{target}\x1b[0m\x1b[2m:\x1b[0m {message}")
        parts.extend(f" {self._ansi_fields(((k, v),))}" for k, v in fields)
        return "".join(parts)

    def info(self, target: str, message: str, *fields: tuple[str, FieldValue], span: tuple[Span, ...] = ()) -> None:
        self.event("INFO", target, message, fields, span)

    def warn(self, target: str, message: str, *fields: tuple[str, FieldValue], span: tuple[Span, ...] = ()) -> None:
        self.event("WARN", target, message, fields, span)

    def error(self, target: str, message: str, *fields: tuple[str, FieldValue], span: tuple[Span, ...] = ()) -> None:
        self.event("ERROR", target, message, fields, span)

    def debug(self, target: str, message: str, *fields: tuple[str, FieldValue], span: tuple[Span, ...] = ()) -> None:
        self.event("DEBUG", target, message, fields, span)

    def timeline(self, event: str, job_id: str, detail: str) -> None:
        _write(self.err_fd, f"TIMELINE,{self.offset_ms()},{event},{job_id},{detail}\n")

    def cuzk_timing(self, text: str) -> None:
        _write(self.err_fd, f"CUZK_TIMING: {text}\n")

    def ntt_h(self, total_ms: int) -> None:
        """groth16_ntt_h.cu's per-circuit ``CUZK_NTT_H:`` breakdown of an NTT + MSM-H of ``total_ms``."""
        ntt, intt = total_ms * 4 // 10, total_ms * 2 // 10
        invoke = total_ms - ntt - intt
        _write(
            self.err_fd,
            f"CUZK_NTT_H: d_b_alloc=0ms ntt_kernels={ntt}ms coset_intt_sync={intt}ms msm_init=0ms "
            f"msm_invoke={invoke}ms msm_dtor=0ms total={total_ms}ms\n",
        )


def fatal_report(context: str, causes: list[str]) -> str:
    """anyhow's `{:?}` report as the daemon prints it on a fatal error (docs/daemon-interface.md §2)."""
    text = f"Error: {context}\n"
    if len(causes) == 1:
        text += f"\nCaused by:\n    {causes[0]}\n"
    elif causes:
        text += "\nCaused by:\n" + "".join(f"    {i}: {cause}\n" for i, cause in enumerate(causes))
    return text
