"""A FUSE filesystem that forgets what was never made durable: the disk of a power cut.

kill -9 keeps the kernel's page cache, so it cannot test a promise about power loss. This
filesystem (in the spirit of Jepsen's LazyFS) keeps two states of every file and directory:
what a process sees (live) and what a power cut would leave (durable). A change reaches
the durable state only as POSIX promises it does:

- a file's bytes and size (write, truncate): at `fsync` or `fdatasync` of that file;
- a directory's names (create, mkdir, link, unlink, rmdir, rename): at `fsync` of that
  directory. A new name is durable only once its directory is synced, and a new
  directory's own name only once *its* parent is: a file synced into a directory whose
  name never was is lost with it (stricter than ext4 or XFS, whose journals commit
  earlier name changes with any later sync; exactly what fsync(2) promises).
- a rename is one change of both directories, made durable whole by a sync of either
  (journalled filesystems make a rename atomic; a sync that carries it carries the
  earlier name changes of the other directory too, so names never go back in time).

At a cut the durable state is all that is kept, plus, with `--writeback random`, what the
kernel could have written back on its own before the power went: for each file and
directory, chosen by the seed, a prefix of its unsynced changes in the order they were
made, the last write possibly torn at any byte. (Without it a program that never syncs
would lose every byte, and torn tails would never be seen.)

Not modelled: attributes (mode, owner, times) persist as they are at the cut; `sync(2)`
and `syncfs(2)` make nothing durable (the kernel does not pass them to a FUSE daemon);
no ordering between files (any file's unsynced prefix may or may not survive,
independently); no symlinks, special files or extended attributes; reads and writes of
the live state are exact (no bit rot, no lying disk that acknowledges a sync it drops).

Run as a process: `python -m tests.support.powercut_fs DISK MOUNTPOINT [--seed N]
[--writeback none|random]`. DISK is a real directory holding the durable state, loaded at
mount and written back at a cut (an empty one is an empty disk). It says `ready` on
stdout once mounted, then takes one command per line on stdin, answering each on stdout:

- `cut`: the power fails now. The durable state (plus the write-back) goes to DISK, and
  every later request fails with EIO, as a dead disk would. Answered `cut`.
- `stop` (or the end of stdin): a clean shutdown. Unless the power was cut, everything
  is synced to DISK first (as `sync` and an unmount would); then unmount (lazily: a
  process still holding a file gets ENOTCONN) and exit.

tests/support/powercut.py mounts it, cuts, remounts, and never leaves it mounted.
"""

from __future__ import annotations

import argparse
import errno
import itertools
import logging
import os
import random
import shutil
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyfuse3
import trio
from pyfuse3 import (
    EntryAttributes,
    FileHandleT,
    FileInfo,
    FUSEError,
    InodeT,
    ReaddirToken,
    RequestContext,
    SetattrFields,
    StatvfsData,
)

logger = logging.getLogger("powercut_fs")
TIMEOUT = 60.0
"""How long the kernel may cache names and attributes: every change goes through this one
mount, so the kernel's cache never goes stale (a cut is followed by a fresh mount)."""


@dataclass(eq=False)
class NameChange:
    """One change to directory entries: (directory, name, inode or None to remove)."""

    edits: list[tuple[int, bytes, int | None]]
    ns: int
    applied: bool = False

    @property
    def directories(self) -> list[int]:
        return list(dict.fromkeys(directory for directory, _, _ in self.edits))


@dataclass(eq=False)
class Node:
    ino: int
    mode: int
    uid: int
    gid: int
    mtime_ns: int
    ctime_ns: int
    nlink: int = 0
    parent: int = pyfuse3.ROOT_INODE
    # a file: live bytes, durable bytes, and the changes between them, oldest first
    data: bytearray = field(default_factory=bytearray)
    durable: bytearray = field(default_factory=bytearray)
    pending: list[tuple[str, int, bytes, int]] = field(default_factory=list)
    """("write", offset, bytes, ns) or ("truncate", size, b"", ns)"""
    durable_mtime_ns: int = 0
    # a directory: live names, durable names, and the name changes not synced yet
    entries: dict[bytes, int] = field(default_factory=dict)
    durable_entries: dict[bytes, int] = field(default_factory=dict)
    name_changes: list[NameChange] = field(default_factory=list)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


def _apply(target: bytearray, change: tuple[str, int, bytes, int], torn: int | None = None) -> None:
    kind, where, data, _ = change
    if kind == "truncate":
        if where < len(target):
            del target[where:]
        else:
            target.extend(bytes(where - len(target)))
        return
    if torn is not None:
        data = data[:torn]
    if where > len(target):
        target.extend(bytes(where - len(target)))
    target[where : where + len(data)] = data


