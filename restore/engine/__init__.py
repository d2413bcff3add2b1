"""Judging a thread against the world: the eleven subsystems' reducers, the git probe and the
validators' verdict. Invariant: no thread storage here; the world is seen only through the
environment probe and `restore.access`."""
