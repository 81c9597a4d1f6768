"""The lines of upstream's monolithic provers (cuzk-core prover.rs ``prove_porep_c2``,
``prove_winning_post``, ``prove_window_post``, ``prove_snap_deals``), which the monolithic GPU
workers of ``pipeline.enabled = false`` run inside their ``monolithic_worker`` span.

What the lines say of the input comes from what engine/inputs read of it on arrival; they are
written only for an input that parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind

from .jobs import Job
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


def prover_lines(job: Job) -> ProverLines:
    """The lines of a job whose input parsed (``job.input``)."""
    request, summary = job.request, job.input
    assert summary is not None

    def span(name: str) -> Span:
        return Span(name, (("job_id", Quoted(job.job_id)),))  # `job_id = job_id` of a &str: Debug-quoted

    kind = request.kind
    vanilla = summary.vanilla_count
    if kind is ProofKind.POREP_SEAL_COMMIT:
        assert summary.c1 is not None
        sector_num, sector_size, b64_len = summary.c1_wrapper
        return ProverLines(
            span("prove_porep_c2"),
            (
                (
                    msg.PARSED_C1_WRAPPER,
                    (("sector_num", sector_num), ("sector_size", sector_size), ("phase1_out_b64_len", b64_len)),
                ),
                (msg.DESERIALIZED_C1, (("registered_proof", summary.c1.registered_proof), ("deser_ms", 0))),
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
                        ("num_partition_proofs", vanilla),
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
                    (proof_type, ("miner_id", request.miner_id), ("num_vanilla_proofs", vanilla)),
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
                    ("num_vanilla_proofs", vanilla),
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
    """The lines of a batch whose inputs parsed."""
    first = batch[0].request
    assert batch[0].input is not None
    vanilla = batch[0].input.vanilla_count
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
                (msg.SNAP_BUILDING, (("num_partitions", circuits), ("num_vanilla_proofs", vanilla))),
                (msg.SNAP_SYNTHESIZING, (("num_circuits", circuits),)),
            ),
            msg.SNAP_COMPLETE,
            (("num_circuits", circuits), constraints),
        )
    if kind is ProofKind.WINNING_POST:
        return SynthesisLines(
            Span("synthesize_winning_post", (job_id,)),
            (
                (msg.WINNING_BUILDING, (("num_sectors", vanilla),)),
                (msg.WINNING_SYNTHESIZING, (("num_circuits", circuits),)),
            ),
            msg.WINNING_COMPLETE,
            (constraints,),
        )
    return SynthesisLines(
        Span("synthesize_window_post", (job_id, ("partition", first.partition_index))),
        (
            (msg.WINDOW_BUILDING, (("num_sectors", vanilla), ("partition", first.partition_index))),
            (msg.WINDOW_SYNTHESIZING, ()),
        ),
        msg.WINDOW_COMPLETE,
        (constraints,),
    )
