"""Proof inputs in upstream's formats: parsing the fields the tool and the engine need, and a
generator of structurally complete inputs (headless, stdlib only).

Formats (the authority is filecoin-project/curio):

* PoRep C2 input: Curio's C1 wrapper ``{"SectorNum", "Phase1Out", "SectorSize"}``
  (lib/ffi/cuzk_funcs.go ``wrapC1Output``; read by cuzk-core prover.rs ``C1OutputWrapper``), where
  ``Phase1Out`` is the base64 of filecoin-proofs' ``SealCommitPhase1Output`` JSON:
  ``registered_proof`` (variant name), ``vanilla_proofs`` (``{"StackedDrg32GiBV1": [[proof …] …]}``,
  one list per partition), ``comm_r``, ``comm_d``, ``replica_id``, ``seed``, ``ticket`` (32-byte arrays).
* PoSt / SnapDeals: a list of bincode blobs, in files as cuzk-bench ``build_proof_params`` reads them
  (a JSON array of base64 strings, else the whole file is one raw proof).
* SnapDeals commitments: three 32-byte values, hex on cuzk-bench's ``--comm-r-old/--comm-r-new/--comm-d-new``.

The C1's ``replica_id`` binds the proof to a prover (the miner id) and a sector number
(filecoin-proofs ``generate_replica_id``): the daemon's self-check recomputes it from the request's
``miner_id`` and ``sector_number`` (cuzk-core prover.rs ``verify_porep_proof``), so a C1 proved under
another miner id does not verify. The generator writes a consistent one, and :func:`replica_id`
lets the engine check it the same way.

Vanilla-proof blobs are modelled on upstream's bincode layout (``FallbackPoStSectorProof`` for PoSt,
an update ``PartitionProof`` for SnapDeals) down to the Merkle proofs, whose inner layout is this
module's model: the engine checks that framing, it does not verify the hashes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Final

GiB: Final = 1 << 30
SECTOR_SIZE_32G: Final = 32 * GiB
_SIZES: Final = (2 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30)
_SIZE_NAMES: Final = ("2KiB", "8MiB", "512MiB", "32GiB", "64GiB")
# filecoin-proofs-api RegisteredSealProof: serde variant name → (FFI / Go abi id, sector size).
SEAL_PROOFS: Final = {
    f"StackedDrg{name}{suffix}": (base + i, size)
    for base, suffix in (
        (0, "V1"),
        (5, "V1_1"),
        (10, "V1_1_Feat_SyntheticPoRep"),
        (15, "V1_2_Feat_NonInteractivePoRep"),
    )
    for i, (name, size) in enumerate(zip(_SIZE_NAMES, _SIZES, strict=True))
}
SEAL_PROOF_NAMES: Final = {ffi: name for name, (ffi, _) in SEAL_PROOFS.items()}
# cuzk-core prover.rs registered_update_proof_from_u64 / registered_post_proof_from_u64.
UPDATE_PROOF_SIZES: Final = dict(enumerate(_SIZES))
POST_PROOF_SIZES: Final = {i: _SIZES[i % 5] for i in range(15)}
WINNING_POST_PROOFS: Final = frozenset(range(5))
# What Curio sends for 32 GiB sectors (Go abi enums): PoRep V1_1, Update V1, Winning V1, Window V1_1 (→ V1_2).
DEFAULT_REGISTERED_PROOF: Final = {"porep": 8, "snap": 3, "wpost": 13, "winning": 3}
# 32 GiB geometry: 10 PoRep partitions of 18 challenges, 16 SnapDeals partitions, 66 WinningPoSt
# challenges of one sector, 10 WindowPoSt challenges per sector; base tree paths of arity 8.
POREP_PARTITIONS: Final = 10
POREP_CHALLENGES_PER_PARTITION: Final = 18
SNAP_PARTITIONS: Final = 16
WINNING_CHALLENGES: Final = 66
WINDOW_CHALLENGES_PER_SECTOR: Final = 10
BASE_PATH_LEN: Final = 9
REAL_C1_SIZE: Final = 60_000_000  # a real 32 GiB C1 wrapper is 51–68 MB


class InputError(ValueError):
    """An input the daemon rejects; the message is upstream's context text for it."""


# --------------------------------------------------------------------------------------------
# Identities (cuzk-core prover.rs make_prover_id; filecoin-proofs generate_replica_id)
# --------------------------------------------------------------------------------------------


