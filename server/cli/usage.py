"""`sessiond usage daily|weekly|monthly|session|blocks`: tokens and cost of every agent's
threads from the index (restore/usage/), as a table or `--json` (the `usage/report`
result). A price the list does not know is shown as `unpriced`, never $0; a row with some
unpriced calls shows its priced USD with a `+`.

A spawn's cost is its imports: when the embedded index needs no catching up, the report is
read from its file alone (restore/usage/index_file.py), and the store, its
interface and the home's checks are imported only when it does (tests/test_no_warmup.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from restore.usage.request import usage_report

if TYPE_CHECKING:
    import argparse

    from server.config import ServerConfig


def arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """argparse's table (server/cli/quick.py reads the same lines without argparse)."""
    from restore.usage.report import BYS, REPORTS, WEEKDAYS

    parser.add_argument(
        "report",
        choices=REPORTS,
        nargs="?",
        default="daily",
        help="a row: a day, week, month, session or 5-hour block",
    )
    parser.add_argument("--by", choices=BYS, help="rows broken down by model, agent or project")
    parser.add_argument("--since", metavar="DATE", help="from this day (YYYY-MM-DD or YYYYMMDD)")
    parser.add_argument("--until", metavar="DATE", help="up to this day, inclusive")
    parser.add_argument(
        "--timezone",
        "-z",
        metavar="ZONE",
        help="the IANA zone of the days (default: this machine's)",
    )
    parser.add_argument(
        "--start-of-week",
        choices=WEEKDAYS,
        default="monday",
        help="weekly: a week's first day (default monday, as ccusage)",
    )
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")


def usage(config: ServerConfig, args: argparse.Namespace) -> int:
    options = {
        "by": args.by,
        "since": args.since,
        "until": args.until,
        "timezone": args.timezone,
        "start_of_week": args.start_of_week,
    }
    index = None
    if not config.store:
        from restore.usage.index_file import caught_up

        index = caught_up(config.home)
    if index is not None:
        try:
            found = usage_report(index, args.report, **options)
        finally:
            index.close()
    else:  # the store, which catches its index up (not the thread service: no session)
        from pathlib import Path

        from restore.home.state import open_home
        from restore.stores import open_store

        home = open_home(Path(config.home))
        store = open_store(
            config.store_settings(home=str(home.path)), read_only=home.read_only is not None
        )
        try:
            found = usage_report(store.index, args.report, **options)
        finally:
            store.close()
    if args.json:  # terminal.print_json's line, without the terminal's modules
        import orjson

        sys.stdout.buffer.write(orjson.dumps(found) + b"\n")
    else:
        sys.stdout.write(table(found))
    return 0


COLUMNS = ("input", "output", "cache read", "cache write", "total", "USD")


def table(found: dict[str, Any]) -> str:
    """The report as a plain table: one line a row (and one per breakdown part), totals."""
    from server.cli.terminal import clip, safe

    head = {"session": "session", "blocks": "block (UTC)"}.get(found["report"], found["report"])
    lines: list[list[str]] = [[head, "models", *COLUMNS]]
    for row in found["rows"]:
        lines.append(
            [_label(found["report"], row), clip(", ".join(row["models"]), 30), *_numbers(row)]
        )
        for part in row.get("breakdown", []):
            lines.append(["  " + clip(safe(part["name"], one_line=True), 40), "", *_numbers(part)])
    lines.append(["total", "", *_numbers(found["totals"])])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [cell.rjust(width) for cell, width in zip(line[2:], widths[2:], strict=True)]
        out.append("  ".join(cells).rstrip())
    zone = f"days in {found['timezone']}" if found["report"] != "blocks" else "blocks in UTC"
    return "\n".join(out) + f"\n({zone}; unpriced: a model the price list does not know)\n"


def _label(report: str, row: dict[str, Any]) -> str:
    from server.cli.terminal import clip, safe

    if report == "session":
        title = safe(row.get("title") or "", one_line=True)
        return f"{row['key'][:8]} {clip(title, 30)}".rstrip()
    if report == "blocks":
        start = str(row["startAt"])[:16].replace("T", " ")
        return start + (" (active)" if row.get("active") else "")
    return str(row["key"])


def _numbers(totals: dict[str, Any]) -> list[str]:
    usd = totals["usd"]
    if usd is None:
        shown = "unpriced"
    else:  # cents, or four places under a dollar (a day of a few calls is not $0.00)
        shown = (f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}") + (
            "+" if totals["unpricedCalls"] else ""
        )
    names = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "totalTokens")
    return [f"{totals[name]:,}" for name in names] + [shown]
