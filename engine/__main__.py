"""``cuzk-engine``: the daemon's CLI and startup sequence (docs/daemon-interface.md §2, §4.6)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from cuzktui import daemon_messages as msg
from cuzktui import proofinputs as pi
from cuzktui.daemon_address import DAEMON_DEFAULT_LISTEN, Address, parse_address
from cuzktui.daemon_config import DEFAULT_CONFIG_PATH, Config, DaemonConfigError, load_config
from cuzktui.daemon_facts import DAEMON_PROCESS_RSS
from cuzktui.knob_rules import CUDA_NEEDS_PIPELINE, CUDA_NEEDS_PIPELINE_WHY
from cuzktui.units import GiB, UnitError, parse_size

from . import tracing
from .box import BoxError, BoxMemory
from .memory import real_bytes
from .pipeline import Engine
from .reader import InputReader
from .server import make_server
from .status_http import serve_status
from .tracing import Logger, Quoted

# Upstream's default listen address (config.rs), which Curio's docs also give, and the TCP port its
# docs use: the places a production Curio would find this emulator.
CURIO_DOCS_PORT = 9820


class Fatal(Exception):
    """A startup failure reported as ``Error: <context>`` + ``Caused by:`` and exit status 1."""

    def __init__(self, context: str, *causes: str) -> None:
        super().__init__(context)
        self.context = context
        self.causes = list(causes)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cuzk-engine",
        description="Emulated cuzk proving daemon (no GPU; proofs are not valid). Same CLI as cuzk-daemon.",
    )
    parser.add_argument("-c", "--config", default=DEFAULT_CONFIG_PATH, metavar="PATH", help="TOML config file")
    parser.add_argument("-l", "--listen", metavar="ADDR", help="overrides [daemon].listen")
    parser.add_argument("--log-level", metavar="FILTER", help="overrides [logging].level (EnvFilter directives)")
    parser.add_argument(
        "--box-cgroup",
        metavar="DIR",
        type=Path,
        help="a memory cgroup (its directory) to hold the emulated box's memory: the model's allocations "
        "and the daemon's own, scaled; the engine itself and the proof inputs it receives stay outside it",
    )
    parser.add_argument(
        "--allow-production-socket",
        action="store_true",
        help=f"allow listening on {DAEMON_DEFAULT_LISTEN}, where a production Curio looks for its prover",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    samples = commands.add_parser(
        "sample-inputs",
        help="write proof inputs in upstream's formats (for cuzk-bench or cuzk-tui bench)",
        description="Writes porep-c1.json (Curio's C1 wrapper), the vanilla-proof files cuzk-bench's --vanilla "
        "reads, snap-comms.txt (cuzk-bench's comm flags) and post-randomness.txt. The engine proves them; "
        "their proofs are not valid.",
    )
    samples.add_argument("dir", metavar="DIR", type=Path)
    samples.add_argument(
        "--c1-size", default="60MB", metavar="SIZE", help="size of porep-c1.json (a real one: 51–68 MB)"
    )
    samples.add_argument("--miner-id", type=int, default=1000, help="miner the C1 belongs to (cuzk-bench's default)")
    samples.add_argument("--sector-num", type=int, default=1, help="sector the C1 belongs to (cuzk-bench's default)")
    samples.add_argument("--wpost-sectors", type=int, default=10, metavar="N", help="sectors in wpost-vanilla.json")
    return parser.parse_args(argv)


def private_listen() -> str:
    """A unix socket in a directory only this process created (under $XDG_RUNTIME_DIR when set)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    parent = runtime if runtime and os.path.isdir(runtime) else None
    return f"unix://{tempfile.mkdtemp(prefix='cuzk-engine-', dir=parent)}/cuzk.sock"


def choose_listen(args: argparse.Namespace, config: Config) -> tuple[str, bool]:
    """The address to serve on, and whether it is a private one chosen here.

    The emulator must never be found where a production Curio looks for its prover (its proofs
    are not valid, and Curio checks only PoRep locally): with no address given it serves on a
    private socket; upstream's default socket needs ``--allow-production-socket``."""
    listen = args.listen or (config.listen if config.listen_set else None)
    if listen is None:
        return private_listen(), True
    if listen == DAEMON_DEFAULT_LISTEN and not args.allow_production_socket:
        raise Fatal(
            f"refusing to listen on {DAEMON_DEFAULT_LISTEN}",
            "cuzk-engine is an emulator and its proofs are not valid; a production Curio looks for its prover there"
            " (pass --allow-production-socket to use it anyway)",
        )
    return listen, False


