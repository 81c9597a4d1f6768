"""SIGINT stops the workers but keeps serving; SIGTERM kills; the unix socket survives SIGTERM.

The daemon's signal handling: docs/daemon-interface.md §2.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from cuzktui.proto import proving_pb2 as pb
from tests.engine.engine_harness import porep_request, start_engine


def test_sigint_keeps_serving_and_sigterm_kills(engine_factory: Any) -> None:
    engine = engine_factory({"gpus": {"gpu_workers_per_device": 1}}, unix=True)
    stub = engine.stub()
    assert stub.Prove(pb.ProveRequest(submit=porep_request("before")), timeout=30).result.status == 1
    engine.proc.send_signal(signal.SIGINT)
    log = engine.wait_for_line("pipeline GPU worker stopped worker_id=0")
    assert "INFO cuzk_daemon: received SIGINT, shutting down" in log
    assert "INFO cuzk_core::engine: shutting down cuzk engine" in log
    assert "INFO cuzk_core::engine: synthesis worker received shutdown sw_id=0" in log
    engine.proc.send_signal(signal.SIGINT)  # swallowed
    status = stub.GetStatus(pb.GetStatusRequest(), timeout=5)
    assert status.total_proofs_completed == 1 and engine.proc.poll() is None
    # New work is accepted but never processed.
    assert stub.SubmitProof(porep_request("after"), timeout=5).job_id == "after"
    assert engine.stdout().count("received SIGINT") == 1

    socket_path = engine.target[len("unix://") :]
    engine.proc.send_signal(signal.SIGTERM)
    assert engine.proc.wait(timeout=10) == -signal.SIGTERM
    assert Path(socket_path).exists()  # left behind, like the daemon


def test_stale_unix_socket_is_replaced(engine_factory: Any) -> None:
    first = engine_factory(unix=True)
    path = Path(first.target[len("unix://") :])
    first.proc.send_signal(signal.SIGTERM)
    first.proc.wait(timeout=10)
    assert path.is_socket()  # stale
    second = start_engine(first.stdout_path.parent, {}, unix=True)  # same directory, same socket path
    try:
        assert second.target == first.target
        assert second.stub().GetStatus(pb.GetStatusRequest(), timeout=5).total_proofs_completed == 0
    finally:
        second.stop()
