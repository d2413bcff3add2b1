"""What `sessiond acp` accepts from the editor and from AGENT, checked in one place: one
JSON object per line, nested no deeper than sessiond can write it back, and ACP params of
the right shape (a `sessionId` that can be a session, an absolute `cwd` that exists).

Why here and not where each is used: a message the proxy cannot handle has to be refused
as it arrives, with an answer naming the field, instead of failing later where it is
written or forwarded — which used to leave a request unanswered and the editor waiting
(an unparsable first line made the proxy read everything after it as `Content-Length`
framing; an update 900 levels deep parsed, then could not be written or forwarded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from protocol.json_text import deepest_past
from server.rpc.framing import FrameDecoder, Framing

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor

MAX_DEPTH = 128
"""Nesting levels of one message (objects and arrays). orjson writes at most 254; the
thread file wraps an update in two more, and no ACP message comes near 128."""
PREVIEW = 120
"""Characters of a refused line quoted in the log."""
CUT = "[sessiond: nested too deep, cut]"


def line_decoder() -> FrameDecoder:
    """ACP is one JSON message per line, both ways, from the first byte: never guessed
    from what comes first (a banner or a bad first line is a line to refuse, not a
    `Content-Length` header)."""
    decoder = FrameDecoder()
    decoder.framing = Framing.LINES
    return decoder


SHOWN_REACH = 16 * 1024
"""Characters past the preview redacted with it: a secret that starts in the preview is
recognized whole (a PEM private key block is ~3 KB), and a huge line costs no more."""


def preview(body: bytes, redactor: Redactor | None) -> str:
    """What the log says of a line that is not a message: its start, redacted as a record
    would be (the log is kept by the editor, and may hold what AGENT printed: issue 34);
    with redaction off, only its length."""
    if redactor is None:
        return f"({len(body)} bytes, not shown: redaction is off)"
    text = body[: PREVIEW + SHOWN_REACH].decode("utf-8", "replace")
    shown = redactor.text(text)
    cut = len(shown) > PREVIEW or len(body) > PREVIEW + SHOWN_REACH
    return repr(shown[:PREVIEW] + ("…" if cut else ""))


def depth_over(body: bytes, value: Any, limit: int = MAX_DEPTH) -> int | None:
    """How deep `value` (parsed from `body`) nests, when deeper than `limit`; else None.
    A message with fewer brackets than `limit` cannot be that deep: most are not walked."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return None
    return deepest_past(value, limit)


def cut_deep(value: Any, limit: int = MAX_DEPTH) -> Any:
    """`value` with every object or array below `limit` levels replaced by `CUT`: what
    AGENT sent too deep is still recorded and forwarded, its text intact, the excess
    marked (an editor's request that deep is refused instead: it can send it again)."""
    if isinstance(value, dict):
        if limit <= 0:
            return CUT
        return {key: cut_deep(child, limit - 1) for key, child in value.items()}
    if isinstance(value, list):
        if limit <= 0:
            return CUT
        return [cut_deep(child, limit - 1) for child in value]
    return value


def too_deep(depth: int) -> ProtocolError:
    return ProtocolError(
        ErrorKind.PAYLOAD_TOO_LARGE,
        f"the message nests {depth} levels deep; sessiond records and forwards at most {MAX_DEPTH}",
        depth=depth,
        limit=MAX_DEPTH,
    )


def params_of(message: dict[str, Any]) -> dict[str, Any]:
    """A request's params: an object (ACP has no positional params), or none."""
    params = message.get("params", {})
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            f"{message.get('method')}: params must be an object, not {type(params).__name__}",
        )
    return params


def session_id_of(params: dict[str, Any]) -> str:
    """The `sessionId` an editor names, as sessiond spells it (a lower-case UUID: the
    thread id). Any other spelling of the same UUID is the same session."""
    value = params.get("sessionId")
    if value is None:
        raise ProtocolError(ErrorKind.INVALID_PARAMS, "sessionId is required", field="sessionId")
    if not isinstance(value, str):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            f"sessionId must be a string, not {type(value).__name__}",
            field="sessionId",
        )
    canonical = canonical_session_id(value)
    if canonical is None:
        shown = value if len(value) <= 64 else value[:64] + "…"
        raise ProtocolError(
            ErrorKind.INVALID_ID,
            f"sessionId {shown!r} is not a session id: session/new and session/list give them",
            field="sessionId",
        )
    return canonical


def canonical_session_id(value: Any) -> str | None:
    """`value` as a thread id (lower-case UUID), or None when it cannot be one."""
    from restore.ids import validate_thread_id

    if not isinstance(value, str) or len(value) != 36:
        return None
    try:
        return validate_thread_id(value.lower(), "sessionId")
    except ProtocolError:
        return None


def cwd_of(params: dict[str, Any], *, required: bool) -> str | None:
    """`cwd`: an absolute path to an existing directory (ACP: MUST be absolute), checked
    by restore/access.py before any use; None when absent and not `required`."""
    from restore.access import existing_directory

    cwd = params.get("cwd")
    if cwd is None and not required:
        return None
    if not isinstance(cwd, str):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            "cwd is required: the session's absolute working directory"
            if cwd is None
            else f"cwd must be a string, not {type(cwd).__name__}",
            field="cwd",
        )
    return existing_directory(cwd)


def mcp_servers_of(params: dict[str, Any]) -> list[Any] | None:
    servers = params.get("mcpServers")
    if servers is not None and not isinstance(servers, list):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, "mcpServers must be an array", field="mcpServers"
        )
    return servers


def cursor_of(params: dict[str, Any]) -> str | None:
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise ProtocolError(ErrorKind.INVALID_PARAMS, "cursor must be a string", field="cursor")
    return cursor


REPLAY_START = "start"
REPLAY_MESSAGE = "_sessiond/message"
"""`replayFrom` cursors `session/resume` takes (the ACP v2 draft folds `session/load` into
it): `{type: "start"}`, the whole conversation (the draft's one cursor), and sessiond's
`{type: "_sessiond/message", messageId}`, from that message on, inclusive (the draft keeps
`_`-prefixed variants for extensions and names a message cursor as what comes next)."""


def replay_from_of(params: dict[str, Any]) -> str | None:
    """`replayFrom`: None (absent or null: no replay, as a v1 resume), "" (from the start)
    or the messageId the replay starts at."""
    cursor = params.get("replayFrom")
    if cursor is None:
        return None
    kind = cursor.get("type") if isinstance(cursor, dict) else None
    if kind == REPLAY_START:
        return ""
    message_id = cursor.get("messageId") if isinstance(cursor, dict) else None
    if kind == REPLAY_MESSAGE and isinstance(message_id, str) and message_id:
        return message_id
    raise ProtocolError(
        ErrorKind.INVALID_PARAMS,
        f'replayFrom must be {{"type": "{REPLAY_START}"}} or {{"type": "{REPLAY_MESSAGE}", '
        f'"messageId": "<a messageId the replay named>"}}, or absent for no replay; not '
        f"{str(cursor)[:80]}",
        field="replayFrom",
    )
