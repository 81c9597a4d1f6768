"""What the TUI costs over SSH: bytes written to the terminal per second, and CPU.

Runs cuzk-tui in a real pseudo-terminal (120x40 by default) on the fixed test scenario fed
as a live session that moves once a second (a memory and a GPU sample every second, TIMELINE
events as they happen), for ``--seconds`` (default 20), and prints the bytes per second the app
wrote and its CPU share, beside btop's cost measured the same way in the same run (when btop is installed; otherwise
beside its reference figures, ~7 KB/s and 0.9 % CPU at 120x40).

    .venv/bin/python benchmarks/tui_output.py [--seconds 20] [--screen waterfall] [--size 120x40]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BTOP_BYTES_PER_S = 7_000
BTOP_CPU_PCT = 0.9
WARMUP_S = 3.0  # start-up (first full paint, CSS) is not the steady cost


def child(seconds: float) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "ui"))
    from fakes import FakeController, build_model, scenario

    from cuzktui.ui.app import CuzkApp

    # The first 30 s of the session are already known; then one second arrives per poll.
    feed = scenario(sample_every=1.0, end_at=30.0 + seconds + WARMUP_S + 5)
    start = feed[0][0] + 30.0
    model = build_model([item for item in feed if item[0] <= start])
    controller = FakeController(model, running=False, feed=[item for item in feed if item[0] > start])
    CuzkApp(controller).run()


@dataclass
class Cost:
    bytes_total: int
    cpu_s: float
    per_second: list[int]


def run_in_pty(start: Callable[[], None], seconds: float, size: tuple[int, int], keys: str = "") -> Cost:
    """Run ``start`` (which never returns: it runs a program) in a pty; count its output and CPU."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin/stdout are the pty
        os.environ.update(TERM="xterm-256color", COLORTERM="truecolor")
        start()
        os._exit(0)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    process = psutil.Process(pid)
    counted = 0
    t_start = time.monotonic()
    cpu_at_warm: float | None = None
    t_warm = t_start + WARMUP_S
    t_end = t_warm + seconds
    pressed = False
    per_second: list[int] = []
    bucket_end = t_warm + 1.0
    bucket = 0
    while (now := time.monotonic()) < t_end:
        if keys and not pressed and now > t_start + 1.5:
            os.write(fd, keys.encode())
            pressed = True
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if now >= t_warm:
                counted += len(data)
                bucket += len(data)
        if now >= t_warm and cpu_at_warm is None:
            times = process.cpu_times()
            cpu_at_warm = times.user + times.system
        while now >= bucket_end:
            per_second.append(bucket)
            bucket = 0
            bucket_end += 1.0
    times = process.cpu_times()
    cpu = times.user + times.system - (cpu_at_warm or 0.0)
    os.write(fd, b"q")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if select.select([fd], [], [], 0.1)[0]:
            try:
                os.read(fd, 65536)
            except OSError:
                break
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return Cost(counted, cpu, per_second)


def report(name: str, cost: Cost, seconds: float) -> tuple[float, float]:
    rate = cost.bytes_total / seconds
    cpu_pct = 100.0 * cost.cpu_s / seconds
    per_second_text = ", ".join(str(n) for n in cost.per_second)
    print(f"{name}")
    print(f"  bytes written: {cost.bytes_total} total, {rate / 1000:.1f} KB/s (per second: {per_second_text})")
    print(f"  CPU: {cost.cpu_s:.2f} s = {cpu_pct:.1f} % of one core")
    return rate, cpu_pct


def run_btop() -> None:
    btop = shutil.which("btop")
    assert btop is not None
    # btop takes its refresh rate from its config file only: give it a private one at 1 Hz.
    home = Path(tempfile.mkdtemp(prefix="btop-bench-"))
    (home / "btop").mkdir()
    (home / "btop" / "btop.conf").write_text("update_ms = 1000\n")
    os.environ["XDG_CONFIG_HOME"] = str(home)
    os.execv(btop, [btop, "--utf-force"])


def measure(seconds: float, size: tuple[int, int], screen_key: str | None) -> None:
    screen = "waterfall" if screen_key else "dashboard"
    ours = run_in_pty(lambda: child(seconds), seconds, size, screen_key or "")
    label = f"cuzk-tui {size[0]}x{size[1]}, {screen}, {seconds:.0f} s after a {WARMUP_S:.0f} s warm-up"
    rate, cpu_pct = report(label, ours, seconds)
    if shutil.which("btop") is not None:
        # The baseline, measured here and now: btop at 1 Hz in the same terminal size.
        base_rate, base_cpu = report(
            f"btop {size[0]}x{size[1]} at 1 Hz (baseline, same run)", run_btop_cost(seconds, size), seconds
        )
        source = "measured"
    else:
        base_rate, base_cpu = BTOP_BYTES_PER_S, BTOP_CPU_PCT
        source = "reference figures (btop not installed: apt-get install btop to measure it)"
    print(f"ratio to btop ({source}): {rate / base_rate:.2f}x bytes, {cpu_pct / max(base_cpu, 0.01):.1f}x CPU")


def run_btop_cost(seconds: float, size: tuple[int, int]) -> Cost:
    return run_in_pty(run_btop, seconds, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--size", default="120x40", help="COLUMNSxROWS")
    parser.add_argument("--screen", choices=("dashboard", "waterfall"), default="dashboard")
    args = parser.parse_args()
    columns, rows = (int(n) for n in args.size.split("x"))
    measure(args.seconds, (columns, rows), "2" if args.screen == "waterfall" else None)


if __name__ == "__main__":
    main()
