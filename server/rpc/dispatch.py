"""One JSON-RPC connection: envelope checks, handshake state, dispatch, framed output.

What sessiond promises of JSON-RPC is all here: -32700/-32600 answers instead of silently
dropped messages, -32002 before `initialize`, a typed `data.kind` on every error, bounded
requests in flight, cancellation, orjson output, and either framing. It was built on
pygls's `JsonRPCProtocol`, but by the end that lent only a dict of handlers: requests were
dispatched here already (pygls's per-request path cost as much CPU as appending a record),
and importing pygls cost ~400 ms of every spawn (`lsprotocol.types`, the whole LSP as
attrs classes) for it. docs/architecture.md has the measurements.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
from collections.abc import Callable
from typing import Any

import orjson

from protocol import json_text
from protocol.errors import ErrorKind, ProtocolError, invalid_params, storage_error
from server.rpc.framing import (
    DEFAULT_MAX_FRAME,
    BadHeader,
    Event,
    Frame,
    FrameTooLarge,
    Framing,
    NotAMessage,
    encode,
)
from server.rpc.refusals import RateLimitedLog

logger = logging.getLogger("sessiond.rpc")
refusals = RateLimitedLog(logger)

_connection_ids = itertools.count(1)
ALWAYS_ALLOWED = frozenset({"initialize", "exit", "$/cancelRequest"})
NOTIFICATIONS = frozenset({"initialized", "workspace/didChangeWorkspaceFolders"})
"""The notifications a client may send; every other registered method is a request."""
MAX_IN_FLIGHT = 64


def error_from_exception(exc: BaseException) -> dict[str, Any]:
    """The JSON-RPC error object for any exception a handler raised. A store maps its own
    failures (`restore.stores.api.storage_failure`: a thread file's, SQLite's, a
    sqlstate); an OSError no layer below named is typed here all the same."""
    if isinstance(exc, ProtocolError):
        return exc.to_error_object()
    from pydantic import ValidationError  # lazy: keep pydantic off the startup path

    if isinstance(exc, ValidationError):
        return invalid_params(exc.errors()).to_error_object()
    if isinstance(exc, OSError):  # a filesystem failure no layer below named: still typed
        return storage_error(exc).to_error_object()
    logger.exception("internal error", exc_info=exc)
    return ProtocolError(
        ErrorKind.INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"
    ).to_error_object()


Handler = Callable[[dict[str, Any]], Any]  # a result, or an awaitable of one


class SessiondProtocol:
    """A connection's protocol state. `send_bytes` writes one framed message to the peer.

    `framing` None means the transport frames messages itself (a WebSocket text frame).
    `methods` holds the handlers, requests and notifications alike, by method name.
    """

    def __init__(self) -> None:
        self.methods: dict[str, Handler] = {}
        self.in_flight: dict[str | int, asyncio.Future[Any]] = {}
        self.framing: Framing | None = Framing.HEADERS
        self.max_in_flight = MAX_IN_FLIGHT
        self.send_bytes: Callable[[bytes], None] = lambda data: None
        self.initialized = False
        self.shutdown_requested = False
        self.exit_requested = False
        self.workspace_folders: list[dict[str, Any]] = []
        self.connection_id = next(_connection_ids)
        self.client_info = None
        self.max_frame = DEFAULT_MAX_FRAME  # no answer is larger (the server sets --max-frame)

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self._client_info

    @client_info.setter
    def client_info(self, value: dict[str, Any] | None) -> None:
        self._client_info = value
        name = (value or {}).get("name") or "client"
        # How this connection is named to others, e.g. in ThreadBusy's `holder`; every
        # request passes it, so it is built once.
        self.owner = f"{name} (connection {self.connection_id}, pid {os.getpid()})"

    # --- input -------------------------------------------------------------------------

    def handle_event(self, event: Event, framing: Framing | None) -> None:
        """Handle one decoded frame or framing error from the transport."""
        if framing is not None:
            self.framing = framing
        if isinstance(event, FrameTooLarge):
            self.send_error(
                None,
                ProtocolError(
                    ErrorKind.PAYLOAD_TOO_LARGE,
                    f"message of {event.size} bytes exceeds the {event.limit}-byte limit",
                    limit=event.limit,
                ),
            )
        elif isinstance(event, BadHeader):
            self.send_error(None, ProtocolError(ErrorKind.PARSE_ERROR, "bad message header"))
        elif isinstance(event, NotAMessage):
            # A person at a terminal, most likely: answered a line they can read (unless a
            # message after it decided already), and the next message decides the framing.
            if framing is None:
                self.framing = Framing.LINES
            shown = event.line.decode(errors="replace")[:80]
            self.send_error(
                None,
                ProtocolError(
                    ErrorKind.PARSE_ERROR,
                    f"not a JSON-RPC message: {shown!r}: send one JSON object a line (or "
                    'Content-Length framed), the first {"jsonrpc":"2.0","id":1,'
                    '"method":"initialize","params":{}}',
                ),
            )
        elif isinstance(event, Frame):
            self.handle_body(event.body)

    def handle_body(self, body: bytes) -> None:
        try:  # a lone surrogate escape (a JS client's cut string) is U+FFFD, not an error
            message, _ = json_text.loads(body)
        except orjson.JSONDecodeError as exc:
            self.send_error(None, ProtocolError(ErrorKind.PARSE_ERROR, f"invalid JSON: {exc}"))
            return
        if not isinstance(message, dict):
            self.send_error(
                None,
                ProtocolError(
                    ErrorKind.INVALID_REQUEST, "expected a JSON object (batches are not supported)"
                ),
            )
            return
        self.handle_envelope(message)

    def handle_envelope(self, message: dict[str, Any]) -> None:
        msg_id: Any = message.get("id")
        has_id = "id" in message and msg_id is not None
        if has_id and (isinstance(msg_id, bool) or not isinstance(msg_id, str | int)):
            self.send_error(
                None, ProtocolError(ErrorKind.INVALID_REQUEST, "id must be a string or integer")
            )
            return
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if "method" not in message and ("result" in message or "error" in message):
                return  # a response: sessiond sends no requests, so there is nothing to match
            self.send_error(
                msg_id if has_id else None,
                ProtocolError(
                    ErrorKind.INVALID_REQUEST, 'expected {"jsonrpc": "2.0", "method": ...}'
                ),
            )
            return
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            if has_id:
                self.send_error(
                    msg_id, ProtocolError(ErrorKind.INVALID_PARAMS, "params must be an object")
                )
            return
        params = params or {}
        if not has_id:
            self._notification(method, params)
        elif self.shutdown_requested:
            self.send_error(
                msg_id, ProtocolError(ErrorKind.INVALID_REQUEST, "server is shutting down")
            )
        elif not self.initialized and method not in ALWAYS_ALLOWED:
            self.send_error(
                msg_id, ProtocolError(ErrorKind.SERVER_NOT_INITIALIZED, "send initialize first")
            )
        elif len(self.in_flight) >= self.max_in_flight:
            # Refuse rather than queue without limit: the client retries after an answer.
            self.send_error(
                msg_id,
                ProtocolError(
                    ErrorKind.OVERLOADED,
                    f"more than {self.max_in_flight} requests in flight on this connection",
                    retryable=True,
                    limit=self.max_in_flight,
                ),
            )
        else:
            self._dispatch(msg_id, method, params)

    def _dispatch(self, msg_id: str | int, method: str, params: dict[str, Any]) -> None:
        """Run a request's handler; answer when its result (or awaitable) is ready."""
        handler = self.methods.get(method)
        if handler is None:
            self.send_error(
                msg_id, ProtocolError(ErrorKind.METHOD_NOT_FOUND, f"unknown method {method!r}")
            )
            return
        try:
            outcome = handler(params)
        except Exception as exc:
            self._write({"jsonrpc": "2.0", "id": msg_id, "error": self._error_of(exc)})
            return
        if asyncio.iscoroutine(outcome) or asyncio.isfuture(outcome):
            future = asyncio.ensure_future(outcome)
            self.in_flight[msg_id] = future
            future.add_done_callback(functools.partial(self._send_handler_result, msg_id=msg_id))
        else:
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": outcome})

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "$/cancelRequest":
            target = params.get("id")
            if isinstance(target, bool) or not isinstance(target, str | int):
                return  # names no request: cancels nothing (a notification gets no answer)
            future = self.in_flight.pop(target, None)
            if future is not None:
                future.cancel()
            return
        if method == "exit":
            self.exit_requested = True
            return
        if not self.initialized and method != "initialized":
            return  # notifications before initialize are dropped, as LSP says
        handler = self.methods.get(method)
        if handler is None:
            return  # an unknown notification is ignored: there is nobody to tell
        if method not in NOTIFICATIONS:
            # Without an id its answer (and any error) would have nowhere to go: not run.
            refusals.warning("ignored %r sent as a notification (it needs an id)", method)
            return
        try:
            handler(params)
        except Exception:  # a notification has no answer to carry the error
            logger.exception("notification %s failed", method)

    # --- output ------------------------------------------------------------------------

    def _send_handler_result(self, future: asyncio.Future[Any], *, msg_id: Any) -> None:
        self.in_flight.pop(msg_id, None)
        if future.cancelled():
            self.send_error(msg_id, ProtocolError(ErrorKind.REQUEST_CANCELLED, "request cancelled"))
            return
        exc = future.exception()
        if exc is not None:
            self._write({"jsonrpc": "2.0", "id": msg_id, "error": self._error_of(exc)})
        else:
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": future.result()})

    def _error_of(self, exc: BaseException) -> dict[str, Any]:
        return error_from_exception(exc)

    def send_error(self, msg_id: Any, error: ProtocolError) -> None:
        self._write({"jsonrpc": "2.0", "id": msg_id, "error": error.to_error_object()})

    def notify(self, method: str, params: Any | None = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def _write(self, message: dict[str, Any]) -> None:
        try:
            body = orjson.dumps(message)
        except TypeError as exc:
            logger.exception("unserializable message")
            body = orjson.dumps(
                {"jsonrpc": "2.0", "id": message.get("id"), "error": error_from_exception(exc)}
            )
        if len(body) > self.max_frame:
            # No message leaves larger than --max-frame: the client could not read it, and
            # the copies framing and buffering make would multiply it in memory.
            size, body = len(body), b""
            if "method" in message:
                refusals.warning("dropped a %d-byte %s notification", size, message["method"])
                return
            too_large = ProtocolError(
                ErrorKind.PAYLOAD_TOO_LARGE,
                f"the answer ({size} bytes) exceeds the {self.max_frame}-byte frame limit; "
                "ask for less (a smaller limit)",
                limit=self.max_frame,
                size=size,
            )
            body = orjson.dumps(
                {"jsonrpc": "2.0", "id": message.get("id"), "error": too_large.to_error_object()}
            )
        self.send_bytes(body if self.framing is None else encode(self.framing, body))
