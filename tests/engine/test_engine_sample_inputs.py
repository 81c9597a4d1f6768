"""``cuzk-engine sample-inputs DIR`` writes what cuzk-bench (and our bench) read, and the engine
proves every one of them over gRPC, in pipeline and monolithic mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cuzktui import proofinputs as pi
from cuzktui.bench import build_requests
from cuzktui.proto import proving_pb2 as pb


def test_the_sample_files_are_upstreams_formats(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engine", "sample-inputs", str(tmp_path), "--c1-size", "2MB", "--miner-id", "1234"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert f"cuzk-bench batch -t porep --c1 {tmp_path / pi.C1_FILE} --miner-id 1234 --sector-num 1" in done.stdout
    wrapper, c1 = pi.parse_c1((tmp_path / pi.C1_FILE).read_bytes())
    assert wrapper.sector_num == 1 and c1.replica_id == pi.replica_id(1234, 1, c1.ticket, c1.comm_d, c1.ffi_id)
    assert 2_000_000 <= (tmp_path / pi.C1_FILE).stat().st_size < 2_200_000
    for kind, name in pi.VANILLA_FILES.items():
        proofs = pi.read_vanilla((tmp_path / name).read_bytes())
        assert all(isinstance(p, str) for p in json.loads((tmp_path / name).read_text()))
        if kind == "snap":
            assert len(proofs) == pi.SNAP_PARTITIONS and all(pi.parse_update_vanilla(p) for p in proofs)
        else:
            assert [pi.parse_post_vanilla(p)[1] for p in proofs] == [1] * len(proofs)
    comms = (tmp_path / pi.SNAP_COMMS_FILE).read_text().split()
    assert comms[::2] == ["--comm-r-old", "--comm-r-new", "--comm-d-new"] and all(len(v) == 64 for v in comms[1::2])


@pytest.mark.parametrize("pipeline", [True, False])
def test_the_engine_proves_the_sample_inputs(tmp_path: Path, engine_factory: Any, pipeline: bool) -> None:
    samples = tmp_path / "samples"
    subprocess.run(
        [sys.executable, "-m", "engine", "sample-inputs", str(samples), "--c1-size", "0", "--wpost-sectors", "2"],
        capture_output=True,
        timeout=120,
        check=True,
    )
    stub = engine_factory({"memory": {"total_budget": "400GiB"}, "pipeline": {"enabled": pipeline}}).stub()
    files = {"porep": pi.C1_FILE, **pi.VANILLA_FILES}
    for kind, name in files.items():
        params = pi.RequestParams(registered_proof=pi.DEFAULT_REGISTERED_PROOF[kind])
        request = build_requests(kind, 1, input_path=samples / name, bench_id="s", params=params)[0]
        result = stub.Prove(pb.ProveRequest(submit=request), timeout=120).result
        assert (result.status, result.error_message) == (pb.AwaitProofResponse.COMPLETED, ""), kind
