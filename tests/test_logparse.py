"""logparse: every line format of docs/daemon-interface.md §4, ANSI tolerance, robustness, and LineSplitter."""

from __future__ import annotations

import calendar
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzktui.events import (
    BudgetInitialized,
    CuzkTiming,
    DaemonReady,
    DaemonStarting,
    EngineShutdown,
    EngineStarted,
    FatalErrorLine,
    FinTiming,
    GpuTiming,
    LogRecord,
    PartitionSynthesized,
    PceActivity,
    PipelineConfigured,
    PlainLine,
    ProofAssembled,
    ProofFailedLine,
    Span,
    SrsLoaded,
    SrsLoadStarted,
    Stream,
    TimelineEvent,
)
from cuzktui.logparse import LineSplitter, event_line_starts, is_inert, parse_line, strip_ansi

FIXTURE = Path(__file__).parent / "data" / "timeline_restart.log"
T0 = calendar.timegm((2026, 5, 1, 7, 0, 0))
E = "\x1b"


# ---------------------------------------------------------------------------- TIMELINE


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "TIMELINE,73544,SYNTH_START,porep-1000-17,partition=6",
            TimelineEvent(73544, "SYNTH_START", "porep-1000-17", {"partition": "6"}, 6, None, False),
        ),
        (
            "TIMELINE,118230,SYNTH_END,porep-1000-17,partition=6,synth_ms=44601",
            TimelineEvent(
                118230, "SYNTH_END", "porep-1000-17", {"partition": "6", "synth_ms": "44601"}, 6, None, False
            ),
        ),
        (
            "TIMELINE,125772,GPU_END,porep-1000-17,worker=1,partition=6,gpu_ms=3864\n",
            TimelineEvent(
                125772,
                "GPU_END",
                "porep-1000-17",
                {"worker": "1", "partition": "6", "gpu_ms": "3864"},
                6,
                1,
                False,
            ),
        ),
        (
            "TIMELINE,402113,SYNTH_START,winpost-1000-0a1b2c3d4e5f6071,kind=winning-post",
            TimelineEvent(
                402113, "SYNTH_START", "winpost-1000-0a1b2c3d4e5f6071", {"kind": "winning-post"}, None, None, True
            ),
        ),
        (
            "TIMELINE,402511,GPU_QUEUE,winpost-1000-0a1b2c3d4e5f6071,monolithic",
            TimelineEvent(402511, "GPU_QUEUE", "winpost-1000-0a1b2c3d4e5f6071", {}, None, None, True),
        ),
        (
            "TIMELINE,402611,GPU_PICKUP,winpost-1000-0a1b2c3d4e5f6071,worker=3",
            TimelineEvent(402611, "GPU_PICKUP", "winpost-1000-0a1b2c3d4e5f6071", {"worker": "3"}, None, 3, True),
        ),
    ],
)
def test_timeline_lines(line: str, expected: TimelineEvent) -> None:
    assert parse_line(line, Stream.STDERR) == expected


@pytest.mark.parametrize(
    "line",
    [
        "TIMELINE,17100,SYNTH_ST",  # cut off by a SIGKILL
        "TIMELINE,abc,SYNTH_START,job,partition=1",
        "TIMELINE,-5,SYNTH_START,job,partition=1",
        "TIMELINE,5,,job,partition=1",
        "TIMELINE,5,SYNTH_START,,partition=1",
        "TIMELINE,²,SYNTH_START,job,partition=1",
    ],
)
def test_broken_timeline_lines_are_plain(line: str) -> None:
    assert parse_line(line) == PlainLine(line)


def test_timeline_cut_inside_the_detail_is_neither_partitioned_nor_monolithic() -> None:
    event = parse_line("TIMELINE,5,GPU_QUEUE,porep-1,partit")
    assert isinstance(event, TimelineEvent)
    assert event.partition is None and not event.monolithic


# ---------------------------------------------------------------------------- human lines


