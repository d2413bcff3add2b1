"""Outside sources of items (the ACP front door; the Claude Code, Codex and Gemini CLI
importers), one module per source.

Invariant: like `restore/engine/subsystems`, each module is pure: a source record (an ACP
message, a line of another agent's history) in, sessiond items out, with deterministic
item ids, so recording the same input twice writes nothing new. What a source must
remember between records is plain JSON state. No I/O: the processes that spawn, proxy,
watch or read files live beside them (`server/acp/`, `restore/imports/`,
`server/live/watch.py`), thin over these.
"""
