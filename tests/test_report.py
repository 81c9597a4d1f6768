"""Proof accounting, waits, evictions, stalls, bare-log replay and the report, on constructed logs.

Every line follows the upstream format string it imitates (tracing-subscriber's full format:
``<ts> <LEVEL> <spans>: <target>: <message> key=value…``; ``TIMELINE,<ms>,<EVENT>,<job>,<detail>``
from engine.rs ``timeline_event``), with the upstream file named beside each builder.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui.cli import main
from cuzktui.client import snapshot_from_status
from cuzktui.controller import ControllerError, Identity
from cuzktui.figures import not_proving, status_line
from cuzktui.model import SessionModel
from cuzktui.replay import ReplayController
from cuzktui.report import build_report, render_text
from cuzktui.session import SessionWriter, load_session

T0_TEXT = "2026-05-01T07:00:"


def ts(second: float) -> str:
    """The daemon's timestamp ``second`` seconds after 07:00:00 (under a minute)."""
    return f"{T0_TEXT}{second:09.6f}Z"


def human(
    second: float,
    message: str,
    *,
    level: str = "INFO",
    target: str = "cuzk_core::engine",
    spans: str = "",
    **fields: object,
) -> str:
    """One tracing-subscriber "full" line: level padded to 5, spans then target, fields after the message."""
    prefix = f"{spans}: " if spans else ""
    tail = "".join(f" {k}={v}" for k, v in fields.items())
    return f"{ts(second)} {level:>5} {prefix}{target}: {message}{tail}"


def timeline(offset_ms: int, event: str, job: str, detail: str) -> str:
    return f"TIMELINE,{offset_ms},{event},{job},{detail}"  # engine.rs timeline_event


def synthesized_then_on_the_gpu(job: str, synth_start_ms: int, gpu_ms: int, kind: str = "porep-c2") -> list[str]:
    """A monolithic job's TIMELINE from synthesis to the GPU (worker 0), taken at once at ``gpu_ms``."""
    return [
        timeline(synth_start_ms, "SYNTH_START", job, f"kind={kind}"),
        timeline(gpu_ms, "SYNTH_END", job, f"synth_ms={gpu_ms - synth_start_ms}"),
        timeline(gpu_ms, "GPU_QUEUE", job, "monolithic"),
        timeline(gpu_ms, "GPU_PICKUP", job, "worker=0"),
        timeline(gpu_ms, "GPU_START", job, "worker=0"),
    ]


def startup(pipeline: bool = True) -> list[str]:
    """cuzk-daemon main.rs / engine.rs startup lines; the engine starts at 07:00:01 (TIMELINE offset 0)."""
    return [
        human(0.0, "cuzk-daemon starting", target="cuzk_daemon"),
        human(0.5, "memory budget initialized", total_budget_gib=400),
        human(1.0, "starting cuzk engine", pipeline_enabled=str(pipeline).lower()),
        human(1.1, "cuzk-daemon ready, serving on 127.0.0.1:9820", target="cuzk_daemon"),
    ]


def enqueue(second: float, job: str, kind: str = "porep-c2", position: int = 0) -> str:
    # scheduler.rs Scheduler::submit
    return human(
        second,
        "job enqueued",
        target="cuzk_core::scheduler",
        job_id=job,
        proof_kind=kind,
        priority="Normal",
        queue_position=position,
    )


def dequeue(second: float, job: str, kind: str = "porep-c2") -> str:
    return human(second, "job dequeued for proving", target="cuzk_core::scheduler", job_id=job, proof_kind=kind)


def partitioned_job(job: str, start_ms: int, partitions: int = 2) -> list[str]:
    """A partitioned PoRep job's TIMELINE (engine.rs) from SYNTH_START to GPU_END, 1 s per phase."""
    lines = []
    for p in range(partitions):
        lines += [
            timeline(start_ms, "SYNTH_START", job, f"partition={p}"),
            timeline(start_ms + 1000, "SYNTH_END", job, f"partition={p},synth_ms=1000"),
            timeline(start_ms + 1000, "GPU_QUEUE", job, f"partition={p}"),
            timeline(start_ms + 1000, "GPU_PICKUP", job, f"worker=0,partition={p}"),
            timeline(start_ms + 1000, "GPU_START", job, f"worker=0,partition={p}"),
            timeline(start_ms + 2000, "GPU_END", job, f"worker=0,partition={p},gpu_ms=1000"),
        ]
    return lines


