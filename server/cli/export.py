"""`sessiond export ID --format md|json|html [-o FILE]` and `sessiond export --all DIR`:
threads as documents (restore/render/document.py), and `sessiond import sessiond FILE`,
a JSON export taken back.

A file is written beside its final name and renamed into place when whole (0600: a
transcript is private), so an interrupted export leaves no half document under the name.
A passphrase is read from a file (`--passphrase-file`) or asked on the terminal
(`--encrypt`), never taken from argv (every local user reads argv in `ps`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

from restore.render import document
from restore.render.text import plural, safe
from restore.service import ThreadService
from restore.stores.api import ListFilters
from restore.summary import ThreadSummary
from server.cli.options import THREAD_ID_HELP, CommandError
from server.config import ServerConfig


def _service(config: ServerConfig) -> ThreadService:
    """The configured store (embedded, or the shared database), as every command opens it."""
    from restore.service import open_service

    return open_service(config.store_settings())


def arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("thread_id", metavar="ID", nargs="?", help=THREAD_ID_HELP)
    parser.add_argument(
        "--format",
        choices=document.FORMATS,
        default=None,
        help="md (Markdown), json (the protocol's items, lossless: `sessiond import sessiond "
        "FILE` takes it back) or html (one self-contained page); default md, html with --all",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument(
        "--all",
        metavar="DIR",
        help="every thread, one file each under DIR/<folder>/, with DIR/index.html listing "
        "them by folder and date",
    )
    # Refused by name (argparse would take `--passphrase X` for `--passphrase-file X`)
    parser.add_argument("--passphrase", help=argparse.SUPPRESS)
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--passphrase-file",
        metavar="FILE",
        help="html: encrypt with the passphrase in FILE (its first line); the page asks for "
        "it and decrypts in the browser (AES-GCM, PBKDF2)",
    )
    secret.add_argument(
        "--encrypt",
        action="store_true",
        help="html: encrypt, asking for the passphrase on the terminal",
    )


def _passphrase(args: argparse.Namespace) -> bytes | None:
    if args.passphrase is not None:
        raise CommandError(
            "a passphrase is never taken on the command line (every local "
            "user reads argv): use --passphrase-file FILE or --encrypt"
        )
    if args.passphrase_file:
        try:
            text = Path(args.passphrase_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read --passphrase-file: {exc}") from None
        phrase = text.splitlines()[0] if text.splitlines() else ""
    elif args.encrypt:
        if not sys.stdin.isatty():
            raise CommandError("--encrypt asks on a terminal: use --passphrase-file FILE")
        import getpass

        phrase = getpass.getpass("passphrase: ")
        if getpass.getpass("again: ") != phrase:
            raise CommandError("the passphrases differ: nothing written")
    else:
        return None
    if len(phrase) < 8:
        raise CommandError("a passphrase of 8 or more characters, please: nothing written")
    return phrase.encode()


def _write_file(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """`write` into a temporary file beside `path`, renamed over it once whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb", buffering=1024 * 1024) as out:
            write(out)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def export(config: ServerConfig, args: argparse.Namespace) -> int:
    if (args.all is None) == (args.thread_id is None):
        raise CommandError("name a thread (ID) or --all DIR, one of them")
    fmt: document.Format = args.format or ("html" if args.all else "md")
    passphrase = _passphrase(args)
    if passphrase is not None and fmt != "html":
        raise CommandError("only html is encrypted: add --format html")
    service = _service(config)
    try:
        if args.all is not None:
            if args.output:
                raise CommandError("--all writes into its DIR: leave out -o")
            return _export_all(service, Path(args.all), fmt, passphrase)
        thread_id = service.thread_id_of(args.thread_id)
        if args.output:
            _write_file(
                Path(args.output),
                lambda out: document.write(service, thread_id, fmt, out, passphrase=passphrase),
            )
        else:
            out = sys.stdout.buffer
            document.write(service, thread_id, fmt, out, passphrase=passphrase)
            out.flush()
    finally:
        service.close_all()
    return 0


