"""The floor for bench/startup: the smallest pygls JSON-RPC server that answers a request.

It imports what any server built on pygls must (`pygls.server`, which pulls in
`lsprotocol.types`), registers one method and serves stdio. sessiond cannot start faster
than this on the same stack; bench/startup reports sessiond's startup as a ratio to it.
"""

from __future__ import annotations

from typing import Any

from pygls.protocol import JsonRPCProtocol, default_converter
from pygls.server import JsonRPCServer


def main() -> None:
    server = JsonRPCServer(JsonRPCProtocol, default_converter)

    @server.feature("initialize")
    def initialize(params: Any) -> dict[str, Any]:
        return {"capabilities": {}}

    server.start_io()


if __name__ == "__main__":
    main()
