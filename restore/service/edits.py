"""File edits sessiond applies itself (`fs/applyEdit`) and rewinds to a turn.

An edit is a ledgered operation with before/after blobs: recorded as started, the file
replaced atomically, then recorded as committed with its `file_edit`. A crash anywhere in
between is decided on resume by content hash, and a retry with the same `operationId`
never writes twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.access import Scope, read_regular, remove_regular, replace_regular, sha256_regular
from restore.engine.subsystems.operations import APPLY_EDIT_TOOL
from restore.faults import crash_point
from restore.ids import sha256_of
from restore.service.sessions import OpenSession
from restore.service.threads import ThreadService


def resolve_in_workspace(session: OpenSession, path: str, folders: Iterable[str] = ()) -> str:
    """The resolved path, if inside the thread's workspace (and the client's folders)."""
    return Scope.of_thread(session.state.states["worktree"], folders).resolve(path)


def apply_edit(
    service: ThreadService,
    session: OpenSession,
    *,
    operation_id: str,
    path: str,
    content: str,
    expected_sha: str | None,
    folders: Iterable[str] = (),
) -> dict[str, Any]:
    target = resolve_in_workspace(session, path, folders)
    after = content.encode()
    after_sha = sha256_of(after)
    operations = session.state.states["operations"]
    if operations["closed"].get(operation_id) == "committed":
        # A retry of a finished edit (rare): its shas are in the thread file.
        items, _ = service.store.read(session.writer.thread_id)
        edit = next(
            (
                i
                for i in reversed(items.items)
                if i.get("type") == "file_edit" and i.get("operationId") == operation_id
            ),
            {},
        )
        return {
            "outcome": "already_applied",
            "beforeSha": edit.get("beforeSha"),
            "afterSha": edit.get("afterSha", after_sha),
        }
    open_op = operations["open"].get(operation_id)
    current = read_regular(target)  # refuses a FIFO, a device, a directory
    current_sha = None if current is None else sha256_of(current)
    if open_op is not None:
        # A crash interrupted this edit: the file's content says how far it got.
        before_sha = open_op.get("beforeSha")
        if current_sha == open_op.get("afterSha"):
            _record_commit(service, session, operation_id, target, before_sha, current_sha)
            return {"outcome": "already_applied", "beforeSha": before_sha, "afterSha": current_sha}
        if current_sha != before_sha:
            return {"outcome": "conflict", "beforeSha": current_sha, "afterSha": after_sha}
    else:
        if expected_sha is not None and expected_sha != current_sha:
            outcome = "already_applied" if current_sha == after_sha else "conflict"
            return {"outcome": outcome, "beforeSha": current_sha, "afterSha": after_sha}
        before_sha = current_sha
        if current is not None:
            service.store.put_blob(current)
        service.store.put_blob(after)
        digest = sha256_of(f"{target}\0{after_sha}".encode())
        started = _edit_operation(operation_id, "started", str(target), before_sha, after_sha)
        service.append(session, [{**started, "argsDigest": digest}])
    crash_point("apply_edit.before_write")
    replace_regular(target, after)
    crash_point("apply_edit.after_write")
    _record_commit(service, session, operation_id, target, before_sha, after_sha)
    return {"outcome": "applied", "beforeSha": before_sha, "afterSha": after_sha}


def _edit_operation(
    operation_id: str, state: str, path: str, before_sha: str | None, after_sha: str | None
) -> dict[str, Any]:
    """`apply_edit`'s operation record in `state` (started before the write, committed
    after it): what a resume needs to know whether the edit happened."""
    return {
        "type": "operation",
        "id": str(uuid.uuid4()),
        "operationId": operation_id,
        "tool": APPLY_EDIT_TOOL,
        "effect": "side_effect",
        "state": state,
        "path": path,
        "beforeSha": before_sha,
        "afterSha": after_sha,
    }


def _record_commit(
    service: ThreadService,
    session: OpenSession,
    operation_id: str,
    path: str,
    before_sha: str | None,
    after_sha: str | None,
) -> None:
    committed = _edit_operation(operation_id, "committed", path, before_sha, after_sha)
    service.append(
        session,
        [
            {**committed, "resultPersisted": True},
            {
                "type": "file_edit",
                "id": str(uuid.uuid4()),
                "path": path,
                "beforeSha": before_sha,
                "afterSha": after_sha,
                "author": "agent",
                "operationId": operation_id,
            },
        ],
    )


def rewind(
    service: ThreadService,
    session: OpenSession,
    *,
    to_turn_id: str,
    files: bool,
    conversation: bool,
    force: bool,
    folders: Iterable[str] = (),
) -> dict[str, Any]:
    """Put files and/or the conversation back to how they were at the end of a turn.

    Refuses to overwrite a file the user changed since the agent's last edit, unless
    `force`: the user's work is never discarded silently. Every path is checked and every
    blob found before the first file is written: a rewind is refused whole, not half done.
    """
    contents, _ = service.store.read(session.writer.thread_id)
    turn_seqs = [item["seq"] for item in contents.items if item.get("turnId") == to_turn_id]
    if not turn_seqs:
        raise ProtocolError(ErrorKind.INVALID_PARAMS, f"no turn {to_turn_id!r}", turnId=to_turn_id)
    cut = max(turn_seqs)
    restored: list[dict[str, Any]] = []
    if files:
        scope = Scope.of_thread(session.state.states["worktree"], folders)
        plans = _rewind_plans(contents.items, cut, scope, service)
        changed = [p["path"] for p in plans if sha256_regular(p["target"]) != p["expected"]]
        if changed and not force:
            raise ProtocolError(
                ErrorKind.CONFLICTING_OPERATION,
                "changed since the agent's last edit (pass force to overwrite): "
                + ", ".join(changed),
                paths=changed,
            )
        items = []
        for plan in plans:
            current = sha256_regular(plan["target"])
            if plan["content"] is None:
                remove_regular(plan["target"])
            else:
                replace_regular(plan["target"], plan["content"])
            items.append(
                {
                    "type": "file_edit",
                    "id": str(uuid.uuid4()),
                    "path": plan["path"],
                    "beforeSha": current,
                    "afterSha": plan["sha"],
                    "author": "agent",
                    "operationId": f"rewind:{to_turn_id}",
                }
            )
            restored.append({"path": plan["path"], "sha": plan["sha"]})
        if items:
            service.append(session, items)
    if conversation:
        service.append(
            session,
            [
                {
                    "type": "rewind_boundary",
                    "id": str(uuid.uuid4()),
                    "toSeq": cut,
                    "toTurnId": to_turn_id,
                }
            ],
        )
    return {"toSeq": cut, "files": restored, "conversation": conversation}


def _rewind_plans(
    items: list[dict[str, Any]], cut: int, scope: Scope, service: ThreadService
) -> list[dict[str, Any]]:
    """Per file edited after `cut`: where it is, what to restore, what is expected now.

    A recorded path outside the workspace is OutsideWorkspace; an edit that recorded no
    `beforeSha` (unknown prior content) or whose blob is gone is refused by name."""
    plans: dict[str, dict[str, Any]] = {}
    for edit in items:
        if edit.get("type") != "file_edit" or edit["seq"] <= cut:
            continue
        path: str = edit["path"]  # a file_edit's (protocol/items.py FileEditItem)
        if path not in plans:
            if "beforeSha" not in edit:
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS,
                    f"cannot rewind {path}: its edit at seq {edit['seq']} records no beforeSha",
                    path=path,
                    seq=edit["seq"],
                )
            plans[path] = {"path": path, "target": scope.resolve(path), "sha": edit["beforeSha"]}
        plans[path]["expected"] = edit.get("afterSha")
    for plan in plans.values():
        plan["content"] = None
        if plan["sha"] is not None:
            plan["content"] = service.store.get_blob(plan["sha"])
            if plan["content"] is None:
                why = "is missing"
                if service.store.redactor is not None:  # docs/security.md, redaction
                    why = "is missing (or held a secret: such contents are stored redacted)"
                raise ProtocolError(
                    ErrorKind.STORAGE_ERROR,
                    f"cannot rewind {plan['path']}: blob {plan['sha']} {why}",
                    path=plan["path"],
                )
    return list(plans.values())
