"""The minimal raw-TCP HTTP status server of ``[daemon].status_listen`` (docs/daemon-interface.md §5)."""

from __future__ import annotations

import asyncio

from cuzktui import daemon_messages as msg
from cuzktui.daemon_address import parse_address

from . import tracing
from .pipeline import Engine
from .views import status_json

NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\n"
    b"404 Not Found\n"
)


def ok_response(body: str) -> bytes:
    data = body.encode()
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + data


def split_host_port(addr: str) -> tuple[str, int]:
    address = parse_address(addr)
    if address is None or address.port is None or not address.host:
        raise ValueError(f"invalid socket address: {addr}")
    return address.host, address.port


async def serve_status(engine: Engine, addr: str) -> asyncio.Server | None:
    """Starts the server; a bind failure is only logged (the daemon keeps running)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.read(4096)
            first_line = request.split(b"\r\n", 1)[0]
            writer.write(ok_response(status_json(engine)) if first_line.startswith(b"GET /status") else NOT_FOUND)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    try:
        host, port = split_host_port(addr)
        server = await asyncio.start_server(handle, host, port)
    except (OSError, ValueError) as err:
        engine.log.error(tracing.DAEMON, msg.STATUS_HTTP_BIND_FAILED, ("addr", addr), ("error", str(err)))
        return None
    engine.log.info(tracing.DAEMON, msg.STATUS_HTTP_LISTENING, ("addr", addr))
    return server
