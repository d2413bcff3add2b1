"""A store that keeps one file per session (one JSONL log, or one JSON document) under a
root: which files are sessions, the id the agent resumes each by, where a session ran when
none of its lines says, and where a sub-agent's parent transcript is. Each agent's
`store.py` says these for its own layout; the walk, the link rules and the search of a
parent transcript for the call that started a sub-agent are here, once.

Invariant: only names, stats and the heads of files are read here, never through a link.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

import orjson

from restore.agents.parsing import SourceParser
from restore.imports.parse import LINE_BYTES, open_source


@dataclass(frozen=True)
class Retention:
    """An agent's own setting that deletes its sessions once they are old enough (Claude
    Code's `cleanupPeriodDays`, …): what sessiond has not imported by then is lost."""

    setting: str
    """The setting as a person finds it: `cleanupPeriodDays = 30 (~/.claude/settings.json)`."""
    seconds: float
    what: str = "sessions"
    """What it deletes, when it is not every session (Qwen Code: its sub-agents')."""


class FileStore:
    """An agent's sessions as files under a root (its default: `default_root`)."""

    skip_itemless: bool = False
    """A file whose records give no item is not a session (yet): Gemini CLI writes its
    metadata and primed context before the first prompt, and leaves such a file beside
    the session a headless `--resume` continues; it lists neither."""
    ROOT_HELP: str = ""
    """Where the root is by default, and what moves it, as `--help` and the docs say it."""

    def default_root(self) -> Path:
        raise NotImplementedError

    def is_session_file(self, root: Path, path: Path) -> bool:
        raise NotImplementedError

    def could_hold_sessions(self, root: Path, directory: Path) -> bool:
        """Whether a folder under the root may hold sessions (a link to one is reported)."""
        return True

    def session_files(self, root: Path) -> list[Path]:
        """Every session file under the root, and every link where one could be (a link
        to a file, or to a folder, which `os.walk` does not enter): the importer reports
        those (`symlink`) instead of reading them."""
        found = []
        for directory, folders, names in os.walk(root):
            for name in folders:
                path = Path(directory, name)
                if path.is_symlink() and self.could_hold_sessions(root, path):
                    found.append(path)
            for name in names:
                path = Path(directory, name)
                if self.is_session_file(root, path):
                    found.append(path)
        return sorted(found)

    def session_id(self, path: Path) -> str | None:
        """The id the agent resumes the session by (None while the file does not say it
        yet): its file's name by default."""
        return path.stem

    def note(self, path: Path, session_id: str) -> str | None:
        """What the import of this session should say about it (None: nothing)."""
        return None

    def fallback_cwd(self, path: Path) -> str:
        """Where a session ran when none of its lines says: its file's folder by default."""
        return str(path.parent)

    def parent_session(self, path: Path) -> str | None:
        """The parent's session id where only the layout says it (None by default)."""
        return None

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        """Where the transcript of the parent session `session` (a plain name) of the
        sub-agent at `path` can be (none by default)."""
        return []

    def spawning_call_beside(self, path: Path) -> str | None:
        """The parent's tool call that started the sub-agent at `path`, where a file beside
        it says (None by default: the parent's transcript is searched)."""
        return None

    def retention(self) -> Retention | None:
        """The agent's setting that deletes old sessions, as configured (its default when
        unset); None when it keeps them."""
        return None

    def retained(self, root: Path, path: Path) -> bool:
        """Whether the retention setting deletes this session file (all by default)."""
        return True

    def trailer(self, path: Path) -> tuple[tuple[str, dict[str, Any]], ...]:
        """Records the agent keeps beside the session file, read after its lines, each
        named by a key of its contents (none by default)."""
        return ()


SIDECAR_BYTES = 64 << 10


def settings_json(path: Path) -> dict[str, Any]:
    """An agent's settings file (JSON), {} when there is none or it is not JSON (the
    agent's defaults then apply). Read as the agent reads it: a link is followed."""
    try:
        with open(path, "rb") as handle:
            data = orjson.loads(handle.read(SIDECAR_BYTES * 16))
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def sidecar_field(path: Path, suffix: str, key: str) -> Any:
    """A field of the small JSON file beside a transcript (`agent-<id>.meta.json`, which
    Claude Code 2.1 and Qwen Code write beside a sub-agent's); None when there is none, it
    is not a regular file (a link is not followed) or it is not JSON."""
    sidecar = path.with_suffix(suffix)
    try:
        stat = sidecar.lstat()
        if not S_ISREG(stat.st_mode) or stat.st_size > SIDECAR_BYTES:
            return None
        data = orjson.loads(sidecar.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data.get(key) if isinstance(data, dict) else None


def spawns_in(parent: Path, parser: type[SourceParser]) -> dict[str, str]:
    """Sub-agent key → the tool call that started it, from a parent transcript (the
    agent parser's `spawns`). Only lines holding the parser's SPAWN_MARKERS are decoded;
    a line over LINE_BYTES is read past, never held; the file is opened without
    following a link."""
    found: dict[str, str] = {}
    markers = parser.SPAWN_MARKERS
    if not markers:
        return found
    try:
        handle = open_source(str(parent))
    except OSError:
        return found
    with handle:
        while line := handle.readline(LINE_BYTES + 1):
            if len(line) > LINE_BYTES and not line.endswith(b"\n"):
                while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                continue
            if not all(marker in line for marker in markers):
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                for key, call in parser.spawns(record):
                    found.setdefault(key, call)
    return found