def write_sample_inputs(directory: Path, *, c1_size: int, miner_id: int, sector_num: int, wpost_sectors: int) -> str:
    """Writes the sample inputs; returns how to use them."""
    directory.mkdir(parents=True, exist_ok=True)
    seed = "cuzk-engine sample-inputs"
    comms = pi.SnapCommitments.generate(seed)
    randomness = pi.fr_safe(pi.det_bytes(seed + "/randomness", 32))
    files = {
        pi.C1_FILE: pi.generate_c1(miner_id=miner_id, sector_num=sector_num, size=c1_size, seed=seed),
        pi.VANILLA_FILES["snap"]: pi.vanilla_json(
            [pi.generate_snap_vanilla(n, seed=seed) for n in range(pi.SNAP_PARTITIONS)]
        ),
        pi.VANILLA_FILES["wpost"]: pi.vanilla_json(
            [pi.generate_post_vanilla(n + 1, pi.WINDOW_CHALLENGES_PER_SECTOR, seed) for n in range(wpost_sectors)]
        ),
        pi.VANILLA_FILES["winning"]: pi.vanilla_json([pi.generate_post_vanilla(1, pi.WINNING_CHALLENGES, seed)]),
        pi.SNAP_COMMS_FILE: "".join(f"{flag} {value}\n" for flag, value in comms.flags()).encode(),
        pi.POST_RANDOMNESS_FILE: f"--randomness {randomness.hex()}\n".encode(),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    d = directory
    flags = f"--miner-id {miner_id} --sector-num {sector_num}"
    post = f"--randomness {randomness.hex()}"
    lines = [f"{d / name}  {len(data)} bytes" for name, data in files.items()]
    lines += [
        "",
        "cuzk-bench (the sample's identity and values as its flags):",
        f"  cuzk-bench batch -t porep --c1 {d / pi.C1_FILE} {flags} -c 12 -j 6",
        f"  cuzk-bench batch -t snap --vanilla {d / pi.VANILLA_FILES['snap']} --registered-proof 3 "
        + " ".join(f"{flag} {value}" for flag, value in comms.flags()),
        f"  cuzk-bench batch -t wpost --vanilla {d / pi.VANILLA_FILES['wpost']} --registered-proof 13 {post}",
        f"  cuzk-bench batch -t winning --vanilla {d / pi.VANILLA_FILES['winning']} --registered-proof 3 {post}",
        "cuzk-tui bench reads the same files, and the comms / randomness files beside them:",
        f"  cuzk-tui bench -t porep --c1 {d / pi.C1_FILE} {flags} -c 12 -j 6",
    ]
    return "\n".join(lines)


async def bind(server: Any, listen: str, log: Logger) -> None:
    address = parse_address(listen)
    if address is not None and address.socket_path is not None:
        path = Path(address.socket_path)
        # main.rs: the line comes first, then the stale socket goes and the directory is made.
        log.info(tracing.DAEMON, msg.LISTENING_UNIX, ("path", Quoted(str(path))))
        if path.exists() or path.is_symlink():
            path.unlink()  # a stale socket from a process that died without cleaning up
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise Fatal(f'failed to create socket dir "{path.parent}"', str(err)) from None
        try:
            server.add_insecure_port(f"unix:{path}")
        except RuntimeError as err:
            raise Fatal(f"failed to bind unix socket {path}", str(err)) from None
        log.info(tracing.DAEMON, f"{msg.READY_PREFIX}{listen}")
        return
    if address is None or address.port is None or not address.is_socket_literal:
        raise Fatal(f"invalid listen address: {listen}", "invalid socket address syntax")
    if address.port == CURIO_DOCS_PORT:
        log.warn(
            tracing.DAEMON,
            f"cuzk-engine: port {CURIO_DOCS_PORT} is where Curio's docs put the real daemon;"
            " this emulator's proofs are not valid — keep production Curio away from it",
            ("addr", listen),
        )
    log.info(tracing.DAEMON, msg.LISTENING_TCP, ("addr", listen))
    # Like the daemon, "ready" is logged before the TCP port is bound.
    log.info(tracing.DAEMON, f"{msg.READY_PREFIX}{listen}")
    probe_tcp_bind(address)
    try:
        server.add_insecure_port(listen)
    except RuntimeError as err:
        raise Fatal("gRPC server error", "transport error", str(err)) from None


def probe_tcp_bind(address: Address) -> None:
    """Fails like tonic when the port is taken (grpcio would only print a core log line)."""
    family = socket.AF_INET6 if address.bracketed else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address.host, address.port))
        except OSError as err:
            raise Fatal("gRPC server error", "transport error", f"{err.strerror} (os error {err.errno})") from None


