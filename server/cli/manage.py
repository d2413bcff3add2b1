"""Tidying up from the command line: `sessiond delete`, `archive`, `unarchive`, `rename`.

What the editor's Threads view offers, without hand-written JSON-RPC, on whichever store
is configured (the files under `--home`, or the `--store` database). Every id may be a
unique prefix (`sessiond delete 88180741`), as `list` and `search` print them; all of them
are resolved before anything changes, so one typo changes nothing. Deleting cannot be
undone: on a terminal it asks, elsewhere it needs `--yes`.
"""

from __future__ import annotations

import argparse
import sys

from restore.service import ThreadService
from restore.summary import ThreadSummary
from server.cli.commands import _label, _service
from server.cli.options import CommandError
from server.cli.terminal import plural, safe
from server.config import ServerConfig


def _resolve(service: ThreadService, typed: list[str]) -> list[str]:
    """Every typed id or prefix as the one thread it names, each once, in the order typed."""
    return list(dict.fromkeys(service.thread_id_of(text) for text in typed))


def _row(summary: ThreadSummary) -> str:
    return safe(f"{summary.threadId}  {_label(summary.thread_info())}", one_line=True)


def _confirmed(service: ThreadService, thread_ids: list[str]) -> bool:
    """Asked on the terminal, naming each thread: anything but y or yes keeps them."""
    print(
        f"delete {plural(len(thread_ids), 'thread')} for good (there is no undo)?", file=sys.stderr
    )
    for thread_id in thread_ids:
        row = service.index.get(thread_id)
        print(f"  {_row(row) if row else thread_id}", file=sys.stderr)
    print("[y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def delete(config: ServerConfig, args: argparse.Namespace) -> int:
    """Each thread's file (or rows), snapshot and listing row, for good."""
    if not args.yes and not sys.stdin.isatty():
        raise CommandError("deleting cannot be undone: add --yes (not on a terminal, none asks)")
    service = _service(config)
    try:
        thread_ids = _resolve(service, args.thread_ids)
        if not args.yes and not _confirmed(service, thread_ids):
            print("nothing deleted", file=sys.stderr)
            return 1
        for thread_id in thread_ids:
            row = service.index.get(thread_id)
            service.delete(thread_id)
            print(f"deleted {_row(row) if row else thread_id}")
    finally:
        service.close_all()
    return 0


def _set_archived(config: ServerConfig, args: argparse.Namespace, archived: bool) -> int:
    service = _service(config)
    verb = "archived" if archived else "unarchived"
    try:
        for thread_id in _resolve(service, args.thread_ids):
            print(f"{verb} {_row(service.archive(thread_id, archived))}")
    finally:
        service.close_all()
    return 0


def archive(config: ServerConfig, args: argparse.Namespace) -> int:
    """Off the list (`list --archived` shows them), kept whole; `unarchive` brings back."""
    return _set_archived(config, args, True)


def unarchive(config: ServerConfig, args: argparse.Namespace) -> int:
    return _set_archived(config, args, False)


def rename(config: ServerConfig, args: argparse.Namespace) -> int:
    """A new title, recorded as an item (it survives a lost index), as the editor's Rename."""
    title = " ".join(args.title).strip()
    if not title:
        raise CommandError("a title needs a word: sessiond rename ID 'fix the payment bug'")
    if len(title) > 500:
        raise CommandError(f"a title is at most 500 characters, this one is {len(title)}")
    service = _service(config)
    try:
        summary = service.set_title(service.thread_id_of(args.thread_id), title)
    finally:
        service.close_all()
    print(f"renamed {_row(summary)}")
    return 0
