"""The engine as the box it emulates, under real-size proof inputs (issue 25 points 1, 2, 4 and 6).

1. A plain client (this script: no cuzk-tui, no allowance) sends six concurrent 60 MB C1s to the engine as a
   256 GiB box in a 1 GiB memory cgroup (what ``--profile 256`` sizes, given as ``--box-cgroup``) with
   ``total_budget = "90GiB"``: OOM kills, proofs, the box's peak. The full run adds the same load with the
   whole engine in the cgroup, as the tool ran it before (the inputs then count against the box).
6. Meanwhile another process asks GetStatus every 10 ms: median, p95, max. The baseline, measured the same
   way in this run: a bare grpc.aio server that only receives the same six inputs (Python gRPC's own floor:
   it copies each message on its event loop).
2. Inputs stay behind? Three fresh engines, same config: rounds of six Prove calls with real-size C1s,
   compact (1.2 MB) C1s and 64 MB of junk that fails to parse; the engine's own RSS (its process and its
   input reader; the model's memory is its box's, in a cgroup) after the rounds, against its fresh figure.
4. The memory chart against the model: ``cuzk-tui bench --engine`` (the recorder the TUI uses) on PoRep while
   this script reads the engine's /status every 50 ms; each recorded RSS sample ÷ memory_scale (the chart's
   value) against the box's RSS the engine reported at that moment (the model's allocations and the daemon's
   own process) and against its box cgroup's usage, which the kernel measures. The baseline: the engine's
   process tree × 1/memory_scale at the same moments, what the chart showed before.

Every part needs root and a v1 memory cgroup. Exit status 1 when a proof fails, a figure is missing or (in
a full run) a target is missed; the FAIL lines say which.

    .venv/bin/python benchmarks/engine_payload.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import psutil

from cuzktui import events as ev
from cuzktui import proofinputs as pi
from cuzktui.live import profile_memory_limit
from cuzktui.proto import proving_pb2 as pb
from cuzktui.proto import proving_pb2_grpc
from cuzktui.samplers import ProcessTreeSampler, listener_pid
from cuzktui.session import iter_session_events
from cuzktui.supervisor import engine_program, free_loopback_port
from cuzktui.system import CgroupError, MemoryCgroup
from cuzktui.units import GiB, MiB

ROOT = Path(__file__).resolve().parents[1]
SCALE = 1 / 256
CHANNEL_OPTIONS = [("grpc.max_send_message_length", 256 * MiB), ("grpc.max_receive_message_length", 256 * MiB)]
IDLE_BOUND = 128 * MiB  # point 2: the engine's idle RSS within this of its fresh figure
MEDIAN_BOUND, WORST_BOUND = 0.10, 0.25  # point 4: the chart's samples against the box's figure
READ_WINDOW_S = 0.25  # point 4: how far from a sample's time the recorder's own /status read may fall


@dataclass
class Report:
    """The figures, and what makes the run fail: always a proof that fails or a figure that is missing;
    a target missed only in a full run (``--quick``'s few samples on a shared machine say too little)."""

    targets: bool
    failures: list[str] = field(default_factory=list)

    def line(self, text: str) -> None:
        print(text, flush=True)

    def check(self, ok: bool, what: str) -> None:
        """Proofs and figures: the run measures something."""
        if not ok:
            self.failures.append(what)
            print(f"  FAIL: {what}", flush=True)

    def target(self, ok: bool, what: str) -> None:
        if ok:
            return
        if self.targets:
            self.check(ok, what)
        else:
            print(f"  target missed (not enforced with --quick): {what}", flush=True)


# -- processes ------------------------------------------------------------------------------------


@contextmanager
def box_cgroup(limit: int) -> Iterator[MemoryCgroup]:
    group = MemoryCgroup.create(f"cuzk-bench-payload-{os.getpid()}-{time.monotonic_ns()}", limit)
    try:
        yield group
    finally:
        group.remove(timeout=30)


@contextmanager
def engine(config: str, *, box: MemoryCgroup | None = None, whole: MemoryCgroup | None = None) -> Iterator[Any]:
    """cuzk-engine on a unix socket: its box in ``box`` (--box-cgroup), or all of it in ``whole``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "engine.toml"
        path.write_text(config)
        address = f"unix://{tmp}/cuzk.sock"
        argv = [*engine_program().argv, "-c", str(path), "-l", address]
        if box is not None:
            argv += ["--box-cgroup", str(box.path)]
        if whole is not None:
            argv = [sys.executable, "-m", "cuzktui.cgexec", str(whole.path), "--", *argv]
        log = Path(tmp) / "daemon.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=out, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"})
        channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        try:
            grpc.channel_ready_future(channel).result(timeout=60)
            yield proc, address, proving_pb2_grpc.ProvingEngineStub(channel)
        finally:
            channel.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def engine_config(budget: str, time_scale: float) -> str:
    return (
        f'[memory]\ntotal_budget = "{budget}"\n[engine]\ntime_scale = {time_scale}\nmemory_scale = {SCALE}\n'
        '[logging]\nlevel = "warn"\n'
    )


def prove_all(stub: Any, payloads: list[bytes], first: int = 0) -> list[Any]:
    """Prove calls, all at once from threads; a call that fails is its RpcError."""

    def prove(n: int) -> Any:
        request = pb.SubmitProofRequest(
            request_id=f"porep-1000-{first + n}", proof_kind=pb.POREP_SEAL_COMMIT, sector_size=pi.SECTOR_SIZE_32G,
            vanilla_proof=payloads[n], sector_number=1, miner_id=1000,
        )  # fmt: skip
        try:
            return stub.Prove(pb.ProveRequest(submit=request), timeout=900).result
        except grpc.RpcError as error:
            return error

    with ThreadPoolExecutor(len(payloads)) as pool:
        return list(pool.map(prove, range(len(payloads))))


def completed(results: list[Any]) -> int:
    return sum(1 for r in results if not isinstance(r, grpc.RpcError) and r.status == pb.AwaitProofResponse.COMPLETED)


# -- 6: GetStatus under input load ----------------------------------------------------------------


@contextmanager
def status_latencies(address: str) -> Iterator[list[float]]:
    """GetStatus every 10 ms from a process of its own while the body runs; the latencies (s) after it."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--poll-status", address], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
    )
    latencies: list[float] = []
    try:
        yield latencies
    finally:
        out, _ = proc.communicate(b"", timeout=60)  # closing its stdin stops it
        latencies.extend(json.loads(out))