class PowerCutFS(pyfuse3.Operations):
    """An in-memory filesystem with a durable shadow (module docstring)."""

    def __init__(self, disk: Path, seed: int, writeback: bool) -> None:
        super().__init__()
        self.disk = disk
        self.rng = random.Random(seed)
        self.writeback = writeback
        self.powered = True
        self.nodes: dict[int, Node] = {}
        self._inos = itertools.count(pyfuse3.ROOT_INODE + 1)
        self._handles: dict[int, int] = {}
        self._dir_handles: dict[int, list[tuple[bytes, int]]] = {}
        self._fhs = itertools.count(1)
        self.stats = {"fsync": 0, "fsyncdir": 0, "writes": 0}
        self._load()

    # --- the disk: loaded at mount, written at a cut -------------------------------------

    def _load(self) -> None:
        """Everything on the disk is durable: live and durable states start equal."""
        self.disk.mkdir(parents=True, exist_ok=True)
        seen: dict[tuple[int, int], int] = {}
        root_stat = self.disk.stat()
        self.nodes[pyfuse3.ROOT_INODE] = self._node_from(pyfuse3.ROOT_INODE, root_stat)
        self.nodes[pyfuse3.ROOT_INODE].nlink = 2
        self._load_dir(self.disk, pyfuse3.ROOT_INODE, seen)

    def _node_from(self, ino: int, st: os.stat_result) -> Node:
        return Node(
            ino,
            st.st_mode,
            st.st_uid,
            st.st_gid,
            st.st_mtime_ns,
            st.st_ctime_ns,
            durable_mtime_ns=st.st_mtime_ns,
        )

    def _load_dir(self, path: Path, ino: int, seen: dict[tuple[int, int], int]) -> None:
        directory = self.nodes[ino]
        with os.scandir(path) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                key = (st.st_dev, st.st_ino)
                if key in seen:  # a hard link
                    child = self.nodes[seen[key]]
                else:
                    child = self._node_from(next(self._inos), st)
                    child.parent = ino
                    self.nodes[child.ino] = child
                    seen[key] = child.ino
                    if entry.is_dir(follow_symlinks=False):
                        child.nlink = 1
                        self._load_dir(Path(entry.path), child.ino, seen)
                    else:
                        content = Path(entry.path).read_bytes()
                        child.data = bytearray(content)
                        child.durable = bytearray(content)
                child.nlink += 1
                name = os.fsencode(entry.name)
                directory.entries[name] = child.ino
                directory.durable_entries[name] = child.ino

    def cut(self) -> str:
        """The power fails: keep the durable state (and some write-back), drop the rest."""
        self.powered = False
        written_back = 0
        if self.writeback:
            for node in sorted(self.nodes.values(), key=lambda _: self.rng.random()):
                written_back += self._write_back(node)
        self._save()
        return (
            f"cut fsync={self.stats['fsync']} fsyncdir={self.stats['fsyncdir']} "
            f"writes={self.stats['writes']} written_back={written_back}"
        )

    def shutdown(self) -> None:
        """A clean shutdown: everything reaches the disk (nothing, after a cut)."""
        if not self.powered:
            return
        self.powered = False
        for node in self.nodes.values():
            if node.is_dir:
                if node.name_changes:
                    self._sync_names(node, node.name_changes[-1])
            else:
                self._sync_data(node)
        self._save()

    def _write_back(self, node: Node) -> int:
        """What the kernel might have written on its own: a prefix of the node's unsynced
        changes, the last write possibly torn."""
        if node.is_dir:
            count = self.rng.randint(0, len(node.name_changes))
            if count:
                self._sync_names(node, node.name_changes[count - 1])
            return count
        count = self.rng.randint(0, len(node.pending))
        for change in node.pending[:count]:
            _apply(node.durable, change)
        if (
            count < len(node.pending)
            and node.pending[count][0] == "write"
            and self.rng.random() < 0.5
        ):
            torn = node.pending[count]
            _apply(node.durable, torn, self.rng.randint(0, len(torn[2])))
        if count:
            node.durable_mtime_ns = node.pending[count - 1][3]
        return count

    def _save(self) -> None:
        """Replace DISK by the durable tree (reached from the root by durable names only)."""
        fresh = self.disk.with_name(self.disk.name + ".new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir()
        made: dict[int, Path] = {}

        def save_dir(node: Node, path: Path) -> None:
            for name, ino in sorted(node.durable_entries.items()):
                child = self.nodes[ino]
                target = path / os.fsdecode(name)
                if ino in made:
                    os.link(made[ino], target)
                    continue
                made[ino] = target
                if child.is_dir:
                    target.mkdir()
                    save_dir(child, target)
                else:
                    target.write_bytes(child.durable)
                    os.utime(target, ns=(child.durable_mtime_ns, child.durable_mtime_ns))
                os.chown(target, child.uid, child.gid)
                target.chmod(stat.S_IMODE(child.mode))

        root = self.nodes[pyfuse3.ROOT_INODE]
        save_dir(root, fresh)
        fresh.chmod(stat.S_IMODE(root.mode))
        old = self.disk.with_name(self.disk.name + ".old")
        os.rename(self.disk, old)
        os.rename(fresh, self.disk)
        shutil.rmtree(old)

    # --- durability ---------------------------------------------------------------------

    def _sync_data(self, node: Node) -> None:
        for change in node.pending:
            _apply(node.durable, change)
        node.pending.clear()
        node.durable_mtime_ns = node.mtime_ns

    def _sync_names(self, directory: Node, through: NameChange) -> None:
        """Make the directory's name changes durable, oldest first, up to `through`."""
        while directory.name_changes:
            first = directory.name_changes[0]
            self._apply_names(first)
            if first is through:
                break

    def _apply_names(self, change: NameChange) -> None:
        if change.applied:
            return
        for ino in change.directories:  # a rename: the other directory's earlier changes first
            other = self.nodes[ino]
            while other.name_changes and other.name_changes[0] is not change:
                self._apply_names(other.name_changes[0])
        change.applied = True
        for ino, name, target in change.edits:
            entries = self.nodes[ino].durable_entries
            if target is None:
                entries.pop(name, None)
            else:
                entries[name] = target
        for ino in change.directories:
            directory = self.nodes[ino]
            directory.name_changes.remove(change)
            directory.durable_mtime_ns = change.ns

    def _change_names(self, *edits: tuple[int, bytes, int | None]) -> None:
        now = time.time_ns()
        change = NameChange(list(edits), now)
        for ino, name, target in edits:
            directory = self.nodes[ino]
            if target is None:
                del directory.entries[name]
            else:
                directory.entries[name] = target
            directory.mtime_ns = directory.ctime_ns = now
        for ino in change.directories:
            self.nodes[ino].name_changes.append(change)

    # --- helpers -----------------------------------------------------------------------

    def _alive(self) -> None:
        if not self.powered:
            raise FUSEError(errno.EIO)

    def _node(self, ino: int) -> Node:
        node = self.nodes.get(ino)
        if node is None:
            raise FUSEError(errno.ENOENT)
        return node

    def _child(self, parent: int, name: bytes) -> Node:
        directory = self._node(parent)
        if not directory.is_dir:
            raise FUSEError(errno.ENOTDIR)
        ino = directory.entries.get(name)
        if ino is None:
            raise FUSEError(errno.ENOENT)
        return self.nodes[ino]

    def _attrs(self, node: Node) -> EntryAttributes:
        attrs = EntryAttributes()
        attrs.st_ino = InodeT(node.ino)
        attrs.generation = 0
        attrs.entry_timeout = TIMEOUT
        attrs.attr_timeout = TIMEOUT
        attrs.st_mode = node.mode  # type: ignore[assignment]
        attrs.st_nlink = node.nlink
        attrs.st_uid = node.uid
        attrs.st_gid = node.gid
        attrs.st_rdev = 0
        size = 4096 if node.is_dir else len(node.data)
        attrs.st_size = size
        attrs.st_blksize = 4096
        attrs.st_blocks = (size + 511) // 512
        attrs.st_atime_ns = node.mtime_ns
        attrs.st_mtime_ns = node.mtime_ns
        attrs.st_ctime_ns = node.ctime_ns
        return attrs

    def _new(self, parent: int, name: bytes, mode: int, ctx: RequestContext) -> Node:
        directory = self._node(parent)
        if name in directory.entries:
            raise FUSEError(errno.EEXIST)
        now = time.time_ns()
        node = Node(
            next(self._inos),
            mode & ~ctx.umask,
            ctx.uid,
            ctx.gid,
            now,
            now,
            parent=parent,
            durable_mtime_ns=now,
        )
        node.nlink = 2 if node.is_dir else 1
        self.nodes[node.ino] = node
        if node.is_dir:
            directory.nlink += 1
        self._change_names((parent, name, node.ino))
        return node

    # --- names -------------------------------------------------------------------------

    async def lookup(
        self, parent_inode: InodeT, name: bytes, ctx: RequestContext
    ) -> EntryAttributes:
        self._alive()
        if name == b".":
            return self._attrs(self._node(parent_inode))
        if name == b"..":
            return self._attrs(self._node(self._node(parent_inode).parent))
        return self._attrs(self._child(parent_inode, name))

    async def forget(self, inode_list: object) -> None:
        """Nodes are kept for the life of the mount (a test's few thousand)."""

    async def getattr(self, inode: InodeT, ctx: RequestContext) -> EntryAttributes:
        self._alive()
        return self._attrs(self._node(inode))

    async def setattr(
        self,
        inode: InodeT,
        attr: EntryAttributes,
        fields: SetattrFields,
        fh: FileHandleT | None,
        ctx: RequestContext,
    ) -> EntryAttributes:
        self._alive()
        node = self._node(inode)
        now = time.time_ns()
        if fields.update_size:
            change = ("truncate", attr.st_size, b"", now)
            _apply(node.data, change)
            node.pending.append(change)
            node.mtime_ns = now
        if fields.update_mode:
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(attr.st_mode)
        if fields.update_uid:
            node.uid = attr.st_uid
        if fields.update_gid:
            node.gid = attr.st_gid
        if fields.update_mtime:
            node.mtime_ns = attr.st_mtime_ns
        node.ctime_ns = now
        return self._attrs(node)

    async def mkdir(
        self, parent_inode: InodeT, name: bytes, mode: int, ctx: RequestContext
    ) -> EntryAttributes:
        self._alive()
        return self._attrs(self._new(parent_inode, name, stat.S_IFDIR | mode, ctx))

    async def mknod(
        self, parent_inode: InodeT, name: bytes, mode: int, rdev: int, ctx: RequestContext
    ) -> EntryAttributes:
        self._alive()
        if not stat.S_ISREG(mode):
            raise FUSEError(errno.EPERM)  # no special files (module docstring)
        return self._attrs(self._new(parent_inode, name, mode, ctx))

    async def create(
        self, parent_inode: InodeT, name: bytes, mode: int, flags: int, ctx: RequestContext
    ) -> tuple[FileInfo, EntryAttributes]:
        self._alive()
        node = self._new(parent_inode, name, mode, ctx)
        fh = next(self._fhs)
        self._handles[fh] = node.ino
        return FileInfo(fh=FileHandleT(fh)), self._attrs(node)

    async def symlink(
        self, parent_inode: InodeT, name: bytes, target: bytes, ctx: RequestContext
    ) -> EntryAttributes:
        raise FUSEError(errno.EPERM)  # not modelled

    async def link(
        self, inode: InodeT, new_parent_inode: InodeT, new_name: bytes, ctx: RequestContext
    ) -> EntryAttributes:
        self._alive()
        node = self._node(inode)
        if node.is_dir:
            raise FUSEError(errno.EPERM)
        if new_name in self._node(new_parent_inode).entries:
            raise FUSEError(errno.EEXIST)
        node.nlink += 1
        node.ctime_ns = time.time_ns()
        self._change_names((new_parent_inode, new_name, node.ino))
        return self._attrs(node)

    async def unlink(self, parent_inode: InodeT, name: bytes, ctx: RequestContext) -> None:
        self._alive()
        node = self._child(parent_inode, name)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        node.nlink -= 1
        self._change_names((parent_inode, name, None))

    async def rmdir(self, parent_inode: InodeT, name: bytes, ctx: RequestContext) -> None:
        self._alive()
        node = self._child(parent_inode, name)
        if not node.is_dir:
            raise FUSEError(errno.ENOTDIR)
        if node.entries:
            raise FUSEError(errno.ENOTEMPTY)
        node.nlink = 0
        self._node(parent_inode).nlink -= 1
        self._change_names((parent_inode, name, None))

    async def rename(
        self,
        parent_inode_old: InodeT,
        name_old: bytes,
        parent_inode_new: InodeT,
        name_new: bytes,
        flags: int,
        ctx: RequestContext,
    ) -> None:
        self._alive()
        if flags & ~pyfuse3.RENAME_NOREPLACE:
            raise FUSEError(errno.EINVAL)  # RENAME_EXCHANGE, RENAME_WHITEOUT: not modelled
        node = self._child(parent_inode_old, name_old)
        target_dir = self._node(parent_inode_new)
        replaced = target_dir.entries.get(name_new)
        if replaced == node.ino:
            return
        if replaced is not None:
            if flags & pyfuse3.RENAME_NOREPLACE:
                raise FUSEError(errno.EEXIST)
            old = self.nodes[replaced]
            if old.is_dir != node.is_dir:
                raise FUSEError(errno.EISDIR if old.is_dir else errno.ENOTDIR)
            if old.is_dir and old.entries:
                raise FUSEError(errno.ENOTEMPTY)
            old.nlink = 0 if old.is_dir else old.nlink - 1
        if node.is_dir and parent_inode_old != parent_inode_new:
            self._node(parent_inode_old).nlink -= 1
            target_dir.nlink += 1 if replaced is None else 0
            node.parent = parent_inode_new
        # the new name first: a write-back prefix of one directory never loses both names
        self._change_names(
            (parent_inode_new, name_new, node.ino), (parent_inode_old, name_old, None)
        )

    # --- files -------------------------------------------------------------------------

    async def open(self, inode: InodeT, flags: int, ctx: RequestContext) -> FileInfo:
        self._alive()
        node = self._node(inode)
        fh = next(self._fhs)
        self._handles[fh] = node.ino
        return FileInfo(fh=FileHandleT(fh))

    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        self._alive()
        return bytes(self.nodes[self._handles[fh]].data[off : off + size])

    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        self._alive()
        node = self.nodes[self._handles[fh]]
        now = time.time_ns()
        change = ("write", off, bytes(buf), now)
        _apply(node.data, change)
        node.pending.append(change)
        node.mtime_ns = node.ctime_ns = now
        self.stats["writes"] += 1
        return len(buf)

    async def flush(self, fh: FileHandleT) -> None:
        """close(2): not a sync."""

    async def release(self, fh: FileHandleT) -> None:
        self._handles.pop(fh, None)

    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        self._alive()
        self._sync_data(self.nodes[self._handles[fh]])
        self.stats["fsync"] += 1

    # --- directories -------------------------------------------------------------------

    async def opendir(self, inode: InodeT, ctx: RequestContext) -> FileHandleT:
        self._alive()
        node = self._node(inode)
        if not node.is_dir:
            raise FUSEError(errno.ENOTDIR)
        fh = next(self._fhs)
        self._handles[fh] = node.ino
        self._dir_handles[fh] = sorted(node.entries.items())
        return FileHandleT(fh)

    async def readdir(self, fh: FileHandleT, start_id: int, token: ReaddirToken) -> None:
        self._alive()
        listing = self._dir_handles[fh]
        for index in range(start_id, len(listing)):
            name, ino = listing[index]
            node = self.nodes[ino]
            if not pyfuse3.readdir_reply(token, name, self._attrs(node), index + 1):
                break

    async def releasedir(self, fh: FileHandleT) -> None:
        self._handles.pop(fh, None)
        self._dir_handles.pop(fh, None)

    async def fsyncdir(self, fh: FileHandleT, datasync: bool) -> None:
        self._alive()
        directory = self.nodes[self._handles[fh]]
        if directory.name_changes:
            self._sync_names(directory, directory.name_changes[-1])
        self.stats["fsyncdir"] += 1

    async def statfs(self, ctx: RequestContext) -> StatvfsData:
        self._alive()
        data = StatvfsData()
        data.f_bsize = data.f_frsize = 4096
        data.f_blocks = 1 << 20
        used = sum(len(n.data) for n in self.nodes.values()) // 4096
        data.f_bfree = data.f_bavail = max(data.f_blocks - used, 0)
        data.f_files = 1 << 20
        data.f_ffree = data.f_favail = data.f_files - len(self.nodes)
        data.f_namemax = 255
        return data


async def _control(fs: PowerCutFS) -> None:
    """Commands on stdin, answers on stdout (module docstring)."""
    stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    buffer, command = b"", ""
    while command != "stop":
        if b"\n" not in buffer:
            chunk = await stream.receive_some(4096)
            if not chunk:  # the test is gone: shut down all the same
                break
            buffer += chunk
            continue
        line, buffer = buffer.split(b"\n", 1)
        command = line.decode().strip()
        if command == "cut":
            os.write(sys.stdout.fileno(), fs.cut().encode() + b"\n")
        elif command != "stop":
            os.write(sys.stdout.fileno(), f"unknown command {command!r}\n".encode())
    fs.shutdown()
    pyfuse3.terminate()


async def _serve(fs: PowerCutFS) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_control, fs)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("disk", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--writeback", choices=["none", "random"], default="none")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    fs = PowerCutFS(args.disk, args.seed, args.writeback == "random")
    options = set(pyfuse3.default_options)
    options.add("fsname=powercut")
    pyfuse3.init(fs, str(args.mountpoint), options)
    os.write(sys.stdout.fileno(), b"ready\n")
    try:
        trio.run(_serve, fs)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
