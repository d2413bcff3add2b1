"""`thread/export`: a thread as a document, answered in parts.

The document is written by `sessiond export` in a process of its own (restore/render,
page by page: bounded memory, whatever the thread's length), into a private spool file
under the data directory's `exports/`; each call answers the next part of it, at most an
eighth of the frame limit (JSON escaping may double it), and the last part removes the
file. So an export never holds the store thread, a reader thread or the server's memory,
and it dies with the server (PR_SET_PDEATHSIG). A spool file a client never finished
reading is removed by a later export after an hour. The passphrase reaches the child on
its stdin, never in its argv.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from server.handlers.context import Context

if TYPE_CHECKING:
    from protocol.methods import ThreadExportParams

SPOOL_SECONDS = 3600
MEDIA = {"md": "text/markdown", "json": "application/json", "html": "text/html"}
CURSOR = r"([0-9a-f]{32}):([0-9]{1,15}):([A-Za-z0-9._-]{1,100})"
"""`<spool file>:<offset>:<file name>` (compiled when first used: nothing at startup)."""


def _spool_dir(ctx: Context) -> Path:
    return Path(ctx.server.config.home) / "exports"


def _sweep(spool: Path) -> None:
    """Spool files older than an hour: exports a client never finished reading."""
    import time

    try:
        entries = list(os.scandir(spool))
    except FileNotFoundError:
        return
    for entry in entries:
        try:
            if time.time() - entry.stat(follow_symlinks=False).st_mtime > SPOOL_SECONDS:
                os.unlink(entry.path)
        except OSError:
            continue


def _failure(stderr: bytes) -> ProtocolError:
    """The child's one line (`sessiond: Kind: message`) as the error it names."""
    line = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    text = line[0].removeprefix("sessiond: ")
    kind, _, message = text.partition(": ")
    try:
        return ProtocolError(ErrorKind(kind), message)
    except ValueError:
        return ProtocolError(ErrorKind.INTERNAL_ERROR, f"the export failed: {text[:500]}")


async def _write(ctx: Context, thread_id: str, fmt: str, passphrase: str | None) -> Path:
    import uuid

    from restore.home.files import private_dirs
    from server.processes.parent import die_with_parent

    spool = _spool_dir(ctx)

    def prepare() -> None:
        private_dirs(spool)
        _sweep(spool)

    await ctx.server.run_reader(prepare)
    path = spool / uuid.uuid4().hex
    config = ctx.server.config
    argv = [
        sys.executable,
        "-m",
        "server.cli",
        "export",
        thread_id,
        "--format",
        fmt,
        "-o",
        str(path),
        "--home",
        str(config.home),
    ]
    if passphrase is not None:
        argv += ["--passphrase-file", "/dev/stdin"]
    env = dict(os.environ)
    if config.store:
        env["SESSIOND_STORE"] = config.store  # never in argv: it may hold a password
    child = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        preexec_fn=die_with_parent(),
    )
    try:
        _, stderr = await child.communicate((passphrase or "").encode() + b"\n")
    except asyncio.CancelledError:
        child.kill()
        await child.wait()
        raise
    if child.returncode != 0:
        path.unlink(missing_ok=True)
        raise _failure(stderr)
    return path


def _part(path: Path, offset: int, budget: int) -> tuple[bytes, int]:
    """Up to `budget` bytes from `offset`, cut where a UTF-8 character starts; the size."""
    with open(path, "rb") as spool:
        size = os.fstat(spool.fileno()).st_size
        spool.seek(offset)
        data = spool.read(budget + 4)
    if len(data) > budget:
        cut = budget
        while cut > 0 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        data = data[:cut]
    return data, size


async def thread_export(ctx: Context, params: ThreadExportParams) -> dict[str, Any]:
    from restore.ids import validate_thread_id

    thread_id = validate_thread_id(params.threadId)
    if params.passphrase is not None and params.format != "html":
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            "a passphrase encrypts html only: ask for format html",
            field="passphrase",
        )
    if params.passphrase is not None and "\n" in params.passphrase:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, "a passphrase is one line", field="passphrase"
        )
    if params.cursor is None:
        from restore.render.document import label, safe_name

        def known() -> Any:
            store = ctx.service.store
            store.flush()  # rows this server holds back, so the child lists sub-agents
            row = store.index.get(thread_id)
            if row is None and not store.exists(thread_id):
                raise ProtocolError(
                    ErrorKind.THREAD_NOT_FOUND, "no such thread", threadId=thread_id
                )
            return row

        row = await ctx.server.run_in_worker(known)
        name = "thread" if row is None or params.passphrase else safe_name(label(row))
        name = f"{name[:60]}-{thread_id[:8]}.{params.format}"
        path = await _write(ctx, thread_id, params.format, params.passphrase)
        export_id, offset = path.name, 0
    else:
        import re

        found = re.fullmatch(CURSOR, params.cursor)
        if found is None:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                "not a cursor of thread/export: pass nextCursor as it came",
                field="cursor",
            )
        export_id, offset, name = found.group(1), int(found.group(2)), found.group(3)
        path = _spool_dir(ctx) / export_id
    budget = max(128, ctx.server.config.max_frame // 8)
    try:
        data, size = await ctx.server.run_reader(lambda: _part(path, offset, budget))
    except FileNotFoundError:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            "this export is gone (read to its end, "
            "or left unread for an hour): start again without a cursor",
            field="cursor",
        ) from None
    end = offset + len(data)
    if end >= size:
        await ctx.server.run_reader(lambda: path.unlink(missing_ok=True))
    return {
        "data": data.decode("utf-8", "replace"),
        "nextCursor": None if end >= size else f"{export_id}:{end}:{name}",
        "fileName": name,
        "mediaType": MEDIA[params.format],
        "size": size,
    }
