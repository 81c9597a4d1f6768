"""The benchmark runner: inputs, request ids, budget lowering, and the OOM recovery loop."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui import proofinputs as pi
from cuzktui.bench import (
    BenchRunner,
    BenchUsageError,
    build_requests,
    c1_identity_warning,
    format_summary,
    read_vanilla_file,
    runner_error,
    with_engine_status,
)
from cuzktui.cli import build_parser
from cuzktui.client import DaemonCallError, DaemonDied
from cuzktui.commands.bench import request_params
from cuzktui.controller import BenchRequest
from cuzktui.daemon_config import read_config
from cuzktui.daemon_facts import DAEMON_PROCESS_RSS
from cuzktui.diagnosis import CURIO_SAW
from cuzktui.planner import cgroup_aware_budget
from cuzktui.proto import proving_pb2 as pb
from cuzktui.recording import DaemonRecorder
from cuzktui.session import LogFollower, SessionWriter, iter_session_events
from cuzktui.supervisor import Supervisor, engine_program
from tests.conftest import engine_config_text, require_engine

GiB = 1 << 30


def test_synthetic_requests_have_curio_ids_and_are_deterministic() -> None:
    porep = build_requests("porep", 3, input_path=None, bench_id="b1")
    assert [r.request_id for r in porep] == ["porep-1000-1", "porep-1000-2", "porep-1000-3"]
    assert porep == build_requests("porep", 3, input_path=None, bench_id="b1")
    wrapper = json.loads(porep[0].vanilla_proof)
    assert wrapper["SectorNum"] == 1 and base64.b64decode(wrapper["Phase1Out"])
    assert porep[0].proof_kind == pb.POREP_SEAL_COMMIT
    snap = build_requests("snap", 1, input_path=None, bench_id="b1")[0]
    assert snap.request_id == "snap-1000-1" and len(snap.vanilla_proofs) == 16 and len(snap.comm_r_old) == 32
    wdpost = build_requests("wpost", 2, input_path=None, bench_id="b1")
    assert wdpost[1].request_id.startswith("wdpost-1000-1-[") and wdpost[1].request_id.endswith("]")
    assert len(wdpost[1].request_id.split("[")[1].split()) == 8
    winning = build_requests("winning", 2, input_path=None, bench_id="b1")
    assert winning[0].request_id == f"winpost-1000-{winning[0].randomness[:8].hex()}"
    assert len({r.request_id for r in winning}) == 2
    assert all(r.vanilla_proofs and all(r.vanilla_proofs) for r in [snap, *winning, *wdpost])


def test_a_real_input_is_shared_and_ids_stay_unique(tmp_path: Path) -> None:
    c1 = tmp_path / "c1.json"
    c1.write_text(json.dumps({"SectorNum": 17, "Phase1Out": "AAAA", "SectorSize": 34359738368}))
    requests = build_requests("porep", 2, input_path=c1, bench_id="b")
    assert [r.request_id for r in requests] == ["porep-1000-17-1", "porep-1000-17-2"]
    assert all(r.vanilla_proof == c1.read_bytes() and r.sector_number == 17 for r in requests)


def test_vanilla_files_are_read_like_cuzk_bench(tmp_path: Path) -> None:
    array = tmp_path / "array.json"
    array.write_text(json.dumps([base64.b64encode(b"one").decode(), base64.b64encode(b"two").decode()]))
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"\x00\x01bincode")
    assert read_vanilla_file(array) == [b"one", b"two"]
    assert read_vanilla_file(raw) == [b"\x00\x01bincode"]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(BenchUsageError, match="empty"):
        read_vanilla_file(empty)


# -- the recovery loop, against a scripted daemon -------------------------------------------------


class _ScriptedDaemon:
    """Stands in for the supervisor: each run completes ``survive[run]`` proofs, then dies with ``causes[run]``."""

    def __init__(
        self, session: SessionWriter, survive: list[int], causes: list[ev.ExitCause], elapsed_ms: int = 0
    ) -> None:
        self.session = session
        self.mode = "engine"
        self.time_scale: float | None = None
        self.memory_limit: int | None = GiB
        self.survive, self.causes = survive, causes
        self.run = 0
        self.elapsed_ms = elapsed_ms  # what each answer reports as its timings
        self.configs: list[str] = []
        self.proved: list[list[str]] = [[]]
        self._exit: asyncio.Future[ev.DaemonExited] = asyncio.get_running_loop().create_future()

    @property
    def client(self) -> _ScriptedDaemon:
        return self

    def run_log_follower(self, *, skip_inert: bool = False) -> LogFollower | None:
        return None  # no log: the runner learns nothing from one

    async def exited(self) -> ev.DaemonExited:
        return await asyncio.shield(self._exit)

    async def start(self, config_text: str, changes: Any = ()) -> None:
        self.configs.append(config_text)
        self.run += 1
        self.proved.append([])
        self._exit = asyncio.get_running_loop().create_future()

    async def prove(self, request: pb.SubmitProofRequest, timeout: float | None = None) -> pb.AwaitProofResponse:
        exit = self._exit
        if exit.done():
            raise DaemonDied("Prove", "UNAVAILABLE: Socket closed")
        limit = self.survive[self.run] if self.run < len(self.survive) else None
        if limit is not None and len(self.proved[self.run]) >= limit:
            cause = self.causes[self.run]
            evidence = ("killed by SIGKILL", "oom_kill 0 → 1") if cause == "oom_kill" else ("exit status 101",)
            exit.set_result(ev.DaemonExited(0.0, 1, -9, 9, cause, evidence))
            raise DaemonDied("Prove", "UNAVAILABLE: Socket closed")
        self.proved[self.run].append(request.request_id)
        await asyncio.sleep(0)
        ms = self.elapsed_ms
        return pb.AwaitProofResponse(
            job_id=request.request_id, status=pb.AwaitProofResponse.COMPLETED, total_ms=5 + ms,
            gpu_compute_ms=ms, queue_wait_ms=ms,
        )  # fmt: skip


# The seed's box: the engine as a 256 GiB container (a 1 GiB cgroup at 1/256) on a 512 GiB host.
SEED_CONFIG = '[engine]\nmem_total = "512GiB"\n[memory]\ntotal_budget = "auto"\n'


def _runner(
    tmp_path: Path,
    daemon: _ScriptedDaemon,
    count: int,
    retries: int = 3,
    config: str = SEED_CONFIG,
    seen: tuple[ev.ObservedEvent, ...] = (),
) -> BenchRunner:
    """A runner on the scripted daemon, having observed ``seen`` (the recorder's samples) before the kill."""
    # As the supervisor that launched it with ``config`` would say: an engine's time_scale, a real daemon none.
    daemon.time_scale = read_config(config).engine.time_scale if daemon.mode == "engine" else None
    options = BenchRequest(kind="porep", count=count, concurrency=2, oom_retries=retries)
    requests = build_requests("porep", count, input_path=None, bench_id="b")
    runner = BenchRunner(daemon, options, config, requests=requests, bench_id="b")  # type: ignore[arg-type]
    for event in seen:
        runner.observe(event)
    return runner


def _status(used: int, in_flight: int = 0, srs: int = 0) -> ev.StatusSnapshot:
    """A /status reading: the budget in use, partitions synthesizing, the SRS resident."""
    return ev.StatusSnapshot(
        time.time(), 1.0, 251 * GiB, used, in_flight, 0, 2, 0, 0, 0, srs_resident_bytes=srs, pce_resident_bytes=0
    )


def _rss(nominal: int) -> ev.MemorySample:
    """A memory sample, the RSS in the engine's real bytes at 1/256 (the budget figure the sampler
    carried is left out: the evidence pairs the RSS with the /status readings it saw itself)."""
    return ev.MemorySample(time.time(), nominal // 256)


def _killed_with(reserved: int, partitions: int, outside: int) -> tuple[ev.ObservedEvent, ...]:
    """The samples of a daemon that idled with ``outside`` beyond its reservations, then was killed
    with ``partitions`` in flight and ``reserved`` in use at its last reading."""
    return (_status(0), _rss(outside), _status(reserved, partitions, 44 * GiB))


async def test_an_auto_budget_above_the_cgroup_is_lowered_once_and_said_why(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[3], causes=["oom_kill"])
    summary = await _runner(tmp_path, daemon, count=8).run()
    assert (summary.outcome, summary.completed, summary.failed) == ("completed", 8, 0)
    done = [job for run in daemon.proved for job in run]
    assert sorted(done) == sorted(f"porep-1000-{i}" for i in range(1, 9))  # each proof proved exactly once
    allowance = cgroup_aware_budget(256 * GiB) // GiB
    (restart,) = summary.restarts
    assert (restart.total_budget, restart.resubmitted) == (f"{allowance}GiB", 5)
    assert restart.explanation.startswith(
        'total_budget = "auto" took MemTotal (the emulated box\'s RAM, [engine] mem_total, 512 GiB) '
        "− safety_margin (5 GiB) = 507 GiB, above this cgroup's limit of 256 GiB"
    )
    assert f'total_budget = "{allowance}GiB"' in daemon.configs[-1]
    assert restart.explanation.endswith(f'; set total_budget = "{allowance}GiB"')
    text = format_summary(summary)
    assert f"why:         {restart.explanation}" in text and CURIO_SAW in text
    recorded = [e for e in iter_session_events(session.path)]
    assert [type(e).__name__ for e in recorded].count("BenchRestart") == 1
    assert isinstance(recorded[-1], ev.BenchFinished) and recorded[-1].killed_s > 0


async def test_a_second_oom_kill_without_evidence_against_the_budget_stops_instead_of_cutting_it(
    tmp_path: Path,
) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[3, 2], causes=["oom_kill", "oom_kill"])
    summary = await _runner(tmp_path, daemon, count=8).run()
    assert (summary.outcome, summary.completed, summary.failed) == ("failed", 5, 3)
    assert len(summary.restarts) == 1, "the budget is not cut again on a guess"
    assert summary.error is not None and "not retried: not the budget as far as the evidence goes" in summary.error
    notices = [e for e in iter_session_events(session.path) if isinstance(e, ev.Notice)]
    assert any(n.text.startswith("OOM kill not retried") for n in notices)


async def test_memory_outside_the_budget_is_named_and_not_blamed_on_the_budget(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1], causes=["oom_kill"])
    # A 200 GiB budget in a 256 GiB box, 40 GiB outside it when idle, 3 partitions in flight at the kill
    # beside the 44 GiB SRS: to fill the limit each would have held 57 GiB, more than any partition does (20 GiB).
    config = '[memory]\ntotal_budget = "200GiB"\n'
    seen = _killed_with(120 * GiB, 3, 40 * GiB)
    summary = await _runner(tmp_path, daemon, 4, config=config, seen=seen).run()
    assert summary.outcome == "failed" and summary.restarts == ()
    assert summary.error is not None
    assert "not the budget: 3 PoRep partitions were in flight at the last reading before the kill" in summary.error
    assert "each would have held 57.3 GiB of RSS, more than a partition's measured 20 GiB" in summary.error
    assert daemon.run == 0


