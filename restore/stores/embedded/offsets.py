"""The seq → byte offset map of a thread file: sparse anchors that let a page seek.

Thread files are append-only and their seqs increase line by line (docs/storage.md), so a
sparse map of (seq, byte offset) anchors is enough to seek. The map holds one anchor per
`ANCHOR_BYTES` of file, each found by reading a short window there (the first whole good
line after the boundary), so building it for a 100k-item thread costs a few hundred small
reads, not a parse of the thread.

The map is derived state. It is kept beside the thread's snapshot
(`snapshots/<id[:2]>/<id>.offsets`) and in memory while the process reads the thread;
before every use it is checked against the file by its last anchor's line (position and
sha256, `LineMark`), extended over the bytes appended since, and rebuilt from the file when
it is missing, corrupt or stale. Deleting it changes no answer.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson

from restore.home.files import private_dirs, read_regular, write_atomically
from restore.home.layout import Layout
from restore.ids import sha256_of
from restore.stores.embedded.jsonl import LineMark, decode_line
from restore.stores.embedded.lines import CHUNK, MAX_ANCHOR_LINE, WINDOW, whole_line

ANCHOR_BYTES = 64 * 1024
"""One anchor per this many bytes: a page parses at most this much beyond its own items."""
MAP_VERSION = 1
SAVE_AFTER_ANCHORS = 16  # a map that grew by this many anchors is written again
_PROBE_LINES = 8  # bad lines tried after a boundary before giving up on its anchor
_CACHED_MAPS = 256


@dataclass
class OffsetMap:
    """Anchors: the good line at `offsets[i]` has seq `seqs[i]`; both increase."""

    seqs: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    sampled: int = 0
    """Every anchor boundary below this offset has been probed."""
    mark: LineMark | None = None
    """The last anchor's line: while it holds, so do all the anchors."""
    ordered: bool = True
    """False once a page saw seqs that do not increase: page by scanning from the start."""
    line_numbers: dict[int, int] = field(default_factory=dict)
    """Newlines before an offset, for bad lines' line numbers (counted on demand)."""
    unsaved: int = 0

    def matches(self, fd: int, size: int) -> bool:
        return self.sampled <= size and (self.mark is None or self.mark.holds(fd))

    def to_json(self, thread_id: str) -> bytes:
        mark = self.mark
        return orjson.dumps(
            {
                "v": MAP_VERSION,
                "threadId": thread_id,
                "sampled": self.sampled,
                "mark": None if mark is None else [mark.start, mark.end, mark.sha],
                "ordered": self.ordered,
                "seqs": self.seqs,
                "offsets": self.offsets,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, thread_id: str) -> OffsetMap | None:
        """None for anything but a map of this version and thread (it is then rebuilt)."""
        try:
            raw = orjson.loads(data)
            if raw["v"] != MAP_VERSION or raw["threadId"] != thread_id:
                return None
            seqs, offsets = [int(s) for s in raw["seqs"]], [int(o) for o in raw["offsets"]]
            mark = None if raw["mark"] is None else LineMark(*raw["mark"])
            loaded = cls(seqs, offsets, int(raw["sampled"]), mark, bool(raw["ordered"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        increasing = all(a < b for a, b in itertools.pairwise(seqs)) and all(
            a < b for a, b in itertools.pairwise(offsets)
        )
        if len(seqs) != len(offsets) or not increasing or (seqs and mark is None):
            return None
        return loaded


@dataclass
class Anchors:
    """A consistent copy of a map's anchors for one page (the map may grow meanwhile).

    An anchor is checked against the file when a page first seeks to it (the line there
    must be the item it names), so a map that is well formed but wrong (bytes damaged in
    a way its checks miss) is caught before it can give a wrong page."""

    fd: int
    seqs: list[int]
    offsets: list[int]
    ordered: bool
    source: OffsetMap
    checked: set[int] = field(default_factory=set)

    def at(self, index: int) -> int:
        """The offset of anchor `index` (0: the file's start for index -1)."""
        if index < 0 or not self.ordered:
            return 0
        offset = self.offsets[index]
        if index not in self.checked:
            if os.pread(self.fd, 1, offset - 1) != b"\n":
                raise WrongMap
            line = whole_line(self.fd, offset, offset + MAX_ANCHOR_LINE)
            item = decode_line(line.rstrip(b"\n"))[0] if isinstance(line, bytes) else None
            if item is None or item["seq"] != self.seqs[index]:
                raise WrongMap
            self.checked.add(index)
        return offset

    def start_at_or_before(self, seq: int) -> int:
        """Where to parse from so that the item `seq` and the bad lines it owns are read:
        the last anchor whose seq is at most `seq`."""
        if not self.ordered:
            return 0
        return self.at(bisect.bisect_right(self.seqs, seq) - 1)

    def unordered(self) -> Anchors:
        """The file's seqs do not increase: from now on it is scanned from its start."""
        self.source.ordered = False
        return self.without()

    def without(self) -> Anchors:
        """No anchors: pages scan from the file's start (correct for any file)."""
        return Anchors(self.fd, [], [], False, self.source)


class Unordered(Exception):
    """Seqs that do not increase in file order: the anchors cannot be trusted to seek."""


class WrongMap(Exception):
    """An anchor does not point at the item it names: the map is rebuilt."""


class OffsetMaps:
    """Every thread's map, cached in memory (by file path) and kept on disk; thread-safe."""

    def __init__(self, layout: Layout, anchor_bytes: int = ANCHOR_BYTES) -> None:
        self.layout = layout
        self.anchor_bytes = anchor_bytes
        self._maps: OrderedDict[str, OffsetMap] = OrderedDict()
        self._lock = threading.Lock()

    def anchors(self, thread_id: str, path: Path, fd: int, size: int) -> Anchors:
        """The thread's map, verified against the file and extended to its end."""
        key = str(path)
        with self._lock:
            offsets = self._maps.pop(key, None) or self._load(thread_id)
            rebuilt = offsets is None or not offsets.matches(fd, size)
            if offsets is None or rebuilt:
                offsets = OffsetMap()
            added = sample(fd, size, offsets, self.anchor_bytes)
            offsets.unsaved += added
            if offsets.seqs and ((rebuilt and added) or offsets.unsaved >= SAVE_AFTER_ANCHORS):
                self._save(thread_id, offsets)
            self._maps[key] = offsets
            while len(self._maps) > _CACHED_MAPS:
                self._maps.popitem(last=False)
            return Anchors(fd, list(offsets.seqs), list(offsets.offsets), offsets.ordered, offsets)

    def _load(self, thread_id: str) -> OffsetMap | None:
        try:
            data = read_regular(self.layout.offsets_path(thread_id))
        except OSError:
            return None
        return OffsetMap.from_json(data, thread_id)

    def _save(self, thread_id: str, offsets: OffsetMap) -> None:
        """Best effort: the map is an accelerator, and a read must not fail for it."""
        try:
            path = self.layout.offsets_path(thread_id)
            private_dirs(path.parent)
            write_atomically(path, offsets.to_json(thread_id))
            offsets.unsaved = 0
        except OSError:
            pass

    def forget(self, thread_id: str) -> None:
        """The thread is gone: drop its map (memory and disk)."""
        with self._lock:
            for key in [k for k in self._maps if Path(k).stem == thread_id]:
                del self._maps[key]
        self.layout.offsets_path(thread_id).unlink(missing_ok=True)

    def drop(self, thread_id: str, path: Path) -> None:
        """A map found wrong: the next use rebuilds it from the file."""
        with self._lock:
            self._maps.pop(str(path), None)
        self.layout.offsets_path(thread_id).unlink(missing_ok=True)

    def line_numbers(self, fd: int, offsets: OffsetMap, starts: list[int]) -> list[int]:
        """1-based line numbers of the lines starting at `starts` (ascending), counted
        from the nearest offset counted before: only pages with bad lines pay for it."""
        if not starts:
            return []
        with self._lock:
            at = max((o for o in offsets.line_numbers if o <= starts[0]), default=0)
            count = offsets.line_numbers.get(at, 0)
        numbers = []
        for start in starts:
            while at < start:
                chunk = os.pread(fd, min(CHUNK * 4, start - at), at)
                if not chunk:
                    break
                count += chunk.count(b"\n")
                at += len(chunk)
            numbers.append(count + 1)
        with self._lock:
            offsets.line_numbers[at] = count
        return numbers


def sample(fd: int, size: int, offsets: OffsetMap, spacing: int) -> int:
    """Probe the anchor boundaries (multiples of `spacing`) between `offsets.sampled` and
    `size`; returns how many anchors were added. A boundary whose line is not complete yet
    is probed again later."""
    added = 0
    boundary = -(-max(offsets.sampled, 1) // spacing) * spacing
    while boundary < size:
        probe = _probe(fd, boundary, size, spacing)
        if probe is None:  # the line after it is still being written (or torn)
            offsets.sampled = boundary
            return added
        if probe is not False:
            seq, start, raw = probe
            if not offsets.offsets or start > offsets.offsets[-1]:
                if offsets.seqs and seq <= offsets.seqs[-1]:
                    offsets.ordered = False
                else:
                    offsets.seqs.append(seq)
                    offsets.offsets.append(start)
                    sha = sha256_of(raw)
                    offsets.mark = LineMark(start, start + len(raw), sha)
                    added += 1
        boundary += spacing
    offsets.sampled = size
    return added


def _probe(
    fd: int, boundary: int, size: int, spacing: int
) -> tuple[int, int, bytes] | Literal[False] | None:
    """The first good line starting at or after `boundary`: (seq, start, its bytes with the
    newline); False when there is none worth using nearby; None when the file ends first."""
    window = os.pread(fd, WINDOW, boundary - 1)
    newline = window.find(b"\n")
    read = len(window)
    while newline == -1:  # the line across the boundary is long: find its end
        if read >= spacing or boundary - 1 + read >= size:
            return False if read >= spacing else None
        more = os.pread(fd, WINDOW, boundary - 1 + read)
        if not more:
            return None
        found = more.find(b"\n")
        newline = -1 if found == -1 else read + found
        read += len(more)
    start = boundary + newline
    for _ in range(_PROBE_LINES):
        if start >= size:
            return None
        line = whole_line(fd, start, size)
        if line is None:
            return None
        if line is False:
            return False
        item, _ = decode_line(line.rstrip(b"\n"))
        if item is not None:
            return item["seq"], start, line
        start += len(line)
    return False
