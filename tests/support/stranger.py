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
import json
import os
import shutil
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
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.http11 import Request

    def heard(connection: ServerConnection, request: Request) -> None:
        say({"headers": {name: value for name, value in request.headers.raw_items()}})

    async def answer(ws: ServerConnection) -> None:
        async for frame in ws:
            say({"message": frame if isinstance(frame, str) else frame.decode(errors="replace")})
            try:
                message = json.loads(frame)
            except ValueError:
                continue
            if isinstance(message, dict) and "id" in message:
                result = ANSWERS.get(message.get("method", ""), {})
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))

    async with serve(answer, "127.0.0.1", port, process_request=heard, compression=None):
        say({"ready": os.getpid()})
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