async def test_partitions_that_outgrew_the_cgroup_lower_the_budget_to_as_many_as_fit(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1], causes=["oom_kill"])
    # 200 GiB budget, 10 partitions in flight beside the 44 GiB SRS, 30 GiB outside: each needed 18.2 GiB to
    # fill 256 GiB, and 8 of that size fit 256 − 5 (margin) − 30 − 69.7 (SRS + PCE): 69.7 + 8 × 14 = 182 GiB.
    config = '[memory]\ntotal_budget = "200GiB"\n'
    seen = _killed_with(184 * GiB, 10, 30 * GiB)
    summary = await _runner(tmp_path, daemon, 4, config=config, seen=seen).run()
    assert summary.outcome == "completed"
    (restart,) = summary.restarts
    assert restart.total_budget == "182GiB"
    assert restart.explanation.endswith(
        "each grows to at least 18.2 GiB of RSS by the kill's count, so 8 fit this cgroup's limit (256 GiB) "
        "beside SRS + PCE (69.7 GiB) and the 5 GiB safety margin"
    )


async def test_an_oom_kill_in_the_first_wave_lowers_the_budget_by_the_partitions_that_did_not_fit(
    tmp_path: Path,
) -> None:
    """The issue's box: the engine as 256 GiB, "auto" = 251 GiB. Thirteen partitions were reserved in a tenth
    of a second and killed while they grew; the sample before the kill had set an RSS of 207 GiB against the
    44 GiB of a reading a second older, and the recovery took 256 − 163 = 92 GiB (17.8 proofs/h after)."""
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1], causes=["oom_kill"])
    config = '[engine]\nmem_total = "256GiB"\n[memory]\ntotal_budget = "auto"\n'
    seen = (
        _status(0),
        _rss(10 * GiB),  # ready and idle: the engine's own memory, 10 GiB in the box's units
        _status(44 * GiB),  # the SRS reserved, still loading: not a reading to set an RSS against
        _rss(207 * GiB),
        _status(240 * GiB, 13, 44 * GiB),
    )
    summary = await _runner(tmp_path, daemon, 4, config=config, seen=seen).run()
    (restart,) = summary.restarts
    # 13 partitions of 16 GiB did not fit; 10 do: 69.7 GiB of SRS + PCE + 10 × 14 GiB, rounded up.
    assert restart.total_budget == "210GiB"
    assert restart.explanation.startswith(
        "13 PoRep partitions were in flight at the last reading before the kill (240 GiB reserved of 251 GiB; "
        "10 GiB outside the budget); each grows to 16 GiB of RSS once synthesized, so 10 fit"
    )
    assert 'total_budget = "210GiB"' in daemon.configs[-1]


