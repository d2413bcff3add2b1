"""Pages of a thread (thread/read, resume's newest messages) that cost O(page), whatever
the depth or the file's size: a page parses from the offset map's anchor before it
(restore/stores/embedded/offsets.py) and stops once it is full, instead of parsing the
whole file. A file whose seqs do not increase (only hand-made damage does that) is paged
by scanning it from the start, which gives the same answers the slow way.

Which bad lines a page reports (`skippedLines`): each bad line belongs to the next good
item after it, and the bad lines after the last item to the end of the file. A page
reports the bad lines of the items it returns, and the end's when it reaches the end, so
successive pages in either direction report every bad line once and a page reads only the
bytes it covers. Line numbers are counted only when a page has bad lines to report.

Pages are cut by bytes as well as by count, so an answer stays under the frame limit; an
item that cannot fit in any answer is a PayloadTooLarge naming its seq, and the cursor
just past it lets a client go on.

Thread-safe: the server reads pages off the store thread (a long read never holds another
client's record), and the store thread uses it for resume.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from protocol.errors import ErrorKind, ProtocolError, thread_not_found
from restore.home.layout import Layout
from restore.ids import validate_thread_id
from restore.stores.api import ANSWER_OVERHEAD, Page, too_large
from restore.stores.embedded.files import open_thread_file, thread_file_error
from restore.stores.embedded.lines import Line, scan
from restore.stores.embedded.offsets import (
    ANCHOR_BYTES,
    Anchors,
    OffsetMaps,
    Unordered,
    WrongMap,
)
from restore.stores.records import Item

_NO_SEQ_ABOVE = 1 << 62  # a seq (and a byte budget) no thread reaches


@dataclass(slots=True)
class _Entry:
    """A good line and the bad lines it owns (those between it and the good line before)."""

    line: Line
    bad: list[Line]
    cost: int = 0
    """Bytes it adds to an answer."""

    def __post_init__(self) -> None:
        self.cost = len(self.line.raw) + 1 + (_bad_cost(self.bad) if self.bad else 0)


def _too_large(line: Line, budget: int) -> ProtocolError:
    assert line.item is not None
    return too_large(line.item["seq"], len(line.raw), budget)


def _bad_cost(bad: list[Line]) -> int:
    return sum(len(line.preview.encode()) + 96 for line in bad)


class ThreadPages:
    """Pages of thread files, through offset maps cached in memory and kept on disk."""

    def __init__(self, layout: Layout, anchor_bytes: int = ANCHOR_BYTES) -> None:
        self.layout = layout
        self.maps = OffsetMaps(layout, anchor_bytes)

    # --- pages ----------------------------------------------------------------------------

    def read(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        """Forward (`after`: the first `limit` items with seq > after) or back (`before`:
        the last `limit` items with seq < before); items ascending either way."""
        thread_id = validate_thread_id(thread_id)
        with _OpenFile(self.layout, thread_id) as (fd, path):
            try:
                stat = os.fstat(fd)
                result = self._read(
                    thread_id, path, fd, stat.st_size, after, before, limit, max_bytes
                )
            except OSError as exc:
                raise thread_file_error(exc, thread_id, path) from exc
        result.source = (stat.st_dev, stat.st_ino, stat.st_size)
        return result

    def _read(
        self,
        thread_id: str,
        path: Path,
        fd: int,
        size: int,
        after: int | None,
        before: int | None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        page = (after, before, limit, max_bytes)
        for _ in (1, 2):
            anchors = self.maps.anchors(thread_id, path, fd, size)
            try:
                return self._page(fd, size, anchors, *page)
            except Unordered:
                return self._page(fd, size, anchors.unordered(), *page)
            except WrongMap:
                self.maps.drop(thread_id, path)
        # Rebuilt and wrong again: the file is changing under us. Scan it instead.
        return self._page(fd, size, anchors.without(), *page)

    def after(
        self, thread_id: str, after: int, *, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """The items after seq `after`, ascending, each with its seq, cut like a forward
        page; True when more follow. For followers (server/live/relay.py): a thread that is
        gone has nothing after; bad lines are not items and are left out."""
        try:
            page = self.read(thread_id, after=after, limit=limit, max_bytes=max_bytes)
        except ProtocolError as exc:
            if exc.kind is ErrorKind.THREAD_NOT_FOUND:
                return [], False
            raise
        return [(orjson.loads(raw)["seq"], raw) for raw in page.raw], page.next_seq is not None

    def last_seq(self, thread_id: str) -> int:
        """The seq of the thread's last item (0 when it has none); ThreadNotFound if none
        such. Read from the file's end, whatever its length."""
        page = self.read(thread_id, before=_NO_SEQ_ABOVE, limit=1, max_bytes=_NO_SEQ_ABOVE)
        return orjson.loads(page.raw[-1])["seq"] if page.raw else 0

    def holds(self, thread_id: str, page: Page, backward: bool) -> bool:
        """Whether a page read earlier is still what a read now would answer: the thread's
        file is the same file (device, inode), and no shorter. Items before a seq never
        change in an append-only file, so a backward page holds while the file only grew;
        a forward page may end at the end of the file, so it holds only at the same size."""
        found = self.layout.locate(validate_thread_id(thread_id))
        if found is None or page.source is None:
            return False
        try:
            stat = os.stat(found[0], follow_symlinks=False)
        except OSError:
            return False
        device, inode, size = page.source
        grown_only = stat.st_size >= size if backward else stat.st_size == size
        return (stat.st_dev, stat.st_ino) == (device, inode) and grown_only

    def forget(self, thread_id: str) -> None:
        """The thread is gone: drop its map (memory and disk)."""
        self.maps.forget(thread_id)

    def _page(
        self,
        fd: int,
        size: int,
        anchors: Anchors,
        after: int | None,
        before: int | None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        budget = max_bytes - ANSWER_OVERHEAD
        if before is not None:
            return self._backward(fd, size, anchors, before, limit, budget)
        return self._forward(fd, size, anchors, after or 0, limit, budget)

    def pick(self, thread_id: str, seqs: Sequence[int], max_bytes: int) -> tuple[list[Item], bool]:
        """The items with these seqs (ascending), newest first within `max_bytes`; True when
        older ones were left out for the budget. Reads from the oldest seq's anchor on."""
        if not seqs:
            return [], False
        with _OpenFile(self.layout, thread_id) as (fd, path):
            try:
                size = os.fstat(fd).st_size
                anchors = self.maps.anchors(thread_id, path, fd, size)
                try:
                    start = anchors.start_at_or_before(seqs[0])
                except WrongMap:
                    self.maps.drop(thread_id, path)
                    anchors = self.maps.anchors(thread_id, path, fd, size)
                    start = anchors.start_at_or_before(seqs[0])
                wanted = set(seqs)
                found: list[Line] = []
                for line in scan(fd, start, size, whole_items=True):
                    if line.item is None:
                        continue
                    seq = line.item["seq"]
                    if seq > seqs[-1] and anchors.ordered:
                        break
                    if seq in wanted:
                        wanted.discard(seq)
                        found.append(line)
            except OSError as exc:
                raise thread_file_error(exc, thread_id, path) from exc
        budget = max_bytes - ANSWER_OVERHEAD
        kept: list[Item] = []
        for line in reversed(found):
            budget -= len(line.raw) + 1
            if budget < 0:
                break
            kept.append(line.item)  # type: ignore[arg-type]
        kept.reverse()
        return kept, len(kept) < len(found)

    def _forward(
        self, fd: int, size: int, anchors: Anchors, after: int, limit: int, budget: int
    ) -> Page:
        used = 0
        chosen: list[_Entry] = []
        bad: list[Line] = []
        more = False
        previous = None
        for line in scan(fd, anchors.start_at_or_before(after), size):
            if line.item is None:
                bad.append(line)
                continue
            seq = line.item["seq"]
            if anchors.ordered:
                if previous is not None and seq <= previous:
                    raise Unordered
                previous = seq
            if seq <= after:
                bad = []  # they belong to an item of an earlier page
                continue
            if len(chosen) == limit:
                more = True
                break
            entry = _Entry(line, bad)
            if used + entry.cost > budget:
                if not chosen:
                    raise _too_large(line, budget)
                more = True
                break
            chosen.append(entry)
            used += entry.cost
            bad = []
        next_seq = chosen[-1].line.item["seq"] if more else None  # type: ignore[index]
        if not more:  # the end of the file: its bad lines come with this page
            chosen.append(_Entry(Line(size, size, None), bad))
        return self._unpack(fd, anchors, chosen, next_seq)

    def _backward(
        self, fd: int, size: int, anchors: Anchors, before: int, limit: int, budget: int
    ) -> Page:
        # Scan a stretch ending at the anchor after `before` (its item and the bad lines
        # before it belong to later pages) or at the end of the file, and starting at the
        # anchor `limit` seqs earlier (seqs go up by one a record, so that is usually
        # enough); step further back (twice as far each time) until the stretch holds one
        # item more than the page, or reaches the file's start.
        after_before = bisect.bisect_left(anchors.seqs, before)
        later = after_before < len(anchors.seqs)
        end = anchors.at(after_before) if later else size
        anchor = min(after_before, bisect.bisect_right(anchors.seqs, before - limit - 1)) - 1
        step, first = 1, True
        entries: list[_Entry] = []
        tail: list[Line] = []  # the end's bad lines, when the scan reached the end
        while True:
            start = anchors.at(anchor)
            found, leftover = _collect_before(fd, start, end, before, anchors.ordered)
            if first:
                tail = (leftover or []) if not later else []
            elif entries and leftover:  # bad lines ending an older stretch: the next item's
                entries[0].bad[:0] = leftover
                entries[0].cost += _bad_cost(leftover)
            entries[:0] = found
            if start == 0 or len(entries) > limit:
                break
            end, anchor, step, first = start, anchor - step, step * 2, False
        budget -= _bad_cost(tail)
        used = 0
        chosen: list[_Entry] = []
        for entry in reversed(entries):
            if len(chosen) == limit:
                break
            if used + entry.cost > budget:
                if not chosen:
                    raise _too_large(entry.line, budget)
                break
            chosen.append(entry)
            used += entry.cost
        chosen.reverse()
        more = (len(chosen) < len(entries) or start > 0) and bool(chosen)
        next_seq = chosen[0].line.item["seq"] if more else None  # type: ignore[index]
        chosen.append(_Entry(Line(size, size, None), tail))
        return self._unpack(fd, anchors, chosen, next_seq)

    def _unpack(
        self, fd: int, anchors: Anchors, entries: list[_Entry], next_seq: int | None
    ) -> Page:
        """The page of these entries (the last one may be the end's, with no item)."""
        good = [e.line for e in entries if e.line.item is not None]
        bad = [line for e in entries for line in e.bad]
        numbers = self.maps.line_numbers(fd, anchors.source, [line.start for line in bad])
        skipped = [line.skipped(number) for line, number in zip(bad, numbers, strict=True)]
        return Page(next_seq, skipped, [line.raw for line in good])


class _OpenFile:
    """A thread's file opened for reading; a move (archive) between locating and opening
    it is retried once."""

    def __init__(self, layout: Layout, thread_id: str) -> None:
        self.layout = layout
        self.thread_id = thread_id
        self.fd = -1

    def __enter__(self) -> tuple[int, Path]:
        for attempt in (1, 2):
            found = self.layout.locate(self.thread_id)
            if found is None:
                break
            path = found[0]
            try:  # a regular file, reached without a symlink (files.py)
                self.fd = open_thread_file(path, os.O_RDONLY, self.thread_id)
                return self.fd, path
            except ProtocolError:
                if attempt == 2 or os.path.lexists(path):
                    raise
        raise thread_not_found(self.thread_id)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def _collect_before(
    fd: int, start: int, end: int, before: int, ordered: bool
) -> tuple[list[_Entry], list[Line] | None]:
    """Good lines with seq < `before` in [start, end), each with the bad lines it owns, and
    the bad lines left after the last of them (None when a newer item owns them)."""
    entries: list[_Entry] = []
    bad: list[Line] = []
    previous = None
    for line in scan(fd, start, end):
        if line.item is None:
            bad.append(line)
            continue
        seq = line.item["seq"]
        if ordered:
            if previous is not None and seq <= previous:
                raise Unordered
            previous = seq
        if seq >= before:
            if ordered:
                return entries, None  # everything from here on is newer
            bad = []
            continue
        entries.append(_Entry(line, bad))
        bad = []
    return entries, bad
