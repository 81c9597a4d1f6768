"""Syrupy's check for unused snapshots, kept when the suite runs on pytest-xdist workers.

Run in one process, syrupy fails the run on a snapshot that no test asserts any more (a test renamed
or deleted, its SVG left behind). Under xdist it checks nothing (syrupy/session.py: each worker sees
only its share of the tests, the controller none). So each worker sends what its syrupy found unused
from where it stands, and what it used; the controller fails the run on what some worker found
unused, no worker used and no skipped test owns. ``-n 0 --snapshot-update`` deletes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from syrupy.data import SnapshotUnknownCollection

_KEY = "cuzk_syrupy"

Found = tuple[str, str]  # (location, snapshot name); the name "" for a whole file found unused


def _found(collections: Any) -> list[Found]:
    found: list[Found] = []
    for collection in collections:
        if isinstance(collection, SnapshotUnknownCollection):
            found.append((collection.location, ""))
        else:
            found.extend((collection.location, snapshot.name) for snapshot in collection)
    return found


def _is_snapshot_of(location: str, name: str, nodeid: str) -> bool:
    """Whether snapshot ``name`` stored at ``location`` (``__snapshots__/<test module>/…``) is the test's."""
    path, _, test = nodeid.rpartition("::")
    name = name or Path(location).stem  # a whole file: one snapshot per file (the SVGs), named as the file
    return Path(location).parent.name == Path(path).stem and (name == test or name.startswith(f"{test}."))


class _Merged:
    """On the controller: what the workers' syrupy saw, and the tests skipped."""

    def __init__(self) -> None:
        self.unused: set[Found] = set()
        self.used: set[Found] = set()
        self.skipped: set[str] = set()  # node ids
        self.left_over: list[Found] = []

    def find_left_over(self) -> list[Found]:
        left = {
            (location, name)
            for location, name in self.unused - self.used
            if not any(_is_snapshot_of(location, name, nodeid) for nodeid in self.skipped)
        }
        # A file one worker found unused whole: left over unless another worker used it; once only.
        used_files = {location for location, _ in self.used}
        named_files = {location for location, name in left if name}
        return sorted(f for f in left if f[1] or f[0] not in used_files | named_files)


_merged = _Merged()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """A worker finished: merge what its syrupy saw."""
    seen = getattr(node, "workeroutput", {}).get(_KEY)
    if seen is not None:
        _merged.unused.update((location, name) for location, name in seen["unused"])
        _merged.used.update((location, name) for location, name in seen["used"])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _merged.skipped.add(report.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        # A worker, after syrupy's own finish (tryfirst) built its report: hand it to the controller.
        report = getattr(getattr(session.config, "_syrupy", None), "report", None)
        if report is not None:
            workeroutput[_KEY] = {"unused": _found(report.unused), "used": _found(report.used)}
        return
    _merged.left_over = _merged.find_left_over()
    if _merged.left_over and not session.config.option.update_snapshots:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _merged.left_over:
        return
    terminalreporter.write_sep("-", "snapshots no test used (syrupy's check, across the xdist workers)")
    for location, name in _merged.left_over:
        terminalreporter.write_line(f"{name or Path(location).stem}  ({location})")
    terminalreporter.write_line("delete them, or run: python -m pytest -n 0 --snapshot-update")
