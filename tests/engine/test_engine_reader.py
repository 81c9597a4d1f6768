"""The engine's input reader (engine/reader.py): a process of its own that reads every payload, lives
as long as the engine and no longer, and is not stopped by a terminal's SIGINT (the engine decides)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import psutil

from cuzktui.proto import proving_pb2 as pb
from tests.conftest import alive
from tests.engine.engine_harness import porep_request


def test_the_reader_reads_every_input_and_dies_with_the_engine(engine_factory: Any) -> None:
    engine = engine_factory()
    (reader,) = psutil.Process(engine.proc.pid).children()
    os.kill(reader.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches the whole process group
    stub = engine.stub()
    proved = stub.Prove(pb.ProveRequest(submit=porep_request("porep-1000-1")), timeout=60).result
    refused = stub.Prove(pb.ProveRequest(submit=porep_request("junk", payload=b"junk")), timeout=60).result
    assert proved.status == pb.AwaitProofResponse.COMPLETED
    assert refused.error_message == "C1 parse failed: failed to parse C1 output wrapper JSON"
    assert reader.is_running()
    os.kill(engine.proc.pid, signal.SIGKILL)
    engine.proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while alive(reader.pid):  # a zombie counts as gone: whoever adopted it reaps it when it will
        assert time.monotonic() < deadline, "the reader outlived the engine"
        time.sleep(0.01)
    assert "Traceback" not in engine.stdout() + engine.stderr()
