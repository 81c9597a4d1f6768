"""One reading of the daemon's addresses: ``[daemon].listen`` / ``-l`` and ``[daemon].status_listen``.

upstream cuzk-daemon/src/main.rs ``main``: a listen address starting with ``unix://`` is a unix
socket (the rest is its path, created with its parent directories); anything else goes through
Rust's ``SocketAddr`` parser, so only a literal IPv4 ``a.b.c.d:port`` or a bracketed IPv6
``[::1]:port`` is accepted (no host names). cuzk-core/src/status.rs binds ``status_listen`` with
tokio's ``TcpListener::bind``, which also resolves host names. The knob validation, memcheck's
exposure warning, the supervisor and the engine all read addresses here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final

UNIX_SCHEME: Final = "unix://"
# cuzk-core/src/config.rs DaemonConfig::default: where a daemon serves when nothing says otherwise,
# and where a production Curio looks for its prover (a stand-in must never sit there unasked).
DAEMON_DEFAULT_LISTEN: Final = "unix:///run/curio/cuzk.sock"
# The unspecified addresses: a daemon bound there answers on every interface.
_EVERY_INTERFACE: Final = frozenset({"0.0.0.0", "::"})


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed address: a unix socket (``socket_path`` set) or ``host:port`` (``port`` set)."""

    text: str
    socket_path: str | None = None  # the path after unix:// (may be empty or relative)
    host: str = ""  # without the brackets of an IPv6 literal
    port: int | None = None
    bracketed: bool = False

    @property
    def is_unix(self) -> bool:
        return self.socket_path is not None

    @property
    def is_socket_literal(self) -> bool:
        """Whether Rust's ``SocketAddr`` parser takes it: IPv6 inside brackets, IPv4 without."""
        if self.port is None:
            return False
        try:
            ip = ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return (ip.version == 6) == self.bracketed

    @property
    def every_interface(self) -> bool:
        """Bound on 0.0.0.0 or [::]: reachable from anywhere the port is (the daemon has no auth)."""
        return self.port is not None and self.host in _EVERY_INTERFACE


def parse_address(text: str) -> Address | None:
    """``unix://PATH`` or ``HOST:PORT`` (port 0–65535, ASCII digits); None for anything else."""
    if text.startswith(UNIX_SCHEME):
        return Address(text, socket_path=text.removeprefix(UNIX_SCHEME))
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        return None
    bracketed = host.startswith("[") and host.endswith("]")
    return Address(text, host=host[1:-1] if bracketed else host, port=int(port), bracketed=bracketed)
