"""The committed gRPC stubs must be exactly what protos/generate.py produces from the .proto."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "protos" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_are_current(tmp_path: Path) -> None:
    generator = _load_generator()
    fresh = generator.generate(tmp_path)
    stale = [p.name for p in fresh if p.read_text() != (ROOT / "cuzktui" / "proto" / p.name).read_text()]
    assert not stale, f"stubs out of date, run: python protos/generate.py ({', '.join(stale)})"


def test_service_has_the_eight_rpcs() -> None:
    from cuzktui.proto import proving_pb2

    service = proving_pb2.DESCRIPTOR.services_by_name["ProvingEngine"]
    assert proving_pb2.DESCRIPTOR.package == "cuzk.v1"
    assert sorted(m.name for m in service.methods) == sorted(
        ["SubmitProof", "AwaitProof", "Prove", "CancelProof", "GetStatus", "GetMetrics", "PreloadSRS", "EvictSRS"]
    )
    fields = {f.name: f.number for f in proving_pb2.SubmitProofRequest.DESCRIPTOR.fields}
    assert fields["vanilla_proofs"] == 11 and fields["comm_d_new"] == 32 and fields["partition_index"] == 23
