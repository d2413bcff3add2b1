"""Offline commands (`list`, `show`, `import`, `doctor`, `migrate`): the same engine,
without a server.

Each checks the data directory first (restore/home/state.py): a home that cannot be used
is one line and exit code 2 (printed by server/cli/main.py); a read-only one is read as it is.
With `--store URL` (or SESSIOND_STORE) every command works on the shared database instead
(`import` too: its ledger of sources stays in the data directory).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from restore.home.state import Home, open_home
from restore.service import ThreadService, open_service
from restore.stores import Settings, is_shared, open_store
from restore.stores.api import ListFilters
from server.cli.main import CommandError
from server.cli.terminal import clip, plural, print_json, relative_time, safe, table
from server.config import ServerConfig

TITLE_COLUMNS = 60
BRANCH_COLUMNS = 24
KEY_COLUMNS = 32
MAX_DEPTH = 4  # levels of sub-agents shown under a thread
MAX_CHAIN = 20  # threads a reset replaced, shown under the one that replaced them

if TYPE_CHECKING:  # argparse too: `list` and `show` are read without it (server/cli/quick.py)
    import argparse

    from restore.imports.importer import Importer
    from restore.imports.results import FileResult, ImportSummary
    from restore.summary import ThreadSummary


def _label(info: dict[str, object]) -> str:
    """As the extension labels a row: the title, else the first message, else what it is."""
    return str(info["title"] or info["preview"] or "(no messages yet)")


def _service(config: ServerConfig) -> ThreadService:
    """The thread service on the configured store (embedded, or the shared database)."""
    return open_service(config.store_settings())


def list_threads(config: ServerConfig, args: argparse.Namespace) -> int:
    service = _service(config)
    try:
        threads, _ = service.list(
            ListFilters(
                cwd=args.cwd,
                workspace_folder=args.workspace_folder,
                archived=args.archived,
                search=args.search,
                limit=args.limit,
                session_key=args.key,
            )
        )
        infos = _with_children([thread.thread_info() for thread in threads], service)
        if not (args.json or args.quiet):  # the wire's rows as they are, else the chains
            infos = _with_replaced(infos, service)
    finally:
        service.close_all()
    if args.json:  # the wire's ThreadInfo, children after their parent (parentThreadId)
        for info in infos:
            print_json({key: value for key, value in info.items() if key != "depth"})
        return 0
    if args.quiet:  # the page's threads alone: `sessiond show "$(sessiond list -q --limit 1)"`
        for info in infos:
            if info["depth"] == 0:
                print(info["threadId"])
        return 0
    if not infos:
        filtered = args.cwd or args.workspace_folder or args.search or args.key is not None
        print("no threads" + (" match" if filtered else ""))
        return 0
    keyed = any(info["sessionKey"] for info in infos)
    rows = [
        [
            _indent(info) + info["threadId"],
            relative_time(info["updatedAt"] or info["createdAt"]),
            str(info["itemCount"]),
            clip(safe(info["branch"] or "-", one_line=True), BRANCH_COLUMNS),
            *([_key_cell(info)] if keyed else []),
            clip(safe(_label(info), one_line=True), TITLE_COLUMNS),
        ]
        for info in infos
    ]
    header = ("THREAD", "UPDATED", "ITEMS", "BRANCH", *(["KEY"] if keyed else []), "TITLE")
    print(table(header, rows, right=(2,)))
    return 0


def _indent(info: dict[str, Any]) -> str:
    """A sub-agent's `└` under its parent; a thread a reset replaced, `←` under the one
    that replaced it."""
    if not info["depth"]:
        return ""
    return "  " * (int(info["depth"]) - 1) + ("  ← " if info.get("replaced") else "  └ ")


def _key_cell(info: dict[str, Any]) -> str:
    """The session key, and why the thread replaced the one before it (`reset: idle`)."""
    key = clip(safe(info["sessionKey"] or "-", one_line=True), KEY_COLUMNS)
    return f"{key} (reset: {info['resetReason']})" if info.get("resetReason") else key


def _with_replaced(infos: list[dict[str, Any]], service: ThreadService) -> list[dict[str, Any]]:
    """Each top-level thread that replaced others (a `thread/continue` reset) followed by
    them, newest first, a level deeper and marked `replaced`: a key's reset chain reads as
    one entry. A replaced thread the page lists on its own goes under its successor."""
    chains: dict[str, list[dict[str, Any]]] = {}
    for info in infos:
        if info["depth"] or not info["previousThreadId"]:
            continue
        chain: list[dict[str, Any]] = []
        previous = info["previousThreadId"]
        while previous and len(chain) < MAX_CHAIN:
            row = service.index.get(previous)
            if row is None:
                break
            chain.append({**row.thread_info(), "depth": 1, "replaced": True})
            previous = row.previousThreadId
        chains[info["threadId"]] = chain
    under = {row["threadId"] for chain in chains.values() for row in chain}
    rows: list[dict[str, Any]] = []
    for info in infos:
        if info["depth"] == 0 and info["threadId"] in under:
            continue
        rows.append(info)
        rows += chains.get(info["threadId"], [])
    return rows


def _with_children(
    infos: list[dict[str, Any]], service: ThreadService, depth: int = 0
) -> list[dict[str, Any]]:
    """Each thread followed by its sub-agent threads (theirs after them, a level deeper),
    each marked with its `depth` (0: top level)."""
    rows = []
    for info in infos:
        rows.append({**info, "depth": depth})
        if info.get("childCount") and depth < MAX_DEPTH:
            children = _children(service, info["threadId"])
            rows += _with_children([c.thread_info() for c in children], service, depth + 1)
    return rows


def _children(service: ThreadService, thread_id: str) -> list[ThreadSummary]:
    """Every (unarchived) sub-agent thread of a thread, newest first."""
    from restore.render.document import children

    return children(service, thread_id)


def show_thread(config: ServerConfig, args: argparse.Namespace) -> int:
    """`sessiond show ID`: the transcript restore/render draws (the one the exports share),
    as text, each chunk printed as it is read; `--json` the stored records."""
    from restore.render import styles
    from restore.render.document import summary_of, transcript
    from restore.render.transcript import Tally, footer

    service = _service(config)
    try:
        thread_id = service.thread_id_of(args.thread_id)
        if args.json:
            contents, _ = service.store.read(thread_id)
            for item in contents.items:
                print_json(item)
            for skipped in contents.skipped:
                print(
                    f"skipped line {skipped.lineNo} ({skipped.reason}) at byte "
                    f"{skipped.byteOffset}",
                    file=sys.stderr,
                )
            return 0
        summary = summary_of(service, thread_id)
        heading = f"thread {thread_id}" + (" (archived)" if summary.archived else "")
        print(safe(f"{heading}: {_label(summary.thread_info())}", one_line=True))
        if summary.parentThreadId:
            print(f"sub-agent of thread {summary.parentThreadId}")
        for line in _chain_lines(summary):
            print(line)
        tally, unread = Tally(), list[dict[str, Any]]()
        for chunk in transcript(
            service, thread_id, styles.Text(), tally, everything=args.all, skipped=unread
        ):
            print(chunk)
        print(footer(tally, summary.itemCount))
        for bad in unread:
            print(
                f"skipped line {bad['lineNo']} ({bad['reason']}) at byte {bad['byteOffset']}",
                file=sys.stderr,
            )
    finally:
        service.close_all()
    return 0


def _chain_lines(row: ThreadSummary | None) -> list[str]:
    """The thread's session key and where it sits in the key's reset chain."""
    if row is None or row.sessionKey is None:
        return []
    lines = [safe(f"session key {row.sessionKey}", one_line=True)]
    if row.previousThreadId:
        lines.append(f"replaces thread {row.previousThreadId} (reset: {row.resetReason})")
    if row.nextThreadId:
        lines.append(f"replaced by thread {row.nextThreadId}")
    return lines


def _progress_bar(title: str, done: int, total: int) -> None:
    if total == 0:
        return  # nothing to do is nothing to draw
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r{title:24} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def doctor(config: ServerConfig, args: argparse.Namespace) -> int:
    if args.redact:
        return _doctor_redact(config, apply=args.yes)
    if args.yes:
        raise CommandError("--yes goes with --redact")
    if config.store:
        return _doctor_shared(config)
    home: Home = open_home(Path(config.home))
    if args.repair and home.read_only is not None:
        raise home.refuse_write()
    progress = _progress_bar if sys.stderr.isatty() else None
    store = open_store(
        config.store_settings(home=str(home.path), shared=False),
        read_only=home.read_only is not None,
    )
    try:
        report = store.check(progress, repair=args.repair, rebuild_index=args.rebuild_index)
    finally:
        store.close()
    print(f"checked {plural(report.files, 'thread file')}, {plural(report.items, 'record')}")
    for finding in report.findings:
        where = safe(str(finding.path), one_line=True)
        if finding.error:
            print(f"{where}: unreadable: {finding.error}")
        if finding.empty:
            print(f"{where}: empty file (a thread/start that never completed)")
        if finding.repaired and finding.path.exists():
            print(f"{where}: torn tail repaired (copied to recovered/)")
        elif finding.repaired:
            print(f"{where}: empty file moved to recovered/")
        if finding.bom:
            print(f"{where}: UTF-8 BOM at start (ignored)")
        for line in finding.skipped:
            print(
                f"{where}: line {line.lineNo} skipped ({line.reason}) at byte "
                f"{line.byteOffset}: {safe(repr(line.preview), one_line=True)}"
            )
    print(f"index: {report.index_action}, {plural(report.indexed, 'thread')}")
    for agent, unmapped in sorted(report.unmapped.items()):
        _print_unmapped(agent, unmapped)
    _print_retention(home.path, read_only=home.read_only is not None)
    print("clean" if report.clean else "problems found (nothing was deleted)")
    return 0 if report.clean else 1


def _print_retention(home: Path, *, read_only: bool) -> None:
    """Each agent whose own retention setting will delete sessions not imported yet: the
    setting, how many, how many soon (restore/imports/retention.py)."""
    from restore.home.layout import Layout
    from restore.imports.retention import SOON, at_risk_all

    for risk in at_risk_all(Layout(home).import_ledger_path, read_only=read_only):
        days = risk.retention.seconds / 86_400
        print(
            safe(
                f"{risk.agent.name}: {risk.retention.setting} deletes {risk.retention.what} "
                f"older than {days:g} days; {plural(risk.waiting, 'session')} not imported yet"
                f" ({risk.soon} within {SOON / 86_400:g} days of it): `sessiond import "
                f"{risk.agent.flag}` (or `serve --follow {risk.agent.flag}`) keeps them",
                one_line=True,
            )
        )


def _doctor_redact(config: ServerConfig, *, apply: bool) -> int:
    """Stored secrets found by kind; rewritten only with `--yes` (no undo: a dry run first
    is what a careful user expects). Exit 0 when nothing is left to redact."""
    home: Home = open_home(Path(config.home))
    if apply and home.read_only is not None and not config.store:
        raise home.refuse_write()
    progress = _progress_bar if sys.stderr.isatty() else None
    store = open_store(
        config.store_settings(home=str(home.path)),
        read_only=not config.store and home.read_only is not None,
    )
    try:
        if store.redactor is None:
            raise CommandError("redaction is off (--redaction, SESSIOND_REDACT or redaction.toml)")
        report = store.redact_existing(progress, apply=apply)
    finally:
        store.close()
    found = sum(report.counts.values())
    verb = "redacted" if apply else "found"
    where = [plural(len(report.changed), "thread"), plural(report.blobs, "blob")]
    if report.recovered:
        where.append(plural(report.recovered, "recovered/ file"))
    checked = plural(report.threads, "thread")
    print(f"checked {checked}: {plural(found, 'secret')} {verb} in {', '.join(where)}")
    for kind, count in sorted(report.counts.items(), key=lambda entry: (-entry[1], entry[0])):
        print(f"  {kind}: {count}")
    for thread_id in report.busy:
        print(f"{thread_id}: being written by another process: left as it was")
    for failure in report.failed:
        print(f"{safe(failure, one_line=True)}: not rewritten")
    if not apply and found:
        print("nothing was changed: run again with --yes to rewrite them (there is no undo)")
        return 1
    return 1 if report.busy or report.failed else 0


def _doctor_shared(config: ServerConfig) -> int:
    """A shared store checks itself (constraints, WAL): reach it, bring its schema up to
    date, count its threads. Files under --home are the embedded store's business."""
    service = _service(config)
    try:
        threads = service.index.count()
        where = service.store.where
    finally:
        service.close_all()
    print(f"{where}: schema up to date, {plural(threads, 'thread')}")
    print("clean")
    return 0


