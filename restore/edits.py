"""File edits sessiond applies itself (`fs/applyEdit`) and rewinds to a turn.

An edit is a ledgered operation with before/after blobs: recorded as started, the file
replaced atomically, then recorded as committed with its `file_edit`. A crash anywhere in
between is decided on resume by content hash, and a retry with the same `operationId`
never writes twice.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore import blobs
from restore.atomic import write_atomically
from restore.faults import crash_point
from restore.subsystems.operations import APPLY_EDIT_TOOL
from restore.threads import OpenSession, ThreadService


def _sha_of_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def resolve_in_workspace(session: OpenSession, path: str) -> Path:
    """An absolute path inside the thread's workspace; anything else is refused."""
    worktree = session.state.states["worktree"]
    root = Path(worktree.get("repoRoot") or worktree.get("cwd") or "/nonexistent").resolve()
    cwd = Path(worktree.get("cwd") or root)
    target = (cwd / path).resolve() if not os.path.isabs(path) else Path(path).resolve()
    if target != root and root not in target.parents:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, f"{path} is outside the thread's workspace {root}", path=path
        )
    return target


def apply_edit(
    service: ThreadService,
    session: OpenSession,
    *,
    operation_id: str,
    path: str,
    content: str,
    expected_sha: str | None,
) -> dict[str, Any]:
    target = resolve_in_workspace(session, path)
    after = content.encode()
    after_sha = blobs.sha_of(after)
    operations = session.state.states["operations"]
    if operations["closed"].get(operation_id) == "committed":
        # A retry of a finished edit (rare): its shas are in the thread file.
        items, _ = service.store.read(session.writer.thread_id)
        edit = next(
            (i for i in reversed(items.items)
             if i.get("type") == "file_edit" and i.get("operationId") == operation_id), {},
        )  # fmt: skip
        return {"outcome": "already_applied", "beforeSha": edit.get("beforeSha"),
                "afterSha": edit.get("afterSha", after_sha)}  # fmt: skip
    open_op = operations["open"].get(operation_id)
    current_sha = _sha_of_file(target)
    if open_op is not None:
        # A crash interrupted this edit: the file's content says how far it got.
        before_sha = open_op.get("beforeSha")
        if current_sha == open_op.get("afterSha"):
            _record_commit(service, session, operation_id, str(target), before_sha, current_sha)
            return {"outcome": "already_applied", "beforeSha": before_sha, "afterSha": current_sha}
        if current_sha != before_sha:
            return {"outcome": "conflict", "beforeSha": current_sha, "afterSha": after_sha}
    else:
        if expected_sha is not None and expected_sha != current_sha:
            outcome = "already_applied" if current_sha == after_sha else "conflict"
            return {"outcome": outcome, "beforeSha": current_sha, "afterSha": after_sha}
        before_sha = current_sha
        if current_sha is not None:
            service.store.put_blob(target.read_bytes())
        service.store.put_blob(after)
        digest = hashlib.sha256(f"{target}\0{after_sha}".encode()).hexdigest()
        service.append(session, [{
            "type": "operation", "id": str(uuid.uuid4()), "operationId": operation_id,
            "tool": APPLY_EDIT_TOOL, "argsDigest": digest, "effect": "side_effect",
            "state": "started", "path": str(target), "beforeSha": before_sha,
            "afterSha": after_sha,
        }])  # fmt: skip
    crash_point("apply_edit.before_write")
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    write_atomically(target, after, mode)
    crash_point("apply_edit.after_write")
    _record_commit(service, session, operation_id, str(target), before_sha, after_sha)
    return {"outcome": "applied", "beforeSha": before_sha, "afterSha": after_sha}


def _record_commit(
    service: ThreadService,
    session: OpenSession,
    operation_id: str,
    path: str,
    before_sha: str | None,
    after_sha: str | None,
) -> None:
    service.append(session, [
        {"type": "operation", "id": str(uuid.uuid4()), "operationId": operation_id,
         "tool": APPLY_EDIT_TOOL, "effect": "side_effect", "state": "committed",
         "resultPersisted": True, "path": path, "beforeSha": before_sha, "afterSha": after_sha},
        {"type": "file_edit", "id": str(uuid.uuid4()), "path": path, "beforeSha": before_sha,
         "afterSha": after_sha, "author": "agent", "operationId": operation_id},
    ])  # fmt: skip


def rewind(
    service: ThreadService,
    session: OpenSession,
    *,
    to_turn_id: str,
    files: bool,
    conversation: bool,
    force: bool,
) -> dict[str, Any]:
    """Put files and/or the conversation back to how they were at the end of a turn.

    Refuses to overwrite a file the user changed since the agent's last edit, unless
    `force`: the user's work is never discarded silently.
    """
    contents, _ = service.store.read(session.writer.thread_id)
    turn_seqs = [item["seq"] for item in contents.items if item.get("turnId") == to_turn_id]
    if not turn_seqs:
        raise ProtocolError(ErrorKind.INVALID_PARAMS, f"no turn {to_turn_id!r}", turnId=to_turn_id)
    cut = max(turn_seqs)
    restored: list[dict[str, Any]] = []
    if files:
        plans = _rewind_plans(contents.items, cut)
        changed = [p["path"] for p in plans if _sha_of_file(Path(p["path"])) != p["expected"]]
        if changed and not force:
            raise ProtocolError(
                ErrorKind.CONFLICTING_OPERATION,
                "changed since the agent's last edit (pass force to overwrite): "
                + ", ".join(changed),
                paths=changed,
            )
        items = []
        for plan in plans:
            target = Path(plan["path"])
            current = _sha_of_file(target)
            if plan["target"] is None:
                target.unlink(missing_ok=True)
            else:
                data = service.store.get_blob(plan["target"])
                if data is None:
                    raise ProtocolError(
                        ErrorKind.STORAGE_ERROR,
                        f"blob {plan['target']} is missing",
                        path=str(target),
                    )
                write_atomically(target, data, 0o644)
            items.append({"type": "file_edit", "id": str(uuid.uuid4()), "path": plan["path"],
                          "beforeSha": current, "afterSha": plan["target"], "author": "agent",
                          "operationId": f"rewind:{to_turn_id}"})  # fmt: skip
            restored.append({"path": plan["path"], "sha": plan["target"]})
        if items:
            service.append(session, items)
    if conversation:
        service.append(session, [{"type": "rewind_boundary", "id": str(uuid.uuid4()),
                                  "toSeq": cut, "toTurnId": to_turn_id}])  # fmt: skip
    return {"toSeq": cut, "files": restored, "conversation": conversation}


def _rewind_plans(items: list[dict[str, Any]], cut: int) -> list[dict[str, Any]]:
    """Per file edited after `cut`: the content to restore and the content expected now."""
    plans: dict[str, dict[str, Any]] = {}
    for edit in items:
        if edit.get("type") != "file_edit" or edit["seq"] <= cut:
            continue
        plan = plans.setdefault(edit["path"], {"path": edit["path"], "target": edit["beforeSha"]})
        plan["expected"] = edit["afterSha"]
    return list(plans.values())
