"""The engine parses every input as the daemon does on each path and fails with upstream's texts
(cuzk-core prover.rs / pipeline.rs / engine.rs); the PoRep self-check fails a proof made for another
miner; parsed payloads are not kept."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuzktui import proofinputs as pi
from cuzktui.daemon_config import Config
from cuzktui.daemon_facts import ProofKind
from cuzktui.logfilter import EnvFilter
from cuzktui.units import GiB
from engine.jobs import JobResult, ProofRequest, Status
from engine.pipeline import Engine
from engine.tracing import Logger
from tests.conftest import TEST_TIME_SCALE, post_vanilla, small_c1


@dataclass
class Running:
    engine: Engine
    log_path: Path

    async def prove(self, request: ProofRequest) -> JobResult:
        return await asyncio.wait_for(self.engine.prove(request), 60)

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Callable[..., Running]]:
    started: list[tuple[Engine, int]] = []

    def factory(*, pipeline: bool = True, max_batch_size: int = 1) -> Running:
        config = Config()
        config.total_budget = 400 * GiB
        config.pipeline_enabled = pipeline
        config.max_batch_size = max_batch_size
        config.max_batch_wait_ms = 60_000
        config.engine.time_scale = TEST_TIME_SCALE
        config.engine.memory_scale = 1 / 65536
        log_path = tmp_path / f"engine{len(started)}.log"
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        engine = Engine(config, Logger(EnvFilter.parse("info", lossy=False), colour=False, out_fd=fd, err_fd=fd))
        engine.start()
        started.append((engine, fd))
        return Running(engine, log_path)

    yield factory
    for engine, fd in started:
        await engine.aclose()
        os.close(fd)


def line(log: str, text: str) -> str:
    """The one log line that contains ``text``."""
    found = [row for row in log.splitlines(keepends=True) if text in row]
    assert len(found) == 1, (text, found)
    return found[0]


def porep(payload: bytes, miner_id: int = 1000, sector: int = 1, request_id: str = "porep-1000-1") -> ProofRequest:
    return ProofRequest(
        request_id, ProofKind.POREP_SEAL_COMMIT, vanilla_proof=payload, miner_id=miner_id, sector_number=sector
    )


def snap(**overrides: object) -> ProofRequest:
    comms = pi.SnapCommitments.generate()
    request = ProofRequest(
        "snap-1000-1",
        ProofKind.SNAP_DEALS_UPDATE,
        registered_proof=3,
        vanilla_proofs=[pi.generate_snap_vanilla(n, challenges=1) for n in range(pi.SNAP_PARTITIONS)],
        comm_r_old=comms.comm_r_old,
        comm_r_new=comms.comm_r_new,
        comm_d_new=comms.comm_d_new,
    )
    for name, value in overrides.items():
        setattr(request, name, value)
    return request


def winning(**overrides: object) -> ProofRequest:
    request = ProofRequest("winpost-1000-00", ProofKind.WINNING_POST, registered_proof=3, vanilla_proofs=post_vanilla())
    request.randomness = bytes(range(32))
    for name, value in overrides.items():
        setattr(request, name, value)
    return request


def window(**overrides: object) -> ProofRequest:
    request = ProofRequest(
        "wdpost-1000-0",
        ProofKind.WINDOW_POST_PARTITION,
        registered_proof=13,
        vanilla_proofs=[pi.generate_post_vanilla(n, 1) for n in range(3)],
        randomness=bytes(range(32)),
    )
    for name, value in overrides.items():
        setattr(request, name, value)
    return request


def wrapper(phase1: bytes | str) -> bytes:
    encoded = phase1 if isinstance(phase1, str) else base64.b64encode(phase1).decode()
    return json.dumps({"SectorNum": 1, "Phase1Out": encoded, "SectorSize": pi.SECTOR_SIZE_32G}).encode()


def small_sector_c1() -> bytes:
    """A 2 KiB-sector C1 (StackedDrg2KiBV1_1): proved by the monolithic path, refused by the pipeline."""
    return pi.generate_c1(miner_id=1000, sector_num=1, size=0, registered_proof=5)


MODULUS = pi.BLS12_381_SCALAR_MODULUS.to_bytes(32, "little")


def c1_with(**fields: bytes) -> bytes:
    """The compact sample C1 with some of its SealCommitPhase1Output's 32-byte fields replaced."""
    c1 = pi.parse_c1_wrapper(small_c1())
    phase1 = json.loads(base64.b64decode(c1.phase1_out))
    phase1.update({name: list(value) for name, value in fields.items()})
    return pi.wrap_phase1(json.dumps(phase1).encode(), c1.sector_num)


