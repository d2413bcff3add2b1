"""Secrets redacted before anything is stored. Invariant: every item reaches a store
through `stamp` (restore/stores/api.py) and every blob through `put_blob`, and both
redact with the store's `Redactor` first; what the editor and the agent exchange live is
never changed here (docs/security.md, redaction)."""