async def test_an_engines_memory_outside_the_budget_is_its_boxs_not_its_process_trees(tmp_path: Path) -> None:
    """What the recovery weighs as the memory outside the budget is what the recorder records as an engine's
    RSS: its box's (at idle the daemon's own process, DAEMON_PROCESS_RSS), in the box's units. Its process
    tree × 256 (the interpreter and the input reader, ~10 GiB) admitted one partition fewer than fit."""
    require_engine()
    config = with_engine_status(engine_config_text(engine={"mem_total": "256GiB"}), "engine")
    live = SessionWriter(tmp_path / "live")
    supervisor = Supervisor(live, engine_program(), listen=f"unix://{tmp_path}/d.sock", start_timeout=60)
    recorded: list[ev.ObservedEvent] = []
    recorder = DaemonRecorder(supervisor, recorded.append)
    try:
        await supervisor.start(config)
        await recorder.sample_now()  # as the bench does once the daemon is ready
    finally:
        await recorder.stop()
        await supervisor.close(stop=True)
        live.close()
    (idle,) = [e for e in recorded if isinstance(e, ev.MemorySample)]
    assert idle.rss_bytes == pytest.approx(DAEMON_PROCESS_RSS * read_config(config).engine.memory_scale, rel=0.01)
    # The kill: 13 partitions in flight in the 256 GiB box, "auto" = 251 GiB.
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1], causes=["oom_kill"])
    seen = (*recorded, _status(240 * GiB, 13, 44 * GiB))
    summary = await _runner(tmp_path, daemon, 4, config=config, seen=seen).run()
    (restart,) = summary.restarts
    assert "(240 GiB reserved of 251 GiB; 191 MiB outside the budget)" in restart.explanation
    # 256 − 5 (margin) − 0.19 − 69.7 (SRS + PCE) leaves room for 11 partitions of 16.3 GiB: 69.7 + 11 × 14.
    assert restart.total_budget == "224GiB"


