"""Config files: byte-exact round trips, surgical edits, effective values, diffs, atomic saves, fresh configs."""

from __future__ import annotations

import difflib
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzktui.config import (
    ConfigDocument,
    ConfigError,
    build_config,
    diff,
    load_config,
    load_config_or_default,
    save_atomic,
)
from cuzktui.knobs import KNOBS, Severity, knob

DATA = Path(__file__).parent / "data" / "config"
ANNOTATED = DATA / "annotated.toml"


def _copy(tmp_path: Path, text: str | None = None, name: str = "cuzk.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(ANNOTATED.read_bytes() if text is None else text.encode())
    return path


def _changed_lines(before: str, after: str) -> list[str]:
    """Only the added and removed lines of a line diff, each prefixed '+ ' or '- '."""
    return [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith(("+ ", "- "))]


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    save_atomic(load_config(path), path)
    assert path.read_bytes() == ANNOTATED.read_bytes()


def test_round_trip_keeps_crlf_and_a_missing_final_newline(tmp_path: Path) -> None:
    text = '# windows\r\n[memory]\r\ntotal_budget = "64GiB" # x\r\n[unknown]\r\nk = 1'
    path = _copy(tmp_path, text)
    save_atomic(load_config(path), path)
    assert path.read_bytes() == text.encode()


def test_set_existing_key_changes_only_that_line_and_keeps_its_comment(tmp_path: Path) -> None:
    doc = load_config(ANNOTATED)
    before = doc.text()
    doc.set("gpus", "devices", [0])
    doc.set("memory", "total_budget", "180GiB")
    assert _changed_lines(before, doc.text()) == [
        '- total_budget = "200GiB"',
        '+ total_budget = "180GiB"',
        "-   devices = [ 0,1 ]   # both cards",
        "+   devices = [0]   # both cards",
    ]


def test_set_absent_key_goes_after_the_sections_last_key(tmp_path: Path) -> None:
    doc = load_config(ANNOTATED)
    doc.set("memory", "safety_margin", "8GiB")
    doc.set("gpus", "gpu_workers_per_device", 1)
    lines = doc.text().splitlines()
    assert lines[lines.index('custom_operator_note = "not a daemon key"') + 1] == 'safety_margin = "8GiB"'
    # Indentation follows the section's existing keys; the next section's comment stays with it.
    assert lines[lines.index("  gpu_threads = 32") + 1] == "  gpu_workers_per_device = 1"
    assert _changed_lines(load_config(ANNOTATED).text(), doc.text()) == [
        '+ safety_margin = "8GiB"',
        "+   gpu_workers_per_device = 1",
    ]


def test_set_absent_section_appends_it_at_the_end() -> None:
    doc = load_config(ANNOTATED)
    before = doc.text()
    doc.set("logging", "level", "debug")
    after = doc.text()
    assert after.startswith(before)
    assert tomllib.loads(after[len(before) :]) == {"logging": {"level": "debug"}}


def test_set_in_an_empty_section_and_in_dotted_and_inline_forms() -> None:
    doc = ConfigDocument.parse('pipeline.enabled = true\nsrs = { param_cache = "/p" }\n[gpus]\n\n# next\n[memory]\n')
    doc.set("gpus", "gpu_threads", 8)
    doc.set("pipeline", "max_parallel_synthesis", 6)
    doc.set("srs", "param_cache", "/q")
    assert tomllib.loads(doc.text()) == {
        "pipeline": {"enabled": True, "max_parallel_synthesis": 6},
        "srs": {"param_cache": "/q"},
        "gpus": {"gpu_threads": 8},
        "memory": {},
    }
    assert "[gpus]\ngpu_threads = 8\n\n# next\n[memory]" in doc.text()


def test_update_sets_several_knobs_by_name() -> None:
    doc = ConfigDocument.parse("")
    doc.update({"pipeline.max_parallel_synthesis": 4, "daemon.listen": "127.0.0.1:9820"})
    assert tomllib.loads(doc.text()) == {
        "pipeline": {"max_parallel_synthesis": 4},
        "daemon": {"listen": "127.0.0.1:9820"},
    }


def test_set_refuses_a_section_that_is_not_a_table() -> None:
    doc = ConfigDocument.parse("memory = 5\n")
    with pytest.raises(ValueError, match="memory"):
        doc.set("memory", "total_budget", "1GiB")


def test_get_reads_the_file_then_the_default() -> None:
    doc = load_config(ANNOTATED)
    assert doc.get("memory", "total_budget") == "200GiB"
    assert doc.get("memory", "safety_margin") == "5GiB"
    assert doc.get("memory", "custom_operator_note") == "not a daemon key"
    assert doc.get("srs", "preload") is None
    assert doc.is_set("pipeline", "max_parallel_synthesis") and not doc.is_set("pipeline", "enabled")
    value = doc.get("engine", "time_scale")
    assert value == 1.0 and isinstance(value, float)
    with pytest.raises(KeyError):
        doc.get("memory", "no_such_key")


def test_defaults_are_copies_not_the_schemas_objects() -> None:
    devices = ConfigDocument().get("gpus", "devices")
    devices.append(3)
    assert knob("gpus.devices").default == []


def test_effective_gives_every_knob() -> None:
    effective = load_config(ANNOTATED).effective()
    assert list(effective) == [k.name for k in KNOBS]
    assert effective["gpus.devices"] == [0, 1]
    assert effective["pipeline.enabled"] is True
    assert effective["logging.format"] is None


def test_unknown_keys_and_problems_of_a_loaded_file() -> None:
    doc = load_config(ANNOTATED)
    assert doc.unknown_keys() == ["memory.custom_operator_note", "curio"]
    assert not [p for p in doc.problems() if p.severity is Severity.ERROR]
    warned = {p.key for p in doc.problems() if p.severity is Severity.WARNING}
    assert warned == {"pipeline.synthesis_lookahead", "synthesis.partition_workers"}


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=r"absent\.toml: no such file"):
        load_config(path)
    assert load_config_or_default(path).effective() == ConfigDocument().effective()


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("[memory]\ntotal_budget = \n", 2, 16),
        ("[memory]\ntotal_budget = 1\ntotal_budget = 2\n", 3, 17),
        ('[a]\nx = "unterminated\n', 2, 18),
    ],
)
def test_corrupt_toml_names_file_line_and_column(tmp_path: Path, text: str, line: int, column: int) -> None:
    path = _copy(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert str(caught.value).startswith(f"{path}:{line}:{column}: invalid TOML")


def test_non_utf8_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"# caf\xe9\n[memory]\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_diff_lists_changed_effective_values_all_needing_restart() -> None:
    a = load_config(ANNOTATED)
    b = load_config(ANNOTATED)
    b.set("pipeline", "max_parallel_synthesis", 12)
    b.set("memory", "eviction_min_idle", "5m")  # from "10m" to the default
    b.set("pipeline", "enabled", True)  # explicit default: no effective change
    changes = diff(a, b)
    assert [(c.name, c.old, c.new) for c in changes] == [
        ("memory.eviction_min_idle", "10m", "5m"),
        ("pipeline.max_parallel_synthesis", 10, 12),
    ]
    assert all(c.restart_required for c in changes)
    assert diff(a, a) == []


def test_diff_tells_a_boolean_from_an_integer() -> None:
    a = ConfigDocument.parse("[scheduler]\nsort_by_type = 1\n")
    assert [c.name for c in diff(a, ConfigDocument())] == ["scheduler.sort_by_type"]


def test_save_keeps_the_files_mode_and_new_files_get_0644(tmp_path: Path) -> None:
    existing = _copy(tmp_path)
    existing.chmod(0o600)
    save_atomic(load_config(existing), existing)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.toml"
    save_atomic(build_config({}), fresh)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    private = tmp_path / "private.toml"
    save_atomic(build_config({}), private, mode=0o600)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600


def test_save_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = _copy(tmp_path, "[memory]\n", name="real.toml")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    doc = load_config(link)
    doc.set("memory", "total_budget", "64GiB")
    save_atomic(doc, link)
    assert link.is_symlink()
    assert load_config(real).get("memory", "total_budget") == "64GiB"


def test_failed_save_leaves_the_original_and_no_temporary_file(tmp_path: Path, monkeypatch: Any) -> None:
    path = _copy(tmp_path)
    doc = load_config(path)
    doc.set("memory", "total_budget", "1GiB")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)  # the very function config.save_atomic calls
    with pytest.raises(OSError):
        save_atomic(doc, path)
    assert path.read_bytes() == ANNOTATED.read_bytes()
    assert os.listdir(tmp_path) == [path.name]


