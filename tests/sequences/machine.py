"""The state machine: random sequences of what a person does with sessiond, on real
processes, held after every step to what the model (tests/sequences/model.py) says.

Steps: start, record, fork, setTitle, archive, unarchive, delete, close, resume, a
folder's session key continued (`thread/continue`), search
(the command line; the server's is checked after every step), an agent session that
grows (Claude Code, Codex, Gemini CLI) and `sessiond import` of it, a server started with
`--follow`, `doctor --repair`, a server restarted, killed (kill -9) idle or in the middle
of a record, and a second server on the same data directory.

After every step: every server's `thread/list` (live and archived) and the command line's
`list` are the model's threads; `thread/read` gives exactly the acknowledged records, in
order; every word is found in exactly the threads that hold it, a deleted thread's
nowhere; `sessiond doctor` exits 0; no process ever said StorageError.

Another process's view of a write may lag by the listing-row flush (FLUSH_SECONDS: a
server's rows reach the index file about a second after a burst, docs/search.md): what
another process shows is waited for (`settle`), never slept for.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from restore.summary import BOOKKEEPING_TYPES
from tests.sequences.model import WORD, Entry, Model, Session, Source, Thread, Words
from tests.support import pg_cluster
from tests.support.rpc_client import RpcError, ServerProcess
from tests.support.transcripts import AGENTS, Transcript
from tests.support.wait import HANG_GUARD, eventually
from tests.support.world import World

SETTLE = 5.0
"""Seconds another process gets to show a write (the flush is 0.5 s after a burst)."""
picks = st.integers(min_value=0, max_value=255)
slots = st.sampled_from([0, 1])
roles = st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=3)


def settle(check: Callable[[], None], what: str) -> None:
    """`check()` passes now or within SETTLE seconds; else its own failure is raised."""
    try:
        check()
        return
    except AssertionError:
        pass

    def passes() -> bool:
        try:
            check()
        except AssertionError:
            return False
        return True

    try:
        eventually(passes, what, patience=SETTLE)
    except AssertionError:
        check()  # fails again, saying how


class RequestFailed(Exception):
    """A request the model says succeeds failed: never waited out (not an AssertionError,
    which `settle` waits on), a StorageError least of all."""


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))


class SequenceMachine(RuleBasedStateMachine):
    """A person's data directory under a random sequence of steps. Bind `cluster` (None:
    the embedded store) and `base` (where each example's directories go) in a subclass."""

    cluster: ClassVar[pg_cluster.Cluster | None] = None
    base: ClassVar[Path] = Path(tempfile.gettempdir())

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="seq-", dir=self.base))
        self.world = World(self.root, self.cluster)
        self.model = Model()
        self.words = Words()
        self.servers: dict[int, ServerProcess] = {}
        self.follows: dict[int, bool] = {0: False, 1: False}
        self.touched: set[str] = set()
        self.counts: dict[str, int] = {}
        self.cwds = [self.world.work / name for name in ("api", "web")]
        for cwd in self.cwds:
            cwd.mkdir()

    @initialize()
    def first_server(self) -> None:
        self._serve(0, follow=False)

    def teardown(self) -> None:
        try:
            self.world.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # --- processes -------------------------------------------------------------------------

    def _serve(self, slot: int, *, follow: bool) -> ServerProcess:
        server = self.world.serve(follow=follow)
        self.servers[slot], self.follows[slot] = server, follow
        if follow:  # it follows from its first listing on: what was written is imported
            self._list(server, archived=False)
            for source in self.model.sources:
                self._await_import(source, server)
        return server

    def _stopped(self, slot: int, *, crashed: bool) -> None:
        """The slot's server is gone: the sessions it held with it."""
        del self.servers[slot]
        for thread in self.model.threads.values():
            if thread.session is not None and thread.session.slot == slot:
                thread.session, thread.crashed = None, crashed

    def _running(self, hint: int) -> tuple[int, ServerProcess]:
        slot = sorted(self.servers)[hint % len(self.servers)]
        return slot, self.servers[slot]

    def _holder(self, thread: Thread, hint: int) -> tuple[int, ServerProcess]:
        """The server holding the thread's session, else any running one."""
        if thread.session is not None and thread.session.slot in self.servers:
            return thread.session.slot, self.servers[thread.session.slot]
        return self._running(hint)

    def _followers(self) -> list[ServerProcess]:
        return [s for slot, s in sorted(self.servers.items()) if self.follows[slot]]

    # --- requests --------------------------------------------------------------------------

    @staticmethod
    def _call(server: ServerProcess, method: str, params: dict[str, Any]) -> Any:
        try:
            return server.request(method, params)
        except RpcError as error:
            raise RequestFailed(f"{method} {params}: {error} {error.data}") from error

    def _list(self, server: ServerProcess, *, archived: bool) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self._call(server, "thread/list",
                              {"archived": archived, "limit": 200, "cursor": cursor})  # fmt: skip
            rows += page["threads"]
            if (cursor := page["nextCursor"]) is None:
                return rows

    def _read(self, server: ServerProcess, thread_id: str) -> list[dict[str, Any]]:
        page = self._call(server, "thread/read", {"threadId": thread_id, "limit": 10000})
        assert page["nextAfterSeq"] is None, "one page holds a sequence's thread"
        assert page.get("skippedLines", []) == [], page["skippedLines"]
        return list(page["items"])

    def _search(self, server: ServerProcess, query: str, *, archived: bool) -> list[Any]:
        hits: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self._call(server, "thread/search",
                              {"query": query, "archived": archived, "limit": 200,
                               "cursor": cursor})  # fmt: skip
            if page.get("partial"):  # still indexing: search again, from the start
                hits, cursor = [], None
                continue
            hits += page["hits"]
            if (cursor := page["nextCursor"]) is None:
                return hits

    def _pick(self, threads: list[Thread], pick: int) -> Thread:
        return threads[pick % len(threads)]

    def _message(self, role: str) -> tuple[dict[str, Any], Entry]:
        word = self.words.fresh()
        text = f"note {word}" if role == "user" else f"answer {word}"
        item_id = str(uuid.uuid4())
        return {"type": "message", "id": item_id, "role": role, "content": text}, Entry(
            role, text, item_id
        )

    def _writable(
        self, thread: Thread, slot: int, unanswered: tuple[Entry, ...] = ()
    ) -> tuple[ServerProcess, str]:
        """The thread's open session; else a resume through `slot` opens one (a person
        clicks Resume), which must give back the conversation as recorded (and the
        `unanswered` records a crash cut off after writing them)."""
        if thread.session is not None and thread.session.slot in self.servers:
            return self.servers[thread.session.slot], thread.session.session_id
        server = self.servers[slot]
        report = self._call(server, "thread/resume", {"threadId": thread.thread_id})
        return server, self._opened(thread, slot, report, unanswered)

    def _opened(
        self, thread: Thread, slot: int, report: dict[str, Any], unanswered: tuple[Entry, ...]
    ) -> str:
        """A session opened on the thread through `slot` (its RestoreReport): it gives back
        the conversation as recorded; the session's id."""
        assert report["status"] == "ready", report["status"]
        reason = "process_recovery" if thread.crashed else "user"
        assert report["continueReason"] == reason, (report["continueReason"], reason)
        shown = [(m["role"], text_of(m["content"])) for m in report["messages"]["items"]]
        want = [*thread.messages, *unanswered]
        assert shown == [(e.role, e.text) for e in want][-200:], (shown, want)
        session_id: str = report["session"]["sessionId"]
        thread.session, thread.crashed = Session(slot, session_id), False
        return session_id

    def _await_import(self, source: Source, server: ServerProcess) -> None:
        """A following server imports what the session grew by; the model takes it."""
        if not source.pending:
            return
        want = [(role, text) for role, text in source.transcript.messages]

        def imported() -> bool:
            try:
                items = server.request("thread/read", {"threadId": source.thread_id,
                                                       "limit": 10000})["items"]  # fmt: skip
            except RpcError as error:
                assert error.kind == "ThreadNotFound", error
                return False
            got = [(i["role"], text_of(i["content"])) for i in items if i["type"] == "message"]
            return got == want

        eventually(
            imported, f"the following server imports {source.transcript.path.name}", patience=30
        )
        self.model.imported(source)
        self.touched.add(source.thread_id)

    # --- steps: threads ----------------------------------------------------------------------

    def _recordable(self) -> list[Thread]:
        return [t for t in self.model.live() if t.transcript is None]

    @rule(via=slots, titled=st.booleans(), where=st.sampled_from([0, 1]))
    def start(self, via: int, titled: bool, where: int) -> None:
        slot, server = self._running(via)
        title = f"task {self.words.fresh()}" if titled else None
        result = self._call(server, "thread/start", {"cwd": str(self.cwds[where]), "title": title})
        thread = Thread(result["thread"]["threadId"], None)
        thread.retitle(title)
        thread.first_title = thread.title
        thread.session = Session(slot, result["sessionId"])
        self.model.threads[thread.thread_id] = thread
        self.touched.add(thread.thread_id)

    @precondition(lambda self: self._recordable())
    @rule(pick=picks, roles=roles, via=slots)
    def record(self, pick: int, roles: list[str], via: int) -> None:
        thread = self._pick(self._recordable(), pick)
        server, session_id = self._writable(thread, self._running(via)[0])
        items, entries = zip(*(self._message(role) for role in roles), strict=True)
        result = self._call(server, "thread/record", {"threadId": thread.thread_id,
                            "sessionId": session_id, "items": list(items)})  # fmt: skip
        assert result["duplicates"] == 0, result
        assert result["lastSeq"] - result["firstSeq"] == len(items) - 1, result
        thread.entries += entries
        self.touched.add(thread.thread_id)

    @precondition(lambda self: self.model.threads)
    @rule(pick=picks, at=st.none() | picks, via=slots)
    def fork(self, pick: int, at: int | None, via: int) -> None:
        """A fork of any thread (an archived one too) is a live thread of its own."""
        parent = self._pick(list(self.model.threads.values()), pick)
        slot, server = self._running(via)
        params: dict[str, Any] = {"threadId": parent.thread_id}
        prefix = parent.entries
        if at is not None and parent.messages:
            seqs = [i["seq"] for i in self._read(server, parent.thread_id)
                    if i["type"] == "message"]  # fmt: skip
            cut = at % len(seqs)
            params["atSeq"] = seqs[cut]
            end = [n for n, e in enumerate(parent.entries) if not e.is_title][cut]
            prefix = parent.entries[: end + 1]
        result = self._call(server, "thread/fork", params)
        titles = [e.text for e in prefix if e.is_title]
        child = Thread(result["thread"]["threadId"], None)
        child.retitle(titles[-1] if titles else parent.first_title)
        child.entries = [e for e in prefix if not e.is_title]
        child.first_title = child.title
        child.session = Session(slot, result["sessionId"])
        self.model.threads[child.thread_id] = child
        self.touched.add(child.thread_id)

    def _by_cli(self, verb: str, thread: Thread, *after: str) -> bool:
        """`sessiond <verb> <id prefix> ...`, as a person types it (the prefix `list`
        prints): done (exit 0), or ThreadBusy (exit 2, nothing changed) while a running
        server writes the thread."""
        held = thread.session is not None and thread.session.slot in self.servers
        flags = ["--yes"] if verb == "delete" else []
        done = self.world.cli(verb, *flags, thread.thread_id[:8], *after,
                              codes=(2,) if held else (0,))  # fmt: skip
        assert not held or "ThreadBusy" in done.stderr, done.stderr
        return not held

    @precondition(lambda self: self.model.threads)
    @rule(pick=picks, via=slots, cli=st.booleans())
    def set_title(self, pick: int, via: int, cli: bool = False) -> None:
        thread = self._pick(list(self.model.threads.values()), pick)
        title = f"renamed {self.words.fresh()}"
        if cli:
            if not self._by_cli("rename", thread, title):
                return
        else:
            _, server = self._holder(thread, via)
            result = self._call(server, "thread/setTitle",
                                {"threadId": thread.thread_id, "title": title})  # fmt: skip
            assert result["thread"]["title"] == title
        thread.retitle(title)
        thread.entries.append(Entry("title", title))
        self.touched.add(thread.thread_id)

    @precondition(lambda self: self.model.live())
    @rule(pick=picks, via=slots, cli=st.booleans())
    def archive(self, pick: int, via: int, cli: bool = False) -> None:
        thread = self._pick(self.model.live(), pick)
        if cli:
            if not self._by_cli("archive", thread):
                return
        else:
            _, server = self._holder(thread, via)
            self._call(server, "thread/archive", {"threadId": thread.thread_id})
        thread.archived, thread.session = True, None
        self.touched.add(thread.thread_id)

    @precondition(lambda self: self.model.archived())
    @rule(pick=picks, via=slots, cli=st.booleans())
    def unarchive(self, pick: int, via: int, cli: bool = False) -> None:
        thread = self._pick(self.model.archived(), pick)
        if cli:
            self._by_cli("unarchive", thread)
        else:
            _, server = self._running(via)
            self._call(server, "thread/unarchive", {"threadId": thread.thread_id})
        thread.archived = False
        self.touched.add(thread.thread_id)

    @precondition(lambda self: self.model.threads)
    @rule(pick=picks, via=slots, cli=st.booleans())
    def delete(self, pick: int, via: int, cli: bool = False) -> None:
        thread = self._pick(list(self.model.threads.values()), pick)
        if cli:
            if not self._by_cli("delete", thread):
                return
        else:
            _, server = self._holder(thread, via)
            self._call(server, "thread/delete", {"threadId": thread.thread_id})
        self.model.delete(thread.thread_id)
        self.touched.add(thread.thread_id)

    def _held(self) -> list[Thread]:
        return [t for t in self.model.live()
                if t.session is not None and t.session.slot in self.servers]  # fmt: skip

    @precondition(lambda self: self._held())
    @rule(pick=picks)
    def close(self, pick: int) -> None:
        thread = self._pick(self._held(), pick)
        assert thread.session is not None
        server = self.servers[thread.session.slot]
        self._call(
            server,
            "thread/close",
            {"threadId": thread.thread_id, "sessionId": thread.session.session_id},
        )
        thread.session = None

    @precondition(lambda self: self.model.live())
    @rule(pick=picks, via=slots)
    def resume(self, pick: int, via: int) -> None:
        """Resume (again): a sessiond thread opens a session, an imported one hands off."""
        thread = self._pick(self.model.live(), pick)
        if thread.transcript is not None:
            _, server = self._running(via)
            report = self._call(server, "thread/resume", {"threadId": thread.thread_id})
            assert report["session"]["sessionId"] is None, report["session"]
            shown = [(m["role"], text_of(m["content"])) for m in report["messages"]["items"]]
            assert shown == [(e.role, e.text) for e in thread.messages][-200:]
            return
        if thread.session is not None and thread.session.slot in self.servers:
            slot = thread.session.slot  # open here already: resumed again, a new session
            report = self._call(self.servers[slot], "thread/resume",
                                {"threadId": thread.thread_id})  # fmt: skip
            assert report["status"] == "ready", report["status"]
            thread.session = Session(slot, report["session"]["sessionId"])
        else:
            self._writable(thread, self._running(via)[0])

    @rule(which=st.sampled_from([0, 1]), via=slots)
    def continue_key(self, which: int, via: int) -> None:
        """A message for a folder's session key (`thread/continue`, policy `none`: the
        person decides): the key's thread goes on — the session this server holds, else
        one opened as Resume opens it, ThreadBusy while the other server holds it — or,
        with no live thread, the key's first starts."""
        key, cwd = f"workspace:{self.cwds[which]}#main", str(self.cwds[which])
        current = [t for t in self.model.live() if t.key == key]
        if len(current) > 1:
            return  # an unarchived older one: which is current is the index's updatedAt
        slot, server = self._running(via)
        params = {"sessionKey": key, "cwd": cwd, "policy": {"reset": "none"}}
        if not current:
            answer = self._call(server, "thread/continue", params)
            assert (answer["reason"], answer["sessionOpened"]) == ("startup", True), answer
            thread = Thread(answer["thread"]["threadId"], None, key=key)
            thread.session = Session(slot, answer["sessionId"])
            self.model.threads[thread.thread_id] = thread
            self.touched.add(thread.thread_id)
            return
        (thread,) = current
        held = thread.session if thread.session and thread.session.slot in self.servers else None
        if held is not None and held.slot != slot:
            try:
                server.request("thread/continue", params)
            except RpcError as error:
                assert error.kind == "ThreadBusy", error
            else:
                raise AssertionError("thread/continue of a thread another server writes")
            return
        answer = self._call(server, "thread/continue", params)
        assert answer["reason"] == "resume", answer
        assert answer["thread"]["threadId"] == thread.thread_id, (answer, thread.thread_id)
        if held is not None:  # this server's session goes on: nothing opened
            assert not answer["sessionOpened"] and answer["sessionId"] == held.session_id
        else:
            assert answer["sessionOpened"], answer
            assert self._opened(thread, slot, answer["restore"], ()) == answer["sessionId"]

    @precondition(lambda self: len(self.servers) == 2 and self._held())
    @rule(pick=picks)
    def busy_elsewhere(self, pick: int) -> None:
        """A thread one server writes is ThreadBusy to the other: to resume, rename,
        archive or delete."""
        thread = self._pick(self._held(), pick)
        assert thread.session is not None
        other = self.servers[1 - thread.session.slot]
        for method, params in (
            ("thread/resume", {}),
            ("thread/setTitle", {"title": "x"}),
            ("thread/archive", {}),
            ("thread/delete", {}),
        ):
            try:
                other.request(method, {"threadId": thread.thread_id, **params})
            except RpcError as error:
                assert error.kind == "ThreadBusy", (method, error)
            else:
                raise AssertionError(f"{method} of a thread another server writes succeeded")

    # --- steps: search and the command line --------------------------------------------------

    @precondition(lambda self: self.model.all_words())
    @rule(pick=picks, archived=st.booleans())
    def search_cli(self, pick: int, archived: bool) -> None:
        words = sorted(self.model.all_words())
        word = words[pick % len(words)]
        expected = self.model.holding(word, archived=archived)

        def check() -> None:
            flags = ["--archived"] if archived else []
            done = self.world.cli("search", word, "--json", "--limit", "200", *flags,
                                  codes=(0, 1))  # fmt: skip
            found = {json.loads(line)["threadId"] for line in done.stdout.splitlines()}
            assert found == expected, (word, archived, found, expected)
            assert done.returncode == (0 if expected else 1)

        settle(check, f"`sessiond search {word}` finds {expected}")

    @precondition(lambda self: len(self.model.sources) < 6)
    @rule(agent=st.sampled_from(AGENTS), where=st.sampled_from([0, 1]))
    def agent_starts(self, agent: str, where: int) -> None:
        """The person starts a session in an agent (Claude Code, Codex, Gemini CLI)."""
        transcript = Transcript(agent, self.world.agents, self.cwds[where],
                                len(self.model.sources))  # fmt: skip
        source = Source(transcript)
        self.model.sources.append(source)
        self._grow(source)

    @precondition(lambda self: self.model.sources)
    @rule(pick=picks)
    def agent_goes_on(self, pick: int) -> None:
        """The person goes on in an agent session: one more turn appended to its file."""
        self._grow(self._pick_source(pick))

    def _pick_source(self, pick: int) -> Source:
        return self.model.sources[pick % len(self.model.sources)]

    def _grow(self, source: Source) -> None:
        source.transcript.turn(f"please look at {self.words.fresh()}",
                               f"looked at {self.words.fresh()}")  # fmt: skip
        if followers := self._followers():
            self._await_import(source, followers[0])

    @rule(agent=st.sampled_from(AGENTS))
    def import_cli(self, agent: str) -> None:
        done = self.world.cli("import", agent, "--json")
        summary = json.loads(done.stdout.splitlines()[0])
        assert (summary["problems"], summary["skippedLines"]) == ([], 0), summary
        for source in self.model.sources:
            if source.transcript.agent == agent:
                self.model.imported(source)
                self.touched.add(source.thread_id)

    @rule()
    def doctor_repair(self) -> None:
        self.world.cli("doctor", "--repair")

    # --- steps: processes --------------------------------------------------------------------

    @rule(slot=slots, follow=st.booleans())
    def restart(self, slot: int, follow: bool) -> None:
        """A server shut down cleanly (if running) and started again; slot 1 is a second
        server on the same data directory."""
        if (server := self.servers.get(slot)) is not None:
            assert server.shutdown() == 0
            self._stopped(slot, crashed=False)
        self._serve(slot, follow=follow)

    @precondition(lambda self: 1 in self.servers)
    @rule()
    def second_server_exits(self) -> None:
        assert self.servers[1].shutdown() == 0
        self._stopped(1, crashed=False)

    @rule(slot=slots)
    def kill9(self, slot: int) -> None:
        """kill -9 of an idle server; the first one is started again at once (the editor
        restarts it), a second one stays dead."""
        if slot not in self.servers:
            return
        self.servers[slot].kill9()
        self._stopped(slot, crashed=True)
        if slot == 0:
            self._serve(0, follow=self.follows[0])

    @precondition(lambda self: self.model.sources and self._followers())
    @rule(pick=picks)
    def kill9_mid_import(self, pick: int) -> None:
        """A following server killed (kill -9) as an agent session grows, maybe mid-import,
        and started again: it imports what it had not, nothing twice."""
        source = self._pick_source(pick)
        slot = next(slot for slot in sorted(self.servers) if self.follows[slot])
        source.transcript.turn(f"please look at {self.words.fresh()}",
                               f"looked at {self.words.fresh()}")  # fmt: skip
        self.servers[slot].kill9()
        self._stopped(slot, crashed=True)
        self._serve(slot, follow=True)
        for other in self._followers():
            self._await_import(source, other)

    @precondition(lambda self: self._recordable())
    @rule(pick=picks, roles=roles, via=slots)
    def kill9_mid_record(self, pick: int, roles: list[str], via: int) -> None:
        """The server dies with a record written but not answered; the client, started
        again, resumes and sends the same items again: each is stored exactly once."""
        thread = self._pick(self._recordable(), pick)
        server, session_id = self._writable(thread, self._running(via)[0])
        assert thread.session is not None
        slot = thread.session.slot
        items, entries = zip(*(self._message(role) for role in roles), strict=True)
        params = {"threadId": thread.thread_id, "sessionId": session_id, "items": list(items)}
        self.world.arm_crash(True)
        try:
            asked = server.request_async("thread/record", params)
            server.proc.wait(timeout=HANG_GUARD)
        finally:
            self.world.arm_crash(False)
        assert asked not in server.responses, "answered before the crash point"
        server.close()
        self._stopped(slot, crashed=True)
        server = self._serve(slot, follow=self.follows[slot])
        server, session_id = self._writable(thread, slot, entries)
        result = self._call(server, "thread/record",
                            {**params, "sessionId": session_id})  # fmt: skip
        assert result["duplicates"] == len(items), result  # all written before the crash
        thread.entries += entries
        self.touched.add(thread.thread_id)

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def holds(self) -> None:
        said = self.world.forbidden_said()
        assert not said, said
        reader = self.servers[0]
        counts = {tid: self._reads_back(reader, thread)
                  for tid, thread in self.model.threads.items()}  # fmt: skip
        for thread_id in self.model.deleted:
            try:
                reader.request("thread/read", {"threadId": thread_id})
            except RpcError as error:
                assert error.kind == "ThreadNotFound", error
            else:
                raise AssertionError(f"deleted thread {thread_id} still reads")
        for slot, server in sorted(self.servers.items()):
            settle(lambda s=server: self._lists_match(self._list_rpc(s), counts),
                   f"server {slot}'s thread/list is the model's")  # fmt: skip
            settle(lambda s=server: self._words_found(s),
                   f"server {slot}'s search finds every word where it is")  # fmt: skip
        self.touched.clear()
        self.world.cli("doctor")
        settle(lambda: self._lists_match(self._list_cli(), counts), "`sessiond list`")

    def _reads_back(self, server: ServerProcess, thread: Thread) -> int:
        """thread/read gives exactly the acknowledged records, in order; returns how many
        items it counts (what the listing's itemCount must say)."""
        items = self._read(server, thread.thread_id)
        seqs = [item["seq"] for item in items]
        assert seqs == sorted(set(seqs)), f"seqs out of order: {seqs}"
        got = [Entry(i["role"], text_of(i["content"]), i["id"]) if i["type"] == "message"
               else Entry("title", i["title"]) for i in items
               if i["type"] in ("message", "thread_title")]  # fmt: skip
        want = thread.entries

        def plain(entries: list[Entry]) -> list[tuple[str, str]]:
            return [(e.role, e.text) for e in entries]

        assert plain(got) == plain(want), (thread.thread_id, plain(got), plain(want))
        for have, expected in zip(got, want, strict=True):
            if expected.item_id is not None:
                assert have.item_id == expected.item_id, (have, expected)
        return sum(1 for item in items if item["type"] not in BOOKKEEPING_TYPES)

    def _list_rpc(self, server: ServerProcess) -> list[dict[str, Any]]:
        return self._list(server, archived=False) + self._list(server, archived=True)

    def _list_cli(self) -> list[dict[str, Any]]:
        """`sessiond list` (and `--archived` while there are archived threads: every
        server's thread/list is held to them after every step, and a process costs)."""
        rows = []
        for flags in ([], ["--archived"])[: 2 if self.model.archived() else 1]:
            done = self.world.cli("list", "--json", "--limit", "200", *flags)
            rows += [json.loads(line) for line in done.stdout.splitlines()]
        return rows

    def _lists_match(self, rows: list[dict[str, Any]], counts: dict[str, int]) -> None:
        got = {r["threadId"]: (r["title"], r["preview"], r["archived"], r["itemCount"])
               for r in rows}  # fmt: skip
        assert len(got) == len(rows), "a thread listed twice"
        want = {t.thread_id: (t.title, t.preview, t.archived, counts[t.thread_id])
                for t in self.model.threads.values()}  # fmt: skip
        assert got == want, _diff(got, want)

    def _words_found(self, server: ServerProcess) -> None:
        """Every word, in exactly the threads holding it: all at once (`qz*`: each record
        holds one word, whole in its snippet), then the words of the threads this step
        touched one by one."""
        for archived in (False, True):
            found: dict[str, set[str]] = {}
            for hit in self._search(server, "qz*", archived=archived):
                for word in WORD.findall(hit["snippet"]):
                    found.setdefault(word, set()).add(hit["threadId"])
            want = {w: self.model.holding(w, archived=archived) for w in self.model.all_words()}
            want = {w: ids for w, ids in want.items() if ids}
            assert found == want, _diff(found, want)
        touched = [*self.model.threads.values(), *self.model.deleted.values()]
        for thread in (t for t in touched if t.thread_id in self.touched):
            for word in sorted(thread.words):
                for archived in (False, True):
                    hits = self._search(server, word, archived=archived)
                    ids = {hit["threadId"] for hit in hits}
                    assert ids == self.model.holding(word, archived=archived), (word, archived)


def _diff(got: dict[str, Any], want: dict[str, Any]) -> str:
    lines = []
    for key in sorted(set(got) | set(want)):
        if got.get(key) != want.get(key):
            lines.append(f"  {key}: got {got.get(key)!r}, want {want.get(key)!r}")
    return "differs:\n" + "\n".join(lines)