async def test_a_restart_sets_no_reading_of_the_killed_daemon_against_the_next(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1, 1], causes=["oom_kill", "oom_kill"])
    config = '[engine]\nmem_total = "256GiB"\n[memory]\ntotal_budget = "auto"\n'
    runner = _runner(tmp_path, daemon, 4, config=config, seen=_killed_with(240 * GiB, 13, 10 * GiB))
    summary = await runner.run()
    # The second daemon was killed before any reading of its own: the first one's 13 partitions are not its
    # evidence (they would give 210 GiB again), so the planner's model for 256 GiB decides (196 GiB).
    first, second = summary.restarts
    assert (first.total_budget, second.total_budget) == ("210GiB", "196GiB")
    assert second.explanation.endswith("no reading before the kill showed the partitions in flight")


async def test_memory_outside_the_budget_leaving_no_room_for_a_proof_stops(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1], causes=["oom_kill"])
    config = '[memory]\ntotal_budget = "200GiB"\n'
    # 180 GiB outside the budget when idle: beside SRS + PCE and the margin, not one 16 GiB partition fits.
    seen = _killed_with(72 * GiB, 2, 180 * GiB)
    summary = await _runner(tmp_path, daemon, 4, config=config, seen=seen).run()
    assert summary.outcome == "failed" and summary.restarts == ()
    assert summary.error is not None and "so no total_budget can prove here" in summary.error


