"""A stranger on a dead server's port: a WebSocket server that accepts every handshake,
answers every request as if it were sessiond, and tells the test everything it was sent.

Run as another user (`as_another_user()`) it is the squatter of issue 34's red team: after
the shared server died uncleanly, another local user bound its port. Run as the test's own
user it is something that listens where a discovery file points but holds no token.

    python -m tests.support.stranger PORT

prints `ready` once listening, then one JSON line per handshake (`{"headers": …}`) and per
message (`{"message": …}`) it received, on stdout.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import struct
import sys
from typing import Any

ANSWERS: dict[str, Any] = {
    "initialize": {"protocolVersion": 1, "serverInfo": {"name": "sessiond", "version": "0"}},
    "thread/list": {"threads": [], "nextCursor": None},
    "thread/resume": {"session": {"sessionId": "00000000-0000-4000-8000-000000000000"}},
    "thread/record": {"recorded": 1},
}


def as_another_user() -> list[str] | None:
    """A command prefix that runs a program as `nobody` (None: this test cannot, as it is
    not root or has no setpriv)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def say(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


async def main(port: int) -> None:
    # The standard library only: run as `nobody`, this process cannot read packages
    # installed for root (in ~/.local or a venv under /root).
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            lines = head.split("\r\n")[1:]
            headers = dict(line.split(": ", 1) for line in lines if ": " in line)
            say({"headers": headers})
            key = next(v for k, v in headers.items() if k.lower() == "sec-websocket-key")
            accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
                          ).encode())  # fmt: skip
            while (frame := await _read_message(reader)) is not None:
                say({"message": frame})
                try:
                    message = json.loads(frame)
                except ValueError:
                    continue
                if isinstance(message, dict) and "id" in message:
                    result = ANSWERS.get(message.get("method", ""), {})
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                    writer.write(_frame(0x1, json.dumps(reply).encode()))
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, StopIteration):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", port)
    async with server:
        say({"ready": os.getpid()})
        await asyncio.Future()


GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC11B85"  # RFC 6455's


async def _read_message(reader: asyncio.StreamReader) -> str | None:
    """One whole text or binary message from a client (masked frames, RFC 6455); None at
    a close frame."""
    parts: list[bytes] = []
    while True:
        first, second = await reader.readexactly(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", await reader.readexactly(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", await reader.readexactly(8))[0]
        mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(length)))
        opcode = first & 0x0F
        if opcode == 0x8:
            return None
        if opcode in (0x9, 0xA):  # ping, pong: not a message
            continue
        parts.append(data)
        if first & 0x80:
            return b"".join(parts).decode(errors="replace")


def _frame(opcode: int, data: bytes) -> bytes:
    """A server's frame: final, unmasked."""
    size = len(data)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    return head + data


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
