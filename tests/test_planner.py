"""Planner: cgroup-aware budget, knob recommendations, the memcheck report and its warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuzktui import planner
from cuzktui.daemon_facts import DOCUMENTED_TIERS, ProofKind, peak_rss_estimate
from cuzktui.samplers import GpuDevice
from cuzktui.system import CgroupMemory
from cuzktui.units import GiB, format_size, parse_size

DATA = Path(__file__).parent / "data" / "cgroup"


def _knobs(ram_gib: float, cpus: int = 96, gpus: int = 1) -> dict[str, int | str]:
    return {r.key: r.value for r in planner.recommend(int(ram_gib * GiB), cpus, gpus)}


@pytest.mark.parametrize("tier", DOCUMENTED_TIERS, ids=lambda t: f"{t.ram_gib}GiB")
def test_documented_tiers_are_reproduced(tier: object) -> None:
    from cuzktui.daemon_facts import RamTier

    assert isinstance(tier, RamTier)
    knobs = _knobs(tier.ram_gib)  # the docs' tiers were measured on a 96-core, single-GPU host
    assert knobs["max_parallel_synthesis"] == tier.max_parallel_synthesis
    assert knobs["gpu_workers_per_device"] == tier.gpu_workers_per_device


@pytest.mark.parametrize("ram_gib", [100, 128, 200, 256, 300, 384, 512, 768, 2048])
def test_budget_keeps_the_measured_peak_under_the_memory(ram_gib: int) -> None:
    ram = ram_gib * GiB
    budget = planner.cgroup_aware_budget(ram)
    assert budget % GiB == 0
    admitted = planner.partitions_in_budget(budget, ProofKind.POREP_SEAL_COMMIT)
    assert admitted >= 1
    assert peak_rss_estimate(admitted) <= ram - 5 * GiB
    # ...and not needlessly tight: one more partition would break the model.
    assert peak_rss_estimate(admitted + 1) > ram - 5 * GiB
    assert _knobs(ram_gib)["total_budget"] == f"{budget // GiB}GiB"
    assert parse_size(str(_knobs(ram_gib)["total_budget"])) == budget


def test_budget_below_one_partition_is_srs_and_pce_only() -> None:
    budget = planner.cgroup_aware_budget(90 * GiB)
    assert planner.partitions_in_budget(budget, ProofKind.POREP_SEAL_COMMIT) == 0
    assert budget == 70 * GiB  # 44 GiB SRS + 25.7 GiB PCE, rounded up


@pytest.mark.parametrize("ram_gib", [16, 32, 64, 70])
def test_budget_never_exceeds_the_ram_less_the_margin(ram_gib: int) -> None:
    assert planner.cgroup_aware_budget(ram_gib * GiB) == (ram_gib - 5) * GiB
    assert planner.cgroup_aware_budget(ram_gib * GiB, 2 * GiB) == (ram_gib - 2) * GiB


def test_the_configured_safety_margin_is_honoured() -> None:
    report = _report(cgroup=None, config={"memory.safety_margin": "30GiB"})
    assert report.safety_margin_bytes == 30 * GiB
    assert report.auto_budget_bytes == 482 * GiB
    assert report.recommended_budget_bytes == planner.cgroup_aware_budget(512 * GiB, 30 * GiB)
    assert report.recommended_budget_bytes < _report(cgroup=None).recommended_budget_bytes
    assert "MemTotal − safety_margin 30 GiB" in report.render()


def test_parallelism_never_exceeds_what_memory_or_cpus_allow() -> None:
    assert _knobs(256, cpus=8)["max_parallel_synthesis"] == 2
    assert _knobs(100, cpus=96)["max_parallel_synthesis"] == 1  # memory: (100 - 74) // 20
    assert _knobs(192, cpus=96)["max_parallel_synthesis"] == 4  # halfway between the 2 and 7 tiers
    many = _knobs(4096, cpus=256)
    assert many["max_parallel_synthesis"] == 12  # beyond the last tier the docs saw no gain


def test_high_concurrency_splits_cores_and_paces_the_queue() -> None:
    knobs = _knobs(512, cpus=96)
    assert (knobs["gpu_threads"], knobs["threads"], knobs["max_gpu_queue_depth"]) == (32, 64, 8)
    low = _knobs(256, cpus=96)
    assert (low["gpu_threads"], low["threads"], low["max_gpu_queue_depth"]) == (0, 0, 0)
    # Two GPUs share 12 partitions: 6 each is not enough to keep either busy.
    assert _knobs(512, cpus=96, gpus=2)["gpu_workers_per_device"] == 1


def test_every_recommendation_explains_itself_with_figures() -> None:
    for rec in planner.recommend(384 * GiB, 96, 1):
        assert rec.section and rec.key
        assert any(ch.isdigit() for ch in rec.reasoning), rec


def test_a_box_too_small_for_porep_is_not_promised_a_peak_under_its_ram() -> None:
    """A 23.5 GiB host: memcheck said the budget 'keeps the measured peak RSS (… = 69 GiB at 0 partitions) under
    23.5 GiB'. No peak fits there: the reasoning says so, with the figures the warning uses."""
    small = int(23.5 * GiB)
    (budget, *_) = planner.recommend(small, 2, 0)
    assert budget.key == "total_budget" and budget.value == "18GiB"
    assert "under 23.5 GiB" not in budget.reasoning and "at 0 partitions" not in budget.reasoning
    peak = format_size(peak_rss_estimate(1))
    assert budget.reasoning.startswith("all of 23.5 GiB less the 5 GiB margin, and still too little")
    assert (
        f"peak at {peak} under the measured model" in budget.reasoning and "budget floor (58 GiB)" in budget.reasoning
    )
    warnings = "\n".join(_report(cgroup=None, host_mem_total_bytes=small).warnings)
    assert f"peaks at {peak}" in warnings, "the reasoning and the warning give the same peak"
    roomy = planner.recommend(256 * GiB, 64, 1)[0].reasoning
    assert "under 256 GiB with a 5 GiB margin" in roomy, "where partitions fit, the peak is kept under the RAM"


