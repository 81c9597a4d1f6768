"""Issue 10's fault scenarios that need no terminal: malformed input in bulk (4), atomic saves killed
at random points (5), misbehaving stand-in daemons (6) and the security properties (7).

docs/reliability.md tabulates each scenario with the test that shows it.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import multiprocessing
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui.client import StatusError, fetch_status_json
from cuzktui.config import save_atomic
from cuzktui.fleet import Box
from cuzktui.fleet_sources import EndpointSource
from cuzktui.live import LiveController, LiveOptions
from cuzktui.model import SessionModel
from cuzktui.session import (
    POLL_LOG_BYTES,
    SessionFollower,
    SessionWriter,
    iter_session_events,
    read_session,
    resolve_source,
)
from cuzktui.supervisor import DaemonProgram, DaemonStartError, Supervisor, engine_program
from tests.conftest import fast_engine_config, require_engine, start_apply_stop

FIXTURE = Path(__file__).parent / "data" / "timeline_restart.log"

# -- 4: malformed input ----------------------------------------------------------------------

# What a damaged line may hold: separators, quotes, escapes, ANSI fragments, control bytes, bad UTF-8,
# numbers out of every range, a second record glued on.
_NOISE = (
    b"", b",", b"=", b"\x00", b"\xff\xfe", b"\x1b[", b"\x1b[0m", b"{", b"}", b" ", b"-1", b"nan",
    b"99999999999999999999999", b"\t", b'"', b"\\", b"partition=", b"TIMELINE,", b"\r", b"Error: ",
)  # fmt: skip
FUZZ_LINES = 1_000_000


def _mutated_log(lines: int, seed: int) -> bytes:
    """``lines`` lines of a real daemon log (tests/data), each kept, cut, spliced or garbled at random."""
    rng = random.Random(seed)
    real = FIXTURE.read_bytes().splitlines()
    choice, below = rng.choice, rng.randrange
    out: list[bytes] = []
    for _ in range(lines):
        line = choice(real)
        p = below(len(line) + 1)
        match below(6):
            case 1:
                line = line[:p]
            case 2:
                line = line[:p] + choice(_NOISE) + line[p:]
            case 3:
                line = line[:p] + line[p + below(9) :]
            case 4:
                line = line.replace(b"=", b"=" + choice(_NOISE), 1)
            case 5:
                line = line[:p] + rng.randbytes(3) + line[p:]
        out.append(line)
    return b"\n".join(out) + b"\n"


@pytest.mark.slow
def test_a_million_mutated_log_lines_go_through_parser_and_model_without_an_exception(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    data = _mutated_log(FUZZ_LINES, seed=10)
    log.write_bytes(data)
    recorded = read_session(resolve_source(log))
    # Every line reached the parser (random bytes may add line breaks, never lose one).
    assert recorded.log_lines == data.count(b"\n") >= FUZZ_LINES
    model = SessionModel()
    model.apply_all([event for _, event in recorded.events])
    assert model.timeline.jobs()  # the intact lines among them still build jobs


# -- 5: atomic saves -------------------------------------------------------------------------

KILLS = 60


def _save_forever(path: str, versions: tuple[str, str], first_saved: threading.Event | None) -> None:
    for n in range(10**9):
        save_atomic(versions[n % 2], path)
        if n == 0 and first_saved is not None:
            first_saved.set()


def test_a_save_killed_at_random_points_leaves_the_old_or_the_new_file_never_a_torn_one(tmp_path: Path) -> None:
    path = tmp_path / "cuzk.toml"
    # Large enough that a write is many syscalls: a kill lands inside one often.
    versions = [f"# version {v}\n" + f'[daemon]\nlisten = "unix:///tmp/{v}.sock"\n' * 20_000 for v in "ab"]
    path.write_text("# the operator's file\n")
    mode = stat.S_IMODE(path.stat().st_mode)
    rng = random.Random(5)
    context = multiprocessing.get_context("fork")
    for _ in range(KILLS):
        rng.shuffle(versions)
        saved = context.Event()
        saver = context.Process(target=_save_forever, args=(str(path), tuple(versions), saved))
        saver.start()
        assert saved.wait(60), "the saving process never saved"
        # Any point of the loop is a valid one to die at: the property must hold at every one.
        threading.Event().wait(rng.uniform(0, 0.02))
        assert saver.pid is not None
        os.kill(saver.pid, signal.SIGKILL)
        saver.join(60)
        assert saver.exitcode == -signal.SIGKILL
        text = path.read_text()
        assert text in versions, f"torn file of {len(text)} characters"
        assert stat.S_IMODE(path.stat().st_mode) == mode
    names = [p.name for p in tmp_path.iterdir()]
    # A kill mid-save leaves its temporary file beside the target (never a second target): at least
    # one did, so the kills did land inside saves, not only between them.
    assert [n for n in names if not n.endswith(".tmp")] == ["cuzk.toml"]
    assert any(n.startswith(".cuzk.toml.") for n in names)


# -- 6: daemon misbehaviour (stand-in daemons) ------------------------------------------------


def _stand_in(directory: Path, body: str) -> DaemonProgram:
    """A stand-in daemon: a Python script run with this interpreter, given cuzk-daemon's -c/-l flags."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "cuzk-daemon"
    script.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    script.chmod(0o755)
    return DaemonProgram("real", (str(script),))


