"""What the listeners that asyncio serves itself (the peer frame listener, the Kafka listener) share: a listening
socket, and stopping: the accept loop first, then the socket, then every connection's task."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Collection


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
