"""Block the network inside a test process (DNS and outgoing connections; loopback and Unix sockets stay open)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "", None}


class NetworkAccessError(RuntimeError):
    """A test tried to reach the network."""


def _host(address: object) -> object:
    return address[0] if isinstance(address, tuple) and address else address


@contextmanager
def network_blocked() -> Iterator[None]:
    """Make every non-local connection and DNS look-up raise :class:`NetworkAccessError`."""
    saved = (socket.socket.connect, socket.socket.connect_ex, socket.create_connection, socket.getaddrinfo)
    real_connect, real_connect_ex, real_create, real_getaddrinfo = saved

    def connect(sock, address):
        if sock.family == socket.AF_UNIX or _host(address) in LOCAL_HOSTS:
            return real_connect(sock, address)
        raise NetworkAccessError(f"network access attempted: {address}")

    def connect_ex(sock, address):
        if sock.family == socket.AF_UNIX or _host(address) in LOCAL_HOSTS:
            return real_connect_ex(sock, address)
        raise NetworkAccessError(f"network access attempted: {address}")

    def create_connection(address, *args, **kwargs):
        if _host(address) in LOCAL_HOSTS:
            return real_create(address, *args, **kwargs)
        raise NetworkAccessError(f"network access attempted: {address}")

    def getaddrinfo(host, *args, **kwargs):
        if host in LOCAL_HOSTS:
            return real_getaddrinfo(host, *args, **kwargs)
        raise NetworkAccessError(f"DNS look-up attempted: {host}")

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.create_connection = create_connection  # type: ignore[assignment]
    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.create_connection, socket.getaddrinfo = saved