def test_built_config_is_commented_valid_and_loads_back() -> None:
    text = build_config({"pipeline.max_parallel_synthesis": 8, "memory.total_budget": "200GiB"})
    assert "# restart it after any change" in text
    assert '# listen = "unix:///run/curio/cuzk.sock"' in text  # defaults shown, commented out
    assert "partition_workers" not in text  # deprecated knobs only when asked for
    doc = ConfigDocument.parse(text)
    assert doc.problems() == []
    assert doc.effective()["pipeline.max_parallel_synthesis"] == 8
    assert tomllib.loads(text) == {
        "daemon": {},
        "memory": {"total_budget": "200GiB"},
        "gpus": {},
        "scheduler": {},
        "synthesis": {},
        "pipeline": {"max_parallel_synthesis": 8},
        "srs": {},
        "logging": {},
        "engine": {},
    }


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"pipeline.max_parallel_synth": 8}, "unknown knob"),
        ({"pipeline.max_parallel_synthesis": -1}, "pipeline.max_parallel_synthesis: must be an integer ≥ 0"),
        ({"memory.total_budget": "1.5GiB"}, "memory.total_budget"),
    ],
)
def test_build_config_refuses_unknown_or_invalid_values(values: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        build_config(values)


_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "daemon.listen": st.sampled_from(["127.0.0.1:9820", "unix:///tmp/c.sock", "[::1]:1"]),
        "memory.total_budget": st.one_of(st.just("auto"), st.integers(14, 4096).map(lambda n: f"{n}GiB")),
        "memory.eviction_min_idle": st.integers(0, 10**6).map(lambda n: f"{n}s"),
        "gpus.devices": st.lists(st.integers(0, 16), max_size=4),
        "pipeline.enabled": st.booleans(),
        "pipeline.max_parallel_synthesis": st.integers(0, 64),
        "srs.preload": st.lists(st.sampled_from(["porep-32g", "snap-32g"]), max_size=2),
        "engine.time_scale": st.floats(0.001, 10, allow_nan=False),
        "engine.seed": st.integers(0, 2**31),
        "engine.mem_total": st.integers(1, 4096).map(lambda n: f"{n}GiB"),
    },
)


