"""Child processes: the reaper, the watchdog, and dying with sessiond (parent.py).

Invariant: no child outlives sessiond, even after a kill -9.
"""
