"""Config schema, strict values, the fatal report, and the CLI's exit codes (docs/daemon-interface.md §2, §3)."""

from __future__ import annotations

import os
import subprocess
import tomllib
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest

from cuzktui.daemon_config import KNOB_FIELDS, Config, DaemonConfigError, parse_config
from cuzktui.knob_rules import validate_document
from cuzktui.knobs import KNOBS, Knob, KnobType, Severity, Status
from cuzktui.supervisor import free_loopback_port
from cuzktui.units import parse_duration, parse_size
from tests.engine.engine_harness import engine_command

REPO = Path(__file__).resolve().parents[2]


def parse(text: str) -> Config:
    return parse_config(tomllib.loads(text))


def test_every_section_and_key_is_read() -> None:
    c = parse(
        """
        [daemon]
        listen = "0.0.0.0:9820"
        status_listen = "127.0.0.1:9821"
        [memory]
        total_budget = "400GiB"
        safety_margin = "8GiB"
        eviction_min_idle = "30s"
        [gpus]
        devices = [0, 2]
        gpu_threads = 32
        gpu_workers_per_device = 3
        [scheduler]
        max_batch_size = 2
        max_batch_wait_ms = 500
        sort_by_type = false
        [synthesis]
        threads = 48
        [pipeline]
        enabled = false
        synthesis_lookahead = 4
        synthesis_concurrency = 2
        max_parallel_synthesis = 10
        slot_size = 3
        max_gpu_queue_depth = 8
        [srs]
        param_cache = "/srv/params"
        [logging]
        level = "debug"
        format = "json"
        [engine]
        memory_scale = 0.001
        time_scale = 0.5
        gpus = 2
        gpu_memory = "24GiB"
        cpus = 64
        mem_total = "512GiB"
        seed = 7
        [unknown_section]
        whatever = 1
        """
    )
    assert (c.listen, c.status_listen) == ("0.0.0.0:9820", "127.0.0.1:9821")
    assert (c.total_budget, c.safety_margin, c.eviction_min_idle_s) == (400 << 30, 8 << 30, 30)
    assert (c.devices, c.gpu_threads, c.gpu_workers_per_device) == ([0, 2], 32, 3)
    assert (c.max_batch_size, c.max_batch_wait_ms, c.sort_by_type) == (2, 500, False)
    assert (c.synthesis_threads, c.pipeline_enabled, c.synthesis_lookahead) == (48, False, 4)
    assert (c.synthesis_concurrency, c.max_parallel_synthesis, c.slot_size, c.max_gpu_queue_depth) == (2, 10, 3, 8)
    assert (c.param_cache, c.log_level) == ("/srv/params", "debug")
    e = c.engine
    assert (e.memory_scale, e.time_scale, e.gpus, e.gpu_memory, e.cpus, e.mem_total, e.seed) == (
        0.001, 0.5, 2, 24 << 30, 64, 512 << 30, 7
    )  # fmt: skip
    assert c.deprecated_present == []


def test_defaults_and_auto_budget() -> None:
    c = parse('[memory]\ntotal_budget = "auto"\n')
    assert c.total_budget is None and c.listen == "unix:///run/curio/cuzk.sock"
    assert (c.max_parallel_synthesis, c.gpu_workers_per_device, c.max_batch_wait_ms) == (18, 2, 10000)


def schema_default(k: Knob) -> Any:
    """The knob's default as the engine should hold it: sizes in bytes, durations in seconds, "auto" as None."""
    if not isinstance(k.default, str):
        return k.default
    if k.type is KnobType.BUDGET:
        return None if k.default == "auto" else parse_size(k.default)
    if k.type is KnobType.SIZE:
        return parse_size(k.default)
    return parse_duration(k.default) if k.type is KnobType.DURATION else k.default


@pytest.mark.parametrize("k", KNOBS, ids=lambda k: k.name)
def test_engine_defaults_are_the_schemas(k: Knob) -> None:
    if k.name not in KNOB_FIELDS:
        # Only what the engine never reads may lack a field: deprecated keys and the never-read log format.
        assert k.status is Status.DEPRECATED or k.name == "logging.format"
        assert k.default is None
        return
    assert attrgetter(KNOB_FIELDS[k.name])(Config()) == schema_default(k)


def test_writing_every_default_explicitly_changes_nothing() -> None:
    doc: dict[str, dict[str, Any]] = {}
    for k in KNOBS:
        if k.default is not None:
            doc.setdefault(k.section, {})[k.key] = k.default
    assert parse_config(doc) == Config()


