"""The lines of upstream's monolithic provers (cuzk-core prover.rs ``prove_porep_c2``,
``prove_winning_post``, ``prove_window_post``, ``prove_snap_deals``), which the monolithic GPU
workers of ``pipeline.enabled = false`` run inside their ``monolithic_worker`` span.

Only what the lines need is read from the request; validating the input is engine/inputs' job
and happens before these lines are written.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind

from .jobs import Job, ProofRequest
from .srs import CONSTRAINTS
from .tracing import Fields, Quoted, Span

# Debug names of the proof types, from their FFI numbers (prover.rs registered_post_proof_from_u64,
# registered_update_proof_from_u64); an unknown number never gets this far (the parse fails).
POST_PROOFS: Final = {
    0: "StackedDrgWinning2KiBV1",
    1: "StackedDrgWinning8MiBV1",
    2: "StackedDrgWinning512MiBV1",
    3: "StackedDrgWinning32GiBV1",
    4: "StackedDrgWinning64GiBV1",
    5: "StackedDrgWindow2KiBV1",
    6: "StackedDrgWindow8MiBV1",
    7: "StackedDrgWindow512MiBV1",
    8: "StackedDrgWindow32GiBV1",
    9: "StackedDrgWindow64GiBV1",
    10: "StackedDrgWindow2KiBV1_2",
    11: "StackedDrgWindow8MiBV1_2",
    12: "StackedDrgWindow512MiBV1_2",
    13: "StackedDrgWindow32GiBV1_2",
    14: "StackedDrgWindow64GiBV1_2",
}
UPDATE_PROOFS: Final = {
    0: "StackedDrg2KiBV1",
    1: "StackedDrg8MiBV1",
    2: "StackedDrg512MiBV1",
    3: "StackedDrg32GiBV1",
    4: "StackedDrg64GiBV1",
}
_WRAPPER_NUMBER: Final = {
    "sector_num": re.compile(rb'"SectorNum"\s*:\s*(\d+)'),
    "sector_size": re.compile(rb'"SectorSize"\s*:\s*(\d+)'),
}
_PHASE1_OUT: Final = re.compile(rb'"Phase1Out"\s*:\s*"([^"]*)"')
_REGISTERED: Final = re.compile(rb'"registered_proof"\s*:\s*"(\w+)"')
_B64_PEEK: Final = 4096  # base64 characters decoded at each end of Phase1Out to find registered_proof


@dataclass(frozen=True, slots=True)
class ProverLines:
    span: Span
    before: tuple[tuple[str, Fields], ...]  # logged before proving starts
    done: str  # logged when the proof is made, with proof_len and timings
    porep: bool

    def done_fields(self, prove_ms: int) -> Fields:
        if self.porep:
            return (("deser_ms", 0), ("prove_ms", prove_ms), ("total_ms", prove_ms))
        return (("prove_ms", prove_ms), ("total_ms", prove_ms))


def _registered_seal_proof(phase1_out: bytes) -> str:
    """The C1's ``registered_proof`` name, read from the decoded ends of its base64 (no full decode)."""
    usable = len(phase1_out) - len(phase1_out) % 4
    for chunk in (phase1_out[: min(_B64_PEEK, usable)], phase1_out[usable - min(_B64_PEEK, usable) : usable]):
        try:
            match = _REGISTERED.search(base64.b64decode(chunk))
        except (binascii.Error, ValueError):
            continue
        if match:
            return match.group(1).decode()
    return "StackedDrg32GiBV1_1"


