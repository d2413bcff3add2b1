"""Offline commands (`list`, `show`, `doctor`): the same engine, without a server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from restore.doctor import run_doctor
from restore.paths import Layout
from restore.threads import ThreadService
from server.cli import print_json
from server.config import ServerConfig
from server.terminal import printable


def _layout(config: ServerConfig) -> Layout:
    return Layout(Path(config.home))


def list_threads(config: ServerConfig, args: argparse.Namespace) -> int:
    service = ThreadService(_layout(config))
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
            title = printable(info["title"] or info["preview"] or "(empty)", one_line=True)
            branch = printable(info["branch"] or "-", one_line=True)
            print(
                f"{info['threadId']}  {info['updatedAt'] or '':27}  {info['itemCount']:>6}  "
                f"{branch:20.20}  {title[:60]}"
            )
    return 0


def show_thread(config: ServerConfig, args: argparse.Namespace) -> int:
    service = ThreadService(_layout(config))
    contents, _ = service.store.read(args.thread_id)
    for item in contents.items:
        if args.json:
            print_json(item)
        else:
            body = item.get("content") if item.get("type") == "message" else ""
            role = printable(str(item.get("role", "")), one_line=True)
            kind = printable(str(item["type"]), one_line=True)
            text = printable(body, one_line=True) if isinstance(body, str) else "[parts]"
            print(f"{item['seq']:>6}  {kind:14}  {role:9}  {text[:100]}")
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
