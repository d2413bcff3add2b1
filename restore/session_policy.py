"""Which freshness policy a session key is judged by: the home's `sessions.toml`, read and
checked here (one small module, so one settings object can take it in later).

    # $SESSIOND_HOME/sessions.toml
    reset = "daily"              # the default: none | daily | idle | both (none if unset)
    atHour = 4                   # daily: the local hour a day begins
    idleMinutes = 120            # idle: minutes without activity (0: never)
    timezone = "Europe/Berlin"   # atHour's zone (default: the machine's)
    [carry]                      # what a reset carries to the new thread
    model = true
    permissions = true
    todos = false

    [clients.openclaw]           # a client (its initialize clientInfo.name): over the default
    reset = "idle"
    idleMinutes = 30

    [prefixes."direct:"]         # keys starting with this: over the client's; a longer
    reset = "both"               # prefix over a shorter one
    idleMinutes = 60

A `thread/continue` call's own `policy` goes over all of these, field by field. A file that
does not parse, a key it does not know, a value out of shape or a zone that does not exist
is one InvalidParams naming the file and the key: no key is judged by a policy the person
did not write. The file is read again when it changes (its size, mtime or inode), never
before the first `thread/continue` (no warmup).
"""

from __future__ import annotations

import os
import threading
import tomllib
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from protocol.errors import ErrorKind, ProtocolError
from restore.engine.freshness import Policy, PolicyError, overridden
from restore.home.files import read_regular

CONFIG_NAME = "sessions.toml"
POLICY_KEYS = ("reset", "atHour", "idleMinutes", "carry")
TABLES = ("clients", "prefixes")
LOCALTIME = Path("/etc/localtime")


@dataclass(frozen=True)
class SessionSettings:
    default: dict[str, Any] = field(default_factory=dict)
    """The top level's policy fields, as written (checked)."""
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    prefixes: dict[str, dict[str, Any]] = field(default_factory=dict)
    zone: tzinfo | None = None
    zone_name: str | None = None

    def policy(self, key: str, client: str | None, asked: dict[str, Any] | None) -> Policy:
        """The key's policy: the default, the client's, each matching prefix's (shortest
        first), then the call's `asked` fields. `asked` out of shape is the client's
        InvalidParams (`policy.<field>`); the file's were checked when it was read."""
        policy = overridden(Policy(), self.default)
        if client is not None and client in self.clients:
            policy = overridden(policy, self.clients[client])
        for prefix in sorted((p for p in self.prefixes if key.startswith(p)), key=len):
            policy = overridden(policy, self.prefixes[prefix])
        if asked:
            try:
                policy = overridden(policy, asked)
            except PolicyError as exc:
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS, f"policy.{exc.key}: {exc}", field=f"policy.{exc.key}"
                ) from None
        return policy


def _refuse(path: Path, key: str, message: str) -> ProtocolError:
    where = f"{path}: {key}: " if key else f"{path}: "
    return ProtocolError(ErrorKind.INVALID_PARAMS, where + message, field=CONFIG_NAME, key=key)


def parse(path: Path, text: str) -> SessionSettings:
    """The settings `text` (the file at `path`) holds, checked whole."""
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _refuse(path, "", f"not TOML: {exc}") from None
    default: dict[str, Any] = {}
    zone = zone_name = None
    tables: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in TABLES}
    for key, value in config.items():
        if key in POLICY_KEYS:
            default[key] = value
        elif key == "timezone":
            zone_name = value
            zone = _zone(path, value)
        elif key in TABLES:
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise _refuse(path, key, f'{key} holds tables: [{key}."NAME"]')
            tables[key] = value
        else:
            known = ", ".join((*POLICY_KEYS, "timezone", *TABLES))
            raise _refuse(path, key, f"unknown key (it knows {known})")
    _checked(path, "", default)
    for table, entries in tables.items():
        for name, fields in entries.items():
            _checked(path, f"{table}.{_quoted(name)}", fields)
    return SessionSettings(default, tables["clients"], tables["prefixes"], zone, zone_name)


def _checked(path: Path, where: str, fields: dict[str, Any]) -> None:
    try:
        overridden(Policy(), fields)
    except PolicyError as exc:
        raise _refuse(path, f"{where}.{exc.key}" if where else exc.key, str(exc)) from None


def _quoted(name: str) -> str:
    bare = name and all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
    return name if bare else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _zone(path: Path, name: object) -> ZoneInfo:
    if not isinstance(name, str):
        raise _refuse(path, "timezone", "timezone is an IANA zone name, e.g. Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise _refuse(path, "timezone", f"no time zone {name!r} (an IANA name)") from None


def local_zone() -> tuple[tzinfo, str]:
    """The machine's time zone and its name, as `date` would use it: `$TZ` (a zone name),
    else /etc/localtime, else UTC. Written here rather than taken from tzlocal: these ten
    lines are all of it sessiond needs on Linux and macOS (zoneinfo reads the files)."""
    name = os.environ.get("TZ", "").removeprefix(":")
    if name:
        try:
            return ZoneInfo(name), name
        except (ZoneInfoNotFoundError, ValueError):
            pass  # a POSIX rule string, or a typo: the system's zone, as far as we can tell
    try:
        target = os.readlink(LOCALTIME)
        name = target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else ""
        if name:
            return ZoneInfo(name), name
    except (OSError, ZoneInfoNotFoundError, ValueError):
        pass
    try:
        with open(LOCALTIME, "rb") as file:
            return ZoneInfo.from_file(file, key="localtime"), "localtime"
    except (OSError, ValueError):
        return ZoneInfo("UTC"), "UTC"


class SettingsFile:
    """The home's sessions.toml, read again only when it changed."""

    def __init__(self, home: Path) -> None:
        self.path = home / CONFIG_NAME
        self._seen: tuple[int, int, int] | None = None
        self._settings = SessionSettings()
        self._lock = threading.Lock()

    def current(self) -> SessionSettings:
        with self._lock:
            try:
                found = os.stat(self.path)
            except FileNotFoundError:
                self._seen, self._settings = None, SessionSettings()
                return self._settings
            except OSError as exc:
                raise _refuse(self.path, "", f"cannot be read: {exc.strerror}") from None
            identity = (found.st_ino, found.st_size, found.st_mtime_ns)
            if identity != self._seen:
                try:
                    text = read_regular(self.path).decode()
                except (OSError, UnicodeDecodeError) as exc:
                    raise _refuse(self.path, "", f"cannot be read: {exc}") from None
                self._settings = parse(self.path, text)
                self._seen = identity
            return self._settings