def poll_status(address: str) -> None:
    """Child mode: GetStatus every 10 ms until stdin closes; prints the latencies."""
    stub = proving_pb2_grpc.ProvingEngineStub(grpc.insecure_channel(address))
    latencies: list[float] = []
    while True:
        started = time.perf_counter()
        try:
            stub.GetStatus(pb.GetStatusRequest(), timeout=30)
            latencies.append(time.perf_counter() - started)
        except grpc.RpcError:  # a daemon that died (the placement before, OOM-killed): no answer to time
            pass
        if select.select([sys.stdin], [], [], 0.01)[0] and not sys.stdin.buffer.read1(1):
            break
    print(json.dumps(latencies))


def bare_server(address: str) -> None:
    """Child mode: a grpc.aio server that receives Prove calls and answers at once, and GetStatus."""

    async def serve() -> None:
        async def prove(request: bytes, context: Any) -> bytes:
            return pb.ProveResponse().SerializeToString()

        async def status(request: bytes, context: Any) -> bytes:
            return b""

        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 512 * MiB)])
        handlers = {
            "Prove": grpc.unary_unary_rpc_method_handler(prove),
            "GetStatus": grpc.unary_unary_rpc_method_handler(status),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("cuzk.v1.ProvingEngine", handlers),))
        server.add_insecure_port(address)
        await server.start()
        await server.wait_for_termination()

    asyncio.run(serve())


