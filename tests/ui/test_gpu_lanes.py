"""Several GPUs on the CPU machine: cuzk-engine emulating 2 and 4 GPUs (``[engine] gpus``) behind the app.

With 2 GPU workers per GPU (the daemon's default ``gpu_workers_per_device``), two PoRep proofs
(20 partitions) go through the real engine; the waterfall's lanes are grouped per GPU as the
engine's start lines map them (engine.rs start(): worker ids run across the GPUs in order), the
dashboard draws one chart per GPU from the engine's emulated VRAM (GetStatus, the path the tool
takes for a daemon's GPUs when this machine has no NVML; marked "emulated" in each chart's title),
and memcheck describes each GPU of the emulated box. The first tests need no engine: the engine's
own start lines, parsed, order the lanes of a 2-GPU run, and SVG snapshots of the fixed scenario
(tests/ui/fakes.py) spread over several GPUs show the dashboard with 4 GPU charts and the lanes of 2.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.client import DaemonClient, snapshot_from_status
from cuzktui.live import LiveOptions
from cuzktui.logparse import parse_line
from cuzktui.model import SessionModel
from cuzktui.proto import proving_pb2 as pb
from cuzktui.samplers import GpuSampler
from cuzktui.supervisor import engine_program
from cuzktui.timeline import Timeline
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.screens.dashboard import DashboardScreen
from cuzktui.ui.screens.memcheck import MemcheckScreen
from cuzktui.ui.screens.waterfall import WaterfallScreen
from cuzktui.ui.widgets.charts import Chart
from cuzktui.ui.widgets.panels import Panel
from cuzktui.ui.widgets.waterfall import WaterfallView
from cuzktui.waterfall_layout import lane_label, lane_order
from tests.conftest import fast_engine_config, small_c1
from tests.status_bodies import partition, pipeline, status_body
from tests.ui.fakes import FakeController, Timed, build_model
from tests.ui.test_live_engine import BENCH_S, SIZE, Live, live_app
from tests.ui.test_live_engine import short_dir as short_dir  # the fixture, by name (a redundant alias re-exports it)
from tests.ui.test_snapshots import pressing

WORKERS_PER_GPU = 2  # knobs.py gpus.gpu_workers_per_device default
PROOFS = 2
PARTITIONS = 10


def test_lanes_are_grouped_per_gpu_from_the_worker_start_lines() -> None:
    # gpus.devices = [1, 0]: engine.rs numbers workers in the devices' order, so worker 0 is on GPU1.
    timeline = Timeline()
    timeline.apply(parse_line("2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: starting cuzk engine"))
    for worker, gpu in ((0, 1), (1, 1), (2, 0), (3, 0)):
        line = f"pipeline GPU worker started worker_id={worker} gpu={gpu} sub_id={worker % 2}"
        timeline.apply(parse_line(f"2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: {line}"))
    for worker in (3, 0, 2):  # worker 1 never proved: no lane (engine.rs timeline_event's format)
        timeline.apply(parse_line(f"TIMELINE,10,GPU_PICKUP,a,worker={worker},partition={worker}"))
    assert lane_order(timeline) == [2, 3, 0]
    assert [lane_label(timeline, w) for w in lane_order(timeline)] == [
        "GPU0 worker 2",
        "GPU0 worker 3",
        "GPU1 worker 0",
    ]


def test_lanes_of_a_daemon_watched_without_its_log_are_grouped_per_gpu() -> None:
    """/status lists each GPU worker with its gpu_ordinal (status.rs GpuWorkerSnapshot): the lanes drawn
    from its partition states name their GPU as the log's start lines would."""
    model = SessionModel()
    model.apply(ev.DaemonLaunched(999.0, "attached", None, (), None, "127.0.0.1:9820", None, "127.0.0.1:9821"))
    job = "porep-1000-17"
    for t, state in ((1000.0, "synth_done"), (1001.0, "gpu")):
        body = status_body([pipeline(job, [partition(0, state, 4000, 300 if state == "gpu" else None)])])
        body["uptime_secs"] = t - 900.0
        idle = body["gpu_workers"][0]
        body["gpu_workers"] = [{**idle, "worker_id": w, "gpu_ordinal": w // WORKERS_PER_GPU} for w in range(4)]
        if state == "gpu":
            body["gpu_workers"][3].update(state="proving", current_job=job, current_partition=0, busy_secs=0.3)
        model.apply(snapshot_from_status(body, t, partitions=True))
    timeline = model.timeline
    assert [timeline.worker_gpu(w) for w in range(4)] == [0, 0, 1, 1]
    assert [lane_label(timeline, w) for w in lane_order(timeline)] == ["GPU1 worker 3"]


def on_gpus(events: list[Timed], gpus: int) -> list[Timed]:
    """The fixed scenario on ``gpus`` GPUs: each GPU sample repeated for the others (each a little
    fuller than the one before), and worker w starting on GPU w as engine.rs logs it."""
    extra: list[Timed] = []
    for t, event in events:
        if isinstance(event, ev.GpuSample) and event.used_bytes is not None:
            extra += [
                (t, replace(event, index=i, used_bytes=event.used_bytes * (10 + i) // 10)) for i in range(1, gpus)
            ]
        if isinstance(event, ev.EngineStarted):
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(t))
            extra += [
                (
                    t,
                    parse_line(
                        f"{stamp}  INFO cuzk_core::engine: pipeline GPU worker started worker_id={w} gpu={w} sub_id=0"
                    ),
                )
                for w in range(min(gpus, 2))  # the scenario's two workers
            ]
    return sorted(events + extra, key=lambda item: item[0])


SnapCompare = Callable[..., bool]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_dashboard_with_four_gpus(snap_compare: SnapCompare, events: list[Timed], size: tuple[int, int]) -> None:
    app = CuzkApp(FakeController(build_model(on_gpus(events, 4))), poll_interval=1000)
    assert snap_compare(app, terminal_size=size, run_before=pressing())


def test_lanes_of_two_gpus(snap_compare: SnapCompare, events: list[Timed]) -> None:
    app = CuzkApp(FakeController(build_model(on_gpus(events, 2))), poll_interval=1000)
    assert snap_compare(app, terminal_size=(120, 40), run_before=pressing("2", "l", "down", "enter"))


def _request(n: int) -> pb.SubmitProofRequest:
    return pb.SubmitProofRequest(
        request_id=f"porep-1000-{n}",
        proof_kind=pb.POREP_SEAL_COMMIT,
        sector_size=34359738368,
        vanilla_proof=small_c1(),
        sector_number=1,
        miner_id=1000,
    )


def _has_nvml() -> bool:
    sampler = GpuSampler()
    try:
        return sampler.available
    finally:
        sampler.close()


async def _prove(live: Live) -> None:
    """PROOFS PoRep proofs straight to the engine (no benchmark: the TUI's daemon keeps running)."""
    async with DaemonClient(live.controller.model.daemon.listen) as client:
        results = await asyncio.gather(*(client.prove(_request(n), timeout=BENCH_S) for n in range(PROOFS)))
    assert all(r.status == pb.AwaitProofResponse.COMPLETED for r in results), results
    timeline = live.controller.model.timeline
    await live.until(lambda: timeline.completed == PROOFS, f"the timeline has {PROOFS} proofs completed", BENCH_S)


@pytest.mark.slow
@pytest.mark.parametrize("gpus", [2, 4])
async def test_an_engine_with_several_gpus_gets_lanes_charts_and_memcheck_per_gpu(
    gpus: int, tmp_path: Path, short_dir: Path
) -> None:
    config_file = tmp_path / "cuzk.toml"
    config_file.write_text(fast_engine_config(short_dir, gpus=gpus))
    options = LiveOptions(
        program=engine_program(), config_file=config_file, session_dir=tmp_path / "session", sample_interval=0.5
    )
    async with live_app(options, config_file) as live:
        app, controller = live.app, live.controller
        await live.until_ready()
        await _prove(live)

        # -- the waterfall's lanes: every worker of every GPU, grouped by GPU --------------------
        await live.show("2", WaterfallScreen)
        await live.pilot.press("l")
        view = app.screen.query_one(WaterfallView)
        expected = [
            f"GPU{gpu} worker {gpu * WORKERS_PER_GPU + sub}" for gpu in range(gpus) for sub in range(WORKERS_PER_GPU)
        ]
        # 20 partitions reach the GPU queue and the idle workers take them in turn: every worker proves.
        await live.until(lambda: [r.label for r in view.rows] == expected, f"lanes {expected}", 10)
        assert all(row.kind == "lane" for row in view.rows)
        # A partition's details name its worker's GPU.
        await live.pilot.press("l", "down", "down", "enter")
        detail = app.screen.query_one("#waterfall-detail", Panel)
        await live.until(lambda: detail._shown is not None, "the partition's details", 10)
        assert detail._shown is not None
        head = detail._shown.plain.splitlines()[0]
        worker = int(head.split("  worker ")[1].split()[0])
        assert f"  worker {worker} on GPU{worker // WORKERS_PER_GPU}" in head, head

        # -- memcheck: each GPU of the emulated box ----------------------------------------------
        report = controller.memcheck_report()
        assert [g.index for g in report.gpus] == list(range(gpus))
        await live.show("5", MemcheckScreen)
        facts = app.screen.query_one("#memcheck-facts")
        await live.until(lambda: "GPUs" in str(facts.render()), "the memcheck facts are shown", 30)
        gpu_row = next(line for line in str(facts.render()).splitlines() if line.startswith("GPUs"))
        assert f"{gpus} emulated by cuzk-engine" in gpu_row
        for index in range(gpus):
            assert f"{index}: cuzk-engine emulated GPU" in gpu_row

        # -- the dashboard: one chart per GPU, each on screen ------------------------------------
        await live.show("1", DashboardScreen)
        model = controller.model
        if _has_nvml():
            pytest.skip("this machine has NVML: the dashboard charts its real GPUs, not the engine's")
        await live.until(lambda: sorted(model.gpus) == list(range(gpus)), f"{gpus} GPUs in the model", 30)
        assert all(g.source == "daemon" and "emulated" in g.name for g in model.gpus.values())
        screen = app.screen
        await live.until(lambda: len(screen.query(Chart)) == gpus + 1, f"{gpus} GPU charts beside memory", 10)
        await live.pilot.pause()
        for index in range(gpus):
            chart = screen.query_one(f"#gpu-{index}", Chart)
            assert chart._spec is not None and chart._spec.title.startswith(f"GPU{index} cuzk-engine emulated GPU")
            assert chart.region.height >= 3 and chart.region.bottom <= SIZE[1], (index, chart.region)
            assert any(line.label == "mem" for line in chart._spec.lines)  # the emulated VRAM, in % of its total