def _report(**overrides: object) -> planner.MemcheckReport:
    facts: dict[str, object] = {
        "host_mem_total_bytes": 512 * GiB,
        "cgroup": CgroupMemory(1, Path("/sys/fs/cgroup/memory/docker/abc"), 256 * GiB, 10 * GiB, 0),
        "memlock_bytes": None,
        "cpus": 96,
        "cpu_quota": None,
        "gpus": [GpuDevice(0, "NVIDIA H200", 141 * GiB)],
        "gpu_state": "1 NVIDIA GPU via NVML",
    }
    facts.update(overrides)
    return planner.make_report(**facts)  # type: ignore[arg-type]


def test_cgroup_below_host_ram_warns_that_auto_overshoots() -> None:
    report = _report()
    assert report.effective_ram_bytes == 256 * GiB
    assert report.auto_budget_bytes == 507 * GiB
    assert report.recommended_budget_bytes == planner.cgroup_aware_budget(256 * GiB)
    (warning,) = report.warnings
    assert "overshoots it by 251 GiB" in warning
    assert f'total_budget = "{report.recommended_budget_bytes // GiB}GiB"' in warning


def test_no_cgroup_limit_means_host_ram_and_no_warning() -> None:
    report = _report(cgroup=None)
    assert report.effective_ram_bytes == 512 * GiB
    assert report.cgroup_version is None
    assert report.warnings == ()
    # The budget admits 21 PoRep partitions, but 12 synthesis workers (the recommended
    # max_parallel_synthesis, under max(2, min(budget / 14 GiB, 12))) cap what runs at once.
    assert planner.partitions_in_budget(report.recommended_budget_bytes, ProofKind.POREP_SEAL_COMMIT) == 21
    assert report.max_porep_partitions == report.max_snap_partitions == 12
    # Upstream's s/proof figures were measured with 15-20 proofs in flight.
    assert 15 <= report.suggested_bench_concurrency <= 20 <= report.suggested_bench_count


