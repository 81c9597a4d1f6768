"""What any controller, live or replay, answers from this machine and its files, not from a daemon:
the memcheck report and the recorded sessions. The UI asks the controller; the work is here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from . import session
from .comparison import SessionSummary, summarize
from .planner import MemcheckReport, gather_report
from .session import SessionInfo


class _Configured(Protocol):
    def config_values(self) -> dict[str, Any]: ...


class LocalQueries:
    """Mixed into the controllers: the Controller protocol's machine and session-file methods."""

    def memcheck_report(self: _Configured) -> MemcheckReport:
        # The listen address decides the "exposed" warning: the running config's, when there is one.
        listen = self.config_values().get("daemon.listen")
        return gather_report(listen_addresses=[listen] if isinstance(listen, str) else [])

    def list_sessions(self, root: Path | None = None) -> list[SessionInfo]:
        return session.list_sessions(root)

    def summarize_session(self, info: SessionInfo) -> SessionSummary:
        return summarize(info)
