"""Ingest throughput: parse_line and the Timeline against a bare line loop, on a synthetic log.

The log imitates a busy PoRep run (docs/daemon-interface.md §4) line for line as the engine writes one
(see LINES_PER_JOB): per partition six TIMELINE lines, the synthesis and GPU human lines (inside their
spans), GPU_TIMING / FIN_TIMING, the pinned pool and the C++ CUZK_TIMING / CUZK_NTT_H lines; every other
job's human lines carry ANSI colour (the daemon's default).

    .venv/bin/python benchmarks/ingest.py [--jobs N] [--repeat R]

Prints lines/s of each loop and its cost relative to the bare loop measured in the same run, then the
bulk reader's (session.load_session: event lines found at C speed, the model built as they are read) with
the details parsed as read, kept as log offsets (lazy: replay, export), and left out (report).
"""

from __future__ import annotations

import argparse
import functools
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from cuzktui.logparse import parse_line
from cuzktui.session import load_session
from cuzktui.timeline import Timeline

_FIELD = re.compile(r" ([a-z_]+)=")


def _colour(line: str) -> str:
    """The tracing-subscriber ANSI rendering of a plain INFO line (§4.2)."""
    stamp, rest = line[:27], line[34:]
    head, sep, body = rest.partition(": ")
    body = _FIELD.sub(lambda m: f" \x1b[3m{m.group(1)}\x1b[0m\x1b[2m=\x1b[0m", body)
    return f"\x1b[2m{stamp}\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2m{head}\x1b[0m\x1b[2m{sep.strip()}\x1b[0m {body}"


# What one 10-partition PoRep job writes, in the order the engine (engine/pipeline.py, imitating
# upstream engine.rs / pipeline.rs / supraseal's C++) writes it for a partition that finds its pinned
# buffer and its capacity hint cached: 33 lines a partition, 6 of them TIMELINE (17.6 % of the log), 10 C++ timing
# lines. A real 4-proof engine run logged 1,446 lines, 240 TIMELINE (16.6 %), 362 CUZK_TIMING; the
# issue's daemon writes ~300 lines a proof (18,000 an hour at 60 proofs/hour): 6 x 10 / 300 = 20 %.
LINES_PER_JOB: Final = 10 + 10 * 33