def prover_id(miner_id: int) -> bytes:
    """The miner's ID-address payload (LEB128 of the actor id), left-aligned in 32 bytes."""
    out = bytearray()
    value = miner_id
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out).ljust(32, b"\0")


def porep_id(registered_proof: int) -> bytes:
    """filecoin-proofs-api ``RegisteredSealProof::porep_id``: the proof's id, little-endian, then a zero nonce."""
    return registered_proof.to_bytes(8, "little").ljust(32, b"\0")


# The BLS12-381 scalar field's modulus r (blstrs ``Scalar``, whose 32-byte repr is little-endian).
BLS12_381_SCALAR_MODULUS: Final = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001


def is_scalar(value: bytes) -> bool:
    """Whether 32 bytes are the repr of a BLS12-381 scalar, as ``from_repr_vartime`` accepts it
    (filecoin-proofs ``as_safe_commitment``): little-endian, below the modulus."""
    return len(value) == 32 and int.from_bytes(value, "little") < BLS12_381_SCALAR_MODULUS


def fr_safe(raw: bytes) -> bytes:
    """32 bytes that are a valid BLS12-381 scalar (the top two bits cleared, as ``bytes_into_fr_repr_safe``)."""
    return raw[:31] + bytes([raw[31] & 0x3F])


def replica_id(miner_id: int, sector_number: int, ticket: bytes, comm_d: bytes, registered_proof: int) -> bytes:
    digest = hashlib.sha256(
        prover_id(miner_id) + sector_number.to_bytes(8, "big") + ticket + comm_d + porep_id(registered_proof)
    ).digest()
    return fr_safe(digest)


def det_bytes(seed: str, n: int) -> bytes:
    """``n`` deterministic pseudo-random bytes for ``seed``."""
    return hashlib.shake_256(seed.encode()).digest(n)


# --------------------------------------------------------------------------------------------
# PoRep C1
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class C1Wrapper:
    sector_num: int
    sector_size: int
    phase1_out: memoryview  # the base64 text, a view into the input (no copy of a 68 MB payload)


@dataclass(frozen=True, slots=True)
class Phase1Output:
    registered_proof: str
    comm_r: bytes
    comm_d: bytes
    replica_id: bytes
    seed: bytes
    ticket: bytes

    @property
    def ffi_id(self) -> int:
        return SEAL_PROOFS[self.registered_proof][0]

    @property
    def sector_size(self) -> int:
        return SEAL_PROOFS[self.registered_proof][1]


def _u64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def parse_c1_wrapper(data: bytes | bytearray, start: int = 0, end: int | None = None) -> C1Wrapper:
    """serde's reading of ``C1OutputWrapper`` (unknown fields ignored, the three required) in
    ``data[start:end]``: a gRPC request's payload is read where the message holds it, never copied."""
    # Raised fresh each time: one made up front would sit in this frame, which its traceback holds,
    # and the cycle would keep a rejected payload's bytes until the cyclic collector ran.
    fail = "failed to parse C1 output wrapper JSON"
    end = len(data) if end is None else end
    # Curio's Go encoder writes Phase1Out as one plain base64 string: cut it out by position so
    # the small rest is parsed as JSON and the payload is never copied into a Python str.
    key = data.find(b'"Phase1Out"', start, end)
    opening = data.find(b'"', data.find(b":", key + 11, end) + 1, end) if key >= 0 else -1
    closing = data.find(b'"', opening + 1, end) if opening >= 0 else -1
    if (
        opening < 0
        or closing < 0
        or data[key + 11 : opening].strip() != b":"
        or data.find(b"\\", opening, closing) >= 0
    ):
        span = None
        text = data[start:end]
    else:
        span = (opening + 1, closing)
        text = data[start : opening + 1] + data[closing:end]
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise InputError(fail) from None
    if not isinstance(document, dict):
        raise InputError(fail)
    sector, size, phase1 = document.get("SectorNum"), document.get("SectorSize"), document.get("Phase1Out")
    if not (_u64(sector) and _u64(size) and isinstance(phase1, str)):
        raise InputError(fail)
    assert isinstance(sector, int) and isinstance(size, int)
    view = memoryview(data)[span[0] : span[1]] if span is not None else memoryview(phase1.encode())
    return C1Wrapper(sector, size, view)


