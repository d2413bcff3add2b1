"""Which redaction a home runs: the mode (`--redact`, `SESSIOND_REDACT`, else the home's
`redaction.toml`, else `default`), a user's extra patterns and allowlist (that file), and
the key fingerprints are made with (`redaction.key`, 0600, made on first use).

    # $SESSIOND_HOME/redaction.toml
    mode = "strict"                # off | default | strict
    allow = ["^sk_test_"]          # a secret matching one of these is kept
    [[patterns]]                   # more shapes: the first group is the secret
    kind = "internal-token"
    regex = "itk_[0-9a-f]{32}"
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.home.files import fsync_dir, read_regular, write_new

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor

logger = logging.getLogger("sessiond.redaction")

MODES = ("off", "default", "strict")
CONFIG_NAME = "redaction.toml"
KEY_NAME = "redaction.key"
KEY_BYTES = 32
KIND = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


@dataclass(frozen=True)
class RedactionSettings:
    mode: str = "default"
    patterns: tuple[tuple[str, str], ...] = ()
    """(kind, regex) of a user's own shapes."""
    allow: tuple[str, ...] = ()


def _refuse(message: str) -> ProtocolError:
    return ProtocolError(ErrorKind.INVALID_PARAMS, message, field="redaction")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise _refuse(f"redaction is one of off, default, strict, not {mode!r}")
    return mode


KNOWN = {
    "mode": "off | default | strict",
    "allow": "a list of regexes",
    "patterns": "[[patterns]] tables of kind and regex",
}
PATTERN_KEYS = ("kind", "regex")


def load_settings(home: Path, mode: str | None = None) -> RedactionSettings:
    """The home's redaction settings; `mode` (the flag or the environment) wins over the
    file's. A file that does not parse, a key or table it does not know (a typo:
    `[[pattern]]`, `modee`), a value of the wrong shape or a pattern that does not compile
    is one InvalidParams naming the file, the line and what it knows: nothing is stored
    unredacted because of a typo."""
    path = home / CONFIG_NAME
    try:
        text = read_regular(path).decode()
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise _refuse(f"{path} cannot be read: {exc}") from None
    config: dict[str, Any] = {}
    if text:
        import tomllib  # here: most homes have no redaction.toml

        try:
            config = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _refuse(f"{path} cannot be read: {exc}") from None
    _check_shape(path, text, config)
    chosen = check_mode(str(mode or config.get("mode", "default")))
    patterns: list[tuple[str, str]] = []
    for entry in config.get("patterns", ()):
        kind, regex = str(entry.get("kind", "custom")), entry.get("regex")
        if not KIND.fullmatch(kind) or not isinstance(regex, str):
            raise _refuse(f"{path}: a pattern needs a kind (a-z, 0-9, -) and a regex")
        _compiles(path, regex)
        patterns.append((kind, regex))
    allow = tuple(config.get("allow", ()))
    for regex in allow:
        _compiles(path, regex)
    return RedactionSettings(chosen, tuple(patterns), allow)


def _check_shape(path: Path, text: str, config: dict[str, object]) -> None:
    """Every key one the file may hold, every value of its shape."""
    knows = "; ".join(f"{key} ({what})" for key, what in KNOWN.items())
    for key, value in config.items():
        if key not in KNOWN:
            raise _refuse(f"{_where(path, text, key)}: unknown key {key!r}: it knows {knows}")
        if key == "mode" and not isinstance(value, str):
            raise _refuse(f"{_where(path, text, key)}: mode is a string ({KNOWN['mode']})")
        if key == "allow" and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise _refuse(f"{_where(path, text, key)}: allow is a list of regexes (strings)")
        if key == "patterns":
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise _refuse(f"{_where(path, text, key)}: patterns are [[patterns]] tables")
            for entry in value:
                for name in entry:
                    if name not in PATTERN_KEYS:
                        raise _refuse(
                            f"{_where(path, text, name)}: unknown key {name!r} in "
                            "[[patterns]]: a pattern has kind and regex"
                        )