def migrate(config: ServerConfig, args: argparse.Namespace) -> int:
    """Copy every thread of the configured store to `--to` (a URL, or a data directory)."""
    from restore.stores.transfer import copy_threads

    to = args.to
    home = open_home(Path(config.home))
    source_url = None if is_shared(to) else config.store
    source = open_store(Settings(home.path, source_url, redaction=config.redact))
    target_home = home.path if is_shared(to) else open_home(Path(to)).path
    target = open_store(
        Settings(target_home, to if is_shared(to) else None, redaction=config.redact)
    )
    progress = (
        (lambda done, total: _progress_bar("Copying threads", done, total))
        if (sys.stderr.isatty())
        else None
    )
    try:
        report = copy_threads(source, target, progress)
    finally:
        source.close()
        target.close()
    where = target.where if is_shared(to) else str(Path(to).resolve())
    print(
        f"{plural(report.threads, 'thread')} to {where}: {report.copied} records copied, "
        f"{report.present} already there, {plural(report.blobs, 'blob')}"
    )
    for thread_id, why in report.failed:
        print(f"{thread_id}: not copied: {safe(why, one_line=True)}")
    return 0 if not report.failed else 1


def import_sessions(config: ServerConfig, args: argparse.Namespace) -> int:
    """`sessiond import <agent> [--from DIR] [--watch]`: import, summarize, then (with
    --watch) follow the store until Ctrl-C."""
    from restore.agents.registry import named
    from restore.imports.importer import Importer

    if args.agent == "sessiond":  # a sessiond JSON export, not an agent's store
        from server.cli.export import import_export

        return import_export(config, args)
    if args.file:
        raise CommandError(
            f"FILE is for `sessiond import sessiond FILE`; {args.agent}'s "
            "sessions are read from --from DIR"
        )
    agent = named(args.agent)
    home = open_home(Path(config.home))
    if home.read_only is not None:  # its ledger (imports.sqlite3) is kept there, any store
        raise home.refuse_write("nothing can be imported into it")
    service = _service(config)
    root = Path(args.source) if args.source else None
    importer = Importer(service, agent, root, live=args.watch)
    try:
        if not importer.root.is_dir():
            where = safe(str(importer.root), one_line=True)
            print(f"sessiond: no {agent.id} sessions: {where} is not a directory", file=sys.stderr)
            return 2
        bar = _progress_bar if sys.stderr.isatty() else None
        progress = (
            (lambda done, total: bar(f"importing {agent.flag}", done, total)) if bar else None
        )
        summary = importer.import_all(progress)
        _print_summary(summary, as_json=args.json)
        return _watch(importer, as_json=args.json) if args.watch else 0
    finally:
        importer.close()
        service.close_all()


