"""Input validation as the daemon does it, per path, with upstream's texts; and the PoRep self-check.

Which checks run, in which order and with which text depends on the path a request takes
(the texts are anyhow contexts, whose Display is the outermost one):

* ``PARTITIONED`` — pipeline mode, single PoRep / SnapDeals: pipeline.rs ``parse_c1_output`` /
  ``parse_snap_deals_input``; the engine prefixes ``C1 parse failed: `` / ``SnapDeals parse failed: ``
  (engine.rs, the per-partition dispatch).
* ``SYNTHESIS`` / ``BATCH`` — pipeline mode, whole-proof synthesis: pipeline.rs
  ``synthesize_porep_c2_batch`` / ``synthesize_porep_c2_multi`` / ``synthesize_winning_post`` /
  ``synthesize_window_post`` / ``synthesize_snap_deals``; the engine prefixes ``synthesis failed: ``.
* ``MONOLITHIC`` — ``pipeline.enabled = false``: prover.rs ``prove_porep_c2`` / ``prove_winning_post`` /
  ``prove_window_post`` / ``prove_snap_deals``; the bare context is the job's error.

The payload is read once, when the request arrives (:func:`summarize`, on a thread: upstream parses
on blocking threads, off its async runtime), into an :class:`InputSummary`; the path's checks
(:func:`check`) then run on that summary where upstream parses, and the payload itself is gone.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui import proofinputs as pi
from cuzktui.daemon_facts import ProofKind

from . import tracing
from .jobs import ProofRequest
from .tracing import Logger, Quoted, Span


class Panic(pi.InputError):
    """A panic in the blocking task (engine.rs reports "… panicked: <JoinError>")."""

    def join_error(self, task_id: int) -> str:
        """tokio ``JoinError``'s Display for a panic with a string payload."""
        return f"task {task_id} panicked with message {tracing.format_value(Quoted(str(self)))}"


class Path(Enum):
    PARTITIONED = "partitioned"
    SYNTHESIS = "synthesis"
    BATCH = "batch"
    MONOLITHIC = "monolithic"


# The prover.rs function whose context a monolithic failure after deserialisation carries.
MONOLITHIC_CALL: Final = {
    ProofKind.POREP_SEAL_COMMIT: "seal_commit_phase2 failed",
    ProofKind.WINNING_POST: "generate_winning_post_with_vanilla failed",
    ProofKind.WINDOW_POST_PARTITION: "generate_single_window_post_with_vanilla failed",
    ProofKind.SNAP_DEALS_UPDATE: "generate_empty_sector_update_proof_with_vanilla failed",
}
_POST_LABEL: Final = {ProofKind.WINNING_POST: "WinningPoSt", ProofKind.WINDOW_POST_PARTITION: "WindowPoSt"}


@dataclass(frozen=True, slots=True)
class Payload:
    """A request's input where it lies: the C1 is ``data[start:end]`` and ``blobs`` are the vanilla
    proofs, views of the gRPC message's own bytes (never copied)."""

    data: bytes | bytearray
    start: int
    end: int
    blobs: tuple[memoryview, ...] = ()

    @classmethod
    def of(cls, request: ProofRequest) -> Payload:
        """The input a request built in this process carries (tests, in-process benchmarks)."""
        blobs = tuple(memoryview(blob) for blob in request.vanilla_proofs)
        return cls(request.vanilla_proof, 0, len(request.vanilla_proof), blobs)

    @property
    def size(self) -> int:
        return self.end - self.start + sum(len(blob) for blob in self.blobs)


@dataclass(frozen=True, slots=True)
class InputSummary:
    """What the engine keeps of a request's input, read once on arrival."""

    digest: bytes  # the proofs are derived from it (deterministic, not valid)
    vanilla_count: int  # vanilla proofs sent (lines report it)
    # Why the input does not read (the innermost context: the C1's layer, or the first vanilla
    # proof's bincode error); None when it reads.
    failure: str | None = None
    c1: pi.Phase1Output | None = None
    c1_wrapper: tuple[int, int, int] = (0, 0, 0)  # SectorNum, SectorSize, Phase1Out's base64 length
    vanilla: tuple[int, ...] = ()  # per vanilla proof read: PoSt sector proofs / SnapDeals challenges


