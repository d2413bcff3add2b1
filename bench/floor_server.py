"""The floor for bench/startup and bench/memory: the smallest JSON-RPC server on sessiond's
stack (the interpreter, asyncio, orjson) that answers a request.

It reads Content-Length or newline-framed requests from stdin and answers each with an
empty result; sessiond cannot start faster than this, so bench/startup reports sessiond's
startup as a ratio to it. (Until issue 13 the floor was a pygls server, whose imports were
~80% `lsprotocol.types`; sessiond no longer uses pygls.)
"""

from __future__ import annotations

import asyncio
import sys

import orjson


async def serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    while line := await reader.readline():
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
            await reader.readline()  # the blank line after the header
            body = await reader.readexactly(length)
            framed = True
        elif line.strip():
            body, framed = line, False
        else:
            continue
        request = orjson.loads(body)
        answer = orjson.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": {}})
        out.write(
            b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer) if framed else answer + b"\n"
        )
        out.flush()


if __name__ == "__main__":
    asyncio.run(serve())
