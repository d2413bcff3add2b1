"""`sessiond doctor --redact` on the embedded store: the threads stored before redaction
(or under a weaker mode) rewritten with their secrets replaced.

Each thread file that holds a secret is written again whole under its lock (a new file
put in place atomically: the old bytes are no longer in any file of the home), its
snapshot and offset map deleted (derived: rebuilt by the next resume), and once any file
changed the SQLite index is deleted with its WAL and rebuilt, since SQLite keeps freed
pages' old bytes. Lines that are not JSON (a torn tail, garbage) are redacted as text;
unchanged lines keep their bytes. Blobs that held a secret are replaced by their redacted
contents (under the new contents' sha), `recovered/` copies are redacted as text. A thread
another process is writing is left alone and named (`busy`).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import suppress
from pathlib import Path

import orjson

from restore.home.files import read_regular, write_atomically
from restore.home.layout import Layout
from restore.redaction.engine import Redactor
from restore.stores.api import RedactionReport, StepProgress
from restore.stores.embedded import blobs
from restore.stores.embedded.claims import Claims
from restore.stores.records import encode_line


def _redact_lines(redactor: Redactor, data: bytes) -> bytes:
    out: list[bytes] = []
    for line in data.splitlines(keepends=True):
        body = line.rstrip(b"\n")
        try:
            item = orjson.loads(body)
        except orjson.JSONDecodeError:
            item = None
        if isinstance(item, dict):
            redacted = redactor.item(item)
            out.append(line if redacted is item else encode_line(redacted))
            continue
        text = line.decode("utf-8", "surrogateescape")
        new = redactor.text(text)
        out.append(line if new is text else new.encode("utf-8", "surrogateescape"))
    return b"".join(out)


def _rewrite_thread(path: Path, redactor: Redactor, apply: bool, claims: Claims) -> bool | None:
    """True: the file held a secret (rewritten when `apply`); None: busy elsewhere (an
    open session's claim, or the file's lock)."""
    if not claims.take(path.stem):
        return None
    try:
        return _rewrite_claimed(path, redactor, apply)
    finally:
        claims.drop(path.stem)


def _rewrite_claimed(path: Path, redactor: Redactor, apply: bool) -> bool | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        data = read_regular(path)
        new = _redact_lines(redactor, data)
        if new == data:
            return False
        if apply:
            write_atomically(path, new)  # under the old file's lock: no writer in between
        return True
    finally:
        os.close(fd)


def redact_existing(
    layout: Layout, redactor: Redactor, progress: StepProgress | None, *, apply: bool
) -> RedactionReport:
    report = RedactionReport(applied=apply)
    redactor.counts.clear()
    files = layout.iter_thread_files()
    claims = Claims(layout)
    for done, (path, _archived) in enumerate(files):
        if progress is not None:
            progress("threads", done, len(files))
        report.threads += 1
        try:
            changed = _rewrite_thread(path, redactor, apply, claims)
        except OSError as exc:
            report.failed.append(f"{path.name}: {exc.strerror or exc}")
            continue
        if changed is None:
            report.busy.append(path.stem)
        elif changed:
            report.changed.append(path.stem)
            if apply:
                for derived in (layout.snapshot_path(path.stem), layout.offsets_path(path.stem)):
                    with suppress(FileNotFoundError):
                        derived.unlink()
    if progress is not None:
        progress("threads", len(files), len(files))
    shas = blobs.shas(layout)
    for done, sha in enumerate(shas):
        if progress is not None:
            progress("blobs", done, len(shas))
        data = blobs.get(layout, sha)
        if data is None:
            continue
        new = redactor.data(data)
        if new is not data:
            report.blobs += 1
            if apply:
                blobs.put(layout, new)
                layout.blob_path(sha).unlink()
    if progress is not None:
        progress("blobs", len(shas), len(shas))
    recovered = layout.recovered_dir
    for path in sorted(recovered.glob("*")) if recovered.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            data = read_regular(path)
            new = _redact_lines(redactor, data)
            if new != data:
                report.recovered += 1
                if apply:
                    write_atomically(path, new)
    if apply and (report.changed or report.blobs):
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(FileNotFoundError):
                Path(f"{layout.index_path}{suffix}").unlink()
    report.counts = dict(redactor.counts)
    return report
