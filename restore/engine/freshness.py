"""Freshness: does a message continue its session key's current thread, or start a new one?

A pure function of (policy, the thread's last activity, now, the local time zone), so every
boundary is tested with an injected clock (tests/test_freshness.py). The policies are
OpenClaw's (`evaluateSessionFreshness`):

- `none`: never stale (the person decides: `/clear`, a new thread);
- `daily`: stale once a day has begun since the last activity: the most recent `atHour`
  o'clock, local time, at or before now, is later than the last activity. An activity at
  exactly that moment belongs to the new day. On a day the clock skips `atHour` (spring
  forward) the day begins when the gap ends; on a day it passes twice (fall back), at the
  first;
- `idle`: stale when more than `idleMinutes` passed since the last activity (exactly the
  limit still continues; 0: never);
- `both`: stale when either is, the reason being whichever boundary came first (the daily
  one on a tie).

What a reset carries over to the new thread (model override, permissions, todos) is part
of the policy too; the conversation never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Literal

Mode = Literal["none", "daily", "idle", "both"]
MODES: tuple[Mode, ...] = ("none", "daily", "idle", "both")
CARRIED = ("model", "permissions", "todos")
DEFAULT_AT_HOUR = 4


@dataclass(frozen=True)
class Carry:
    """What a reset carries from the replaced thread to the new one."""

    model: bool = True
    permissions: bool = True
    todos: bool = False

    def names(self) -> list[str]:
        return [name for name in CARRIED if getattr(self, name)]


@dataclass(frozen=True)
class Policy:
    mode: Mode = "none"
    at_hour: int = DEFAULT_AT_HOUR
    idle_minutes: float = 0.0
    carry: Carry = field(default_factory=Carry)

    def wire(self, timezone: str) -> dict[str, Any]:
        """As `thread/continue` answers it (`EffectivePolicy`)."""
        return {
            "reset": self.mode,
            "atHour": self.at_hour,
            "idleMinutes": self.idle_minutes,
            "timezone": timezone,
            "carry": {name: getattr(self.carry, name) for name in CARRIED},
        }


@dataclass(frozen=True)
class Decision:
    """`reset` None: continue the current thread; else why it is stale."""

    reset: Literal["daily", "idle"] | None
    at: datetime | None = None
    """When it went stale (the day's start, or the idle limit's end)."""


CONTINUE = Decision(None)


class PolicyError(ValueError):
    """A policy field out of shape: `key` names it (as the settings file spells it)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def overridden(policy: Policy, fields: dict[str, Any]) -> Policy:
    """`policy` with the fields a layer sets (a settings table, a call's `policy`), in the
    wire's spelling (`reset`, `atHour`, `idleMinutes`, `carry: {model, permissions,
    todos}`); PolicyError names the first field out of shape. Unknown names are refused
    too: a typo must not leave a policy silently at its default."""
    known = ("reset", "atHour", "idleMinutes", "carry")
    for name, value in fields.items():
        if name not in known:
            raise PolicyError(name, f"unknown key {name!r} (it knows {', '.join(known)})")
        if value is None:
            continue
        if name == "reset":
            if value not in MODES:
                raise PolicyError(name, f"reset is one of {', '.join(MODES)}, not {value!r}")
            policy = replace(policy, mode=value)
        elif name == "atHour":
            if type(value) is not int or not 0 <= value <= 23:
                raise PolicyError(name, f"atHour is a whole hour, 0-23, not {value!r}")
            policy = replace(policy, at_hour=value)
        elif name == "idleMinutes":
            if type(value) not in (int, float) or not 0 <= value < 1e9:
                raise PolicyError(name, f"idleMinutes is a number of minutes >= 0, not {value!r}")
            policy = replace(policy, idle_minutes=float(value))
        else:
            policy = replace(policy, carry=_carry(policy.carry, value))
    return policy


def _carry(carry: Carry, value: Any) -> Carry:
    if not isinstance(value, dict):
        raise PolicyError("carry", "carry is a table of model, permissions, todos = true|false")
    for name, flag in value.items():
        if name not in CARRIED:
            raise PolicyError(f"carry.{name}", f"carry knows {', '.join(CARRIED)}, not {name!r}")
        if flag is None:
            continue
        if type(flag) is not bool:
            raise PolicyError(f"carry.{name}", f"carry.{name} is true or false, not {flag!r}")
        carry = replace(carry, **{name: flag})
    return carry


def day_start(now: datetime, at_hour: int, zone: tzinfo) -> datetime:
    """The most recent `at_hour` o'clock in `zone` at or before `now` (aware, in UTC).

    A wall time the clock skips (spring forward) is read with the offset before the gap,
    which lands on the gap's end; one it passes twice (fall back) is its first pass."""
    local = now.astimezone(zone)
    for back in (0, 1, 2):  # at most a day back (two, should a zone skip a whole day)
        day = (local - timedelta(days=back)).date()
        start = datetime(day.year, day.month, day.day, at_hour, tzinfo=zone).astimezone(UTC)
        if start <= now:
            return start
    raise AssertionError("a day has begun in the last three")  # pragma: no cover


def evaluate(policy: Policy, last_activity: datetime, now: datetime, zone: tzinfo) -> Decision:
    """Whether a message at `now` continues a thread last active at `last_activity` (both
    aware), under `policy`, `atHour` being local to `zone`."""
    stale: list[tuple[datetime, int, Literal["daily", "idle"]]] = []
    if policy.mode in ("daily", "both"):
        start = day_start(now, policy.at_hour, zone)
        if last_activity < start:
            stale.append((start, 0, "daily"))
    if policy.mode in ("idle", "both") and policy.idle_minutes > 0:
        limit = last_activity + timedelta(minutes=policy.idle_minutes)
        if now > limit:
            stale.append((limit, 1, "idle"))
    if not stale:
        return CONTINUE
    at, _, why = min(stale)
    return Decision(why, at)
