"""Headless recorders (``cuzk-tui record --engine --metrics``) started by tests, and waits with deadlines.

Every recorder is stopped at teardown (SIGTERM, then SIGKILL); a recorder a test killed leaves its
engine daemon behind (the daemon runs in its own process session), so teardown also kills every
daemon the recorder's session says it launched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from cuzktui.supervisor import free_loopback_port
from cuzktui.system import MemoryCgroup
from tests.conftest import alive

T = TypeVar("T")
READY_TIMEOUT_S = 90.0


def wait_for(what: str, check: Callable[[], T | None], timeout: float = READY_TIMEOUT_S, every: float = 0.2) -> T:
    """Poll ``check`` until it returns something other than None/False; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def engine_config(directory: Path, *, fast_memory: bool) -> str:
    """A small, fast engine config with private addresses; ``fast_memory`` scales memory to 1/65536."""
    text = (
        "[daemon]\n"
        f'listen = "unix://{directory / "cuzk.sock"}"\n'
        f'status_listen = "127.0.0.1:{free_loopback_port()}"\n'
        "[engine]\n"
        "time_scale = 0.0005\n"
        "gpus = 1\n"
    )
    if fast_memory:
        text += 'memory_scale = 0.0000152587890625\n[memory]\ntotal_budget = "400GiB"\n'
    return text


@dataclass
class Recorder:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    session: Path
    stderr_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def scrape(self, accept: str | None = None) -> str | None:
        request = urllib.request.Request(self.url, headers={"Accept": accept} if accept else {})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            return None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def _launches(self) -> list[dict[str, object]]:
        try:
            lines = (self.session / "events.jsonl").read_text().splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if '"DaemonLaunched"' in line]

    def daemon_pids(self) -> list[int]:
        return [pid for launch in self._launches() if isinstance(pid := launch.get("pid"), int)]

    def cgroups(self) -> list[Path]:
        return [Path(path) for launch in self._launches() if isinstance(path := launch.get("cgroup_path"), str)]


@pytest.fixture
def recorders(tmp_path: Path) -> Iterator[Callable[..., Recorder]]:
    started: list[Recorder] = []

    def start(name: str, *args: str, fast_memory: bool = True) -> Recorder:
        directory = tmp_path / name
        directory.mkdir(mode=0o700)
        config = directory / "cuzk.toml"
        config.write_text(engine_config(directory, fast_memory=fast_memory))
        port = free_loopback_port()
        session = directory / "session"
        stderr_path = directory / "recorder.err"
        argv = [sys.executable, "-m", "cuzktui.cli", "record", "--engine", "--config", str(config)]
        argv += ["--session", str(session), "--metrics", f"127.0.0.1:{port}", *args]
        with stderr_path.open("wb") as err:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
        recorder = Recorder(name, proc, port, session, stderr_path)
        started.append(recorder)
        return recorder

    yield start
    for recorder in started:
        if recorder.proc.poll() is None:
            recorder.proc.send_signal(signal.SIGTERM)
            try:
                recorder.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                recorder.proc.kill()
                recorder.proc.wait(timeout=30)
        for pid in recorder.daemon_pids():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        for path in recorder.cgroups():  # a killed recorder could not remove its daemon's cgroup
            if path.exists():
                MemoryCgroup.at(path).remove(timeout=30)
