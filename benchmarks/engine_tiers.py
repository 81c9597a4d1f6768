"""The engine's model against the documented RAM tiers (cuzktui.daemon_facts.DOCUMENTED_TIERS).

For each tier the engine's pipeline runs in a fresh process (so peak RSS is that tier's alone)
as a box of that RAM: ``total_budget`` = RAM − 5 GiB (what ``auto`` would give there), the tier's
``max_parallel_synthesis`` and ``gpu_workers_per_device``, one GPU, all proofs queued at once.
It prints seconds per proof in steady state (completions after the warm-up, which pays the SRS
load and PCE extraction) and peak memory in nominal GiB, both from the model's own accounting and
from the measured real RSS ÷ memory_scale, beside the documented figures.

    .venv/bin/python benchmarks/engine_tiers.py [--proofs 6] [--time-scale 0.02] [--memory-scale 0.0009765625]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cuzktui.daemon_facts import DOCUMENTED_TIERS, ProofKind
from cuzktui.units import GiB
from engine.config import Config
from engine.jobs import ProofRequest
from engine.pipeline import Engine
from engine.tracing import EnvFilter, Logger

WARMUP = 2  # completions skipped: the first proof pays the SRS load and the PCE extraction


def vm_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def vm_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def run_tier(
    ram_gib: int, parallel: int, gpu_workers: int, proofs: int, time_scale: float, scale: float
) -> dict[str, Any]:
    config = Config()
    config.total_budget = (ram_gib - 5) * GiB
    config.max_parallel_synthesis = parallel
    config.gpu_workers_per_device = gpu_workers
    config.engine.time_scale = time_scale
    config.engine.memory_scale = scale
    devnull = os.open(os.devnull, os.O_WRONLY)
    log = Logger(EnvFilter.parse("off", lossy=False), colour=False, out_fd=devnull, err_fd=devnull)
    baseline_rss = vm_rss_bytes()
    engine = Engine(config, log)
    engine.start()
    jobs = [
        engine.submit(ProofRequest(f"porep-1000-{n}", ProofKind.POREP_SEAL_COMMIT, vanilla_proof=b"{}"))[0]
        for n in range(proofs)
    ]
    finished: list[float] = []
    for job in jobs:
        await job.future
        finished.append(time.monotonic())
    await engine.aclose()
    steady = (finished[-1] - finished[WARMUP - 1]) / (proofs - WARMUP) / time_scale
    measured_peak = (vm_hwm_bytes() - baseline_rss) / scale
    return {"s_per_proof": steady, "model_peak": engine.arena.peak_nominal, "rss_peak": measured_peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proofs", type=int, default=6)
    parser.add_argument("--time-scale", type=float, default=0.02)
    parser.add_argument("--memory-scale", type=float, default=1 / 1024)
    parser.add_argument("--tier", type=int, help=argparse.SUPPRESS)  # child mode: one tier, JSON on stdout
    args = parser.parse_args()
    if args.proofs <= WARMUP:
        parser.error(f"--proofs must be more than {WARMUP}")
    if args.tier is not None:
        tier = next(t for t in DOCUMENTED_TIERS if t.ram_gib == args.tier)
        result = asyncio.run(
            run_tier(
                tier.ram_gib,
                tier.max_parallel_synthesis,
                tier.gpu_workers_per_device,
                args.proofs,
                args.time_scale,
                args.memory_scale,
            )
        )
        print(json.dumps(result))
        return
    print(f"engine model vs documented RAM tiers ({args.proofs} PoRep proofs queued, steady state after {WARMUP})")
    print(f"{'tier':>8} {'mps':>4} {'gw':>3} | {'s/proof':>8} {'doc':>6} {'ratio':>6} | "
          f"{'peak model':>10} {'peak RSS':>9} {'doc':>5} {'ratio':>6}")  # fmt: skip
    for tier in DOCUMENTED_TIERS:
        out = subprocess.run(
            [sys.executable, __file__, "--tier", str(tier.ram_gib), "--proofs", str(args.proofs),
             "--time-scale", str(args.time_scale), "--memory-scale", str(args.memory_scale)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        r = json.loads(out)
        model_gib, rss_gib = r["model_peak"] / GiB, r["rss_peak"] / GiB
        speed = r["s_per_proof"]
        print(
            f"{tier.ram_gib:>5}GiB {tier.max_parallel_synthesis:>4} {tier.gpu_workers_per_device:>3} | "
            f"{speed:>8.1f} {tier.seconds_per_proof:>6.1f} {speed / tier.seconds_per_proof:>6.2f} | "
            f"{model_gib:>10.0f} {rss_gib:>9.0f} {tier.peak_rss_gib:>5} {model_gib / tier.peak_rss_gib:>6.2f}"
        )


if __name__ == "__main__":
    main()
