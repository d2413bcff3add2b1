"""The data directory (`--home`): where each file lives, how it is created and whether it
can be used. Invariant: the layout on disk is derived from ids alone, and every file here is
created private (0700/0600), whichever store keeps the threads."""
