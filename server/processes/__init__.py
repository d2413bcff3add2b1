"""Child processes: the reaper and the watchdog.

Invariant: no child outlives sessiond, even after a kill -9.
"""
