"""ACP (Agent Client Protocol v1) messages in, sessiond items out: the recording side of
`sessiond acp`, with no I/O.

One `ThreadRecorder` per thread the proxy has open. Each method takes what the proxy saw
on the wire (as plain dicts) and returns the items to append, plus the blobs (file
contents by sha256) those items name. The mapping onto the eleven subsystems:

- the user's prompt and agent message / thought chunks, merged per message → `message`
  (agents do not echo the prompt; a message ends when another kind of update, another
  `messageId` or the turn's end comes);
- `tool_call` / `tool_call_update` → `operation` (kind, status, locations, content; diffs
  by blob sha), one item each time its state moves forward;
- `plan` → `todos`; `usage_update` (cumulative cost) and the prompt response's `usage`
  → `cost`; `current_mode_update` → `permissions`; the model config option →
  `model_override`; `session_info_update` titles → `thread_title`;
- diffs of completed tool calls and `fs/write_text_file` → `file_edit` with blobs;
- `session/request_permission` outcomes → `permission_decision` (attribution).

Every update is also kept raw (`acp_update`), so a `session/load` replays exactly what
the editor was shown — but for two things: a `user_message_chunk` AGENT sent is the
agent's words, recorded and replayed as its own (the person's words are only what the
editor sent in `session/prompt`), and a tool call still open when its turn ended abnormally
is closed by a `failed` update made here, so no replay shows it running forever.

Item ids are deterministic: `<scope>:<tag><ord>`, where the scope is the turn (or the idle
span between turns) and `ord` the update's position in it, stored in the raw item. So a
turn cut short by a crash can be derived again from its raw items (`recover`), and
recording anything twice writes nothing new.

In this package: `shapes.py` (what is read, and the limits kept), `recorder.py` (the
recorder), `replay.py` (reading a thread back), `answers.py` (what the proxy answers
itself).
"""

from __future__ import annotations

from restore.sources.acp.answers import (
    advertise,
    drift_summary,
    lost_turns,
    replay_texts,
    session_info,
    session_state,
    state_changes,
    upstream_paths,
)
from restore.sources.acp.recorder import ThreadRecorder
from restore.sources.acp.replay import GONE, LOST, context_block, priming_block, recover, replay
from restore.sources.acp.shapes import (
    CHUNKS,
    OPEN_STATES,
    OPERATION_ID_MAX,
    PRIMING_LIMIT,
    PROBE,
    RANK,
    READ_ONLY_KINDS,
    SESSION_CAPABILITIES,
    SESSION_STATE,
    TODO_STATUSES,
    TOOL_FIELDS,
    TOOL_STATES,
    TOOL_TEXT_LIMIT,
    Recorded,
    sha_of,
)

__all__ = [
    "CHUNKS",
    "GONE",
    "LOST",
    "OPEN_STATES",
    "OPERATION_ID_MAX",
    "PRIMING_LIMIT",
    "PROBE",
    "RANK",
    "READ_ONLY_KINDS",
    "SESSION_CAPABILITIES",
    "SESSION_STATE",
    "TODO_STATUSES",
    "TOOL_FIELDS",
    "TOOL_STATES",
    "TOOL_TEXT_LIMIT",
    "Recorded",
    "ThreadRecorder",
    "advertise",
    "context_block",
    "drift_summary",
    "lost_turns",
    "priming_block",
    "recover",
    "replay",
    "replay_texts",
    "session_info",
    "session_state",
    "sha_of",
    "state_changes",
    "upstream_paths",
]
