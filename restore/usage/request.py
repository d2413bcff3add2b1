"""`usage/report` and `sessiond usage`: the request checked (InvalidParams naming what is
wrong, before the store is asked), the store's summed model calls read once (its `Index`),
the report made (report.py). Here, not in restore/service/: a `sessiond usage` spawn
imports no thread service."""

from __future__ import annotations

import os
import re
from datetime import date, tzinfo
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.clock import now
from restore.usage.report import BYS, GRAIN_MS, REPORTS, WEEKDAYS, report, window

if TYPE_CHECKING:
    from restore.usage.entries import UsageSource

_DATE = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")


def usage_report(
    index: UsageSource,
    kind: str,
    *,
    by: str | None = None,
    since: str | None = None,
    until: str | None = None,
    timezone: str | None = None,
    start_of_week: str = "monday",
) -> dict[str, Any]:
    """The report `kind` over every thread the store (its `index`) lets this caller read."""
    if kind not in REPORTS:  # the CLI's choices and the protocol's literals: a library call
        raise _invalid("report", f"one of {', '.join(REPORTS)}")
    if by is not None and by not in BYS:
        raise _invalid("by", f"one of {', '.join(BYS)}")
    if start_of_week not in WEEKDAYS:
        raise _invalid("startOfWeek", f"one of {', '.join(WEEKDAYS)}")
    zone, zone_name = time_zone(timezone)
    first, last = _date("since", since), _date("until", until)
    if first is not None and last is not None and first > last:
        raise _invalid("until", f"{last} is before since ({first})")
    since_ms, until_ms = window(first, last, zone)  # blocks too: of the calls in the days
    per_thread = kind == "session" or by in ("agent", "project")
    grain = 1 if kind == "blocks" else GRAIN_MS
    entries, threads = index.usage(since_ms, until_ms, grain, threads=per_thread)
    found = report(
        kind,
        entries,
        threads,
        zone=zone,
        zone_name=zone_name,
        by=by,
        start_of_week=start_of_week,
        now_ms=int(now().timestamp() * 1000),
    )
    found.update(
        since=None if first is None else first.isoformat(),
        until=None if last is None else last.isoformat(),
    )
    return found


def time_zone(name: str | None) -> tuple[tzinfo, str]:
    """The zone a report's days are in: `name` (IANA), else the machine's (`TZ`, then
    /etc/localtime), else UTC."""
    if name is None:
        name = os.environ.get("TZ") or _local_name()
    if name in ("UTC", "Z", ""):
        from datetime import UTC

        return UTC, "UTC"
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: UTC needs none of it

    try:
        return ZoneInfo(name.removeprefix(":")), name.removeprefix(":")
    except (ZoneInfoNotFoundError, ValueError):
        raise _invalid(
            "timezone", f"an IANA time zone (UTC, Europe/Berlin, ...), got {name[:60]!r}"
        ) from None


def _local_name() -> str:
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        return "UTC"
    _, found, zone = target.partition("zoneinfo/")
    return zone if found else "UTC"


def _date(name: str, value: str | None) -> date | None:
    if value is None:
        return None
    match = _DATE.fullmatch(value.strip())
    try:
        if match is None:
            raise ValueError
        return date(*(int(part) for part in match.groups()))
    except ValueError:
        raise _invalid(name, f"a date, YYYY-MM-DD or YYYYMMDD, got {value[:40]!r}") from None


def _invalid(name: str, wanted: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.INVALID_PARAMS, f"invalid params: {name}: must be {wanted}", field=name
    )