BAD_C1 = {
    "not JSON": (b"not json", "failed to parse C1 output wrapper JSON"),
    "no Phase1Out": (b'{"SectorNum": 1, "SectorSize": 34359738368}', "failed to parse C1 output wrapper JSON"),
    "not base64": (wrapper("not base64!"), "failed to decode base64 Phase1Output"),
    "not a SealCommitPhase1Output": (
        wrapper(b'{"hello": 1}'),
        "failed to deserialize SealCommitPhase1Output from JSON",
    ),
}


@pytest.mark.parametrize("name", ["comm_r", "comm_d"])
async def test_a_c1_commitment_that_is_no_field_element_is_refused(start: Callable[..., Running], name: str) -> None:
    """pipeline.rs parse_c1_output: as_safe_commitment after the sector size, before the all-zero checks
    (which an all-zero commitment, a field element, still reaches)."""
    pipeline = start()
    result = await pipeline.prove(porep(c1_with(**{name: b"\xff" * 32})))
    assert result.error == f"C1 parse failed: Invalid commitment ({name})"
    assert " ERROR " in line(pipeline.log(), f"Phase 7: C1 parse/SRS load failed error=Invalid commitment ({name})\n")
    zero = await pipeline.prove(porep(c1_with(**{name: bytes(32)}), request_id="porep-1000-2"))
    assert zero.error == f"C1 parse failed: Invalid all zero commitment ({name})"
    monolithic = start(pipeline=False)
    assert (await monolithic.prove(porep(c1_with(**{name: MODULUS})))).error == "seal_commit_phase2 failed"


async def test_randomness_just_below_the_modulus_is_a_field_element(start: Callable[..., Running]) -> None:
    below = (pi.BLS12_381_SCALAR_MODULUS - 1).to_bytes(32, "little")
    running = start()
    assert (await running.prove(winning(randomness=below))).status is Status.COMPLETED
    assert (await running.prove(snap(comm_r_new=below))).status is Status.COMPLETED


@pytest.mark.parametrize("case", list(BAD_C1))
async def test_a_bad_c1_fails_with_upstreams_context_on_each_path(start: Callable[..., Running], case: str) -> None:
    payload, context = BAD_C1[case]
    pipeline = start()
    result = await pipeline.prove(porep(payload))
    assert result.status is Status.FAILED and result.error == f"C1 parse failed: {context}"
    assert " ERROR " in line(pipeline.log(), f"cuzk_core::engine: Phase 7: C1 parse/SRS load failed error={context}\n")
    monolithic = start(pipeline=False)
    result = await monolithic.prove(porep(payload))
    assert result.status is Status.FAILED and result.error == context
    assert " ERROR monolithic_worker{" in line(monolithic.log(), f"cuzk_core::engine: proof failed error={context}\n")


async def test_the_pipeline_refuses_other_sector_sizes_the_monolithic_path_proves_them(
    start: Callable[..., Running],
) -> None:
    result = await start().prove(porep(small_sector_c1()))
    assert result.error == "C1 parse failed: pipelined synthesis currently supports only 32 GiB sectors, got 2048 bytes"
    assert (await start(pipeline=False).prove(porep(small_sector_c1()))).status is Status.COMPLETED