async def test_running_out_of_oom_retries_fails_and_marks_the_rest_lost(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1, 1], causes=["oom_kill", "oom_kill"])
    summary = await _runner(tmp_path, daemon, count=4, retries=0).run()
    assert (summary.outcome, summary.completed, summary.failed) == ("failed", 1, 3)
    assert [r.status for r in summary.results] == ["COMPLETED", "LOST", "LOST", "LOST"]
    assert summary.error is not None and "no OOM retries left" in summary.error


async def test_the_summary_prints_no_made_up_timings_for_unanswered_proofs(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[1], causes=["oom_kill"])
    summary = await _runner(tmp_path, daemon, count=3, retries=0).run()
    lines = format_summary(summary).splitlines()
    lost = [line for line in lines if " LOST — " in line]
    assert len(lost) == 2 and all(
        "no result: the daemon died (oom_kill)" in line and "prove=" not in line for line in lost
    )
    assert "  of which lost: 2 (never answered: 2 with their daemon)" in lines
    # Unlike cuzk-bench's, the report says that prove is summed over partitions (it can exceed the wall time).
    prove = next(i for i, line in enumerate(lines) if line.startswith("prove time:"))
    assert lines[prove + 1] == "  (prove: the daemon's GPU time summed over the proof's partitions)"
    total = next(line for line in lines if line.startswith("total time:"))
    assert "in killed daemon runs" in total
    assert all(p["wall_ms"] is None and p["gpu_compute_ms"] is None for p in summary.to_json()["proofs"][1:])


async def test_a_failed_call_is_a_failure_without_timings(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[], causes=[])

    async def refuse(request: pb.SubmitProofRequest, timeout: float | None = None) -> Any:
        raise DaemonCallError("Prove", "INVALID_ARGUMENT", "bad request")

    daemon.prove = refuse  # type: ignore[method-assign]
    summary = await _runner(tmp_path, daemon, count=1).run()
    (line,) = [line for line in format_summary(summary).splitlines() if "[1/1]" in line]
    assert line.startswith("  [1/1] FAILED — no result: the call failed (") and "prove=" not in line


async def test_a_failed_proof_shows_the_daemons_reason_and_no_timings(tmp_path: Path) -> None:
    # issue 27.3: cuzk-bench prints "[1/1] FAILED — 0.2s (prove=0 ms, queue=0 ms)" and the reason is lost.
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[], causes=[])
    reason = "C1 parse failed: failed to deserialize SealCommitPhase1Output from JSON"

    async def fail(request: pb.SubmitProofRequest, timeout: float | None = None) -> Any:
        return pb.AwaitProofResponse(
            job_id=request.request_id, status=pb.AwaitProofResponse.FAILED, error_message=reason
        )

    daemon.prove = fail  # type: ignore[method-assign]
    summary = await _runner(tmp_path, daemon, count=1).run()
    (line,) = [line for line in format_summary(summary).splitlines() if "[1/1]" in line]
    assert line.startswith("  [1/1] FAILED — ") and line.endswith(f"s: {reason}") and "prove=" not in line
    assert summary.error == "1 of 1 proofs failed"