def _print_summary(summary: ImportSummary, *, as_json: bool) -> None:
    if as_json:
        print_json(summary.to_json())
        return
    # Names from a handed-in folder are shown, never sent to the terminal (issue 34).
    root = safe(str(summary.root), one_line=True)
    print(
        f"{summary.agent}: {summary.sessions} sessions in {root}: {summary.created} new, "
        f"{summary.updated} updated, {summary.revisions} new revisions, {summary.unchanged} "
        f"unchanged, {summary.empty} empty; {summary.items:,} items, {summary.skippedLines} "
        f"skipped lines, in {summary.seconds:.1f} s"
    )
    for problem in summary.problems:
        _print_problem(problem)
    _print_unmapped(summary.agent, summary.unmapped)


def _print_unmapped(agent: str, unmapped: dict[str, dict[str, Any]]) -> None:
    """What the mapping does not know yet (a new version of the agent): counted, with where
    to look, so it is never dropped silently."""
    if not unmapped:
        return
    print(
        f"{agent}: {plural(len(unmapped), 'kind')} of record or tool not mapped "
        "(kept in the source transcript; docs/import.md):"
    )
    for key, entry in sorted(unmapped.items(), key=lambda kv: -kv[1]["count"]):
        where = safe(entry["example"], one_line=True)
        print(f"  {key}: {plural(entry['count'], 'time')}, e.g. {where}")


