"""SubmitProof and Prove requests read from their wire bytes (engine/wire.py) are what protobuf decodes,
payload included, under protobuf's rules for repeated, merged, unknown and mistyped fields."""

from __future__ import annotations

import re

import pytest
from google.protobuf.message import DecodeError

from cuzktui.proto import proving_pb2 as pb
from engine.wire import WireRequest, read_prove, read_submit


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes([*out, value])


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _key(number, 2) + _varint(len(value)) + value


def _as_decoded(wire: WireRequest) -> pb.SubmitProofRequest:
    """The request with its payload put back, to compare with protobuf's own decoding."""
    message = pb.SubmitProofRequest()
    message.CopyFrom(wire.message)
    payload = wire.payload
    message.vanilla_proof = bytes(payload.data[payload.start : payload.end])
    message.vanilla_proofs.extend(bytes(blob) for blob in payload.blobs)
    return message


FULL = pb.SubmitProofRequest(
    request_id="snap-1000-1",
    proof_kind=pb.SNAP_DEALS_UPDATE,
    sector_size=32 << 30,
    registered_proof=3,
    vanilla_proof=b"{c1}",
    vanilla_proofs=[b"one", b"", b"three"],
    sector_number=7,
    miner_id=1000,
    randomness=b"r" * 32,
    partition_index=2,
    comm_r_old=b"o" * 32,
    comm_r_new=b"n" * 32,
    comm_d_new=b"d" * 32,
).SerializeToString()

CASES = {
    "every field": FULL,
    "empty": b"",
    "the payload given twice: the last wins": FULL + _bytes_field(10, b"later"),
    "blobs given twice: all are kept": FULL + _bytes_field(11, b"four"),
    "an unknown field": FULL + _bytes_field(99, b"ignored") + _key(98, 0) + b"\x05",
    "the payload with a varint's wire type: unknown": _key(10, 0) + b"\x07" + _bytes_field(1, b"id"),
    "a fixed64 and a fixed32 unknown field": _key(97, 1) + bytes(8) + _key(96, 5) + bytes(4) + FULL,
    "an unknown group: protobuf's own parse reads it": _key(95, 3) + _key(95, 4) + FULL,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_submit_request_reads_as_protobuf_decodes_it(case: str) -> None:
    raw = CASES[case]
    assert _as_decoded(read_submit(raw)) == pb.SubmitProofRequest.FromString(raw)


@pytest.mark.parametrize("case", list(CASES))
def test_a_prove_request_reads_as_protobuf_decodes_it(case: str) -> None:
    raw = _bytes_field(1, CASES[case]) + _bytes_field(99, b"unknown")
    wire = read_prove(raw)
    assert wire is not None and _as_decoded(wire) == pb.ProveRequest.FromString(raw).submit


def test_a_submit_given_twice_is_merged_field_by_field() -> None:
    first = pb.SubmitProofRequest(request_id="a", miner_id=5, vanilla_proof=b"first", vanilla_proofs=[b"x"])
    second = pb.SubmitProofRequest(request_id="b", vanilla_proofs=[b"y"])
    raw = pb.ProveRequest(submit=first).SerializeToString() + pb.ProveRequest(submit=second).SerializeToString()
    wire = read_prove(raw)
    assert wire is not None and _as_decoded(wire) == pb.ProveRequest.FromString(raw).submit
    assert (wire.message.request_id, wire.message.miner_id) == ("b", 5)
    assert bytes(wire.payload.data[wire.payload.start : wire.payload.end]) == b"first"


def test_the_payload_is_a_view_of_the_received_bytes_not_a_copy() -> None:
    wire = read_submit(FULL)
    assert wire.payload.data is FULL
    assert all(blob.obj is FULL for blob in wire.payload.blobs)


def test_a_prove_without_submit_reads_as_none() -> None:
    assert read_prove(b"") is None
    assert read_prove(_bytes_field(10, b"not a submit")) is None


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xff\xff", _key(1, 2) + b"\x05ab", _bytes_field(1, b"\xff\xfe")],  # the last: request_id is no UTF-8
)
def test_bytes_that_are_no_request_fail_with_protobufs_own_error(raw: bytes) -> None:
    message_type = "cuzk.v1.SubmitProofRequest"
    with pytest.raises(DecodeError, match=re.escape(f"type '{message_type}'")):
        read_submit(raw)
    with pytest.raises(DecodeError, match=re.escape("type 'cuzk.v1.ProveRequest'")):
        read_prove(_bytes_field(1, raw))