class _LosingDaemon(_ScriptedDaemon):
    """A pipeline daemon that loses the monolithic jobs named in ``lost``: their Prove never returns, and its log
    shows each queued and then replaced by the next one in the GPU queue (engine.rs PriorityWorkQueue, key (0, 0))."""

    def __init__(self, session: SessionWriter, lost: set[str]) -> None:
        super().__init__(session, survive=[], causes=[])
        self.lost = lost
        self.log = session.path / "daemon.log"
        self.offset_ms = 0
        self._write("2026-05-01T07:00:01.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true")

    def _write(self, *lines: str) -> None:
        with self.log.open("a") as out:
            out.write("".join(f"{line}\n" for line in lines))

    def run_log_follower(self, *, skip_inert: bool = False) -> LogFollower | None:
        return LogFollower(self.log, skip_inert=skip_inert, details=not skip_inert)

    async def prove(self, request: pb.SubmitProofRequest, timeout: float | None = None) -> pb.AwaitProofResponse:
        job, self.offset_ms = request.request_id, self.offset_ms + 10
        t = self.offset_ms
        self._write(f"TIMELINE,{t},SYNTH_START,{job},kind=winning-post", f"TIMELINE,{t},GPU_QUEUE,{job},monolithic")
        if job in self.lost:
            await asyncio.Event().wait()  # never answered, as upstream's caller of a replaced job
        self._write(
            f"TIMELINE,{t + 1},GPU_PICKUP,{job},worker=0",
            f"TIMELINE,{t + 1},GPU_START,{job},worker=0",
            f"TIMELINE,{t + 5},GPU_END,{job},worker=0,gpu_ms=4",
        )
        return pb.AwaitProofResponse(job_id=job, status=pb.AwaitProofResponse.COMPLETED, total_ms=6)