async def test_a_daemon_that_never_becomes_ready_times_out_showing_its_log_tail(tmp_path: Path) -> None:
    program = _stand_in(
        tmp_path / "bin",
        'print("2026-05-01T07:00:00.000000Z  INFO cuzk_daemon: cuzk-daemon starting", flush=True)\n'
        'print("stuck loading SRS", flush=True)\ntime.sleep(600)',
    )
    session = SessionWriter(tmp_path / "session")
    supervisor = Supervisor(session, program, listen=f"unix://{tmp_path}/d.sock", start_timeout=2)
    try:
        with pytest.raises(DaemonStartError) as caught:
            await supervisor.start('[daemon]\nlisten = "unix:///nowhere.sock"\n')
        message = str(caught.value)
        assert "did not answer GetStatus within 2 s" in message
        assert message.endswith("cuzk-daemon starting\nstuck loading SRS")
        assert supervisor.running  # a slow daemon is not killed behind the operator's back
    finally:
        await supervisor.close(stop=True)
        session.close()
    assert not supervisor.running


# -- 7: security -----------------------------------------------------------------------------

AWKWARD = 'it\'s a "daemon"; rm -rf $HOME `id` & dir'


async def test_daemon_and_config_paths_with_spaces_quotes_and_semicolons_are_passed_literally(
    tmp_path: Path,
) -> None:
    require_engine()
    # The stand-in writes the argv it received, then serves as the engine on the -l address.
    weird = tmp_path / AWKWARD
    program = _stand_in(
        weird / "bin",
        "import json, os\n"
        f"open({str(tmp_path / 'argv')!r}, 'w').write(json.dumps(sys.argv))\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'engine', *sys.argv[1:]])",
    )
    socket_dir = Path(tempfile.mkdtemp(prefix="cz-"))  # unix socket paths are short
    try:
        session = SessionWriter(weird / "session")
        supervisor = Supervisor(session, program, start_timeout=60)
        try:
            await supervisor.start(fast_engine_config(socket_dir))
            launched = [e for e in iter_session_events(session.path) if isinstance(e, ev.DaemonLaunched)]
            (argv,) = [e.command for e in launched]
            received = json.loads((tmp_path / "argv").read_text())
            assert received == list(argv)
            assert argv[0] == program.argv[0] and AWKWARD in argv[0]
            assert argv[1:3] == ("-c", str(session.config_versions()[0])) and AWKWARD in argv[2]
            assert not (tmp_path / "$HOME").exists() and not list(tmp_path.glob("*uid=*"))
        finally:
            await supervisor.close(stop=True)
            session.close()
    finally:
        for leftover in socket_dir.iterdir():
            leftover.unlink()
        socket_dir.rmdir()


