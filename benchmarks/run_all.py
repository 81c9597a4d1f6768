"""Every benchmark in one command: a table of figure, baseline, ratio, target, pass; exit status 1 when a
figure is missing, a proof failed, or (in a full run) a target is missed.

Every baseline is measured in the same run on the same file (the machine is shared and noisy:
compare ratios, not seconds). The log is :func:`ingest.synthetic_log` (upstream's format strings,
docs/daemon-interface.md §4) scaled to ``--lines``; ``--quick`` is the short run CI calls (.ci/run).

    .venv/bin/python benchmarks/run_all.py [--quick] [--lines N]

The terminal-side rows (``--skip-tui`` leaves them out) run the app in a pty (tui_output.py: the
dashboard beside btop, idle, a log flood) and the waterfall widget headless (waterfall_frame.py). The
engine's rows run engine_tiers.py (its model against upstream's RAM tiers) and engine_payload.py (real-size
inputs against the box it emulates, which needs root and a memory cgroup) with their own checks: a proof
that fails, a figure that is missing or a target missed fails them, and so this run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import waterfall_frame
from ingest import LINES_PER_JOB, synthetic_log
from tui_output import (
    BTOP_BYTES_PER_S,
    BTOP_CPU_PCT,
    CATCH_UP_MAX_S,
    STEADY_GAP_S,
    child,
    measure_flood,
    run_btop,
    run_in_pty,
)

# The whole-process baseline: a bare Python process looping over the file.
_BARE = "import sys\nwith open(sys.argv[1], encoding='utf-8', errors='replace') as f:\n    for line in f: pass\n"
# Replay's load (the dashboard then holds every proof): the controller reads and models the log.
_REPLAY = (
    "import asyncio, resource, sys, json\n"
    "from pathlib import Path\n"
    "from cuzktui.replay import ReplayController\n"
    "c = ReplayController(Path(sys.argv[1]))\n"
    "asyncio.run(c.start())\n"
    "print(json.dumps({'proofs': c.model.timeline.completed,"
    " 'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
)


@dataclass(frozen=True)
class Row:
    figure: str
    value: str
    baseline: str
    ratio: float | None
    target: str
    passed: bool | None
    # A benchmark script's own verdict (every proof completed, every figure there): enforced in every run.
    measured: bool = False


def _child_cpu(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """CPU seconds (user + system) of one whole process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def _best(measure: Callable[[], float], repeat: int) -> float:
    return min(measure() for _ in range(repeat))


def _in_process_cpu(body: Callable[[], object]) -> float:
    started = time.process_time()
    body()
    return time.process_time() - started


def _bare_loop(path: Path) -> None:
    with path.open(encoding="utf-8", errors="replace") as f:
        for _ in f:
            pass


def _ratio_row(figure: str, value: float, base: float, limit: float) -> Row:
    ratio = value / base if base > 0 else float("inf")
    return Row(figure, f"{value:.2f} s", f"{base:.2f} s", ratio, f"<= {limit:g}x", ratio <= limit)


