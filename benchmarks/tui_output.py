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
SETTLE_MAX_S = 30.0
# A 1 Hz app is steady once it has painted and then paused this long (its start-up paints come in a
# burst, which on a busy machine can end after WARMUP_S: it is not the steady cost).
STEADY_GAP_S = 0.5


def child(seconds: float, *, idle: bool = False) -> None:
    """The app on the fixed scenario: its first 30 s known, then one second arriving per poll;
    ``idle``: the whole scenario known and nothing arriving (the poll runs, nothing changes)."""
    sys.path.insert(0, str(ROOT / "tests" / "ui"))
    from fakes import FakeController, build_model, scenario

    from cuzktui.ui.app import CuzkApp

    feed = scenario(sample_every=1.0, end_at=30.0 + seconds + WARMUP_S + 5)
    start = feed[-1][0] if idle else feed[0][0] + 30.0
    model = build_model([item for item in feed if item[0] <= start])
    controller = FakeController(model, running=False, feed=[item for item in feed if item[0] > start])
    CuzkApp(controller).run()


def spawn(start: Callable[[], None], size: tuple[int, int]) -> tuple[int, int]:
    """Fork ``start`` onto a new pty of ``size`` (columns, rows): its pid and the pty's fd."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin/stdout are the pty
        os.environ.update(TERM="xterm-256color", COLORTERM="truecolor")
        start()
        os._exit(0)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    return pid, fd


@dataclass
class Cost:
    bytes_total: int
    cpu_s: float
    per_second: list[int]


def run_in_pty(
    start: Callable[[], None], seconds: float, size: tuple[int, int], keys: str = "", settle: float = 0.0
) -> Cost:
    """Run ``start`` (which never returns: it runs a program) in a pty; count its output and CPU after a
    warm-up of WARMUP_S that, with ``settle``, also lasts until the app has painted and then written
    nothing for ``settle`` seconds (at most SETTLE_MAX_S): on a busy machine the first paint can come
    after WARMUP_S, and it is not what an idle app costs."""
    pid, fd = spawn(start, size)
    process = psutil.Process(pid)
    t_start = time.monotonic()
    last_output: float | None = None
    pressed = False
    while True:
        now = time.monotonic()
        if keys and not pressed and now > t_start + 1.5:
            os.write(fd, keys.encode())
            pressed = True
        warm = now >= t_start + WARMUP_S
        quiet = not settle or (last_output is not None and now - last_output >= settle)
        if warm and (quiet or now - t_start > SETTLE_MAX_S):
            break
        if select.select([fd], [], [], 0.05)[0]:
            os.read(fd, 65536)
            last_output = now
    times = process.cpu_times()
    cpu_at_warm = times.user + times.system
    counted = 0
    t_warm = time.monotonic()
    t_end = t_warm + seconds
    per_second: list[int] = []
    bucket_end = t_warm + 1.0
    bucket = 0
    while (now := time.monotonic()) < t_end:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            counted += len(data)
            bucket += len(data)
        while now >= bucket_end:
            per_second.append(bucket)
            bucket = 0
            bucket_end += 1.0
    times = process.cpu_times()
    cpu = times.user + times.system - cpu_at_warm
    stop(pid, fd)
    return Cost(counted, cpu, per_second)


def stop(pid: int, fd: int) -> None:
    """Quit the app in the pty (``q``), draining its output; SIGKILL when it has not gone in 5 s."""
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


def report(name: str, cost: Cost, seconds: float) -> tuple[float, float]:
    rate = cost.bytes_total / seconds
    cpu_pct = 100.0 * cost.cpu_s / seconds
    per_second_text = ", ".join(str(n) for n in cost.per_second)
    print(f"{name}")
    print(f"  bytes written: {cost.bytes_total} total, {rate / 1000:.1f} KB/s (per second: {per_second_text})")
    print(f"  CPU: {cost.cpu_s:.2f} s = {cpu_pct:.1f} % of one core")
    return rate, cpu_pct


# The waterfall's "l" toggles partitions and worker lanes, and its axis line says which it shows
# (waterfall.py WaterfallView._axis): the key was answered when the other label is on the terminal.
TOGGLE_KEY, VIEW_MARKS = b"l", (b"lanes (", b"partitions (")
KEY_TIMEOUT_S = 5.0


# How long the app may take to read what a flood wrote faster than it could (live.py INGEST_SLICE_BYTES).
CATCH_UP_MAX_S = 180.0
# The notices the live controller records in its session when it falls behind the log by more than
# live.BEHIND_NOTICE_BYTES and once it has read the log to its end again (live.py _say_backlog).
BEHIND, CAUGHT_UP = b"the daemon's log grows faster than it is read", b"caught up with the daemon's log"
# Without a BEHIND notice the app was never more than BEHIND_NOTICE_BYTES behind, which one poll
# (live.POLL_BUDGET_S) reads: two seconds after the flood it has read it all.
KEPT_UP_S = 2.0


@dataclass
class Flood:
    quiet_latency_s: float  # the key answered before the flood
    latencies_s: list[float]  # the key answered during the flood and while the app catches up, ~twice a second
    rss_start_mb: float
    rss_peak_mb: float  # until it has caught up
    rss_end_mb: float  # once it has caught up (or CATCH_UP_MAX_S after the flood)
    caught_up_s: float | None  # after the flood ended, when the session says the app has read it all


def _flood(path: Path, lines: list[str], rate: int) -> None:
    """Append ``lines`` to ``path`` at ``rate`` lines/s, in slices every 20 ms paced on the clock."""
    per_slice = max(1, rate // 50)
    start = time.monotonic()
    with path.open("a", encoding="utf-8") as log:
        for i in range(0, len(lines), per_slice):
            log.write("\n".join(lines[i : i + per_slice]) + "\n")
            log.flush()
            lag = start + (i + per_slice) / rate - time.monotonic()
            if lag > 0:
                time.sleep(lag)


def _drain(fd: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.05)[0]:
            os.read(fd, 65536)


def _press(fd: int, key: bytes, mark: bytes) -> float:
    """Send ``key`` and read the app's output until ``mark`` shows: the seconds that took."""
    sent = time.monotonic()
    os.write(fd, key)
    seen = b""
    while (elapsed := time.monotonic() - sent) < KEY_TIMEOUT_S:
        if select.select([fd], [], [], 0.01)[0]:
            seen += os.read(fd, 65536)
            if mark in seen:
                return elapsed
    return KEY_TIMEOUT_S


