"""Offline commands (`list`, `show`, `doctor`): the same engine, without a server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from restore.doctor import run_doctor
from restore.paths import Layout
from restore.store import Durability
from restore.stores import open_store
from restore.threads import ThreadService
from server.cli import print_json
from server.config import ServerConfig


def _layout(config: ServerConfig) -> Layout:
    return Layout(Path(config.home))


def _service(config: ServerConfig) -> ThreadService:
    """The thread service on the configured store (embedded, or the shared database)."""
    layout = _layout(config)
    return ThreadService(layout, store=open_store(config.store, layout, Durability.FSYNC))


def list_threads(config: ServerConfig, args: argparse.Namespace) -> int:
    service = _service(config)
    try:
        threads, _ = service.list(
            cwd=args.cwd,
            workspace_folder=args.workspace_folder,
            archived=args.archived,
            search=args.search,
            cursor=None,
            limit=max(1, min(args.limit, 200)),
        )
    finally:
        service.close_all()
    for thread in threads:
        info = thread.thread_info()
        if args.json:
            print_json(info)
        else:
            title = info["title"] or info["preview"] or "(empty)"
            print(
                f"{info['threadId']}  {info['updatedAt'] or '':27}  {info['itemCount']:>6}  "
                f"{info['branch'] or '-':20.20}  {title[:60]}"
            )
    return 0


def show_thread(config: ServerConfig, args: argparse.Namespace) -> int:
    service = _service(config)
    try:
        contents, _ = service.store.read(args.thread_id)
    finally:
        service.close_all()
    for item in contents.items:
        if args.json:
            print_json(item)
        else:
            body = item.get("content") if item.get("type") == "message" else ""
            role = item.get("role", "")
            text = body if isinstance(body, str) else "[parts]"
            print(f"{item['seq']:>6}  {item['type']:14}  {role:9}  {text[:100]!s}")
    for line in contents.skipped:
        print(
            f"skipped line {line.lineNo} ({line.reason}) at byte {line.byteOffset}", file=sys.stderr
        )
    return 0


def _progress_bar(title: str, done: int, total: int) -> None:
    width = 30
    filled = width if total == 0 else width * done // total
    sys.stderr.write(f"\r{title:24} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def doctor(config: ServerConfig, *, repair: bool = False) -> int:
    if config.store:
        return _doctor_shared(config)
    progress = _progress_bar if sys.stderr.isatty() else None
    report = run_doctor(_layout(config), progress, repair=repair)
    print(f"checked {report.files} thread files, {report.items} items")
    for finding in report.findings:
        if finding.error:
            print(f"{finding.path}: unreadable: {finding.error}")
        if finding.empty:
            print(f"{finding.path}: empty file (a thread/start that never completed)")
        if finding.repaired and finding.path.exists():
            print(f"{finding.path}: torn tail repaired (copied to recovered/)")
        elif finding.repaired:
            print(f"{finding.path}: empty file moved to recovered/")
        if finding.bom:
            print(f"{finding.path}: UTF-8 BOM at start (ignored)")
        for line in finding.skipped:
            print(
                f"{finding.path}: line {line.lineNo} skipped ({line.reason}) at byte "
                f"{line.byteOffset}: {line.preview!r}"
            )
    print(f"index: {report.index_action}, {report.indexed} threads")
    print("clean" if report.clean else "problems found (nothing was deleted)")
    return 0 if report.clean else 1


def _doctor_shared(config: ServerConfig) -> int:
    """A shared store checks itself (constraints, WAL): reach it, bring its schema up to
    date, count its threads. Files under --home are the embedded store's business."""
    service = _service(config)
    try:
        threads = service.index.count()
    finally:
        service.close_all()
    print(f"{getattr(service.store, 'where', 'store')}: schema up to date, {threads} threads")
    print("clean")
    return 0


def migrate(config: ServerConfig, to: str) -> int:
    """Copy every thread of the configured store to `to` (a URL, or a data directory)."""
    from restore.stores import is_shared
    from restore.stores.transfer import copy_threads

    source_url = None if is_shared(to) else config.store
    source = open_store(source_url, _layout(config), Durability.FSYNC)
    target_home = _layout(config) if is_shared(to) else Layout(Path(to))
    target = open_store(to if is_shared(to) else None, target_home, Durability.FSYNC)
    progress = (lambda done, total: _progress_bar("Copying threads", done, total)) if (
        sys.stderr.isatty()
    ) else None  # fmt: skip
    try:
        report = copy_threads(source, target, progress)
    finally:
        source.close()
        target.close()
    where = getattr(target, "where", None) or str(Path(to).resolve())
    print(
        f"{report.threads} threads to {where}: {report.copied} records copied, "
        f"{report.present} already there, {report.blobs} blobs"
    )
    for thread_id, why in report.failed:
        print(f"{thread_id}: not copied: {why}")
    return 0 if not report.failed else 1
