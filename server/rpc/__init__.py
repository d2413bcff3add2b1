"""JSON-RPC: framing, dispatch, typed errors, progress.

Invariant: sans-IO framing, and every failure reaches the client as an error with `data.kind`.
"""
