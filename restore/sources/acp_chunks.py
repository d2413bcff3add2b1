"""ACP message chunks cut again so that no secret is split between two of them.

An agent streams a message in chunks (`agent_message_chunk`, `agent_thought_chunk`, a
`user_message_chunk` of its own), and a token it repeats can be cut anywhere: `…sk-ant-
api03-AbC` in one chunk, `dEf…` in the next. Redaction looks at one stored item at a
time, and neither piece is a secret alone, so both would be kept as they came. Items are
never rewritten (a thread file is append-only), so a piece must not be stored before it
is known not to be part of one — and what the editor is shown must be in the record, so
it is not shown before either.

`ChunkHold` keeps the end of a message's text that a secret may still be in progress in
(`Redactor.unsettled`: usually the last word, cut short; a key's or a name's whole
match while it streams) and lets the rest go, as a chunk of the same message with the
text cut there. Holding costs each chunk once: the keywords of what it holds are kept as
they come (`Redactor.keywords_in`), and a rule whose matches are bounded is run again
only over the part a match still in progress could start in (`Redactor.unsettled`'s
`since`); a run of text with no break and no keyword costs its own length, however long
it is held (it was scanned again at every chunk: 2.1-3.1 s of CPU for 20,000 chunks).
What it keeps goes with the next chunk of the same message, or, when the
message ends — another kind of update, another `messageId` (or `_meta`), the turn's
end, AGENT's exit, the editor leaving — as a last chunk of its own (`flush`): every character shown
once, in order, as AGENT sent it. It keeps at most `HOLD_LIMIT` characters; past that
they go as they are (a run of that many characters with no break is no token a rule
knows) and `overflows` counts it. Pure: the proxy records and forwards what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from restore.sources.acp import CHUNKS

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor

HOLD_LIMIT = 4096
"""Characters of one message kept back at most (a PEM private key block fits)."""
CONTEXT = 64
"""Characters of what was let go that are looked at again with what follows: a rule's
match can need what comes before its secret (`api_key = `, a word boundary)."""


class ChunkHold:
    """The message chunk stream of one session, cut where no secret can be split."""

    def __init__(self) -> None:
        self._stream: dict[str, Any] | None = None
        """The open message: its latest chunk but for the text. A chunk that differs from
        it in anything else (kind, `messageId`, `_meta`) starts another: text is never
        carried from one chunk into another whose fields it did not come with."""
        self._last: dict[str, Any] | None = None  # the params of its latest chunk
        self._held = ""
        self._before = ""
        self._at = 0
        """Where the held text starts in the message (characters let go before it)."""
        self._words: dict[str, int] = {}
        """Each keyword seen in the message, and where its latest occurrence starts."""
        self.overflows = 0

    def update(
        self, params: dict[str, Any], redactor: Callable[[], Redactor | None]
    ) -> list[dict[str, Any]]:
        """A `session/update`'s params in; the params to record and show now, in order
        (none while a chunk's whole text is kept back). `redactor`: the store's, asked
        for only when a text chunk comes (None: redaction is off, nothing is kept)."""
        update = params.get("update")
        if not isinstance(update, dict) or update.get("sessionUpdate") not in CHUNKS:
            return [*self.flush(), params]
        content = update.get("content")
        text = (
            content.get("text")
            if isinstance(content, dict) and content.get("type") == "text"
            else None
        )
        if not isinstance(text, str):
            return [*self.flush(), params]  # an image of the message: after its text
        stream = _with_text(params, "")
        out = self.flush() if stream != self._stream else []
        found = redactor()
        if found is None:
            return [*out, params]
        self._stream, self._last = stream, params
        window = self._before + self._held + text
        start = len(self._before)
        origin = self._at - start  # where the window starts in the message
        seen = len(window) - len(text)
        for at, word in found.keywords_in(window, seen):
            self._words[word] = origin + at
        words = [word for word, at in self._words.items() if at >= origin]
        cut = max(start, found.unsettled(window, seen, found.rules_for(words)))
        if len(window) - cut > HOLD_LIMIT:
            cut = len(window)
            self.overflows += 1
        self._held = window[cut:]
        self._before = window[max(0, cut - CONTEXT) : cut]
        self._at = origin + cut
        if cut > start:
            out.append(_with_text(params, window[start:cut]))
        return out

    def flush(self) -> list[dict[str, Any]]:
        """The message ends: what was kept of it, as its last chunk (or nothing)."""
        last, held = self._last, self._held
        self._stream, self._last, self._held, self._before = None, None, "", ""
        self._at, self._words = 0, {}
        return [_with_text(last, held)] if last is not None and held else []

    @property
    def holding(self) -> int:
        """Characters kept back now."""
        return len(self._held)


def _with_text(params: dict[str, Any], text: str) -> dict[str, Any]:
    update = params["update"]
    return {**params, "update": {**update, "content": {**update["content"], "text": text}}}
