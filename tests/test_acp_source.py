"""restore/sources/acp/: ACP messages in, sessiond items out — pure, deterministic ids.

The items are checked against sessiond's own item models and the proxy's answers against
the official ACP SDK's schema models, so neither side can drift from its contract."""

from __future__ import annotations

from typing import Any

from acp.schema import InitializeResponse, SessionInfo, SessionNotification

from protocol.items import (
    RECORDABLE_ITEM_ADAPTER,
    AcpSessionItem,
    AcpUpdateItem,
    PermissionDecisionItem,
    ThreadTitleItem,
)
from protocol.names import SERVER_ITEM_TYPES
from restore.engine.subsystems import ThreadState
from restore.sources import acp as source

TURN = "11111111-1111-1111-1111-111111111111"
IDLE = "22222222-2222-2222-2222-222222222222"
SERVER_MODELS = {
    "acp_update": AcpUpdateItem,
    "acp_session": AcpSessionItem,
    "permission_decision": PermissionDecisionItem,
    "thread_title": ThreadTitleItem,
}


def chunk(kind: str, value: str, message_id: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": value}}
    if message_id:
        update["messageId"] = message_id
    return {"update": update}


def a_turn(recorder: source.ThreadRecorder) -> list[source.Recorded]:
    diff = {"type": "diff", "path": "/w/a.txt", "oldText": "a\n", "newText": "b\n"}
    steps = [
        recorder.begin_turn(TURN, [{"type": "text", "text": "change a.txt"}]),
        recorder.update(chunk("agent_thought_chunk", "hmm ")),
        recorder.update(chunk("agent_thought_chunk", "ok")),
        recorder.update(chunk("agent_message_chunk", "Chang", "m1")),
        recorder.update(chunk("agent_message_chunk", "ing.", "m1")),
        recorder.update(chunk("agent_message_chunk", "Second message", "m2")),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "c1",
                    "title": "Edit",
                    "kind": "edit",
                    "status": "pending",
                    "content": [diff],
                }
            }
        ),
        recorder.permission(
            {
                "toolCall": {"toolCallId": "c1"},
                "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}],
            },
            {"outcome": {"outcome": "selected", "optionId": "y"}},
        ),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "c1",
                    "status": "in_progress",
                }
            }
        ),
        recorder.update(
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": [diff]}}
        ),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "c1",
                    "status": "completed",
                }
            }
        ),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "usage_update",
                    "used": 5,
                    "size": 10,
                    "cost": {"amount": 0.5, "currency": "USD"},
                }
            }
        ),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "usage_update",
                    "used": 6,
                    "size": 10,
                    "cost": {"amount": 0.75, "currency": "USD"},
                }
            }
        ),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "plan",
                    "entries": [{"content": "x", "priority": "low", "status": "weird"}],
                }
            }
        ),
        recorder.update(
            {
                "update": {
                    "sessionUpdate": "current_mode_update",
                    "currentModeId": "bypassPermissions",
                },
                "_meta": {"k": 1},
            }
        ),
        recorder.update({"update": {"sessionUpdate": "session_info_update", "title": "T"}}),
        recorder.end_turn(
            IDLE,
            stop_reason="end_turn",
            usage={"inputTokens": 7, "outputTokens": 3, "totalTokens": 10},
        ),
    ]
    return steps


def all_items(steps: list[source.Recorded]) -> list[dict[str, Any]]:
    return [item for step in steps for item in step.items]


def test_every_item_is_a_valid_sessiond_item_with_a_unique_deterministic_id() -> None:
    items = all_items(a_turn(source.ThreadRecorder(IDLE)))
    for item in items:
        model = SERVER_MODELS.get(item["type"])
        if model is not None:
            model.model_validate(item)
        else:
            assert item["type"] not in SERVER_ITEM_TYPES
            RECORDABLE_ITEM_ADAPTER.validate_python(item)
    ids = [item["id"] for item in items]
    assert len(ids) == len(set(ids))
    assert ids == [item["id"] for item in all_items(a_turn(source.ThreadRecorder(IDLE)))]


