"""The live controller's pure parts: its first engine config, machine profiles, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzktui.config import ConfigDocument
from cuzktui.controller import BenchRequest
from cuzktui.knobs import Severity
from cuzktui.live import (
    AttachTarget,
    ControllerError,
    LiveController,
    LiveOptions,
    default_engine_config,
    profile_memory_limit,
)
from cuzktui.units import GiB


def test_default_engine_config_is_valid_loopback_only_and_emulates_a_box(tmp_path: Path) -> None:
    doc = ConfigDocument.parse(default_engine_config(tmp_path, None))
    assert not [p for p in doc.problems() if p.severity is not Severity.INFO]
    assert doc.get("daemon", "listen") == f"unix://{tmp_path / 'cuzk.sock'}"
    assert str(doc.get("daemon", "status_listen")).startswith("127.0.0.1:")
    assert doc.get("engine", "mem_total") == "256GiB"
    assert ConfigDocument.parse(default_engine_config(tmp_path, 512)).get("engine", "mem_total") == "512GiB"


def test_a_profile_is_a_cgroup_of_the_box_size_in_real_bytes() -> None:
    assert profile_memory_limit(256, 1 / 256) == GiB
    assert profile_memory_limit(128, 1 / 256) == GiB // 2


async def test_an_attached_daemon_cannot_be_reconfigured_or_benchmarked() -> None:
    controller = LiveController(LiveOptions(program=None, attach=AttachTarget("127.0.0.1:1")))
    with pytest.raises(ControllerError, match="attached"):
        await controller.apply_config({"pipeline.max_parallel_synthesis": 4})
    with pytest.raises(ControllerError, match="launches"):
        await controller.start_bench(BenchRequest("porep", 1, 1))