def _digest(request: ProofRequest, payload: Payload) -> bytes:
    h = hashlib.sha256()
    r = request
    for number in (r.kind, r.registered_proof, r.sector_number, r.miner_id, r.partition_index):
        h.update(int(number).to_bytes(8, "little"))
    c1 = memoryview(payload.data)[payload.start : payload.end]
    blobs: tuple[bytes | memoryview, ...] = (r.randomness, r.comm_r_old, r.comm_r_new, r.comm_d_new, c1, *payload.blobs)
    for blob in blobs:
        h.update(len(blob).to_bytes(8, "little"))
        h.update(blob)  # hashlib lets other threads run while it hashes a large buffer
    return h.digest()


def summarize(request: ProofRequest, payload: Payload) -> InputSummary:
    """Reads the payload as the daemon's parse would, whatever the path (a blocking call: run it on
    a thread); :func:`check` applies the path's rules to what it found."""
    digest = _digest(request, payload)
    count = len(payload.blobs)
    if request.kind is ProofKind.POREP_SEAL_COMMIT:
        try:
            wrapper, c1 = pi.parse_c1(payload.data, payload.start, payload.end)
        except pi.InputError as err:
            return InputSummary(digest, count, str(err))
        facts = (wrapper.sector_num, wrapper.sector_size, len(wrapper.phase1_out))
        return InputSummary(digest, count, c1=c1, c1_wrapper=facts)
    read = pi.parse_update_vanilla if request.kind is ProofKind.SNAP_DEALS_UPDATE else _post_sectors
    values: list[int] = []
    for blob in payload.blobs:
        try:
            values.append(read(blob))
        except pi.InputError as err:
            return InputSummary(digest, count, str(err), vanilla=tuple(values))
    return InputSummary(digest, count, vanilla=tuple(values))


def _post_sectors(blob: memoryview) -> int:
    return pi.parse_post_vanilla(blob)[1]


Reading = Callable[[ProofRequest, Payload], Awaitable[InputSummary]]


async def read_on_a_thread(request: ProofRequest, payload: Payload) -> InputSummary:
    """:func:`summarize` on a thread of this process: an in-process engine's way (the daemon's is
    its reader process, :mod:`engine.reader`)."""
    return await asyncio.to_thread(summarize, request, payload)


@dataclass(frozen=True, slots=True)
class Parsed:
    """What the engine keeps of an input once parsed (the payload itself is dropped)."""

    c1: pi.Phase1Output | None = None
    # Partition proofs a SnapDeals input holds when fewer than its partitions: parsing accepts
    # that, and the first partition without one fails its synthesis (the pipeline's job).
    vanilla_partitions: int | None = None


def _array32(value: bytes, name: str) -> None:
    """prover.rs ``to_array32``."""
    if len(value) != 32:
        raise pi.InputError(f"{name} must be exactly 32 bytes, got {len(value)}")


def _safe_commitment(request: ProofRequest, value: bytes, name: str, path: Path) -> None:
    """filecoin-proofs ``as_safe_commitment`` (api/util.rs, a crates.io dependency outside upstream's
    tree): 32 bytes that are no BLS12-381 scalar fail with ``Invalid commitment (<name>)``, the
    context pipeline.rs ``parse_c1_output``, ``parse_snap_deals_input`` and ``synthesize_*`` pass on.
    On the monolithic path filecoin-proofs' own ``seal_commit_phase2`` / ``generate_*_with_vanilla``
    make the check, and prover.rs's context is what the job's error shows."""
    if not pi.is_scalar(value):
        text = MONOLITHIC_CALL[request.kind] if path is Path.MONOLITHIC else f"Invalid commitment ({name})"
        raise pi.InputError(text)