def test_partition_counts_under_the_recommended_budget() -> None:
    report = _report()
    budget = report.recommended_budget_bytes
    workers = 7  # the recommended max_parallel_synthesis for 256 GiB (documented tier)
    assert report.max_porep_partitions == min((budget - int(69.7 * GiB)) // (14 * GiB), workers)
    assert report.max_snap_partitions == min((budget - 50 * GiB) // (9 * GiB), workers)


@pytest.mark.parametrize(
    ("budget", "fragment"),
    [
        ("64GiB", 'configured total_budget "64GiB": 64 GiB can never prove WindowPoSt'),
        ("512MiB", "below every proof kind's floor"),
    ],
)
def test_memcheck_says_what_config_check_says_about_floors(budget: str, fragment: str) -> None:
    report = _report(cgroup=None, config={"memory.total_budget": budget})
    assert any(fragment in w for w in report.warnings)
    assert not any("can never prove" in w or "below every" in w for w in _report(
        cgroup=None, config={"memory.total_budget": budget, "pipeline.enabled": False}).warnings)  # fmt: skip


def test_auto_budget_is_resolved_against_this_machine_for_the_floors() -> None:
    report = _report(cgroup=None, host_mem_total_bytes=64 * GiB, config={"memory.total_budget": "auto"})
    assert any(w.startswith('configured total_budget "auto" = MemTotal − safety_margin: 59 GiB can never prove')
               for w in report.warnings)  # fmt: skip


def test_mixed_porep_and_windowpost_residency_advises_eviction_min_idle() -> None:
    assert planner.MIXED_RESIDENT // GiB == 152  # 44 + 25.7 + 57 + 26 GiB: "~153 GiB resident"
    report = _report(cgroup=None, config={"memory.total_budget": "120GiB", "memory.eviction_min_idle": "5m"})
    (warning,) = [w for w in report.warnings if "WindowPoSt on one node" in w]
    assert "memory.eviction_min_idle (5m)" in warning and "lower eviction_min_idle" in warning
    assert "resident SRS+PCE" in report.render() and "PoRep + WindowPoSt on one node 153 GiB" in report.render()
    roomy = _report(cgroup=None, config={"memory.total_budget": "200GiB"})
    assert not any("WindowPoSt on one node" in w for w in roomy.warnings)


def test_an_engine_box_is_described_not_the_host() -> None:
    config = {"engine.mem_total": "256GiB", "engine.memory_scale": 1 / 256, "engine.gpus": 2, "engine.cpus": 96,
              "engine.gpu_memory": "80GiB"}  # fmt: skip
    # A 1 GiB real cgroup at 1/256 is the box's 256 GiB limit; the host's RAM does not appear.
    box = planner.engine_box(config, memory_limit_bytes=GiB, cgroup_path="/cg/x")
    report = planner.gather_report(box=box, config=config)
    assert report.host_mem_total_bytes == report.effective_ram_bytes == 256 * GiB
    assert report.cgroup_limit_bytes == 256 * GiB and report.cgroup_path == "/cg/x"
    assert report.cpus == 96 and [g.total_bytes for g in report.gpus] == [80 * GiB, 80 * GiB]
    assert "box cuzk-engine emulates" in report.machine and report.memlock_bytes is None
    assert report.recommended_budget_bytes <= 256 * GiB - 5 * GiB
    # A tiny box: the recommendation stays under its RAM.
    small = planner.gather_report(box=planner.engine_box({**config, "engine.mem_total": "32GiB"}))
    assert small.recommended_budget_bytes <= 32 * GiB
    assert int(small.recommendations[0].value.removesuffix("GiB")) <= 32  # type: ignore[union-attr]


def test_gpus_devices_decides_the_gpus_planned_for() -> None:
    # engine.rs detect_gpu_ordinals: the listed devices, not every GPU of the machine. Two GPUs
    # sharing 12 partitions want one worker each; one GPU with all 12 wants two.
    two = [GpuDevice(i, "NVIDIA H200", 141 * GiB) for i in range(2)]

    def workers(config: dict[str, object]) -> object:
        recommendations = _report(gpus=two, host_mem_total_bytes=1024 * GiB, cgroup=None, config=config).recommendations
        return next(r.value for r in recommendations if r.key == "gpu_workers_per_device")

    assert (workers({}), workers({"gpus.devices": [1]})) == (1, 2)
    # The engine emulates the listed ordinals.
    listed = planner.engine_box({"engine.gpus": 4, "gpus.devices": [1, 3]})
    assert [g.index for g in listed.gpus] == [1, 3]
    every = planner.engine_box({"engine.gpus": 4})
    assert [g.index for g in every.gpus] == [0, 1, 2, 3]


def test_low_memlock_small_ram_and_exposed_listen_are_warned() -> None:
    report = _report(
        cgroup=None,
        host_mem_total_bytes=64 * GiB,
        memlock_bytes=8 << 20,
        listen_addresses=["0.0.0.0:9820", "127.0.0.1:9821", "[::]:9820", "unix:///run/curio/cuzk.sock"],
    )
    text = "\n".join(report.warnings)
    assert "memlock limit 8 MiB" in text
    assert "cannot hold a 32 GiB PoRep" in text
    assert "listens on 0.0.0.0:9820" in text and "listens on [::]:9820" in text
    assert len([w for w in report.warnings if "listens on" in w]) == 2


def test_cpu_quota_limits_the_cpus_planned_for() -> None:
    assert _report(cpu_quota=8.0).recommendations[1].value == 2
    assert _report(cpu_quota=None).recommendations[1].value == 7


def test_report_json_round_trips_and_text_names_every_fact() -> None:
    report = _report(memlock_bytes=8 << 20)
    data = json.loads(json.dumps(report.to_json()))
    assert data["cgroup_limit_bytes"] == 256 * GiB
    assert data["gpus"] == [{"index": 0, "name": "NVIDIA H200", "total_bytes": 141 * GiB}]
    assert {r["key"] for r in data["recommendations"]} >= {"total_budget", "max_parallel_synthesis"}
    text = report.render()
    for words in ("effective RAM       256 GiB", "host MemTotal       512 GiB", "v1 /sys/fs/cgroup/memory/docker/abc",
                  "memlock limit       8 MiB", "NVIDIA H200", "[memory] total_budget", "warnings:"):  # fmt: skip
        assert words in text


def test_gather_report_reads_fixture_trees() -> None:
    report = planner.gather_report(pid=1234, proc_root=DATA / "v2" / "proc", cgroup_root=DATA / "v2" / "sys")
    assert report.cgroup_version == 2
    assert report.effective_ram_bytes == 64 * GiB
    assert report.cpu_quota == 4.0
    assert report.gpus == () or report.gpu_state.endswith("via NVML")