def _print_problem(problem: dict[str, Any]) -> None:
    path = safe(str(problem["path"]), one_line=True)
    if problem["reason"]:
        print(f"{path}: {problem['status']}: {safe(str(problem['reason']), one_line=True)}")
    for line in problem["skipped"]:
        print(
            f"{path}: line {line['lineNo']} skipped ({line['reason']}) at byte "
            f"{line['byteOffset']}: {line['preview']!r}"
        )
    if problem["repaired"]:
        print(f"{path}: {problem['repaired']} line(s) kept with invalid UTF-8 replaced")


def _watch(importer: Importer, *, as_json: bool) -> int:
    """Import each session file as it is written; Ctrl-C (or SIGTERM) ends it cleanly.

    The first Ctrl-C asks the loop to stop after the batch in hand (watchfiles sees the
    event within a step): an interrupt raised in the middle of an import could leave a
    lock or a transaction half done and the exit waiting on it. A second Ctrl-C
    interrupts at once."""
    import signal
    import threading

    from watchfiles import Change, watch

    from server.live.watch import WATCH_OPTIONS, files_in_new_folders

    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        if watching:
            print("stopping (Ctrl-C again to stop at once)", file=sys.stderr, flush=True)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.default_int_handler)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    watching = False
    try:
        # The first (empty) yield: files written since the first import are caught up.
        for changes in watch(importer.root, stop_event=stop, **WATCH_OPTIONS):
            if not watching:
                watching = True
                _report(importer.import_files(importer.scan()), as_json=as_json)
                where = safe(str(importer.root), one_line=True)
                print(f"watching {where} (Ctrl-C stops)", file=sys.stderr, flush=True)
            added = [Path(p) for change, p in changes if change == Change.added]
            paths = sorted({Path(p) for _, p in changes} | files_in_new_folders(added))
            sessions = [p for p in paths if importer.watches(p)]
            if sessions:
                _report(importer.import_changed(sessions), as_json=as_json)
    except KeyboardInterrupt:
        pass
    return 0


def _report(results: list[FileResult], *, as_json: bool) -> None:
    for result in results:
        if as_json:
            if result.status != "unchanged":
                hidden = ("summary", "appended")
                print_json({k: v for k, v in result.__dict__.items() if k not in hidden})
        elif result.changed and result.summary is not None:
            title = result.summary.title or result.summary.preview
            where = safe(str(result.path), one_line=True)
            print(f"{result.status}: {title!r} (+{result.items} items) {where}")
        elif result.reason or result.skipped:
            _print_problem({**result.__dict__})
    sys.stdout.flush()