def test_plain_human_line_with_spans_fields_and_values_with_spaces() -> None:
    line = (
        "2026-05-01T07:00:00.676031Z  INFO synth_single{proof_kind=porep-c2}: cuzk_core::engine: "
        "initializing GPU workers num_gpus=2 gpu_workers_per_device=2 total_workers=4 gpus=[0, 1]"
    )
    assert parse_line(line) == LogRecord(
        T0 + 0.676031,
        "INFO",
        "cuzk_core::engine",
        "initializing GPU workers",
        (Span("synth_single", {"proof_kind": "porep-c2"}),),
        {"num_gpus": "2", "gpu_workers_per_device": "2", "total_workers": "4", "gpus": "[0, 1]"},
    )


def test_quoted_values_are_unescaped_and_may_contain_spaces_and_equals() -> None:
    line = (
        '2026-05-01T07:00:00.000001Z DEBUG synthesize_partition{job_id="porep 1" partition=3}: '
        'cuzk_core::pipeline: buffer flight counters event="a \\"b\\" c=d\\\\" synth=4 note="\\u{e9}\\n"'
    )
    event = parse_line(line)
    assert isinstance(event, LogRecord)
    assert event.level == "DEBUG"
    assert event.spans == (Span("synthesize_partition", {"job_id": "porep 1", "partition": "3"}),)
    assert event.fields == {"event": 'a "b" c=d\\', "synth": "4", "note": "é\n"}


def test_two_spans_and_a_message_containing_colons() -> None:
    line = (
        '2026-05-01T07:01:47.000000Z  INFO verify_porep_proof{job_id="p-1"}:synthesize_partition{job_id="p-1" '
        "partition=0}: bellperson::groth16::prover::supraseal: synthesis time: 44.601276305s"
    )
    event = parse_line(line)
    assert isinstance(event, LogRecord)
    assert [s.name for s in event.spans] == ["verify_porep_proof", "synthesize_partition"]
    assert event.target == "bellperson::groth16::prover::supraseal"
    assert event.message == "synthesis time: 44.601276305s"


def test_ansi_line_parses_like_the_plain_one() -> None:
    plain = "2026-05-01T07:00:00.412907Z  INFO cuzk_daemon: configuration loaded listen=0.0.0.0:9820"
    # §4.8's coloured form of the same line.
    coloured = (
        "\\e[2m2026-05-01T07:00:00.412907Z\\e[0m \\e[32m INFO\\e[0m \\e[2mcuzk_daemon\\e[0m\\e[2m:\\e[0m "
        "configuration loaded \\e[3mlisten\\e[0m\\e[2m=\\e[0m0.0.0.0:9820"
    ).replace("\\e", E)
    assert E in coloured and strip_ansi(coloured) == plain
    assert parse_line(coloured) == parse_line(plain)
    assert parse_line(coloured) == LogRecord(
        T0 + 0.412907, "INFO", "cuzk_daemon", "configuration loaded", (), {"listen": "0.0.0.0:9820"}
    )


def test_error_value_with_spaces_and_colons_ends_at_the_next_known_key() -> None:
    line = (
        "2026-05-01T07:02:38.303391Z ERROR cuzk_core::engine: partition GPU proving failed "
        "error=GPU prove finish failed: cuda error=700 at x: y job_id=porep-1000-18 partition=2"
    )
    assert parse_line(line) == ProofFailedLine(
        T0 + 158.303391,
        "partition GPU proving failed",
        "GPU prove finish failed: cuda error=700 at x: y",
        "porep-1000-18",
        2,
    )


@pytest.mark.parametrize(
    "line",
    [
        "2026-05-01T07:00:00.412907Z",
        "2026-05-01T07:00:00.412907Z  INFO",
        "2026-05-01T07:00:00.412907Z  NOTE cuzk_daemon: hello",
        "2026-13-01T07:00:00.412907Z  INFO cuzk_daemon: hello",
        "2026-05-01T07:00:00.41290xZ  INFO cuzk_daemon: hello",
        "2026-05-01T07:00:00.412907Z  INFO no target here",
        "2026-05-01T07:00:00.412907Z  INFO span{a=1}:cuzk_daemon: no space after the span",
        "Caused by:",
        "    invalid socket address syntax",
        "",
    ],
)
def test_unrecognised_lines_are_plain(line: str) -> None:
    assert parse_line(line) == PlainLine(line)