async def test_a_multi_sector_batch_fails_as_one_synthesis(start: Callable[..., Running]) -> None:
    running = start(max_batch_size=2)
    good = running.engine.prove(porep(small_c1(), request_id="porep-1000-1"))
    bad = running.engine.prove(porep(small_sector_c1(), request_id="porep-1000-2"))
    text = "synthesis failed: multi-sector synthesis currently supports only 32 GiB sectors, got 2048 bytes"
    assert [(await asyncio.wait_for(w, 60)).error for w in (good, bad)] == [text, text]


@pytest.mark.parametrize(
    ("request_factory", "pipeline_error", "monolithic_error"),
    [
        (
            lambda: snap(comm_r_old=b""),
            "SnapDeals parse failed: comm_r_old must be exactly 32 bytes, got 0",
            "comm_r_old must be exactly 32 bytes, got 0",
        ),
        (
            lambda: snap(registered_proof=9),
            "SnapDeals parse failed: invalid registered proof for SnapDeals",
            "invalid registered proof for SnapDeals",
        ),
        (
            lambda: snap(vanilla_proofs=[b"garbage"] * 16),
            "SnapDeals parse failed: failed to deserialize SnapDeals partition proof: io error: ",
            "generate_empty_sector_update_proof_with_vanilla failed",
        ),
        (
            lambda: snap(vanilla_proofs=[]),
            "partition 0 synthesis failed: partition 0 >= vanilla_proofs.len() 0",
            "generate_empty_sector_update_proof_with_vanilla failed",
        ),
        (
            lambda: winning(randomness=b""),
            "synthesis failed: randomness must be exactly 32 bytes, got 0",
            "randomness must be exactly 32 bytes, got 0",
        ),
        (
            lambda: winning(vanilla_proofs=[b"garbage"]),
            "synthesis failed: failed to deserialize WinningPoSt vanilla proof: io error: ",
            "generate_winning_post_with_vanilla failed",
        ),
        (
            lambda: winning(vanilla_proofs=[]),
            "synthesis failed: no WinningPoSt vanilla proofs",
            "generate_winning_post_with_vanilla failed",
        ),
        # filecoin-proofs as_safe_commitment: 32 bytes at or above the BLS12-381 scalar modulus.
        (
            lambda: snap(comm_r_old=b"\xff" * 32),
            "SnapDeals parse failed: Invalid commitment (comm_r_old)",
            "generate_empty_sector_update_proof_with_vanilla failed",
        ),
        (
            lambda: snap(comm_d_new=MODULUS),
            "SnapDeals parse failed: Invalid commitment (comm_d_new)",
            "generate_empty_sector_update_proof_with_vanilla failed",
        ),
        (
            lambda: winning(randomness=b"\xff" * 32),
            "synthesis failed: Invalid commitment (randomness)",
            "generate_winning_post_with_vanilla failed",
        ),
        (
            lambda: window(randomness=MODULUS),
            "synthesis failed: Invalid commitment (randomness)",
            "generate_single_window_post_with_vanilla failed",
        ),
        (
            lambda: window(registered_proof=99),
            "synthesis failed: invalid registered proof for WindowPoSt",
            "invalid registered proof for WindowPoSt",
        ),
        (
            lambda: window(vanilla_proofs=[b"\x01" * 40]),
            "synthesis failed: failed to deserialize WindowPoSt vanilla proof: io error: ",
            "generate_single_window_post_with_vanilla failed",
        ),
    ],
)
async def test_bad_snapdeals_and_post_inputs_fail_with_upstreams_texts(
    start: Callable[..., Running],
    request_factory: Callable[[], ProofRequest],
    pipeline_error: str,
    monolithic_error: str,
) -> None:
    pipeline = start()
    assert (await pipeline.prove(request_factory())).error == pipeline_error
    assert (await start(pipeline=False).prove(request_factory())).error == monolithic_error
    # ERROR lines carry the error as `error = %e` does: the text itself, the job's prefix apart.
    assert "error=" + pipeline_error.split(": ", 1)[1] in pipeline.log()


