"""Server settings: embedded defaults, overridden by environment and command-line flags.

Each setting is checked where it is read, at start: a value sessiond does not know is one
line naming the setting and what it takes (`sessiond: SESSIOND_DURABILITY is one of fsync,
group, none, not 'bogus'`) and exit code 2, never a server that advertises it in
`initialize` and then fails every request."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from protocol.agents import AGENT_FLAGS
from restore.home.layout import default_home
from server.rpc.framing import DEFAULT_MAX_FRAME

FOLLOWABLE = AGENT_FLAGS
DURABILITIES = ("fsync", "group", "none")
REDACTIONS = ("off", "default", "strict")


def parse_follow(value: str) -> tuple[str, ...]:
    """`claude,codex,gemini` → the agents whose sessions `serve` imports and follows live."""
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    unknown = [name for name in names if name not in FOLLOWABLE]
    if unknown:
        raise ValueError(f"cannot follow {', '.join(unknown)} (choose from "
                         f"{', '.join(FOLLOWABLE)})")  # fmt: skip
    return names


def one_of(name: str, value: str, known: tuple[str, ...]) -> str:
    """`value` if it is one of `known`, else ValueError naming the setting and the choices."""
    if value not in known:
        raise ValueError(f"{name} is one of {', '.join(known)}, not {value[:40]!r}")
    return value


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

    def __post_init__(self) -> None:
        """The environment's values checked as they are read (flags are argparse's)."""
        one_of("SESSIOND_DURABILITY", self.durability, DURABILITIES)
        if self.redact is not None:
            one_of("SESSIOND_REDACT", self.redact, REDACTIONS)