def measure_flood(rate: int, seconds: float, size: tuple[int, int] = (120, 40)) -> Flood:
    """``cuzk-tui attach`` following a log that a daemon floods at ``rate`` lines/s for ``seconds``
    (the lines of ingest.synthetic_log), on the waterfall: how fast it answers a key while the log
    floods and until the app has read all of it (the quiet figure is the same key just before), how
    long after the flood that was, and the app's RSS.

    Nothing listens at the attached address (the dashboard says the daemon is not answering): the
    log is all there is, which is the point."""
    from ingest import synthetic_log

    count = int(rate * seconds)
    before = 2_000  # what the daemon logged before it floods: the waterfall has rows to toggle
    lines = list(synthetic_log((before + count) // 232 + 1))[: before + count]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "flood.log"
        log.write_text("\n".join(lines[:before]) + "\n")
        lines = lines[before:]
        argv = [sys.executable, "-m", "cuzktui.cli", "--session", str(Path(tmp) / "session"), "attach"]
        argv += [f"unix://{tmp}/nothing.sock", "--log", str(log)]
        pid, fd = spawn(lambda: os.execv(sys.executable, argv), size)
        process = psutil.Process(pid)
        _drain(fd, WARMUP_S)
        os.write(fd, b"2")  # the waterfall: the screen the flood moves most
        _drain(fd, 1.0)
        for mark in VIEW_MARKS:  # the first toggles build what the view caches: not the steady cost
            _press(fd, TOGGLE_KEY, mark)
        quiet = max(_press(fd, TOGGLE_KEY, mark) for mark in VIEW_MARKS)
        rss = [process.memory_info().rss]
        flooder = os.fork()
        if flooder == 0:
            try:
                _flood(log, lines, rate)
            finally:
                os._exit(0)
        latencies: list[float] = []
        events = Path(tmp) / "session" / "events.jsonl"
        flood_end = time.monotonic() + seconds
        caught_up: float | None = None
        # During the flood, then until the app has read what it wrote (it says so in its session).
        while (now := time.monotonic()) < flood_end or now < flood_end + CATCH_UP_MAX_S:
            said = events.read_bytes() if now >= flood_end else b""
            if CAUGHT_UP in said or (now >= flood_end + KEPT_UP_S and BEHIND not in said):
                caught_up = now - flood_end
                break
            for mark in VIEW_MARKS:
                latencies.append(_press(fd, TOGGLE_KEY, mark))
                rss.append(process.memory_info().rss)
                _drain(fd, 0.2)
        os.waitpid(flooder, 0)
        end_rss = process.memory_info().rss
        stop(pid, fd)
    mb = 1 << 20
    return Flood(quiet, latencies, rss[0] / mb, max(rss) / mb, end_rss / mb, caught_up)


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
    ours = run_in_pty(lambda: child(seconds), seconds, size, screen_key or "", settle=STEADY_GAP_S)
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
    return run_in_pty(run_btop, seconds, size, settle=STEADY_GAP_S)


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