def measure_log(path: Path, tail: list[str], repeat: int) -> list[Row]:
    """The cold figures (model checkpoints off: cuzktui/model_cache.py), then the warm ones: the same log read
    a second time, and after ``tail`` (about 1 % more lines) was appended, each resuming its checkpoint."""
    from cuzktui.session import load_session

    py = sys.executable
    cold = {**os.environ, "CUZK_TUI_CACHE": "off"}
    bare_in = _best(lambda: _in_process_cpu(lambda: _bare_loop(path)), repeat)
    ingest = _best(lambda: _in_process_cpu(lambda: load_session(path, cache=False)), repeat)
    bare_proc = _best(lambda: _child_cpu([py, "-c", _BARE, str(path)])[0], repeat)
    with tempfile.TemporaryDirectory() as tmp:
        trace = str(Path(tmp) / "trace.json")
        commands = {
            "report --json": [py, "-m", "cuzktui.cli", "report", "--json", str(path)],
            "export": [py, "-m", "cuzktui.cli", "export", str(path), "-o", trace],
            "replay load": [py, "-c", _REPLAY, str(path)],
        }
        report = _best(lambda: _child_cpu(commands["report --json"], cold)[0], repeat)
        export = _best(lambda: _child_cpu(commands["export"], cold)[0], repeat)
        replay_cpu, out = _child_cpu(commands["replay load"], cold)
        loaded = json.loads(out)
        rss = float(loaded["rss_mb"])
        rows = [
            _ratio_row("ingest: read + model (in process)", ingest, bare_in, 3),
            _ratio_row("report --json (whole process)", report, bare_proc, 5),
            _ratio_row("export (whole process)", export, bare_proc, 5),
            _ratio_row(f"replay load, {loaded['proofs']} proofs (process)", replay_cpu, bare_proc, 10),
            Row("peak RSS once replay loaded", f"{rss:.0f} MB", "-", None, "<= 200 MB", rss <= 200),
        ]
        warm = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache"), "CUZK_TUI_CACHE": "on"}
        limits = {"report --json": 5.0, "export": 5.0, "replay load": 10.0}
        for name, argv in commands.items():
            _child_cpu(argv, warm)  # stores the checkpoint
            second = min(_child_cpu(argv, warm)[0] for _ in range(repeat))
            rows.append(_ratio_row(f"{name}, read again (checkpoint)", second, bare_proc, limits[name]))
        with path.open("a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in tail)
        for name, argv in commands.items():  # once each: a second run would find nothing new
            grown = _child_cpu(argv, warm)[0]
            rows.append(_ratio_row(f"{name}, grown {len(tail):,} lines (checkpoint)", grown, bare_proc, limits[name]))
    return rows


def measure_dashboard(seconds: float) -> list[Row]:
    size = (120, 40)
    ours = run_in_pty(lambda: child(seconds), seconds, size, settle=STEADY_GAP_S)
    if shutil.which("btop") is not None:
        base = run_in_pty(run_btop, seconds, size, settle=STEADY_GAP_S)
        base_bytes, base_cpu, note = base.bytes_total / seconds, 100 * base.cpu_s / seconds, "btop"
    else:
        base_bytes, base_cpu, note = BTOP_BYTES_PER_S, BTOP_CPU_PCT, "btop ref"
    rate, cpu = ours.bytes_total / seconds, 100 * ours.cpu_s / seconds
    byte_ratio, cpu_ratio = rate / base_bytes, cpu / max(base_cpu, 0.01)
    return [
        Row(
            "dashboard 120x40 1 Hz: bytes/s",
            f"{rate:,.0f}",
            f"{base_bytes:,.0f} ({note})",
            byte_ratio,
            "<= 1x",
            byte_ratio <= 1,
        ),
        Row(
            "dashboard 120x40 1 Hz: CPU %", f"{cpu:.2f}", f"{base_cpu:.2f} ({note})", cpu_ratio, "<= 2x", cpu_ratio <= 2
        ),
    ]


def measure_idle(seconds: float) -> list[Row]:
    """The dashboard on a session where nothing moves: the poll runs, the model does not."""
    cost = run_in_pty(lambda: child(seconds, idle=True), seconds, (120, 40), settle=1.0)
    rate, cpu = cost.bytes_total / seconds, 100 * cost.cpu_s / seconds
    return [
        Row("idle dashboard: bytes/s", f"{rate:,.0f}", "-", None, "0 B/s", rate == 0),
        Row("idle dashboard: CPU %", f"{cpu:.2f}", "-", None, "< 0.5 %", cpu < 0.5),
    ]


def measure_waterfall(jobs: int, repeat: int) -> list[Row]:
    full, empty = waterfall_frame.measure(jobs, repeat)
    names = {
        "frame": "first frame",
        "poll": "a poll's frame",
        "zoom": "zoom in",
        "pan": "pan left",
        "lanes": "l into lanes",
    }
    return [
        Row(
            f"waterfall {jobs} jobs x 10, {names[name]} (CPU)",
            f"{full[name]:.1f} ms",
            f"{empty[name]:.1f} ms (empty)",
            full[name] / max(empty[name], 0.01),
            "<= 20 ms",
            full[name] <= 20,
        )
        for name in full
    ]


def measure_flooded(rate: int, seconds: float) -> list[Row]:
    flood = measure_flood(rate, seconds)
    worst = max(flood.latencies_s)
    return [
        Row(
            f"{rate:,} lines/s for {seconds:g} s: slowest key",
            f"{1000 * worst:.0f} ms",
            f"{1000 * flood.quiet_latency_s:.0f} ms (quiet)",
            worst / max(flood.quiet_latency_s, 1e-3),
            "<= 200 ms",
            worst <= 0.2,
        ),
        Row(
            f"{rate:,} lines/s for {seconds:g} s: peak RSS",
            f"{flood.rss_peak_mb:.0f} MB",
            f"{flood.rss_start_mb:.0f} MB (start)",
            None,
            "<= 200 MB",
            flood.rss_peak_mb <= 200,
        ),
        Row(
            f"{rate:,} lines/s for {seconds:g} s: read to its end",
            f"not in {CATCH_UP_MAX_S:.0f} s" if flood.caught_up_s is None else f"{flood.caught_up_s:.0f} s after it",
            "-",
            None,
            "catches up, says so",
            flood.caught_up_s is not None,
        ),
    ]


BENCHMARKS = Path(__file__).resolve().parent


def measure_engine(quick: bool) -> list[Row]:
    """engine_tiers.py and engine_payload.py, their output shown as it comes; a row each: passed when the
    script's own checks passed (every proof completed, every figure there, every target met)."""
    rows = []
    for script, figure in (
        ("engine_tiers.py", "engine model vs upstream's RAM tiers: proofs, figures, 384 GiB peak"),
        ("engine_payload.py", "engine as its box: inputs, idle RSS, chart, GetStatus"),
    ):
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(BENCHMARKS / script), *(["--quick"] if quick else [])])
        value = "checks passed" if done.returncode == 0 else f"exit status {done.returncode}"
        rows.append(Row(figure, value, "-", None, f"{script} passes", done.returncode == 0, measured=True))
        print(f"({script}: {time.monotonic() - started:.0f} s)", flush=True)
    return rows