def describe(latencies: list[float]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    return (
        1000 * statistics.median(ordered),
        1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        1000 * ordered[-1],
    )


def status_under_load(report: Report, c1: bytes, engine_latencies: list[float]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        address = f"unix://{tmp}/bare.sock"
        server = subprocess.Popen([sys.executable, __file__, "--bare-server", address], cwd=ROOT)
        channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        try:
            grpc.channel_ready_future(channel).result(timeout=60)
            with status_latencies(address) as floor:
                prove_all(proving_pb2_grpc.ProvingEngineStub(channel), [c1] * 6)
        finally:
            channel.close()
            server.kill()
            server.wait()
    if not engine_latencies or not floor:
        report.check(False, "GetStatus latency: no figure")
        return
    ours, base = describe(engine_latencies), describe(floor)
    report.line("6. GetStatus while six 60 MB C1s arrive (ms: median / p95 / max)")
    for name, (median, p95, worst), calls in (
        ("the engine", ours, engine_latencies),
        ("a bare grpc.aio server (floor)", base, floor),
    ):
        report.line(f"   {name + ':':<32}{median:6.1f} / {p95:6.1f} / {worst:7.1f}  ({len(calls)} calls)")
    # The max is the floor's (gRPC copies each message on its loop) and the machine's: reported, no target.
    report.target(ours[1] <= max(10.0, 3 * base[1]), "GetStatus p95 above 10 ms and 3x the floor's")


# -- 1: a plain client against the box ------------------------------------------------------------


def plain_client_run(report: Report, c1: bytes, *, whole: bool, latencies: list[float] | None) -> None:
    """Six concurrent 60 MB C1s against a 256 GiB box in its 1 GiB cgroup, total_budget 90 GiB."""
    limit = profile_memory_limit(256, SCALE)
    with box_cgroup(limit) as group:
        where = {"whole": group} if whole else {"box": group}
        with engine(engine_config("90GiB", 0.003), **where) as (proc, address, stub):
            started = time.monotonic()
            if latencies is None:
                results = prove_all(stub, [c1] * 6)
            else:
                with status_latencies(address) as measured:
                    results = prove_all(stub, [c1] * 6)
                latencies.extend(measured)
            seconds = time.monotonic() - started
            alive = proc.poll() is None
        kills, peak = group.oom_kill_count(), group.peak_bytes() or 0
    placement = "the whole engine in the cgroup (as before)" if whole else "only its box in the cgroup (--box-cgroup)"
    report.line(
        f"   {placement}: {completed(results)}/6 completed, OOM kills {kills}, box peak {peak / SCALE / GiB:.0f} GiB "
        f"of 256, engine {'alive' if alive else 'dead'}, {seconds:.0f} s"
    )
    if not whole:
        report.check(completed(results) == 6 and kills == 0 and alive, "the plain client's six proofs in the box")


# -- 2: idle memory -------------------------------------------------------------------------------


def engine_own_rss(pid: int, box: MemoryCgroup) -> int:
    """The engine's process and its children but its box (the model's memory, charged to the cgroup)."""
    boxed = set(box.pids())
    total = psutil.Process(pid).memory_info().rss
    for child in psutil.Process(pid).children(recursive=True):
        if child.pid not in boxed:
            total += child.memory_info().rss
    return total


def idle_memory(report: Report, payloads: dict[str, bytes], rounds: int, settle: float) -> None:
    report.line(
        f"2. The engine's own RSS (its process and input reader), fresh and {settle:.0f} s after {rounds} rounds "
        "of 6 Prove calls"
    )
    for name, payload in payloads.items():
        with box_cgroup(4 * GiB) as group, engine(engine_config("400GiB", 0.003), box=group) as (proc, _, stub):
            fresh = engine_own_rss(proc.pid, group)
            answers: list[Any] = []
            for round_ in range(rounds):
                answers += prove_all(stub, [payload] * 6, first=6 * round_)
            time.sleep(settle)  # the figure's definition: idle this long after the last answer
            after = engine_own_rss(proc.pid, group)
        junk = name.startswith("64 MB")
        expected = 0 if junk else 6 * rounds
        refused = sum(
            1 for a in answers if not isinstance(a, grpc.RpcError) and a.error_message.startswith("C1 parse failed")
        )
        grew = (after - fresh) / MiB
        report.line(
            f"   {name:<28} fresh {fresh / MiB:4.0f} MiB, after {after / MiB:4.0f} MiB ({grew:+5.0f}); "
            f"{completed(answers)} completed, {refused} refused"
        )
        report.check(completed(answers) == expected and (not junk or refused == 6 * rounds), f"{name}: answers")
        report.target(after - fresh <= IDLE_BOUND, f"{name}: idle RSS {(after - fresh) / MiB:.0f} MiB above fresh")


# -- 4: the chart against the model ---------------------------------------------------------------


def chart_against_model(report: Report, count: int) -> None:
    port = free_loopback_port()
    url = f"http://127.0.0.1:{port}/status"
    truth: list[tuple[float, float, float | None]] = []  # (t, box RSS reported, the engine's tree × 1/scale)
    stop = threading.Event()

    def poll() -> None:
        tree: ProcessTreeSampler | None = None
        while not stop.wait(0.05):
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    box = json.load(answer)["emulated_box"]
            except (OSError, ValueError, KeyError):
                continue
            if tree is None:
                owner = listener_pid(f"127.0.0.1:{port}")
                tree = ProcessTreeSampler(owner) if owner is not None else None
            rss = tree.tree_rss() if tree is not None else None
            truth.append((time.time(), float(box["rss_bytes"]), None if rss is None else rss / SCALE))

    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / "session"
        poller = threading.Thread(target=poll)
        poller.start()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "cuzktui.bench", "--engine", "--kind", "porep", "--count", str(count),
                 "--concurrency", "3", "--json", "--session", str(session), "--memory-limit", "4GiB",
                 "--set", "engine.time_scale=0.02", "--set", f"daemon.status_listen=127.0.0.1:{port}",
                 "--set", "memory.total_budget=200GiB"],
                cwd=ROOT, capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
        finally:
            stop.set()
            poller.join()
        samples = [e for e in iter_session_events(session) if isinstance(e, ev.MemorySample) and e.rss_bytes]
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    report.check(summary.get("completed") == count, f"the chart's benchmark: {summary or done.stderr[-500:]}")
    chart, kernel, before = [], [], []
    for sample in samples:
        at = [row for row in truth if row[0] <= sample.t]
        if not at:
            continue
        _, box_rss, tree = at[-1]
        assert sample.rss_bytes is not None
        charted = sample.rss_bytes / SCALE
        # The recorder reads /status with its sample, not at the sample's instant: at time_scale 0.02 an
        # allocation lands between two polls, so the box's figure it read is any of those the polls saw
        # around it (the last before the sample, and those within READ_WINDOW_S of it); a figure outside
        # them all is the chart's error, measured from the nearest.
        around = [box_rss, *(row[1] for row in truth if abs(row[0] - sample.t) <= READ_WINDOW_S)]
        chart.append(charted / min(max(charted, min(around)), max(around)))
        if sample.cgroup_usage_bytes:
            kernel.append(sample.rss_bytes / sample.cgroup_usage_bytes)
        if tree is not None:
            before.append(tree / box_rss)
    report.line(f"4. The memory chart against the box's figure, {len(chart)} RSS samples of a {count}-proof bench")
    for name, ratios in (
        ("chart / the model's allocations + the daemon's process", chart),
        ("chart / the box cgroup's usage (the kernel's)", kernel),
        ("before: the engine's process tree ÷ scale / the same", before),
    ):
        if not ratios:
            report.check(False, f"{name}: no figure")
            continue
        worst = max(ratios, key=lambda r: max(r, 1 / r))
        report.line(f"   {name:<56} median {statistics.median(ratios):5.2f}  worst {worst:6.2f}")
    if chart:
        worst = max(abs(r - 1) for r in chart)
        report.target(abs(statistics.median(chart) - 1) <= MEDIAN_BOUND, "the chart's median sample off the box's")
        report.target(worst <= WORST_BOUND, f"a chart sample {worst:.0%} off the box's figure")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and proofs, no before-placement run")
    parser.add_argument("--poll-status", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--bare-server", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.poll_status:
        poll_status(args.poll_status)
        return
    if args.bare_server:
        bare_server(args.bare_server)
        return
    report = Report(targets=not args.quick)
    try:
        MemoryCgroup.create(f"cuzk-bench-probe-{os.getpid()}", 64 * MiB).remove()
    except CgroupError as error:
        report.check(False, f"no memory cgroup here ({error}): every part needs one (root, cgroup v1)")
        sys.exit(1)
    c1 = pi.generate_c1(miner_id=1000, sector_num=1)
    report.line(
        f"1. A plain client, six concurrent {len(c1) / 1e6:.0f} MB C1s, a 256 GiB box in a 1 GiB cgroup, "
        "total_budget 90 GiB"
    )
    latencies: list[float] = []
    plain_client_run(report, c1, whole=False, latencies=latencies)
    if not args.quick:
        plain_client_run(report, c1, whole=True, latencies=None)
    status_under_load(report, c1, latencies)
    payloads = {
        f"real-size C1 ({len(c1) / 1e6:.0f} MB)": c1,
        "compact C1 (1.2 MB)": pi.generate_c1(miner_id=1000, sector_num=1, size=0),
        "64 MB of junk": os.urandom(64 * MiB),
    }
    idle_memory(report, payloads, rounds=2 if args.quick else 4, settle=2.0 if args.quick else 10.0)
    chart_against_model(report, count=3 if args.quick else 12)
    if report.failures:
        print(f"FAILED: {len(report.failures)}: " + "; ".join(report.failures))
        sys.exit(1)
    print("all figures present, every target met")


if __name__ == "__main__":
    main()