def _bytes32(value: object) -> bytes | None:
    if isinstance(value, list) and len(value) == 32 and all(_u64(b) and b < 256 for b in value):
        return bytes(value)
    return None


_VANILLA_VARIANTS: Final = frozenset(f"StackedDrg{name}V1" for name in _SIZE_NAMES)


def _vanilla_ok(value: object) -> bool:
    """A ``VanillaSealProof``: one known variant holding the per-partition lists."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((variant, lists),) = value.items()
    return variant in _VANILLA_VARIANTS and isinstance(lists, list) and all(isinstance(p, list) for p in lists)


_PHASE1_HEAD: Final = b'{"registered_proof":'
_VANILLA_KEY: Final = b',"vanilla_proofs":'
_TAIL_KEY: Final = b',"comm_r":'
# A C1's bulk is decoded and scanned this many bytes per call: a thread parsing a 68 MB payload
# then lets others (an engine's event loop) run between calls, where one call over all of it
# would hold the interpreter ~130 ms. A multiple of 4, so strict base64 decodes as in one call.
CHUNK: Final = 1 << 20


def _count(raw: bytes | bytearray, needle: bytes, start: int, end: int) -> int:
    return sum(raw.count(needle, at, min(at + CHUNK, end)) for at in range(start, end, CHUNK))


def _phase1_fields(raw: bytes | bytearray) -> dict[str, object]:
    """The top-level fields of a SealCommitPhase1Output JSON.

    serde_json writes the fields in declaration order with the vanilla proofs (nearly all of a
    51 MB C1) second: the small head and tail are parsed as JSON, and the vanilla proofs by their
    variant, their list and bracket balance, so a real-size C1 does not cost the emulator a
    170 MB object tree and 2 s of CPU. Anything written differently gets a full parse.
    """
    tail_at = raw.rfind(_TAIL_KEY)
    if raw.startswith(_PHASE1_HEAD) and tail_at > 0:
        name, used = json.JSONDecoder().raw_decode(
            raw[len(_PHASE1_HEAD) : len(_PHASE1_HEAD) + 200].decode("ascii", "replace")
        )
        vp_at = len(_PHASE1_HEAD) + used
        if raw.startswith(_VANILLA_KEY, vp_at):
            vp_at += len(_VANILLA_KEY)
            colon = raw.find(b":", vp_at)
            # Counted in place (a slice would copy the 45 MB).
            balanced = all(
                _count(raw, opening, vp_at, tail_at) == _count(raw, closing, vp_at, tail_at)
                for opening, closing in ((b"[", b"]"), (b"{", b"}"))
            )
            ends = raw.startswith(b"{", vp_at) and raw.startswith(b"[", colon + 1) and raw.endswith(b"]}", 0, tail_at)
            if balanced and ends:
                variant = json.loads(raw[vp_at + 1 : colon])
                tail: dict[str, object] = json.loads(b"{" + raw[tail_at + 1 :])
                return {"registered_proof": name, "vanilla_proofs": {variant: []}, **tail}
    document = json.loads(raw)
    if not isinstance(document, dict):
        raise ValueError("not an object")
    return document


def parse_phase1(raw: bytes | bytearray) -> Phase1Output:
    """serde's reading of ``SealCommitPhase1Output`` (the fields the daemon uses, all required)."""
    try:
        fields = _phase1_fields(raw)
    except (ValueError, UnicodeDecodeError):
        raise InputError("failed to deserialize SealCommitPhase1Output from JSON") from None
    name = fields.get("registered_proof")
    values = [_bytes32(fields.get(k)) for k in ("comm_r", "comm_d", "replica_id", "seed", "ticket")]
    if not isinstance(name, str) or name not in SEAL_PROOFS or not _vanilla_ok(fields.get("vanilla_proofs")):
        raise InputError("failed to deserialize SealCommitPhase1Output from JSON")
    comm_r, comm_d, rid, seed, ticket = values
    if comm_r is None or comm_d is None or rid is None or seed is None or ticket is None:
        raise InputError("failed to deserialize SealCommitPhase1Output from JSON")
    return Phase1Output(name, comm_r, comm_d, rid, seed, ticket)