def _judged(r: Row, *, targets: bool) -> bool:
    """Whether a missed target fails the run: every one with ``targets``, an engine benchmark's own
    checks always."""
    return targets or r.measured


def failures(rows: list[Row], *, targets: bool) -> list[str]:
    """The rows that fail the run: a figure that is not a number, an engine benchmark whose own checks
    failed (a proof, a figure; its targets too when ``targets``), and with ``targets`` any target missed.
    ``--quick`` enforces no target: its small inputs measure start-up more than the work."""
    found = []
    for r in rows:
        missing = r.ratio is not None and not math.isfinite(r.ratio)
        if missing or (r.passed is False and _judged(r, targets=targets)):
            found.append(f"{r.figure}: {r.value}" + (" (no figure)" if missing else ""))
    return found


def print_table(rows: list[Row], *, targets: bool) -> None:
    """Without ``targets`` (``--quick``) a target is shown as met or missed, not as a pass or a failure."""
    header = ("figure", "value", "baseline", "ratio", "target", "pass")
    cells = [header] + [
        (
            r.figure,
            r.value,
            r.baseline,
            "-" if r.ratio is None else f"{r.ratio:.1f}x",
            r.target,
            "n/a" if r.passed is None else _verdict(r.passed, judged=_judged(r, targets=targets)),
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    for c in cells:
        print("  ".join(text.ljust(w) for text, w in zip(c, widths, strict=True)).rstrip())


def _verdict(passed: bool, *, judged: bool) -> str:
    if judged:
        return "PASS" if passed else "FAIL"
    return "met" if passed else "missed"


def measure_log_group(lines: int, repeat: int) -> list[Row]:
    """The log figures on a freshly written synthetic log of about ``lines`` lines."""
    jobs = max(1, lines // LINES_PER_JOB)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "daemon.log"
        with path.open("w", encoding="utf-8") as f:
            written = 0
            for line in synthetic_log(jobs):
                f.write(line + "\n")
                written += 1
        # What 1 % more jobs append (synthetic_log of more jobs begins with the log of fewer).
        tail = list(itertools.islice(synthetic_log(jobs + max(1, jobs // 100)), written, None))
        timeline = sum(1 for line in path.open(encoding="utf-8") if line.startswith("TIMELINE,"))
        print(
            f"log: {written:,} lines, {path.stat().st_size / 1e6:.0f} MB, {jobs} PoRep jobs, "
            f"{100 * timeline / written:.0f} % TIMELINE; machine load {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} CPUs"
        )
        return measure_log(path, tail, repeat)


GROUPS = ("log", "dashboard", "idle", "waterfall", "flood", "engine")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds (CI)")
    parser.add_argument("--lines", type=int, default=None, help="log size (default 1,000,000; --quick 5,000)")
    parser.add_argument("--skip-tui", action="store_true", help="leave out the pty dashboard figures")
    parser.add_argument(
        "--only",
        action="append",
        choices=GROUPS,
        help="measure only this group of figures (repeatable; default: every group)",
    )
    args = parser.parse_args()
    groups = set(args.only or GROUPS) - ({"dashboard", "idle", "waterfall", "flood"} if args.skip_tui else set())
    lines = args.lines or (5_000 if args.quick else 1_000_000)
    repeat = 1 if args.quick or lines >= 200_000 else 3
    rows: list[Row] = []
    if "log" in groups:
        rows += measure_log_group(lines, repeat)
    if "dashboard" in groups:
        rows += measure_dashboard(1.0 if args.quick else 20.0)
    if "idle" in groups:
        rows += measure_idle(1.0 if args.quick else 10.0)
    if "waterfall" in groups:  # best of 3 or 5: the first is cold
        rows += measure_waterfall(50 if args.quick else 1000, 3 if args.quick else 5)
    if "flood" in groups:
        rows += measure_flooded(*((5_000, 2.0) if args.quick else (50_000, 10.0)))
    if "engine" in groups:
        rows += measure_engine(args.quick)
    print_table(rows, targets=not args.quick)
    if args.quick:
        print("--quick judges no target (its small inputs measure start-up): only the engine benchmarks' checks")
    failed = failures(rows, targets=not args.quick)
    if failed:
        print(f"\nFAILED ({len(failed)}): " + "; ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