async def serve(config: Config, listen: str, log: Logger, reader: InputReader, box_cgroup: Path | None) -> None:
    memory = None
    if box_cgroup is not None:
        try:
            process = real_bytes(DAEMON_PROCESS_RSS, config.engine.memory_scale)
            memory = await BoxMemory.start(box_cgroup, process)
        except (BoxError, OSError) as error:
            raise Fatal(f"failed to start the emulated box in {box_cgroup}", str(error)) from None
        log.info(
            tracing.DAEMON,
            "cuzk-engine: the emulated box's memory is held in its own cgroup",
            ("cgroup", str(box_cgroup)),
            ("box_pid", memory.pid),
        )
    engine = Engine(config, log, memory)
    engine.read_input = reader.read
    engine.start()
    server = make_server(engine)
    await bind(server, listen, log)
    # main.rs spawns the status server; its line comes after the listen lines, like the
    # monolithic workers' start lines (tasks that run once this one first waits).
    status_task = (
        asyncio.get_running_loop().create_task(serve_status(engine, config.status_listen))
        if config.status_listen
        else None
    )
    await server.start()
    seen_sigint = False

    def on_sigint() -> None:
        nonlocal seen_sigint
        if seen_sigint:
            return  # later SIGINTs are swallowed
        seen_sigint = True
        log.info(tracing.DAEMON, msg.RECEIVED_SIGINT)
        engine.shutdown()

    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, on_sigint)
    try:
        await server.wait_for_termination()
    finally:
        status_server = await status_task if status_task is not None else None
        if status_server is not None:
            status_server.close()
    log.info(tracing.DAEMON, msg.DAEMON_STOPPED)


def main(argv: list[str] | None = None) -> None:
    # Until the server runs, SIGINT kills the process like the daemon's (no KeyboardInterrupt traceback).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    args = parse_args(argv)
    if args.command == "sample-inputs":
        try:
            size = parse_size(args.c1_size)
        except UnitError as error:
            sys.exit(f"cuzk-engine sample-inputs: --c1-size: {error}")
        print(
            write_sample_inputs(
                args.dir,
                c1_size=size,
                miner_id=args.miner_id,
                sector_num=args.sector_num,
                wpost_sectors=args.wpost_sectors,
            )
        )
        return
    try:
        try:
            config = load_config(args.config)
        except (OSError, tomllib.TOMLDecodeError, DaemonConfigError) as err:
            raise Fatal(f'failed to load config from "{args.config}"', str(err)) from None
        if not config.engine.cuda and not config.pipeline_enabled:
            raise Fatal(CUDA_NEEDS_PIPELINE, CUDA_NEEDS_PIPELINE_WHY)
        listen, private = choose_listen(args, config)
        log = Logger.from_environment(args.log_level or config.log_level)
        log.info(tracing.DAEMON, msg.DAEMON_STARTING)
        box = config.engine
        log.warn(
            tracing.DAEMON,
            "cuzk-engine: emulated daemon — no GPU, proofs are not valid",
            ("box_ram_gib", box.mem_total // GiB),
            ("gpus", len(config.emulated_gpus)),
            ("memory_scale", box.memory_scale),
            ("time_scale", box.time_scale),
        )
        if private:
            log.warn(
                tracing.DAEMON,
                "cuzk-engine: no listen address given; serving on a private socket, not upstream's default "
                + DAEMON_DEFAULT_LISTEN,
                ("listen", listen),
            )
        log.info(tracing.DAEMON, msg.CONFIGURATION_LOADED, ("listen", listen))
        if config.gpu_threads > 0:
            os.environ["CUZK_GPU_THREADS"] = str(config.gpu_threads)
            log.info(tracing.DAEMON, msg.SET_GPU_THREADS, ("gpu_threads", config.gpu_threads))
        threads = config.synthesis_threads or config.engine.cpus
        log.info(tracing.DAEMON, msg.RAYON_CONFIGURED, ("rayon_threads", threads))
        # Before the event loop and gRPC start any thread: the reader is forked (engine/reader.py).
        asyncio.run(serve(config, listen, log, InputReader.fork(), args.box_cgroup))
    except Fatal as fatal:
        tracing.write_stderr(tracing.fatal_report(fatal.context, fatal.causes))
        sys.exit(1)


if __name__ == "__main__":
    main()
