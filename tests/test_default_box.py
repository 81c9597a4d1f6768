"""Issue 25 point 3: one default box. However the engine is started — ``cuzk-engine -c FILE``, ``cuzk-tui
--engine`` (and ``record``, which runs the same live controller), ``cuzk-tui bench --engine`` (and ``tune``,
whose trials are bench runs) — with a config that names no box, it emulates the seed's: 256 GiB of RAM (an
"auto" budget of 251 GiB) and one GPU, whatever this machine's RAM, and says so in its log."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from cuzktui.cli import build_parser
from cuzktui.commands.tui import tui_options
from cuzktui.live import LiveController
from tests.conftest import ENGINE_READY_TIMEOUT_S, TEST_TIME_SCALE, engine_config_text, require_engine
from tests.test_cli_bench import _bench

BOX = re.compile(r"cuzk-engine: emulated daemon — no GPU, proofs are not valid box_ram_gib=(\d+) gpus=(\d+)")
BUDGET = re.compile(r"memory budget initialized total_budget_gib=(\d+)")
SEED_BOX = (256, 1, 251)


def _box(log: str) -> tuple[int, int, int]:
    """(RAM GiB, GPUs, "auto" budget GiB) as the engine's startup lines state them."""
    box, budget = BOX.search(log), BUDGET.search(log)
    assert box is not None and budget is not None, log[:2000]
    return int(box[1]), int(box[2]), int(budget[1])


async def _live_engine(args: list[str]) -> str:
    """The daemon log of ``cuzk-tui ARGS``'s engine once ready (its live controller, as run_tui builds it)."""
    controller = LiveController(tui_options(build_parser().parse_args(args)))
    deadline = asyncio.get_running_loop().time() + ENGINE_READY_TIMEOUT_S
    try:
        await controller.start()
        while controller.model.daemon.phase != "ready":
            assert asyncio.get_running_loop().time() < deadline, "the engine never became ready"
            assert controller.model.daemon.phase != "dead", controller.model.daemon.exit
            await controller.poll()
            await asyncio.sleep(0.05)
        assert controller.session is not None
        return controller.session.daemon_log_path.read_text()
    finally:
        await controller.shutdown(stop_daemon=True)


async def test_every_way_of_starting_the_engine_emulates_the_seeds_box(tmp_path: Path, start_engine: Any) -> None:
    require_engine()
    plain = await start_engine(engine_config_text())  # cuzk-engine -c FILE: the file names no box
    bench = tmp_path / "bench"
    done = await asyncio.to_thread(
        _bench, "--engine", "--kind", "winning", "--count", "1", "--concurrency", "1", "--session", str(bench),
        "--set", f"engine.time_scale={TEST_TIME_SCALE}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    live = await _live_engine(["--engine", "--session", str(tmp_path / "live")])
    assert _box(plain.log_path.read_text()) == _box((bench / "daemon.log").read_text()) == _box(live) == SEED_BOX
