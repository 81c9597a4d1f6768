"""The HTTP/2 ``:authority`` the tool's gRPC channel puts on the wire (issue 23 point 1).

The real daemon serves gRPC with tonic (cuzk-daemon main.rs: ``Server::builder()…serve_with_incoming``
on a unix socket, ``serve`` on TCP); its HTTP/2 layer (hyper's h2) reads ``:authority`` as a URI authority
and resets every stream whose value is not one. grpc-core sends a unix socket's path there,
percent-encoded, which is not: against the real daemon every call over a socket failed. Neither our
engine (a grpcio server) nor grpcio's server API shows the authority to the servicer, so these tests
serve with the ``h2`` library, which reads the HEADERS frame the client really sent, and answer as the
daemon does: a gRPC answer for a host authority, RST_STREAM(PROTOCOL_ERROR) for anything else.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio
import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest

from cuzktui.client import DaemonClient
from cuzktui.proto import proving_pb2 as pb
from cuzktui.proto import proving_pb2_grpc as pb_grpc

# host[:port] with the host an IP literal in brackets or a reg-name (RFC 3986 §3.2.2); a percent sign in a
# host is what the daemon's HTTP/2 server refuses in the path grpc-core would send.
_HOST_AUTHORITY = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=]+)(:[0-9]*)?")
UPTIME_S = 4242


@dataclass
class AuthorityCheckingDaemon:
    """A one-RPC HTTP/2 server (GetStatus) that keeps every request's ``:authority`` as it was sent."""

    authorities: list[str] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        authority: dict[int, str] = {}
        try:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived) and event.stream_id is not None:
                        headers = {str(k): str(v) for k, v in event.headers or ()}
                        authority[event.stream_id] = headers.get(":authority", "")
                        self.authorities.append(authority[event.stream_id])
                    elif isinstance(event, h2.events.DataReceived) and event.stream_id is not None:
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded) and event.stream_id is not None:
                        self._answer(conn, event.stream_id, authority.pop(event.stream_id, ""))
                writer.write(conn.data_to_send())
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    @staticmethod
    def _answer(conn: h2.connection.H2Connection, stream_id: int, authority: str) -> None:
        if not _HOST_AUTHORITY.fullmatch(authority):
            conn.reset_stream(stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
            return
        message = pb.GetStatusResponse(uptime_seconds=UPTIME_S).SerializeToString()
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
        conn.send_data(stream_id, b"\x00" + len(message).to_bytes(4, "big") + message)
        conn.send_headers(stream_id, [("grpc-status", "0")], end_stream=True)


@pytest.fixture
async def unix_daemon(tmp_path: Path) -> AsyncIterator[tuple[str, AuthorityCheckingDaemon]]:
    daemon = AuthorityCheckingDaemon()
    server = await asyncio.start_unix_server(daemon.serve, path=str(tmp_path / "cuzk.sock"))
    try:
        yield f"unix://{tmp_path / 'cuzk.sock'}", daemon
    finally:
        server.close()


async def test_over_a_unix_socket_the_tool_sends_a_host_the_daemon_accepts(
    unix_daemon: tuple[str, AuthorityCheckingDaemon],
) -> None:
    address, daemon = unix_daemon
    async with DaemonClient(address) as client:
        status = await client.get_status(timeout=10)
    assert status.uptime_seconds == UPTIME_S
    assert daemon.authorities == ["localhost"]


async def test_grpcs_own_authority_for_a_socket_is_refused_as_the_daemon_refuses_it(
    unix_daemon: tuple[str, AuthorityCheckingDaemon],
) -> None:
    """The server above is strict where the daemon is: a channel without the tool's authority fails on it
    (what issue 23 saw: "the daemon died during GetStatus"), so the test above can fail."""
    address, daemon = unix_daemon
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError):
            await pb_grpc.ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=10)
    (sent,) = daemon.authorities
    assert "%2F" in sent and sent.endswith("cuzk.sock")


async def test_over_tcp_the_authority_is_the_address() -> None:
    daemon = AuthorityCheckingDaemon()
    server = await asyncio.start_server(daemon.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with DaemonClient(f"127.0.0.1:{port}") as client:
            assert (await client.get_status(timeout=10)).uptime_seconds == UPTIME_S
    finally:
        server.close()
    assert daemon.authorities == [f"127.0.0.1:{port}"]


def test_every_channel_the_tool_opens_is_opened_by_open_channel() -> None:
    """One place sets the authority: no other module of the tool makes a gRPC channel of its own."""
    package = Path(__file__).parent.parent / "cuzktui"
    makers = ("insecure_channel(", "secure_channel(", "grpc.Channel(")
    found = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "proto" not in path.parts and any(maker in path.read_text() for maker in makers)
    }
    assert found == {"client.py"}