# ---------------------------------------------------------------------------- timing lines


def test_gpu_timing_takes_job_and_partition_from_the_span() -> None:
    line = (
        "2026-05-01T07:02:01.905112Z  INFO gpu_worker{worker_id=1 gpu=0 job_id=porep-1000-17 proof_kind=porep-c2 "
        "batch_size=1 partition=Some(6)}: cuzk_core::engine: GPU_TIMING hot_path pre-prove overhead worker_id=1 "
        "partition=Some(6) status_ms=0 fail_check_ms=0 mark_busy_ms=2 total_overhead_ms=2"
    )
    assert parse_line(line) == GpuTiming(
        T0 + 121.905112,
        "hot_path pre-prove overhead",
        1,
        6,
        "porep-1000-17",
        {"status_ms": 0, "fail_check_ms": 0, "mark_busy_ms": 2, "total_overhead_ms": 2},
    )


def test_gpu_timing_without_span_and_with_partition_none() -> None:
    line = (
        "2026-05-01T07:02:04.887310Z  INFO cuzk_core::engine: GPU_TIMING spawn_blocking prove_start worker_id=3 "
        "partition=None spawn_to_enter_ms=0 prove_start_ms=2979"
    )
    assert parse_line(line) == GpuTiming(
        T0 + 124.88731, "spawn_blocking prove_start", 3, None, None, {"spawn_to_enter_ms": 0, "prove_start_ms": 2979}
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "2026-05-01T07:02:05.980441Z  INFO cuzk_core::engine: FIN_TIMING finalizer partition worker_id=1 "
            "partition=Some(6) finish_ms=871 drop_res_ms=0 lock_wait_ms=0 process_ms=94 total_ms=966",
            FinTiming(
                T0 + 125.980441,
                "finalizer partition",
                1,
                6,
                None,
                {"finish_ms": 871, "drop_res_ms": 0, "lock_wait_ms": 0, "process_ms": 94, "total_ms": 966},
            ),
        ),
        (
            "2026-05-01T07:02:05.990441Z  INFO cuzk_core::engine: FIN_TIMING malloc_trim (success path) "
            "job_id=porep-1000-17 partition=6 malloc_trim_ms=40",
            FinTiming(T0 + 125.990441, "malloc_trim (success path)", None, 6, "porep-1000-17", {"malloc_trim_ms": 40}),
        ),
    ],
)
def test_fin_timing(line: str, expected: FinTiming) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "CUZK_TIMING: set pool release threshold to MAX on gpu 1",
            CuzkTiming({}, 1, "set pool release threshold to MAX on gpu 1"),
        ),
        (
            "CUZK_TIMING: d_a_cache allocated 4096 MiB on gpu 0",
            CuzkTiming({}, 0, "d_a_cache allocated 4096 MiB on gpu 0"),
        ),
        (
            "CUZK_TIMING: gpu_tid=0 tail_msm_ms=12 gpu_total_ms=2900",
            CuzkTiming(
                {"gpu_tid": 0, "tail_msm_ms": 12, "gpu_total_ms": 2900},
                None,
                "gpu_tid=0 tail_msm_ms=12 gpu_total_ms=2900",
            ),
        ),
        (
            "CUZK_TIMING: b_g2_msm_ms=870 num_circuits=1",
            CuzkTiming({"b_g2_msm_ms": 870, "num_circuits": 1}, None, "b_g2_msm_ms=870 num_circuits=1"),
        ),
    ],
)
def test_cuzk_timing(line: str, expected: CuzkTiming) -> None:
    assert parse_line(line, Stream.STDERR) == expected


# ---------------------------------------------------------------------------- notable lines

TS = "2026-05-01T07:00:00.500000Z"


