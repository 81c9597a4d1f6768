"""The import contracts in pyproject.toml cover every module of the tool (lint-imports checks them)."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import cuzktui

ROOT = Path(__file__).resolve().parent.parent


def _contract(name_start: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"].startswith(name_start)]
    return contract


def test_every_top_level_module_is_a_shared_fact_or_forbidden_to_the_facts() -> None:
    # The facts contract lists the rest of the tool by name: a module missing from both lists
    # would be one the engine could reach through the facts without lint-imports noticing.
    contract = _contract("the shared daemon facts")
    named = set(contract["source_modules"]) | set(contract["forbidden_modules"])
    modules = {f"cuzktui.{info.name}" for info in pkgutil.iter_modules(cuzktui.__path__)}
    shared = {"cuzktui.proto", "cuzktui.proofinputs"}  # allowed to the engine (its contract's ignore list)
    assert modules - named - shared == set()
    assert named - modules == set(), "a contract names a module that no longer exists"
