"""Recording, as a side effect of forwarding: each update written (not yet synced) before it
is forwarded, batched per loop turn; the turn's end made durable before its answer goes
on (`group` durability); a failed record said to the editor at once."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from protocol.errors import ProtocolError, storage_error
from restore.sources import acp as source
from restore.sources.acp_chunks import HOLD_LIMIT
from server.acp.state import Live

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor
    from restore.service import ThreadService
    from server.index_flush import IndexFlush

logger = logging.getLogger("sessiond.acp")

PENDING_LIMIT = (1000, 4 * 1024 * 1024)
"""Items (count, bytes) a session keeps before its first prompt; beyond that its thread
is written at once (it is no longer an empty chat)."""


class Recording:
    """The proxy's part that records (`AcpProxy` is one: server/acp/proxy.py)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the proxy
        owner: str
        _service: ThreadService | None
        _batches: dict[str, tuple[Live, list[dict[str, Any]]]]
        _batch_scheduled: bool
        _index_flush: IndexFlush

        @property
        def service(self) -> ThreadService: ...
        def _notice(self, thread_id: str, text: str, kind: str) -> None: ...
        def _notify(self, thread_id: str, update: dict[str, Any]) -> None: ...
        def _send_editor(self, message: dict[str, Any]) -> None: ...
        def _write_thread(self, live: Live) -> None: ...

    def _record(self, live: Live, recorded: source.Recorded) -> None:
        """Blobs first, then the items, written but not synced (the turn's end syncs). A
        new session's items wait for its thread; a held session records nothing. A failure
        is logged and said to the editor at once; forwarding goes on (the person keeps
        their agent), and the turn's answer is an error."""
        if not recorded.items:
            return
        if live.pending is not None:
            live.pending.add(recorded)
            live.pending_size += sum(len(orjson.dumps(item)) for item in recorded.items)
            count, limit = PENDING_LIMIT
            if len(live.pending.items) > count or live.pending_size > limit:
                try:
                    self._write_thread(live)
                except ProtocolError as exc:  # the oldest go: still bounded
                    logger.error("could not write session %s: %s", live.thread_id, exc)
                    del live.pending.items[: len(live.pending.items) // 2]
                    live.pending_size //= 2
            return
        if live.session_id is None:
            return
        try:
            for data in recorded.blobs.values():
                self.service.store.put_blob(data)
        except (ProtocolError, OSError) as exc:
            self._record_failed(live, exc)
            return
        batch = self._batches.get(live.thread_id)
        if batch is not None and batch[0] is live:
            batch[1].extend(recorded.items)
            return
        if batch is not None:
            self._write_batches()
        self._batches[live.thread_id] = (live, list(recorded.items))
        if not self._batch_scheduled:
            self._batch_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_batches)

    def _write_batches(self) -> None:
        """What this turn of the loop recorded, written: one append per thread (written,
        not synced). Runs before anything of the same turn reaches the editor
        (`EditorOutput.flush` calls it first): durable before shown."""
        self._batch_scheduled = False
        batches, self._batches = self._batches, {}
        for thread_id, (live, items) in batches.items():
            if live.session_id is None:
                continue
            try:
                self.service.record(thread_id, live.session_id, items, self.owner, defer_sync=True)
            except (ProtocolError, OSError) as exc:
                self._record_failed(live, exc)

    def _record_failed(self, live: Live, exc: ProtocolError | OSError) -> None:
        failure = exc if isinstance(exc, ProtocolError) else storage_error(exc)
        logger.error("could not record in thread %s: %s", live.thread_id, failure)
        self._unrecorded(live, failure)

    def _unrecorded(self, live: Live, failure: ProtocolError) -> None:
        if live.unrecorded is not None:
            return
        live.unrecorded = failure
        self._notice(
            live.thread_id,
            f"Not recorded: {failure} ({failure.kind}). What follows is shown but not saved, "
            "and this turn will end with an error.",
            "unrecorded",
        )

    def _pass_update(self, live: Live, message: dict[str, Any]) -> None:
        """AGENT's `session/update` (with the thread id) recorded, then shown, as the
        chunk hold lets it go: the end of a message's text waits until no secret can be
        in progress there (restore/sources/acp_chunks.py), kept from both alike."""
        overflows = live.chunks.overflows
        for params in live.chunks.update(message["params"], self._redactor):
            self._record(live, live.recorder.update(params))
            self._send_editor({**message, "params": params})
        if live.chunks.overflows > overflows:
            logger.warning(
                "thread %s: more than %d characters of a message could not be cut where no "
                "secret is in progress (no break in them): shown and recorded as they came",
                live.thread_id,
                HOLD_LIMIT,
            )

    def _release_held(self, live: Live) -> None:
        """The message ends (the turn, AGENT, the editor, a steer): what was held back of
        its text recorded and shown, as its last chunk."""
        for params in live.chunks.flush():
            self._record(live, live.recorder.update(params))
            self._send_editor({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def _redactor(self) -> Redactor | None:
        return self.service.store.redactor

    def _show(self, live: Live, recorded: source.Recorded) -> None:
        """Updates made here (a tool call closed as interrupted), after their record."""
        for params in recorded.shown:
            self._notify(live.thread_id, params["update"])

    def _flush_index_soon(self) -> None:
        """Other processes (`sessiond serve`, `sessiond list`) see the thread's new row
        within about a second (server/index_flush.py)."""
        self._index_flush.soon(asyncio.get_running_loop())

    def _flush_index(self) -> None:
        self._write_batches()
        if self._service is not None:
            try:
                self._service.flush_index()
            except Exception as exc:  # the index is derived: a failure costs a stale row
                logger.warning("could not update the thread index: %s", exc)

    async def _sync(self) -> ProtocolError | None:
        """Everything written so far made durable; the failure, if it could not be."""
        self._write_batches()
        try:
            sync = self.service.begin_commit()  # a shared store commits here
            if sync is not None:
                await asyncio.to_thread(sync)
        except ProtocolError as exc:
            logger.error("could not make the records durable: %s", exc)
            return exc
        except OSError as exc:
            logger.error("could not make the records durable: %s", exc)
            return storage_error(exc)
        return None