@pytest.mark.parametrize(
    ("rest", "expected"),
    [
        ("cuzk_daemon: cuzk-daemon starting", DaemonStarting(T0 + 0.5)),
        # main.rs's SIGINT handler, then engine.rs Engine::shutdown: the engine stops, the server serves on.
        ("cuzk_daemon: received SIGINT, shutting down", EngineShutdown(T0 + 0.5, sigint=True)),
        ("cuzk_core::engine: shutting down cuzk engine", EngineShutdown(T0 + 0.5, sigint=False)),
        ("cuzk_core::engine: starting cuzk engine pipeline_enabled=true", EngineStarted(T0 + 0.5, True)),
        ("cuzk_core::engine: starting cuzk engine pipeline_enabled=false", EngineStarted(T0 + 0.5, False)),
        ("cuzk_daemon: cuzk-daemon ready, serving on 0.0.0.0:9820", DaemonReady(T0 + 0.5, "0.0.0.0:9820")),
        (
            "cuzk_daemon: cuzk-daemon ready, serving on unix:///run/curio/cuzk.sock",
            DaemonReady(T0 + 0.5, "unix:///run/curio/cuzk.sock"),
        ),
        ("cuzk_core::engine: memory budget initialized total_budget_gib=400", BudgetInitialized(T0 + 0.5, 400)),
        (
            "cuzk_core::engine: starting pipeline: synthesis task + GPU workers (budget-gated) configured_lookahead=2 "
            "max_partitions_in_budget=24 effective_lookahead=2 synth_worker_count=18 num_gpus=4",
            PipelineConfigured(T0 + 0.5, 24, 18, 4),
        ),
        (
            "cuzk_core::srs_manager: loading SRS from disk circuit_id=porep-32g path=/srv/params/v28 x.params "
            "file_size_gib=44",
            SrsLoadStarted(T0 + 0.5, "porep-32g", "/srv/params/v28 x.params", 44),
        ),
        (
            "cuzk_core::srs_manager: SRS loaded successfully circuit_id=porep-32g elapsed_ms=21706 "
            "budget_used_gib=44 budget_available_gib=201",
            SrsLoaded(T0 + 0.5, "porep-32g", 21706, 44, 201),
        ),
        (
            "cuzk_core::engine: background PCE extraction starting for PoRep 32G",
            PceActivity(T0 + 0.5, "extract_start", None, {}),
        ),
        (
            "cuzk_core::pipeline: PCE extraction complete circuit_id=porep-32g extract_ms=61000 "
            "summary=PCE { constraints=130278869 nnz=4 }",
            PceActivity(
                T0 + 0.5,
                "extract_done",
                "porep-32g",
                {"circuit_id": "porep-32g", "extract_ms": "61000", "summary": "PCE { constraints=130278869 nnz=4 }"},
            ),
        ),
        (
            "cuzk_core::pipeline: PCE cached circuit_id=porep-32g size_gib=25 budget_used_gib=69",
            PceActivity(
                T0 + 0.5, "cached", "porep-32g", {"circuit_id": "porep-32g", "size_gib": "25", "budget_used_gib": "69"}
            ),
        ),
        (
            "cuzk_core::engine: partition synthesis complete, pushing to GPU queue job_id=porep-1000-17 partition=6 "
            "synth_ms=44601",
            PartitionSynthesized(T0 + 0.5, "porep-1000-17", 6, 44601),
        ),
        (
            "cuzk_core::engine: Phase 7: all partitions complete, proof assembled job_id=porep-1000-17 proof_len=1920 "
            "total_ms=117902 synth_ms=451873 gpu_ms=37112",
            ProofAssembled(T0 + 0.5, "porep-1000-17", 1920, 117902, 451873, 37112),
        ),
        (
            "gpu_worker{worker_id=0 gpu=0 job_id=winpost-1 proof_kind=winning-post batch_size=1 partition=None}: "
            "cuzk_core::engine: proof completed successfully (pipeline) proof_len=192 total_ms=900 queue_ms=5 "
            "synth_ms=300 gpu_ms=400",
            ProofAssembled(T0 + 0.5, "winpost-1", 192, 900, 300, 400),
        ),
    ],
)
def test_notable_info_lines(rest: str, expected: object) -> None:
    assert parse_line(f"{TS}  INFO {rest}") == expected