def synthetic_log(jobs: int) -> Iterator[str]:
    """Lines of a daemon log with ``jobs`` 10-partition PoRep proofs on two GPU workers."""
    epoch = 1_777_618_800.0

    def stamp(offset_ms: int) -> str:
        return datetime.fromtimestamp(epoch + offset_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def human(lines: list[str], coloured: bool) -> Iterator[str]:
        return (_colour(h) if coloured else h for h in lines)

    yield f"{stamp(0)}  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true"
    for j in range(jobs):
        job, base = f"porep-1000-{j}", j * 30_000
        coloured = j % 2 == 1
        single = "synth_single{proof_kind=porep-c2}"
        yield from human(
            [
                f"{stamp(base)}  INFO cuzk_server::service: Prove request_id={job} proof_kind=1 input_size=1294628",
                f"{stamp(base)}  INFO cuzk_core::scheduler: job enqueued job_id={job} proof_kind=porep-c2 "
                "priority=Normal queue_position=0",
                f"{stamp(base)}  INFO cuzk_core::scheduler: job dequeued for proving job_id={job} proof_kind=porep-c2",
                f"{stamp(base)}  INFO {single}: cuzk_core::engine: processing batch batch_size=1 "
                "proof_kind=porep-c2 slot_size=0",
                f"{stamp(base)}  INFO {single}: cuzk_core::engine: dispatching per-partition synthesis (budget-gated) "
                f"job_id={job} num_partitions=10 budget_available_gib=201",
                f"{stamp(base)}  INFO {single}: cuzk_core::engine: assigned pipeline sequence number job_id={job} "
                f"job_seq={j}",
            ],
            coloured,
        )
        for p in range(10):
            start, end = base + p * 100, base + 29_000 + p * 100
            worker, gpu_at = p % 2, base + 29_000 + p * 3000
            span = f'synthesize_partition{{job_id="{job}" partition={p}}}'
            gspan = (
                f"gpu_worker{{worker_id={worker} gpu=0 job_id={job} proof_kind=porep-c2 batch_size=1 "
                f"partition=Some({p})}}"
            )
            yield f"TIMELINE,{start},SYNTH_START,{job},partition={p}"
            yield from human(
                [
                    f"{stamp(start)}  INFO {span}: cuzk_core::pipeline: using standard synthesis path "
                    "(synthesize_with_hint) circuit_id=porep-32g",
                    f"{stamp(start)}  INFO {span}: cuzk_core::pipeline: using cached capacity hint for synthesis "
                    "circuit_id=porep-32g",
                    f"{stamp(start)}  INFO {span}: cuzk_core::pipeline: attempting pinned memory synthesis "
                    "circuit_id=porep-32g num_constraints=130278869 scalar_size=32 buf_gib=3.882612854242325",
                    f"{stamp(start)}  INFO cuzk_core::pipeline: pinned prover created for partition synthesis",
                    f"{stamp(end)}  INFO {span}: bellperson::groth16::prover::supraseal: synthesis time: 28.901276305s",
                    f"{stamp(end)}  INFO {span}: bellperson::groth16::prover::supraseal: starting proof timer",
                    f"{stamp(end)}  INFO {span}: cuzk_core::pipeline: cached synthesis capacity hint "
                    "circuit_id=porep-32g num_constraints=130278869 num_aux=96145203 num_inputs=19",
                    f"{stamp(end)}  INFO {span}: cuzk_core::pipeline: partition synthesis complete partition={p} "
                    "synth_ms=28901 is_pinned=true",
                ],
                coloured,
            )
            yield f"TIMELINE,{end},SYNTH_END,{job},partition={p},synth_ms=28901"
            yield from human(
                [
                    f"{stamp(end)}  INFO cuzk_core::engine: partition synthesis complete, pushing to GPU queue "
                    f"job_id={job} partition={p} synth_ms=28901",
                ],
                coloured,
            )
            yield f"TIMELINE,{end},GPU_QUEUE,{job},partition={p}"
            yield f"TIMELINE,{gpu_at},GPU_PICKUP,{job},worker={worker},partition={p}"
            yield from human(
                [
                    f"{stamp(gpu_at)}  INFO {gspan}: cuzk_core::engine: GPU_TIMING hot_path pre-prove overhead "
                    f"worker_id={worker} partition=Some({p}) status_ms=0 fail_check_ms=0 mark_busy_ms=0 "
                    "total_overhead_ms=0",
                ],
                coloured,
            )
            yield f"TIMELINE,{gpu_at},GPU_START,{job},worker={worker},partition={p}"
            yield "CUZK_TIMING: pre_lock_cpu_ms=3 mutex_wait_ms=0"
            yield "CUZK_TIMING: split_vectors_ms=210 setup_to_split_ms=12"
            yield "CUZK_TIMING: b_g2_msm_ms=870 num_circuits=1"
            yield "CUZK_TIMING: prep_msm_ms=410"
            yield (
                "CUZK_NTT_H: d_b_alloc=0ms ntt_kernels=790ms coset_intt_sync=390ms msm_init=0ms msm_invoke=800ms "
                "msm_dtor=0ms total=1310ms"
            )
            yield "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=1310"
            yield "CUZK_TIMING: gpu_tid=0 barrier_wait_ms=0"
            yield "CUZK_TIMING: gpu_tid=0 batch_add_ms=330"
            yield "CUZK_TIMING: gpu_tid=0 tail_msm_ms=812 gpu_total_ms=2650"
            yield "CUZK_TIMING: mutex_held_ms=2701 total_start_fn_ms=2950"
            yield from human(
                [
                    f"{stamp(gpu_at + 2979)}  INFO cuzk_core::engine: GPU_TIMING spawn_blocking prove_start "
                    f"worker_id={worker} partition=Some({p}) spawn_to_enter_ms=0 prove_start_ms=2979",
                    f"{stamp(gpu_at + 2990)}  INFO {gspan}: cuzk_core::engine: GPU_TIMING prove_start returned "
                    f"worker_id={worker} partition=Some({p}) total_pre_prove_ms=2990 spawn_blocking_wall_ms=2980",
                    f"{stamp(gpu_at + 3860)}  INFO cuzk_core::pipeline: GPU prove complete (split) proof_count=1 "
                    "proof_bytes=192 gpu_ms=3864",
                ],
                coloured,
            )
            yield f"TIMELINE,{gpu_at + 3864},GPU_END,{job},worker={worker},partition={p},gpu_ms=3864"
            yield from human(
                [
                    f"{stamp(gpu_at + 3870)}  INFO cuzk_core::engine: partition GPU prove complete job_id={job} "
                    f"partition={p} gpu_ms=3864 filled=0",
                    f"{stamp(gpu_at + 3900)}  INFO cuzk_core::engine: FIN_TIMING malloc_trim (success path) "
                    f"job_id={job} partition={p} malloc_trim_ms=0",
                    f"{stamp(gpu_at + 3900)}  INFO cuzk_core::engine: FIN_TIMING finalizer partition "
                    f"worker_id={worker} partition=Some({p}) finish_ms=871 drop_res_ms=0 lock_wait_ms=0 "
                    "process_ms=94 total_ms=966",
                    f"{stamp(gpu_at + 3900)}  INFO cuzk_core::pinned_pool: pinned pool: checkin "
                    "size_gib=3.882612854242325",
                ],
                coloured,
            )
        done = base + 60_000
        verify = f'verify_porep_proof{{job_id="{job}"}}'
        yield from human(
            [
                f"{stamp(done)}  INFO cuzk_core::engine: Phase 7: all partitions complete, proof assembled "
                f"job_id={job} proof_len=1920 total_ms=60000 synth_ms=289010 gpu_ms=38640",
                f"{stamp(done)}  INFO {verify}: cuzk_core::prover: verifying PoRep proof (self-check) "
                f"registered_proof=StackedDrg32GiBV1_1 proof_len=1920 sector_number={j} miner_id=1000",
                f"{stamp(done)}  INFO {verify}: cuzk_core::prover: PoRep proof self-check PASSED job_id={job}",
                f"{stamp(done)}  INFO cuzk_core::engine: Phase 7: PoRep proof self-check PASSED job_id={job}",
            ],
            coloured,
        )


def _rate(path: Path, body: Callable[[str], object], repeat: int) -> tuple[int, float]:
    """(lines, best lines/s) of ``body`` applied to every line of the file."""
    best = 0.0
    lines = 0
    for _ in range(repeat):
        lines = 0
        started = time.perf_counter()
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                body(line)
                lines += 1
        best = max(best, lines / (time.perf_counter() - started))
    return lines, best


def _cpu(body: Callable[[], object]) -> float:
    started = time.process_time()
    body()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "daemon.log"
        with path.open("w", encoding="utf-8") as f:
            for line in synthetic_log(args.jobs):
                f.write(line + "\n")

        _, bare = _rate(path, lambda line: None, args.repeat)
        lines, parse = _rate(path, parse_line, args.repeat)
        timelines: list[Timeline] = []

        def feed(line: str) -> object:
            return timelines[-1].apply(parse_line(line))

        best_feed = 0.0
        for _ in range(args.repeat):
            timelines.append(Timeline())
            best_feed = max(best_feed, _rate(path, feed, 1)[1])
        repeats = range(args.repeat)
        bulk = {
            name: max(lines / _cpu(load) for _ in repeats)
            for name, load in (
                ("details parsed", functools.partial(load_session, path, cache=False, lazy=False)),
                ("details lazy", functools.partial(load_session, path, cache=False)),
                ("no details", functools.partial(load_session, path, cache=False, details=False)),
            )
        }
        by_kind: dict[str, list[str]] = {}
        with path.open(encoding="utf-8") as f:
            for line in f:
                name = type(parse_line(line)).__name__ + (" (ANSI)" if "\x1b" in line else "")
                by_kind.setdefault(name, []).append(line)

    print(f"{lines} lines ({args.jobs} PoRep jobs)")
    print(f"bare line loop            {bare:>12,.0f} lines/s")
    print(f"parse_line                {parse:>12,.0f} lines/s  ({bare / parse:.1f}x the bare loop's cost)")
    print(f"parse_line + Timeline     {best_feed:>12,.0f} lines/s  ({bare / best_feed:.1f}x the bare loop's cost)")
    print(f"timeline: {timelines[-1].completed} proofs completed")
    for name, rate in bulk.items():
        print(f"load_session, {name:15} {rate:>9,.0f} lines/s  ({bare / rate:.1f}x the bare loop's cost)")
    print("parse_line per line, by event:")
    for name, group in sorted(by_kind.items()):
        started = time.perf_counter()
        for line in group:
            parse_line(line)
        micros = (time.perf_counter() - started) / len(group) * 1e6
        print(f"  {name:28} {len(group):>7} lines  {micros:6.2f} µs")


if __name__ == "__main__":
    main()
