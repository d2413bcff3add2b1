"""The real agent CLIs and a model server of our own for them to talk to: the compatibility
suite's harness (tests/compat). Nothing here is sessiond; it is what sessiond reads."""
