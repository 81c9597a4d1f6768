"""Real-size proof inputs against the engine's memory (issue 16 point 3).

1. Idle RSS of one engine process across repeated batches of real-size C1s (Curio's wrapper
   around a 32 GiB SealCommitPhase1Output from cuzk-engine's generator, ``--c1-size``): after
   each batch of ``--batch`` concurrent Prove calls the engine is idle, and its RSS must stay flat
   (upstream keeps a finished job's status only, not its input).
2. The seed case with those inputs: ``cuzk-tui bench`` (engine as a 256 GiB box in a 1 GiB memory
   cgroup, ``total_budget = "auto"`` read from a 512 GiB host, 12 PoRep at concurrency 6,
   ``max_parallel_synthesis = 18``) — the OOM kill the budget causes, and no other: with real-size
   inputs the run completes like with small ones, and every restart is blamed on the budget only
   because the budget did it. Needs root (a v1 memory cgroup); skipped otherwise.

    .venv/bin/python benchmarks/engine_payload.py [--c1-size 60MB] [--batches 3] [--batch 6] [--skip-seed]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import psutil

from cuzktui import proofinputs as pi
from cuzktui.proto import proving_pb2 as pb
from cuzktui.proto import proving_pb2_grpc
from cuzktui.units import parse_size

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
MESSAGE_LIMIT = 256 * MiB


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def idle_rss(c1: bytes, batches: int, batch: int, time_scale: float) -> list[int]:
    """RSS of the engine when idle: after start, then after each batch."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "engine.toml"
        config.write_text(
            f'[memory]\ntotal_budget = "400GiB"\n[engine]\ntime_scale = {time_scale}\n'
            '[pipeline]\nmax_parallel_synthesis = 8\n[logging]\nlevel = "warn"\n'
        )
        address = f"127.0.0.1:{free_port()}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine", "-c", str(config), "-l", address],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        options = [("grpc.max_send_message_length", MESSAGE_LIMIT), ("grpc.max_receive_message_length", MESSAGE_LIMIT)]
        channel = grpc.insecure_channel(address, options=options)
        try:
            grpc.channel_ready_future(channel).result(timeout=60)
            stub = proving_pb2_grpc.ProvingEngineStub(channel)
            process = psutil.Process(proc.pid)
            samples = [process.memory_info().rss]

            def prove(n: int) -> int:
                request = pb.SubmitProofRequest(
                    request_id=f"porep-1000-{n}",
                    proof_kind=pb.POREP_SEAL_COMMIT,
                    sector_size=pi.SECTOR_SIZE_32G,
                    vanilla_proof=c1,
                    sector_number=1,
                    miner_id=1000,
                )
                status: int = stub.Prove(pb.ProveRequest(submit=request), timeout=600).result.status
                return status

            for round_ in range(batches):
                with ThreadPoolExecutor(batch) as pool:
                    statuses = list(pool.map(prove, range(round_ * batch, (round_ + 1) * batch)))
                assert all(s == pb.AwaitProofResponse.COMPLETED for s in statuses), statuses
                samples.append(process.memory_info().rss)
            return samples
        finally:
            channel.close()
            proc.terminate()
            proc.wait(timeout=30)


def seed_case(c1_path: Path, time_scale: float) -> dict[str, object] | str:
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup/memory").is_dir():
        return "skipped: needs root and a v1 memory cgroup"
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "box.toml"
        config.write_text('[engine]\nmem_total = "512GiB"\n[memory]\ntotal_budget = "auto"\n')
        done = subprocess.run(
            [
                sys.executable, "-m", "cuzktui.bench", "--engine", "--config", str(config),
                "--memory-limit", "1GiB", "-t", "porep", "--c1", str(c1_path), "-c", "12", "-j", "6", "--json",
                "--session", str(Path(tmp) / "session"), "--set", "pipeline.max_parallel_synthesis=18",
                "--set", f"engine.time_scale={time_scale}",
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if not done.stdout.strip():
            return f"no summary (exit {done.returncode}): {done.stderr[-2000:]}"
        summary: dict[str, object] = json.loads(done.stdout)
        return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--c1-size", default="60MB")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--batch", type=int, default=6)
    parser.add_argument("--time-scale", type=float, default=0.003)
    parser.add_argument("--skip-seed", action="store_true")
    args = parser.parse_args()
    c1 = pi.generate_c1(miner_id=1000, sector_num=1, size=parse_size(args.c1_size))
    small = pi.generate_c1(miner_id=1000, sector_num=1, size=0)
    print(f"C1 wrappers: {len(c1) / 1e6:.1f} MB (real size) and {len(small) / 1e6:.1f} MB (compact), generated")
    print(f"idle RSS of the engine, {args.batches} batches of {args.batch} concurrent Prove calls")
    print("(the compact column is the model's own residency: SRS, PCE, pinned pool at 1/256)")
    real = idle_rss(c1, args.batches, args.batch, args.time_scale)
    compact = idle_rss(small, args.batches, args.batch, args.time_scale)
    print(f"  {'':>13}  {'real-size':>10}  {'compact':>10}")
    for i, (rss, base) in enumerate(zip(real, compact, strict=True)):
        print(f"  {'after start' if i == 0 else f'after batch {i}':>13}: {rss / MiB:7.1f} MiB {base / MiB:7.1f} MiB")
    if args.skip_seed:
        return
    with tempfile.TemporaryDirectory() as tmp:
        c1_path = Path(tmp) / pi.C1_FILE
        c1_path.write_bytes(c1)
        started = time.monotonic()
        result = seed_case(c1_path, args.time_scale)
    print(f"seed case (12 PoRep, concurrency 6, 1 GiB cgroup as a 256 GiB box), {time.monotonic() - started:.0f}s:")
    if isinstance(result, str):
        print(f"  {result}")
        return
    print(f"  completed {result['completed']} failed {result['failed']} outcome {result['outcome']}")
    restarts = result.get("restarts")
    for restart in restarts if isinstance(restarts, list) else []:
        print(f"  restart {restart['attempt']}: {restart['reason']} → total_budget {restart['total_budget']}")
        for line in restart["evidence"]:
            print(f"      {line}")


if __name__ == "__main__":
    main()
