"""The PostgreSQL store: threads shared by every sessiond on one database. Invariant:
psycopg is imported only under this package, and only for a `postgresql://` store."""
