"""The one reading of a daemon address (cuzktui/daemon_address.py)."""

from __future__ import annotations

import pytest

from cuzktui.daemon_address import Address, parse_address


def test_a_unix_socket_keeps_its_path_absolute_or_relative() -> None:
    assert parse_address("unix:///run/curio/cuzk.sock") == Address(
        "unix:///run/curio/cuzk.sock", socket_path="/run/curio/cuzk.sock"
    )
    relative = parse_address("unix://run/cuzk.sock")
    assert relative is not None and relative.is_unix and relative.socket_path == "run/cuzk.sock"
    empty = parse_address("unix://")
    assert empty is not None and empty.socket_path == ""
    assert not relative.is_socket_literal and not relative.every_interface


@pytest.mark.parametrize(
    ("text", "host", "port", "literal", "everywhere"),
    [
        ("127.0.0.1:9820", "127.0.0.1", 9820, True, False),
        ("[::1]:9820", "::1", 9820, True, False),
        ("0.0.0.0:9820", "0.0.0.0", 9820, True, True),
        ("[::]:9820", "::", 9820, True, True),
        # Host names parse (status_listen takes them) but are no SocketAddr literal (listen refuses them).
        ("localhost:9821", "localhost", 9821, False, False),
        ("box.example:0", "box.example", 0, False, False),
        # Rust's grammar: IPv6 only inside brackets, IPv4 never inside them.
        ("::1:9820", "::1", 9820, False, False),
        ("[127.0.0.1]:9820", "127.0.0.1", 9820, False, False),
        (":9820", "", 9820, False, False),
    ],
)
def test_host_and_port(text: str, host: str, port: int, literal: bool, everywhere: bool) -> None:
    address = parse_address(text)
    assert address is not None and not address.is_unix
    assert (address.host, address.port) == (host, port)
    assert address.is_socket_literal is literal
    assert address.every_interface is everywhere


@pytest.mark.parametrize("text", ["127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "[::1]:98x0", "h:٣"])
def test_a_missing_or_bad_port_is_no_address(text: str) -> None:
    assert parse_address(text) is None
