"""The sessiond wire contract: models, method names, error codes, item types, JSON Schema.

Invariant: no I/O, no asyncio, no imports from `restore` or `server`. Importable anywhere.
"""

PROTOCOL_VERSION = 1
