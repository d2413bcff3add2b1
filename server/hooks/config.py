"""Where lifecycle hooks come from: `hooks.json` files and `sessiond.hooks` entry points.

The file format is Claude Code's, so a user can copy a `SessionStart` block across:

    {"SessionStart": [{"matcher": "startup|resume",
                       "hooks": [{"type": "command", "command": "...", "timeout": 10}]}],
     "SessionEnd":   [{"matcher": "clear", "hooks": [...]}]}

(a `{"hooks": {...}}` wrapper, as in Claude Code's settings.json, is accepted too). The
matcher selects by lifecycle source for `SessionStart` and by end reason for `SessionEnd`.

Nothing here runs at import or at server start: a file is read the first time a lifecycle
event needs it, and read again only when its mtime or size changed. Reading happens on a
worker thread (server/hooks/lifecycle.py), and only a regular file is read.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from protocol.errors import ProtocolError
from restore.access import read_regular

logger = logging.getLogger("sessiond.hooks")

EVENTS = ("SessionStart", "SessionEnd")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
CONFIG_LIMIT = 1 << 20
"""A hooks.json larger than this is ignored (and logged)."""
ENTRY_POINT_GROUP = "sessiond.hooks"
_INTERPRETERS = re.compile(r"^(?:(?:ba|da|z|k)?sh|python[\d.]*|node|ruby|perl|uv|deno|bun)$")


@dataclass(frozen=True)
class HookSpec:
    """One configured hook: a shell command, or an in-process Python callable."""

    event: str
    matcher: str
    name: str
    origin: str  # "user", "workspace:<folder>" or "entry_point:<dist>"
    timeout: float
    command: str | None = None
    function: Callable[..., Any] | None = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        return "command" if self.command is not None else "python"

    def matches(self, value: str) -> bool:
        return matcher_accepts(self.matcher, value)


def matcher_accepts(matcher: str, value: str) -> bool:
    """Claude Code's matcher rules: empty or `*` accepts all; `a|b` is a list of exact
    names; anything else is a regular expression that must match the whole value."""
    if matcher in ("", "*"):
        return True
    if re.fullmatch(r"[\w|]+", matcher):
        return value in matcher.split("|")
    try:
        return re.fullmatch(matcher, value) is not None
    except re.error:
        return False


def user_config_dir() -> Path:
    """`$SESSIOND_CONFIG_HOME`, else `$XDG_CONFIG_HOME/sessiond`, else ~/.config/sessiond."""
    if explicit := os.environ.get("SESSIOND_CONFIG_HOME"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sessiond"


def workspace_config_path(folder: str) -> Path:
    return Path(folder) / ".sessiond" / "hooks.json"


def hook_name(command: str) -> str:
    """A readable name for a command hook: its script, not the interpreter running it."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words:
        return "command"
    name = os.path.basename(words[0]) or words[0]
    if _INTERPRETERS.match(name):
        for word in words[1:]:
            if not word.startswith("-"):
                return os.path.basename(word) or word
    return name


def parse(document: Any, origin: str) -> list[HookSpec]:
    """The hooks a config document declares; malformed entries are skipped and logged."""
    if isinstance(document, dict) and isinstance(document.get("hooks"), dict):
        document = document["hooks"]
    if not isinstance(document, dict):
        raise ValueError("expected a JSON object keyed by event name")
    specs: list[HookSpec] = []
    for event, groups in document.items():
        if event not in EVENTS:
            logger.info("%s: ignoring hooks for unknown event %r", origin, event)
            continue
        if not isinstance(groups, list):
            raise ValueError(f"{event}: expected a list of matcher groups")
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                raise ValueError(f"{event}: each group needs a `hooks` list")
            matcher = group.get("matcher") or ""
            if not isinstance(matcher, str):
                raise ValueError(f"{event}: matcher must be a string")
            for hook in group["hooks"]:
                if not isinstance(hook, dict) or hook.get("type", "command") != "command":
                    logger.info("%s: skipping a hook that is not a command: %r", origin, hook)
                    continue
                command = hook.get("command")
                if not isinstance(command, str) or not command.strip():
                    raise ValueError(f"{event}: a command hook needs a `command` string")
                specs.append(
                    HookSpec(
                        event=event,
                        matcher=matcher,
                        name=str(hook.get("name") or hook_name(command)),
                        origin=origin,
                        timeout=_timeout(hook.get("timeout")),
                        command=command,
                    )
                )
    return specs


def _timeout(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return min(float(value), MAX_TIMEOUT)
    return DEFAULT_TIMEOUT


class ConfigFiles:
    """hooks.json files, each parsed on first use and again only after it changed."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[int, int], list[HookSpec]]] = {}

    def load(self, path: Path, origin: str) -> list[HookSpec]:
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._cache.pop(path, None)
            return []
        except OSError as exc:
            logger.warning("cannot read hooks from %s: %s", path, exc)
            return []
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            # A regular file only, opened without blocking: a FIFO here must not hold the
            # session's hooks (nor a worker thread) forever.
            data = read_regular(str(path), CONFIG_LIMIT) or b"{}"
            specs = parse(orjson.loads(data), origin)
        except (OSError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
            logger.warning("ignoring hooks in %s: %s", path, exc)
            specs = []
        except ProtocolError as refused:
            logger.warning("ignoring hooks in %s: %s", path, refused.message)
            specs = []
        self._cache[path] = (stamp, specs)
        return specs


def entry_point_hooks() -> list[HookSpec]:
    """In-process hooks from installed distributions (entry point group `sessiond.hooks`).

    The loaded object is a callable taking the same payload a command hook reads on stdin
    and returning None or a dict (`additionalContext`); it may be async. Optional
    attributes choose when it runs: `events` (default `("SessionStart",)`), `matcher`
    (default: every source) and `timeout` (seconds).
    """
    from importlib.metadata import entry_points  # lazy: only when an event first fires

    specs: list[HookSpec] = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(entry.dist, "name", None) or "unknown"
        try:
            function = entry.load()
        except Exception:
            logger.exception("cannot load hook entry point %s from %s", entry.name, dist)
            continue
        if not callable(function):
            logger.warning("hook entry point %s from %s is not callable", entry.name, dist)
            continue
        events = getattr(function, "events", ("SessionStart",))
        for event in (events,) if isinstance(events, str) else events:
            if event not in EVENTS:
                continue
            specs.append(
                HookSpec(
                    event=event,
                    matcher=str(getattr(function, "matcher", "") or ""),
                    name=entry.name,
                    origin=f"entry_point:{dist}",
                    timeout=_timeout(getattr(function, "timeout", None)),
                    function=function,
                )
            )
    return specs
