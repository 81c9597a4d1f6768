"""``cuzk-tui config check|show|set`` through the real command line."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest

from cuzktui.cli import main
from cuzktui.knobs import KNOBS

ANNOTATED = Path(__file__).parent / "data" / "config" / "annotated.toml"


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "cuzk.toml"
    shutil.copyfile(ANNOTATED, path)
    return path


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_check_clean_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, '[memory]\ntotal_budget = "80GiB"\n')
    assert main(["config", "check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_check_budget_below_every_floor_fails_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, '[memory]\ntotal_budget = "512MiB"\n')
    assert main(["config", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "memory.total_budget: 512 MiB is below every proof kind's floor" in out
    assert "wait for memory forever" in out


def test_check_budget_below_some_floors_names_the_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, '[memory]\ntotal_budget = "64GiB"\n')
    assert main(["config", "check", str(path)]) == 0
    assert "64 GiB can never prove WindowPoSt" in capsys.readouterr().out


def test_check_monolithic_mode_gives_no_budget_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, '[memory]\ntotal_budget = "8GiB"\n[pipeline]\nenabled = false\nmax_gpu_queue_depth = 8\n')
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "floor" not in out and "can never prove" not in out  # nothing is reserved in monolithic mode
    assert "memory.total_budget: has no effect with pipeline.enabled = false" in out
    assert "pipeline.max_gpu_queue_depth: has no effect with pipeline.enabled = false" in out


def test_check_warnings_alone_exit_0_and_name_file_and_key(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(cfg)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        f"{cfg}: warning: synthesis.partition_workers: deprecated: the daemon warns about it at start and ignores it"
        in lines
    )
    assert any(line.startswith(f"{cfg}: info: memory.custom_operator_note: unknown key") for line in lines)
    assert all(line.startswith(f"{cfg}: ") for line in lines)


def test_check_errors_exit_1_one_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path,
        '[daemon]\nlisten = "localhost:9820"\n[memory]\ntotal_budget = "1.5GiB"\n[pipeline]\nenabled = "yes"\n',
    )
    assert main(["config", "check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1:3] for line in out] == [
        ["error", "daemon.listen"],
        ["error", "memory.total_budget"],
        ["error", "pipeline.enabled"],
    ]


@pytest.mark.parametrize("action", [["check"], ["show"], ["show", "--json"], ["set", "pipeline.enabled=true"]])
def test_missing_file_exits_1_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]) -> None:
    path = tmp_path / "nope.toml"
    argv = ["config", action[0], str(path), *action[1:]]
    assert main(argv) == 1
    assert f"{path}: no such file" in capsys.readouterr().err
    assert not path.exists()


def test_corrupt_file_exits_1_with_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "[memory]\ntotal_budget = \n")
    assert main(["config", "check", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"{path}:2:16: invalid TOML")


def test_show_table_lists_every_knob_with_value_default_set_and_status(
    cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "show", str(cfg)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line and not line.startswith("unknown")}
    assert set(rows) == {k.name for k in KNOBS}
    assert rows["pipeline.max_parallel_synthesis"].split() == [
        "pipeline.max_parallel_synthesis",
        "10",
        "18",
        "set",
        "active",
    ]
    assert rows["pipeline.enabled"].split() == ["pipeline.enabled", "true", "true", "active"]
    assert rows["synthesis.partition_workers"].endswith("deprecated (ignored by the daemon)")
    assert rows["pipeline.synthesis_lookahead"].endswith("inert (ignored by the daemon)")
    assert rows["engine.seed"].endswith("engine-only")
    # Aligned: every column starts at the same place on every line.
    header = out.splitlines()[0]
    statuses = {"active", "engine-only", "deprecated (ignored by the daemon)", "inert (ignored by the daemon)"}
    assert {line[header.index("STATUS") :] for line in rows.values()} == statuses
    assert {line[header.index("DEFAULT") - 1] for line in rows.values()} == {" "}
    assert "unknown keys (ignored by the daemon): memory.custom_operator_note, curio" in out


def test_show_json_is_one_object_with_every_knob(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", str(cfg), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    knobs = {k["name"]: k for k in data["knobs"]}
    assert list(knobs) == [k.name for k in KNOBS]
    assert (knobs["gpus.devices"]["value"], knobs["gpus.devices"]["default"], knobs["gpus.devices"]["set"]) == (
        [0, 1],
        [],
        True,
    )
    assert knobs["srs.preload"]["status"] == "deprecated" and knobs["srs.preload"]["ignored_by_daemon"]
    assert knobs["memory.total_budget"]["restart_required"] is True
    assert data["unknown_keys"] == ["memory.custom_operator_note", "curio"]
    assert data["file"] == str(cfg)


def test_set_changes_only_the_given_values(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = cfg.read_text()
    argv = [
        "config",
        "set",
        str(cfg),
        "pipeline.max_parallel_synthesis=6",
        "gpus.gpu_threads=16",
        "logging.level=debug",
    ]
    assert main(argv) == 0
    changed = [
        line for line in difflib.ndiff(before.splitlines(), cfg.read_text().splitlines()) if line.startswith(("+", "-"))
    ]
    assert changed == [
        "-   gpu_threads = 32",
        "+   gpu_threads = 16",
        "- max_parallel_synthesis = 10",
        "+ max_parallel_synthesis = 6",
        "+ ",
        "+ [logging]",
        '+ level = "debug"',
    ]
    out = capsys.readouterr()
    assert f"{cfg}: pipeline.max_parallel_synthesis = 6 (was 10)" in out.out
    assert "restart" in out.err


def test_set_reports_warnings_but_still_saves(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", str(cfg), "daemon.listen=0.0.0.0:9820"]) == 0
    assert "warning: daemon.listen: listens on every interface" in capsys.readouterr().err
    assert 'listen    = "0.0.0.0:9820"     # local only' in cfg.read_text()


@pytest.mark.parametrize(
    ("assignment", "code", "message"),
    [
        ("pipeline.max_parallel_synthesis", 2, "expected SECTION.KEY=VALUE"),
        ("threads=4", 2, "expected SECTION.KEY=VALUE"),
        ("pipeline.max_parallel_synth=4", 2, "pipeline.max_parallel_synth: unknown knob (did you mean"),
        (
            "pipeline.max_parallel_synthesis=-3",
            1,
            "pipeline.max_parallel_synthesis: must be an integer ≥ 0 and ≤ 4294967295",
        ),
        ("pipeline.max_parallel_synthesis=lots", 1, "pipeline.max_parallel_synthesis: must be an integer, got 'lots'"),
        ("memory.total_budget=1.5GiB", 1, "the daemon would read it as 50 GiB"),
        ("daemon.listen=localhost:9820", 1, "literal IP address"),
    ],
)
def test_bad_assignments_write_nothing(
    cfg: Path, capsys: pytest.CaptureFixture[str], assignment: str, code: int, message: str
) -> None:
    before = cfg.read_bytes()
    assert main(["config", "set", str(cfg), "gpus.gpu_threads=8", assignment]) == code
    err = capsys.readouterr().err
    assert message in err and "nothing written" in err
    assert cfg.read_bytes() == before


def test_malformed_assignment_outranks_an_invalid_value(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", str(cfg), "pipeline.max_parallel_synthesis=-1", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert "must be an integer ≥ 0" in err and "'nonsense': expected SECTION.KEY=VALUE" in err
