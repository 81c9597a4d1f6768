"""Human log lines: the layout of docs/daemon-interface.md §4.2, ANSI that strips to it, one write per line,
and the filter."""

from __future__ import annotations

import os
import re

from cuzktui.logfilter import EnvFilter
from engine.tracing import Logger, Quoted, Span, fatal_report

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _lines(colour: bool) -> list[str]:
    read, write = os.pipe()
    log = Logger(EnvFilter.parse("info", lossy=False), colour=colour, out_fd=write, err_fd=write)
    span = Span("synthesize_partition", (("job_id", Quoted('a"b')), ("partition", 6)))
    log.info(
        "cuzk_core::pipeline", "partition synthesis complete", ("synth_ms", 44601), ("is_pinned", False), span=(span,)
    )
    log.warn("cuzk_daemon", "esc \x1b here", ("size_gib", 3.5), ("gpus", "[0, 1]"))
    log.debug("cuzk_core::memory", "hidden")
    os.close(write)
    with os.fdopen(read) as handle:
        return handle.read().splitlines()


def test_plain_and_ansi_layouts_agree() -> None:
    plain, coloured = _lines(False), _lines(True)
    assert len(plain) == len(coloured) == 2
    assert plain[0][27:] == (
        '  INFO synthesize_partition{job_id="a\\"b" partition=6}: cuzk_core::pipeline: '
        "partition synthesis complete synth_ms=44601 is_pinned=false"
    )
    assert plain[1][27:] == "  WARN cuzk_daemon: esc \\x1b here size_gib=3.5 gpus=[0, 1]"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", plain[0][:27])
    for p, c in zip(plain, coloured, strict=True):
        assert ANSI.sub("", c)[27:] == p[27:]
    assert coloured[1].startswith("\x1b[2m") and "\x1b[33m WARN\x1b[0m" in coloured[1]
    assert "\x1b[3msize_gib\x1b[0m\x1b[2m=\x1b[0m3.5" in coloured[1]


def test_env_filter_directives() -> None:
    f = EnvFilter.parse("warn,cuzk_core::pipeline=debug", lossy=False)
    assert f.enabled("DEBUG", "cuzk_core::pipeline") and not f.enabled("INFO", "cuzk_core::engine")
    assert f.enabled("WARN", "cuzk_daemon")
    assert not EnvFilter.parse("", lossy=False).enabled("ERROR", "cuzk_daemon")


def test_fatal_report_numbers_several_causes() -> None:
    assert fatal_report("ctx", ["a"]) == "Error: ctx\n\nCaused by:\n    a\n"
    assert fatal_report("ctx", ["a", "b"]) == "Error: ctx\n\nCaused by:\n    0: a\n    1: b\n"
