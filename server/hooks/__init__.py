"""Lifecycle hooks (SessionStart, SessionEnd).

Invariant: no hook config is read and no hook runs before a session needs one; nothing from an
untrusted folder executes.
"""