@pytest.mark.parametrize(
    ("rest", "expected"),
    [
        (
            "cuzk_core::engine: partition synthesis failed error=failed to allocate: Cannot allocate memory (os "
            "error 12) job_id=porep-1000-4 partition=0",
            ProofFailedLine(
                T0 + 0.5,
                "partition synthesis failed",
                "failed to allocate: Cannot allocate memory (os error 12)",
                "porep-1000-4",
                0,
            ),
        ),
        (
            "gpu_worker{worker_id=1 gpu=0 job_id=porep-9 proof_kind=porep-c2 batch_size=1 partition=Some(3)}: "
            "cuzk_core::engine: GPU prove start failed error=CUDA out of memory",
            ProofFailedLine(T0 + 0.5, "GPU prove start failed", "CUDA out of memory", "porep-9", 3),
        ),
        (
            "cuzk_server::service: prove failed error=job not found",
            ProofFailedLine(T0 + 0.5, "prove failed", "job not found"),
        ),
    ],
)
def test_error_failure_lines(rest: str, expected: ProofFailedLine) -> None:
    assert parse_line(f"{TS} ERROR {rest}") == expected


def test_failure_message_at_info_level_is_not_a_failure() -> None:
    event = parse_line(f"{TS}  INFO cuzk_core::engine: synthesis failed error=x")
    assert isinstance(event, LogRecord)


def test_fatal_error_report_is_stderr_only() -> None:
    line = "Error: invalid listen address: localhost:9820"
    assert parse_line(line, Stream.STDERR) == FatalErrorLine("invalid listen address: localhost:9820")
    assert parse_line(line) == FatalErrorLine("invalid listen address: localhost:9820")
    assert parse_line(line, Stream.STDOUT) == PlainLine(line)


def test_fixture_log_has_no_unparsed_daemon_lines() -> None:
    events = [parse_line(line) for line in FIXTURE.read_text().splitlines()]
    plain = [e for e in events if isinstance(e, PlainLine)]
    assert plain == [PlainLine("TIMELINE,17100,SYNTH_ST")]
    assert sum(isinstance(e, TimelineEvent) for e in events) == 49


# ---------------------------------------------------------------------------- robustness

REAL_LINES = [line for line in FIXTURE.read_text().splitlines() if line] + [
    'Error: x\n2026-05-01T07:00:00.000001Z DEBUG a{b="c\\" d=e"}: t: m k="v\\u{110000}\\',
    "CUZK_TIMING: gpu_tid=x on gpu",
]


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    parse_line(text)
    parse_line("TIMELINE," + text)
    parse_line("CUZK_TIMING: " + text)
    parse_line("2026-05-01T07:00:00.412907Z  INFO " + text, Stream.STDERR)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(REAL_LINES),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 8), st.text(max_size=6)), max_size=4),
)
def test_mutated_real_lines_never_raise(line: str, edits: list[tuple[int, int, str]]) -> None:
    for position, cut, insert in edits:
        position %= len(line) + 1
        line = line[:position] + insert + line[position + cut :]
    event = parse_line(line)
    assert event is not None


# ---------------------------------------------------------------------------- LineSplitter


def test_line_splitter_keeps_partial_lines_and_joins_split_characters() -> None:
    splitter = LineSplitter()
    data = "TIMELINE,1,SYNTH_START,jöb,partition=0\r\nsecond\nthird".encode()
    cut = data.index("ö".encode()) + 1  # in the middle of the two-byte character
    assert splitter.feed(data[:cut]) == []
    assert splitter.feed(data[cut:]) == ["TIMELINE,1,SYNTH_START,jöb,partition=0", "second"]
    assert splitter.pending == "third"
    assert splitter.feed(b" line\n") == ["third line"]
    assert splitter.flush() is None


def test_line_splitter_replaces_invalid_utf8_and_flushes_the_rest() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"ok\n\xff\xfebad\nlast") == ["ok", "\ufffd\ufffdbad"]
    assert splitter.flush() == "last"
    assert splitter.pending == ""


@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=6))
def test_line_splitter_chunking_does_not_change_the_lines(data: bytes, cuts: list[int]) -> None:
    whole = LineSplitter()
    expected = whole.feed(data)
    expected_rest = whole.flush()
    pieces = LineSplitter()
    got: list[str] = []
    previous = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        got += pieces.feed(data[previous:cut])
        previous = cut
    got += pieces.feed(data[previous:])
    assert got == expected
    assert pieces.flush() == expected_rest


