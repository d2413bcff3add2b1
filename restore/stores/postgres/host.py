"""What the PostgreSQL store's parts (its index, pages, search, listener and writers) ask
of the store that made them. They are given the store and know it by this interface: the
store imports them, so they do not import it back (tests/test_layers.py: no import circle
in restore/). A writer asks more of it: restore/stores/postgres/writer.py `WriterHost`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor
    from restore.stores.postgres.connection import Connections
    from restore.summary import ThreadSummary


class StoreHost(Protocol):
    db: Connections
    """Its connections: the writer, the read pool, the listener's."""
    token: str
    """This process, in NOTIFY payloads (its own notifications are not news to it)."""

    @property
    def redactor(self) -> Redactor | None: ...

    def summaries(self, thread_ids: Sequence[str]) -> list[ThreadSummary]: ...

    def exists(self, thread_id: str) -> bool: ...

    def repo_of(self, folder: str) -> tuple[str, str] | None:
        """(repoId, the folder's path inside its repository) (SharedIndex.repo_of)."""
        ...