def decode_phase1(wrapper: C1Wrapper) -> bytearray:
    """Phase1Out's strict base64, decoded ``CHUNK`` characters at a time (padding only at its very end)."""
    text = wrapper.phase1_out
    out = bytearray(len(text) // 4 * 3)
    filled = 0
    try:
        for at in range(0, len(text), CHUNK):
            chunk = text[at : at + CHUNK]
            if at + CHUNK < len(text) and chunk[-1] == ord("="):
                raise binascii.Error("Excess data after padding")
            decoded = binascii.a2b_base64(chunk, strict_mode=True)
            out[filled : filled + len(decoded)] = decoded
            filled += len(decoded)
    except binascii.Error:
        raise InputError("failed to decode base64 Phase1Output") from None
    del out[filled:]
    return out


def parse_c1(data: bytes | bytearray, start: int = 0, end: int | None = None) -> tuple[C1Wrapper, Phase1Output]:
    """Wrapper, base64 and SealCommitPhase1Output of ``data[start:end]``, failing with upstream's
    context at each step."""
    wrapper = parse_c1_wrapper(data, start, end)
    return wrapper, parse_phase1(decode_phase1(wrapper))


def wrap_phase1(phase1_json: bytes, sector_num: int, sector_size: int = SECTOR_SIZE_32G) -> bytes:
    """Curio's wrapper around raw SealCommitPhase1Output JSON (lib/ffi/cuzk_funcs.go ``wrapC1Output``)."""
    encoded = base64.b64encode(phase1_json).decode("ascii")
    return json.dumps({"SectorNum": sector_num, "Phase1Out": encoded, "SectorSize": sector_size}).encode()


def _hash_json(seed: str) -> str:
    return "[" + ",".join(str(b) for b in det_bytes(seed, 32)) + "]"


def _challenge_proof_json(seed: str, columns: int, full: bool = True) -> str:
    """One challenge's proof in the shape of storage-proofs-porep ``stacked::Proof``; ``full`` has
    32 GiB's counts (path levels, column rows, layers, parents), else one of each."""
    h = _hash_json(seed)
    levels, rows, layers, parents, drg = (BASE_PATH_LEN, 11, 11, 14, 6) if full else (1, 1, 1, 1, 1)
    path = "[" + ",".join(f'{{"hashes":[{",".join([h] * 7)}],"index":{i % 8}}}' for i in range(levels)) + "]"
    merkle = f'{{"root":{h},"leaf":{h},"path":{path}}}'
    column = f'{{"column":{{"index":1,"rows":[{",".join([h] * rows)}]}},"inclusion_proof":{merkle}}}'
    parent_list = ",".join([h] * parents)
    labeling = ",".join(f'{{"parents":[{parent_list}],"layer_index":{k + 1},"node":1}}' for k in range(layers))
    return (
        f'{{"comm_d_proofs":{merkle},"comm_r_last_proof":{merkle},'
        f'"replica_column_proofs":{{"c_x":{column},"drg_parents":[{",".join([column] * drg)}],'
        f'"exp_parents":[{",".join([column] * columns)}]}},'
        f'"labeling_proofs":[{labeling}],'
        f'"encoding_proof":{{"parents":[{parent_list}],"layer_index":{layers},"node":1}}}}'
    )


def generate_c1(
    *,
    miner_id: int,
    sector_num: int,
    size: int = REAL_C1_SIZE,
    registered_proof: int = DEFAULT_REGISTERED_PROOF["porep"],
    seed: str = "cuzk-sample",
) -> bytes:
    """A Curio C1 wrapper around a structurally complete SealCommitPhase1Output of about ``size``
    bytes (a real 32 GiB one is 51–68 MB; small sizes keep every partition and challenge, with
    fewer expansion parents), whose replica id is that of ``miner_id`` and ``sector_num``."""
    name = SEAL_PROOF_NAMES[registered_proof]
    sector_size = SEAL_PROOFS[name][1]
    comm_d, comm_r = fr_safe(det_bytes(seed + "/comm_d", 32)), fr_safe(det_bytes(seed + "/comm_r", 32))
    ticket, rand_seed = fr_safe(det_bytes(seed + "/ticket", 32)), fr_safe(det_bytes(seed + "/seed", 32))
    rid = replica_id(miner_id, sector_num, ticket, comm_d, registered_proof)
    challenges = POREP_PARTITIONS * POREP_CHALLENGES_PER_PARTITION
    # Expansion-parent columns fill the target; a small target gets the compact shape.
    per_challenge = (size * 3 // 4 - 400) // challenges
    full = per_challenge >= len(_challenge_proof_json(seed, 0))
    base = len(_challenge_proof_json(seed, 0, full))
    column = len(_challenge_proof_json(seed, 1, full)) - base
    proof = _challenge_proof_json(seed, max(0, -(-(per_challenge - base) // column)), full)
    partition = "[" + ",".join([proof] * POREP_CHALLENGES_PER_PARTITION) + "]"
    variant = f"StackedDrg{_SIZE_NAMES[_SIZES.index(sector_size)]}V1"

    def arr(b: bytes) -> str:
        return "[" + ",".join(map(str, b)) + "]"

    phase1 = (
        f'{{"registered_proof":"{name}","vanilla_proofs":{{"{variant}":[{",".join([partition] * POREP_PARTITIONS)}]}},'
        f'"comm_r":{arr(comm_r)},"comm_d":{arr(comm_d)},"replica_id":{arr(rid)},'
        f'"seed":{arr(rand_seed)},"ticket":{arr(ticket)}}}'
    )
    return wrap_phase1(phase1.encode(), sector_num, sector_size)


# --------------------------------------------------------------------------------------------
# Vanilla proofs (bincode)
# --------------------------------------------------------------------------------------------


class _Reader:
    """bincode 1.x over a slice: little-endian fixed ints, u64 lengths, trailing bytes allowed."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes | memoryview:
        if self.at + n > len(self.data):
            # bincode's SliceReader::unexpected_eof: an io::Error with an empty message.
            raise InputError("io error: ")
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk

    def u64(self) -> int:
        value: int = struct.unpack("<Q", self.take(8))[0]
        return value

    def u32(self) -> int:
        value: int = struct.unpack("<I", self.take(4))[0]
        return value

    def length(self, item_size: int) -> int:
        n = self.u64()
        if n * item_size > len(self.data) - self.at:
            raise InputError("io error: ")
        return n


def _read_path(r: _Reader) -> None:
    for _ in range(r.length(16)):
        r.take(32 * r.length(32))
        r.u64()


def _read_merkle(r: _Reader) -> None:
    variant = r.u32()
    if variant > 2:
        raise InputError(f"invalid value: integer `{variant}`, expected variant index 0 <= i < 3")
    for _ in range(variant + 1):  # single, sub-tree or top-tree proof: base path, then one path per level above
        _read_path(r)
    r.take(64)  # root, leaf


def _write_merkle(seed: str) -> bytes:
    h = det_bytes(seed, 32)
    element = struct.pack("<Q", 7) + h * 7 + struct.pack("<Q", 3)
    path = struct.pack("<Q", BASE_PATH_LEN) + element * BASE_PATH_LEN
    return struct.pack("<I", 1) + path + struct.pack("<Q", 1) + struct.pack("<Q", 1) + h + struct.pack("<Q", 0) + h + h


def parse_post_vanilla(blob: bytes | memoryview) -> tuple[int, int]:
    """A ``FallbackPoStSectorProof``: (sector id, number of sector proofs)."""
    r = _Reader(blob)
    sector_id = r.u64()
    r.take(32)  # comm_r
    sectors = r.length(24)
    for _ in range(sectors):
        for _ in range(r.length(4)):
            _read_merkle(r)
        r.take(64)  # comm_c, comm_r_last
    return sector_id, sectors


def parse_update_vanilla(blob: bytes | memoryview) -> int:
    """An update ``PartitionProof``: the number of challenge proofs."""
    r = _Reader(blob)
    r.take(32)  # comm_c
    r.take(32 * r.length(32))  # apex leaves
    challenges = r.length(12)
    for _ in range(challenges):
        for _ in range(3):  # proof_r_old, proof_d_new, proof_r_new
            _read_merkle(r)
    return challenges


def generate_post_vanilla(sector_id: int, challenges: int, seed: str = "cuzk-sample") -> bytes:
    comm_r = fr_safe(det_bytes(f"{seed}/comm_r/{sector_id}", 32))
    proof = _write_merkle(f"{seed}/{sector_id}")
    sector = struct.pack("<Q", challenges) + proof * challenges + det_bytes(f"{seed}/c/{sector_id}", 64)
    return struct.pack("<Q", sector_id) + comm_r + struct.pack("<Q", 1) + sector


def generate_snap_vanilla(partition: int, challenges: int = 4, seed: str = "cuzk-sample") -> bytes:
    proof = _write_merkle(f"{seed}/snap/{partition}")
    apex = det_bytes(f"{seed}/apex/{partition}", 32 * 8)
    return (
        det_bytes(f"{seed}/comm_c/{partition}", 32)
        + struct.pack("<Q", 8)
        + apex
        + struct.pack("<Q", challenges)
        + proof * (3 * challenges)
    )


@dataclass(frozen=True, slots=True)
class SnapCommitments:
    comm_r_old: bytes
    comm_r_new: bytes
    comm_d_new: bytes

    @classmethod
    def generate(cls, seed: str = "cuzk-sample") -> SnapCommitments:
        return cls(*(fr_safe(det_bytes(f"{seed}/{name}", 32)) for name in ("comm_r_old", "comm_r_new", "comm_d_new")))

    def flags(self) -> list[tuple[str, str]]:
        """As cuzk-bench takes them: (flag, hex) pairs."""
        return [
            ("--comm-r-old", self.comm_r_old.hex()),
            ("--comm-r-new", self.comm_r_new.hex()),
            ("--comm-d-new", self.comm_d_new.hex()),
        ]


def vanilla_json(proofs: list[bytes]) -> bytes:
    """A vanilla-proof file: a JSON array of base64 strings (Go's ``json.Marshal([][]byte)``)."""
    return json.dumps([base64.b64encode(p).decode("ascii") for p in proofs]).encode()


def read_vanilla(data: bytes) -> list[bytes]:
    """cuzk-bench ``build_proof_params``: a JSON array of base64 strings, else one raw proof."""
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return [data]
    if not isinstance(document, list) or not all(isinstance(item, str) for item in document):
        return [data]
    try:
        return [base64.b64decode(item, validate=True) for item in document]
    except binascii.Error:
        raise InputError("failed to decode base64 vanilla proof entry") from None


def parse_hex32(text: str, name: str) -> bytes:
    """A 32-byte hex value (randomness, a commitment) in cuzk-bench's words when it is not one."""
    try:
        value = bytes.fromhex(text)
    except ValueError:
        raise InputError(f"invalid hex for --{name}") from None
    if len(value) != 32:
        raise InputError(f"{name} must be exactly 32 bytes, got {len(value)}")
    return value


DEFAULT_MINER: Final = 1000  # cuzk-bench's --miner-id default (cuzk-bench main.rs, the batch command)


@dataclass(frozen=True, slots=True)
class RequestParams:
    """What goes into each request beside the input, as cuzk-bench batch's flags give it
    (``--miner-id``, ``--sector-num``, ``--registered-proof``, ``--randomness``, the comm flags).
    None: from the input file (a C1 wrapper's SectorNum, the files beside a vanilla-proof file),
    else Curio's value for 32 GiB sectors (registered proof) or cuzk-bench's default."""

    miner_id: int = DEFAULT_MINER
    sector_num: int | None = None
    registered_proof: int | None = None
    randomness: bytes | None = None
    comm_r_old: bytes | None = None
    comm_r_new: bytes | None = None
    comm_d_new: bytes | None = None
    synthetic_size: int = 0  # bytes of each synthetic C1 (0: the generator's compact shape)

    def flags(self) -> list[str]:
        """The ``cuzk-tui bench`` flags (cuzk-bench batch's spellings) that give these values, for the
        fields that differ from the defaults (a runner started with them rebuilds this very value)."""
        flags: list[str] = []
        default = RequestParams()
        for name in ("miner_id", "sector_num", "registered_proof", "synthetic_size"):
            number: int | None = getattr(self, name)
            if number != getattr(default, name):
                flags += [f"--{name.replace('_', '-')}", str(number)]
        for name in ("randomness", "comm_r_old", "comm_r_new", "comm_d_new"):
            value: bytes | None = getattr(self, name)
            if value is not None:
                flags += [f"--{name.replace('_', '-')}", value.hex()]
        return flags


# The files ``cuzk-engine sample-inputs`` writes; the vanilla ones have cuzk-bench's default names.
C1_FILE: Final = "porep-c1.json"
VANILLA_FILES: Final = {"snap": "snap-vanilla.json", "wpost": "wpost-vanilla.json", "winning": "winning-vanilla.json"}
SNAP_COMMS_FILE: Final = "snap-comms.txt"  # cuzk-bench's comm flags, one "--flag HEX" per line
POST_RANDOMNESS_FILE: Final = "post-randomness.txt"  # "--randomness HEX": the PoSt challenge seed
