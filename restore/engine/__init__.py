"""Judging a thread against the world: the eleven subsystems' reducers, the git probe and the
validators' verdict. Invariant: no thread storage here; the world is seen only through the
environment probe and `restore.access`."""

SUBSYSTEM_NAMES: tuple[str, ...] = (
    "worktree",
    "permissions",
    "model_override",
    "prompt_sections",
    "messages",
    "todos",
    "file_history",
    "attribution",
    "cost",
    "operations",
    "verifier",
)
"""The subsystems in restore order, by name: what `initialize` announces, here so that the
handshake imports none of them (restore/engine/subsystems checks the two agree)."""
