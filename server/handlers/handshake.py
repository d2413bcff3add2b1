"""The handshake: `initialize` (answered from memory), the folders a client opens, and
`shutdown` (its sessions end, with their SessionEnd hooks)."""

from __future__ import annotations

import re
from typing import Any

from protocol import PROTOCOL_VERSION
from protocol.errors import ErrorKind, ProtocolError
from protocol.names import CLIENT_NAME_MAX, PRINTABLE
from restore.engine import SUBSYSTEM_NAMES
from server import __version__
from server.handlers.context import Context
from server.rpc.framing import Framing

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


def initialize(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """Answered from memory (no warmup: docs/architecture.md).

    Plain, not a coroutine: it takes effect before the next message is read, so a client
    (a script piping requests) may send its first requests right behind it."""
    if ctx.connection.initialized:
        raise ProtocolError(ErrorKind.INVALID_REQUEST, "initialize was already called")
    ctx.connection.workspace_folders = _folders(params.get("workspaceFolders") or [])
    ctx.connection.client_info = _client_info(params.get("clientInfo"))
    ctx.connection.initialized = True
    ctx.server.workspace_changed()
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "capabilities": {
            "subsystems": list(SUBSYSTEM_NAMES),
            "lifecycleSources": list(LIFECYCLE_SOURCES),
            "framing": [str(framing) for framing in Framing],
            "durability": ctx.server.config.durability,
            "maxFrameBytes": ctx.server.config.max_frame,
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