class _Redirecting(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", "http://192.0.2.1:9/status")  # TEST-NET-1: nothing must go there
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def redirecting_server() -> Iterator[str]:
    """A loopback HTTP server whose every answer redirects off loopback."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


async def test_the_status_poller_does_not_follow_a_redirect_off_loopback(redirecting_server: str) -> None:
    with pytest.raises(StatusError, match="302"):
        await asyncio.wait_for(fetch_status_json(redirecting_server, timeout=5), 10)


def test_the_fleet_reader_of_metrics_endpoints_does_not_follow_a_redirect(redirecting_server: str) -> None:
    box = Box("box-1", metrics_url=f"http://{redirecting_server}/metrics")
    said = EndpointSource(timeout=5).fetch_all([box], 0.0)["box-1"]
    assert said == "HTTP Error 302: redirect to http://192.0.2.1:9/status not followed"


async def test_a_full_disk_while_recording_is_said_once_and_the_daemon_is_watched_on(tmp_path: Path) -> None:
    require_engine()
    socket_dir = Path(tempfile.mkdtemp(prefix="cz-"))
    config = tmp_path / "cuzk.toml"
    config.write_text(fast_engine_config(socket_dir))
    controller = LiveController(
        LiveOptions(program=engine_program(), config_file=config, session_dir=tmp_path / "s", sample_interval=0.1)
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60

    async def until(condition: Callable[[], bool], what: str) -> None:
        while not condition():
            assert loop.time() < deadline, f"not within 60 s: {what}"
            await controller.poll()
            await asyncio.sleep(0.05)

    def said(text: str) -> int:
        return sum(text in n.text for n in controller.model.notices)

    try:
        await controller.start()
        await until(lambda: controller.model.daemon.phase == "ready", "the engine ready")
        session, supervisor = controller.session, controller.supervisor
        assert session is not None and supervisor is not None
        recorded = len(list(iter_session_events(session.path)))
        # The disk fills: every write of the event file now fails with ENOSPC, as /dev/full's do.
        real_fd = session._events_fd
        full = os.open("/dev/full", os.O_WRONLY)
        session._events_fd = full
        try:
            await until(lambda: controller._unrecorded >= 5, "five samples refused by the full disk")
            assert said("No space left on device") == 1 and said("the daemon is not affected") == 1
            assert controller.daemon_running()
            status = await supervisor.client.get_status()  # the daemon answers, unharmed
            assert status.uptime_seconds >= 0
        finally:
            session._events_fd = real_fd
            os.close(full)
        await until(
            lambda: any(
                isinstance(e, ev.Notice) and e.text.startswith("recording resumed:")
                for e in iter_session_events(session.path)
            ),
            "recording resumed, said in the session",
        )
        assert len(list(iter_session_events(session.path))) > recorded
        assert read_session(resolve_source(session.path)).damage == ()
    finally:
        await controller.shutdown(stop_daemon=True)
        shutil.rmtree(socket_dir, ignore_errors=True)


@pytest.mark.slow
def test_a_flooded_log_is_followed_in_bounded_polls_and_an_endless_line_in_pieces(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "session")
    real = [line for line in FIXTURE.read_bytes().splitlines(keepends=True) if line.strip()]
    block = b"".join(real)
    copies = (5 * POLL_LOG_BYTES) // (2 * len(block))  # the flood: 2.5 polls' worth of daemon lines at once
    endless = b"x" * (3 << 20)  # a line of 3 MiB with no end, written last
    session.daemon_log_path.write_bytes(block * copies + endless)
    follower = SessionFollower(session.path)
    polls: list[int] = []
    tracemalloc.start()
    try:
        while events := follower.poll():
            polls.append(len(events))
            # One poll's events take ~13 bytes of Python objects per log byte (~105 MiB for 8 MiB): the
            # whole 20 MiB backlog at once would be ~2.5 times the bound.
            assert tracemalloc.get_traced_memory()[1] < 16 * POLL_LOG_BYTES, "a poll held the flood at once"
            tracemalloc.reset_peak()
    finally:
        tracemalloc.stop()
    assert len(polls) >= 3  # the backlog came in pieces, not in one poll
    # Every line; the endless one in 1 to 3 pieces (where the reads' chunks cut it).
    assert len(real) * copies < follower.log.lines <= len(real) * copies + 3
    session.close()


async def test_a_session_writes_only_its_directory_the_chosen_config_and_its_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_engine()
    # Everywhere a tool might write by default (home, XDG dirs, TMPDIR) is one watched, empty tree;
    # the daemon and the runner inherit the same environment.
    outside = tmp_path / "outside"
    for name in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
        (outside / name).mkdir(parents=True)
        monkeypatch.setenv(name, str(outside / name))
    monkeypatch.setenv("TMPDIR", str(outside / "XDG_RUNTIME_DIR"))
    socket_dir = Path(tempfile.mkdtemp(prefix="cz-"))
    config = tmp_path / "cuzk.toml"
    config.write_text(fast_engine_config(socket_dir))
    session_dir = tmp_path / "session"
    try:
        await start_apply_stop(config, session_dir)
    finally:
        sockets = [p.name for p in socket_dir.iterdir()]
        shutil.rmtree(socket_dir, ignore_errors=True)
    assert "max_parallel_synthesis = 3" in config.read_text()  # the knob was saved to the chosen config
    assert [p for p in outside.rglob("*") if not p.is_dir()] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cuzk.toml", "outside", "session"]
    assert set(sockets) <= {"cuzk.sock"}  # the config's own listen address, nothing else


REPO = Path(__file__).resolve().parents[1]


def _read_class(path: str, session_dir: Path, config: Path) -> str | None:
    """Which allowed class a path read by the controller's process falls in (None: none)."""
    where = Path(path)
    classes: list[tuple[str, Path, bool]] = [  # (class, root, whether what lies below counts too)
        ("session", session_dir, True),
        ("config", config, False),
        # save_atomic opens the config's directory (O_DIRECTORY) to fsync the rename, lists nothing.
        ("config", config.parent, False),
        # Samplers (/proc/PID/stat, statm, cgroup), the open-descriptor count (/proc/self/fd).
        ("proc/sys/dev", Path("/proc"), True),
        ("proc/sys/dev", Path("/sys"), True),
        ("proc/sys/dev", Path("/dev"), True),
        # Imports and importlib.metadata: the interpreter's library and the virtual environment.
        *(("python", Path(prefix), True) for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}),
        # The package itself, its editable-install metadata (the version), the tracing script and the
        # session it runs (conftest.start_apply_stop), and the repository's root and the script's
        # folder, which the import system lists as path entries.
        ("repository", REPO / "cuzktui", True),
        ("repository", REPO / "cuzk_tui.egg-info", True),
        ("repository", REPO / "tests" / "read_trace_session.py", False),
        ("repository", REPO / "tests" / "conftest.py", False),
        ("repository", REPO / "tests" / "__pycache__", True),
        ("repository", REPO / "tests", False),
        ("repository", REPO, False),
    ]
    for name, root, below in classes:
        if where == root or (below and where.is_relative_to(root)):
            return name
    return None


