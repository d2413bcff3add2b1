"""Outside sources of items: one module per agent format, each a source record in, items out.

Invariant: pure. A module here turns one parsed record of another agent's transcript (a
Claude Code line, a Codex rollout line) into sessiond items with deterministic ids, and
keeps what it must remember between lines in a JSON-serializable state; reading files,
watching them and writing threads happen in `restore/importer.py`, beside them.
"""