async def test_a_proof_the_daemons_log_shows_lost_is_not_waited_for(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    requests = build_requests("winning", 4, input_path=None, bench_id="b")
    lost = {requests[0].request_id, requests[2].request_id}
    daemon = _LosingDaemon(session, lost)
    options = BenchRequest(kind="winning", count=4, concurrency=2, oom_retries=0)
    runner = BenchRunner(daemon, options, SEED_CONFIG, requests=requests, bench_id="b")  # type: ignore[arg-type]
    # Concurrency 2: a lost proof holds its worker until the log shows it replaced (the next proof's GPU_END), and
    # the last one is only sent once the first lost one is given up: the log is read as it grows, mid-call.
    summary = await asyncio.wait_for(runner.run(), timeout=60)
    assert (summary.outcome, summary.completed, summary.failed, summary.lost_in_queue) == ("failed", 2, 2, 2)
    by_id = {r.job_id: r for r in summary.results}
    for job in lost:
        assert by_id[job].status == "LOST" and not by_id[job].answered
        assert "replaced in the monolithic GPU queue by" in by_id[job].error
    assert summary.error is not None and summary.error.startswith("2 of 4 proofs lost")
    assert "run PoSt at concurrency 1, or set pipeline.enabled = false, until upstream fixes it" in summary.error
    text = format_summary(summary)
    assert "  of which lost: 2 (never answered: 2 replaced in its monolithic GPU queue)" in text
    assert text.count("LOST — no result: replaced in the monolithic GPU queue by") == 2
    assert summary.to_json()["lost"] == summary.to_json()["lost_in_queue"] == 2
    recorded = [e for e in iter_session_events(session.path) if isinstance(e, ev.ProofFinished) and e.status == "LOST"]
    assert {e.job_id for e in recorded} == lost


async def test_an_engine_run_is_reported_in_the_modelled_box_time(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[], causes=[], elapsed_ms=60)
    config = '[engine]\nmem_total = "512GiB"\ntime_scale = 0.02\n[memory]\ntotal_budget = "auto"\n'
    summary = await _runner(tmp_path, daemon, count=2, config=config).run()
    assert summary.time_scale == 0.02 and summary.wall_s == pytest.approx(summary.real_wall_s * 50)
    assert summary.to_json()["time_basis"] == "modelled"
    assert summary.to_json()["proofs"][0]["gpu_compute_ms"] == 3000  # 60 ms of the engine's = 3 s of the box
    text = format_summary(summary)
    assert "times:       the modelled box's time (engine time_scale 0.02: real seconds × 50)" in text
    assert "(prove=3000 ms, queue=3000 ms)" in text
    started = next(e for e in iter_session_events(session.path) if isinstance(e, ev.BenchStarted))
    finished = next(e for e in iter_session_events(session.path) if isinstance(e, ev.BenchFinished))
    assert started.time_scale == 0.02 and finished.time_scale == 0.02
    assert finished.proofs_per_hour == pytest.approx(summary.proofs_per_hour)


async def test_a_real_daemon_run_is_reported_in_wall_time(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[], causes=[], elapsed_ms=60)
    daemon.mode = "real"
    summary = await _runner(tmp_path, daemon, count=1).run()
    assert summary.time_scale is None and summary.wall_s == summary.real_wall_s
    assert "(prove=60 ms, queue=60 ms)" in format_summary(summary)
    assert "times:" not in format_summary(summary)


async def test_a_death_that_is_not_an_oom_kill_fails_the_run_with_the_diagnosis(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[2], causes=["error"])
    summary = await _runner(tmp_path, daemon, count=4).run()
    assert summary.outcome == "failed" and summary.restarts == ()
    assert summary.error is not None and "the daemon died (error): exit status 101" in summary.error
    assert daemon.run == 0


async def test_cancel_stops_the_run(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    daemon = _ScriptedDaemon(session, survive=[], causes=[])
    runner = _runner(tmp_path, daemon, count=50)
    original = daemon.prove

    async def prove_then_cancel(request: pb.SubmitProofRequest, timeout: float | None = None) -> Any:
        if len(daemon.proved[0]) == 3:
            runner.cancel()
        return await original(request, timeout)

    daemon.prove = prove_then_cancel  # type: ignore[method-assign]
    summary = await runner.run()
    assert summary.outcome == "cancelled"
    assert 3 <= summary.completed < 50
    assert next(e for e in iter_session_events(session.path) if isinstance(e, ev.BenchFinished)).outcome == "cancelled"


def test_a_c1_gives_its_sector_and_flags_give_the_rest(tmp_path: Path) -> None:
    c1 = tmp_path / "porep-c1.json"
    c1.write_bytes(pi.generate_c1(miner_id=4242, sector_num=9, size=0))
    from_file = build_requests("porep", 1, input_path=c1, bench_id="b")[0]
    assert (from_file.sector_number, from_file.miner_id) == (9, 1000)  # the miner id is not in a C1
    assert c1_identity_warning(from_file.vanilla_proof, 1000, 9) is not None
    flagged = build_requests("porep", 1, input_path=c1, bench_id="b", params=pi.RequestParams(miner_id=4242))[0]
    assert (flagged.request_id, flagged.miner_id) == ("porep-4242-9-1", 4242)
    assert c1_identity_warning(flagged.vanilla_proof, 4242, 9) is None
    other = build_requests("porep", 1, input_path=c1, bench_id="b", params=pi.RequestParams(sector_num=3))[0]
    assert other.sector_number == 3


def test_synthetic_inputs_come_from_the_generator_and_parse_as_the_daemon_does() -> None:
    params = pi.RequestParams(miner_id=77)
    porep = build_requests("porep", 2, input_path=None, bench_id="b", params=params)
    for request in porep:
        _, c1 = pi.parse_c1(request.vanilla_proof)
        assert c1.replica_id == pi.replica_id(77, request.sector_number, c1.ticket, c1.comm_d, c1.ffi_id)
    snap = build_requests("snap", 1, input_path=None, bench_id="b")[0]
    assert all(pi.parse_update_vanilla(p) for p in snap.vanilla_proofs)
    winning = build_requests("winning", 1, input_path=None, bench_id="b")[0]
    assert pi.parse_post_vanilla(winning.vanilla_proofs[0])[1] == 1 and winning.randomness != bytes(32)


def test_snapdeals_comms_and_post_randomness_come_from_flags_or_the_files_beside_the_input(tmp_path: Path) -> None:
    vanilla = tmp_path / "snap-vanilla.json"
    vanilla.write_bytes(pi.vanilla_json([pi.generate_snap_vanilla(n) for n in range(16)]))
    with pytest.raises(BenchUsageError, match="needs --comm-r-old"):
        build_requests("snap", 1, input_path=vanilla, bench_id="b")
    comms = pi.SnapCommitments.generate("x")
    (tmp_path / pi.SNAP_COMMS_FILE).write_text("".join(f"{f} {v}\n" for f, v in comms.flags()))
    request = build_requests("snap", 1, input_path=vanilla, bench_id="b")[0]
    assert (request.comm_r_old, request.comm_r_new, request.comm_d_new) == (
        comms.comm_r_old,
        comms.comm_r_new,
        comms.comm_d_new,
    )
    flag = bytes(range(32))
    assert (
        build_requests("snap", 1, input_path=vanilla, bench_id="b", params=pi.RequestParams(comm_r_new=flag))[
            0
        ].comm_r_new
        == flag
    )
    post = tmp_path / "winning-vanilla.json"
    post.write_bytes(pi.vanilla_json([pi.generate_post_vanilla(1, 1)]))
    assert build_requests("winning", 1, input_path=post, bench_id="b")[0].randomness == bytes(32)  # cuzk-bench's
    (tmp_path / pi.POST_RANDOMNESS_FILE).write_text(f"--randomness {flag.hex()}\n")
    assert build_requests("winning", 1, input_path=post, bench_id="b")[0].randomness == flag
    zero = pi.RequestParams(randomness=bytes(32))
    assert build_requests("winning", 1, input_path=post, bench_id="b", params=zero)[0].randomness == bytes(32)


@pytest.mark.parametrize(
    ("spelled", "kind"),
    [("porep-c2", "porep"), ("seal-commit", "porep"), ("update", "snap"), ("snap-deals", "snap"),
     ("window-post", "wpost"), ("WindowPoSt", "wpost"), ("winningpost", "winning"), ("winning-post", "winning")],
)  # fmt: skip
def test_cuzk_bench_batch_spellings_are_accepted(spelled: str, kind: str) -> None:
    args = build_parser().parse_args(
        ["bench", "-t", spelled, "--c1", "f.json", "-c", "12", "-j", "6", "--miner-id", "5", "--sector-num", "8",
         "--registered-proof", "13", "--comm-r-old", "00" * 32, "--randomness", "ab" * 32]
    )  # fmt: skip
    assert (args.kind, args.input, args.count, args.concurrency) == (kind, "f.json", 12, 6)
    params = request_params(args)
    assert (params.miner_id, params.sector_num, params.registered_proof) == (5, 8, 13)
    assert params.comm_r_old == bytes(32) and params.randomness == b"\xab" * 32
    assert build_parser().parse_args(["bench", "--vanilla", "v.json", "--type", spelled]).input == "v.json"


@pytest.mark.parametrize(
    "params",
    [
        pi.RequestParams(),
        pi.RequestParams(miner_id=4242, sector_num=0, registered_proof=13, synthetic_size=3_000_000),
        pi.RequestParams(
            randomness=b"\x01" * 32, comm_r_old=bytes(32), comm_r_new=b"\xab" * 32, comm_d_new=b"\xcd" * 32
        ),
    ],
)
def test_the_flags_a_runner_is_started_with_give_back_the_same_request_fields(params: pi.RequestParams) -> None:
    args = build_parser().parse_args(["bench", "--headless", "--engine", *params.flags()])
    assert request_params(args) == params


def test_an_unknown_type_is_refused_with_cuzk_benchs_wording(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["bench", "-t", "c2"])
    assert exit_.value.code == 2
    assert "unknown proof type: c2. Use: porep, snap, wpost, winning" in capsys.readouterr().err


def test_a_runners_error_is_what_this_run_said_last_in_its_output(tmp_path: Path) -> None:
    """The TUI reads a failed runner's error back from bench.log, which gathers every run of the session:
    this run's last ``cuzk-tui bench:`` line and what follows it (the daemon's own report), else its last
    line (an uncaught exception), nothing when it wrote nothing."""
    output = tmp_path / "bench.log"
    output.write_text("12:00:00 starting cuzk-engine\ncuzk-tui bench: an earlier run's error\n")
    start = output.stat().st_size
    assert runner_error(output, start) == ""  # this run has written nothing yet
    with output.open("a") as f:
        f.write("12:01:00 daemon ready (pid 7)\n=== Batch Summary ===\nerror:         the daemon died\n")
        f.write("cuzk-tui bench: the daemon died (exited 101): panicked\nthread 'main' panicked: no GPU visible\n\n")
    assert (
        runner_error(output, start) == "the daemon died (exited 101): panicked\nthread 'main' panicked: no GPU visible"
    )
    crashed = output.stat().st_size
    with output.open("a") as f:
        f.write('Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: boom\n')
    assert runner_error(output, crashed) == "RuntimeError: boom"
    assert runner_error(tmp_path / "missing.log", 0) == ""
