"""The durable state engine: thread files, index, summaries (later: snapshots, subsystems).

Invariant: knows nothing of JSON-RPC or transports; imports only `protocol` and the stdlib
(and runs the `git` command, hardened: restore/gitcli.py). The JSONL thread files are the
ground truth; everything else here (the SQLite index, summaries) is derived and can be
thrown away and rebuilt.
"""
