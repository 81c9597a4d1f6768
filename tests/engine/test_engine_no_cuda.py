"""``[engine] cuda = false``: the engine as a daemon built without its CUDA backend (a CPU-only build, as
issue 24 met it). engine.rs process_batch, without the cuda-supraseal feature, logs one ERROR in the
synthesis dispatcher's span naming no job and fails every request of the batch at once; the tool must
fail those jobs from that line (issue 24 point 2), and a knob search must stop at once (issue 26 point 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuzktui import daemon_messages as msg
from cuzktui import events as ev
from cuzktui.proto import proving_pb2 as pb
from cuzktui.report import build_report
from cuzktui.session import iter_session_events, load_session
from tests.conftest import TEST_TIME_SCALE, require_engine
from tests.engine.engine_harness import engine_command, porep_request, winning_request, write_config

ROOT = Path(__file__).resolve().parents[2]
NO_CUDA = {"engine": {"cuda": False}}


def test_every_pipeline_job_fails_at_once_with_upstreams_text_and_a_line_naming_no_job(engine_factory: Any) -> None:
    engine = engine_factory(NO_CUDA, status=True)
    stub = engine.stub()
    porep = stub.Prove(pb.ProveRequest(submit=porep_request("porep-1000-1")), timeout=30).result
    winning = stub.Prove(pb.ProveRequest(submit=winning_request("winpost-1000-ab")), timeout=30).result
    for result in (porep, winning):
        assert result.status == pb.AwaitProofResponse.FAILED
        assert result.error_message == msg.PIPELINE_NEEDS_CUDA_JOB_ERROR
    assert stub.GetStatus(pb.GetStatusRequest(), timeout=5).total_proofs_failed == 2
    log = engine.stdout()
    for kind in ("porep-c2", "winning-post"):
        line = f"ERROR synth_single{{proof_kind={kind}}}: cuzk_core::engine: {msg.PIPELINE_NEEDS_CUDA}\n"
        assert line in log, log
    assert "job_id" not in "".join(line for line in log.splitlines() if msg.PIPELINE_NEEDS_CUDA in line)
    assert "TIMELINE" not in engine.stderr()  # nothing was synthesized
    # The tool reads the daemon's log as upstream's: both jobs failed, with the daemon's own text.
    _, model = load_session(engine.stdout_path, cache=False)
    report = build_report(model, str(engine.stdout_path))
    jobs = {job["job_id"]: job for job in report["jobs"]}
    assert {job: entry["status"] for job, entry in jobs.items()} == {
        "porep-1000-1": "failed",
        "winpost-1000-ab": "failed",
    }
    assert all(msg.PIPELINE_NEEDS_CUDA in entry["reason"] for entry in jobs.values()), jobs


def test_monolithic_mode_without_cuda_is_refused_at_start(tmp_path: Path) -> None:
    require_engine()
    config = write_config(tmp_path / "cuzk.toml", {"pipeline": {"enabled": False}, **NO_CUDA})
    done = subprocess.run(
        engine_command("-c", str(config), "-l", f"unix://{tmp_path}/d.sock"),
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("Error: engine.cuda = false is modelled in pipeline mode only\n"), done.stderr
    assert "proves monolithic jobs on the CPU" in done.stderr


def test_a_benchmark_fails_each_proof_with_the_daemons_text_and_a_search_stops_at_once(tmp_path: Path) -> None:
    require_engine()
    session = tmp_path / "bench"
    bench = subprocess.run(
        [sys.executable, "-m", "cuzktui.bench", "--engine", "-t", "porep", "-c", "2", "-j", "2", "--session",
         str(session), "--set", "engine.cuda=false", "--set", f"engine.time_scale={TEST_TIME_SCALE}"],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
    )  # fmt: skip
    assert bench.returncode == 1, bench.stderr[-3000:]
    failed = [line for line in bench.stdout.splitlines() if "] FAILED — " in line]
    assert len(failed) == 2 and all(msg.PIPELINE_NEEDS_CUDA_JOB_ERROR in line for line in failed), bench.stdout
    finished = [e for e in iter_session_events(session) if isinstance(e, ev.ProofFinished)]
    assert [e.status for e in finished] == ["FAILED", "FAILED"]
    report = subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "report", str(session), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    jobs = json.loads(report.stdout)["jobs"]
    assert [job["status"] for job in jobs] == ["failed", "failed"], jobs
    # A knob search: no knob makes a build without CUDA prove, so it stops after its first trial.
    start = tmp_path / "start.toml"
    start.write_text(f"[engine]\ncuda = false\ntime_scale = {TEST_TIME_SCALE}\n")
    state = tmp_path / "search"
    tune = subprocess.run(
        [sys.executable, "-m", "cuzktui.cli", "tune", "--engine", "--config", str(start), "--count", "2",
         "--concurrency", "1", "--trials", "4", "--resume", str(state)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert tune.returncode == 2, tune.stderr[-3000:]
    assert "trial 1 failed for a reason no knob changes" in tune.stderr
    assert msg.PIPELINE_NEEDS_CUDA_JOB_ERROR in tune.stderr
    assert sorted(p.name for p in state.iterdir() if p.is_dir()) == ["trial-01"]
