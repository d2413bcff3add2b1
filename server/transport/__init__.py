"""Bytes in and out: stdio, WebSocket, pipes, discovery files.

Invariant: every byte buffered per client is bounded; nothing here knows a method.
"""
