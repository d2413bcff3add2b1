"""Usage reports (`sessiond usage`, `usage/report`). Invariant: the calls come summed from
the store's `Index.usage` (request.py asks it), and the report is made from them by pure
functions (report.py), so both stores answer alike. The one read of storage here is
index_file.py: the embedded index's file read on its own when it needs no catching up, so
that a `sessiond usage` spawn imports no store (restore/stores/ imports its query from
there, so the two read the same rows alike)."""