def test_chunks_merge_per_message_and_the_subsystems_see_the_turn() -> None:
    items = all_items(a_turn(source.ThreadRecorder(IDLE)))
    messages = [
        (m["role"], m.get("thought"), m["content"][0]["text"])
        for m in items
        if m["type"] == "message"
    ]
    assert messages == [
        ("user", None, "change a.txt"),
        ("assistant", True, "hmm ok"),
        ("assistant", None, "Changing."),
        ("assistant", None, "Second message"),  # another messageId: another message
    ]
    seqd = [{**item, "seq": n} for n, item in enumerate(items, 1)]
    states = ThreadState().apply_all(seqd).states
    assert states["cost"]["usd"] == 0.75  # cumulative 0.5 then 0.75: counted once
    assert (states["cost"]["inputTokens"], states["cost"]["outputTokens"]) == (7, 3)
    assert states["todos"]["items"] == [
        {"id": "0", "content": "x", "status": "pending", "priority": "low"}
    ]
    assert states["permissions"]["approvalMode"] == "bypassPermissions"
    assert states["file_history"]["latest"]["/w/a.txt"]["afterSha"] == source.sha_of(b"b\n")
    assert states["attribution"]["files"]["/w/a.txt"] == {
        "agent": 1,
        "user": 0,
        "lastAuthor": "agent",
        "approved": 1,
    }
    assert states["operations"] == {"open": {}, "closed": {f"{TURN}:c1": "committed"}}
    operations = [i["state"] for i in items if i["type"] == "operation"]
    assert operations == ["planned", "started", "committed"]  # a content-only step is raw only


def test_raw_updates_replay_exactly_what_was_forwarded_and_parse_as_acp() -> None:
    items = all_items(a_turn(source.ThreadRecorder(IDLE)))
    replayed = list(source.replay(items))
    prompt_id = replayed[0]["update"].get("messageId")  # the same in every replay: a cursor
    assert prompt_id == next(iter(source.replay(items)))["update"]["messageId"]
    assert replayed[0] == {
        "update": {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "change a.txt"},
            "messageId": prompt_id,
        }
    }
    assert {
        "update": {"sessionUpdate": "current_mode_update", "currentModeId": "bypassPermissions"},
        "_meta": {"k": 1},
    } in replayed
    for params in replayed:
        SessionNotification.model_validate({"sessionId": TURN, **params})


def test_a_turn_cut_short_is_recovered_from_its_raw_updates_without_duplicates() -> None:
    steps = a_turn(source.ThreadRecorder(IDLE))[:-1]  # the turn never ended
    written = all_items(steps)
    # What a crash keeps: every raw update, but not a message still open at the crash.
    on_disk = [i for i in written if i["type"] != "message" or i["id"].endswith(":prompt")]
    recovered = source.recover([{**i, "seq": n} for n, i in enumerate(on_disk, 1)], IDLE)
    new = [i for i in recovered.items if i["id"] not in {w["id"] for w in on_disk}]
    assert sorted(i["id"] for i in new) == sorted(
        [i["id"] for i in written if i["type"] == "message" and not i["id"].endswith(":prompt")]
        + [f"{TURN}:end"]
    )
    end = next(i for i in new if i["type"] == "turn")
    assert (end["phase"], end["continueReason"]) == ("interrupted", "process_recovery")
    finished = [{**i, "seq": n} for n, i in enumerate(on_disk + new, 1)]
    assert source.recover(finished, IDLE).items == []  # nothing left to recover


def test_a_rejected_or_unanswered_permission_is_not_an_approval() -> None:
    recorder = source.ThreadRecorder(IDLE)
    recorder.begin_turn(TURN, [])
    options = [{"optionId": "n", "name": "No", "kind": "reject_once"}]
    request = {"toolCall": {"toolCallId": "c", "locations": [{"path": "/p"}]}, "options": options}
    rejected = recorder.permission(request, {"outcome": {"outcome": "selected", "optionId": "n"}})
    cancelled = recorder.permission(request, {"outcome": {"outcome": "cancelled"}})
    failed = recorder.permission(request, None, {"code": -1, "message": "gone"})
    decisions = [r.items[0] for r in (rejected, cancelled, failed)]
    assert [(d["outcome"], d["allowed"]) for d in decisions] == [
        ("selected", False),
        ("cancelled", False),
        ("cancelled", False),
    ]
    assert decisions[0]["optionKind"] == "reject_once" and decisions[0]["paths"] == ["/p"]


