"""The ACP front door (`sessiond acp -- AGENT`).

Invariant: what either side sends is forwarded in arrival order, and recorded before it is
forwarded.
"""