def _where(path: Path, text: str, key: str) -> str:
    """`path, line N`: where `key` is first set or opens a table (tomllib keeps no
    positions, so the text is searched: a bare, quoted or dotted key, or a header)."""
    name = re.escape(key)
    found = re.compile(
        rf"^[ \t]*(\[\[?[ \t]*[\"']?{name}[\"']?[ \t]*[\].]|[\"']?{name}[\"']?[ \t]*[=.])",
        re.MULTILINE,
    ).search(text)
    return f"{path}, line {text.count(chr(10), 0, found.start()) + 1}" if found else str(path)


def _compiles(path: Path, regex: str) -> None:
    try:
        re.compile(regex)
    except re.error as exc:
        raise _refuse(f"{path}: {regex!r} is not a regular expression: {exc}") from None


def home_key(home: Path) -> bytes:
    """The home's fingerprint key, made (0600) on first use and put in place whole (a
    link to a finished file: a concurrent reader never sees half a key). A home that
    cannot be written (read-only: nothing is stored there) gets a key for this process."""
    import secrets

    path = home / KEY_NAME
    try:
        return read_regular(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("redaction key %s unreadable (%s): one for this process only", path, exc)
        return secrets.token_bytes(KEY_BYTES)
    made = home / f".{KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        write_new(made, secrets.token_bytes(KEY_BYTES), sync=True)
        try:
            os.link(made, path)
        except FileExistsError:
            pass  # another process made it first: that one is the key
        finally:
            os.unlink(made)
        fsync_dir(home)  # the key's name durable: a new key after a power cut would give
        return read_regular(path)  # every secret stored since other fingerprints
    except OSError:
        return secrets.token_bytes(KEY_BYTES)


def open_redactor(home: Path, mode: str | None = None) -> Redactor | None:
    """The redactor a store uses for this home (None: `off`)."""
    return deferred_redactor(home, mode).get()


def deferred_redactor(home: Path, mode: str | None = None) -> DeferredRedactor:
    """The home's redaction settings read now (a typo in redaction.toml refused before
    anything is stored), its redactor made by the first record or blob that needs it."""
    return DeferredRedactor(
        load_settings(home, mode or os.environ.get("SESSIOND_REDACT") or None), home
    )


class DeferredRedactor:
    """A store's redactor, made on first use. Making one parses and compiles every rule
    (gitleaks' ~200) and reads or makes the home's key: most of what a first `thread/list`
    used to cost a spawn (docs/benchmarks.md), for a listing that redacts nothing."""

    def __init__(self, settings: RedactionSettings, home: Path) -> None:
        self.settings, self._home = settings, home
        self._lock = threading.Lock()
        self._made: tuple[Redactor | None] | None = None

    def get(self) -> Redactor | None:
        with self._lock:
            if self._made is None:
                self._made = (redactor_for(self.settings, home_key(self._home)),)
            return self._made[0]


class RedactorSlot:
    """A store's `redactor` attribute: a `Redactor`, None (redaction off), or a
    `DeferredRedactor` set by `open_store`, made when first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = f"_{name}_slot"

    def __get__(self, store: object, owner: type | None = None) -> Redactor | None:
        value = store.__dict__.get(self._name) if store is not None else None
        return value.get() if isinstance(value, DeferredRedactor) else value

    def __set__(self, store: object, value: Redactor | DeferredRedactor | None) -> None:
        store.__dict__[self._name] = value


def redactor_for(settings: RedactionSettings, key: bytes) -> Redactor | None:
    if settings.mode == "off":
        return None
    from restore.redaction import rules
    from restore.redaction.engine import Redactor

    gitleaks, ours = rules.builtin()
    extra = tuple(rules.custom(kind, regex) for kind, regex in settings.patterns)
    redactor = Redactor(
        (*gitleaks.rules, *ours.rules, *extra),
        key,
        global_allow=gitleaks.global_allow,
        allow=settings.allow,
        strict=settings.mode == "strict",
    )
    redactor.rebuild = (received, (settings, key))
    return redactor


@functools.lru_cache(maxsize=4)
def received(settings: RedactionSettings, key: bytes) -> Redactor | None:
    """A redactor sent to another process (an import's parse worker gets one with every
    file): made there once, not once a file (building one costs ~4 ms)."""
    return redactor_for(settings, key)
