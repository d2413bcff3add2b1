"""What sessiond must hold after a sequence of steps: the threads a person made, what each
holds, which are archived, which are gone, and every word to find. Plain data: the
machine (tests/sequences/machine.py) changes it as each step is acknowledged and holds
the real processes to it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from restore.agents.identity import thread_id_for
from restore.agents.parsing import title_from
from restore.summary import make_preview, one_line
from tests.support.transcripts import ORIGIN, Transcript

WORD = re.compile(r"\bqz[a-z]+\b")
"""The words a sequence writes: each unique, each searched for."""


class Words:
    """Fresh words, never one twice (`qzaaaa`, `qzaaab`, ...): a word found names exactly
    the records that hold it."""

    def __init__(self) -> None:
        self.count = 0

    def fresh(self) -> str:
        n, letters = self.count, []
        self.count += 1
        for _ in range(4):
            n, digit = divmod(n, 26)
            letters.append(chr(ord("a") + digit))
        assert n == 0, "more words than a sequence should need"
        return "qz" + "".join(reversed(letters))


@dataclass(frozen=True)
class Entry:
    """One acknowledged record as thread/read gives it back: a message (role, text, its
    id when the client chose it) or a title (role `title`)."""

    role: str
    text: str
    item_id: str | None = None

    @property
    def is_title(self) -> bool:
        return self.role == "title"


@dataclass
class Session:
    """A writable session: which server (slot) holds it, its id."""

    slot: int
    session_id: str


@dataclass
class Thread:
    thread_id: str
    title: str | None
    entries: list[Entry] = field(default_factory=list)
    archived: bool = False
    session: Session | None = None
    crashed: bool = False
    """Its last session's server died with it open: the next resume is process_recovery."""
    transcript: Transcript | None = None
    """The agent session this thread mirrors (an import), else None."""
    title_words: set[str] = field(default_factory=set)
    """Words of every title its records hold (a rename keeps the old title's record)."""
    first_title: str | None = None
    """The title it began with (its first session's): a fork cut before any rename
    takes it."""
    key: str | None = None
    """The session key `thread/continue` started it for (None: started otherwise)."""

    @property
    def messages(self) -> list[Entry]:
        return [entry for entry in self.entries if not entry.is_title]

    @property
    def preview(self) -> str:
        first = next((e.text for e in self.messages if e.role == "user"), None)
        return make_preview(first) if first is not None else ""

    @property
    def words(self) -> set[str]:
        found = set(self.title_words)
        for entry in self.messages:
            found.update(WORD.findall(entry.text))
        return found

    def retitle(self, title: str | None) -> None:
        self.title = one_line(title) if title is not None else None
        if title is not None:
            self.title_words.update(WORD.findall(title))


@dataclass
class Source:
    """An agent session being written, and how much of it sessiond has."""

    transcript: Transcript
    imported: int = 0
    """Messages imported so far."""
    deleted: bool = False
    """Its thread was deleted and the session has not grown since: it stays deleted."""

    @property
    def thread_id(self) -> str:
        return thread_id_for(ORIGIN[self.transcript.agent], self.transcript.session_id, 1)

    @property
    def pending(self) -> bool:
        return len(self.transcript.messages) > self.imported


class Model:
    """Every thread a person has, and every word ever acknowledged."""

    def __init__(self) -> None:
        self.threads: dict[str, Thread] = {}
        self.deleted: dict[str, Thread] = {}
        self.sources: list[Source] = []

    def live(self) -> list[Thread]:
        return [t for t in self.threads.values() if not t.archived]

    def archived(self) -> list[Thread]:
        return [t for t in self.threads.values() if t.archived]

    def all_words(self) -> set[str]:
        found: set[str] = set()
        for thread in [*self.threads.values(), *self.deleted.values()]:
            found |= thread.words
        return found

    def holding(self, word: str, *, archived: bool) -> set[str]:
        """The threads a search for `word` must find (live ones, or archived ones)."""
        return {
            t.thread_id for t in self.threads.values() if t.archived == archived and word in t.words
        }

    def delete(self, thread_id: str) -> None:
        thread = self.threads.pop(thread_id)
        thread.session = None
        self.deleted[thread_id] = thread
        for source in self.sources:
            if source.thread_id == thread_id:
                source.deleted = True

    def imported(self, source: Source) -> None:
        """`source` was imported (`sessiond import`, or a server following it): what it
        grew by is in its thread; a thread deleted is back, whole, once it grew."""
        if not source.pending:
            return
        messages = source.transcript.messages
        thread = self.threads.get(source.thread_id)
        if thread is None:
            self.deleted.pop(source.thread_id, None)
            thread = Thread(source.thread_id, None, transcript=source.transcript)
            thread.retitle(title_from(messages[0][1]))
            thread.first_title = thread.title
            self.threads[source.thread_id] = thread
            source.imported = 0
        thread.entries += [Entry(role, text) for role, text in messages[source.imported :]]
        source.imported = len(messages)
        source.deleted = False