def test_a_session_reads_only_its_directory_the_chosen_config_and_the_system(tmp_path: Path) -> None:
    require_engine()
    # The same live session as above, in a child process that traces its own reads with an audit hook
    # (a hook cannot be removed, so it must not live in this process). HOME and the XDG directories
    # point at an empty tree of their own: a read of a dotfile there falls in no class.
    env = dict(os.environ)
    for name in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
        env[name] = str(tmp_path / "outside" / name)
        Path(env[name]).mkdir(parents=True)
    socket_dir = Path(tempfile.mkdtemp(prefix="cz-"))
    config = tmp_path / "cuzk.toml"
    config.write_text(fast_engine_config(socket_dir))
    session_dir = tmp_path / "session"
    try:
        done = subprocess.run(
            [sys.executable, str(REPO / "tests" / "read_trace_session.py"), str(config), str(session_dir)],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-4000:]
    reads: list[tuple[str, str]] = [tuple(read) for read in json.loads(done.stdout.splitlines()[-1])]
    by_class: dict[str | None, list[str]] = {}
    for event, path in reads:
        by_class.setdefault(_read_class(path, session_dir, config), []).append(f"{event} {path}")
    assert by_class.get(None, []) == []
    # The trace saw what the session must read: the chosen config, its own files, the samplers' /proc.
    assert f"open {config}" in by_class["config"]
    assert any(read.endswith("meta.json") for read in by_class["session"])
    assert "proc/sys/dev" in by_class and "python" in by_class and "repository" in by_class
