"""SubmitProof and Prove requests read from their wire bytes, the payload left where it lies.

grpcio hands a handler the message as one bytes object, built on the event loop, and keeps it until
the handler returns. Decoding it with protobuf would copy the payload twice more, on the loop too
(the message's parse and the field's access: ~60 ms for a 60 MB C1, all that time GetStatus
waits). So the two requests that carry inputs walk their fields instead (the wire format:
protobuf's encoding guide): the payload fields become spans of the received bytes, read later on
a thread (:mod:`engine.inputs`), and protobuf decodes the small rest as it always does.

Protobuf's rules are kept: a field given twice is the last one (a repeated field keeps all, and a
``submit`` given twice is merged, field by field); fields of another wire type than the schema's
and unknown fields go to protobuf with the rest. Bytes that are no message are left to protobuf's
own parse: the call fails with its error, as it did before, or the request is what it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from cuzktui.proto import proving_pb2 as pb

from .inputs import Payload

_LEN: Final = 2  # the wire type of bytes, strings and messages
_SUBMIT_FIELDS: Final = pb.SubmitProofRequest.DESCRIPTOR.fields_by_name
VANILLA_PROOF: Final = _SUBMIT_FIELDS["vanilla_proof"].number
VANILLA_PROOFS: Final = _SUBMIT_FIELDS["vanilla_proofs"].number
SUBMIT: Final = pb.ProveRequest.DESCRIPTOR.fields_by_name["submit"].number


class WireError(ValueError):
    """Bytes that do not walk as a message."""


@dataclass(frozen=True, slots=True)
class WireRequest:
    message: pb.SubmitProofRequest  # every field but the payload's
    payload: Payload


def _varint(data: bytes, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while at < end and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
    raise WireError("truncated or overlong varint")


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, where the field's key starts, where its value starts, where it ends); a
    length-delimited value starts after its length."""
    at = start
    while at < end:
        key_at = at
        key, at = _varint(data, at, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        value_at = at
        if wire_type == 0:
            _, at = _varint(data, at, end)
        elif wire_type == 1:
            at += 8
        elif wire_type == _LEN:
            length, value_at = _varint(data, at, end)
            at = value_at + length
        elif wire_type == 5:
            at += 4
        else:  # groups: protobuf's parse decides
            raise WireError(f"wire type {wire_type}")
        if at > end:
            raise WireError("field runs past the message")
        yield number, wire_type, key_at, value_at, at


class _Split:
    """One SubmitProofRequest's fields (or several merged): the payload's spans and the rest's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.rest: list[bytes] = []
        self.payload = (0, 0)
        self.blobs: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> None:
        for number, wire_type, key_at, value_at, field_end in _fields(self.data, start, end):
            if wire_type == _LEN and number == VANILLA_PROOF:
                self.payload = (value_at, field_end)
            elif wire_type == _LEN and number == VANILLA_PROOFS:
                self.blobs.append((value_at, field_end))
            else:
                self.rest.append(self.data[key_at:field_end])

    def request(self) -> WireRequest:
        view = memoryview(self.data)
        blobs = tuple(view[start:end] for start, end in self.blobs)
        message = pb.SubmitProofRequest.FromString(b"".join(self.rest))
        return WireRequest(message, Payload(self.data, *self.payload, blobs))


def _from_message(message: pb.SubmitProofRequest) -> WireRequest:
    """A request protobuf decoded (bytes the walk refused): its payload is copied out of it."""
    blobs = tuple(memoryview(blob) for blob in message.vanilla_proofs)
    payload = Payload(message.vanilla_proof, 0, len(message.vanilla_proof), blobs)
    message.ClearField("vanilla_proof")
    message.ClearField("vanilla_proofs")
    return WireRequest(message, payload)


def read_submit(data: bytes) -> WireRequest:
    """A SubmitProofRequest; protobuf's DecodeError for bytes that are none."""
    try:
        split = _Split(data)
        split.add(0, len(data))
        return split.request()
    except (WireError, DecodeError):
        return _from_message(pb.SubmitProofRequest.FromString(data))


def read_prove(data: bytes) -> WireRequest | None:
    """A ProveRequest's ``submit`` (None when it has none); protobuf's DecodeError for bytes that are
    no ProveRequest."""
    try:
        split = _Split(data)
        found = False
        for number, wire_type, _, value_at, field_end in _fields(data, 0, len(data)):
            if number == SUBMIT and wire_type == _LEN:
                found = True
                split.add(value_at, field_end)
        return split.request() if found else None
    except (WireError, DecodeError):
        message = pb.ProveRequest.FromString(data)
        return _from_message(message.submit) if message.HasField("submit") else None
