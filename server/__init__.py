"""Transports, JSON-RPC dispatch, sessions seen from clients, lifecycle hooks, CLI.

Invariant: a handler unpacks params, calls `restore`, shapes the answer; it never decides
what is stored. Nothing is loaded before a request needs it (docs/architecture.md).
"""

__version__ = "0.1.0"
"""The one place the version is written: pyproject.toml reads it, `--version` prints it."""
