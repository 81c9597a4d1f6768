"""The live controller's pure parts: its first engine config, machine profiles, refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cuzktui.config import ConfigDocument
from cuzktui.controller import BenchRequest, ControllerError
from cuzktui.knobs import Severity
from cuzktui.live import (
    AttachTarget,
    LiveController,
    LiveOptions,
    default_engine_config,
    profile_memory_limit,
    with_profile,
)
from cuzktui.units import GiB
from tests.conftest import engine_config_text, memory_cgroup_or_skip, require_engine


def test_default_engine_config_is_valid_loopback_only_and_emulates_a_box(tmp_path: Path) -> None:
    doc = ConfigDocument.parse(default_engine_config(tmp_path, None))
    assert not [p for p in doc.problems() if p.severity is not Severity.INFO]
    assert doc.get("daemon", "listen") == f"unix://{tmp_path / 'cuzk.sock'}"
    assert str(doc.get("daemon", "status_listen")).startswith("127.0.0.1:")
    assert doc.get("engine", "mem_total") == "256GiB"
    assert ConfigDocument.parse(default_engine_config(tmp_path, 512)).get("engine", "mem_total") == "512GiB"


def test_a_profile_sets_the_emulated_ram_unless_the_config_already_does() -> None:
    doc = ConfigDocument.parse(with_profile("# mine\n[pipeline]\nmax_parallel_synthesis = 4\n", 512))
    assert doc.get("engine", "mem_total") == "512GiB" and doc.get("pipeline", "max_parallel_synthesis") == 4
    assert doc.text().startswith("# mine\n")
    explicit = '[engine]\nmem_total = "128GiB"\n'
    assert with_profile(explicit, 512) == explicit


def test_a_profile_is_a_cgroup_of_the_box_size_in_real_bytes() -> None:
    assert profile_memory_limit(256, 1 / 256) == GiB
    assert profile_memory_limit(128, 1 / 256) == GiB // 2


async def test_an_attached_daemon_cannot_be_reconfigured_or_benchmarked() -> None:
    controller = LiveController(LiveOptions(program=None, attach=AttachTarget("127.0.0.1:1")))
    with pytest.raises(ControllerError, match="attached"):
        await controller.apply_config({"pipeline.max_parallel_synthesis": 4})
    with pytest.raises(ControllerError, match="launches"):
        await controller.start_bench(BenchRequest("porep", 1, 1))


async def test_a_profile_runs_the_engine_as_that_box_inside_a_real_memory_cgroup(tmp_path: Path) -> None:
    from cuzktui.supervisor import engine_program
    from cuzktui.system import read_cgroup_memory

    require_engine()
    memory_cgroup_or_skip()
    config = tmp_path / "cuzk.toml"
    config.write_text(
        engine_config_text(daemon={"listen": f"unix://{tmp_path}/d.sock"}, engine={"mem_total": "256GiB"})
    )
    controller = LiveController(
        LiveOptions(program=engine_program(), config_file=config, session_dir=tmp_path / "s", profile_gib=256)
    )
    try:
        await controller.start()
        deadline = asyncio.get_running_loop().time() + 60
        while controller.model.daemon.phase != "ready":
            assert asyncio.get_running_loop().time() < deadline, "the engine never became ready"
            assert controller.model.daemon.phase != "dead", controller.model.daemon.exit
            await controller.poll()
            await asyncio.sleep(0.05)
        supervisor = controller.supervisor
        assert supervisor is not None and supervisor.cgroup is not None and supervisor.pid is not None
        assert supervisor.pid in supervisor.cgroup.pids()
        assert read_cgroup_memory(supervisor.cgroup.path).limit_bytes == GiB  # 256 GiB at 1/256
        last_limit = controller.model.cgroup_limit.last()
        assert last_limit is not None
        assert last_limit[1] == 256 * GiB  # shown as the emulated box
        cgroup_path = supervisor.cgroup.path
    finally:
        await controller.shutdown(stop_daemon=True)
    assert not controller.daemon_running()
    assert not cgroup_path.exists(), "the cgroup is removed with the daemon"


async def test_a_corrupt_config_launches_nothing_and_says_how_to_fix_it(tmp_path: Path) -> None:
    from cuzktui.supervisor import engine_program

    config = tmp_path / "cuzk.toml"
    config.write_text("[pipeline\nmax_parallel_synthesis = 3\n")
    controller = LiveController(LiveOptions(program=engine_program(), config_file=config, session_dir=tmp_path / "s"))
    try:
        with pytest.raises(ControllerError, match=r"cuzk\.toml:1:.*config check"):
            await controller.start()
        assert config.read_text() == "[pipeline\nmax_parallel_synthesis = 3\n", "the file is untouched"
        with pytest.raises(ControllerError, match="no daemon was launched"):
            await controller.apply_config({"pipeline.max_parallel_synthesis": 4})
        assert not controller.daemon_running()
    finally:
        await controller.shutdown(stop_daemon=True)
