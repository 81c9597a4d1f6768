"""What any controller, live or replay, answers from this machine and its files, not from a daemon:
the memcheck report and the recorded sessions. The UI asks the controller; the work is here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from . import session
from .comparison import SessionSummary, summarize
from .controller import Identity
from .model import SessionModel
from .planner import MemcheckReport, memcheck_for
from .session import SessionInfo
from .system import ProbeProgress, ProbeResult, memprobe


class _Configured(Protocol):
    model: SessionModel

    def config_values(self) -> dict[str, Any]: ...

    @property
    def identity(self) -> Identity: ...


class LocalQueries:
    """Mixed into the controllers: the Controller protocol's machine and session-file methods."""

    def memcheck_report(self: _Configured) -> MemcheckReport:
        # The running config decides the margin, the budget judged and the "exposed" warning; an
        # engine is described as the box it emulates (its RAM, the cgroup the tool made for it).
        daemon = self.model.daemon
        return memcheck_for(
            self.config_values(),
            engine=self.identity.mode == "engine",
            memory_limit_bytes=daemon.memory_limit_bytes,
            cgroup_path=daemon.cgroup_path,
        )

    def memprobe(self, on_progress: ProbeProgress) -> ProbeResult:
        # This host, whatever the daemon: an engine's emulated box has no memory to probe.
        return memprobe(on_progress=on_progress)

    def list_sessions(self, root: Path | None = None) -> list[SessionInfo]:
        return session.list_sessions(root)

    def summarize_session(self, info: SessionInfo) -> SessionSummary:
        return summarize(info)
