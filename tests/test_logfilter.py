"""RUST_LOG as the daemon applies it (main.rs: a valid RUST_LOG beats [logging].level and --log-level)."""

from __future__ import annotations

import pytest

from cuzktui.logfilter import DASHBOARD_TARGETS, hidden_dashboard_targets, launch_environment


@pytest.mark.parametrize(
    ("rust_log", "hidden"),
    [
        ("warn", list(DASHBOARD_TARGETS)),
        ("", list(DASHBOARD_TARGETS)),  # valid and empty: no directive enables anything
        ("off", list(DASHBOARD_TARGETS)),
        ("info,cuzk_core::memory=warn", ["cuzk_core::memory"]),
        ("warn,cuzk_core=info", ["cuzk_daemon", "cuzk_server::service"]),
        ("info", []),
        ("debug,h2=off", []),
        ("cuzk_core=debug,cuzk_daemon,cuzk_server=trace", []),
        ("info,cuzk=loud", []),  # invalid: the daemon ignores RUST_LOG and uses its config level
    ],
)
def test_which_dashboard_targets_an_inherited_rust_log_hides(rust_log: str, hidden: list[str]) -> None:
    assert hidden_dashboard_targets(rust_log) == hidden


def test_a_hiding_rust_log_is_replaced_by_the_configured_level_and_said() -> None:
    env, warning = launch_environment({"RUST_LOG": "warn", "HOME": "/h"}, "info,cuzk_core::pipeline=debug")
    assert env == {"RUST_LOG": "info,cuzk_core::pipeline=debug", "HOME": "/h"}
    assert warning is not None and "RUST_LOG='warn'" in warning and "overrides logging.level" in warning


@pytest.mark.parametrize("env", [{"HOME": "/h"}, {"HOME": "/h", "RUST_LOG": "info,cuzk_core=debug"}])
def test_an_absent_or_harmless_rust_log_is_left_alone(env: dict[str, str]) -> None:
    assert launch_environment(env, "info") == (env, None)
