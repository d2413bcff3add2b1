"""The handshake: `initialize` (answered from memory), the folders a client opens, and
`shutdown` (its sessions end, with their SessionEnd hooks).

Light to import: a stdio spawn answers its first `initialize` with `accept` and `answer`
before the server's modules are loaded (server/transport/early.py)."""

from __future__ import annotations

import re

from protocol import PROTOCOL_VERSION
from protocol.errors import ErrorKind, ProtocolError
from protocol.names import CLIENT_NAME_MAX, PRINTABLE
from restore.engine import SUBSYSTEM_NAMES
from server import __version__
from server.rpc.framing import Framing

TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from server.config import ServerConfig
    from server.handlers.context import Context

SERVER_NAME = "sessiond"
SERVER_VERSION = __version__
LIFECYCLE_SOURCES = ("startup", "resume", "clear", "compact", "reset")


def _folders(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ProtocolError(ErrorKind.INVALID_PARAMS, "workspaceFolders must be a list")
    folders = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "each workspace folder needs a path")
        folders.append(
            {
                "path": entry["path"],
                "name": entry.get("name"),
                "trusted": entry.get("trusted") is True,
            }
        )
    return folders


_PRINTABLE = re.compile(PRINTABLE)


def _client_info(raw: Any) -> dict[str, Any] | None:
    """`clientInfo` as `ClientInfo` takes it (checked here: the handshake runs without
    pydantic). Its name is shown to other clients (ThreadBusy's holder) and stored
    (PostgreSQL's holders table): printable and bounded."""
    if not isinstance(raw, dict):
        return None
    name = raw.get("name", "")
    if not isinstance(name, str) or len(name) > CLIENT_NAME_MAX or not _PRINTABLE.match(name):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            f"clientInfo.name must be a string of at most {CLIENT_NAME_MAX} characters "
            "without control characters",
        )
    return raw


def accept(params: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """An `initialize`'s workspace folders and client info, checked (ProtocolError)."""
    return _folders(params.get("workspaceFolders") or []), _client_info(params.get("clientInfo"))


def initialize(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """Answered from memory (no warmup: docs/architecture.md).

    Plain, not a coroutine: it takes effect before the next message is read, so a client
    (a script piping requests) may send its first requests right behind it."""
    if ctx.connection.initialized:
        raise ProtocolError(ErrorKind.INVALID_REQUEST, "initialize was already called")
    ctx.connection.workspace_folders, ctx.connection.client_info = accept(params)
    ctx.connection.initialized = True
    ctx.server.workspace_changed()
    return answer(ctx.server.config)


def answer(config: ServerConfig) -> dict[str, Any]:
    """`initialize`'s result: what this server is and does."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "capabilities": {
            "subsystems": list(SUBSYSTEM_NAMES),
            "lifecycleSources": list(LIFECYCLE_SOURCES),
            "framing": [str(framing) for framing in Framing],
            "durability": config.durability,
            "maxFrameBytes": config.max_frame,
            "maxItemsPerRecord": 1000,
        },
    }


def change_folders(ctx: Context, params: dict[str, Any]) -> None:
    removed = {folder["path"] for folder in _folders(params.get("removed") or [])}
    kept = [f for f in ctx.connection.workspace_folders if f["path"] not in removed]
    ctx.connection.workspace_folders = kept + _folders(params.get("added") or [])
    ctx.server.workspace_changed()


async def shutdown(ctx: Context, params: Any) -> None:
    ctx.connection.shutdown_requested = True
    await ctx.server.hooks.connection_shutdown(
        ctx.connection
    )  # SessionEnd(shutdown), after the answer
    return None
