"""What the listeners that asyncio serves itself (the peer frame listener, the Kafka listener) share: a listening
socket, the loop that accepts on it, a connection's streams (after its TLS handshake), and stopping: the accept
loop first, then the socket, then every connection's task."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Collection
from typing import Any

import structlog

log = structlog.get_logger("quorum.transport")


async def listening_socket(host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on ``host:port`` (the first address it resolves to; port 0: any free one).
    Raises OSError."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def accept_forever(sock: socket.socket, admit: Callable[[socket.socket, Any], None], failed_event: str) -> None:
    """Hand every connection accepted on ``sock`` to ``admit`` (with the peer's address). A failed accept is logged
    as ``failed_event`` and retried a moment later, never the end of the listener."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            conn, address = await loop.sock_accept(sock)
        except OSError as e:  # out of file descriptors, typically: let connections end before the next accept
            log.warning(failed_event, error=str(e))
            await asyncio.sleep(0.1)
            continue
        except Exception as e:  # a bug under the accept: keep accepting rather than leave the port deaf
            log.exception(failed_event, error=f"{type(e).__name__}: {e}")
            await asyncio.sleep(0.1)
            continue
        admit(conn, address)


async def accepted_streams(
    conn: socket.socket, context: ssl.SSLContext | None, handshake_timeout_s: float, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``conn``'s reader (``limit``: its buffer's bound) and writer, after the TLS handshake when ``context`` is
    given. The handshake runs on the loop without blocking it and is abandoned after ``handshake_timeout_s``: a
    caller that connects and sends nothing holds its place no longer. Raises OSError or EOFError when it fails (no
    certificate, another CA's, plaintext, too slow, gone); ``conn`` is then the caller's to close."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_accepted_socket(
        lambda: protocol,
        conn,
        ssl=context,
        ssl_handshake_timeout=handshake_timeout_s if context is not None else None,
    )
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def stop_listening(
    accepting: asyncio.Task[None] | None, sock: socket.socket | None, connections: Collection[asyncio.Task[None]]
) -> None:
    if accepting is not None:
        accepting.cancel()
        await asyncio.gather(accepting, return_exceptions=True)
    if sock is not None:
        sock.close()
    tasks = list(connections)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