def test_schema_warnings_are_not_fatal() -> None:
    text = """
        [daemon]
        listen = "0.0.0.0:9820"
        status_listen = "[::]:9821"
        [memory]
        total_budget = "1GiB"
        [scheduler]
        sort_by_type = false
        [pipeline]
        slot_size = 3
        [logging]
        level = "cuzk_core"
        format = "json"
        """
    doc = tomllib.loads(text)
    assert {p.severity for p in validate_document(doc)} == {Severity.WARNING}
    c = parse_config(doc)
    assert (c.listen, c.status_listen, c.total_budget) == ("0.0.0.0:9820", "[::]:9821", 1 << 30)
    assert (c.sort_by_type, c.slot_size, c.log_level) == (False, 3, "cuzk_core")


def test_zero_cpus_is_read_as_one() -> None:
    assert parse("[engine]\ncpus = 0\n").engine.cpus == 1


def test_deprecated_keys_are_accepted_and_reported() -> None:
    c = parse(
        '[memory]\npinned_budget = "10GiB"\nworking_memory_budget = "1GiB"\n'
        '[synthesis]\npartition_workers = 12\n[srs]\npreload = ["porep-32g"]\n'
    )
    assert c.deprecated_present == [
        "memory.pinned_budget is deprecated — memory is now managed by the unified total_budget",
        "memory.working_memory_budget is deprecated — memory is now managed by the unified total_budget",
        "synthesis.partition_workers is deprecated — concurrency is now managed by the memory budget",
        "srs.preload is deprecated — SRS is loaded on demand",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[memory]\ntotal_budget = "1.5GiB"\n', "memory.total_budget: '1.5GiB': only a whole number may stand"),
        ('[memory]\ntotal_budget = "Auto"\n', "memory.total_budget: 'Auto' is not a size"),
        ('[memory]\nsafety_margin = "5gib"\n', "memory.safety_margin: '5gib' is not a size"),
        ('[memory]\neviction_min_idle = "1h"\n', "memory.eviction_min_idle: '1h' is not a duration"),
        ("[memory]\ntotal_budget = 400\n", "memory.total_budget: must be a string, got integer 400"),
        ('[pipeline]\nmax_parallel_synthesis = "18"\n', "pipeline.max_parallel_synthesis: must be an integer, got"),
        (
            "[pipeline]\nmax_parallel_synthesis = -1\n",
            "pipeline.max_parallel_synthesis: must be an integer ≥ 0 and ≤ 4294967295, got -1",
        ),
        ("[gpus]\ndevices = [0, -1]\n", "gpus.devices: must hold integers ≥ 0 and ≤ 4294967295, got -1"),
        ('[gpus]\ndevices = [0, "1"]\n', "gpus.devices: must be an array of integers, got array"),
        ('[pipeline]\nenabled = "yes"\n', "pipeline.enabled: must be true or false, got string 'yes'"),
        ("[engine]\ntime_scale = 0\n", "engine.time_scale: must be a number > 0, got 0"),
        ("[engine]\nmemory_scale = 2\n", "engine.memory_scale: must be a number > 0 and ≤ 1, got 2"),
        ('[engine]\ngpu_memory = "80G"\n', "engine.gpu_memory: '80G' is not a size"),
        ('daemon = "x"\n', "daemon: must be a table ([daemon]), got string 'x'"),
        # Every error of the schema's validator is fatal, beyond types and units:
        ('[daemon]\nlisten = "localhost:9820"\n', "daemon.listen: 'localhost:9820' — the daemon needs a literal IP"),
        ('[daemon]\nstatus_listen = "9821"\n', "daemon.status_listen: '9821' — needs host:port"),
        ('[logging]\nlevel = "info,x=loud"\n', "logging.level: 'x=loud': 'loud' is not a level"),
        ('[srs]\nparam_cache = ""\n', "srs.param_cache: must name a directory"),
        # Deprecated and inert keys are ignored, but their types are still the daemon's.
        (
            "[synthesis]\npartition_workers = -1\n",
            "synthesis.partition_workers: must be an integer ≥ 0 and ≤ 4294967295, got -1",
        ),
        ('[srs]\npreload = "porep-32g"\n', "srs.preload: must be an array of strings, got string"),
        ("[logging]\nformat = 1\n", "logging.format: must be a string, got integer 1"),
    ],
)
def test_bad_values_name_the_key(text: str, message: str) -> None:
    with pytest.raises(DaemonConfigError) as info:
        parse(text)
    assert str(info.value).startswith(message)


