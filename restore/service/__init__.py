"""The thread service the server calls: sessions, leases, resume reports, ledger, edits.
Invariant: talks to storage only through `restore.stores.api`."""
