"""A thread's items as a transcript a person reads (`sessiond show`).

Who said what, what the agent did (tool operations with their effect and outcome, file
edits), its todo list as it changed, and what it cost; sessions and lifecycle events as
separators. Every recorded string passes through `terminal.safe`. `--json` prints the raw
items instead, for scripts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from server.cli.terminal import plural, safe

INDENT = "    "
TODO_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
BOOKKEEPING = frozenset({"import_checkpoint", "acp_update", "acp_session"})
"""Records the server keeps for itself (where an import stopped, what an ACP editor was
sent to replay it, which agent session a proxy talks to): shown only with `--all`."""


def _text(value: Any) -> str:
    """Message content as text: parts joined, images and other non-text parts named."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return "" if value is None else str(value)


def _block(text: str) -> Iterator[str]:
    for line in safe(text).splitlines() or [""]:
        yield f"{INDENT}{line}".rstrip()


def _field(item: dict[str, Any], name: str) -> str:
    return safe(str(item.get(name) or ""), one_line=True)


def _session(item: dict[str, Any]) -> str:
    facts = [f"{_field(item, 'source')} ({_field(item, 'reason')})"]
    for label, name in (("in", "cwd"), ("branch", "branch"), ("model", "model")):
        if item.get(name):
            facts.append(f"{label} {_field(item, name)}")
    return f"── session {str(item.get('sessionId', ''))[:8]} · {' · '.join(facts)} ──"


def _operation(item: dict[str, Any]) -> str:
    line = (
        f"{INDENT}⚙ {_field(item, 'tool')} {_field(item, 'state')} "
        f"({_field(item, 'effect')}, operation {_field(item, 'operationId')})"
    )
    if item.get("command"):  # a shell command, as the agent ran it
        line += f": $ {safe(str(item['command']), one_line=True)[:200]}"
    if isinstance(item.get("exitCode"), int):
        line += f" (exit {item['exitCode']})"
    if item.get("state") in ("committed", "failed") and item.get("result") is not None:
        result = item["result"] if isinstance(item["result"], str) else str(item["result"])
        line += f": {safe(result, one_line=True)[:120]}"
    return line


def _cost(item: dict[str, Any], total: float) -> str:
    price = (f"${float(item.get('usd') or 0):.4f}" if item.get("priced", True) is not False
             else "unpriced (no known price for this model)")  # fmt: skip
    return (
        f"{INDENT}$ {_field(item, 'model')}: {item.get('inputTokens', 0)} in, "
        f"{item.get('outputTokens', 0)} out tokens, {price} (thread so far ${total:.4f})"
    )


def _lifecycle(item: dict[str, Any]) -> str:
    if item.get("status") == "ended":
        session = str(item.get("targetSessionId", ""))[:8]
        return f"── session {session} ended ({_field(item, 'reason')}) ──"
    hook = _field(item, "hook") or _field(item, "command")
    outcome = _field(item, "status")
    if item.get("exitCode") is not None:
        outcome += f", exit {item['exitCode']}"
    return f"{INDENT}hook {_field(item, 'event')} {hook}: {outcome}"