def run_engine(*args: str, env: dict[str, str] | None = None, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engine_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (
            "[pipeline]\nmax_parallel_synthesis = 1.5\n",
            "pipeline.max_parallel_synthesis: must be an integer, got float 1.5",
        ),
        ('[memory]\ntotal_budget = "1.5GiB"\n', "memory.total_budget: '1.5GiB': only a whole number may stand before"),
        (
            "[gpus]\ngpu_workers_per_device = -2\n",
            "gpus.gpu_workers_per_device: must be an integer ≥ 0 and ≤ 4294967295, got -2",
        ),
    ],
    ids=["wrong-type", "bad-unit", "negative-count"],
)
def test_bad_config_is_fatal_and_serves_nothing(tmp_path: Path, text: str, cause: str) -> None:
    port = free_loopback_port()
    config = tmp_path / "x.toml"
    config.write_text(f'[daemon]\nlisten = "127.0.0.1:{port}"\n' + text)
    done = run_engine("-c", str(config))
    assert done.returncode == 1
    head, caused = done.stderr.split("\n\nCaused by:\n    ", 1)
    assert head == f'Error: failed to load config from "{config}"'
    assert caused.startswith(cause)
    assert done.stdout == ""  # nothing logged, nothing served


def test_cli_errors(tmp_path: Path) -> None:
    bad_flag = run_engine("--no-such-flag")
    assert bad_flag.returncode == 2 and "usage:" in bad_flag.stderr
    help_text = run_engine("--help")
    assert help_text.returncode == 0 and "--listen" in help_text.stdout
    missing = tmp_path / "absent.toml"
    invalid = run_engine("-c", str(missing), "-l", "localhost:9820")
    assert invalid.returncode == 1
    assert invalid.stderr.endswith(
        "Error: invalid listen address: localhost:9820\n\nCaused by:\n    invalid socket address syntax\n"
    )
    # A missing config file means defaults (silently); startup got as far as the listen address.
    assert "INFO cuzk_daemon: configuration loaded listen=localhost:9820" in invalid.stdout
    syntax = tmp_path / "syntax.toml"
    syntax.write_text("[memory\n")
    broken = run_engine("-c", str(syntax))
    assert broken.returncode == 1 and broken.stderr.startswith(f'Error: failed to load config from "{syntax}"\n\n')
    # A box cgroup it cannot join: said, nothing served, no box left behind.
    boxless = run_engine("-c", str(missing), "-l", f"unix://{tmp_path}/s.sock", "--box-cgroup", str(missing))
    assert boxless.returncode == 1
    assert boxless.stderr.endswith(
        f"Error: failed to start the emulated box in {missing}\n\nCaused by:\n"
        f"    cannot join the memory cgroup {missing}: No such file or directory\n"
    )


def test_port_in_use_is_a_grpc_server_error(engine_factory: Any, tmp_path: Path) -> None:
    first = engine_factory()
    config = tmp_path / "c.toml"
    config.write_text("[engine]\ntime_scale = 0.001\nmemory_scale = 0.0000152587890625\n")
    second = run_engine("-c", str(config), "-l", first.target)
    assert second.returncode == 1
    assert second.stderr == (
        "Error: gRPC server error\n\nCaused by:\n    0: transport error\n    1: Address already in use (os error 98)\n"
    )
    assert f"cuzk-daemon ready, serving on {first.target}" in second.stdout  # "ready" precedes the TCP bind


def test_log_level_precedence(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[logging]\nlevel = "warn"\n[engine]\nmemory_scale = 0.0000152587890625\n')
    # A bad listen address ends the process right after the startup lines; enough to see the filter.
    quiet = run_engine("-c", str(config), "-l", "bad")
    assert "WARN cuzk_daemon: cuzk-engine: emulated daemon" in quiet.stdout
    assert " INFO " not in quiet.stdout
    cli = run_engine("-c", str(config), "-l", "bad", "--log-level", "info,cuzk_core::engine=warn")
    assert "INFO cuzk_daemon: cuzk-daemon starting" in cli.stdout and "INFO cuzk_core::engine" not in cli.stdout
    env = run_engine("-c", str(config), "-l", "bad", "--log-level", "error", env={"RUST_LOG": "cuzk_core=debug"})
    assert "cuzk_daemon" not in env.stdout and "INFO cuzk_core::engine: starting cuzk engine" in env.stdout
    invalid_env = run_engine("-c", str(config), "-l", "bad", env={"RUST_LOG": "info,x=notalevel"})
    assert " INFO " not in invalid_env.stdout and "WARN" in invalid_env.stdout  # falls back to the config level
    silent = run_engine("-c", str(config), "-l", "bad", env={"RUST_LOG": ""})
    assert silent.stdout == "" and silent.returncode == 1
