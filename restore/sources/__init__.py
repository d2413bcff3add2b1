"""Outside sources of items that are not an agent's store: the ACP front door.

Invariant: like `restore/engine/subsystems`, each module is pure: a source record (an ACP
message) in, sessiond items out, with deterministic item ids, so recording the same input
twice writes nothing new. What a source must remember between records is plain JSON
state. No I/O: the processes that spawn and proxy live in `server/acp/`, thin over these.
(Other agents' stores are read in `restore/agents/`.)
"""