async def test_an_empty_windowpost_partition_panics_as_upstreams_synthesis_does(start: Callable[..., Running]) -> None:
    running = start()
    result = await running.prove(window(vanilla_proofs=[]))
    assert result.error.startswith("synthesis panicked: task ")
    assert result.error.endswith(
        ' panicked with message "index out of bounds: the len is 0 but the index is 18446744073709551615"'
    )
    assert "ERROR cuzk_core::engine: synthesis task panicked error=task " in running.log()


async def test_generated_inputs_of_every_kind_are_proved_on_both_paths(start: Callable[..., Running]) -> None:
    for pipeline in (True, False):
        running = start(pipeline=pipeline)
        for request in (porep(small_c1()), snap(), winning(), window()):
            result = await running.prove(request)
            assert (result.status, result.error) == (Status.COMPLETED, ""), (pipeline, request.kind)


async def test_a_c1_of_another_miner_is_proved_then_fails_the_self_check(start: Callable[..., Running]) -> None:
    running = start()
    passed = await running.prove(porep(small_c1(), request_id="porep-1000-1"))
    failed = await running.prove(porep(small_c1(), miner_id=2000, request_id="porep-2000-1"))
    assert passed.status is Status.COMPLETED
    assert failed.status is Status.FAILED
    assert failed.error == "PoRep proof self-check failed: assembled proof did not verify (sector=1, miner=2000)"
    log = running.log()
    assert "INFO cuzk_core::engine: Phase 7: PoRep proof self-check PASSED job_id=porep-1000-1\n" in log
    # Proved in full first: the proof is assembled, then the self-check rejects it.
    assembled = log.index("Phase 7: all partitions complete, proof assembled job_id=porep-2000-1")
    verdict = log.index(
        "ERROR cuzk_core::engine: Phase 7: PoRep proof self-check FAILED — proof will NOT be returned to caller"
        " job_id=porep-2000-1 proof_len=1920 sector=1 miner=2000\n"
    )
    assert assembled < verdict
    assert (
        ' WARN verify_porep_proof{job_id="porep-2000-1"}: cuzk_core::prover: PoRep proof self-check FAILED — proof is'
        " invalid job_id=porep-2000-1 registered_proof=StackedDrg32GiBV1_1 proof_len=1920 sector_number=1"
        " miner_id=2000\n" in log
    )
    # A wrong sector number is as wrong as a wrong miner.
    assert (await running.prove(porep(small_c1(), sector=2, request_id="porep-1000-2"))).status is Status.FAILED


async def test_the_self_check_in_batches_and_in_monolithic_mode(start: Callable[..., Running]) -> None:
    batched = start(max_batch_size=2)
    good = batched.engine.prove(porep(small_c1(), request_id="porep-1000-1"))
    bad = batched.engine.prove(porep(small_c1(), miner_id=7, request_id="porep-7-1"))
    results = [await asyncio.wait_for(w, 60) for w in (good, bad)]
    assert results[0].status is Status.COMPLETED
    assert results[1].error == "PoRep proof self-check failed: batched proof 1 did not verify (sector=1, miner=7)"
    monolithic = start(pipeline=False)
    assert (await monolithic.prove(porep(small_c1(), miner_id=7))).error == "seal_commit_phase2 failed"


async def test_payloads_are_dropped_once_parsed(start: Callable[..., Running]) -> None:
    """Upstream keeps a finished job's status only; the engine's /status view keeps partitioned
    jobs (a failed one for good, as status.rs does) but none of their input bytes."""
    running = start()
    for n in range(3):
        await running.prove(porep(small_c1(), request_id=f"porep-1000-{n}"))
    await running.prove(porep(small_c1(), miner_id=5, request_id="porep-5-1"))  # fails its self-check
    await running.prove(snap())
    shown = list(running.engine.pipelines.values())
    assert {job.job_id for job in shown} >= {"porep-5-1"}
    assert all(job.request.vanilla_proof == b"" and not any(job.request.vanilla_proofs) for job in shown)
