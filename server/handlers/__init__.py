"""Request handlers.

Invariant: a handler unpacks params, calls `restore` on the worker (or a reader), shapes the
answer; it never decides what is stored.
"""
