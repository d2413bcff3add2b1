"""A thread's items as a transcript: the one walk `sessiond show`, `sessiond export` and
`thread/export` share, drawn by a `Style` (styles.py: text, Markdown, HTML).

Who said what, what the agent did (tool operations with their effect and outcome, failed
ones marked; file edits, with their diff where the caller can give one), its todo list as
it changed, and what each turn cost; sessions and lifecycle events as separators; a
sub-agent's transcript under the call that started it. The walk takes items one at a time
(an iterator over pages), keeps only counters, and yields the document in chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from restore.render.text import content_text, plural, safe

TODO_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
BOOKKEEPING = frozenset({"import_checkpoint", "acp_update", "acp_session"})
"""Records the server keeps for itself (where an import stopped, what an ACP editor was
sent to replay it, which agent session a proxy talks to): shown only with `everything`."""

Nested = Callable[[], Iterator[str]]
"""A sub-agent's transcript, drawn only when its place comes (a thunk, not text)."""


class Style(Protocol):
    """How each kind of entry is written; every string handed in is recorded text, not yet
    made safe (the style knows its medium)."""

    def speaker(self, role: str) -> str: ...

    def message(self, text: str) -> str: ...

    def separator(self, text: str) -> str: ...

    def note(self, text: str) -> str: ...

    def summary(self, text: str) -> str: ...

    def operation(self, item: dict[str, Any], line: str, result: str | None) -> str: ...

    def edit(self, line: str, diff: str | None) -> str: ...

    def todos(self, entries: list[tuple[str, str]]) -> str: ...

    def nested(self, chunk: str) -> str:
        """A chunk of a sub-agent's transcript, as it sits under its parent's call."""
        ...

    def sub_agent(self, title: str) -> tuple[str, str | None]:
        """What opens a sub-agent's transcript (its title) and what closes it, if anything."""
        ...


@dataclass
class Tally:
    """What the footer counts, kept as the walk goes (no item is kept)."""

    messages: int = 0
    spent: float = 0.0
    costs: int = 0
    unpriced: int = 0
    sub_spent: float = 0.0
    sub_costs: int = 0
    sub_unpriced: int = 0

    def cost(self, item: dict[str, Any], *, sub_agent: bool = False) -> None:
        usd, unpriced = float(item.get("usd") or 0), item.get("priced", True) is False
        if sub_agent:
            self.sub_spent, self.sub_costs = self.sub_spent + usd, self.sub_costs + 1
            self.sub_unpriced += unpriced
        else:
            self.spent, self.costs, self.unpriced = (
                self.spent + usd,
                self.costs + 1,
                self.unpriced + unpriced,
            )

    def absorb(self, child: Tally) -> None:
        """A sub-agent's transcript drawn: what it (and its own sub-agents) spent is spent
        through this thread."""
        self.sub_spent += child.spent + child.sub_spent
        self.sub_costs += child.costs + child.sub_costs
        self.sub_unpriced += child.unpriced + child.sub_unpriced


def _field(item: dict[str, Any], name: str) -> str:
    return safe(str(item.get(name) or ""), one_line=True)


def _session(item: dict[str, Any]) -> str:
    facts = [f"{_field(item, 'source')} ({_field(item, 'reason')})"]
    for label, name in (("in", "cwd"), ("branch", "branch"), ("model", "model")):
        if item.get(name):
            facts.append(f"{label} {_field(item, name)}")
    return f"── session {str(item.get('sessionId', ''))[:8]} · {' · '.join(facts)} ──"


def operation_line(item: dict[str, Any]) -> str:
    """`⚙ tool state (effect, operation id): $ command (exit N)`."""
    line = (
        f"⚙ {_field(item, 'tool')} {_field(item, 'state')} "
        f"({_field(item, 'effect')}, operation {_field(item, 'operationId')})"
    )
    if item.get("command"):  # a shell command, as the agent ran it
        line += f": $ {safe(str(item['command']), one_line=True)[:200]}"
    if isinstance(item.get("exitCode"), int):
        line += f" (exit {item['exitCode']})"
    return line


def failed(item: dict[str, Any]) -> bool:
    """A call that failed, or a command that exited with another code than 0."""
    code = item.get("exitCode")
    return item.get("state") == "failed" or (isinstance(code, int) and code != 0)


def result_text(item: dict[str, Any]) -> str | None:
    """An ended call's result as text, or None."""
    if item.get("state") not in ("committed", "failed") or item.get("result") is None:
        return None
    result = item["result"]
    if isinstance(result, str):
        return result
    import json

    return json.dumps(result, ensure_ascii=False, indent=1)


def _cost(item: dict[str, Any], total: float) -> str:
    price = (
        f"${float(item.get('usd') or 0):.4f}"
        if item.get("priced", True) is not False
        else "unpriced (no known price for this model)"
    )
    return (
        f"$ {_field(item, 'model')}: {item.get('inputTokens', 0)} in, "
        f"{item.get('outputTokens', 0)} out tokens, {price} (thread so far ${total:.4f})"
    )


def _lifecycle(style: Style, item: dict[str, Any]) -> str:
    if item.get("status") == "ended":
        session = str(item.get("targetSessionId", ""))[:8]
        return style.separator(f"── session {session} ended ({_field(item, 'reason')}) ──")
    hook = _field(item, "hook") or _field(item, "command")
    outcome = _field(item, "status")
    if item.get("exitCode") is not None:
        outcome += f", exit {item['exitCode']}"
    return style.note(f"hook {_field(item, 'event')} {hook}: {outcome}")


