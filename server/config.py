"""Server settings: embedded defaults, overridden by environment and command-line flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from protocol.agents import AGENT_FLAGS
from restore.home.layout import default_home
from server.rpc.framing import DEFAULT_MAX_FRAME

FOLLOWABLE = AGENT_FLAGS


def parse_follow(value: str) -> tuple[str, ...]:
    """`claude,codex,gemini` → the agents whose sessions `serve` imports and follows live."""
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    unknown = [name for name in names if name not in FOLLOWABLE]
    if unknown:
        raise ValueError(f"cannot follow {', '.join(unknown)} (choose from "
                         f"{', '.join(FOLLOWABLE)})")  # fmt: skip
    return names


@dataclass
class ServerConfig:
    home: str = field(default_factory=lambda: str(default_home()))
    durability: str = field(default_factory=lambda: os.environ.get("SESSIOND_DURABILITY", "fsync"))
    max_frame: int = DEFAULT_MAX_FRAME
    store: str | None = field(default_factory=lambda: os.environ.get("SESSIOND_STORE") or None)
    """A `postgresql://` URL for the shared store; None: the embedded store under `home`."""
    redact: str | None = field(default_factory=lambda: os.environ.get("SESSIOND_REDACT") or None)
    """off | default | strict: secrets redacted before storage (None: the home's
    redaction.toml, else default; restore/redaction/settings.py)."""
    follow: tuple[str, ...] = ()
    """Agents whose session stores are imported and followed once a client lists threads."""
