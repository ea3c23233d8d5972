"""The API's socket sends each answer at once: a connection accepted from it has Nagle's algorithm off.

With it on, an answer whose headers and body are written apart waits for the client's delayed ACK (~40 ms
on Linux), and one client could not make more than ~20 requests a second (seen in
benchmarks/service_scale.py before the fix).
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from dlsched.service.options import ServeOptions
from dlsched.service.server import _bind


def test_connections_the_api_accepts_have_nagle_off(tmp_path: Path) -> None:
    listener = _bind(ServeOptions(state=tmp_path, host="127.0.0.1", port=0))
    seen: list[int] = []

    async def main() -> None:
        def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(answer, sock=listener)
        async with server:
            _r, w = await asyncio.open_connection(*listener.getsockname())
            await asyncio.sleep(0.2)
            w.close()

    asyncio.run(main())
    assert seen and seen[0] != 0
