"""`sessiond resume ID`: what a resume of the thread would give back, as a person reads it.

The RestoreReport (docs/restore-contract.md) cut to what decides the next step: whether
the workspace is still the one the thread was bound to (each drifted field), the newest
message, every open tool operation with what to do about it, the todo list, the cost,
and how to go on — the agent's own resume command for an imported thread, the editor
for the others. Nothing is written and no lock is taken (restore/service/resume.py
`preview`), so it is safe beside an editor holding the thread. `--json` prints the
report itself.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.agents.registry import imported
from restore.render.transcript import TODO_MARKS
from server.cli.commands import _service
from server.cli.options import CommandError
from server.cli.terminal import plural, print_json, relative_time, safe
from server.config import ServerConfig

INDENT = "  "
MESSAGE_CHARS = 300
RECOVERY_ADVICE = {  # as the editor's restore report says it (vscode-extension/src/format.ts)
    "not_started": "never started: safe to run",
    "safe_to_retry": "started, no outcome recorded; read-only or idempotent: it may run again",
    "needs_review": "started, no outcome recorded, with side effects: check what it did "
    "before running it again",
    "committed_result_missing": "done, but its result was not saved: do not run it again; "
    "recover the result",
}
DRIFT_NAMES = {
    "cwd": "directory",
    "repo": "repository",
    "branch": "branch",
    "head": "HEAD",
    "worktree": "worktree",
}


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "(none)"
    text = str(value)
    return text[:10] if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else text


def _subsystem(report: dict[str, Any], name: str) -> dict[str, Any]:
    for entry in report["subsystems"]:
        if entry["name"] == name:
            return entry.get("state") or {}
    return {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and "text" in p)
    return ""


def summary(report: dict[str, Any], typed: str) -> list[str]:
    """The report as lines a person reads; every recorded string made safe to print."""
    thread = report["thread"]
    title = thread["title"] or thread["preview"] or "(no messages yet)"
    lines = [safe(f"thread {thread['threadId']}: {title}", one_line=True)]
    recorded = report["environment"]["recorded"]
    where = recorded.get("cwd") or "(no directory recorded)"
    if recorded.get("branch"):
        where += f" (branch {recorded['branch']})"
    drift = report["environment"]["drift"]
    blocked = any(entry["severity"] == "block" for entry in drift)
    if report["status"] == "ready" and not drift:
        lines.append(safe(f"ready: the workspace is as recorded, {where}", one_line=True))
    else:
        state = "needs review" if blocked else "ready, with a warning"
        lines.append(
            safe(f"{state}: the workspace changed since it was recorded in {where}:", one_line=True)
        )
        for entry in drift:
            name = DRIFT_NAMES.get(entry["field"], entry["field"])
            how = "blocks: a resume asks first" if entry["severity"] == "block" else "warning"
            line = f"{name}: {_shown(entry['recorded'])} → {_shown(entry['current'])} ({how})"
            lines.append(INDENT + safe(line, one_line=True))
    messages = report["messages"]["items"]
    if messages:
        last = messages[-1]
        text = " ".join(_text(last.get("content")).split())
        text = text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
        when = relative_time(last.get("ts"))
        lines.append(f"last message ({safe(str(last.get('role')), one_line=True)}, {when}):")
        lines.append(INDENT + safe(text, one_line=True))
    pending = report["pendingOperations"]
    if pending:
        lines.append(f"open operations ({len(pending)}):")
        for op in pending:
            advice = RECOVERY_ADVICE.get(op["recovery"], op["recovery"])
            line = f"{op['tool']} ({op['operationId']}): {advice}"
            lines.append(INDENT + safe(line, one_line=True))
    todos = _subsystem(report, "todos").get("items") or []
    if todos:
        done = sum(1 for todo in todos if todo.get("status") == "completed")
        lines.append(f"todos ({done} of {len(todos)} done):")
        for todo in todos:
            mark = TODO_MARKS.get(str(todo.get("status")), "[?]")
            lines.append(INDENT + safe(f"{mark} {todo.get('content')}", one_line=True))
    cost = _subsystem(report, "cost")
    if cost.get("usd") or cost.get("inputTokens"):
        lines.append(
            f"cost: ${float(cost.get('usd') or 0):.4f} · {int(cost.get('inputTokens') or 0):,} "
            f"in / {int(cost.get('outputTokens') or 0):,} out tokens"
        )
    skipped = report["recovery"]["skippedLines"]
    if skipped:
        lines.append(f"{plural(len(skipped), 'unreadable line')} skipped (sessiond doctor)")
    lines += _next_step(report, typed, blocked)
    return lines


def _next_step(report: dict[str, Any], typed: str, blocked: bool) -> list[str]:
    handoff = report.get("handoff")
    if handoff:
        command = shlex.join(handoff["command"])
        if handoff.get("cwd"):
            command = f"cd {shlex.quote(handoff['cwd'])} && {command}"
        return ["continue it in its agent:", INDENT + safe(command, one_line=True)]
    origin = report["thread"].get("origin") or {}
    if imported(origin.get("agent")) and blocked:
        return [
            f"the agent's own resume is offered once the workspace matches: "
            f"sessiond resume {typed} --accept-drift to have it anyway"
        ]
    if origin.get("agent") == "acp":
        how = [
            f"the transcript: sessiond show {typed}",
            "continue it in the ACP editor that recorded it (it runs sessiond acp -- AGENT): "
            "its session list has it",
        ]
    else:
        how = [
            f"the transcript: sessiond show {typed}",
            "continue it in an editor with sessiond (VS Code: the Threads view, or 'sessiond: "
            f"Open Thread…' with {typed}), or any client's thread/resume",
        ]
    if blocked:
        how.append("a resume there asks first (continue here, or fork)")
    return how


def resume(config: ServerConfig, args: argparse.Namespace) -> int:
    """Exit 0 when the thread can be continued where it was recorded, 1 when it needs
    review (the workspace drifted), 2 for an error (as every command)."""
    service = _service(config)
    try:
        thread_id = service.thread_id_of(args.thread_id)
        try:
            report = service.preview(
                thread_id, cwd=args.cwd, accept_drift=args.accept_drift, message_limit=1
            )
        except ProtocolError as exc:
            if exc.kind is ErrorKind.THREAD_ARCHIVED:
                raise CommandError(
                    f"ThreadArchived: {thread_id} is archived: sessiond unarchive "
                    f"{args.thread_id} first"
                ) from None
            raise
    finally:
        service.close_all()
    if args.json:
        print_json(report)
    else:
        for line in summary(report, args.thread_id.strip()):
            print(line)
    return 0 if report["status"] == "ready" else 1