def _only_32g(size: int, path: Path) -> None:
    if size != pi.SECTOR_SIZE_32G:
        what = "multi-sector" if path is Path.BATCH else "pipelined"
        raise pi.InputError(f"{what} synthesis currently supports only 32 GiB sectors, got {size} bytes")


def check_porep(request: ProofRequest, summary: InputSummary, path: Path) -> Parsed:
    if summary.failure is not None:
        raise pi.InputError(summary.failure)
    c1 = summary.c1
    assert c1 is not None
    if path is not Path.MONOLITHIC:
        _only_32g(c1.sector_size, path)
    _safe_commitment(request, c1.comm_r, "comm_r", path)
    _safe_commitment(request, c1.comm_d, "comm_d", path)
    if path is not Path.MONOLITHIC:
        if c1.comm_d == bytes(32):
            raise pi.InputError("Invalid all zero commitment (comm_d)")
        if c1.comm_r == bytes(32):
            raise pi.InputError("Invalid all zero commitment (comm_r)")
        if c1.seed == bytes(32):
            raise pi.InputError("Invalid porep challenge seed")
    return Parsed(c1=c1)


def check_snap(request: ProofRequest, summary: InputSummary, path: Path) -> Parsed:
    size = pi.UPDATE_PROOF_SIZES.get(request.registered_proof)
    if size is None:
        raise pi.InputError("invalid registered proof for SnapDeals")
    if path is not Path.MONOLITHIC:
        _only_32g(size, path)
    commitments = ("comm_r_old", "comm_r_new", "comm_d_new")
    for name in commitments:
        _array32(getattr(request, name), name)
    for name in commitments:
        _safe_commitment(request, getattr(request, name), name, path)
    if summary.failure is not None:
        if path is Path.MONOLITHIC:
            raise pi.InputError(MONOLITHIC_CALL[request.kind])
        raise pi.InputError(f"failed to deserialize SnapDeals partition proof: {summary.failure}")
    have = summary.vanilla_count
    if have < pi.SNAP_PARTITIONS:
        if path is Path.MONOLITHIC:
            raise pi.InputError(MONOLITHIC_CALL[request.kind])
        if path is Path.PARTITIONED:
            # pipeline.rs parse_snap_deals_input accepts too few; the first partition without one
            # fails its synthesis (build_snap_deals_partition_circuit), which fails the job.
            return Parsed(vanilla_partitions=have)
    return Parsed()


def check_post(request: ProofRequest, summary: InputSummary, path: Path) -> Parsed:
    label = _POST_LABEL[request.kind]
    if request.registered_proof not in pi.POST_PROOF_SIZES:
        raise pi.InputError(f"invalid registered proof for {label}")
    _array32(request.randomness, "randomness")
    if summary.failure is not None:
        if path is Path.MONOLITHIC:
            raise pi.InputError(MONOLITHIC_CALL[request.kind])
        raise pi.InputError(f"failed to deserialize {label} vanilla proof: {summary.failure}")
    sectors = summary.vanilla
    # synthesize_*_post: after the vanilla proofs are deserialized, before their count is looked at.
    _safe_commitment(request, request.randomness, "randomness", path)
    if path is Path.MONOLITHIC:
        if not sectors:
            raise pi.InputError(MONOLITHIC_CALL[request.kind])
        return Parsed()
    if request.kind is ProofKind.WINNING_POST:
        if not sectors:
            raise pi.InputError("no WinningPoSt vanilla proofs")
        if sectors[0] != 1:
            raise pi.InputError(f"WinningPoSt expected 1 sector proof, got {sectors[0]}")
    elif not sectors:
        # synthesize_window_post pads the partition by repeating its last sector proof: with none,
        # the index underflows and the blocking task panics.
        raise Panic("index out of bounds: the len is 0 but the index is 18446744073709551615")
    return Parsed()