def prover_lines(request: ProofRequest, job_id: str) -> ProverLines:
    def span(name: str) -> Span:
        return Span(name, (("job_id", Quoted(job_id)),))  # `job_id = job_id` of a &str: Debug-quoted

    kind = request.kind
    if kind is ProofKind.POREP_SEAL_COMMIT:
        raw = request.vanilla_proof
        numbers = {name: pattern.search(raw) for name, pattern in _WRAPPER_NUMBER.items()}
        phase1 = _PHASE1_OUT.search(raw)
        b64 = phase1.group(1) if phase1 else b""
        return ProverLines(
            span("prove_porep_c2"),
            (
                (
                    msg.PARSED_C1_WRAPPER,
                    (
                        *((name, int(m.group(1)) if m else 0) for name, m in numbers.items()),
                        ("phase1_out_b64_len", len(b64)),
                    ),
                ),
                (msg.DESERIALIZED_C1, (("registered_proof", _registered_seal_proof(b64)), ("deser_ms", 0))),
                (
                    msg.CALLING_SEAL_COMMIT_PHASE2,
                    (("sector_id", request.sector_number), ("miner_id", request.miner_id)),
                ),
            ),
            msg.POREP_C2_PROOF_COMPLETED,
            porep=True,
        )
    if kind is ProofKind.SNAP_DEALS_UPDATE:
        return ProverLines(
            span("prove_snap_deals"),
            (
                (
                    msg.PROVING_SNAP_DEALS,
                    (
                        ("proof_type", UPDATE_PROOFS.get(request.registered_proof, "StackedDrg32GiBV1")),
                        ("num_partition_proofs", len(request.vanilla_proofs)),
                    ),
                ),
            ),
            msg.SNAP_DEALS_PROOF_COMPLETED,
            porep=False,
        )
    proof_type = ("proof_type", POST_PROOFS.get(request.registered_proof, ""))
    if kind is ProofKind.WINNING_POST:
        return ProverLines(
            span("prove_winning_post"),
            (
                (
                    msg.PROVING_WINNING_POST,
                    (proof_type, ("miner_id", request.miner_id), ("num_vanilla_proofs", len(request.vanilla_proofs))),
                ),
            ),
            msg.WINNING_POST_PROOF_COMPLETED,
            porep=False,
        )
    return ProverLines(
        span("prove_window_post"),
        (
            (
                msg.PROVING_WINDOW_POST,
                (
                    proof_type,
                    ("miner_id", request.miner_id),
                    ("partition_index", request.partition_index),
                    ("num_vanilla_proofs", len(request.vanilla_proofs)),
                ),
            ),
        ),
        msg.WINDOW_POST_PROOF_COMPLETED,
        porep=False,
    )


@dataclass(frozen=True, slots=True)
class SynthesisLines:
    """The lines of a monolithic synthesis in pipeline mode (pipeline.rs synthesize_*)."""

    span: Span
    before: tuple[tuple[str, Fields], ...]
    done: str  # logged with synth_ms, then ``done_fields``
    done_fields: Fields


def mono_synthesis_lines(batch: list[Job], circuits: int) -> SynthesisLines:
    first = batch[0].request
    job_id = ("job_id", Quoted(batch[0].job_id))
    kind = first.kind
    constraints = ("num_constraints", CONSTRAINTS[kind])
    if kind is ProofKind.POREP_SEAL_COMMIT:  # only batches get here: a single PoRep is partitioned
        sectors = ("num_sectors", len(batch))
        return SynthesisLines(
            Span("synthesize_porep_c2_multi", (job_id, sectors)),
            ((msg.MULTI_STARTING, (sectors,)), (msg.MULTI_SYNTHESIZING, (sectors, ("total_circuits", circuits)))),
            msg.MULTI_COMPLETE,
            (("num_circuits", circuits), constraints),
        )
    if kind is ProofKind.SNAP_DEALS_UPDATE:
        return SynthesisLines(
            Span("synthesize_snap_deals", (job_id,)),
            (
                (msg.SNAP_BUILDING, (("num_partitions", circuits), ("num_vanilla_proofs", len(first.vanilla_proofs)))),
                (msg.SNAP_SYNTHESIZING, (("num_circuits", circuits),)),
            ),
            msg.SNAP_COMPLETE,
            (("num_circuits", circuits), constraints),
        )
    if kind is ProofKind.WINNING_POST:
        return SynthesisLines(
            Span("synthesize_winning_post", (job_id,)),
            (
                (msg.WINNING_BUILDING, (("num_sectors", len(first.vanilla_proofs)),)),
                (msg.WINNING_SYNTHESIZING, (("num_circuits", circuits),)),
            ),
            msg.WINNING_COMPLETE,
            (constraints,),
        )
    return SynthesisLines(
        Span("synthesize_window_post", (job_id, ("partition", first.partition_index))),
        (
            (msg.WINDOW_BUILDING, (("num_sectors", len(first.vanilla_proofs)), ("partition", first.partition_index))),
            (msg.WINDOW_SYNTHESIZING, ()),
        ),
        msg.WINDOW_COMPLETE,
        (constraints,),
    )