def render(
    items: Iterable[dict[str, Any]],
    nested: Mapping[str, list[str]] | None = None,
    *,
    everything: bool = False,
) -> Iterator[str]:
    """Transcript lines, in seq order. `nested`: lines to show, indented, under the
    operation with that id once it has ended (a sub-agent's transcript under the call that
    started it); any left over follow at the end. `everything`: the bookkeeping too."""
    pending = dict(nested or {})
    total_usd = 0.0
    speaker: str | None = None  # consecutive messages of one role share a header
    for item in items:
        kind = item.get("type")
        if kind in BOOKKEEPING and not everything:
            continue
        if kind == "message":
            role = _field(item, "role") or "message"
            if item.get("thought") is True:  # its reasoning, not its answer
                role = f"{role} (thinking)"
            if role != speaker:
                yield f"{role}:"
                speaker = role
            yield from _block(_text(item.get("content")))
            continue
        speaker = None
        if kind == "session_meta":
            yield _session(item)
        elif kind == "lifecycle":
            yield _lifecycle(item)
        elif kind == "turn":
            if item.get("phase") == "interrupted":
                yield f"{INDENT}(turn {_field(item, 'turnId')} interrupted)"
        elif kind == "operation":
            yield _operation(item)
            if item.get("state") != "started" and item.get("operationId") in pending:
                for line in pending.pop(item["operationId"]):
                    yield f"{INDENT}{line}"
        elif kind == "file_edit":
            yield f"{INDENT}✎ {_field(item, 'path')} edited by {_field(item, 'author') or 'agent'}"
        elif kind == "todos":
            entries = item.get("items") or []
            yield f"{INDENT}todos:"
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict):
                    mark = TODO_MARKS.get(str(entry.get("status")), "[?]")
                    yield f"{INDENT}  {mark} {_field(entry, 'content')}"
        elif kind == "cost":
            total_usd += float(item.get("usd") or 0)
            yield _cost(item, total_usd)
        elif kind == "cost_reported":
            yield (
                f"{INDENT}$ {_field(item, 'model')}: {item.get('inputTokens', 0)} in, "
                f"{item.get('outputTokens', 0)} out tokens, ${float(item.get('usd') or 0):.4f}"
                " (counted by the agent, in no line of its transcript)"
            )
        elif kind == "thread_title":
            yield f"{INDENT}title: {_field(item, 'title')}"
        elif kind == "model_override":
            yield f"{INDENT}model: {_field(item, 'model')}"
        elif kind == "permissions":
            yield f"{INDENT}permissions: {_field(item, 'approvalMode')}"
        elif kind == "prompt_section":
            yield f"{INDENT}prompt section {_field(item, 'name')}"
        elif kind == "verifier":
            yield (
                f"{INDENT}✓ {_field(item, 'name')}: {item.get('passed')}/{item.get('total')} passed"
            )
        elif kind == "clear_boundary":
            yield "── cleared: the conversation starts again here ──"
        elif kind == "compact_boundary":
            yield "── compacted; summary:"
            yield from _block(_text(item.get("summary")))
        elif kind == "rewind_boundary":
            yield f"── rewound to the end of turn {_field(item, 'toTurnId')} ──"
        elif kind == "drift_accepted":
            yield f"{INDENT}(continued in a changed workspace: drift accepted)"
        elif kind == "permission_decision":
            answer = _field(item, "optionKind") or (
                "allowed" if item.get("allowed") else "rejected"
            )
            if item.get("outcome") == "cancelled":
                answer = "cancelled"
            yield f"{INDENT}asked: {_field(item, 'title') or 'permission'}: {answer}"
        else:
            yield f"{INDENT}[{safe(str(kind), one_line=True)}]"
    for lines in pending.values():
        for line in lines:
            yield f"{INDENT}{line}"


def footer(
    items: list[dict[str, Any]], item_count: int, sub_agents: Iterable[dict[str, Any]] = ()
) -> str:
    """`12 items · 3 messages · $0.4213 spent (sub-agents $0.0272)`: `item_count` is the
    thread's (ThreadInfo's `itemCount`, as `list` says it: the conversation, bookkeeping not
    counted); `sub_agents` the cost items of its sub-agents' threads, which it spent too.
    A model call with no known price is counted as unpriced, never as $0."""
    messages = sum(1 for i in items if i.get("type") == "message")
    own = [i for i in items if i.get("type") == "cost"]
    theirs = [i for i in sub_agents if i.get("type") == "cost"]
    parts = [plural(item_count, "item"), plural(messages, "message")]
    if own or theirs:
        spent = sum(float(i.get("usd") or 0) for i in [*own, *theirs])
        line = f"${spent:.4f} spent"
        if theirs:
            line += f" (sub-agents ${sum(float(i.get('usd') or 0) for i in theirs):.4f})"
        unpriced = sum(1 for i in [*own, *theirs] if i.get("priced", True) is False)
        if unpriced == len(own) + len(theirs):
            line = "cost unknown: no known price for its model"
        elif unpriced:
            line += f", {plural(unpriced, 'model call')} unpriced (no known price)"
        parts.append(line)
    return " · ".join(parts)
