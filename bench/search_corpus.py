"""A corpus of real-shaped agent sessions for bench/search.py, written as thread files
directly (docs/storage.md's format, as bench/listing.py does): fast, deterministic.

Each thread is a run of turns in one of `FOLDERS` workspaces: a user's request (a bug,
a file, an error message), the assistant's answers in English prose with code words,
paths and commands, tool calls (`operation` started with a title, a command and its
arguments as an agent gives them, then committed with its output: matched lines, test
results, a traceback now and then, 80-2,000 characters as an import keeps them), edits
(`file_edit` paths), now and then the todo list. Words follow a Zipf law over a
vocabulary of English words and identifiers, as text does, so a common word is in a large
share of records and a rare one in a handful. `NEEDLES` are planted: a word in exactly
`NEEDLE_COUNT` messages, and a phrase."""

from __future__ import annotations

import itertools
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from restore.home.layout import Layout

FOLDERS = 20
RARE = "quixotically"
"""In exactly `NEEDLE_COUNT` messages, nowhere else."""
NEEDLE_COUNT = 7
PHRASE = "flaky integration test"
PREFIX = "serializ"
COMMON = "test"

_FUNCTION = ("the to of and a in is it that for on this with as be we not you are at "
             "from or by can if but will so an all was have which now then one")  # fmt: skip
_CONTENT = ("test file error function code change value return type module fix check run "
            "call build data list name path config update result case line output input "
            "version server client request response index thread message cache query "
            "parser token string number object class method field default option flag "
            "import export handler event state session store write read open close start "
            "stop retry timeout failure success branch commit merge review deploy log trace "
            "memory buffer stream socket pipe frame page cursor limit offset schema table "
            "column row key lock queue worker batch job task plan step loop array map set "
            "dict tuple bool int float null none undefined exception warning debug info "
            "serialize serializer serialization deserialize parse format encode decode "
            "render template widget button modal layout style theme color font icon image "
            "upload download fetch sync async await promise callback hook plugin "
            "extension")  # fmt: skip
_ERRORS = (
    "TypeError: 'NoneType' object is not subscriptable",
    "KeyError: 'session_id'",
    "AssertionError: assert 3 == 2",
    "ModuleNotFoundError: No module named 'yaml'",
    "FileNotFoundError: [Errno 2] No such file or directory: 'config.toml'",
    "error[E0502]: cannot borrow `state` as mutable because it is also borrowed",
    "Uncaught TypeError: Cannot read properties of undefined (reading 'map')",
    "fatal: not a git repository (or any of the parent directories): .git",
)
_COMMANDS = (
    "pytest -q {f}", "npm test -- {m}", "cargo test {m}", "rg -n {w} src/", "git diff {f}",
    "python -m {m} --check", "ruff check {f}", "go test ./{m}/...",
)  # fmt: skip


def _pseudo_words(count: int, rng: random.Random) -> list[str]:
    """Identifier-like words beyond the English ones: the long tail of a code base."""
    syllables = ["ka", "lo", "mi", "ver", "tor", "dex", "pla", "zu", "quen", "bri", "sto",
                 "fen", "gra", "hul", "nix", "ral", "sep", "tav", "wim", "yor"]  # fmt: skip
    words = set()
    while len(words) < count:
        words.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    words.discard(RARE)
    return sorted(words)


@dataclass
class Corpus:
    threads: int = 0
    messages: int = 0
    items: int = 0
    data_bytes: int = 0
    folders: list[str] = field(default_factory=list)


class _Text:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        vocabulary = _FUNCTION.split() + _CONTENT.split() + _pseudo_words(20_000, rng)
        weights = [1 / (rank + 1) ** 1.07 for rank in range(len(vocabulary))]
        self.cumulative = list(itertools.accumulate(weights))
        self.vocabulary = vocabulary
        self.modules = vocabulary[len(_FUNCTION.split()) : len(_FUNCTION.split()) + 400]

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.vocabulary, cum_weights=self.cumulative, k=n)

    def path(self) -> str:
        parts = self.rng.choices(self.modules, k=self.rng.randint(1, 3))
        ext = self.rng.choice(("py", "ts", "rs", "go", "md", "toml"))
        return "src/" + "/".join(parts) + "." + ext

    def sentence(self) -> str:
        words = self.words(self.rng.randint(6, 22))
        if self.rng.random() < 0.15:
            words.insert(self.rng.randrange(len(words)), f"`{self.path()}`")
        return " ".join(words).capitalize() + "."

    def prose(self, sentences: int) -> str:
        text = " ".join(self.sentence() for _ in range(sentences))
        if self.rng.random() < 0.08:
            text += "\n\n```\n" + self.rng.choice(_ERRORS) + "\n```"
        return text

    def output(self) -> str:
        """What a command printed, as an import keeps it (a preview of 2,000 characters at
        most): matched lines or test results, an error now and then."""
        lines = []
        for _ in range(self.rng.randint(1, 18)):
            where = f"{self.path()}:{self.rng.randint(1, 900)}"
            if self.rng.random() < 0.5:
                lines.append(f"{where}: {' '.join(self.words(self.rng.randint(3, 12)))}")
            else:
                lines.append(f"{where}::test_{'_'.join(self.words(2))} PASSED")
        if self.rng.random() < 0.3:
            lines.append(self.rng.choice(_ERRORS))
        return "\n".join(lines)[:2000]

    def command(self) -> str:
        template = self.rng.choice(_COMMANDS)
        return template.format(f=self.path(), m=self.rng.choice(self.modules),
                               w=self.rng.choice(self.modules))  # fmt: skip


