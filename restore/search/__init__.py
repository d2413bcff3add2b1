"""Search over every thread's text: the query language, what of a record is searchable,
snippets with highlights. Invariant: pure (no I/O, no database), so both stores answer
the same query alike: each backend only finds and ranks (restore/stores/api.SearchIndex);
what a hit shows is computed here from the record's text."""
