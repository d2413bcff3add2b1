"""`sessiond mcp`: the threads as MCP tools an agent calls to look up its own past.

Invariant: read-only (no thread is written, no session opened), scoped to the folders the
agent was started for unless told otherwise, and every answer is the store's redacted
records; nothing here is imported by `sessiond serve`.
"""