def render(
    items: Iterable[dict[str, Any]],
    style: Style,
    nested: MutableMapping[str, Nested] | None = None,
    *,
    everything: bool = False,
    diff: Callable[[dict[str, Any]], str | None] | None = None,
    tally: Tally | None = None,
) -> Iterator[str]:
    """The transcript in chunks, in seq order. `nested`: sub-agents' transcripts to draw
    under the operation with that id once it has ended (taken from the mapping as they are
    drawn); any left over follow at the end. `everything`: the bookkeeping too. `diff`: an
    edit's diff, where the caller can read its blobs. `tally`: counted into."""
    pending = nested if nested is not None else {}
    tally = tally if tally is not None else Tally()
    total_usd = 0.0
    speaker: str | None = None  # consecutive messages of one role share a header
    for item in items:
        kind = item.get("type")
        if kind in BOOKKEEPING and not everything:
            continue
        if kind == "message":
            tally.messages += 1
            role = _field(item, "role") or "message"
            if item.get("thought") is True:  # its reasoning, not its answer
                role = f"{role} (thinking)"
            if role != speaker:
                yield style.speaker(role)
                speaker = role
            yield style.message(content_text(item.get("content")))
            continue
        speaker = None
        if kind == "operation":
            yield style.operation(item, operation_line(item), result_text(item))
            if item.get("state") != "started" and item.get("operationId") in pending:
                for chunk in pending.pop(item["operationId"])():
                    yield style.nested(chunk)
        elif kind == "cost":
            total_usd += float(item.get("usd") or 0)
            tally.cost(item)
            yield style.note(_cost(item, total_usd))
        elif kind == "file_edit":
            line = f"✎ {_field(item, 'path')} edited by {_field(item, 'author') or 'agent'}"
            yield style.edit(line, diff(item) if diff is not None else None)
        elif kind == "todos":
            entries = item.get("items") or []
            yield style.todos(
                [
                    (
                        TODO_MARKS.get(str(entry.get("status")), "[?]"),
                        str(entry.get("content") or ""),
                    )
                    for entry in (entries if isinstance(entries, list) else [])
                    if isinstance(entry, dict)
                ]
            )
        elif kind == "lifecycle":
            yield _lifecycle(style, item)
        elif kind == "compact_boundary":
            yield style.separator("── compacted; summary:")
            yield style.summary(content_text(item.get("summary")))
        elif (separator := _one_line(item, kind)) is not None:
            yield style.separator(separator)
        elif (note := _note(item, kind)) is not None:
            yield style.note(note)
    for thunk in list(pending.values()):
        for chunk in thunk():
            yield style.nested(chunk)
    pending.clear()


def _one_line(item: dict[str, Any], kind: Any) -> str | None:
    """A separator's line (None: the item is no separator)."""
    if kind == "session_meta":
        return _session(item)
    if kind == "clear_boundary":
        return "── cleared: the conversation starts again here ──"
    if kind == "rewind_boundary":
        return f"── rewound to the end of turn {_field(item, 'toTurnId')} ──"
    return None


def _note(item: dict[str, Any], kind: Any) -> str | None:
    """A note's line (None: nothing to show, as for a turn that ended normally)."""
    if kind == "turn":
        if item.get("phase") == "interrupted":
            return f"(turn {_field(item, 'turnId')} interrupted)"
        return None
    if kind == "cost_reported":
        return (
            f"$ {_field(item, 'model')}: {item.get('inputTokens', 0)} in, "
            f"{item.get('outputTokens', 0)} out tokens, ${float(item.get('usd') or 0):.4f}"
            " (counted by the agent, in no line of its transcript)"
        )
    if kind == "thread_title":
        return f"title: {_field(item, 'title')}"
    if kind == "model_override":
        return f"model: {_field(item, 'model')}"
    if kind == "permissions":
        return f"permissions: {_field(item, 'approvalMode')}"
    if kind == "prompt_section":
        return f"prompt section {_field(item, 'name')}"
    if kind == "verifier":
        return f"✓ {_field(item, 'name')}: {item.get('passed')}/{item.get('total')} passed"
    if kind == "drift_accepted":
        return "(continued in a changed workspace: drift accepted)"
    if kind == "permission_decision":
        answer = _field(item, "optionKind") or ("allowed" if item.get("allowed") else "rejected")
        if item.get("outcome") == "cancelled":
            answer = "cancelled"
        return f"asked: {_field(item, 'title') or 'permission'}: {answer}"
    return f"[{safe(str(kind), one_line=True)}]"


def footer(tally: Tally, item_count: int) -> str:
    """`12 items · 3 messages · $0.4213 spent (sub-agents $0.0272)`: `item_count` is the
    thread's (ThreadInfo's `itemCount`, as `list` says it: the conversation, bookkeeping not
    counted); the sub-agents' costs are what it spent through them. A model call with no
    known price is counted as unpriced, never as $0."""
    parts = [plural(item_count, "item"), plural(tally.messages, "message")]
    calls = tally.costs + tally.sub_costs
    if calls:
        line = f"${tally.spent + tally.sub_spent:.4f} spent"
        if tally.sub_costs:
            line += f" (sub-agents ${tally.sub_spent:.4f})"
        unpriced = tally.unpriced + tally.sub_unpriced
        if unpriced == calls:
            line = "cost unknown: no known price for its model"
        elif unpriced:
            line += f", {plural(unpriced, 'model call')} unpriced (no known price)"
        parts.append(line)
    return " · ".join(parts)