def _every_thread(service: ThreadService) -> list[ThreadSummary]:
    """Top-level threads, archived ones too (sub-agents are written inside their parent's)."""
    rows: list[ThreadSummary] = []
    for archived in (False, True):
        cursor = None
        while True:
            page, cursor = service.list(ListFilters(archived=archived, cursor=cursor, limit=200))
            rows += page
            if cursor is None:
                break
    return rows


def _folder(row: ThreadSummary) -> str:
    return row.workspaceFolder or row.cwd or "(no folder)"


def _export_all(
    service: ThreadService, root: Path, fmt: document.Format, passphrase: bytes | None
) -> int:
    """One file a thread under root/<folder>/, then root/index.html. With a passphrase the
    index names no title (it is not encrypted): ids, dates and folders only."""
    import html

    from protocol.errors import ProtocolError

    rows = _every_thread(service)
    written: dict[str, list[tuple[str, str, ThreadSummary]]] = {}
    failed: list[str] = []
    for row in rows:
        folder = _folder(row)
        date = (row.updatedAt or row.createdAt or "")[:10] or "undated"
        name = f"{date}-{row.threadId[:8]}"
        if passphrase is None:
            name += f"-{document.safe_name(document.label(row))[:40]}"
        relative = f"{document.safe_name(folder)}/{name}.{fmt}"
        try:
            _write_file(
                root / relative,
                lambda out, row=row: document.write(  # type: ignore[misc]
                    service, row.threadId, fmt, out, passphrase=passphrase
                ),
            )
        except ProtocolError as exc:  # one thread gone or unreadable: the others still go
            failed.append(f"{row.threadId}: not exported: {exc.kind}: {exc.message}")
            continue
        written.setdefault(folder, []).append((date, relative, row))

    def h(text: str) -> str:
        return html.escape(safe(text, one_line=True))

    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>sessiond threads'
        '</title><meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\"><style>:root{color-scheme:light dark}body{font:15px/1.5 "
        "system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem}h2{font-size:1.1rem;"
        "margin-top:1.5rem}h3{font-size:.95rem;margin:.6rem 0 .2rem;color:GrayText}"
        "li{margin:.15rem 0}</style></head><body>",
        f"<h1>sessiond threads</h1><p>{plural(sum(map(len, written.values())), 'thread')}, "
        "by folder and date. "
        f"{h(document.REDACTED)}</p>",
    ]
    for folder in sorted(written):
        parts.append(f"<h2>{h(folder)}</h2>")
        day = None
        for date, relative, row in sorted(written[folder], key=lambda e: e[0], reverse=True):
            if date != day:
                parts.append(("</ul>" if day else "") + f"<h3>{h(date)}</h3><ul>")
                day = date
            what = row.threadId if passphrase else f"{document.label(row)} ({row.threadId[:8]})"
            extra = " · archived" if row.archived else ""
            parts.append(f'<li><a href="{html.escape(relative)}">{h(what)}</a>{extra}</li>')
        parts.append("</ul>")
    parts.append("</body></html>\n")
    _write_file(root / "index.html", lambda out: out.write("".join(parts).encode()))
    done = sum(len(entries) for entries in written.values())
    print(
        f"{plural(done, 'thread')} written under {safe(str(root), one_line=True)}, "
        "listed in index.html"
    )
    for line in failed:
        print(safe(line, one_line=True), file=sys.stderr)
    return 1 if failed else 0


def import_export(config: ServerConfig, args: argparse.Namespace) -> int:
    """`sessiond import sessiond FILE`: each thread as it was, or a copy if it is stored."""
    from restore.render.reimport import import_export as take_back

    if not args.file:
        raise CommandError("name the JSON export: sessiond import sessiond FILE")
    service = _service(config)
    try:
        if service.home.read_only is not None:
            raise service.home.refuse_write("nothing can be imported into it")
        for done in take_back(service, Path(args.file)):
            if done.copied:
                print(
                    f"thread {done.original_id} is stored already: imported as a copy, "
                    f"thread {done.thread_id} ({plural(done.items, 'item')})"
                )
            else:
                print(f"imported thread {done.thread_id} ({plural(done.items, 'item')})")
    finally:
        service.close_all()
    return 0