def check(request: ProofRequest, summary: InputSummary, path: Path) -> Parsed:
    """Checks ``request``'s input (read into ``summary``) as the daemon would on ``path``; raises
    InputError(context)."""
    if request.kind is ProofKind.POREP_SEAL_COMMIT:
        return check_porep(request, summary, path)
    if request.kind is ProofKind.SNAP_DEALS_UPDATE:
        return check_snap(request, summary, path)
    return check_post(request, summary, path)


def self_check_passes(c1: pi.Phase1Output, request: ProofRequest) -> bool:
    """filecoin-proofs ``verify_seal`` recomputes the replica id from the request's miner id and
    sector number: a proof made from a C1 of another miner or sector does not verify."""
    expected = pi.replica_id(request.miner_id, request.sector_number, c1.ticket, c1.comm_d, c1.ffi_id)
    return expected == c1.replica_id


class CheckSite(Enum):
    """Where engine.rs runs the PoRep self-check, each with its own lines and failure text."""

    PARTITIONED = msg.SELF_CHECK_PARTITIONED  # after "proof assembled"
    SINGLE = msg.SELF_CHECK_SINGLE
    BATCHED = msg.SELF_CHECK_BATCHED


def self_check(
    log: Logger,
    site: CheckSite,
    job_id: str,
    c1: pi.Phase1Output,
    request: ProofRequest,
    proof_len: int,
    index: int = 0,
) -> str | None:
    """Logs prover.rs ``verify_porep_proof``'s lines, then engine.rs's verdict; returns the job's
    error text when the proof does not verify, None when it does."""
    span = (Span("verify_porep_proof", (("job_id", Quoted(job_id)),)),)
    facts = (("proof_len", proof_len), ("sector_number", request.sector_number), ("miner_id", request.miner_id))
    log.info(tracing.PROVER, msg.VERIFYING_POREP, ("registered_proof", c1.registered_proof), *facts, span=span)
    batch = (("sector_idx", index),) if site is CheckSite.BATCHED else ()
    if self_check_passes(c1, request):
        log.info(tracing.PROVER, msg.POREP_SELF_CHECK_PASSED, ("job_id", job_id), span=span)
        log.info(tracing.ENGINE, f"{site.value}{msg.SELF_CHECK_PASSED_SUFFIX}", ("job_id", job_id), *batch)
        return None
    log.warn(
        tracing.PROVER,
        msg.POREP_SELF_CHECK_INVALID,
        ("job_id", job_id),
        ("registered_proof", c1.registered_proof),
        *facts,
        span=span,
    )
    log.error(
        tracing.ENGINE,
        f"{site.value} FAILED{msg.SELF_CHECK_REJECTED_SUFFIX}",
        ("job_id", job_id),
        *batch,
        ("proof_len", proof_len),
        ("sector", request.sector_number),
        ("miner", request.miner_id),
    )
    where = f"(sector={request.sector_number}, miner={request.miner_id})"
    if site is CheckSite.BATCHED:
        return f"PoRep proof self-check failed: batched proof {index} did not verify {where}"
    # verify_porep_partitions then finds every partition invalid: all were proved against the
    # C1's own replica id, none against the one the request's miner and sector give.
    invalid = "[" + ", ".join(str(i) for i in range(pi.POREP_PARTITIONS)) + "]"
    prefix = "Phase 7: " if site is CheckSite.PARTITIONED else ""
    log.error(
        tracing.ENGINE,
        f"{prefix}{msg.PARTITION_VERIFICATION_RESULTS}",
        ("job_id", job_id),
        ("valid_partitions", "[]"),
        ("invalid_partitions", invalid),
    )
    if site is CheckSite.PARTITIONED:
        return f"PoRep proof self-check failed: assembled proof did not verify {where}"
    return "PoRep proof self-check failed: pipeline single-sector proof did not verify"
