"""``cuzk-tui record`` and ``cuzk-tui fleet``: usage errors are refused (exit 2) before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzktui.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["record", "--attach", "127.0.0.1:9820", "--engine"], "--attach watches a running daemon"),
        (["record", "--attach", "127.0.0.1:9820", "--log", "a", "--journal", "b"], "--log and --journal"),
        (["record", "--engine", "--metrics", "host:"], "--metrics 'host:'"),
        (["record", "--engine", "--keep", "soon"], "'soon' is not a duration"),
        (["record", "--engine", "--run-bench", "porep:0:1"], "--run-bench"),
        (["fleet"], "give --prometheus URL or --hosts FILE"),
    ],
)
def test_usage_errors_exit_2_and_say_why(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_listening_on_every_interface_is_warned_about(capsys: pytest.CaptureFixture[str]) -> None:
    # The warning comes while the arguments are checked, before a bad --keep stops the run.
    assert main(["record", "--engine", "--metrics", "0.0.0.0:9920", "--keep", "soon"]) == 2
    assert "every interface" in capsys.readouterr().err


def test_fleet_json_of_a_box_that_does_not_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cuzktui.supervisor import free_loopback_port

    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[[box]]\nname = "gone"\nmetrics = "127.0.0.1:{free_loopback_port()}"\n')
    # Asked once and no answer: unreachable (not "not seen yet"), and the exit status says a box failed.
    assert main(["fleet", "--hosts", str(hosts), "--json", "--timeout", "2"]) == 1
    out = capsys.readouterr().out
    assert '"state": "unreachable"' in out and "refused" in out.lower()


@pytest.mark.parametrize(
    ("hosts", "message"),
    [("absent.toml", "absent.toml: no such file"), (".", ": cannot read: Is a directory"), ("bad.toml", "not TOML")],
)
def test_a_hosts_file_that_cannot_be_read_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hosts: str, message: str
) -> None:
    (tmp_path / "bad.toml").write_text("[[box]\n")
    assert main(["fleet", "--hosts", str(tmp_path / hosts)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cuzk-tui fleet: ") and message in err and err.count("\n") == 1, err
    assert "Errno" not in err


def test_metrics_reach_the_live_options_of_attach_and_record(tmp_path: Path) -> None:
    from cuzktui.cli import build_parser
    from cuzktui.commands.record import record_options
    from cuzktui.commands.tui import attach_options

    parser = build_parser()
    session = ["--session", str(tmp_path)]
    for argv in (["attach", "127.0.0.1:9820", "--metrics", "9920", *session],
                 ["--metrics", "9920", "attach", "127.0.0.1:9820", *session]):  # fmt: skip
        assert attach_options(parser.parse_args(argv)).metrics_address == ("127.0.0.1", 9920)
    options = record_options(
        parser.parse_args(["record", "--engine", "--metrics", ":9921", "--profile", "256", "--run-bench", "porep:2:2"])
    )
    assert options.metrics_address == ("127.0.0.1", 9921)
    assert options.program is not None and options.program.mode == "engine"
    assert options.profile_gib == 256 and options.run_bench is not None and options.run_bench.count == 2
    attached = record_options(parser.parse_args(["record", "--attach", "unix:///run/cuzk.sock", "--journal", "cuzk"]))
    assert attached.program is None and attached.attach is not None and attached.attach.journal_unit == "cuzk"