def test_a_file_write_and_the_same_diff_make_one_edit() -> None:
    recorder = source.ThreadRecorder(IDLE)
    recorder.begin_turn(TURN, [])
    diff = {"type": "diff", "path": "/w/f", "oldText": None, "newText": "new"}
    recorder.update(
        {
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "c",
                "title": "W",
                "kind": "edit",
                "status": "in_progress",
            }
        }
    )
    written = recorder.file_write("/w/f", None, "new")
    completed = recorder.update(
        {
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c",
                "status": "completed",
                "content": [diff],
            }
        }
    )
    edits = [i for i in written.items + completed.items if i["type"] == "file_edit"]
    assert len(edits) == 1
    assert edits[0]["operationId"] == f"{TURN}:c" and "beforeSha" not in edits[0]
    assert written.blobs == {source.sha_of(b"new"): b"new"}


def test_the_proxy_answers_parse_as_acp_and_keep_what_agent_said() -> None:
    agent = {
        "protocolVersion": 1,
        "agentCapabilities": {
            "promptCapabilities": {"image": True},
            "sessionCapabilities": {"fork": {}, "close": {"_meta": {"x": 1}}},
        },
        "_meta": {"agent": True},
    }
    answer = InitializeResponse.model_validate(source.advertise(agent, "9"))
    sessions = answer.agent_capabilities.session_capabilities
    assert answer.agent_capabilities.load_session is True
    assert None not in (
        sessions.list,
        sessions.resume,
        sessions.close,
        sessions.delete,
        sessions.fork,
    )
    assert sessions.close.field_meta == {"x": 1}
    assert answer.field_meta["agent"] is True
    info = SessionInfo.model_validate(
        source.session_info(
            {
                "threadId": "t",
                "cwd": "/w",
                "title": None,
                "preview": "p",
                "updatedAt": "2026-01-01T00:00:00Z",
            }
        )
    )
    assert (info.session_id, info.title) == ("t", "p")


def test_upstream_paths_prefer_load_then_resume_then_a_primed_new_session() -> None:
    assert source.upstream_paths({"sessionCapabilities": {"resume": {}}, "loadSession": True}) == [
        "load",
        "resume",
        "new",
    ]
    assert source.upstream_paths({"sessionCapabilities": {"resume": {}}}) == ["resume", "new"]
    assert source.upstream_paths({}) == ["new"]
    history = [
        {"type": "message", "role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "thought": True, "content": "secret thinking"},
        {"type": "message", "role": "assistant", "content": "hello"},
    ]
    block = source.priming_block(history)
    assert block is not None and "hi" in block["text"] and "hello" in block["text"]
    assert "secret thinking" not in block["text"]
    assert source.priming_block([]) is None


def _spoken(turns: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for turn, prompt, answer in turns:
        items.append({"type": "message", "role": "user", "origin": "acp", "turnId": turn,
                      "content": [{"type": "text", "text": prompt}]})  # fmt: skip
        items.append({"type": "message", "role": "assistant", "origin": "acp", "turnId": turn,
                      "content": [{"type": "text", "text": answer}]})  # fmt: skip
    return items


def test_lost_turns_are_those_an_agents_replay_does_not_have() -> None:
    items = _spoken([("t1", "first", "one"), ("t2", "second", "two"), ("t3", "third", "three")])

    def lost(replayed: list[tuple[str, str]]) -> list[str]:
        kept = source.lost_turns(items, replayed)
        return sorted({i["turnId"] for i in kept})

    everything = [("user", "first"), ("assistant", "o"), ("assistant", "ne"),
                  ("user", "[sessiond] primed...\nsecond"), ("assistant", "two"),
                  ("user", "third"), ("assistant", "three")]  # fmt: skip
    assert lost(everything) == []  # chunks merged; a prompt wrapped in priming still counts
    assert lost(everything[:5]) == ["t3"]
    assert lost(everything[:4]) == ["t2", "t3"]  # the turn's end is gone: the turn too
    assert lost([]) == ["t1", "t2", "t3"]