@pytest.mark.parametrize(
    ("line", "inert"),
    [
        (f"{TS}  INFO cuzk_core::engine: evictor callback wired", True),
        (f"{TS} DEBUG cuzk_core::pinned_pool: pinned buffer returned size_mib=4096", True),
        ("Caused by: no such file", True),
        (f"{TS}  WARN cuzk_core::config: unknown key ignored key=foo", False),
        (
            f"{TS}  INFO cuzk_core::scheduler: job enqueued job_id=j1 proof_kind=porep-c2 priority=Normal "
            "queue_position=0",
            False,
        ),
        (
            f'{TS}  INFO synthesize_partition{{job_id="j1" partition=3}}: cuzk_core::pipeline: partition synthesis '
            "complete partition=3 synth_ms=44601 is_pinned=false",
            False,
        ),
        (f"\x1b[2m{TS}\x1b[0m \x1b[32m INFO\x1b[0m cuzk_daemon: cuzk-daemon starting", False),
        ("TIMELINE,5,SYNTH_START,j1,partition=0", False),
        ("CUZK_NTT_H: d_b_alloc=3ms ntt_kernels=41ms total=97ms", False),
    ],
)
def test_is_inert_skips_only_lines_no_event_is_built_from(line: str, inert: bool) -> None:
    assert is_inert(line) is inert


@pytest.mark.parametrize("details", [True, False])
def test_the_bulk_scan_finds_every_event_line_and_skips_inert_ones(details: bool) -> None:
    evictor = f"{TS}  INFO cuzk_core::engine: evictor callback wired"
    coloured_evictor = f"{E}[2m{TS}{E}[0m {E}[32m INFO{E}[0m {E}[2mcuzk_core::engine{E}[0m{E}[2m:{E}[0m evictor wired"
    lines = [
        *FIXTURE.read_text("utf-8").splitlines(),
        evictor,
        coloured_evictor,
        f"{TS}  WARN cuzk_core::config: unknown key ignored key=foo",
        f"{E}[2m{TS}{E}[0m {E}[31mERROR{E}[0m {E}[2mcuzk_core::engine{E}[0m{E}[2m:{E}[0m proof failed job_id=j1",
        f"{E}[33mTIMELINE,5,SYNTH_START,j1,partition=0{E}[0m",
        "CUZK_NTT_H: d_b_alloc=3ms ntt_kernels=41ms total=97ms",
        "Error: daemon failed",
        "Caused by: no such file",
    ]
    data = "\n".join(lines).encode()
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line.encode()) + 1)
    found = {lines[offsets.index(start)] for start in event_line_starts(data, details)}
    events = {line for line in lines if not is_inert(line, details) and type(parse_line(line)) is not PlainLine}
    assert events <= found
    assert "TIMELINE,1000,SYNTH_START,porep-1000-1,partition=0" in events  # the test has teeth
    assert not {evictor, coloured_evictor, "Caused by: no such file"} & found


def test_without_details_the_timing_lines_are_inert_but_phase_lines_are_not() -> None:
    gpu_timing = (
        f"{TS}  INFO gpu_worker{{worker_id=0 gpu=0 job_id=j1 proof_kind=porep-c2 batch_size=1 partition=Some(0)}}: "
        "cuzk_core::engine: GPU_TIMING hot_path pre-prove overhead worker_id=0 partition=Some(0) status_ms=0"
    )
    synth_done = (
        f'{TS}  INFO synthesize_partition{{job_id="j1" partition=3}}: cuzk_core::pipeline: partition synthesis '
        "complete partition=3 synth_ms=44601 is_pinned=false"
    )
    for line in (gpu_timing, synth_done, "CUZK_TIMING: pre_lock_cpu_ms=3 mutex_wait_ms=0", "CUZK_NTT_H: total=97ms"):
        assert not is_inert(line) and is_inert(line, details=False)
    assembled = f"{TS}  INFO cuzk_core::engine: Phase 7: all partitions complete, proof assembled job_id=j1"
    for line in ("TIMELINE,5,GPU_END,j1,worker=0,partition=0,gpu_ms=3", assembled):
        assert not is_inert(line, details=False)