class _Stamper:
    """A thread's record envelopes: seqs from 1, a second apart, on the thread's day."""

    def __init__(self, rng: random.Random, session: str, day: int, n: int) -> None:
        self.rng, self.session, self.n = rng, session, n
        self.date = f"2026-{1 + (day - 1) // 28:02d}-{1 + (day - 1) % 28:02d}"
        self.seq = 0

    def __call__(self, kind: str, **fields: object) -> dict[str, object]:
        self.seq += 1
        tick = self.seq
        clock = f"{tick // 3600 % 24:02d}:{tick // 60 % 60:02d}:{tick % 60:02d}"
        ts = f"{self.date}T{clock}.{self.n % 1_000_000:06d}Z"
        item_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        return {"v": 1, "seq": self.seq, "ts": ts, "type": kind, "sessionId": self.session,
                "id": item_id, **fields}  # fmt: skip


def write_corpus(layout: Layout, threads: int, messages: int, seed: int = 24) -> Corpus:
    """`threads` thread files holding `messages` messages in all, plus their tool calls,
    edits and todos; the needles planted (module docstring)."""
    rng = random.Random(seed)
    text = _Text(rng)
    corpus = Corpus(threads=threads, folders=[f"/work/project-{n}" for n in range(FOLDERS)])
    needles = set(rng.sample(range(messages), NEEDLE_COUNT))
    phrases = set(rng.sample(range(messages), max(1, messages // 2000)))
    per_thread = messages // threads
    message_no = 0
    for n in range(threads):
        thread_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        folder = corpus.folders[n % FOLDERS]
        day = 1 + n * 300 // threads
        stamp = _Stamper(rng, session, day, n)

        lines = [stamp("session_meta", threadId=thread_id, source="startup", reason="user",
                       cwd=folder, workspaceFolder=folder, branch="main",
                       title=" ".join(text.words(4)).capitalize())]  # fmt: skip
        count = per_thread if n < threads - 1 else messages - message_no
        for k in range(count):
            user = k % 4 == 0
            body = text.prose(1 if user else rng.randint(1, 6))
            if user and rng.random() < 0.3:
                body = f"{rng.choice(_ERRORS)} in {text.path()}, can you fix it?"
            if message_no in needles:
                body += f" It behaved {RARE} after the upgrade."
            if message_no in phrases:
                body += f" Probably the {PHRASE} again."
            lines.append(stamp("message", role="user" if user else "assistant", content=body))
            message_no += 1
            if not user and k % 4 == 2:
                operation = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                command = text.command()
                given = {"command": command, "description": text.sentence()}
                lines.append(stamp("operation", operationId=operation, tool="shell",
                                   effect="side_effect", state="started", command=command,
                                   title=f"Run {command.split()[0]}", input=given))  # fmt: skip
                lines.append(stamp("operation", operationId=operation, tool="shell",
                                   effect="side_effect", state="committed",
                                   resultPersisted=True, result=text.output()))  # fmt: skip
                lines.append(stamp("file_edit", path=f"{folder}/{text.path()}",
                                   beforeSha=None, afterSha=None))  # fmt: skip
            if k % 40 == 5:
                lines.append(stamp("todos", items=[
                    {"id": str(i), "content": text.sentence(), "status": "pending"}
                    for i in range(3)]))  # fmt: skip
        path = layout.thread_path(thread_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
        path.write_bytes(data)
        corpus.items += len(lines)
        corpus.data_bytes += len(data)
    corpus.messages = message_no
    return corpus


def main() -> None:
    import argparse
    import time

    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    args = parser.parse_args()
    began = time.perf_counter()
    corpus = write_corpus(Layout(args.home), args.threads, args.messages)
    print(corpus, f"{time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