def assembled(second: float, job: str) -> str:
    # engine.rs process_partition_result, logged before verify_porep_proof runs
    return human(
        second,
        "Phase 7: all partitions complete, proof assembled",
        job_id=job,
        proof_len=1920,
        total_ms=3000,
        synth_ms=2000,
        gpu_ms=2000,
    )


def write_log(tmp_path: Path, lines: list[str], *, cut: bool = False) -> Path:
    path = tmp_path / "daemon.log"
    text = "\n".join(lines)
    path.write_text(text if cut else text + "\n")
    return path


def report_of(path: Path) -> dict[str, Any]:
    _, model = load_session(path)
    return build_report(model, str(path))


def statuses(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    jobs = report["jobs"]
    assert isinstance(jobs, list)
    return {j["job_id"]: (j["status"], j["reason"]) for j in jobs}


# ---------------------------------------------------------------------------- 7.4 accounting


def test_a_self_check_failure_after_assembly_fails_the_job(tmp_path: Path) -> None:
    lines = [
        *startup(),
        *partitioned_job("porep-good", 0),
        assembled(3.5, "porep-good"),
        human(3.6, "Phase 7: PoRep proof self-check PASSED", job_id="porep-good"),
        *partitioned_job("porep-bad", 3000),
        assembled(6.5, "porep-bad"),
        human(
            6.6,
            "Phase 7: PoRep proof self-check FAILED — proof will NOT be returned to caller",
            level="ERROR",
            job_id="porep-bad",
            proof_len=1920,
            sector=12,
            miner=1000,
        ),
    ]
    report = report_of(write_log(tmp_path, lines))
    jobs = statuses(report)
    assert jobs["porep-good"] == ("completed", "")
    assert jobs["porep-bad"][0] == "failed" and "self-check" in jobs["porep-bad"][1]
    assert report["counts"] == {"completed": 1, "failed": 1, "incomplete": 0, "lost": 0}


def test_every_sector_of_a_batch_is_shown_and_counted(tmp_path: Path) -> None:
    members = ["porep-b0", "porep-b1", "porep-b2"]
    lines = [*startup()]
    lines += [enqueue(1.2 + i / 10, job, position=i) for i, job in enumerate(members)]
    # Only the batch's first request has TIMELINE lines (engine.rs: reqs[0]).
    lines += [
        *synthesized_then_on_the_gpu("porep-b0", 500, 2500, "porep-c2"),
        timeline(4500, "GPU_END", "porep-b0", "worker=0,gpu_ms=2000"),
        human(
            5.6,
            "batched proof completed — splitting results",
            total_proof_bytes=5760,
            num_sectors=3,
            synth_ms=2000,
            gpu_ms=2000,
        ),
    ]
    for i, job in enumerate(members):
        lines += [
            human(5.6, "sector proof delivered from batch", sector_idx=i, job_id=job, proof_len=1920, total_ms=4400),
            human(5.7, "Batched PoRep proof self-check PASSED", job_id=job, sector_idx=i),
        ]
    path = write_log(tmp_path, lines)
    _, model = load_session(path)
    shown = {job.job_id: job for job in model.timeline.jobs()}
    assert set(shown) == set(members)
    assert all(job.status == "completed" and 0 in job.partitions for job in shown.values())
    assert shown["porep-b2"].partitions[0].gpu_s == pytest.approx(2.0)
    assert shown["porep-b2"].batch_leader == "porep-b0"
    assert report_of(path)["counts"] == {"completed": 3, "failed": 0, "incomplete": 0, "lost": 0}


def test_failure_lines_without_a_job_id_are_attributed(tmp_path: Path) -> None:
    lines = [
        *startup(),
        enqueue(1.2, "porep-parse"),
        dequeue(1.3, "porep-parse"),
        human(1.4, "Phase 7: C1 parse/SRS load failed", level="ERROR", error="failed to parse C1 output wrapper JSON"),
        enqueue(1.5, "wdpost-1", kind="window-post"),
        dequeue(1.6, "wdpost-1", kind="window-post"),
        *synthesized_then_on_the_gpu("wdpost-1", 700, 900, "window-post"),
        human(2.5, "GPU proving failed", level="ERROR", error="generate_single_window_post_with_vanilla failed"),
    ]
    jobs = statuses(report_of(write_log(tmp_path, lines)))
    assert jobs["porep-parse"] == ("failed", "failed to parse C1 output wrapper JSON")
    assert jobs["wdpost-1"] == ("failed", "generate_single_window_post_with_vanilla failed")


def test_an_error_in_the_dispatch_span_fails_the_jobs_it_took_whatever_its_text(tmp_path: Path) -> None:
    # A daemon built without cuda-supraseal: engine.rs process_batch logs this in the dispatcher's span,
    # with no job id, for every pipeline job (synthesis_concurrency 1: one batch at a time).
    def no_cuda(second: float, kind: str, message: str = "pipeline mode requires cuda-supraseal feature") -> str:
        return human(second, message, level="ERROR", spans=f"synth_single{{proof_kind={kind}}}")

    lines = [
        *startup(),
        enqueue(1.2, "winpost-1", kind="winning-post"),
        enqueue(1.2, "winpost-2", kind="winning-post", position=1),
        dequeue(1.3, "winpost-1", kind="winning-post"),
        no_cuda(1.3, "winning-post"),
        dequeue(1.4, "winpost-2", kind="winning-post"),
        # A text no one knows today fails its job all the same.
        no_cuda(1.4, "winning-post", "some failure nobody has seen yet"),
        # A batch span fails the batch: the last batch_size requests of its kind the dispatcher took.
        enqueue(1.5, "porep-a"),
        enqueue(1.5, "porep-b", position=1),
        dequeue(1.6, "porep-a"),
        dequeue(1.6, "porep-b"),
        human(
            1.7,
            "pipeline mode requires cuda-supraseal feature",
            level="ERROR",
            spans="synth_batch_full{batch_size=2 proof_kind=porep-c2}",
        ),
        # An ERROR before any dequeue, or outside the dispatcher's spans, fails nothing.
        enqueue(1.8, "porep-waiting", position=0),
        human(1.9, "something else broke", level="ERROR"),
    ]
    path = write_log(tmp_path, lines)
    report = report_of(path)
    jobs = statuses(report)
    assert jobs["winpost-1"] == ("failed", "pipeline mode requires cuda-supraseal feature")
    assert jobs["winpost-2"] == ("failed", "some failure nobody has seen yet")
    assert jobs["porep-a"] == jobs["porep-b"] == ("failed", "pipeline mode requires cuda-supraseal feature")
    assert jobs["porep-waiting"][0] == "incomplete"
    assert report["counts"]["failed"] == 4
    # The dashboard's notices say it in the daemon's words, once per text per daemon run.
    _, model = load_session(path)
    failures = [n.text for n in model.notices if "failed:" in n.text]
    assert failures == [
        "failed: pipeline mode requires cuda-supraseal feature (job winpost-1)",
        "failed: some failure nobody has seen yet (job winpost-2)",
    ]


def test_monolithic_mode_successes_are_counted(tmp_path: Path) -> None:
    span = "monolithic_worker{worker_id=0 gpu=0 job_id=porep-m1 proof_kind=porep-c2}"
    lines = [
        *startup(pipeline=False),
        enqueue(1.2, "porep-m1"),
        dequeue(1.3, "porep-m1"),
        human(1.3, "processing job (monolithic)", spans=span),
        human(
            9.3,
            "proof completed successfully (monolithic)",
            spans=span,
            proof_len=1920,
            total_ms=8100,
            queue_ms=100,
            deser_ms=50,
            prove_ms=7950,
        ),
    ]
    path = write_log(tmp_path, lines)
    report = report_of(path)
    assert report["counts"] == {"completed": 1, "failed": 0, "incomplete": 0, "lost": 0}
    _, model = load_session(path)
    job = model.timeline.jobs()[0]
    assert job.monolithic and job.partitions[0].gpu_s == pytest.approx(8.0)
    assert job.partitions[0].queue_wait_s == pytest.approx(0.1)


# ---------------------------------------------------------------------------- 7.5 waits, evictions, stalls


def test_scheduler_and_budget_waits_before_synthesis(tmp_path: Path) -> None:
    lines = [
        *startup(),
        enqueue(1.0, "porep-w"),
        dequeue(3.0, "porep-w"),
        human(
            3.5,
            "dispatching per-partition synthesis (budget-gated)",
            job_id="porep-w",
            num_partitions=2,
            budget_available_gib=10,
        ),
        *partitioned_job("porep-w", 7500),  # SYNTH_START at 07:00:08.5: 5 s waiting for the budget
        assembled(11.0, "porep-w"),
        human(11.1, "Phase 7: PoRep proof self-check PASSED", job_id="porep-w"),
    ]
    path = write_log(tmp_path, lines)
    _, model = load_session(path)
    job = model.timeline.jobs()[0]
    assert job.scheduler_wait_s == pytest.approx(2.0)
    assert job.budget_wait_s == pytest.approx(5.0)
    phases = report_of(path)["phases"]
    assert isinstance(phases, dict)
    assert phases["budget_wait"]["median_s"] == pytest.approx(5.0)
    out = tmp_path / "trace.json"
    assert main(["export", str(path), "-o", str(out)]) == 0
    waits = {
        e["name"]: e["dur"] for e in json.loads(out.read_text())["traceEvents"] if e.get("cat", "").endswith("wait")
    }
    assert waits == {"scheduler wait": 2_000_000, "budget wait": 5_000_000}


def test_evictions_and_budget_stalls_become_notices_and_marks(tmp_path: Path) -> None:
    lines = [
        *startup(),
        human(
            2.0,
            "SRS loaded successfully",
            target="cuzk_core::srs_manager",
            circuit_id="porep-32g",
            elapsed_ms=800,
            budget_used_gib=44,
            budget_available_gib=356,
        ),
        human(
            30.0,
            "SRS evicted",
            target="cuzk_core::srs_manager",
            circuit_id="porep-32g",
            freed_gib=44,
            budget_available_gib=400,
        ),
        human(30.0, "evicted for memory pressure", entry="srs:porep-32g", freed_gib=44),
        *[
            human(
                31.0 + i,
                "acquire request exceeds total budget — will block until possible",
                level="WARN",
                target="cuzk_core::memory",
                amount_gib=71,
                total_gib=64,
            )
            for i in range(3)
        ],
    ]
    path = write_log(tmp_path, lines)
    _, model = load_session(path)
    assert "porep-32g" not in model.daemon.srs_loaded
    assert [e.what for _, e in model.evictions] == ["porep-32g"]
    assert len(model.budget_stalls) == 3
    texts = [n.text for n in model.notices]
    assert any("evicted SRS porep-32g" in t for t in texts)
    assert sum("budget stall" in t for t in texts) == 1
    report = report_of(path)
    assert len(report["evictions"]) == 1 and len(report["budget_stalls"]) == 3


# ---------------------------------------------------------------------------- 16.7 the GPU queue drop


def test_a_monolithic_job_overtaken_in_the_gpu_queue_is_marked(tmp_path: Path) -> None:
    def post(job: str, queue_ms: int) -> list[str]:
        return [
            timeline(queue_ms - 200, "SYNTH_START", job, "kind=window-post"),
            timeline(queue_ms, "SYNTH_END", job, "synth_ms=200"),
            timeline(queue_ms, "GPU_QUEUE", job, "monolithic"),
        ]

    lines = [
        *startup(),
        *post("wdpost-first", 1000),
        *post("wdpost-second", 1100),
        timeline(1200, "GPU_PICKUP", "wdpost-second", "worker=0"),
        timeline(1200, "GPU_START", "wdpost-second", "worker=0"),
        timeline(2200, "GPU_END", "wdpost-second", "worker=0,partition=0,gpu_ms=1000"),
        human(
            3.3,
            "proof completed successfully (pipeline)",
            proof_len=192,
            total_ms=1300,
            queue_ms=10,
            synth_ms=200,
            gpu_ms=1000,
        ),
    ]
    path = write_log(tmp_path, lines)
    jobs = statuses(report_of(path))
    assert jobs["wdpost-second"] == ("completed", "")
    status, reason = jobs["wdpost-first"]
    assert status == "lost" and "GPU queue" in reason and "wdpost-second" in reason
    _, model = load_session(path)
    assert any("wdpost-first" in n.text and "GPU queue" in n.text for n in model.notices)


# ---------------------------------------------------------------------------- 17.4 bare logs


def test_a_bare_log_replays_its_daemon_lifecycle_and_a_cut_line_is_its_death(tmp_path: Path) -> None:
    lines = [*startup(), *partitioned_job("porep-cut", 0), "2026-05-01T07:00:04.0000"]
    path = write_log(tmp_path, lines, cut=True)
    replay = ReplayController(path)
    replay.load()
    asyncio.run(replay.start())
    d = replay.model.daemon
    assert d.phase == "dead" and d.listen == "127.0.0.1:9820" and d.budget_total_gib == 400
    assert d.exit is not None and "mid-line" in d.exit.evidence[0]
    assert d.log_path == str(path)
    assert statuses(report_of(path))["porep-cut"][0] == "incomplete"


def test_a_file_that_is_no_daemon_log_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "random.bin"
    junk.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(ControllerError, match="not a daemon log"):
        ReplayController(junk).load()
    assert main(["report", str(junk)]) == 1
    assert "not a daemon log" in capsys.readouterr().err
    assert main(["replay", str(junk)]) == 1


# ---------------------------------------------------------------------------- issue 8: one reader


def test_export_report_and_replay_agree_on_an_oom_killed_session(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "session")
    write_log(
        session.path,
        [
            *startup(),
            *partitioned_job("porep-done", 0, 1),
            assembled(3.5, "porep-done"),
            human(3.6, "Phase 7: PoRep proof self-check PASSED", job_id="porep-done"),
            timeline(3000, "SYNTH_START", "porep-killed", "partition=0"),
        ],
    )
    t_launch, t_kill = 1777618799.0, 1777618805.0  # 06:59:59 and 07:00:05 of the log's day
    session.append_event(ev.DaemonLaunched(t_launch, "real", 4242, ("cuzk-daemon",), None, "127.0.0.1:9820", None))
    session.append_event(ev.DaemonExited(t_kill, 4242, None, 9, "oom_kill", ("memory.oom_control oom_kill 1",)))
    session.close()

    report = report_of(session.path)
    assert statuses(report)["porep-killed"] == (
        "incomplete",
        "the daemon exited (OOM-killed) with the job in synthesis",
    )

    replay = ReplayController(session.path)
    asyncio.run(replay.start())
    job = next(j for j in replay.model.timeline.jobs() if j.job_id == "porep-killed")
    assert job.status == "incomplete"

    out = tmp_path / "trace.json"
    assert main(["export", str(session.path), "-o", str(out)]) == 0
    names = [e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"] if e.get("name") == "process_name"]
    assert any(n.startswith("job porep-killed") and n.endswith("incomplete") for n in names)
    assert any(n.startswith("job porep-done") and n.endswith("completed") for n in names)


def test_each_daemon_exit_and_each_runs_jobs_say_which_run_they_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two benchmarks, each on a daemon of its own (the Bench screen's hand-over) and each with a
    porep-1000-1: the report says which run each exit and each job belongs to, and when it exited."""
    session = SessionWriter(tmp_path / "session")

    def run_from(second: float) -> list[str]:
        return [
            human(second, "cuzk-daemon starting", target="cuzk_daemon"),
            human(second + 0.5, "memory budget initialized", total_budget_gib=400),
            human(second + 1.0, "starting cuzk engine", pipeline_enabled="true"),
            *partitioned_job("porep-1000-1", 0),
            assembled(second + 3.5, "porep-1000-1"),
        ]

    write_log(session.path, [*run_from(0.0), *run_from(10.0)])
    seven = 1777618800.0  # 07:00:00 of the log's day
    stopped = ("killed by SIGTERM (exit status 143 in a shell)", "SIGTERM was sent by the supervisor")
    for launched, exited in ((seven - 1, seven + 5), (seven + 9, seven + 20)):
        session.append_event(ev.DaemonLaunched(launched, "real", 4242, ("cuzk-daemon",), None, "127.0.0.1:9820", None))
        session.append_event(ev.DaemonExited(exited, 4242, -15, 15, "stopped", stopped))
    session.close()
    assert main(["report", str(session.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    evidence = "; ".join(stopped)
    assert f"daemon run 1 exited 2026-05-01 07:00:05 UTC: stopped ({evidence})" in out
    assert f"daemon run 2 exited 2026-05-01 07:00:20 UTC: stopped ({evidence})" in out
    jobs = out[out.index("jobs:") + 1 :]
    assert jobs[:4] == [
        "  daemon run 1:",
        "    completed  porep-1000-1",
        "  daemon run 2:",
        "    completed  porep-1000-1",
    ]
    assert main(["report", str(session.path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(e["daemon_run"], e["t"]) for e in data["exits"]] == [(1, seven + 5), (2, seven + 20)]
    assert [j["daemon_run"] for j in data["jobs"]] == [1, 2], "numbered as the waterfall and the export number runs"


def test_a_session_whose_daemon_never_started_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = SessionWriter(tmp_path / "session")
    why = "the daemon binary /opt/cuzk/bin/cuzk-daemon does not exist: nothing was launched"
    session.append_event(ev.StartFailed(1777618799.0, why))
    session.close()
    assert main(["report", str(session.path)]) == 0
    assert f"daemon not started: {why}" in capsys.readouterr().out.splitlines()
    assert main(["report", str(session.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["start_failed"] == {"t": 1777618799.0, "text": why}


def test_each_gpu_workers_gpu_is_named(tmp_path: Path) -> None:
    # engine.rs start(): worker 0 is on GPU 1 (gpus.devices = [1]); the report says so per worker.
    started = human(1.0, "pipeline GPU worker started", worker_id=0, gpu=1, sub_id=0)
    path = write_log(tmp_path, [*startup(), started, *partitioned_job("porep-1", 0), assembled(3.5, "porep-1")])
    report = report_of(path)
    assert report["gpu"]["worker_gpu"] == {"0": 1}
    assert "GPU worker 0 on GPU1: busy" in render_text(report)


def test_report_json_has_the_documented_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_log(tmp_path, [*startup(), *partitioned_job("porep-1", 0), assembled(3.5, "porep-1")])
    assert main(["report", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"jobs", "counts", "evictions", "budget_stalls"} <= set(data)
    assert data["engine_time"] is False
    assert data["jobs"] == [
        {
            "job_id": "porep-1",
            "daemon_run": 1,
            "kind": None,
            "status": "completed",
            "reason": "",
            "partitions": 2,
            "scheduler_wait_s": None,
            "budget_wait_s": None,
        }
    ]


def test_a_bare_log_shows_the_daemons_warnings_once_per_run(tmp_path: Path) -> None:
    warning = human(
        0.2, "nvidia-smi not available, defaulting to single GPU (ordinal 0)", level="WARN", target="cuzk_core::engine"
    )
    path = write_log(tmp_path, [startup()[0], warning, warning, *startup()[1:]])
    _, model = load_session(path)
    assert [n.text for n in model.notices] == ["daemon: nvidia-smi not available, defaulting to single GPU (ordinal 0)"]
    assert report_of(path)["warnings"] == [
        {"line": "WARN nvidia-smi not available, defaulting to single GPU (ordinal 0)", "count": 2}
    ]


def test_srs_residency_comes_from_status_allocations(tmp_path: Path) -> None:
    document = {
        "uptime_secs": 60.0,
        "memory": {"total_bytes": 400 << 30, "used_bytes": 0, "available_bytes": 400 << 30},
        "synthesis": {"max_concurrent": 44, "active": 0},
        "pipelines": [],
        "gpu_workers": [],
        "allocations": {
            "srs": [{"circuit_id": "porep-32g", "bytes": 47 << 30, "last_used_secs_ago": 3.0, "evictable": True}],
            "pce": [],
        },
        "counters": {"total_completed": 0, "total_failed": 0, "completed_by_kind": {}, "failed_by_kind": {}},
    }
    model = SessionModel()
    model.apply(ev.SrsLoaded(1.0, "wpost-32g", 900, 57, 343))
    model.apply(snapshot_from_status(document, t=2.0))
    assert model.daemon.srs_loaded == ("porep-32g",)
    document["allocations"] = {"srs": [], "pce": []}
    model.apply(snapshot_from_status(document, t=3.0))
    assert model.daemon.srs_loaded == ()


def test_the_text_report_leads_with_the_counts_and_names_each_unfinished_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [*startup(), *partitioned_job("porep-1", 0), assembled(3.5, "porep-1"), enqueue(4.0, "porep-2")]
    path = write_log(tmp_path, lines)
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("jobs: 2  completed 1  failed 0  incomplete 1")
    assert "  incomplete porep-2  still waiting in the scheduler queue when the recording ends" in out


@pytest.mark.parametrize("said_by", ["config", "attach"])
def test_an_engine_sessions_durations_are_the_emulated_boxs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], said_by: str
) -> None:
    """The time_scale comes from the run itself (an attached engine's /status says it; there is no config
    version), or from the config version of a session recorded before its runs said it."""
    session = SessionWriter(tmp_path / "session")
    write_log(session.path, [*startup(), *partitioned_job("porep-1", 0, 1), assembled(3.5, "porep-1")])
    if said_by == "config":
        session.add_config_version("[engine]\ntime_scale = 0.5\n")
        launched = ev.DaemonLaunched(1777618799.0, "engine", 7, ("cuzk-engine",), None, "127.0.0.1:9820", None)
    else:
        launched = ev.DaemonLaunched(
            1777618799.0, "attached", 7, (), None, "127.0.0.1:9820", None, memory_scale=1 / 256, time_scale=0.5
        )
    session.append_event(launched)
    session.close()
    assert main(["report", str(session.path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["time_scale"] == 0.5
    # One second of the engine's log is two seconds of the box it emulates (engine/pipeline.py).
    assert (data["phases"]["synthesis"]["median_s"], data["phases"]["gpu"]["median_s"]) == (2.0, 2.0)


def test_a_failed_batch_fails_every_sector_of_it(tmp_path: Path) -> None:
    members = ["porep-b0", "porep-b1"]
    lines = [*startup()]
    for i, job in enumerate(members):
        lines += [enqueue(1.2 + i / 10, job, position=i), dequeue(1.4 + i / 10, job)]
    lines += [
        enqueue(1.45, "porep-later", position=0),
        *synthesized_then_on_the_gpu("porep-b0", 500, 2500, "porep-c2"),
        # engine.rs process_monolithic_result: one line, no job id, every request of the batch fails.
        human(4.0, "GPU proving failed", level="ERROR", error="CUDA error 700: an illegal memory access"),
    ]
    jobs = statuses(report_of(write_log(tmp_path, lines)))
    assert jobs["porep-b0"] == ("failed", "CUDA error 700: an illegal memory access")
    assert jobs["porep-b1"] == ("failed", "CUDA error 700: an illegal memory access")
    assert jobs["porep-later"][0] == "incomplete"  # enqueued, never taken: not in that batch


def test_a_bare_logs_report_and_export_load_none_of_the_configs_modules(tmp_path: Path) -> None:
    log = Path(__file__).parent / "data" / "timeline_restart.log"
    code = (
        "import sys\nfrom cuzktui.cli import main\n"
        f"main(['report', '--json', {str(log)!r}])\n"
        f"main(['export', {str(log)!r}, '-o', {str(tmp_path / 'trace.json')!r}])\n"
        "print(sorted(m for m in ('cuzktui.config', 'tomlkit') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "[]"


def test_after_a_sigint_the_daemon_is_not_proving_and_the_report_says_why_jobs_wait(tmp_path: Path) -> None:
    """cuzk-daemon main.rs on SIGINT: its handler's line, engine.rs Engine::shutdown's, the workers' last
    lines; the server serves on, and a proof sent afterwards is enqueued and never proved (§2)."""
    from cuzktui.ui.widgets.panels import daemon_content  # the UI's, loaded only here

    lines = [
        *startup(),
        enqueue(2.0, "porep-in-flight"),
        dequeue(2.1, "porep-in-flight"),
        timeline(1500, "SYNTH_START", "porep-in-flight", "partition=0"),
        human(4.0, "received SIGINT, shutting down", target="cuzk_daemon"),
        human(4.0, "shutting down cuzk engine"),
        human(4.0, "synthesis worker received shutdown", sw_id=0),
        human(4.1, "pipeline GPU worker stopped", worker_id=0),
        enqueue(9.0, "porep-after"),  # SubmitProof still answers
    ]
    path = write_log(tmp_path, lines)
    _, model = load_session(path)
    stopped = not_proving(model)
    assert stopped is not None and stopped.startswith("restart it: a SIGINT stopped its engine")
    assert status_line(model, None).startswith("NOT PROVING")
    panel = daemon_content(model, Identity("replay", "replay of daemon.log", None)).plain
    assert "NOT PROVING for 5s" in panel and "it will never prove" in panel
    assert "READY" not in panel
    reasons = statuses(report_of(path))
    assert reasons["porep-after"][1].startswith("enqueued after the daemon's SIGINT: its engine had stopped")
    assert reasons["porep-in-flight"][1] == (
        "abandoned at the daemon's SIGINT with the job in synthesis: its engine stopped its workers"
    )
    assert "still waiting" not in render_text(report_of(path))
    # A new process proves again: the next start clears it.
    model.apply(ev.DaemonStarting(model.last_t + 10 if model.last_t is not None else 0.0))
    assert not_proving(model) is None
