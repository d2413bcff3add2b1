"""What a transport asks of the application it serves (server/app.py `SessiondServer`,
which the composition root hands it): connections made and ended, its settings, the
listeners a transport adds, and its stopping. By this interface, so that the transports
do not import the application (tests/test_layers.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio

    from server.config import ServerConfig
    from server.rpc.dispatch import SessiondProtocol


class Served(Protocol):
    config: ServerConfig
    loop: asyncio.AbstractEventLoop | None
    """Set by the transport that runs it: where other threads hand work back."""
    workspace_listeners: list[Callable[[], None]]
    """Told when a client's workspace folders change."""
    home_lost_listeners: list[Callable[[], None]]
    """Told when the data directory is found deleted."""

    def connect(self, send_bytes: Callable[[bytes], None]) -> SessiondProtocol: ...

    async def disconnect(self, connection: SessiondProtocol) -> None: ...

    def workspace_changed(self) -> None: ...

    def workspace_folders(self) -> list[str]: ...

    async def stop_watching(self) -> None: ...

    async def stop_hooks(self) -> None: ...

    def close(self) -> None: ...
