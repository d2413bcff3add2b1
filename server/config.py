"""Server settings: embedded defaults, overridden by environment and command-line flags.

Each setting is checked where it is read, at start: a value sessiond does not know is one
line naming the setting and what it takes (`sessiond: SESSIOND_DURABILITY is one of fsync,
group, none, not 'bogus'`) and exit code 2, never a server that advertises it in
`initialize` and then fails every request.

Read by every spawn before its first answer, so it imports nothing heavy: a plain class,
not a dataclass, and the default data directory worked out without pathlib."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    from restore.stores import Settings

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
"""The largest message accepted (`--max-frame`; server/rpc/framing.py enforces it)."""
DURABILITIES = ("fsync", "group", "none")
REDACTIONS = ("off", "default", "strict")


def parse_follow(value: str) -> tuple[str, ...]:
    """`claude,codex,gemini` → the agents whose sessions `serve` imports and follows live."""
    from protocol.agents import AGENT_FLAGS  # only when asked to follow: dataclasses

    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    unknown = [name for name in names if name not in AGENT_FLAGS]
    if unknown:
        raise ValueError(
            f"cannot follow {', '.join(unknown)} (choose from {', '.join(AGENT_FLAGS)})"
        )
    return names


def one_of(name: str, value: str, known: tuple[str, ...]) -> str:
    """`value` if it is one of `known`, else ValueError naming the setting and the choices."""
    if value not in known:
        raise ValueError(f"{name} is one of {', '.join(known)}, not {value[:40]!r}")
    return value


def default_home() -> str:
    """`$SESSIOND_HOME`, else `$XDG_STATE_HOME/sessiond`, else `~/.local/state/sessiond`:
    restore.home.layout's `default_home` as a string, without importing pathlib
    (tests/test_cli_quick.py holds them equal)."""
    if (home := os.environ.get("SESSIOND_HOME")) is not None:
        if not home.strip():
            raise ValueError(
                "SESSIOND_HOME is set but empty: name a directory, or unset it for the "
                "default ($XDG_STATE_HOME/sessiond or ~/.local/state/sessiond)"
            )
        return path_text(home)
    if xdg := os.environ.get("XDG_STATE_HOME"):
        return _joined(path_text(xdg), "sessiond")
    return _joined(path_text(os.path.expanduser("~")), ".local/state/sessiond")


def path_text(text: str) -> str:
    """`str(Path(text))` on POSIX: empty and `.` parts dropped, `..` kept, one or two
    leading slashes kept (three or more are one)."""
    root = "/" if text.startswith("/") else ""
    if text.startswith("//") and not text.startswith("///"):
        root = "//"
    return root + "/".join(part for part in text.split("/") if part not in ("", ".")) or "."


def _joined(base: str, name: str) -> str:
    """`str(Path(base) / name)` for a `base` from `path_text`."""
    return name if base == "." else base + name if base.endswith("/") else f"{base}/{name}"


class ServerConfig:
    """What `serve`, `acp` and every command were asked for."""

    def __init__(
        self,
        home: str | None = None,
        durability: str | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        store: str | None = None,
        redact: str | None = None,
        follow: tuple[str, ...] = (),
    ) -> None:
        self.home: str = home if home is not None else default_home()
        self.durability: str = durability or os.environ.get("SESSIOND_DURABILITY", "fsync")
        self.max_frame = max_frame
        self.store: str | None = store or os.environ.get("SESSIOND_STORE") or None
        """A `postgresql://` URL for the shared store; None: the embedded store under `home`."""
        self.redact: str | None = redact or os.environ.get("SESSIOND_REDACT") or None
        """off | default | strict: secrets redacted before storage (None: the home's
        redaction.toml, else default; restore/redaction/settings.py)."""
        self.follow = follow
        """Agents whose session stores are imported and followed once a client lists
        threads."""
        # The environment's values checked as they are read (flags are argparse's).
        one_of("SESSIOND_DURABILITY", self.durability, DURABILITIES)
        if self.redact is not None:
            one_of("SESSIOND_REDACT", self.redact, REDACTIONS)

    def store_settings(
        self, *, durability: str = "fsync", home: str | None = None, shared: bool = True
    ) -> Settings:
        """Where threads are kept and how, from these settings: what the server, `sessiond
        acp`, `sessiond mcp` and every command open their store with. `durability`: a
        command's writes are fsync'ed whatever a server was started with (the server and
        the ACP proxy pass theirs); `home`: another data directory; `shared` False: its
        embedded store even when a `postgresql://` URL is configured (`doctor`)."""
        from pathlib import Path

        from restore.stores import Settings
        from restore.stores.api import Durability

        store = self.store if shared else None
        return Settings(Path(home or self.home), store, Durability(durability), self.redact)
