"""Where Gemini CLI keeps its sessions: `$GEMINI_CLI_HOME/.gemini/tmp`, else
`~/.gemini/tmp` (its `homedir()` is `$GEMINI_CLI_HOME` when set), one folder per project
holding `chats/session-*.jsonl` (`.json` documents up to 0.38) and its sub-agents'
sessions, `chats/<parent sessionId>/<its sessionId>.jsonl`."""

from __future__ import annotations

import contextlib
import os
import re
from glob import escape as glob_escape
from pathlib import Path

import orjson

from restore.agents.files import FileStore, Retention, settings_json
from restore.imports.parse import HEAD_BYTES, open_source

_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._-]{0,127})"')
_RECORD = re.compile(rb'^\{"(?:id|\$set|\$rewindTo)"\s*:')
"""The start of a line that is a record of the session (a message, `$set`, `$rewindTo`),
not its header."""
HEADLESS = "headerless:"
"""The session id given a session file whose first line is a message, not the header that
names the session (see `GeminiFiles.session_id`): not a plain name, so no handoff is
offered (Gemini could not find the session by it)."""
REGISTRY_BYTES = 4 << 20  # projects.json: one line per project Gemini CLI has seen
_PERIOD = re.compile(r"^(\d+)([hdwm])$")
_UNIT = {"h": 3600.0, "d": 86_400.0, "w": 7 * 86_400.0, "m": 30 * 86_400.0}


class GeminiFiles(FileStore):
    skip_itemless = True
    ROOT_HELP = "$GEMINI_CLI_HOME/.gemini/tmp, else ~/.gemini/tmp"

    def default_root(self) -> Path:
        return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "tmp"

    def retention(self) -> Retention | None:
        """`general.sessionRetention` of the user's settings.json (on, `maxAge` 30d, by
        default in 0.61): Gemini deletes older sessions at startup."""
        path = self.default_root().parent / "settings.json"
        general = settings_json(path).get("general")
        kept = general.get("sessionRetention") if isinstance(general, dict) else None
        kept = kept if isinstance(kept, dict) else {}
        if kept.get("enabled", True) is False:
            return None
        age = kept.get("maxAge", "30d")
        found = _PERIOD.match(age) if isinstance(age, str) else None
        if found is None or int(found.group(1)) == 0:
            age, found = "30d", _PERIOD.match("30d")
        assert found is not None
        seconds = int(found.group(1)) * _UNIT[found.group(2)]
        return Retention(f"general.sessionRetention.maxAge = {age} ({path})", seconds)

    def is_session_file(self, root: Path, path: Path) -> bool:
        """`<root>/<project>/chats/session-*.jsonl`, or `.json` (up to 0.38), and
        sub-agents' sessions, `chats/<parent id>/<id>.jsonl`, which become child threads."""
        if _subagent(root, path):
            return True
        named = path.name.startswith("session-") and path.suffix in (".jsonl", ".json")
        return named and path.parent.name == "chats" and path.parent.parent.parent == root

    def session_id(self, path: Path) -> str | None:
        """`sessionId` from the file's first line (its name has only 8 characters of it);
        None while that line is not written whole. A `.jsonl` whose first line is a
        record of the conversation (a message, a `$set`), not that header (Gemini 0.61
        rewrites a session file without it when another Gemini in the project prunes it),
        is still the conversation: named by its file (`headerless:<name>`), imported, with
        no handoff."""
        found = _session_id(path)
        if found is None and path.suffix == ".jsonl" and _starts_with_a_message(path):
            return f"{HEADLESS}{path.stem}"
        return found

    def note(self, path: Path, session_id: str) -> str | None:
        if session_id.startswith(HEADLESS):
            return (
                "no header line (Gemini rewrote the file without it, as a second Gemini "
                "pruning the project does): its conversation is imported, but the "
                "session id is not in it, so no handoff to Gemini is offered"
            )
        return None

    def fallback_cwd(self, path: Path) -> str:
        """The project root as the store records it; else the file's folder."""
        chats = path.parent.parent if path.parent.name != "chats" else path.parent
        return _project_root(chats.parent) or str(path.parent)

    def parent_session(self, path: Path) -> str | None:
        """A sub-agent's folder, `chats/<parent sessionId>/`."""
        if path.parent.parent.name == "chats":
            return path.parent.name
        return None

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        """The session files in the `chats/` above, named by the id's first 8 characters,
        whose first line has it."""
        chats = path.parent.parent
        found = chats.glob(f"session-*-{glob_escape(session[:8])}.jsonl")
        return sorted(p for p in found if _session_id(p) == session)


def _subagent(root: Path, path: Path) -> bool:
    """`<root>/<project>/chats/<parent sessionId>/<its sessionId>.jsonl`: a sub-agent's
    session (Gemini CLI's invoke_agent)."""
    return (
        path.suffix == ".jsonl"
        and path.parent.parent.name == "chats"
        and len(path.parents) > 3
        and path.parents[3] == root
    )


def _starts_with_a_message(path: Path) -> bool:
    try:
        with open_source(str(path)) as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return False
    return _RECORD.match(head.lstrip()) is not None and b"\n" in head


def _session_id(path: Path) -> str | None:
    """`sessionId` of a session file: its first line's (JSONL), or near the top of the
    document (`.json`, where JSON.stringify puts it first)."""
    try:
        with open_source(str(path)) as handle:  # a link is not read, not even for its id
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    if path.suffix == ".jsonl":
        line, newline, _ = head.partition(b"\n")
        if not newline:
            return None
        head = line
    found = _SESSION_ID.search(head)
    return found.group(1).decode() if found else None


def _project_root(project: Path) -> str | None:
    """The directory a project folder (`tmp/<slug>`) is for: its `.project_root` marker,
    else `projects.json` (path → slug). A folder named by the path's sha256 (before
    February 2026, and migrated by any later run in that project) says nothing."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open_source(str(project / ".project_root")) as handle:  # never through a link
            marked = handle.read(HEAD_BYTES).decode("utf-8").strip()
        if marked.startswith("/") or (len(marked) > 2 and marked[1] == ":"):
            return marked
    try:
        with open_source(str(project.parent.parent / "projects.json")) as handle:
            registry = orjson.loads(handle.read(REGISTRY_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    for root, slug in projects.items() if isinstance(projects, dict) else []:
        if slug == project.name:
            return str(root)
    return None
