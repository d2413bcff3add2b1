"""Live state shown to clients: subscriptions, the relay, watching other processes.

Invariant: followers get every item once, in seq order, whichever process wrote it.
"""
