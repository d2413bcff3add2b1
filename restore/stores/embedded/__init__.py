"""The embedded store: JSONL thread files, the SQLite index, snapshots, offset maps and blobs
under one data directory. Invariant: the thread files are the ground truth; everything else
here is derived and may be deleted."""
