"""Upstream's proof-input formats: the generator writes what the parser (and so the engine) accepts,
and every malformed layer is refused with upstream's context text."""

from __future__ import annotations

import base64
import gc
import json
import sys

import pytest

from cuzktui import proofinputs as pi


def test_a_generated_c1_is_curios_wrapper_around_a_complete_phase1_output() -> None:
    data = pi.generate_c1(miner_id=1234, sector_num=77, size=0)
    document = json.loads(data)
    assert set(document) == {"SectorNum", "Phase1Out", "SectorSize"}
    assert (document["SectorNum"], document["SectorSize"]) == (77, pi.SECTOR_SIZE_32G)
    phase1 = json.loads(base64.b64decode(document["Phase1Out"]))
    assert list(phase1) == ["registered_proof", "vanilla_proofs", "comm_r", "comm_d", "replica_id", "seed", "ticket"]
    partitions = phase1["vanilla_proofs"]["StackedDrg32GiBV1"]
    assert len(partitions) == pi.POREP_PARTITIONS
    assert all(len(p) == pi.POREP_CHALLENGES_PER_PARTITION for p in partitions)
    wrapper, c1 = pi.parse_c1(data)
    assert wrapper.sector_num == 77 and c1.registered_proof == "StackedDrg32GiBV1_1" and c1.sector_size == 32 << 30
    # The replica id binds the C1 to its miner and sector, as the daemon's self-check recomputes it.
    assert c1.replica_id == pi.replica_id(1234, 77, c1.ticket, c1.comm_d, 8)
    assert c1.replica_id not in {
        pi.replica_id(1000, 77, c1.ticket, c1.comm_d, 8),
        pi.replica_id(1234, 1, c1.ticket, c1.comm_d, 8),
    }


@pytest.mark.parametrize("size", [3_000_000, 12_000_000])
def test_the_size_is_a_parameter(size: int) -> None:
    data = pi.generate_c1(miner_id=1, sector_num=1, size=size)
    assert size <= len(data) < size * 1.1
    assert pi.parse_c1(data)[1].registered_proof == "StackedDrg32GiBV1_1"


def test_the_phase1_output_parses_in_any_field_order_and_each_field_is_required() -> None:
    _, c1 = pi.parse_c1(pi.generate_c1(miner_id=1, sector_num=1, size=0))
    fields = {
        "ticket": list(c1.ticket),
        "seed": list(c1.seed),
        "replica_id": list(c1.replica_id),
        "comm_d": list(c1.comm_d),
        "comm_r": list(c1.comm_r),
        "vanilla_proofs": {"StackedDrg32GiBV1": [[{}]]},
        "registered_proof": "StackedDrg32GiBV1_1",
    }
    assert pi.parse_phase1(json.dumps(fields).encode()) == c1
    for missing in fields:
        partial = {k: v for k, v in fields.items() if k != missing}
        with pytest.raises(pi.InputError, match=r"^failed to deserialize SealCommitPhase1Output from JSON$"):
            pi.parse_phase1(json.dumps(partial).encode())
    with pytest.raises(pi.InputError, match=r"^failed to deserialize SealCommitPhase1Output from JSON$"):
        pi.parse_phase1(json.dumps({**fields, "registered_proof": "StackedDrg1TiBV9"}).encode())


def test_a_truncated_real_layout_phase1_output_is_refused() -> None:
    document = json.loads(pi.generate_c1(miner_id=1, sector_num=1, size=0))
    raw = base64.b64decode(document["Phase1Out"])
    cut = raw[:1000] + raw[-400:]  # serde's field order, vanilla proofs cut in the middle
    with pytest.raises(pi.InputError, match=r"^failed to deserialize SealCommitPhase1Output from JSON$"):
        pi.parse_phase1(cut)


@pytest.mark.parametrize(
    ("data", "context"),
    [
        (b"", "failed to parse C1 output wrapper JSON"),
        (b"[1, 2]", "failed to parse C1 output wrapper JSON"),
        (b'{"SectorNum": -1, "Phase1Out": "", "SectorSize": 1}', "failed to parse C1 output wrapper JSON"),
        (b'{"SectorNum": 1, "Phase1Out": 5, "SectorSize": 1}', "failed to parse C1 output wrapper JSON"),
        (b'{"SectorNum": 1, "Phase1Out": "AAA", "SectorSize": 1}', "failed to decode base64 Phase1Output"),
        (
            b'{"SectorNum": 1, "Phase1Out": "aGVsbG8=", "SectorSize": 1}',
            "failed to deserialize SealCommitPhase1Output from JSON",
        ),
    ],
)
def test_each_c1_layer_fails_with_upstreams_context(data: bytes, context: str) -> None:
    with pytest.raises(pi.InputError) as failure:
        pi.parse_c1(data)
    assert str(failure.value) == context


def test_vanilla_proofs_round_trip_and_garbage_fails_as_bincode_does() -> None:
    assert pi.parse_post_vanilla(pi.generate_post_vanilla(9, 66)) == (9, 1)
    assert pi.parse_update_vanilla(pi.generate_snap_vanilla(3, challenges=2)) == 2
    for garbage in (b"", b"x" * 64, pi.generate_post_vanilla(9, 66)[:-10]):
        with pytest.raises(pi.InputError, match=r"^io error: $"):
            pi.parse_post_vanilla(garbage)
    proofs = [pi.generate_post_vanilla(n, 1) for n in range(3)]
    assert pi.read_vanilla(pi.vanilla_json(proofs)) == proofs
    assert pi.read_vanilla(b"\x00raw") == [b"\x00raw"]  # cuzk-bench: not a JSON array → one raw proof


def test_prover_id_is_the_id_address_payload() -> None:
    assert pi.prover_id(1000) == bytes([0xE8, 0x07]).ljust(32, b"\0")
    assert pi.prover_id(0) == bytes(32)


@pytest.mark.parametrize("data", [b"not json at all", b"\xff\xfe junk", b'{"SectorNum": 1}'])
def test_a_rejected_c1_leaves_nothing_holding_its_bytes(data: bytes) -> None:
    """No reference cycle keeps a refused payload (a 64 MB one, 24 times, kept 2 GB in the engine's reader
    until its cyclic collector ran): with the collector off, the bytes are referenced as before."""
    payload = bytearray(data)
    before = sys.getrefcount(payload)
    gc.disable()
    try:
        with pytest.raises(pi.InputError):
            pi.parse_c1(payload)
        assert sys.getrefcount(payload) == before
    finally:
        gc.enable()
