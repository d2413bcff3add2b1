"""The answers the proxy gives itself: the capabilities it advertises, the sessions and
turns it knows from the store, the state it shows, and what a drift notice says."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from restore.sources.acp.replay import _text_of
from restore.sources.acp.shapes import PROBE, SESSION_CAPABILITIES, _clean


def advertise(result: dict[str, Any], version: str) -> dict[str, Any]:
    """AGENT's `initialize` answer as the editor gets it: its capabilities plus session
    loading, listing, resuming, closing, deleting and forking (unstable), which sessiond
    answers itself (a fork is AGENT's own when it offers one, else emulated), and
    `_meta.sessiond.sessionMethods`: how sessiond answers fork, its rename extension, and
    the `replayFrom` cursors `session/resume` takes (the ACP v2 draft's shape)."""
    capabilities = dict(result.get("agentCapabilities") or {})
    offered = dict(capabilities.get("sessionCapabilities") or {})
    sessions = dict(offered)
    for name in (*SESSION_CAPABILITIES, "fork"):
        sessions[name] = sessions.get(name) or {}
    capabilities["loadSession"] = True
    capabilities["sessionCapabilities"] = sessions
    meta = dict(result.get("_meta") or {})
    meta["sessiond"] = {
        "version": version,
        "agentCapabilities": result.get("agentCapabilities"),
        "sessionMethods": {
            "fork": "agent" if offered.get("fork") is not None else "emulated",
            "rename": "_sessiond/session/rename",
            "replayFrom": ["start", "_sessiond/message"],
        },
    }
    return {**result, "agentCapabilities": capabilities, "_meta": meta}


def upstream_paths(agent_capabilities: dict[str, Any]) -> list[str]:
    """How to reach AGENT's old session again, best first: its `session/load` (its replay
    held back, and compared with sessiond's record: `lost_turns`), its `session/resume`,
    else a new session primed with the history. Load before resume: an agent's own store
    can lag behind what it showed (Claude Code writes its transcript a moment after a
    turn), and only a replay says what it kept."""
    sessions = agent_capabilities.get("sessionCapabilities") or {}
    paths = []
    if agent_capabilities.get("loadSession") is True:
        paths.append("load")
    if isinstance(sessions, dict) and sessions.get("resume") is not None:
        paths.append("resume")
    return [*paths, "new"]


def replay_texts(update: dict[str, Any]) -> tuple[str, str] | None:
    """What `lost_turns` keeps of an update of AGENT's own replay: who spoke, and the
    text (None for anything else)."""
    kind = update.get("sessionUpdate")
    if kind not in ("user_message_chunk", "agent_message_chunk"):
        return None
    text = _text_of([update.get("content")])
    return ("user" if kind == "user_message_chunk" else "assistant", text) if text else None


def lost_turns(
    items: list[dict[str, Any]],
    replayed: list[tuple[str, str]],
    redact: Callable[[str], str] | None = None,
) -> list[dict[str, Any]]:
    """The recorded turns AGENT's session no longer has, judged from its own replay
    (`replay_texts` of each update, in order): every turn after the last one whose prompt
    it replayed, and that one too when its last answer is not in the replay (the agent
    lost the turn's end). Returns those turns' items, to prime its next prompt with.
    `redact`: the store's (the record holds redacted prompts; the agent's replay does not,
    and a turn with a secret must not look lost for it)."""
    said: list[tuple[str, str]] = []
    for role, text in replayed:  # chunks merged per speaker
        if said and said[-1][0] == role:
            said[-1] = (role, said[-1][1] + text)
        else:
            said.append((role, text))
    if redact is not None:
        said = [(role, redact(text)) for role, text in said]
    turns: list[tuple[str, str, str]] = []  # (turn id, prompt, last answer)
    for item in items:
        turn = item.get("turnId")
        if item.get("type") != "message" or not isinstance(turn, str) or item.get("thought"):
            continue
        text = _text_of(item.get("content")).strip()
        if item.get("role") == "user" and item.get("origin") == "acp":
            turns.append((turn, text, ""))
        elif item.get("role") == "assistant" and turns and turns[-1][0] == turn and text:
            turns[-1] = (turn, turns[-1][1], text)
    kept = 0
    at = 0
    for _, prompt, _ in turns:
        probe = prompt[:PROBE]  # (the replay's text may wrap it: priming, hook context)
        found = next(
            (n for n in range(at, len(said)) if said[n][0] == "user" and probe in said[n][1]),
            None,
        )
        if found is None:
            break
        kept, at = kept + 1, found + 1
    if kept:
        answer = turns[kept - 1][2][:PROBE]
        after = "".join(text for role, text in said[at:] if role == "assistant")
        if answer and answer not in after:
            kept -= 1
    lost = {turn for turn, _, _ in turns[kept:]}
    return [item for item in items if item.get("turnId") in lost or item.get("scope") in lost]


def session_state(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The modes, models and config options the editor was last shown for the thread:
    AGENT's last session answer, with the mode and config updates that came after it. A
    load answers with them before AGENT's session is reached again (that can take seconds)."""
    state: dict[str, Any] = {}
    for item in items:
        kind = item.get("type")
        if kind == "acp_session" and isinstance(item.get("session"), dict):
            state = json.loads(json.dumps(item["session"]))
        elif kind == "acp_update" and isinstance(item.get("update"), dict):
            update = item["update"]
            if update.get("sessionUpdate") == "current_mode_update" and isinstance(
                state.get("modes"), dict
            ):
                state["modes"]["currentModeId"] = update.get("currentModeId")
            elif update.get("sessionUpdate") == "config_option_update" and isinstance(
                update.get("configOptions"), list
            ):
                state["configOptions"] = update["configOptions"]
    return state


def state_changes(shown: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The updates that bring an editor shown `shown` (`session_state`) to AGENT's actual
    `answer`: its current mode and its config options, where they differ."""
    updates: list[dict[str, Any]] = []
    mode = (
        answer.get("modes", {}).get("currentModeId")
        if isinstance(answer.get("modes"), dict)
        else None
    )
    was = (
        shown.get("modes", {}).get("currentModeId")
        if isinstance(shown.get("modes"), dict)
        else None
    )
    if isinstance(mode, str) and mode != was:
        updates.append({"sessionUpdate": "current_mode_update", "currentModeId": mode})
    options = answer.get("configOptions")
    if isinstance(options, list) and options != shown.get("configOptions"):
        updates.append({"sessionUpdate": "config_option_update", "configOptions": options})
    return updates


def drift_summary(environment: dict[str, Any]) -> str:
    """Where the thread was recorded and where this workspace is, in words, from a
    RestoreReport's `environment`: "Recorded on branch main in /repo-a; this workspace is
    on branch feature in /repo-a"."""
    recorded = environment.get("recorded") or {}
    current = environment.get("current") or {}
    changed = [
        f"{d.get('field')}: {d.get('recorded')} → {d.get('current')}"
        for d in environment.get("drift") or []
        if isinstance(d, dict) and d.get("field") not in ("branch", "cwd")
    ]
    text = f"Recorded {_where(recorded)}; this workspace is {_where(current)}"
    return text + (f" ({'; '.join(changed)})" if changed else "")


def _where(environment: dict[str, Any]) -> str:
    if environment.get("branch"):
        place = f"on branch {environment['branch']}"
    elif environment.get("headSha"):
        place = f"at commit {str(environment['headSha'])[:12]}"
    elif environment.get("repoRoot"):
        place = "in a repository"
    else:
        place = "outside any repository"
    return f"{place} in {environment.get('cwd') or '?'}"


def session_info(thread: dict[str, Any]) -> dict[str, Any]:
    """A ThreadInfo as an ACP `SessionInfo` (the session id is the thread id)."""
    info = {
        "sessionId": thread["threadId"],
        "cwd": thread.get("cwd") or "/",
        "title": thread.get("title") or thread.get("preview") or None,
        "updatedAt": thread.get("updatedAt"),
        "_meta": {
            "sessiond": _clean(
                {
                    "branch": thread.get("branch"),
                    "itemCount": thread.get("itemCount"),
                    "origin": thread.get("origin"),
                    "preview": thread.get("preview") or None,
                }
            )
        },
    }
    return _clean(info)