@settings(max_examples=60, deadline=None)
@given(_VALUES)
def test_built_configs_load_back_to_the_same_effective_values(values: dict[str, Any]) -> None:
    effective = ConfigDocument.parse(build_config(values)).effective()
    expected = ConfigDocument().effective() | values
    assert effective == expected


_ASSIGNMENTS = st.one_of(
    st.tuples(st.just("pipeline.max_parallel_synthesis"), st.integers(0, 64)),
    st.tuples(st.just("gpus.devices"), st.lists(st.integers(0, 8), max_size=3)),
    st.tuples(st.just("memory.total_budget"), st.integers(14, 999).map(lambda n: f"{n}GiB")),
    st.tuples(st.just("memory.safety_margin"), st.integers(0, 99).map(lambda n: f"{n}GiB")),
    st.tuples(st.just("scheduler.max_batch_size"), st.integers(0, 4)),
    st.tuples(st.just("logging.level"), st.sampled_from(["debug", "warn"])),
    st.tuples(st.just("engine.seed"), st.integers(0, 99)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_ASSIGNMENTS, min_size=1, max_size=4))
def test_any_set_touches_only_the_lines_of_the_keys_it_sets(assignments: list[tuple[str, Any]]) -> None:
    original = load_config(ANNOTATED)
    doc = load_config(ANNOTATED)
    for name, value in assignments:
        section, key = name.split(".")
        doc.set(section, key, value)
    expected = original.effective() | dict(assignments)
    assert doc.effective() == expected
    touched = {name.split(".")[1] for name, _ in assignments}
    for line in _changed_lines(original.text(), doc.text()):
        body = line[2:].strip()
        # Changed or added lines are only the assigned keys, and headers/blank lines of new sections.
        assert body == "" or body.startswith("[") or body.split("=")[0].strip() in touched, line


def test_update_with_none_removes_only_that_key() -> None:
    text = (
        '# top\n[memory]\ntotal_budget = "200GiB"  # explicit\npinned_budget = "8GiB"\n\n[pipeline]\nenabled = true\n'
    )
    doc = ConfigDocument.parse(text)
    doc.update({"memory.pinned_budget": None, "pipeline.max_parallel_synthesis": 4})
    out = doc.text()
    assert "pinned_budget" not in out
    assert 'total_budget = "200GiB"  # explicit' in out and "max_parallel_synthesis = 4" in out
    assert doc.get("memory", "pinned_budget") is None
    assert not doc.remove("memory", "pinned_budget")
