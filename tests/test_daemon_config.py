"""The tool's reading of a daemon config (cuzktui/daemon_config.py read_config / config_from_values);
the engine's strict reading is tests/engine/test_engine_config.py."""

from __future__ import annotations

from cuzktui.daemon_config import Config, config_from_values, read_config
from cuzktui.knobs import knob
from cuzktui.units import GiB


def test_the_values_a_daemon_runs_with_are_typed() -> None:
    text = (
        '[daemon]\nlisten = "127.0.0.1:9820"\nstatus_listen = "127.0.0.1:9821"\n[logging]\nlevel = "debug"\n'
        '[engine]\nmemory_scale = 0.5\ntime_scale = 1\nmem_total = "64GiB"\n'
    )
    config = read_config(text)
    assert (config.listen_address, config.status_address, config.log_level) == (
        "127.0.0.1:9820",
        "127.0.0.1:9821",
        "debug",
    )
    assert (config.engine.memory_scale, config.engine.time_scale, config.engine.mem_total) == (0.5, 1.0, 64 * GiB)
    assert isinstance(config.engine.time_scale, float)


def test_unset_addresses_are_none_not_the_daemons_default() -> None:
    config = read_config("[memory]\ntotal_budget = '100GiB'\n")
    assert config.listen_address is None and config.status_address is None
    assert config.listen == knob("daemon.listen").default, "the daemon's default is still what it would serve on"
    assert read_config('[daemon]\nlisten = ""\nstatus_listen = ""\n').listen_address is None


def test_a_value_the_engine_would_refuse_keeps_its_default_for_the_tool() -> None:
    # Wrong types, sizes that do not parse and numbers out of range: the engine exits, the tool reads on.
    text = (
        '[daemon]\nlisten = 9820\n[engine]\nmemory_scale = -1\nmem_total = "lots"\ngpus = "two"\n[logging]\nlevel = 3\n'
    )
    config = read_config(text)
    defaults = Config()
    assert config.listen_address is None
    assert config.engine == defaults.engine and config.log_level == defaults.log_level
    # A string of the right type is taken as written, even one the daemon would fail to bind.
    assert read_config('[daemon]\nlisten = "localhost:9820"\n').listen_address == "localhost:9820"


def test_text_that_is_not_toml_reads_as_the_defaults() -> None:
    assert read_config("[daemon\nlisten = ") == Config()
    assert read_config("daemon = 5\n") == Config(), "a section that is not a table is skipped"


def test_effective_values_read_like_a_file() -> None:
    values = {
        "engine.memory_scale": 0.25,
        "engine.cpus": 0,
        "engine.gpu_memory": "80GiB",
        "memory.safety_margin": "8GiB",
    }
    config = config_from_values(values)
    assert (config.engine.memory_scale, config.engine.cpus, config.engine.gpu_memory) == (0.25, 1, 80 * GiB)
    assert config.safety_margin == 8 * GiB
